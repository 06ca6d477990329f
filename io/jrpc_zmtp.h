/* jrpc_zmtp — a ZMTP 3.1 server ("ROUTER") on the libuv loop, no threads.
 *
 * The broker's own ZeroMQ wire, for clients (broker/jrpc_front_zmq) and for
 * workers (broker/jrpc_workers) alike (docs/ARCHITECTURE.md, "Our own ZMTP
 * on the client front" and "... on the worker side"): tcp:// (IPv4, IPv6)
 * and ipc:// listeners, the NULL security mechanism only, peers of type
 * DEALER, REQ or ROUTER (the ZMTP socket-type rules for a ROUTER), ZMTP 3.0
 * and 3.1 (a 1.0 or 2.0 peer, that is libzmq before 4.0, is closed after the
 * greeting). Bytes are read and written on the loop thread, like the HTTP
 * front: no I/O thread, no mailbox. CURVE is not here: both sides keep
 * libzmq for it.
 *
 * Three layers. The decoder is pure code over bytes, proto/jrpc_zmtp_codec.h
 * (shared with libjrpc-client's and libjrpc-worker's engines). The output
 * queue (jrpc_zmtp_outq_*) is pure too: messages appended to one buffer,
 * counted exactly. The server (jrpc_zmtp_new ..) owns the sockets, one
 * output queue per connection bounded like libzmq's SNDHWM, and batches
 * writes per loop turn.
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

/* The stream under one ZMTP connection or listener (ours, or
 * jrpc_zdealer's): tcp:// or ipc://, chosen at run time; .h for uv_close,
 * .s to read and write, .tcp or .pipe to set up. */
typedef union jrpc_zmtp_stream {
    uv_handle_t h;
    uv_stream_t s;
    uv_tcp_t    tcp;
    uv_pipe_t   pipe;
} jrpc_zmtp_stream_t;

/* ---- the output queue (pure) ------------------------------------------- */

/* What is to be written to one peer: whole messages appended to one
 * contiguous buffer (one write, one iovec, no allocation per message once
 * the buffer has grown), and where each ends, so that the messages not yet
 * written are counted exactly (the HWM). Bytes a write in flight reads never
 * move: a buffer that must grow meanwhile is copied, and the old one kept
 * ("pinned") until jrpc_zmtp_outq_written() says the write is done. */
typedef struct jrpc_zmtp_outq {
    uint8_t *buf;        /* [off, len) not written yet */
    size_t   off, len, cap;
    size_t  *ends;       /* ends[ehead..en): where each queued message ends, in buf */
    uint32_t ehead, en, ecap;
    size_t   inflight;   /* bytes from off that a write in flight reads (0: none) */
    uint8_t *pinned;     /* the buffer that write reads, when buf has moved since */
    size_t   keep;       /* capacity kept once everything is written; more is freed */
} jrpc_zmtp_outq_t;

/* Caller's storage; keep as above (0: the buffer is freed whenever empty,
 * for many mostly idle peers). */
void jrpc_zmtp_outq_init(jrpc_zmtp_outq_t *q, size_t keep);
void jrpc_zmtp_outq_dispose(jrpc_zmtp_outq_t *q);

/* Appends one message: frames[0..n) as ZMTP frames (MORE on all but the
 * last) when raw is NULL, else the raw_len bytes of raw as they are (our
 * greeting, a command). Returns 0 or -ENOMEM (nothing appended). */
int jrpc_zmtp_outq_put(jrpc_zmtp_outq_t *q, const jrpc_span_t *frames, int n, const void *raw,
                       size_t raw_len);

/* Messages not completely written. */
static inline uint32_t jrpc_zmtp_outq_count(const jrpc_zmtp_outq_t *q)
{
    return q->en - q->ehead;
}

/* Bytes not written yet, from q->buf + q->off. */
static inline size_t jrpc_zmtp_outq_pending(const jrpc_zmtp_outq_t *q)
{
    return q->len - q->off;
}

/* bytes more were written (at most pending - inflight when no write is in
 * flight). Messages written whole leave the count; an empty queue starts
 * over at the buffer's start (freed above keep). */
void jrpc_zmtp_outq_consume(jrpc_zmtp_outq_t *q, size_t bytes);

/* A write of the first n pending bytes starts (they must not move) ... */
void jrpc_zmtp_outq_writing(jrpc_zmtp_outq_t *q, size_t n);
/* ... and ended: its bytes are consumed (all of them even when it failed:
 * the caller closes then) and a pinned buffer is freed. */
void jrpc_zmtp_outq_written(jrpc_zmtp_outq_t *q);

/* ---- the server -------------------------------------------------------- */

typedef struct jrpc_zmtp      jrpc_zmtp_t;
typedef struct jrpc_zmtp_conn jrpc_zmtp_conn_t;

/* One client message: frames[0..n) (at most 3; excess set when the message
 * had more, which were read and dropped), borrowed until the callback
 * returns. With skip_oversized, a frame above max_frame has p == NULL and n
 * its size: its bytes were dropped as they arrived. peer is the IP (no port) of a tcp:// peer, NULL on ipc://. conn
 * stays valid for the callback; jrpc_zmtp_conn_ref() keeps it longer. */
typedef void (*jrpc_zmtp_msg_cb)(void *data, jrpc_zmtp_conn_t *conn, const jrpc_span_t *frames,
                                 int n, bool excess, const char *peer);

/* A connection that had finished its handshake closed (the peer left, cut
 * it, sent garbage, or a write failed): called once, from inside the
 * engine, never after jrpc_zmtp_destroy(). Sends to conn return
 * -EHOSTUNREACH from now on; sends to other connections are allowed. */
typedef void (*jrpc_zmtp_close_cb)(void *data, jrpc_zmtp_conn_t *conn);

/* The messages of one read were delivered (at least one): the place to
 * send what they produced in one go. */
typedef void (*jrpc_zmtp_read_cb)(void *data);

typedef struct jrpc_zmtp_opts {
    const char *endpoint;      /* tcp://HOST:PORT (HOST: *, IPv4, [IPv6], an interface or
                                  host name), ipc://PATH */
    uint64_t    max_frame;     /* a larger frame cuts the connection without a word ... */
    bool        skip_oversized; /* ... unless set: a larger message frame is then skipped
                                  as its bytes arrive (never buffered) and delivered as
                                  { NULL, its size } (commands still cut) */
    uint32_t    hwm;           /* replies queued per connection, at most (SNDHWM) */
    uint32_t    handshake_ms;  /* greeting and READY within this, or closed */
    size_t      out_keep;      /* output buffer bytes a connection keeps once drained
                                  (0: freed, for many idle peers; jrpc_zmtp_outq_t) */
    jrpc_zmtp_close_cb on_close;   /* optional */
    jrpc_zmtp_read_cb  on_read;    /* optional */
} jrpc_zmtp_opts_t;

typedef struct jrpc_zmtp_stats {
    uint64_t conns;            /* open now */
    uint64_t accepted;         /* since start */
    uint64_t handshake_failed; /* closed before READY: bad greeting, type, timeout */
    uint64_t handshake_timeouts; /* of those, for the clock */
    uint64_t oversized;        /* frames above max_frame: connections cut, or frames
                                  skipped (skip_oversized) */
    uint64_t pings;            /* PINGs answered */
} jrpc_zmtp_stats_t;

/* True when the native engine can bind endpoint: tcp://, or ipc:// with a
 * path (not libzmq's abstract ipc://@NAME). */
bool jrpc_zmtp_supports(const char *endpoint);

/* Binds and listens (getaddrinfo for a host name: may block, at start-up).
 * cb is called for each message with data. Returns 0 with *out set, or a
 * negative errno/libuv code after logging event=bind_failed. */
int jrpc_zmtp_new(uv_loop_t *loop, const jrpc_zmtp_opts_t *opts, jrpc_zmtp_msg_cb cb, void *data,
                  jrpc_zmtp_t **out);

/* Queues one message of n frames (copied into conn's output buffer); it
 * leaves in a batch before the loop next blocks. Returns 0, -EAGAIN when hwm messages are
 * already queued for conn (the client does not read: dropped),
 * -EHOSTUNREACH when conn is closed or closing, -ENOMEM. Never blocks. */
int jrpc_zmtp_send(jrpc_zmtp_conn_t *conn, const jrpc_span_t *frames, int n);

/* A connection outlives its socket while referenced (a reply on its way).
 * unref is NULL-safe and sets *conn_p to NULL. */
void jrpc_zmtp_conn_ref(jrpc_zmtp_conn_t *conn);
void jrpc_zmtp_conn_unref(jrpc_zmtp_conn_t **conn_p);

/* The user's pointer for conn (NULL until set): what the connection is to
 * the caller (a worker), found without a search. */
void  jrpc_zmtp_conn_set_data(jrpc_zmtp_conn_t *conn, void *p);
void *jrpc_zmtp_conn_data(const jrpc_zmtp_conn_t *conn);

/* A number distinct per connection of this server (counting from a random
 * start, as libzmq's generated routing ids): a label for logs and metrics. */
uint32_t jrpc_zmtp_conn_id(const jrpc_zmtp_conn_t *conn);

/* Stops delivering messages (drain): what arrives is read and dropped,
 * unanswered (as libzmq's unread queue was); PINGs still get PONGs. */
void jrpc_zmtp_pause(jrpc_zmtp_t *z);

void jrpc_zmtp_stats(const jrpc_zmtp_t *z, jrpc_zmtp_stats_t *out);

/* Stops listening and reading, lets queued replies leave for up to
 * linger_ms, then closes every connection; the memory goes with the last
 * handle (and the last reference). Sets *self_p to NULL; NULL-safe. */
void jrpc_zmtp_destroy(jrpc_zmtp_t **self_p, uint32_t linger_ms);

#endif
