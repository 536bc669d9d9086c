/*
 * /init is how the host configures the sandbox after boot and after every
 * resume: it merges sandbox-level env vars, sets the access token, the
 * default user and workdir, and (only when we are the guest's init) the
 * clock, which a restored snapshot has wrong. Once a token is set, /init
 * changes nothing (token, env, user, workdir, clock) unless the caller
 * proves the current token, in the body's accessToken (what the host
 * sends, so re-sending /init after a resume is idempotent) or in
 * X-Access-Token (which may then set a new one): a guest process must not
 * give itself root as the default user or poison every later command's
 * environment.
 *
 * E2B_* variables are also written to <e2b_dir>/.E2B_<NAME> files
 * (/run/e2b in the guest), where E2B's tooling reads them.
 */
#include "agent/state.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "agent/agent.h"
#include "agent/auth.h"
#include "agent/identity.h"
#include "agent/limits.h"
#include "agent/reply.h"
#include "agent/trust.h"
#include "agent/user.h"
#include "basic/fileio.h"
#include "basic/log.h"
#include "basic/strbuf.h"
#include "shared/json-util.h"

int state_parse_rfc3339(const char *s, struct timespec *ret)
{
    struct tm tm = { 0 };
    const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    long nsec = 0, off = 0;
    time_t t;

    if (!p) {
        return -EINVAL;
    }
    if (*p == '.') {
        long scale = 100000000;
        p++;
        if (!isdigit((unsigned char)*p)) {
            return -EINVAL;
        }
        for (; isdigit((unsigned char)*p); p++) {
            nsec += (*p - '0') * scale;
            scale /= 10;
        }
    }
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if ((*p == '+' || *p == '-') && isdigit((unsigned char)p[1]) &&
               isdigit((unsigned char)p[2]) && p[3] == ':' && isdigit((unsigned char)p[4]) &&
               isdigit((unsigned char)p[5])) {
        off = ((p[1] - '0') * 10 + (p[2] - '0')) * 3600 + ((p[4] - '0') * 10 + (p[5] - '0')) * 60;
        if (*p == '-') {
            off = -off;
        }
        p += 6;
    } else {
        return -EINVAL;
    }
    if (*p) {
        return -EINVAL;
    }
    t = timegm(&tm);
    if (t == (time_t)-1) {
        return -EINVAL;
    }
    ret->tv_sec = t - off;
    ret->tv_nsec = nsec;
    return 0;
}

static bool e2b_file_name_ok(const char *name)
{
    if (strncmp(name, "E2B_", 4) != 0 || strlen(name) > 64) {
        return false;
    }
    for (const char *c = name; *c; c++) {
        if (!isupper((unsigned char)*c) && !isdigit((unsigned char)*c) && *c != '_') {
            return false;
        }
    }
    return true;
}

static void write_e2b_files(struct agent *a)
{
    const char *k;
    json_t *v;

    if (!a->e2b_dir) {
        return;
    }
    (void)mkdir_p(a->e2b_dir, 0755);
    json_object_foreach (a->env, k, v) {
        struct strbuf path = STRBUF_INIT;
        int r;
        if (!e2b_file_name_ok(k) || !json_is_string(v)) {
            continue;
        }
        r = strbuf_appendf(&path, "%s/.%s", a->e2b_dir, k);
        if (r >= 0) {
            r = write_file_atomic_nosync(path.buf, json_string_value(v), json_string_length(v));
        }
        if (r >= 0) {
            (void)chmod(path.buf, 0644);
        } else {
            log_warning_errno(r, "cannot write '%s', ignoring: %m", path.buf ? path.buf : k);
        }
        strbuf_release(&path);
    }
}

static int set_string(char **field, const char *value)
{
    char *copy = value ? strdup(value) : NULL;

    if (value && !copy) {
        return -ENOMEM;
    }
    free(*field);
    *field = copy;
    return 0;
}

/*
 * What /init set must survive a restart of the server by PID 1: otherwise a
 * crashed server would come back without its access token (open to anyone
 * who reaches the port) and running as root by default. It lives on /run
 * (tmpfs, root-only), so it lasts exactly as long as this boot, and an fsync
 * there would buy nothing (write_file_atomic_nosync(), as for /run/e2b).
 */
#define STATE_DIR "/run/space-agent"
#define STATE_FILE STATE_DIR "/init-state.json"

static void state_save(struct agent *a)
{
    json_t *j;
    char *text;

    if (!a->is_init) {
        return;
    }
    j = json_pack("{s:s?, s:s?, s:s?, s:O}", "accessToken", a->access_token, "defaultUser",
                  a->default_user, "defaultWorkdir", a->default_workdir, "envVars", a->env);
    text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!text) {
        log_warning("cannot serialise /init state, ignoring");
        return;
    }
    (void)mkdir(STATE_DIR, 0700);
    int r = write_file_atomic_nosync(STATE_FILE, text, strlen(text));
    if (r < 0) {
        log_warning_errno(r, "cannot save /init state to '%s', ignoring: %m", STATE_FILE);
    }
    free(text);
}

int state_restore(struct agent *a)
{
    const char *token = NULL, *user = NULL, *workdir = NULL;
    json_t *j = NULL, *envs = NULL;
    char *text = NULL;
    json_error_t err;
    int r;

    if (!a->is_init) {
        return 0;
    }
    r = read_file(STATE_FILE, 1 << 20, &text, NULL);
    if (r < 0) {
        return r == -ENOENT ? 0 : r;
    }
    j = json_loads(text, 0, &err);
    free(text);
    if (!json_is_object(j)) {
        json_decref(j);
        return -EINVAL;
    }
    (void)json_util_get_string(j, "accessToken", NULL, &token);
    (void)json_util_get_string(j, "defaultUser", NULL, &user);
    (void)json_util_get_string(j, "defaultWorkdir", NULL, &workdir);
    (void)json_util_get_object(j, "envVars", NULL, &envs);
    r = 0;
    if ((token && set_string(&a->access_token, token) < 0) ||
        (user && set_string(&a->default_user, user) < 0) ||
        (workdir && set_string(&a->default_workdir, workdir) < 0) ||
        (envs && json_object_update(a->env, envs) < 0)) {
        r = -ENOMEM;
    }
    json_decref(j);
    return r;
}

void state_http_init(struct agent *a, struct evhttp_request *req)
{
    struct evbuffer *body = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(body);
    const char *token = NULL, *user = NULL, *workdir = NULL, *ts = NULL;
    json_t *msg = NULL, *envs = NULL, *ca = NULL;
    const char *ca_why = NULL, *id_why = NULL;
    struct identity id = { 0 };
    struct timespec when;
    char *clean = NULL;
    json_error_t err;
    const char *k;
    json_t *v;

    if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "POST");
        reply_error(req, 405, "method not allowed");
        return;
    }
    if (len > AGENT_MAX_HTTP_BODY) {
        reply_error(req, 413, "request body too large");
        return;
    }
    if (len > 0) {
        msg = json_loadb((const char *)evbuffer_pullup(body, -1), len, 0, &err);
        if (!json_is_object(msg)) {
            json_decref(msg);
            reply_error(req, 400, "invalid JSON body");
            return;
        }
    }
    if (msg && (json_util_get_string(msg, "accessToken", NULL, &token) == -EINVAL ||
                json_util_get_string(msg, "defaultUser", NULL, &user) == -EINVAL ||
                json_util_get_string(msg, "defaultWorkdir", NULL, &workdir) == -EINVAL ||
                json_util_get_string(msg, "timestamp", NULL, &ts) == -EINVAL ||
                json_util_get_object(msg, "envVars", NULL, &envs) == -EINVAL)) {
        reply_error(req, 400, "invalid /init field types");
        goto out;
    }
    /* The egress CA (trust.h): checked in full before anything is applied. */
    ca = msg ? json_object_get(msg, "caBundle") : NULL;
    if (ca && !json_is_string(ca)) {
        reply_error(req, 400, "caBundle must be a string");
        goto out;
    }
    if (ca && trust_check_bundle(json_string_value(ca), json_string_length(ca), &ca_why) < 0) {
        reply_error(req, 400, "%s", ca_why);
        goto out;
    }
    if (ca && !a->trust_root) {
        reply_error(req, 400, "caBundle needs a trust store (the guest's, or --trust-root)");
        goto out;
    }
    if (envs) {
        json_object_foreach (envs, k, v) {
            if (!json_is_string(v) || !*k || strchr(k, '=')) {
                reply_error(req, 400, "envVars must map names to strings");
                goto out;
            }
        }
        if (json_object_size(a->env) + json_object_size(envs) > AGENT_MAX_ENVS) {
            reply_error(req, 400, "too many envVars");
            goto out;
        }
    }
    if (ts && state_parse_rfc3339(ts, &when) < 0) {
        reply_error(req, 400, "invalid timestamp '%s'", ts);
        goto out;
    }
    if (msg && identity_parse(msg, &id, &id_why) < 0) {
        reply_error(req, 400, "%s", id_why);
        goto out;
    }
    if (workdir && *workdir) {
        if (workdir[0] != '/' || path_clean(workdir, &clean) < 0) {
            reply_error(req, 400, "defaultWorkdir must be an absolute path");
            goto out;
        }
    }
    /*
     * Once a token is set, any process in the guest can reach us: only a
     * caller that proves the current token may change anything (envd's
     * validateInitAccessToken: the body's accessToken; we also take the
     * X-Access-Token header, which lets that caller rotate the token).
     */
    if (a->access_token && !(token && auth_secret_equal(token, a->access_token)) &&
        !auth_token_ok(a, req)) {
        bool tried =
            token || evhttp_find_header(evhttp_request_get_input_headers(req), "X-Access-Token");
        reply_error(req, 401, "%s",
                    tried ? "access token validation failed" : "access token reset not authorized");
        goto out;
    }

    /* Everything is valid: apply. The trust store first: it is the one step that can fail. */
    if (ca) {
        int r = trust_install(a->trust_root, json_string_value(ca), json_string_length(ca));
        if (r < 0) {
            log_error_errno(r, "cannot install the caBundle: %m");
            reply_error(req, 500, "cannot install the caBundle: %s", strerror(-r));
            goto out;
        }
    }
    if (envs) {
        json_object_foreach (envs, k, v) {
            json_object_set(a->env, k, v);
        }
        write_e2b_files(a);
    }
    /* After envVars, so that the user's own values for these names win. */
    if (ca && trust_env_defaults(a->trust_root, a->env) < 0) {
        reply_error(req, 500, "out of memory");
        goto out;
    }
    if (token && set_string(&a->access_token, *token ? token : NULL) < 0) {
        reply_error(req, 500, "out of memory");
        goto out;
    }
    if (user && *user && set_string(&a->default_user, user) < 0) {
        reply_error(req, 500, "out of memory");
        goto out;
    }
    if (workdir) {
        free(a->default_workdir);
        a->default_workdir = TAKE_PTR(clean);
    }
    if (ts && a->is_init) {
        if (clock_settime(CLOCK_REALTIME, &when) < 0) {
            log_warning_errno(-errno, "cannot set the clock from /init, ignoring: %m");
        }
    }
    /* Guest init only: on a host (tests) these would change the host. */
    if (a->is_init && identity_apply(&id) < 0) {
        reply_error(req, 500, "cannot reseed the guest's random number generator");
        goto out;
    }
    state_save(a);
    evhttp_add_header(evhttp_request_get_output_headers(req), "X-Envd-Version", AGENT_ENVD_VERSION);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control", "no-store");
    reply_empty(req, 204);
out:
    identity_release(&id);
    free(clean);
    json_decref(msg);
}

void state_http_envs(struct agent *a, struct evhttp_request *req)
{
    if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
        reply_error(req, 405, "method not allowed");
        return;
    }
    reply_json(req, 200, json_deep_copy(a->env));
}

static uint64_t meminfo_value(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    unsigned long long kib = 0;

    if (p && sscanf(p + strlen(key), " %llu", &kib) == 1) {
        return (uint64_t)kib * 1024;
    }
    return 0;
}

static double round2(double v)
{
    return (double)(long long)(v * 100 + 0.5) / 100;
}

void state_http_metrics(struct agent *a, struct evhttp_request *req)
{
    unsigned long long f[10] = { 0 };
    uint64_t total = 0, idle, mem_total, mem_avail, cached, used;
    double cpu_pct = 0;
    char *stat = NULL, *mem = NULL;
    struct statfs sfs;
    uint64_t disk_total = 0, disk_used = 0;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

    if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
        reply_error(req, 405, "method not allowed");
        return;
    }
    if (read_file("/proc/stat", 1 << 20, &stat, NULL) >= 0 &&
        sscanf(stat, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &f[0], &f[1], &f[2],
               &f[3], &f[4], &f[5], &f[6], &f[7], &f[8], &f[9]) >= 4) {
        /* guest and guest_nice (f[8], f[9]) are already counted in user and nice. */
        for (int i = 0; i < 8; i++) {
            total += f[i];
        }
        idle = f[3] + f[4];
        if (total > a->cpu_prev_total) {
            uint64_t dt = total - a->cpu_prev_total;
            uint64_t di = idle >= a->cpu_prev_idle ? idle - a->cpu_prev_idle : 0;
            cpu_pct = round2(100.0 * (double)(dt - MIN(di, dt)) / (double)dt);
        }
        a->cpu_prev_total = total;
        a->cpu_prev_idle = idle;
    }
    if (read_file("/proc/meminfo", 1 << 20, &mem, NULL) < 0) {
        mem = NULL;
    }
    mem_total = mem ? meminfo_value(mem, "MemTotal:") : 0;
    mem_avail = mem ? meminfo_value(mem, "MemAvailable:") : 0;
    cached = mem ? meminfo_value(mem, "Cached:") : 0;
    used = mem_total > mem_avail ? mem_total - mem_avail : 0;
    if (statfs("/", &sfs) == 0) {
        disk_total = (uint64_t)sfs.f_blocks * (uint64_t)sfs.f_frsize;
        disk_used = (uint64_t)(sfs.f_blocks - sfs.f_bfree) * (uint64_t)sfs.f_frsize;
    }
    reply_json(req, 200,
               json_pack("{s:I, s:i, s:f, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "ts",
                         (json_int_t)time(NULL), "cpu_count", (int)(ncpu > 0 ? ncpu : 1),
                         "cpu_used_pct", cpu_pct, "mem_total", (json_int_t)mem_total, "mem_used",
                         (json_int_t)used, "mem_cache", (json_int_t)cached, "mem_total_mib",
                         (json_int_t)(mem_total >> 20), "mem_used_mib", (json_int_t)(used >> 20),
                         "disk_used", (json_int_t)disk_used, "disk_total", (json_int_t)disk_total));
    free(stat);
    free(mem);
}
