/* jrpc_front_timer — the HTTP front's deadlines: idle, headers, body,
 * write stall, linger, TLS handshake; a queue per kind under one libuv
 * timer, and what each expiry does to its connection.
 *
 * Not here: the durations' options (jrpc_front_http.h), what arms them
 * (the reading and writing paths in jrpc_front_http and jrpc_front_answer),
 * a WebSocket session's own idle and ping deadlines (jrpc_front_ws). */
#include "jrpc_front_http_int.h"

#include "jrpc_errors.h"
#include "jrpc_log.h"
#include "jrpc_metrics.h"

/* ---- timers ------------------------------------------------------------ */

/* One libuv timer per front, not per connection: each timeout kind has one
 * duration, so a queue per kind, appended at the tail, stays sorted by
 * deadline, and arming is O(1). A timer per connection cost three heap
 * operations per request, and with 10,000 idle connections in the heap
 * those were 14% of an HTTP call (bench/README.md, "Profile"). */
static void on_tick(uv_timer_t *t);

static enum tslot slot_of(enum tmode mode)
{
    return mode == T_WRITE ? TS_WRITE : TS_READ;
}

void tq_remove(conn_t *c, enum tslot s)
{
    jrpc_front_http_t *f = c->front;
    struct tlink *l = &c->tl[s];
    if (l->mode == T_NONE)
        return;
    if (l->prev)
        l->prev->tl[s].next = l->next;
    else
        f->tq[l->mode].head = l->next;
    if (l->next)
        l->next->tl[s].prev = l->prev;
    else
        f->tq[l->mode].tail = l->prev;
    l->prev = l->next = NULL;
    l->mode = T_NONE;
}

static void tick_arm(jrpc_front_http_t *f, uint64_t at)
{
    uint64_t now = uv_now(f->loop);
    f->tick_at = at;
    uv_timer_start(&f->tick, on_tick, at > now ? at - now : 0, 0);
}

/* Arms mode's deadline in its slot (replacing what that slot held). */
void arm(conn_t *c, enum tmode mode)
{
    const jrpc_front_http_opts_t *o = &c->front->opts;
    uint64_t ms = 0;
    enum tslot s = slot_of(mode);
    tq_remove(c, s);
    switch (mode) {
    case T_NONE:
    case T_NMODES:
        return;
    case T_IDLE: ms = o->idle_timeout_ms; break;
    case T_WRITE:
        ms = o->write_timeout_ms;
        c->wq_mark = uv_stream_get_write_queue_size((const uv_stream_t *)&c->tcp);
        break;
    case T_HEADERS: ms = o->header_timeout_ms; break;
    case T_BODY: ms = o->body_timeout_ms; break;
    case T_LINGER: ms = LINGER_MS; break;
    case T_HANDSHAKE: ms = o->tls_handshake_timeout_ms; break;
    }
    jrpc_front_http_t *f = c->front;
    if (c->closed)
        return; /* freed soon: in no queue */
    struct tlink *l = &c->tl[s];
    l->mode = (uint8_t)mode;
    l->deadline = uv_now(f->loop) + ms;
    l->prev = f->tq[mode].tail;
    l->next = NULL;
    if (l->prev)
        l->prev->tl[s].next = c;
    else
        f->tq[mode].head = c;
    f->tq[mode].tail = c;
    tick_by(f, l->deadline);
}

void tick_by(jrpc_front_http_t *f, uint64_t at)
{
    if (f->tick_at == 0 || at < f->tick_at)
        tick_arm(f, at);
}

/* Stops the reading side's deadline (the write deadline is on its own). */
void disarm_read(conn_t *c)
{
    tq_remove(c, TS_READ);
}

/* c's deadline has passed in the given mode (already out of its queue). */
static void expire(conn_t *c, enum tmode mode)
{
    switch (mode) {
    case T_HEADERS:
    case T_BODY: {
        JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=refused status=408 reason=\"%s timeout\"",
                 mode == T_HEADERS ? "header" : "body");
        req_t *r = c->tail && c->tail->state == R_PARSING ? c->tail : rec_new(c);
        if (r == NULL) {
            conn_close(c);
            return;
        }
        rec_error(c, r, 408, JRPC_INVALID_REQUEST, "request not received in time");
        r->close = true;
        c->no_more = true;
        c->phase = PH_IDLE;
        read_stop(c);
        flush(c);
        break;
    }
    case T_WRITE: {
        if (!c->writing)
            break; /* done meanwhile (not expected: on_write disarms) */
        /* Stalled means no progress: a slow reader that takes bytes keeps
         * its connection (nginx's send_timeout is the same rule). */
        size_t q = uv_stream_get_write_queue_size((const uv_stream_t *)&c->tcp);
        if (q < c->wq_mark || c->wprogress) { /* (a WebSocket's writes: one done since) */
            c->wprogress = false;
            arm(c, T_WRITE);
            break;
        }
        JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=write_stalled queued=%zu pending=%u", q, c->nreq);
        conn_close(c);
        break;
    }
    case T_HANDSHAKE:
        jrpc_metrics.tls_failed++;
        JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=tls_failed reason=\"handshake timeout\" peer=%.*s",
                 (int)c->peer_len, c->peer);
        conn_close(c);
        break;
    default:
        conn_close(c);
        break;
    }
}

static void on_tick(uv_timer_t *t)
{
    jrpc_front_http_t *f = t->data;
    uint64_t now = uv_now(f->loop);
    f->tick_at = 0;
    for (int m = T_NONE + 1; m < T_NMODES; m++) {
        enum tslot s = slot_of((enum tmode)m);
        conn_t *c;
        /* expire() may close c or arm it again (at a later deadline, at the tail). */
        while ((c = f->tq[m].head) != NULL && c->tl[s].deadline <= now) {
            tq_remove(c, s);
            expire(c, (enum tmode)m);
        }
    }
    uint64_t next = f->nprobes ? mcp_probes_expire(f, now) : 0;
    for (int m = T_NONE + 1; m < T_NMODES; m++) {
        const conn_t *h = f->tq[m].head;
        uint64_t d = h ? h->tl[slot_of((enum tmode)m)].deadline : 0;
        if (h && (next == 0 || d < next))
            next = d;
    }
    if (next != 0 && (f->tick_at == 0 || next < f->tick_at))
        tick_arm(f, next);
}
