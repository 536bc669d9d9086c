/* Auto-resume on ingress traffic (auto-resume.h). */
#include "api/auto-resume.h"

#include <errno.h>

#include "api/controller.h"
#include "api/operation.h"
#include "basic/log.h"

int auto_resume_wake(struct manager *m, const char *sandbox_id)
{
    enum sandbox_state state = _SANDBOX_STATE_INVALID;
    char op[33];
    int r;

    /* Restore first (E2B's pause is space's suspend); a natively paused one resumes. */
    r = controller_request(m, OPERATION_KIND_RESTORE, sandbox_id, op, &state);
    if (r == -EBUSY && state == SANDBOX_PAUSED) {
        r = controller_request(m, OPERATION_KIND_RESUME, sandbox_id, op, &state);
    }
    if (r == -EBUSY) {
        return 0; /* under way (restoring, resuming, or another operation first) */
    }
    if (r < 0) {
        return r;
    }
    log_sandbox_info(sandbox_id, "traffic wakes the sandbox (auto-resume)");
    controller_kick(m);
    return 0;
}
