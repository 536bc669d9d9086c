#pragma once
#include <jansson.h>

/* One function per top-level subcommand (cmd-*.c); exit codes 0 ok, 1 failure, 2 usage. */

int cmd_up(int argc, char **argv);
int cmd_down(int argc, char **argv);
int cmd_sandbox(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_pool(int argc, char **argv);
int cmd_capacity(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_keys(int argc, char **argv);
int cmd_secret(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_ca(int argc, char **argv);
/* space sandbox cp (cmd-cp.c) */
int cmd_cp(int argc, char **argv);

/* space sandbox egress|network (cmd-egress.c) */
int cmd_sandbox_egress(int argc, char **argv);
int cmd_sandbox_network(int argc, char **argv);
/*
 * The policy flags of create and network (--internet, --allow E, --deny E), as getopt
 * values: adds one to *policy (a native policy object, made on first use). -EINVAL for any
 * other option.
 */
enum { CLI_OPT_INTERNET = 0x100, CLI_OPT_ALLOW, CLI_OPT_DENY, CLI_OPT_INJECT };
int cli_policy_option(int c, const char *arg, json_t **policy);
/* space template network set|get|rm NAME (cmd-template.c). */
int cmd_template_network(int argc, char **argv);

/* Shared by up and template: builds (or confirms cached) template `name`. */
int template_build(const char *name);
