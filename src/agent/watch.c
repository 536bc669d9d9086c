/*
 * inotify watchers. Each watcher owns one inotify instance and a table
 * from watch descriptor to the directory it watches (relative to the
 * watched root), so event names can be reported relative to the root as
 * envd does. A recursive watcher adds a watch for every directory below
 * the root at start and for each directory created or moved in later
 * (at most AGENT_MAX_WATCH_DIRS).
 *
 * inotify -> EventType, as fsnotify maps them:
 *   IN_CREATE, IN_MOVED_TO       -> CREATE
 *   IN_MODIFY                    -> WRITE
 *   IN_ATTRIB                    -> CHMOD
 *   IN_DELETE, IN_DELETE_SELF    -> REMOVE
 *   IN_MOVED_FROM, IN_MOVE_SELF  -> RENAME
 * Self events are reported for the root only; for a subdirectory its
 * parent's watch already reported the same change.
 *
 * A stream watcher sends its events as they come and ends when the client
 * leaves, the deadline passes or the queue overflows. A polled watcher
 * queues at most AGENT_MAX_WATCHER_EVENTS events; past that it fails, and
 * GetWatcherEvents reports the failure, since a silently dropped event
 * would make a client's view of the directory wrong.
 */
#include "agent/watch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <event2/event.h>

#include "agent/agent.h"
#include "agent/auth.h"
#include "agent/entry.h"
#include "agent/limits.h"
#include "agent/user.h"
#include "basic/fd-util.h"
#include "basic/log.h"
#include "basic/random-util.h"
#include "basic/strbuf.h"
#include "shared/json-util.h"

#define WATCH_MASK                                                                                 \
    (IN_CREATE | IN_MODIFY | IN_ATTRIB | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |                 \
     IN_DELETE_SELF | IN_MOVE_SELF)

enum event_type {
    EVENT_CREATE = 1,
    EVENT_WRITE = 2,
    EVENT_REMOVE = 3,
    EVENT_RENAME = 4,
    EVENT_CHMOD = 5,
};

static const char *const event_names[] = {
    [EVENT_CREATE] = "EVENT_TYPE_CREATE", [EVENT_WRITE] = "EVENT_TYPE_WRITE",
    [EVENT_REMOVE] = "EVENT_TYPE_REMOVE", [EVENT_RENAME] = "EVENT_TYPE_RENAME",
    [EVENT_CHMOD] = "EVENT_TYPE_CHMOD",
};

struct watch_dir {
    int wd;
    char *rel; /* "" for the root */
};

struct watcher {
    struct watch_table *table;
    struct watcher *prev, *next;
    char id[24]; /* "w<random>" for polled watchers, "" for streams */
    char *root;
    bool recursive;
    bool include_entry;
    int fd;
    struct event *ev;
    struct watch_dir *dirs;
    size_t n_dirs, cap_dirs;

    struct rpc_stream *stream; /* stream watcher */
    struct event *deadline;

    json_t *queue; /* polled watcher: FilesystemEvent array */
    char *failure; /* polled watcher: why it stopped */
};

struct watch_table {
    struct agent *agent;
    struct watcher *head;
    size_t n;
};

int watch_table_new(struct agent *a, struct watch_table **ret)
{
    struct watch_table *t = calloc(1, sizeof(*t));

    if (!t) {
        return -ENOMEM;
    }
    t->agent = a;
    *ret = t;
    return 0;
}

static void watcher_free(struct watcher *w)
{
    struct watch_table *t = w->table;

    if (w->prev) {
        w->prev->next = w->next;
    } else if (t->head == w) {
        t->head = w->next;
    }
    if (w->next) {
        w->next->prev = w->prev;
    }
    t->n--;
    if (w->ev) {
        event_free(w->ev);
    }
    if (w->deadline) {
        event_free(w->deadline);
    }
    close_safe(w->fd);
    for (size_t i = 0; i < w->n_dirs; i++) {
        free(w->dirs[i].rel);
    }
    free(w->dirs);
    free(w->root);
    free(w->failure);
    json_decref(w->queue);
    free(w);
}

/* Ends a stream watcher's stream (code < 0: success) and frees the watcher. */
static void watcher_finish(struct watcher *w, int code, const char *message)
{
    struct rpc_stream *s = TAKE_PTR(w->stream);

    watcher_free(w);
    if (s) {
        rpc_stream_finish(s, code, message);
    }
}

struct watch_table *watch_table_free(struct watch_table *t)
{
    if (!t) {
        return NULL;
    }
    while (t->head) {
        watcher_finish(t->head, CONNECT_UNAVAILABLE, "agent is shutting down");
    }
    free(t);
    return NULL;
}

static struct watch_dir *dir_by_wd(struct watcher *w, int wd)
{
    for (size_t i = 0; i < w->n_dirs; i++) {
        if (w->dirs[i].wd == wd) {
            return &w->dirs[i];
        }
    }
    return NULL;
}

static void dir_forget(struct watcher *w, int wd)
{
    for (size_t i = 0; i < w->n_dirs; i++) {
        if (w->dirs[i].wd == wd) {
            free(w->dirs[i].rel);
            w->dirs[i] = w->dirs[--w->n_dirs];
            return;
        }
    }
}

/* Watches root/rel; in recursive mode also every directory below it. */
static int watch_add_tree(struct watcher *w, const char *rel)
{
    struct strbuf path = STRBUF_INIT;
    struct watch_dir *existing;
    DIR *d = NULL;
    struct dirent *de;
    char *copy = NULL;
    int wd, r;

    r = strbuf_appendf(&path, "%s%s%s", w->root, *rel ? "/" : "", rel);
    if (r < 0) {
        goto out;
    }
    if (w->n_dirs >= AGENT_MAX_WATCH_DIRS) {
        r = -ENOSPC;
        goto out;
    }
    wd = inotify_add_watch(w->fd, path.buf, WATCH_MASK | IN_ONLYDIR | (*rel ? IN_DONT_FOLLOW : 0));
    if (wd < 0) {
        r = -errno;
        goto out;
    }
    copy = strdup(rel);
    if (!copy) {
        r = -ENOMEM;
        goto out;
    }
    existing = dir_by_wd(w, wd);
    if (existing) {
        free(existing->rel);
        existing->rel = TAKE_PTR(copy);
    } else {
        if (w->n_dirs == w->cap_dirs) {
            size_t ncap = w->cap_dirs ? w->cap_dirs * 2 : 16;
            struct watch_dir *nd = realloc(w->dirs, ncap * sizeof(*nd));
            if (!nd) {
                inotify_rm_watch(w->fd, wd);
                r = -ENOMEM;
                goto out;
            }
            w->dirs = nd;
            w->cap_dirs = ncap;
        }
        w->dirs[w->n_dirs++] = (struct watch_dir){ .wd = wd, .rel = TAKE_PTR(copy) };
    }
    if (!w->recursive) {
        r = 0;
        goto out;
    }
    d = opendir(path.buf);
    if (!d) {
        r = 0; /* gone or unreadable: nothing below to watch */
        goto out;
    }
    r = 0;
    while ((de = readdir(d)) && r >= 0) {
        struct strbuf sub = STRBUF_INIT;
        struct stat st;
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) {
            continue;
        }
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode)) {
            continue;
        }
        r = strbuf_appendf(&sub, "%s%s%s", rel, *rel ? "/" : "", de->d_name);
        if (r >= 0) {
            r = watch_add_tree(w, sub.buf);
            if (r == -ENOENT || r == -EACCES || r == -ENOTDIR) {
                r = 0;
            }
        }
        strbuf_release(&sub);
    }
out:
    if (d) {
        closedir(d);
    }
    free(copy);
    strbuf_release(&path);
    return r;
}

static json_t *event_json(struct watcher *w, const char *rel, enum event_type type)
{
    json_t *e = json_pack("{s:o*, s:s}", "name", json_util_string_lossy(rel, strlen(rel)), "type",
                          event_names[type]);

    if (e && w->include_entry &&
        (type == EVENT_CREATE || type == EVENT_WRITE || type == EVENT_CHMOD)) {
        struct strbuf path = STRBUF_INIT;
        json_t *entry = NULL;
        if (strbuf_appendf(&path, "%s/%s", w->root, rel) >= 0 &&
            entry_info(path.buf, &entry) >= 0) {
            json_object_set_new(e, "entry", entry);
        }
        strbuf_release(&path);
    }
    return e;
}

/* Delivers one event; returns false when the watcher was freed. */
static bool watcher_emit(struct watcher *w, const char *rel, enum event_type type)
{
    json_t *e = event_json(w, rel, type);

    if (!e) {
        log_warning("watcher on '%s': out of memory, dropping an event", w->root);
        return true;
    }
    if (w->stream) {
        json_t *msg = json_pack("{s:o}", "filesystem", e);
        if (msg) {
            (void)rpc_stream_send(w->stream, msg);
            json_decref(msg);
        }
        /* Events cannot be paused like a pipe: a client this far behind is cut off. */
        if (rpc_stream_pending(w->stream) > AGENT_MAX_WATCH_BACKLOG) {
            watcher_finish(w, CONNECT_RESOURCE_EXHAUSTED, "watch client is too slow");
            return false;
        }
        return true;
    }
    if (w->failure) {
        json_decref(e);
        return true;
    }
    if (json_array_size(w->queue) >= AGENT_MAX_WATCHER_EVENTS) {
        json_decref(e);
        w->failure = strdup("watcher error: more than 4096 events queued, poll more often");
        return true;
    }
    json_array_append_new(w->queue, e);
    return true;
}

static void watcher_fail(struct watcher *w, const char *message)
{
    if (w->stream) {
        watcher_finish(w, CONNECT_INTERNAL, message);
        return;
    }
    if (!w->failure) {
        w->failure = strdup(message);
    }
    if (w->ev) {
        event_del(w->ev);
    }
}

static bool handle_event(struct watcher *w, const struct inotify_event *ev)
{
    static const struct {
        uint32_t mask;
        enum event_type type;
    } order[] = {
        /* fsnotify's order when one event carries several ops */
        { IN_CREATE | IN_MOVED_TO, EVENT_CREATE },
        { IN_MOVED_FROM | IN_MOVE_SELF, EVENT_RENAME },
        { IN_ATTRIB, EVENT_CHMOD },
        { IN_MODIFY, EVENT_WRITE },
        { IN_DELETE | IN_DELETE_SELF, EVENT_REMOVE },
    };
    struct watch_dir *dir;
    struct strbuf rel = STRBUF_INIT;
    bool self = ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF);

    if (ev->mask & IN_Q_OVERFLOW) {
        watcher_fail(w, "watcher error: event queue overflow");
        return false;
    }
    dir = dir_by_wd(w, ev->wd);
    if (!dir) {
        return true;
    }
    if (ev->mask & IN_IGNORED) {
        dir_forget(w, ev->wd);
        return true;
    }
    if (self && *dir->rel) {
        return true; /* the parent's watch reported it */
    }
    if (self) {
        (void)strbuf_appends(&rel, ".");
    } else if (ev->len > 0) {
        (void)strbuf_appendf(&rel, "%s%s%s", dir->rel, *dir->rel ? "/" : "", ev->name);
    } else {
        (void)strbuf_appends(&rel, *dir->rel ? dir->rel : ".");
    }
    if (!rel.buf) {
        return true;
    }
    if (w->recursive && (ev->mask & IN_ISDIR) && (ev->mask & (IN_CREATE | IN_MOVED_TO))) {
        int r = watch_add_tree(w, rel.buf);
        if (r < 0 && r != -ENOENT) {
            log_debug_errno(r, "watcher on '%s': cannot watch '%s', ignoring: %m", w->root,
                            rel.buf);
        }
    }
    for (size_t i = 0; i < ARRAY_SIZE(order); i++) {
        if (ev->mask & order[i].mask) {
            if (!watcher_emit(w, rel.buf, order[i].type)) {
                strbuf_release(&rel);
                return false;
            }
        }
    }
    strbuf_release(&rel);
    return true;
}

static void watcher_readable_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct watcher *w = userdata;
    char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));

    for (;;) {
        ssize_t n = read(w->fd, buf, sizeof(buf));
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno != EAGAIN) {
                watcher_fail(w, "watcher error: cannot read inotify events");
            }
            return;
        }
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            if (!handle_event(w, ev)) {
                return;
            }
            p += sizeof(struct inotify_event) + ev->len;
        }
    }
}

static bool is_network_fs(const char *path)
{
    struct statfs sfs;

    if (statfs(path, &sfs) < 0) {
        return false;
    }
    switch ((unsigned long)sfs.f_type) {
    case 0x6969:     /* NFS */
    case 0xFF534D42: /* CIFS */
    case 0x517B:     /* SMB */
    case 0xFE534D42: /* SMB2 */
    case 0x65735546: /* FUSE */
        return true;
    default:
        return false;
    }
}

/*
 * Validates a WatchDirRequest / CreateWatcherRequest and creates an armed
 * watcher (not yet delivering). On failure the call is answered and NULL
 * returned.
 */
static struct watcher *watcher_create(struct rpc_call *call)
{
    struct watch_table *t = call->agent->watches;
    const char *raw = "";
    bool allow_network = false;
    struct watcher *w = NULL;
    struct user *u = NULL;
    char *path = NULL;
    struct stat st;
    int r;

    if (json_util_get_string(call->msg, "path", NULL, &raw) == -EINVAL) {
        rpc_fail(call, CONNECT_INVALID_ARGUMENT, "'path' must be a string");
        return NULL;
    }
    w = calloc(1, sizeof(*w));
    if (!w) {
        rpc_fail(call, CONNECT_RESOURCE_EXHAUSTED, "out of memory");
        return NULL;
    }
    w->fd = -EBADF;
    if (json_util_get_bool(call->msg, "recursive", NULL, &w->recursive) == -EINVAL ||
        json_util_get_bool(call->msg, "includeEntry", "include_entry", &w->include_entry) ==
            -EINVAL ||
        json_util_get_bool(call->msg, "allowNetworkMounts", "allow_network_mounts",
                           &allow_network) == -EINVAL) {
        rpc_fail(call, CONNECT_INVALID_ARGUMENT, "invalid watch options");
        goto fail;
    }
    if (t->n >= AGENT_MAX_WATCHERS) {
        rpc_fail(call, CONNECT_RESOURCE_EXHAUSTED, "too many watchers (%d)", AGENT_MAX_WATCHERS);
        goto fail;
    }
    r = auth_request_user(call->agent, call->req, &u);
    if (r < 0) {
        rpc_fail(call, CONNECT_UNAUTHENTICATED, "invalid user");
        goto fail;
    }
    r = user_resolve_path(u, raw, call->agent->default_workdir, &path);
    if (r < 0) {
        rpc_fail(call, CONNECT_INVALID_ARGUMENT, "invalid path '%s'", raw);
        goto fail;
    }
    if (stat(path, &st) < 0) {
        if (errno == ENOENT || errno == ENOTDIR) {
            rpc_fail(call, CONNECT_NOT_FOUND, "path '%s' not found", path);
        } else {
            rpc_fail_errno(call, -errno, "error statting path '%s': %m", path);
        }
        goto fail;
    }
    if (!S_ISDIR(st.st_mode)) {
        rpc_fail(call, CONNECT_INVALID_ARGUMENT, "path '%s' not a directory", path);
        goto fail;
    }
    if (!allow_network && is_network_fs(path)) {
        rpc_fail(call, CONNECT_INVALID_ARGUMENT, "cannot watch path on network filesystem: '%s'",
                 path);
        goto fail;
    }
    w->root = TAKE_PTR(path);
    w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->fd < 0) {
        rpc_fail_errno(call, -errno, "error creating watcher: %m");
        goto fail;
    }
    w->table = t;
    w->next = t->head;
    if (t->head) {
        t->head->prev = w;
    }
    t->head = w;
    t->n++;
    r = watch_add_tree(w, "");
    if (r < 0) {
        rpc_fail_errno(call, r, "error adding path '%s' to watcher: %m", w->root);
        watcher_free(w);
        user_free(u);
        return NULL;
    }
    w->ev = event_new(call->agent->base, w->fd, EV_READ | EV_PERSIST, watcher_readable_cb, w);
    if (!w->ev || event_add(w->ev, NULL) < 0) {
        rpc_fail(call, CONNECT_RESOURCE_EXHAUSTED, "out of memory");
        watcher_free(w);
        user_free(u);
        return NULL;
    }
    user_free(u);
    return w;
fail:
    close_safe(w->fd);
    free(w->root);
    free(w);
    free(path);
    user_free(u);
    return NULL;
}

static void stream_closed_cb(struct rpc_stream *s, void *userdata)
{
    watcher_finish(userdata, -1, NULL);
}

static void deadline_cb(evutil_socket_t fd, short what, void *userdata)
{
    watcher_finish(userdata, CONNECT_DEADLINE_EXCEEDED, "context deadline exceeded");
}

void watch_rpc_watch_dir(struct rpc_call *call)
{
    struct watcher *w = watcher_create(call);
    json_t *start;

    if (!w) {
        return;
    }
    start = json_pack("{s:{}}", "start");
    if (!start || rpc_stream_open(call, json_pack("{s:{}}", "keepalive"), stream_closed_cb, NULL, w,
                                  &w->stream) < 0) {
        json_decref(start);
        if (call->req) {
            rpc_fail(call, CONNECT_RESOURCE_EXHAUSTED, "out of memory");
        }
        watcher_free(w);
        return;
    }
    /* The watch is armed: only now may the client rely on seeing changes (§6.4). */
    (void)rpc_stream_send(w->stream, start);
    json_decref(start);
    if (call->timeout > 0) {
        struct timeval tv = { .tv_sec = (time_t)(call->timeout / USEC_PER_SEC),
                              .tv_usec = (suseconds_t)(call->timeout % USEC_PER_SEC) };
        w->deadline = evtimer_new(call->agent->base, deadline_cb, w);
        if (w->deadline) {
            evtimer_add(w->deadline, &tv);
        }
    }
}

static struct watcher *watcher_by_id(struct watch_table *t, const char *id)
{
    for (struct watcher *w = t->head; w; w = w->next) {
        if (w->id[0] && strcmp(w->id, id) == 0) {
            return w;
        }
    }
    return NULL;
}

void watch_rpc_create_watcher(struct rpc_call *call)
{
    struct watcher *w = watcher_create(call);

    if (!w) {
        return;
    }
    w->queue = json_array();
    w->id[0] = 'w';
    if (!w->queue || random_id(w->id + 1, 16) < 0) {
        watcher_free(w);
        rpc_fail(call, CONNECT_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    rpc_reply(call, json_pack("{s:s}", "watcherId", w->id));
}

static struct watcher *polled_watcher(struct rpc_call *call)
{
    const char *id = "";
    struct watcher *w;

    if (json_util_get_string(call->msg, "watcherId", "watcher_id", &id) == -EINVAL) {
        rpc_fail(call, CONNECT_INVALID_ARGUMENT, "'watcherId' must be a string");
        return NULL;
    }
    w = watcher_by_id(call->agent->watches, id);
    if (!w) {
        rpc_fail(call, CONNECT_NOT_FOUND, "watcher with id %s not found", id);
    }
    return w;
}

void watch_rpc_get_watcher_events(struct rpc_call *call)
{
    struct watcher *w = polled_watcher(call);
    json_t *events, *fresh;

    if (!w) {
        return;
    }
    if (w->failure) {
        rpc_fail(call, CONNECT_INTERNAL, "%s", w->failure);
        return;
    }
    fresh = json_array();
    if (!fresh) {
        rpc_fail(call, CONNECT_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    events = w->queue;
    w->queue = fresh;
    rpc_reply(call, json_pack("{s:o}", "events", events));
}

void watch_rpc_remove_watcher(struct rpc_call *call)
{
    struct watcher *w = polled_watcher(call);

    if (!w) {
        return;
    }
    watcher_free(w);
    rpc_reply(call, json_object());
}
