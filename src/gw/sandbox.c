/*
 * The sandbox table (sandbox.h has the contract): a list, looked up by
 * instance id once per control message (a node runs at most a few hundred
 * instances), never on the data path (each socket's callback carries its
 * sandbox).
 */
#include "gw/sandbox.h"

#include <errno.h>

#include "basic/fd-util.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "gw/audit.h"
#include "gw/control.h"
#include "gw/dns-proxy.h"
#include "gw/gateway.h"
#include "gw/inject.h"
#include "gw/resolved.h"

struct sandbox *sandbox_find(struct gw *gw, const char *iid)
{
    for (struct sandbox *sb = gw->sandboxes; sb; sb = sb->next) {
        if (strcmp(sb->iid, iid) == 0) {
            return sb;
        }
    }
    return NULL;
}

static void sandbox_free(struct sandbox *sb)
{
    struct gw *gw = sb->gw;

    if (sb->prev) {
        sb->prev->next = sb->next;
    } else {
        gw->sandboxes = sb->next;
    }
    if (sb->next) {
        sb->next->prev = sb->prev;
    }
    gw->n_sandboxes--;
    dns_proxy_free(sb->dns);
    gateway_free(sb->gateway);
    resolved_free(sb->resolved);
    inject_free(sb->inject);
    policy_free(sb->policy);
    free(sb);
}

void sandbox_maybe_free(struct sandbox *sb)
{
    if (sb->dns || gateway_listening(sb->gateway) || gateway_conns(sb->gateway) > 0) {
        return;
    }
    if (sb->orphaned && now_monotonic() - sb->orphaned < SANDBOX_ORPHAN_USEC) {
        return;
    }
    sandbox_free(sb);
}

void sandbox_sweep(struct gw *gw)
{
    struct sandbox *sb = gw->sandboxes, *next;

    for (; sb; sb = next) {
        next = sb->next;
        if (sb->orphaned) {
            sandbox_maybe_free(sb);
        }
    }
}

static int sandbox_new(struct gw *gw, const char *iid, const char *id, struct sandbox **ret)
{
    struct sandbox *sb;
    int r;

    if (gw->n_sandboxes >= gw->limits.max_sandboxes) {
        return -EUSERS;
    }
    sb = calloc(1, sizeof(*sb));
    if (!sb) {
        return -ENOMEM;
    }
    sb->gw = gw;
    snprintf(sb->iid, sizeof(sb->iid), "%s", iid);
    snprintf(sb->id, sizeof(sb->id), "%s", id);
    r = resolved_new(0, &sb->resolved);
    if (r >= 0) {
        r = gateway_new(sb, &sb->gateway);
    }
    if (r < 0) {
        gateway_free(sb->gateway);
        resolved_free(sb->resolved);
        free(sb);
        return r;
    }
    sb->next = gw->sandboxes;
    if (sb->next) {
        sb->next->prev = sb;
    }
    gw->sandboxes = sb;
    gw->n_sandboxes++;
    *ret = sb;
    return 0;
}

/* Closes sb's descriptors and, when all, its connections; frees it once nothing is left. */
static void sandbox_close(struct sandbox *sb, bool all)
{
    sb->dns = dns_proxy_free(sb->dns);
    if (all) {
        gateway_close_all(sb->gateway);
        sb->inject = inject_free(sb->inject); /* no request of it goes out any more */
    } else {
        gateway_stop_listening(sb->gateway);
    }
    sandbox_maybe_free(sb);
}

int sandbox_attach(struct gw *gw, const char *iid, const char *sandbox_id, struct policy **policy,
                   int dns_fd, int tcp_fd, char *err)
{
    struct sandbox *sb = sandbox_find(gw, iid);
    struct inject *inj = NULL;
    int r;

    /* The secrets first: a policy that cannot be applied whole is not applied at all. */
    r = inject_new(gw->secrets_key, *policy, &inj, err, CONTROL_ERROR_MAX);
    if (r < 0) {
        close_safe(dns_fd);
        close_safe(tcp_fd);
        if (r == -ENOMEM) {
            snprintf(err, CONTROL_ERROR_MAX, "out of memory");
        }
        return r;
    }
    if (sb && strcmp(sb->id, sandbox_id) != 0) {
        sb->orphaned = 0;
        /* The instance now serves another sandbox: nothing of the old one may carry over
         * (its attribution least of all). */
        sandbox_close(sb, true);
        sb = sandbox_find(gw, iid);
        if (sb) {
            /* Its connections end in a later loop turn: rename it out of the way. */
            snprintf(sb->iid, sizeof(sb->iid), "-");
            sb = NULL;
        }
    }
    if (!sb) {
        r = sandbox_new(gw, iid, sandbox_id, &sb);
        if (r < 0) {
            inject_free(inj);
            close_safe(dns_fd);
            close_safe(tcp_fd);
            snprintf(err, CONTROL_ERROR_MAX, "%s",
                     r == -EUSERS ? "too many sandboxes attached" : "out of memory");
            return r;
        }
    }
    sb->dns = dns_proxy_free(sb->dns);
    r = dns_proxy_new(sb, dns_fd, &sb->dns);
    if (r < 0) {
        close_safe(tcp_fd);
        snprintf(err, CONTROL_ERROR_MAX, "cannot start the DNS proxy: %s", strerror(-r));
        inject_free(inj);
        sandbox_close(sb, true);
        return r;
    }
    r = gateway_listen(sb->gateway, tcp_fd);
    if (r < 0) {
        snprintf(err, CONTROL_ERROR_MAX, "cannot accept on the gateway socket: %s", strerror(-r));
        inject_free(inj);
        sandbox_close(sb, true);
        return r;
    }
    policy_free(sb->policy);
    sb->policy = TAKE_PTR(*policy);
    inject_free(sb->inject); /* wiped */
    sb->inject = inj;
    sb->orphaned = 0;
    log_sandbox_info(sb->id, "attached instance %s", sb->iid);
    return 0;
}

int sandbox_set_policy(struct gw *gw, const char *iid, struct policy **policy, char *err)
{
    struct sandbox *sb = sandbox_find(gw, iid);
    struct inject *inj = NULL;
    int r;

    if (!sb || !sb->dns) {
        snprintf(err, CONTROL_ERROR_MAX, "instance not attached");
        return -ENOENT;
    }
    r = inject_new(gw->secrets_key, *policy, &inj, err, CONTROL_ERROR_MAX);
    if (r < 0) {
        if (r == -ENOMEM) {
            snprintf(err, CONTROL_ERROR_MAX, "out of memory");
        }
        log_sandbox_warning(sb->id, "policy refused, the old one stays: %s", err);
        return r;
    }
    policy_free(sb->policy);
    sb->policy = TAKE_PTR(*policy);
    inject_free(sb->inject); /* wiped: a rotated value is gone from memory here */
    sb->inject = inj;
    log_sandbox_info(sb->id, "policy replaced");
    return 0;
}

int sandbox_detach(struct gw *gw, const char *iid)
{
    struct sandbox *sb = sandbox_find(gw, iid);

    if (!sb) {
        return -ENOENT;
    }
    log_sandbox_info(sb->id, "detached instance %s", sb->iid);
    sb->orphaned = 0;
    sandbox_close(sb, true);
    /* A sandbox with connections still closing keeps its entry a moment: not by this iid. */
    sb = sandbox_find(gw, iid);
    if (sb) {
        snprintf(sb->iid, sizeof(sb->iid), "-");
    }
    return 0;
}

void sandbox_release_all_fds(struct gw *gw)
{
    struct sandbox *sb = gw->sandboxes, *next;

    for (; sb; sb = next) {
        next = sb->next;
        if (sb->dns || !sb->orphaned) {
            sb->orphaned = now_monotonic();
        }
        sandbox_close(sb, false);
    }
}

void sandbox_free_all(struct gw *gw)
{
    while (gw->sandboxes) {
        sandbox_free(gw->sandboxes);
    }
}

void gw_audit(struct gw *gw, json_t *rec)
{
    (void)audit_push(gw->audit, rec);
    control_audit_pending(gw->control);
}
