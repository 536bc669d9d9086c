/*
 * space bench create [-n N]
 *
 * Cold-creates N sandboxes one after another through space-api (each killed
 * before the next), and prints p50/p90/p99 of the end-to-end create time seen
 * by the client, of each phase the node reports (clone, network, vmm start,
 * boot to agent ready), and of the control plane's own overhead (client time
 * minus the node's total: store writes, the operation, the controller hop),
 * then the RSS of one idle sandbox's VMM. Numbers, not assertions: results
 * go to docs/performance.md with this command line.
 *
 * space bench restore [-n N] [-t TEMPLATE]
 *
 * At the node (SPACE_NODE_SOCKET): waits for the template's snapshot, then
 * N cold boots ("snapshot": false) and N snapshot restores, interleaved so
 * both see the same machine load; p50/p90/p99 of each and their ratio, then
 * the PSS of idle restored sandboxes (docs/performance.md "Fast create").
 */
#include <errno.h>
#include <stdlib.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "basic/fileio.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "basic/time-util.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/help.h"
#include "shared/http-client.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, double p)
{
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[MIN(i, n - 1)];
}

static void report(const char *name, double *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    printf("  %-22s p50 %8.1f ms   p90 %8.1f ms   p99 %8.1f ms\n", name, pct(v, n, 0.5),
           pct(v, n, 0.9), pct(v, n, 0.99));
}

static long vmrss_kib(int pid)
{
    char path[64], *text = NULL;
    long kib = -1;
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    if (read_file(path, 1 << 16, &text, NULL) < 0) {
        return -1;
    }
    char *p = strstr(text, "VmRSS:");
    if (p) {
        sscanf(p + 6, "%ld", &kib);
    }
    free(text);
    return kib;
}

/* The VMM pid comes from the node, which only the host admin can ask. */
static int node_pid(const char *id)
{
    const char *sock = getenv("SPACE_NODE_SOCKET");
    char path[128];
    json_t *res = NULL;
    int status = 0, pid = -1;

    snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
    if (http_client_unix_json(sock && *sock ? sock : "/run/space/node.sock", "GET", path, NULL,
                              5 * USEC_PER_SEC, 1 << 20, &status, &res) >= 0 &&
        status == 200) {
        pid = (int)json_integer_value(json_object_get(res, "pid"));
    }
    json_decref(res);
    return pid;
}

static int bench_create(int argc, char **argv)
{
    static const char *const phases[] = { "clone", "network", "vmm", "boot", "total" };
    double *overhead = NULL;
    uint32_t n = 10;
    double *client = NULL, *phase[ARRAY_SIZE(phases)] = { 0 };
    json_t *body = json_pack("{s:s}", "template", "base");
    int c, r = 1;

    optind = 1;
    while ((c = getopt(argc, argv, "n:t:")) >= 0) {
        if (c == 'n' && parse_u32(optarg, &n) >= 0 && n > 0) {
            continue;
        }
        if (c == 't') {
            json_object_set_new(body, "template", json_string(optarg));
            continue;
        }
        fprintf(stderr, "usage: space bench create [-n N] [-t TEMPLATE]\n");
        json_decref(body);
        return 2;
    }
    client = calloc(n, sizeof(double));
    overhead = calloc(n, sizeof(double));
    for (size_t p = 0; p < ARRAY_SIZE(phases); p++) {
        phase[p] = calloc(n, sizeof(double));
    }
    printf("bench create: %u cold creates, one at a time\n", n);
    for (uint32_t i = 0; i < n; i++) {
        json_t *res = NULL, *op = NULL;
        char path[128];
        usec_t t0 = now_monotonic();
        if (client_call_ok("POST", "/v1/sandboxes", body, &res) < 0) {
            goto out;
        }
        snprintf(path, sizeof(path), "/v1/operations/%s/wait?timeout_s=600",
                 json_string_value(json_object_get(res, "operation_id")));
        if (client_call_ok("POST", path, NULL, &op) < 0) {
            json_decref(res);
            goto out;
        }
        client[i] = (double)(now_monotonic() - t0) / 1000.0;
        json_t *t = json_object_get(json_object_get(op, "result"), "node_timings_ms");
        if (!t) {
            fprintf(stderr, "space: create failed: %s\n",
                    json_string_value(json_object_get(op, "error")) ?: "no timings");
            json_decref(op);
            json_decref(res);
            goto out;
        }
        for (size_t p = 0; p < ARRAY_SIZE(phases); p++) {
            phase[p][i] = json_real_value(json_object_get(t, phases[p]));
        }
        overhead[i] = client[i] - phase[ARRAY_SIZE(phases) - 1][i];
        json_decref(op);
        const char *id = json_string_value(json_object_get(json_object_get(res, "sandbox"), "id"));
        snprintf(path, sizeof(path), "/v1/sandboxes/%s?wait=true", id);
        if (i == n - 1) {
            int pid = node_pid(id);
            sleep_usec(2 * USEC_PER_SEC); /* let the guest settle before measuring idle RSS */
            printf("  idle sandbox VMM RSS: %ld KiB (pid %d)\n", vmrss_kib(pid), pid);
        }
        (void)client_call_ok("DELETE", path, NULL, NULL);
        json_decref(res);
    }
    report("create (client)", client, n);
    report("control-plane overhead", overhead, n);
    for (size_t p = 0; p < ARRAY_SIZE(phases); p++) {
        char name[32];
        snprintf(name, sizeof(name), "phase %s", phases[p]);
        report(name, phase[p], n);
    }
    r = 0;
out:
    free(client);
    free(overhead);
    for (size_t p = 0; p < ARRAY_SIZE(phases); p++) {
        free(phase[p]);
    }
    json_decref(body);
    return r;
}

/* ---- space bench restore: cold boot vs snapshot restore, in one run, at the node ---- */

static const char *node_socket(void)
{
    const char *sock = getenv("SPACE_NODE_SOCKET");
    return sock && *sock ? sock : "/run/space/node.sock";
}

static int node_call(const char *method, const char *path, json_t *body, json_t **ret)
{
    int status = 0;
    json_t *res = NULL;
    int r = http_client_unix_json(node_socket(), method, path, body, 600 * USEC_PER_SEC, 1 << 20,
                                  &status, &res);
    if (r >= 0 && (status < 200 || status >= 300)) {
        fprintf(stderr, "space: node %s %s: %d %s\n", method, path, status,
                json_string_value(json_object_get(res, "message")) ?: "");
        r = -EIO;
    }
    if (r < 0 || !ret) {
        json_decref(res);
    } else {
        *ret = res;
    }
    return r;
}

/* Waits until the node has the template's snapshot ready (listing starts its build). */
static int wait_snapshot(const char *template_name)
{
    usec_t deadline = now_monotonic() + 900 * USEC_PER_SEC;
    while (now_monotonic() < deadline) {
        json_t *res = NULL, *t;
        size_t i;
        const char *state = NULL;
        if (node_call("GET", "/v1/templates", NULL, &res) < 0) {
            return -EIO;
        }
        json_array_foreach (json_object_get(res, "templates"), i, t) {
            if (strcmp(json_string_value(json_object_get(t, "name")) ?: "", template_name) == 0) {
                state = json_string_value(json_object_get(t, "snapshot"));
            }
        }
        bool ready = state && strcmp(state, "ready") == 0;
        bool off = !state || strcmp(state, "none") == 0;
        json_decref(res);
        if (ready) {
            return 0;
        }
        if (off) {
            fprintf(stderr, "space: template '%s' has no snapshot (node --snapshots off?)\n",
                    template_name);
            return -EOPNOTSUPP;
        }
        sleep_usec(500 * USEC_PER_MSEC);
    }
    return -ETIMEDOUT;
}

/* Pss and Rss of pid in KiB, from /proc/<pid>/smaps_rollup. */
static int smaps_kib(int pid, long *pss, long *rss)
{
    char path[64], *text = NULL;
    snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", pid);
    if (pid <= 0 || read_file(path, 1 << 16, &text, NULL) < 0) {
        return -ENOENT;
    }
    char *p = strstr(text, "\nPss:"), *q = strstr(text, "\nRss:");
    *pss = *rss = -1;
    if (p) {
        sscanf(p + 5, "%ld", pss);
    }
    if (q) {
        sscanf(q + 5, "%ld", rss);
    }
    free(text);
    return 0;
}

/* One create at the node: the client's time in ms, the node's vmm and boot phases. */
static int node_create(json_t *body, char id[64], int *pid, double *ms, double *vmm, double *boot,
                       const char **mode)
{
    json_t *res = NULL;
    usec_t t0 = now_monotonic();
    int r = node_call("POST", "/v1/sandboxes", body, &res);
    if (r < 0) {
        return r;
    }
    *ms = (double)(now_monotonic() - t0) / 1000.0;
    json_t *t = json_object_get(res, "timings_ms");
    *vmm = json_real_value(json_object_get(t, "vmm"));
    *boot = json_real_value(json_object_get(t, "boot"));
    const char *m = json_string_value(json_object_get(t, "mode"));
    *mode = m && strcmp(m, "restore") == 0 ? "restore" : "boot";
    *pid = (int)json_integer_value(json_object_get(res, "pid"));
    snprintf(id, 64, "%s", json_string_value(json_object_get(res, "id")) ?: "");
    json_decref(res);
    return 0;
}

static void node_kill(const char *id)
{
    char path[128];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
    (void)node_call("DELETE", path, NULL, NULL);
}

#define PSS_SANDBOXES 4

static int bench_restore(int argc, char **argv)
{
    const char *template_name = "base";
    uint32_t n = 10;
    double *cold = NULL, *warm = NULL, *cold_boot = NULL, *warm_vmm = NULL, *warm_boot = NULL;
    char ids[PSS_SANDBOXES][64];
    int pids[PSS_SANDBOXES], c, r = 1;
    size_t live = 0;

    optind = 1;
    while ((c = getopt(argc, argv, "n:t:")) >= 0) {
        if (c == 'n' && parse_u32(optarg, &n) >= 0 && n > 0) {
            continue;
        }
        if (c == 't') {
            template_name = optarg;
            continue;
        }
        fprintf(stderr, "usage: space bench restore [-n N] [-t TEMPLATE]\n");
        return 2;
    }
    json_t *cold_body = json_pack("{s:s,s:b}", "template", template_name, "snapshot", 0);
    json_t *warm_body = json_pack("{s:s}", "template", template_name);
    cold = calloc(n, sizeof(double));
    warm = calloc(n, sizeof(double));
    cold_boot = calloc(n, sizeof(double));
    warm_vmm = calloc(n, sizeof(double));
    warm_boot = calloc(n, sizeof(double));
    if (!cold_body || !warm_body || !cold || !warm || !cold_boot || !warm_vmm || !warm_boot) {
        goto out;
    }
    if (wait_snapshot(template_name) < 0) {
        goto out;
    }
    printf("bench restore: %u cold boots and %u snapshot restores, interleaved, one at a time,\n"
           "  at the node (%s), each killed before the next\n",
           n, n, node_socket());
    for (uint32_t i = 0; i < n; i++) {
        char id[64];
        const char *mode;
        double vmm;
        int pid;
        if (node_create(cold_body, id, &pid, &cold[i], &vmm, &cold_boot[i], &mode) < 0) {
            goto out;
        }
        node_kill(id);
        if (node_create(warm_body, id, &pid, &warm[i], &warm_vmm[i], &warm_boot[i], &mode) < 0) {
            goto out;
        }
        node_kill(id);
        if (strcmp(mode, "restore") != 0) {
            fprintf(stderr, "space: create %u was not restored (mode %s)\n", i, mode);
            goto out;
        }
    }
    double cold50, warm50;
    report("cold boot (client)", cold, n);
    cold50 = pct(cold, n, 0.5);
    report("  boot to agent", cold_boot, n);
    report("restore (client)", warm, n);
    warm50 = pct(warm, n, 0.5);
    report("  restore vmm", warm_vmm, n);
    report("  resume to agent", warm_boot, n);
    printf("  ratio cold/restore at p50: %.1fx\n", warm50 > 0 ? cold50 / warm50 : 0.0);

    /* Memory: idle restored sandboxes share the snapshot's pages, so Pss is the cost. */
    for (live = 0; live < PSS_SANDBOXES; live++) {
        const char *mode;
        double ms, vmm, boot;
        if (node_create(warm_body, ids[live], &pids[live], &ms, &vmm, &boot, &mode) < 0) {
            goto out;
        }
    }
    sleep_usec(3 * USEC_PER_SEC);
    long pss_sum = 0, rss_sum = 0;
    for (size_t i = 0; i < live; i++) {
        long pss = 0, rss = 0;
        if (smaps_kib(pids[i], &pss, &rss) == 0) {
            pss_sum += pss;
            rss_sum += rss;
        }
    }
    printf("  idle restored sandbox VMM (%d at once, 3 s after create): PSS %ld KiB, RSS %ld KiB "
           "(mean)\n",
           PSS_SANDBOXES, pss_sum / PSS_SANDBOXES, rss_sum / PSS_SANDBOXES);
    r = 0;
out:
    for (size_t i = 0; i < live; i++) {
        node_kill(ids[i]);
    }
    json_decref(cold_body);
    json_decref(warm_body);
    free(cold);
    free(warm);
    free(cold_boot);
    free(warm_vmm);
    free(warm_boot);
    return r;
}

int cmd_bench(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "create") == 0) {
        return bench_create(argc - 1, argv + 1);
    }
    if (argc >= 2 && strcmp(argv[1], "restore") == 0) {
        return bench_restore(argc - 1, argv + 1);
    }
    return cli_usage(argc >= 2 && cli_help_arg(argv[1], true),
                     "usage: space bench create [-n N] | restore [-n N] [-t TEMPLATE]\n");
}
