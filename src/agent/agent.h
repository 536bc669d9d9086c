#pragma once
/*
 * struct agent: everything the server process owns, passed explicitly to
 * every module (style.md R13). One instance per process, touched only by
 * the event-loop thread.
 */
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "basic/time-util.h"

struct event_base;
struct evhttp;
struct http_gate;
struct proc_table;
struct watch_table;

/* The envd version we claim (e2b-compat.md §6.8: at least 0.6.4 unlocks every SDK path). */
#define AGENT_ENVD_VERSION "0.6.4"

struct agent {
    struct event_base *base;
    struct evhttp *http;
    struct proc_table *procs;
    struct watch_table *watches;
    struct http_gate *gates; /* one per open connection (http-gate.c) */

    /* Sandbox-level state set through /init (e2b-compat.md §5, §6.6). */
    json_t *env;           /* object: name -> string, applied to every process */
    char *access_token;    /* NULL: requests need no X-Access-Token */
    char *default_user;    /* "root" until /init sets one */
    char *default_workdir; /* NULL: the user's home directory */
    char *path_env;        /* PATH given to processes (the agent's own) */
    char *e2b_dir;         /* where /init writes .E2B_* files; NULL: nowhere */
    char *trust_root;      /* where /init's caBundle goes: "" (/) as init; NULL: refused */
    bool is_init;          /* we run as the guest's init: /init may set the clock */
    uint64_t max_upload;   /* largest /files request body */
    uint64_t cpu_prev_total, cpu_prev_idle; /* /metrics: CPU counters at the last call */
    usec_t start_time;
};
