/*
 * space sandbox create|ls|get|exec|kill|pause|resume|suspend|restore (egress and network:
 * cmd-egress.c)
 *
 * create prints the new id alone on stdout; exec passes the guest's stdout
 * and stderr through byte for byte and exits with the command's exit code
 * (128+9 when the command was killed), so it composes in shell scripts.
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "basic/base64.h"
#include "basic/fd-util.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/help.h"
#include "shared/sandbox-id.h"

static bool has_flag(int argc, char **argv, const char *flag)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], flag) == 0) {
            return true;
        }
    }
    return false;
}

static void print_json(json_t *j)
{
    char *text = json_dumps(j, JSON_INDENT(2));
    if (text) {
        puts(text);
        free(text);
    }
}

static int sandbox_create(int argc, char **argv)
{
    static const struct option opts[] = {
        { "template", required_argument, NULL, 't' },
        { "vcpus", required_argument, NULL, 'c' },
        { "memory", required_argument, NULL, 'm' },
        { "json", no_argument, NULL, 'j' },
        { "timeout", required_argument, NULL, 'T' },
        { "env", required_argument, NULL, 'e' },
        { "metadata", required_argument, NULL, 'M' },
        { "internet", no_argument, NULL, CLI_OPT_INTERNET },
        { "allow", required_argument, NULL, CLI_OPT_ALLOW },
        { "deny", required_argument, NULL, CLI_OPT_DENY },
        { "net-bps", required_argument, NULL, 'N' },
        { "disk-bps", required_argument, NULL, 'B' },
        { "disk-iops", required_argument, NULL, 'I' },
        { "help", no_argument, NULL, 'h' },
        {},
    };
    json_t *body = json_object(), *res = NULL, *network = NULL;
    uint64_t rate;
    bool as_json = false;
    uint32_t v;
    int c, r = 1;

    json_t *env = json_object(), *metadata = json_object();
    json_object_set_new(body, "template", json_string("base"));
    json_object_set_new(body, "env", env);
    json_object_set_new(body, "metadata", metadata);
    optind = 1;
    while ((c = getopt_long(argc, argv, "t:h", opts, NULL)) >= 0) {
        switch (c) {
        case 'e':
        case 'M': {
            char *eq = strchr(optarg, '=');
            if (!eq) {
                fprintf(stderr, "space: expected KEY=VALUE, got '%s'\n", optarg);
                r = 2;
                goto out;
            }
            *eq = '\0';
            json_object_set_new(c == 'e' ? env : metadata, optarg, json_string(eq + 1));
            break;
        }
        case 'T':
            if (parse_u32(optarg, &v) < 0) {
                fprintf(stderr, "space: invalid --timeout '%s'\n", optarg);
                r = 2;
                goto out;
            }
            json_object_set_new(body, "timeout_s", json_integer(v));
            break;
        case 't':
            json_object_set_new(body, "template", json_string(optarg));
            break;
        case 'c':
        case 'm':
            if (parse_u32(optarg, &v) < 0) {
                fprintf(stderr, "space: invalid number '%s'\n", optarg);
                r = 2;
                goto out;
            }
            json_object_set_new(body, c == 'c' ? "vcpus" : "memory_mb", json_integer(v));
            break;
        case 'N':
        case 'B':
        case 'I':
            /* Its own limits within the node's; the api and the node check the bounds. */
            if (parse_u64(optarg, &rate) < 0 || rate > INT64_MAX) {
                fprintf(stderr, "space: invalid number '%s'\n", optarg);
                r = 2;
                goto out;
            }
            json_object_set_new(body,
                                c == 'N'   ? "net_bps"
                                : c == 'B' ? "disk_bps"
                                           : "disk_iops",
                                json_integer((json_int_t)rate));
            break;
        case 'j':
            as_json = true;
            break;
        case CLI_OPT_INTERNET:
        case CLI_OPT_ALLOW:
        case CLI_OPT_DENY:
            if (cli_policy_option(c, optarg, &network) < 0) {
                goto out;
            }
            break;
        default:
            r = cli_usage(c == 'h', "usage: space sandbox create [--template NAME] [--vcpus N] "
                                    "[--memory MB] [--timeout SEC] [--env K=V]...\n"
                                    "                [--metadata K=V]... [--internet] "
                                    "[--allow ENTRY]... [--deny ENTRY]... [--json]\n"
                                    "                [--net-bps B/S] [--disk-bps B/S] "
                                    "[--disk-iops N]\n");
            goto out;
        }
    }
    /* No policy flag: the native default, deny everything. */
    if (network) {
        json_object_set_new(body, "network", network);
        network = NULL;
    }
    if (client_call_ok("POST", "/v1/sandboxes?wait=true", body, &res) < 0) {
        goto out;
    }
    if (as_json) {
        print_json(res);
    } else {
        printf("%s\n", json_string_value(json_object_get(res, "id")));
    }
    r = 0;
out:
    json_decref(network);
    json_decref(body);
    json_decref(res);
    return r;
}

static int sandbox_ls(int argc, char **argv)
{
    json_t *res = NULL, *s;
    size_t i;

    if (argc >= 2 && cli_help_arg(argv[1], false)) {
        return cli_usage(true, "usage: space sandbox ls [--json]\n");
    }
    if (client_call_ok("GET", "/v1/sandboxes", NULL, &res) < 0) {
        return 1;
    }
    if (has_flag(argc, argv, "--json")) {
        print_json(json_object_get(res, "sandboxes"));
    } else {
        printf("%-22s %-10s %-10s %s\n", "ID", "TEMPLATE", "STATE", "VCPUS/MEMORY");
        json_array_foreach (json_object_get(res, "sandboxes"), i, s) {
            printf("%-22s %-10s %-10s %d/%dM\n", json_string_value(json_object_get(s, "id")),
                   json_string_value(json_object_get(s, "template")),
                   json_string_value(json_object_get(s, "state")),
                   (int)json_integer_value(json_object_get(s, "vcpus")),
                   (int)json_integer_value(json_object_get(s, "memory_mb")));
        }
    }
    json_decref(res);
    return 0;
}

static int sandbox_path(const char *id, const char *suffix, char *buf, size_t n)
{
    if (!sandbox_id_is_valid(id)) {
        fprintf(stderr, "space: invalid sandbox id '%s'\n", id);
        return -EINVAL;
    }
    snprintf(buf, n, "/v1/sandboxes/%s%s", id, suffix);
    return 0;
}

static int sandbox_get(int argc, char **argv)
{
    char path[128];
    json_t *res = NULL;

    if (argc < 2 || cli_help_arg(argv[1], false)) {
        return cli_usage(argc >= 2, "usage: space sandbox get ID\n");
    }
    if (sandbox_path(argv[1], "", path, sizeof(path)) < 0) {
        return 2;
    }
    if (client_call_ok("GET", path, NULL, &res) < 0) {
        return 1;
    }
    print_json(res);
    json_decref(res);
    return 0;
}

static int sandbox_kill(int argc, char **argv)
{
    char path[128];
    int r = 0;

    if (argc < 2 || cli_help_arg(argv[1], false)) {
        return cli_usage(argc >= 2, "usage: space sandbox kill ID...\n");
    }
    for (int i = 1; i < argc; i++) {
        if (sandbox_path(argv[i], "?wait=true", path, sizeof(path)) < 0) {
            return 2;
        }
        if (client_call_ok("DELETE", path, NULL, NULL) < 0) {
            r = 1;
        }
    }
    return r;
}

/*
 * pause|resume|suspend|restore ID...: waits for each operation and prints the state it ended in
 * ("abc... paused"); a sandbox in the wrong state fails with the API's 409 message. suspend and
 * restore take --no-memory first ({"memory": false}: the disk only; the restore boots).
 */
static int sandbox_verb(int argc, char **argv, const char *verb)
{
    bool memory_opt = strcmp(verb, "suspend") == 0 || strcmp(verb, "restore") == 0;
    bool no_memory = memory_opt && argc >= 2 && strcmp(argv[1], "--no-memory") == 0;
    char path[128], suffix[48];
    json_t *body = NULL;
    int r = 0;

    if (no_memory) {
        argc--;
        argv++;
    }
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: space sandbox %s %sID...\n", verb,
                memory_opt ? "[--no-memory] " : "");
        return 2;
    }
    snprintf(suffix, sizeof(suffix), "/%s?wait=true", verb);
    for (int i = 1; i < argc; i++) {
        json_t *res = NULL;
        if (sandbox_path(argv[i], suffix, path, sizeof(path)) < 0) {
            return 2;
        }
        body = no_memory ? json_pack("{s:b}", "memory", 0) : NULL;
        int k = client_call_ok("POST", path, body, &res);
        json_decref(body);
        if (k < 0) {
            r = 1;
            continue;
        }
        printf("%s %s\n", argv[i], json_string_value(json_object_get(res, "state")) ?: "?");
        json_decref(res);
    }
    return r;
}

static int sandbox_pause(int argc, char **argv)
{
    return sandbox_verb(argc, argv, "pause");
}

static int sandbox_resume(int argc, char **argv)
{
    return sandbox_verb(argc, argv, "resume");
}

static int sandbox_suspend(int argc, char **argv)
{
    return sandbox_verb(argc, argv, "suspend");
}

static int sandbox_restore(int argc, char **argv)
{
    return sandbox_verb(argc, argv, "restore");
}

static int write_b64(int fd, const char *b64)
{
    size_t n = b64 ? strlen(b64) : 0;
    char *buf = malloc(n / 4 * 3 + 3);
    long k;
    int r;

    if (!buf) {
        return -ENOMEM;
    }
    k = base64_decode(b64 ? b64 : "", n, buf);
    r = k < 0 ? -EPROTO : write_all(fd, buf, (size_t)k);
    free(buf);
    return r;
}

static int sandbox_exec(int argc, char **argv)
{
    static const struct option opts[] = {
        { "user", required_argument, NULL, 'u' }, { "cwd", required_argument, NULL, 'w' },
        { "env", required_argument, NULL, 'e' },  { "timeout", required_argument, NULL, 't' },
        { "help", no_argument, NULL, 'h' },       {},
    };
    static const char usage[] = "usage: space sandbox exec [--user U] [--cwd DIR] [--env K=V]... "
                                "[--timeout SEC] ID -- CMD [ARGS...]\n";
    json_t *body = json_object(), *env = json_object(), *args = json_array(), *res = NULL;
    char path[128];
    uint32_t v;
    int c, r = 1;

    json_object_set_new(body, "env", env);
    json_object_set_new(body, "args", args);
    optind = 1;
    /* '+': stop at the first non-option so the command's own flags are left alone. */
    while ((c = getopt_long(argc, argv, "+u:w:e:h", opts, NULL)) >= 0) {
        switch (c) {
        case 'u':
            json_object_set_new(body, "user", json_string(optarg));
            break;
        case 'w':
            json_object_set_new(body, "cwd", json_string(optarg));
            break;
        case 'e': {
            char *eq = strchr(optarg, '=');
            if (!eq) {
                fprintf(stderr, "space: --env wants NAME=VALUE, got '%s'\n", optarg);
                r = 2;
                goto out;
            }
            *eq = '\0';
            json_object_set_new(env, optarg, json_string(eq + 1));
            break;
        }
        case 't':
            if (parse_u32(optarg, &v) < 0) {
                fprintf(stderr, "space: invalid --timeout '%s'\n", optarg);
                r = 2;
                goto out;
            }
            json_object_set_new(body, "timeout_ms", json_integer((json_int_t)v * 1000));
            break;
        default:
            r = cli_usage(c == 'h', usage);
            goto out;
        }
    }
    if (argc - optind < 3 || strcmp(argv[optind + 1], "--") != 0) {
        r = cli_usage(false, usage);
        goto out;
    }
    if (sandbox_path(argv[optind], "/exec", path, sizeof(path)) < 0) {
        r = 2;
        goto out;
    }
    json_object_set_new(body, "cmd", json_string(argv[optind + 2]));
    for (int i = optind + 3; i < argc; i++) {
        json_array_append_new(args, json_string(argv[i]));
    }
    if (client_call_ok("POST", path, body, &res) < 0) {
        goto out;
    }
    if (write_b64(STDOUT_FILENO, json_string_value(json_object_get(res, "stdout_b64"))) < 0 ||
        write_b64(STDERR_FILENO, json_string_value(json_object_get(res, "stderr_b64"))) < 0) {
        fprintf(stderr, "space: cannot write the command's output\n");
        goto out;
    }
    int code = (int)json_integer_value(json_object_get(res, "exit_code"));
    r = json_is_false(json_object_get(res, "exited")) ? 137 : code < 0 ? 255 : code & 255;
out:
    json_decref(body);
    json_decref(res);
    return r;
}

int cmd_sandbox(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } sub[] = {
        { "create", sandbox_create },
        { "ls", sandbox_ls },
        { "list", sandbox_ls },
        { "get", sandbox_get },
        { "exec", sandbox_exec },
        { "kill", sandbox_kill },
        { "pause", sandbox_pause },
        { "resume", sandbox_resume },
        { "suspend", sandbox_suspend },
        { "restore", sandbox_restore },
        { "cp", cmd_cp },
        { "egress", cmd_sandbox_egress },
        { "network", cmd_sandbox_network },
    };
    if (argc >= 2) {
        for (size_t i = 0; i < ARRAY_SIZE(sub); i++) {
            if (strcmp(argv[1], sub[i].name) == 0) {
                return sub[i].fn(argc - 1, argv + 1);
            }
        }
    }
    return cli_usage(
        argc >= 2 && cli_help_arg(argv[1], true),
        "usage: space sandbox "
        "create|ls|get|exec|cp|kill|pause|resume|suspend|restore|egress|network ...\n"
        "  suspend|restore [--no-memory] ID...: without memory, the disk only (the restore "
        "boots)\n");
}
