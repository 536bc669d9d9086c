/*
 * libFuzzer target for what space-node reads from QEMU's QMP socket
 * (style.md R18): QEMU runs the guest, so its replies are hostile input in
 * principle. The input is the byte stream a QMP server sends, delivered in
 * pieces of varying size as read(2) would; it is split into lines and parsed
 * by qmp_take_message(), then read the way qmp_open() and qmp_execute() do:
 * a greeting first, then for each command the events before its reply.
 * Checked: the line buffer stays within QMP_MAX_LINE, every message is an
 * object, and every reply is classified. Build with -Dfuzzers=true and clang.
 */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "node/qmp.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * jansson seeds its hash function at random; the order in which it compares
 * keys then differs per run, libFuzzer learns from those comparisons, and one
 * -seed would not give one sequence of inputs (tools/fuzz.sh).
 */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    json_object_seed(1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct strbuf in;
    bool greeted = false;
    size_t off = 0;

    strbuf_init(&in, QMP_MAX_LINE);
    while (off < size) {
        size_t piece = MIN(size - off, (size_t)1 + (uint8_t)data[off] % 61);
        if (strbuf_append(&in, data + off, piece) < 0) {
            /* qmp_read() gives up on the connection: -EPROTO. */
            assert(in.len + piece > QMP_MAX_LINE);
            break;
        }
        off += piece;
        for (;;) {
            json_t *msg = NULL, *ret = NULL;
            size_t before = in.len;
            int r = qmp_take_message(&in, &msg);
            if (r == 0) {
                assert(in.len == before && !memchr(in.buf, '\n', in.len));
                break;
            }
            assert(in.len < before);
            if (r < 0) {
                assert(r == -EPROTO && !msg);
                continue;
            }
            assert(r == 1 && json_is_object(msg));
            if (!greeted) {
                greeted = true;
                (void)json_object_get(msg, "QMP");
                json_decref(msg);
                continue;
            }
            r = qmp_reply_parse(msg, (before & 1) ? &ret : NULL);
            assert(r == 0 || r == 1 || r == -EIO);
            if (r == 0 && (before & 1)) {
                assert(ret);
            } else {
                assert(!ret);
            }
            json_decref(ret);
            json_decref(msg);
        }
    }
    strbuf_release(&in);
    return 0;
}
