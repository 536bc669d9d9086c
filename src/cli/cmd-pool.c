/* space pool ls — the node's warm pools (src/node/pool.h), through the api's GET /v1/pools. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/help.h"

int cmd_pool(int argc, char **argv)
{
    static const char usage[] = "usage: space pool ls\n";

    if (argc >= 3 && cli_help_arg(argv[2], false)) {
        return cli_usage(true, usage);
    }
    if (argc == 2 && strcmp(argv[1], "ls") == 0) {
        json_t *res = NULL, *p;
        size_t i;
        if (client_call_ok("GET", "/v1/pools", NULL, &res) < 0) {
            return 1;
        }
        /* LEVEL: members ready or being made, held against TARGET (MIN..MAX, following the
         * creates per minute that asked this pool). */
        printf("TEMPLATE\tVCPUS\tMEMORY_MB\tMIN\tMAX\tTARGET\tLEVEL\tREADY\tFILLING\t"
               "CREATES/MIN\tSERVED\n");
        json_array_foreach (json_object_get(res, "pools"), i, p) {
            printf("%s\t%lld\t%lld\t%lld\t%lld\t%lld\t%lld\t%lld\t%s\t%.1f\t%lld\n",
                   json_string_value(json_object_get(p, "template")) ?: "",
                   json_integer_value(json_object_get(p, "vcpus")),
                   json_integer_value(json_object_get(p, "memory_mb")),
                   json_integer_value(json_object_get(p, "min")),
                   json_integer_value(json_object_get(p, "max")),
                   json_integer_value(json_object_get(p, "target")),
                   json_integer_value(json_object_get(p, "level")),
                   json_integer_value(json_object_get(p, "ready")),
                   json_is_true(json_object_get(p, "filling")) ? "yes" : "no",
                   json_number_value(json_object_get(p, "rate_per_minute")),
                   json_integer_value(json_object_get(p, "served")));
        }
        if (json_integer_value(json_object_get(res, "target")) == 0) {
            printf("(the warm pool is off: space up --pool N)\n");
        }
        json_decref(res);
        return 0;
    }
    return cli_usage(argc >= 2 && cli_help_arg(argv[1], true), usage);
}
