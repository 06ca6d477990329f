/* jrpc_keys — the signing key file, read one way by everyone who reads it:
 * the broker (--keys), the jrpc CLI and jrpc-bench (--key-file).
 *
 * Format (docs/SIGNING.md): one key per line,
 *     <key id> <secret> [method-glob ...]
 * fields separated by spaces or tabs; a '#' at the start of a field starts a
 * comment (inside a field, a secret, it is part of it); blank lines are
 * skipped; a CR before the newline is dropped. Key ids are 1 to
 * JRPC_KEYS_ID_MAX characters of [A-Za-z0-9_.-], each defined once; a secret
 * is printable ASCII without spaces; the globs (fnmatch(3) patterns) are the
 * methods the key may call, none meaning all.
 *
 * A secret of the form "bearer-sha256:" and 64 lower-case hex digits makes
 * a bearer key instead (docs/SIGNING.md "Bearer keys"): the file holds the
 * SHA-256 of a token the client sends as "Authorization: Bearer TOKEN", not
 * the token; such a key cannot sign, and a signing key is no bearer token.
 *
 * Pure code apart from reading the file with stdio: no sockets, no loop.
 * Secrets never appear in a message, and the lines read are wiped. */
#ifndef JRPC_KEYS_H
#define JRPC_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "jrpc_buf.h"
#include "jrpc_sign.h"

#define JRPC_KEYS_ID_MAX     64   /* longest key id */
#define JRPC_KEYS_SECRET_MIN 16   /* shortest secret the broker accepts */
#define JRPC_KEYS_BEARER     "bearer-sha256:"   /* the secret field's prefix of a bearer key */
#define JRPC_KEYS_TOKEN_MAX  240  /* longest bearer token looked up */

typedef struct jrpc_keys jrpc_keys_t;
typedef struct jrpc_key  jrpc_key_t;

/* What a reader requires beyond the format. A NULL opts is the broker's:
 * { .secret_min = JRPC_KEYS_SECRET_MIN, .allow_empty = false }. */
typedef struct jrpc_keys_opts {
    size_t secret_min;   /* shortest secret accepted (>= 1) */
    bool   allow_empty;  /* a file with no key is an empty set, not an error */
} jrpc_keys_opts_t;

/* Reads the key file at path into *out (set to NULL on error).
 * Returns 0; -EINVAL for a file the format (or opts) refuses: a bad line, a
 * duplicate id, no key at all; -ENOMEM; or the -errno of opening or reading
 * the file. On error err holds a message naming the file, and the line when
 * there is one ("keys.txt:3: secret missing for key \"demo\"", "keys.txt:
 * No such file or directory", "keys.txt: no keys"); err may be NULL.
 * Blocks on the file system only. */
int jrpc_keys_load(const char *path, const jrpc_keys_opts_t *opts, jrpc_keys_t **out, char *err,
                   size_t errlen);

/* Frees the set, wiping the secrets. NULL-safe; sets *self_p = NULL. */
void jrpc_keys_destroy(jrpc_keys_t **self_p);

size_t jrpc_keys_count(const jrpc_keys_t *k);

/* The key with this id, or NULL. Borrowed from k. */
const jrpc_key_t *jrpc_keys_find(const jrpc_keys_t *k, jrpc_span_t id);

/* The bearer key whose hash is SHA-256(token), or NULL (none, a token of
 * more than JRPC_KEYS_TOKEN_MAX bytes, or out of memory). Borrowed from k.
 * The comparison is on hashes, so its timing says nothing about a token. */
const jrpc_key_t *jrpc_keys_find_bearer(const jrpc_keys_t *k, jrpc_span_t token);

/* The signing key defined first in the file (bearer keys are skipped), or
 * NULL when there is none. */
const jrpc_key_t *jrpc_keys_first(const jrpc_keys_t *k);

/* The key's id and secret, borrowed from its set (the secret is never to
 * be logged; the set wipes it when destroyed). A bearer key's secret is
 * empty. */
jrpc_span_t jrpc_key_id(const jrpc_key_t *key);
jrpc_span_t jrpc_key_secret(const jrpc_key_t *key);

/* The key's secret keyed once for HMAC-SHA256 (jrpc_signer_verify), made
 * when the file is read; borrowed from its set. NULL for a bearer key. */
const jrpc_sign_key_t *jrpc_key_hmac(const jrpc_key_t *key);

/* True for a bearer key (it authenticates by token, never by signature). */
bool jrpc_key_is_bearer(const jrpc_key_t *key);

#define JRPC_KEY_FP_LEN 32   /* bytes of a credential's fingerprint */

/* The fingerprint of the key's credential: SHA-256 over a label, the kind
 * (signing or bearer) and the secret, or the token's hash for a bearer key.
 * Equal for two loads of the same line, different once the secret or token
 * is replaced under the same id; it reveals nothing usable of either. What
 * a connection authenticated once keeps, to notice a rotation (a WebSocket:
 * jrpc_front_ws_keys_changed). Writes JRPC_KEY_FP_LEN bytes. */
void jrpc_key_fingerprint(const jrpc_key_t *key, uint8_t out[JRPC_KEY_FP_LEN]);

/* The line a key file holds for a bearer key id with this token:
 * "<id> bearer-sha256:<hex>" (no newline) in out. Returns its length, or
 * -EINVAL (a bad id, an empty token) / -ENOSPC. For `jrpc bearer-key`. */
int jrpc_keys_bearer_line(jrpc_span_t id, jrpc_span_t token, char *out, size_t outlen);

/* Whether the key file's text[0, n) has a line whose first field is id,
 * read as jrpc_keys_load reads lines (blank and comment lines skipped).
 * Pure. For `jrpc bearer-key`, which refuses an id the file already has (a
 * second line with it would make the file fail to load). */
bool jrpc_keys_text_has_id(const char *text, size_t n, jrpc_span_t id);

/* True when the key may call method (its globs, or no globs at all). */
bool jrpc_key_allows(const jrpc_key_t *key, jrpc_span_t method);

/* Rate limits (docs/SIGNING.md "Rate limits"): fields rate=N (calls per
 * second, 0: no limit), burst=N (>= 1, only with rate=) and cost=GLOB:N (a
 * call of a matching method counts N, 0 for free; the first match wins)
 * may stand among a key's method globs. jrpc_key_rate: true when the key
 * has rate=, with *burst 0 when it gave none (the broker's default applies).
 * jrpc_key_cost: the cost of one call of method, 1 when no cost= matches. */
bool jrpc_key_rate(const jrpc_key_t *key, uint32_t *rate, uint32_t *burst);
uint32_t jrpc_key_cost(const jrpc_key_t *key, jrpc_span_t method);

#endif
