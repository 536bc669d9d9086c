/*
 * space secret create NAME | list | rotate NAME | delete NAME: secrets space-gw injects into
 * sandboxes' requests (docs/architecture.md "Credentials"). A value is read from a file or
 * from stdin, never from the command line (where ps and shell history would show it), is
 * sent once to the api, which seals it to space-gw's key, and is never printed.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/macro.h"
#include "cli/client.h"
#include "cli/commands.h"

/* SEALED_SECRET_MAX_VALUE (the api answers 413 above it); one more byte tells "too long". */
#define VALUE_MAX 16384

static int usage(void)
{
    fprintf(stderr,
            "usage: space secret create NAME [--from-file FILE] [--metadata KEY=VALUE]...\n"
            "       space secret rotate NAME [--from-file FILE] [--metadata KEY=VALUE]...\n"
            "       space secret list [--json]\n"
            "       space secret delete NAME\n"
            "The value is read from FILE, or from stdin; one trailing newline is dropped.\n");
    return 2;
}

/* The api's rule ([A-Za-z0-9_-]{1,64}), checked here too: the name goes into a URL path. */
static bool name_ok(const char *name)
{
    size_t n = strlen(name);

    if (n == 0 || n > 64 ||
        strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                     "0123456789_-") != n) {
        fprintf(stderr, "space: invalid secret name '%s': 1 to 64 of A-Z a-z 0-9 _ -\n", name);
        return false;
    }
    return true;
}

/* The whole of fd, at most VALUE_MAX + 1 bytes (the api refuses more). */
static int read_value(int fd, char **ret, size_t *ret_n)
{
    char *buf = malloc(VALUE_MAX + 2);
    size_t n = 0;

    if (!buf) {
        return -ENOMEM;
    }
    while (n < VALUE_MAX + 1) {
        ssize_t k = read(fd, buf + n, VALUE_MAX + 1 - n);
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k < 0) {
            int r = -errno;
            explicit_bzero(buf, n);
            free(buf);
            return r;
        }
        if (k == 0) {
            break;
        }
        n += (size_t)k;
    }
    if (n > 0 && buf[n - 1] == '\n') {
        n--;
        if (n > 0 && buf[n - 1] == '\r') {
            n--;
        }
    }
    buf[n] = '\0';
    *ret = buf;
    *ret_n = n;
    return 0;
}

static int value_from(const char *file, char **ret, size_t *ret_n)
{
    int fd = file ? open(file, O_RDONLY | O_CLOEXEC) : STDIN_FILENO;
    int r;

    if (fd < 0) {
        fprintf(stderr, "space: cannot open '%s': %s\n", file, strerror(errno));
        return -errno;
    }
    if (!file && isatty(fd)) {
        fprintf(stderr, "space: reading the secret's value from the terminal (end with ^D)\n");
    }
    r = read_value(fd, ret, ret_n);
    if (file) {
        close(fd);
    }
    if (r < 0) {
        fprintf(stderr, "space: cannot read the value: %s\n", strerror(-r));
    }
    return r;
}

/* create and rotate: NAME, --from-file, --metadata k=v... */
static int write_secret(int argc, char **argv, bool rotate)
{
    static const struct option opts[] = {
        { "from-file", required_argument, NULL, 'f' },
        { "metadata", required_argument, NULL, 'm' },
        {},
    };
    const char *file = NULL;
    json_t *metadata = NULL, *body = NULL, *res = NULL;
    char *value = NULL, path[160];
    size_t n = 0;
    int c, r = 2;

    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) >= 0) {
        if (c == 'f') {
            file = optarg;
        } else if (c == 'm') {
            const char *eq = strchr(optarg, '=');
            if (!eq || eq == optarg) {
                fprintf(stderr, "space: --metadata takes KEY=VALUE, not '%s'\n", optarg);
                goto out;
            }
            if (!metadata && !(metadata = json_object())) {
                r = 1;
                goto out;
            }
            char *key = strndup(optarg, (size_t)(eq - optarg));
            if (!key) {
                r = 1;
                goto out;
            }
            json_object_set_new(metadata, key, json_string(eq + 1));
            free(key);
        } else {
            r = usage();
            goto out;
        }
    }
    if (optind + 1 != argc) {
        r = usage();
        goto out;
    }
    const char *name = argv[optind];
    if (!name_ok(name)) {
        goto out;
    }
    if (value_from(file, &value, &n) < 0) {
        r = 1;
        goto out;
    }
    body = json_pack("{s:s%}", "value", value, n);
    if (!body) {
        fprintf(stderr, "space: the value is not valid UTF-8 text\n");
        r = 1;
        goto out;
    }
    if (metadata) {
        json_object_set(body, "metadata", metadata);
    }
    if (rotate) {
        snprintf(path, sizeof(path), "/v1/secrets/%.64s", name);
    } else {
        json_object_set_new(body, "name", json_string(name));
        snprintf(path, sizeof(path), "/v1/secrets");
    }
    r = client_call_ok(rotate ? "PUT" : "POST", path, body, &res) < 0 ? 1 : 0;
    if (r == 0) {
        printf("%s %s (version %lld)\n", rotate ? "rotated" : "created",
               json_string_value(json_object_get(res, "name")),
               (long long)json_integer_value(json_object_get(res, "version")));
    }
out:
    if (body && json_is_string(json_object_get(body, "value"))) {
        json_t *v = json_object_get(body, "value");
        explicit_bzero((char *)json_string_value(v), json_string_length(v));
    }
    if (value) {
        explicit_bzero(value, n);
        free(value);
    }
    json_decref(body);
    json_decref(metadata);
    json_decref(res);
    return r;
}

static int list(bool as_json)
{
    json_t *page = NULL, *all = json_array(), *s;
    char path[160], after[80] = "";
    size_t i;
    int r = 0;

    if (!all) {
        return 1;
    }
    for (;;) {
        snprintf(path, sizeof(path), "/v1/secrets?limit=1000%s%s", after[0] ? "&after=" : "",
                 after);
        if (client_call_ok("GET", path, NULL, &page) < 0) {
            r = 1;
            break;
        }
        json_array_extend(all, json_object_get(page, "secrets"));
        const char *next = json_string_value(json_object_get(page, "next"));
        if (!next) {
            break;
        }
        snprintf(after, sizeof(after), "%s", next);
        json_decref(page);
        page = NULL;
    }
    json_decref(page);
    if (r == 0 && as_json) {
        char *text = json_dumps(all, JSON_INDENT(2));
        puts(text ? text : "[]");
        free(text);
    } else if (r == 0) {
        printf("%-32s %-7s %-27s %s\n", "NAME", "VERSION", "UPDATED", "METADATA");
        json_array_foreach (all, i, s) {
            char *md = json_dumps(json_object_get(s, "metadata"), JSON_COMPACT | JSON_SORT_KEYS);
            printf("%-32s %-7lld %-27s %s\n", json_string_value(json_object_get(s, "name")),
                   (long long)json_integer_value(json_object_get(s, "version")),
                   json_string_value(json_object_get(s, "updated_at")), md ? md : "{}");
            free(md);
        }
    }
    json_decref(all);
    return r;
}

int cmd_secret(int argc, char **argv)
{
    if (argc < 2) {
        return usage();
    }
    if (strcmp(argv[1], "create") == 0 || strcmp(argv[1], "rotate") == 0) {
        return write_secret(argc - 1, argv + 1, strcmp(argv[1], "rotate") == 0);
    }
    if (strcmp(argv[1], "list") == 0 || strcmp(argv[1], "ls") == 0) {
        if (argc > 3 || (argc == 3 && strcmp(argv[2], "--json") != 0)) {
            return usage();
        }
        return list(argc == 3);
    }
    if ((strcmp(argv[1], "delete") == 0 || strcmp(argv[1], "rm") == 0) && argc == 3) {
        char path[160];

        if (!name_ok(argv[2])) {
            return 2;
        }
        snprintf(path, sizeof(path), "/v1/secrets/%.64s", argv[2]);
        if (client_call_ok("DELETE", path, NULL, NULL) < 0) {
            return 1;
        }
        printf("deleted %s\n", argv[2]);
        return 0;
    }
    return usage();
}
