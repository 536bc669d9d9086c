/*
 * space sandbox egress ID [--denied] [--follow] [--json]
 * space sandbox network ID [--internet] [--allow ENTRY]... [--deny ENTRY]...
 *
 * egress prints a sandbox's egress audit log (GET /v1/sandboxes/{id}/egress),
 * oldest first: one line per decision, or one JSON object per line with
 * --json; --denied shows only denials; --follow keeps polling for new
 * records until interrupted. network replaces the sandbox's policy live
 * (PUT /v1/sandboxes/{id}/network) with exactly what the flags say (no flag
 * at all: deny everything) and prints the policy now in force.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "basic/time-util.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/help.h"
#include "shared/sandbox-id.h"

#define EGRESS_PAGE 1000
#define FOLLOW_INTERVAL (1 * USEC_PER_SEC)

int cli_policy_option(int c, const char *arg, json_t **policy)
{
    json_t *p = *policy;

    if (!p) {
        p = *policy = json_pack("{s:b, s:[], s:[]}", "internet", 0, "allow", "deny");
        if (!p) {
            return -ENOMEM;
        }
    }
    switch (c) {
    case CLI_OPT_INTERNET:
        json_object_set_new(p, "internet", json_true());
        return 0;
    case CLI_OPT_ALLOW:
    case CLI_OPT_DENY:
        return json_array_append_new(json_object_get(p, c == CLI_OPT_ALLOW ? "allow" : "deny"),
                                     json_string(arg)) < 0
                   ? -ENOMEM
                   : 0;
    case CLI_OPT_INJECT: {
        /* One inject rule as JSON (openapi.yaml InjectRule); the api checks its fields. */
        json_t *rule = json_loads(arg, JSON_REJECT_DUPLICATES, NULL), *inject;

        if (!json_is_object(rule)) {
            json_decref(rule);
            fprintf(stderr, "space: --inject takes one rule as a JSON object\n");
            return -EINVAL;
        }
        inject = json_object_get(p, "inject");
        if (!inject) {
            json_object_set_new(p, "inject", inject = json_array());
        }
        return json_array_append_new(inject, rule) < 0 ? -ENOMEM : 0;
    }
    default:
        return -EINVAL;
    }
}

static void print_policy(json_t *network)
{
    char *text = json_dumps(network, JSON_INDENT(2));
    if (text) {
        puts(text);
        free(text);
    }
}

int cmd_sandbox_network(int argc, char **argv)
{
    static const struct option opts[] = {
        { "internet", no_argument, NULL, CLI_OPT_INTERNET },
        { "allow", required_argument, NULL, CLI_OPT_ALLOW },
        { "deny", required_argument, NULL, CLI_OPT_DENY },
        { "help", no_argument, NULL, 'h' },
        {},
    };
    json_t *policy = NULL, *res = NULL;
    char path[128];
    int c, r = 1;

    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
        if (c == 'h' || cli_policy_option(c, optarg, &policy) < 0) {
            r = cli_usage(c == 'h', "usage: space sandbox network ID [--internet] "
                                    "[--allow ENTRY]... [--deny ENTRY]...\n");
            goto out;
        }
    }
    if (argc - optind != 1 || !sandbox_id_is_valid(argv[optind])) {
        fprintf(stderr,
                argc - optind == 1 ? "space: invalid sandbox id '%s'\n"
                                   : "usage: space sandbox network ID [--internet] "
                                     "[--allow ENTRY]... [--deny ENTRY]...\n",
                argv[optind]);
        r = 2;
        goto out;
    }
    /* No flag: deny everything (the body replaces the whole policy). */
    if (!policy && !(policy = json_pack("{s:b, s:[], s:[]}", "internet", 0, "allow", "deny"))) {
        goto out;
    }
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/network", argv[optind]);
    if (client_call_ok("PUT", path, policy, &res) < 0) {
        goto out;
    }
    print_policy(json_object_get(res, "network"));
    r = 0;
out:
    json_decref(policy);
    json_decref(res);
    return r;
}

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    interrupted = 1;
}

static const char *field(json_t *rec, const char *key)
{
    return json_string_value(json_object_get(rec, key));
}

/* "2026-12-01T23:59:59.123Z allow tls  api.example.com 198.18.1.10:443 allow-name 12/3400 B" */
static void print_record(json_t *rec)
{
    json_int_t t = json_integer_value(json_object_get(rec, "time"));
    time_t sec = (time_t)(t / 1000000);
    const char *what = field(rec, "sni")    ? field(rec, "sni")
                       : field(rec, "host") ? field(rec, "host")
                       : field(rec, "name") ? field(rec, "name")
                                            : "-";
    char when[32], dst[80];
    struct tm tm;

    gmtime_r(&sec, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    if (field(rec, "dst")) {
        snprintf(dst, sizeof(dst), "%s:%" JSON_INTEGER_FORMAT, field(rec, "dst"),
                 json_integer_value(json_object_get(rec, "port")));
    } else {
        snprintf(dst, sizeof(dst), "-");
    }
    printf("%s.%03dZ %-5s %-4s %-40s %-21s %s", when, (int)((t / 1000) % 1000),
           field(rec, "verdict") ?: "-", field(rec, "proto") ?: "-", what, dst,
           field(rec, "reason") ?: "-");
    if (field(rec, "method")) {
        printf(" %s", field(rec, "method"));
    }
    if (json_object_get(rec, "bytesOut") || json_object_get(rec, "bytesIn")) {
        printf(" %" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT " B",
               json_integer_value(json_object_get(rec, "bytesOut")),
               json_integer_value(json_object_get(rec, "bytesIn")));
    }
    if (json_object_get(rec, "count")) {
        printf(" count=%" JSON_INTEGER_FORMAT, json_integer_value(json_object_get(rec, "count")));
    }
    /* The secrets space-gw injected into this request: names, never values. */
    if (field(rec, "secret")) {
        printf(" secret=%s", field(rec, "secret"));
    }
    putchar('\n');
}

int cmd_sandbox_egress(int argc, char **argv)
{
    static const struct option opts[] = {
        { "denied", no_argument, NULL, 'd' },
        { "follow", no_argument, NULL, 'f' },
        { "json", no_argument, NULL, 'j' },
        { "help", no_argument, NULL, 'h' },
        {},
    };
    bool denied = false, follow = false, as_json = false;
    char after[24] = "0", path[192];
    int c;

    optind = 1;
    while ((c = getopt_long(argc, argv, "fh", opts, NULL)) >= 0) {
        switch (c) {
        case 'd':
            denied = true;
            break;
        case 'f':
            follow = true;
            break;
        case 'j':
            as_json = true;
            break;
        default:
            return cli_usage(c == 'h',
                             "usage: space sandbox egress ID [--denied] [--follow] [--json]\n");
        }
    }
    if (argc - optind != 1) {
        fprintf(stderr, "usage: space sandbox egress ID [--denied] [--follow] [--json]\n");
        return 2;
    }
    const char *id = argv[optind];
    if (!sandbox_id_is_valid(id)) {
        fprintf(stderr, "space: invalid sandbox id '%s'\n", id);
        return 2;
    }
    if (follow) {
        struct sigaction sa = { .sa_handler = on_signal };
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
    }
    if (!as_json) {
        printf("%-24s %-5s %-4s %-40s %-21s %s\n", "TIME", "VERDICT", "PROTO", "NAME/SNI/HOST",
               "DESTINATION", "REASON");
    }
    while (!interrupted) {
        json_t *res = NULL, *rec;
        size_t i, n;

        snprintf(path, sizeof(path), "/v1/sandboxes/%s/egress?limit=%d&after=%s%s", id, EGRESS_PAGE,
                 after, denied ? "&verdict=deny" : "");
        if (client_call_ok("GET", path, NULL, &res) < 0) {
            return interrupted ? 0 : 1;
        }
        json_t *records = json_object_get(res, "records");
        n = json_array_size(records);
        json_array_foreach (records, i, rec) {
            if (as_json) {
                char *text = json_dumps(rec, JSON_COMPACT);
                if (text) {
                    puts(text);
                    free(text);
                }
            } else {
                print_record(rec);
            }
            snprintf(after, sizeof(after), "%" JSON_INTEGER_FORMAT,
                     json_integer_value(json_object_get(rec, "id")));
        }
        bool more = json_is_string(json_object_get(res, "next"));
        json_decref(res);
        fflush(stdout);
        if (more && n > 0) {
            continue;
        }
        if (!follow) {
            break;
        }
        sleep_usec(FOLLOW_INTERVAL);
    }
    return 0;
}
