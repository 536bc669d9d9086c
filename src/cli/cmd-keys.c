/* space keys create NAME | ls | rm ID — API keys for E2B SDKs and the native API. */
#include <stdio.h>
#include <string.h>

#include "basic/macro.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/help.h"

int cmd_keys(int argc, char **argv)
{
    json_t *res = NULL;
    bool as_json = argc >= 3 && strcmp(argv[argc - 1], "--json") == 0;
    static const char usage[] = "usage: space keys create NAME | ls [--json] | rm ID\n";

    if (argc >= 3 && cli_help_arg(argv[2], false)) { /* not a key named "--help" */
        return cli_usage(true, usage);
    }
    if (argc >= 3 && strcmp(argv[1], "create") == 0) {
        json_t *body = json_pack("{s:s}", "name", argv[2]);
        int r = client_call_ok("POST", "/v1/keys", body, &res);
        json_decref(body);
        if (r < 0) {
            return 1;
        }
        /* The key alone on stdout: it is shown this once. */
        printf("%s\n", json_string_value(json_object_get(res, "key")));
        json_decref(res);
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "ls") == 0) {
        json_t *k;
        size_t i;
        if (client_call_ok("GET", "/v1/keys", NULL, &res) < 0) {
            return 1;
        }
        if (as_json) {
            char *text = json_dumps(json_object_get(res, "keys"), JSON_INDENT(2));
            puts(text ? text : "[]");
            free(text);
        } else {
            printf("%-34s %-20s %s\n", "ID", "NAME", "PREFIX");
            json_array_foreach (json_object_get(res, "keys"), i, k) {
                printf("%-34s %-20s %s...\n", json_string_value(json_object_get(k, "id")),
                       json_string_value(json_object_get(k, "name")),
                       json_string_value(json_object_get(k, "prefix")));
            }
        }
        json_decref(res);
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "rm") == 0) {
        char path[128];
        if (strlen(argv[2]) != 32) {
            fprintf(stderr, "space: invalid key id '%s'\n", argv[2]);
            return 2;
        }
        snprintf(path, sizeof(path), "/v1/keys/%s", argv[2]);
        return client_call_ok("DELETE", path, NULL, NULL) < 0 ? 1 : 0;
    }
    return cli_usage(argc >= 2 && cli_help_arg(argv[1], true), usage);
}
