/*
 * space capacity [--json] — what each node has promised and what is left (GET /v1/capacity:
 * memory, vCPUs, sandboxes against the node's budgets, and its data disk). Pointed at a node's
 * own socket it shows that node's answer alone.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/help.h"

static long long num(json_t *o, const char *section, const char *key)
{
    return json_integer_value(json_object_get(json_object_get(o, section), key));
}

static void print_node(json_t *n)
{
    const char *name = json_string_value(json_object_get(n, "node")) ?: "node";

    if (json_is_false(json_object_get(n, "reachable"))) {
        printf("%s: unreachable: %s\n", name,
               json_string_value(json_object_get(n, "error")) ?: "no answer");
        return;
    }
    printf("%s:\n", name);
    printf("  memory MiB  budget %lld, sandboxes %lld, warm pool %lld, free %lld (guest RAM + "
           "%lld VMM overhead each)\n",
           num(n, "memory_mib", "budget"), num(n, "memory_mib", "sandboxes"),
           num(n, "memory_mib", "pool"), num(n, "memory_mib", "free"),
           (long long)json_integer_value(json_object_get(n, "vmm_overhead_mib")));
    printf("  vCPUs       budget %lld, sandboxes %lld, warm pool %lld, free %lld\n",
           num(n, "vcpus", "budget"), num(n, "vcpus", "sandboxes"), num(n, "vcpus", "pool"),
           num(n, "vcpus", "free"));
    printf("  sandboxes   %lld of %lld (plus %lld warm-pool members)\n",
           num(n, "sandboxes", "count"), num(n, "sandboxes", "max"),
           num(n, "sandboxes", "pool_members"));
    printf("  disk        %.1f GiB free of %.1f GiB\n",
           (double)num(n, "disk", "free_bytes") / (1 << 30),
           (double)num(n, "disk", "total_bytes") / (1 << 30));
}

int cmd_capacity(int argc, char **argv)
{
    static const char usage[] = "usage: space capacity [--json]\n";
    bool as_json = argc == 2 && strcmp(argv[1], "--json") == 0;
    json_t *res = NULL, *n;
    size_t i;

    if (argc >= 2 && cli_help_arg(argv[1], false)) {
        return cli_usage(true, usage);
    }
    if (argc > 2 || (argc == 2 && !as_json)) {
        return cli_usage(false, usage);
    }
    if (client_call_ok("GET", "/v1/capacity", NULL, &res) < 0) {
        return 1;
    }
    if (as_json) {
        char *text = json_dumps(res, JSON_INDENT(2) | JSON_SORT_KEYS);
        puts(text ? text : "{}");
        free(text);
    } else if (!json_is_array(json_object_get(res, "nodes"))) {
        print_node(res); /* a node's own socket */
    } else {
        json_array_foreach (json_object_get(res, "nodes"), i, n) {
            print_node(n);
        }
        printf("api: %lld of %lld sandboxes\n", num(res, "api", "sandboxes"),
               num(res, "api", "max_sandboxes"));
    }
    json_decref(res);
    return 0;
}
