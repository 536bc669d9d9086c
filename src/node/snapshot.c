/*
 * Template snapshots: key, build, verify, load (snapshot.h).
 *
 * The registry holds one entry per (template, vcpus, memory) this node was
 * asked for, at most SNAPSHOT_SIZES_MAX per template: a new size past that
 * takes the place of the least recently used one that is not being built,
 * whose snapshot (memfd and directory) goes once the last restore holding it
 * lets go. One background thread works through the entries that need
 * preparing, one at a time (the machine is small, and a build boots a VM).
 * Preparing = find the snapshot of the current key on disk and verify it, or
 * build it; then load its memory into a sealed memfd. QEMU reopens that memfd
 * read-write (QEMU 7.2 opens a memory file O_RDWR even to map it private),
 * which the seals make harmless: no write, grow or shrink, ever, by anyone.
 */
#include "node/snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/fileio.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "node/netslot.h"
#include "shared/sandbox-id.h"
#include "shared/spawn.h"

#define SNAPSHOT_FORMAT "space-snapshot-v1"
/* How long the guest runs after its agent answered before the snapshot: boot-time work
 * (the agent's start, the kernel's deferred init) is done and the guest is idle. */
#define SNAPSHOT_SETTLE (1500 * USEC_PER_MSEC)
#define SNAPSHOT_RETRY (60 * USEC_PER_SEC)
#define SNAPSHOT_EXIT_WAIT_SEC 30

struct snapshot {
    unsigned refs; /* under registry_lock */
    bool evicted;  /* its entry took another size: the last unref removes dir */
    char dir[PATH_MAX];
    int memory_fd;
};

enum entry_state { ENTRY_PENDING, ENTRY_BUILDING, ENTRY_READY, ENTRY_FAILED };

struct entry {
    struct entry *next;
    const struct vm_host *host;
    char template_name[64];
    unsigned vcpus, memory_mib;
    enum entry_state state;
    struct snapshot *snap; /* READY */
    char key[65];          /* of snap */
    usec_t retry_at;       /* FAILED */
    usec_t used_at;        /* the last snapshot_get(): the least recent is evicted */
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t worker_done = PTHREAD_COND_INITIALIZER;
static struct entry *entries;
static bool worker_running;
static bool exiting; /* the node is exiting: the worker stops after its current step */
static bool atexit_registered;
static char qemu_version[128];

static const char *const state_names[] = {
    [ENTRY_PENDING] = "building",
    [ENTRY_BUILDING] = "building",
    [ENTRY_READY] = "ready",
    [ENTRY_FAILED] = "failed",
};

static void hex_encode(const unsigned char *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

/* First line of `qemu-system-x86_64 --version`, once per process: part of every key. */
static const char *snapshot_qemu_version(void)
{
    pthread_mutex_lock(&registry_lock);
    bool known = qemu_version[0] != '\0';
    pthread_mutex_unlock(&registry_lock);
    if (!known) {
        const char *argv[] = { "qemu-system-x86_64", "--version", NULL };
        char *out = NULL;
        if (spawn_run(argv, -1, NULL, &out, 4096) == 0 && out) {
            out[strcspn(out, "\n")] = '\0';
            pthread_mutex_lock(&registry_lock);
            snprintf(qemu_version, sizeof(qemu_version), "%s", out);
            pthread_mutex_unlock(&registry_lock);
        }
        free(out);
    }
    return qemu_version[0] ? qemu_version : "unknown";
}

/* The key of a snapshot of the template in tdir at this size (file comment). */
static int snapshot_key(const struct vm_host *host, const char *tdir, unsigned vcpus,
                        unsigned memory_mib, char out[65])
{
    char path[PATH_MAX + 32], *meta = NULL, params[512];
    unsigned char md[32];
    unsigned md_len = 0;
    size_t len = 0;
    int r;

    snprintf(path, sizeof(path), "%s/template.json", tdir);
    r = read_file(path, 1 << 20, &meta, &len);
    if (r < 0) {
        return r;
    }
    snprintf(params, sizeof(params), "%s\n%s\nvcpus=%u memory=%u accel=%s tb=%u args=%s\n",
             SNAPSHOT_FORMAT, snapshot_qemu_version(), vcpus, memory_mib,
             runtime_accel_to_string(host->accel), RUNTIME_TB_SIZE_DEFAULT_MIB,
             NETSLOT_KERNEL_IP_ARG);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    r = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) &&
                EVP_DigestUpdate(ctx, params, strlen(params)) && EVP_DigestUpdate(ctx, meta, len) &&
                EVP_DigestFinal_ex(ctx, md, &md_len)
            ? 0
            : -ENOMEM;
    EVP_MD_CTX_free(ctx);
    free(meta);
    if (r == 0) {
        hex_encode(md, md_len, out);
    }
    return r;
}

struct digest_walk {
    EVP_MD_CTX *ctx;
    int copy_to;
};

static int digest_page(const uint8_t *page, size_t len, off_t at, void *userdata)
{
    struct digest_walk *w = userdata;
    uint64_t where = (uint64_t)at;

    if (!EVP_DigestUpdate(w->ctx, &where, sizeof(where)) || !EVP_DigestUpdate(w->ctx, page, len)) {
        return -ENOMEM;
    }
    return w->copy_to >= 0 ? pwrite_all(w->copy_to, page, len, at) : 0;
}

/*
 * SHA-256 of a file's content that does not depend on how sparse it is: the
 * offset and bytes of every page that is not all zero, then the size. With
 * copy_to >= 0 those pages are also written there (at the same offsets).
 */
static int digest_file(int fd, int copy_to, uint64_t *ret_size, char hex[65])
{
    unsigned char md[32];
    unsigned md_len = 0;
    struct stat st;
    struct digest_walk w = { .ctx = EVP_MD_CTX_new(), .copy_to = copy_to };
    int r;

    if (fstat(fd, &st) < 0) {
        r = -errno;
        goto out;
    }
    uint64_t size = (uint64_t)st.st_size;
    if (!w.ctx || !EVP_DigestInit_ex(w.ctx, EVP_sha256(), NULL)) {
        r = -ENOMEM;
        goto out;
    }
    if (copy_to >= 0 && ftruncate(copy_to, (off_t)size) < 0) {
        r = -errno;
        goto out;
    }
    r = for_each_nonzero_page(fd, size, digest_page, &w);
    if (r < 0) {
        goto out;
    }
    if (!EVP_DigestUpdate(w.ctx, &size, sizeof(size)) || !EVP_DigestFinal_ex(w.ctx, md, &md_len)) {
        r = -ENOMEM;
        goto out;
    }
    hex_encode(md, md_len, hex);
    *ret_size = size;
out:
    EVP_MD_CTX_free(w.ctx);
    return r;
}

static int digest_path(const char *path, uint64_t *ret_size, char hex[65])
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    int r = digest_file(fd, -EBADF, ret_size, hex);
    close_safe(fd);
    return r;
}

int snapshot_file_digest(const char *path, uint64_t *ret_size, char hex[65])
{
    return digest_path(path, ret_size, hex);
}

static const char *const snapshot_files[] = { "vmstate", "memory", "rootfs.ext4" };

int snapshot_manifest_write(const char *dir, const char *key, const char *template_name,
                            unsigned vcpus, unsigned memory_mib)
{
    char path[PATH_MAX + 32], hex[65];
    json_t *files = json_object();
    int r = files ? 0 : -ENOMEM;

    for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(snapshot_files); i++) {
        uint64_t size = 0;
        snprintf(path, sizeof(path), "%s/%s", dir, snapshot_files[i]);
        r = digest_path(path, &size, hex);
        if (r >= 0) {
            json_object_set_new(files, snapshot_files[i],
                                json_pack("{s:I,s:s}", "size", (json_int_t)size, "sha256", hex));
        }
    }
    json_t *m = r >= 0 ? json_pack("{s:s,s:s,s:s,s:i,s:i,s:O}", "format", SNAPSHOT_FORMAT, "key",
                                   key, "template", template_name, "vcpus", (int)vcpus,
                                   "memory_mib", (int)memory_mib, "files", files)
                       : NULL;
    char *text = m ? json_dumps(m, JSON_INDENT(2)) : NULL;
    if (r >= 0) {
        snprintf(path, sizeof(path), "%s/manifest.json", dir);
        r = text ? write_file_atomic(path, text, strlen(text)) : -ENOMEM;
    }
    free(text);
    json_decref(m);
    json_decref(files);
    return r;
}

int snapshot_verify(const char *dir, const char *key, int *ret_fd, const char **why)
{
    char path[PATH_MAX + 32], hex[65], *text = NULL;
    json_t *m = NULL;
    int memfd = -EBADF, r;

    *why = NULL;
    snprintf(path, sizeof(path), "%s/manifest.json", dir);
    r = read_file(path, 1 << 16, &text, NULL);
    if (r < 0) {
        *why = "no manifest";
        return r == -ENOENT ? -ENOENT : -EBADMSG;
    }
    json_error_t err;
    m = json_loads(text, 0, &err);
    free(text);
    const char *format = json_string_value(json_object_get(m, "format"));
    const char *mkey = json_string_value(json_object_get(m, "key"));
    json_t *files = json_object_get(m, "files");
    if (!format || strcmp(format, SNAPSHOT_FORMAT) != 0 || !mkey || strcmp(mkey, key) != 0 ||
        !json_is_object(files)) {
        *why = "manifest unreadable or of another key";
        r = -EBADMSG;
        goto out;
    }
    for (size_t i = 0; i < ARRAY_SIZE(snapshot_files); i++) {
        json_t *f = json_object_get(files, snapshot_files[i]);
        const char *want = json_string_value(json_object_get(f, "sha256"));
        json_int_t want_size = json_integer_value(json_object_get(f, "size"));
        uint64_t size = 0;
        bool is_memory = strcmp(snapshot_files[i], "memory") == 0;
        snprintf(path, sizeof(path), "%s/%s", dir, snapshot_files[i]);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || !want) {
            close_safe(fd);
            *why = "a file is missing";
            r = -EBADMSG;
            goto out;
        }
        if (is_memory) {
            memfd = memfd_create("space-snapshot-ram", MFD_CLOEXEC | MFD_ALLOW_SEALING);
            if (memfd < 0) {
                r = -errno;
                close_safe(fd);
                goto out;
            }
        }
        r = digest_file(fd, is_memory ? memfd : -EBADF, &size, hex);
        close_safe(fd);
        if (r < 0) {
            goto out;
        }
        if ((json_int_t)size != want_size || strcmp(hex, want) != 0) {
            *why = size != (uint64_t)want_size ? "a file has the wrong size (truncated?)"
                                               : "a checksum does not match";
            r = -EBADMSG;
            goto out;
        }
    }
    if (memfd < 0 ||
        fcntl(memfd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
        r = memfd < 0 ? -EBADMSG : -errno;
        goto out;
    }
    *ret_fd = TAKE_FD(memfd);
out:
    close_safe(memfd);
    json_decref(m);
    return r;
}

static bool node_exiting(void)
{
    pthread_mutex_lock(&registry_lock);
    bool r = exiting;
    pthread_mutex_unlock(&registry_lock);
    return r;
}

/* Boots the template with shared RAM, lets it settle, snapshots it into dir. */
static int build(const struct entry *e, const char *tdir, const char *dir)
{
    const struct vm_host *host = e->host;
    struct vm_create_result res = { 0 };
    char inst[PATH_MAX], from[PATH_MAX + 32], to[PATH_MAX + 32];
    struct vm *vm = NULL;
    int r;

    (void)tdir;
    r = vm_new(e->template_name, e->vcpus, e->memory_mib, &vm);
    if (r < 0) {
        return r;
    }
    r = vm_create_source(host, vm, &res);
    if (r < 0) {
        log_warning("snapshot of template '%s': %s", e->template_name,
                    res.error ? res.error : strerror(-r));
        free(res.error);
        vm_free(vm);
        return r;
    }
    r = node_exiting() ? -ECANCELED : 0;
    if (r >= 0) {
        sleep_usec(SNAPSHOT_SETTLE);
        r = runtime_pause(res.rt);
    }
    if (r >= 0) {
        r = runtime_snapshot(res.rt, dir);
    }
    /* Never resumed: the guest must not write to the memory the snapshot just took. */
    (void)runtime_stop(res.rt);
    res.rt = runtime_vm_free(res.rt);
    if (r >= 0) {
        r = vm_instance_dir(host, vm->rec.iid, inst, sizeof(inst));
    }
    if (r >= 0) {
        snprintf(from, sizeof(from), "%s/rootfs.ext4", inst);
        snprintf(to, sizeof(to), "%s/rootfs.ext4", dir);
        r = NERRNO(rename(from, to));
    }
    (void)vm_destroy(host, vm);
    vm_free(vm);
    return r;
}

/* Brings e to READY (or fails): the existing snapshot of its key, verified, or a new one. */
static int prepare(struct entry *e, char key[65], struct snapshot **ret)
{
    char tdir[PATH_MAX], dir[PATH_MAX + 128], tmp[PATH_MAX + 160], parent[PATH_MAX + 16];
    const char *why = NULL;
    int fd = -EBADF, r;

    r = vm_template_dir(e->host, e->template_name, tdir, sizeof(tdir));
    if (r >= 0) {
        r = snapshot_key(e->host, tdir, e->vcpus, e->memory_mib, key);
    }
    if (r < 0) {
        return r;
    }
    snprintf(parent, sizeof(parent), "%s/snapshots", tdir);
    snprintf(dir, sizeof(dir), "%s/%s", parent, key);
    snprintf(tmp, sizeof(tmp), "%s.tmp", dir);
    usec_t t = now_monotonic();
    r = snapshot_verify(dir, key, &fd, &why);
    if (r == -EBADMSG) {
        log_warning("snapshot '%s' of template '%s' is bad (%s): deleting and rebuilding it", dir,
                    e->template_name, why);
    }
    if (r < 0) {
        (void)rm_rf(dir);
        (void)rm_rf(tmp);
        r = mkdir_p(tmp, 0700);
        if (r >= 0) {
            log_info("building snapshot of template '%s' (%u vcpus, %u MiB)", e->template_name,
                     e->vcpus, e->memory_mib);
            t = now_monotonic();
            r = build(e, tdir, tmp);
        }
        if (r >= 0) {
            r = snapshot_manifest_write(tmp, key, e->template_name, e->vcpus, e->memory_mib);
        }
        if (r >= 0) {
            r = NERRNO(rename(tmp, dir));
        }
        if (r >= 0) {
            int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            r = pfd < 0 || fsync(pfd) < 0 ? -errno : 0;
            close_safe(pfd);
        }
        if (r >= 0) {
            r = snapshot_verify(dir, key, &fd, &why);
        }
        if (r < 0) {
            (void)rm_rf(tmp);
            return log_warning_errno(r, "snapshot of template '%s' failed%s%s: %m",
                                     e->template_name, why ? ": " : "", why ? why : "");
        }
        log_info("snapshot of template '%s' built in %.1f s: %s", e->template_name,
                 (double)(now_monotonic() - t) / USEC_PER_SEC, dir);
    } else {
        log_info("snapshot of template '%s' verified in %.1f s: %s", e->template_name,
                 (double)(now_monotonic() - t) / USEC_PER_SEC, dir);
    }
    struct snapshot *s = calloc(1, sizeof(*s));
    if (!s) {
        close_safe(fd);
        return -ENOMEM;
    }
    s->refs = 1;
    s->memory_fd = fd;
    snprintf(s->dir, sizeof(s->dir), "%s", dir);
    *ret = s;
    return 0;
}

static struct snapshot *snapshot_unref_locked(struct snapshot *s)
{
    if (s && --s->refs == 0) {
        close_safe(s->memory_fd);
        free(s);
    }
    return NULL;
}

/*
 * At exit: a build in progress has a VM of ours running that is no sandbox;
 * wait for the worker to stop and remove it (at most 30 s), so
 * a node that exits leaves no builder VM behind (a kill -9 leaves a CREATING
 * record, which the next start removes).
 */
static void snapshot_atexit(void)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += SNAPSHOT_EXIT_WAIT_SEC;
    pthread_mutex_lock(&registry_lock);
    exiting = true;
    /* Bounded: a worker stuck (a lock another process holds, a wedged VMM) must not keep
     * the node from exiting; its CREATING record is removed at the next start. */
    while (worker_running) {
        if (pthread_cond_timedwait(&worker_done, &registry_lock, &deadline) == ETIMEDOUT) {
            log_warning("exiting with a snapshot build still running: the next start removes it");
            break;
        }
    }
    pthread_mutex_unlock(&registry_lock);
}

static void *worker(void *arg)
{
    (void)arg;
    for (;;) {
        struct entry *e;
        pthread_mutex_lock(&registry_lock);
        for (e = entries; e && e->state != ENTRY_PENDING; e = e->next) {
        }
        if (!e || exiting) {
            worker_running = false;
            pthread_cond_broadcast(&worker_done);
            pthread_mutex_unlock(&registry_lock);
            return NULL;
        }
        e->state = ENTRY_BUILDING;
        pthread_mutex_unlock(&registry_lock);

        /* Entries are never freed, so e stays valid without the lock; only this thread
         * changes an entry in BUILDING. */
        struct snapshot *s = NULL;
        char key[65] = "";
        int r = prepare(e, key, &s);

        pthread_mutex_lock(&registry_lock);
        e->snap = snapshot_unref_locked(e->snap);
        if (r >= 0) {
            e->snap = s;
            memcpy(e->key, key, sizeof(e->key));
            e->state = ENTRY_READY;
        } else {
            e->state = ENTRY_FAILED;
            e->retry_at = now_monotonic() + SNAPSHOT_RETRY;
        }
        pthread_mutex_unlock(&registry_lock);
    }
}

/*
 * Under registry_lock: the entry for this size, made when missing (NULL on OOM, or with
 * SNAPSHOT_SIZES_MAX of the template all being built). A template at its bound gives its
 * least recently used entry to the new size; that one's snapshot is handed to *evicted
 * (the caller unrefs it outside the lock).
 */
static struct entry *entry_find(const struct vm_host *host, const char *template_name,
                                unsigned vcpus, unsigned memory_mib, bool make,
                                struct snapshot **evicted)
{
    struct entry *e, *lru = NULL;
    unsigned n = 0;
    for (e = entries; e; e = e->next) {
        if (strcmp(e->template_name, template_name) != 0) {
            continue;
        }
        if (e->vcpus == vcpus && e->memory_mib == memory_mib) {
            return e;
        }
        n++;
        /* PENDING is fine: the worker picks it up under the lock, after this. */
        if (e->state != ENTRY_BUILDING && (!lru || e->used_at < lru->used_at)) {
            lru = e;
        }
    }
    if (!make || strlen(template_name) >= sizeof(e->template_name)) {
        return NULL;
    }
    if (n >= SNAPSHOT_SIZES_MAX) {
        if (!lru) {
            return NULL;
        }
        log_info("snapshots of template '%s': %u vcpus, %u MiB takes the place of %u vcpus, %u "
                 "MiB (least recently used)",
                 template_name, vcpus, memory_mib, lru->vcpus, lru->memory_mib);
        if (lru->snap) {
            lru->snap->evicted = true;
            *evicted = lru->snap;
            lru->snap = NULL;
        }
        lru->vcpus = vcpus;
        lru->memory_mib = memory_mib;
        lru->state = ENTRY_FAILED; /* retry_at 0: due now */
        lru->retry_at = 0;
        lru->key[0] = '\0';
        return lru;
    }
    e = calloc(1, sizeof(*e));
    if (!e) {
        return NULL;
    }
    e->host = host;
    snprintf(e->template_name, sizeof(e->template_name), "%s", template_name);
    e->vcpus = vcpus;
    e->memory_mib = memory_mib;
    e->state = ENTRY_FAILED; /* retry_at 0: due now */
    e->next = entries;
    entries = e;
    return e;
}

/* Under registry_lock: moves e to PENDING and makes sure the worker runs. */
static void entry_schedule(struct entry *e)
{
    e->state = ENTRY_PENDING;
    e->snap = snapshot_unref_locked(e->snap);
    if (exiting) {
        e->state = ENTRY_FAILED;
        return;
    }
    if (!atexit_registered) {
        atexit_registered = atexit(snapshot_atexit) == 0;
    }
    if (!worker_running) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, worker, NULL) == 0) {
            worker_running = true;
        } else {
            e->state = ENTRY_FAILED;
            e->retry_at = now_monotonic() + SNAPSHOT_RETRY;
        }
        pthread_attr_destroy(&attr);
    }
}

int snapshot_get(const struct vm_host *host, const char *template_name, unsigned vcpus,
                 unsigned memory_mib, struct snapshot **ret)
{
    char tdir[PATH_MAX], key[65];
    int r;

    if (!host->snapshots) {
        return -EOPNOTSUPP;
    }
    r = vm_template_dir(host, template_name, tdir, sizeof(tdir));
    if (r < 0) {
        return r;
    }
    /* The key of what is on disk now: a rebuilt template has a new one. */
    r = snapshot_key(host, tdir, vcpus, memory_mib, key);
    if (r < 0) {
        return r;
    }
    struct snapshot *evicted = NULL;
    pthread_mutex_lock(&registry_lock);
    struct entry *e = entry_find(host, template_name, vcpus, memory_mib, true, &evicted);
    /* No entry (out of memory, or every one of the template's being built): a cold boot. */
    r = -EAGAIN;
    if (e) {
        e->used_at = now_monotonic();
    }
    if (e && e->state == ENTRY_READY && strcmp(e->key, key) == 0) {
        e->snap->refs++;
        *ret = e->snap;
        r = 0;
    } else if (e && (e->state == ENTRY_READY ||
                     (e->state == ENTRY_FAILED && now_monotonic() >= e->retry_at))) {
        entry_schedule(e);
    }
    pthread_mutex_unlock(&registry_lock);
    snapshot_unref(evicted);
    return r;
}

void snapshot_prepare(const struct vm_host *host, const char *template_name, unsigned vcpus,
                      unsigned memory_mib)
{
    struct snapshot *s = NULL;
    if (snapshot_get(host, template_name, vcpus, memory_mib, &s) == 0) {
        snapshot_unref(s);
    }
}

struct snapshot *snapshot_unref(struct snapshot *s)
{
    if (!s) {
        return NULL;
    }
    pthread_mutex_lock(&registry_lock);
    bool last = --s->refs == 0;
    pthread_mutex_unlock(&registry_lock);
    if (last) {
        /* An evicted snapshot is nobody's any more: off the disk too (outside the lock). */
        if (s->evicted) {
            log_info("snapshot '%s' evicted (more than %d sizes): removing it", s->dir,
                     SNAPSHOT_SIZES_MAX);
            (void)rm_rf(s->dir);
        }
        close_safe(s->memory_fd);
        free(s);
    }
    return NULL;
}

const char *snapshot_dir(const struct snapshot *s)
{
    return s->dir;
}

int snapshot_memory_fd(const struct snapshot *s)
{
    return s->memory_fd;
}

void snapshot_suspect(struct snapshot *s)
{
    pthread_mutex_lock(&registry_lock);
    for (struct entry *e = entries; e; e = e->next) {
        if (e->state == ENTRY_READY && e->snap == s) {
            entry_schedule(e); /* prepare() verifies it again before anyone restores it */
        }
    }
    pthread_mutex_unlock(&registry_lock);
}

const char *snapshot_status(const char *template_name, unsigned vcpus, unsigned memory_mib)
{
    pthread_mutex_lock(&registry_lock);
    struct entry *e = entry_find(NULL, template_name, vcpus, memory_mib, false, NULL);
    const char *s = e ? state_names[e->state] : "none";
    pthread_mutex_unlock(&registry_lock);
    return s;
}

json_t *snapshot_sizes_to_json(const char *template_name)
{
    json_t *list = json_array();
    const struct entry *order[SNAPSHOT_SIZES_MAX];
    size_t n = 0;

    pthread_mutex_lock(&registry_lock);
    for (const struct entry *e = entries; e && n < SNAPSHOT_SIZES_MAX; e = e->next) {
        if (strcmp(e->template_name, template_name) != 0) {
            continue;
        }
        size_t i = n++;
        for (; i > 0 && order[i - 1]->used_at < e->used_at; i--) {
            order[i] = order[i - 1];
        }
        order[i] = e;
    }
    for (size_t i = 0; list && i < n; i++) {
        json_array_append_new(list, json_pack("{s:i, s:i, s:s}", "vcpus", (int)order[i]->vcpus,
                                              "memory_mb", (int)order[i]->memory_mib, "status",
                                              state_names[order[i]->state]));
    }
    pthread_mutex_unlock(&registry_lock);
    return list ? list : json_array();
}

struct kept {
    char name[80];
    time_t made;
};

/* One template's snapshots/ (snapshot_cleanup()). */
static int cleanup_template(const struct vm_host *host, const char *template_name)
{
    char tdir[PATH_MAX], parent[PATH_MAX + 16], dir[PATH_MAX + 128], path[PATH_MAX + 160];
    char key[65], *text = NULL;
    struct kept kept[SNAPSHOT_SIZES_MAX + 1];
    size_t n_kept = 0;
    struct dirent *de;
    int removed = 0;

    if (vm_template_dir(host, template_name, tdir, sizeof(tdir)) < 0) {
        return 0;
    }
    snprintf(parent, sizeof(parent), "%s/snapshots", tdir);
    DIR *d = opendir(parent);
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.') {
            continue;
        }
        snprintf(dir, sizeof(dir), "%s/%s", parent, de->d_name);
        snprintf(path, sizeof(path), "%s/manifest.json", dir);
        json_t *m = read_file(path, 1 << 16, &text, NULL) >= 0 ? json_loads(text, 0, NULL) : NULL;
        free(text);
        text = NULL;
        json_int_t vcpus = json_integer_value(json_object_get(m, "vcpus"));
        json_int_t memory = json_integer_value(json_object_get(m, "memory_mib"));
        json_decref(m);
        struct stat st;
        bool current = vcpus > 0 && vcpus <= 64 && memory > 0 && memory <= (1 << 20) &&
                       snapshot_key(host, tdir, (unsigned)vcpus, (unsigned)memory, key) >= 0 &&
                       strcmp(key, de->d_name) == 0 && stat(path, &st) >= 0;
        if (current) {
            /* Newest first; the one pushed past the bound goes. */
            size_t i = n_kept < ARRAY_SIZE(kept) ? n_kept++ : n_kept - 1;
            for (; i > 0 && kept[i - 1].made < st.st_mtime; i--) {
                kept[i] = kept[i - 1];
            }
            kept[i].made = st.st_mtime;
            snprintf(kept[i].name, sizeof(kept[i].name), "%s", de->d_name);
            if (n_kept <= SNAPSHOT_SIZES_MAX) {
                continue;
            }
            n_kept--;
            snprintf(dir, sizeof(dir), "%s/%s", parent, kept[n_kept].name);
        }
        log_info("removing snapshot '%s' of template '%s': %s", dir, template_name,
                 current ? "more sizes than SNAPSHOT_SIZES_MAX" : "stale (no current key)");
        if (rm_rf(dir) >= 0) {
            removed++;
        }
    }
    if (d) {
        closedir(d);
    }
    return removed;
}

int snapshot_cleanup(const struct vm_host *host)
{
    char path[PATH_MAX];
    struct dirent *de;
    int removed = 0;

    snprintf(path, sizeof(path), "%s/templates", host->data_dir);
    DIR *d = opendir(path);
    while (d && (de = readdir(d))) {
        if (de->d_name[0] != '.' && template_name_is_valid(de->d_name)) {
            removed += cleanup_template(host, de->d_name);
        }
    }
    if (d) {
        closedir(d);
    }
    return removed;
}

int snapshot_key_of(const struct vm_host *host, const char *template_name, unsigned vcpus,
                    unsigned memory_mib, char out[65])
{
    char tdir[PATH_MAX];
    int r = vm_template_dir(host, template_name, tdir, sizeof(tdir));
    return r < 0 ? r : snapshot_key(host, tdir, vcpus, memory_mib, out);
}
