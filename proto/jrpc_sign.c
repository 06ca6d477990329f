#include "jrpc_sign.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

/* 64 symbols, so a random byte masked to 6 bits picks one without bias. */
static const char nonce_alphabet[64] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static bool nonce_char_ok(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_';
}

bool jrpc_sign_nonce_ok(const char *s, size_t n)
{
    if (n < JRPC_NONCE_MIN || n > JRPC_NONCE_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!nonce_char_ok((unsigned char)s[i]))
            return false;
    return true;
}

static void to_hex(char *hex, const unsigned char *bytes, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        hex[2 * i] = digits[bytes[i] >> 4];
        hex[2 * i + 1] = digits[bytes[i] & 15];
    }
    hex[2 * n] = '\0';
}

int jrpc_sign_body_hash(char hex[JRPC_SIGN_HEX_LEN + 1], const char *body, size_t len)
{
    unsigned char digest[32];
    unsigned int dlen = 0;
    /* EVP_Digest fails only when it cannot allocate its context. */
    if (EVP_Digest(len ? body : "", len, digest, &dlen, EVP_sha256(), NULL) != 1 ||
        dlen != sizeof digest)
        return -ENOMEM;
    to_hex(hex, digest, sizeof digest);
    return 0;
}

int jrpc_sign_string(jrpc_buf_t *out, jrpc_span_t key_id, int64_t timestamp,
                     jrpc_span_t nonce, const char *body, size_t len)
{
    unsigned char digest[32];
    char body_hex[2 * sizeof digest + 1];
    char ts[24];

    if (jrpc_sign_body_hash(body_hex, body, len) < 0)
        return -ENOMEM;
    int tn = snprintf(ts, sizeof ts, "%" PRId64, timestamp);

    size_t len0 = out->len;
    size_t need = 3 + key_id.n + 1 + (size_t)tn + 1 + nonce.n + 1 + 2 * sizeof digest;
    if (jrpc_buf_reserve(out, need) < 0)
        return -ENOMEM;
    if (jrpc_buf_append(out, "v1\n", 3) < 0 || jrpc_buf_append(out, key_id.p, key_id.n) < 0 ||
        jrpc_buf_putc(out, '\n') < 0 || jrpc_buf_append(out, ts, (size_t)tn) < 0 ||
        jrpc_buf_putc(out, '\n') < 0 || jrpc_buf_append(out, nonce.p, nonce.n) < 0 ||
        jrpc_buf_putc(out, '\n') < 0 || jrpc_buf_append(out, body_hex, 2 * sizeof digest) < 0) {
        out->len = len0; /* cannot happen after the reserve; kept for the contract */
        return -ENOMEM;
    }
    return 0;
}

int jrpc_sign_compute(char hex[JRPC_SIGN_HEX_LEN + 1], jrpc_span_t secret, jrpc_span_t key_id,
                      int64_t timestamp, jrpc_span_t nonce, const char *body, size_t len)
{
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int maclen = 0;
    jrpc_buf_t s;
    int rc;

    hex[0] = '\0';
    if (timestamp < 0 || !jrpc_sign_nonce_ok(nonce.p, nonce.n) || secret.n > INT_MAX)
        return -EINVAL;
    jrpc_buf_init(&s);
    if ((rc = jrpc_sign_string(&s, key_id, timestamp, nonce, body, len)) < 0)
        goto out;
    /* HMAC() is the one-shot form that OpenSSL 3 keeps (HMAC_CTX is what it
     * deprecates); it fails only on allocation. A non-NULL key pointer keeps
     * an empty secret well-defined. */
    rc = -ENOMEM;
    if (HMAC(EVP_sha256(), secret.n ? secret.p : "", (int)secret.n,
             (const unsigned char *)s.p, s.len, mac, &maclen) == NULL ||
        maclen != JRPC_SIGN_HEX_LEN / 2)
        goto out;
    to_hex(hex, mac, maclen);
    rc = 0;
out:
    OPENSSL_cleanse(mac, sizeof mac);
    jrpc_buf_dispose(&s);
    return rc;
}

bool jrpc_sign_verify(jrpc_span_t signature, jrpc_span_t secret, jrpc_span_t key_id,
                      int64_t timestamp, jrpc_span_t nonce, const char *body, size_t len)
{
    char expected[JRPC_SIGN_HEX_LEN + 1];

    /* The length is public (always 64); only the content needs constant time. */
    if (signature.n != JRPC_SIGN_HEX_LEN)
        return false;
    if (jrpc_sign_compute(expected, secret, key_id, timestamp, nonce, body, len) < 0)
        return false;
    /* Upper-case hex differs byte-wise from ours and is refused: the
     * contract says lower-case, and one spelling per signature keeps
     * every implementation honest. */
    bool ok = CRYPTO_memcmp(expected, signature.p, JRPC_SIGN_HEX_LEN) == 0;
    OPENSSL_cleanse(expected, sizeof expected);
    return ok;
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
