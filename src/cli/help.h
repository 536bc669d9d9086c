#pragma once
/*
 * Asking for help is not a usage error: "space CMD --help" (or -h) prints the
 * command's usage on stdout and exits 0; a wrong invocation prints it on
 * stderr and exits 2 (commands.h).
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Whether arg is -h or --help (or "help", where a subcommand name is expected). */
static inline bool cli_help_arg(const char *arg, bool subcommand)
{
    return arg && (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0 ||
                   (subcommand && strcmp(arg, "help") == 0));
}

/* The usage text, on stdout for help (returns 0) or stderr for an error (returns 2). */
static inline int cli_usage(bool help, const char *text)
{
    fputs(text, help ? stdout : stderr);
    return help ? 0 : 2;
}
