#pragma once
/*
 * The control socket server (gw-proto.h is the protocol, control-msg.h the
 * codec): AF_UNIX SOCK_SEQPACKET, mode 0600, peers checked by SO_PEERCRED
 * (root or our own user). At most CONTROL_SESSIONS_MAX sessions; replies
 * queue per session (bounded: a peer that stops reading is dropped). Audit
 * batches go to the newest session that said hello, every
 * GW_PROTO_AUDIT_FLUSH_MS while records are pending.
 */
struct gw;
struct control;

#define CONTROL_SESSIONS_MAX 4
#define CONTROL_OUT_MAX 1024 /* queued datagrams per session */
#define CONTROL_READ_BATCH 32

/* Creates the socket at path (a stale one is replaced) and listens. */
int control_new(struct gw *gw, const char *path, struct control **ret);

/* Records are waiting: make sure a flush is scheduled. */
void control_audit_pending(struct control *c);

/* Closes every session and unlinks the socket. NULL-safe. */
struct control *control_free(struct control *c);
