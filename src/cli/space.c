/*
 * space: the command-line interface. A table of subcommands (git git.c,
 * kvmtool kvm-cmd.c); each lives in its own cmd-*.c and talks to space-node
 * through client.h.
 */
#include <stdio.h>
#include <string.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "cli/commands.h"

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} commands[] = {
    { "up", cmd_up, "start the single-host platform (--detach to background it)" },
    { "down", cmd_down, "stop the platform started with 'space up --detach'" },
    { "sandbox", cmd_sandbox, "create|ls|get|exec|kill|pause|resume|suspend|restore sandboxes" },
    { "template", cmd_template, "build|ls templates, network: their default egress policy" },
    { "pool", cmd_pool, "ls the warm pools (restored sandboxes ready for a create)" },
    { "capacity", cmd_capacity, "memory, vCPUs, sandboxes and disk: budgets, committed, free" },
    { "keys", cmd_keys, "create|ls|rm API keys" },
    { "ca", cmd_ca, "status|rotate the egress gateway's deployment CA (stage, switch, finish)" },
    { "secret", cmd_secret, "create|list|rotate|delete secrets injected on egress" },
    { "snapshot", cmd_snapshot,
      "create|ls|rm snapshots of sandboxes (new sandboxes start from them); branch a live one" },
    { "bench", cmd_bench, "measure the platform (bench create)" },
};

static int usage(FILE *f)
{
    fprintf(f, "usage: space <command> [args]\n\ncommands:\n");
    for (size_t i = 0; i < ARRAY_SIZE(commands); i++) {
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    }
    return f == stderr ? 2 : 0;
}

int main(int argc, char **argv)
{
    log_set_ident("space");
    if (argc < 2) {
        return usage(stderr);
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "help") == 0) {
        return usage(stdout);
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("space %s\n", SPACE_VERSION);
        return 0;
    }
    for (size_t i = 0; i < ARRAY_SIZE(commands); i++) {
        if (strcmp(argv[1], commands[i].name) == 0) {
            return commands[i].fn(argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "space: unknown command '%s'\n", argv[1]);
    return usage(stderr);
}
