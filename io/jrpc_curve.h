/* jrpc_curve — ZeroMQ CURVE keys, key files, and a ZAP handler that admits
 * only listed public keys (issue 4: encryption alone lets anyone with the
 * server's public key in; the allowlist is what keeps them out).
 *
 * Key files (keys are Z85, 40 characters; a line whose first field starts
 * with '#' is a comment, as is a trailing field starting with '#'):
 *   keypair     "public <key>" and "secret <key>" lines, once each; the
 *               public key must be the secret key's. Should be mode 0600:
 *               a file readable by group or others is loaded with a warning.
 *   public key  one "public <key>" line (a "secret" line is refused: hand out
 *               the .pub file, never the keypair).
 *   allowlist   one public key per line, bare or as "public <key>"; blank
 *               lines allowed; at least one key. (No key starts with '#':
 *               it is Z85's last digit, too large for a first digit.)
 *
 * Loaders return 0 or a negative errno and, on failure, write a one-line
 * reason naming the file (and line) into err. They never put a secret key
 * into err or a log line. Nothing here blocks except file I/O. */
#ifndef JRPC_CURVE_H
#define JRPC_CURVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define JRPC_CURVE_Z85_LEN 40   /* characters of a Z85 key, without the NUL */
#define JRPC_CURVE_KEY_LEN 32   /* bytes of a raw key */

typedef struct jrpc_curve_keypair {
    char public_z85[JRPC_CURVE_Z85_LEN + 1];  /* NUL-terminated */
    char secret_z85[JRPC_CURVE_Z85_LEN + 1];  /* NUL-terminated; wipe when done */
} jrpc_curve_keypair_t;

typedef struct jrpc_curve_allowlist jrpc_curve_allowlist_t;

/* Whether z85 is a well-formed key: 40 Z85 characters. */
bool jrpc_curve_key_ok(const char *z85);

/* Loads a keypair file into *kp. Returns 0, -errno (unreadable), or -EINVAL
 * (malformed, or the public key is not the secret key's). Warns (log) when
 * the file is readable by group or others. */
int jrpc_curve_load_keypair(const char *path, jrpc_curve_keypair_t *kp, char *err, size_t errlen);

/* Wipes the secret key in kp. */
void jrpc_curve_keypair_wipe(jrpc_curve_keypair_t *kp);

/* Loads a public-key file into z85 (41 bytes, NUL-terminated). Returns 0,
 * -errno, or -EINVAL. */
int jrpc_curve_load_public(const char *path, char z85[JRPC_CURVE_Z85_LEN + 1], char *err,
                           size_t errlen);

/* Loads an allowlist file. On success *out is a new list (pairs with
 * _destroy). Returns 0, -errno, -EINVAL (malformed or no key), -ENOMEM. */
int jrpc_curve_allowlist_load(const char *path, jrpc_curve_allowlist_t **out, char *err,
                              size_t errlen);
/* Whether the raw 32-byte key is in the list. */
bool jrpc_curve_allowlist_has(const jrpc_curve_allowlist_t *a, const uint8_t key[JRPC_CURVE_KEY_LEN]);
/* How many distinct keys it holds. */
size_t jrpc_curve_allowlist_size(const jrpc_curve_allowlist_t *a);
void jrpc_curve_allowlist_destroy(jrpc_curve_allowlist_t **self_p);

/* Makes sock a CURVE server with kp's secret key whose peers are checked by
 * the ZAP handler under zap_domain. Call before zmq_bind. Also asks libzmq
 * (where it supports ZMQ_ZAP_ENFORCE_DOMAIN) to refuse every handshake when
 * no ZAP handler is bound, rather than let everyone in. Returns 0 or -errno. */
int jrpc_curve_server(void *sock, const jrpc_curve_keypair_t *kp, const char *zap_domain);

/* The broker's libzmq ROUTER (for clients, for workers): *sock_p a ROUTER
 * of zmq_ctx with ROUTER_MANDATORY (a send to a peer gone fails,
 * EHOSTUNREACH, rather than vanish), no linger, messages over max_msg
 * refused by libzmq and hwm each way; a CURVE server under zap_domain when
 * kp is not NULL; bound to endpoint. A failure is logged under comp.
 * Returns 0 or -1; *sock_p, when not NULL, is the caller's to close
 * either way. */
int jrpc_curve_router(void **sock_p, void *zmq_ctx, const char *endpoint, int64_t max_msg,
                      int hwm, const jrpc_curve_keypair_t *kp, const char *zap_domain,
                      const char *comp);

/* Makes sock a CURVE client with keypair kp talking to the server whose
 * public key is server_public (Z85). Call before zmq_connect. Returns 0 or
 * -errno (-EINVAL for a malformed key). */
int jrpc_curve_client(void *sock, const jrpc_curve_keypair_t *kp, const char *server_public);

/* Writes a new keypair to path (mode 0600) and its public line to path.pub
 * (mode 0644); copies the public key into public_z85 when not NULL. Refuses
 * to overwrite either file (-EEXIST). Returns 0 or -errno (-ENOTSUP when
 * libzmq has no CURVE). */
int jrpc_curve_keygen(const char *path, char public_z85[JRPC_CURVE_Z85_LEN + 1], char *err,
                      size_t errlen);

/* ---- the ZAP handler (ZAP 1.0, RFC 27) ----
 *
 * A REP socket bound to inproc://zeromq.zap.01 in the given context and read
 * in the loop. It admits a peer (200) only when the mechanism is CURVE and
 * its public key is in the allowlist of the socket's ZAP domain; every other
 * request is refused (400). Denials are logged at warn
 * (event=zap_denied domain= address= key=), admissions at debug. A refused
 * client is not told anything by libzmq: its requests just go unanswered. */
typedef struct jrpc_curve_zap jrpc_curve_zap_t;

/* Binds the handler. Must happen before any CURVE server socket of the
 * context binds. NULL on failure (logged). */
jrpc_curve_zap_t *jrpc_curve_zap_new(uv_loop_t *loop, void *zmq_ctx);

/* Admits the keys of *list_p for domain (copied). Takes ownership of the
 * list and sets *list_p to NULL, even on error. Returns 0, -EEXIST (domain
 * already has a list), -ENOSPC (too many domains) or -ENOMEM. */
int jrpc_curve_zap_allow(jrpc_curve_zap_t *z, const char *domain, jrpc_curve_allowlist_t **list_p);

/* Replaces the allowlist of domain with *list_p (SIGHUP: jrpc-broker's
 * reload) and frees the old one at once: the handler reads a list only
 * while it decides one handshake, never across loop turns. Takes ownership
 * of the list and sets *list_p to NULL, even on error. From now on, new
 * handshakes are decided against the new list; connections admitted
 * before stay (ZeroMQ authenticates a peer at its handshake only; a peer
 * whose key was removed is refused when it connects again). Returns 0, or
 * -ENOENT when domain has no list (nothing is changed). */
int jrpc_curve_zap_replace(jrpc_curve_zap_t *z, const char *domain,
                           jrpc_curve_allowlist_t **list_p);

/* Stops the handler; the socket and memory are freed from the close
 * callbacks. Destroy it after the CURVE server sockets. NULL-safe. */
void jrpc_curve_zap_destroy(jrpc_curve_zap_t **self_p);

#endif
