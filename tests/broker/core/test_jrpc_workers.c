/* Unit tests of the broker's worker sessions (broker/core/jrpc_workers.c and
 * the files beside it, compiled in to reach its handler): what a hostile
 * worker may claim (issue 19). The module sits on an inproc ROUTER; workers "A" and "B" are
 * DEALERs nobody reads (so sends to them succeed); frames are handed to
 * on_message() directly and the heartbeat timer's callback is called by
 * hand, so nothing here depends on time passing. */
#include "workers_harness.h"

static int buf_write(void *d, const char *p, size_t n)
{
    return jrpc_buf_append(d, p, n) < 0 ? -1 : 0;
}

/* READY [1, 1, credit, [prefix0, prefix1, ...], {"name": name}?] from id. */
static void ready(jrpc_workers_t *w, char id, uint32_t credit, const char *prefix, uint32_t n,
                  const char *name, size_t name_len)
{
    jrpc_buf_t b;
    jrpc_buf_init(&b);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &b, buf_write);
    msgpack_pack_array(&pk, name ? 5 : 4);
    msgpack_pack_uint8(&pk, 1);
    msgpack_pack_uint8(&pk, 1);
    msgpack_pack_uint32(&pk, credit);
    msgpack_pack_array(&pk, n);
    for (uint32_t i = 0; i < n; i++) {
        char m[64];
        int k = n == 1 ? snprintf(m, sizeof m, "%s", prefix) : snprintf(m, sizeof m, "%s%u", prefix, i);
        msgpack_pack_str(&pk, (size_t)k);
        msgpack_pack_str_body(&pk, m, (size_t)k);
    }
    if (name) {
        msgpack_pack_map(&pk, 1);
        msgpack_pack_str(&pk, 4);
        msgpack_pack_str_body(&pk, "name", 4);
        msgpack_pack_str(&pk, name_len);
        msgpack_pack_str_body(&pk, name, name_len);
    }
    jrpc_metrics_tick();
    on_message(w, &(peer_t){ .id = &id, .idlen = 1 }, b.p, b.len);
    jrpc_buf_dispose(&b);
}

static void heartbeat_from(jrpc_workers_t *w, char id)
{
    static const char hb[] = { (char)0x92, 1, 4 };
    jrpc_metrics_tick();
    on_message(w, &(peer_t){ .id = &id, .idlen = 1 }, hb, sizeof hb);
}


/* High 1: a callback that held the loop for longer than the liveness (the
 * tick then sees an old last_seen, with the worker's heartbeats still
 * unread) does not expire the worker; silence over `liveness` ticks does. */
static void test_liveness_not_faked_by_a_long_callback(void **state)
{
    (void)state;
    jrpc_workers_t *w = make(0);
    ready(w, 'A', 4, "m", 1, NULL, 0);
    on_heartbeat(&w->heartbeat);
    assert_non_null(find(w, 'A'));
    find(w, 'A')->last_seen -= 60ull * 1000 * NS_PER_MS;   /* a minute-long callback */
    on_heartbeat(&w->heartbeat);                             /* the tick runs first */
    assert_non_null(find(w, 'A'));
    heartbeat_from(w, 'A');                                  /* then its heartbeat is read */
    on_heartbeat(&w->heartbeat);
    assert_non_null(find(w, 'A'));
    find(w, 'A')->last_seen -= 60ull * 1000 * NS_PER_MS;
    for (int i = 0; i < 2; i++) {                            /* silent: 3 ticks to go */
        on_heartbeat(&w->heartbeat);
        assert_non_null(find(w, 'A'));
    }
    on_heartbeat(&w->heartbeat);
    assert_null(find(w, 'A'));
    assert_int_equal(w->nworkers, 0);
    reap(w);
    destroy(w);
}

/* High 1: past --max-worker-methods the READY is refused; the table does
 * not grow; duplicates in a READY count once. */
static void test_ready_caps(void **state)
{
    (void)state;
    jrpc_workers_t *w = make(0);
    ready(w, 'A', 4, "n", JRPC_WORKERS_MAX_WORKER_METHODS + 1, NULL, 0);
    assert_int_equal(w->nworkers, 0);
    assert_int_equal(w->ready_refused, 1);
    assert_int_equal(w->nmethods, 0);
    ready(w, 'A', 4, "n", JRPC_WORKERS_MAX_WORKER_METHODS, NULL, 0);
    assert_int_equal(w->nworkers, 1);
    assert_int_equal(find(w, 'A')->nmethods, JRPC_WORKERS_MAX_WORKER_METHODS);
    assert_int_equal(w->nmethods, JRPC_WORKERS_MAX_WORKER_METHODS);
    assert_true(w->mtab_size >= JRPC_WORKERS_MAX_WORKER_METHODS);   /* the table grew */
    w->opts.max_methods = JRPC_WORKERS_MAX_WORKER_METHODS + 10;
    ready(w, 'B', 4, "o", 11, NULL, 0);   /* 11 new names: one too many */
    assert_int_equal(w->ready_refused, 2);
    assert_null(find(w, 'B'));
    ready(w, 'B', 4, "n", 11, NULL, 0);   /* known names: fine */
    assert_non_null(find(w, 'B'));
    assert_int_equal(w->nmethods, JRPC_WORKERS_MAX_WORKER_METHODS);
    reap(w);
    destroy(w);
}

/* Medium 6: READYs with new names in turn, each replacing the last: the
 * table holds the last one's names only. */
static void test_ready_churn_frees_methods(void **state)
{
    (void)state;
    jrpc_workers_t *w = make(0);
    for (int r = 0; r < 50; r++) {
        char prefix[16];
        snprintf(prefix, sizeof prefix, "r%d_", r);
        ready(w, 'A', 4, prefix, 100, NULL, 0);
        assert_int_equal(w->nmethods, 100);
    }
    assert_int_equal(w->nworkers, 1);
    reap(w);
    destroy(w);
}

/* High 4 and Medium 9: credit capped; a name that is no label is not used. */
static void test_credit_cap_and_name(void **state)
{
    (void)state;
    jrpc_workers_t *w = make(0);
    ready(w, 'A', UINT32_MAX, "m", 1, "\xff\n} x", 5);
    assert_int_equal(find(w, 'A')->credit, JRPC_WORKERS_MAX_WORKER_CREDIT);
    assert_string_equal(find(w, 'A')->name, "41");   /* "A" in hex */
    ready(w, 'B', 3, "m", 1, "w-1.b:x@y/z_", 12);
    assert_string_equal(find(w, 'B')->name, "w-1.b:x@y/z_");
    reap(w);
    destroy(w);
}

/* High 4: --eject-after timeouts in a row eject a worker; calls then go to
 * another; when every worker of the method is ejected they are used anyway;
 * the ejection ends. */
static void test_ejection(void **state)
{
    (void)state;
    jrpc_workers_t *w = make(2);
    static const char params[] = "[]";   /* the client's JSON text */
    jrpc_span_t m = { "m", 1 }, none = { NULL, 0 }, p = { params, 2 };
    ready(w, 'A', UINT32_MAX, "m", 1, NULL, 0);
    ready(w, 'B', 2, "m", 1, NULL, 0);
    worker_t *a = find(w, 'A'), *b = find(w, 'B');
    uint32_t h[4];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(jrpc_workers_dispatch(w, m, p, (jrpc_span_t){ NULL, 0 }, none, 1000, 0, &G, (uint32_t)i, &h[i]), 0);
        assert_ptr_equal(w->slots[h[i]].worker, a);   /* most free credit */
    }
    jrpc_workers_flush(w);
    jrpc_workers_cancel(w, h[0], JRPC_CANCEL_GONE);      /* a client gone: not A's fault */
    assert_int_equal(a->timeouts, 0);
    jrpc_workers_cancel(w, h[1], JRPC_CANCEL_TIMEOUT);
    assert_int_equal(a->timeouts, 1);
    assert_int_equal(jrpc_workers_dispatch(w, m, p, (jrpc_span_t){ NULL, 0 }, none, 1000, 0, &G, 2, &h[2]), 0);
    assert_ptr_equal(w->slots[h[2]].worker, a);
    jrpc_workers_cancel(w, h[2], JRPC_CANCEL_TIMEOUT);
    assert_true(a->ejected_until != 0);
    assert_int_equal(w->ejections, 1);
    assert_int_equal(jrpc_workers_dispatch(w, m, p, (jrpc_span_t){ NULL, 0 }, none, 1000, 0, &G, 3, &h[3]), 0);
    assert_ptr_equal(w->slots[h[3]].worker, b);          /* A is ejected */
    /* B lost: A is the only one left, ejected or not, and gets the calls. */
    jrpc_workers_flush(w);
    worker_kill(w, b, "test");
    assert_int_equal(G.done, 1);                          /* h[3] failed (not idempotent) */
    uint32_t h4;
    assert_int_equal(jrpc_workers_dispatch(w, m, p, (jrpc_span_t){ NULL, 0 }, none, 1000, 0, &G, 4, &h4), 0);
    assert_ptr_equal(w->slots[h4].worker, a);
    /* The ejection ends at a tick after its time. */
    a->ejected_until = 1;
    heartbeat_from(w, 'A');
    on_heartbeat(&w->heartbeat);
    assert_int_equal(a->ejected_until, 0);
    reap(w);
    destroy(w);
}

/* READY from id for method "m", idempotent or not, credit 8. */
static void ready_m(jrpc_workers_t *w, char id, bool idem)
{
    static const char *const names[] = { "m" };
    jrpc_wire_ready_opts_t o = { .idempotent = names, .nidempotent = idem ? 1 : 0 };
    jrpc_buf_t b;
    jrpc_buf_init(&b);
    assert_int_equal(jrpc_wire_put_ready_opts(&b, 8, names, 1, &o), 0);
    jrpc_metrics_tick();
    on_message(w, &(peer_t){ .id = &id, .idlen = 1 }, b.p, b.len);
    jrpc_buf_dispose(&b);
}

/* A RESPONSE from id answering seq with null. */
static void answer_from(jrpc_workers_t *w, char id, uint64_t seq)
{
    jrpc_buf_t b;
    jrpc_buf_init(&b);
    assert_int_equal(jrpc_wire_put_response_begin(&b), 0);
    assert_int_equal(jrpc_wire_put_result_head(&b, seq), 0);
    assert_int_equal(jrpc_buf_append(&b, "\xc0", 1), 0);
    jrpc_wire_put_response_end(&b, 1);
    jrpc_metrics_tick();
    on_message(w, &(peer_t){ .id = &id, .idlen = 1 }, b.p, b.len);
    jrpc_buf_dispose(&b);
}

/* Dispatches call index of "m", sends it, makes it older than hedge_max_ms
 * and runs a hedge tick. Returns its handle. */
static uint32_t old_call(jrpc_workers_t *w, uint32_t index)
{
    static const char params[] = "[]";   /* the client's JSON text */
    uint32_t h;
    assert_int_equal(jrpc_workers_dispatch(w, (jrpc_span_t){ "m", 1 }, (jrpc_span_t){ params, 2 }, (jrpc_span_t){ NULL, 0 },
                                           (jrpc_span_t){ NULL, 0 }, 100000, 0, &G, index, &h), 0);
    jrpc_workers_flush(w);
    w->slots[h].sent_ms -= 25;
    on_hedge_tick(&w->hedge_timer);
    return h;
}

/* make(0) with hedging on (a hedge per call earned, thresholds 5 to 20 ms)
 * and its timer made, not started; undone by destroy_hedging(). */
static jrpc_workers_t *make_hedging(void)
{
    jrpc_workers_t *w = make(0);
    w->opts.hedge_budget_pct = 100;
    w->opts.hedge_min_ms = 5;
    w->opts.hedge_max_ms = 20;
    uv_timer_init(&G.loop, &w->hedge_timer);
    w->hedge_timer.data = w;
    return w;
}

static void destroy_hedging(jrpc_workers_t *w)
{
    uv_close((uv_handle_t *)&w->hedge_timer, NULL);
    uv_run(&G.loop, UV_RUN_NOWAIT);
    destroy(w);
}

/* Hedged calls (issue 17): a call older than hedge_max_ms (no p95 known
 * yet) gets a twin at the other worker; the first answer is the one the
 * owner gets, once; the other is dropped (no late answer) and its credit
 * comes back. Never for a method a worker did not declare idempotent, never
 * past the budget, and a twin whose worker is lost leaves the call alone. */
static void test_hedge(void **state)
{
    (void)state;
    static const char params[] = "[]";   /* the client's JSON text */
    jrpc_span_t m = { "m", 1 }, none = { NULL, 0 }, p = { params, 2 };
    jrpc_workers_t *w = make(0);
    G.done = 0;
    w->opts.hedge_budget_pct = 100;   /* a hedge per call earned */
    w->opts.hedge_min_ms = 5;
    w->opts.hedge_max_ms = 20;
    uv_timer_init(&G.loop, &w->hedge_timer);
    w->hedge_timer.data = w;
    ready_m(w, 'A', true);
    ready_m(w, 'B', true);
    worker_t *a = find(w, 'A'), *b = find(w, 'B');
    uint32_t h;
    assert_int_equal(jrpc_workers_dispatch(w, m, p, (jrpc_span_t){ NULL, 0 }, none, 100000, 0, &G, 7, &h), 0);
    worker_t *first = w->slots[h].worker, *other = first == a ? b : a;
    char first_id = first == a ? 'A' : 'B', other_id = first == a ? 'B' : 'A';
    uint64_t seq = w->slots[h].seq;
    jrpc_workers_flush(w);
    assert_true(w->slots[h].flags & SL_WATCHED);
    /* young: nothing */
    on_hedge_tick(&w->hedge_timer);
    assert_int_equal(w->hedges, 0);
    /* past hedge_max_ms: a twin at the other worker */
    w->slots[h].sent_ms -= 25;
    on_hedge_tick(&w->hedge_timer);
    assert_int_equal(w->hedges, 1);
    uint32_t t = w->slots[h].twin;
    assert_true(t != NIL);
    assert_ptr_equal(w->slots[t].worker, other);
    assert_int_equal(w->slots[t].index, 7);
    assert_int_equal(other->inflight, 1);
    assert_false(w->slots[h].flags & SL_WATCHED);   /* hedged once only */
    w->slots[t].sent_ms -= 100;
    on_hedge_tick(&w->hedge_timer);
    assert_int_equal(w->hedges, 1);
    /* the twin answers first: the owner hears once */
    uint64_t tseq = w->slots[t].seq;
    answer_from(w, other_id, tseq);
    assert_int_equal(G.done, 1);
    assert_int_equal(w->hedges_won, 1);
    assert_int_equal(other->inflight, 0);
    assert_int_equal(first->inflight, 1);   /* until its answer comes */
    answer_from(w, first_id, seq);
    assert_int_equal(G.done, 1);
    assert_int_equal(w->late, 0);           /* a lost race is no late answer */
    assert_int_equal(first->inflight, 0);
    assert_int_equal(w->inflight, 0);

    /* the first copy wins: the twin's answer is dropped */
    h = old_call(w, 8);
    assert_int_equal(w->hedges, 2);
    t = w->slots[h].twin;
    seq = w->slots[h].seq;
    tseq = w->slots[t].seq;
    first = w->slots[h].worker;
    first_id = first == a ? 'A' : 'B';
    other_id = first == a ? 'B' : 'A';
    answer_from(w, first_id, seq);
    assert_int_equal(G.done, 2);
    assert_int_equal(w->hedges_won, 1);
    answer_from(w, other_id, tseq);
    assert_int_equal(G.done, 2);
    assert_int_equal(w->inflight, 0);

    /* the twin's worker is lost: the call goes on at the first, no -32004 */
    h = old_call(w, 9);
    assert_int_equal(w->hedges, 3);
    t = w->slots[h].twin;
    seq = w->slots[h].seq;
    first = w->slots[h].worker;
    first_id = first == a ? 'A' : 'B';
    worker_kill(w, w->slots[t].worker, "test");
    assert_int_equal(G.done, 2);
    assert_int_equal(w->slots[h].twin, NIL);
    answer_from(w, first_id, seq);
    assert_int_equal(G.done, 3);
    assert_int_equal(w->lost, 0);
    reap(w);

    /* the budget: none left, no hedge (and a cancelled call drops off) */
    w->hedge_budget = 0;
    assert_int_equal(jrpc_workers_dispatch(w, m, p, (jrpc_span_t){ NULL, 0 }, none, 100000, 0, &G, 10, &h), 0);
    jrpc_workers_flush(w);
    w->hedge_budget = 0;
    w->slots[h].sent_ms -= 25;
    on_hedge_tick(&w->hedge_timer);
    assert_int_equal(w->hedges, 3);
    jrpc_workers_cancel(w, h, JRPC_CANCEL_GONE);
    on_hedge_tick(&w->hedge_timer);
    assert_int_equal(w->whead, NIL);
    destroy_hedging(w);

    /* not declared idempotent by the worker holding it: never hedged */
    w = make_hedging();
    ready_m(w, 'A', false);
    ready_m(w, 'B', false);
    assert_int_equal(jrpc_workers_dispatch(w, m, p, (jrpc_span_t){ NULL, 0 }, none, 100000, 0, &G, 11, &h), 0);
    jrpc_workers_flush(w);
    assert_false(w->slots[h].flags & SL_WATCHED);
    assert_int_equal(w->whead, NIL);
    destroy_hedging(w);
}

static uint64_t hist_n(const jrpc_hist_t *h)
{
    uint64_t n = 0;
    for (uint32_t b = 0; b <= h->nb; b++)
        n += h->counts[b];
    return n;
}

/* A slot freed from a hedge's twin (SL_HEDGE), from the copy that lost the
 * race (SL_LOST_RACE) or from a call sent again after its worker was lost
 * (resent) is a new call's next time: dispatch writes a call's own fields
 * one by one, not the whole slot, so what a freed slot may still hold is
 * reset there. Seen from outside: the new call is watched and hedged in
 * its turn, its queue time is counted, its answer is no late one. */
static void test_slot_reused_clean(void **state)
{
    (void)state;
    static const char params[] = "[]";
    jrpc_span_t m = { "m", 1 }, none = { NULL, 0 }, p = { params, 2 };
    jrpc_workers_t *w = make_hedging();
    G.done = 0;
    ready_m(w, 'A', true);
    ready_m(w, 'B', true);
    worker_t *a = find(w, 'A');
    /* a hedged call whose twin answers first: both slots freed, one with
     * SL_HEDGE, one with SL_LOST_RACE */
    uint32_t h = old_call(w, 1), t = w->slots[h].twin;
    assert_true(t != NIL);
    uint64_t seq = w->slots[h].seq, tseq = w->slots[t].seq;
    char hid = w->slots[h].worker == a ? 'A' : 'B', tid = hid == 'A' ? 'B' : 'A';
    answer_from(w, tid, tseq);
    answer_from(w, hid, seq);
    assert_int_equal(G.done, 1);
    assert_int_equal(w->slots[h].state, SLOT_FREE);
    assert_int_equal(w->slots[t].state, SLOT_FREE);
    /* as an MCP session's call leaves its slot (jrpc_workers_dispatch_mcp) */
    w->slots[h].sess = w->slots[t].sess = (jrpc_span_t){ "sid", 3 };
    w->slots[h].msgs = w->slots[t].msgs = true;
    uint64_t queued = hist_n(&jrpc_metrics.queue);
    uint32_t n[2];
    for (uint32_t k = 0; k < 2; k++)
        assert_int_equal(jrpc_workers_dispatch(w, m, p, none, none, 100000, 0, &G, 2 + k, &n[k]), 0);
    assert_true((n[0] == h && n[1] == t) || (n[0] == t && n[1] == h));
    jrpc_workers_flush(w);
    assert_int_equal(hist_n(&jrpc_metrics.queue), queued + 2);
    for (uint32_t k = 0; k < 2; k++) {
        const slot_t *s = &w->slots[n[k]];
        assert_int_equal(s->flags, SL_WATCHED);   /* no hedge, no lost race: watched */
        assert_int_equal(s->resent, 0);
        assert_int_equal(s->twin, NIL);
        assert_int_equal(s->sess.n, 0);
        assert_false(s->msgs);
        assert_int_equal(s->index, 2 + k);
    }
    w->slots[n[0]].sent_ms -= 25;   /* hedged in its turn */
    on_hedge_tick(&w->hedge_timer);
    assert_int_equal(w->hedges, 2);
    assert_true(w->slots[n[0]].twin != NIL);
    jrpc_workers_cancel(w, n[0], JRPC_CANCEL_GONE);
    jrpc_workers_cancel(w, n[1], JRPC_CANCEL_GONE);
    destroy_hedging(w);

    /* a call sent again after its worker was lost, then answered: its slot
     * is a new call's, never sent again (resent 0: its queue time counts) */
    w = make(0);
    G.done = 0;
    ready_m(w, 'A', true);
    uint32_t r;
    assert_int_equal(jrpc_workers_dispatch(w, m, p, none, none, 100000, 0, &G, 5, &r), 0);
    jrpc_workers_flush(w);
    ready_m(w, 'B', true);
    worker_kill(w, find(w, 'A'), "test");
    assert_int_equal(w->slots[r].resent, 1);
    assert_ptr_equal(w->slots[r].worker, find(w, 'B'));
    jrpc_workers_flush(w);
    answer_from(w, 'B', w->slots[r].seq);
    assert_int_equal(G.done, 1);
    reap(w);
    queued = hist_n(&jrpc_metrics.queue);
    uint32_t r2;
    assert_int_equal(jrpc_workers_dispatch(w, m, p, none, none, 100000, 0, &G, 6, &r2), 0);
    assert_int_equal(r2, r);
    assert_int_equal(w->slots[r2].resent, 0);
    assert_int_equal(hist_n(&jrpc_metrics.queue), queued + 1);
    jrpc_workers_flush(w);
    answer_from(w, 'B', w->slots[r2].seq);
    assert_int_equal(G.done, 2);
    assert_int_equal(w->late, 0);
    destroy(w);
}

/* A hedge that takes the last free slot grows the slot array (which may
 * move it, and always does under ASan): the twin is made from the
 * original's fields as they are after the move, and both copies are whole. */
static void test_hedge_grows_slots(void **state)
{
    (void)state;
    static const char params[] = "[1]";
    jrpc_span_t m = { "m", 1 }, q = { "q", 1 }, none = { NULL, 0 }, p = { params, 3 };
    jrpc_workers_t *w = make(0);
    w->opts.max_queue = 4096;
    w->opts.hedge_budget_pct = 100;
    w->opts.hedge_min_ms = 5;
    w->opts.hedge_max_ms = 20;
    w->grace_until = UINT64_MAX;   /* "q", which nobody serves, waits in its queue */
    uv_timer_init(&G.loop, &w->hedge_timer);
    w->hedge_timer.data = w;
    ready_m(w, 'A', true);
    ready_m(w, 'B', true);
    uint32_t h;
    assert_int_equal(jrpc_workers_dispatch(w, m, p, none, none, 123456, 0, &G, 7, &h), 0);
    jrpc_workers_flush(w);
    uint32_t cap = w->cap_slots;
    while (w->nslots < cap || w->free_head != NIL) {   /* every slot taken */
        uint32_t hq;
        assert_int_equal(jrpc_workers_dispatch(w, q, p, none, none, 123456, 0, &G, 1000, &hq), 0);
    }
    uint64_t seq = w->slots[h].seq;
    w->slots[h].sent_ms -= 25;
    on_hedge_tick(&w->hedge_timer);
    assert_int_equal(w->hedges, 1);
    assert_true(w->cap_slots > cap);
    uint32_t t = w->slots[h].twin;
    assert_true(t != NIL && t >= cap);
    const slot_t *o = &w->slots[h], *tw = &w->slots[t];
    assert_int_equal(o->seq, seq);
    assert_int_equal(tw->twin, h);
    assert_ptr_equal(tw->owner, &G);
    assert_int_equal(tw->index, 7);
    assert_ptr_equal(tw->method, o->method);
    assert_ptr_equal(tw->params.p, params);
    assert_int_equal(tw->params.n, 3);
    assert_int_equal(tw->deadline, 123456);
    assert_int_equal(tw->state, SLOT_SENT);
    assert_true(tw->worker != NULL && tw->worker != o->worker);
    assert_true(tw->flags & SL_HEDGE);
    assert_true(tw->seq != 0 && tw->seq != seq);
    destroy_hedging(w);
}

/* The p95 of a method's answer times, and the threshold it gives. */
static void test_hedge_p95(void **state)
{
    (void)state;
    jrpc_workers_t *w = make(0);
    w->opts.hedge_min_ms = 5;
    w->opts.hedge_max_ms = 1000;
    method_t meth = { 0 };
    assert_int_equal(hedge_after_ms(w, &meth), 1000);   /* unknown: the max */
    for (int i = 0; i < 950; i++)
        lat_observe(w, &meth, 2000000);     /* 2 ms */
    for (int i = 0; i < 50; i++)
        lat_observe(w, &meth, 300000000);   /* 300 ms */
    lat_observe(w, &meth, 2000000);
    /* ~95 % at 2 ms: the p95 is the 2 ms bucket's edge, within a quarter octave */
    assert_true(meth.p95_ms >= 2 && meth.p95_ms <= 3);
    assert_int_equal(hedge_after_ms(w, &meth), 5);       /* the min */
    for (int i = 0; i < 2000; i++)
        lat_observe(w, &meth, 40000000);    /* 40 ms now: old answers fade */
    assert_true(meth.p95_ms >= 40 && meth.p95_ms <= 48);
    assert_true(hedge_after_ms(w, &meth) == meth.p95_ms);
    free(meth.lat);
    destroy(w);
}


/* ---- params as JSON text (PROTOCOL.md 2.1 "json", 2.2) ---- */

/* READY from id serving "m" and "n" (both idempotent), json_m/json_n: which
 * it declares "json". */
static void ready_json(jrpc_workers_t *w, char id, uint32_t credit, bool json_m, bool json_n)
{
    static const char *const names[] = { "m", "n" };
    const char *json[2];
    size_t njson = 0;
    if (json_m)
        json[njson++] = "m";
    if (json_n)
        json[njson++] = "n";
    jrpc_wire_ready_opts_t o = { .idempotent = names, .nidempotent = 2, .json = json,
                                 .njson = njson };
    jrpc_buf_t b;
    jrpc_buf_init(&b);
    assert_int_equal(jrpc_wire_put_ready_opts(&b, credit, names, 2, &o), 0);
    jrpc_metrics_tick();
    on_message(w, &(peer_t){ .id = &id, .idlen = 1 }, b.p, b.len);
    jrpc_buf_dispose(&b);
}

/* The next REQUEST dealer k received (HEARTBEATs skipped), into b. */
static void recv_request(int k, jrpc_buf_t *b)
{
    char frame[4096];
    for (;;) {
        int n = zmq_recv(G.dealers[k], frame, sizeof frame, ZMQ_DONTWAIT);
        assert_true(n > 0 && n < (int)sizeof frame);
        if (jrpc_wire_peek_type(frame, (size_t)n) != JRPC_WIRE_REQUEST)
            continue;
        jrpc_buf_reset(b);
        assert_int_equal(jrpc_buf_append(b, frame, (size_t)n), 0);
        return;
    }
}

/* ---- PROBE (PROTOCOL.md 2.8) ---- */

#define INST_A "00112233445566aa"
#define SID_A INST_A "-0000-000102030405060708090a0b0c0d0e0f"
#define SID_B "00112233445566bb-0001-000102030405060708090a0b0c0d0e0f"

static struct {
    int      calls;
    uint64_t probe;
    bool     live;
    char     sid[64];
} P;

static void on_probe_t(uint64_t probe, jrpc_span_t session, bool live, void *arg)
{
    (void)arg;
    P.calls++;
    P.probe = probe;
    P.live = live;
    snprintf(P.sid, sizeof P.sid, "%.*s", (int)session.n, session.p);
}

/* READY with "instance" (and "probes" when asked) from id. */
static void ready_mcp(jrpc_workers_t *w, char id, const char *instance, bool probes)
{
    jrpc_buf_t b;
    jrpc_buf_init(&b);
    const char *methods[] = { "initialize" };
    jrpc_wire_ready_opts_t o = { .instance = instance, .probes = probes };
    assert_int_equal(jrpc_wire_put_ready_opts(&b, 4, methods, 1, &o), 0);
    jrpc_metrics_tick();
    on_message(w, &(peer_t){ .id = &id, .idlen = 1 }, b.p, b.len);
    jrpc_buf_dispose(&b);
}

/* PROBE [probe, session, live] from id (live < 0: nil). */
static void probe_from(jrpc_workers_t *w, char id, uint64_t probe, const char *sid, int live)
{
    jrpc_buf_t b;
    jrpc_buf_init(&b);
    assert_int_equal(jrpc_wire_put_probe(&b, probe, (jrpc_span_t){ sid, strlen(sid) }, live), 0);
    on_message(w, &(peer_t){ .id = &id, .idlen = 1 }, b.p, b.len);
    jrpc_buf_dispose(&b);
}

/* A question goes to the worker of the session's instance that said it
 * answers them (-ENOTSUP to one that did not, -ESRCH to none); its answer
 * reaches on_probe only from a worker that said so, about a session of its
 * own instance, and only as an answer (live not nil): else dropped. */
static void test_probes(void **state)
{
    (void)state;
    jrpc_workers_t *w = make(0);
    memset(&P, 0, sizeof P);
    jrpc_workers_on_probe(w, on_probe_t, NULL);
    ready_mcp(w, 'A', INST_A, true);
    ready_mcp(w, 'B', "00112233445566bb", false);
    assert_true(find(w, 'A')->probes);
    assert_false(find(w, 'B')->probes);
    jrpc_span_t a = { SID_A, sizeof SID_A - 1 }, bs = { SID_B, sizeof SID_B - 1 };
    assert_int_equal(jrpc_workers_probe(w, 0x00112233445566aaull, 7, a), 0);
    assert_int_equal(jrpc_workers_probe(w, 0x00112233445566bbull, 8, bs), -ENOTSUP);
    assert_int_equal(jrpc_workers_probe(w, 0x00112233445566ccull, 9, a), -ESRCH);
    char frame[256];
    int n;
    while ((n = zmq_recv(G.dealers[0], frame, sizeof frame, ZMQ_DONTWAIT)) > 0 &&
           jrpc_wire_peek_type(frame, (size_t)n) != JRPC_WIRE_PROBE)
        ;
    jrpc_buf_t want;
    jrpc_buf_init(&want);
    assert_int_equal(jrpc_wire_put_probe(&want, 7, a, -1), 0);
    assert_int_equal(n, (int)want.len);
    assert_memory_equal(frame, want.p, want.len);
    jrpc_buf_dispose(&want);
    uint64_t dropped = w->msgs_dropped;
    probe_from(w, 'A', 7, SID_A, 1);
    assert_int_equal(P.calls, 1);
    assert_true(P.probe == 7 && P.live);
    assert_string_equal(P.sid, SID_A);
    probe_from(w, 'A', 7, SID_A, 0);
    assert_int_equal(P.calls, 2);
    assert_false(P.live);
    probe_from(w, 'A', 8, SID_B, 1);      /* another instance's session */
    probe_from(w, 'B', 8, SID_B, 1);      /* a worker that answers none */
    probe_from(w, 'A', 9, SID_A, -1);     /* a question, to the broker */
    probe_from(w, 'A', 9, "not-a-sid", 1);
    assert_int_equal(P.calls, 2);
    assert_true(w->msgs_dropped == dropped + 4);
    destroy(w);
}

static int msgs_seen;
static char msg_sid[64];

static void on_msg_t(void *owner, uint32_t index, jrpc_span_t session, jrpc_span_t body, void *arg)
{
    (void)owner, (void)index, (void)body, (void)arg;
    msgs_seen++;
    snprintf(msg_sid, sizeof msg_sid, "%.*s", (int)session.n, session.p);
}

/* A session's MESSAGE (seq 0) is taken only about a session of the
 * sender's own instance (a worker never ends or speaks for another's
 * sessions); when the last worker of an instance leaves, the receiver is
 * told that instance's sessions ended (the instance alone as session). */
static void test_session_messages(void **state)
{
    (void)state;
    jrpc_workers_t *w = make(0);
    msgs_seen = 0;
    jrpc_workers_on_message(w, on_msg_t, NULL);
    ready_mcp(w, 'A', INST_A, true);
    ready_mcp(w, 'B', "00112233445566bb", false);
    jrpc_buf_t b;
    jrpc_buf_init(&b);
    char a = 'A';
    assert_int_equal(jrpc_wire_put_message(&b, 0, (jrpc_span_t){ SID_B, sizeof SID_B - 1 },
                                           (jrpc_span_t){ NULL, 0 }), 0);
    on_message(w, &(peer_t){ .id = &a, .idlen = 1 }, b.p, b.len);
    assert_int_equal(msgs_seen, 0);   /* B's session, from A: dropped */
    jrpc_buf_reset(&b);
    assert_int_equal(jrpc_wire_put_message(&b, 0, (jrpc_span_t){ SID_A, sizeof SID_A - 1 },
                                           (jrpc_span_t){ NULL, 0 }), 0);
    on_message(w, &(peer_t){ .id = &a, .idlen = 1 }, b.p, b.len);
    assert_int_equal(msgs_seen, 1);
    assert_string_equal(msg_sid, SID_A);
    msgs_seen = 0;
    /* a call's message "this call began session": only a session of A's own */
    jrpc_workers_mcp_t mcp = { .session = { NULL, 0 }, .messages = true };
    uint32_t h;
    assert_int_equal(jrpc_workers_dispatch_mcp(w, (jrpc_span_t){ "initialize", 10 },
                                               (jrpc_span_t){ NULL, 0 }, (jrpc_span_t){ NULL, 0 },
                                               100000, 0, &mcp, &G, 0, &h), 0);
    assert_ptr_equal(w->slots[h].worker, find(w, 'A'));   /* most credit, or by order */
    jrpc_workers_flush(w);
    for (int k = 0; k < 2; k++) {
        jrpc_buf_reset(&b);
        const char *sid = k ? SID_A : SID_B;
        assert_int_equal(jrpc_wire_put_message(&b, w->slots[h].seq, (jrpc_span_t){ sid, strlen(sid) },
                                               (jrpc_span_t){ NULL, 0 }), 0);
        on_message(w, &(peer_t){ .id = &a, .idlen = 1 }, b.p, b.len);
        assert_int_equal(msgs_seen, k);   /* B's id dropped, A's own taken */
    }
    jrpc_buf_dispose(&b);
    worker_kill(w, find(w, 'A'), "test");
    reap(w);
    assert_int_equal(msgs_seen, 2);
    assert_string_equal(msg_sid, INST_A);   /* every session of A's instance ended */
    destroy(w);
    assert_int_equal(msgs_seen, 2);   /* B freed at destroy: nobody told */
}

#define SPACED "[1, {\"a\" : 2.50, \"b\":\"x\\u00e9\"} ,null]"

/* A call goes out as the client's very bytes to a worker that declared its
 * method json, as msgpack (the bytes of before: jrpc_json_to_msgpack's
 * output in jrpc_wire_put_request_call) to one that did not, per method of
 * one worker too; re-dispatched after its json worker is lost, it crosses
 * to msgpack. */
static void test_json_per_worker(void **state)
{
    (void)state;
    jrpc_workers_t *w = make(0);
    jrpc_span_t m = { "m", 1 }, n = { "n", 1 }, none = { NULL, 0 };
    ready_json(w, 'A', 100, true, false);   /* A: m as JSON, n as msgpack */
    assert_false(jrpc_workers_wants_msgpack(w, m));   /* the parser's hint */
    assert_true(jrpc_workers_wants_msgpack(w, n));
    assert_true(jrpc_workers_wants_msgpack(w, (jrpc_span_t){ "zz", 2 }));
    ready_json(w, 'B', 1, false, false);    /* B: declares nothing */
    assert_true(jrpc_workers_wants_msgpack(w, m));
    assert_int_equal(find(w, 'A')->njson, 1);
    assert_int_equal(find(w, 'B')->njson, 0);
    jrpc_span_t p = { SPACED, sizeof SPACED - 1 };
    uint32_t h[4];
    jrpc_buf_t frame, mp, want;
    jrpc_buf_init(&frame);
    jrpc_buf_init(&mp);
    jrpc_buf_init(&want);
    assert_int_equal(jrpc_json_to_msgpack(p.p, p.n, 64, &mp), 0);
    assert_int_equal(jrpc_workers_dispatch(w, m, p, (jrpc_span_t){ NULL, 0 }, none, 100000, 0, &G, 0, &h[0]), 0);
    /* n with the parser's msgpack (params_mp): sent as it is */
    assert_int_equal(jrpc_workers_dispatch(w, n, p, (jrpc_span_t){ mp.p, mp.len }, none, 100000, 0,
                                           &G, 1, &h[1]), 0);
    assert_int_equal(jrpc_workers_dispatch(w, m, none, (jrpc_span_t){ NULL, 0 }, none, 100000, 0, &G, 2, &h[2]), 0);
    for (int i = 0; i < 3; i++)
        assert_ptr_equal(w->slots[h[i]].worker, find(w, 'A'));   /* most free credit */
    jrpc_workers_flush(w);
    recv_request(0, &frame);
    msgpack_zone z;
    msgpack_zone_init(&z, 1024);
    jrpc_wire_msg_t msg;
    jrpc_wire_call_t c;
    assert_int_equal(jrpc_wire_decode(frame.p, frame.len, &z, &msg), 0);
    assert_int_equal(msg.nitems, 3);
    assert_int_equal(jrpc_wire_request_item(&msg, 0, &c), 0);     /* m: the bytes as sent */
    assert_true(c.json);
    assert_int_equal(c.params->type, MSGPACK_OBJECT_BIN);
    assert_int_equal(c.params_json.n, p.n);
    assert_memory_equal(c.params_json.p, p.p, p.n);
    assert_int_equal(jrpc_wire_request_item(&msg, 1, &c), 0);     /* n: msgpack */
    assert_false(c.json);
    assert_int_equal(c.params->type, MSGPACK_OBJECT_ARRAY);
    assert_int_equal(jrpc_wire_request_item(&msg, 2, &c), 0);     /* m, no params: empty bin */
    assert_true(c.json);
    assert_int_equal(c.params->type, MSGPACK_OBJECT_BIN);
    assert_int_equal(c.params_json.n, 0);
    /* The msgpack item, byte for byte what it was before the option. */
    jrpc_wire_request_item(&msg, 1, &c);
    assert_int_equal(jrpc_wire_put_request_begin(&want), 0);
    assert_int_equal(jrpc_wire_put_request_call(&want, c.seq, n, (jrpc_span_t){ mp.p, mp.len },
                                                c.timeout_ms, none), 0);
    jrpc_wire_put_request_end(&want, 1);
    const char *item = want.p + 8;   /* past [1, 2, array32 */
    size_t item_n = want.len - 8;
    bool found = false;
    for (size_t k = 0; !found && k + item_n <= frame.len; k++)
        found = memcmp(frame.p + k, item, item_n) == 0;
    assert_true(found);

    /* A is lost: its idempotent calls go to B, which takes msgpack. */
    jrpc_workers_cancel(w, h[1], JRPC_CANCEL_GONE);
    jrpc_workers_cancel(w, h[2], JRPC_CANCEL_GONE);
    worker_kill(w, find(w, 'A'), "test");
    assert_ptr_equal(w->slots[h[0]].worker, find(w, 'B'));   /* transcoded when sent */
    assert_true(jrpc_workers_wants_msgpack(w, m));
    jrpc_workers_flush(w);
    recv_request(1, &frame);
    assert_int_equal(jrpc_wire_decode(frame.p, frame.len, &z, &msg), 0);
    assert_int_equal(msg.nitems, 1);
    assert_int_equal(jrpc_wire_request_item(&msg, 0, &c), 0);
    assert_false(c.json);
    jrpc_buf_reset(&want);
    assert_int_equal(jrpc_wire_put_request_begin(&want), 0);
    assert_int_equal(jrpc_wire_put_request_call(&want, c.seq, m, (jrpc_span_t){ mp.p, mp.len },
                                                c.timeout_ms, none), 0);
    jrpc_wire_put_request_end(&want, 1);
    assert_int_equal(frame.len, want.len);
    assert_memory_equal(frame.p, want.p, want.len);   /* the very frame of before */

    msgpack_zone_destroy(&z);
    jrpc_buf_dispose(&frame);
    jrpc_buf_dispose(&mp);
    jrpc_buf_dispose(&want);
    reap(w);
    destroy(w);
}

/* A READY with "json" of the wrong type is malformed: no session. */
static void test_json_option_malformed(void **state)
{
    (void)state;
    jrpc_workers_t *w = make(0);
    static const char bad[] = "\x95\x01\x01\x04\x91\xa1m\x81\xa4json\xa1m";   /* "json": "m" */
    char id = 'A';
    jrpc_metrics_tick();
    on_message(w, &(peer_t){ .id = &id, .idlen = 1 }, bad, sizeof bad - 1);
    assert_null(find(w, 'A'));
    assert_int_equal(w->malformed, 1);
    destroy(w);
}

/* The status producers (issue 33): valid JSON with the contract's fields;
 * a worker's answers, errors and timeouts counted; method names a worker
 * chose escaped for JSON and HTML; past the bound, "other". */
static void test_status(void **state)
{
    (void)state;
    jrpc_workers_t *w = make(0);
    jrpc_metrics.max_meth = jrpc_metrics.nmeth - 1 + 2;   /* room for two more records */
    static const char hostile[] = "<x>\"\\\n\xff";
    ready(w, 'B', 2, hostile, 1, "w-b", 3);
    ready(w, 'A', 3, "s", 3, "w-a", 3);                   /* s0 gets a record; s1, s2 not */
    uint32_t s0 = method_find(w, "s0", 2)->stat, s1 = method_find(w, "s1", 2)->stat;
    assert_int_not_equal(s0, JRPC_METRICS_OTHER);
    assert_int_equal(s1, JRPC_METRICS_OTHER);
    assert_int_equal(method_find(w, hostile, sizeof hostile - 1)->stat, s0 - 1);
    assert_int_equal(jrpc_metrics_method_id("", "s0", 2), s0);   /* found again, not made */
    assert_int_equal(jrpc_metrics_method_id("", "s9", 2), JRPC_METRICS_OTHER);

    static const char params[] = "[]";
    jrpc_span_t none = { NULL, 0 }, p = { params, 2 };
    uint32_t h[2];
    assert_int_equal(jrpc_workers_dispatch(w, (jrpc_span_t){ "s0", 2 }, p, none, none, 100000, 0,
                                           &G, 0, &h[0]), 0);
    assert_int_equal(jrpc_workers_last_stat(w), s0);
    assert_int_equal(jrpc_workers_dispatch(w, (jrpc_span_t){ "s1", 2 }, p, none, none, 100000, 0,
                                           &G, 1, &h[1]), 0);
    assert_int_equal(jrpc_workers_last_stat(w), JRPC_METRICS_OTHER);
    jrpc_workers_flush(w);
    answer_from(w, 'A', w->slots[h[0]].seq);
    jrpc_workers_cancel(w, h[1], JRPC_CANCEL_TIMEOUT);
    /* What the broker counts per answered call: 3 ms, one ok, one -32003. */
    jrpc_metrics_call(s0, JRPC_CALL_OK, 0, 3 * NS_PER_MS);
    jrpc_metrics_call(s0, JRPC_CALL_TIMEOUT, JRPC_TIMEOUT, 3 * NS_PER_MS);

    jrpc_buf_t out;
    jrpc_buf_init(&out);
    assert_int_equal(jrpc_workers_status(w, &out), 0);
    jrpc_span_t v;
    assert_int_equal(jrpc_json_check(out.p, out.len, 8, &v), 0);
    jrpc_buf_putc(&out, '\0');
    assert_non_null(strstr(out.p, "{\"id\":\"41\",\"name\":\"w-a\",\"service\":\"\",\"host\":\"\","
                                  "\"credit\":3,\"in_flight\":1,\"answered\":1,\"errors\":0,"
                                  "\"timeouts\":1,\"ejections\":0,\"last_heard_ms\":"));
    assert_non_null(strstr(out.p, "\"ejected\":false,\"draining\":false,\"methods\":3}"));
    assert_non_null(strstr(out.p, "\"id\":\"42\",\"name\":\"w-b\""));
    assert_int_equal(strncmp(out.p, "{\"workers\":[{", 13), 0);

    jrpc_buf_reset(&out);
    assert_int_equal(jrpc_workers_status_methods(w, &out), 0);
    assert_int_equal(jrpc_json_check(out.p, out.len, 8, &v), 0);
    jrpc_buf_putc(&out, '\0');
    assert_non_null(strstr(out.p, "{\"service\":\"\",\"method\":\"s0\",\"calls\":2,\"ok\":1,"
                                  "\"errors\":1,\"timeouts\":1,\"p50_ms\":3.750,\"p99_ms\":4.975,"
                                  "\"workers\":1,\"other\":false}"));
    assert_non_null(strstr(out.p, "\"method\":\"\\u003cx\\u003e\\\"\\\\\\u000a\\ufffd\""));
    assert_null(strchr(out.p, '<'));
    assert_non_null(strstr(out.p, "{\"methods\":[{\"service\":\"\",\"method\":\"other\","));
    char tail[64];
    snprintf(tail, sizeof tail, "],\"max_methods\":%u}", jrpc_metrics.max_meth);
    assert_string_equal(out.p + strlen(out.p) - strlen(tail), tail);
    /* "other": s1 and s2 of A, and nothing else serves them */
    assert_non_null(strstr(out.p, "\"method\":\"other\",\"calls\":"));
    jrpc_buf_dispose(&out);
    reap(w);
    destroy(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_liveness_not_faked_by_a_long_callback),
        cmocka_unit_test(test_ready_caps),
        cmocka_unit_test(test_ready_churn_frees_methods),
        cmocka_unit_test(test_credit_cap_and_name),
        cmocka_unit_test(test_ejection),
        cmocka_unit_test(test_json_per_worker),
        cmocka_unit_test(test_json_option_malformed),
        cmocka_unit_test(test_hedge),
        cmocka_unit_test(test_hedge_grows_slots),
        cmocka_unit_test(test_slot_reused_clean),
        cmocka_unit_test(test_hedge_p95),
        cmocka_unit_test(test_status),
        cmocka_unit_test(test_probes),
        cmocka_unit_test(test_session_messages),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
