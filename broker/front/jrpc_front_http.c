/* jrpc_front_http — see jrpc_front_http.h: the module's entry points and
 * its connections: the request records (the pipelining FIFO and its
 * backpressure), closing (at once, or gracefully with a linger), the
 * reader's verdicts (what a request may do, its body submitted to the
 * broker), reading, accepting.
 *
 * Not here (the module's other files, listed in jrpc_front_http_int.h):
 * the deadlines (jrpc_front_timer), what a head's fields say
 * (jrpc_front_head), answers and their writes, CORS (jrpc_front_answer),
 * streamed answers (jrpc_front_stream), MCP's rules (jrpc_front_mcp), the
 * WebSocket upgrade (jrpc_front_upgrade), TLS (jrpc_front_tls). */
#include "jrpc_front_http_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "jrpc_errors.h"
#include "jrpc_proxy.h"
#include "jrpc_listen.h"
#include "jrpc_log.h"
#include "jrpc_metrics.h"
#include "jrpc_status_page.h"


/* ---- request records ---------------------------------------------------- */

req_t *rec_new(conn_t *c)
{
    jrpc_front_http_t *f = c->front;
    req_t *r = f->free_recs;
    if (r != NULL) {
        f->free_recs = r->next;
        f->nfree--;
    } else if ((r = malloc(sizeof *r)) == NULL) {
        return NULL;
    }
    r->next = NULL;
    r->conn = c;
    r->handle = NULL;
    r->state = R_PARSING;
    r->close = r->ka10 = r->cont = r->borrowed = r->hdr_built = r->preflight = false;
    r->mcp = false;   /* headers_done says */
    r->sse_ok = r->switched = r->gstream = r->probe_del = false;
    r->gnext = NULL;
    r->probe = 0;
    r->sid_len = 0;
    r->cors = c->cors;
    r->stream = S_NONE;
    r->s_started = r->s_ended = false;
    jrpc_buf_init(&r->s_out);
    jrpc_buf_init(&r->s_wr);
    r->head = c->is_head;
    r->status = 0;
    r->retry_after = 0;
    r->replayed = false;
    r->timing.has = 0;
    r->body = NULL;
    r->blen = 0;
    r->heap = NULL;
    r->off = 0;
    r->hlen = 0;
    if (c->tail)
        c->tail->next = r;
    else
        c->head = r;
    c->tail = r;
    c->nreq++;
    return r;
}

void rec_free(jrpc_front_http_t *f, req_t *r)
{
    if (r->gstream)
        mcp_gstream_drop(f, r);
    free(r->heap);
    if (r->s_started && !r->s_ended)
        f->nstreams--;
    jrpc_buf_dispose(&r->s_out);
    jrpc_buf_dispose(&r->s_wr);
    if (f->nfree < FREE_RECS_MAX) {
        r->next = f->free_recs;
        f->free_recs = r;
        f->nfree++;
    } else {
        free(r);
    }
}

req_t *rec_pop(conn_t *c)
{
    req_t *r = c->head;
    c->head = r->next;
    if (c->head == NULL)
        c->tail = NULL;
    c->nreq--;
    return r;
}

/* Sets the answer body: short ones are copied inline, long ones to the heap. */
int rec_set_body(req_t *r, const char *p, size_t n)
{
    if (n <= INLINE_BODY) {
        memcpy(r->inl, p, n);
        r->body = r->inl;
    } else {
        if ((r->heap = malloc(n)) == NULL)
            return -ENOMEM;
        memcpy(r->heap, p, n);
        r->body = r->heap;
    }
    r->blen = n;
    r->borrowed = false;
    return 0;
}

/* Answer bytes the client is behind on: those of the ready answers while a
 * write is in flight (without one, flush has handed the socket all it took),
 * and streamed bytes queued. At most PIPELINE_MAX + 1 records: cheap. */
static size_t out_behind(const conn_t *c)
{
    size_t n = 0;
    for (const req_t *x = c->head; x != NULL; x = x->next) {
        n += x->s_out.len + (c->writing ? x->s_wr.len : 0);
        if (c->writing && x->state == R_READY)
            n += x->hlen + x->blen - x->off;
    }
    return n;
}

/* Backpressure: parse no more requests while too many are outstanding or
 * the client is too far behind reading their answers (then the socket is
 * not read either, TCP pushes back on the client, and a client that never
 * reads meets the write-stall deadline). */
static bool pipeline_full(const conn_t *c)
{
    return c->nreq >= PIPELINE_MAX || out_behind(c) > OUT_MAX || jrpc_broker_hold_full(c->hold);
}

bool pipeline_low(const conn_t *c)
{
    return c->nreq <= PIPELINE_LOW && out_behind(c) <= OUT_LOW && !jrpc_broker_hold_full(c->hold);
}

/* The broker let go of enough of what c's bodies held (jrpc_broker_hold_new). */
static void on_hold_wake(void *ctx)
{
    conn_t *c = ctx;
    if (c->bp && !c->feeding && !c->closed && pipeline_low(c))
        feed_pending(c);
}

/* Forgets what a submitted record waits for: its body in the broker, or
 * (GET /openrpc.json) the authentication of its credentials. */
static void rec_cancel(conn_t *c, req_t *r)
{
    if (r->handle) {
        jrpc_broker_cancel(c->front->broker, r->handle);
        r->handle = NULL;
    } else if (c->auth) {
        jrpc_broker_authenticate_cancel(c->front->broker, c->auth);
        c->auth = NULL;
    }
}

/* An HTTP-level answer with a JSON-RPC error body (id null). */
void rec_error(conn_t *c, req_t *r, int status, int code, const char *data)
{
    jrpc_front_http_t *f = c->front;
    jrpc_metrics_front_refused(JRPC_TRANSPORT_HTTP, code);
    jrpc_status_page_refused(JRPC_TRANSPORT_HTTP, JRPC_BODY_INVALID, code, data);
    jrpc_buf_reset(&f->err);
    r->status = (uint16_t)status;
    if (jrpc_batch_write_error(&f->err, code, data) < 0 ||
        rec_set_body(r, f->err.p, f->err.len) < 0) {
        r->blen = 0; /* out of memory: the status alone */
        r->body = r->inl;
    }
    r->state = R_READY;
}

/* ---- closing ------------------------------------------------------------ */

static void on_tick_closed(uv_handle_t *h);

static void front_maybe_free(jrpc_front_http_t *f)
{
    if (!f->destroying || f->nalive > 0 || f->listening)
        return;
    if (f->nhandles > 0) {
        if (!uv_is_closing((uv_handle_t *)&f->tick)) {
            uv_close((uv_handle_t *)&f->tick, on_tick_closed);
            uv_close((uv_handle_t *)&f->flushq, on_tick_closed);
            uv_close((uv_handle_t *)&f->ping, on_tick_closed);
        }
        return;
    }
    req_t *r;
    while ((r = f->free_recs) != NULL) {
        f->free_recs = r->next;
        free(r);
    }
    jrpc_buf_dispose(&f->err);
    free(f->pbuf);
    free(f);
}

static void on_tick_closed(uv_handle_t *h)
{
    jrpc_front_http_t *f = h->data;
    f->nhandles--;
    front_maybe_free(f);
}

static void on_tcp_closed(uv_handle_t *h)
{
    conn_t *c = h->data;
    jrpc_front_http_t *f = c->front;
    if (c->dirty)   /* not expected (the list is walked before close callbacks run) */
        for (conn_t **pp = &f->dirty; *pp; pp = &(*pp)->dnext)
            if (*pp == c) {
                *pp = c->dnext;
                break;
            }
    jrpc_buf_dispose(&c->body);
    jrpc_buf_dispose(&c->in);
    jrpc_tls_free(&c->tls);
    free(c->hs);
    free(c);
    f->nalive--;
    front_maybe_free(f);
}

/* Closes at once: requests still with the broker are cancelled, answers not
 * yet written are dropped. */
void conn_close(conn_t *c)
{
    if (c->closed)
        return;
    tq_remove(c, TS_READ);
    tq_remove(c, TS_WRITE);
    c->closed = true;
    jrpc_front_http_t *f = c->front;
    while (c->head != NULL) {
        req_t *r = rec_pop(c);
        if (r->state == R_SUBMITTED)
            rec_cancel(c, r);
        rec_free(f, r);
    }
    jrpc_broker_hold_release(&c->hold);
    /* A WebSocket's bodies in flight are cancelled with its session. */
    jrpc_front_ws_destroy(&c->ws);
    if (c->auth) {
        jrpc_broker_authenticate_cancel(f->broker, c->auth);
        c->auth = NULL;
    }
    if (c->prev)
        c->prev->next = c->next;
    else
        f->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    f->nconns--;
    jrpc_metrics.http_connections--;
    uv_close((uv_handle_t *)&c->tcp, on_tcp_closed);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    conn_t *c = h->data;
    *buf = uv_buf_init(c->front->rbuf, READ_BUF);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

void read_start(conn_t *c)
{
    if (!c->reading && !c->closed) {
        if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0) {
            conn_close(c);
            return;
        }
        c->reading = true;
    }
}

void read_stop(conn_t *c)
{
    if (c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
}

static void on_shutdown(uv_shutdown_t *sr, int status)
{
    conn_t *c = sr->handle->data;
    if (c->closed)
        return;
    if (status < 0) {
        conn_close(c);
        return;
    }
    /* Our FIN is out after the last answer: read and drop what the client
     * still sends until it closes, so the kernel does not answer its bytes
     * with a reset that could destroy our answer in flight. */
    read_start(c);
    arm(c, T_LINGER);
}

/* Closes gracefully after the last answer: FIN after the writes, linger. */
void conn_finish(conn_t *c)
{
    if (c->finishing || c->closed)
        return;
    c->finishing = true;
    c->no_more = true;
    jrpc_front_http_t *f = c->front;
    while (c->head != NULL) { /* nothing follows an answer that closes */
        req_t *r = rec_pop(c);
        if (r->state == R_SUBMITTED)
            rec_cancel(c, r);
        rec_free(f, r);
    }
    if (c->tls) {   /* our close_notify goes before the FIN (nothing after a failure) */
        jrpc_tls_close(c->tls);
        tls_send(c);
    }
    if (uv_shutdown(&c->sreq, (uv_stream_t *)&c->tcp, on_shutdown) < 0) {
        conn_close(c);
        return;
    }
    /* A WebSocket after our close: read and drop at once, not only after
     * the FIN. A client that is still sending (maybe while the session had
     * stopped reading) would otherwise block on its send, never read our
     * close, and hold the connection until the write-stall deadline. */
    if (c->upgrading)
        read_start(c);
}

/* ---- requests: the reader's verdicts ------------------------------------- */

/* A refusal that ends the connection: answered in order, then closed. */
void refuse_close(conn_t *c, int status, int code, const char *why)
{
    JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=refused status=%d reason=\"%s\" close=1", status, why);
    req_t *r = c->tail && c->tail->state == R_PARSING ? c->tail : rec_new(c);
    if (r == NULL) {
        conn_close(c);
        return;
    }
    r->cont = false;
    rec_error(c, r, status, code, why);
    r->close = true;
    c->no_more = true;
    c->phase = PH_IDLE;
    read_stop(c);
    flush(c);
}

/* The previous head read again, after a plain POST to /rpc that was taken
 * (c->kept): its verdicts hold, as they depend on the head's fields and the
 * front's options only (fixed while it runs); the caller checked the new
 * length. What headers_done does for such a head, from what it kept. */
static void kept_head(conn_t *c, const jrpc_http_head_t *h)
{
    c->cors = c->kept_cors;
    c->mcp = c->openrpc = c->is_head = c->discard = false;
    c->zc = NULL;
    c->zc_len = 0;
    jrpc_buf_reset(&c->body);
    req_t *r = rec_new(c);
    if (r == NULL) {
        conn_close(c);
        return;
    }
    r->ka10 = h->version_minor != 1 && h->keep_alive;
    r->stream = c->kept_stream;
    c->phase = PH_BODY;
    if (h->content_length > c->in_hand)
        arm(c, T_BODY);
}

/* The head is in (the reader has checked its framing): decide whether the
 * request is ours to serve. */
static void headers_done(conn_t *c)
{
    const jrpc_http_head_t *h = jrpc_http_reader_head(&c->rd);
    const jrpc_front_http_opts_t *o = &c->front->opts;
    if (c->kept && jrpc_http_reader_again(&c->rd) && h->content_length <= o->max_body) {
        kept_head(c, h);
        return;
    }
    c->kept = c->ad_kept = false;
    bool v11 = h->version_minor == 1;
    int origin = origin_of(c->front, h);
    c->cors = origin > 0 ? (uint16_t)origin : 0;
    c->mcp = mcp_target(c->front, h);
    c->openrpc = openrpc_target(h);
    if (jrpc_front_ws_wanted(h) && rpc_target(h)) {
        ws_upgrade(c, h, origin >= 0);
        return;
    }
    c->is_head = h->method == JRPC_HTTP_M_HEAD;
    c->discard = false;
    c->zc = NULL;
    c->zc_len = 0;
    jrpc_buf_reset(&c->body);
    uint64_t cl = h->content_length;
    jrpc_http_value_t ct = jrpc_http_head_value(h, JRPC_HTTP_F_CONTENT_TYPE);
    /* Soft refusals leave the framing intact: the body can be skipped and
     * the connection kept, unless the client waits to be told to send it. */
    int status = 0;
    const char *why = NULL;
    bool preflight = false, mcp_del = false, mcp_get_stream = false;
    bool quiet = false;   /* an answer the spec expects: no JSON-RPC error, not counted */
    if (h->method == JRPC_HTTP_M_OPTIONS && o->ncors > 0 && origin != 0 &&
        (rpc_target(h) || c->mcp)) {
        if (origin < 0) { /* not 405: OPTIONS is served, to the origins listed */
            status = 403;
            why = "this Origin is not allowed (--cors-origin)";
        } else {
            preflight = true;
        }
    } else if (c->mcp && origin < 0) {
        /* MCP: servers must check Origin (DNS rebinding: a page whose name
         * now points at 127.0.0.1 posts same-origin, with no preflight). */
        status = 403;
        why = "this Origin is not allowed on the MCP path (--cors-origin)";
    } else if (c->mcp && h->method == JRPC_HTTP_M_DELETE && mcp_session_of(h).n) {
        mcp_del = true;          /* the end of a session (docs/MCP.md "Sessions") */
    } else if (c->mcp && h->method == JRPC_HTTP_M_GET && mcp_session_of(h).n && v11 &&
               mcp_sse_ok(h)) {
        mcp_get_stream = true;   /* a session's stream */
    } else if (c->mcp && h->method != JRPC_HTTP_M_POST) {
        status = 405;   /* GET without a session: no stream; DELETE without one: nothing to end */
        why = "use POST on the MCP path (GET and DELETE need an Mcp-Session-Id)";
        quiet = h->method == JRPC_HTTP_M_GET;   /* the SDK's GET on connect: the spec's answer */
    } else if (c->openrpc) {
        /* served at the end of the message (a body, if any, is dropped) */
    } else if (h->method != JRPC_HTTP_M_POST || (!rpc_target(h) && !c->mcp)) {
        status = 405;
        why = "use POST / or POST /rpc";
    } else if (v11 && h->expect_other) {
        status = 417;
        why = "only Expect: 100-continue is supported";
    } else if (ct.count > 1 || (ct.count == 1 && (ct.cut || !content_type_ok(ct.p, ct.n)))) {
        status = 415;
        why = "Content-Type must be application/json or application/json-rpc";
    } else if (h->content_coded) {
        status = 415;
        why = "Content-Encoding must be identity (none is decoded)";
    } else if (cl > o->max_body) {
        char buf[64];
        snprintf(buf, sizeof buf, "body larger than %u bytes", o->max_body);
        refuse_close(c, 413, JRPC_INVALID_REQUEST, buf);
        return;
    } else if (!timeout_of(h, &c->timeout_ms)) {
        status = 400;
        why = "X-JRPC-Timeout-Ms must be a whole number from 1 to 4294967295";
    } else if (idem_value(h).p != NULL && !jrpc_broker_idem_key_ok(idem_value(h))) {
        status = 400;   /* "" is no "no key": the body would run twice */
        why = "Idempotency-Key must be 1 to 255 characters of printable ASCII without spaces";
    } else if (c->mcp && !mcp_accept_ok(h)) {
        status = 406;
        why = "Accept must allow application/json (the MCP path answers JSON, never a stream)";
    } else if (c->mcp && idem_value(h).p != NULL && !mcp_target_alone(c->front, h)) {
        status = 400;   /* a kept reply is found by key and body, not by service */
        why = "Idempotency-Key is not taken on /mcp/<service>";
    } else if (c->mcp && !mcp_version_ok(h)) {
        status = 400;
        why = "unsupported MCP-Protocol-Version (2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25)";
    }
    bool expecting = v11 && (h->expect_continue || h->expect_other);
    if (status != 0 && (expecting || h->method == JRPC_HTTP_M_CONNECT || cl > o->max_body)) {
        refuse_close(c, status, JRPC_INVALID_REQUEST, why);
        return;
    }
    req_t *r = rec_new(c);
    if (r == NULL) {
        conn_close(c);
        return;
    }
    r->ka10 = !v11 && h->keep_alive;
    r->mcp = c->mcp;
    /* A body with an idempotency key gets one reply (a kept reply is one). */
    r->stream = idem_value(h).n ? S_NONE : c->mcp ? mcp_stream_mode(h) : stream_mode(h);
    r->sse_ok = c->mcp && v11 && mcp_sse_ok(h);
    if (mcp_del) {
        mcp_delete(c, r, h);
    } else if (mcp_get_stream) {
        mcp_get(c, r, h);
    } else if (status != 0) {
        JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=refused status=%d reason=\"%s\" close=0", status, why);
        if (quiet) {
            r->status = (uint16_t)status;
            r->body = r->inl;
            r->blen = 0;
        } else {
            rec_error(c, r, status, JRPC_INVALID_REQUEST, why);
        }
        r->state = R_PARSING; /* ready once the body is skipped */
        c->discard = true;
    } else if (preflight) {   /* a 204 with the Access-Control-* lines, once the body is skipped */
        r->status = 204;
        r->preflight = true;
        r->body = r->inl;
        r->blen = 0;
        c->discard = true;
    } else if (c->openrpc) {
        c->discard = true;   /* answered from message_done, not from the skipped body */
    } else if (v11 && h->expect_continue) {
        r->cont = true;
        flush(c);
    } else if (!c->mcp && !c->peer_trusted && !expecting && !h->chunked) {
        c->kept = true;   /* a plain POST to /rpc: the same head again decides the same */
        c->kept_stream = r->stream;
        c->kept_cors = c->cors;
    }
    c->phase = PH_BODY;
    /* A body already in hand is read in this same feed: no deadline (the
     * read slot's is dropped when it ends), one queue update less. */
    if (h->chunked || cl > c->in_hand)
        arm(c, T_BODY);
}

/* Body bytes: kept where they lie while the body is in one read (zc), else
 * gathered in c->body. */
static void body_bytes(conn_t *c, const char *at, size_t len)
{
    if (c->discard)
        return;
    if (c->zc == NULL && c->body.len == 0) {
        c->zc = at;
        c->zc_len = len;
        return;
    }
    if (c->zc != NULL) {
        if (jrpc_buf_append(&c->body, c->zc, c->zc_len) < 0) {
            conn_close(c);
            return;
        }
        c->zc = NULL;
        c->zc_len = 0;
    }
    if (jrpc_buf_append(&c->body, at, len) < 0)
        conn_close(c);
}

/* The broker's verdict on a GET /openrpc.json's credentials: the document
 * the key may see, or the refusal a body gets (401, 503...). */
static void on_openrpc_auth(void *ctx, jrpc_outcome_t out, const char *err, size_t len,
                            jrpc_span_t key_id)
{
    req_t *r = ctx;
    conn_t *c = r->conn;
    jrpc_front_http_t *f = c->front;
    c->auth = NULL;
    r->state = R_READY;
    if (out.cls != JRPC_BODY_OK) {
        r->status = status_of[out.cls];
        if (rec_set_body(r, err, len) < 0)
            rec_error(c, r, 500, JRPC_INTERNAL_ERROR, "out of memory");
    } else {
        jrpc_buf_reset(&f->err);
        int rc = jrpc_broker_discover(f->broker, key_id, &f->err);
        if (rc == -ENOENT)
            rec_error(c, r, 401, JRPC_UNAUTHORIZED, "this key was removed");
        else if (rc < 0 || rec_set_body(r, f->err.p, f->err.len) < 0)
            rec_error(c, r, 500, JRPC_INTERNAL_ERROR, "out of memory");
        else
            r->status = 200;
    }
    flush(c);
}

/* GET /openrpc.json (docs/ARCHITECTURE.md "Discovery"): authenticated as a
 * body to /rpc is (the signed bytes are the empty body, as for a WebSocket
 * upgrade), one at a time per connection. */
static void openrpc_get(conn_t *c, req_t *r, const jrpc_http_head_t *h)
{
    if (c->auth != NULL) {
        rec_error(c, r, 503, JRPC_SERVER_BUSY, "one /openrpc.json at a time per connection");
        flush(c);
        return;
    }
    char client[JRPC_PROXY_ADDR_TEXT];
    jrpc_admit_t ad = {
        .transport = JRPC_TRANSPORT_HTTP,
        .auth = auth_req(h),
        .peer = client_of(c, h, client),
        .key_id = cert_key_id(c),
    };
    r->state = R_SUBMITTED;   /* r->handle NULL: rec_cancel cancels c->auth */
    if (jrpc_broker_authenticate(c->front->broker, "", 0, &ad, on_openrpc_auth, r, &c->auth) < 0) {
        rec_error(c, r, 500, JRPC_INTERNAL_ERROR, "out of memory");
        flush(c);
    }
}

/* The body is in: submit it (or finish a soft refusal). */
static void message_done(conn_t *c)
{
    const jrpc_http_head_t *h = jrpc_http_reader_head(&c->rd);
    req_t *r = c->tail;
    c->phase = PH_IDLE;
    c->is_head = false;
    c->cors = 0;
    disarm_read(c);
    if (!h->keep_alive) {
        c->no_more = true;
        read_stop(c); /* the answer closes: read no more (a FIN from the client is then no cancel) */
    }
    if (r == NULL || r->state != R_PARSING)
        return;
    r->close = !h->keep_alive;
    if (c->openrpc && r->status == 0) {
        openrpc_get(c, r, h);
        return;
    }
    if (c->discard) {
        r->state = R_READY;
        flush(c);
        return;
    }
    const char *body = c->zc ? c->zc : c->body.p;
    size_t len = c->zc ? c->zc_len : c->body.len;
    jrpc_span_t svc = { NULL, 0 };
    if (c->mcp && (!mcp_message(c, r, body ? body : "", len) ||
                   (!mcp_route(c->front, h, &svc) || (svc.n == 0 && !mcp_one_service(c, r))))) {
        c->zc = NULL;
        c->zc_len = 0;
        jrpc_buf_dispose(&c->body);
        flush(c);
        return;
    }
    char client[JRPC_PROXY_ADDR_TEXT];
    r->state = R_SUBMITTED;
    if (c->ad_kept) {   /* the same head again: the same admission, but for the key */
        if (c->cert_len)   /* asked per body (a reload may revoke it) */
            c->ad.key_id = cert_key_id(c);
    } else {
        jrpc_http_value_t tp = jrpc_http_head_value(h, JRPC_HTTP_F_TRACEPARENT);
        c->ad = (jrpc_admit_t){
            .transport = JRPC_TRANSPORT_HTTP,
            .timeout_ms = c->timeout_ms,
            .auth = auth_req(h),
            /* one, whole: a second one makes both invalid (W3C: no picking) */
            .traceparent = tp.count == 1 && !tp.cut ? (jrpc_span_t){ tp.p, tp.n }
                                                    : (jrpc_span_t){ "", 0 },
            .peer = client_of(c, h, client),
            .answer = r->stream ? on_answer : NULL,
            .key_id = cert_key_id(c),
            .idem_key = idem_value(h),
            .hold = c->hold,
            .mcp = c->mcp ? mcp_on_message : NULL,
            .session = c->mcp ? mcp_session_of(h) : (jrpc_span_t){ NULL, 0 },
            .path = c->mcp ? c->front->opts.mcp_path : "/rpc",
            .service = svc,
        };
        c->ad_kept = c->kept;   /* (its spans point into the head, which is kept with it) */
    }
    int rc = jrpc_broker_submit(c->front->broker, body ? body : "", len, &c->ad, on_reply, r,
                                &r->handle);
    c->zc = NULL;
    c->zc_len = 0;
    /* Not kept for the next body: an idle keep-alive connection holds no
     * buffer (a body that came in pieces used to leave up to 64 KiB per
     * connection behind; bench/idle.sh). Bodies in one read never use it. */
    jrpc_buf_dispose(&c->body);
    if (rc < 0) {   /* -ENOMEM: the broker could not take it */
        JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=refused status=500 reason=\"out of memory\"");
        rec_error(c, r, 500, JRPC_INTERNAL_ERROR, "out of memory");
        flush(c);
    }
}

/* Hands bytes p[0..n) of one read to the reader and acts on its verdicts.
 * Returns how many were consumed: fewer than n when reading stopped
 * (backpressure, or nothing more to read). */
static size_t feed(conn_t *c, const char *p, size_t n)
{
    size_t done = 0;
    c->feeding = true;
    while (!c->no_more && !c->closed && !c->finishing) {
        if (c->bp) {
            if (!pipeline_low(c))
                break;
            c->bp = false;
        }
        jrpc_http_event_t ev;
        done += jrpc_http_reader_feed(&c->rd, p + done, n - done, &ev);
        if (ev.kind == JRPC_HTTP_NEED_MORE) {
            /* A request has begun: its head is due within the header timeout. */
            if (c->phase == PH_IDLE && jrpc_http_reader_phase(&c->rd) == JRPC_HTTP_IN_HEAD) {
                c->phase = PH_HEADERS;
                arm(c, T_HEADERS);
            }
            break;
        }
        switch (ev.kind) {
        case JRPC_HTTP_HEAD:
            c->in_hand = n - done;
            headers_done(c);
            if (c->upgrading) { /* the rest is the WebSocket's, never HTTP */
                ws_rest(c, p + done, n - done);
                done = n;
                goto out;
            }
            break;
        case JRPC_HTTP_BODY:
            body_bytes(c, ev.data, ev.len);
            if (!ev.end || c->closed)
                break;
            /* the body's last bytes end the request (jrpc_http_reader_fuse_end) */
            /* fall through */
        case JRPC_HTTP_END:
            message_done(c);
            if (pipeline_full(c))
                c->bp = true;
            if (done == n)
                goto out; /* (the next call would say NEED_MORE, idle) */
            break;
        case JRPC_HTTP_REFUSE:
            refuse_close(c, ev.status, JRPC_INVALID_REQUEST, ev.reason);
            break;
        default: /* CLOSED: message_done has stopped reading already */
            c->no_more = true;
            break;
        }
    }
out:
    /* The read buffer is about to be reused: keep a partial body. */
    if (c->zc != NULL && !c->closed) {
        if (jrpc_buf_append(&c->body, c->zc, c->zc_len) < 0)
            conn_close(c);
        c->zc = NULL;
        c->zc_len = 0;
    }
    c->feeding = false;
    if (c->no_more || c->closed || c->finishing)
        return n; /* nothing more will be parsed: drop the rest */
    return done;
}

/* Parses what backpressure left unparsed, then reads again. */
void feed_pending(conn_t *c)
{
    if (c->in.len > 0) {
        size_t k = feed(c, c->in.p, c->in.len);
        if (c->closed)
            return;
        memmove(c->in.p, c->in.p + k, c->in.len - k);
        c->in.len -= k;
    }
    if (c->bp && pipeline_low(c) && c->in.len == 0)
        c->bp = false;
    if (!c->bp && !c->no_more && !c->finishing) {
        if (c->in.len == 0) /* nothing held while reading again, nor while idle */
            jrpc_buf_dispose(&c->in);
        read_start(c);
    }
}

/* Plaintext bytes of the client (a read, or records TLS decrypted). */
void plain_in(conn_t *c, const char *p, size_t n)
{
    if (c->finishing || c->no_more)
        return; /* lingering, or past an answer that closes: drop */
    if (c->upgrading) {   /* a WebSocket (or one waiting for its authentication) */
        ws_rest(c, p, n);
        return;
    }
    /* Bytes wait behind bytes already held (TLS hands over every record of
     * one read, also after backpressure stopped reading). */
    if (c->in.len == 0) {
        size_t k = feed(c, p, n);
        if (c->closed || k == n)
            return;
        p += k;
        n -= k;
    }
    /* Backpressure: keep the rest and stop reading until answers flush. */
    if (jrpc_buf_append(&c->in, p, n) < 0) {
        conn_close(c);
        return;
    }
    read_stop(c);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    conn_t *c = s->data;
    if (nread == 0)
        return;
    if (nread < 0) {
        /* EOF or reset: the client is gone; cancel what it asked for. */
        if (!c->finishing && c->nreq > 0)
            JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=client_gone pending=%u error=%s", c->nreq,
                     uv_err_name((int)nread));
        conn_close(c);
        return;
    }
    if (c->tls)
        tls_in(c, buf->base, (size_t)nread);
    else
        plain_in(c, buf->base, (size_t)nread);
}

/* ---- accepting ---------------------------------------------------------- */

/* The client's address as text, once per connection (the access log), and
 * whether it is a --trusted-proxy. */
static void peer_name(conn_t *c)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    char ip[INET6_ADDRSTRLEN];
    c->peer_len = 0;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) < 0)
        return;
    int n;
    if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        if (uv_ip6_name(a, ip, sizeof ip) < 0)
            return;
        n = snprintf(c->peer, sizeof c->peer, "[%s]:%u", ip, ntohs(a->sin6_port));
    } else if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        if (uv_ip4_name(a, ip, sizeof ip) < 0)
            return;
        n = snprintf(c->peer, sizeof c->peer, "%s:%u", ip, ntohs(a->sin_port));
    } else {
        return;
    }
    if (n > 0 && (size_t)n < sizeof c->peer)
        c->peer_len = (uint8_t)n;
    jrpc_proxy_addr_t a;
    c->peer_trusted = c->front->opts.ntrusted_proxies > 0 &&
                      jrpc_proxy_addr_parse(ip, strlen(ip), &a) == 0 &&
                      jrpc_proxy_trusted(c->front->opts.trusted_proxies,
                                         c->front->opts.ntrusted_proxies, &a);
}

static void on_connection(uv_stream_t *server, int status)
{
    jrpc_front_http_t *f = server->data;
    if (status < 0) {
        /* libuv has already made room (its reserved fd, EMFILE) and closed
         * the pending connections; warn at most once a second. */
        uint64_t now = uv_now(f->loop);
        if (now - f->last_warn >= 1000) {
            f->last_warn = now;
            JRPC_LOG(JRPC_LOG_WARN, COMP, "event=accept_failed error=%s", uv_err_name(status));
        }
        return;
    }
    conn_t *c = NULL;
    if (f->nconns >= f->opts.max_conns || f->paused || (c = calloc(1, sizeof *c)) == NULL) {
        /* Past --max-conns: accept and close at once, so the client learns
         * now instead of waiting in the backlog. */
        jrpc_listen_refuse(server);
        if (f->refused++ % 1000 == 0)
            JRPC_LOG(JRPC_LOG_WARN, COMP, "event=conn_refused reason=max_conns max_conns=%u refused=%llu",
                     f->opts.max_conns, (unsigned long long)f->refused);
        return;
    }
    c->front = f;
    f->nalive++;
    uv_tcp_init(f->loop, &c->tcp);
    c->tcp.data = c;
    jrpc_http_reader_init(&c->rd, &(jrpc_http_limits_t){ f->opts.max_header_bytes,
                                                         f->opts.max_body });
    jrpc_http_reader_fuse_end(&c->rd);   /* feed() takes BODY's .end as its END */
    jrpc_buf_init(&c->body);
    jrpc_buf_init(&c->in);
    c->next = f->conns;
    if (f->conns)
        f->conns->prev = c;
    f->conns = c;
    f->nconns++;
    jrpc_metrics.http_connections++;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
        conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    peer_name(c);
    c->hold = jrpc_broker_hold_new(f->broker, on_hold_wake, c);
    if (f->opts.tls && (c->tls = jrpc_tls_new(f->opts.tls)) == NULL) {
        conn_close(c);
        return;
    }
    read_start(c);
    arm(c, c->tls ? T_HANDSHAKE : T_IDLE);
}

static void on_listener_closed(uv_handle_t *h)
{
    jrpc_front_http_t *f = h->data;
    f->listening = false;
    front_maybe_free(f);
}

jrpc_front_http_t *jrpc_front_http_new(uv_loop_t *loop, jrpc_broker_t *broker,
                                       const jrpc_front_http_opts_t *opts)
{
    /* Bound and listening before libuv sees it, so that a failure leaves
     * no handle behind (the broker then exits 1 at once). */
    int rc, fd = jrpc_listen_socket(opts->listen, COMP, "http", opts->reuseport);
    if (fd < 0)
        return NULL;
    jrpc_front_http_t *f = calloc(1, sizeof *f);
    if (f == NULL) {
        close(fd);
        return NULL;
    }
    f->loop = loop;
    f->broker = broker;
    f->opts = *opts;
    f->ok.content_type = "application/json";
    f->mcp_path_len = opts->mcp_path ? strlen(opts->mcp_path) : 0;
    if (opts->tls && (f->pbuf = malloc(READ_BUF)) == NULL) {
        close(fd);
        free(f);
        return NULL;
    }
    jrpc_buf_init(&f->err);
    uv_tcp_init(loop, &f->listener);
    f->listener.data = f;
    f->listening = true;
    uv_timer_init(loop, &f->tick);
    f->tick.data = f;
    uv_check_init(loop, &f->flushq);
    f->flushq.data = f;
    uv_timer_init(loop, &f->ping);
    f->ping.data = f;
    f->nhandles = 3;
    if ((rc = uv_tcp_open(&f->listener, fd)) < 0 ||
        (rc = uv_listen((uv_stream_t *)&f->listener, 1024, on_connection)) < 0) {
        JRPC_LOG(JRPC_LOG_ERROR, COMP, "event=listen_failed endpoint=http://%s error=\"%s\"",
                 opts->listen, uv_strerror(rc));
        f->destroying = true;
        f->paused = true;
        uv_close((uv_handle_t *)&f->listener, on_listener_closed);
        return NULL; /* freed by the close callback */
    }
    jrpc_listen_log(&f->listener, COMP, opts->tls ? "https" : "http");
    if (f->opts.mcp_path != NULL) {   /* the sessions' GET streams are here */
        jrpc_broker_on_session_message(broker, mcp_on_session, f);
        jrpc_broker_on_session_probe(broker, mcp_on_probe, f);
    }
    return f;
}


void jrpc_front_http_set_tls(jrpc_front_http_t *f, jrpc_tls_ctx_t *tls)
{
    if (f->opts.tls && tls)
        f->opts.tls = tls;
}

void jrpc_front_http_keys_changed(jrpc_front_http_t *f)
{
    if (f == NULL)
        return;
    conn_t *next;
    for (conn_t *c = f->conns; c != NULL; c = next) {
        next = c->next;
        if (c->ws)
            jrpc_front_ws_keys_changed(c->ws);
    }
}

void jrpc_front_http_pause(jrpc_front_http_t *f)
{
    if (f == NULL || f->paused)
        return;
    f->paused = true;
    uv_close((uv_handle_t *)&f->listener, on_listener_closed);
    JRPC_LOG(JRPC_LOG_INFO, COMP, "event=pausing conns=%u", f->nconns);
    conn_t *next;
    for (conn_t *c = f->conns; c != NULL; c = next) {
        next = c->next;
        if (c->ws) {   /* 1001 once the answers in flight are written */
            c->closing = true;
            jrpc_front_ws_drain(c->ws);
            continue;
        }
        if (c->upgrading) {   /* still authenticating: not switched now */
            conn_close(c);
            continue;
        }
        /* A request still being received will not be submitted. */
        if (c->tail && c->tail->state == R_PARSING) {
            req_t *last = c->tail, *prev = NULL;
            for (req_t *x = c->head; x != last; x = x->next)
                prev = x;
            if (prev) {
                prev->next = NULL;
                c->tail = prev;
            } else {
                c->head = c->tail = NULL;
            }
            c->nreq--;
            rec_free(f, last);
        }
        c->no_more = true;
        c->closing = true;
        read_stop(c);
        jrpc_buf_reset(&c->in);
        if (c->phase != PH_IDLE)
            disarm_read(c);
        c->phase = PH_IDLE;
        if (c->head == NULL && !c->writing)
            conn_close(c);
        else if (c->finishing) {
            /* already on its way out */
        } else if (!c->writing) {
            flush(c);
        }
    }
}

void jrpc_front_http_destroy(jrpc_front_http_t **self_p)
{
    jrpc_front_http_t *f = *self_p;
    if (f == NULL)
        return;
    *self_p = NULL;
    if (f->opts.mcp_path != NULL) {
        jrpc_broker_on_session_message(f->broker, NULL, NULL);
        jrpc_broker_on_session_probe(f->broker, NULL, NULL);
    }
    jrpc_front_http_pause(f);
    f->destroying = true;
    front_maybe_free(f); /* or by the last close callback */
}
