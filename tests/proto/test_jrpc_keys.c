/* Tests of jrpc_keys: the key file as every reader reads it (valid files,
 * each refusal with its message, unreadable files, the readers' options)
 * and the method ACL of a key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>
#include "jrpc_keys.h"

#define SPAN(s) ((jrpc_span_t){ (s), sizeof(s) - 1 })

static char tmpdir[] = "/tmp/test_jrpc_keys.XXXXXX";
static char path[sizeof tmpdir + 32];
static char err[256];

static int setup(void **state)
{
    (void)state;
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    unlink(path);
    return rmdir(tmpdir);
}

static int last_rc;                      /* what the last load_text returned */
static const jrpc_keys_opts_t *opts;     /* what load_text loads with (NULL: the broker's) */

/* Writes text to the key file and loads it with opts. */
static jrpc_keys_t *load_text(const char *text)
{
    snprintf(path, sizeof path, "%s/keys.txt", tmpdir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    err[0] = 'x';
    err[1] = '\0';
    jrpc_keys_t *k = (jrpc_keys_t *)&k;   /* must be overwritten */
    last_rc = jrpc_keys_load(path, opts, &k, err, sizeof err);
    if (last_rc < 0)
        assert_null(k);
    else
        assert_non_null(k);
    return k;
}

/* Loads text, expects failure with "<path>:<tail>". */
static void expect_error(const char *text, const char *tail)
{
    jrpc_keys_t *k = load_text(text);
    assert_null(k);
    assert_int_equal(last_rc, -EINVAL);
    char want[sizeof path + 256];
    snprintf(want, sizeof want, "%s:%s", path, tail);
    assert_string_equal(err, want);
}

static const char good_file[] =
    "# keys for the test\n"
    "\n"
    "   \t\n"
    "demo   s3cr3t-s3cr3t-s3cr3t\n"
    "  calc\tcalc-secret-0123456789 add sum* get_?ata   # comment after globs\n"
    "with.hash-_9 has#hash-in-secret!! # whole-line tail comment\n"
    "crlf 0123456789abcdef\r\n"
    "last no-newline-secret-xyz echo";

static void test_load_valid(void **state)
{
    (void)state;
    jrpc_keys_t *k = load_text(good_file);
    assert_non_null(k);
    assert_string_equal(err, "");
    assert_int_equal(jrpc_keys_count(k), 5);

    const jrpc_key_t *demo = jrpc_keys_find(k, SPAN("demo"));
    assert_non_null(demo);
    jrpc_span_t id = jrpc_key_id(demo);
    assert_int_equal(id.n, 4);
    assert_memory_equal(id.p, "demo", 4);
    assert_non_null(jrpc_keys_find(k, SPAN("calc")));
    assert_non_null(jrpc_keys_find(k, SPAN("with.hash-_9")));
    assert_non_null(jrpc_keys_find(k, SPAN("crlf")));
    assert_non_null(jrpc_keys_find(k, SPAN("last")));
    assert_null(jrpc_keys_find(k, SPAN("dem")));
    assert_null(jrpc_keys_find(k, SPAN("demo2")));
    assert_null(jrpc_keys_find(k, SPAN("DEMO")));
    assert_null(jrpc_keys_find(k, SPAN("")));
    assert_null(jrpc_keys_find(k, (jrpc_span_t){ "demo\0", 5 }));

    /* The secrets are what the file says: '#' inside a field is kept, '\r'
     * is not. */
    static const struct { const char *id, *secret; } want[] = {
        { "demo", "s3cr3t-s3cr3t-s3cr3t" },
        { "calc", "calc-secret-0123456789" },
        { "with.hash-_9", "has#hash-in-secret!!" },
        { "crlf", "0123456789abcdef" },
        { "last", "no-newline-secret-xyz" },
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const jrpc_key_t *key = jrpc_keys_find(k, (jrpc_span_t){ want[i].id, strlen(want[i].id) });
        assert_non_null(key);
        jrpc_span_t secret = jrpc_key_secret(key);
        assert_int_equal(secret.n, strlen(want[i].secret));
        assert_memory_equal(secret.p, want[i].secret, secret.n);
    }
    /* The first key of the file, whatever the sort order. */
    jrpc_span_t first = jrpc_key_id(jrpc_keys_first(k));
    assert_int_equal(first.n, 4);
    assert_memory_equal(first.p, "demo", 4);
    jrpc_keys_destroy(&k);
    assert_null(k);
    jrpc_keys_destroy(&k); /* NULL-safe */
}

static void test_load_errors(void **state)
{
    (void)state;
    expect_error("# c\n\ndemo\n", "3: secret missing for key \"demo\"");
    expect_error("demo #s3cr3t-s3cr3t-s3cr3t\n", "1: secret missing for key \"demo\"");
    expect_error("a 0123456789abcdef\nb 0123456789abcdef\n\na 0123456789abcdeg\n",
                 "4: duplicate key id \"a\" (first on line 1)");
    expect_error("ok 0123456789abcdef\nbad/id 0123456789abcdef\n",
                 "2: key id must be 1 to 64 characters of [A-Za-z0-9_.-]");
    expect_error("caf\xc3\xa9 0123456789abcdef\n",
                 "1: key id must be 1 to 64 characters of [A-Za-z0-9_.-]");
    expect_error("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 0123456789abcdef\n",
                 "1: key id must be 1 to 64 characters of [A-Za-z0-9_.-]");
    expect_error("\n\nshort 0123456789abcde\n",
                 "3: secret of key \"short\" is 15 characters, at least 16 are required");
    expect_error("k 0123456789abcdef\xc3\xa9\n",
                 "1: secret of key \"k\" must be printable ASCII without spaces");
    expect_error("k 0123456789abcdef add\x01x\n",
                 "1: control character in method glob 1 of key \"k\"");
    expect_error("# nothing here\n\n", " no keys");
    expect_error("", " no keys");

    /* 64 characters is the longest id; 16 the shortest secret. */
    jrpc_keys_t *k = load_text(
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 0123456789abcdef\n");
    assert_non_null(k);
    jrpc_keys_destroy(&k);

    /* Unreadable: missing, and a directory. */
    char missing[sizeof tmpdir + 32];
    snprintf(missing, sizeof missing, "%s/nope.txt", tmpdir);
    jrpc_keys_t *k2 = NULL;
    assert_int_equal(jrpc_keys_load(missing, NULL, &k2, err, sizeof err), -ENOENT);
    assert_null(k2);
    char want[sizeof missing + 64];
    snprintf(want, sizeof want, "%s: %s", missing, strerror(ENOENT));
    assert_string_equal(err, want);
    assert_int_equal(jrpc_keys_load(tmpdir, NULL, &k2, err, sizeof err), -EISDIR);
    assert_non_null(strstr(err, tmpdir));

    /* A tiny err buffer is truncated, never overrun; NULL err is allowed. */
    char tiny[4];
    assert_int_equal(jrpc_keys_load(missing, NULL, &k2, tiny, sizeof tiny), -ENOENT);
    assert_int_equal(strlen(tiny), 3);
    assert_int_equal(jrpc_keys_load(missing, NULL, &k2, NULL, 0), -ENOENT);
    assert_null(k2);
}


/* What a reader may relax: the shortest secret, an empty file. The format
 * itself is the same for every reader. */
static void test_load_options(void **state)
{
    (void)state;
    static const jrpc_keys_opts_t lenient = { .secret_min = 1, .allow_empty = true };
    opts = &lenient;
    jrpc_keys_t *k = load_text("# none yet\n");
    assert_int_equal(last_rc, 0);
    assert_int_equal(jrpc_keys_count(k), 0);
    assert_null(jrpc_keys_first(k));
    assert_null(jrpc_keys_find(k, SPAN("a")));
    jrpc_keys_destroy(&k);
    k = load_text("bob s3cr3t-bob # all methods\nalice s3cr3t-alice subtract\n");
    assert_int_equal(jrpc_keys_count(k), 2);
    jrpc_span_t first = jrpc_key_id(jrpc_keys_first(k));
    assert_int_equal(first.n, 3);
    assert_memory_equal(first.p, "bob", 3);
    jrpc_keys_destroy(&k);
    expect_error("alice s3cr3t-alice\ncarol\n", "2: secret missing for key \"carol\"");
    expect_error("a x\nbad/id y\n", "2: key id must be 1 to 64 characters of [A-Za-z0-9_.-]");
    expect_error("a x\nb y\na z\n", "3: duplicate key id \"a\" (first on line 1)");
    static const jrpc_keys_opts_t min4 = { .secret_min = 4 };
    opts = &min4;
    expect_error("a abcd\nb abc\n", "2: secret of key \"b\" is 3 characters, at least 4 are required");
    expect_error("\n", " no keys");
    opts = NULL;
}

/* ---- ACL ---- */

static bool allows(const jrpc_key_t *key, const char *m, size_t n)
{
    char *p = malloc(n ? n : 1); /* at the end of its block: over-reads trip ASan */
    assert_non_null(p);
    memcpy(p, m, n);
    bool ok = jrpc_key_allows(key, (jrpc_span_t){ p, n });
    free(p);
    return ok;
}
#define ALLOWS(key, lit) allows((key), (lit), sizeof(lit) - 1)

static void test_acl(void **state)
{
    (void)state;
    jrpc_keys_t *k = load_text(good_file);
    assert_non_null(k);
    const jrpc_key_t *calc = jrpc_keys_find(k, SPAN("calc"));
    const jrpc_key_t *demo = jrpc_keys_find(k, SPAN("demo"));
    assert_non_null(calc);
    assert_non_null(demo);

    assert_true(ALLOWS(calc, "add"));
    assert_false(ALLOWS(calc, "add2"));
    assert_false(ALLOWS(calc, "Add"));
    assert_false(ALLOWS(calc, "ad"));
    assert_true(ALLOWS(calc, "sum"));
    assert_true(ALLOWS(calc, "sum_all"));
    assert_true(ALLOWS(calc, "sum.x/y"));
    assert_false(ALLOWS(calc, "xsum"));
    assert_true(ALLOWS(calc, "get_data"));
    assert_true(ALLOWS(calc, "get_Xata"));
    assert_false(ALLOWS(calc, "get_ata"));
    assert_false(ALLOWS(calc, "get_dddata"));
    assert_false(ALLOWS(calc, ""));
    assert_false(ALLOWS(calc, "sum\0x"));   /* a NUL never matches */
    assert_false(ALLOWS(calc, "add\0"));
    assert_true(ALLOWS(calc, "sum\xc3\xa9")); /* UTF-8 is just bytes to '*' */

    /* A long method (past the on-stack copy). */
    char long_name[1000];
    memset(long_name, 'x', sizeof long_name);
    memcpy(long_name, "sum", 3);
    assert_true(allows(calc, long_name, sizeof long_name));
    long_name[0] = 'S';
    assert_false(allows(calc, long_name, sizeof long_name));

    /* No globs: every method. */
    assert_true(ALLOWS(demo, "add"));
    assert_true(ALLOWS(demo, "anything.at/all"));
    assert_true(ALLOWS(demo, ""));
    assert_true(ALLOWS(demo, "a\0b"));
    jrpc_keys_destroy(&k);
}

/* Bearer keys: the file holds SHA-256(token); a token finds its key, the
 * hash itself or a near token does not; bearer keys never sign and are not
 * "the first key"; a malformed hash or one token for two keys is refused. */
#define ALICE_HASH "965b04f03a8200d4bff70f6df635c1d4d3e9c9a1d164d415efc95b9304bfbaf2"
#define BOB_HASH   "7e875e1af05facc87c6a24cde83d270e00e03acf38b117e6778f9ac7d9536d8e"
static void test_bearer(void **state)
{
    (void)state;
    opts = NULL;
    jrpc_keys_t *k = load_text("alice bearer-sha256:" ALICE_HASH " ping tools/*\n"
                               "signer s3cr3t-s3cr3t-s3cr3t\n"
                               "bob bearer-sha256:" BOB_HASH "\n");
    assert_non_null(k);
    assert_int_equal(jrpc_keys_count(k), 3);
    const jrpc_key_t *a = jrpc_keys_find_bearer(k, SPAN("alice-token-0123456789"));
    assert_non_null(a);
    assert_true(jrpc_key_is_bearer(a));
    assert_ptr_equal(a, jrpc_keys_find(k, SPAN("alice")));
    assert_int_equal(jrpc_key_secret(a).n, 0);
    assert_true(jrpc_key_allows(a, SPAN("tools/call")));
    assert_false(jrpc_key_allows(a, SPAN("prompts/get")));
    const jrpc_key_t *b = jrpc_keys_find_bearer(k, SPAN("bob-token-abcdefghij"));
    assert_non_null(b);
    assert_memory_equal(jrpc_key_id(b).p, "bob", 3);
    assert_null(jrpc_keys_find_bearer(k, SPAN("alice-token-012345678")));
    assert_null(jrpc_keys_find_bearer(k, SPAN("alice-token-01234567890")));
    assert_null(jrpc_keys_find_bearer(k, SPAN(ALICE_HASH)));
    assert_null(jrpc_keys_find_bearer(k, SPAN("s3cr3t-s3cr3t-s3cr3t")));   /* a secret is no token */
    assert_null(jrpc_keys_find_bearer(k, SPAN("")));
    assert_false(jrpc_key_is_bearer(jrpc_keys_find(k, SPAN("signer"))));
    /* the first key is the first that can sign */
    assert_memory_equal(jrpc_key_id(jrpc_keys_first(k)).p, "signer", 6);
    jrpc_keys_destroy(&k);

    k = load_text("bob bearer-sha256:" BOB_HASH "\n");
    assert_non_null(k);
    assert_null(jrpc_keys_first(k));
    assert_null(jrpc_keys_find_bearer(k, SPAN("alice-token-0123456789")));
    jrpc_keys_destroy(&k);
    k = load_text("s s3cr3t-s3cr3t-s3cr3t\n");   /* no bearer key at all */
    assert_null(jrpc_keys_find_bearer(k, SPAN("alice-token-0123456789")));
    jrpc_keys_destroy(&k);

    expect_error("x bearer-sha256:" "965B04F03A8200D4BFF70F6DF635C1D4D3E9C9A1D164D415EFC95B9304BFBAF2\n",
                 "1: bearer key \"x\" needs bearer-sha256: and 64 lower-case hex digits "
                 "(jrpc bearer-key writes the line)");
    expect_error("x bearer-sha256:" ALICE_HASH "0\n",
                 "1: bearer key \"x\" needs bearer-sha256: and 64 lower-case hex digits "
                 "(jrpc bearer-key writes the line)");
    expect_error("x bearer-sha256:\n",
                 "1: bearer key \"x\" needs bearer-sha256: and 64 lower-case hex digits "
                 "(jrpc bearer-key writes the line)");
    expect_error("a bearer-sha256:" BOB_HASH "\n\nb bearer-sha256:" BOB_HASH "\n",
                 "3: bearer key \"b\" has the same token as \"a\"");

    /* the line jrpc bearer-key writes is the line the loader takes */
    char line[160];
    int n = jrpc_keys_bearer_line(SPAN("alice"), SPAN("alice-token-0123456789"), line, sizeof line);
    assert_int_equal(n, (int)strlen("alice bearer-sha256:" ALICE_HASH));
    assert_string_equal(line, "alice bearer-sha256:" ALICE_HASH);
    assert_int_equal(jrpc_keys_bearer_line(SPAN("al ice"), SPAN("t"), line, sizeof line), -EINVAL);
    assert_int_equal(jrpc_keys_bearer_line(SPAN("alice"), SPAN(""), line, sizeof line), -EINVAL);
    assert_int_equal(jrpc_keys_bearer_line(SPAN("alice"), SPAN("t"), line, 40), -ENOSPC);
}

/* jrpc_keys_text_has_id: the ids `jrpc bearer-key` must not add twice, read
 * as the loader reads lines (issue 36). */
static void test_text_has_id(void **state)
{
    (void)state;
#define HAS(text, id) jrpc_keys_text_has_id(text, strlen(text), SPAN(id))
    const char *t = "# agent old\n  demo s3cr3t-s3cr3t-s3cr3t a*\n\n\tbob\tbearer-sha256:x\r\n"
                    "carol s3cr3t-s3cr3t-s3cr3t";   /* the last line without its newline */
    assert_true(HAS(t, "demo"));
    assert_true(HAS(t, "bob"));
    assert_true(HAS(t, "carol"));
    assert_false(HAS(t, "agent"));    /* in a comment only */
    assert_false(HAS(t, "dem"));      /* a prefix */
    assert_false(HAS(t, "demos"));
    assert_false(HAS(t, "s3cr3t-s3cr3t-s3cr3t"));   /* a secret is no id */
    assert_false(HAS("", "demo"));
    assert_true(HAS("x y\nx z\n", "x"));
    char buf[8];   /* at the end of a buffer: no over-read */
    memcpy(buf + 4, "abcd", 4);
    assert_true(jrpc_keys_text_has_id(buf + 4, 4, SPAN("abcd")));
    assert_false(jrpc_keys_text_has_id(buf + 4, 3, SPAN("abcd")));
#undef HAS
}

/* rate=, burst=, cost=GLOB:N among the globs: they set the key's limit and
 * its method costs, and are no globs themselves. */
static void test_rate_fields(void **state)
{
    (void)state;
    opts = NULL;
    jrpc_keys_t *k = load_text("a s3cr3t-s3cr3t-s3cr3t rate=1000 burst=50 cost=search*:10 "
                               "cost=ping:0 add search*\n"
                               "b s3cr3t-s3cr3t-s3cr3t rate=0\n"
                               "c s3cr3t-s3cr3t-s3cr3t cost=x:3\n");
    assert_non_null(k);
    const jrpc_key_t *a = jrpc_keys_find(k, SPAN("a"));
    uint32_t rate = 7, burst = 7;
    assert_true(jrpc_key_rate(a, &rate, &burst));
    assert_int_equal(rate, 1000);
    assert_int_equal(burst, 50);
    assert_int_equal(jrpc_key_cost(a, SPAN("search_all")), 10);
    assert_int_equal(jrpc_key_cost(a, SPAN("ping")), 0);
    assert_int_equal(jrpc_key_cost(a, SPAN("add")), 1);
    assert_true(jrpc_key_allows(a, SPAN("add")));
    assert_true(jrpc_key_allows(a, SPAN("searchx")));
    assert_false(jrpc_key_allows(a, SPAN("ping")));   /* a cost is no permission */
    assert_false(jrpc_key_allows(a, SPAN("rate=1000")));
    const jrpc_key_t *b = jrpc_keys_find(k, SPAN("b"));
    assert_true(jrpc_key_rate(b, &rate, &burst));
    assert_int_equal(rate, 0);
    assert_int_equal(burst, 0);
    assert_true(jrpc_key_allows(b, SPAN("anything")));
    const jrpc_key_t *c = jrpc_keys_find(k, SPAN("c"));
    assert_false(jrpc_key_rate(c, &rate, &burst));
    assert_int_equal(jrpc_key_cost(c, SPAN("x")), 3);
    assert_true(jrpc_key_allows(c, SPAN("y")));       /* only a cost: every method */
    jrpc_keys_destroy(&k);

    expect_error("a s3cr3t-s3cr3t-s3cr3t rate=x\n",
                 "1: key \"a\": rate= wants 0 (no limit) or more calls (an integer up to 4294967295)");
    expect_error("a s3cr3t-s3cr3t-s3cr3t rate=10 burst=0\n",
                 "1: key \"a\": burst= wants 1 or more calls (an integer up to 4294967295)");
    expect_error("a s3cr3t-s3cr3t-s3cr3t rate=4294967296\n",
                 "1: key \"a\": rate= wants 0 (no limit) or more calls (an integer up to 4294967295)");
    expect_error("a s3cr3t-s3cr3t-s3cr3t burst=5\n", "1: key \"a\": burst= without rate=");
    expect_error("a s3cr3t-s3cr3t-s3cr3t cost=add\n",
                 "1: key \"a\": cost= wants METHOD_GLOB:N, N an integer (0 for free)");
    expect_error("a s3cr3t-s3cr3t-s3cr3t cost=:4\n",
                 "1: key \"a\": cost= wants METHOD_GLOB:N, N an integer (0 for free)");
}

/* A credential's fingerprint (issue 36: a WebSocket keeps it to notice a
 * rotation at reload): the same line read twice gives the same one; another
 * secret or token under the same id, another kind, or an ACL change alone
 * does not / does change it as it should. */
static void test_fingerprint(void **state)
{
    (void)state;
    opts = NULL;
    uint8_t f[6][JRPC_KEY_FP_LEN];
    jrpc_keys_t *k = load_text("s s3cr3t-s3cr3t-s3cr3t\nb bearer-sha256:" ALICE_HASH "\n");
    jrpc_key_fingerprint(jrpc_keys_find(k, SPAN("s")), f[0]);
    jrpc_key_fingerprint(jrpc_keys_find(k, SPAN("b")), f[1]);
    jrpc_keys_destroy(&k);
    k = load_text("b bearer-sha256:" ALICE_HASH " ping\ns s3cr3t-s3cr3t-s3cr3t add\n");
    jrpc_key_fingerprint(jrpc_keys_find(k, SPAN("s")), f[2]);
    jrpc_key_fingerprint(jrpc_keys_find(k, SPAN("b")), f[3]);
    jrpc_keys_destroy(&k);
    k = load_text("s s3cr3t-s3cr3t-s3cr3T\nb bearer-sha256:" BOB_HASH "\n");
    jrpc_key_fingerprint(jrpc_keys_find(k, SPAN("s")), f[4]);
    jrpc_key_fingerprint(jrpc_keys_find(k, SPAN("b")), f[5]);
    jrpc_keys_destroy(&k);
    assert_memory_equal(f[0], f[2], JRPC_KEY_FP_LEN);      /* same secret, other ACL and line */
    assert_memory_equal(f[1], f[3], JRPC_KEY_FP_LEN);      /* same token hash */
    assert_memory_not_equal(f[0], f[4], JRPC_KEY_FP_LEN);  /* the secret replaced */
    assert_memory_not_equal(f[1], f[5], JRPC_KEY_FP_LEN);  /* the token replaced */
    assert_memory_not_equal(f[0], f[1], JRPC_KEY_FP_LEN);
    static const uint8_t zero[JRPC_KEY_FP_LEN];
    assert_memory_not_equal(f[0], zero, JRPC_KEY_FP_LEN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_valid),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_load_options),
        cmocka_unit_test(test_acl),
        cmocka_unit_test(test_bearer),
        cmocka_unit_test(test_text_has_id),
        cmocka_unit_test(test_rate_fields),
        cmocka_unit_test(test_fingerprint),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
