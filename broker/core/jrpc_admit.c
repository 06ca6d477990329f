/* jrpc_admit — whether a body may run: its signature, its nonce, its rate.
 *
 * The checks that need no I/O (the signature, jrpc_auth), then the nonce and
 * the rate limit claimed in Redis (or the local budget while Redis is
 * unavailable), with early dispatch: a signed body of idempotent methods
 * runs while its nonce is claimed. Here: admit() and what Redis' answers
 * mean for a body, the refusals' data (401, 409, 429, 503). Not here: the
 * checks themselves (guard/jrpc_auth, guard/jrpc_replay, guard/jrpc_rate),
 * idempotency keys, claimed after admission (jrpc_idem.c), a connection's
 * authentication (jrpc_conn_auth.c). */
#include "jrpc_broker_int.h"

/* The data of a 503 / -32006: Redis is unavailable (-EAGAIN), or it lost its
 * memory and the body is signed too early to tell whether it ran before
 * (-ESTALE). Returns a constant, or data[0, size) written. */
const char *unavailable_data(jrpc_broker_t *b, int rc, char *data, size_t size)
{
    if (rc != -ESTALE)
        return "{\"reason\":\"replay protection is unavailable, retry later\"}";
    snprintf(data, size,
             "{\"reason\":\"replay protection lost its memory: bodies signed before not_before "
             "are refused\",\"not_before\":%lld,\"server_time\":%lld}",
             (long long)jrpc_replay_refuse_to(b->replay) + 1, (long long)time(NULL));
    return data;
}

/* 503 / -32006 (unavailable_data). */
static void refuse_unavailable(jrpc_broker_t *b, bbatch_t *x, int rc)
{
    char data[256];
    refuse(b, x, NULL, NULL, NULL, rc, unavailable_data(b, rc, data, sizeof data));
}

static bool rate_local_ok(jrpc_broker_t *b, bbatch_t *x);
static void refuse_limited(jrpc_broker_t *b, bbatch_t *x, uint64_t retry_us);

/* ---- early dispatch: a signed body's calls run while its nonce is claimed ----
 *
 * In a closed loop the claim's round trip to Redis adds to every body's
 * latency. When every call of a signed body is of a method its workers
 * declared idempotent (running it twice has no extra effect: the same
 * promise hedging and redispatch rely on), the calls go out at once and
 * only the reply waits for the claim: settle() holds it while x->claiming.
 * The claim refused (replay, Redis unavailable, memory lost), the answers
 * are dropped and the client gets exactly the refusal it got before. Not
 * early: a body with any other method, an idempotency key (its claim comes
 * after the nonce's), a rate limit (a client over its limit must not keep
 * the workers busy with bodies that will be refused), or its answers
 * streamed (they would leave as they come).
 *
 * Bounded (issue 36): a captured body replayed N times used to run N times
 * at the workers (each refused, unanswered). Now a body does not go early
 * while another early body with the same nonce is being claimed (the
 * replays that race the first claim), nor while its key is cooling down:
 * for one window (--skew) after any body of the key was refused at its
 * claim (a replay, memory lost, Redis unavailable); each refusal re-arms
 * it. A captured body thus makes at most one unanswered run per key, per
 * broker, per window. Both tables are fixed and hashed: a collision only
 * sends a body the ordinary way (claim first), never the other way. */
static bool early_ok(jrpc_broker_t *b, const bbatch_t *x)
{
    if (x->idem.n || x->answer || x->req.ncalls == 0)
        return false;
    jrpc_span_t last = { NULL, 0 };   /* batches often repeat one method */
    for (uint32_t i = 0; i < x->req.ncalls; i++) {
        const jrpc_call_t *c = &x->req.calls[i];
        if (c->answered)   /* by the parser: never dispatched */
            continue;
        /* The parser hands a run of one method the same copy (jrpc_batch):
         * the pointers compare first, the bytes only when they differ. */
        if (last.n && c->method.n == last.n &&
            (c->method.p == last.p || jrpc_same(c->method.p, last.p, last.n)))
            continue;
        if (!jrpc_workers_idempotent(b->workers, c->method))
            return false;
        last = c->method;
    }
    return true;
}

static uint32_t fnv1a(uint32_t h, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)p[i]) * 16777619u;
    return h;
}

static uint64_t *early_cool_cell(jrpc_broker_t *b, const bbatch_t *x)
{
    return &b->early_cool[fnv1a(2166136261u, x->key_id, x->key_id_n) & (EARLY_COOL_CELLS - 1)];
}

/* Whether x (early_ok) may go early now: its key not cooling down, no early
 * body with its nonce in flight. When it may, its nonce counts as in
 * flight until on_admitted. */
static bool early_take(jrpc_broker_t *b, bbatch_t *x, jrpc_span_t nonce)
{
    if (uv_now(b->loop) < *early_cool_cell(b, x))
        return false;
    uint32_t h = fnv1a(fnv1a(2166136261u, x->key_id, x->key_id_n), "\n", 1);
    uint32_t cell = fnv1a(h, nonce.p, nonce.n) & (EARLY_NONCE_CELLS - 1);
    if (b->early_nonces[cell] != 0)
        return false;
    b->early_nonces[cell]++;
    x->early_cell = cell;
    return true;
}

/* The claim of an early body succeeded: its reply may leave once every
 * answer is in. Its key is looked up again, as start() does for a body
 * dispatched after its claim: one a reload removed meanwhile is refused. */
static void early_claimed(jrpc_broker_t *b, bbatch_t *x)
{
    if (b->opts.keys && x->key_id_n &&
        jrpc_keys_find(b->opts.keys, (jrpc_span_t){ x->key_id, x->key_id_n }) == NULL) {
        withdraw(b, x, 0);
        refuse_auth(b, x, JRPC_AUTH_EUNKNOWN_KEY, (int64_t)time(NULL));
    }
    settle(b, x);
}

/* Redis answered a body's claim (jrpc_replay_admit): its nonce, its rate
 * limit, or both. A body without a nonce whose rate could not be asked
 * falls back to the local budget; a signed one fails closed. */
static void on_admitted(void *arg, int rc, uint64_t wait_us)
{
    bbatch_t *x = arg;
    jrpc_broker_t *b = x->broker;
    x->claiming = false;
    jrpc_metrics_tick();
    timing_redis(x);
    if (x->early)
        b->early_nonces[x->early_cell]--;
    if (x->signed_body && rc != 0 && rc != -EDQUOT)   /* see early_ok: a window's cool-down */
        *early_cool_cell(b, x) = uv_now(b->loop) + (uint64_t)b->opts.skew_s * 1000;
    if (x->early && rc != 0)   /* refused: what its calls answered, or will, is dropped */
        withdraw(b, x, 0);
    if (x->cancelled) {
        settle(b, x);
    } else if (rc == 0 && x->early) {
        early_claimed(b, x);
    } else if (rc == 0) {
        go(b, x);
    } else if (rc == -EEXIST) {
        refuse(b, x, NULL, NULL, NULL, rc,
               "{\"reason\":\"this nonce was used before: sign each body with a new nonce\"}");
        settle(b, x);
    } else if (rc == -EDQUOT) {
        refuse_limited(b, x, wait_us);
        settle(b, x);
    } else if (!x->signed_body) {
        if (rate_local_ok(b, x))
            go(b, x);
        else
            settle(b, x);
    } else {
        refuse_unavailable(b, x, rc);
        settle(b, x);
    }
}

/* The signed timestamp of a request jrpc_auth_check() accepted (so the
 * text is canonical decimal of at most 19 digits). */
int64_t signed_at(const jrpc_auth_req_t *req)
{
    if (req->has_timestamp)
        return req->timestamp;
    int64_t ts = 0;
    for (size_t i = 0; i < req->timestamp_text.n; i++)
        ts = ts * 10 + (req->timestamp_text.p[i] - '0');
    return ts;
}

/* Refuses x unauthorized for a JRPC_AUTH_E* reason (rc). */
void refuse_auth(jrpc_broker_t *b, bbatch_t *x, int rc, int64_t now)
{
    char data[320];
    snprintf(data, sizeof data, "{\"reason\":\"%s\",\"server_time\":%lld}",
             jrpc_auth_strerror(rc), (long long)now);
    refuse(b, x, NULL, NULL, NULL, -EACCES, data);
}

/* ---- rate limits (docs/SIGNING.md "Rate limits") ---- */

/* Who x is to its rate limit and its idempotency key: its key's id, or
 * for a body without a key the client's address (jrpc_rate_who_addr). */
static void keep_who(bbatch_t *x, const jrpc_admit_t *ad)
{
    if (x->key_id_n) {
        memcpy(x->rwho, x->key_id, x->key_id_n);
        x->rwho_n = x->key_id_n;
        return;
    }
    size_t n = jrpc_rate_who_addr(x->rwho, sizeof x->rwho,
                                  ad ? ad->peer : (jrpc_span_t){ NULL, 0 });
    x->rwho_n = (uint8_t)n;
}

/* Decides whether a limit applies to x (key: its key, NULL for none) and
 * keeps what the check needs in x: who it is (also for its idempotency
 * key), the limit, and the cost of its calls (each its method's cost= under
 * key, else 1). Returns true when a limit applies. */
static bool rate_prepare(const jrpc_broker_t *b, bbatch_t *x, const jrpc_admit_t *ad,
                         const jrpc_key_t *key)
{
    jrpc_rate_limit_t lim = b->opts.rate;
    uint32_t rate, burst;
    if (key && jrpc_key_rate(key, &rate, &burst)) {
        lim.rate = rate;
        lim.burst = burst ? burst : b->opts.rate.burst;
    }
    /* Who x is, only when a limit or its idempotency key needs it: no
     * formatting on the path of a body that needs neither. */
    if (lim.rate || x->idem.n)
        keep_who(x, ad);
    if (lim.rate == 0)
        return false;
    if (lim.burst == 0)
        lim.burst = lim.rate;   /* one second's worth */
    x->rlim = lim;
    x->rcost = 0;
    for (uint32_t i = 0; i < x->req.ncalls; i++) {
        const jrpc_call_t *c = &x->req.calls[i];
        x->rcost += key && c->method.n ? jrpc_key_cost(key, c->method) : 1;
    }
    return true;
}

/* Refuses x for its rate limit: 429 / -32007, retry_us from now (UINT64_MAX:
 * the body alone is more than the burst, it never passes). */
static void refuse_limited(jrpc_broker_t *b, bbatch_t *x, uint64_t retry_us)
{
    char data[320];
    jrpc_outcome_t out = jrpc_outcome_refused(-EDQUOT);
    if (retry_us == UINT64_MAX) {
        snprintf(data, sizeof data, "{\"reason\":\"this body costs %llu calls, more than the burst "
                 "of its rate limit (%u): it never passes; send it in smaller parts\",\"cost\":%llu,"
                 "\"burst\":%u}", (unsigned long long)x->rcost, x->rlim.burst,
                 (unsigned long long)x->rcost, x->rlim.burst);
    } else {
        uint64_t ms = (retry_us + 999) / 1000;
        out.retry_after_s = (uint32_t)((ms + 999) / 1000);
        snprintf(data, sizeof data, "{\"reason\":\"rate limit: %u calls/s, burst %u\","
                 "\"cost\":%llu,\"retry_after_ms\":%llu}", x->rlim.rate, x->rlim.burst,
                 (unsigned long long)x->rcost, (unsigned long long)ms);
    }
    jrpc_rate_count(&b->rate_counts, x->key_id_n ? (jrpc_span_t){ x->key_id, x->key_id_n }
                                                 : (jrpc_span_t){ "-", 1 }, x->rcost);
    refuse_out(b, x, NULL, NULL, NULL, out, data);
}

/* x on this broker's local budget (Redis unavailable). Returns false when
 * x was refused. */
static bool rate_local_ok(jrpc_broker_t *b, bbatch_t *x)
{
    if (b->rate_local.tat == NULL &&
        jrpc_rate_local_init(&b->rate_local, b->opts.rate_local_pct) < 0) {
        refuse(b, x, NULL, NULL, NULL, -EAGAIN,
               "{\"reason\":\"the rate limit cannot be checked (out of memory)\"}");
        return false;
    }
    uint64_t wait = jrpc_rate_local(&b->rate_local, (jrpc_span_t){ x->rwho, x->rwho_n },
                                    (int64_t)(uv_hrtime() / 1000), x->rlim, x->rcost);
    if (wait == 0)
        return true;
    refuse_limited(b, x, wait);
    return false;
}

/* What jrpc_replay_admit takes for x's limit (rate_prepare said one
 * applies). NULL when x is over the burst whatever Redis says: x refused. */
static const jrpc_replay_rate_t *rate_args(jrpc_broker_t *b, bbatch_t *x, jrpc_replay_rate_t *rr)
{
    if (x->rcost > x->rlim.burst) {
        refuse_limited(b, x, UINT64_MAX);
        return NULL;
    }
    *rr = (jrpc_replay_rate_t){ .who = { x->rwho, x->rwho_n },
                                .cost_us = x->rcost * 1000000u / x->rlim.rate,
                                .burst_us = (uint64_t)x->rlim.burst * 1000000u / x->rlim.rate };
    return rr;
}

/* The rate limit of a body without a nonce: asked of Redis (shared by
 * every broker), or on the local budget while Redis is unavailable.
 * Returns true when x may go on at once; false when it was refused or
 * waits for Redis (on_admitted). */
static bool rate_shared(jrpc_broker_t *b, bbatch_t *x)
{
    jrpc_replay_rate_t rr;
    if (rate_args(b, x, &rr) == NULL)
        return false;
    if (b->replay) {
        x->claiming = true;
        x->t_claim = jrpc_metrics.now;   /* Server-Timing */
        int rc = jrpc_replay_admit(b->replay, (jrpc_span_t){ NULL, 0 }, (jrpc_span_t){ NULL, 0 },
                                   0, &rr, on_admitted, x);
        if (rc == 0)
            return false;
        x->claiming = false;
    }
    return rate_local_ok(b, x);
}

/* The checks that need no I/O; then the nonce goes to Redis. Returns true
 * when the body may go on at once (open broker, or a connection's key). */
bool admit(jrpc_broker_t *b, bbatch_t *x, const jrpc_admit_t *ad)
{
    if (b->opts.keys == NULL)
        return !rate_prepare(b, x, ad, NULL) || rate_shared(b, x);
    int64_t now = (int64_t)time(NULL);
    if (ad && ad->key_id.n) {   /* authenticated with its connection */
        const jrpc_key_t *key = jrpc_keys_find(b->opts.keys, ad->key_id);
        if (key == NULL) {   /* removed by a reload */
            refuse_auth(b, x, JRPC_AUTH_EUNKNOWN_KEY, now);
            return false;
        }
        keep_key_id(x->key_id, &x->key_id_n, ad->key_id);
        return !rate_prepare(b, x, ad, key) || rate_shared(b, x);
    }
    static const jrpc_auth_req_t none;
    const jrpc_auth_req_t *req = ad ? &ad->auth : &none;
    const jrpc_key_t *key;
    int rc = jrpc_auth_check(b->opts.keys, b->signer, req, x->body, x->len, now, b->opts.skew_s,
                             &key);
    if (x->t_in) {   /* Server-Timing: the check is the one costly step here */
        x->auth_ns = jrpc_metrics_tick() - x->t0;
        x->phases |= 1u << JRPC_TIMING_AUTH;
    }
    if (rc < 0) {
        refuse_auth(b, x, rc, now);
        return false;
    }
    keep_key_id(x->key_id, &x->key_id_n, jrpc_key_id(key));
    bool limited = rate_prepare(b, x, ad, key);
    if (jrpc_key_is_bearer(key))   /* a token: no nonce to claim (docs/SIGNING.md) */
        return !limited || rate_shared(b, x);
    jrpc_replay_rate_t rr;
    if (limited && rate_args(b, x, &rr) == NULL)
        return false;
    x->claiming = true;
    x->t_claim = jrpc_metrics.now;   /* Server-Timing */
    x->signed_body = true;
    rc = jrpc_replay_admit(b->replay, req->key, req->nonce, signed_at(req), limited ? &rr : NULL,
                           on_admitted, x);
    if (rc < 0) {
        x->claiming = false;
        refuse_unavailable(b, x, rc);
    } else if (!limited && b->opts.early_dispatch && early_ok(b, x) &&
               early_take(b, x, req->nonce)) {
        x->early = true;
        start(b, x);   /* settle() holds the reply until on_admitted */
    }
    return false;
}
