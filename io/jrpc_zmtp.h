/* jrpc_zmtp — a ZMTP 3.1 server ("ROUTER") on the libuv loop, no threads.
 *
 * The client front's own ZeroMQ wire (docs/ARCHITECTURE.md, "Our own ZMTP
 * on the client front"): tcp:// (IPv4, IPv6) and ipc:// listeners, the NULL
 * security mechanism only, peers of type DEALER, REQ or ROUTER (the ZMTP
 * socket-type rules for a ROUTER), ZMTP 3.0 and 3.1 (a 1.0 or 2.0 peer, that
 * is libzmq before 4.0, is closed after the greeting). Bytes are read and
 * written on the loop thread, like the HTTP front: no I/O thread, no mailbox.
 * CURVE is not here: the front keeps libzmq for it.
 *
 * Two layers. The decoder is pure code over bytes, proto/jrpc_zmtp_codec.h
 * (shared with libjrpc-client's native transport). The server owns the
 * sockets, one outbound queue per connection bounded like libzmq's SNDHWM,
 * and batches writes per loop turn.
 *
 * A routing id is our per-connection handle: the server generates one for
 * every connection and ignores the peer's Identity property (libzmq's ROUTER
 * uses a non-empty Identity, and refuses a second connection with the same
 * one; here both are served). */
#ifndef JRPC_ZMTP_H
#define JRPC_ZMTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "jrpc_buf.h"
#include "jrpc_zmtp_codec.h"

/* ---- the server -------------------------------------------------------- */

typedef struct jrpc_zmtp      jrpc_zmtp_t;
typedef struct jrpc_zmtp_conn jrpc_zmtp_conn_t;

/* One client message: frames[0..n) (at most 3; excess set when the message
 * had more, which were read and dropped), borrowed until the callback
 * returns. peer is the IP (no port) of a tcp:// peer, NULL on ipc://. conn
 * stays valid for the callback; jrpc_zmtp_conn_ref() keeps it longer. */
typedef void (*jrpc_zmtp_msg_cb)(void *data, jrpc_zmtp_conn_t *conn, const jrpc_span_t *frames,
                                 int n, bool excess, const char *peer);

typedef struct jrpc_zmtp_opts {
    const char *endpoint;      /* tcp://HOST:PORT (HOST: *, IPv4, [IPv6], an interface or
                                  host name), ipc://PATH */
    uint64_t    max_frame;     /* a larger frame cuts the connection without a word */
    uint32_t    hwm;           /* replies queued per connection, at most (SNDHWM) */
    uint32_t    handshake_ms;  /* greeting and READY within this, or closed */
} jrpc_zmtp_opts_t;

typedef struct jrpc_zmtp_stats {
    uint64_t conns;            /* open now */
    uint64_t accepted;         /* since start */
    uint64_t handshake_failed; /* closed before READY: bad greeting, type, timeout */
    uint64_t handshake_timeouts; /* of those, for the clock */
    uint64_t oversized;        /* connections cut for a frame above max_frame */
    uint64_t pings;            /* PINGs answered */
} jrpc_zmtp_stats_t;

/* True when the native engine can bind endpoint (tcp:// or ipc://). */
bool jrpc_zmtp_supports(const char *endpoint);

/* Binds and listens (getaddrinfo for a host name: may block, at start-up).
 * cb is called for each message with data. Returns 0 with *out set, or a
 * negative errno/libuv code after logging event=bind_failed. */
int jrpc_zmtp_new(uv_loop_t *loop, const jrpc_zmtp_opts_t *opts, jrpc_zmtp_msg_cb cb, void *data,
                  jrpc_zmtp_t **out);

/* Queues one message of n frames (copied) for conn; it leaves in a batch
 * before the loop next blocks. Returns 0, -EAGAIN when hwm messages are
 * already queued for conn (the client does not read: dropped),
 * -EHOSTUNREACH when conn is closed or closing, -ENOMEM. Never blocks. */
int jrpc_zmtp_send(jrpc_zmtp_conn_t *conn, const jrpc_span_t *frames, int n);

/* A connection outlives its socket while referenced (a reply on its way).
 * unref is NULL-safe and sets *conn_p to NULL. */
void jrpc_zmtp_conn_ref(jrpc_zmtp_conn_t *conn);
void jrpc_zmtp_conn_unref(jrpc_zmtp_conn_t **conn_p);

/* Stops delivering messages (drain): what arrives is read and dropped,
 * unanswered (as libzmq's unread queue was); PINGs still get PONGs. */
void jrpc_zmtp_pause(jrpc_zmtp_t *z);

void jrpc_zmtp_stats(const jrpc_zmtp_t *z, jrpc_zmtp_stats_t *out);

/* Stops listening and reading, lets queued replies leave for up to
 * linger_ms, then closes every connection; the memory goes with the last
 * handle (and the last reference). Sets *self_p to NULL; NULL-safe. */
void jrpc_zmtp_destroy(jrpc_zmtp_t **self_p, uint32_t linger_ms);

#endif
