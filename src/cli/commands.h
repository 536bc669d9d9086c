#pragma once
/* One function per top-level subcommand (cmd-*.c); exit codes 0 ok, 1 failure, 2 usage. */

int cmd_up(int argc, char **argv);
int cmd_down(int argc, char **argv);
int cmd_sandbox(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_keys(int argc, char **argv);
/* space sandbox cp (cmd-cp.c) */
int cmd_cp(int argc, char **argv);

/* Shared by up and template: builds (or confirms cached) template `name`. */
int template_build(const char *name);
