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
#include "jrpc_log.h"
#include "jrpc_metrics.h"
#include "jrpc_zwatch.h"

#define READ_BUDGET 64   /* client messages per readable callback */
#define MAX_FRAMES  4    /* delimiter, header, body, and one to detect excess */
/* ZMQ_SNDHWM/ZMQ_RCVHWM per client connection, in messages (libzmq's default,
 * set so that it is a decision): a client that stops reading has at most
 * this many replies queued for it; the next is dropped (docs/RELIABILITY.md). */
#define CLIENT_HWM  1000
#define DROP_LOG_MS 1000 /* at most one warn line per second about dropped replies */
/* libzmq's ZMQ_MAXMSGSIZE (per frame) is set to this many times --max-body:
 * a body up to that is read and answered -32600 "body larger than N bytes"
 * (as HTTP answers 413); beyond it libzmq cuts the connection without a word
 * (docs/ARCHITECTURE.md, "Oversized bodies over ZeroMQ"). */
#define OVERSIZE_FACTOR 2

struct jrpc_front_zmq {
    void          *sock;     /* ROUTER */
    jrpc_zwatch_t  watch;
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
    bool              delim;   /* the client sent an empty delimiter frame */
    bool              stream;  /* streamed answers: each with a reply header (9.2) */
    size_t            idlen;
    char              id[];    /* routing id */
} route_t;

/* Sends one reply message: [delimiter] [reply header, streamed bodies]
 * JSON. */
static void send_reply(jrpc_front_zmq_t *f, const route_t *r, const jrpc_reply_head_t *rh,
                       const char *p, size_t n)
{
    int rc = zmq_send(f->sock, r->id, r->idlen, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    if (rc >= 0 && r->delim)
        rc = zmq_send(f->sock, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    if (rc >= 0 && rh) {
        jrpc_buf_reset(&f->head);
        rc = jrpc_header_put_reply(&f->head, rh) < 0 ? -1
             : zmq_send(f->sock, f->head.p, f->head.len, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    }
    if (rc >= 0)
        rc = zmq_send(f->sock, p, n, ZMQ_DONTWAIT);
    JRPC_LOG(JRPC_LOG_DEBUG, "front_zmq", "event=reply bytes=%zu rc=%d", n, rc);
    if (rc < 0) {
        /* EHOSTUNREACH: the client is gone; EAGAIN: it does not read. */
        int err = errno;
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
    jrpc_zwatch_kick(&f->watch);
}

static const jrpc_reply_head_t end_head = { .end = true };

/* Every outcome travels the same way over ZeroMQ: the reply's bytes; for a
 * streamed body, the last message, marked end (its JSON is the summary, or
 * the error object of a body refused whole). */
static void on_reply(void *ctx, jrpc_outcome_t out, const char *reply, size_t len)
{
    (void)out;
    route_t *r = ctx;
    send_reply(r->front, r, r->stream ? &end_head : NULL, reply, len);
    free(r);
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
    jrpc_buf_reset(&f->err);
    jrpc_batch_write_error(&f->err, code, data);
    send_reply(f, r, r->stream ? &end_head : NULL, f->err.p, f->err.len);
}

/* Handles one client message: frames[0] is the routing id. */
static void on_message(jrpc_front_zmq_t *f, zmq_msg_t *frames, int n, bool excess)
{
    size_t idlen = zmq_msg_size(&frames[0]);
    route_t *r = malloc(sizeof *r + idlen);
    if (r == NULL)
        return;
    r->front = f;
    r->stream = false;
    r->idlen = idlen;
    memcpy(r->id, zmq_msg_data(&frames[0]), idlen);
    int k = 1;
    r->delim = k < n && zmq_msg_size(&frames[k]) == 0 && n > 2;
    if (r->delim)
        k++;
    int left = n - k;
    if (excess || left < 1 || left > 2) {
        reply_error(f, r, JRPC_INVALID_REQUEST, "a message is [header frame] JSON frame");
        free(r);
        return;
    }
    jrpc_admit_t ad = { .transport = JRPC_TRANSPORT_ZMQ };
    JRPC_LOG(JRPC_LOG_DEBUG, "front_zmq", "event=request frames=%d bytes=%zu", n,
             zmq_msg_size(&frames[n - 1]));
    if (left == 2) {
        jrpc_header_t h;
        msgpack_zone_clear(&f->zone);
        if (jrpc_header_decode(zmq_msg_data(&frames[k]), zmq_msg_size(&frames[k]),
                               &f->zone, &h) < 0) {
            reply_error(f, r, JRPC_INVALID_REQUEST, "malformed header frame");
            free(r);
            return;
        }
        ad.timeout_ms = h.timeout_ms;
        ad.auth = (jrpc_auth_req_t){ .key = h.key, .timestamp = h.timestamp,
                                     .has_timestamp = h.timestamp != 0, .nonce = h.nonce,
                                     .signature = h.signature };
        ad.traceparent = h.traceparent;
        ad.idem_key = h.idem_key;
        if (h.stream && h.idem_key.n == 0) {   /* a kept reply is one reply: not streamed */
            ad.answer = on_answer;
            r->stream = true;
        }
        k++;
    }
    const char *peer = zmq_msg_gets(&frames[k], "Peer-Address"); /* an IP, no port */
    if (peer)
        ad.peer = (jrpc_span_t){ peer, strlen(peer) };
    if (zmq_msg_size(&frames[k]) > f->max_body) {
        char why[64];
        snprintf(why, sizeof why, "body larger than %zu bytes", f->max_body);
        f->oversized++;
        JRPC_LOG(JRPC_LOG_WARN, "front_zmq", "event=refused reason=body_too_large bytes=%zu "
                 "max_body=%zu peer=%s total=%llu", zmq_msg_size(&frames[k]), f->max_body,
                 peer ? peer : "-", (unsigned long long)f->oversized);
        reply_error(f, r, JRPC_INVALID_REQUEST, why);
        free(r);
        return;
    }
    int rc = jrpc_broker_submit(f->broker, zmq_msg_data(&frames[k]), zmq_msg_size(&frames[k]),
                                &ad, on_reply, r, NULL);
    if (rc < 0) {   /* -ENOMEM: the broker could not take it */
        reply_error(f, r, JRPC_INTERNAL_ERROR, "out of memory");
        free(r);
    }
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
        on_message(f, frames, n, excess);
        for (int i = 0; i < n; i++)
            zmq_msg_close(&frames[i]);
    }
    return 1;
}

jrpc_front_zmq_t *jrpc_front_zmq_new(uv_loop_t *loop, void *zmq_ctx, jrpc_broker_t *broker,
                                     const jrpc_front_zmq_opts_t *opts)
{
    const char *endpoint = opts->endpoint;
    uint32_t max_body = opts->max_body;
    const jrpc_curve_keypair_t *curve = opts->curve;
    jrpc_front_zmq_t *f = calloc(1, sizeof *f);
    if (f == NULL)
        return NULL;
    f->broker = broker;
    f->loop = loop;
    f->max_body = max_body;
    msgpack_zone_init(&f->zone, 1024);
    jrpc_buf_init(&f->err);
    jrpc_buf_init(&f->head);
    f->sock = zmq_socket(zmq_ctx, ZMQ_ROUTER);
    if (f->sock == NULL)
        goto fail;
    int one = 1, zero = 0;
    zmq_setsockopt(f->sock, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    zmq_setsockopt(f->sock, ZMQ_LINGER, &zero, sizeof zero);
    int64_t max_msg_bytes = (int64_t)max_body * OVERSIZE_FACTOR;
    zmq_setsockopt(f->sock, ZMQ_MAXMSGSIZE, &max_msg_bytes, sizeof max_msg_bytes);
    int hwm = CLIENT_HWM;
    zmq_setsockopt(f->sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(f->sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
    if (curve && jrpc_curve_server(f->sock, curve, "clients") < 0) {
        JRPC_LOG(JRPC_LOG_ERROR, "front_zmq", "event=curve_failed error=\"%s\"", zmq_strerror(errno));
        goto fail;
    }
    if (zmq_bind(f->sock, endpoint) != 0) {
        JRPC_LOG(JRPC_LOG_ERROR, "front_zmq", "event=bind_failed endpoint=%s error=\"%s\"",
                 endpoint, zmq_strerror(errno));
        goto fail;
    }
    if (jrpc_zwatch_start(loop, &f->watch, f->sock, on_readable, f) < 0)
        goto fail;
    JRPC_LOG(JRPC_LOG_INFO, "front_zmq", "event=listening endpoint=%s curve=%s", endpoint,
             curve ? "on" : "off");
    return f;
fail:
    if (f->sock)
        zmq_close(f->sock);
    msgpack_zone_destroy(&f->zone);
    free(f);
    return NULL;
}

void jrpc_front_zmq_pause(jrpc_front_zmq_t *f)
{
    f->paused = true;
}

static void on_closed(jrpc_zwatch_t *zw)
{
    jrpc_front_zmq_t *f = zw->data;
    /* Let the last replies leave: zmq_ctx_term() waits up to this long. */
    int linger = 2000;
    zmq_setsockopt(f->sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(f->sock);
    msgpack_zone_destroy(&f->zone);
    jrpc_buf_dispose(&f->err);
    jrpc_buf_dispose(&f->head);
    free(f);
}

void jrpc_front_zmq_destroy(jrpc_front_zmq_t **self_p)
{
    jrpc_front_zmq_t *f = *self_p;
    if (f == NULL)
        return;
    *self_p = NULL;
    jrpc_zwatch_stop(&f->watch, on_closed);
}
