/* jrpc_workers — see jrpc_workers.h. This file is the calls' path: the
 * slots, dispatch and the methods' queues, sending REQUESTs, reading the
 * workers' messages, and the API. Beside it, over the state in
 * jrpc_workers_int.h: the method table (jrpc_methods.c), hedging
 * (jrpc_hedge.c) and the workers' sessions (jrpc_sessions.c).
 *
 * Calls live in one table of slots indexed by the low 32 bits of their
 * sequence number; the high 32 bits are a generation, so an answer for a
 * slot that was since reused is recognised as stale. A queued call waits in
 * its method's FIFO (linked through the slots); a cancelled queued call is
 * skipped when it reaches the head.
 *
 * A slot keeps its method and its (borrowed) params for as long as it lives,
 * sent or queued, so that a call whose worker is lost can be sent again:
 * re-dispatch gives the slot a new generation (a new seq), so the lost
 * worker's seq can never match it again, whatever that worker does later. */
#include "jrpc_workers_int.h"

#include <time.h>
#include <zmq.h>

#include "jrpc_curve.h"
#include "jrpc_errors.h"
#include "jrpc_mcp_sid.h"

#define MAX_GRACE_METHODS 4096  /* method entries the start-up grace may create */
#define READ_BUDGET 256      /* messages per readable callback, for fairness */
#define DISCONNECT_LINGER_MS 1000 /* shutdown: how long the DISCONNECTs may take to leave */
/* ZMQ_SNDHWM/ZMQ_RCVHWM per worker, in messages. Credit already bounds the
 * REQUESTs outstanding at a worker, so only a worker that stopped reading
 * (heartbeats pile up) gets near it; by then liveness has removed it. */
#define WORKER_HWM 100000
#define MAX_FRAME (64u << 20)   /* ZMQ_MAXMSGSIZE: a larger frame cuts the connection */
/* The native engine: greeting and READY within this after connecting (what
 * libzmq's DEALER sends by itself at once), else closed. */
#define HANDSHAKE_MS 5000
/* Output buffer a worker connection keeps once drained (the native engine):
 * few connections, many messages, so no allocation per REQUEST. */
#define OUT_KEEP (256u << 10)

/* ---- slots ---- */

static slot_t *slot_by_seq(jrpc_workers_t *w, uint64_t seq, uint32_t *idx)
{
    uint64_t low = seq & 0xffffffffu;
    if (low == 0 || low > w->nslots)
        return NULL;
    slot_t *s = &w->slots[low - 1];
    if (s->seq != seq)
        return NULL;
    *idx = (uint32_t)(low - 1);
    return s;
}

/* ---- sending ---- */

/* One frame to a peer. Returns 0, -EHOSTUNREACH (its connection is gone),
 * -EAGAIN (WORKER_HWM messages wait for it), or another -errno. */
static int send_to(jrpc_workers_t *w, const peer_t *to, const char *p, size_t n)
{
    if (to->conn)
        return jrpc_zmtp_send(to->conn, &(jrpc_span_t){ p, n }, 1);
    if (zmq_send(w->sock, to->id, to->idlen, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_send(w->sock, p, n, ZMQ_DONTWAIT) < 0)
        return -errno;
    return 0;
}

/* Returns 0, -ENOMEM, or what send_to returns. */
int send_simple(jrpc_workers_t *w, const peer_t *to, int type)
{
    jrpc_buf_reset(&w->scratch);
    /* Our heartbeat settings ride on every HEARTBEAT: workers adopt them
     * for the session (PROTOCOL.md 5), so that neither side expects the
     * other's heartbeats more often than they come. */
    if ((type == JRPC_WIRE_HEARTBEAT
             ? jrpc_wire_put_heartbeat_settings(&w->scratch, w->opts.heartbeat_ms, w->opts.liveness)
             : jrpc_wire_put_disconnect(&w->scratch)) < 0)
        return -ENOMEM;
    return send_to(w, to, w->scratch.p, w->scratch.len);
}

/* ---- dispatch ---- */

/* method_pick() among two or more workers: the walk. */
static worker_t *method_pick_walk(const jrpc_workers_t *w, method_t *m)
{
    worker_t *best = NULL;
    uint32_t best_free = 0, n = m->nworkers;
    /* From rr on, round the array once: one division a pick, not one a worker. */
    for (uint32_t k = 0, j = m->rr % n; k < n; k++, j = j + 1 == n ? 0 : j + 1) {
        worker_t *wk = m->workers[j];
        uint32_t fr = wk->credit - wk->inflight;
        if (worker_has_room(w, wk) && worker_eligible(wk, m) && fr > best_free) {
            best = wk;
            best_free = fr;
        }
    }
    m->rr++;
    return best;
}

/* The live worker serving m with the most free credit, searching from a
 * rotating start; NULL when all are full. One worker: the same choice
 * without the walk, inline (once a call). */
static inline worker_t *method_pick(const jrpc_workers_t *w, method_t *m)
{
    if (m->nworkers != 1)
        return m->nworkers ? method_pick_walk(w, m) : NULL;
    worker_t *wk = m->workers[0];
    m->rr++;
    return worker_has_room(w, wk) && worker_eligible(wk, m) ? wk : NULL;
}

static void queue_push(jrpc_workers_t *w, method_t *m, uint32_t i)
{
    slot_t *s = &w->slots[i];
    s->state = SLOT_QUEUED;
    s->worker = NULL;
    s->next = NIL;
    if (m->qtail == NIL)
        m->qhead = i;
    else
        w->slots[m->qtail].next = i;
    m->qtail = i;
    w->queued++;
}

/* Sends call i again, to another live worker serving its method, or queues
 * it there when all are out of credit (past --max-queue: it was admitted
 * long ago, and the queue it joins is bounded by the calls in flight). The
 * slot gets a new seq first, so the worker that lost it can never answer
 * it. Returns 0, -ENOENT when nobody else serves the method, or -ENOMEM. */
int redispatch(jrpc_workers_t *w, uint32_t i)
{
    slot_t *s = &w->slots[i];
    method_t *m = s->method;
    if (m->nworkers == 0)
        return -ENOENT;
    if (++w->generation == 0)
        w->generation = 1;
    s->seq = (uint64_t)w->generation << 32 | (uint64_t)(i + 1);
    s->resent++;
    worker_t *best = method_pick(w, m);
    if (best)
        return worker_add_call(w, best, i);
    queue_push(w, m, i);
    return 0;
}

/* Moves queued calls to wk while it has credit. */
void worker_pull(jrpc_workers_t *w, worker_t *wk)
{
    if (wk->draining || wk->dead || !wk->routed)
        return;
    for (uint32_t k = 0; k < wk->nmethods && worker_has_room(w, wk); k++) {
        method_t *m = wk->methods[k];
        if (!worker_eligible(wk, m))
            continue;
        while (m->qhead != NIL && worker_has_room(w, wk)) {
            uint32_t i = m->qhead;
            slot_t *s = &w->slots[i];
            m->qhead = s->next;
            if (m->qhead == NIL)
                m->qtail = NIL;
            if (s->owner == NULL) { /* cancelled while queued */
                slot_free(w, i);
                continue;
            }
            w->queued--;
            if (worker_add_call(w, wk, i) < 0)
                slot_finish(w, i, JRPC_DONE_FAILED, JRPC_INTERNAL_ERROR, NO_VALUE);
        }
    }
}

/* ---- reading ---- */

/* A call sent to wk is no longer held there (answered, or rejected): its
 * credit and its bytes go back. */
static void held_end(jrpc_workers_t *w, worker_t *wk, const slot_t *s)
{
    wk->inflight--;
    w->inflight--;
    wk->bytes -= s->bytes;
    if (wk->bytes < w->opts.max_worker_bytes)
        wk->bytes_full = false;
}

/* The worker could not decode its m->request-th REQUEST of the session and
 * runs none of its calls (PROTOCOL.md 2.5): each of them still outstanding
 * there is answered -32603 and gives its credit back. A slot's flush_no is
 * the count of REQUESTs sent to its worker before its own, modulo 2^32; one
 * still equal to wk->flushes has not left yet and cannot be meant. */
static void on_reject(jrpc_workers_t *w, worker_t *wk, const jrpc_wire_msg_t *m)
{
    uint32_t flush_no = (uint32_t)(m->request - 1), calls = 0;
    for (uint32_t i = 0; wk->inflight > 0 && flush_no != wk->flushes && i < w->nslots; i++) {
        slot_t *s = &w->slots[i];
        if (s->state != SLOT_SENT || s->worker != wk || s->flush_no != flush_no)
            continue;
        held_end(w, wk, s);
        calls++;
        if (s->twin != NIL)   /* its twin may still answer */
            slot_free(w, i);
        else
            slot_finish(w, i, JRPC_DONE_FAILED, JRPC_INTERNAL_ERROR, NO_VALUE);
    }
    JRPC_LOG(JRPC_LOG_WARN, "workers",
             "event=request_rejected worker=%s request=%llu calls=%u inflight=%u", wk->name,
             (unsigned long long)m->request, calls, wk->inflight);
    worker_pull(w, wk);
}

/* n answers of metrics record stat (none: JRPC_METRICS_NONE), each took ns
 * at the worker: into the worker-time histograms, broker-wide and the
 * method's. */
static void worker_time_run(uint32_t stat, uint64_t took, uint64_t n)
{
    if (stat == JRPC_METRICS_NONE)
        return;
    jrpc_hist_observe_n(&jrpc_metrics.worker, took, n);
    jrpc_hist_observe_n(&jrpc_metrics.meth[stat].worker, took, n);
}

/* The items of a RESPONSE read in place (jrpc_wire_response_open checked
 * the whole frame: nothing is answered from a malformed one). */
static void on_response(jrpc_workers_t *w, worker_t *wk, jrpc_wire_rsp_t *r)
{
    uint32_t in_time = 0, errors = 0;   /* wk's counters, added once a frame */
    /* The worker-time histograms are observed by runs: the calls of one
     * REQUEST left together and are answered in one RESPONSE, so a run of
     * one method has one time (n observations of one value cost one). */
    uint32_t run_stat = JRPC_METRICS_NONE;
    uint64_t run_took = 0, run_n = 0;
    while (r->next < r->nitems) {
        jrpc_wire_answer_raw_t a;
        uint32_t i, k = r->next;
        slot_t *s;
        if (jrpc_wire_response_next(r, &a) < 0) {
            w->malformed++;
            JRPC_LOG(JRPC_LOG_WARN, "workers", "event=malformed_answer item=%u", k);
            continue;
        }
        s = slot_by_seq(w, a.seq, &i);
        if (s == NULL || s->state != SLOT_SENT || s->worker != wk) {
            w->late++;
            JRPC_LOG(JRPC_LOG_DEBUG, "workers", "event=unknown_answer seq=%llu",
                     (unsigned long long)a.seq);
            continue;
        }
        held_end(w, wk, s);
        uint64_t took = jrpc_metrics_since(s->t_ns);
        uint32_t stat = s->method->stat;
        if (stat != run_stat || took != run_took) {
            worker_time_run(run_stat, run_took, run_n);
            run_stat = stat;
            run_took = took;
            run_n = 0;
        }
        run_n++;
        w->done_queue_ns = s->queue_ns;   /* read by done (jrpc_workers_done_times) */
        w->done_worker_ns = took;
        if (w->opts.hedge_budget_pct)
            lat_observe(w, s->method, took);
        if (s->owner == NULL) {
            if (!(s->flags & SL_LOST_RACE))   /* a hedge's loser is no late answer */
                w->late++;
        } else {
            wk->timeouts = 0;   /* answered in time */
            in_time++;
            errors += a.is_error;
            if (s->twin != NIL) {   /* first of two: the other is dropped when it comes */
                slot_t *o = &w->slots[s->twin];
                o->owner = NULL;
                o->flags |= SL_LOST_RACE;
                if (s->flags & SL_HEDGE)
                    w->hedges_won++;
            }
        }
        slot_finish(w, i, a.is_error ? JRPC_DONE_ERROR : JRPC_DONE_RESULT, 0, a.value);
    }
    worker_time_run(run_stat, run_took, run_n);
    wk->answered += in_time;
    wk->errors += errors;
    worker_pull(w, wk);
}

/* A message from a peer we do not know (we restarted, or it timed out): ask
 * it to start over. Its answers are for calls we gave up on or sent
 * elsewhere. */
/* A MESSAGE from wk: for a call it holds that was sent with messages, or
 * for a session of its own instance; a session it names (the one a call
 * began, or whose stream a message is for) must be a bridge's id of wk's
 * instance: a worker never hands out or speaks for another's sessions.
 * Anything else is dropped. */
/* Whether session is a bridge's id of wk's own instance. */
static bool own_session(const worker_t *wk, jrpc_span_t session)
{
    jrpc_mcp_sid_t sid;
    return jrpc_mcp_sid_parse(session.p, session.n, &sid) == 0 && sid.instance == wk->instance;
}

static void on_worker_message(jrpc_workers_t *w, worker_t *wk, const jrpc_wire_msg_t *m)
{
    uint32_t i;
    slot_t *s = m->seq ? slot_by_seq(w, m->seq, &i) : NULL;
    if (w->on_msg == NULL || !wk->has_instance ||
        (m->seq && (s == NULL || s->state != SLOT_SENT || s->worker != wk || !s->msgs ||
                    s->owner == NULL)) ||
        (m->seq == 0 && m->session.n == 0) || (m->session.n && !own_session(wk, m->session))) {
        w->msgs_dropped++;
        JRPC_LOG(JRPC_LOG_DEBUG, "workers", "event=message_dropped worker=%s seq=%llu", wk->name,
                 (unsigned long long)m->seq);
        return;
    }
    if (s)
        w->on_msg(s->owner, s->index, m->session, m->body, w->on_msg_arg);
    else
        w->on_msg(NULL, 0, m->session, m->body, w->on_msg_arg);
}

/* A PROBE from wk: an answer (live not nil) about a session of its own
 * instance, from a worker that said it answers them; else dropped. */
static void on_worker_probe(jrpc_workers_t *w, worker_t *wk, const jrpc_wire_msg_t *m)
{
    if (w->on_probe == NULL || !wk->probes || m->live < 0 || !own_session(wk, m->session)) {
        w->msgs_dropped++;
        JRPC_LOG(JRPC_LOG_DEBUG, "workers", "event=probe_dropped worker=%s probe=%llu", wk->name,
                 (unsigned long long)m->probe);
        return;
    }
    w->on_probe(m->probe, m->session, m->live > 0, w->on_probe_arg);
}

static void on_stranger(jrpc_workers_t *w, const peer_t *from, int type, uint32_t nitems)
{
    if (type == JRPC_WIRE_RESPONSE)
        w->late += nitems;
    if (type != JRPC_WIRE_DISCONNECT)
        send_simple(w, from, JRPC_WIRE_DISCONNECT);
}

static void on_malformed(jrpc_workers_t *w, size_t n, int rc)
{
    w->malformed++;
    JRPC_LOG(JRPC_LOG_WARN, "workers", "event=malformed_frame bytes=%zu error=\"%s\"", n,
             jrpc_wire_strerror(rc));
}

/* RESPONSEs, nearly every message, are read in place (no tree: see
 * docs/ARCHITECTURE.md, "RESPONSE frames read in place"); the others are
 * decoded into w->zone. */
static void on_message(jrpc_workers_t *w, const peer_t *from, const char *p, size_t n)
{
    jrpc_metrics_tick();
    jrpc_wire_rsp_t r;
    int rc = jrpc_wire_response_open(p, n, &r);
    if (rc < 0) {
        on_malformed(w, n, rc);
        return;
    }
    if (rc == 0) {
        worker_t *wk = worker_find(w, from);
        if (wk == NULL) {
            on_stranger(w, from, JRPC_WIRE_RESPONSE, r.nitems);
            return;
        }
        wk->last_seen = jrpc_metrics.now;
        wk->seen = true;
        on_response(w, wk, &r);
        return;
    }
    jrpc_wire_msg_t m;
    msgpack_zone_clear(&w->zone);
    rc = jrpc_wire_decode(p, n, &w->zone, &m);
    if (rc < 0) {
        on_malformed(w, n, rc);
        return;
    }
    if (m.type == JRPC_WIRE_READY) {
        on_ready(w, from, &m);
        return;
    }
    worker_t *wk = worker_find(w, from);
    if (wk == NULL) {
        on_stranger(w, from, m.type, m.nitems);
        return;
    }
    wk->last_seen = jrpc_metrics.now;
    wk->seen = true;
    switch (m.type) {
    case JRPC_WIRE_DISCONNECT:
        JRPC_LOG(JRPC_LOG_INFO, "workers", "event=worker_disconnect inflight=%u", wk->inflight);
        wk->draining = true;
        worker_unroute(w, wk);
        break;
    case JRPC_WIRE_HEARTBEAT:
        break;
    case JRPC_WIRE_REJECT:
        on_reject(w, wk, &m);
        break;
    case JRPC_WIRE_MESSAGE:
        on_worker_message(w, wk, &m);
        break;
    case JRPC_WIRE_SCHEMAS:
        on_schemas(w, wk, &m);
        break;
    case JRPC_WIRE_PROBE:
        on_worker_probe(w, wk, &m);
        break;
    default: /* REQUEST is not for us (a RESPONSE never gets here) */
        w->malformed++;
        break;
    }
}

static int on_readable(jrpc_zwatch_t *zw, void *sock)
{
    jrpc_workers_t *w = zw->data;
    for (int budget = 0; budget < READ_BUDGET; budget++) {
        zmq_msg_t id, body;
        int more = 0;
        size_t ml = sizeof more;
        zmq_msg_init(&id);
        if (zmq_msg_recv(&id, sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&id);
            jrpc_workers_flush(w);
            reap(w);
            return 0;
        }
        zmq_msg_init(&body);
        bool ok = zmq_msg_more(&id) && zmq_msg_recv(&body, sock, 0) >= 0;
        zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &ml);
        while (more) { /* a worker message is exactly two frames: drop the rest */
            zmq_msg_t extra;
            zmq_msg_init(&extra);
            zmq_msg_recv(&extra, sock, 0);
            zmq_msg_close(&extra);
            zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &ml);
            ok = false;
        }
        if (ok && zmq_msg_size(&id) <= MAX_ROUTING_ID) {
            peer_t from = { .id = zmq_msg_data(&id), .idlen = zmq_msg_size(&id) };
            on_message(w, &from, zmq_msg_data(&body), zmq_msg_size(&body));
        } else {
            w->malformed++;
        }
        zmq_msg_close(&id);
        zmq_msg_close(&body);
    }
    jrpc_workers_flush(w);
    reap(w);
    return 1;
}

/* The native engine's messages: a worker's is one frame from a DEALER
 * (anything else is malformed, as with libzmq). What they produce leaves
 * in one flush after the read (on_zmtp_read). */
static void on_zmtp_message(void *data, jrpc_zmtp_conn_t *conn, const jrpc_span_t *frames, int n,
                            bool excess, const char *peer_ip)
{
    jrpc_workers_t *w = data;
    if (n != 1 || excess) {
        w->malformed++;
        return;
    }
    peer_t from = { .conn = conn, .ip = peer_ip };
    on_message(w, &from, frames[0].p, frames[0].n);
}

static void on_zmtp_read(void *data)
{
    jrpc_workers_t *w = data;
    jrpc_workers_flush(w);
    reap(w);
}

/* A worker's connection closed (killed, crashed, cut, or it sent what is
 * not ZMTP): it is lost now, not at the next heartbeat, as a send to it
 * would find (libzmq: EHOSTUNREACH). Its calls go elsewhere at once. */
static void on_zmtp_close(void *data, jrpc_zmtp_conn_t *conn)
{
    jrpc_workers_t *w = data;
    worker_t *wk = jrpc_zmtp_conn_data(conn);
    if (w->destroying || wk == NULL || wk->dead)
        return;
    worker_kill(w, wk, "unreachable");
    jrpc_workers_flush(w);   /* its calls, re-dispatched */
    reap(w);
}

/* ---- public ---- */

/* The libzmq ROUTER: CURVE, other transports, or --workers-engine libzmq. */
static int start_libzmq(jrpc_workers_t *w, uv_loop_t *loop, const jrpc_workers_opts_t *opts)
{
    if (jrpc_curve_router(&w->sock, opts->zmq_ctx, opts->endpoint, MAX_FRAME, WORKER_HWM,
                          opts->curve, "workers", "workers") < 0)
        return -1;
    return jrpc_zwatch_start(loop, &w->watch, w->sock, on_readable, w) < 0 ? -1 : 0;
}

void jrpc_workers_done_times(const jrpc_workers_t *w, uint64_t *queue_ns, uint64_t *worker_ns)
{
    *queue_ns = w->done_queue_ns;
    *worker_ns = w->done_worker_ns;
}

jrpc_workers_t *jrpc_workers_new(uv_loop_t *loop, const jrpc_workers_opts_t *opts,
                                 jrpc_done_fn done, void *arg)
{
    jrpc_workers_t *w = calloc(1, sizeof *w);
    if (w == NULL)
        return NULL;
    w->loop = loop;
    w->opts = *opts;
    w->done = done;
    w->done_arg = arg;
    w->free_head = NIL;
    w->generation = (uint32_t)time(NULL) ^ (uint32_t)uv_os_getpid() << 16;
    if (w->opts.max_worker_methods == 0)
        w->opts.max_worker_methods = JRPC_WORKERS_MAX_WORKER_METHODS;
    if (w->opts.max_methods == 0)
        w->opts.max_methods = JRPC_WORKERS_MAX_METHODS;
    if (w->opts.max_method_len == 0)
        w->opts.max_method_len = 65535;
    if (w->opts.max_worker_credit == 0)
        w->opts.max_worker_credit = JRPC_WORKERS_MAX_WORKER_CREDIT;
    if (w->opts.max_worker_bytes == 0)
        w->opts.max_worker_bytes = JRPC_WORKERS_MAX_WORKER_BYTES;
    if (w->opts.eject_ms == 0)
        w->opts.eject_ms = JRPC_WORKERS_EJECT_MS;
    hedge_init(w);
    w->mtab_size = 256;
    w->mtab = calloc(w->mtab_size, sizeof *w->mtab);
    jrpc_buf_init(&w->scratch);
    msgpack_zone_init(&w->zone, 4096);
    if (w->mtab == NULL)
        goto fail;
    /* The native engine unless asked not to, or CURVE is on (libzmq's), or
     * the transport is one it does not speak (inproc://, ...). */
    const char *why = opts->libzmq ? "option" : opts->curve ? "curve"
                      : !jrpc_zmtp_supports(opts->endpoint) ? "transport" : NULL;
    if (why == NULL) {
        jrpc_zmtp_opts_t zo = { .endpoint = opts->endpoint, .max_frame = MAX_FRAME,
                                .hwm = WORKER_HWM, .handshake_ms = HANDSHAKE_MS,
                                .out_keep = OUT_KEEP, .on_close = on_zmtp_close,
                                .on_read = on_zmtp_read };
        if (jrpc_zmtp_new(loop, &zo, on_zmtp_message, w, &w->zmtp) < 0)
            goto fail;
    } else if (start_libzmq(w, loop, opts) < 0) {
        goto fail;
    }
    w->opts.curve = NULL;   /* borrowed: not kept past new */
    uv_timer_init(loop, &w->heartbeat);
    w->heartbeat.data = w;
    uv_timer_init(loop, &w->hedge_timer);
    w->hedge_timer.data = w;
    uv_timer_start(&w->heartbeat, on_heartbeat, opts->heartbeat_ms, opts->heartbeat_ms);
    w->grace_until = now_ms(w) + (uint64_t)opts->heartbeat_ms * opts->liveness;
    JRPC_LOG(JRPC_LOG_INFO, "workers", "event=listening endpoint=%s curve=%s engine=%s%s%s",
             opts->endpoint, opts->curve ? "on" : "off", w->zmtp ? "native" : "libzmq",
             why ? " reason=" : "", why ? why : "");
    return w;
fail:
    if (w->sock)
        zmq_close(w->sock);
    msgpack_zone_destroy(&w->zone);
    free(w->mtab);
    free(w);
    return NULL;
}

/* jrpc_workers_dispatch(); msgs: an MCP call sent with its 6th element. */
static JRPC_ALWAYS_INLINE int dispatch(jrpc_workers_t *w, jrpc_span_t method, jrpc_span_t params,
                           jrpc_span_t params_mp, jrpc_span_t traceparent, uint64_t deadline,
                           uint64_t submitted_ns, bool msgs, void *owner, uint32_t index,
                           uint32_t *handle)
{
    method_t *m = w->hint_m;
    if (m == NULL || !same_name(m, method)) {
        if ((m = method_lookup(w, method.p, method.n)) != NULL)
            w->hint_m = m;
    }
    m = method_target(m);
    w->last_stat = m ? m->stat : JRPC_METRICS_OTHER;
    if (m == NULL || m->nworkers == 0) {
        /* Right after a (re)start the workers have not announced themselves
         * yet: a call waits for them (queued) instead of -32601, until the
         * grace ends. Entries made for names nobody serves are capped. */
        if (w->grace_until == 0 ||
            (m == NULL && (w->nmethods >= MAX_GRACE_METHODS || w->nmethods >= w->opts.max_methods)))
            return -ENOENT;
        if (m == NULL && (m = method_get(w, method.p, method.n)) == NULL)
            return -ENOMEM;
    }
    worker_t *best = method_pick(w, m);
    if (best == NULL && w->queued >= w->opts.max_queue) {
        method_check(w, m);   /* a grace entry made for nothing */
        return -EBUSY;
    }
    uint32_t i = slot_take(w);
    if (i == NIL) {
        method_check(w, m);
        return -ENOMEM;
    }
    /* Field by field, not the whole 176-byte literal (about 25 instructions
     * a call less): a free slot's twin and watch links are NIL already
     * (slot_grow, slot_free, watch_del); what a freed slot may hold stale
     * (resent, flags, sess) is reset here; state, worker, flush_no, bytes
     * and queue_ns are written when it is sent or queued, sent_ms when it
     * is watched. */
    slot_t *s = &w->slots[i];
    s->seq = SLOT_SEQ(w, i);
    s->owner = owner;
    s->index = index;
    s->next = NIL;
    s->resent = 0;
    s->flags = 0;
    s->msgs = msgs;
    s->method = m;
    s->params = params;
    s->params_mp = params_mp;
    s->trace = traceparent;
    s->sess = (jrpc_span_t){ NULL, 0 };
    s->deadline = deadline;
    s->t_ns = submitted_ns;   /* queue time: from the body's arrival */
    m->refs++;
    *handle = i;
    if (best) {
        if (worker_add_call(w, best, i) < 0) {
            slot_free(w, i);
            return -ENOMEM;
        }
        return 0;
    }
    queue_push(w, m, i);
    return 0;
}

int jrpc_workers_dispatch(jrpc_workers_t *w, jrpc_span_t method, jrpc_span_t params,
                          jrpc_span_t params_mp, jrpc_span_t traceparent, uint64_t deadline, uint64_t submitted_ns,
                          void *owner, uint32_t index, uint32_t *handle)
{
    return dispatch(w, method, params, params_mp, traceparent, deadline, submitted_ns, false,
                    owner, index, handle);
}

void jrpc_workers_on_message(jrpc_workers_t *w, jrpc_msg_fn fn, void *arg)
{
    w->on_msg = fn;
    w->on_msg_arg = arg;
}

/* The live worker serving m whose instance is the session's; NULL: none. */
static worker_t *session_worker(jrpc_workers_t *w, method_t *m, jrpc_span_t session)
{
    jrpc_mcp_sid_t sid;
    if (jrpc_mcp_sid_parse(session.p, session.n, &sid) < 0)
        return NULL;
    for (uint32_t j = 0; j < m->nworkers; j++)
        if (m->workers[j]->has_instance && m->workers[j]->instance == sid.instance &&
            !m->workers[j]->draining)
            return m->workers[j];
    (void)w;
    return NULL;
}

int jrpc_workers_dispatch_mcp(jrpc_workers_t *w, jrpc_span_t method, jrpc_span_t params,
                              jrpc_span_t traceparent, uint64_t deadline, uint64_t submitted_ns,
                              const jrpc_workers_mcp_t *mcp, void *owner, uint32_t index,
                              uint32_t *handle)
{
    jrpc_span_t none = { NULL, 0 };
    if (mcp->session.n == 0)
        return dispatch(w, method, params, none, traceparent, deadline, submitted_ns,
                        mcp->messages, owner, index, handle);
    method_t *m = method_target(method_lookup(w, method.p, method.n));
    w->last_stat = m ? m->stat : JRPC_METRICS_OTHER;
    worker_t *wk = m ? session_worker(w, m, mcp->session) : NULL;
    if (wk == NULL)
        return m == NULL || m->nworkers == 0 ? -ENOENT : -ESRCH;
    if (wk->inflight >= wk->credit + SESSION_EXTRA)
        return -EBUSY;
    uint32_t i = slot_take(w);
    if (i == NIL)
        return -ENOMEM;
    w->slots[i] = (slot_t){ SLOT_NEW(w, i), .owner = owner, .index = index, .method = m,
                            .params = params, .trace = traceparent, .deadline = deadline,
                            .t_ns = submitted_ns, .sess = mcp->session, .msgs = true };
    m->refs++;
    *handle = i;
    if (worker_add_call(w, wk, i) < 0) {
        slot_free(w, i);
        return -ENOMEM;
    }
    return 0;
}

/* Sends b's bytes to wk and disposes of b; rc: what building them returned. */
static int send_built(jrpc_workers_t *w, worker_t *wk, jrpc_buf_t *b, int rc)
{
    if (rc == 0) {
        peer_t to = worker_peer(wk);
        rc = send_to(w, &to, b->p, b->len);
    }
    jrpc_buf_dispose(b);
    return rc;
}

int jrpc_workers_message(jrpc_workers_t *w, uint64_t instance, jrpc_span_t session,
                         jrpc_span_t body)
{
    worker_t *wk = instance_worker(w, instance);
    if (wk == NULL)
        return -ESRCH;
    jrpc_buf_t b;
    jrpc_buf_init(&b);
    return send_built(w, wk, &b, jrpc_wire_put_message(&b, 0, session, body));
}

int jrpc_workers_probe(jrpc_workers_t *w, uint64_t instance, uint64_t probe, jrpc_span_t session)
{
    worker_t *wk = instance_worker(w, instance);
    if (wk == NULL)
        return -ESRCH;
    if (!wk->probes)
        return -ENOTSUP;
    jrpc_buf_t b;
    jrpc_buf_init(&b);
    return send_built(w, wk, &b, jrpc_wire_put_probe(&b, probe, session, -1));
}

void jrpc_workers_on_probe(jrpc_workers_t *w, jrpc_probe_fn fn, void *arg)
{
    w->on_probe = fn;
    w->on_probe_arg = arg;
}

void jrpc_workers_cancel(jrpc_workers_t *w, uint32_t handle, int why)
{
    slot_t *s = &w->slots[handle];
    if (s->owner == NULL)
        return;
    s->owner = NULL;
    if (s->twin != NIL)   /* a hedged call: both copies */
        w->slots[s->twin].owner = NULL;
    if (s->state == SLOT_QUEUED)
        w->queued--; /* the slot is freed when it reaches the head of its queue */
    worker_t *wk = s->worker;
    if (why == JRPC_CANCEL_TIMEOUT && s->state == SLOT_SENT)
        wk->timeouts_all++;
    if (why != JRPC_CANCEL_TIMEOUT || s->state != SLOT_SENT || wk->dead || !wk->routed ||
        w->opts.eject_after == 0 || wk->ejected_until)
        return;
    if (++wk->timeouts >= w->opts.eject_after)
        worker_set_ejected(w, wk, true);
}

void jrpc_workers_flush(jrpc_workers_t *w)
{
    bool sent = false, again = true;
    /* A failed send re-dispatches that worker's calls, possibly to a worker
     * already passed in this round: go round until nothing is left. Each
     * round ends with a send or with one worker fewer, so this ends. */
    while (again) {
        again = false;
        for (worker_t *wk = w->workers; wk; wk = wk->next) {
            if (wk->dead || wk->out_n == 0)
                continue;
            jrpc_wire_put_request_end(&wk->out, wk->out_n);
            wk->out_n = 0;
            peer_t to = worker_peer(wk);
            int rc = send_to(w, &to, wk->out.p, wk->out.len);
            sent = true;
            if (rc == 0) {
                wk->flushes++;
                continue;
            }
            /* EHOSTUNREACH: it is gone; EAGAIN: it stopped reading. Either
             * way nothing was queued, so this REQUEST was not delivered. */
            worker_kill(w, wk, rc == -EHOSTUNREACH ? "unreachable" : "send_blocked");
            again = true;
        }
    }
    if (sent && w->sock)
        jrpc_zwatch_kick(&w->watch);
}

void jrpc_workers_stats(const jrpc_workers_t *w, jrpc_workers_stats_t *st)
{
    st->workers = w->nworkers;
    st->inflight = w->inflight;
    st->queued = w->queued;
    st->late = w->late;
    st->malformed = w->malformed;
    st->redispatched = w->redispatched;
    st->lost = w->lost;
    st->methods = w->nmethods;
    st->ready_refused = w->ready_refused;
    st->methods_refused = w->methods_refused;
    st->ejections = w->ejections;
    st->hedges = w->hedges;
    st->hedges_won = w->hedges_won;
}

uint32_t jrpc_workers_last_stat(const jrpc_workers_t *w)
{
    return w->last_stat;
}

/* The worker's label (jrpc_workers_each_credit's rule) into label. */
static void worker_label(const jrpc_workers_t *w, const worker_t *wk, char *label, size_t size)
{
    /* Two workers may give the same name: the later ones get their id
     * appended, so that every series stays distinct. */
    bool dup = false;
    for (const worker_t *o = w->workers; o != wk && !dup; o = o->next)
        dup = !o->dead && strcmp(o->name, wk->name) == 0;
    size_t n = strlen(wk->name);
    memcpy(label, wk->name, n + 1);
    if (dup) {
        label[n++] = '@';
        for (size_t i = 0; i < wk->idlen; i++)
            n += (size_t)snprintf(label + n, size - n, "%02x", (uint8_t)wk->id[i]);
    }
}

/* Unix time (s) of a jrpc_metrics clock reading (ns, monotonic). */
static double wall_of(uint64_t t)
{
    uint64_t mono = uv_hrtime();
    uv_timeval64_t tv;
    double wall = uv_gettimeofday(&tv) == 0 ? (double)tv.tv_sec + tv.tv_usec / 1e6 : 0;
    return wall - (double)(mono > t ? mono - t : 0) / 1e9;
}

void jrpc_workers_each_worker(jrpc_workers_t *w, jrpc_metrics_worker_fn fn, void *arg)
{
    for (worker_t *wk = w->workers; wk; wk = wk->next) {
        if (wk->dead)
            continue;
        char label[MAX_NAME + 2 + 2 * MAX_ROUTING_ID];
        worker_label(w, wk, label, sizeof label);
        jrpc_metrics_worker_t f = {
            .label = label, .credit_left = wk->credit > wk->inflight ? wk->credit - wk->inflight : 0,
            .inflight = wk->inflight, .answered = wk->answered, .errors = wk->errors,
            .timeouts = wk->timeouts_all, .ejections = wk->ejections,
            .last_heard = wall_of(wk->last_seen) };
        fn(arg, &f);
    }
}

/* jrpc_workers_each_credit through jrpc_workers_each_worker. */
typedef struct credit_arg {
    jrpc_credit_fn fn;
    void          *arg;
} credit_arg_t;

static void credit_of(void *arg, const jrpc_metrics_worker_t *f)
{
    const credit_arg_t *c = arg;
    c->fn(c->arg, f->label, f->credit_left);
}

void jrpc_workers_each_credit(jrpc_workers_t *w, jrpc_credit_fn fn, void *arg)
{
    jrpc_workers_each_worker(w, credit_of, &(credit_arg_t){ fn, arg });
}

/* Frees the method table, the slots and w itself: what is left once the
 * workers are freed, but the socket (the tests share one among theirs). */
static void free_rest(jrpc_workers_t *w)
{
    for (uint32_t b = 0; b < w->mtab_size; b++) {
        while (w->mtab[b]) {
            method_t *m = w->mtab[b];
            w->mtab[b] = m->next;
            free(m->workers);
            free(m->lat);
            free(m->name);
            free(m);
        }
    }
    free(w->mtab);
    free(w->slots);
    jrpc_buf_dispose(&w->scratch);
    msgpack_zone_destroy(&w->zone);
    free(w);
}

static void on_closed_handle(uv_handle_t *h)
{
    jrpc_workers_t *w = h->data;
    if (--w->closing > 0)
        return;
    free_workers(w);
    if (w->sock)
        zmq_close(w->sock);
    free_rest(w);
}

static void on_closed_watch(jrpc_zwatch_t *zw)
{
    on_closed_handle((uv_handle_t *)&((jrpc_workers_t *)zw->data)->heartbeat);
}

void jrpc_workers_destroy(jrpc_workers_t **self_p)
{
    jrpc_workers_t *w = *self_p;
    if (w == NULL)
        return;
    *self_p = NULL;
    /* "I am leaving" (PROTOCOL.md 6): each worker opens a fresh session at
     * once, which reaches whichever broker comes back at this address
     * (a rolling restart), instead of finding out by liveness; one that
     * found us by name also resolves the name again. The linger lets the
     * DISCONNECTs leave: zmq_ctx_term() waits for them, at most this long. */
    w->destroying = true;
    uint32_t told = 0;
    for (worker_t *wk = w->workers; wk != NULL; wk = wk->next) {
        peer_t to = worker_peer(wk);
        if (!wk->dead && send_simple(w, &to, JRPC_WIRE_DISCONNECT) == 0)
            told++;
    }
    JRPC_LOG(JRPC_LOG_INFO, "workers", "event=disconnect_sent workers=%u of=%u", told, w->nworkers);
    w->closing = 2;
    uv_close((uv_handle_t *)&w->heartbeat, on_closed_handle);
    uv_close((uv_handle_t *)&w->hedge_timer, on_closed_handle);
    if (w->zmtp) {
        /* The DISCONNECTs start leaving now; the engine lingers for them on
         * the loop (uv_run returns once they are out or the time is up) and
         * frees itself with the last connection the workers let go of. */
        jrpc_zmtp_destroy(&w->zmtp, DISCONNECT_LINGER_MS);
        return;
    }
    int linger = DISCONNECT_LINGER_MS;
    zmq_setsockopt(w->sock, ZMQ_LINGER, &linger, sizeof linger);
    w->closing++;
    jrpc_zwatch_stop(&w->watch, on_closed_watch);
}
