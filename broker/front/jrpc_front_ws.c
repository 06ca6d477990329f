/* jrpc_front_ws — see jrpc_front_ws.h.
 *
 * A session's bodies are on a list (to cancel them when the connection
 * goes); each counts its calls in flight until its answers are in (one by
 * one in mode jrpc.stream, all at its end otherwise: notifications until
 * the end in both). Messages that must wait for room are copied into one
 * buffer (a length, the bytes, ...), in arrival order; while any waits the
 * socket is not read, so what waits is bounded by one read and one message.
 *
 * Everything that ends the session (a close we send, a failed write) is
 * acted on outside the call stacks of the broker and of wslay: inside
 * jrpc_front_ws_feed()'s return path, or from the session's timer fired at
 * once, because cancelling bodies at the broker is not allowed from inside
 * its answer callback. The timer also carries the ping and the idle
 * deadline: one libuv timer per session, restarted at a ping interval or an
 * idle deadline, never per message. */
#include "jrpc_front_ws.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "jrpc_batch.h"
#include "jrpc_errors.h"
#include "jrpc_http_response.h"
#include "jrpc_log.h"
#include "jrpc_metrics.h"
#include "jrpc_ws.h"

#define COMP "front_ws"

/* ---- the handshake --------------------------------------------------------- */

/* Calls each comma-separated element of p[0, n), trimmed and not empty,
 * until fn returns true; returns that element's index, or -1. */
static int each_element(const char *p, size_t n, bool (*fn)(const char *e, size_t en, void *arg),
                        void *arg)
{
    const char *e;
    size_t el;
    for (int idx = 0; jrpc_http_next_elem(&p, &n, ',', &e, &el); idx++)
        if (el > 0 && fn(e, el, arg))
            return idx;
    return -1;
}

static bool is_websocket(const char *e, size_t n, void *arg)
{
    (void)arg;
    return n == 9 && strncasecmp(e, "websocket", 9) == 0;
}

bool jrpc_front_ws_wanted(const jrpc_http_head_t *h)
{
    if (h->method != JRPC_HTTP_M_GET)
        return false;
    jrpc_http_value_t up = jrpc_http_head_value(h, JRPC_HTTP_F_UPGRADE);
    if (up.count > 0 && each_element(up.p, up.n, is_websocket, NULL) >= 0)
        return true;
    return jrpc_http_head_value(h, JRPC_HTTP_F_WS_KEY).count > 0;
}

typedef struct proto_pick {
    const char *chosen;
} proto_pick_t;

/* Subprotocol names are compared as they are (RFC 6455 4.1: tokens). */
static bool pick_protocol(const char *e, size_t n, void *arg)
{
    proto_pick_t *pp = arg;
    if (n == 11 && memcmp(e, "jrpc.stream", 11) == 0)
        pp->chosen = "jrpc.stream";
    else if (n == 4 && memcmp(e, "jrpc", 4) == 0)
        pp->chosen = "jrpc";
    return pp->chosen != NULL;
}

/* ?stream=1 or ?stream=true among the target's query parameters. */
static bool query_stream(const jrpc_http_head_t *h)
{
    const char *q = memchr(h->target, '?', h->target_len);
    if (q == NULL)
        return false;
    q++;
    size_t n = h->target_len - (size_t)(q - h->target);
    const char *e;
    size_t en;
    while (jrpc_http_next_elem(&q, &n, '&', &e, &en))
        if ((en == 8 && memcmp(e, "stream=1", 8) == 0) ||
            (en == 11 && memcmp(e, "stream=true", 11) == 0))
            return true;
    return false;
}

static void refuse(jrpc_front_ws_hs_t *hs, uint16_t status, const char *why)
{
    hs->status = status;
    hs->reason = why;
}

void jrpc_front_ws_handshake(const jrpc_http_head_t *h, bool origin_ok, jrpc_front_ws_hs_t *hs)
{
    memset(hs, 0, sizeof *hs);
    jrpc_http_value_t up = jrpc_http_head_value(h, JRPC_HTTP_F_UPGRADE);
    jrpc_http_value_t key = jrpc_http_head_value(h, JRPC_HTTP_F_WS_KEY);
    jrpc_http_value_t ver = jrpc_http_head_value(h, JRPC_HTTP_F_WS_VERSION);
    jrpc_http_value_t pro = jrpc_http_head_value(h, JRPC_HTTP_F_WS_PROTOCOL);
    if (h->method != JRPC_HTTP_M_GET)
        return refuse(hs, 400, "a WebSocket opens with GET");
    if (h->version_minor != 1)
        return refuse(hs, 400, "a WebSocket needs HTTP/1.1");
    if (up.count == 0 || each_element(up.p, up.n, is_websocket, NULL) < 0)
        return refuse(hs, 400, "Upgrade: websocket is required");
    if (!h->conn_upgrade)
        return refuse(hs, 400, "Connection: Upgrade is required");
    if (h->chunked || h->content_length > 0)
        return refuse(hs, 400, "an upgrade request has no body");
    if (key.count != 1 || key.cut || jrpc_ws_accept_key(key.p, key.n, hs->accept) < 0)
        return refuse(hs, 400, "Sec-WebSocket-Key must be one base64 text of 16 bytes");
    if (ver.count != 1 || ver.cut)
        return refuse(hs, 400, "Sec-WebSocket-Version: 13 is required");
    if (!(ver.n == 2 && memcmp(ver.p, "13", 2) == 0))
        return refuse(hs, 426, "WebSocket version 13 only");
    if (!origin_ok)
        return refuse(hs, 403, "this Origin is not allowed (--cors-origin)");
    proto_pick_t pp = { NULL };
    if (pro.count > 0) {
        size_t n = pro.n;
        if (pro.cut) { /* the last element kept may be a piece of a longer name */
            while (n > 0 && pro.p[n - 1] != ',')
                n--;
        }
        each_element(pro.p, n, pick_protocol, &pp);
    }
    hs->protocol = pp.chosen;
    hs->stream = pp.chosen ? pp.chosen[4] == '.' : query_stream(h);
    hs->status = 101;
}

int jrpc_front_ws_head101(const jrpc_front_ws_hs_t *hs, const char *date, char *dst, size_t cap)
{
    char extra[192];
    int n = snprintf(extra, sizeof extra,
                     "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n"
                     "%s%s%s", hs->accept, hs->protocol ? "Sec-WebSocket-Protocol: " : "",
                     hs->protocol ? hs->protocol : "", hs->protocol ? "\r\n" : "");
    if (n < 0 || (size_t)n >= sizeof extra)
        return -1;
    jrpc_http_resp_t r = { .status = 101, .date = date, .extra = extra };
    return jrpc_http_response_head(dst, cap, &r);
}

/* ---- the session ------------------------------------------------------------- */

typedef struct wsbody {
    struct wsbody   *prev, *next;  /* the session's bodies in flight */
    jrpc_front_ws_t *s;
    jrpc_body_t     *handle;       /* what jrpc_broker_cancel takes */
    uint32_t         calls;        /* its calls still counted in flight */
} wsbody_t;

struct jrpc_front_ws {
    uv_loop_t           *loop;
    jrpc_broker_t       *broker;
    jrpc_front_ws_opts_t o;
    jrpc_front_ws_io_t   io;
    void                *conn;
    jrpc_ws_t           *ws;
    uv_timer_t           timer;     /* ping, pong deadline, idle; and "act now" */
    uint64_t             timer_at;  /* when it is due (loop ms); 0: not armed */
    wsbody_t            *bodies;    /* submitted, not ended */
    uint32_t             nbodies;
    uint32_t             inflight;  /* calls in flight, across the bodies */
    jrpc_broker_hold_t  *hold;      /* what its answered bodies still hold in the broker */
    wsbody_t            *submitting; /* inside jrpc_broker_submit, until its on_end */
    jrpc_buf_t           pend;      /* messages waiting for room: u32 length, bytes, ... */
    size_t               pend_off;  /* the first of them */
    uint32_t             npend;
    uint64_t             active_at; /* last message in, or last body's end (loop ms) */
    uint64_t             ping_at;   /* the next ping, or the deadline of the pong awaited */
    bool                 pumping;   /* inside pump(): no re-entry */
    bool                 draining;  /* no new message; close 1001 when the last body ends */
    bool                 over;      /* our close is out, or a write failed */
    bool                 over_done; /* ... and acted on: bodies cancelled, the front told */
    bool                 gone;      /* destroyed: only the timer's close is awaited */
    uint8_t              peer_len;
    char                 peer[64];
    uint8_t              key_id_len;
    char                 key_id[JRPC_KEYS_ID_MAX]; /* the upgrade's key, by id: a reload
                                       may free the key set under an open session, so
                                       each message's body is admitted by a fresh lookup */
    bool                 has_fp;    /* key_fp is set (else only the id is checked) */
    uint8_t              key_fp[JRPC_KEY_FP_LEN]; /* the key's credential at the upgrade */
};

static void send_text(jrpc_front_ws_t *s, const char *p, size_t n);
static void pump(jrpc_front_ws_t *s);
static void arm(jrpc_front_ws_t *s, uint64_t at);

static bool fits(const jrpc_front_ws_t *s, uint32_t k)
{
    return (s->inflight == 0 || (uint64_t)s->inflight + k <= s->o.max_inflight) &&
           !jrpc_broker_hold_full(s->hold);
}

/* The broker let go of enough of what our bodies held: start what waits. */
static void on_hold_wake(void *ctx)
{
    pump(ctx);
}

static bool idle(const jrpc_front_ws_t *s)
{
    return s->nbodies == 0 && s->npend == 0;
}

/* The session's end is to be acted on: at once from the timer. */
static void check_over(jrpc_front_ws_t *s)
{
    if (s->over || !jrpc_ws_over(s->ws))
        return;
    s->over = true;
    arm(s, uv_now(s->loop));
}

static void close_with(jrpc_front_ws_t *s, uint16_t code, const char *why)
{
    if (s->over)
        return;
    JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=ws_close code=%u reason=\"%s\" peer=%.*s inflight=%u",
             code, why, (int)s->peer_len, s->peer, s->inflight);
    if (jrpc_ws_close(s->ws, code, why) < 0) {   /* a write failed: over anyway */
        s->over = true;
        arm(s, uv_now(s->loop));
        return;
    }
    check_over(s);
}

/* Every body still in flight is cancelled; what waits is dropped. */
static void cancel_all(jrpc_front_ws_t *s)
{
    wsbody_t *w;
    while ((w = s->bodies) != NULL) {
        s->bodies = w->next;
        jrpc_broker_cancel(s->broker, w->handle);
        free(w);
    }
    s->nbodies = 0;
    s->inflight = 0;
    jrpc_buf_dispose(&s->pend);
    s->pend_off = 0;
    s->npend = 0;
}

/* The end, acted on once: counted, bodies cancelled (nobody can be
 * answered any more); tell says whether the front is to hear of it. */
static void over_done(jrpc_front_ws_t *s, bool tell)
{
    if (s->over_done)
        return;
    s->over_done = true;
    s->over = true;
    uint16_t sent = jrpc_ws_code_sent(s->ws);
    if (sent)
        jrpc_metrics_ws_close(sent);
    JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=ws_over code_sent=%u code_received=%u peer=%.*s "
             "cancelled=%u", sent, jrpc_ws_code_received(s->ws), (int)s->peer_len, s->peer,
             s->nbodies);
    cancel_all(s);
    if (tell)
        s->io.over(s->conn);
}

static void unlink_body(jrpc_front_ws_t *s, wsbody_t *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        s->bodies = w->next;
    if (w->next)
        w->next->prev = w->prev;
    s->nbodies--;
}

/* Streamed mode: one answer of a body, as soon as it is in. */
static void on_answer(void *ctx, uint32_t pos, const char *json, size_t len)
{
    (void)pos;
    wsbody_t *w = ctx;
    jrpc_front_ws_t *s = w->s;
    if (w->calls > 0) {
        w->calls--;
        s->inflight--;
    }
    send_text(s, json, len);
}

/* A body's end: its whole reply (mode jrpc), or the end of its stream; a
 * body refused whole (invalid, busy, ...) is its one error object in both
 * modes. May run inside jrpc_broker_submit(). */
static void on_end(void *ctx, jrpc_outcome_t out, const char *reply, size_t len)
{
    wsbody_t *w = ctx;
    jrpc_front_ws_t *s = w->s;
    s->inflight -= w->calls;
    if (s->submitting == w)
        s->submitting = NULL;   /* ended inside jrpc_broker_submit */
    unlink_body(s, w);
    free(w);
    bool refused = out.cls != JRPC_BODY_OK;   /* streamed: never an end (jrpc_broker.h) */
    /* The stream's summary is not a JSON-RPC message: nothing is sent for
     * it (docs/WEBSOCKET.md). An empty reply: only notifications. */
    if (len > 0 && (!s->o.stream || refused))
        send_text(s, reply, len);
    s->active_at = uv_now(s->loop);
    if (s->over)
        return;
    if (s->draining) {
        if (s->nbodies == 0)
            close_with(s, JRPC_WS_GOING_AWAY, "the broker is stopping");
        return;
    }
    pump(s);
    if (idle(s))
        arm(s, s->active_at + s->o.idle_ms);
}

static void send_error(jrpc_front_ws_t *s, int code, const char *data)
{
    jrpc_buf_t b;
    jrpc_buf_init(&b);
    if (jrpc_batch_write_error(&b, code, data) == 0)
        send_text(s, b.p, b.len);
    jrpc_buf_dispose(&b);
}

#define UNCOUNTED UINT32_MAX   /* submit(): the broker's parser counts the calls */

/* k: the message's calls, or UNCOUNTED (mode jrpc only, where no answer
 * comes before the body's end): counted by the broker as it parses. */
static void submit(jrpc_front_ws_t *s, const char *p, size_t n, uint32_t k)
{
    uint32_t parsed = 0;
    bool uncounted = k == UNCOUNTED;
    if (uncounted)
        k = 0;
    wsbody_t *w = calloc(1, sizeof *w);
    if (w == NULL) {
        send_error(s, JRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    w->s = s;
    w->calls = k;
    w->next = s->bodies;
    if (s->bodies)
        s->bodies->prev = w;
    s->bodies = w;
    s->nbodies++;
    s->inflight += k;
    jrpc_admit_t ad = {
        .timeout_ms = s->o.timeout_ms,
        .transport = JRPC_TRANSPORT_WS,
        .peer = { s->peer, s->peer_len },
        .answer = s->o.stream ? on_answer : NULL,
        .key_id = { s->key_id, s->key_id_len },
        .hold = s->hold,
        .ncalls = uncounted ? &parsed : NULL,
    };
    /* on_end may run before this returns (and free w): w is used after
     * only when it is still the one submitting. */
    s->submitting = w;
    if (jrpc_broker_submit(s->broker, p, n, &ad, on_end, w, &w->handle) < 0) {
        s->submitting = NULL;
        s->inflight -= k;
        unlink_body(s, w);
        free(w);
        send_error(s, JRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    if (s->submitting == w && uncounted) {
        w->calls = parsed;
        s->inflight += parsed;
    }
    s->submitting = NULL;
}

/* Starts the messages that wait, in order, while they fit; reads the
 * socket again once none waits. */
static void pump(jrpc_front_ws_t *s)
{
    if (s->pumping || s->over || s->draining)
        return;
    s->pumping = true;
    while (s->npend > 0 && !s->over) {
        uint32_t n;
        memcpy(&n, s->pend.p + s->pend_off, sizeof n);
        const char *p = s->pend.p + s->pend_off + sizeof n;
        uint32_t k = jrpc_batch_count(p, n);
        if (!fits(s, k))
            break;
        s->pend_off += sizeof n + n;
        s->npend--;
        /* the buffer only grows from a read, and none happens meanwhile */
        submit(s, p, n, k);
    }
    s->pumping = false;
    if (s->npend == 0 && !s->over && !s->draining) {
        jrpc_buf_dispose(&s->pend);
        s->pend_off = 0;
        s->io.reading(s->conn, true);
    }
}

/* A whole text message from the peer (inside jrpc_ws_feed). */
static void on_message(void *arg, const char *p, size_t n)
{
    jrpc_front_ws_t *s = arg;
    s->active_at = uv_now(s->loop);
    if (s->over || s->draining)
        return;
    /* Nothing in flight: it fits whatever its weight, and in mode jrpc the
     * broker counts its calls as it parses it (issue 35: a pass over the
     * message of its own cost a quarter of a WebSocket call). */
    if (s->npend == 0 && s->inflight == 0 && !s->o.stream && fits(s, 1)) {
        submit(s, p, n, UNCOUNTED);
        return;
    }
    uint32_t k = jrpc_batch_count(p, n);
    if (s->npend == 0 && fits(s, k)) {
        submit(s, p, n, k);
        return;
    }
    /* No room: it waits, and the socket is not read meanwhile. */
    uint32_t len = (uint32_t)n;   /* n <= max_msg <= 2^30 */
    if (jrpc_buf_append(&s->pend, (const char *)&len, sizeof len) < 0 ||
        jrpc_buf_append(&s->pend, p, n) < 0) {
        close_with(s, 1011, "out of memory");
        return;
    }
    if (s->npend++ == 0)
        JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=ws_full inflight=%u max_inflight=%u peer=%.*s",
                 s->inflight, s->o.max_inflight, (int)s->peer_len, s->peer);
    s->io.reading(s->conn, false);
}

static int on_write(void *arg, const char *p, size_t n)
{
    jrpc_front_ws_t *s = arg;
    return s->io.write(s->conn, p, n);
}

static int on_write2(void *arg, const char *a, size_t an, const char *p, size_t n)
{
    jrpc_front_ws_t *s = arg;
    return s->o.write2(s->conn, a, an, p, n);
}

/* One message to the peer; past the send queue's limit, the close 1008. */
static void send_text(jrpc_front_ws_t *s, const char *p, size_t n)
{
    if (s->over)
        return;
    int rc = jrpc_ws_send_text(s->ws, p, n);
    if (rc < 0 && rc != -EPIPE) {   /* -EPIPE: our close is out already */
        s->over = true;
        arm(s, uv_now(s->loop));
        return;
    }
    if (s->io.queued(s->conn) > s->o.max_queued)
        close_with(s, JRPC_WS_POLICY, "send queue over its limit (--ws-max-queued)");
    check_over(s);
}

static void on_tick(uv_timer_t *t)
{
    jrpc_front_ws_t *s = t->data;
    s->timer_at = 0;
    if (s->gone)
        return;
    if (!s->over) {
        uint64_t now = uv_now(s->loop);
        if (now >= s->ping_at && (s->npend > 0 || s->draining)) {
            /* We are not reading (messages wait for room, or the broker
             * drains): a pong could not be seen. The deadline starts again
             * once we read. */
            s->ping_at = now + s->o.ping_ms;
        } else if (now >= s->ping_at) {
            if (jrpc_ws_awaiting_pong(s->ws)) {
                close_with(s, JRPC_WS_GOING_AWAY, "no pong within --ws-ping-ms");
            } else if (jrpc_ws_ping(s->ws) < 0) {
                s->over = true;
            } else {
                s->ping_at = now + s->o.ping_ms;
                check_over(s);
            }
        }
        if (!s->over && idle(s) && now >= s->active_at + s->o.idle_ms)
            close_with(s, JRPC_WS_GOING_AWAY, "idle (--idle-timeout-ms)");
    }
    if (s->over) {
        over_done(s, true);
        return;
    }
    arm(s, s->ping_at);
    if (idle(s))
        arm(s, s->active_at + s->o.idle_ms);
}

/* The timer is due at `at` at the latest (an earlier due time stands). */
static void arm(jrpc_front_ws_t *s, uint64_t at)
{
    if (s->gone || (s->timer_at != 0 && s->timer_at <= at))
        return;
    uint64_t now = uv_now(s->loop);
    s->timer_at = at > now ? at : now;
    uv_timer_start(&s->timer, on_tick, s->timer_at - now, 0);
}

jrpc_front_ws_t *jrpc_front_ws_new(uv_loop_t *loop, jrpc_broker_t *broker,
                                   const jrpc_front_ws_opts_t *opts,
                                   const jrpc_front_ws_io_t *io, void *conn)
{
    jrpc_front_ws_t *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->loop = loop;
    s->broker = broker;
    s->o = *opts;
    s->io = *io;
    s->conn = conn;
    if (s->o.max_inflight == 0)
        s->o.max_inflight = 1;
    if (opts->peer.n <= sizeof s->peer) {
        memcpy(s->peer, opts->peer.p, opts->peer.n);
        s->peer_len = (uint8_t)opts->peer.n;
    }
    s->o.peer = (jrpc_span_t){ NULL, 0 };
    if (opts->key_id.n > 0 && opts->key_id.n <= sizeof s->key_id) {   /* jrpc_keys: never longer */
        memcpy(s->key_id, opts->key_id.p, opts->key_id.n);
        s->key_id_len = (uint8_t)opts->key_id.n;
    }
    s->o.key_id = (jrpc_span_t){ NULL, 0 };   /* the caller's: not kept */
    if (opts->key_fp && s->key_id_len > 0) {
        memcpy(s->key_fp, opts->key_fp, sizeof s->key_fp);
        s->has_fp = true;
    }
    s->o.key_fp = NULL;
    jrpc_buf_init(&s->pend);
    s->hold = jrpc_broker_hold_new(broker, on_hold_wake, s);
    jrpc_ws_opts_t wo = { .max_msg = opts->max_msg };
    jrpc_ws_cbs_t cbs = { .message = on_message, .write = on_write,
                          .write2 = opts->write2 ? on_write2 : NULL };
    if ((s->ws = jrpc_ws_new(&wo, &cbs, s)) == NULL) {
        jrpc_broker_hold_release(&s->hold);
        free(s);
        return NULL;
    }
    uv_timer_init(loop, &s->timer);
    s->timer.data = s;
    s->active_at = uv_now(loop);
    s->ping_at = s->active_at + s->o.ping_ms;
    arm(s, s->ping_at);
    arm(s, s->active_at + s->o.idle_ms);
    jrpc_metrics.ws_connections++;
    return s;
}

int jrpc_front_ws_feed(jrpc_front_ws_t *s, const char *p, size_t n)
{
    if (s->over) {
        over_done(s, false);
        return 1;
    }
    int rc = jrpc_ws_feed(s->ws, p, n);
    /* Answers sent while wslay was reading went out at its end. */
    if (rc == 0 && s->io.queued(s->conn) > s->o.max_queued)
        close_with(s, JRPC_WS_POLICY, "send queue over its limit (--ws-max-queued)");
    if (rc < 0 || jrpc_ws_over(s->ws) || s->over) {
        over_done(s, false);
        return rc < 0 ? rc : 1;
    }
    return 0;
}

void jrpc_front_ws_drain(jrpc_front_ws_t *s)
{
    if (s->draining || s->over)
        return;
    s->draining = true;
    jrpc_buf_dispose(&s->pend);
    s->pend_off = 0;
    s->npend = 0;
    s->io.reading(s->conn, false);
    if (s->nbodies == 0)
        close_with(s, JRPC_WS_GOING_AWAY, "the broker is stopping");
}

void jrpc_front_ws_keys_changed(jrpc_front_ws_t *s)
{
    if (s->over || s->key_id_len == 0)
        return;
    uint8_t fp[JRPC_KEY_FP_LEN];
    const char *why;
    if (!jrpc_broker_key_fingerprint(s->broker, (jrpc_span_t){ s->key_id, s->key_id_len }, fp))
        why = "key_removed";
    else if (s->has_fp && memcmp(fp, s->key_fp, sizeof fp) != 0)
        why = "credential_rotated";
    else
        return;
    JRPC_LOG(JRPC_LOG_INFO, COMP, "event=ws_closed reason=%s key=%.*s peer=%.*s inflight=%u", why,
             (int)s->key_id_len, s->key_id, (int)s->peer_len, s->peer, s->inflight);
    close_with(s, JRPC_WS_POLICY, why[0] == 'k' ? "key removed: reconnect with a current key"
                                                : "credential rotated: reconnect with the new one");
}

static void on_timer_closed(uv_handle_t *h)
{
    free(h->data);
}

void jrpc_front_ws_destroy(jrpc_front_ws_t **self_p)
{
    jrpc_front_ws_t *s = *self_p;
    if (s == NULL)
        return;
    *self_p = NULL;
    over_done(s, false);
    jrpc_broker_hold_release(&s->hold);
    s->gone = true;
    jrpc_buf_dispose(&s->pend);
    jrpc_ws_destroy(&s->ws);
    jrpc_metrics.ws_connections--;
    uv_close((uv_handle_t *)&s->timer, on_timer_closed);
}
