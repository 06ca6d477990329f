/* Tests of jrpc_sentinel, pure: the --redis URL forms (good ones, and bad
 * ones whose message names the problem and never a password), the password
 * file, and the discovery steps fed replies as Redis sends them (RESP text
 * through hiredis' reader): a sentinel down, nil, an error, garbage, the
 * one that answered moved to the front, a round where none answered; ROLE
 * and -READONLY. The same module against sockets: test_jrpc_replay. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>
#include <unistd.h>

#include "jrpc_sentinel.h"

/* A reply parsed from RESP text; the caller frees it. */
static redisReply *reply_of(const char *resp)
{
    redisReader *rd = redisReaderCreate();
    assert_non_null(rd);
    redisReaderFeed(rd, resp, strlen(resp));
    void *rep = NULL;
    assert_int_equal(redisReaderGetReply(rd, &rep), REDIS_OK);
    assert_non_null(rep);
    redisReaderFree(rd);
    return rep;
}

static jrpc_sentinel_t *parse_ok(const char *url, const char *file)
{
    jrpc_sentinel_t *s = NULL;
    char err[256] = "";
    if (jrpc_sentinel_parse(url, file, &s, err, sizeof err) != 0)
        fail_msg("refused good URL '%s': %s", url, err);
    return s;
}

static void test_good_urls(void **state)
{
    (void)state;
    jrpc_sentinel_t *s = parse_ok("redis://u:p%40ss@h:6380/3", NULL);
    assert_false(jrpc_sentinel_enabled(s));
    assert_string_equal(jrpc_sentinel_master(s)->name, "h:6380");
    assert_string_equal(jrpc_sentinel_master_auth(s)->user, "u");
    assert_string_equal(jrpc_sentinel_master_auth(s)->pass, "p@ss");
    assert_int_equal(jrpc_sentinel_db(s), 3);
    assert_int_equal(jrpc_sentinel_count(s), 0);
    jrpc_sentinel_destroy(&s);
    assert_null(s);

    s = parse_ok("unix:///run/redis.sock", NULL);
    assert_string_equal(jrpc_sentinel_master(s)->path, "/run/redis.sock");
    assert_null(jrpc_sentinel_master_auth(s)->pass);
    jrpc_sentinel_destroy(&s);

    s = parse_ok("sentinel://:sentpass@h1:26379,[::1]:26380,h3:1/my-master.1_x/2", NULL);
    assert_true(jrpc_sentinel_enabled(s));
    assert_null(jrpc_sentinel_master(s));   /* not found yet */
    assert_int_equal(jrpc_sentinel_count(s), 3);
    assert_string_equal(jrpc_sentinel_node(s, 0)->name, "h1:26379");
    assert_string_equal(jrpc_sentinel_node(s, 1)->host, "::1");
    assert_string_equal(jrpc_sentinel_node(s, 1)->name, "[::1]:26380");
    assert_string_equal(jrpc_sentinel_node(s, 2)->name, "h3:1");
    assert_null(jrpc_sentinel_node(s, 3));
    assert_string_equal(jrpc_sentinel_name(s), "my-master.1_x");
    assert_int_equal(jrpc_sentinel_db(s), 2);
    assert_null(jrpc_sentinel_auth(s)->user);
    assert_string_equal(jrpc_sentinel_auth(s)->pass, "sentpass");
    assert_null(jrpc_sentinel_master_auth(s)->pass);   /* the URL's is the sentinels' */
    jrpc_sentinel_destroy(&s);

    s = parse_ok("sentinel://127.0.0.1:26379/m", NULL);
    assert_int_equal(jrpc_sentinel_count(s), 1);
    assert_null(jrpc_sentinel_auth(s)->pass);
    assert_int_equal(jrpc_sentinel_db(s), 0);
    jrpc_sentinel_destroy(&s);

    /* Sixteen sentinels is the most. */
    char url[512] = "sentinel://";
    for (int i = 0; i < JRPC_SENTINEL_MAX; i++)
        snprintf(url + strlen(url), sizeof url - strlen(url), "h%d:%d,", i, 26000 + i);
    url[strlen(url) - 1] = '\0';
    strcat(url, "/m");
    s = parse_ok(url, NULL);
    assert_int_equal(jrpc_sentinel_count(s), JRPC_SENTINEL_MAX);
    jrpc_sentinel_destroy(&s);
    jrpc_sentinel_destroy(NULL);
}

/* Each bad URL is refused with a message that says what is wrong. Every
 * one carries a password: it must never be in the message. */
static void test_bad_urls(void **state)
{
    (void)state;
    static const struct { const char *url, *says; } bad[] = {
        { "sentinel://:topsecret@h:1", "missing /MASTER_NAME" },
        { "sentinel://:topsecret@h:1/", "missing /MASTER_NAME" },
        { "sentinel://:topsecret@h:1//m", "missing /MASTER_NAME" },
        { "sentinel://:topsecret@h:1,/m", "sentinel 2: missing or invalid host" },
        { "sentinel://:topsecret@h:1,h:x/m", "sentinel 2: port must be a number" },
        { "sentinel://:topsecret@h:1,h:0/m", "sentinel 2: port must be a number" },
        { "sentinel://:topsecret@h/m", "sentinel 1: missing :port" },
        { "sentinel://:topsecret@::1:5/m", "sentinel 1: IPv6 hosts need [brackets]" },
        { "sentinel://:topsecret@[::1:5/m", "sentinel 1: unterminated [IPv6] host" },
        { "sentinel://:topsecret@h:1/bad!name", "master name must be 1 to 128" },
        { "sentinel://:topsecret@h:1/m/x", "database must be a number" },
        { "sentinel://user@h:1/m", "credentials must be" },
        { "sentinel://:top%zzsecret@h:1/m", "bad %-escape" },
        { "sentinel://:topsecret@h:1/m?x=1", "query, fragment or blanks" },
        { "redis://:topsecret@h:1,h:2", "one host:port in redis://" },
        { "redis://:topsecret@h", "missing :port" },
        { "redis://:topsecret@h:1/db", "database must be a number" },
        { "rediss://:topsecret@h:1", "TLS (rediss://) is not supported" },
        { "http://:topsecret@h:1", "expected redis://" },
        { "", "empty URL" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        jrpc_sentinel_t *s = NULL;
        char err[256] = "";
        if (jrpc_sentinel_parse(bad[i].url, NULL, &s, err, sizeof err) != -EINVAL)
            fail_msg("accepted bad URL '%s'", bad[i].url);
        assert_null(s);
        if (strstr(err, bad[i].says) == NULL || strncmp(err, "--redis: ", 9) != 0)
            fail_msg("'%s': message '%s' does not say '%s'", bad[i].url, err, bad[i].says);
        assert_null(strstr(err, "topsecret"));
    }
    /* Seventeen sentinels. */
    char url[512] = "sentinel://";
    for (int i = 0; i <= JRPC_SENTINEL_MAX; i++)
        snprintf(url + strlen(url), sizeof url - strlen(url), "h:%d,", 1 + i);
    url[strlen(url) - 1] = '\0';
    strcat(url, "/m");
    jrpc_sentinel_t *s = NULL;
    char err[256];
    assert_int_equal(jrpc_sentinel_parse(url, NULL, &s, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "more than 16 sentinels"));
}

static void put(const char *path, const char *text, size_t n)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, n, f), n);
    fclose(f);
}

static void test_password_file(void **state)
{
    (void)state;
    char path[] = "/tmp/jrpc-sentinel-pw-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    put(path, "m4ster\r\nignored\n", 16);
    jrpc_sentinel_t *s = parse_ok("sentinel://:s@h:1/m", path);
    assert_string_equal(jrpc_sentinel_master_auth(s)->pass, "m4ster");
    assert_int_equal(jrpc_sentinel_master_auth(s)->pass_n, 6);
    assert_string_equal(jrpc_sentinel_auth(s)->pass, "s");
    jrpc_sentinel_destroy(&s);
    s = parse_ok("unix:///tmp/r.sock", path);   /* any form may take it */
    assert_string_equal(jrpc_sentinel_master_auth(s)->pass, "m4ster");
    jrpc_sentinel_destroy(&s);
    put(path, "no-newline", 10);
    s = parse_ok("redis://h:1", path);
    assert_string_equal(jrpc_sentinel_master_auth(s)->pass, "no-newline");
    jrpc_sentinel_destroy(&s);

    static const struct { const char *text; size_t n; const char *url, *says; } bad[] = {
        { "pw\n", 3, "redis://:m4ster@h:1", "give it once" },
        { "\nm4ster\n", 8, "redis://h:1", "not empty" },
        { "", 0, "redis://h:1", "not empty" },
        { "m4s\0ter\n", 8, "redis://h:1", "no NUL byte" },
    };
    char err[256];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        put(path, bad[i].text, bad[i].n);
        assert_int_equal(jrpc_sentinel_parse(bad[i].url, path, &s, err, sizeof err), -EINVAL);
        assert_null(s);
        assert_non_null(strstr(err, bad[i].says));
        assert_non_null(strstr(err, "--redis-password-file"));
        assert_null(strstr(err, "m4ster"));
    }
    char big[JRPC_REDIS_PASS_MAX + 2];
    memset(big, 'x', sizeof big);
    put(path, big, sizeof big);
    assert_int_equal(jrpc_sentinel_parse("redis://h:1", path, &s, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "longer than"));
    unlink(path);
    assert_int_equal(jrpc_sentinel_parse("redis://h:1", path, &s, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "cannot read"));
}

static const char ADDR_A[] = "*2\r\n$8\r\n10.0.0.1\r\n$4\r\n6379\r\n";
static const char ADDR_B[] = "*2\r\n$3\r\n::1\r\n$4\r\n6380\r\n";

static int answer(jrpc_sentinel_t *s, const char *resp)
{
    redisReply *rep = reply_of(resp);
    int rc = jrpc_sentinel_answer(s, rep);
    freeReplyObject(rep);
    return rc;
}

static void test_discovery(void **state)
{
    (void)state;
    jrpc_sentinel_t *s = parse_ok("sentinel://s1:1,s2:2,s3:3/m", NULL);
    jrpc_sentinel_round_start(s);
    assert_string_equal(jrpc_sentinel_asking(s)->name, "s1:1");
    jrpc_sentinel_failed(s);                                  /* s1 down */
    assert_string_equal(jrpc_sentinel_asking(s)->name, "s2:2");
    assert_int_equal(answer(s, "*-1\r\n"), -ENOENT);          /* s2: unknown master */
    assert_string_equal(jrpc_sentinel_asking(s)->name, "s3:3");
    assert_null(jrpc_sentinel_master(s));
    assert_int_equal(answer(s, ADDR_A), 1);                   /* s3: found, new */
    assert_null(jrpc_sentinel_asking(s));                     /* the round is over */
    assert_string_equal(jrpc_sentinel_master(s)->host, "10.0.0.1");
    assert_int_equal(jrpc_sentinel_master(s)->port, 6379);
    assert_string_equal(jrpc_sentinel_master(s)->name, "10.0.0.1:6379");
    /* s3 answered: it is first now, the others keep their order. */
    assert_string_equal(jrpc_sentinel_node(s, 0)->name, "s3:3");
    assert_string_equal(jrpc_sentinel_node(s, 1)->name, "s1:1");
    assert_string_equal(jrpc_sentinel_node(s, 2)->name, "s2:2");

    jrpc_sentinel_round_start(s);                             /* a reconnect */
    assert_string_equal(jrpc_sentinel_asking(s)->name, "s3:3");
    assert_int_equal(answer(s, ADDR_A), 0);                   /* the same master */
    assert_string_equal(jrpc_sentinel_node(s, 0)->name, "s3:3");

    jrpc_sentinel_round_start(s);
    assert_int_equal(answer(s, "-ERR no such command\r\n"), -EACCES);
    assert_int_equal(answer(s, ADDR_B), 1);                   /* s1: a failover happened */
    assert_string_equal(jrpc_sentinel_master(s)->name, "[::1]:6380");
    assert_string_equal(jrpc_sentinel_node(s, 0)->name, "s1:1");
    assert_string_equal(jrpc_sentinel_node(s, 1)->name, "s3:3");

    /* A round where nobody names the master: asking() ends at NULL, and
     * the last master found stays as it was. */
    jrpc_sentinel_round_start(s);
    assert_int_equal(answer(s, "*-1\r\n"), -ENOENT);
    jrpc_sentinel_failed(s);
    assert_int_equal(answer(s, "$-1\r\n"), -ENOENT);
    assert_null(jrpc_sentinel_asking(s));
    jrpc_sentinel_failed(s);                                  /* harmless past the end */
    assert_null(jrpc_sentinel_asking(s));
    assert_int_equal(answer(s, ADDR_A), -EPROTO);             /* nobody was asked */
    assert_string_equal(jrpc_sentinel_master(s)->name, "[::1]:6380");
    jrpc_sentinel_destroy(&s);
}

/* Anything but "host, port" is not an address: the next sentinel is asked. */
static void test_bad_answers(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "+OK\r\n", ":6379\r\n", "*1\r\n$1\r\nh\r\n",
        "*3\r\n$1\r\nh\r\n$1\r\n1\r\n$1\r\n1\r\n",
        "*2\r\n$1\r\nh\r\n$1\r\n0\r\n", "*2\r\n$1\r\nh\r\n$5\r\n65536\r\n",
        "*2\r\n$1\r\nh\r\n$2\r\n1x\r\n", "*2\r\n$1\r\nh\r\n$0\r\n\r\n",
        "*2\r\n$3\r\nh h\r\n$1\r\n1\r\n", "*2\r\n$0\r\n\r\n$1\r\n1\r\n",
        "*2\r\n:1\r\n$1\r\n1\r\n", "*2\r\n$1\r\nh\r\n:1\r\n",
        "*2\r\n$3\r\nh/h\r\n$1\r\n1\r\n", "*2\r\n$1\r\nh\r\n$11\r\n12345678901\r\n",
    };
    jrpc_sentinel_t *s = parse_ok("sentinel://s1:1,s2:2/m", NULL);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        jrpc_sentinel_round_start(s);
        if (answer(s, bad[i]) != -EPROTO)
            fail_msg("bad answer %zu taken", i);
        assert_string_equal(jrpc_sentinel_asking(s)->name, "s2:2");
        assert_null(jrpc_sentinel_master(s));
    }
    /* A host name of 253 bytes is one; 254 is not. */
    char resp[600], host[256];
    memset(host, 'a', 254);
    host[254] = '\0';
    snprintf(resp, sizeof resp, "*2\r\n$254\r\n%s\r\n$1\r\n1\r\n", host);
    jrpc_sentinel_round_start(s);
    assert_int_equal(answer(s, resp), -EPROTO);
    host[253] = '\0';
    snprintf(resp, sizeof resp, "*2\r\n$253\r\n%s\r\n$1\r\n1\r\n", host);
    assert_int_equal(answer(s, resp), 1);
    assert_string_equal(jrpc_sentinel_master(s)->host, host);
    jrpc_sentinel_destroy(&s);
}

static void test_role(void **state)
{
    (void)state;
    static const struct { const char *resp; int rc; const char *role; } cases[] = {
        { "*3\r\n$6\r\nmaster\r\n:10\r\n*0\r\n", 0, "" },
        { "*5\r\n$5\r\nslave\r\n$1\r\nh\r\n:1\r\n$9\r\nconnected\r\n:5\r\n", -EROFS, "slave" },
        { "*2\r\n$8\r\nsentinel\r\n*0\r\n", -EROFS, "sentinel" },
        { "*1\r\n$7\r\nmast\ter\r\n", -EROFS, "mast?er" },
        { "-NOPERM no\r\n", -EPROTO, "" },
        { "*0\r\n", -EPROTO, "" },
        { "*1\r\n:1\r\n", -EPROTO, "" },
        { "$6\r\nmaster\r\n", -EPROTO, "" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        redisReply *rep = reply_of(cases[i].resp);
        char role[40];
        assert_int_equal(jrpc_sentinel_role(rep, role, sizeof role), cases[i].rc);
        assert_string_equal(role, cases[i].role);
        assert_int_equal(jrpc_sentinel_role(rep, NULL, 0), cases[i].rc);
        freeReplyObject(rep);
    }
}

static void test_readonly(void **state)
{
    (void)state;
    static const struct { const char *resp; bool ro; } cases[] = {
        { "-READONLY You can't write against a read only replica.\r\n", true },
        { "-READONLY\r\n", true },
        { "-ERR READONLY\r\n", false },
        { "+READONLY\r\n", false },
        { "-NOSCRIPT\r\n", false },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        redisReply *rep = reply_of(cases[i].resp);
        assert_int_equal(jrpc_sentinel_is_readonly(rep), cases[i].ro);
        freeReplyObject(rep);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_urls),
        cmocka_unit_test(test_bad_urls),
        cmocka_unit_test(test_password_file),
        cmocka_unit_test(test_discovery),
        cmocka_unit_test(test_bad_answers),
        cmocka_unit_test(test_role),
        cmocka_unit_test(test_readonly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
