#pragma once
/*
 * space-gw's audit queue: one record per decision (gw-proto.h lists the
 * fields), waiting to be sent to space-node in batches.
 *
 * Bounded (style.md R18): at most `max` records wait; when the node is gone
 * or slow the oldest are dropped and counted, and the next batch starts with
 * a {"reason":"audit-dropped","count":N} record, so the loss is visible in
 * the log it would have been part of. Records are kept serialised, so a
 * batch is cut to fit one control datagram (GW_PROTO_MSG_MAX) exactly.
 *
 * Pure (no I/O): control.c takes batches and commits them once sent.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "basic/strbuf.h"

struct audit;

/* max: records kept (0 = GW_PROTO_AUDIT_QUEUE_MAX). */
int audit_new(size_t max, struct audit **ret);
struct audit *audit_free(struct audit *a);

/*
 * A new record {"sandbox": sandbox, "time": now, "proto": proto} (sandbox
 * may be NULL) for the caller to fill with json_object_set_new() and hand
 * to audit_push(). NULL on OOM.
 */
json_t *audit_record_new(const char *sandbox, const char *proto);

/*
 * Queues rec (stolen, also on failure). Returns 0, or -ENOMEM (the record
 * is then counted as dropped).
 */
int audit_push(struct audit *a, json_t *rec);

size_t audit_pending(const struct audit *a);
uint64_t audit_dropped_total(const struct audit *a);

/*
 * Writes {"type":"audit","records":[...]} with the oldest pending records
 * (the drop record first when some were dropped), at most max_records (the
 * drop record included) and
 * at most max_bytes of output, into out (reset first). Returns the number
 * of queued records it holds (the drop record not counted), 0 when nothing
 * is pending (out empty), or -ENOMEM. Nothing leaves the queue until
 * audit_commit().
 */
int audit_batch(struct audit *a, size_t max_records, size_t max_bytes, struct strbuf *out);

/* The batch last built was sent: drops its n records (and the drop count it carried). */
void audit_commit(struct audit *a, size_t n);
