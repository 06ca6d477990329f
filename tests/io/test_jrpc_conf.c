/* io/jrpc_conf: precedence, every kind of bad value and its message, lists,
 * sections, the effective configuration read back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jrpc_conf.h"

static uint32_t num, other;
static const char *str, *choice, *config;
static bool onoff, flag, help;
static jrpc_conf_list_t list;
static const char *const choices[] = { "kv", "json", NULL };

static const jrpc_conf_opt_t opts[] = {
    { "config", JRPC_CONF_STR, "FILE", NULL, "the file", .dest = &config,
      .flags = JRPC_CONF_NO_FILE },
    { "num-ms", JRPC_CONF_UINT, "N", "30", "a number", .dest = &num, .min = 1, .max = 1000 },
    { "other", JRPC_CONF_UINT, "N", "5", "another", .dest = &other, .min = 0, .max = 9 },
    { "endpoint", JRPC_CONF_STR, "ENDPOINT", "tcp://127.0.0.1:1", "a string",
      .dest = &str, .check = jrpc_conf_check_zmq_endpoint },
    { "format", JRPC_CONF_CHOICE, "F", "kv", "a choice", .dest = &choice, .choices = choices },
    { "access-log", JRPC_CONF_ONOFF, "on|off", "on", "a switch", .dest = &onoff },
    { "connect", JRPC_CONF_LIST, "LIST", "tcp://a:1", "a list", .dest = &list,
      .check = jrpc_conf_check_zmq_endpoint },
    { "dry", JRPC_CONF_FLAG, NULL, NULL, "a flag", .dest = &flag },
    { "help", JRPC_CONF_FLAG, NULL, NULL, "help", .dest = &help },
};
static const jrpc_conf_info_t info = { "prog", "1.0", "Usage: prog\n", "Tail.\n" };

static jrpc_conf_t *conf;
static char errtext[8192];
static char outtext[16384];

/* Loads with argv (NULL-terminated), env (NULL-terminated) and, when
 * file is not NULL, a config file with that content given by --config
 * (appended to argv). stderr and stdout land in errtext, outtext. */
static int load(const char *const *args, const char *const *env, const char *file)
{
    static char path[64];
    char *argv[32];
    int argc = 0;
    argv[argc++] = (char *)"prog";
    for (size_t i = 0; args && args[i]; i++)
        argv[argc++] = (char *)args[i];
    if (file) {
        snprintf(path, sizeof path, "/tmp/test_jrpc_conf.%d.ini", (int)getpid());
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(file, f);
        fclose(f);
        argv[argc++] = (char *)"--config";
        argv[argc++] = path;
    }
    argv[argc] = NULL;
    jrpc_conf_destroy(&conf);
    conf = jrpc_conf_new(&info, opts, sizeof opts / sizeof *opts);
    assert_non_null(conf);
    fflush(stderr);
    fflush(stdout);
    FILE *ef = tmpfile(), *of = tmpfile();
    int saved_err = dup(2), saved_out = dup(1);
    dup2(fileno(ef), 2);
    dup2(fileno(of), 1);
    int rc = jrpc_conf_load(conf, argc, argv, (char **)env);
    fflush(stderr);
    fflush(stdout);
    dup2(saved_err, 2);
    dup2(saved_out, 1);
    close(saved_err);
    close(saved_out);
    rewind(ef);
    rewind(of);
    errtext[fread(errtext, 1, sizeof errtext - 1, ef)] = '\0';
    outtext[fread(outtext, 1, sizeof outtext - 1, of)] = '\0';
    fclose(ef);
    fclose(of);
    if (file)
        unlink(path);
    return rc;
}

static void assert_err(const char *want)
{
    if (strstr(errtext, want) == NULL)
        fail_msg("stderr lacks \"%s\"; it was:\n%s", want, errtext);
}

/* load() refuses: -EINVAL, and stderr has each of want (up to two; NULL:
 * none). */
static void expect_refused(const char *const *args, const char *const *env, const char *file,
                           const char *const want[2])
{
    assert_int_equal(load(args, env, file), -EINVAL);
    for (int i = 0; i < 2; i++)
        if (want[i])
            assert_err(want[i]);
}

static void test_defaults(void **state)
{
    assert_int_equal(load(NULL, NULL, NULL), 0);
    assert_int_equal(num, 30);
    assert_int_equal(other, 5);
    assert_string_equal(str, "tcp://127.0.0.1:1");
    assert_string_equal(choice, "kv");
    assert_true(onoff);
    assert_false(flag);
    assert_null(config);
    assert_int_equal(list.n, 1);
    assert_string_equal(list.v[0], "tcp://a:1");
    assert_string_equal(jrpc_conf_source(conf, "num-ms"), "default");
    assert_string_equal(errtext, "");
}

static void test_precedence(void **state)
{
    const char *file = "num-ms = 100\nother = 1\nformat = json\naccess-log = off\n";
    const char *env[] = { "JRPC_NUM_MS=200", "JRPC_OTHER=2", "PATH=/bin", NULL };
    const char *args[] = { "--num-ms", "300", NULL };
    assert_int_equal(load(args, env, file), 0);
    assert_int_equal(num, 300);                  /* flag over env over file */
    assert_int_equal(other, 2);                  /* env over file */
    assert_string_equal(choice, "json");         /* file over default */
    assert_false(onoff);
    assert_string_equal(jrpc_conf_source(conf, "num-ms"), "--num-ms");
    assert_string_equal(jrpc_conf_source(conf, "other"), "env JRPC_OTHER");
    assert_non_null(strstr(jrpc_conf_source(conf, "format"), ".ini:3: format"));
    /* the same without the flag: env wins */
    assert_int_equal(load(NULL, env, file), 0);
    assert_int_equal(num, 200);
    /* JRPC_CONFIG names the file too */
    char path[64], var[80];   /* per process: the suite runs two builds at once */
    snprintf(path, sizeof path, "/tmp/test_jrpc_conf.env.%d.ini", (int)getpid());
    snprintf(var, sizeof var, "JRPC_CONFIG=%s", path);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("other = 7\n", f);
    fclose(f);
    const char *env2[] = { var, NULL };
    assert_int_equal(load(NULL, env2, NULL), 0);
    assert_int_equal(other, 7);
    unlink(path);
}

static void test_repeated_flag_last_wins(void **state)
{
    const char *args[] = { "--num-ms", "3", "--num-ms=4", "--dry", NULL };
    assert_int_equal(load(args, NULL, NULL), 0);
    assert_int_equal(num, 4);
    assert_true(flag);
}

static void test_bad_flags(void **state)
{
    static const struct {
        const char *args[3];   /* NULL-terminated */
        const char *want[2];
    } cases[] = {
        { { "--num-ms", "abc" },
          { "prog: --num-ms: 'abc' is not a whole number from 1 to 1000", "Try 'prog --help'." } },
        { { "--num-ms", "1001" }, { "'1001' is not a whole number from 1 to 1000" } },
        { { "--num-ms", "-1" }, { NULL } },
        { { "--num-ms", "99999999999999999999" }, { NULL } },
        { { "--format", "xml" }, { "prog: --format: 'xml' is not one of kv, json" } },
        { { "--access-log", "yes" }, { "prog: --access-log: 'yes' is not on or off" } },
        { { "--endpoint", "" }, { "prog: --endpoint: empty value" } },
        { { "--endpoint", "tcp:/x" }, { "prog: --endpoint: 'tcp:/x' is not a ZeroMQ endpoint" } },
        { { "--bogus" }, { "prog: unknown option '--bogus'" } },
        { { "--num-ms" }, { "prog: option '--num-ms' needs a value" } },
        { { "stray" }, { "prog: unexpected argument 'stray'" } },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        expect_refused(cases[i].args, NULL, NULL, cases[i].want);
}

static void test_bad_env(void **state)
{
    const char *e1[] = { "JRPC_NUM_MS=0", NULL };
    expect_refused(NULL, e1, NULL,
                   (const char *[2]){ "prog: env JRPC_NUM_MS: '0' is not a whole number from 1 to 1000" });
    const char *e2[] = { "JRPC_FORMAT=", NULL };
    expect_refused(NULL, e2, NULL, (const char *[2]){ "prog: env JRPC_FORMAT: empty value" });
    /* a bad value is an error even when a flag overrides it */
    const char *e3[] = { "JRPC_OTHER=10", NULL };
    const char *a3[] = { "--other", "1", NULL };
    expect_refused(a3, e3, NULL, (const char *[2]){ "env JRPC_OTHER: '10'" });
    /* flags are not variables: JRPC_DRY and JRPC_HELP are ignored */
    const char *e4[] = { "JRPC_URL=tcp://x:1", "JRPC_DRY=1", "JRPC_SECRET=s3cr3t", NULL };
    assert_int_equal(load(NULL, e4, NULL), 0);
    assert_false(flag);
    assert_string_equal(jrpc_conf_ignored_env(conf), "JRPC_URL,JRPC_DRY,JRPC_SECRET");
}

static void test_bad_file(void **state)
{
    static const struct {
        const char *ini;
        const char *want[2];
    } cases[] = {
        { "num-ms = 5\nnum-ms = 6\n", { ".ini:2: num-ms: duplicate key (first at line 1)" } },
        { "# comment\n; comment\n\nnope = 1\n", { ".ini:4: unknown key 'nope'" } },
        { "config = /x\n", { ".ini:1: unknown key 'config'" } },
        { "dry = on\n", { ".ini:1: unknown key 'dry'" } },
        { "other = 12\n", { ".ini:1: other: '12' is not a whole number from 0 to 9" } },
        { "format =\n", { ".ini:1: format: empty value" } },
        { "just words\n", { ".ini:1: not 'key = value'" } },
        { "[weird]\nother = 1\n", { ".ini:2: unknown section [weird]" } },
        /* quotes are not stripped: a quoted number is not a number */
        { "other = \"1\"\n", { NULL } },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        expect_refused(NULL, NULL, cases[i].ini, cases[i].want);
    char longline[600];
    memset(longline, 'a', sizeof longline);
    memcpy(longline, "endpoint = ", 11);
    longline[sizeof longline - 2] = '\n';
    longline[sizeof longline - 1] = '\0';
    expect_refused(NULL, NULL, longline, (const char *[2]){ ".ini:1: line longer than" });
    const char *args[] = { "--config", "/nonexistent/x.ini", NULL };
    expect_refused(args, NULL, NULL,
                   (const char *[2]){ "prog: --config: /nonexistent/x.ini: No such file or directory" });
}

static void test_file_sections_and_comments(void **state)
{
    const char *file = "other = 1 ; inline comment\n"
                       "[jrpc-someone-else]\nnot-ours = 1\n"
                       "[prog]\nnum-ms = 9\n";
    assert_int_equal(load(NULL, NULL, file), 0);
    assert_int_equal(other, 1);
    assert_int_equal(num, 9);
    /* a key in both the top and [prog] is a duplicate */
    assert_int_equal(load(NULL, NULL, "other = 1\n[prog]\nother = 2\n"), -EINVAL);
    assert_err("duplicate key");
}

static void test_lists(void **state)
{
    assert_int_equal(load(NULL, NULL, "connect = tcp://a:1, tcp://b:2 ,tcp://c:3\n"), 0);
    assert_int_equal(list.n, 3);
    assert_string_equal(list.v[2], "tcp://c:3");
    const char *e[] = { "JRPC_CONNECT=tcp://e:1 tcp://f:2", NULL };
    assert_int_equal(load(NULL, e, "connect = tcp://a:1, tcp://b:2\n"), 0);
    assert_int_equal(list.n, 2);
    assert_string_equal(list.v[0], "tcp://e:1");   /* env replaces the file's list */
    const char *a[] = { "--connect", "tcp://x:1", "--connect", "tcp://y:1,tcp://z:1", NULL };
    assert_int_equal(load(a, e, NULL), 0);
    assert_int_equal(list.n, 3);                   /* repeated flags add up */
    assert_string_equal(list.v[0], "tcp://x:1");
    assert_string_equal(list.v[2], "tcp://z:1");
    assert_null(list.v[3]);
    assert_int_equal(load(NULL, NULL, "connect = ,\n"), -EINVAL);
    assert_err("connect: empty value");
    assert_int_equal(load(NULL, NULL, "connect = tcp://a:1, nope\n"), -EINVAL);
    assert_err("connect: 'nope' is not a ZeroMQ endpoint");
}

static void test_help_and_print(void **state)
{
    const char *h[] = { "--help", NULL };
    assert_int_equal(load(h, NULL, NULL), 1);
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++) {
        char want[64];
        snprintf(want, sizeof want, "--%s", opts[i].name);
        assert_non_null(strstr(outtext, want));
        if (opts[i].def) {
            snprintf(want, sizeof want, "[%s]", opts[i].def);
            assert_non_null(strstr(outtext, want));
        }
    }
    assert_non_null(strstr(outtext, "Tail."));
    /* print, read back, print again: the same values */
    const char *a[] = { "--num-ms", "77", "--connect", "tcp://q:1,tcp://r:2", NULL };
    assert_int_equal(load(a, NULL, NULL), 0);
    char first[4096];
    FILE *f = fmemopen(first, sizeof first, "w");
    jrpc_conf_print(conf, f);
    fclose(f);
    assert_non_null(strstr(first, "\nnum-ms = 77\n"));
    assert_non_null(strstr(first, "\nconnect = tcp://q:1, tcp://r:2\n"));
    assert_null(strstr(first, "\ndry"));
    assert_int_equal(load(NULL, NULL, first), 0);
    assert_int_equal(num, 77);
    assert_int_equal(list.n, 2);
    assert_string_equal(list.v[1], "tcp://r:2");
}

static void test_checks(void **state)
{
    char err[256];
    assert_int_equal(jrpc_conf_check_zmq_endpoint("tcp://127.0.0.1:5555", err, sizeof err), 0);
    assert_int_equal(jrpc_conf_check_zmq_endpoint("tcp://*:5555", err, sizeof err), 0);
    assert_int_equal(jrpc_conf_check_zmq_endpoint("ipc:///tmp/x", err, sizeof err), 0);
    assert_int_equal(jrpc_conf_check_zmq_endpoint("inproc://w", err, sizeof err), 0);
    assert_int_equal(jrpc_conf_check_zmq_endpoint("tcp://[::1]:5", err, sizeof err), 0);
    assert_int_equal(jrpc_conf_check_zmq_endpoint("tcp://host", err, sizeof err), -1);
    assert_int_equal(jrpc_conf_check_zmq_endpoint("tcp://:5", err, sizeof err), -1);
    assert_int_equal(jrpc_conf_check_zmq_endpoint("tcp://h:70000", err, sizeof err), -1);
    assert_int_equal(jrpc_conf_check_zmq_endpoint("http://h:1", err, sizeof err), -1);
    assert_int_equal(jrpc_conf_check_zmq_endpoint("ipc://", err, sizeof err), -1);
    assert_int_equal(jrpc_conf_check_hostport("none", err, sizeof err), 0);
    assert_int_equal(jrpc_conf_check_hostport("127.0.0.1:0", err, sizeof err), 0);
    assert_int_equal(jrpc_conf_check_hostport("[::1]:8080", err, sizeof err), 0);
    assert_int_equal(jrpc_conf_check_hostport("localhost:80", err, sizeof err), 0);
    assert_int_equal(jrpc_conf_check_hostport("::1:80", err, sizeof err), -1);
    assert_int_equal(jrpc_conf_check_hostport(":80", err, sizeof err), -1);
    assert_int_equal(jrpc_conf_check_hostport("h:", err, sizeof err), -1);
    assert_int_equal(jrpc_conf_check_hostport("h:x", err, sizeof err), -1);
    assert_int_equal(jrpc_conf_check_hostport("[::1]80", err, sizeof err), -1);
    assert_non_null(strstr(err, "is not HOST:PORT"));
}

static int teardown(void **state)
{
    jrpc_conf_destroy(&conf);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_precedence),
        cmocka_unit_test(test_repeated_flag_last_wins),
        cmocka_unit_test(test_bad_flags),
        cmocka_unit_test(test_bad_env),
        cmocka_unit_test(test_bad_file),
        cmocka_unit_test(test_file_sections_and_comments),
        cmocka_unit_test(test_lists),
        cmocka_unit_test(test_help_and_print),
        cmocka_unit_test(test_checks),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
