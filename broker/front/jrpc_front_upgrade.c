/* jrpc_front_upgrade — a WebSocket on the HTTP port, as the connection sees
 * it: the upgrade (refused, or authenticated by the broker, then the 101),
 * and the session's io over the connection (its writes under the
 * write-stall deadline, reading on and off, its close).
 *
 * Not here: the handshake's decision and the session itself (frames,
 * messages, bodies: jrpc_front_ws over jrpc_ws), the TLS layer
 * (jrpc_front_tls). */
#include "jrpc_front_http_int.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "jrpc_errors.h"
#include "jrpc_log.h"
#include "jrpc_proxy.h"

/* ---- WebSocket: the upgrade ------------------------------------------------- */

static int ws_write(void *conn, const char *p, size_t n);
static int ws_write2(void *conn, const char *a, size_t an, const char *p, size_t n);
static size_t ws_queued(void *conn);
static void ws_reading(void *conn, bool on);
static void ws_over(void *conn);
static const jrpc_front_ws_io_t ws_io = { ws_write, ws_queued, ws_reading, ws_over };

/* Bytes after the upgrade's head: the session's, or kept until it starts. */
void ws_rest(conn_t *c, const char *p, size_t n)
{
    if (n == 0 || c->closed || c->finishing || c->no_more)
        return;
    if (c->ws == NULL) {
        if (jrpc_buf_append(&c->in, p, n) < 0)
            conn_close(c);
        return;
    }
    int rc = jrpc_front_ws_feed(c->ws, p, n);
    if (rc < 0)
        conn_close(c);
    else if (rc > 0)
        conn_finish(c);
}

/* The upgrade is accepted, and authenticated as key_id (empty: open broker):
 * the 101, then the session, which gets the bytes that came after the head. */
static void ws_switch(conn_t *c, jrpc_span_t key_id, const uint8_t *key_fp)
{
    jrpc_front_http_t *f = c->front;
    const jrpc_front_ws_hs_t *hs = c->hs;
    char head[256];
    int n = jrpc_front_ws_head101(hs, jrpc_http_date(&f->date, time(NULL)), head, sizeof head);
    jrpc_front_ws_opts_t wo = {
        .max_msg = f->opts.max_body, .max_inflight = f->opts.ws_max_inflight,
        .max_queued = f->opts.ws_max_queued, .ping_ms = f->opts.ws_ping_ms,
        .idle_ms = f->opts.idle_timeout_ms, .stream = hs->stream, .timeout_ms = c->timeout_ms,
        .key_id = key_id, .key_fp = key_fp, .peer = { c->peer, c->peer_len },
        .write2 = ws_write2,
    };
    JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=ws_open protocol=%s stream=%d peer=%.*s",
             hs->protocol ? hs->protocol : "-", hs->stream, (int)c->peer_len, c->peer);
    free(c->hs);
    c->hs = NULL;
    if (n < 0 || ws_write(c, head, (size_t)n) < 0 ||
        (c->ws = jrpc_front_ws_new(f->loop, f->broker, &wo, &ws_io, c)) == NULL) {
        conn_close(c);
        return;
    }
    disarm_read(c);   /* the session keeps its own idle and ping deadlines */
    read_start(c);    /* (the session may stop it again while messages wait) */
    if (c->in.len > 0) {
        jrpc_buf_t early = c->in;   /* sent before the 101: the session's first bytes */
        jrpc_buf_init(&c->in);
        ws_rest(c, early.p, early.len);
        jrpc_buf_dispose(&early);
    }
}

/* A refusal with the broker's error object as its body; the connection
 * closes after it. */
static void answer_close(conn_t *c, int status, const char *body, size_t len)
{
    JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=refused status=%d reason=\"upgrade\" close=1", status);
    req_t *r = rec_new(c);
    if (r == NULL) {
        conn_close(c);
        return;
    }
    r->status = (uint16_t)status;
    if (rec_set_body(r, body, len) < 0) {
        r->blen = 0;
        r->body = r->inl;
    }
    r->state = R_READY;
    r->close = true;
    c->no_more = true;
    read_stop(c);
    flush(c);
}

/* The broker's verdict on the upgrade's signature and nonce. */
static void on_upgrade_auth(void *ctx, jrpc_outcome_t out, const char *err, size_t len,
                            jrpc_span_t key_id)
{
    conn_t *c = ctx;
    c->auth = NULL;
    if (out.cls != JRPC_BODY_OK) {
        answer_close(c, status_of[out.cls], err, len);
        return;
    }
    /* The credential it was opened with, to notice its rotation at a reload
     * (a client certificate is none of the key file's: only its id counts). */
    uint8_t fp[JRPC_KEY_FP_LEN];
    bool by_cert = key_id.n > 0 && key_id.n == c->cert_len && !memcmp(key_id.p, c->cert, key_id.n);
    bool has_fp = key_id.n > 0 && !by_cert &&
                  jrpc_broker_key_fingerprint(c->front->broker, key_id, fp);
    ws_switch(c, key_id, has_fp ? fp : NULL);
}

/* A GET / or /rpc asking for a WebSocket (origin_ok: the CORS verdict on
 * its Origin). After this, nothing more of the connection is HTTP. */
void ws_upgrade(conn_t *c, const jrpc_http_head_t *h, bool origin_ok)
{
    jrpc_front_http_t *f = c->front;
    jrpc_front_ws_hs_t hs;
    jrpc_front_ws_handshake(h, origin_ok, &hs);
    /* Answers leave in request order, and the 101 must be the last HTTP
     * bytes: an upgrade behind requests not yet answered is refused. */
    if (hs.status == 101 && (c->head != NULL || c->in.len > 0)) {
        hs.status = 400;
        hs.reason = "an upgrade must not be pipelined behind other requests";
    }
    if (hs.status == 101 && !timeout_of(h, &c->timeout_ms)) {
        hs.status = 400;
        hs.reason = "X-JRPC-Timeout-Ms must be a whole number from 1 to 4294967295";
    }
    if (hs.status != 101) {
        refuse_close(c, hs.status, JRPC_INVALID_REQUEST, hs.reason);
        return;
    }
    if (jrpc_http_reader_takeover(&c->rd) < 0 || (c->hs = malloc(sizeof hs)) == NULL) {
        refuse_close(c, 500, JRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    *c->hs = hs;
    char client[JRPC_PROXY_ADDR_TEXT];
    jrpc_span_t who = client_of(c, h, client);
    if (who.p == client) {   /* the connection is that client's from now on */
        memcpy(c->peer, client, who.n);
        c->peer_len = (uint8_t)who.n;
    }
    c->upgrading = true;
    c->phase = PH_IDLE;
    disarm_read(c);
    read_stop(c);   /* until the session starts (the nonce claim may wait for Redis) */
    jrpc_admit_t ad = {
        .transport = JRPC_TRANSPORT_WS,
        .auth = auth_req(h),
        .peer = { c->peer, c->peer_len },
        .key_id = cert_key_id(c),
    };
    /* The signed bytes of an upgrade are the empty body (docs/SIGNING.md). */
    if (jrpc_broker_authenticate(f->broker, "", 0, &ad, on_upgrade_auth, c, &c->auth) < 0)
        refuse_close(c, 500, JRPC_INTERNAL_ERROR, "out of memory");
}

/* ---- WebSocket: the session's io -------------------------------------------- */

/* One write the socket did not take at once: its own request and copy, so
 * that several can be in flight and a close's FIN queues after them all. */
typedef struct wblock {
    uv_write_t req;
    conn_t    *conn;
    char       data[];
} wblock_t;

static void on_ws_write(uv_write_t *w, int status)
{
    wblock_t *b = (wblock_t *)w;   /* req is the first member */
    conn_t *c = b->conn;
    free(b);
    c->nwrites--;
    if (c->closed)
        return;   /* cancelled by uv_close */
    if (status < 0) {
        JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=write_failed error=%s", uv_err_name(status));
        conn_close(c);
        return;
    }
    c->wprogress = true;   /* the write deadline counts progress, not an empty queue */
    if (c->nwrites == 0) {
        c->writing = false;
        tq_remove(c, TS_WRITE);
    }
}

/* The session's bytes, bufs[0, nb) in order: uv_try_write when nothing is
 * queued, the rest copied into a uv_write of its own, under the
 * write-stall deadline. Never closes the connection itself (it runs inside
 * the session). */
static int ws_writev(conn_t *c, const uv_buf_t *bufs, unsigned nb)
{
    if (c->closed || c->finishing || c->wfailed)
        return -EPIPE;
    size_t n = 0, done = 0;
    for (unsigned i = 0; i < nb; i++)
        n += bufs[i].len;
    if (c->nwrites == 0) {
        int k = io_try_write(c, bufs, nb);
        if (k == UV_EAGAIN || k == UV_ENOSYS)
            k = 0;
        if (k < 0) {
            c->wfailed = true;
            return -EPIPE;
        }
        done = (size_t)k;
        if (done == n)
            return 0;
    }
    wblock_t *b = malloc(sizeof *b + (n - done));
    if (b == NULL) {
        c->wfailed = true;
        return -ENOMEM;
    }
    b->conn = c;
    size_t at = 0;   /* bytes of bufs passed so far */
    for (unsigned i = 0; i < nb; i++) {
        size_t skip = done > at ? done - at : 0;
        if (skip < bufs[i].len)
            memcpy(b->data + (at + skip - done), bufs[i].base + skip, bufs[i].len - skip);
        at += bufs[i].len;
    }
    n -= done;
    uv_buf_t ub = uv_buf_init(b->data, (unsigned)n);
    if (io_write(c, &b->req, &ub, 1, on_ws_write) < 0) {
        free(b);
        c->wfailed = true;
        return -EPIPE;
    }
    if (c->nwrites++ == 0) {
        c->writing = true;
        c->wprogress = false;
        arm(c, T_WRITE);
    }
    return 0;
}

static int ws_write(void *conn, const char *p, size_t n)
{
    uv_buf_t b = uv_buf_init((char *)p, (unsigned)n);
    return ws_writev(conn, &b, 1);
}

static int ws_write2(void *conn, const char *a, size_t an, const char *p, size_t n)
{
    uv_buf_t b[2] = { uv_buf_init((char *)a, (unsigned)an), uv_buf_init((char *)p, (unsigned)n) };
    return ws_writev(conn, b, 2);
}

static size_t ws_queued(void *conn)
{
    conn_t *c = conn;
    return uv_stream_get_write_queue_size((const uv_stream_t *)&c->tcp);
}

static void ws_reading(void *conn, bool on)
{
    conn_t *c = conn;
    if (!on)
        read_stop(c);
    else if (!c->finishing && !c->closing)
        read_start(c);
}

/* Our close is out (FIN after the writes, then a linger), or a write
 * failed (at once). */
static void ws_over(void *conn)
{
    conn_t *c = conn;
    if (c->wfailed)
        conn_close(c);
    else
        conn_finish(c);
}
