/* jrpc_hedge — hedged calls in jrpc_workers (see jrpc_workers.h; the state
 * is in jrpc_workers_int.h).
 *
 * Hedging (opts.hedge_budget_pct): a call sent to a worker that declared
 * its method idempotent joins the watch list (slots linked in the order
 * they were sent); a timer walks it from the oldest and gives a call that
 * has waited past its method's threshold a twin slot: the same owner,
 * index and params, sent to another worker. The two slots point at each
 * other; the first answer finishes the call and takes the owner from the
 * other, whose answer is then dropped when it comes (so credit stays
 * exact), and a twin whose worker is lost simply goes away. */
#include "jrpc_workers_int.h"

#define HEDGE_COST  100      /* budget units a hedge spends; a call earns budget_pct */
#define HEDGE_BURST (20 * HEDGE_COST)   /* budget kept at most: 20 hedges at once */

static void on_hedge_tick(uv_timer_t *t);

/* Call i was just given to wk: a first send earns hedging budget, and a
 * call of a method wk declared idempotent is watched (at the tail: the
 * list stays in the order of sending). */
void hedge_watch(jrpc_workers_t *w, worker_t *wk, uint32_t i)
{
    slot_t *s = &w->slots[i];
    if (s->flags & SL_HEDGE)
        return;
    if (s->resent == 0 && w->hedge_budget < HEDGE_BURST)
        w->hedge_budget += w->opts.hedge_budget_pct;
    watch_del(w, i);   /* sent again: watched from now */
    if (s->twin != NIL || s->sess.n > 0 || !worker_idempotent(wk, s->method))
        return;   /* a session's call has one worker only */
    s->flags |= SL_WATCHED;
    s->sent_ms = now_ms(w);
    s->wprev = w->wtail;
    s->wnext = NIL;
    if (w->wtail == NIL)
        w->whead = i;
    else
        w->slots[w->wtail].wnext = i;
    w->wtail = i;
    if (!uv_is_active((uv_handle_t *)&w->hedge_timer)) {
        uint64_t tick = w->opts.hedge_min_ms / 2 ? w->opts.hedge_min_ms / 2 : 1;
        uv_timer_start(&w->hedge_timer, on_hedge_tick, tick, tick);
    }
}

/* The hedging defaults and tables (the rest of w is zero). */
void hedge_init(jrpc_workers_t *w)
{
    static const uint32_t quarter[4] = { 1000, 1189, 1414, 1682 };   /* 2^(k/4), per mille */
    if (w->opts.hedge_min_ms == 0)
        w->opts.hedge_min_ms = 10;
    if (w->opts.hedge_max_ms < w->opts.hedge_min_ms)
        w->opts.hedge_max_ms = w->opts.hedge_min_ms > 1000 ? w->opts.hedge_min_ms : 1000;
    w->whead = w->wtail = NIL;
    for (uint32_t b = 0; b < LAT_BUCKETS; b++)   /* LAT_BASE_US × 2^((b+1)/4) */
        w->lat_edge[b] = (uint32_t)((uint64_t)LAT_BASE_US * quarter[(b + 1) % 4] / 1000
                                    << ((b + 1) / 4));
}

/* An answer of m came ns after its REQUEST left: counted for m's p95. */
void lat_observe(jrpc_workers_t *w, method_t *m, uint64_t ns)
{
    if (m->lat == NULL && (m->lat = calloc(LAT_BUCKETS, sizeof *m->lat)) == NULL)
        return;
    uint64_t us = ns / 1000;
    uint32_t lo = 0, hi = LAT_BUCKETS - 1;   /* the first bucket whose edge is >= us */
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (w->lat_edge[mid] >= us)
            hi = mid;
        else
            lo = mid + 1;
    }
    m->lat[lo]++;
    if (++m->nlat >= LAT_DECAY) {
        m->nlat = 0;
        for (uint32_t b = 0; b < LAT_BUCKETS; b++)
            m->nlat += (m->lat[b] /= 2);
    }
    if (m->nlat % 32 == 0 && m->nlat >= LAT_MIN_N) {
        uint32_t want = m->nlat - m->nlat / 20, cum = 0, b = 0;   /* 95 % of them */
        while (b < LAT_BUCKETS - 1 && (cum += m->lat[b]) < want)
            b++;
        m->p95_ms = (w->lat_edge[b] + 999) / 1000;
    }
}

/* How long a call of m may wait before it is hedged. */
static uint64_t hedge_after_ms(const jrpc_workers_t *w, const method_t *m)
{
    uint64_t t = m->p95_ms ? m->p95_ms : w->opts.hedge_max_ms;
    if (t < w->opts.hedge_min_ms)
        t = w->opts.hedge_min_ms;
    return t > w->opts.hedge_max_ms ? w->opts.hedge_max_ms : t;
}

/* Gives call i a twin at another worker that declared its method
 * idempotent and has room. Returns 0, or -ENOENT (none), -ENOMEM. */
static int hedge(jrpc_workers_t *w, uint32_t i)
{
    method_t *m = w->slots[i].method;
    worker_t *held = w->slots[i].worker, *best = NULL;
    uint32_t best_free = 0;
    for (uint32_t k = 0; k < m->nworkers; k++) {
        worker_t *wk = m->workers[k];
        uint32_t fr = wk->credit - wk->inflight;
        if (wk != held && worker_has_room(w, wk) && worker_eligible(wk, m) && fr > best_free &&
            worker_idempotent(wk, m)) {
            best = wk;
            best_free = fr;
        }
    }
    if (best == NULL)
        return -ENOENT;
    uint32_t j = slot_take(w);
    if (j == NIL)
        return -ENOMEM;
    const slot_t s = w->slots[i];   /* read after the take: the slots may have moved */
    w->slots[j] = (slot_t){ SLOT_NEW(w, j), .owner = s.owner, .index = s.index, .method = m,
                            .params = s.params, .trace = s.trace, .deadline = s.deadline,
                            .t_ns = jrpc_metrics.now, .flags = SL_HEDGE };
    m->refs++;
    if (worker_add_call(w, best, j) < 0) {
        slot_free(w, j);
        return -ENOMEM;
    }
    w->slots[i].twin = j;
    w->slots[j].twin = i;
    w->hedge_budget -= HEDGE_COST;
    w->hedges++;
    return 0;
}

/* Walks the watch list from its oldest call: those past their method's
 * threshold are hedged while the budget lasts; the walk stops at the first
 * call younger than hedge_min_ms (all after it are younger still). A call
 * that cannot be hedged now (no budget, no other worker with room) is
 * tried again at the next tick, until it is 2 × hedge_max_ms old. */
static void on_hedge_tick(uv_timer_t *t)
{
    jrpc_workers_t *w = t->data;
    uint64_t now = now_ms(w);
    bool sent = false;
    jrpc_metrics_tick();
    for (uint32_t i = w->whead, next; i != NIL; i = next) {
        slot_t *s = &w->slots[i];
        next = s->wnext;
        uint64_t age = now - s->sent_ms;
        if (age < w->opts.hedge_min_ms)
            break;
        if (s->owner == NULL || s->twin != NIL) {
            watch_del(w, i);
            continue;
        }
        if (age < hedge_after_ms(w, s->method))
            continue;
        if (w->hedge_budget >= HEDGE_COST && hedge(w, i) == 0) {
            sent = true;
            watch_del(w, i);
        } else if (age > 2 * (uint64_t)w->opts.hedge_max_ms) {
            watch_del(w, i);
        }
    }
    if (sent)
        jrpc_workers_flush(w);
    if (w->whead == NIL)
        uv_timer_stop(t);
}
