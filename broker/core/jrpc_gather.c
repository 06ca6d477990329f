/* jrpc_gather — a body's answers gathered into what the client gets.
 *
 * The workers' answers filled in per call (on_done), answers of our own
 * (answer_code), each sent as it comes in streamed mode, the reply written
 * once the last is in, a whole body refused with one error object, the
 * access line of each, and rpc.discover answered with the OpenRPC document
 * (jrpc_openrpc) of what the body's key may call. Not here: when a body is settled or expires
 * (jrpc_broker.c), why it is refused (jrpc_admit.c, jrpc_idem.c), keeping
 * a reply under its idempotency key in Redis (guard/jrpc_replay). */
#include "jrpc_broker_int.h"
#include "jrpc_status_page.h"

#include "jrpc_openrpc.h"

/* The access line's status= for each class: the numbers it has always
 * printed (docs/ARCHITECTURE.md, "The access line"). A log vocabulary, not
 * an HTTP status: the HTTP front chooses its own from the class. */
static const int log_status[JRPC_BODY_NOUTCOMES] = {
    [JRPC_BODY_OK] = 200, [JRPC_BODY_INVALID] = 200, [JRPC_BODY_BUSY] = 503,
    [JRPC_BODY_UNAUTHORIZED] = 401, [JRPC_BODY_REPLAYED] = 409,
    [JRPC_BODY_UNAVAILABLE] = 503, [JRPC_BODY_LIMITED] = 429, [JRPC_BODY_MISMATCH] = 422,
    [JRPC_BODY_INPROGRESS] = 409, [JRPC_BODY_CANCELLED] = 499 };

#define ACCESS_METHODS 3        /* method names the access line shows of a batch */
#define ACCESS_DISTINCT 4096    /* slots of the hash set on the stack: counts up to half */

/* A method name as the access line prints it: up to 64 bytes of
 * [A-Za-z0-9._:/@-], anything else as '?' (a client chose it; no quote,
 * space or newline reaches the log). Returns the bytes written to dst. */
static size_t log_name(char *dst, jrpc_span_t m)
{
    size_t n = m.n < 64 ? m.n : 64;
    for (size_t i = 0; i < n; i++) {
        char c = m.p[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == ':' || c == '/' || c == '@' || c == '-';
        dst[i] = ok ? c : '?';
    }
    return n;
}

/* The access line's methods: how many distinct names the body's calls
 * have (exact up to ACCESS_DISTINCT / 2, then that, a lower bound), the first
 * ACCESS_METHODS of them, comma-separated, into names ("-": none).
 * Runs only when the line is written. */
static uint32_t access_methods(const jrpc_batch_t *req, char *names, size_t size)
{
    uint64_t set[ACCESS_DISTINCT];   /* FNV-1a 64 of each name; 0: empty */
    uint32_t distinct = 0, size_set = 16;
    size_t len = 0;
    while (size_set < 2 * (uint64_t)req->ncalls && size_set < ACCESS_DISTINCT)
        size_set *= 2;   /* a single call clears 128 bytes, not 32 KiB */
    memset(set, 0, size_set * sizeof *set);
    for (uint32_t i = 0; i < req->ncalls && distinct < size_set / 2; i++) {
        jrpc_span_t m = req->calls[i].method;
        if (m.n == 0)
            continue;
        uint64_t h = 14695981039346656037ull;
        for (size_t k = 0; k < m.n; k++)
            h = (h ^ (uint8_t)m.p[k]) * 1099511628211ull;
        h |= 1;
        uint32_t j = (uint32_t)h & (size_set - 1);
        while (set[j] && set[j] != h)
            j = (j + 1) & (size_set - 1);
        if (set[j])
            continue;
        set[j] = h;
        if (distinct++ < ACCESS_METHODS && len + 66 < size) {
            if (len)
                names[len++] = ',';
            len += log_name(names + len, m);
        }
    }
    if (len == 0)
        names[len++] = '-';
    names[len] = '\0';
    return distinct;
}

/* The access line of a body (x NULL: refused before it was kept, busy).
 * errors counts the error objects in the reply, read from the calls'
 * outcomes (one for a body refused whole, none when cancelled). */
void access_log(jrpc_broker_t *b, const bbatch_t *x, const jrpc_admit_t *ad, int cls,
                       size_t bytes_out)
{
    if (!b->opts.access_log || JRPC_LOG_INFO < jrpc_log_level)
        return;
    uint32_t calls = 0, errors = 0;
    jrpc_span_t key = { "-", 1 }, tp = { "-", 1 }, peer = { "-", 1 };
    size_t bytes_in = 0;
    uint64_t us = 0;
    int transport = ad ? ad->transport : JRPC_TRANSPORT_ZMQ;
    const char *path = ad ? ad->path : NULL;
    char names[ACCESS_METHODS * 66 + 2] = "-";
    uint32_t distinct = 0;
    if (x) {
        transport = x->transport;
        path = x->path;
        distinct = access_methods(&x->req, names, sizeof names);
        calls = x->req.ncalls;
        if (cls == JRPC_BODY_OK || cls == JRPC_BODY_INVALID)
            for (uint32_t i = 0; i < x->req.ncalls; i++)
                errors += !x->req.calls[i].notification && x->req.calls[i].error;
        else
            errors = cls != JRPC_BODY_CANCELLED;
        if (x->key_id_n)
            key = (jrpc_span_t){ x->key_id, x->key_id_n };
        if (x->trace.n)
            tp = x->trace;
        if (x->peer.n)
            peer = x->peer;
        bytes_in = x->len;
        us = (uv_hrtime() - x->t0) / 1000;
    } else {
        errors = 1;
        if (ad && ad->traceparent.n && jrpc_traceparent_valid(ad->traceparent.p, ad->traceparent.n))
            tp = ad->traceparent;
        if (ad && ad->peer.n)
            peer = ad->peer;
    }
    JRPC_LOG(JRPC_LOG_INFO, "access",
             "event=access transport=%s path=%s peer=%.*s key=%.*s calls=%u methods=%u "
             "method=%s errors=%u status=%d "
             "outcome=%s bytes_in=%zu bytes_out=%zu latency_us=%llu traceparent=%.*s%s%s",
             jrpc_metrics_transport_names[jrpc_metrics_transport(transport)],
             path ? path : jrpc_metrics_transport_names[jrpc_metrics_transport(transport)],
             (int)peer.n, peer.p, (int)key.n, key.p, calls, distinct, names, errors,
             log_status[cls], jrpc_body_class_name(cls),
             bytes_in, bytes_out, (unsigned long long)us, (int)tp.n, tp.p,
             x && x->service[0] ? " service=" : "", x ? x->service : "");
}

/* Server-Timing (docs/ARCHITECTURE.md): where x's time went, into
 * b->timing, which the front reads during the reply call; NULL when x is
 * not timed. Reads the clock once, the reply just written; not for a
 * single call whose answer's read was the last clock read: its reply
 * follows in the same callback, written in well under the µs the value
 * shows, so that read's stamp is the end (one clock read less a body). */
static JRPC_ALWAYS_INLINE const jrpc_timing_t *timing_fill(jrpc_broker_t *b, const bbatch_t *x)
{
    if (x->t_in == 0)
        return NULL;
    uint64_t end = x->req.ncalls == 1 && x->t_last == jrpc_metrics.now ? x->t_last
                                                                         : jrpc_metrics_tick();
    jrpc_timing_t *t = &b->timing;
    t->has = 1u << JRPC_TIMING_PARSE | 1u << JRPC_TIMING_TOTAL | x->phases;
    t->ns[JRPC_TIMING_PARSE] = x->t0 - x->t_in;
    t->ns[JRPC_TIMING_AUTH] = x->auth_ns;
    t->ns[JRPC_TIMING_REDIS] = x->redis_ns;
    if (x->t_last) {   /* a worker answered: the last one's call was the slowest */
        uint64_t admitting = x->t_disp - x->t0;   /* its queue time counts from t0 */
        t->has |= 1u << JRPC_TIMING_QUEUE | 1u << JRPC_TIMING_WORKER | 1u << JRPC_TIMING_GATHER;
        t->ns[JRPC_TIMING_QUEUE] = x->slow_q > admitting ? x->slow_q - admitting : 0;
        t->ns[JRPC_TIMING_WORKER] = x->slow_w;
        t->ns[JRPC_TIMING_GATHER] = end > x->t_last ? end - x->t_last : 0;
    }
    t->ns[JRPC_TIMING_TOTAL] = end - x->t_in;
    return t;
}

const jrpc_timing_t *timing_of(jrpc_broker_t *b, const bbatch_t *x)
{
    return timing_fill(b, x);
}

void reply(jrpc_broker_t *b, bbatch_t *x)
{
    x->replied = true;
    jrpc_buf_reset(&b->out);
    size_t bytes_out;
    if (x->answer) {   /* streamed: the answers are out; the end event */
        char sum[64];
        int n = snprintf(sum, sizeof sum, "{\"answered\":%u,\"timed_out\":%u}", x->streamed,
                         x->timed_out);
        jrpc_buf_append(&b->out, sum, (size_t)n);
        bytes_out = x->bytes_out;
    } else {
        if (jrpc_batch_write_reply(&x->req, &b->out) < 0) {
            jrpc_buf_reset(&b->out);
            jrpc_batch_write_error(&b->out, JRPC_INTERNAL_ERROR, "out of memory");
        }
        bytes_out = b->out.len;
    }
    jrpc_outcome_t out = { .cls = x->req.body_code ? JRPC_BODY_INVALID : JRPC_BODY_OK,
                           .code = x->req.body_code,
                           .answered = x->answer ? x->streamed : x->req.nanswers,
                           .timed_out = x->timed_out, .timing = timing_fill(b, x) };
    /* MCP: a session no worker knows is the front's 404 (docs/MCP.md). */
    if (x->mcp && x->req.ncalls == 1 && x->req.calls[0].error &&
        x->req.calls[0].code == JRPC_SESSION_UNKNOWN)
        out.code = JRPC_SESSION_UNKNOWN;
    if (x->idem_run && b->replay) {   /* kept for a retry under the same key */
        char who[IDEM_WHO_MAX];
        int rc = jrpc_replay_idem_store(b->replay, idem_who(x, who), x->idem,
                                        x->fp, b->out.p, b->out.len, b->opts.idem_ttl_s);
        if (rc < 0)
            JRPC_LOG(JRPC_LOG_WARN, "broker", "event=idem_store_failed bytes=%zu error=\"%s\"",
                     b->out.len, rc == -EMSGSIZE ? "reply larger than 8 MiB: not kept"
                                                 : "Redis unavailable");
    }
    if (x->detached)   /* its client left; logged as cancelled then */
        return;
    access_log(b, x, NULL, out.cls, bytes_out);
    jrpc_metrics_reply(x->transport, &x->req, x->mstat, x->t0);
    x->fn(x->ctx, out, b->out.p, b->out.len);
}

/* Refuses the whole body (rc: the C error, mapped by jrpc_outcome_refused)
 * with one error object, id null, data_json as its "data"; through the same
 * reply function as answers. x is NULL for a body refused before it was
 * kept (busy): ad, fn and ctx say where it goes. */
void refuse_out(jrpc_broker_t *b, bbatch_t *x, const jrpc_admit_t *ad, jrpc_reply_fn fn,
                       void *ctx, jrpc_outcome_t out, const char *data_json)
{
    uint64_t t0 = x ? x->t0 : jrpc_metrics_tick();
    int transport = x ? x->transport : ad ? ad->transport : JRPC_TRANSPORT_ZMQ;
    if (x) {
        x->replied = true;
        fn = x->fn;
        ctx = x->ctx;
    }
    jrpc_buf_reset(&b->out);
    if (jrpc_batch_write_error_json(&b->out, out.code, data_json) < 0)
        jrpc_buf_reset(&b->out);
    out.timing = x ? timing_of(b, x) : NULL;
    access_log(b, x, ad, out.cls, b->out.len);
    jrpc_metrics_body_refused(transport, out.cls, out.code, t0);
    jrpc_status_page_refused(transport, out.cls, out.code, data_json);
    fn(ctx, out, b->out.p, b->out.len);
}

void refuse(jrpc_broker_t *b, bbatch_t *x, const jrpc_admit_t *ad, jrpc_reply_fn fn,
                   void *ctx, int rc, const char *data_json)
{
    refuse_out(b, x, ad, fn, ctx, jrpc_outcome_refused(rc), data_json);
}

/* Streamed mode: sends call i's answer, just filled, to the front. Once per
 * call: every fill is guarded by c->answered. */
void stream_answer(jrpc_broker_t *b, bbatch_t *x, uint32_t i)
{
    if (x->answer == NULL || x->replied || x->req.calls[i].notification)
        return;
    jrpc_buf_reset(&b->one);
    if (jrpc_batch_write_answer(&x->req, i, &b->one) < 0)
        return;   /* out of memory: the end's count says one fewer */
    x->streamed++;
    x->bytes_out += b->one.len;
    x->answer(x->ctx, i, b->one.p, b->one.len);
}

/* Out of memory while answering call c: the reply writer writes -32603
 * "no answer" for it, and that is its outcome. */
static void answer_lost(jrpc_call_t *c)
{
    c->answered = true;
    c->error = true;
    c->code = JRPC_INTERNAL_ERROR;
}

void answer_code(bbatch_t *x, uint32_t i, int code, const char *data)
{
    jrpc_call_t *c = &x->req.calls[i];
    if (c->notification || c->answered)
        return;
    if (jrpc_batch_answer_error(&x->req, i, code, data) < 0)
        answer_lost(c);
    x->unanswered--;
    stream_answer(x->broker, x, i);
}

void on_done(void *owner, uint32_t i, int kind, int code, jrpc_span_t value, void *arg)
{
    jrpc_broker_t *b = arg;
    bbatch_t *x = owner;
    jrpc_call_t *c = &x->req.calls[i];
    x->handles[i] = NO_HANDLE;
    x->outstanding--;
    if (!c->notification && !c->answered) {
        int rc = 0;
        if (x->t_in && kind != JRPC_DONE_FAILED) {
            /* Server-Timing: the calls of a body are dispatched together,
             * so the one answered last waited longest (queue + worker) */
            jrpc_workers_done_times(b->workers, &x->slow_q, &x->slow_w);
            x->t_last = jrpc_metrics.now;
        }
        if (kind == JRPC_DONE_RESULT)
            rc = jrpc_batch_answer_result_raw(&x->req, i, value);
        else if (kind == JRPC_DONE_ERROR)
            rc = jrpc_batch_answer_error_raw(&x->req, i, value);
        else
            rc = jrpc_batch_answer_error(&x->req, i, code, NULL);
        if (rc < 0)
            answer_lost(c);
        else if (kind == JRPC_DONE_ERROR && x->mstat[i] != JRPC_METRICS_NONE)
            x->mstat[i] |= JRPC_METRICS_WORKER_ERROR;   /* its outcome: "error" */
        x->unanswered--;
        if (x->answer)   /* streamed only: no call otherwise (once per call) */
            stream_answer(b, x, i);
    }
    settle(b, x);
}

/* ---- rpc.discover (docs/ARCHITECTURE.md "Discovery") ---- */

/* jrpc_openrpc_allow_fn: what a key's ACL lets it call. */
static bool key_allows(void *arg, jrpc_span_t canonical)
{
    return jrpc_key_allows(arg, canonical);
}

int jrpc_broker_discover(jrpc_broker_t *b, jrpc_span_t key_id, jrpc_buf_t *out)
{
    const jrpc_key_t *key = NULL;
    if (b->opts.keys && key_id.n && (key = jrpc_keys_find(b->opts.keys, key_id)) == NULL)
        return -ENOENT;   /* a reload removed it since the connection was admitted */
    return jrpc_openrpc_write(out, b->workers, JRPC_VERSION, key ? key_allows : NULL,
                              (void *)key);
}

/* Answers rpc.discover (call i of x) with the OpenRPC document of what its
 * key may call (docs/ARCHITECTURE.md "Discovery"). */
void answer_discover(jrpc_broker_t *b, bbatch_t *x, uint32_t i, const jrpc_key_t *key)
{
    jrpc_buf_t doc;
    jrpc_buf_init(&doc);
    jrpc_call_t *c = &x->req.calls[i];
    msgpack_object text = { .type = MSGPACK_OBJECT_BIN };
    if (jrpc_openrpc_write(&doc, b->workers, JRPC_VERSION, key ? key_allows : NULL,
                           (void *)key) < 0) {
        answer_lost(c);
    } else {
        text.via.bin = (msgpack_object_bin){ .size = (uint32_t)doc.len, .ptr = doc.p };
        if (jrpc_batch_answer_result(&x->req, i, &text) < 0)
            answer_lost(c);
    }
    jrpc_buf_dispose(&doc);
    x->unanswered--;
    stream_answer(b, x, i);
}
