/* Rendering of sandbox rows; see sandbox.h. */
#include "api/sandbox.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "api/egress.h"
#include "api/traffic-token.h"
#include "basic/macro.h"

void sandbox_format_time(int64_t usec, char buf[40])
{
    time_t sec = (time_t)(usec / 1000000);
    struct tm tm;
    gmtime_r(&sec, &tm);
    size_t n = strftime(buf, 40, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, 40 - n, ".%06dZ", (int)(usec % 1000000));
}

int sandbox_parse_time(const char *s, int64_t *ret_usec)
{
    struct tm tm = { 0 };
    const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    int64_t frac = 0, scale = 1000000, offset = 0;

    if (!p) {
        return -EINVAL;
    }
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9') {
            if (scale > 1) {
                scale /= 10;
                frac += (*p - '0') * scale;
            }
            p++;
        }
    }
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':') {
        int h = (p[1] - '0') * 10 + (p[2] - '0'), mi = (p[4] - '0') * 10 + (p[5] - '0');
        offset = (int64_t)(h * 3600 + mi * 60) * (*p == '+' ? 1 : -1);
        p += 6;
    } else {
        return -EINVAL;
    }
    if (*p != '\0') {
        return -EINVAL;
    }
    *ret_usec = ((int64_t)timegm(&tm) - offset) * 1000000 + frac;
    return 0;
}

static json_t *json_from_text(const char *text)
{
    json_error_t err;
    json_t *j = text ? json_loads(text, 0, &err) : NULL;
    return j ? j : json_object();
}

/* E2B's trafficAccessToken: a string for a sandbox with private user ports, else null. */
static json_t *traffic_token_json(const struct store_sandbox *sb)
{
    char token[TRAFFIC_TOKEN_LEN + 1];

    if (!sb->private_traffic || traffic_token_derive(sb->envd_access_token, token) < 0) {
        return json_null();
    }
    return json_string(token);
}

json_t *sandbox_to_e2b(const struct store_sandbox *sb, const char *domain)
{
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:n}", "sandboxID", sb->id, "templateID",
                          sb->template_id, "clientID", SANDBOX_CLIENT_ID, "envdVersion",
                          SANDBOX_ENVD_VERSION, "trafficAccessToken");
    if (!j) {
        return NULL;
    }
    json_object_set_new(j, "trafficAccessToken", traffic_token_json(sb));
    if (sb->envd_access_token) {
        json_object_set_new(j, "envdAccessToken", json_string(sb->envd_access_token));
    }
    json_object_set_new(j, "domain", domain ? json_string(domain) : json_null());
    if (sb->alias) {
        json_object_set_new(j, "alias", json_string(sb->alias));
    }
    return j;
}

const char *sandbox_e2b_state(const char *state)
{
    /* E2B knows running and paused: a sandbox on its way to or back from paused (or
     * suspended, which E2B calls paused) reads paused until it runs again. */
    static const char *const paused[] = { "pausing",    "paused",    "resuming",
                                          "suspending", "suspended", "restoring" };
    for (size_t i = 0; state && i < ARRAY_SIZE(paused); i++) {
        if (strcmp(state, paused[i]) == 0) {
            return "paused";
        }
    }
    return state && strcmp(state, SANDBOX_STATE_KILLED) == 0 ? "killed" : "running";
}

json_t *sandbox_to_e2b_detail(const struct store_sandbox *sb, const char *domain)
{
    char started[40], end[40];
    json_t *j;

    sandbox_format_time(sb->created_at, started);
    sandbox_format_time(sb->end_at ? sb->end_at : sb->created_at, end);
    j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:s, s:o}", "sandboxID", sb->id,
                  "templateID", sb->template_id, "clientID", SANDBOX_CLIENT_ID, "startedAt",
                  started, "endAt", end, "envdVersion", SANDBOX_ENVD_VERSION, "cpuCount",
                  (json_int_t)sb->vcpus, "memoryMB", (json_int_t)sb->memory_mb, "diskSizeMB",
                  (json_int_t)sb->disk_mb, "state", sandbox_e2b_state(sb->state), "metadata",
                  json_from_text(sb->metadata_json));
    if (!j) {
        return NULL;
    }
    if (sb->envd_access_token) {
        json_object_set_new(j, "envdAccessToken", json_string(sb->envd_access_token));
    }
    if (sb->alias) {
        json_object_set_new(j, "alias", json_string(sb->alias));
    }
    json_object_set_new(j, "domain", domain ? json_string(domain) : json_null());
    json_object_set_new(j, "lifecycle",
                        json_pack("{s:b, s:s}", "autoResume", sb->auto_resume, "onTimeout",
                                  sb->auto_pause ? "pause" : "kill"));
    return j;
}

/* Why a sandbox died on its own: the node's reason (node death.h) heading its error, as the
 * controller records it ("panic: guest kernel panic: ..."); NULL for any other end. */
static const char *death_reason(const struct store_sandbox *sb)
{
    static const char *const reasons[] = { "oom", "panic", "vmm_crashed", "shutdown" };
    if (!sb->error || strcmp(sb->state, SANDBOX_STATE_KILLED) != 0) {
        return NULL;
    }
    for (size_t i = 0; i < ARRAY_SIZE(reasons); i++) {
        size_t n = strlen(reasons[i]);
        if (strncmp(sb->error, reasons[i], n) == 0 && strncmp(sb->error + n, ": ", 2) == 0) {
            return reasons[i];
        }
    }
    return NULL;
}

json_t *sandbox_to_json(const struct store_sandbox *sb)
{
    char created[40], end[40];

    sandbox_format_time(sb->created_at, created);
    sandbox_format_time(sb->end_at, end);
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:s, s:s, s:o, s:s*}", "id", sb->id,
                          "template", sb->template_id, "state", sb->state, "desired_state",
                          sb->desired_state, "vcpus", (json_int_t)sb->vcpus, "memory_mb",
                          (json_int_t)sb->memory_mb, "disk_mb", (json_int_t)sb->disk_mb,
                          "created_at", created, "end_at", sb->end_at ? end : "", "metadata",
                          json_from_text(sb->metadata_json), "error", sb->error);
    if (j && sb->envd_access_token) {
        json_object_set_new(j, "envd_access_token", json_string(sb->envd_access_token));
    }
    if (j) {
        json_object_set_new(j, "network", egress_native(sb->network_json));
        json_object_set_new(j, "auto_pause", json_boolean(sb->auto_pause));
        /* Its own I/O limits, when it asked for any (0: the node's). */
        const struct {
            const char *key;
            int64_t v;
        } limits[] = { { "net_bps", sb->net_bps },
                       { "disk_bps", sb->disk_bps },
                       { "disk_iops", sb->disk_iops } };
        for (size_t i = 0; i < ARRAY_SIZE(limits); i++) {
            if (limits[i].v > 0) {
                json_object_set_new(j, limits[i].key, json_integer(limits[i].v));
            }
        }
        if (sb->auto_pause) {
            json_object_set_new(j, "auto_pause_memory", json_boolean(!sb->auto_pause_disk));
        }
        const char *reason = death_reason(sb);
        json_object_set_new(j, "reason", reason ? json_string(reason) : json_null());
        /* Paused or suspended: the lifetime it gets back when it runs again (null: none
         * kept, or no end time). */
        json_object_set_new(j, "remaining_s",
                            sb->remaining_us > 0 ? json_integer(sb->remaining_us / 1000000)
                                                 : json_null());
    }
    return j;
}
