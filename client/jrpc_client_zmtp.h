/* jrpc_client_zmtp — libjrpc-client's native ZeroMQ engine (internal, not
 * installed): a ZMTP 3.1 DEALER with the NULL mechanism, on one blocking
 * socket of the calling thread, for tcp:// and ipc:// without CURVE.
 *
 * libzmq gives every client a context, an I/O thread and a mailbox: each
 * call crosses threads twice (docs/ARCHITECTURE.md, "Our own ZMTP in the
 * client"). Here the calling thread writes the frames and reads the answer
 * itself, as the HTTP transport does. jrpc_client_zmq.c chooses the engine
 * (--zmq-engine, jrpc_client_opts_t.zmq_engine) and keeps the parts both
 * share: framing of the call, streamed answers, error messages. The frames
 * are proto/jrpc_zmtp_codec's, the broker's own ZMTP server's codec.
 *
 * What a caller sees as libzmq's engine gives it: a broker that is not up
 * yet is retried every 100 ms until the call's deadline (libzmq's reconnect
 * interval), then the call times out. What differs: the connection is made
 * at the first call, not in the background; a broker that closes the
 * connection while a call waits fails that call at once (libzmq would wait
 * for the deadline); an idle connection that the broker closed is noticed
 * before the next call is written, which then goes on a fresh one. */
#ifndef JRPC_CLIENT_ZMTP_H
#define JRPC_CLIENT_ZMTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jrpc_buf.h"

typedef struct jrpc_client_zmtp {
    const char *url;      /* tcp://HOST:PORT or ipc://PATH (borrowed) */
    int         fd;       /* the connection; -1 when none */
    jrpc_buf_t  in;       /* bytes read: [off, in.len) not decoded yet */
    size_t      off;
    const char *why;      /* a refused handshake: what was wrong (static text) */
    bool        once;     /* connect: one try, no waiting for the broker to come
                             up (a client with other brokers to try) */
} jrpc_client_zmtp_t;

/* Whether url is one the native engine connects to: tcp://HOST:PORT (a
 * name, IPv4 or [IPv6]) or ipc://PATH (@NAME: abstract), not libzmq's
 * source-address form (tcp://SRC;HOST:PORT). */
bool jrpc_client_zmtp_supports(const char *url);

void jrpc_client_zmtp_init(jrpc_client_zmtp_t *z, const char *url);

/* Sends one message of n frames (n <= 3), connecting first when there is
 * no connection (or the idle one was closed by the broker). Returns 0,
 * -ETIMEDOUT (no broker within the deadline), -EINTR, -ECONNREFUSED (the
 * peer is not a ZMTP 3 ROUTER: z->why says why), -EPIPE (lost while
 * writing), -ENOMEM. On failure the connection is closed. */
int jrpc_client_zmtp_send(jrpc_client_zmtp_t *z, const jrpc_span_t *frames, int n,
                          int64_t deadline);

/* Reads one message, as jrpc_client_zmq's read_msg: [empty][body] or
 * [empty][head][body] (head->len stays 0 for the first form); answers the
 * broker's PINGs on the way. Returns 0, -ETIMEDOUT, -EINTR, -EPROTO (other
 * framing; the message is consumed whole), -ECONNRESET (the broker closed
 * the connection), -ENOMEM. On failure other than -EPROTO the connection
 * is closed. */
int jrpc_client_zmtp_read(jrpc_client_zmtp_t *z, jrpc_buf_t *head, jrpc_buf_t *body,
                          int64_t deadline);

/* The k-th frame (from 1) of an answer message, p[0..n), into head and
 * body: 1 the empty delimiter, 2 the body, 3 the body after a head (frame
 * 2 moves to head). Shared by both engines. Returns 0, -EPROTO (a
 * delimiter that is not empty, or a 4th frame) or -ENOMEM. */
int jrpc_client_zmtp_take_frame(int k, const char *p, size_t n, jrpc_buf_t *head,
                                jrpc_buf_t *body);

/* Closes the connection (the next send makes a new one). */
void jrpc_client_zmtp_disconnect(jrpc_client_zmtp_t *z);

/* Closes and frees what z holds. */
void jrpc_client_zmtp_dispose(jrpc_client_zmtp_t *z);

#endif
