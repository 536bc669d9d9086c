#pragma once
/*
 * The node's ring of egress audit records (gw-proto.h "audit"), between
 * space-gw, which sends them, and space-api, which pulls them with
 * GET /v1/egress-audit (CONTRACTS.md) into its store. Records are kept as
 * gw_msg_clean_record() left them, "secret" (injected secrets' names) too.
 *
 * Every record gets the next sequence number (1, 2, ...) of this process;
 * the epoch is a random token per process, so a puller that sees a new one
 * knows the numbers started over (start again from after=0). The ring holds
 * at most EGRESS_AUDIT_MAX records and EGRESS_AUDIT_MAX_BYTES of text; the
 * oldest go first. A puller whose cursor fell behind what was dropped gets
 * one synthetic {"reason":"audit-dropped","count":N} record in their place,
 * numbered like the last of them, so the loss is visible and counted
 * exactly, whatever the puller's pace. Loop thread only.
 */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define EGRESS_AUDIT_MAX 65536u
#define EGRESS_AUDIT_MAX_BYTES (64u << 20)
#define EGRESS_AUDIT_LIMIT_DEFAULT 1000u
#define EGRESS_AUDIT_LIMIT_MAX 10000u

struct egress_audit;

/* capacity: records at most (EGRESS_AUDIT_MAX in the node; tests use less). */
int egress_audit_new(size_t capacity, size_t max_bytes, struct egress_audit **ret);
struct egress_audit *egress_audit_free(struct egress_audit *a);

/* The epoch: 32 hex characters. */
const char *egress_audit_epoch(const struct egress_audit *a);

/* Appends a copy of record (a JSON object; "seq" in it is replaced). 0 or -errno. */
int egress_audit_push(struct egress_audit *a, const json_t *record);

/* Sequence number of the newest record, 0 while none. */
uint64_t egress_audit_last_seq(const struct egress_audit *a);
/* Records dropped from the ring so far (oldest first, to make room). */
uint64_t egress_audit_dropped(const struct egress_audit *a);

/*
 * The reply to GET /v1/egress-audit?after=..&limit=..:
 * {"epoch": E, "records": [up to limit records with seq > after, oldest first,
 * each with "seq"], "next": the seq of the last one returned (after, or the
 * newest seq when after is beyond it, when none is)}. NULL on OOM.
 */
json_t *egress_audit_read(const struct egress_audit *a, uint64_t after, size_t limit);
