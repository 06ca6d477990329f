/* jrpc_auth — who may call: the signature checks, in order, against the
 * keys of the key file (--keys FILE, read by proto/jrpc_keys, which also
 * holds each key's ACL: jrpc_key_allows). Pure code: no sockets, no Redis
 * (the nonce check is jrpc_replay's). */
#ifndef JRPC_AUTH_H
#define JRPC_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "jrpc_buf.h"
#include "jrpc_keys.h"
#include "jrpc_sign.h"

/* What a request carries to prove who sent it (borrowed spans; n == 0 when
 * absent). timestamp_text is the decimal text over HTTP; over ZeroMQ the
 * header frame carries an integer, given as timestamp with has_timestamp. */
typedef struct jrpc_auth_req {
    jrpc_span_t key;
    jrpc_span_t timestamp_text;   /* HTTP: X-JRPC-Timestamp as sent */
    int64_t     timestamp;        /* ZeroMQ: the header frame's integer */
    bool        has_timestamp;    /* timestamp is set (ZeroMQ) */
    jrpc_span_t nonce;
    jrpc_span_t signature;
    jrpc_span_t bearer;           /* HTTP: the token of "Authorization: Bearer TOKEN" */
} jrpc_auth_req_t;

/* Why a request is refused: what jrpc_auth_check returns, 0 being "signed
 * by a known key". */
enum {
    JRPC_AUTH_EUNSIGNED    = -6001,  /* one of the four headers is missing */
    JRPC_AUTH_EUNKNOWN_KEY = -6002,  /* no key with that id */
    JRPC_AUTH_ETIMESTAMP   = -6003,  /* not canonical decimal Unix seconds */
    JRPC_AUTH_ESTALE       = -6004,  /* outside now ± skew */
    JRPC_AUTH_ENONCE       = -6005,  /* not 16..64 of [A-Za-z0-9_-] */
    JRPC_AUTH_ESIGNATURE   = -6006,  /* does not match */
    JRPC_AUTH_EBEARER      = -6007,  /* no bearer key has that token */
    JRPC_AUTH_ENOT_SIGNING = -6008,  /* the key named is a bearer key: it cannot sign */
};

/* Runs the checks that need no I/O, cheapest first: headers present → known
 * key → timestamp well-formed and within [now - skew, now + skew] → nonce
 * well-formed → signature (constant-time, with signer's reused context and
 * the key's HMAC state keyed at load: jrpc_key_hmac). Returns 0, *key_out (when not
 * NULL) then the key; or the first JRPC_AUTH_E* that fails, *key_out NULL.
 * A request with a bearer token is checked by its token alone (the signing
 * fields are not read): 0 and the bearer key it is the token of, which
 * claims no nonce (jrpc_key_is_bearer), or JRPC_AUTH_EBEARER.
 * Never touches Redis. */
int jrpc_auth_check(const jrpc_keys_t *k, jrpc_signer_t *signer, const jrpc_auth_req_t *req,
                    const char *body, size_t len, int64_t now, uint32_t skew,
                    const jrpc_key_t **key_out);

/* Words for a JRPC_AUTH_E* code (or 0), safe to send to the client
 * ("signature does not match"); never includes the expected signature.
 * Never NULL: "unauthorized" for any other code. */
const char *jrpc_auth_strerror(int rc);

#endif
