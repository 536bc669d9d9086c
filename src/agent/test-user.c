#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/user.h"

static void check_clean(const char *in, const char *want)
{
    char *out = NULL;

    assert_int_equal(path_clean(in, &out), 0);
    assert_string_equal(out, want);
    free(out);
}

static void test_user_path_clean(void **state)
{
    char *out = NULL;

    check_clean("/", "/");
    check_clean("//a//b/", "/a/b");
    check_clean("/a/./b/../c", "/a/c");
    check_clean("/../..", "/");
    check_clean("/a/b/../../..", "/");
    check_clean("/a/..b/c", "/a/..b/c");
    assert_int_equal(path_clean("rel", &out), -EINVAL);
}

static void test_user_resolve_path(void **state)
{
    struct user u = { .name = "user", .home = "/home/user" };
    char *out = NULL;

    assert_int_equal(user_resolve_path(&u, "", NULL, &out), 0);
    assert_string_equal(out, "/home/user");
    free(out);
    assert_int_equal(user_resolve_path(&u, NULL, "/work", &out), 0);
    assert_string_equal(out, "/work");
    free(out);
    assert_int_equal(user_resolve_path(&u, "~", NULL, &out), 0);
    assert_string_equal(out, "/home/user");
    free(out);
    assert_int_equal(user_resolve_path(&u, "~/a/../b", NULL, &out), 0);
    assert_string_equal(out, "/home/user/b");
    free(out);
    assert_int_equal(user_resolve_path(&u, "x/y", NULL, &out), 0);
    assert_string_equal(out, "/home/user/x/y");
    free(out);
    assert_int_equal(user_resolve_path(&u, "~other", NULL, &out), -EINVAL);
    assert_int_equal(user_resolve_path(&u, "a/~b", NULL, &out), 0);
    assert_string_equal(out, "/home/user/a/~b");
    free(out);
    assert_int_equal(user_resolve_path(&u, "/etc/../tmp/", NULL, &out), 0);
    assert_string_equal(out, "/tmp");
    free(out);
}

static void test_user_basic_auth(void **state)
{
    char *name = NULL;

    /* base64("user:") */
    assert_int_equal(user_from_basic_auth("Basic dXNlcjo=", &name), 0);
    assert_string_equal(name, "user");
    free(name);
    /* base64("root") without a colon */
    assert_int_equal(user_from_basic_auth("basic cm9vdA==", &name), 0);
    assert_string_equal(name, "root");
    free(name);
    assert_int_equal(user_from_basic_auth("Bearer x", &name), -EINVAL);
    assert_int_equal(user_from_basic_auth("Basic !!!!", &name), -EINVAL);
    assert_int_equal(user_from_basic_auth("Basic ", &name), -EINVAL);
    /* base64("a\0b:") must not smuggle a NUL */
    assert_int_equal(user_from_basic_auth("Basic YQBiOg==", &name), -EINVAL);
}

static void test_user_build_env_order(void **state)
{
    struct user u = { .name = "user", .home = "/home/user" };
    json_t *sandbox = json_pack("{s:s, s:s}", "A", "sandbox", "HOME", "/override");
    json_t *request = json_pack("{s:s, s:s}", "A", "request", "B", "b");
    char **env = NULL;
    size_t n = 0;

    assert_int_equal(user_build_env(&u, "/bin", sandbox, request, &env), 0);
    for (char **e = env; *e; e++) {
        n++;
    }
    assert_int_equal(n, 6);
    assert_string_equal(env[0], "PATH=/bin");
    assert_string_equal(env[1], "HOME=/override");
    assert_string_equal(env[2], "USER=user");
    assert_string_equal(env[3], "LOGNAME=user");
    assert_string_equal(env[4], "A=request");
    assert_string_equal(env[5], "B=b");
    strv_free(env);
    json_decref(request);

    request = json_pack("{s:s}", "BAD=NAME", "x");
    assert_int_equal(user_build_env(&u, "/bin", sandbox, request, &env), -EINVAL);
    json_decref(request);
    json_decref(sandbox);
}

static void test_user_lookup_root(void **state)
{
    struct user *u = NULL;

    assert_int_equal(user_lookup("root", &u), 0);
    assert_int_equal(u->uid, 0);
    assert_string_equal(u->home, "/root");
    assert_true(u->n_groups >= 1);
    user_free(u);
    assert_int_equal(user_lookup("no-such-user-here", &u), -ENOENT);
    assert_int_equal(user_lookup("", &u), -ENOENT);
    assert_int_equal(user_lookup("../etc", &u), -ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_user_path_clean),  cmocka_unit_test(test_user_resolve_path),
        cmocka_unit_test(test_user_basic_auth),  cmocka_unit_test(test_user_build_env_order),
        cmocka_unit_test(test_user_lookup_root),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
