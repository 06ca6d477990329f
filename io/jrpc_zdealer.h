/* jrpc_zdealer — a ZMTP 3.1 DEALER on the libuv loop, no threads.
 *
 * What libjrpc-worker connects to a broker with (docs/ARCHITECTURE.md, "Our
 * own ZMTP in the worker"): tcp:// (an IPv4 or [IPv6] address, or a host
 * name resolved with uv_getaddrinfo at each attempt) and ipc://, the NULL
 * mechanism, one-frame messages. The bytes are proto/jrpc_zmtp_codec's,
 * the same codec as the broker's server and the client's engine.
 *
 * As a libzmq DEALER without ZMQ_IMMEDIATE: messages sent before the
 * connection is up wait for it, and a connection that cannot be made is
 * tried again every ivl ms, doubling up to ivl_max. Unlike it, a connection
 * that was up and is lost is not made again silently: on_down tells the
 * owner, whose session with that broker is over (its queued messages are
 * dropped), and the owner opens a new dealer for a new session. */
#ifndef JRPC_ZDEALER_H
#define JRPC_ZDEALER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct jrpc_zdealer jrpc_zdealer_t;

typedef struct jrpc_zdealer_cbs {
    /* One message of one frame, p[0..n) borrowed for the call. The
     * callback may send, and may close the dealer. */
    void (*on_message)(jrpc_zdealer_t *d, const char *p, size_t n);
    /* A message of `parts` frames (parts > 1), read and dropped. */
    void (*on_multipart)(jrpc_zdealer_t *d, int parts);
    /* The connection was up and is lost (closed, reset, ERROR, a frame above
     * the limit, not ZMTP): nothing more comes from this dealer. */
    void (*on_down)(jrpc_zdealer_t *d, const char *why);
    /* After jrpc_zdealer_close(): every handle is closed, d is freed. */
    void (*on_closed)(jrpc_zdealer_t *d);
} jrpc_zdealer_cbs_t;

typedef struct jrpc_zdealer_opts {
    uint32_t ivl_ms;      /* first retry after a failed connect (ZMQ_RECONNECT_IVL) */
    uint32_t ivl_max_ms;  /* retries back off up to this (ZMQ_RECONNECT_IVL_MAX) */
    uint64_t max_frame;   /* a larger frame from the peer ends the connection */
} jrpc_zdealer_opts_t;

/* True when endpoint is one jrpc_zdealer connects to: tcp://HOST:PORT or
 * ipc://PATH (not libzmq's tcp://SRC;HOST:PORT, nor an abstract
 * ipc://@NAME, which needs a newer libuv than Debian 12's). */
bool jrpc_zdealer_supports(const char *endpoint);

/* Starts connecting to endpoint (copied). data is the caller's (d->data
 * via jrpc_zdealer_data). Returns 0 with *out set, -EINVAL for an endpoint
 * it does not take, -ENOMEM. Never blocks. */
int jrpc_zdealer_new(uv_loop_t *loop, const char *endpoint, const jrpc_zdealer_opts_t *opts,
                     const jrpc_zdealer_cbs_t *cbs, void *data, jrpc_zdealer_t **out);

void *jrpc_zdealer_data(const jrpc_zdealer_t *d);

/* Queues one message of one frame (copied); it is written at once when the
 * connection is up and the socket takes it, else as soon as it can be.
 * Returns 0, -ENOTCONN after on_down or close, -ENOMEM. */
int jrpc_zdealer_send(jrpc_zdealer_t *d, const void *p, size_t n);

/* Stops reading and closes: what is queued may still be written for up to
 * linger_ms while the connection is up; then on_closed, and d is freed.
 * No callback but on_closed comes after this. */
void jrpc_zdealer_close(jrpc_zdealer_t *d, uint32_t linger_ms);

#endif
