/* jrpc_client — a blocking client for the jrpc broker (libjrpc-client).
 *
 *   jrpc_client_t *c = jrpc_client_new("tcp://127.0.0.1:5555", NULL);
 *   jrpc_buf_t reply;
 *   jrpc_buf_init(&reply);
 *   int rc = jrpc_client_send(c, body, len, NULL, &reply, -1);
 *   if (rc < 0)
 *       fprintf(stderr, "%s\n", jrpc_client_last_error(c));
 *   jrpc_buf_dispose(&reply);
 *   jrpc_client_destroy(&c);
 *
 * One request is outstanding at a time; a client is not thread-safe (use one
 * per thread). The client carries bytes: it never parses the JSON it sends or
 * receives — that is the caller's (and the broker's) business.
 *
 * Transports, chosen by the URL scheme:
 *   tcp://HOST:PORT, ipc://PATH   ZeroMQ DEALER to the broker's ROUTER, REQ
 *                                 framing: [empty][header?][json] out,
 *                                 [empty][json] back.
 *   http://, https://             not yet: jrpc_client_new fails with
 *                                 EPROTONOSUPPORT.
 *
 * Return values: 0, or a negative errno (see each function). */
#ifndef JRPC_CLIENT_H
#define JRPC_CLIENT_H

#include <stddef.h>
#include "jrpc_buf.h"
#include "jrpc_wire.h"

#define JRPC_CLIENT_DEFAULT_URL        "tcp://127.0.0.1:5555"
#define JRPC_CLIENT_DEFAULT_TIMEOUT_MS 10000

typedef struct jrpc_client jrpc_client_t;

/* A zeroed struct (or NULL) gives every default. */
typedef struct jrpc_client_opts {
    int timeout_ms;  /* used when jrpc_client_send gets timeout_ms < 0;
                        <= 0 here means JRPC_CLIENT_DEFAULT_TIMEOUT_MS */
} jrpc_client_opts_t;

/* Creates a client for url and starts connecting in the background (never
 * blocks: a broker that is down is only noticed by jrpc_client_send).
 *
 * Returns the client, or NULL with errno set to EINVAL (malformed URL or
 * unknown scheme), EPROTONOSUPPORT (a scheme planned but not implemented
 * yet: http://, https://) or ENOMEM. jrpc_client_strerror(-errno) describes
 * it. url is copied. */
jrpc_client_t *jrpc_client_new(const char *url, const jrpc_client_opts_t *opts);

/* Closes the connection, dropping anything unsent, and frees the client.
 * NULL-safe; sets *self_p to NULL. */
void jrpc_client_destroy(jrpc_client_t **self_p);

/* Sends one request body (a JSON-RPC request, notification or batch; sent
 * as is) and blocks until the reply or the timeout. hdr, if not NULL, is
 * encoded with jrpc_wire_put_header and sent as a header frame before the
 * body (signing, deadlines); NULL sends no header frame.
 *
 * timeout_ms bounds the whole call (connecting, sending, waiting); < 0 uses
 * the client's default. On success reply holds the reply bytes (reply->len is
 * reset first; reply->len == 0 means the broker had nothing to answer, as for
 * a body of notifications only).
 *
 * Returns 0, or:
 *   -ETIMEDOUT  no reply in time. A broker that is down or unreachable looks
 *               exactly like this over ZeroMQ. The connection is then dropped
 *               and a fresh one made for the next call, so a late reply can
 *               never be taken for the answer to a later request.
 *   -EPROTO     the reply was not framed as [empty][body] (connection reset
 *               as for a timeout).
 *   -EINTR      a signal interrupted the wait (connection reset).
 *   -ENOMEM, or another -errno from the transport.
 * jrpc_client_last_error(c) then says what happened, in words. */
int jrpc_client_send(jrpc_client_t *c, const char *body, size_t len,
                     const jrpc_wire_header_t *hdr, jrpc_buf_t *reply, int timeout_ms);

/* The URL the client was made with (borrowed: lives as long as c). */
const char *jrpc_client_url(const jrpc_client_t *c);

/* A one-line description of the last failure of c, with its context, e.g.
 * "no answer from tcp://127.0.0.1:5555 within 500 ms (is the broker
 * running?)". "" when the last call succeeded. Borrowed: valid until the
 * next call on c. */
const char *jrpc_client_last_error(const jrpc_client_t *c);

/* A short English description of a code returned by this module (context
 * free; prefer jrpc_client_last_error when a client exists). Never NULL. */
const char *jrpc_client_strerror(int rc);

#endif
