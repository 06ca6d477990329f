/* jrpc_worker — the worker side of the broker⇄worker protocol. This file
 * is a conn's protocol: its socket, the calls read from it and their
 * answers, the hot path kept whole. Beside it, over the state in
 * jrpc_worker_int.h: heartbeats and liveness (jrpc_worker_tick.c), brokers
 * found by name (jrpc_worker_names.c), and the worker's life from
 * jrpc_worker_new() to jrpc_worker_destroy() (jrpc_worker_life.c).
 *
 * One conn per broker endpoint. A conn owns at most one DEALER at a time;
 * a "reset" (DISCONNECT from the broker, or the broker silent for
 * liveness × heartbeat) throws the socket away and opens a fresh one, which
 * the broker sees as a new worker, then sends READY again. Calls remember
 * the generation of the socket they came on: an answer completed after a
 * reset belongs to a broker session that no longer exists and is dropped.
 *
 * A REQUEST the conn cannot decode is counted like the others and answered
 * with REJECT naming its number in the session; an item that decodes only
 * as far as its seq is answered -32603 (PROTOCOL.md 2.5). Either way the
 * broker gets its credit back.
 *
 * Answers are gathered per conn into one RESPONSE and flushed when the loop
 * turn that completed them ends (an idle handle), at the end of each read
 * burst, or when the buffer grows large. */
#include "jrpc_worker_int.h"

#include <assert.h>
#include <errno.h>
#include <zmq.h>

#include "jrpc_errors.h"
#include "jrpc_json.h"
#include "jrpc_log.h"
#include "jrpc_mpack.h"
#include "jrpc_zdealer.h"

#define READ_BURST      64          /* frames read per callback before yielding */
#define FLUSH_BYTES     (256 << 10) /* flush a RESPONSE at once beyond this size */
#define RECONNECT_IVL   100         /* ZMQ_RECONNECT_IVL, ms */
#define RECONNECT_MAX   1000        /* ZMQ_RECONNECT_IVL_MAX, ms */
#define FREE_CALLS_MAX  1024        /* finished calls kept for reuse */
#define MAX_FRAME       (1ull << 30) /* a larger frame from a broker ends the session (native) */

/* ---- sockets ---- */

static int conn_send(conn_t *c, const char *p, size_t n)
{
    if (c->sock == NULL)
        return -ENOTCONN;
    if (c->native) {
        int rc = jrpc_zdealer_send(c->sock, p, n);
        if (rc < 0)
            return rc;   /* -ENOTCONN: the session is lost, on_zd_down resets it */
        c->last_send = uv_now(c->w->loop);
        return 0;
    }
    if (zmq_send(c->sock, p, n, ZMQ_DONTWAIT) < 0) {
        int rc = -errno;
        JRPC_LOG(JRPC_LOG_WARN, "worker", "event=send_failed endpoint=%s bytes=%zu err=\"%s\"",
                 c->endpoint, n, zmq_strerror(-rc));
        return rc;
    }
    c->last_send = uv_now(c->w->loop);
    /* The send may have consumed the ZMQ_FD edge. */
    jrpc_zwatch_kick(c->zw);
    return 0;
}

int jrpc_worker_conn_send_bare(conn_t *c, int type)
{
    jrpc_buf_t *b = &c->w->tmp;
    jrpc_buf_reset(b);
    int rc = type == JRPC_WIRE_HEARTBEAT ? jrpc_wire_put_heartbeat(b) : jrpc_wire_put_disconnect(b);
    if (rc < 0)
        return rc;
    return conn_send(c, b->p, b->len);
}

static int conn_send_ready(conn_t *c)
{
    jrpc_worker_t *w = c->w;
    int rc = -ENOMEM;
    /* One array: the methods, then the idempotent ones among them, then
     * those that take JSON. */
    const char **names = malloc(3 * w->nhandlers * sizeof *names);
    if (names == NULL)
        goto out;
    jrpc_wire_ready_opts_t ro = { .idempotent = names + w->nhandlers,
                                  .json = names + 2 * w->nhandlers,
                                  .name = w->name[0] ? w->name : NULL,
                                  .instance = w->instance[0] ? w->instance : NULL,
                                  .service = w->service[0] ? w->service : NULL,
                                  .schemas = w->schemas,
                                  .probes = w->on_probe != NULL };
    for (size_t i = 0; i < w->nhandlers; i++) {
        names[i] = w->handlers[i].name;
        if (w->handlers[i].flags & JRPC_WORKER_IDEMPOTENT)
            names[w->nhandlers + ro.nidempotent++] = w->handlers[i].name;
        if (w->handlers[i].jfn != NULL)
            names[2 * w->nhandlers + ro.njson++] = w->handlers[i].name;
    }
    jrpc_buf_reset(&w->tmp);
    if ((rc = jrpc_wire_put_ready_opts(&w->tmp, w->opts.credit, names, w->nhandlers, &ro)) < 0)
        goto out;
    rc = conn_send(c, w->tmp.p, w->tmp.len);
out:
    free(names);
    return rc;
}

static void on_sock_closed(jrpc_zwatch_t *zw)
{
    conn_t *c = zw->data;
    zmq_close(zw->sock);
    c->zclosing--;
    c->w->nclosing--;
    free(zw);
}

/* Throws the socket away. linger: how long ZeroMQ may keep trying to
 * deliver what was sent (0 on resets: the old session is dead anyway). */
void jrpc_worker_conn_close(conn_t *c, int linger)
{
    if (c->sock == NULL)
        return;
    jrpc_worker_conn_flush(c);
    c->w->nclosing++;
    c->zclosing++;
    if (c->native)
        jrpc_zdealer_close(c->sock, (uint32_t)linger);   /* on_zd_closed */
    else {
        zmq_setsockopt(c->sock, ZMQ_LINGER, &linger, sizeof linger);
        jrpc_zwatch_stop(c->zw, on_sock_closed);
    }
    c->sock = NULL;
    c->zw = NULL;
    jrpc_buf_reset(&c->out);
    c->nout = 0;
    c->inflight = 0;
}

static int on_readable(jrpc_zwatch_t *zw, void *sock);
static const jrpc_zdealer_cbs_t zd_cbs;

/* Opens a fresh DEALER to c->endpoint and queues READY on it: our own ZMTP
 * (jrpc_zdealer) when it serves the endpoint, else libzmq's. */
int jrpc_worker_conn_open(conn_t *c)
{
    jrpc_worker_t *w = c->w;
    int rc;
    jrpc_zwatch_t *zw = NULL;
    void *sock = NULL;
    bool native = w->native && jrpc_zdealer_supports(c->endpoint);
    if (native) {
        const jrpc_zdealer_opts_t zo = { .ivl_ms = RECONNECT_IVL, .ivl_max_ms = RECONNECT_MAX,
                                         .max_frame = MAX_FRAME };
        jrpc_zdealer_t *d;
        if ((rc = jrpc_zdealer_new(w->loop, c->endpoint, &zo, &zd_cbs, c, &d)) < 0)
            return rc;
        sock = d;
        goto opened;
    }
    sock = zmq_socket(w->zctx, ZMQ_DEALER);
    if (sock == NULL)
        return -errno;
    int linger = 0, ivl = RECONNECT_IVL, ivl_max = RECONNECT_MAX;
    int ipv6 = strchr(c->endpoint, '[') != NULL; /* libzmq connects to IPv6 only when told */
    if (zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger) != 0 ||
        (ipv6 && zmq_setsockopt(sock, ZMQ_IPV6, &ipv6, sizeof ipv6) != 0) ||
        zmq_setsockopt(sock, ZMQ_RECONNECT_IVL, &ivl, sizeof ivl) != 0 ||
        zmq_setsockopt(sock, ZMQ_RECONNECT_IVL_MAX, &ivl_max, sizeof ivl_max) != 0 ||
        (w->curve && jrpc_curve_client(sock, &w->curve_kp, w->broker_public) != 0) ||
        zmq_connect(sock, c->endpoint) != 0) {
        rc = -errno;
        goto out;
    }
    rc = -ENOMEM;
    if ((zw = calloc(1, sizeof *zw)) == NULL)
        goto out;
    if ((rc = jrpc_zwatch_start(w->loop, zw, sock, on_readable, c)) < 0)
        goto out;
opened:;
    uint64_t now = uv_now(w->loop);
    c->sock = sock;
    c->native = native;
    c->zw = zw;
    c->gen++;
    c->last_recv = c->last_send = c->last_reset = now;
    c->alive = false;
    c->reset_due = false;
    c->inflight = 0;
    c->hb_ms = w->opts.heartbeat_ms;    /* a new session: the broker has not spoken yet */
    c->liveness = w->opts.liveness;
    c->requests = 0;
    jrpc_worker_tick_update(w);
    jrpc_buf_reset(&c->out);
    c->nout = 0;
    JRPC_LOG(JRPC_LOG_DEBUG, "worker", "event=socket_open endpoint=%s gen=%llu", c->endpoint,
             (unsigned long long)c->gen);
    /* READY is queued even before the TCP connection is up. */
    conn_send_ready(c);
    return 0;
out:
    /* jrpc_zwatch_start() fails before initialising any handle, so zw can
     * be freed at once. */
    free(zw);
    zmq_close(sock);
    return rc;
}

void jrpc_worker_conn_reset(conn_t *c, const char *why)
{
    if (c->w->stopping)
        return;
    if (c->retiring) { /* its address left the name: this session was its last */
        JRPC_LOG(c->inflight ? JRPC_LOG_WARN : JRPC_LOG_INFO, "worker",
                 "event=retired_conn_lost endpoint=%s reason=%s inflight=%u", c->endpoint, why,
                 c->inflight);
        jrpc_worker_conn_close(c, 0);
        jrpc_worker_drain_check(c->w);
        return;
    }
    if (c->w->paused) { /* no new session until resumed */
        jrpc_worker_conn_close(c, 0);
        return;
    }
    if (c->w->draining) { /* no new session while leaving: the calls are lost */
        JRPC_LOG(JRPC_LOG_WARN, "worker", "event=drain_conn_lost endpoint=%s reason=%s inflight=%u",
                 c->endpoint, why, c->inflight);
        jrpc_worker_conn_close(c, 0);
        jrpc_worker_drain_check(c->w);
        return;
    }
    jrpc_worker_conn_close(c, 0);
    int rc = jrpc_worker_conn_open(c);
    if (rc < 0)
        JRPC_LOG(JRPC_LOG_ERROR, "worker", "event=reconnect_failed endpoint=%s reason=%s err=\"%s\"",
                 c->endpoint, why, zmq_strerror(-rc));
    else
        JRPC_LOG(JRPC_LOG_DEBUG, "worker", "event=reconnect endpoint=%s reason=%s gen=%llu",
                 c->endpoint, why, (unsigned long long)c->gen);
}

/* ---- answers ---- */

void jrpc_worker_conn_flush(conn_t *c)
{
    if (c->nout == 0)
        return;
    jrpc_wire_put_response_end(&c->out, c->nout);
    conn_send(c, c->out.p, c->out.len);
    jrpc_buf_reset(&c->out);
    c->nout = 0;
}

static void on_flush_idle(uv_idle_t *h)
{
    jrpc_worker_t *w = h->data;
    uv_idle_stop(h);
    for (size_t i = 0; i < w->nconns; i++)
        jrpc_worker_conn_flush(w->conns[i]);
}

/* Appends the answer of call wc to its conn's RESPONSE. is_error: code and
 * message; else the packed result (nil when empty). */
static int conn_answer(conn_t *c, jrpc_wcall_t *wc, bool is_error, int code, const char *message)
{
    size_t len0 = c->out.len;
    int rc;
    if (c->nout == 0 && (rc = jrpc_wire_put_response_begin(&c->out)) < 0)
        goto fail;
    if (is_error) {
        /* with_data: the error's "data" is what was packed into the result */
        jrpc_span_t data = { NULL, 0 };
        if (wc->error_data)
            data = (jrpc_span_t){ wc->result.p, wc->result.len };
        rc = wc->result_json ? jrpc_wire_put_error_json(&c->out, wc->seq, code, message, data)
                             : jrpc_wire_put_error(&c->out, wc->seq, code, message, data);
    } else if (wc->result_json) {
        rc = jrpc_wire_put_result_json(&c->out, wc->seq,
                                       (jrpc_span_t){ wc->result.p, wc->result.len });
    } else {
        rc = jrpc_wire_put_result_head(&c->out, wc->seq);
        if (rc == 0 && wc->result.len == 0)
            rc = jrpc_buf_putc(&c->out, (char)0xc0); /* nil */
        else if (rc == 0)
            rc = jrpc_buf_append(&c->out, wc->result.p, wc->result.len);
    }
    if (rc < 0)
        goto fail;
    c->nout++;
    if (c->out.len >= FLUSH_BYTES)
        jrpc_worker_conn_flush(c);
    else
        uv_idle_start(&c->w->flush_idle, on_flush_idle);
    return 0;
fail:
    c->out.len = len0;
    return rc;
}

/* Answers seq with an error without a call object: for an item that could
 * not be decoded (or not be given a call), so that its credit comes back. */
static int conn_answer_seq_error(conn_t *c, jrpc_seq_t seq, int code)
{
    size_t len0 = c->out.len;
    int rc;
    if (c->nout == 0 && (rc = jrpc_wire_put_response_begin(&c->out)) < 0)
        goto fail;
    if ((rc = jrpc_wire_put_error(&c->out, seq, code, jrpc_error_message(code),
                                  (jrpc_span_t){ NULL, 0 })) < 0)
        goto fail;
    c->nout++;
    c->w->answered++;
    uv_idle_start(&c->w->flush_idle, on_flush_idle);
    return 0;
fail:
    c->out.len = len0;
    return rc;
}

/* REJECT: the request-th REQUEST of this session could not be decoded, and
 * none of its calls will run; the broker answers them and frees the credit. */
static void conn_reject(conn_t *c, uint64_t request, size_t bytes, const char *why)
{
    jrpc_buf_t *b = &c->w->tmp;
    jrpc_buf_reset(b);
    JRPC_LOG(JRPC_LOG_WARN, "worker", "event=request_rejected endpoint=%s request=%llu bytes=%zu err=\"%s\"",
             c->endpoint, (unsigned long long)request, bytes, why);
    if (jrpc_wire_put_reject(b, request) == 0)
        conn_send(c, b->p, b->len);
}

/* ---- calls ---- */

static jrpc_wcall_t *call_new(jrpc_worker_t *w)
{
    jrpc_wcall_t *wc = w->free_calls;
    if (wc != NULL) {
        w->free_calls = wc->next;
        w->nfree--;
        jrpc_buf_reset(&wc->result);
    } else {
        if ((wc = malloc(sizeof *wc)) == NULL)
            return NULL;
        jrpc_buf_init(&wc->result);
    }
    wc->w = w;
    wc->error_data = false;
    wc->json = false;
    wc->result_json = false;
    jrpc_mpack_packer_init(&wc->pk, &wc->result);
    wc->prev = NULL;
    wc->next = w->calls;
    if (w->calls)
        w->calls->prev = wc;
    w->calls = wc;
    return wc;
}

static void call_free(jrpc_wcall_t *wc)
{
    jrpc_worker_t *w = wc->w;
    wc->conn->refs--;
    if (wc->prev)
        wc->prev->next = wc->next;
    else
        w->calls = wc->next;
    if (wc->next)
        wc->next->prev = wc->prev;
    if (w->nfree < FREE_CALLS_MAX && wc->result.cap <= 64 * 1024) {
        wc->next = w->free_calls;
        w->free_calls = wc;
        w->nfree++;
    } else {
        jrpc_buf_dispose(&wc->result);
        free(wc);
    }
}

/* The call's one line, when it ends: debug, or info for a traced call the
 * caller samples (W3C sampled flag): at a million calls a second a line per
 * call would cost more than the calls, while sampled traces are the ones a
 * tracing system keeps (see docs/ARCHITECTURE.md, "Tracing"). */
static void call_log(const jrpc_wcall_t *wc, const char *outcome, int code)
{
    JRPC_LOG(wc->log_level, "worker",
             "event=call endpoint=%s seq=%llu method=%s outcome=%s code=%d time_us=%llu "
             "traceparent=%s",
             wc->conn->endpoint, (unsigned long long)wc->seq, wc->method[0] ? wc->method : "-",
             outcome, code, (unsigned long long)((uv_hrtime() - wc->t0) / 1000),
             jrpc_wcall_traceparent(wc) ? jrpc_wcall_traceparent(wc) : "-");
}

static int call_complete(jrpc_wcall_t *wc, bool is_error, int code, const char *message)
{
    conn_t *c = wc->conn;
    int rc = 0;
    bool stale = wc->w->stopping || c->sock == NULL || c->gen != wc->gen;
    call_log(wc, stale ? "dropped" : is_error ? "error" : "result", is_error ? code : 0);
    if (stale) {
        JRPC_LOG(JRPC_LOG_DEBUG, "worker", "event=answer_dropped reason=stale endpoint=%s seq=%llu",
                 c->endpoint, (unsigned long long)wc->seq);
    } else {
        c->inflight--;
        rc = conn_answer(c, wc, is_error, code, message);
        if (rc == 0)
            wc->w->answered++;
        if (rc < 0)
            JRPC_LOG(JRPC_LOG_ERROR, "worker", "event=answer_lost endpoint=%s seq=%llu err=nomem",
                     c->endpoint, (unsigned long long)wc->seq);
    }
    jrpc_worker_t *w = wc->w;
    call_free(wc);
    jrpc_worker_drain_check(w);
    return rc;
}

const char *jrpc_wcall_method(const jrpc_wcall_t *c)
{
    return c->method;
}

bool jrpc_wcall_messages(const jrpc_wcall_t *c)
{
    return c->messages;
}

const char *jrpc_wcall_session(const jrpc_wcall_t *c)
{
    return c->session;
}

/* One MESSAGE on conn c; session NULL or "": nil. */
static int conn_send_message(conn_t *c, jrpc_seq_t seq, const char *session, const char *json,
                             size_t n)
{
    jrpc_worker_t *w = c->w;
    if (json != NULL && n > JRPC_WIRE_MESSAGE_MAX)
        return -E2BIG;
    size_t sn = session ? strlen(session) : 0;
    if (sn > JRPC_WIRE_SESSION_MAX || (sn == 0 && json == NULL))
        return -EINVAL;
    for (size_t i = 0; i < sn; i++)
        if (session[i] < 0x21 || session[i] > 0x7e)
            return -EINVAL;
    jrpc_span_t sid = { session, sn }, body = { json ? json : NULL, n };
    jrpc_buf_reset(&w->tmp);
    int rc = jrpc_wire_put_message(&w->tmp, seq, sid, body);
    return rc < 0 ? rc : conn_send(c, w->tmp.p, w->tmp.len);
}

int jrpc_wcall_message(jrpc_wcall_t *c, const char *session, const char *json, size_t n)
{
    if (!c->messages)
        return -EPERM;
    if (c->conn->sock == NULL || c->conn->gen != c->gen)
        return -ENOTCONN;
    return conn_send_message(c->conn, c->seq, session, json, n);
}

int jrpc_worker_message(jrpc_worker_t *w, const char *session, const char *json, size_t n)
{
    int sent = 0;
    for (size_t i = 0; i < w->nconns; i++)
        if (w->conns[i]->sock != NULL && conn_send_message(w->conns[i], 0, session, json, n) == 0)
            sent++;
    return sent;
}

int jrpc_worker_probes(jrpc_worker_t *w, jrpc_probe_answer_fn fn, void *arg)
{
    if (w->instance[0] == '\0')
        return -EINVAL;
    w->on_probe = fn;
    w->on_probe_arg = arg;
    return 0;
}

int jrpc_worker_set_schemas(jrpc_worker_t *w, const char *schemas)
{
    size_t n = schemas ? strlen(schemas) : 0;
    if (n > JRPC_WIRE_SCHEMAS_MAX)
        return -E2BIG;
    char *copy = schemas ? strdup(schemas) : NULL;
    if (schemas && copy == NULL)
        return -ENOMEM;
    free(w->schemas);
    w->schemas = copy;
    int sent = 0;
    for (size_t i = 0; i < w->nconns; i++) {
        conn_t *c = w->conns[i];
        if (c->sock == NULL)
            continue;
        jrpc_buf_reset(&w->tmp);
        if (jrpc_wire_put_schemas(&w->tmp, copy ? copy : "{}", copy ? n : 2) == 0 &&
            conn_send(c, w->tmp.p, w->tmp.len) == 0)
            sent++;
    }
    return sent;
}

int jrpc_worker_messages(jrpc_worker_t *w, const char *instance, jrpc_message_fn fn, void *arg)
{
    uint64_t v;
    if (instance == NULL || jrpc_mcp_instance_parse(instance, strlen(instance), &v) < 0)
        return -EINVAL;
    memcpy(w->instance, instance, JRPC_MCP_INSTANCE_LEN + 1);
    w->on_message = fn;
    w->on_message_arg = arg;
    return 0;
}

const char *jrpc_wcall_traceparent(const jrpc_wcall_t *c)
{
    return c->tp_len ? c->tp : NULL;
}

uint64_t jrpc_wcall_deadline(const jrpc_wcall_t *c)
{
    return c->deadline;
}

msgpack_packer *jrpc_wcall_result(jrpc_wcall_t *c)
{
    return &c->pk;
}

int jrpc_wcall_finish(jrpc_wcall_t *c)
{
    return call_complete(c, false, 0, NULL);
}

int jrpc_wcall_error(jrpc_wcall_t *c, int code, const char *message)
{
    assert(message != NULL);
    return call_complete(c, true, code, message);
}

int jrpc_wcall_error_data(jrpc_wcall_t *c, int code, const char *message)
{
    assert(message != NULL);
    c->error_data = c->result.len > 0;
    return call_complete(c, true, code, message);
}

/* The answer given as JSON text: sent as it is when the call came as JSON
 * (the broker reads it), else transcoded to msgpack. */
static int complete_json(jrpc_wcall_t *c, bool is_error, int code, const char *message,
                         const char *json, size_t n)
{
    jrpc_buf_reset(&c->result);
    c->result_json = false;
    c->error_data = false;
    if (n == 0 && !is_error) {
        json = "null";
        n = 4;
    }
    if (n > 0) {
        int rc = c->json ? jrpc_buf_append(&c->result, json, n)
                         : jrpc_json_to_msgpack(json, n, JRPC_WIRE_MAX_DEPTH, &c->result);
        if (rc < 0) {
            JRPC_LOG(JRPC_LOG_WARN, "worker", "event=answer_refused endpoint=%s seq=%llu err=\"%s\"",
                     c->conn->endpoint, (unsigned long long)c->seq, jrpc_json_strerror(rc));
            jrpc_buf_reset(&c->result);
            return call_complete(c, true, JRPC_INTERNAL_ERROR,
                                 jrpc_error_message(JRPC_INTERNAL_ERROR));
        }
        c->result_json = c->json;
        c->error_data = is_error;
    }
    return call_complete(c, is_error, code, message);
}

int jrpc_wcall_finish_json(jrpc_wcall_t *c, const char *json, size_t n)
{
    assert(json != NULL || n == 0);
    return complete_json(c, false, 0, NULL, json, n);
}

int jrpc_wcall_error_json(jrpc_wcall_t *c, int code, const char *message, const char *data,
                          size_t n)
{
    assert(message != NULL && (data != NULL || n == 0));
    return complete_json(c, true, code, message, data, n);
}

/* ---- reading ---- */

static void dispatch(conn_t *c, const jrpc_wire_call_t *call)
{
    jrpc_worker_t *w = c->w;
    jrpc_wcall_t *wc = call_new(w);
    if (wc == NULL) {
        JRPC_LOG(JRPC_LOG_ERROR, "worker", "event=call_dropped endpoint=%s seq=%llu err=nomem",
                 c->endpoint, (unsigned long long)call->seq);
        conn_answer_seq_error(c, call->seq, JRPC_INTERNAL_ERROR);
        return;
    }
    uint64_t now = uv_now(w->loop);
    const handler_t *h = find_handler(w, call->method);
    wc->conn = c;
    c->refs++;
    wc->gen = c->gen;
    wc->seq = call->seq;
    wc->deadline = call->timeout_ms ? now + call->timeout_ms : UINT64_MAX;
    wc->method = h ? h->name : "";
    /* The decoder checked it (jrpc_traceparent_valid: at most
     * JRPC_TRACEPARENT_MAX bytes); it must outlive the frame. */
    wc->tp_len = (uint8_t)call->traceparent.n;
    memcpy(wc->tp, call->traceparent.p ? call->traceparent.p : "", call->traceparent.n);
    wc->tp[call->traceparent.n] = '\0';
    wc->messages = call->messages;
    memcpy(wc->session, call->session.p ? call->session.p : "", call->session.n);
    wc->session[call->session.n] = '\0';
    wc->log_level = wc->tp_len && jrpc_traceparent_sampled(wc->tp, wc->tp_len) ? JRPC_LOG_INFO
                                                                               : JRPC_LOG_DEBUG;
    if (wc->log_level >= jrpc_log_level)
        wc->t0 = uv_hrtime();
    if (++c->inflight > w->opts.credit)
        JRPC_LOG(JRPC_LOG_WARN, "worker", "event=credit_exceeded endpoint=%s inflight=%u credit=%u",
                 c->endpoint, c->inflight, w->opts.credit);
    if (h == NULL) {
        JRPC_LOG(JRPC_LOG_WARN, "worker", "event=unknown_method endpoint=%s seq=%llu method=%.*s",
                 c->endpoint, (unsigned long long)call->seq,
                 (int)(call->method.n > 64 ? 64 : call->method.n), call->method.p);
        jrpc_wcall_error(wc, JRPC_METHOD_NOT_FOUND, jrpc_error_message(JRPC_METHOD_NOT_FOUND));
        return;
    }
    wc->json = call->json;
    if (h->jfn == NULL) {
        if (call->json) {   /* a broker bug: we never declared it json */
            JRPC_LOG(JRPC_LOG_WARN, "worker", "event=call_refused endpoint=%s seq=%llu "
                     "err=\"json params for a msgpack method\"", c->endpoint,
                     (unsigned long long)call->seq);
            jrpc_wcall_error(wc, JRPC_INTERNAL_ERROR, jrpc_error_message(JRPC_INTERNAL_ERROR));
            return;
        }
        h->fn(wc, call->params, h->arg);
        return;
    }
    if (call->json) {
        h->jfn(wc, call->params_json.n ? call->params_json.p : NULL, call->params_json.n, h->arg);
        return;
    }
    if (call->params->type == MSGPACK_OBJECT_NIL) {
        h->jfn(wc, NULL, 0, h->arg);
        return;
    }
    /* An older broker sent msgpack: the same value as JSON text. */
    jrpc_buf_reset(&w->jparams);
    int rc = jrpc_json_write_msgpack(&w->jparams, call->params, JRPC_WIRE_MAX_DEPTH);
    if (rc < 0) {
        JRPC_LOG(JRPC_LOG_WARN, "worker", "event=call_refused endpoint=%s seq=%llu err=\"%s\"",
                 c->endpoint, (unsigned long long)call->seq, jrpc_json_strerror(rc));
        jrpc_wcall_error(wc, JRPC_INTERNAL_ERROR, jrpc_error_message(JRPC_INTERNAL_ERROR));
        return;
    }
    h->jfn(wc, w->jparams.p, w->jparams.len, h->arg);
}

static void handle_frame(conn_t *c, const char *p, size_t n)
{
    jrpc_worker_t *w = c->w;
    jrpc_wire_msg_t m;
    int rc = jrpc_wire_decode(p, n, &w->zone, &m);
    if (rc < 0) {
        /* A REQUEST we cannot read still holds credit at the broker: say so. */
        if (jrpc_wire_peek_type(p, n) == JRPC_WIRE_REQUEST) {
            if (!c->reset_due)
                conn_reject(c, ++c->requests, n, jrpc_wire_strerror(rc));
            return;
        }
        JRPC_LOG(rc == JRPC_WIRE_EVERSION ? JRPC_LOG_ERROR : JRPC_LOG_WARN, "worker",
                 "event=frame_dropped endpoint=%s bytes=%zu err=\"%s\"", c->endpoint, n,
                 jrpc_wire_strerror(rc));
        return;
    }
    if (!c->alive && m.type != JRPC_WIRE_DISCONNECT) {
        c->alive = true;
        JRPC_LOG(JRPC_LOG_INFO, "worker", "event=connected endpoint=%s credit=%u methods=%zu",
                 c->endpoint, w->opts.credit, w->nhandlers);
    }
    switch (m.type) {
    case JRPC_WIRE_REQUEST: {
        uint64_t request = ++c->requests;
        if (c->reset_due)
            break; /* the broker told us it does not know us */
        /* All or nothing when a seq is unreadable: REJECT frees every call
         * of the REQUEST at the broker, so none of them may run here. */
        jrpc_seq_t seq;
        for (uint32_t i = 0; i < m.nitems; i++) {
            if (jrpc_wire_request_item_seq(&m, i, &seq) < 0) {
                conn_reject(c, request, n, "an item without a seq");
                return;
            }
        }
        uint64_t gen = c->gen;
        for (uint32_t i = 0; i < m.nitems && c->gen == gen && c->sock != NULL && !w->stopping; i++) {
            jrpc_wire_call_t call;
            if ((rc = jrpc_wire_request_item(&m, i, &call)) < 0) {
                jrpc_wire_request_item_seq(&m, i, &seq);
                JRPC_LOG(JRPC_LOG_WARN, "worker", "event=call_refused endpoint=%s item=%u seq=%llu err=\"%s\"",
                         c->endpoint, i, (unsigned long long)seq, jrpc_wire_strerror(rc));
                conn_answer_seq_error(c, seq, JRPC_INTERNAL_ERROR);
                continue;
            }
            dispatch(c, &call);
        }
        break;
    }
    case JRPC_WIRE_HEARTBEAT:
        if (m.heartbeat_ms != 0)
            jrpc_worker_conn_adopt(c, m.heartbeat_ms, m.liveness);
        break;
    case JRPC_WIRE_DISCONNECT: {
        uint64_t now = uv_now(w->loop);
        JRPC_LOG(JRPC_LOG_INFO, "worker", "event=disconnect_received endpoint=%s", c->endpoint);
        if (c->rs != NULL) /* leaving for good, or restarting: the name will tell */
            jrpc_worker_resolver_start(c->rs);
        /* Reconnect at once, but not in a tight loop with a broker that keeps
         * refusing us: at most once per heartbeat interval. */
        if (w->draining || now - c->last_reset >= w->opts.heartbeat_ms)
            jrpc_worker_conn_reset(c, "disconnect");
        else
            c->reset_due = true;
        break;
    }
    case JRPC_WIRE_MESSAGE:
        if (w->on_message != NULL && m.session.n < JRPC_WIRE_SESSION_MAX + 1) {
            char sid[JRPC_WIRE_SESSION_MAX + 1];
            memcpy(sid, m.session.p ? m.session.p : "", m.session.n);
            sid[m.session.n] = '\0';
            w->on_message(sid, m.body.p, m.body.n, w->on_message_arg);
            break;
        }
        JRPC_LOG(JRPC_LOG_DEBUG, "worker", "event=message_dropped endpoint=%s", c->endpoint);
        break;
    case JRPC_WIRE_PROBE:   /* answered at once, on the connection that asked */
        if (w->on_probe != NULL && m.live < 0) {
            char sid[JRPC_WIRE_SESSION_MAX + 1];
            memcpy(sid, m.session.p, m.session.n);
            sid[m.session.n] = '\0';
            bool live = w->on_probe(sid, w->on_probe_arg);
            jrpc_buf_reset(&w->tmp);
            if (jrpc_wire_put_probe(&w->tmp, m.probe, m.session, live) == 0)
                (void)conn_send(c, w->tmp.p, w->tmp.len);
            break;
        }
        JRPC_LOG(JRPC_LOG_DEBUG, "worker", "event=probe_dropped endpoint=%s", c->endpoint);
        break;
    default:
        JRPC_LOG(JRPC_LOG_WARN, "worker", "event=frame_dropped endpoint=%s type=%d err=\"unexpected\"",
                 c->endpoint, m.type);
        break;
    }
}

static int on_readable(jrpc_zwatch_t *zw, void *sock)
{
    conn_t *c = zw->data;
    jrpc_worker_t *w = c->w;
    for (int i = 0; i < READ_BURST; i++) {
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, sock, ZMQ_DONTWAIT) < 0) {
            int err = errno;
            zmq_msg_close(&msg);
            if (err != EAGAIN)
                JRPC_LOG(JRPC_LOG_WARN, "worker", "event=recv_failed endpoint=%s err=\"%s\"",
                         c->endpoint, zmq_strerror(err));
            jrpc_worker_conn_flush(c);
            return 0;
        }
        c->last_recv = uv_now(w->loop);
        if (zmq_msg_more(&msg)) {
            /* Not ours: the protocol is one frame per message. */
            int parts = 1;
            do {
                zmq_msg_close(&msg);
                zmq_msg_init(&msg);
                if (zmq_msg_recv(&msg, sock, ZMQ_DONTWAIT) < 0)
                    break;
                parts++;
            } while (zmq_msg_more(&msg));
            zmq_msg_close(&msg);
            JRPC_LOG(JRPC_LOG_WARN, "worker", "event=frame_dropped endpoint=%s parts=%d err=\"multipart\"",
                     c->endpoint, parts);
            continue;
        }
        handle_frame(c, zmq_msg_data(&msg), zmq_msg_size(&msg));
        msgpack_zone_clear(&w->zone);
        zmq_msg_close(&msg);
        if (c->zw != zw)
            return 0; /* reset or stopped meanwhile: this socket is gone */
    }
    jrpc_worker_conn_flush(c);
    return 1;
}

/* The native engine's side of on_readable: one message, for the socket in
 * force (a closed one says nothing more). Answers go out at the end of the
 * loop turn (flush_idle). */
static void on_zd_message(jrpc_zdealer_t *d, const char *p, size_t n)
{
    conn_t *c = jrpc_zdealer_data(d);
    if (c->sock != d)
        return;
    c->last_recv = uv_now(c->w->loop);
    handle_frame(c, p, n);
    msgpack_zone_clear(&c->w->zone);
}

static void on_zd_multipart(jrpc_zdealer_t *d, int parts)
{
    conn_t *c = jrpc_zdealer_data(d);
    c->last_recv = uv_now(c->w->loop);
    JRPC_LOG(JRPC_LOG_WARN, "worker", "event=frame_dropped endpoint=%s parts=%d err=\"multipart\"",
             c->endpoint, parts);
}

/* The connection to the broker is lost: its session is over at once (with
 * libzmq it ended when the broker said DISCONNECT to the reconnected
 * socket, or went silent). */
static void on_zd_down(jrpc_zdealer_t *d, const char *why)
{
    conn_t *c = jrpc_zdealer_data(d);
    if (c->sock != d)
        return;
    JRPC_LOG(JRPC_LOG_INFO, "worker", "event=broker_connection_lost endpoint=%s reason=\"%s\" "
             "inflight=%u", c->endpoint, why, c->inflight);
    if (c->rs)
        jrpc_worker_resolver_start(c->rs);   /* as for a broker lost to silence */
    /* Not in a tight loop with a broker that takes the handshake and
     * drops the connection: a session shorter than a heartbeat interval is
     * closed, and the tick opens the next. */
    if (!c->retiring && !c->w->draining &&
        uv_now(c->w->loop) - c->last_reset < c->w->opts.heartbeat_ms)
        jrpc_worker_conn_close(c, 0);
    else
        jrpc_worker_conn_reset(c, "connection_lost");
}

static void on_zd_closed(jrpc_zdealer_t *d)
{
    conn_t *c = jrpc_zdealer_data(d);
    c->zclosing--;
    c->w->nclosing--;
}

static const jrpc_zdealer_cbs_t zd_cbs = {
    .on_message = on_zd_message,
    .on_multipart = on_zd_multipart,
    .on_down = on_zd_down,
    .on_closed = on_zd_closed,
};

/* ---- the end of a drain ---- */

static void on_drain_timer(uv_timer_t *t)
{
    jrpc_worker_drain_check(t->data);
}

/* Ends the drain when nothing is left to wait for; otherwise arms the
 * timer for the next moment that may end it. */
void jrpc_worker_drain_check(jrpc_worker_t *w)
{
    if (!w->draining || w->stopping)
        return;
    uint32_t held = 0;
    for (size_t i = 0; i < w->nconns; i++)
        if (w->conns[i]->sock != NULL)
            held += w->conns[i]->inflight;
    uint64_t now = uv_now(w->loop);
    const char *why = NULL;
    uint64_t latest = 0; /* the latest deadline of a live call */
    if (held == 0) {
        why = "done";
    } else if (now >= w->drain_until) {
        why = "timeout";
    } else if (!uv_is_active((uv_handle_t *)&w->drain_timer)) {
        /* Only when the timer is not armed (at the start, and when it fires):
         * a walk over the calls on every completion would be quadratic. */
        for (jrpc_wcall_t *wc = w->calls; wc; wc = wc->next)
            if (wc->conn->sock != NULL && wc->conn->gen == wc->gen && wc->deadline > latest)
                latest = wc->deadline;
        if (latest <= now)
            why = "deadlines_passed"; /* the broker answered them -32003 already */
        else
            uv_timer_start(&w->drain_timer, on_drain_timer,
                           (latest < w->drain_until ? latest : w->drain_until) - now, 0);
    }
    if (why == NULL)
        return;
    JRPC_LOG(held ? JRPC_LOG_WARN : JRPC_LOG_INFO, "worker",
             "event=drained reason=%s abandoned=%u answered=%llu", why, held,
             (unsigned long long)w->answered);
    jrpc_worker_stop(w);
}
