/*
 * libFuzzer target for the guest output death.c reads (style.md R18): the serial console's
 * tail is written by the guest, hostile. The input is that tail (any bytes, NULs too),
 * searched for a panic and classified with every kind of wait status; it is also read as a
 * cgroup counter file. Checked: the message is always a NUL-terminated, printable string
 * within its buffer. Build with -Dfuzzers=true and clang.
 */
#include <assert.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "node/death.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_printable(const char *msg, size_t n)
{
    size_t len = strnlen(msg, n);
    assert(len < n);
    for (size_t i = 0; i < len; i++) {
        assert(msg[i] >= 0x20 && msg[i] < 0x7f);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char msg[DEATH_MESSAGE_MAX], small[8];
    static const int statuses[] = { 0, 1 << 8, 9, 11, 0x7f };

    if (death_console_panic((const char *)data, size, small, sizeof(small))) {
        check_printable(small, sizeof(small));
    }
    for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
        struct death_evidence e = { .status_known = i > 0,
                                    .wait_status = statuses[i],
                                    .console = (const char *)data,
                                    .console_len = size };
        enum death_reason r = death_classify(&e, msg, sizeof(msg));
        assert(r == DEATH_PANIC || r == DEATH_SHUTDOWN || r == DEATH_VMM_CRASHED);
        check_printable(msg, sizeof(msg));
    }
    char *text = malloc(size + 1);
    if (text) {
        memcpy(text, data, size);
        text[size] = '\0';
        uint64_t v;
        (void)death_parse_oom_kills(text, &v);
        free(text);
    }
    return 0;
}
