/* jrpc_worker — the worker side of the broker⇄worker protocol.
 *
 * One conn per broker endpoint. A conn owns at most one DEALER at a time;
 * a "reset" (DISCONNECT from the broker, or the broker silent for
 * liveness × heartbeat) throws the socket away and opens a fresh one, which
 * the broker sees as a new worker, then sends READY again. Calls remember
 * the generation of the socket they came on: an answer completed after a
 * reset belongs to a broker session that no longer exists and is dropped.
 *
 * Heartbeat settings are per conn: ours (opts) until the broker's first
 * HEARTBEAT carries its own, which rule that session from then on (the
 * broker sends them at once after READY; PROTOCOL.md 5). One tick serves
 * every conn, so it runs at the shortest interval in use.
 *
 * A REQUEST the conn cannot decode is counted like the others and answered
 * with REJECT naming its number in the session; an item that decodes only
 * as far as its seq is answered -32603 (PROTOCOL.md 2.5). Either way the
 * broker gets its credit back.
 *
 * Answers are gathered per conn into one RESPONSE and flushed when the loop
 * turn that completed them ends (an idle handle), at the end of each read
 * burst, or when the buffer grows large.
 *
 * Draining (jrpc_worker_drain): DISCONNECT goes out at once but the sockets
 * stay open; calls held, and any the broker sent before it read the
 * DISCONNECT, are served and answered; heartbeats go on so that the broker
 * does not take a long call for a dead worker. Nothing reconnects: a conn
 * whose broker is lost or says DISCONNECT is closed (its calls have nobody
 * to answer to). The worker stops once no live call is left, or when every
 * live call is past its deadline, or at the drain timeout.
 *
 * Brokers found by name (dns+tcp://NAME:PORT, issue 16): a resolver per
 * name runs uv_getaddrinfo (the libuv thread pool: the loop never waits on
 * DNS) at connect, every resolve_ms, and when one of its conns loses its
 * broker. jrpc_dns (pure) turns the answer into a set of endpoints and
 * compares it with the conns in force: an address that appears gets a conn
 * of its own, exactly like one given to jrpc_worker_connect(); one that
 * disappears is retired: DISCONNECT at once, then the conn is drained as a
 * whole worker would be (its calls are served and answered, heartbeats go
 * on) and closed when it holds none, or when its broker is lost. A retired
 * conn is never reopened, and freed only when no call object points at it
 * (refs): a call's answer must still find its endpoint and generation. */
#include "jrpc_worker.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "jrpc_dns.h"
#include "jrpc_errors.h"
#include "jrpc_json.h"
#include "jrpc_log.h"
#include "jrpc_mpack.h"
#include "jrpc_wire.h"
#include "jrpc_zdealer.h"
#include "jrpc_zwatch.h"

#define READ_BURST      64          /* frames read per callback before yielding */
#define FLUSH_BYTES     (256 << 10) /* flush a RESPONSE at once beyond this size */
#define RECONNECT_IVL   100         /* ZMQ_RECONNECT_IVL, ms */
#define RECONNECT_MAX   1000        /* ZMQ_RECONNECT_IVL_MAX, ms */
#define FREE_CALLS_MAX  1024        /* finished calls kept for reuse */
#define MAX_FRAME       (1ull << 30) /* a larger frame from a broker ends the session (native) */

typedef struct handler {
    char           *name;  /* method (owned, NUL-terminated) */
    size_t          len;   /* strlen(name) */
    jrpc_handler_fn fn;    /* msgpack params; NULL for a json handler */
    jrpc_json_handler_fn jfn; /* JSON params ("json" in READY); NULL for a msgpack one */
    void           *arg;   /* the caller's */
    unsigned        flags; /* JRPC_WORKER_* */
} handler_t;

typedef struct resolver resolver_t;

typedef struct conn {
    jrpc_worker_t *w;
    char          *endpoint;   /* owned */
    resolver_t    *rs;         /* the dns+tcp:// name it came from; NULL: given as is */
    bool           retiring;   /* its address left the name: DISCONNECT sent, never reopened */
    uint32_t       refs;       /* call objects pointing here (any generation) */
    uint32_t       zclosing;   /* its sockets whose watcher is still closing */
    void          *sock;       /* the current DEALER; NULL when none: a libzmq socket,
                                  or with `native` a jrpc_zdealer_t (our own ZMTP) */
    bool           native;     /* sock is a jrpc_zdealer_t */
    jrpc_zwatch_t *zw;         /* its watcher (heap; freed in on_sock_closed) */
    uint64_t       gen;        /* bumped per socket; calls of older ones are stale */
    uint64_t       last_recv;  /* uv_now() of the last frame from the broker */
    uint64_t       last_send;  /* uv_now() of the last frame to it */
    uint64_t       last_reset; /* uv_now() of the last socket (re)open */
    uint32_t       inflight;   /* calls of this generation not yet answered */
    bool           alive;      /* heard from the broker on this socket */
    bool           reset_due;  /* DISCONNECT came too soon after a reset: reset on tick */
    uint32_t       hb_ms;      /* this session's heartbeat interval: ours, or the broker's */
    uint32_t       liveness;   /* this session's silent intervals before the broker is dead */
    uint64_t       requests;   /* REQUEST frames received on this socket (REJECT names them) */
    jrpc_buf_t     out;        /* RESPONSE being gathered */
    uint32_t       nout;       /* answers in out */
} conn_t;

/* One dns+tcp:// name and the lookups of it. Freed at destroy, once no
 * lookup is running (its request is part of the struct). */
struct resolver {
    jrpc_worker_t    *w;
    char             *url;      /* as given (owned), for the logs */
    jrpc_dns_name_t   name;
    uv_timer_t        timer;    /* every opts.resolve_ms */
    uv_getaddrinfo_t  req;
    bool              busy;     /* req is running */
    bool              again;    /* asked for while busy: resolve once more after it */
    uint32_t          failures; /* lookups in a row with no address (warn at the first) */
};

struct jrpc_wcall {
    jrpc_worker_t  *w;
    conn_t         *conn;      /* where the answer goes */
    uint64_t        gen;       /* conn->gen when the call came */
    jrpc_seq_t      seq;       /* the broker's sequence number */
    uint64_t        deadline;  /* uv_now() ms, UINT64_MAX: none */
    const char     *method;    /* the handler's name, or "" */
    uint64_t        t0;        /* uv_hrtime() at dispatch, when the call's line is logged */
    int8_t          log_level; /* level of the call's line: info when traced and sampled */
    uint8_t         tp_len;    /* 0: no traceparent */
    char            tp[JRPC_TRACEPARENT_MAX + 1]; /* the call's W3C traceparent, NUL-terminated */
    jrpc_buf_t      result;    /* packed result (or error data, when error_data);
                                  JSON text instead when result_json */
    bool            error_data; /* jrpc_wcall_error_data(): result holds the error's data */
    bool            json;      /* its params came as JSON text: the broker reads JSON answers */
    bool            result_json; /* result holds JSON text (to send as a bin) */
    msgpack_packer  pk;        /* writes into result */
    jrpc_wcall_t   *prev;      /* outstanding list / free list (next only) */
    jrpc_wcall_t   *next;
};

struct jrpc_worker {
    jrpc_worker_opts_t opts;
    uv_loop_t   *loop;         /* the loop we run on */
    uv_loop_t    own_loop;     /* storage when we own it */
    bool         owns_loop;
    void        *zctx;         /* ZeroMQ context (owned) */
    handler_t   *handlers;
    size_t       nhandlers;
    conn_t     **conns;
    size_t       nconns;
    resolver_t **resolvers;    /* dns+tcp:// names */
    size_t       nresolvers;
    int          nresolving;   /* lookups running (stop and destroy wait for them) */
    uv_timer_t   tick;         /* heartbeats and liveness, every heartbeat_ms */
    uv_idle_t    flush_idle;   /* flushes gathered answers at the end of a turn */
    uv_timer_t   drain_timer;  /* draining: the timeout, or the latest deadline */
    bool         tick_started;
    uint32_t     tick_ms;      /* the tick's period: the shortest interval of any conn */
    msgpack_zone zone;         /* decoded frames; cleared after each */
    jrpc_wcall_t *calls;       /* outstanding calls (doubly linked) */
    jrpc_wcall_t *free_calls;  /* finished calls for reuse (singly linked) */
    size_t       nfree;
    int          nclosing;     /* handles/watchers still closing */
    bool         stopping;     /* jrpc_worker_stop() was called */
    bool         draining;     /* jrpc_worker_drain(): DISCONNECT sent, finishing calls */
    bool         paused;       /* jrpc_worker_pause(): no session until jrpc_worker_resume() */
    uint64_t     drain_until;  /* uv_now() ms when a drain gives up */
    jrpc_buf_t   tmp;          /* scratch for READY / HEARTBEAT / DISCONNECT */
    jrpc_buf_t   jparams;      /* msgpack params as JSON text, for a json handler
                                  (a broker that sent msgpack) */
    bool         curve;        /* sockets are CURVE clients */
    bool         native;       /* our own ZMTP (jrpc_zdealer) where it serves the endpoint */
    jrpc_curve_keypair_t curve_kp;   /* our keypair (secret wiped at destroy) */
    char         broker_public[JRPC_CURVE_Z85_LEN + 1]; /* the broker's public key */
    char         name[64];           /* READY "name"; empty: not sent */
    uint64_t     answered;     /* answers sent (notifications included) */
};

static void conn_flush(conn_t *c);
static void conn_reset(conn_t *c, const char *why);
static void resolver_start(resolver_t *rs);
static void drain_check(jrpc_worker_t *w);
static void on_tick(uv_timer_t *t);

/* ---- options ---- */

void jrpc_worker_opts_init(jrpc_worker_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->credit = 64;
    o->heartbeat_ms = 1000;
    o->liveness = 3;
    o->linger_ms = 1000;
    o->resolve_ms = 5000;
}

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

static int conn_send_bare(conn_t *c, int type)
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
                                  .name = w->name[0] ? w->name : NULL };
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

/* Runs the tick at the shortest heartbeat interval in use, so that each
 * conn heartbeats and checks liveness at least once per interval of its own. */
static void tick_update(jrpc_worker_t *w)
{
    if (!w->tick_started || w->stopping)
        return;
    uint32_t ms = w->opts.heartbeat_ms;
    for (size_t i = 0; i < w->nconns; i++)
        if (w->conns[i]->sock != NULL && w->conns[i]->hb_ms < ms)
            ms = w->conns[i]->hb_ms;
    if (ms == w->tick_ms)
        return;
    w->tick_ms = ms;
    uv_timer_start(&w->tick, on_tick, ms, ms);
}

/* The broker's heartbeat settings rule the session (PROTOCOL.md 5): we
 * heartbeat at its interval, and give it up after its liveness, so that
 * neither side takes the other for dead while both are well. */
static void conn_adopt(conn_t *c, uint32_t hb_ms, uint32_t liveness)
{
    jrpc_worker_t *w = c->w;
    if (hb_ms == c->hb_ms && liveness == c->liveness)
        return;
    bool differ = hb_ms != w->opts.heartbeat_ms || liveness != w->opts.liveness;
    JRPC_LOG(differ ? JRPC_LOG_INFO : JRPC_LOG_DEBUG, "worker",
             "event=heartbeat_adopted endpoint=%s heartbeat_ms=%u liveness=%u own_heartbeat_ms=%u "
             "own_liveness=%u",
             c->endpoint, hb_ms, liveness, w->opts.heartbeat_ms, w->opts.liveness);
    c->hb_ms = hb_ms;
    c->liveness = liveness;
    tick_update(w);
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
static void conn_close(conn_t *c, int linger)
{
    if (c->sock == NULL)
        return;
    conn_flush(c);
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
static int conn_open(conn_t *c)
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
    tick_update(w);
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

static void conn_reset(conn_t *c, const char *why)
{
    if (c->w->stopping)
        return;
    if (c->retiring) { /* its address left the name: this session was its last */
        JRPC_LOG(c->inflight ? JRPC_LOG_WARN : JRPC_LOG_INFO, "worker",
                 "event=retired_conn_lost endpoint=%s reason=%s inflight=%u", c->endpoint, why,
                 c->inflight);
        conn_close(c, 0);
        drain_check(c->w);
        return;
    }
    if (c->w->paused) { /* no new session until resumed */
        conn_close(c, 0);
        return;
    }
    if (c->w->draining) { /* no new session while leaving: the calls are lost */
        JRPC_LOG(JRPC_LOG_WARN, "worker", "event=drain_conn_lost endpoint=%s reason=%s inflight=%u",
                 c->endpoint, why, c->inflight);
        conn_close(c, 0);
        drain_check(c->w);
        return;
    }
    conn_close(c, 0);
    int rc = conn_open(c);
    if (rc < 0)
        JRPC_LOG(JRPC_LOG_ERROR, "worker", "event=reconnect_failed endpoint=%s reason=%s err=\"%s\"",
                 c->endpoint, why, zmq_strerror(-rc));
    else
        JRPC_LOG(JRPC_LOG_DEBUG, "worker", "event=reconnect endpoint=%s reason=%s gen=%llu",
                 c->endpoint, why, (unsigned long long)c->gen);
}

/* ---- answers ---- */

static void conn_flush(conn_t *c)
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
        conn_flush(w->conns[i]);
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
        conn_flush(c);
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
    drain_check(w);
    return rc;
}

const char *jrpc_wcall_method(const jrpc_wcall_t *c)
{
    return c->method;
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

static const handler_t *find_handler(const jrpc_worker_t *w, jrpc_span_t method)
{
    for (size_t i = 0; i < w->nhandlers; i++) {
        const handler_t *h = &w->handlers[i];
        if (h->len == method.n && memcmp(h->name, method.p, method.n) == 0)
            return h;
    }
    return NULL;
}

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
            conn_adopt(c, m.heartbeat_ms, m.liveness);
        break;
    case JRPC_WIRE_DISCONNECT: {
        uint64_t now = uv_now(w->loop);
        JRPC_LOG(JRPC_LOG_INFO, "worker", "event=disconnect_received endpoint=%s", c->endpoint);
        if (c->rs != NULL) /* leaving for good, or restarting: the name will tell */
            resolver_start(c->rs);
        /* Reconnect at once, but not in a tight loop with a broker that keeps
         * refusing us: at most once per heartbeat interval. */
        if (w->draining || now - c->last_reset >= w->opts.heartbeat_ms)
            conn_reset(c, "disconnect");
        else
            c->reset_due = true;
        break;
    }
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
            conn_flush(c);
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
    conn_flush(c);
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
        resolver_start(c->rs);   /* as for a broker lost to silence */
    /* Not in a tight loop with a broker that takes the handshake and
     * drops the connection: a session shorter than a heartbeat interval is
     * closed, and the tick opens the next. */
    if (!c->retiring && !c->w->draining &&
        uv_now(c->w->loop) - c->last_reset < c->w->opts.heartbeat_ms)
        conn_close(c, 0);
    else
        conn_reset(c, "connection_lost");
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

/* ---- heartbeats and liveness ---- */

static void conn_free(conn_t *c)
{
    jrpc_buf_dispose(&c->out);
    free(c->endpoint);
    free(c);
}

/* A retired conn goes when its socket is closed (the watcher's close
 * callback has run) and no call points at it. */
static bool conn_remove_if_done(jrpc_worker_t *w, size_t i)
{
    conn_t *c = w->conns[i];
    if (!c->retiring || c->sock != NULL || c->zclosing > 0 || c->refs > 0)
        return false;
    JRPC_LOG(JRPC_LOG_DEBUG, "worker", "event=conn_freed endpoint=%s", c->endpoint);
    memmove(&w->conns[i], &w->conns[i + 1], (w->nconns - i - 1) * sizeof *w->conns);
    w->nconns--;
    conn_free(c);
    return true;
}

static void on_tick(uv_timer_t *t)
{
    jrpc_worker_t *w = t->data;
    uint64_t now = uv_now(w->loop);
    for (size_t i = 0; i < w->nconns; i++) {
        while (i < w->nconns && conn_remove_if_done(w, i))
            ; /* the next conn moved into slot i */
        if (i == w->nconns)
            break;
        conn_t *c = w->conns[i];
        uint64_t hb = c->hb_ms;
        if (c->retiring && c->sock != NULL && c->inflight == 0) {
            /* Every call of the session answered: the drain of this conn is over. */
            JRPC_LOG(JRPC_LOG_INFO, "worker", "event=retired_conn_closed endpoint=%s", c->endpoint);
            conn_close(c, c->alive ? (int)w->opts.linger_ms : 0);
        } else if (c->sock == NULL) {
            if (c->retiring)
                continue; /* closed for good; freed once its calls are gone */
            /* a session a drain lost, or a pause closed, stays closed (and quiet) */
            if (!w->draining && !w->paused)
                conn_reset(c, "retry");
        } else if (c->reset_due) {
            conn_reset(c, "disconnect");
        } else if (now - c->last_recv >= hb * c->liveness) {
            if (c->alive)
                JRPC_LOG(JRPC_LOG_WARN, "worker", "event=broker_lost endpoint=%s silent_ms=%llu",
                         c->endpoint, (unsigned long long)(now - c->last_recv));
            else
                JRPC_LOG(JRPC_LOG_DEBUG, "worker", "event=broker_unreachable endpoint=%s",
                         c->endpoint);
            if (c->rs != NULL && c->alive) /* gone from the name, perhaps: ask it again */
                resolver_start(c->rs);
            conn_reset(c, "silence");
        } else if (now - c->last_send >= hb - hb / 10) {
            /* Timer ticks drift a little; a heartbeat slightly early is harmless. */
            conn_send_bare(c, JRPC_WIRE_HEARTBEAT);
        }
    }
}

/* ---- the worker ---- */

jrpc_worker_t *jrpc_worker_new(const jrpc_worker_opts_t *opts)
{
    jrpc_worker_opts_t o;
    if (opts == NULL)
        jrpc_worker_opts_init(&o);
    else
        o = *opts;
    if (o.credit == 0 || o.heartbeat_ms < 10 || o.liveness == 0 || (o.resolve_ms != 0 && o.resolve_ms < 100) ||
        (o.curve_keypair == NULL) != (o.broker_public == NULL) ||
        (o.zmq_engine && strcmp(o.zmq_engine, "native") != 0 &&
         strcmp(o.zmq_engine, "libzmq") != 0) ||
        (o.broker_public && (!jrpc_curve_key_ok(o.broker_public) ||
                             !jrpc_curve_key_ok(o.curve_keypair->public_z85) ||
                             !jrpc_curve_key_ok(o.curve_keypair->secret_z85)))) {
        errno = EINVAL;
        return NULL;
    }
    if (o.name) {
        size_t n = strlen(o.name);
        bool ok = n > 0 && n < 64;
        for (size_t i = 0; ok && i < n; i++)
            ok = o.name[i] > 0x20 && o.name[i] < 0x7f;
        if (!ok) {
            errno = EINVAL;
            return NULL;
        }
    }
    jrpc_worker_t *w = calloc(1, sizeof *w);
    if (w == NULL)
        return NULL;
    if (o.name)
        memcpy(w->name, o.name, strlen(o.name) + 1);
    o.name = NULL;   /* borrowed by the caller: not kept */
    if (o.resolve_ms == 0) /* opts made by hand before the field existed */
        o.resolve_ms = 5000;
    if (o.curve_keypair) {
        w->curve = true;
        w->curve_kp = *o.curve_keypair;
        memcpy(w->broker_public, o.broker_public, sizeof w->broker_public);
    }
    o.curve_keypair = NULL;   /* borrowed by the caller: not kept */
    o.broker_public = NULL;
    /* CURVE is libzmq's: our own engine speaks the NULL mechanism only. */
    w->native = !w->curve && (o.zmq_engine == NULL || strcmp(o.zmq_engine, "native") == 0);
    o.zmq_engine = NULL;
    w->opts = o;
    jrpc_buf_init(&w->tmp);
    jrpc_buf_init(&w->jparams);
    if (o.loop != NULL) {
        w->loop = o.loop;
    } else {
        if (uv_loop_init(&w->own_loop) < 0)
            goto fail_loop;
        w->loop = &w->own_loop;
        w->owns_loop = true;
    }
    if ((w->zctx = zmq_ctx_new()) == NULL)
        goto fail_ctx;
    if (!msgpack_zone_init(&w->zone, 8192))
        goto fail_zone;
    uv_timer_init(w->loop, &w->tick);
    uv_idle_init(w->loop, &w->flush_idle);
    uv_timer_init(w->loop, &w->drain_timer);
    w->tick.data = w->flush_idle.data = w->drain_timer.data = w;
    return w;
fail_zone:
    zmq_ctx_term(w->zctx);
fail_ctx:
    if (w->owns_loop)
        uv_loop_close(&w->own_loop);
fail_loop:
    jrpc_curve_keypair_wipe(&w->curve_kp);
    free(w);
    return NULL;
}

int jrpc_worker_handle(jrpc_worker_t *w, const char *method, jrpc_handler_fn fn, void *arg)
{
    return jrpc_worker_handle_ex(w, method, fn, arg, 0);
}

int jrpc_worker_handle_ex(jrpc_worker_t *w, const char *method, jrpc_handler_fn fn, void *arg,
                          unsigned flags)
{
    if (method == NULL || method[0] == '\0' || fn == NULL || (flags & ~JRPC_WORKER_IDEMPOTENT))
        return -EINVAL;
    if (w->nconns > 0 || w->nresolvers > 0)
        return -EBUSY;
    size_t len = strlen(method);
    if (find_handler(w, (jrpc_span_t){ method, len }) != NULL)
        return -EEXIST;
    handler_t *hs = realloc(w->handlers, (w->nhandlers + 1) * sizeof *hs);
    if (hs == NULL)
        return -ENOMEM;
    w->handlers = hs;
    char *name = strdup(method);
    if (name == NULL)
        return -ENOMEM;
    hs[w->nhandlers++] = (handler_t){ .name = name, .len = len, .fn = fn, .arg = arg,
                                      .flags = flags };
    return 0;
}

static void json_placeholder(jrpc_wcall_t *call, const msgpack_object *params, void *arg)
{
    (void)call, (void)params, (void)arg;   /* never called: replaced at once */
}

int jrpc_worker_handle_json(jrpc_worker_t *w, const char *method, jrpc_json_handler_fn fn,
                            void *arg, unsigned flags)
{
    if (fn == NULL)
        return -EINVAL;
    /* Registered as a msgpack handler first (the same checks), then made json. */
    int rc = jrpc_worker_handle_ex(w, method, json_placeholder, arg, flags);
    if (rc < 0)
        return rc;
    handler_t *h = &w->handlers[w->nhandlers - 1];
    h->fn = NULL;
    h->jfn = fn;
    return 0;
}

static void tick_start(jrpc_worker_t *w)
{
    if (w->tick_started)
        return;
    w->tick_ms = w->opts.heartbeat_ms;
    uv_timer_start(&w->tick, on_tick, w->tick_ms, w->tick_ms);
    w->tick_started = true;
}

/* A conn to endpoint (given, or an address of rs's name), opened at once
 * unless paused (resume opens it). */
static int conn_add(jrpc_worker_t *w, const char *endpoint, resolver_t *rs)
{
    int rc = -ENOMEM;
    conn_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        goto out;
    c->w = w;
    c->rs = rs;
    jrpc_buf_init(&c->out);
    if ((c->endpoint = strdup(endpoint)) == NULL)
        goto out;
    conn_t **cs = realloc(w->conns, (w->nconns + 1) * sizeof *cs);
    if (cs == NULL)
        goto out;
    w->conns = cs;
    if (!w->paused && (rc = conn_open(c)) < 0)
        goto out;
    w->conns[w->nconns++] = c;
    c = NULL;
    tick_start(w);
    JRPC_LOG(JRPC_LOG_INFO, "worker", "event=connecting endpoint=%s name=%s credit=%u "
             "heartbeat_ms=%u curve=%s", endpoint, rs ? rs->url : "-", w->opts.credit,
             w->opts.heartbeat_ms, w->curve ? "on" : "off");
    rc = 0;
out:
    if (c != NULL)
        conn_free(c);
    return rc;
}

/* The address of c left its name: c leaves as a drain leaves (PROTOCOL.md
 * 6), alone. The tick closes it once it holds no call, conn_reset() when
 * its broker is lost or says DISCONNECT. */
static void conn_retire(conn_t *c)
{
    jrpc_worker_t *w = c->w;
    c->retiring = true;
    JRPC_LOG(JRPC_LOG_INFO, "worker", "event=broker_dropped endpoint=%s name=%s inflight=%u",
             c->endpoint, c->rs->url, c->inflight);
    if (c->sock == NULL)
        return;
    if (c->reset_due) { /* the broker does not know this session: nothing to finish */
        conn_close(c, 0);
        return;
    }
    conn_flush(c);
    conn_send_bare(c, JRPC_WIRE_DISCONNECT);
    if (c->inflight == 0)
        conn_close(c, c->alive ? (int)w->opts.linger_ms : 0);
}

/* ---- brokers found by name ---- */

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *ai);

/* Starts a lookup of rs's name, or asks for one more after the one running. */
static void resolver_start(resolver_t *rs)
{
    jrpc_worker_t *w = rs->w;
    if (w->stopping || w->draining)
        return;
    if (rs->busy) {
        rs->again = true;
        return;
    }
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;      /* A and AAAA */
    hints.ai_socktype = SOCK_STREAM;  /* one entry per address, not one per socket type */
    rs->req.data = rs;
    int rc = uv_getaddrinfo(w->loop, &rs->req, on_resolved, rs->name.host, NULL, &hints);
    if (rc < 0) {
        JRPC_LOG(JRPC_LOG_WARN, "worker", "event=resolve_failed name=%s err=\"%s\"", rs->url,
                 uv_strerror(rc));
        return;
    }
    rs->busy = true;
    w->nresolving++;
}

/* Makes the conns of rs match the endpoints eps (n of them, from
 * jrpc_dns_endpoints): new ones get a conn, gone ones are retired. */
static void resolver_apply(resolver_t *rs, char (*eps)[JRPC_DNS_EP_MAX], size_t n)
{
    jrpc_worker_t *w = rs->w;
    /* Zeroed: GCC's -Wmaybe-uninitialized (Release) cannot see that only
     * the first nold are read. Not a hot path (one resolve). */
    conn_t *oldc[JRPC_DNS_ADDRS_MAX] = { 0 };
    const char *old[JRPC_DNS_ADDRS_MAX] = { 0 }, *cur[JRPC_DNS_ADDRS_MAX] = { 0 };
    bool gone[JRPC_DNS_ADDRS_MAX], added[JRPC_DNS_ADDRS_MAX];
    size_t nold = 0, ngone = 0, nadded = 0;
    /* The conns in force are the last answer's addresses: at most
     * JRPC_DNS_ADDRS_MAX. */
    for (size_t i = 0; i < w->nconns && nold < JRPC_DNS_ADDRS_MAX; i++) {
        if (w->conns[i]->rs == rs && !w->conns[i]->retiring) {
            oldc[nold] = w->conns[i];
            old[nold++] = w->conns[i]->endpoint;
        }
    }
    for (size_t j = 0; j < n; j++)
        cur[j] = eps[j];
    if (jrpc_dns_diff(old, nold, cur, n, gone, added) == 0) {
        JRPC_LOG(JRPC_LOG_DEBUG, "worker", "event=resolved name=%s addrs=%zu changed=0", rs->url, n);
        return;
    }
    for (size_t i = 0; i < nold; i++) {
        if (gone[i]) {
            conn_retire(oldc[i]);
            ngone++;
        }
    }
    for (size_t j = 0; j < n; j++) {
        if (!added[j])
            continue;
        int rc = conn_add(w, cur[j], rs);
        if (rc < 0)
            JRPC_LOG(JRPC_LOG_ERROR, "worker", "event=connect_failed endpoint=%s name=%s err=\"%s\"",
                     cur[j], rs->url, zmq_strerror(-rc));
        else
            nadded++;
    }
    JRPC_LOG(JRPC_LOG_INFO, "worker", "event=resolved name=%s addrs=%zu added=%zu dropped=%zu",
             rs->url, n, nadded, ngone);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *ai)
{
    resolver_t *rs = req->data;
    jrpc_worker_t *w = rs->w;
    rs->busy = false;
    w->nresolving--;
    if (w->stopping || w->draining || status == UV_ECANCELED) {
        uv_freeaddrinfo(ai);
        return;
    }
    char eps[JRPC_DNS_ADDRS_MAX][JRPC_DNS_EP_MAX];
    bool cut = false;
    size_t n = status == 0 ? jrpc_dns_endpoints(ai, rs->name.port, eps, JRPC_DNS_ADDRS_MAX, &cut) : 0;
    uv_freeaddrinfo(ai);
    if (n == 0) {
        /* A name that resolves to nothing is more likely a DNS hiccup than
         * every broker gone: keep the sessions in force. Warned once per
         * outage, not at every interval. */
        JRPC_LOG(rs->failures++ ? JRPC_LOG_DEBUG : JRPC_LOG_WARN, "worker",
                 "event=resolve_failed name=%s err=\"%s\" action=keep", rs->url,
                 status < 0 ? uv_strerror(status) : "no address");
    } else {
        if (rs->failures > 0)
            JRPC_LOG(JRPC_LOG_INFO, "worker", "event=resolve_recovered name=%s failures=%u",
                     rs->url, rs->failures);
        rs->failures = 0;
        if (cut)
            JRPC_LOG(JRPC_LOG_WARN, "worker", "event=resolve_truncated name=%s kept=%d", rs->url,
                     JRPC_DNS_ADDRS_MAX);
        resolver_apply(rs, eps, n);
    }
    if (rs->again) {
        rs->again = false;
        resolver_start(rs);
    }
}

static void on_resolve_timer(uv_timer_t *t)
{
    resolver_start(t->data);
}

static int resolver_add(jrpc_worker_t *w, const char *url)
{
    jrpc_dns_name_t name;
    if (jrpc_dns_parse(url, &name) < 0)
        return -EINVAL;
    resolver_t **rss = realloc(w->resolvers, (w->nresolvers + 1) * sizeof *rss);
    if (rss == NULL)
        return -ENOMEM;
    w->resolvers = rss;
    resolver_t *rs = calloc(1, sizeof *rs);
    if (rs == NULL || (rs->url = strdup(url)) == NULL) {
        free(rs);
        return -ENOMEM;
    }
    rs->w = w;
    rs->name = name;
    uv_timer_init(w->loop, &rs->timer);
    rs->timer.data = rs;
    uv_timer_start(&rs->timer, on_resolve_timer, w->opts.resolve_ms, w->opts.resolve_ms);
    w->resolvers[w->nresolvers++] = rs;
    tick_start(w);
    JRPC_LOG(JRPC_LOG_INFO, "worker", "event=resolving name=%s resolve_ms=%u", url,
             w->opts.resolve_ms);
    resolver_start(rs);
    return 0;
}

int jrpc_worker_connect(jrpc_worker_t *w, const char *endpoint)
{
    if (w->nhandlers == 0 || endpoint == NULL || w->stopping)
        return -EINVAL;
    if (jrpc_dns_is_name(endpoint))
        return resolver_add(w, endpoint);
    return conn_add(w, endpoint, NULL);
}

/* Lets the handles and sockets closed by jrpc_worker_stop() finish, and a
 * lookup it could not cancel (already running in the thread pool): that
 * one is waited for, not spun on. */
static void stop_wait(jrpc_worker_t *w)
{
    while (w->nclosing > 0)
        uv_run(w->loop, UV_RUN_NOWAIT);
    while (w->nresolving > 0)
        uv_run(w->loop, UV_RUN_ONCE);
}

int jrpc_worker_run(jrpc_worker_t *w)
{
    int rc = 0;
    if (!w->stopping)
        rc = uv_run(w->loop, UV_RUN_DEFAULT);
    stop_wait(w);
    return rc < 0 ? rc : 0;
}

static void on_handle_closed(uv_handle_t *h)
{
    jrpc_worker_t *w = h->data;
    w->nclosing--;
}

static void on_resolve_timer_closed(uv_handle_t *h)
{
    resolver_t *rs = h->data;
    rs->w->nclosing--;
}

void jrpc_worker_stop(jrpc_worker_t *w)
{
    if (w->stopping)
        return;
    for (size_t i = 0; i < w->nconns; i++) {
        conn_t *c = w->conns[i];
        if (c->sock == NULL)
            continue;
        conn_flush(c);
        if (!w->draining && !c->retiring) { /* a drain or a retirement sent it already */
            conn_send_bare(c, JRPC_WIRE_DISCONNECT);
            JRPC_LOG(JRPC_LOG_INFO, "worker", "event=disconnect_sent endpoint=%s inflight=%u",
                     c->endpoint, c->inflight);
        }
        /* A broker we never heard from would only make exit wait. */
        conn_close(c, c->alive ? (int)w->opts.linger_ms : 0);
    }
    w->stopping = true;
    for (size_t i = 0; i < w->nresolvers; i++) {
        resolver_t *rs = w->resolvers[i];
        w->nclosing++;
        uv_close((uv_handle_t *)&rs->timer, on_resolve_timer_closed);
        if (rs->busy)
            uv_cancel((uv_req_t *)&rs->req); /* its callback still comes (UV_ECANCELED) */
    }
    w->nclosing += 3;
    uv_close((uv_handle_t *)&w->tick, on_handle_closed);
    uv_close((uv_handle_t *)&w->flush_idle, on_handle_closed);
    uv_close((uv_handle_t *)&w->drain_timer, on_handle_closed);
    uv_stop(w->loop);
}

static void on_drain_timer(uv_timer_t *t)
{
    drain_check(t->data);
}

/* Ends the drain when nothing is left to wait for; otherwise arms the
 * timer for the next moment that may end it. */
static void drain_check(jrpc_worker_t *w)
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

void jrpc_worker_drain(jrpc_worker_t *w, uint32_t timeout_ms)
{
    if (w->stopping || w->draining)
        return;
    w->draining = true;
    w->drain_until = uv_now(w->loop) + timeout_ms;
    for (size_t i = 0; i < w->nconns; i++) {
        conn_t *c = w->conns[i];
        if (c->sock == NULL)
            continue;
        if (c->reset_due) { /* the broker does not know this session: nothing to finish */
            conn_close(c, 0);
            continue;
        }
        if (c->retiring) /* DISCONNECT sent already; its calls count below */
            continue;
        conn_flush(c);
        conn_send_bare(c, JRPC_WIRE_DISCONNECT);
        JRPC_LOG(JRPC_LOG_INFO, "worker", "event=disconnect_sent endpoint=%s inflight=%u drain=1",
                 c->endpoint, c->inflight);
    }
    drain_check(w);
}

void jrpc_worker_pause(jrpc_worker_t *w)
{
    if (w->stopping || w->draining || w->paused)
        return;
    w->paused = true;
    for (size_t i = 0; i < w->nconns; i++) {
        conn_t *c = w->conns[i];
        if (c->sock == NULL)
            continue;
        conn_flush(c);
        if (!c->retiring) /* a retired conn sent it already */
            conn_send_bare(c, JRPC_WIRE_DISCONNECT);
        JRPC_LOG(JRPC_LOG_INFO, "worker", "event=paused endpoint=%s inflight=%u", c->endpoint,
                 c->inflight);
        conn_close(c, c->alive ? (int)w->opts.linger_ms : 0);
    }
}

void jrpc_worker_resume(jrpc_worker_t *w)
{
    if (!w->paused || w->stopping || w->draining)
        return;
    w->paused = false;
    for (size_t i = 0; i < w->nconns; i++) {
        conn_t *c = w->conns[i];
        if (c->sock != NULL || c->retiring)
            continue;
        JRPC_LOG(JRPC_LOG_INFO, "worker", "event=resumed endpoint=%s", c->endpoint);
        conn_reset(c, "resume");
    }
}

uint64_t jrpc_worker_answered(const jrpc_worker_t *w)
{
    return w->answered;
}

uv_loop_t *jrpc_worker_loop(jrpc_worker_t *w)
{
    return w->loop;
}

void jrpc_worker_destroy(jrpc_worker_t **self_p)
{
    jrpc_worker_t *w = *self_p;
    if (w == NULL)
        return;
    *self_p = NULL;
    jrpc_worker_stop(w);
    stop_wait(w);
    while (w->calls) {
        JRPC_LOG(JRPC_LOG_DEBUG, "worker", "event=call_abandoned seq=%llu",
                 (unsigned long long)w->calls->seq);
        jrpc_wcall_t *wc = w->calls;
        w->calls = wc->next;
        jrpc_buf_dispose(&wc->result);
        free(wc);
    }
    while (w->free_calls) {
        jrpc_wcall_t *wc = w->free_calls;
        w->free_calls = wc->next;
        jrpc_buf_dispose(&wc->result);
        free(wc);
    }
    for (size_t i = 0; i < w->nconns; i++)
        conn_free(w->conns[i]);
    free(w->conns);
    for (size_t i = 0; i < w->nresolvers; i++) {
        free(w->resolvers[i]->url);
        free(w->resolvers[i]);
    }
    free(w->resolvers);
    for (size_t i = 0; i < w->nhandlers; i++)
        free(w->handlers[i].name);
    free(w->handlers);
    msgpack_zone_destroy(&w->zone);
    jrpc_buf_dispose(&w->tmp);
    jrpc_buf_dispose(&w->jparams);
    jrpc_curve_keypair_wipe(&w->curve_kp);
    zmq_ctx_term(w->zctx); /* waits up to linger_ms for DISCONNECTs to leave */
    if (w->owns_loop) {
        uv_run(w->loop, UV_RUN_NOWAIT);
        int rc = uv_loop_close(w->loop);
        if (rc < 0)
            JRPC_LOG(JRPC_LOG_WARN, "worker", "event=loop_busy err=\"%s\" hint=\"close your handles before destroy\"",
                     uv_strerror(rc));
    }
    free(w);
}
