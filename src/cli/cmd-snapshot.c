/*
 * space snapshot create SANDBOX [--name N] [--kind full|disk] | ls [--sandbox ID] [--json] |
 * rm ID... | branch SANDBOX [-n N] [--timeout S]: snapshots of sandboxes (docs/architecture.md
 * "A sandbox's life"). create waits until the node committed the snapshot; a full one is what
 * a native create's "snapshot" branches new sandboxes from. branch does it in one go for a live
 * sandbox (POST /v1/sandboxes/{id}/branch: one snapshot, N sandboxes, the snapshot removed).
 * policy set|get|rm SANDBOX: its rolling snapshot policy (/v1/sandboxes/{id}/snapshot-policy).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/help.h"
#include "shared/sandbox-id.h"

static const char usage_text[] =
    "usage: space snapshot create SANDBOX [--name NAME] [--kind full|disk]\n"
    "       space snapshot ls [--sandbox SANDBOX] [--json]\n"
    "       space snapshot rm SNAPSHOT...\n"
    "       space snapshot branch SANDBOX [-n COUNT] [--timeout SECONDS]\n"
    "       space snapshot policy set SANDBOX [--disk-every S] [--full-every S]\n"
    "                                 [--tier all:S | --tier EVERY:FOR]... [--max-bytes N]\n"
    "       space snapshot policy get|rm SANDBOX\n"
    "A full snapshot (the default) holds memory and disk: new sandboxes are created from it.\n"
    "branch: COUNT (1-16, default 1) new sandboxes from one snapshot of a live one, taken and\n"
    "removed for it; prints their ids, one a line (a branch that failed: on stderr, exit 1).\n"
    "policy: rolling snapshots, a disk one every S seconds and/or a full one, thinned by tiers\n"
    "(all:S keeps every one for S seconds, EVERY:FOR one per EVERY seconds for FOR seconds;\n"
    "default all:3600 3600:86400 86400:604800), their bytes at most N (0: no bound of its own).\n"
    "ls shows SOURCE: user, or rolling (retention deletes only those).\n";

static int create(int argc, char **argv)
{
    static const struct option opts[] = {
        { "name", required_argument, NULL, 'n' },
        { "kind", required_argument, NULL, 'k' },
        { "help", no_argument, NULL, 'h' },
        { 0 },
    };
    json_t *body = json_object(), *res = NULL;
    char path[128];
    int c, r = 1;

    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'n' || c == 'k') {
            json_object_set_new(body, c == 'n' ? "name" : "kind", json_string(optarg));
        } else {
            json_decref(body);
            return cli_usage(c == 'h', usage_text);
        }
    }
    if (optind != argc - 1 || !sandbox_id_is_valid(argv[optind])) {
        json_decref(body);
        return cli_usage(false, usage_text);
    }
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/snapshots?wait=true", argv[optind]);
    if (client_call_ok("POST", path, body, &res) >= 0) {
        printf("%s %s %s\n", json_string_value(json_object_get(res, "id")),
               json_string_value(json_object_get(res, "kind")),
               json_string_value(json_object_get(res, "state")));
        r = 0;
    }
    json_decref(body);
    json_decref(res);
    return r;
}

static int list(int argc, char **argv)
{
    static const struct option opts[] = {
        { "sandbox", required_argument, NULL, 's' },
        { "json", no_argument, NULL, 'j' },
        { "help", no_argument, NULL, 'h' },
        { 0 },
    };
    const char *sandbox = NULL;
    bool as_json = false;
    json_t *page = NULL, *all = json_array(), *s;
    char path[256], after[32] = "";
    size_t i;
    int c, r = 0;

    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 's' && sandbox_id_is_valid(optarg)) {
            sandbox = optarg;
        } else if (c == 'j') {
            as_json = true;
        } else {
            json_decref(all);
            return cli_usage(c == 'h', usage_text);
        }
    }
    if (optind != argc || !all) {
        json_decref(all);
        return cli_usage(false, usage_text);
    }
    for (;;) {
        snprintf(path, sizeof(path), "/v1/snapshots?limit=1000%s%s%s%s", sandbox ? "&sandbox=" : "",
                 sandbox ? sandbox : "", after[0] ? "&after=" : "", after);
        if (client_call_ok("GET", path, NULL, &page) < 0) {
            r = 1;
            break;
        }
        json_array_extend(all, json_object_get(page, "snapshots"));
        const char *next = json_string_value(json_object_get(page, "next"));
        if (!next) {
            break;
        }
        snprintf(after, sizeof(after), "%s", next);
        json_decref(page);
        page = NULL;
    }
    json_decref(page);
    if (r == 0 && as_json) {
        char *text = json_dumps(all, JSON_INDENT(2));
        puts(text ? text : "[]");
        free(text);
    } else if (r == 0) {
        printf("%-20s %-20s %-4s %-8s %-7s %-27s %s\n", "ID", "SANDBOX", "KIND", "STATE", "SOURCE",
               "CREATED", "NAME");
        json_array_foreach (all, i, s) {
            const char *name = json_string_value(json_object_get(s, "name"));
            const char *source = json_string_value(json_object_get(s, "source"));
            printf("%-20s %-20s %-4s %-8s %-7s %-27s %s\n",
                   json_string_value(json_object_get(s, "id")),
                   json_string_value(json_object_get(s, "sandbox_id")),
                   json_string_value(json_object_get(s, "kind")),
                   json_string_value(json_object_get(s, "state")), source ? source : "user",
                   json_string_value(json_object_get(s, "created_at")), name ? name : "-");
        }
    }
    json_decref(all);
    return r;
}

static int rm(int argc, char **argv)
{
    int r = 0;

    if (argc < 2) {
        return cli_usage(false, usage_text);
    }
    for (int i = 1; i < argc; i++) {
        char path[64];
        if (!sandbox_id_is_valid(argv[i])) {
            fprintf(stderr, "space: '%s' is not a snapshot id\n", argv[i]);
            r = 1;
            continue;
        }
        snprintf(path, sizeof(path), "/v1/snapshots/%s", argv[i]);
        if (client_call_ok("DELETE", path, NULL, NULL) < 0) {
            r = 1;
        } else {
            printf("deleted %s\n", argv[i]);
        }
    }
    return r;
}

static int branch(int argc, char **argv)
{
    static const struct option opts[] = {
        { "count", required_argument, NULL, 'n' },
        { "timeout", required_argument, NULL, 't' },
        { "help", no_argument, NULL, 'h' },
        { 0 },
    };
    json_t *body = json_object(), *res = NULL, *item;
    char path[128], *end;
    size_t i;
    int c, r = 1;

    optind = 1;
    while ((c = getopt_long(argc, argv, "n:h", opts, NULL)) != -1) {
        long long v = (c == 'n' || c == 't') ? strtoll(optarg, &end, 10) : 0;
        if ((c == 'n' || c == 't') && *optarg && !*end && v >= 0) {
            json_object_set_new(body, c == 'n' ? "count" : "timeout_s", json_integer(v));
        } else {
            json_decref(body);
            return cli_usage(c == 'h', usage_text);
        }
    }
    if (optind != argc - 1 || !sandbox_id_is_valid(argv[optind])) {
        json_decref(body);
        return cli_usage(false, usage_text);
    }
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/branch", argv[optind]);
    if (client_call_ok("POST", path, body, &res) >= 0) {
        r = 0;
        json_array_foreach (json_object_get(res, "sandboxes"), i, item) {
            json_t *sb = json_object_get(item, "sandbox"), *err = json_object_get(item, "error");
            if (sb) {
                printf("%s\n", json_string_value(json_object_get(sb, "id")));
            } else {
                fprintf(stderr, "space: branch %zu: %s (%lld)\n", i + 1,
                        json_string_value(json_object_get(err, "message")),
                        (long long)json_integer_value(json_object_get(err, "code")));
                r = 1;
            }
        }
    }
    json_decref(body);
    json_decref(res);
    return r;
}

/* A non-negative integer, or -1. */
static long long number(const char *s)
{
    char *end;
    long long v = s && *s ? strtoll(s, &end, 10) : -1;
    return v >= 0 && !*end ? v : -1;
}

/* "all:S" or "EVERY:FOR" to a tier object, or NULL. */
static json_t *tier_json(const char *arg)
{
    const char *colon = strchr(arg, ':');
    char every[32];
    long long a, b;

    if (!colon || (size_t)(colon - arg) >= sizeof(every)) {
        return NULL;
    }
    snprintf(every, sizeof(every), "%.*s", (int)(colon - arg), arg);
    b = number(colon + 1);
    if (b < 0) {
        return NULL;
    }
    if (strcmp(every, "all") == 0) {
        return json_pack("{s:I}", "keep_all_s", (json_int_t)b);
    }
    a = number(every);
    return a < 0 ? NULL : json_pack("{s:I, s:I}", "every_s", (json_int_t)a, "for_s", (json_int_t)b);
}

static void print_policy(json_t *res)
{
    char *text = json_dumps(res, JSON_INDENT(2));
    puts(text ? text : "{}");
    free(text);
}

static int policy(int argc, char **argv)
{
    static const struct option opts[] = {
        { "disk-every", required_argument, NULL, 'd' },
        { "full-every", required_argument, NULL, 'f' },
        { "tier", required_argument, NULL, 't' },
        { "max-bytes", required_argument, NULL, 'b' },
        { "help", no_argument, NULL, 'h' },
        { 0 },
    };
    json_t *body = NULL, *tiers = NULL, *res = NULL;
    const char *verb = argc >= 2 ? argv[1] : "";
    char path[128];
    int c, r = 1;

    if (cli_help_arg(verb, true)) {
        return cli_usage(true, usage_text);
    }
    if (strcmp(verb, "set") && strcmp(verb, "get") && strcmp(verb, "rm")) {
        return cli_usage(false, usage_text);
    }
    argc--;
    argv++;
    body = json_object();
    tiers = json_array();
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        long long v = c == 't' ? 0 : number(optarg);
        json_t *tier = c == 't' ? tier_json(optarg) : NULL;
        if (strcmp(verb, "set") == 0 && (c == 'd' || c == 'f' || c == 'b') && v >= 0) {
            json_object_set_new(body,
                                c == 'd'   ? "disk_every_s"
                                : c == 'f' ? "full_every_s"
                                           : "max_bytes",
                                json_integer(v));
        } else if (strcmp(verb, "set") == 0 && tier) {
            json_array_append_new(tiers, tier);
        } else {
            json_decref(tier);
            json_decref(body);
            json_decref(tiers);
            return cli_usage(c == 'h', usage_text);
        }
    }
    if (optind != argc - 1 || !sandbox_id_is_valid(argv[optind])) {
        json_decref(body);
        json_decref(tiers);
        return cli_usage(false, usage_text);
    }
    if (json_array_size(tiers) > 0) {
        json_object_set(body, "tiers", tiers);
    }
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/snapshot-policy", argv[optind]);
    if (strcmp(verb, "rm") == 0) {
        if (client_call_ok("DELETE", path, NULL, NULL) >= 0) {
            printf("removed the snapshot policy of %s\n", argv[optind]);
            r = 0;
        }
    } else if (client_call_ok(strcmp(verb, "set") == 0 ? "PUT" : "GET", path,
                              strcmp(verb, "set") == 0 ? body : NULL, &res) >= 0) {
        print_policy(res);
        r = 0;
    }
    json_decref(body);
    json_decref(tiers);
    json_decref(res);
    return r;
}

int cmd_snapshot(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "policy") == 0) {
        return policy(argc - 1, argv + 1);
    }
    if (argc >= 2 && strcmp(argv[1], "branch") == 0) {
        return branch(argc - 1, argv + 1);
    }
    if (argc >= 2 && strcmp(argv[1], "create") == 0) {
        return create(argc - 1, argv + 1);
    }
    if (argc >= 2 && (strcmp(argv[1], "ls") == 0 || strcmp(argv[1], "list") == 0)) {
        return list(argc - 1, argv + 1);
    }
    if (argc >= 2 && (strcmp(argv[1], "rm") == 0 || strcmp(argv[1], "delete") == 0)) {
        if (argc >= 3 && cli_help_arg(argv[2], false)) {
            return cli_usage(true, usage_text);
        }
        return rm(argc - 1, argv + 1);
    }
    return cli_usage(argc >= 2 && cli_help_arg(argv[1], true), usage_text);
}
