/* jrpc_front_zmq — see jrpc_front_zmq.h. */
#include "jrpc_front_zmq.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "jrpc_curve.h"
#include "jrpc_errors.h"
#include "jrpc_header.h"
#include "jrpc_timing.h"
#include "jrpc_log.h"
#include "jrpc_metrics.h"
#include "jrpc_status_page.h"
#include "jrpc_zmtp.h"
#include "jrpc_zwatch.h"

#define READ_BUDGET 64   /* client messages per readable callback */
#define MAX_FRAMES  4    /* delimiter, header, body, and one to detect excess */
/* ZMQ_SNDHWM/ZMQ_RCVHWM per client connection, in messages (libzmq's default,
 * set so that it is a decision): a client that stops reading has at most
 * this many replies queued for it; the next is dropped (docs/RELIABILITY.md). */
#define CLIENT_HWM  1000
#define DROP_LOG_MS 1000 /* at most one warn line per second about dropped replies */
/* A body above --max-body is answered -32600 "body larger than N bytes" (as
 * HTTP answers 413). The native engine skips its bytes as they arrive
 * (skip_oversized), so that holds at any size. libzmq reads a frame whole:
 * its ZMQ_MAXMSGSIZE is set to this many times --max-body, and beyond it
 * libzmq cuts the connection without a word (docs/ARCHITECTURE.md,
 * "Oversized bodies over ZeroMQ"). */
#define OVERSIZE_FACTOR 2
/* The native engine buffers a frame up to this or --max-body, whichever is
 * larger, so that a header frame (signature, nonce, trace) always fits. */
#define FRAME_KEEP_MIN  (64u << 10)
/* The native engine: a peer that has not sent its greeting and READY this
 * long after connecting is closed (libzmq's ZMQ_HANDSHAKE_IVL is 30 s). */
#define HANDSHAKE_MS 5000
/* What the last replies may take at destroy (ZMQ_LINGER before zmq_close). */
#define LINGER_MS 2000

struct jrpc_front_zmq {
    void          *sock;     /* libzmq engine: the ROUTER; NULL with the native one */
    jrpc_zmtp_t   *zmtp;     /* native engine (io/jrpc_zmtp); NULL with libzmq */
    jrpc_zwatch_t  watch;    /* libzmq engine */
    jrpc_broker_t *broker;
    bool           paused;
    msgpack_zone   zone;     /* header frame decoding */
    jrpc_buf_t     err;      /* error replies written here */
    jrpc_buf_t     head;     /* the reply header frame being sent */
    size_t         max_body; /* --max-body: larger JSON frames are answered -32600 */
    uint64_t       oversized;     /* bodies refused for their size */
    uint64_t       dropped;  /* replies the client was not there to take */
    uint64_t       unread;   /* of those, dropped at the HWM (client not reading) */
    uint64_t       unread_logged; /* unread at the last warn line */
    uint64_t       warned_at;     /* uv_now() of the last warn line */
    uv_loop_t     *loop;
};

/* Where a reply goes: kept from the request until the broker answers. */
typedef struct route {
    jrpc_front_zmq_t *front;
    jrpc_zmtp_conn_t *conn;    /* native engine: the connection (a reference) */
    bool              delim;   /* the client sent an empty delimiter frame */
    bool              stream;  /* streamed answers: each with a reply header (9.2) */
    bool              timing;  /* the header asked for "timing": the last message's
                                  reply header carries "server_timing" (9.3) */
    size_t            idlen;
    char              id[];    /* libzmq engine: routing id */
} route_t;

static void route_free(route_t *r)
{
    jrpc_zmtp_conn_unref(&r->conn);
    free(r);
}

/* The libzmq engine's send: the routing id first. Returns 0 or -errno. */
static int send_libzmq(jrpc_front_zmq_t *f, const route_t *r, const jrpc_span_t *fr, int nf)
{
    int rc = zmq_send(f->sock, r->id, r->idlen, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    for (int i = 0; rc >= 0 && i < nf; i++)
        rc = zmq_send(f->sock, fr[i].p, fr[i].n, (i + 1 < nf ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT);
    rc = rc < 0 ? -errno : 0;
    jrpc_zwatch_kick(&f->watch);
    return rc;
}

/* Sends one reply message: [delimiter] [reply header, streamed bodies]
 * JSON. */
static void send_reply(jrpc_front_zmq_t *f, const route_t *r, const jrpc_reply_head_t *rh,
                       const char *p, size_t n)
{
    jrpc_span_t fr[3];
    int nf = 0, rc = 0;
    if (r->delim)
        fr[nf++] = (jrpc_span_t){ "", 0 };
    if (rh) {
        jrpc_buf_reset(&f->head);
        if (jrpc_header_put_reply(&f->head, rh) < 0)
            rc = -ENOMEM;
        fr[nf++] = (jrpc_span_t){ f->head.p, f->head.len };
    }
    fr[nf++] = (jrpc_span_t){ p, n };
    if (rc == 0)
        rc = r->conn ? jrpc_zmtp_send(r->conn, fr, nf) : send_libzmq(f, r, fr, nf);
    JRPC_LOG(JRPC_LOG_DEBUG, "front_zmq", "event=reply bytes=%zu rc=%d", n, rc);
    if (rc < 0) {
        /* EHOSTUNREACH: the client is gone; EAGAIN: it does not read. */
        int err = -rc;
        f->dropped++;
        JRPC_LOG(JRPC_LOG_DEBUG, "front_zmq", "event=reply_dropped error=\"%s\"",
                 zmq_strerror(err));
        if (err == EAGAIN) {
            uint64_t now = uv_now(f->loop);
            f->unread++;
            if (f->warned_at == 0 || now - f->warned_at >= DROP_LOG_MS) {
                JRPC_LOG(JRPC_LOG_WARN, "front_zmq",
                         "event=reply_dropped reason=client_not_reading hwm=%d dropped=%llu total=%llu",
                         CLIENT_HWM, (unsigned long long)(f->unread - f->unread_logged),
                         (unsigned long long)f->unread);
                f->warned_at = now ? now : 1;
                f->unread_logged = f->unread;
            }
        }
    }
}

static const jrpc_reply_head_t end_head = { .end = true };

/* Every outcome travels the same way over ZeroMQ: the reply's bytes; for a
 * streamed body, the last message, marked end (its JSON is the summary, or
 * the error object of a body refused whole). */
static void on_reply(void *ctx, jrpc_outcome_t out, const char *reply, size_t len)
{
    route_t *r = ctx;
    char st[JRPC_TIMING_MAX];
    size_t n = r->timing && out.timing ? jrpc_timing_format(out.timing, st) : 0;
    if (n) {   /* asked for: the reply header carries it (9.3) */
        jrpc_reply_head_t rh = { .end = r->stream, .whole = !r->stream,
                                 .timing = { st, n } };
        send_reply(r->front, r, &rh, reply, len);
    } else {
        send_reply(r->front, r, r->stream ? &end_head : NULL, reply, len);
    }
    route_free(r);
}

/* A streamed body's answer, as it is in: one message, its position first. */
static void on_answer(void *ctx, uint32_t pos, const char *json, size_t len)
{
    route_t *r = ctx;
    send_reply(r->front, r, &(jrpc_reply_head_t){ .pos = pos }, json, len);
}

static void reply_error(jrpc_front_zmq_t *f, route_t *r, int code, const char *data)
{
    jrpc_metrics_front_refused(JRPC_TRANSPORT_ZMQ, code);
    jrpc_status_page_refused(JRPC_TRANSPORT_ZMQ, JRPC_BODY_INVALID, code, data);
    jrpc_buf_reset(&f->err);
    jrpc_batch_write_error(&f->err, code, data);
    send_reply(f, r, r->stream ? &end_head : NULL, f->err.p, f->err.len);
}

/* Handles one client message, whichever engine read it: frames[0..n) after
 * the routing id, excess when there were more (read and dropped), peer the
 * client's IP or NULL. Takes ownership of r, which says where replies go. */
static void on_message(jrpc_front_zmq_t *f, const jrpc_span_t *frames, int n, bool excess,
                       const char *peer, route_t *r)
{
    r->front = f;
    r->stream = false;
    r->timing = false;
    int k = 0;
    r->delim = n >= 2 && frames[0].n == 0;
    if (r->delim)
        k++;
    int left = n - k;
    if (excess || left < 1 || left > 2) {
        reply_error(f, r, JRPC_INVALID_REQUEST, "a message is [header frame] JSON frame");
        route_free(r);
        return;
    }
    jrpc_admit_t ad = { .transport = JRPC_TRANSPORT_ZMQ };
    JRPC_LOG(JRPC_LOG_DEBUG, "front_zmq", "event=request frames=%d bytes=%zu", n + 1,
             frames[n - 1].n);
    if (left == 2) {
        jrpc_header_t h;
        msgpack_zone_clear(&f->zone);
        if (frames[k].p == NULL ||   /* skipped by the native engine: above --max-body */
            jrpc_header_decode(frames[k].p, frames[k].n, &f->zone, &h) < 0) {
            reply_error(f, r, JRPC_INVALID_REQUEST, "malformed header frame");
            route_free(r);
            return;
        }
        ad.timeout_ms = h.timeout_ms;
        ad.auth = (jrpc_auth_req_t){ .key = h.key, .timestamp = h.timestamp,
                                     .has_timestamp = h.timestamp != 0, .nonce = h.nonce,
                                     .signature = h.signature };
        ad.traceparent = h.traceparent;
        ad.idem_key = h.idem_key;
        r->timing = h.timing;
        if (h.stream && h.idem_key.n == 0) {   /* a kept reply is one reply: not streamed */
            ad.answer = on_answer;
            r->stream = true;
        }
        k++;
    }
    ad.untimed = !r->timing;   /* no stamps per call for a reply that shows none */
    if (peer)   /* an IP, no port */
        ad.peer = (jrpc_span_t){ peer, strlen(peer) };
    if (frames[k].n > f->max_body) {   /* p is NULL when the native engine skipped it */
        char why[64];
        snprintf(why, sizeof why, "body larger than %zu bytes", f->max_body);
        f->oversized++;
        JRPC_LOG(JRPC_LOG_WARN, "front_zmq", "event=refused reason=body_too_large bytes=%zu "
                 "max_body=%zu peer=%s total=%llu", frames[k].n, f->max_body,
                 peer ? peer : "-", (unsigned long long)f->oversized);
        reply_error(f, r, JRPC_INVALID_REQUEST, why);
        route_free(r);
        return;
    }
    int rc = jrpc_broker_submit(f->broker, frames[k].p, frames[k].n, &ad, on_reply, r, NULL);
    if (rc < 0) {   /* -ENOMEM: the broker could not take it */
        reply_error(f, r, JRPC_INTERNAL_ERROR, "out of memory");
        route_free(r);
    }
}

/* The native engine's messages: the route holds the connection. */
static void on_zmtp_message(void *data, jrpc_zmtp_conn_t *conn, const jrpc_span_t *frames,
                            int n, bool excess, const char *peer)
{
    jrpc_front_zmq_t *f = data;
    route_t *r = calloc(1, sizeof *r);
    if (r == NULL)
        return;
    jrpc_zmtp_conn_ref(conn);
    r->conn = conn;
    on_message(f, frames, n, excess, peer, r);
}

/* The libzmq engine's messages: frames[0] is the routing id. */
static void on_zmq_message(jrpc_front_zmq_t *f, zmq_msg_t *frames, int n, bool excess)
{
    size_t idlen = zmq_msg_size(&frames[0]);
    route_t *r = calloc(1, sizeof *r + idlen);
    if (r == NULL)
        return;
    r->idlen = idlen;
    memcpy(r->id, zmq_msg_data(&frames[0]), idlen);
    jrpc_span_t spans[MAX_FRAMES];
    for (int i = 1; i < n; i++)
        spans[i - 1] = (jrpc_span_t){ zmq_msg_data(&frames[i]), zmq_msg_size(&frames[i]) };
    const char *peer = zmq_msg_gets(&frames[n - 1], "Peer-Address");
    on_message(f, spans, n - 1, excess, peer, r);
}

static int on_readable(jrpc_zwatch_t *zw, void *sock)
{
    jrpc_front_zmq_t *f = zw->data;
    for (int budget = 0; budget < READ_BUDGET; budget++) {
        if (f->paused)
            return 0;
        zmq_msg_t frames[MAX_FRAMES];
        int n = 0;
        bool excess = false;
        zmq_msg_init(&frames[0]);
        if (zmq_msg_recv(&frames[0], sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&frames[0]);
            return 0;
        }
        n = 1;
        while (zmq_msg_more(&frames[n - 1])) {
            if (n == MAX_FRAMES) { /* too many frames: read and drop the rest */
                zmq_msg_t extra;
                zmq_msg_init(&extra);
                zmq_msg_recv(&extra, sock, 0);
                bool more = zmq_msg_more(&extra);
                zmq_msg_close(&extra);
                excess = true;
                if (!more)
                    break;
                continue;
            }
            zmq_msg_init(&frames[n]);
            if (zmq_msg_recv(&frames[n], sock, 0) < 0) {
                zmq_msg_close(&frames[n]);
                break;
            }
            n++;
        }
        if (n >= 2)
            on_zmq_message(f, frames, n, excess);
        for (int i = 0; i < n; i++)
            zmq_msg_close(&frames[i]);
    }
    return 1;
}

static int start_libzmq(jrpc_front_zmq_t *f, void *zmq_ctx, const jrpc_front_zmq_opts_t *opts)
{
    if (jrpc_curve_router(&f->sock, zmq_ctx, opts->endpoint,
                          (int64_t)opts->max_body * OVERSIZE_FACTOR, CLIENT_HWM, opts->curve,
                          "clients", "front_zmq") < 0)
        return -1;
    return jrpc_zwatch_start(f->loop, &f->watch, f->sock, on_readable, f) < 0 ? -1 : 0;
}

jrpc_front_zmq_t *jrpc_front_zmq_new(uv_loop_t *loop, void *zmq_ctx, jrpc_broker_t *broker,
                                     const jrpc_front_zmq_opts_t *opts)
{
    const char *endpoint = opts->endpoint;
    jrpc_front_zmq_t *f = calloc(1, sizeof *f);
    if (f == NULL)
        return NULL;
    f->broker = broker;
    f->loop = loop;
    f->max_body = opts->max_body;
    msgpack_zone_init(&f->zone, 1024);
    jrpc_buf_init(&f->err);
    jrpc_buf_init(&f->head);
    /* The native engine unless CURVE is on (ZMTP CURVE is libzmq's) or the
     * endpoint is a transport it does not speak (inproc://, ...). */
    const char *why = NULL;
    if (opts->engine == JRPC_FRONT_ZMQ_LIBZMQ)
        why = "option";
    else if (opts->curve)
        why = "curve";
    else if (!jrpc_zmtp_supports(endpoint))
        why = "transport";
    if (why == NULL) {
        jrpc_zmtp_opts_t zo = { .endpoint = endpoint,
                                .max_frame = opts->max_body > FRAME_KEEP_MIN
                                                 ? opts->max_body : FRAME_KEEP_MIN,
                                .skip_oversized = true,
                                .hwm = CLIENT_HWM, .handshake_ms = HANDSHAKE_MS };
        if (jrpc_zmtp_new(loop, &zo, on_zmtp_message, f, &f->zmtp) < 0)
            goto fail;
    } else if (start_libzmq(f, zmq_ctx, opts) < 0) {
        goto fail;
    }
    JRPC_LOG(JRPC_LOG_INFO, "front_zmq", "event=listening endpoint=%s curve=%s engine=%s%s%s",
             endpoint, opts->curve ? "on" : "off", f->zmtp ? "native" : "libzmq",
             why ? " reason=" : "", why ? why : "");
    return f;
fail:
    if (f->sock)
        zmq_close(f->sock);
    msgpack_zone_destroy(&f->zone);
    jrpc_buf_dispose(&f->err);
    jrpc_buf_dispose(&f->head);
    free(f);
    return NULL;
}

void jrpc_front_zmq_pause(jrpc_front_zmq_t *f)
{
    f->paused = true;
    if (f->zmtp)
        jrpc_zmtp_pause(f->zmtp);
}

static void front_free(jrpc_front_zmq_t *f)
{
    msgpack_zone_destroy(&f->zone);
    jrpc_buf_dispose(&f->err);
    jrpc_buf_dispose(&f->head);
    free(f);
}

static void on_closed(jrpc_zwatch_t *zw)
{
    jrpc_front_zmq_t *f = zw->data;
    /* Let the last replies leave: zmq_ctx_term() waits up to this long. */
    int linger = LINGER_MS;
    zmq_setsockopt(f->sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(f->sock);
    front_free(f);
}

void jrpc_front_zmq_destroy(jrpc_front_zmq_t **self_p)
{
    jrpc_front_zmq_t *f = *self_p;
    if (f == NULL)
        return;
    *self_p = NULL;
    if (f->zmtp) {
        /* Queued replies leave for up to LINGER_MS; the engine frees itself
         * with its last handle. No route is left (the broker has drained). */
        jrpc_zmtp_destroy(&f->zmtp, LINGER_MS);
        front_free(f);
        return;
    }
    jrpc_zwatch_stop(&f->watch, on_closed);
}
