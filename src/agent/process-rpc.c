/*
 * process.Process handlers: turn proto3 JSON requests into calls on
 * process.c and its results into Connect responses and error codes. The
 * codes follow envd where the SDKs depend on them: not_found for an unknown
 * pid (kill() returns false), invalid_argument for a missing cwd,
 * unauthenticated for an unknown user, unimplemented for signals other
 * than SIGKILL/SIGTERM.
 */
#include "agent/process-rpc.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent/agent.h"
#include "agent/auth.h"
#include "agent/limits.h"
#include "agent/process.h"
#include "agent/launch.h"
#include "agent/user.h"
#include "shared/json-util.h"

/* Validates ProcessConfig.args: an array of strings. Returns the count or -EINVAL. */
static long check_args(const json_t *args)
{
    size_t i;
    json_t *v;

    if (!args) {
        return 0;
    }
    if (json_array_size(args) > AGENT_MAX_ARGS) {
        return -E2BIG;
    }
    json_array_foreach (args, i, v) {
        if (!json_is_string(v)) {
            return -EINVAL;
        }
    }
    return (long)json_array_size(args);
}

static int check_envs(const json_t *envs)
{
    const char *k;
    json_t *v;

    if (!envs) {
        return 0;
    }
    if (json_object_size(envs) > AGENT_MAX_ENVS) {
        return -E2BIG;
    }
    json_object_foreach ((json_t *)envs, k, v) {
        if (!json_is_string(v) || !*k || strchr(k, '=')) {
            return -EINVAL;
        }
    }
    return 0;
}

/* ProcessConfig as List reports it: the client's fields, defaults omitted. */
static json_t *config_json(const char *cmd, const json_t *args, const json_t *envs, const char *cwd)
{
    json_t *c = json_pack("{s:s}", "cmd", cmd);

    if (!c) {
        return NULL;
    }
    if ((args && json_array_size(args) > 0 &&
         json_util_set_new(c, "args", json_deep_copy(args)) < 0) ||
        (envs && json_object_size(envs) > 0 &&
         json_util_set_new(c, "envs", json_deep_copy(envs)) < 0) ||
        (cwd && json_util_set_new(c, "cwd", json_string(cwd)) < 0)) {
        json_decref(c);
        return NULL;
    }
    return c;
}

static int parse_pty(const json_t *pty, uint16_t *cols, uint16_t *rows)
{
    json_t *size = NULL;
    uint32_t c = 80, r = 24;

    if (json_util_get_object(pty, "size", NULL, &size) == -EINVAL) {
        return -EINVAL;
    }
    if (size) {
        if (json_util_get_u32(size, "cols", NULL, &c) == -EINVAL ||
            json_util_get_u32(size, "rows", NULL, &r) == -EINVAL) {
            return -EINVAL;
        }
    }
    if (c > UINT16_MAX || r > UINT16_MAX) {
        return -EINVAL;
    }
    *cols = (uint16_t)c;
    *rows = (uint16_t)r;
    return 0;
}

int process_rpc_parse_start(const json_t *msg, struct start_request *ret, const char **ret_error)
{
    struct start_request sr = { .stdin_on = true };
    json_t *process = NULL, *args = NULL, *envs = NULL, *pty = NULL;
    long nargs;

    if (json_util_get_object(msg, "process", NULL, &process) < 0 ||
        json_util_get_string(process, "cmd", NULL, &sr.cmd) < 0 || !*sr.cmd) {
        *ret_error = "invalid start request: process.cmd is required";
        return -EINVAL;
    }
    if (json_util_get_array(process, "args", NULL, &args) == -EINVAL ||
        json_util_get_object(process, "envs", NULL, &envs) == -EINVAL ||
        json_util_get_string(process, "cwd", NULL, &sr.cwd) == -EINVAL ||
        json_util_get_object(msg, "pty", NULL, &pty) == -EINVAL ||
        json_util_get_string(msg, "tag", NULL, &sr.tag) == -EINVAL ||
        json_util_get_bool(msg, "stdin", NULL, &sr.stdin_on) == -EINVAL) {
        *ret_error = "invalid start request: a field has the wrong type";
        return -EINVAL;
    }
    nargs = check_args(args);
    if (nargs < 0 || check_envs(envs) < 0) {
        *ret_error = "invalid process args or envs";
        return -EINVAL;
    }
    sr.pty = pty != NULL;
    if (pty && parse_pty(pty, &sr.cols, &sr.rows) < 0) {
        *ret_error = "invalid pty size";
        return -EINVAL;
    }
    sr.args = args;
    sr.n_args = (size_t)nargs;
    sr.envs = envs;
    *ret = sr;
    return 0;
}

void process_rpc_start(struct rpc_call *call)
{
    struct agent *a = call->agent;
    struct launch_params sp = { 0 };
    struct start_request sr;
    struct user *u = NULL;
    json_t *config = NULL;
    char *dir = NULL, **argv = NULL, **envp = NULL;
    struct proc *p = NULL;
    const char *error;
    struct stat st;
    int r;

    if (process_rpc_parse_start(call->msg, &sr, &error) < 0) {
        rpc_fail(call, CONNECT_INVALID_ARGUMENT, "%s", error);
        return;
    }
    r = auth_request_user(a, call->req, &u);
    if (r < 0) {
        rpc_fail(call, r == -ENOMEM ? CONNECT_RESOURCE_EXHAUSTED : CONNECT_UNAUTHENTICATED,
                 "invalid user");
        goto out;
    }
    r = user_resolve_path(u, sr.cwd, a->default_workdir, &dir);
    if (r < 0) {
        rpc_fail_errno(call, r, "invalid cwd: %m");
        goto out;
    }
    if (stat(dir, &st) < 0) {
        rpc_fail(call, CONNECT_INVALID_ARGUMENT, "cwd '%s' does not exist", dir);
        goto out;
    }
    if (!S_ISDIR(st.st_mode)) {
        rpc_fail(call, CONNECT_INVALID_ARGUMENT, "cwd '%s' is not a directory", dir);
        goto out;
    }
    r = user_build_env(u, a->path_env, a->env, sr.envs, &envp);
    if (r < 0) {
        rpc_fail_errno(call, r, "cannot build the environment: %m");
        goto out;
    }
    argv = calloc(sr.n_args + 2, sizeof(char *));
    config = config_json(sr.cmd, sr.args, sr.envs, sr.cwd);
    if (!argv || !config) {
        rpc_fail(call, CONNECT_RESOURCE_EXHAUSTED, "out of memory");
        goto out;
    }
    argv[0] = (char *)sr.cmd;
    for (size_t i = 0; i < sr.n_args; i++) {
        argv[i + 1] = (char *)json_string_value(json_array_get(sr.args, i));
    }

    sp.user = u;
    sp.cwd = dir;
    sp.argv = argv;
    sp.envp = envp;
    sp.pty = sr.pty;
    sp.cols = sr.cols;
    sp.rows = sr.rows;
    sp.stdin_pipe = sr.stdin_on;
    r = proc_spawn(a->procs, &sp, sr.tag, config, call->timeout, &p);
    if (r < 0) {
        /* envd reports start failures as invalid_argument; running out of something is not. */
        if (r == -ENOMEM || r == -EMFILE || r == -ENFILE || r == -EAGAIN) {
            rpc_fail_errno(call, r, "cannot start '%s': %m", sr.cmd);
        } else {
            rpc_fail(call, CONNECT_INVALID_ARGUMENT, "error starting process '%s' in '%s': %s",
                     sr.cmd, dir, strerror(-r));
        }
        goto out;
    }
    proc_attach(p, call, PROC_ATTACH_START);
out:
    free(argv); /* the strings are borrowed from call->msg */
    strv_free(envp);
    json_decref(config);
    free(dir);
    user_free(u);
}

/*
 * Finds the process a ProcessSelector names. Reports the error on the call
 * and returns NULL when there is none.
 */
static struct proc *select_process(struct rpc_call *call, bool include_ended)
{
    json_t *sel = NULL;
    const char *tag;
    uint32_t pid;
    struct proc *p;

    if (json_util_get_object(call->msg, "process", NULL, &sel) == -EINVAL) {
        rpc_fail(call, CONNECT_INVALID_ARGUMENT, "invalid process selector");
        return NULL;
    }
    if (json_util_get_u32(sel, "pid", NULL, &pid) == 0) {
        p = proc_by_pid(call->agent->procs, pid, include_ended);
        if (!p) {
            rpc_fail(call, CONNECT_NOT_FOUND, "process with pid %u not found", pid);
        }
        return p;
    }
    if (json_util_get_string(sel, "tag", NULL, &tag) == 0) {
        p = proc_by_tag(call->agent->procs, tag);
        if (!p) {
            rpc_fail(call, CONNECT_NOT_FOUND, "process with tag %s not found", tag);
        }
        return p;
    }
    if (json_util_field(sel, "pid", NULL) || json_util_field(sel, "tag", NULL)) {
        rpc_fail(call, CONNECT_INVALID_ARGUMENT, "invalid process selector");
        return NULL;
    }
    rpc_fail(call, CONNECT_UNIMPLEMENTED, "invalid input type: no process selector");
    return NULL;
}

void process_rpc_connect(struct rpc_call *call)
{
    struct proc *p = select_process(call, true);

    if (p) {
        proc_attach(p, call, PROC_ATTACH_CONNECT);
    }
}

void process_rpc_list(struct rpc_call *call)
{
    rpc_reply(call, proc_list_json(call->agent->procs));
}

void process_rpc_send_input(struct rpc_call *call)
{
    json_t *input = NULL;
    void *data = NULL;
    size_t len = 0;
    bool want_pty;
    struct proc *p;
    int r;

    p = select_process(call, false);
    if (!p) {
        return;
    }
    if (json_util_get_object(call->msg, "input", NULL, &input) == -EINVAL) {
        rpc_fail(call, CONNECT_INVALID_ARGUMENT, "invalid input");
        return;
    }
    r = json_util_get_bytes(input, "pty", NULL, AGENT_MAX_INPUT, &data, &len);
    want_pty = r == 0;
    if (r == -ENOENT) {
        r = json_util_get_bytes(input, "stdin", NULL, AGENT_MAX_INPUT, &data, &len);
    }
    if (r == -ENOENT) {
        rpc_fail(call, CONNECT_UNIMPLEMENTED, "invalid input type");
        return;
    }
    if (r < 0) {
        rpc_fail(call, r == -E2BIG ? CONNECT_RESOURCE_EXHAUSTED : CONNECT_INVALID_ARGUMENT,
                 "invalid input bytes");
        return;
    }
    if (want_pty != proc_is_pty(p)) {
        rpc_fail(call, CONNECT_INTERNAL,
                 want_pty ? "error writing to tty: tty not assigned to process"
                          : "error writing to stdin: tty assigned to process, input should be "
                            "written to the pty");
        free(data);
        return;
    }
    r = proc_write_input(p, data, len);
    free(data);
    if (r == -EPIPE) {
        rpc_fail(call, CONNECT_INTERNAL, "error writing to %s: stdin not enabled or closed",
                 want_pty ? "tty" : "stdin");
        return;
    }
    if (r == -EAGAIN) {
        rpc_fail(call, CONNECT_RESOURCE_EXHAUSTED,
                 "the process is not reading its input (%u bytes queued)", AGENT_MAX_STDIN_QUEUE);
        return;
    }
    if (r < 0) {
        rpc_fail_errno(call, r, "error writing input: %m");
        return;
    }
    rpc_reply(call, json_object());
}

void process_rpc_send_signal(struct rpc_call *call)
{
    static const struct json_util_enum names[] = {
        { "SIGNAL_UNSPECIFIED", 0 },
        { "SIGNAL_SIGTERM", 15 },
        { "SIGNAL_SIGKILL", 9 },
    };
    json_t *v;
    int64_t num = 0;
    struct proc *p;
    int sig = 0, r;

    p = select_process(call, false);
    if (!p) {
        return;
    }
    /* proto3 enums are open: unknown numbers decode fine and are refused below. */
    v = json_util_field(call->msg, "signal", NULL);
    if (v && json_is_string(v)) {
        r = json_util_get_enum(call->msg, "signal", NULL, names, ARRAY_SIZE(names), &sig);
        if (r < 0 && json_util_get_i64(call->msg, "signal", NULL, &num) < 0) {
            rpc_fail(call, CONNECT_INVALID_ARGUMENT, "invalid signal value");
            return;
        }
        if (r < 0) {
            sig = (int)num;
        }
    } else if (v) {
        if (json_util_get_i64(call->msg, "signal", NULL, &num) < 0 || num < INT32_MIN ||
            num > INT32_MAX) {
            rpc_fail(call, CONNECT_INVALID_ARGUMENT, "invalid signal value");
            return;
        }
        sig = (int)num;
    }
    if (sig != SIGKILL && sig != SIGTERM) {
        rpc_fail(call, CONNECT_UNIMPLEMENTED, "invalid signal: %d", sig);
        return;
    }
    r = proc_signal(p, sig);
    if (r < 0) {
        rpc_fail_errno(call, r, "error sending signal: %m");
        return;
    }
    rpc_reply(call, json_object());
}

void process_rpc_close_stdin(struct rpc_call *call)
{
    struct proc *p = select_process(call, false);
    int r;

    if (!p) {
        return;
    }
    r = proc_close_stdin(p);
    if (r == -ENOTTY) {
        rpc_fail(call, CONNECT_UNKNOWN,
                 "error closing stdin: cannot close stdin for PTY process, send Ctrl+D (0x04) "
                 "instead");
        return;
    }
    if (r < 0) {
        rpc_fail(call, CONNECT_UNKNOWN, "error closing stdin");
        return;
    }
    rpc_reply(call, json_object());
}

void process_rpc_update(struct rpc_call *call)
{
    json_t *pty = NULL;
    uint16_t cols, rows;
    struct proc *p;
    int r;

    p = select_process(call, false);
    if (!p) {
        return;
    }
    r = json_util_get_object(call->msg, "pty", NULL, &pty);
    if (r == -EINVAL || (pty && parse_pty(pty, &cols, &rows) < 0)) {
        rpc_fail(call, CONNECT_INVALID_ARGUMENT, "invalid pty size");
        return;
    }
    if (pty) {
        r = proc_resize(p, cols, rows);
        if (r < 0) {
            rpc_fail(call, CONNECT_INTERNAL, "error resizing tty: %s",
                     r == -ENOTTY ? "tty not assigned to process" : "resize failed");
            return;
        }
    }
    rpc_reply(call, json_object());
}

void process_rpc_stream_input(struct rpc_call *call)
{
    /* Client streaming needs a streaming request body; the SDKs never use it (§6.1). */
    rpc_fail(call, CONNECT_UNIMPLEMENTED, "StreamInput is not supported, use SendInput");
}
