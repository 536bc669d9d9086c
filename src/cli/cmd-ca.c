/*
 * space ca status [--json] | space ca rotate stage|switch|finish — the egress gateways'
 * deployment CA and its rotation (GET /v1/egress-ca, POST /v1/egress-ca/rotate; the api's
 * local socket, which the rotation needs). A rotation is three steps, each run when the one
 * before has reached every sandbox: stage (a next CA, trusted by every guest next to the
 * current one), switch (new leaves come from it; refused until every running sandbox has the
 * staged bundle), finish (it is the current CA; the old one is deleted).
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/help.h"

static const char usage[] = "usage: space ca status [--json]\n"
                            "       space ca rotate stage|switch|finish\n";

static long long num(json_t *o, const char *key)
{
    return json_integer_value(json_object_get(o, key));
}

static const char *str(json_t *o, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : dflt;
}

static void print_status(json_t *res)
{
    json_t *nodes = json_object_get(res, "nodes"), *n;
    size_t i;

    printf("egress CA: %s; %lld of %lld running sandboxes have the bundle, %lld not running\n",
           str(res, "phase", "?"), num(res, "with_bundle"), num(res, "sandboxes"),
           num(res, "not_running"));
    json_array_foreach (nodes, i, n) {
        printf("  %s: %s, current %s, next %s\n", str(n, "node", "node"), str(n, "phase", "?"),
               str(n, "current", "-"), str(n, "next", "-"));
    }
}

static void print_json(json_t *res)
{
    char *text = json_dumps(res, JSON_INDENT(2) | JSON_SORT_KEYS);
    puts(text ? text : "{}");
    free(text);
}

int cmd_ca(int argc, char **argv)
{
    json_t *res = NULL, *body;
    int r;

    if (argc >= 2 && cli_help_arg(argv[argc - 1], false)) {
        return cli_usage(true, usage);
    }
    if (argc >= 2 && strcmp(argv[1], "status") == 0) {
        bool as_json = argc == 3 && strcmp(argv[2], "--json") == 0;
        if (argc > 3 || (argc == 3 && !as_json)) {
            return cli_usage(false, usage);
        }
        if (client_call_ok("GET", "/v1/egress-ca", NULL, &res) < 0) {
            return 1;
        }
        if (as_json) {
            print_json(res);
        } else {
            print_status(res);
        }
        json_decref(res);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "rotate") == 0 &&
        (strcmp(argv[2], "stage") == 0 || strcmp(argv[2], "switch") == 0 ||
         strcmp(argv[2], "finish") == 0)) {
        body = json_pack("{s:s}", "step", argv[2]);
        r = body ? client_call_ok("POST", "/v1/egress-ca/rotate", body, &res) : -1;
        json_decref(body);
        if (r < 0) {
            return 1;
        }
        print_status(res);
        json_decref(res);
        return 0;
    }
    return cli_usage(false, usage);
}
