#pragma once
/*
 * A bidirectional byte relay between two connected stream sockets, on a
 * libevent loop: what a tunnel does once it is open, and what a proxy does
 * after a protocol switch (101) or a CONNECT.
 *
 *   - splice(2) through a pipe per direction where the kernel can (TCP and
 *     Unix stream sockets), so bytes never enter user space; read()/write()
 *     through a buffer of the same size where it cannot (or when no pipe
 *     can be had).
 *   - Back-pressure: each direction holds at most RELAY_BUFFER bytes (the
 *     pipe or the buffer; RELAY_BULK_BUFFER for a bulk one, below); while
 *     it is full the source is not read. A spliced direction that moved
 *     RELAY_BULK_AFTER bytes gets a pipe of RELAY_BULK_BUFFER when the pipe
 *     limits allow (a bulk transfer: fewer splices and wakeups per MiB).
 *   - Half-close: EOF from one side becomes shutdown(SHUT_WR) on the other
 *     once everything before it is delivered; the relay ends when both
 *     directions have ended, on an error, or after idle_sec without a byte.
 *
 * The relay owns both fds from relay_new() on and closes them in
 * relay_free().
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct relay;

#define RELAY_BUFFER (64u * 1024)        /* per direction: one pipe's default capacity */
#define RELAY_BULK_BUFFER (1024u * 1024) /* ... a bulk one (pipe-max-size by default) */
#define RELAY_BULK_AFTER (1u << 20)      /* bytes a direction moves before it counts as bulk */

enum { RELAY_A, RELAY_B };

/*
 * Called once when the relay has ended: error 0 (both directions closed),
 * -ETIMEDOUT (idle), or a negative errno from a socket. It may call
 * relay_free(r); the relay does not touch itself after calling it.
 */
typedef void (*relay_done_fn)(struct relay *r, int error, void *userdata);

/*
 * Relays between fds a and b (connected, made non-blocking here). idle_sec
 * 0: no idle timeout. Nothing moves before relay_start(). Returns 0,
 * -ENOMEM or -errno; on failure the fds are still the caller's.
 */
int relay_new(struct event_base *base, int a, int b, unsigned idle_sec, relay_done_fn done,
              void *userdata, struct relay **ret);

/*
 * Bytes already read from the other side that must reach side `to` before
 * anything relayed (what a proxy read past a head). Before relay_start().
 */
int relay_push(struct relay *r, int to, const void *data, size_t len);

/* Side `from` has already sent EOF (seen before the relay took over). Before relay_start(). */
void relay_set_eof(struct relay *r, int from);

int relay_start(struct relay *r);

/* Bytes delivered to side `to` so far (pushed bytes included). */
uint64_t relay_bytes(const struct relay *r, int to);

/* True once the relay moves this direction with splice(2). */
bool relay_spliced(const struct relay *r, int to);

/* Stops, closes both fds. NULL-safe; returns NULL. */
struct relay *relay_free(struct relay *r);
