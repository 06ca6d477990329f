/* jrpc_sign — the request signature of the wire contract (docs/SIGNING.md).
 *
 * A client holding a key id and a secret signs each request body:
 *
 *   S   = "v1\n" <key id> "\n" <timestamp> "\n" <nonce> "\n" <hex SHA-256 of body>
 *   sig = lower-case hex of HMAC-SHA256(secret, S)
 *
 * where <timestamp> is Unix seconds in canonical decimal (no sign, no leading
 * zeros) and <nonce> is 16 to 64 characters of [A-Za-z0-9_-]. Pure code
 * (OpenSSL's libcrypto), shared by the broker and the client. */
#ifndef JRPC_SIGN_H
#define JRPC_SIGN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "jrpc_buf.h"

#define JRPC_SIGN_HEX_LEN 64     /* characters of a signature (no NUL) */
#define JRPC_NONCE_MIN    16
#define JRPC_NONCE_MAX    64

/* True when s[0..n) is a well-formed nonce (length and alphabet). */
bool jrpc_sign_nonce_ok(const char *s, size_t n);

/* The 64 lower-case hex digits of SHA-256(body) and a NUL into hex[65]
 * (<body hash> of S; also a body's fingerprint under an idempotency key).
 * Returns 0 or -ENOMEM. */
int jrpc_sign_body_hash(char hex[JRPC_SIGN_HEX_LEN + 1], const char *body, size_t len);

/* Appends the string S for these inputs to out. Returns 0 or -ENOMEM. */
int jrpc_sign_string(jrpc_buf_t *out, jrpc_span_t key_id, int64_t timestamp,
                     jrpc_span_t nonce, const char *body, size_t len);

/* Writes the 64 lower-case hex digits of the signature and a NUL into
 * hex[65]. Returns 0, or -EINVAL (bad nonce, negative timestamp), -ENOMEM. */
int jrpc_sign_compute(char hex[JRPC_SIGN_HEX_LEN + 1], jrpc_span_t secret, jrpc_span_t key_id,
                      int64_t timestamp, jrpc_span_t nonce, const char *body, size_t len);

/* Constant-time check of a client's signature (any case mismatch or wrong
 * length is simply "no"). */
bool jrpc_sign_verify(jrpc_span_t signature, jrpc_span_t secret, jrpc_span_t key_id,
                      int64_t timestamp, jrpc_span_t nonce, const char *body, size_t len);

/* Fills nonce[0..n) with random [A-Za-z0-9_-] characters (n in 16..64) from
 * the OS's CSPRNG and adds a NUL. Returns 0 or -EINVAL / -EIO. */
int jrpc_sign_new_nonce(char *nonce, size_t n);

#endif
