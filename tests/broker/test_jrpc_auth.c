/* Tests of jrpc_auth: the key file, the checks in their order, the ACL. */
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
#include "jrpc_auth.h"
#include "jrpc_sign.h"

#define SPAN(s) ((jrpc_span_t){ (s), sizeof(s) - 1 })

static char tmpdir[] = "/tmp/test_jrpc_auth.XXXXXX";
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

/* Writes text to the key file and loads it. */
static jrpc_keys_t *load_text(const char *text)
{
    snprintf(path, sizeof path, "%s/keys.txt", tmpdir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    err[0] = 'x';
    err[1] = '\0';
    return jrpc_keys_load(path, err, sizeof err);
}

/* Loads text, expects failure with "<path>:<tail>". */
static void expect_error(const char *text, const char *tail)
{
    jrpc_keys_t *k = load_text(text);
    assert_null(k);
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
     * is not. Checked through signatures, the only way secrets leave. */
    static const char body[] = "[]";
    static const struct { const char *id, *secret; } want[] = {
        { "demo", "s3cr3t-s3cr3t-s3cr3t" },
        { "with.hash-_9", "has#hash-in-secret!!" },
        { "crlf", "0123456789abcdef" },
        { "last", "no-newline-secret-xyz" },
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        jrpc_span_t kid = { want[i].id, strlen(want[i].id) };
        char sig[JRPC_SIGN_HEX_LEN + 1];
        assert_int_equal(jrpc_sign_compute(sig, (jrpc_span_t){ want[i].secret,
                                           strlen(want[i].secret) }, kid, 1000,
                                           SPAN("nonce-nonce-nonce"), body, 2), 0);
        jrpc_auth_req_t req = { .key = kid, .timestamp_text = SPAN("1000"),
                                .nonce = SPAN("nonce-nonce-nonce"),
                                .signature = { sig, JRPC_SIGN_HEX_LEN } };
        const jrpc_key_t *got = NULL;
        assert_int_equal(jrpc_auth_check(k, &req, body, 2, 1000, 300, &got), JRPC_AUTH_OK);
        assert_ptr_equal(got, jrpc_keys_find(k, kid));
    }
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
    assert_null(jrpc_keys_load(missing, err, sizeof err));
    char want[sizeof missing + 64];
    snprintf(want, sizeof want, "%s: %s", missing, strerror(ENOENT));
    assert_string_equal(err, want);
    assert_null(jrpc_keys_load(tmpdir, err, sizeof err));
    assert_non_null(strstr(err, tmpdir));

    /* A tiny err buffer is truncated, never overrun; NULL err is allowed. */
    char tiny[4];
    assert_null(jrpc_keys_load(missing, tiny, sizeof tiny));
    assert_int_equal(strlen(tiny), 3);
    assert_null(jrpc_keys_load(missing, NULL, 0));
}

/* ---- the checks ---- */

#define NOW   INT64_C(1764000000)
#define SKEW  300u
#define BODY  "{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"params\":[1,2],\"id\":1}"
#define NONCE "AAAAAAAAAAAAAAAAAAAAAA"

typedef struct fixture {
    jrpc_keys_t *keys;
    char sig[JRPC_SIGN_HEX_LEN + 1];  /* the right signature for ts_text */
    char ts_text[24];
    jrpc_auth_req_t req;              /* a good request, tests spoil one field */
} fixture_t;

static void fixture_init(fixture_t *f, int64_t ts)
{
    memset(f, 0, sizeof *f);
    f->keys = load_text("demo s3cr3t-s3cr3t-s3cr3t\nother other-secret-0123456\n");
    assert_non_null(f->keys);
    snprintf(f->ts_text, sizeof f->ts_text, "%lld", (long long)ts);
    assert_int_equal(jrpc_sign_compute(f->sig, SPAN("s3cr3t-s3cr3t-s3cr3t"), SPAN("demo"), ts,
                                       SPAN(NONCE), BODY, sizeof BODY - 1), 0);
    f->req = (jrpc_auth_req_t){
        .key = SPAN("demo"),
        .timestamp_text = { f->ts_text, strlen(f->ts_text) },
        .nonce = SPAN(NONCE),
        .signature = { f->sig, JRPC_SIGN_HEX_LEN },
    };
}

static int check(fixture_t *f)
{
    const jrpc_key_t *key = (const jrpc_key_t *)f; /* must be overwritten */
    int rc = jrpc_auth_check(f->keys, &f->req, BODY, sizeof BODY - 1, NOW, SKEW, &key);
    if (rc == JRPC_AUTH_OK)
        assert_ptr_equal(key, jrpc_keys_find(f->keys, SPAN("demo")));
    else
        assert_null(key);
    return rc;
}

static void test_check_ok_and_unsigned(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f, NOW);
    assert_int_equal(check(&f), JRPC_AUTH_OK);

    jrpc_auth_req_t good = f.req;
    f.req.key.n = 0;
    assert_int_equal(check(&f), JRPC_AUTH_UNSIGNED);
    f.req = good;
    f.req.timestamp_text.n = 0;
    assert_int_equal(check(&f), JRPC_AUTH_UNSIGNED);
    f.req = good;
    f.req.nonce.n = 0;
    assert_int_equal(check(&f), JRPC_AUTH_UNSIGNED);
    f.req = good;
    f.req.signature.n = 0;
    assert_int_equal(check(&f), JRPC_AUTH_UNSIGNED);
    /* Missing key AND everything else wrong: still "unsigned". */
    f.req = (jrpc_auth_req_t){ .timestamp_text = SPAN("x"), .nonce = SPAN("!") };
    assert_int_equal(check(&f), JRPC_AUTH_UNSIGNED);

    /* ZeroMQ: the integer timestamp, no text. */
    f.req = good;
    f.req.timestamp_text.n = 0;
    f.req.timestamp = NOW;
    f.req.has_timestamp = true;
    assert_int_equal(check(&f), JRPC_AUTH_OK);
    f.req.timestamp = -1;
    assert_int_equal(check(&f), JRPC_AUTH_BAD_TIMESTAMP);
    f.req.timestamp = NOW + 1; /* signed for NOW */
    assert_int_equal(check(&f), JRPC_AUTH_BAD_SIGNATURE);

    /* A NULL key_out is allowed. */
    f.req = good;
    assert_int_equal(jrpc_auth_check(f.keys, &f.req, BODY, sizeof BODY - 1, NOW, SKEW, NULL),
                     JRPC_AUTH_OK);
    jrpc_keys_destroy(&f.keys);
}

static void test_check_order(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f, NOW);
    char bad_sig[] = "0000000000000000000000000000000000000000000000000000000000000000";
    jrpc_auth_req_t good = f.req;

    /* Unknown key and bad signature: unknown key. */
    f.req.key = SPAN("nobody");
    f.req.signature = SPAN(bad_sig);
    assert_int_equal(check(&f), JRPC_AUTH_UNKNOWN_KEY);
    /* Unknown key, malformed timestamp and nonce: unknown key. */
    f.req.timestamp_text = SPAN("soon");
    f.req.nonce = SPAN("short");
    assert_int_equal(check(&f), JRPC_AUTH_UNKNOWN_KEY);

    /* Stale and bad signature: stale (forgeries never reach the HMAC). */
    f.req = good;
    f.req.timestamp_text = SPAN("1763999000");
    f.req.signature = SPAN(bad_sig);
    assert_int_equal(check(&f), JRPC_AUTH_STALE);
    /* Stale and bad nonce: stale. */
    f.req.nonce = SPAN("short");
    assert_int_equal(check(&f), JRPC_AUTH_STALE);
    /* Bad timestamp and bad nonce: bad timestamp. */
    f.req.timestamp_text = SPAN("01764000000");
    assert_int_equal(check(&f), JRPC_AUTH_BAD_TIMESTAMP);
    /* Bad nonce and bad signature: bad nonce. */
    f.req = good;
    f.req.nonce = SPAN("AAAAAAAAAAAAAAA=");
    f.req.signature = SPAN(bad_sig);
    assert_int_equal(check(&f), JRPC_AUTH_BAD_NONCE);
    /* Only the signature wrong. */
    f.req = good;
    f.req.signature = SPAN(bad_sig);
    assert_int_equal(check(&f), JRPC_AUTH_BAD_SIGNATURE);
    /* The right signature of another key is a bad signature. */
    f.req = good;
    f.req.key = SPAN("other");
    assert_int_equal(check(&f), JRPC_AUTH_BAD_SIGNATURE);
    jrpc_keys_destroy(&f.keys);
}

static void test_timestamp_text(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f, NOW);
    static const char *const bad[] = {
        "+1764000000", "-1764000000", "01764000000", " 1764000000", "1764000000 ",
        "1764000000.0", "1.764e9", "0x6923", "1764000000\n", "00", "-0",
        "92233720368547758070",  /* 20 digits */
        "9223372036854775808",   /* INT64_MAX + 1 */
        "18446744073709551616",  /* UINT64_MAX + 1 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        f.req.timestamp_text = (jrpc_span_t){ bad[i], strlen(bad[i]) };
        assert_int_equal(check(&f), JRPC_AUTH_BAD_TIMESTAMP);
    }
    /* Well-formed but far away: stale, not malformed. */
    static const char *const far[] = { "0", "1", "9223372036854775807", "1763999699" };
    for (size_t i = 0; i < sizeof far / sizeof far[0]; i++) {
        f.req.timestamp_text = (jrpc_span_t){ far[i], strlen(far[i]) };
        assert_int_equal(check(&f), JRPC_AUTH_STALE);
    }
    /* The text must be the text that was signed: a NUL after it is not read. */
    char *exact = malloc(10);
    assert_non_null(exact);
    memcpy(exact, "1764000000", 10);
    f.req.timestamp_text = (jrpc_span_t){ exact, 10 };
    assert_int_equal(check(&f), JRPC_AUTH_OK);
    free(exact);
    jrpc_keys_destroy(&f.keys);
}

static void test_window(void **state)
{
    (void)state;
    static const struct { int64_t delta; int want; } cases[] = {
        { -301, JRPC_AUTH_STALE }, { -300, JRPC_AUTH_OK }, { 0, JRPC_AUTH_OK },
        { 300, JRPC_AUTH_OK }, { 301, JRPC_AUTH_STALE },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fixture_t f;
        fixture_init(&f, NOW + cases[i].delta);
        assert_int_equal(check(&f), cases[i].want);
        /* Same over ZeroMQ. */
        f.req.timestamp_text.n = 0;
        f.req.has_timestamp = true;
        f.req.timestamp = NOW + cases[i].delta;
        assert_int_equal(check(&f), cases[i].want);
        jrpc_keys_destroy(&f.keys);
    }
    /* Extremes do not overflow the window arithmetic. */
    fixture_t f;
    fixture_init(&f, NOW);
    f.req.timestamp_text.n = 0;
    f.req.has_timestamp = true;
    f.req.timestamp = INT64_MAX;
    assert_int_equal(jrpc_auth_check(f.keys, &f.req, BODY, sizeof BODY - 1, INT64_MIN,
                                     UINT32_MAX, NULL), JRPC_AUTH_STALE);
    f.req.timestamp = 0;
    assert_int_equal(jrpc_auth_check(f.keys, &f.req, BODY, sizeof BODY - 1, INT64_MAX,
                                     UINT32_MAX, NULL), JRPC_AUTH_STALE);
    /* Skew 0: only the current second. */
    f.req.timestamp = NOW;
    assert_int_equal(jrpc_auth_check(f.keys, &f.req, BODY, sizeof BODY - 1, NOW, 0, NULL),
                     JRPC_AUTH_OK);
    assert_int_equal(jrpc_auth_check(f.keys, &f.req, BODY, sizeof BODY - 1, NOW + 1, 0, NULL),
                     JRPC_AUTH_STALE);
    jrpc_keys_destroy(&f.keys);
}

static void test_reasons(void **state)
{
    (void)state;
    assert_string_equal(jrpc_auth_reason(JRPC_AUTH_UNSIGNED),
                        "request is not signed: X-JRPC-Key, X-JRPC-Timestamp, X-JRPC-Nonce "
                        "and X-JRPC-Signature are required");
    assert_string_equal(jrpc_auth_reason(JRPC_AUTH_UNKNOWN_KEY), "unknown key");
    assert_string_equal(jrpc_auth_reason(JRPC_AUTH_BAD_TIMESTAMP),
                        "timestamp is not Unix seconds");
    assert_string_equal(jrpc_auth_reason(JRPC_AUTH_STALE),
                        "timestamp outside the allowed window");
    assert_string_equal(jrpc_auth_reason(JRPC_AUTH_BAD_NONCE),
                        "nonce must be 16 to 64 characters of [A-Za-z0-9_-]");
    assert_string_equal(jrpc_auth_reason(JRPC_AUTH_BAD_SIGNATURE), "signature does not match");
    assert_non_null(jrpc_auth_reason(-1));
    assert_non_null(jrpc_auth_reason(1000));
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_valid),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_check_ok_and_unsigned),
        cmocka_unit_test(test_check_order),
        cmocka_unit_test(test_timestamp_text),
        cmocka_unit_test(test_window),
        cmocka_unit_test(test_reasons),
        cmocka_unit_test(test_acl),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
