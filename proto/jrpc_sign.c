#include "jrpc_sign.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

/* 64 symbols, so a random byte masked to 6 bits picks one without bias. */
static const char nonce_alphabet[64] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* 1 for the 64 symbols: one load per character (the broker checks every
 * nonce twice, the client once per body). */
#define R3(c) [c] = 1, [c + 1] = 1, [c + 2] = 1
#define R10(c) R3(c), R3(c + 3), R3(c + 6), [c + 9] = 1
static const unsigned char nonce_char[256] = {
    R10('0'), R10('A'), R10('K'), R3('U'), R3('X'), R10('a'), R10('k'), R3('u'), R3('x'),
    ['-'] = 1, ['_'] = 1,
};
#undef R10
#undef R3

bool jrpc_sign_nonce_ok(const char *s, size_t n)
{
    if (n < JRPC_NONCE_MIN || n > JRPC_NONCE_MAX)
        return false;
    unsigned ok = 1;
    for (size_t i = 0; i < n; i++)
        ok &= nonce_char[(unsigned char)s[i]];
    return ok != 0;
}

/* Two hex digits per byte from one table: a load and a 2-byte copy each. */
static const char hex_pairs[513] =
    "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
    "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
    "404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"
    "606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f"
    "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"
    "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
    "c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf"
    "e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";

static void to_hex(char *hex, const unsigned char *bytes, size_t n)
{
    for (size_t i = 0; i < n; i++)
        memcpy(hex + 2 * i, hex_pairs + 2 * bytes[i], 2);
    hex[2 * n] = '\0';
}

/* ---- reused state ---- */

/* Random bytes for nonces, drawn from the CSPRNG this many at a time (64
 * nonces of 22 characters): one RAND_bytes call per draw instead of one per
 * body. RAND_bytes' own cost is mostly per call (its DRBG's lookup, lock
 * and parameters), not per byte. */
#define NONCE_POOL 1408

struct jrpc_signer {
    EVP_MD     *md;    /* SHA-256, fetched once */
    EVP_MD_CTX *ctx;   /* every digest of a signature runs in it, one after another */
    unsigned char pool[NONCE_POOL]; /* random bytes not used yet: pool[used..] */
    size_t      used;  /* bytes of pool handed out (NONCE_POOL: empty) */
    unsigned    gen;   /* fork_gen when the pool was drawn */
};

/* Bumped in the child of every fork(): a pool drawn before it is dropped
 * there, so parent and child never hand out the same bytes (OpenSSL's own
 * DRBG reseeds after a fork the same way). */
static volatile unsigned fork_gen;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void on_fork_child(void)
{
    fork_gen++;
}

static void fork_watch(void)
{
    pthread_atfork(NULL, NULL, on_fork_child);
}

struct jrpc_sign_key {
    EVP_MD_CTX *inner; /* SHA-256 that has absorbed K0 ^ ipad (RFC 2104) */
    EVP_MD_CTX *outer; /* ... and K0 ^ opad */
};

#define HMAC_BLOCK 64  /* SHA-256's block: the size of the padded key K0 */

jrpc_signer_t *jrpc_signer_new(void)
{
    jrpc_signer_t *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    pthread_once(&fork_once, fork_watch);
    s->md = EVP_MD_fetch(NULL, "SHA256", NULL);
    s->ctx = EVP_MD_CTX_new();
    s->used = NONCE_POOL;
    if (s->md == NULL || s->ctx == NULL)
        jrpc_signer_destroy(&s);
    return s;
}

void jrpc_signer_destroy(jrpc_signer_t **self_p)
{
    if (self_p == NULL || *self_p == NULL)
        return;
    jrpc_signer_t *s = *self_p;
    *self_p = NULL;
    EVP_MD_CTX_free(s->ctx);   /* SHA-256's context is freed with OPENSSL_clear_free */
    EVP_MD_free(s->md);
    OPENSSL_cleanse(s->pool, sizeof s->pool);
    free(s);
}

/* ctx := SHA-256 after one padded key block. */
static bool keyed_ctx(EVP_MD_CTX **ctx, const EVP_MD *md, const unsigned char *block)
{
    *ctx = EVP_MD_CTX_new();
    return *ctx != NULL && EVP_DigestInit_ex2(*ctx, md, NULL) == 1 &&
           EVP_DigestUpdate(*ctx, block, HMAC_BLOCK) == 1;
}

jrpc_sign_key_t *jrpc_sign_key_new(jrpc_span_t secret)
{
    unsigned char k0[HMAC_BLOCK] = { 0 }, ipad[HMAC_BLOCK], opad[HMAC_BLOCK];
    unsigned int n = 0;
    bool ok = false;

    if (secret.n > INT_MAX)
        return NULL;
    jrpc_sign_key_t *k = calloc(1, sizeof *k);
    EVP_MD *md = EVP_MD_fetch(NULL, "SHA256", NULL);
    if (k == NULL || md == NULL)
        goto out;
    /* K0: the secret, zero-padded; a secret longer than a block is hashed
     * first (RFC 2104 section 2). */
    if (secret.n > HMAC_BLOCK) {
        if (EVP_Digest(secret.p, secret.n, k0, &n, md, NULL) != 1)
            goto out;
    } else if (secret.n) {
        memcpy(k0, secret.p, secret.n);
    }
    for (size_t i = 0; i < HMAC_BLOCK; i++) {
        ipad[i] = k0[i] ^ 0x36;
        opad[i] = k0[i] ^ 0x5c;
    }
    ok = keyed_ctx(&k->inner, md, ipad) && keyed_ctx(&k->outer, md, opad);
out:
    OPENSSL_cleanse(k0, sizeof k0);
    OPENSSL_cleanse(ipad, sizeof ipad);
    OPENSSL_cleanse(opad, sizeof opad);
    EVP_MD_free(md);   /* the contexts hold their own references */
    if (!ok)
        jrpc_sign_key_destroy(&k);
    return k;
}

void jrpc_sign_key_destroy(jrpc_sign_key_t **self_p)
{
    if (self_p == NULL || *self_p == NULL)
        return;
    jrpc_sign_key_t *k = *self_p;
    *self_p = NULL;
    EVP_MD_CTX_free(k->inner);
    EVP_MD_CTX_free(k->outer);
    free(k);
}

/* SHA-256 of one buffer in s's context: 32 bytes into digest. */
static bool digest_once(jrpc_signer_t *s, const void *p, size_t n, unsigned char digest[32])
{
    unsigned int dlen = 0;
    return EVP_DigestInit_ex2(s->ctx, s->md, NULL) == 1 &&
           EVP_DigestUpdate(s->ctx, n ? p : "", n) == 1 &&
           EVP_DigestFinal_ex(s->ctx, digest, &dlen) == 1 && dlen == 32;
}

int jrpc_signer_body_hash(jrpc_signer_t *s, char hex[JRPC_SIGN_HEX_LEN + 1], const char *body,
                          size_t len)
{
    unsigned char digest[32];
    assert(s != NULL);
    /* Fails only when it cannot allocate SHA-256's context. */
    if (!digest_once(s, body, len, digest))
        return -ENOMEM;
    to_hex(hex, digest, sizeof digest);
    return 0;
}

/* HMAC-SHA256 of the concatenation of parts[0..n) with k's state, in s's
 * context: 32 bytes into mac. The copies (of the keyed contexts, so k stays
 * read-only) fail only on allocation. */
static bool hmac_parts(jrpc_signer_t *s, const jrpc_sign_key_t *k, const jrpc_span_t *parts,
                       size_t n, unsigned char mac[32])
{
    unsigned char inner[32];
    unsigned int dn = 0;
    EVP_MD_CTX *c = s->ctx;
    bool ok = EVP_MD_CTX_copy_ex(c, k->inner) == 1;
    for (size_t i = 0; ok && i < n; i++)
        ok = EVP_DigestUpdate(c, parts[i].n ? parts[i].p : "", parts[i].n) == 1;
    ok = ok && EVP_DigestFinal_ex(c, inner, &dn) == 1 && dn == sizeof inner &&
         EVP_MD_CTX_copy_ex(c, k->outer) == 1 && EVP_DigestUpdate(c, inner, sizeof inner) == 1 &&
         EVP_DigestFinal_ex(c, mac, &dn) == 1 && dn == 32;
    OPENSSL_cleanse(inner, sizeof inner);
    return ok;
}

int jrpc_signer_hmac(jrpc_signer_t *s, const jrpc_sign_key_t *k, const void *msg, size_t n,
                     unsigned char mac[32])
{
    assert(s != NULL && k != NULL);
    jrpc_span_t part = { msg, n };
    return hmac_parts(s, k, &part, 1, mac) ? 0 : -ENOMEM;
}

int jrpc_signer_compute(jrpc_signer_t *s, const jrpc_sign_key_t *k,
                        char hex[JRPC_SIGN_HEX_LEN + 1], jrpc_span_t key_id, int64_t timestamp,
                        jrpc_span_t nonce, const char *body, size_t len)
{
    unsigned char digest[32], mac[32];
    char body_hex[JRPC_SIGN_HEX_LEN + 1], ts[24];

    assert(s != NULL && k != NULL);
    hex[0] = '\0';
    if (timestamp < 0 || !jrpc_sign_nonce_ok(nonce.p, nonce.n))
        return -EINVAL;
    if (!digest_once(s, body, len, digest))
        return -ENOMEM;
    to_hex(body_hex, digest, sizeof digest);
    size_t tn = (size_t)(jrpc_u64_put(ts, (uint64_t)timestamp) - ts);   /* timestamp >= 0 */
    /* S goes to the inner hash in its pieces: no buffer to build. */
    const jrpc_span_t S[] = {
        { "v1\n", 3 }, key_id, { "\n", 1 }, { ts, tn }, { "\n", 1 }, nonce, { "\n", 1 },
        { body_hex, JRPC_SIGN_HEX_LEN },
    };
    if (!hmac_parts(s, k, S, sizeof S / sizeof S[0], mac))
        return -ENOMEM;
    to_hex(hex, mac, sizeof mac);
    OPENSSL_cleanse(mac, sizeof mac);
    return 0;
}

bool jrpc_signer_verify(jrpc_signer_t *s, const jrpc_sign_key_t *k, jrpc_span_t signature,
                        jrpc_span_t key_id, int64_t timestamp, jrpc_span_t nonce,
                        const char *body, size_t len)
{
    char expected[JRPC_SIGN_HEX_LEN + 1];

    /* The length is public (always 64); only the content needs constant time. */
    if (signature.n != JRPC_SIGN_HEX_LEN)
        return false;
    if (jrpc_signer_compute(s, k, expected, key_id, timestamp, nonce, body, len) < 0)
        return false;
    /* Upper-case hex differs byte-wise from ours and is refused: the
     * contract says lower-case, and one spelling per signature keeps
     * every implementation honest. */
    bool ok = CRYPTO_memcmp(expected, signature.p, JRPC_SIGN_HEX_LEN) == 0;
    OPENSSL_cleanse(expected, sizeof expected);
    return ok;
}

/* ---- one-shot ---- */

int jrpc_sign_body_hash(char hex[JRPC_SIGN_HEX_LEN + 1], const char *body, size_t len)
{
    jrpc_signer_t *s = jrpc_signer_new();
    int rc = s ? jrpc_signer_body_hash(s, hex, body, len) : -ENOMEM;
    jrpc_signer_destroy(&s);
    return rc;
}

int jrpc_sign_string(jrpc_buf_t *out, jrpc_span_t key_id, int64_t timestamp,
                     jrpc_span_t nonce, const char *body, size_t len)
{
    char body_hex[JRPC_SIGN_HEX_LEN + 1];
    char ts[24];

    if (jrpc_sign_body_hash(body_hex, body, len) < 0)
        return -ENOMEM;
    int tn = snprintf(ts, sizeof ts, "%" PRId64, timestamp);

    size_t len0 = out->len;
    size_t need = 3 + key_id.n + 1 + (size_t)tn + 1 + nonce.n + 1 + JRPC_SIGN_HEX_LEN;
    if (jrpc_buf_reserve(out, need) < 0)
        return -ENOMEM;
    if (jrpc_buf_append(out, "v1\n", 3) < 0 || jrpc_buf_append(out, key_id.p, key_id.n) < 0 ||
        jrpc_buf_putc(out, '\n') < 0 || jrpc_buf_append(out, ts, (size_t)tn) < 0 ||
        jrpc_buf_putc(out, '\n') < 0 || jrpc_buf_append(out, nonce.p, nonce.n) < 0 ||
        jrpc_buf_putc(out, '\n') < 0 || jrpc_buf_append(out, body_hex, JRPC_SIGN_HEX_LEN) < 0) {
        out->len = len0; /* cannot happen after the reserve; kept for the contract */
        return -ENOMEM;
    }
    return 0;
}

int jrpc_sign_compute(char hex[JRPC_SIGN_HEX_LEN + 1], jrpc_span_t secret, jrpc_span_t key_id,
                      int64_t timestamp, jrpc_span_t nonce, const char *body, size_t len)
{
    hex[0] = '\0';
    if (timestamp < 0 || !jrpc_sign_nonce_ok(nonce.p, nonce.n) || secret.n > INT_MAX)
        return -EINVAL;
    jrpc_signer_t *s = jrpc_signer_new();
    jrpc_sign_key_t *k = s ? jrpc_sign_key_new(secret) : NULL;
    int rc = k ? jrpc_signer_compute(s, k, hex, key_id, timestamp, nonce, body, len) : -ENOMEM;
    jrpc_sign_key_destroy(&k);
    jrpc_signer_destroy(&s);
    return rc;
}

bool jrpc_sign_verify(jrpc_span_t signature, jrpc_span_t secret, jrpc_span_t key_id,
                      int64_t timestamp, jrpc_span_t nonce, const char *body, size_t len)
{
    if (signature.n != JRPC_SIGN_HEX_LEN || secret.n > INT_MAX)
        return false;
    jrpc_signer_t *s = jrpc_signer_new();
    jrpc_sign_key_t *k = s ? jrpc_sign_key_new(secret) : NULL;
    bool ok = k && jrpc_signer_verify(s, k, signature, key_id, timestamp, nonce, body, len);
    jrpc_sign_key_destroy(&k);
    jrpc_signer_destroy(&s);
    return ok;
}

int jrpc_signer_new_nonce(jrpc_signer_t *s, char *nonce, size_t n)
{
    assert(s != NULL);
    if (n < JRPC_NONCE_MIN || n > JRPC_NONCE_MAX)
        return -EINVAL;
    if (s->used + n > NONCE_POOL || s->gen != fork_gen) {
        s->used = NONCE_POOL;
        s->gen = fork_gen;
        if (RAND_bytes(s->pool, NONCE_POOL) != 1)
            return -EIO;
        s->used = 0;
    }
    const unsigned char *raw = s->pool + s->used;
    for (size_t i = 0; i < n; i++)
        nonce[i] = nonce_alphabet[raw[i] & 63];
    nonce[n] = '\0';
    OPENSSL_cleanse(s->pool + s->used, n);   /* handed out: never again */
    s->used += n;
    return 0;
}

int jrpc_sign_new_nonce(char *nonce, size_t n)
{
    unsigned char raw[JRPC_NONCE_MAX];

    if (n < JRPC_NONCE_MIN || n > JRPC_NONCE_MAX)
        return -EINVAL;
    if (RAND_bytes(raw, (int)n) != 1)
        return -EIO;
    for (size_t i = 0; i < n; i++)
        nonce[i] = nonce_alphabet[raw[i] & 63];
    nonce[n] = '\0';
    return 0;
}
