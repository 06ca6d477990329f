/* jrpc_broker — see jrpc_broker.h.
 *
 * Every open body is a bbatch on a list sorted by deadline (almost always
 * appended at the tail, since deadlines mostly grow with arrival); one timer
 * is armed for the head. */
#include "jrpc_broker.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jrpc_errors.h"
#include "jrpc_log.h"
#include "jrpc_trace.h"
#include "jrpc_metrics.h"

#define NO_HANDLE UINT32_MAX

typedef struct bbatch bbatch_t;

struct bbatch {
    jrpc_batch_t   req;          /* the parsed body and its answers */
    jrpc_broker_t *broker;
    jrpc_reply_fn  fn;           /* the front end's reply function */
    void          *ctx;
    uint32_t      *handles;      /* per call: jrpc_workers handle, or NO_HANDLE */
    uint32_t       unanswered;   /* calls still owing an answer to the client */
    uint32_t       outstanding;  /* calls still at (or queued for) workers */
    uint64_t       deadline;     /* loop ms */
    bool           replied;
    bool           listed;       /* on the deadline list */
    bool           busy;         /* being submitted: not to be freed yet */
    bool           claiming;     /* waiting for Redis to claim the nonce */
    bool           cancelled;    /* the client left while claiming */
    const jrpc_key_t *key;       /* the signing key (ACL), or NULL when open */
    bbatch_t      *prev, *next;  /* the deadline list */
    uint64_t       t0;           /* uv_hrtime() at submit (metrics, access log) */
    int            transport;    /* a jrpc_transport */
    jrpc_span_t    trace;        /* valid W3C traceparent (in body[] after the body), or empty */
    jrpc_span_t    peer;         /* client address (in body[] after trace), or empty */
    size_t         len;          /* body bytes */
    char           body[];       /* our copy of the body, then trace, then peer */
};

struct jrpc_broker {
    uv_loop_t        *loop;
    jrpc_broker_opts_t opts;
    jrpc_workers_t   *workers;
    uv_timer_t        timer;       /* fires at the head's deadline */
    bbatch_t         *head, *tail; /* open bodies by deadline */
    uint32_t          open;
    jrpc_buf_t        out;         /* the reply being written */
    void            (*on_empty)(void *);
    void             *on_empty_arg;
    jrpc_replay_t    *replay;      /* nonces in Redis; NULL when open */
    bool              draining;    /* jrpc_broker_drain was called */
    uint64_t          bodies, calls, timeouts, cancelled, busy;
    uint64_t          unauthorized, replays, replay_down, acl_denied;
};

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

static void arm_timer(jrpc_broker_t *b)
{
    if (b->head == NULL) {
        uv_timer_stop(&b->timer);
        return;
    }
    uint64_t now = uv_now(b->loop);
    uv_timer_start(&b->timer, on_timer, b->head->deadline > now ? b->head->deadline - now : 0, 0);
}

static void batch_free(bbatch_t *x)
{
    jrpc_batch_dispose(&x->req);
    free(x);
}

static const char *const transport_names[] = { "zmq", "http" };

/* A body refused whole by the parser: -32700, or -32600 for the body itself. */
static bool body_invalid(const jrpc_batch_t *req)
{
    static const char parse[] = "\"error\":{\"code\":-32700,";
    static const char invalid[] = "\"error\":{\"code\":-32600,";
    if (req->is_array || req->ncalls != 1 || !req->calls[0].answered)
        return false;
    jrpc_span_t a = req->calls[0].answer;
    return a.n > sizeof parse &&
           (memcmp(a.p, parse, sizeof parse - 1) == 0 || memcmp(a.p, invalid, sizeof invalid - 1) == 0);
}

/* The access line of a body (x NULL: refused before it was kept, -EBUSY).
 * errors counts the error objects in the reply. */
static void access_log(jrpc_broker_t *b, const bbatch_t *x, const jrpc_admit_t *ad, int status,
                       const char *outcome, size_t bytes_out)
{
    if (!b->opts.access_log || JRPC_LOG_INFO < jrpc_log_level)
        return;
    uint32_t calls = 0, errors = 0;
    jrpc_span_t key = { "-", 1 }, tp = { "-", 1 }, peer = { "-", 1 };
    size_t bytes_in = 0;
    uint64_t us = 0;
    int transport = ad ? ad->transport : JRPC_TRANSPORT_ZMQ;
    if (x) {
        transport = x->transport;
        calls = x->req.ncalls;
        if (status != JRPC_REPLY_OK)
            errors = status == 499 ? 0 : 1;
        else
            for (uint32_t i = 0; i < x->req.ncalls; i++) {
                const jrpc_call_t *c = &x->req.calls[i];
                errors += !c->notification && c->answer.n > 1 && c->answer.p[1] == 'e';
            }
        if (x->key)
            key = jrpc_key_id(x->key);
        if (x->trace.n)
            tp = x->trace;
        if (x->peer.n)
            peer = x->peer;
        bytes_in = x->len;
        us = (uv_hrtime() - x->t0) / 1000;
    } else if (ad) {
        errors = 1;
        if (ad->traceparent.n && jrpc_traceparent_valid(ad->traceparent.p, ad->traceparent.n))
            tp = ad->traceparent;
        if (ad->peer.n)
            peer = ad->peer;
    } else {
        errors = 1;
    }
    JRPC_LOG(JRPC_LOG_INFO, "access",
             "event=access transport=%s peer=%.*s key=%.*s calls=%u errors=%u status=%d "
             "outcome=%s bytes_in=%zu bytes_out=%zu latency_us=%llu traceparent=%.*s",
             transport_names[transport == JRPC_TRANSPORT_HTTP], (int)peer.n, peer.p,
             (int)key.n, key.p, calls, errors, status, outcome, bytes_in, bytes_out,
             (unsigned long long)us, (int)tp.n, tp.p);
}

static void reply(jrpc_broker_t *b, bbatch_t *x)
{
    x->replied = true;
    jrpc_buf_reset(&b->out);
    if (jrpc_batch_write_reply(&x->req, &b->out) < 0) {
        jrpc_buf_reset(&b->out);
        jrpc_batch_write_error(&b->out, JRPC_INTERNAL_ERROR, "out of memory");
    }
    access_log(b, x, NULL, JRPC_REPLY_OK, body_invalid(&x->req) ? "invalid" : "ok", b->out.len);
    jrpc_metrics_reply(x->transport, &x->req, x->t0);
    x->fn(x->ctx, JRPC_REPLY_OK, b->out.p, b->out.len);
}

/* Refuses the whole body with a transport-level answer (401, 409, 503). */
static void refuse(jrpc_broker_t *b, bbatch_t *x, int status, int code, const char *data_json)
{
    x->replied = true;
    jrpc_buf_reset(&b->out);
    jrpc_batch_write_error_json(&b->out, code, data_json);
    access_log(b, x, NULL, status,
               status == JRPC_REPLY_UNAUTHORIZED ? "unauthorized"
               : status == JRPC_REPLY_REPLAYED ? "replayed" : "unavailable", b->out.len);
    jrpc_metrics_body_refused(x->transport,
                              status == JRPC_REPLY_UNAUTHORIZED ? JRPC_BODY_UNAUTHORIZED
                              : status == JRPC_REPLY_REPLAYED ? JRPC_BODY_REPLAYED
                              : JRPC_BODY_UNAVAILABLE, code, x->t0);
    x->fn(x->ctx, status, b->out.p, b->out.len);
}

/* Replies when the last answer is in; frees when no worker holds a call. */
static void settle(jrpc_broker_t *b, bbatch_t *x)
{
    if (x->busy || x->claiming)
        return;
    if (!x->replied && x->unanswered == 0)
        reply(b, x);
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

static void answer_code(bbatch_t *x, uint32_t i, int code, const char *data)
{
    jrpc_call_t *c = &x->req.calls[i];
    if (c->notification || c->answered)
        return;
    if (jrpc_batch_answer_error(&x->req, i, code, data) < 0)
        c->answered = true; /* out of memory: the reply writer reports it */
    x->unanswered--;
}

static void on_done(void *owner, uint32_t i, int kind, int code, const msgpack_object *value,
                    void *arg)
{
    jrpc_broker_t *b = arg;
    bbatch_t *x = owner;
    jrpc_call_t *c = &x->req.calls[i];
    x->handles[i] = NO_HANDLE;
    x->outstanding--;
    if (!c->notification && !c->answered) {
        int rc = 0;
        if (kind == JRPC_DONE_RESULT)
            rc = jrpc_batch_answer_result(&x->req, i, value);
        else if (kind == JRPC_DONE_ERROR)
            rc = jrpc_batch_answer_error_obj(&x->req, i, value);
        else
            rc = jrpc_batch_answer_error(&x->req, i, code, NULL);
        if (rc < 0)
            c->answered = true;
        x->unanswered--;
    }
    settle(b, x);
}

/* Takes every call of x still out back from the workers (their late answers
 * will be dropped); with code != 0, answers those still owed an answer. */
static void withdraw(jrpc_broker_t *b, bbatch_t *x, int code)
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
        if (code == JRPC_TIMEOUT && !x->req.calls[i].notification && !x->req.calls[i].answered)
            b->timeouts++;
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
    jrpc_metrics_tick();
    while (b->head && b->head->deadline <= now) {
        bbatch_t *x = b->head;
        list_remove(b, x);
        expire(b, x);
    }
    arm_timer(b);
}

/* Dispatches the calls of an admitted body (ACL first, per call). */
static void start(jrpc_broker_t *b, bbatch_t *x)
{
    jrpc_metrics.submitted = x->t0;   /* its calls' queue time starts here */
    for (uint32_t i = 0; i < x->req.ncalls; i++) {
        jrpc_call_t *c = &x->req.calls[i];
        x->handles[i] = NO_HANDLE;
        if (c->answered)
            continue;
        if (!c->notification)
            x->unanswered++;
        if (x->key && !jrpc_key_allows(x->key, c->method)) {
            b->acl_denied++;
            answer_code(x, i, JRPC_UNAUTHORIZED, "this key may not call this method");
            continue;
        }
        int rc = jrpc_workers_dispatch(b->workers, c->method, c->params, x->trace, x->deadline,
                                       x, i, &x->handles[i]);
        if (rc == 0) {
            x->outstanding++;
            b->calls++;
        } else {
            answer_code(x, i, rc == -ENOENT ? JRPC_METHOD_NOT_FOUND
                              : rc == -EBUSY ? JRPC_SERVER_BUSY : JRPC_INTERNAL_ERROR,
                        NULL);
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

/* 503 / -32006: Redis is unavailable (-EAGAIN), or it lost its memory and
 * the body is signed too early to tell whether it ran before (-ESTALE). */
static void refuse_unavailable(jrpc_broker_t *b, bbatch_t *x, int rc)
{
    b->replay_down++;
    if (rc != -ESTALE) {
        refuse(b, x, JRPC_REPLY_UNAVAILABLE, JRPC_REPLAY_DOWN,
               "{\"reason\":\"replay protection is unavailable, retry later\"}");
        return;
    }
    char data[256];
    snprintf(data, sizeof data,
             "{\"reason\":\"replay protection lost its memory: bodies signed before not_before "
             "are refused\",\"not_before\":%lld,\"server_time\":%lld}",
             (long long)jrpc_replay_refuse_to(b->replay) + 1, (long long)time(NULL));
    refuse(b, x, JRPC_REPLY_UNAVAILABLE, JRPC_REPLAY_DOWN, data);
}

static void on_claimed(void *arg, int rc)
{
    bbatch_t *x = arg;
    jrpc_broker_t *b = x->broker;
    x->claiming = false;
    jrpc_metrics_tick();
    if (x->cancelled) {
        settle(b, x);
    } else if (rc == 0) {
        start(b, x);
    } else if (rc == -EEXIST) {
        b->replays++;
        refuse(b, x, JRPC_REPLY_REPLAYED, JRPC_REPLAYED,
               "{\"reason\":\"this nonce was used before: sign each body with a new nonce\"}");
        settle(b, x);
    } else {
        refuse_unavailable(b, x, rc);
        settle(b, x);
    }
}

/* The signed timestamp of a request jrpc_auth_check() accepted (so the
 * text is canonical decimal of at most 19 digits). */
static int64_t signed_at(const jrpc_auth_req_t *req)
{
    if (req->has_timestamp)
        return req->timestamp;
    int64_t ts = 0;
    for (size_t i = 0; i < req->timestamp_text.n; i++)
        ts = ts * 10 + (req->timestamp_text.p[i] - '0');
    return ts;
}

/* The checks that need no I/O; then the nonce goes to Redis. Returns true
 * when the body may go on at once (open broker). */
static bool admit(jrpc_broker_t *b, bbatch_t *x, const jrpc_admit_t *ad)
{
    if (b->opts.keys == NULL)
        return true;
    static const jrpc_auth_req_t none;
    const jrpc_auth_req_t *req = ad ? &ad->auth : &none;
    int64_t now = (int64_t)time(NULL);
    int rc = jrpc_auth_check(b->opts.keys, req, x->body, x->len, now, b->opts.skew_s, &x->key);
    if (rc != JRPC_AUTH_OK) {
        char data[320];
        b->unauthorized++;
        snprintf(data, sizeof data, "{\"reason\":\"%s\",\"server_time\":%lld}",
                 jrpc_auth_reason(rc), (long long)now);
        refuse(b, x, JRPC_REPLY_UNAUTHORIZED, JRPC_UNAUTHORIZED, data);
        return false;
    }
    x->claiming = true;
    rc = jrpc_replay_claim(b->replay, req->key, req->nonce, signed_at(req), on_claimed, x);
    if (rc < 0) {
        x->claiming = false;
        refuse_unavailable(b, x, rc);
    }
    return false;
}

int jrpc_broker_submit(jrpc_broker_t *b, const char *body, size_t len, const jrpc_admit_t *ad,
                       jrpc_reply_fn fn, void *ctx, jrpc_body_t **handle)
{
    if (b->open >= b->opts.max_open) {
        b->busy++;
        access_log(b, NULL, ad, 503, "busy", 0);
        jrpc_metrics_body_refused(ad ? ad->transport : 0, JRPC_BODY_BUSY, JRPC_SERVER_BUSY,
                                  jrpc_metrics_tick());
        return -EBUSY;
    }
    /* The traceparent and the peer travel in the body's own block: no
     * allocation of their own. */
    jrpc_span_t tp = ad ? ad->traceparent : (jrpc_span_t){ NULL, 0 };
    if (tp.n && !jrpc_traceparent_valid(tp.p, tp.n))
        tp.n = 0;
    jrpc_span_t peer = ad && b->opts.access_log ? ad->peer : (jrpc_span_t){ NULL, 0 };
    bbatch_t *x = malloc(sizeof *x + len + tp.n + peer.n);
    if (x == NULL)
        return -ENOMEM;
    memset(x, 0, sizeof *x);
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
    x->broker = b;
    x->fn = fn;
    x->ctx = ctx;
    x->busy = true;
    jrpc_batch_init(&x->req);
    if (jrpc_batch_parse(&x->req, x->body, len, &b->opts.limits) < 0 ||
        (x->handles = jrpc_arena_alloc(&x->req.arena,
                                       (x->req.ncalls ? x->req.ncalls : 1) * sizeof *x->handles)) == NULL) {
        batch_free(x);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < x->req.ncalls; i++)
        x->handles[i] = NO_HANDLE;
    b->bodies++;
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
    bool go = admit(b, x, ad);
    x->busy = false;
    if (go)
        start(b, x);
    else
        settle(b, x);
    return 0;
}

void jrpc_broker_cancel(jrpc_broker_t *b, jrpc_body_t *x)
{
    assert(!x->replied);
    b->cancelled++;
    access_log(b, x, NULL, 499, "cancelled", 0);
    jrpc_metrics_body(x->transport, JRPC_BODY_CANCELLED);
    x->replied = true; /* nobody to reply to */
    if (x->claiming) { /* freed when Redis answers */
        x->cancelled = true;
        return;
    }
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
    jrpc_buf_init(&b->out);
    b->workers = jrpc_workers_new(loop, &opts->workers, on_done, b);
    if (b->workers == NULL) {
        free(b);
        return NULL;
    }
    if (opts->keys) {
        char err[256];
        b->replay = jrpc_replay_new(loop, &opts->replay, err, sizeof err);
        if (b->replay == NULL) {
            JRPC_LOG(JRPC_LOG_ERROR, "broker", "event=redis_bad error=\"%s\"", err);
            jrpc_workers_destroy(&b->workers);
            free(b);
            return NULL;
        }
    }
    uv_timer_init(loop, &b->timer);
    b->timer.data = b;
    return b;
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
    jrpc_buf_dispose(&b->out);
    free(b);
}

void jrpc_broker_destroy(jrpc_broker_t **self_p)
{
    jrpc_broker_t *b = *self_p;
    if (b == NULL)
        return;
    *self_p = NULL;
    jrpc_workers_stats_t ws;
    jrpc_workers_stats(b->workers, &ws);
    JRPC_LOG(JRPC_LOG_INFO, "broker",
             "event=stats bodies=%llu calls=%llu timeouts=%llu busy=%llu cancelled=%llu "
             "redispatched=%llu worker_failed=%llu late=%llu malformed=%llu",
             (unsigned long long)b->bodies, (unsigned long long)b->calls,
             (unsigned long long)b->timeouts, (unsigned long long)b->busy,
             (unsigned long long)b->cancelled, (unsigned long long)ws.redispatched,
             (unsigned long long)ws.lost, (unsigned long long)ws.late,
             (unsigned long long)ws.malformed);
    while (b->head) {
        bbatch_t *x = b->head;
        list_remove(b, x);
        batch_free(x);
    }
    jrpc_workers_destroy(&b->workers);
    jrpc_replay_destroy(&b->replay);
    uv_close((uv_handle_t *)&b->timer, on_timer_closed);
}

void jrpc_broker_stats(const jrpc_broker_t *b, jrpc_broker_stats_t *st,
                       jrpc_workers_stats_t *wst)
{
    st->bodies = b->bodies;
    st->calls = b->calls;
    st->timeouts = b->timeouts;
    st->cancelled = b->cancelled;
    st->busy = b->busy;
    st->unauthorized = b->unauthorized;
    st->replays = b->replays;
    st->replay_down = b->replay_down;
    st->acl_denied = b->acl_denied;
    st->open = b->open;
    if (wst)
        jrpc_workers_stats(b->workers, wst);
}

jrpc_workers_t *jrpc_broker_workers(jrpc_broker_t *b)
{
    return b->workers;
}

jrpc_replay_t *jrpc_broker_replay(jrpc_broker_t *b)
{
    return b->replay;
}

bool jrpc_broker_draining(const jrpc_broker_t *b)
{
    return b->draining;
}
