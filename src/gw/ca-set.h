#pragma once
/*
 * src/gw/ca-set.h: the egress CA and its rotation (issue 10 item 4).
 *
 * The gateway holds the current CA (ca.key, ca.crt: src/shared/ca.h) and,
 * during a rotation, the next one (ca-next.key, ca-next.crt, the same
 * permission rules: key 0600 created O_EXCL, certificate 0644). Three
 * phases, each a function of the files alone, so a restarted gateway is in
 * the phase it left:
 *
 *   phase     files                               bundle           signs with
 *   stable    ca.*                                current          current
 *   staged    ca.* + ca-next.*                    current + next   current
 *   switched  ca.* + ca-next.* + ca-phase         current + next   next
 *
 * and three steps between them:
 *
 *   stable   -> staged    [stage:  ca-next.* created]
 *   staged   -> switched  [switch: ca-phase "switched" written atomically]
 *   switched -> stable    [finish: ca-next.key -> ca.key, ca-next.crt ->
 *                          ca.crt (renames: the old CA is gone), ca-phase
 *                          removed; the next CA is the current one]
 *
 * The bundle is what guests trust (the /init caBundle): while both CAs are
 * in it a guest accepts leaves from either, so the operator waits until
 * every guest has the staged bundle before switching. finish then drops
 * the old CA from the bundle: no leaf uses it any more, and a guest still
 * holding both keeps working until it is given the new bundle alone.
 *
 * Restart safety (ca_set_open() repairs what a crash left half-done):
 *   - ca-next.key without ca-next.crt and no ca-phase: a stage that did not
 *     complete (nobody was told of it): the key is removed, stable.
 *   - ca-phase with ca-next.crt but no ca-next.key: a finish cut after its
 *     first rename: the second rename and the phase removal are done now.
 *   - ca-phase with neither: a finish cut after both renames: stable.
 *
 * Repeating the step that led to the current phase (stage when staged,
 * switch when switched) is a no-op that succeeds, so a caller that lost
 * a reply may retry; any other step out of order is refused (-EBUSY) with
 * a message that says which phase it is in and which step comes next.
 *
 * Not thread-safe: one owner (the gateway's loop thread).
 */
#include <stdbool.h>

struct ca;
struct ca_set;

#define CA_NEXT_KEY_FILE "ca-next.key"
#define CA_NEXT_CERT_FILE "ca-next.crt"
#define CA_PHASE_FILE "ca-phase"
#define CA_SET_ERROR_MAX 256
#define CA_FINGERPRINT_LEN 64 /* SHA-256 of the certificate's DER, lowercase hex */

enum ca_phase { CA_PHASE_STABLE, CA_PHASE_STAGED, CA_PHASE_SWITCHED };
enum ca_step { CA_STEP_STAGE, CA_STEP_SWITCH, CA_STEP_FINISH };

const char *ca_phase_str(enum ca_phase p);
/* "stage", "switch", "finish": 0 and *ret, or -EINVAL. */
int ca_step_from_string(const char *s, enum ca_step *ret);

/*
 * Opens (creating when absent: ca_open()) the CA files in dir, repairing
 * what an interrupted step left (above). Returns 0, or a negative errno
 * (logged): -EINVAL for unreadable or mismatched files.
 */
int ca_set_open(const char *dir, struct ca_set **ret);

enum ca_phase ca_set_phase(const struct ca_set *s);
/* The CA leaves are minted with: the current one, or the next when switched. */
struct ca *ca_set_signer(struct ca_set *s);
/* PEM: the current certificate, then the next one when there is one (borrowed, NUL-ended,
 * valid until the next ca_set_step()). */
const char *ca_set_bundle(const struct ca_set *s);
/* The current CA's fingerprint; the next one's, or "" when there is none (borrowed). */
const char *ca_set_current_fingerprint(const struct ca_set *s);
const char *ca_set_next_fingerprint(const struct ca_set *s);

/*
 * Takes step. Returns 1 when it changed the phase (the signer may differ:
 * cached leaves are stale), 0 when it was a repeat that changed nothing,
 * -EBUSY out of order, or another negative errno when the files could not
 * be written (the phase is then unchanged, or repaired by the next open).
 * err (CA_SET_ERROR_MAX bytes) says why on failure.
 */
int ca_set_step(struct ca_set *s, enum ca_step step, char *err);

/* NULL-safe; returns NULL. */
struct ca_set *ca_set_free(struct ca_set *s);
