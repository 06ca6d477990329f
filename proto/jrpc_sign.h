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
 * Returns 0 or -ENOMEM. One-shot, as jrpc_sign_compute. */
int jrpc_sign_body_hash(char hex[JRPC_SIGN_HEX_LEN + 1], const char *body, size_t len);

/* Appends the string S for these inputs to out. Returns 0 or -ENOMEM. */
int jrpc_sign_string(jrpc_buf_t *out, jrpc_span_t key_id, int64_t timestamp,
                     jrpc_span_t nonce, const char *body, size_t len);

/* Writes the 64 lower-case hex digits of the signature and a NUL into
 * hex[65]. Returns 0, or -EINVAL (bad nonce, negative timestamp), -ENOMEM.
 * One-shot (a signer and a key made and freed inside): for a hot path keep
 * a jrpc_signer_t and a jrpc_sign_key_t (below). */
int jrpc_sign_compute(char hex[JRPC_SIGN_HEX_LEN + 1], jrpc_span_t secret, jrpc_span_t key_id,
                      int64_t timestamp, jrpc_span_t nonce, const char *body, size_t len);

/* Constant-time check of a client's signature (any case mismatch or wrong
 * length is simply "no"). One-shot, as jrpc_sign_compute. */
bool jrpc_sign_verify(jrpc_span_t signature, jrpc_span_t secret, jrpc_span_t key_id,
                      int64_t timestamp, jrpc_span_t nonce, const char *body, size_t len);

/* ---- signing with reused state: the broker's and the clients' hot path ----
 *
 * The functions above are one-shot: under OpenSSL 3 each of them looks
 * SHA-256 up again (EVP_sha256() is an implicit fetch) and allocates and
 * frees its contexts, about 19 000 instructions per signature beside the
 * hashing itself. A signer fetches SHA-256 once and keeps one digest
 * context; a sign key keeps a secret's HMAC state keyed once. Same bytes
 * out (tests/proto/test_jrpc_sign.c checks RFC 4231 and the worked
 * example against both forms). */

/* What signing reuses from one body to the next: SHA-256 fetched once and a
 * digest context. Not thread-safe: one per thread (the broker has one, each
 * jrpc_client_t its own). NULL when out of memory or libcrypto has no
 * SHA-256. */
typedef struct jrpc_signer jrpc_signer_t;
jrpc_signer_t *jrpc_signer_new(void);

/* NULL-safe; sets *self_p = NULL. */
void jrpc_signer_destroy(jrpc_signer_t **self_p);

/* One secret's HMAC-SHA256 state: the SHA-256 contexts after the key's
 * inner and outer padded blocks (RFC 2104), computed once. Read-only once
 * made, so any number of signers (and threads) may use one. Holds
 * material equivalent to the secret: wiped when destroyed. NULL when out
 * of memory (or secret.n > INT_MAX). */
typedef struct jrpc_sign_key jrpc_sign_key_t;
jrpc_sign_key_t *jrpc_sign_key_new(jrpc_span_t secret);

/* NULL-safe; sets *self_p = NULL. */
void jrpc_sign_key_destroy(jrpc_sign_key_t **self_p);

/* As jrpc_sign_body_hash, with s's context. Returns 0 or -ENOMEM. */
int jrpc_signer_body_hash(jrpc_signer_t *s, char hex[JRPC_SIGN_HEX_LEN + 1], const char *body,
                          size_t len);

/* HMAC-SHA256(k's secret, msg[0..n)) into mac[32], with s's context: the
 * primitive under jrpc_signer_compute. Returns 0 or -ENOMEM. */
int jrpc_signer_hmac(jrpc_signer_t *s, const jrpc_sign_key_t *k, const void *msg, size_t n,
                     unsigned char mac[32]);

/* As jrpc_sign_compute, with s's context and k's state. Returns 0, or
 * -EINVAL (bad nonce, negative timestamp), -ENOMEM. */
int jrpc_signer_compute(jrpc_signer_t *s, const jrpc_sign_key_t *k,
                        char hex[JRPC_SIGN_HEX_LEN + 1], jrpc_span_t key_id, int64_t timestamp,
                        jrpc_span_t nonce, const char *body, size_t len);

/* As jrpc_sign_verify, with s's context and k's state (constant time). */
bool jrpc_signer_verify(jrpc_signer_t *s, const jrpc_sign_key_t *k, jrpc_span_t signature,
                        jrpc_span_t key_id, int64_t timestamp, jrpc_span_t nonce,
                        const char *body, size_t len);

/* Fills nonce[0..n) with random [A-Za-z0-9_-] characters (n in 16..64) from
 * the OS's CSPRNG and adds a NUL. Returns 0 or -EINVAL / -EIO. One-shot:
 * one RAND_bytes call per nonce. */
int jrpc_sign_new_nonce(char *nonce, size_t n);

/* As jrpc_sign_new_nonce, from s's pool of random bytes: drawn from the
 * same CSPRNG (RAND_bytes) about 1.4 KB at a time, each byte handed out
 * once and wiped, so every nonce is as random and as unpredictable as one
 * drawn alone; only the call's fixed cost is shared. A fork() empties the
 * pool in the child (pthread_atfork), so parent and child never share
 * nonces. One signer per thread, as for signing. Returns 0 or -EINVAL /
 * -EIO. */
int jrpc_signer_new_nonce(jrpc_signer_t *s, char *nonce, size_t n);

#endif
