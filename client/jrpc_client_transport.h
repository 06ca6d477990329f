/* jrpc_client_transport — what libjrpc-client asks of a transport.
 *
 * Internal to the client library (not installed). jrpc_client.c chooses a
 * transport once, from the URL scheme, in jrpc_client_new; everything after
 * goes through these functions, so the generic code never looks at a scheme
 * again. Each transport keeps its own state behind the void pointer.
 * Adding a scheme (ws://, say) means one file with one of these and one
 * line in jrpc_client.c's scheme table; the public API does not change. */
#ifndef JRPC_CLIENT_TRANSPORT_H
#define JRPC_CLIENT_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "jrpc_buf.h"
#include "jrpc_client.h"
#include "jrpc_header.h"
#include "jrpc_client_sock.h"

typedef struct jrpc_client_transport {
    /* Makes the state for url (the whole URL, scheme included: borrowed, it
     * lives as long as the client) with the client's options (never NULL;
     * the transport copies what it keeps). c is where failures of later
     * calls are described (jrpc_client_errf). Never blocks. Returns 0 and
     * sets *state; -EINVAL for a URL this transport cannot use; -ENOMEM, or
     * another -errno. On error nothing is left to close. */
    int  (*open)(jrpc_client_t *c, const char *url, const jrpc_client_opts_t *opts,
                 void **state);

    /* Sends body with the header fields of hdr (NULL: none; over ZeroMQ a
     * header frame is sent only when hdr is not NULL) and blocks until the
     * answer is in reply (appended to: the caller resets it) or timeout_ms
     * (> 0) has passed. *http_status is the HTTP status of the answer, left
     * alone by transports without one. With on_answer, the answers are
     * asked for streamed: each goes to on_answer(arg, ...) as it arrives
     * and reply gets the last message (jrpc_client_send_stream). Returns 0
     * or a code of jrpc_client_send's list, the client's last error then
     * set. On failure *sent says whether the server may have had the whole
     * body (false: it cannot have run it; the caller sets it false first).
     * With once, a connection that cannot be made fails at once (the next
     * broker is tried) instead of being retried until the deadline. */
    int  (*call)(void *state, const jrpc_header_t *hdr, const char *body, size_t len,
                 jrpc_buf_t *reply, int timeout_ms, int *http_status,
                 jrpc_client_answer_fn on_answer, void *arg, bool once, bool *sent);

    /* CURVE (jrpc_client_set_curve): the three Z85 keys, or all NULL to turn
     * it off. Returns 0, -EINVAL (a malformed key) or another -errno. NULL
     * when the transport has no CURVE: the client then says -ENOTSUP. */
    int  (*set_curve)(void *state, const char *public_z85, const char *secret_z85,
                      const char *server_public_z85);

    /* Closes the connection now; the next call makes a new one. With
     * forget_session, a TLS session is not resumed either. NULL when the
     * transport has no connection of its own to close (the client then says
     * -ENOTSUP). */
    void (*disconnect)(void *state, bool forget_session);

    /* Closes the connection and frees the state. */
    void (*close)(void *state);
} jrpc_client_transport_t;

extern const jrpc_client_transport_t jrpc_client_zmq;   /* tcp://, ipc:// */
extern const jrpc_client_transport_t jrpc_client_http;  /* http://, https:// */

/* Keeps the Server-Timing value p[0, n) of the answer being read
 * (jrpc_client_server_timing), appended after ", " to one kept already;
 * cut at JRPC_CLIENT_TIMING_MAX - 1 bytes. */
#define JRPC_CLIENT_TIMING_MAX 512
void jrpc_client_add_timing(jrpc_client_t *c, const char *p, size_t n);

/* Sets the client's last error (jrpc_client_last_error), printf-style. */
void jrpc_client_errf(jrpc_client_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
