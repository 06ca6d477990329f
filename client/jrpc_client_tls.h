/* jrpc_client_tls — TLS for libjrpc-client's HTTP transport (https://), with
 * OpenSSL over the transport's non-blocking socket (internal, not
 * installed).
 *
 * One jrpc_client_tls_t per client: the SSL_CTX (made at the first
 * connect, so that an unreadable CA or key file is reported by the call,
 * in words: jrpc_client_tls_setup), the SSL of the current connection, and the last TLS session,
 * kept across connections so that a reconnect resumes it (a shorter
 * handshake). Every wait is a poll() bounded by the caller's deadline:
 * nothing here blocks longer than the call it serves.
 *
 * Verification (unless opts->insecure): the server's chain against
 * opts->cacert or else the system store, and its name: the URL's host as a
 * DNS name (also sent as SNI) or, for an IP literal, as an IP address.
 * TLS 1.2 at least; ALPN offers http/1.1.
 *
 * Codes: 0, -ETIMEDOUT, -EINTR, a -errno of the socket (-EPIPE,
 * -ECONNRESET...), or JRPC_CLIENT_ETLS with jrpc_client_tls_error() saying
 * why (certificate, handshake, alert from the server, files). */
#ifndef JRPC_CLIENT_TLS_H
#define JRPC_CLIENT_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "jrpc_client.h"

typedef struct jrpc_client_tls jrpc_client_tls_t;

/* Makes the TLS state for a server at host (the URL's, without the [] of an
 * IPv6 literal). The file names of opts are copied; no file is read yet.
 * Returns NULL when out of memory. Never blocks. */
jrpc_client_tls_t *jrpc_client_tls_new(const jrpc_client_opts_t *opts, const char *host);

/* Frees everything (the connection's SSL, the session, the context).
 * NULL-safe; sets *self_p to NULL. The socket is the caller's. */
void jrpc_client_tls_destroy(jrpc_client_tls_t **self_p);

/* Makes the TLS context once: reads the CA file (or the system store) and
 * the client certificate and key. Returns 0 (also when done before) or
 * JRPC_CLIENT_ETLS with jrpc_client_tls_error saying which file and why.
 * Blocks only on reading those files. */
int jrpc_client_tls_setup(jrpc_client_tls_t *t);

/* Runs the client handshake on fd (connected, non-blocking; still the
 * caller's to close), resuming the kept session if there is one. Returns 0
 * or a code above; on failure the connection's SSL is freed (call
 * jrpc_client_tls_close anyway: it is harmless) and a session that failed
 * is forgotten. */
int jrpc_client_tls_connect(jrpc_client_tls_t *t, int fd, int64_t deadline);

/* Writes all n bytes of p, waiting as needed until deadline. Returns 0 or
 * a code above (-EPIPE/-ECONNRESET when the server has gone). */
int jrpc_client_tls_write(jrpc_client_tls_t *t, const void *p, size_t n, int64_t deadline);

/* Reads up to n bytes into buf, waiting until some come or deadline.
 * Returns the count (> 0), 0 at the end of the stream (close_notify, or
 * the server closing the socket: an HTTP answer's framing says whether
 * that was early), or a negative code above. */
ssize_t jrpc_client_tls_read(jrpc_client_tls_t *t, void *buf, size_t n, int64_t deadline);

/* Whether the idle connection can carry another request: false when the
 * server closed it, sent an alert, or sent data nobody asked for.
 * Handshake messages that came after the last answer (TLS 1.3 session
 * tickets) are taken on the way. Never blocks. */
bool jrpc_client_tls_idle_ok(jrpc_client_tls_t *t);

/* Ends the connection's TLS: a close_notify when it is in good health
 * (never waits for it to go out) and frees its SSL. The session is kept for
 * the next connect unless forget_session. NULL-safe as to the connection. */
void jrpc_client_tls_close(jrpc_client_tls_t *t, bool forget_session);

/* Why the last JRPC_CLIENT_ETLS, e.g. "certificate verify failed
 * (self-signed certificate in certificate chain)". Borrowed: valid until
 * the next call on t. */
const char *jrpc_client_tls_error(const jrpc_client_tls_t *t);

#endif
