/* jrpc_auth — the signature checks (jrpc_auth.h). The key file and its
 * lookups are proto/jrpc_keys. */
#include "jrpc_auth.h"

#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "jrpc_sign.h"

/* ---- the checks ---- */

/* Canonical decimal Unix seconds: 1 to 19 digits, no sign, no leading zero
 * (except "0" itself), within int64. */
static bool parse_timestamp(jrpc_span_t text, int64_t *out)
{
    if (text.n < 1 || text.n > 19)
        return false;
    if (text.p[0] == '0' && text.n > 1)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < text.n; i++) {
        unsigned char c = (unsigned char)text.p[i];
        if (c < '0' || c > '9')
            return false;
        v = v * 10 + (uint64_t)(c - '0'); /* 19 digits cannot wrap a uint64 */
    }
    if (v > (uint64_t)INT64_MAX)
        return false;
    *out = (int64_t)v;
    return true;
}

/* |ts - now| > skew without signed overflow: the distance between two int64
 * values always fits a uint64, and unsigned wrap-around computes it. */
static bool outside_window(int64_t ts, int64_t now, uint32_t skew)
{
    uint64_t d = ts >= now ? (uint64_t)ts - (uint64_t)now : (uint64_t)now - (uint64_t)ts;
    return d > skew;
}

int jrpc_auth_check(const jrpc_keys_t *k, jrpc_signer_t *signer, const jrpc_auth_req_t *req,
                    const char *body, size_t len, int64_t now, uint32_t skew,
                    const jrpc_key_t **key_out)
{
    assert(k != NULL && signer != NULL && req != NULL);
    if (key_out)
        *key_out = NULL;

    if (req->bearer.n) {
        const jrpc_key_t *key = jrpc_keys_find_bearer(k, req->bearer);
        if (key == NULL)
            return JRPC_AUTH_EBEARER;
        if (key_out)
            *key_out = key;
        return 0;
    }
    if (req->key.n == 0 || req->nonce.n == 0 || req->signature.n == 0 ||
        (!req->has_timestamp && req->timestamp_text.n == 0))
        return JRPC_AUTH_EUNSIGNED;

    const jrpc_key_t *key = jrpc_keys_find(k, req->key);
    if (key == NULL)
        return JRPC_AUTH_EUNKNOWN_KEY;
    if (jrpc_key_is_bearer(key))
        return JRPC_AUTH_ENOT_SIGNING;

    int64_t ts;
    if (req->has_timestamp)
        ts = req->timestamp;
    else if (!parse_timestamp(req->timestamp_text, &ts))
        return JRPC_AUTH_ETIMESTAMP;
    if (ts < 0)
        return JRPC_AUTH_ETIMESTAMP;
    if (outside_window(ts, now, skew))
        return JRPC_AUTH_ESTALE;

    if (!jrpc_sign_nonce_ok(req->nonce.p, req->nonce.n))
        return JRPC_AUTH_ENONCE;

    if (!jrpc_signer_verify(signer, jrpc_key_hmac(key), req->signature, req->key, ts, req->nonce,
                            body, len))
        return JRPC_AUTH_ESIGNATURE;

    if (key_out)
        *key_out = key;
    return 0;
}

const char *jrpc_auth_strerror(int rc)
{
    switch (rc) {
    case 0:
        return "ok";
    case JRPC_AUTH_EUNSIGNED:
        return "request is not signed: X-JRPC-Key, X-JRPC-Timestamp, X-JRPC-Nonce and "
               "X-JRPC-Signature are required";
    case JRPC_AUTH_EUNKNOWN_KEY:
        return "unknown key";
    case JRPC_AUTH_ETIMESTAMP:
        return "timestamp is not Unix seconds";
    case JRPC_AUTH_ESTALE:
        return "timestamp outside the allowed window";
    case JRPC_AUTH_ENONCE:
        return "nonce must be 16 to 64 characters of [A-Za-z0-9_-]";
    case JRPC_AUTH_ESIGNATURE:
        return "signature does not match";
    case JRPC_AUTH_EBEARER:
        return "unknown bearer token";
    case JRPC_AUTH_ENOT_SIGNING:
        return "this key is a bearer key: send Authorization: Bearer with its token, "
               "it cannot sign";
    default:
        return "unauthorized";
    }
}
