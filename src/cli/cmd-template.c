/*
 * space template build [NAME] | ls — recipes live in <share>/templates/<name>; ls shows each
 * template's default size (templates/<name>/size) and the sizes it has snapshots of.
 * space template network set NAME [--internet] [--allow E]... [--deny E]... [--inject RULE]...
 * space template network get|rm NAME — the template's default egress policy
 * (PUT/GET/DELETE /v1/templates/{name}/network): a sandbox created from it without a
 * policy of its own gets this one. set replaces it whole (no flag: deny everything).
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "basic/macro.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/help.h"
#include "shared/sandbox-id.h"
#include "shared/spawn.h"

int template_build(const char *name)
{
    char share[PATH_MAX], agent[PATH_MAX], script[PATH_MAX + 64], recipe[PATH_MAX + 64],
        out[PATH_MAX + 64];
    const char *cache = getenv("SPACE_CACHE_DIR");
    pid_t pid;
    int r;

    if (!template_name_is_valid(name)) {
        fprintf(stderr, "space: invalid template name '%s'\n", name);
        return 2;
    }
    if (client_find_share(share, sizeof(share)) < 0) {
        fprintf(stderr, "space: cannot find the template recipes (set SPACE_SHARE_DIR)\n");
        return 1;
    }
    if (client_find_agent(agent, sizeof(agent)) < 0) {
        fprintf(stderr, "space: cannot find space-agent (set SPACE_AGENT)\n");
        return 1;
    }
    snprintf(script, sizeof(script), "%s/tools/template-build.sh", share);
    snprintf(recipe, sizeof(recipe), "%s/templates/%s", share, name);
    snprintf(out, sizeof(out), "%s/templates/%s", client_data_dir(), name);
    if (access(recipe, R_OK) < 0) {
        fprintf(stderr, "space: no recipe for template '%s' in '%s/templates'\n", name, share);
        return 1;
    }
    const char *argv[] = {
        "bash",    script, "--recipe", recipe,
        "--agent", agent,  "--cache",  cache && *cache ? cache : "/var/cache/space",
        "--out",   out,    NULL
    };
    /* Progress goes to stderr so `space up` keeps stdout for machine-readable output. */
    struct spawn_opts opts = {
        .argv = argv, .stdin_fd = -1, .stdout_fd = 2, .stderr_fd = 2, .netns_fd = -1
    };
    r = spawn_start(&opts, &pid);
    if (r < 0) {
        fprintf(stderr, "space: cannot run '%s': %s\n", script, strerror(-r));
        return 1;
    }
    r = spawn_wait(pid);
    if (r != 0) {
        fprintf(stderr, "space: template build of '%s' failed\n", name);
        return 1;
    }
    return 0;
}

static const char network_usage[] =
    "usage: space template network set NAME [--internet] [--allow ENTRY]... [--deny ENTRY]...\n"
    "                                       [--inject RULE_JSON]...\n"
    "       space template network get|rm NAME\n";

static void print_json(json_t *j)
{
    char *text = json_dumps(j, JSON_INDENT(2));
    if (text) {
        puts(text);
        free(text);
    }
}

int cmd_template_network(int argc, char **argv)
{
    static const struct option opts[] = {
        { "internet", no_argument, NULL, CLI_OPT_INTERNET },
        { "allow", required_argument, NULL, CLI_OPT_ALLOW },
        { "deny", required_argument, NULL, CLI_OPT_DENY },
        { "inject", required_argument, NULL, CLI_OPT_INJECT },
        { "help", no_argument, NULL, 'h' },
        {},
    };
    json_t *policy = NULL, *res = NULL;
    const char *verb = argc >= 2 ? argv[1] : "";
    char path[128];
    int c, r = 1;

    if (argc < 2 || cli_help_arg(argv[1], true)) {
        return cli_usage(argc >= 2, network_usage);
    }
    if (strcmp(verb, "set") != 0 && strcmp(verb, "get") != 0 && strcmp(verb, "rm") != 0) {
        return cli_usage(false, network_usage);
    }
    optind = 2;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
        if (c == 'h' || strcmp(verb, "set") != 0 || cli_policy_option(c, optarg, &policy) < 0) {
            r = cli_usage(c == 'h', network_usage);
            goto out;
        }
    }
    if (argc - optind != 1 || !template_name_is_valid(argv[optind])) {
        if (argc - optind == 1) {
            fprintf(stderr, "space: invalid template name '%s'\n", argv[optind]);
            r = 2;
        } else {
            r = cli_usage(false, network_usage);
        }
        goto out;
    }
    snprintf(path, sizeof(path), "/v1/templates/%s/network", argv[optind]);
    if (strcmp(verb, "rm") == 0) {
        r = client_call_ok("DELETE", path, NULL, NULL) < 0 ? 1 : 0;
        goto out;
    }
    if (strcmp(verb, "set") == 0 && !policy &&
        !(policy = json_pack("{s:b, s:[], s:[]}", "internet", 0, "allow", "deny"))) {
        goto out;
    }
    if (client_call_ok(policy ? "PUT" : "GET", path, policy, &res) < 0) {
        goto out;
    }
    print_json(json_object_get(res, "network"));
    r = 0;
out:
    json_decref(policy);
    json_decref(res);
    return r;
}

int cmd_template(int argc, char **argv)
{
    static const char usage[] = "usage: space template build [NAME] | ls | network ...\n";

    if (argc >= 2 && strcmp(argv[1], "network") == 0) {
        return cmd_template_network(argc - 1, argv + 1);
    }
    if (argc >= 3 && cli_help_arg(argv[2], false)) {
        return cli_usage(true, usage);
    }
    if (argc >= 2 && strcmp(argv[1], "build") == 0) {
        return template_build(argc >= 3 ? argv[2] : "base");
    }
    if (argc >= 2 && strcmp(argv[1], "ls") == 0) {
        json_t *res = NULL, *t;
        size_t i;
        if (client_call_ok("GET", "/v1/templates", NULL, &res) < 0) {
            return 1;
        }
        /* NAME, default size, built at, then every size with a snapshot: 2x768:ready. */
        printf("NAME\tVCPUS\tMEMORY_MB\tBUILT_AT\tSNAPSHOTS\n");
        json_array_foreach (json_object_get(res, "templates"), i, t) {
            json_t *sz;
            size_t k;
            printf("%s\t%d\t%d\t%s\t", json_string_value(json_object_get(t, "name")) ?: "",
                   (int)json_integer_value(json_object_get(t, "vcpus")),
                   (int)json_integer_value(json_object_get(t, "memory_mb")),
                   json_string_value(json_object_get(t, "built_at")) ?: "");
            json_array_foreach (json_object_get(t, "snapshots"), k, sz) {
                printf("%s%dx%d:%s", k ? "," : "",
                       (int)json_integer_value(json_object_get(sz, "vcpus")),
                       (int)json_integer_value(json_object_get(sz, "memory_mb")),
                       json_string_value(json_object_get(sz, "status")) ?: "");
            }
            printf("%s\n", json_array_size(json_object_get(t, "snapshots")) ? "" : "-");
        }
        json_decref(res);
        return 0;
    }
    return cli_usage(argc >= 2 && cli_help_arg(argv[1], true), usage);
}
