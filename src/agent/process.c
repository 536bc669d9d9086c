/*
 * Process table and output fan-out.
 *
 * A process moves through these states (one struct proc throughout):
 *
 *   RUNNING --(waitpid reports exit)--> drain pipes --> ENDED
 *
 *   RUNNING    in t->running; outputs are read as they become readable and
 *              each chunk (32 KiB, 16 KiB for a PTY) goes to every attached
 *              stream as a data event. [proc_spawn]
 *   (exit)     SIGCHLD -> waitpid(); what is already in the pipes is read
 *              (bounded), then the pipes are closed even if a grandchild
 *              still holds them, as envd does. [proc_exited]
 *   ENDED      the end event is sent to every stream and each stream ends;
 *              the process moves to t->ended with its end event, where a
 *              late Connect finds it; the oldest ended entries are dropped
 *              past AGENT_MAX_ENDED_PROCS. [proc_end]
 *
 * Flow control: after every chunk, if any attached stream has more than
 * AGENT_STREAM_HIGH_WATER bytes queued for its client, the process's
 * output events are removed (paused). The pipe then fills and the kernel
 * blocks the writer, so memory stays bounded however much it writes. A
 * stream's drain callback (its client caught up) or a stream leaving
 * re-checks every stream and resumes. With no stream attached, output is
 * read and dropped: a detached process never blocks.
 *
 * SendSignal with SIGKILL/SIGTERM and the Start timeout close the output
 * pipes at once, so the end event follows the reap even when children of
 * the process keep the pipes open.
 *
 * Deadlines, as envd has them: Start's Connect-Timeout-Ms is both the
 * deadline of the Start request and the process's lifetime (envd runs the
 * process under a context with that timeout, apart from the request's own).
 * When it elapses the Start stream ends with deadline_exceeded, which the
 * SDKs raise as a timeout, and the process is killed (SIGKILL); streams
 * that Connect attached see the kill as an ordinary end event. A Connect's
 * own timeout ends only that stream. A client that goes away (cancels)
 * ends only its stream: the process keeps running, as on envd.
 *
 * Everything runs on the event loop; no object is freed inside an evhttp
 * callback (rpc.c delivers stream closes from its own event).
 */
#include "agent/process.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "agent/agent.h"
#include "agent/limits.h"
#include "agent/rpc.h"
#include "agent/launch.h"
#include "basic/fd-util.h"
#include "basic/log.h"
#include "shared/json-util.h"

struct proc_sub {
    struct proc *proc;
    struct rpc_stream *stream;
    struct event *deadline;
    struct proc_sub *next;
};

struct proc_out {
    struct proc *proc;
    int fd;
    struct event *ev;
    const char *field; /* DataEvent oneof member: "stdout", "stderr", "pty" */
    size_t chunk;
};

struct proc {
    struct proc_table *table;
    struct proc *prev, *next; /* in table->running or table->ended */
    pid_t pid;
    char *tag;
    json_t *config;
    bool pty;

    struct proc_out out[2]; /* stdout + stderr, or the PTY master in out[0] */
    bool paused;

    int stdin_fd; /* pipe write end or PTY master dup; -EBADF when none or closed */
    struct evbuffer *stdin_queue;
    struct event *stdin_ev;
    bool stdin_close_pending;

    struct event *timeout_ev;
    struct proc_sub *starter; /* the Start stream, while attached: ends at timeout_ev */
    struct proc_sub *subs;
    size_t n_subs;

    bool running;
    json_t *end_event; /* ProcessEvent {"end":{...}}, set once ended */
};

struct proc_list {
    struct proc *head, *tail;
    size_t n;
};

struct proc_table {
    struct agent *agent;
    struct proc_list running;
    struct proc_list ended; /* newest at head */
    struct event *sigchld;
};

static void list_push_front(struct proc_list *l, struct proc *p)
{
    p->prev = NULL;
    p->next = l->head;
    if (l->head) {
        l->head->prev = p;
    } else {
        l->tail = p;
    }
    l->head = p;
    l->n++;
}

static void list_remove(struct proc_list *l, struct proc *p)
{
    if (p->prev) {
        p->prev->next = p->next;
    } else {
        l->head = p->next;
    }
    if (p->next) {
        p->next->prev = p->prev;
    } else {
        l->tail = p->prev;
    }
    p->prev = p->next = NULL;
    l->n--;
}

uint32_t proc_pid(const struct proc *p)
{
    return (uint32_t)p->pid;
}

bool proc_is_running(const struct proc *p)
{
    return p->running;
}

bool proc_is_pty(const struct proc *p)
{
    return p->pty;
}

/* --- subscribers --------------------------------------------------------------------------- */

static void sub_free(struct proc_sub *s)
{
    if (s->deadline) {
        event_free(s->deadline);
    }
    free(s);
}

static void sub_unlink(struct proc_sub *s)
{
    struct proc *p = s->proc;

    for (struct proc_sub **pp = &p->subs; *pp; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            p->n_subs--;
            if (p->starter == s) {
                p->starter = NULL;
            }
            return;
        }
    }
}

static void proc_resume_check(struct proc *p)
{
    if (!p->paused) {
        return;
    }
    for (struct proc_sub *s = p->subs; s; s = s->next) {
        if (rpc_stream_pending(s->stream) >= AGENT_STREAM_HIGH_WATER) {
            return;
        }
    }
    p->paused = false;
    for (size_t i = 0; i < ARRAY_SIZE(p->out); i++) {
        if (p->out[i].ev) {
            event_add(p->out[i].ev, NULL);
        }
    }
}

static void proc_pause_check(struct proc *p)
{
    if (p->paused) {
        return;
    }
    for (struct proc_sub *s = p->subs; s; s = s->next) {
        if (rpc_stream_pending(s->stream) >= AGENT_STREAM_HIGH_WATER) {
            p->paused = true;
            for (size_t i = 0; i < ARRAY_SIZE(p->out); i++) {
                if (p->out[i].ev) {
                    event_del(p->out[i].ev);
                }
            }
            return;
        }
    }
}

static void sub_closed_cb(struct rpc_stream *stream, void *userdata)
{
    struct proc_sub *s = userdata;
    struct proc *p = s->proc;

    sub_unlink(s);
    rpc_stream_finish(stream, -1, NULL);
    sub_free(s);
    proc_resume_check(p);
}

static void sub_drained_cb(struct rpc_stream *stream, void *userdata)
{
    struct proc_sub *s = userdata;

    proc_resume_check(s->proc);
}

static void sub_deadline_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct proc_sub *s = userdata;
    struct proc *p = s->proc;

    sub_unlink(s);
    rpc_stream_finish(s->stream, CONNECT_DEADLINE_EXCEEDED, "context deadline exceeded");
    sub_free(s);
    proc_resume_check(p);
}

static void broadcast(struct proc *p, const json_t *msg)
{
    for (struct proc_sub *s = p->subs; s; s = s->next) {
        (void)rpc_stream_send(s->stream, msg);
    }
}

/* {"event":{<kind>:<body>}}, stealing body. */
static json_t *process_event(const char *kind, json_t *body)
{
    if (!body) {
        return NULL;
    }
    return json_pack("{s:{s:o}}", "event", kind, body);
}

/* --- output -------------------------------------------------------------------------------- */

static void out_close(struct proc_out *o)
{
    if (o->ev) {
        event_free(o->ev);
        o->ev = NULL;
    }
    o->fd = close_safe(o->fd);
}

/* Reads one chunk and broadcasts it. Returns bytes read, 0 at EOF, -EAGAIN, or -errno. */
static int out_read_once(struct proc_out *o)
{
    uint8_t buf[AGENT_CHUNK_STD];
    json_t *msg;
    ssize_t n;

    do {
        n = read(o->fd, buf, MIN(o->chunk, sizeof(buf)));
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        /* A PTY master reads EIO once the last slave fd is closed: that is its EOF. */
        if (errno == EIO && o->proc->pty) {
            return 0;
        }
        return errno == EAGAIN ? -EAGAIN : -errno;
    }
    if (n == 0) {
        return 0;
    }
    if (o->proc->subs) {
        msg = process_event("data", json_pack("{s:o}", o->field, json_util_bytes(buf, (size_t)n)));
        if (msg) {
            broadcast(o->proc, msg);
            json_decref(msg);
        } else {
            log_warning("pid %d: out of memory, dropping %zd bytes of output", (int)o->proc->pid,
                        n);
        }
    }
    return (int)n;
}

static void proc_maybe_end(struct proc *p);

static void out_readable_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct proc_out *o = userdata;
    struct proc *p = o->proc;

    /* A few chunks per wakeup: a full pipe holds 64 KiB. */
    for (int i = 0; i < 4 && !p->paused; i++) {
        int r = out_read_once(o);
        if (r == -EAGAIN) {
            return;
        }
        if (r <= 0) {
            out_close(o);
            proc_maybe_end(p);
            return;
        }
        proc_pause_check(p);
    }
}

static void proc_stop_output(struct proc *p)
{
    for (size_t i = 0; i < ARRAY_SIZE(p->out); i++) {
        out_close(&p->out[i]);
    }
}

/* --- stdin --------------------------------------------------------------------------------- */

static void stdin_close(struct proc *p)
{
    if (p->stdin_ev) {
        event_free(p->stdin_ev);
        p->stdin_ev = NULL;
    }
    if (p->stdin_queue) {
        evbuffer_free(p->stdin_queue);
        p->stdin_queue = NULL;
    }
    p->stdin_fd = close_safe(p->stdin_fd);
    p->stdin_close_pending = false;
}

static int stdin_flush(struct proc *p)
{
    while (evbuffer_get_length(p->stdin_queue) > 0) {
        int n = evbuffer_write(p->stdin_queue, p->stdin_fd);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EAGAIN) {
                event_add(p->stdin_ev, NULL);
                return 0;
            }
            return -errno;
        }
    }
    event_del(p->stdin_ev);
    if (p->stdin_close_pending) {
        stdin_close(p);
    }
    return 0;
}

static void stdin_writable_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct proc *p = userdata;
    int r = stdin_flush(p);

    if (r < 0) {
        log_debug_errno(r, "pid %d: stdin write failed, closing stdin: %m", (int)p->pid);
        stdin_close(p);
    }
}

int proc_write_input(struct proc *p, const void *data, size_t len)
{
    if (!p->running || p->stdin_fd < 0 || p->stdin_close_pending) {
        return -EPIPE;
    }
    if (evbuffer_get_length(p->stdin_queue) + len > AGENT_MAX_STDIN_QUEUE) {
        return -EAGAIN;
    }
    if (evbuffer_add(p->stdin_queue, data, len) < 0) {
        return -ENOMEM;
    }
    return stdin_flush(p);
}

int proc_close_stdin(struct proc *p)
{
    if (p->pty) {
        return -ENOTTY;
    }
    if (p->stdin_fd < 0) {
        return 0;
    }
    if (evbuffer_get_length(p->stdin_queue) > 0) {
        p->stdin_close_pending = true;
        return 0;
    }
    stdin_close(p);
    return 0;
}

int proc_resize(struct proc *p, uint16_t cols, uint16_t rows)
{
    struct winsize ws = { .ws_col = cols, .ws_row = rows };

    if (!p->pty) {
        return -ENOTTY;
    }
    if (p->stdin_fd < 0) {
        return -EPIPE;
    }
    /* The kernel sends SIGWINCH to the terminal's foreground process group. */
    if (ioctl(p->stdin_fd, TIOCSWINSZ, &ws) < 0) {
        return -errno;
    }
    return 0;
}

int proc_signal(struct proc *p, int sig)
{
    if (!p->running) {
        return -ESRCH;
    }
    if (kill(p->pid, sig) < 0) {
        return -errno;
    }
    if (sig == SIGKILL || sig == SIGTERM) {
        proc_stop_output(p);
    }
    return 0;
}

static void timeout_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct proc *p = userdata;
    struct proc_sub *s = p->starter;

    log_info("pid %d: Connect-Timeout-Ms elapsed, killing the process", (int)p->pid);
    /* First the Start stream's error, so it can never see the kill as a normal end. */
    if (s) {
        sub_unlink(s);
        rpc_stream_finish(s->stream, CONNECT_DEADLINE_EXCEEDED, "context deadline exceeded");
        sub_free(s);
    }
    (void)proc_signal(p, SIGKILL);
    proc_resume_check(p);
}

/* --- lifecycle ----------------------------------------------------------------------------- */

static struct proc *proc_free(struct proc *p)
{
    if (!p) {
        return NULL;
    }
    while (p->subs) {
        struct proc_sub *s = p->subs;
        p->subs = s->next;
        rpc_stream_finish(s->stream, CONNECT_UNAVAILABLE, "agent is shutting down");
        sub_free(s);
    }
    proc_stop_output(p);
    stdin_close(p);
    if (p->timeout_ev) {
        event_free(p->timeout_ev);
    }
    json_decref(p->config);
    json_decref(p->end_event);
    free(p->tag);
    free(p);
    return NULL;
}

static json_t *end_event_json(int status)
{
    char text[128];
    json_t *end = json_object();
    bool exited = WIFEXITED(status);
    int code = exited ? WEXITSTATUS(status) : -1;

    launch_status_string(status, text, sizeof(text));
    if (!end) {
        return NULL;
    }
    /* proto3 JSON omits defaults: no exitCode for 0, no exited for false, no error on success. */
    if ((code != 0 && json_util_set_new(end, "exitCode", json_integer(code)) < 0) ||
        (exited && json_util_set_new(end, "exited", json_true()) < 0) ||
        json_util_set_new(end, "status", json_string(text)) < 0 ||
        (!(exited && code == 0) && json_util_set_new(end, "error", json_string(text)) < 0)) {
        json_decref(end);
        return NULL;
    }
    return process_event("end", end);
}

static void proc_end(struct proc *p)
{
    struct proc_table *t = p->table;

    p->running = false;
    stdin_close(p);
    if (p->timeout_ev) {
        event_free(p->timeout_ev);
        p->timeout_ev = NULL;
    }
    p->starter = NULL;
    while (p->subs) {
        struct proc_sub *s = p->subs;
        p->subs = s->next;
        p->n_subs--;
        if (p->end_event) {
            (void)rpc_stream_send(s->stream, p->end_event);
        }
        rpc_stream_finish(s->stream, p->end_event ? -1 : CONNECT_INTERNAL,
                          p->end_event ? NULL : "out of memory");
        sub_free(s);
    }
    list_remove(&t->running, p);
    list_push_front(&t->ended, p);
    while (t->ended.n > AGENT_MAX_ENDED_PROCS) {
        struct proc *old = t->ended.tail;
        list_remove(&t->ended, old);
        proc_free(old);
    }
}

/* Ends the process once it has been reaped and its outputs are closed. */
static void proc_maybe_end(struct proc *p)
{
    if (!p->running || !p->end_event) {
        return;
    }
    for (size_t i = 0; i < ARRAY_SIZE(p->out); i++) {
        if (p->out[i].fd >= 0) {
            return;
        }
    }
    proc_end(p);
}

static void proc_exited(struct proc *p, int status)
{
    log_debug("pid %d exited, status 0x%x", (int)p->pid, status);
    p->end_event = end_event_json(status);
    if (!p->end_event) {
        /* proc_end() ends the streams with an error rather than leave them hanging. */
        log_error("pid %d: out of memory building the end event", (int)p->pid);
    }
    /* Whatever the process wrote before exiting is in the pipes now; read it (bounded). */
    for (size_t i = 0; i < ARRAY_SIZE(p->out); i++) {
        struct proc_out *o = &p->out[i];
        size_t total = 0;
        while (o->fd >= 0 && total < AGENT_MAX_DRAIN_AFTER_EXIT) {
            int r = out_read_once(o);
            if (r <= 0) {
                break;
            }
            total += (size_t)r;
        }
        out_close(o);
    }
    if (!p->end_event) {
        proc_end(p);
        return;
    }
    proc_maybe_end(p);
}

static void sigchld_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct proc_table *t = userdata;

    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0) {
            break;
        }
        for (struct proc *p = t->running.head; p; p = p->next) {
            if (p->pid == pid) {
                proc_exited(p, status);
                break;
            }
        }
    }
}

int proc_table_new(struct agent *a, struct proc_table **ret)
{
    struct proc_table *t = calloc(1, sizeof(*t));

    if (!t) {
        return -ENOMEM;
    }
    t->agent = a;
    t->sigchld = evsignal_new(a->base, SIGCHLD, sigchld_cb, t);
    if (!t->sigchld || event_add(t->sigchld, NULL) < 0) {
        proc_table_free(t);
        return -ENOMEM;
    }
    *ret = t;
    return 0;
}

struct proc_table *proc_table_free(struct proc_table *t)
{
    if (!t) {
        return NULL;
    }
    while (t->running.head) {
        struct proc *p = t->running.head;
        list_remove(&t->running, p);
        proc_free(p);
    }
    while (t->ended.head) {
        struct proc *p = t->ended.head;
        list_remove(&t->ended, p);
        proc_free(p);
    }
    if (t->sigchld) {
        event_free(t->sigchld);
    }
    free(t);
    return NULL;
}

static int out_init(struct proc *p, struct proc_out *o, int fd, const char *field, size_t chunk)
{
    o->proc = p;
    o->fd = fd;
    o->field = field;
    o->chunk = chunk;
    if (fd < 0) {
        return 0;
    }
    o->ev = event_new(p->table->agent->base, fd, EV_READ | EV_PERSIST, out_readable_cb, o);
    if (!o->ev || event_add(o->ev, NULL) < 0) {
        return -ENOMEM;
    }
    return 0;
}

int proc_spawn(struct proc_table *t, const struct launch_params *sp, const char *tag,
               const json_t *config, usec_t timeout, struct proc **ret)
{
    struct launch_result res = { .stdin_fd = -EBADF, .stdout_fd = -EBADF, .stderr_fd = -EBADF };
    struct proc *p;
    int r;

    if (t->running.n >= AGENT_MAX_PROCS) {
        return -EMFILE;
    }
    p = calloc(1, sizeof(*p));
    if (!p) {
        return -ENOMEM;
    }
    p->table = t;
    p->out[0].fd = p->out[1].fd = p->stdin_fd = -EBADF;
    p->pty = sp->pty;
    p->config = json_deep_copy(config);
    p->tag = tag ? strdup(tag) : NULL;
    p->stdin_queue = evbuffer_new();
    if (!p->config || (tag && !p->tag) || !p->stdin_queue) {
        proc_free(p);
        return -ENOMEM;
    }

    r = launch_process(sp, &res);
    if (r < 0) {
        proc_free(p);
        return r;
    }
    p->pid = res.pid;
    p->running = true;
    p->stdin_fd = res.stdin_fd;
    list_push_front(&t->running, p);

    /* From here the process exists: failures below cost output, never the table entry. */
    p->stdin_ev = event_new(t->agent->base, p->stdin_fd, EV_WRITE, stdin_writable_cb, p);
    r = out_init(p, &p->out[0], res.stdout_fd, sp->pty ? "pty" : "stdout",
                 sp->pty ? AGENT_CHUNK_PTY : AGENT_CHUNK_STD);
    if (r >= 0) {
        r = out_init(p, &p->out[1], res.stderr_fd, "stderr", AGENT_CHUNK_STD);
    }
    if (r >= 0 && timeout > 0) {
        struct timeval tv = { .tv_sec = (time_t)(timeout / USEC_PER_SEC),
                              .tv_usec = (suseconds_t)(timeout % USEC_PER_SEC) };
        p->timeout_ev = evtimer_new(t->agent->base, timeout_cb, p);
        if (!p->timeout_ev || evtimer_add(p->timeout_ev, &tv) < 0) {
            r = -ENOMEM;
        }
    }
    if (r < 0 || (p->stdin_fd >= 0 && !p->stdin_ev)) {
        log_error("pid %d: out of memory setting up its I/O, killing it", (int)p->pid);
        (void)proc_signal(p, SIGKILL);
    }
    *ret = p;
    return 0;
}

struct proc *proc_by_pid(struct proc_table *t, uint32_t pid, bool include_ended)
{
    for (struct proc *p = t->running.head; p; p = p->next) {
        if ((uint32_t)p->pid == pid) {
            return p;
        }
    }
    if (include_ended) {
        for (struct proc *p = t->ended.head; p; p = p->next) {
            if ((uint32_t)p->pid == pid) {
                return p;
            }
        }
    }
    return NULL;
}

struct proc *proc_by_tag(struct proc_table *t, const char *tag)
{
    for (struct proc *p = t->running.head; p; p = p->next) {
        if (p->tag && strcmp(p->tag, tag) == 0) {
            return p;
        }
    }
    return NULL;
}

void proc_attach(struct proc *p, struct rpc_call *call, enum proc_attach_mode mode)
{
    struct rpc_stream *stream = NULL;
    struct proc_sub *s;
    json_t *start;

    if (p->running && p->n_subs >= AGENT_MAX_SUBSCRIBERS) {
        rpc_fail(call, CONNECT_RESOURCE_EXHAUSTED, "too many streams attached to pid %d",
                 (int)p->pid);
        return;
    }
    s = calloc(1, sizeof(*s));
    start = process_event("start", json_pack("{s:I}", "pid", (json_int_t)p->pid));
    if (!s || !start) {
        free(s);
        json_decref(start);
        rpc_fail(call, CONNECT_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    s->proc = p;
    if (rpc_stream_open(call, json_pack("{s:{s:{}}}", "event", "keepalive"), sub_closed_cb,
                        sub_drained_cb, s, &stream) < 0) {
        free(s);
        json_decref(start);
        return;
    }
    s->stream = stream;
    (void)rpc_stream_send(stream, start);
    json_decref(start);

    if (!p->running) {
        /* A late Connect: the process is gone, its end event is not. */
        if (p->end_event) {
            (void)rpc_stream_send(stream, p->end_event);
        }
        rpc_stream_finish(stream, -1, NULL);
        free(s);
        return;
    }
    if (mode == PROC_ATTACH_CONNECT && call->timeout > 0) {
        struct timeval tv = { .tv_sec = (time_t)(call->timeout / USEC_PER_SEC),
                              .tv_usec = (suseconds_t)(call->timeout % USEC_PER_SEC) };
        s->deadline = evtimer_new(p->table->agent->base, sub_deadline_cb, s);
        if (s->deadline) {
            evtimer_add(s->deadline, &tv);
        }
    }
    s->next = p->subs;
    p->subs = s;
    p->n_subs++;
    if (mode == PROC_ATTACH_START) {
        p->starter = s;
    }
}

json_t *proc_list_json(struct proc_table *t)
{
    json_t *arr = json_array();
    json_t *res;

    if (!arr) {
        return NULL;
    }
    /* Oldest first, as a client listing would expect. */
    for (struct proc *p = t->running.tail; p; p = p->prev) {
        json_t *info = json_pack("{s:O, s:I}", "config", p->config, "pid", (json_int_t)p->pid);
        if (!info || (p->tag && json_util_set_new(info, "tag", json_string(p->tag)) < 0) ||
            json_array_append_new(arr, info) < 0) {
            json_decref(arr);
            return NULL;
        }
    }
    res = json_pack("{s:o}", "processes", arr);
    return res;
}
