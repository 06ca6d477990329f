/* jrpc_worker_tick — heartbeats and liveness in jrpc_worker (see
 * jrpc_worker.h; the state is in jrpc_worker_int.h): the tick that
 * heartbeats each conn, finds a silent broker lost and retries closed
 * sessions, the broker's settings adopted, retired conns freed.
 *
 * Heartbeat settings are per conn: ours (opts) until the broker's first
 * HEARTBEAT carries its own, which rule that session from then on (the
 * broker sends them at once after READY; PROTOCOL.md 5). One tick serves
 * every conn, so it runs at the shortest interval in use. */
#include "jrpc_worker_int.h"

#include "jrpc_log.h"

/* ---- heartbeats and liveness ---- */

static void on_tick(uv_timer_t *t);

/* Runs the tick at the shortest heartbeat interval in use, so that each
 * conn heartbeats and checks liveness at least once per interval of its own. */
void jrpc_worker_tick_update(jrpc_worker_t *w)
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
void jrpc_worker_conn_adopt(conn_t *c, uint32_t hb_ms, uint32_t liveness)
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
    jrpc_worker_tick_update(w);
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
            jrpc_worker_conn_close(c, c->alive ? (int)w->opts.linger_ms : 0);
        } else if (c->sock == NULL) {
            if (c->retiring)
                continue; /* closed for good; freed once its calls are gone */
            /* a session a drain lost, or a pause closed, stays closed (and quiet) */
            if (!w->draining && !w->paused)
                jrpc_worker_conn_reset(c, "retry");
        } else if (c->reset_due) {
            jrpc_worker_conn_reset(c, "disconnect");
        } else if (now - c->last_recv >= hb * c->liveness) {
            if (c->alive)
                JRPC_LOG(JRPC_LOG_WARN, "worker", "event=broker_lost endpoint=%s silent_ms=%llu",
                         c->endpoint, (unsigned long long)(now - c->last_recv));
            else
                JRPC_LOG(JRPC_LOG_DEBUG, "worker", "event=broker_unreachable endpoint=%s",
                         c->endpoint);
            if (c->rs != NULL && c->alive) /* gone from the name, perhaps: ask it again */
                jrpc_worker_resolver_start(c->rs);
            jrpc_worker_conn_reset(c, "silence");
        } else if (now - c->last_send >= hb - hb / 10) {
            /* Timer ticks drift a little; a heartbeat slightly early is harmless. */
            jrpc_worker_conn_send_bare(c, JRPC_WIRE_HEARTBEAT);
        }
    }
}

void jrpc_worker_tick_start(jrpc_worker_t *w)
{
    if (w->tick_started)
        return;
    w->tick_ms = w->opts.heartbeat_ms;
    uv_timer_start(&w->tick, on_tick, w->tick_ms, w->tick_ms);
    w->tick_started = true;
}
