/* jrpc_broker — see jrpc_broker.h.
 *
 * A body's life: submitted (kept, parsed, its accounts taken), admitted
 * (jrpc_admit.c), run (its calls dispatched, ACL first), settled (replied
 * once every answer is in, freed once no worker holds a call) or expired
 * at its deadline; cancelled; and the broker's own life, readiness and
 * stats. Not here: building replies and refusals (jrpc_gather.c),
 * admission, rate limits and early dispatch (jrpc_admit.c), idempotency
 * keys (jrpc_idem.c), queued bytes (jrpc_queued.c), a connection's
 * authentication (jrpc_conn_auth.c); what they share is jrpc_broker_int.h.
 *
 * Every open body is a bbatch on a list sorted by deadline (almost always
 * appended at the tail, since deadlines mostly grow with arrival); one timer
 * is armed for the head. */
#include "jrpc_broker_int.h"

static void list_remove(jrpc_broker_t *b, bbatch_t *x)
{
    x->listed = false;
    if (x->prev)
        x->prev->next = x->next;
    else
        b->head = x->next;
    if (x->next)
        x->next->prev = x->prev;
    else
        b->tail = x->prev;
    x->prev = x->next = NULL;
}

static void list_insert(jrpc_broker_t *b, bbatch_t *x)
{
    x->listed = true;
    bbatch_t *after = b->tail;
    while (after && after->deadline > x->deadline)
        after = after->prev;
    x->prev = after;
    x->next = after ? after->next : b->head;
    if (x->next)
        x->next->prev = x;
    else
        b->tail = x;
    if (after)
        after->next = x;
    else
        b->head = x;
}

static void on_timer(uv_timer_t *t);

/* The timer is due no later than the head's deadline. It is not stopped
 * or moved later when the head leaves (a restart per body cost ~150 Ir,
 * bench/profile.sh http 1): fired early, on_timer finds nothing due and
 * arms it for the head then, so a stream of bodies restarts it about once
 * per timeout, and an idle broker wakes once more. */
static void arm_timer(jrpc_broker_t *b)
{
    if (b->head == NULL || (b->timer_due != 0 && b->timer_due <= b->head->deadline))
        return;
    uint64_t now = uv_now(b->loop);
    b->timer_due = b->head->deadline;
    uv_timer_start(&b->timer, on_timer, b->head->deadline > now ? b->head->deadline - now : 0, 0);
}

/* Keeps a copy of a key's id (jrpc_keys: at most JRPC_KEYS_ID_MAX bytes). */
void keep_key_id(char dst[JRPC_KEYS_ID_MAX], uint8_t *n, jrpc_span_t id)
{
    assert(id.n <= JRPC_KEYS_ID_MAX);
    memcpy(dst, id.p, id.n);
    *n = (uint8_t)id.n;
}

/* Replies when the last answer is in; frees when no worker holds a call. */
void settle(jrpc_broker_t *b, bbatch_t *x)
{
    if (x->busy || x->claiming)
        return;
    if (!x->replied && x->unanswered == 0)
        reply(b, x);
    if (x->replied && x->outstanding > 0 && x->held == 0)
        hold_charge(b, x);
    if (x->replied && x->outstanding == 0) {
        if (x->listed) {
            bool was_head = b->head == x;
            list_remove(b, x);
            if (was_head)
                arm_timer(b);
        }
        b->open--;
        batch_free(x);
        if (b->open == 0 && b->on_empty) {
            void (*fn)(void *) = b->on_empty;
            b->on_empty = NULL;
            fn(b->on_empty_arg);
        }
    }
}

/* The parser's hint (jrpc_batch_hint_fn): transcode the params of calls
 * that msgpack workers serve while checking them, leave the others as text. */
static bool wants_msgpack(void *arg, jrpc_span_t method)
{
    return jrpc_workers_wants_msgpack(arg, method);
}

/* Takes every call of x still out back from the workers (their late answers
 * will be dropped); with code != 0, answers those still owed an answer. */
void withdraw(jrpc_broker_t *b, bbatch_t *x, int code)
{
    for (uint32_t i = 0; i < x->req.ncalls; i++) {
        if (x->handles[i] == NO_HANDLE)
            continue;
        jrpc_workers_cancel(b->workers, x->handles[i],
                            code == JRPC_TIMEOUT ? JRPC_CANCEL_TIMEOUT : JRPC_CANCEL_GONE);
        x->handles[i] = NO_HANDLE;
        x->outstanding--;
        if (code == 0)
            continue;
        if (code == JRPC_TIMEOUT && !x->req.calls[i].notification && !x->req.calls[i].answered) {
            jrpc_metrics.timeouts++;
            x->timed_out++;
        }
        answer_code(x, i, code, NULL);
    }
}

static void expire(jrpc_broker_t *b, bbatch_t *x)
{
    withdraw(b, x, JRPC_TIMEOUT);
    settle(b, x);
}

static void on_timer(uv_timer_t *t)
{
    jrpc_broker_t *b = t->data;
    uint64_t now = uv_now(b->loop);
    b->timer_due = 0;
    jrpc_metrics_tick();
    while (b->head && b->head->deadline <= now) {
        bbatch_t *x = b->head;
        list_remove(b, x);
        expire(b, x);
    }
    arm_timer(b);
}

/* Call i of an MCP body to the workers (jrpc_workers_dispatch_mcp). Apart
 * from start() and not inlined: the usual body's loop stays small. */
static __attribute__((noinline)) int dispatch_mcp(jrpc_workers_t *wks, bbatch_t *x, uint32_t i)
{
    const jrpc_call_t *c = &x->req.calls[i];
    jrpc_workers_mcp_t mcp = { x->session, true };
    return jrpc_workers_dispatch_mcp(wks, c->method, c->params, x->trace, x->deadline, x->t0,
                                     &mcp, x, i, &x->handles[i]);
}

/* Dispatches the calls of an admitted body (ACL first, per call). Its key
 * is looked up here, in the set in force now: a reload may have removed it
 * while the nonce was in Redis (then the body is refused), or changed its
 * ACL (the new one applies). The pointer lives for this call only. */
void start(jrpc_broker_t *b, bbatch_t *x)
{
    const jrpc_key_t *key = NULL;
    if (b->opts.keys && x->key_id_n &&
        (key = jrpc_keys_find(b->opts.keys, (jrpc_span_t){ x->key_id, x->key_id_n })) == NULL) {
        refuse_auth(b, x, JRPC_AUTH_EUNKNOWN_KEY, (int64_t)time(NULL));
        settle(b, x);
        return;
    }
    x->t_disp = jrpc_metrics.now;   /* Server-Timing: queue times count from here */
    /* Streamed: what the parser answered goes out first. */
    for (uint32_t i = 0; x->answer && i < x->req.ncalls; i++)
        if (x->req.calls[i].answered)
            stream_answer(b, x, i);
    /* x->handles[] are all NO_HANDLE here (jrpc_broker_submit): only a
     * dispatch below sets one. What every call is sent with is read once
     * (the loop's stores into x would make the compiler read it again). */
    jrpc_workers_t *wks = b->workers;
    const jrpc_span_t trace = x->trace;
    const uint64_t deadline = x->deadline, t0 = x->t0;
    for (uint32_t i = 0; i < x->req.ncalls; i++) {
        jrpc_call_t *c = &x->req.calls[i];
        if (c->answered)
            continue;
        if (!c->notification)
            x->unanswered++;
        if (jrpc_batch_is_discover(c)) {
            answer_discover(b, x, i, key);
            continue;
        }
        jrpc_span_t svc;   /* ACLs match the canonical name: service.method */
        jrpc_span_t canon = jrpc_workers_canonical(wks, c->method, &svc);
        if (svc.n && x->service[0] == '\0') {
            memcpy(x->service, svc.p, svc.n);
            x->service[svc.n] = '\0';
        }
        if (key && !jrpc_key_allows(key, canon)) {
            jrpc_metrics.acl_denied++;
            x->mstat[i] = jrpc_workers_method_stat(wks, c->method);
            answer_code(x, i, JRPC_UNAUTHORIZED, "this key may not call this method");
            continue;
        }
        int rc = x->mcp ? dispatch_mcp(wks, x, i)
                        : jrpc_workers_dispatch(wks, c->method, c->params, c->params_mp, trace,
                                                deadline, t0, x, i, &x->handles[i]);
        x->mstat[i] = jrpc_workers_last_stat(wks);
        if (rc == 0) {
            x->outstanding++;
            jrpc_metrics.dispatched++;
        } else {
            answer_code(x, i, rc == -ESRCH ? JRPC_SESSION_UNKNOWN : jrpc_error_code(rc), NULL);
        }
    }
    if (x->outstanding > 0) {
        bool first = b->head == NULL || x->deadline < b->head->deadline;
        list_insert(b, x);
        if (first)
            arm_timer(b);
    }
    /* A failed send in the flush may answer calls of x: settle after it. */
    x->busy = true;
    jrpc_workers_flush(b->workers);
    x->busy = false;
    settle(b, x);
}

/* A body of one service (jrpc_admit_t.service): each valid call's method
 * M becomes "service.M" (in the batch's arena), the name a client of that
 * service would call, so that routing, ACLs and the access line need no
 * second path. rpc.discover is the broker's and stays as it is. */
static int scope_calls(bbatch_t *x, jrpc_span_t svc)
{
    for (uint32_t i = 0; i < x->req.ncalls; i++) {
        jrpc_call_t *c = &x->req.calls[i];
        if (c->answered || c->method.n == 0 || jrpc_batch_is_discover(c))
            continue;
        char *q = jrpc_arena_alloc(&x->req.arena, svc.n + 1 + c->method.n);
        if (q == NULL)
            return -ENOMEM;
        memcpy(q, svc.p, svc.n);
        q[svc.n] = '.';
        memcpy(q + svc.n + 1, c->method.p, c->method.n);
        c->method = (jrpc_span_t){ q, svc.n + 1 + c->method.n };
    }
    return 0;
}

int jrpc_broker_submit(jrpc_broker_t *b, const char *body, size_t len, const jrpc_admit_t *ad,
                       jrpc_reply_fn fn, void *ctx, jrpc_body_t **handle)
{
    if (b->open >= b->opts.max_open) {
        if (handle)
            *handle = NULL;
        refuse(b, NULL, ad, fn, ctx, -EBUSY,
               "\"too many requests in flight, retry later\"");
        return 0;
    }
    /* The traceparent and the peer travel in the body's own block: no
     * allocation of their own. */
    jrpc_span_t tp = ad ? ad->traceparent : (jrpc_span_t){ NULL, 0 };
    if (tp.n && !jrpc_traceparent_valid(tp.p, tp.n))
        tp.n = 0;
    jrpc_span_t peer = ad && b->opts.access_log ? ad->peer : (jrpc_span_t){ NULL, 0 };
    jrpc_span_t idem = ad ? ad->idem_key : (jrpc_span_t){ NULL, 0 };
    jrpc_span_t sess = ad && ad->mcp ? ad->session : (jrpc_span_t){ NULL, 0 };
    size_t need = sizeof(bbatch_t) + len + tp.n + peer.n + idem.n + sess.n;
    bbatch_t *x = need <= BB_SMALL ? bb_take(b) : NULL;
    if (x == NULL)
        x = malloc(need <= BB_SMALL ? BB_SMALL : need);
    if (x == NULL)
        return -ENOMEM;
    /* Zeroed, but for the rooms read only up to a length set with them (fp:
     * with idem, rwho: rwho_n, key_id: key_id_n) and service (a string):
     * 260 of its ~690 bytes a single call need not clear (issue 35). */
    memset(x, 0, offsetof(bbatch_t, fp));
    x->rwho_n = 0;
    memset(&x->rlim, 0, offsetof(bbatch_t, service) - offsetof(bbatch_t, rlim));
    x->service[0] = '\0';
    x->key_id_n = 0;
    memset(&x->prev, 0, sizeof *x - offsetof(bbatch_t, prev));
    x->pooled = need <= BB_SMALL;
    memcpy(x->body, body, len);
    x->len = len;
    if (tp.n) {
        memcpy(x->body + len, tp.p, tp.n);
        x->trace = (jrpc_span_t){ x->body + len, tp.n };
    }
    if (peer.n) {
        memcpy(x->body + len + tp.n, peer.p, peer.n);
        x->peer = (jrpc_span_t){ x->body + len + tp.n, peer.n };
    }
    if (idem.n) {
        memcpy(x->body + len + tp.n + peer.n, idem.p, idem.n);
        x->idem = (jrpc_span_t){ x->body + len + tp.n + peer.n, idem.n };
    }
    if (sess.n) {
        memcpy(x->body + len + tp.n + peer.n + idem.n, sess.p, sess.n);
        x->session = (jrpc_span_t){ x->body + len + tp.n + peer.n + idem.n, sess.n };
    }
    x->mcp = ad ? ad->mcp : NULL;
    x->broker = b;
    x->fn = fn;
    x->answer = ad ? ad->answer : NULL;
    x->ctx = ctx;
    x->busy = true;
    jrpc_batch_init(&x->req);
    x->req.arena.pool = &b->arenas;
    x->req.msgpack_hint = wants_msgpack;   /* transcode now what msgpack workers will get */
    x->req.hint_arg = b->workers;
    if (b->opts.server_timing && !(ad && ad->untimed))
        x->t_in = jrpc_metrics_tick();   /* Server-Timing: the parse counts from here */
    if (jrpc_batch_parse(&x->req, x->body, len, &b->opts.limits) < 0 ||
        (x->handles = jrpc_arena_alloc(&x->req.arena, 2 * (x->req.ncalls ? x->req.ncalls : 1) *
                                                          sizeof *x->handles)) == NULL ||
        (ad && ad->service.n && scope_calls(x, ad->service) < 0)) {
        batch_free(x);
        return -ENOMEM;
    }
    if (ad && ad->ncalls)
        *ad->ncalls = x->req.ncalls ? x->req.ncalls : 1;
    bool notes = false;   /* it may be answered before its calls end: it may be held */
    x->mstat = x->handles + x->req.ncalls;   /* the same block */
    for (uint32_t i = 0; i < x->req.ncalls; i++) {
        x->handles[i] = NO_HANDLE;
        x->mstat[i] = JRPC_METRICS_NONE;
        notes |= x->req.calls[i].notification;
    }
    x->path = ad ? ad->path : NULL;
    if (notes && ad) {
        if ((x->hold = ad->hold) != NULL)
            x->hold->refs++;
        x->pq = peer_ref(b, ad->peer);
    }
    /* A body the parser refused whole (-32700, -32600) is answered whole,
     * never streamed: its one error object is the spec's answer, which a
     * stream of one answer at position 0 could not be told from (a batch
     * of one, [1]: an array of one). docs/STREAMING.md. */
    if (x->req.body_code)
        x->answer = NULL;
    jrpc_metrics.bodies_in++;
    b->open++;
    x->transport = ad ? ad->transport : JRPC_TRANSPORT_ZMQ;
    x->t0 = jrpc_metrics_tick();   /* metrics and the access log */
    jrpc_hist_observe(&jrpc_metrics.batch, x->req.ncalls);
    if (handle)
        *handle = x;
    uint32_t timeout_ms = ad ? ad->timeout_ms : 0;
    if (timeout_ms == 0 || timeout_ms > b->opts.timeout_ms)
        timeout_ms = b->opts.timeout_ms;
    x->deadline = uv_now(b->loop) + timeout_ms;
    char fp[JRPC_SIGN_HEX_LEN + 1];
    bool ok;
    /* An empty key is no "no key" (issue 36: it ran twice); a front that
     * saw none passes p NULL. */
    bool idem_empty = ad && ad->idem_key.p != NULL && ad->idem_key.n == 0;
    if (notes && queue_full(b, x)) {
        jrpc_metrics.queue_refused++;
        refuse(b, x, NULL, NULL, NULL, -EBUSY,
               "\"too many notification bytes queued, retry later\"");
        ok = false;
    } else if (idem_empty || (x->idem.n && !jrpc_broker_idem_key_ok(x->idem))) {
        refuse(b, x, NULL, NULL, NULL, -EINVAL,
               "{\"reason\":\"an idempotency key is 1 to 255 characters of printable ASCII "
               "without spaces\"}");
        ok = false;
    } else if (x->idem.n && jrpc_signer_body_hash(b->signer, fp, x->body, len) < 0) {
        refuse(b, x, NULL, NULL, NULL, -EAGAIN, "{\"reason\":\"out of memory\"}");
        ok = false;
    } else {
        if (x->idem.n)
            memcpy(x->fp, fp, sizeof x->fp);
        ok = admit(b, x, ad);
    }
    x->busy = false;
    if (ok)
        go(b, x);
    else
        settle(b, x);
    return 0;
}

void jrpc_broker_cancel(jrpc_broker_t *b, jrpc_body_t *x)
{
    assert(!x->replied && !x->detached);
    access_log(b, x, NULL, JRPC_BODY_CANCELLED, 0);
    jrpc_metrics_body(x->transport, JRPC_BODY_CANCELLED);
    if (x->idem_run) {   /* its key is claimed: run on, keep the reply for the retry */
        x->detached = true;
        return;
    }
    x->replied = true; /* nobody to reply to */
    if (x->claiming) { /* freed when Redis answers */
        x->cancelled = true;
        if (x->early)
            withdraw(b, x, 0);
        return;
    }
    if (x->waiting)
        wait_del(b, x);
    withdraw(b, x, 0);
    settle(b, x);
}

jrpc_broker_t *jrpc_broker_new(uv_loop_t *loop, const jrpc_broker_opts_t *opts)
{
    jrpc_broker_t *b = calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    b->loop = loop;
    b->opts = *opts;
    jrpc_metrics_init();
    jrpc_metrics_set_max_methods(opts->metrics_max_methods);
    jrpc_buf_init(&b->out);
    jrpc_buf_init(&b->one);
    b->arenas.max = 32;   /* 512 KiB of 16 KiB chunks at most */
    b->workers = jrpc_workers_new(loop, &opts->workers, on_done, b);
    if (b->workers) {
        jrpc_workers_on_message(b->workers, on_worker_msg, b);
        jrpc_workers_on_probe(b->workers, on_worker_probe, b);
    }
    b->signer = b->workers ? jrpc_signer_new() : NULL;
    if (b->signer == NULL) {
        jrpc_workers_destroy(&b->workers);
        free(b);
        return NULL;
    }
    if (opts->keys || opts->rate.rate || opts->redis) {   /* nonces, rate limits, idempotency */
        char err[256];
        b->replay = jrpc_replay_new(loop, &opts->replay, err, sizeof err);
        if (b->replay == NULL) {
            JRPC_LOG(JRPC_LOG_ERROR, "broker", "event=redis_bad error=\"%s\"", err);
            jrpc_workers_destroy(&b->workers);
            jrpc_signer_destroy(&b->signer);
            free(b);
            return NULL;
        }
    }
    uv_timer_init(loop, &b->timer);
    b->timer.data = b;
    uv_timer_init(loop, &b->idem_timer);
    b->idem_timer.data = b;
    return b;
}

const jrpc_keys_t *jrpc_broker_set_keys(jrpc_broker_t *b, const jrpc_keys_t *keys)
{
    assert((keys == NULL) == (b->opts.keys == NULL));   /* a reload switches no mode */
    const jrpc_keys_t *old = b->opts.keys;
    b->opts.keys = keys;
    return old;
}

void jrpc_broker_drain(jrpc_broker_t *b, void (*on_empty)(void *arg), void *arg)
{
    b->draining = true;
    if (b->open == 0) {
        on_empty(arg);
        return;
    }
    b->on_empty = on_empty;
    b->on_empty_arg = arg;
}

static void on_timer_closed(uv_handle_t *h)
{
    jrpc_broker_t *b = h->data;
    if (!uv_is_closing((uv_handle_t *)&b->idem_timer)) {   /* the second of two */
        uv_close((uv_handle_t *)&b->idem_timer, on_timer_closed);
        return;
    }
    jrpc_buf_dispose(&b->out);
    jrpc_buf_dispose(&b->one);
    jrpc_arena_pool_dispose(&b->arenas);
    for (bbatch_t *x; (x = bb_take(b)) != NULL;)
        free(x);
    free(b);
}

void jrpc_broker_destroy(jrpc_broker_t **self_p)
{
    jrpc_broker_t *b = *self_p;
    if (b == NULL)
        return;
    *self_p = NULL;
    jrpc_broker_stats_t st;
    jrpc_workers_stats_t ws;
    jrpc_broker_stats(b, &st, &ws);
    JRPC_LOG(JRPC_LOG_INFO, "broker",
             "event=stats bodies=%llu calls=%llu timeouts=%llu busy=%llu cancelled=%llu "
             "redispatched=%llu worker_failed=%llu late=%llu malformed=%llu",
             (unsigned long long)st.bodies, (unsigned long long)st.calls,
             (unsigned long long)st.timeouts, (unsigned long long)st.busy,
             (unsigned long long)st.cancelled, (unsigned long long)ws.redispatched,
             (unsigned long long)ws.lost, (unsigned long long)ws.late,
             (unsigned long long)ws.malformed);
    while (b->head) {
        bbatch_t *x = b->head;
        list_remove(b, x);
        if (x->claiming) {   /* early: freed when the claim fails below (-ECANCELED) */
            for (uint32_t i = 0; i < x->req.ncalls; i++)
                x->handles[i] = NO_HANDLE;   /* the workers go first: nothing to take back */
            x->outstanding = 0;
            continue;
        }
        batch_free(x);
    }
    while (b->waiters) {
        bbatch_t *x = b->waiters;
        b->waiters = x->wnext;
        batch_free(x);
    }
    jrpc_workers_destroy(&b->workers);
    jrpc_replay_destroy(&b->replay);
    jrpc_signer_destroy(&b->signer);
    jrpc_rate_local_dispose(&b->rate_local);
    jrpc_rate_counts_dispose(&b->rate_counts);
    uv_close((uv_handle_t *)&b->timer, on_timer_closed);
}

/* Bodies of one class, every transport. */
static uint64_t bodies_of(int cls)
{
    uint64_t n = 0;
    for (int t = 0; t < JRPC_METRICS_TRANSPORTS; t++)
        n += jrpc_metrics.bodies[t][cls];
    return n;
}

void jrpc_broker_stats(const jrpc_broker_t *b, jrpc_broker_stats_t *st,
                       jrpc_workers_stats_t *wst)
{
    const jrpc_metrics_t *m = &jrpc_metrics;
    st->bodies = m->bodies_in;
    st->calls = m->dispatched;
    st->timeouts = m->timeouts;
    st->cancelled = bodies_of(JRPC_BODY_CANCELLED);
    st->busy = bodies_of(JRPC_BODY_BUSY);
    st->unauthorized = bodies_of(JRPC_BODY_UNAUTHORIZED);
    st->replays = bodies_of(JRPC_BODY_REPLAYED);
    st->replay_down = bodies_of(JRPC_BODY_UNAVAILABLE);
    st->acl_denied = m->acl_denied;
    st->open = b->open;
    if (wst)
        jrpc_workers_stats(b->workers, wst);
}

static void each_limited(void *src, jrpc_metrics_count_fn emit, void *arg)
{
    const jrpc_rate_counts_t *c = src;
    for (uint32_t i = 0; c->e && i < JRPC_RATE_COUNTS; i++)
        if (c->e[i].id[0])
            emit(arg, c->e[i].id, c->e[i].calls);
    if (c->other)
        emit(arg, "other", c->other);
}

static void each_credit(void *src, jrpc_metrics_credit_fn emit, void *arg)
{
    jrpc_workers_each_credit(src, emit, arg);
}

static void each_worker(void *src, jrpc_metrics_worker_fn emit, void *arg)
{
    jrpc_workers_each_worker(src, emit, arg);
}

void jrpc_broker_metrics(jrpc_broker_t *b, jrpc_metrics_read_t *rd)
{
    jrpc_broker_stats_t bs;
    jrpc_workers_stats_t ws;
    jrpc_replay_stats_t rs = { 0 };
    jrpc_broker_stats(b, &bs, &ws);
    if (b->replay)
        jrpc_replay_stats(b->replay, &rs);
    *rd = (jrpc_metrics_read_t){
        .bodies_open = bs.open, .calls_inflight = ws.inflight, .calls_queued = ws.queued,
        .workers_connected = ws.workers, .redis_up = b->replay && jrpc_replay_up(b->replay),
        .redis_failures = rs.failures, .replays = bs.replays,
        .signature_failures = bs.unauthorized, .acl_denied = bs.acl_denied,
        .late_answers = ws.late, .redispatched = ws.redispatched, .calls_lost = ws.lost,
        .hedges = ws.hedges, .hedges_won = ws.hedges_won,
        .frames_malformed = ws.malformed,
        .methods = ws.methods, .ready_refused = ws.ready_refused, .ejections = ws.ejections,
        .methods_refused = ws.methods_refused,
        .each_credit = each_credit, .src = b->workers, .each_worker = each_worker,
        .each_limited = each_limited, .limited_src = &b->rate_counts,
    };
}

int jrpc_broker_status_workers(jrpc_broker_t *b, jrpc_buf_t *out)
{
    return jrpc_workers_status(b->workers, out);
}

int jrpc_broker_status_methods(jrpc_broker_t *b, jrpc_buf_t *out)
{
    return jrpc_workers_status_methods(b->workers, out);
}

int jrpc_broker_ready(jrpc_broker_t *b, const char *methods, jrpc_span_t *missing)
{
    if (b->draining)
        return JRPC_BROKER_EDRAINING;
    if (methods == NULL || *methods == '\0') {
        jrpc_workers_stats_t ws;
        jrpc_workers_stats(b->workers, &ws);
        if (ws.workers == 0)
            return JRPC_BROKER_ENOWORKER;
    }
    for (const char *p = methods; p && *p;) {
        size_t n = strcspn(p, ",");
        if (n > 0 && !jrpc_workers_serves(b->workers, p, n)) {
            if (missing)
                *missing = (jrpc_span_t){ p, n };
            return JRPC_BROKER_ENOMETHOD;
        }
        p += n + (p[n] == ',');
    }
    if (b->replay && !jrpc_replay_up(b->replay))
        return JRPC_BROKER_EREDIS;
    return 0;
}

void jrpc_broker_guard(const jrpc_broker_t *b, jrpc_broker_guard_t *g)
{
    jrpc_replay_stats_t rs = { 0 };
    *g = (jrpc_broker_guard_t){ .on = b->replay != NULL, .draining = b->draining,
                                .refuse_to = INT64_MIN };
    if (b->replay == NULL)
        return;
    jrpc_replay_stats(b->replay, &rs);
    g->up = jrpc_replay_up(b->replay);
    g->lost_at = jrpc_replay_lost_at(b->replay);
    g->refuse_to = jrpc_replay_refuse_to(b->replay);
    g->epoch_changes = rs.epoch_changes;
    g->reconnects = rs.reconnects;
    g->failures = rs.failures;
    g->masters_found = rs.masters_found;
    g->rtt_us_sum = rs.rtt_us_sum;
    g->rtt_count = rs.rtt_count;
}

const char *jrpc_broker_strerror(int rc)
{
    switch (rc) {
    case 0:                     return "ready";
    case JRPC_BROKER_EDRAINING: return "draining";
    case JRPC_BROKER_ENOMETHOD: return "no worker for a required method";
    case JRPC_BROKER_ENOWORKER: return "no worker connected";
    case JRPC_BROKER_EREDIS:    return "redis down";
    case -ENOMEM:               return "out of memory";
    default:                    return "unknown error";
    }
}

/* ---- services serving a method (MCP's /mcp) ---- */

typedef struct svc_walk {
    const char *method;
    jrpc_span_t names[64];   /* distinct services, unsorted */
    uint32_t    n;
} svc_walk_t;

static void svc_seen(void *arg, const jrpc_method_info_t *m)
{
    svc_walk_t *w = arg;
    if (!(m->method.n == strlen(w->method) && memcmp(m->method.p, w->method, m->method.n) == 0))
        return;
    for (uint32_t i = 0; i < w->n; i++)
        if (w->names[i].n == m->service.n && memcmp(w->names[i].p, m->service.p, m->service.n) == 0)
            return;
    if (w->n < sizeof w->names / sizeof *w->names)
        w->names[w->n++] = m->service;
}

static int span_cmp(const void *a, const void *b)
{
    const jrpc_span_t *x = a, *y = b;
    size_t n = x->n < y->n ? x->n : y->n;
    int c = n ? memcmp(x->p, y->p, n) : 0;
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

int jrpc_broker_services_serving(jrpc_broker_t *b, const char *method, jrpc_buf_t *out)
{
    svc_walk_t w = { .method = method };
    jrpc_workers_each_method(b->workers, svc_seen, &w);
    qsort(w.names, w.n, sizeof *w.names, span_cmp);
    jrpc_buf_reset(out);
    int rc = jrpc_buf_puts(out, "[");
    for (uint32_t i = 0; rc == 0 && i < w.n; i++) {
        if (i && (rc = jrpc_buf_puts(out, ",")) < 0)
            break;
        rc = jrpc_buf_putc(out, '"');   /* a service name is a token: nothing to escape */
        if (rc == 0)
            rc = jrpc_buf_append(out, w.names[i].p, w.names[i].n);
        if (rc == 0)
            rc = jrpc_buf_putc(out, '"');
    }
    if (rc == 0)
        rc = jrpc_buf_puts(out, "]");
    return rc < 0 ? -ENOMEM : (int)w.n;
}
