#pragma once
/*
 * Auto-resume (E2B lifecycle.autoResume, architecture.md "A sandbox's life"): traffic
 * through the ingress to a paused or suspended sandbox whose row says auto_resume wakes
 * it. The ingress holds the request (ingress.h, -EINPROGRESS from its lookup: bounded per
 * sandbox and in time) and looks again until the sandbox runs.
 */
struct manager;

/*
 * Requests the operation that brings sandbox_id back (restore from suspended, resume from
 * paused), unless one is under way. Loop thread. 0 when one was requested or already runs,
 * a negative errno when it cannot be woken (not found, killed).
 */
int auto_resume_wake(struct manager *m, const char *sandbox_id);
