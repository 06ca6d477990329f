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
#include <sys/wait.h>
#include <unistd.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
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

static int cmp_nonce(const void *a, const void *b)
{
    return memcmp(a, b, 23);
}

/* Nonces from signers' pools (jrpc_signer_new_nonce, what libjrpc-client
 * sends): the length asked, the alphabet, every symbol reachable, and no
 * two alike across many draws (several pool refills) and several signers,
 * as jrpc-bench's connections each have their own. */
static void test_signer_nonce(void **state)
{
    (void)state;
    enum { SIGNERS = 4, EACH = 2000 };   /* 2000 × 22 bytes: 31 refills of a signer's pool */
    jrpc_signer_t *s[SIGNERS];
    char (*all)[23] = calloc(SIGNERS * EACH, 23);
    char a[JRPC_NONCE_MAX + 1];
    int seen[256] = { 0 };
    assert_non_null(all);
    for (int k = 0; k < SIGNERS; k++)
        assert_non_null(s[k] = jrpc_signer_new());
    assert_int_equal(jrpc_signer_new_nonce(s[0], a, 15), -EINVAL);
    assert_int_equal(jrpc_signer_new_nonce(s[0], a, 65), -EINVAL);
    for (size_t n = JRPC_NONCE_MIN; n <= JRPC_NONCE_MAX; n++) {
        assert_int_equal(jrpc_signer_new_nonce(s[0], a, n), 0);
        assert_int_equal(strlen(a), n);
        assert_true(jrpc_sign_nonce_ok(a, n));
    }
    for (int i = 0; i < EACH; i++)
        for (int k = 0; k < SIGNERS; k++) {
            char *x = all[i * SIGNERS + k];
            assert_int_equal(jrpc_signer_new_nonce(s[k], x, 22), 0);
            assert_int_equal(strlen(x), 22);
            assert_true(jrpc_sign_nonce_ok(x, 22));
            for (int c = 0; c < 22; c++)
                seen[(unsigned char)x[c]]++;
        }
    qsort(all, SIGNERS * EACH, 23, cmp_nonce);
    for (int i = 1; i < SIGNERS * EACH; i++)
        assert_string_not_equal(all[i - 1], all[i]);
    int symbols = 0;
    for (int c = 0; c < 256; c++)
        symbols += seen[c] > 0;
    assert_int_equal(symbols, 64);
    /* Uniform over the 64 symbols: 176 000 draws, 2750 expected of each;
     * a symbol off by more than 20 % means a biased mapping. */
    for (int c = 0; c < 256; c++)
        if (seen[c] > 0)
            assert_true(seen[c] > 2200 && seen[c] < 3300);
    for (int k = 0; k < SIGNERS; k++)
        jrpc_signer_destroy(&s[k]);
    free(all);
}

/* A fork() after a pool was drawn: the child's nonces are not the ones the
 * parent hands out next (they would be, from a copied pool). */
static void test_signer_nonce_fork(void **state)
{
    (void)state;
    jrpc_signer_t *s = jrpc_signer_new();
    char mine[8][23], theirs[8][23];
    int fd[2];
    assert_non_null(s);
    assert_int_equal(jrpc_signer_new_nonce(s, mine[0], 22), 0);   /* the pool is drawn */
    assert_int_equal(pipe(fd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        for (int i = 0; i < 8; i++)
            if (jrpc_signer_new_nonce(s, theirs[i], 22) != 0)
                _exit(1);
        _exit(write(fd[1], theirs, sizeof theirs) == (ssize_t)sizeof theirs ? 0 : 1);
    }
    close(fd[1]);
    for (int i = 0; i < 8; i++)
        assert_int_equal(jrpc_signer_new_nonce(s, mine[i], 22), 0);
    size_t got = 0;
    while (got < sizeof theirs) {
        ssize_t n = read(fd[0], (char *)theirs + got, sizeof theirs - got);
        assert_true(n > 0);
        got += (size_t)n;
    }
    close(fd[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++)
            assert_string_not_equal(mine[i], theirs[j]);
    jrpc_signer_destroy(&s);
}

/* The signer writes the timestamp and the hex itself: its signature is the
 * HMAC (OpenSSL's one-shot HMAC()) of jrpc_sign_string's S (snprintf) for
 * timestamps of every length, 0 and INT64_MAX included. */
static void test_signer_timestamps(void **state)
{
    (void)state;
    static const int64_t ts[] = { 0, 1, 9, 10, 99, 100, 1764000000, INT64_C(999999999999),
                                  INT64_MAX - 1, INT64_MAX };
    jrpc_signer_t *s = jrpc_signer_new();
    jrpc_sign_key_t *k = jrpc_sign_key_new(SPAN(EX_SECRET));
    assert_non_null(s);
    assert_non_null(k);
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        jrpc_buf_t S;
        jrpc_buf_init(&S);
        assert_int_equal(jrpc_sign_string(&S, SPAN(EX_KEY), ts[i], SPAN(EX_NONCE), EX_BODY,
                                          sizeof EX_BODY - 1), 0);
        unsigned char mac[32];
        unsigned int mn = 0;
        assert_non_null(HMAC(EVP_sha256(), EX_SECRET, sizeof EX_SECRET - 1,
                             (const unsigned char *)S.p, S.len, mac, &mn));
        char want[65], got[JRPC_SIGN_HEX_LEN + 1];
        for (int b = 0; b < 32; b++)
            snprintf(want + 2 * b, 3, "%02x", mac[b]);
        assert_int_equal(jrpc_signer_compute(s, k, got, SPAN(EX_KEY), ts[i], SPAN(EX_NONCE),
                                             EX_BODY, sizeof EX_BODY - 1), 0);
        assert_string_equal(got, want);
        jrpc_buf_dispose(&S);
    }
    jrpc_sign_key_destroy(&k);
    jrpc_signer_destroy(&s);
}

/* ---- the reused state: jrpc_signer_t and jrpc_sign_key_t ---- */

static void hex_of(char *hex, const unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        snprintf(hex + 2 * i, 3, "%02x", b[i]);
}

/* RFC 4231, section 4: the HMAC-SHA-256 test cases (case 5 compares the
 * first 128 bits, as the RFC does). Keys and data at the end of their heap
 * blocks. */
static void test_signer_rfc4231(void **state)
{
    (void)state;
    static const char text7[] = "This is a test using a larger than block-size key and a larger "
        "than block-size data. The key needs to be hashed before being used by the HMAC "
        "algorithm.";
    unsigned char k1[20], k3[20], k4[25], k5[20], k6[131], d3[50], d4[50];
    memset(k1, 0x0b, sizeof k1);
    memset(k3, 0xaa, sizeof k3);
    memset(d3, 0xdd, sizeof d3);
    for (size_t i = 0; i < sizeof k4; i++)
        k4[i] = (unsigned char)(i + 1);
    memset(d4, 0xcd, sizeof d4);
    memset(k5, 0x0c, sizeof k5);
    memset(k6, 0xaa, sizeof k6);
    const struct {
        const void *key; size_t kn; const void *data; size_t dn; const char *mac;
    } cases[] = {
        { k1, sizeof k1, "Hi There", 8,
          "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7" },
        { "Jefe", 4, "what do ya want for nothing?", 28,
          "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843" },
        { k3, sizeof k3, d3, sizeof d3,
          "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe" },
        { k4, sizeof k4, d4, sizeof d4,
          "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b" },
        { k5, sizeof k5, "Test With Truncation", 20, "a3b6167473100ee06e0c796c2955552b" },
        { k6, sizeof k6, "Test Using Larger Than Block-Size Key - Hash Key First", 54,
          "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54" },
        { k6, sizeof k6, text7, sizeof text7 - 1,
          "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2" },
    };
    jrpc_signer_t *s = jrpc_signer_new();
    assert_non_null(s);
    /* Twice round: the signer's context is reused across keys and calls. */
    for (int round = 0; round < 2; round++) {
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            char *key = at_end(cases[i].key, cases[i].kn);
            char *data = at_end(cases[i].data, cases[i].dn);
            jrpc_sign_key_t *k = jrpc_sign_key_new((jrpc_span_t){ key, cases[i].kn });
            assert_non_null(k);
            unsigned char mac[32];
            char hex[65];
            assert_int_equal(jrpc_signer_hmac(s, k, data, cases[i].dn, mac), 0);
            hex_of(hex, mac, sizeof mac);
            assert_memory_equal(hex, cases[i].mac, strlen(cases[i].mac));
            jrpc_sign_key_destroy(&k);
            assert_null(k);
            free(key);
            free(data);
        }
    }
    jrpc_signer_destroy(&s);
    assert_null(s);
    jrpc_signer_destroy(&s);   /* NULL-safe */
    jrpc_sign_key_destroy(NULL);
}

/* Every key length around the block size (0..200 bytes, 64 and 65 being
 * where the key starts being hashed first) and messages across block
 * boundaries, against OpenSSL's one-shot HMAC(). */
static void test_signer_key_lengths(void **state)
{
    (void)state;
    unsigned char key[200], msg[140];
    for (size_t i = 0; i < sizeof key; i++)
        key[i] = (unsigned char)(i * 7 + 3);
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (unsigned char)(i * 13 + 1);
    jrpc_signer_t *s = jrpc_signer_new();
    assert_non_null(s);
    for (size_t kn = 0; kn <= sizeof key; kn++) {
        jrpc_sign_key_t *k = jrpc_sign_key_new((jrpc_span_t){ (const char *)key, kn });
        assert_non_null(k);
        for (size_t mn = 0; mn <= sizeof msg; mn += 11) {
            unsigned char got[32], want[EVP_MAX_MD_SIZE];
            unsigned int wn = 0;
            assert_non_null(HMAC(EVP_sha256(), key, (int)kn, msg, mn, want, &wn));
            assert_int_equal(wn, 32);
            assert_int_equal(jrpc_signer_hmac(s, k, msg, mn, got), 0);
            assert_memory_equal(got, want, 32);
        }
        jrpc_sign_key_destroy(&k);
    }
    jrpc_signer_destroy(&s);
}

/* The reused form gives the worked example's bytes, and the same as the
 * one-shot form for other inputs, one signer for many bodies and keys. */
static void test_signer_worked_example(void **state)
{
    (void)state;
    const size_t len = sizeof EX_BODY - 1;
    char *body = at_end(EX_BODY, len);
    char hex[JRPC_SIGN_HEX_LEN + 1], once[JRPC_SIGN_HEX_LEN + 1];
    jrpc_signer_t *s = jrpc_signer_new();
    jrpc_sign_key_t *k = jrpc_sign_key_new(SPAN(EX_SECRET));
    jrpc_sign_key_t *other = jrpc_sign_key_new(SPAN("another-secret-0123456789"));
    assert_non_null(s);
    assert_non_null(k);
    assert_non_null(other);

    assert_int_equal(jrpc_signer_body_hash(s, hex, body, len), 0);
    assert_string_equal(hex, EX_HASH);
    assert_int_equal(jrpc_signer_body_hash(s, hex, NULL, 0), 0);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    for (int i = 0; i < 3; i++) {
        assert_int_equal(jrpc_signer_compute(s, k, hex, SPAN(EX_KEY), EX_TS, SPAN(EX_NONCE), body,
                                             len), 0);
        assert_string_equal(hex, EX_SIG);
        assert_true(jrpc_signer_verify(s, k, SPAN(EX_SIG), SPAN(EX_KEY), EX_TS, SPAN(EX_NONCE),
                                       body, len));
        assert_false(jrpc_signer_verify(s, other, SPAN(EX_SIG), SPAN(EX_KEY), EX_TS,
                                        SPAN(EX_NONCE), body, len));
        assert_false(jrpc_signer_verify(s, k, SPAN(EX_SIG), SPAN(EX_KEY), EX_TS + 1,
                                        SPAN(EX_NONCE), body, len));
        /* Short signature, bad nonce, negative timestamp. */
        assert_false(jrpc_signer_verify(s, k, (jrpc_span_t){ EX_SIG, 63 }, SPAN(EX_KEY), EX_TS,
                                        SPAN(EX_NONCE), body, len));
        assert_int_equal(jrpc_signer_compute(s, k, hex, SPAN(EX_KEY), EX_TS, SPAN("short"), body,
                                             len), -EINVAL);
        assert_int_equal(hex[0], '\0');
        assert_int_equal(jrpc_signer_compute(s, k, hex, SPAN(EX_KEY), -1, SPAN(EX_NONCE), body,
                                             len), -EINVAL);
    }
    /* Other inputs: the same as the one-shot form (checked above against
     * the CLI), for every body length up to 200 (block boundaries). */
    char big[200];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (char)('a' + i % 26);
    for (size_t n = 0; n <= sizeof big; n++) {
        char *b = at_end(big, n);
        assert_int_equal(jrpc_signer_compute(s, other, hex, SPAN("a-much-longer-key-id.0"), 42,
                                             SPAN("ZZZZZZZZZZZZZZZZ_-09"), b, n), 0);
        assert_int_equal(jrpc_sign_compute(once, SPAN("another-secret-0123456789"),
                                           SPAN("a-much-longer-key-id.0"), 42,
                                           SPAN("ZZZZZZZZZZZZZZZZ_-09"), b, n), 0);
        assert_string_equal(hex, once);
        free(b);
    }
    jrpc_sign_key_destroy(&other);
    jrpc_sign_key_destroy(&k);
    jrpc_signer_destroy(&s);
    free(body);
}

/* tests/data/sign_vectors.tsv: the vectors the TypeScript (and Python)
 * clients' tests check too, so that the same body, key, nonce and time give
 * the same signature in every language. Both the one-shot and the reused
 * signer must give each; at least the worked example must be there. */
static int unhex(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static void test_shared_vectors(void **state)
{
    (void)state;
    FILE *f = fopen(JRPC_TESTDATA "/sign_vectors.tsv", "r");
    assert_non_null(f);
    jrpc_signer_t *s = jrpc_signer_new();
    assert_non_null(s);
    static char line[8192];
    int n = 0, worked = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        line[strcspn(line, "\n")] = '\0';
        char *field[6];
        char *p = line;
        for (int i = 0; i < 6; i++) {
            field[i] = p;
            p = strchr(p, '\t');
            if (i < 5) {
                assert_non_null(p);
                *p++ = '\0';
            }
        }
        assert_null(p);
        size_t hn = strlen(field[4]);
        assert_int_equal(hn % 2, 0);
        char *body = malloc(hn / 2 + 1);
        assert_non_null(body);
        for (size_t i = 0; i < hn / 2; i++) {
            int hi = unhex(field[4][2 * i]), lo = unhex(field[4][2 * i + 1]);
            assert_true(hi >= 0 && lo >= 0);
            body[i] = (char)(hi << 4 | lo);
        }
        int64_t ts = strtoll(field[2], NULL, 10);
        jrpc_span_t secret = { field[1], strlen(field[1]) }, key = { field[0], strlen(field[0]) },
                    nonce = { field[3], strlen(field[3]) };
        char hex[JRPC_SIGN_HEX_LEN + 1];
        assert_int_equal(jrpc_sign_compute(hex, secret, key, ts, nonce, body, hn / 2), 0);
        assert_string_equal(hex, field[5]);
        jrpc_sign_key_t *k = jrpc_sign_key_new(secret);
        assert_non_null(k);
        assert_int_equal(jrpc_signer_compute(s, k, hex, key, ts, nonce, body, hn / 2), 0);
        assert_string_equal(hex, field[5]);
        jrpc_sign_key_destroy(&k);
        if (strcmp(field[5], EX_SIG) == 0)
            worked++;
        free(body);
        n++;
    }
    fclose(f);
    jrpc_signer_destroy(&s);
    assert_true(n >= 5);
    assert_int_equal(worked, 1);
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
        cmocka_unit_test(test_signer_nonce),
        cmocka_unit_test(test_signer_nonce_fork),
        cmocka_unit_test(test_signer_timestamps),
        cmocka_unit_test(test_signer_rfc4231),
        cmocka_unit_test(test_signer_key_lengths),
        cmocka_unit_test(test_signer_worked_example),
        cmocka_unit_test(test_shared_vectors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
