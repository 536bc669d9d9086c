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
 */
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

int cmd_bench(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "create") == 0) {
        return bench_create(argc - 1, argv + 1);
    }
    return cli_usage(argc >= 2 && cli_help_arg(argv[1], true),
                     "usage: space bench create [-n N]\n");
}
