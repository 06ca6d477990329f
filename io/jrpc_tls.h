/* jrpc_tls — TLS as a layer of bytes, under HTTP (issue 15).
 *
 * A server-side TLS session over a BIO of ours, in memory: the caller feeds
 * it the ciphertext its socket read and takes the plaintext out; it hands
 * plaintext in and takes out the ciphertext to write. No sockets, no loop,
 * no callbacks: the HTTP front keeps its one libuv loop and its own
 * buffers, and the fuzzer and the unit tests drive a session in memory.
 *
 * The context (jrpc_tls_ctx_t) is the certificate, the key, the optional
 * client CA and the policy: TLS 1.2 and 1.3 only, ECDHE with AEAD ciphers
 * for 1.2 (1.3's suites are all AEAD), no renegotiation, no compression,
 * no 0-RTT early data, ALPN "http/1.1", session tickets for resumption.
 * A context is reference counted by OpenSSL: each session holds it, so a
 * reload can swap the front's context while older sessions finish on the
 * old one. */
#ifndef JRPC_TLS_H
#define JRPC_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include "jrpc_buf.h"

typedef struct jrpc_tls_ctx jrpc_tls_ctx_t;
typedef struct jrpc_tls jrpc_tls_t;

typedef struct jrpc_tls_opts {
    const char *cert;        /* PEM: the certificate, then its chain (required) */
    const char *key;         /* PEM private key (required) */
    const char *client_ca;   /* PEM CAs for client certificates: mutual TLS, a
                                certificate is then required; NULL: none asked */
} jrpc_tls_opts_t;

enum {
    JRPC_TLS_ECLOSED = -7001,   /* the peer sent close_notify: no more plaintext */
    JRPC_TLS_EPROTO  = -7002,   /* a handshake or record failure (jrpc_tls_error says which) */
    JRPC_TLS_ENOMEM  = -7003,
    JRPC_TLS_EFILE   = -7004,   /* a certificate, key or CA file is unusable */
};

/* Loads the files and builds a context; 0, or JRPC_TLS_EFILE / ENOMEM with
 * the reason in err ("--tls-key /x: no such file", "key does not match
 * the certificate"). Nothing is half-made on failure. */
int jrpc_tls_ctx_new(const jrpc_tls_opts_t *o, jrpc_tls_ctx_t **out, char *err, size_t errlen);
/* Drops the caller's reference (sessions keep theirs). NULL-safe. */
void jrpc_tls_ctx_free(jrpc_tls_ctx_t **self_p);
/* The certificate's subject and notAfter as text, for the log line at load. */
void jrpc_tls_ctx_describe(const jrpc_tls_ctx_t *ctx, char *buf, size_t len);

/* A server session on ctx (which it holds a reference to); NULL: no memory. */
jrpc_tls_t *jrpc_tls_new(jrpc_tls_ctx_t *ctx);
void jrpc_tls_free(jrpc_tls_t **self_p);

/* Ciphertext read from the socket; 0 or JRPC_TLS_ENOMEM. Then call
 * jrpc_tls_read until it returns 0 or less, then send what jrpc_tls_take
 * gives (handshake records, tickets, alerts). The bytes are read in place,
 * not copied: they must stay valid until jrpc_tls_read has returned 0 or
 * less (0: all were taken; < 0: the rest is dropped). */
int jrpc_tls_feed(jrpc_tls_t *t, const char *p, size_t n);
/* Plaintext, as much as fits in buf: > 0 bytes; 0 when more ciphertext is
 * needed; JRPC_TLS_ECLOSED or JRPC_TLS_EPROTO. Drives the handshake. */
ssize_t jrpc_tls_read(jrpc_tls_t *t, char *buf, size_t cap);
/* Encrypts plaintext into the pending ciphertext; 0, or < 0 when the
 * session cannot write (not established, failed, closed). */
int jrpc_tls_write(jrpc_tls_t *t, const char *p, size_t n);
/* Queues our close_notify (after a failure: nothing, the alert is queued
 * already). */
void jrpc_tls_close(jrpc_tls_t *t);

/* Ciphertext waiting to be sent, and taking it (at most cap bytes). */
size_t jrpc_tls_pending(const jrpc_tls_t *t);
size_t jrpc_tls_take(jrpc_tls_t *t, char *buf, size_t cap);
/* All of it, without a copy: *dst gets the buffer (the caller disposes of
 * it); the session starts a new one. */
void jrpc_tls_take_buf(jrpc_tls_t *t, jrpc_buf_t *dst);

bool jrpc_tls_established(const jrpc_tls_t *t);
/* Why the session failed (an OpenSSL reason such as "wrong version
 * number"), for the log; "" before any failure. */
const char *jrpc_tls_error(const jrpc_tls_t *t);
/* The failure was a plaintext HTTP request sent to the TLS port. */
bool jrpc_tls_plain_http(const jrpc_tls_t *t);
/* Established with a verified client certificate: the commonName of its
 * subject copied into buf (NUL-terminated); its length, or 0 when there is
 * none (no certificate, no CN, a CN that does not fit or holds a NUL). */
size_t jrpc_tls_peer_name(const jrpc_tls_t *t, char *buf, size_t cap);
/* "TLSv1.3 TLS_AES_128_GCM_SHA256 resumed" style words, for the debug log. */
void jrpc_tls_describe(const jrpc_tls_t *t, char *buf, size_t len);

#endif
