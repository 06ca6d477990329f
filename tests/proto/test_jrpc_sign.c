/* Tests of jrpc_sign: the worked example of docs/SIGNING.md (expected values
 * computed with the openssl CLI, not with this code), verification, nonces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>
#include "jrpc_sign.h"

/* docs/SIGNING.md, "Worked example". Expected values from:
 *   printf '%s' "$body" | sha256sum
 *   printf 'v1\ndemo\n1764000000\nAAAAAAAAAAAAAAAAAAAAAA\n<hash>' |
 *       openssl dgst -sha256 -hmac 's3cr3t-s3cr3t-s3cr3t' */
#define EX_SECRET "s3cr3t-s3cr3t-s3cr3t"
#define EX_KEY    "demo"
#define EX_TS     INT64_C(1764000000)
#define EX_NONCE  "AAAAAAAAAAAAAAAAAAAAAA"
#define EX_BODY   "{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"params\":[1,2],\"id\":1}"
#define EX_HASH   "e5e8ab8ad8226bc0e90cb22b80b5830e1d73a009268a32ff80f2dcd80f5793c3"
#define EX_S      "v1\ndemo\n1764000000\nAAAAAAAAAAAAAAAAAAAAAA\n" EX_HASH
#define EX_SIG    "d7f83f1c9d7da66fc460bdc60338d8c70ad1c26638957545aafb8fe8682deac6"

#define SPAN(s) ((jrpc_span_t){ (s), sizeof(s) - 1 })

/* Copies s to the end of a heap block of exactly n bytes, so a read past
 * it trips ASan. */
static char *at_end(const char *s, size_t n)
{
    char *p = malloc(n ? n : 1);
    assert_non_null(p);
    memcpy(p, s, n);
    return p;
}

static void test_worked_example_string(void **state)
{
    (void)state;
    char *body = at_end(EX_BODY, sizeof EX_BODY - 1);
    jrpc_buf_t s;
    jrpc_buf_init(&s);
    assert_int_equal(jrpc_buf_puts(&s, "prefix:"), 0); /* appends, keeps what was there */
    assert_int_equal(jrpc_sign_string(&s, SPAN(EX_KEY), EX_TS, SPAN(EX_NONCE), body,
                                      sizeof EX_BODY - 1), 0);
    assert_int_equal(s.len, 7 + sizeof EX_S - 1);
    assert_memory_equal(s.p, "prefix:", 7);
    assert_memory_equal(s.p + 7, EX_S, sizeof EX_S - 1);
    jrpc_buf_dispose(&s);
    free(body);
}

static void test_worked_example_signature(void **state)
{
    (void)state;
    char *body = at_end(EX_BODY, sizeof EX_BODY - 1);
    char hex[JRPC_SIGN_HEX_LEN + 1];
    assert_int_equal(jrpc_sign_compute(hex, SPAN(EX_SECRET), SPAN(EX_KEY), EX_TS,
                                       SPAN(EX_NONCE), body, sizeof EX_BODY - 1), 0);
    assert_string_equal(hex, EX_SIG);
    assert_true(jrpc_sign_verify(SPAN(EX_SIG), SPAN(EX_SECRET), SPAN(EX_KEY), EX_TS,
                                 SPAN(EX_NONCE), body, sizeof EX_BODY - 1));
    free(body);
}

static void test_empty_body(void **state)
{
    (void)state;
    jrpc_buf_t s;
    jrpc_buf_init(&s);
    assert_int_equal(jrpc_sign_string(&s, SPAN("k"), 0, SPAN(EX_NONCE), NULL, 0), 0);
    static const char want[] = "v1\nk\n0\n" EX_NONCE "\n"
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    assert_int_equal(s.len, sizeof want - 1);
    assert_memory_equal(s.p, want, sizeof want - 1);
    jrpc_buf_dispose(&s);
}

static bool verify_ex(const char *sig, size_t sig_n, const char *secret, const char *key,
                      int64_t ts, const char *nonce, const char *body, size_t len)
{
    return jrpc_sign_verify((jrpc_span_t){ sig, sig_n },
                            (jrpc_span_t){ secret, strlen(secret) },
                            (jrpc_span_t){ key, strlen(key) }, ts,
                            (jrpc_span_t){ nonce, strlen(nonce) }, body, len);
}

static void test_verify_rejects(void **state)
{
    (void)state;
    const size_t len = sizeof EX_BODY - 1;
    char *body = at_end(EX_BODY, len);
    const size_t n = JRPC_SIGN_HEX_LEN;

    assert_true(verify_ex(EX_SIG, n, EX_SECRET, EX_KEY, EX_TS, EX_NONCE, body, len));

    /* One flipped bit in any body byte. */
    for (size_t i = 0; i < len; i++) {
        body[i] ^= 1;
        assert_false(verify_ex(EX_SIG, n, EX_SECRET, EX_KEY, EX_TS, EX_NONCE, body, len));
        body[i] ^= 1;
    }
    /* One byte fewer. */
    assert_false(verify_ex(EX_SIG, n, EX_SECRET, EX_KEY, EX_TS, EX_NONCE, body, len - 1));
    assert_false(verify_ex(EX_SIG, n, EX_SECRET, "demo2", EX_TS, EX_NONCE, body, len));
    assert_false(verify_ex(EX_SIG, n, EX_SECRET, EX_KEY, EX_TS + 1, EX_NONCE, body, len));
    assert_false(verify_ex(EX_SIG, n, EX_SECRET, EX_KEY, EX_TS, "AAAAAAAAAAAAAAAAAAAAAB",
                           body, len));
    assert_false(verify_ex(EX_SIG, n, "s3cr3t-s3cr3t-s3cr3T", EX_KEY, EX_TS, EX_NONCE,
                           body, len));
    /* Upper-case hex: the contract says lower-case, so it is refused. */
    char upper[] = EX_SIG;
    for (char *c = upper; *c; c++)
        if (*c >= 'a' && *c <= 'f')
            *c = (char)(*c - 'a' + 'A');
    assert_false(verify_ex(upper, n, EX_SECRET, EX_KEY, EX_TS, EX_NONCE, body, len));
    /* Short and long. */
    assert_false(verify_ex(EX_SIG, n - 1, EX_SECRET, EX_KEY, EX_TS, EX_NONCE, body, len));
    assert_false(verify_ex(EX_SIG "0", n + 1, EX_SECRET, EX_KEY, EX_TS, EX_NONCE, body, len));
    assert_false(verify_ex("", 0, EX_SECRET, EX_KEY, EX_TS, EX_NONCE, body, len));
    /* Last digit changed. */
    char last[] = EX_SIG;
    last[n - 1] = last[n - 1] == '6' ? '7' : '6';
    assert_false(verify_ex(last, n, EX_SECRET, EX_KEY, EX_TS, EX_NONCE, body, len));
    /* A malformed nonce or negative timestamp never verifies. */
    assert_false(verify_ex(EX_SIG, n, EX_SECRET, EX_KEY, EX_TS, "short", body, len));
    assert_false(verify_ex(EX_SIG, n, EX_SECRET, EX_KEY, -1, EX_NONCE, body, len));
    free(body);
}

static void test_compute_einval(void **state)
{
    (void)state;
    char hex[JRPC_SIGN_HEX_LEN + 1];
    assert_int_equal(jrpc_sign_compute(hex, SPAN(EX_SECRET), SPAN(EX_KEY), -1,
                                       SPAN(EX_NONCE), "x", 1), -EINVAL);
    assert_int_equal(jrpc_sign_compute(hex, SPAN(EX_SECRET), SPAN(EX_KEY), EX_TS,
                                       SPAN("AAAAAAAAAAAAAAA"), "x", 1), -EINVAL);
    assert_int_equal(jrpc_sign_compute(hex, SPAN(EX_SECRET), SPAN(EX_KEY), EX_TS,
                                       SPAN("AAAAAAAAAAAAAAAA"), "x", 1), 0);
    assert_int_equal(strlen(hex), JRPC_SIGN_HEX_LEN);
}

static bool nonce_ok_at_end(const char *s, size_t n)
{
    char *p = at_end(s, n);
    bool ok = jrpc_sign_nonce_ok(p, n);
    free(p);
    return ok;
}

static void test_nonce_ok(void **state)
{
    (void)state;
    char buf[80];
    memset(buf, 'a', sizeof buf);
    assert_false(nonce_ok_at_end(buf, 0));
    assert_false(nonce_ok_at_end(buf, 15));
    assert_true(nonce_ok_at_end(buf, 16));
    assert_true(nonce_ok_at_end(buf, 64));
    assert_false(nonce_ok_at_end(buf, 65));
    assert_true(nonce_ok_at_end("ABCXYZabcxyz0189-_", 18));

    /* Every byte outside the alphabet, at the first, middle and last place. */
    for (int c = 0; c < 256; c++) {
        bool in = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                  (c >= '0' && c <= '9') || c == '-' || c == '_';
        for (size_t pos = 0; pos < 20; pos += 19) {
            memset(buf, 'a', 20);
            buf[pos] = (char)c;
            assert_int_equal(nonce_ok_at_end(buf, 20), in);
        }
        memset(buf, 'a', 20);
        buf[10] = (char)c;
        assert_int_equal(nonce_ok_at_end(buf, 20), in);
    }
    assert_false(nonce_ok_at_end("AAAAAAAAAAAAAAA=", 16));
    assert_false(nonce_ok_at_end("AAAAAAAAAAAAAAA+", 16));
    assert_false(nonce_ok_at_end("AAAAAAAAAAAAAAA/", 16));
    assert_false(nonce_ok_at_end("AAAAAAA AAAAAAAA", 16));
    assert_false(nonce_ok_at_end("AAAAAAAAAAAAAAA\xc3\xa9", 17));
}

static void test_new_nonce(void **state)
{
    (void)state;
    char a[JRPC_NONCE_MAX + 1], b[JRPC_NONCE_MAX + 1];
    assert_int_equal(jrpc_sign_new_nonce(a, 15), -EINVAL);
    assert_int_equal(jrpc_sign_new_nonce(a, 65), -EINVAL);
    for (size_t n = JRPC_NONCE_MIN; n <= JRPC_NONCE_MAX; n++) {
        assert_int_equal(jrpc_sign_new_nonce(a, n), 0);
        assert_int_equal(strlen(a), n);
        assert_true(jrpc_sign_nonce_ok(a, n));
    }
    /* Distinct, and the whole alphabet shows up (no symbol is unreachable). */
    int seen[256] = { 0 };
    for (int i = 0; i < 200; i++) {
        assert_int_equal(jrpc_sign_new_nonce(a, 22), 0);
        assert_int_equal(jrpc_sign_new_nonce(b, 22), 0);
        assert_string_not_equal(a, b);
        for (int k = 0; k < 22; k++)
            seen[(unsigned char)a[k]]++;
    }
    int symbols = 0;
    for (int c = 0; c < 256; c++)
        symbols += seen[c] > 0;
    assert_int_equal(symbols, 64);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worked_example_string),
        cmocka_unit_test(test_worked_example_signature),
        cmocka_unit_test(test_empty_body),
        cmocka_unit_test(test_verify_rejects),
        cmocka_unit_test(test_compute_einval),
        cmocka_unit_test(test_nonce_ok),
        cmocka_unit_test(test_new_nonce),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
