/* Tests of jrpc_auth: the checks in their order, against keys read from a
 * key file (the file itself and the ACL: test_jrpc_keys). */
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
static jrpc_signer_t *signer;   /* the broker's: one for every check */

static int setup(void **state)
{
    (void)state;
    signer = jrpc_signer_new();
    return signer && mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    jrpc_signer_destroy(&signer);
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
    jrpc_keys_t *k = NULL;
    assert_int_equal(jrpc_keys_load(path, NULL, &k, err, sizeof err), 0);
    return k;
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
    int rc = jrpc_auth_check(f->keys, signer, &f->req, BODY, sizeof BODY - 1, NOW, SKEW, &key);
    if (rc == 0)
        assert_ptr_equal(key, jrpc_keys_find(f->keys, SPAN("demo")));
    else
        assert_null(key);
    return rc;
}

/* The secrets are what the file says ('#' inside a field is kept, '\r'
 * is not): each key's signature checks. */
static void test_check_file_keys(void **state)
{
    (void)state;
    jrpc_keys_t *k = load_text("demo   s3cr3t-s3cr3t-s3cr3t\n"
                               "with.hash-_9 has#hash-in-secret!! # tail comment\n"
                               "crlf 0123456789abcdef\r\n"
                               "last no-newline-secret-xyz echo");
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
        assert_int_equal(jrpc_auth_check(k, signer, &req, body, 2, 1000, 300, &got), 0);
        assert_ptr_equal(got, jrpc_keys_find(k, kid));
    }
    jrpc_keys_destroy(&k);
}

static void test_check_ok_and_unsigned(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f, NOW);
    assert_int_equal(check(&f), 0);

    jrpc_auth_req_t good = f.req;
    f.req.key.n = 0;
    assert_int_equal(check(&f), JRPC_AUTH_EUNSIGNED);
    f.req = good;
    f.req.timestamp_text.n = 0;
    assert_int_equal(check(&f), JRPC_AUTH_EUNSIGNED);
    f.req = good;
    f.req.nonce.n = 0;
    assert_int_equal(check(&f), JRPC_AUTH_EUNSIGNED);
    f.req = good;
    f.req.signature.n = 0;
    assert_int_equal(check(&f), JRPC_AUTH_EUNSIGNED);
    /* Missing key AND everything else wrong: still "unsigned". */
    f.req = (jrpc_auth_req_t){ .timestamp_text = SPAN("x"), .nonce = SPAN("!") };
    assert_int_equal(check(&f), JRPC_AUTH_EUNSIGNED);

    /* ZeroMQ: the integer timestamp, no text. */
    f.req = good;
    f.req.timestamp_text.n = 0;
    f.req.timestamp = NOW;
    f.req.has_timestamp = true;
    assert_int_equal(check(&f), 0);
    f.req.timestamp = -1;
    assert_int_equal(check(&f), JRPC_AUTH_ETIMESTAMP);
    f.req.timestamp = NOW + 1; /* signed for NOW */
    assert_int_equal(check(&f), JRPC_AUTH_ESIGNATURE);

    /* A NULL key_out is allowed. */
    f.req = good;
    assert_int_equal(jrpc_auth_check(f.keys, signer, &f.req, BODY, sizeof BODY - 1, NOW, SKEW,
                                     NULL), 0);
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
    assert_int_equal(check(&f), JRPC_AUTH_EUNKNOWN_KEY);
    /* Unknown key, malformed timestamp and nonce: unknown key. */
    f.req.timestamp_text = SPAN("soon");
    f.req.nonce = SPAN("short");
    assert_int_equal(check(&f), JRPC_AUTH_EUNKNOWN_KEY);

    /* Stale and bad signature: stale (forgeries never reach the HMAC). */
    f.req = good;
    f.req.timestamp_text = SPAN("1763999000");
    f.req.signature = SPAN(bad_sig);
    assert_int_equal(check(&f), JRPC_AUTH_ESTALE);
    /* Stale and bad nonce: stale. */
    f.req.nonce = SPAN("short");
    assert_int_equal(check(&f), JRPC_AUTH_ESTALE);
    /* Bad timestamp and bad nonce: bad timestamp. */
    f.req.timestamp_text = SPAN("01764000000");
    assert_int_equal(check(&f), JRPC_AUTH_ETIMESTAMP);
    /* Bad nonce and bad signature: bad nonce. */
    f.req = good;
    f.req.nonce = SPAN("AAAAAAAAAAAAAAA=");
    f.req.signature = SPAN(bad_sig);
    assert_int_equal(check(&f), JRPC_AUTH_ENONCE);
    /* Only the signature wrong. */
    f.req = good;
    f.req.signature = SPAN(bad_sig);
    assert_int_equal(check(&f), JRPC_AUTH_ESIGNATURE);
    /* The right signature of another key is a bad signature. */
    f.req = good;
    f.req.key = SPAN("other");
    assert_int_equal(check(&f), JRPC_AUTH_ESIGNATURE);
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
        assert_int_equal(check(&f), JRPC_AUTH_ETIMESTAMP);
    }
    /* Well-formed but far away: stale, not malformed. */
    static const char *const far[] = { "0", "1", "9223372036854775807", "1763999699" };
    for (size_t i = 0; i < sizeof far / sizeof far[0]; i++) {
        f.req.timestamp_text = (jrpc_span_t){ far[i], strlen(far[i]) };
        assert_int_equal(check(&f), JRPC_AUTH_ESTALE);
    }
    /* The text must be the text that was signed: a NUL after it is not read. */
    char *exact = malloc(10);
    assert_non_null(exact);
    memcpy(exact, "1764000000", 10);
    f.req.timestamp_text = (jrpc_span_t){ exact, 10 };
    assert_int_equal(check(&f), 0);
    free(exact);
    jrpc_keys_destroy(&f.keys);
}

static void test_window(void **state)
{
    (void)state;
    static const struct { int64_t delta; int want; } cases[] = {
        { -301, JRPC_AUTH_ESTALE }, { -300, 0 }, { 0, 0 },
        { 300, 0 }, { 301, JRPC_AUTH_ESTALE },
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
    assert_int_equal(jrpc_auth_check(f.keys, signer, &f.req, BODY, sizeof BODY - 1, INT64_MIN,
                                     UINT32_MAX, NULL), JRPC_AUTH_ESTALE);
    f.req.timestamp = 0;
    assert_int_equal(jrpc_auth_check(f.keys, signer, &f.req, BODY, sizeof BODY - 1, INT64_MAX,
                                     UINT32_MAX, NULL), JRPC_AUTH_ESTALE);
    /* Skew 0: only the current second. */
    f.req.timestamp = NOW;
    assert_int_equal(jrpc_auth_check(f.keys, signer, &f.req, BODY, sizeof BODY - 1, NOW, 0, NULL),
                     0);
    assert_int_equal(jrpc_auth_check(f.keys, signer, &f.req, BODY, sizeof BODY - 1, NOW + 1, 0,
                                     NULL), JRPC_AUTH_ESTALE);
    jrpc_keys_destroy(&f.keys);
}

static void test_strerror(void **state)
{
    (void)state;
    assert_string_equal(jrpc_auth_strerror(JRPC_AUTH_EUNSIGNED),
                        "request is not signed: X-JRPC-Key, X-JRPC-Timestamp, X-JRPC-Nonce "
                        "and X-JRPC-Signature are required");
    assert_string_equal(jrpc_auth_strerror(JRPC_AUTH_EUNKNOWN_KEY), "unknown key");
    assert_string_equal(jrpc_auth_strerror(JRPC_AUTH_ETIMESTAMP),
                        "timestamp is not Unix seconds");
    assert_string_equal(jrpc_auth_strerror(JRPC_AUTH_ESTALE),
                        "timestamp outside the allowed window");
    assert_string_equal(jrpc_auth_strerror(JRPC_AUTH_ENONCE),
                        "nonce must be 16 to 64 characters of [A-Za-z0-9_-]");
    assert_string_equal(jrpc_auth_strerror(JRPC_AUTH_ESIGNATURE), "signature does not match");
    assert_non_null(jrpc_auth_strerror(-1));
    assert_non_null(jrpc_auth_strerror(1000));
    assert_string_equal(jrpc_auth_strerror(0), "ok");
    assert_string_equal(jrpc_auth_strerror(-EACCES), "unauthorized");
}

/* A bearer token is checked alone (the signing fields are not read); a
 * bearer key's id in signing headers is refused, whatever the signature. */
static void test_bearer(void **state)
{
    (void)state;
    jrpc_keys_t *k = load_text("tok bearer-sha256:"
                               "965b04f03a8200d4bff70f6df635c1d4d3e9c9a1d164d415efc95b9304bfbaf2\n"
                               "demo s3cr3t-s3cr3t-s3cr3t\n");
    const jrpc_key_t *got = NULL;
    jrpc_auth_req_t req = { .bearer = SPAN("alice-token-0123456789") };
    assert_int_equal(jrpc_auth_check(k, signer, &req, BODY, sizeof BODY - 1, NOW, SKEW, &got), 0);
    assert_ptr_equal(got, jrpc_keys_find(k, SPAN("tok")));
    /* with stale signing fields beside it: still the token alone */
    req.key = SPAN("demo");
    req.timestamp_text = SPAN("1");
    assert_int_equal(jrpc_auth_check(k, signer, &req, BODY, sizeof BODY - 1, NOW, SKEW, &got), 0);
    req = (jrpc_auth_req_t){ .bearer = SPAN("alice-token-012345678") };
    assert_int_equal(jrpc_auth_check(k, signer, &req, BODY, sizeof BODY - 1, NOW, SKEW, &got),
                     JRPC_AUTH_EBEARER);
    assert_null(got);
    /* the bearer key's id, signed with its (empty) secret: refused */
    char sig[JRPC_SIGN_HEX_LEN + 1], ts[24];
    snprintf(ts, sizeof ts, "%lld", (long long)NOW);
    assert_int_equal(jrpc_sign_compute(sig, SPAN(""), SPAN("tok"), NOW, SPAN(NONCE), BODY,
                                       sizeof BODY - 1), 0);
    req = (jrpc_auth_req_t){ .key = SPAN("tok"), .timestamp_text = { ts, strlen(ts) },
                             .nonce = SPAN(NONCE), .signature = { sig, JRPC_SIGN_HEX_LEN } };
    assert_int_equal(jrpc_auth_check(k, signer, &req, BODY, sizeof BODY - 1, NOW, SKEW, &got),
                     JRPC_AUTH_ENOT_SIGNING);
    assert_string_equal(jrpc_auth_strerror(JRPC_AUTH_EBEARER), "unknown bearer token");
    jrpc_keys_destroy(&k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_file_keys),
        cmocka_unit_test(test_check_ok_and_unsigned),
        cmocka_unit_test(test_check_order),
        cmocka_unit_test(test_timestamp_text),
        cmocka_unit_test(test_window),
        cmocka_unit_test(test_strerror),
        cmocka_unit_test(test_bearer),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
