/* jrpc_broker — see jrpc_broker.h.
 *
 * Every open body is a bbatch on a list sorted by deadline (almost always
 * appended at the tail, since deadlines mostly grow with arrival); one timer
 * is armed for the head. */
#include "jrpc_broker.h"
#include "jrpc_sign.h"

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
#include "jrpc_status_page.h"

#define NO_HANDLE UINT32_MAX
#define PEER_BUCKETS 256   /* the client addresses holding bytes: chained */

typedef struct bbatch bbatch_t;

/* A connection's account (jrpc_broker.h, "what a connection has queued"). */
struct jrpc_broker_hold {
    size_t    bytes;          /* held by its bodies */
    uint32_t  refs;           /* the connection (until released), and each body */
    uint32_t  max;            /* --conn-max-queued-bytes; 0: no bound */
    bool      waiting;        /* found full: wake once at half */
    void    (*wake)(void *);  /* NULL once released */
    void     *ctx;
};

/* One client address's account: exists while a body refers to it. */
typedef struct peerq {
    struct peerq *next;       /* its bucket's chain */
    size_t        bytes;      /* held by its bodies */
    uint32_t      refs;       /* bodies referring to it */
    uint8_t       n;
    char          addr[64];   /* jrpc_rate_who_addr of its peer text */
} peerq_t;

struct bbatch {
    jrpc_batch_t   req;          /* the parsed body and its answers */
    jrpc_broker_t *broker;
    jrpc_reply_fn  fn;           /* the front end's reply function */
    jrpc_answer_fn answer;       /* streamed mode: each answer as it is in; else NULL */
    void          *ctx;
    uint32_t      *handles;      /* per call: jrpc_workers handle, or NO_HANDLE */
    uint32_t      *mstat;        /* per call: its jrpc_metrics record (set when it starts),
                                    or NO_HANDLE: not counted per method (the parser's) */
    const char    *path;         /* the access line's path=, or NULL (the transport) */
    uint32_t       unanswered;   /* calls still owing an answer to the client */
    uint32_t       outstanding;  /* calls still at (or queued for) workers */
    uint32_t       streamed;     /* streamed mode: answers sent */
    uint32_t       timed_out;    /* calls answered -32003 at the deadline */
    size_t         bytes_out;    /* streamed mode: bytes of the answers sent */
    uint64_t       deadline;     /* loop ms */
    bool           replied;
    bool           listed;       /* on the deadline list */
    bool           busy;         /* being submitted: not to be freed yet */
    bool           claiming;     /* waiting for Redis: the nonce and/or the rate limit */
    bool           signed_body;  /* claiming a nonce (Redis down: 503, not the local budget) */
    bool           early;        /* its calls went out while its nonce was claimed (all
                                    idempotent): nothing answers before the claim does */
    uint32_t       early_cell;   /* ... its nonce's cell in the broker's early_nonces */
    bool           idem_run;     /* its idempotency key is claimed: store the reply */
    bool           detached;     /* idem_run, and the client left: run on, store, tell no one */
    bool           waiting;      /* on the idempotency wait list (another run holds the key) */
    bbatch_t      *wnext;        /* ... its link */
    jrpc_span_t    idem;         /* the idempotency key (in body[] after peer), or empty */
    char           fp[64];       /* ... and the body's fingerprint: SHA-256, hex */
    uint8_t        rwho_n;       /* rate limits: rwho's length; 0: no limit applies */
    char           rwho[JRPC_KEYS_ID_MAX + 8]; /* ... who: a key id, or "addr:<ip>" */
    jrpc_rate_limit_t rlim;      /* ... its limit */
    uint64_t       rcost;        /* ... and what this body costs */
    bool           cancelled;    /* the client left while claiming */
    uint8_t        key_id_n;     /* key_id's length; 0 when open */
    char           key_id[JRPC_KEYS_ID_MAX]; /* the signing key's id: looked up (ACL) when
                                    the calls start, never kept as a pointer (a reload
                                    frees the set: jrpc_broker_set_keys) */
    bbatch_t      *prev, *next;  /* the deadline list */
    uint64_t       t0;           /* uv_hrtime() at submit (metrics, access log) */
    int            transport;    /* a jrpc_transport */
    jrpc_span_t    trace;        /* valid W3C traceparent (in body[] after the body), or empty */
    jrpc_span_t    peer;         /* client address (in body[] after trace), or empty */
    jrpc_broker_hold_t *hold;    /* its connection's account (a reference), or NULL */
    peerq_t       *pq;           /* its address's account (a reference), or NULL */
    size_t         held;         /* bytes charged to them and the total; 0: none */
    size_t         len;          /* body bytes */
    char           body[];       /* our copy of the body, then trace, then peer */
};

#define EARLY_COOL_CELLS  1024   /* keys refused at a claim lately, by hash (early dispatch) */
#define EARLY_NONCE_CELLS 4096   /* nonces of early bodies in flight, by hash */

struct jrpc_broker {
    uv_loop_t        *loop;
    jrpc_broker_opts_t opts;
    jrpc_workers_t   *workers;
    uv_timer_t        timer;       /* fires at the head's deadline */
    bbatch_t         *head, *tail; /* open bodies by deadline */
    uint32_t          open;
    jrpc_buf_t        out;         /* the reply being written */
    jrpc_arena_pool_t arenas;      /* the bodies' first arena chunks, kept for the next */
    jrpc_buf_t        one;         /* streamed mode: the answer being sent */
    void            (*on_empty)(void *);
    void             *on_empty_arg;
    jrpc_replay_t    *replay;      /* nonces in Redis; NULL when open */
    jrpc_signer_t    *signer;      /* SHA-256 fetched once, its context reused (jrpc_sign.h) */
    bool              draining;    /* jrpc_broker_drain was called */
    jrpc_rate_local_t rate_local;  /* the local budget (tat NULL until first used) */
    bbatch_t         *waiters;     /* bodies whose idempotency key another run holds */
    uv_timer_t        idem_timer;  /* asks again for them, while there are any */
    jrpc_rate_counts_t rate_counts; /* calls refused per identity (metrics) */
    uint64_t          early_cool[EARLY_COOL_CELLS];    /* per key hash: loop ms until which
                                                          none of its bodies goes early */
    uint32_t          early_nonces[EARLY_NONCE_CELLS]; /* per nonce hash: early bodies
                                                          whose claim is in flight */
    size_t            held;        /* bytes of bodies answered before their calls ended */
    peerq_t          *peers[PEER_BUCKETS]; /* the addresses among them */
};

/* The namespace of x's idempotency key (docs/SIGNING.md "Idempotency
 * keys"): its key id; for a body without a key (issue 36) its address
 * AND the body's fingerprint, so that another client — behind the same
 * NAT, in the same /64 — can neither read the reply nor learn that the key
 * exists (a 422) without sending these very bytes under this very key.
 * Written into buf (IDEM_WHO_MAX bytes) when it needs building. */
#define IDEM_WHO_MAX (JRPC_KEYS_ID_MAX + 8 + 1 + 64)
static jrpc_span_t idem_who(const bbatch_t *x, char *buf)
{
    if (x->key_id_n)
        return (jrpc_span_t){ x->rwho, x->rwho_n };
    memcpy(buf, x->rwho, x->rwho_n);
    buf[x->rwho_n] = '#';
    memcpy(buf + x->rwho_n + 1, x->fp, sizeof x->fp);
    return (jrpc_span_t){ buf, x->rwho_n + 1 + sizeof x->fp };
}

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

/* Keeps a copy of a key's id (jrpc_keys: at most JRPC_KEYS_ID_MAX bytes). */
static void keep_key_id(char dst[JRPC_KEYS_ID_MAX], uint8_t *n, jrpc_span_t id)
{
    assert(id.n <= JRPC_KEYS_ID_MAX);
    memcpy(dst, id.p, id.n);
    *n = (uint8_t)id.n;
}

static void hold_unref(jrpc_broker_hold_t *h)
{
    if (--h->refs == 0)
        free(h);
}

static peerq_t **peer_bucket(jrpc_broker_t *b, const char *p, size_t n)
{
    uint32_t h = 2166136261u;   /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)p[i]) * 16777619u;
    return &b->peers[h % PEER_BUCKETS];
}

/* The account of the address of peer, with one more reference; NULL when
 * there is no address or no memory. */
static peerq_t *peer_ref(jrpc_broker_t *b, jrpc_span_t peer)
{
    char text[sizeof ((peerq_t *)0)->addr];
    if (peer.n == 0)
        return NULL;
    /* as rate limits see it: no port, IPv6 by its /64 */
    jrpc_span_t a = { text, jrpc_rate_who_addr(text, sizeof text, peer) };
    peerq_t **pp = peer_bucket(b, a.p, a.n);
    for (peerq_t *q = *pp; q; q = q->next)
        if (q->n == a.n && memcmp(q->addr, a.p, a.n) == 0) {
            q->refs++;
            return q;
        }
    peerq_t *q = calloc(1, sizeof *q);
    if (q == NULL)
        return NULL;
    memcpy(q->addr, a.p, a.n);
    q->n = (uint8_t)a.n;
    q->refs = 1;
    q->next = *pp;
    *pp = q;
    return q;
}

static void peer_unref(jrpc_broker_t *b, peerq_t *q)
{
    if (--q->refs > 0)
        return;
    for (peerq_t **qq = peer_bucket(b, q->addr, q->n); *qq; qq = &(*qq)->next)
        if (*qq == q) {
            *qq = q->next;
            free(q);
            return;
        }
}

/* x was answered while calls of it are still out: what it holds counts
 * against its connection, its address and the total until it is freed. */
static void hold_charge(jrpc_broker_t *b, bbatch_t *x)
{
    size_t n = sizeof *x + x->len;
    for (const jrpc_arena_chunk_t *c = x->req.arena.head; c; c = c->next)
        n += sizeof *c + c->size;
    x->held = n;
    b->held += n;
    jrpc_metrics.queued_bytes = b->held;
    if (x->hold)
        x->hold->bytes += n;
    if (x->pq)
        x->pq->bytes += n;
}

static void batch_free(bbatch_t *x)
{
    jrpc_broker_t *b = x->broker;
    jrpc_broker_hold_t *h = x->hold;
    size_t held = x->held;
    b->held -= held;
    jrpc_metrics.queued_bytes = b->held;
    if (x->pq) {
        x->pq->bytes -= held;
        peer_unref(b, x->pq);
    }
    jrpc_batch_dispose(&x->req);
    free(x);
    if (h == NULL)
        return;
    h->bytes -= held;
    /* The connection reads again (it may submit: as from a reply function). */
    if (h->waiting && h->bytes <= h->max / 2 && h->wake) {
        h->waiting = false;
        h->wake(h->ctx);
    }
    hold_unref(h);
}


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
static void access_log(jrpc_broker_t *b, const bbatch_t *x, const jrpc_admit_t *ad, int cls,
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
             "outcome=%s bytes_in=%zu bytes_out=%zu latency_us=%llu traceparent=%.*s",
             jrpc_metrics_transport_names[jrpc_metrics_transport(transport)],
             path ? path : jrpc_metrics_transport_names[jrpc_metrics_transport(transport)],
             (int)peer.n, peer.p, (int)key.n, key.p, calls, distinct, names, errors,
             log_status[cls], jrpc_body_class_name(cls),
             bytes_in, bytes_out, (unsigned long long)us, (int)tp.n, tp.p);
}

static void reply(jrpc_broker_t *b, bbatch_t *x)
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
                           .timed_out = x->timed_out };
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
    jrpc_metrics_reply(x->transport, &x->req, x->t0);
    x->fn(x->ctx, out, b->out.p, b->out.len);
}

/* Refuses the whole body (rc: the C error, mapped by jrpc_outcome_refused)
 * with one error object, id null, data_json as its "data"; through the same
 * reply function as answers. x is NULL for a body refused before it was
 * kept (busy): ad, fn and ctx say where it goes. */
static void refuse_out(jrpc_broker_t *b, bbatch_t *x, const jrpc_admit_t *ad, jrpc_reply_fn fn,
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
    access_log(b, x, ad, out.cls, b->out.len);
    jrpc_metrics_body_refused(transport, out.cls, out.code, t0);
    jrpc_status_page_refused(transport, out.cls, out.code, data_json);
    fn(ctx, out, b->out.p, b->out.len);
}

static void refuse(jrpc_broker_t *b, bbatch_t *x, const jrpc_admit_t *ad, jrpc_reply_fn fn,
                   void *ctx, int rc, const char *data_json)
{
    refuse_out(b, x, ad, fn, ctx, jrpc_outcome_refused(rc), data_json);
}

/* Replies when the last answer is in; frees when no worker holds a call. */
static void settle(jrpc_broker_t *b, bbatch_t *x)
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

/* Streamed mode: sends call i's answer, just filled, to the front. Once per
 * call: every fill is guarded by c->answered. */
static void stream_answer(jrpc_broker_t *b, bbatch_t *x, uint32_t i)
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

/* Call i is answered: counted in its method's record (outcome: enum
 * jrpc_call_outcome; the code is the call's own), total time so far. */
static void count_call(const bbatch_t *x, uint32_t i, int outcome)
{
    if (x->mstat[i] != NO_HANDLE)
        jrpc_metrics_call(x->mstat[i], outcome, x->req.calls[i].code, jrpc_metrics_since(x->t0));
}

static void answer_code(bbatch_t *x, uint32_t i, int code, const char *data)
{
    jrpc_call_t *c = &x->req.calls[i];
    if (c->notification || c->answered)
        return;
    if (jrpc_batch_answer_error(&x->req, i, code, data) < 0)
        answer_lost(c);
    count_call(x, i, jrpc_metrics_outcome_of(c->code));
    x->unanswered--;
    stream_answer(x->broker, x, i);
}

/* The parser's hint (jrpc_batch_hint_fn): transcode the params of calls
 * that msgpack workers serve while checking them, leave the others as text. */
static bool wants_msgpack(void *arg, jrpc_span_t method)
{
    return jrpc_workers_wants_msgpack(arg, method);
}

static void on_done(void *owner, uint32_t i, int kind, int code, jrpc_span_t value, void *arg)
{
    jrpc_broker_t *b = arg;
    bbatch_t *x = owner;
    jrpc_call_t *c = &x->req.calls[i];
    x->handles[i] = NO_HANDLE;
    x->outstanding--;
    if (!c->notification && !c->answered) {
        int rc = 0;
        if (kind == JRPC_DONE_RESULT)
            rc = jrpc_batch_answer_result_raw(&x->req, i, value);
        else if (kind == JRPC_DONE_ERROR)
            rc = jrpc_batch_answer_error_raw(&x->req, i, value);
        else
            rc = jrpc_batch_answer_error(&x->req, i, code, NULL);
        if (rc < 0)
            answer_lost(c);
        count_call(x, i, !c->error                             ? JRPC_CALL_OK
                         : kind == JRPC_DONE_ERROR && rc == 0 ? JRPC_CALL_ERROR
                                                              : jrpc_metrics_outcome_of(c->code));
        x->unanswered--;
        stream_answer(b, x, i);
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
    jrpc_metrics_tick();
    while (b->head && b->head->deadline <= now) {
        bbatch_t *x = b->head;
        list_remove(b, x);
        expire(b, x);
    }
    arm_timer(b);
}

static void refuse_auth(jrpc_broker_t *b, bbatch_t *x, int rc, int64_t now);

/* Dispatches the calls of an admitted body (ACL first, per call). Its key
 * is looked up here, in the set in force now: a reload may have removed it
 * while the nonce was in Redis (then the body is refused), or changed its
 * ACL (the new one applies). The pointer lives for this call only. */
static void start(jrpc_broker_t *b, bbatch_t *x)
{
    const jrpc_key_t *key = NULL;
    if (b->opts.keys && x->key_id_n &&
        (key = jrpc_keys_find(b->opts.keys, (jrpc_span_t){ x->key_id, x->key_id_n })) == NULL) {
        refuse_auth(b, x, JRPC_AUTH_EUNKNOWN_KEY, (int64_t)time(NULL));
        settle(b, x);
        return;
    }
    /* Streamed: what the parser answered goes out first. */
    for (uint32_t i = 0; x->answer && i < x->req.ncalls; i++)
        if (x->req.calls[i].answered)
            stream_answer(b, x, i);
    for (uint32_t i = 0; i < x->req.ncalls; i++) {
        jrpc_call_t *c = &x->req.calls[i];
        x->handles[i] = NO_HANDLE;
        if (c->answered)
            continue;
        if (!c->notification)
            x->unanswered++;
        if (key && !jrpc_key_allows(key, c->method)) {
            jrpc_metrics.acl_denied++;
            x->mstat[i] = jrpc_workers_method_stat(b->workers, c->method);
            answer_code(x, i, JRPC_UNAUTHORIZED, "this key may not call this method");
            continue;
        }
        int rc = jrpc_workers_dispatch(b->workers, c->method, c->params, c->params_mp, x->trace,
                                       x->deadline, x->t0, x, i, &x->handles[i]);
        x->mstat[i] = jrpc_workers_last_stat(b->workers);
        if (rc == 0) {
            x->outstanding++;
            jrpc_metrics.dispatched++;
        } else {
            answer_code(x, i, jrpc_error_code(rc), NULL);
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

/* The data of a 503 / -32006: Redis is unavailable (-EAGAIN), or it lost its
 * memory and the body is signed too early to tell whether it ran before
 * (-ESTALE). Returns a constant, or data[0, size) written. */
static const char *unavailable_data(jrpc_broker_t *b, int rc, char *data, size_t size)
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

/* ---- idempotency keys (docs/SIGNING.md "Idempotency keys") ---- */

#define IDEM_RUN_SLACK_MS 5000   /* a run holds its key this long past its deadline */
#define IDEM_POLL_MS      20     /* how often a body whose key another run holds asks again */

static void on_idem(void *arg, int rc, const char *reply, size_t n);

bool jrpc_broker_idem_key_ok(jrpc_span_t k)
{
    if (k.n == 0 || k.n > 255)
        return false;
    for (size_t i = 0; i < k.n; i++)
        if ((unsigned char)k.p[i] <= 0x20 || (unsigned char)k.p[i] >= 0x7f)
            return false;
    return true;
}

/* Runs x — first claiming its idempotency key, when it has one: the first
 * body under the key runs, a later one with the same bytes gets the kept
 * reply (or waits while the first runs), another body is refused. */
static void go(jrpc_broker_t *b, bbatch_t *x)
{
    if (x->idem.n == 0) {
        start(b, x);
        return;
    }
    int rc = -EAGAIN;
    if (b->replay) {
        uint64_t now = uv_now(b->loop);
        uint64_t run = (x->deadline > now ? x->deadline - now : 0) + IDEM_RUN_SLACK_MS;
        x->claiming = true;
        char who[IDEM_WHO_MAX];
        rc = jrpc_replay_idem_claim(b->replay, idem_who(x, who), x->idem, x->fp,
                                    run > UINT32_MAX ? UINT32_MAX : (uint32_t)run, on_idem, x);
        if (rc == 0)
            return;
        x->claiming = false;
    }
    refuse(b, x, NULL, NULL, NULL, -EAGAIN, b->replay
           ? "{\"reason\":\"idempotency keys are unavailable (Redis), retry later\"}"
           : "{\"reason\":\"idempotency keys need Redis: this broker has none (--redis)\"}");
    settle(b, x);
}

static void on_idem_timer(uv_timer_t *t);

/* x waits: another run holds its key. Asked again every IDEM_POLL_MS. */
static void wait_add(jrpc_broker_t *b, bbatch_t *x)
{
    x->waiting = true;
    x->wnext = b->waiters;
    b->waiters = x;
    if (!uv_is_active((uv_handle_t *)&b->idem_timer))
        uv_timer_start(&b->idem_timer, on_idem_timer, IDEM_POLL_MS, IDEM_POLL_MS);
}

static void wait_del(jrpc_broker_t *b, bbatch_t *x)
{
    for (bbatch_t **pp = &b->waiters; *pp; pp = &(*pp)->wnext)
        if (*pp == x) {
            *pp = x->wnext;
            break;
        }
    x->waiting = false;
}

/* Each waiting body asks again, or past its deadline is refused: the first
 * run of its key still runs (409 / -32008). */
static void on_idem_timer(uv_timer_t *t)
{
    jrpc_broker_t *b = t->data;
    bbatch_t *list = b->waiters;
    b->waiters = NULL;
    uint64_t now = uv_now(b->loop);
    jrpc_metrics_tick();
    while (list) {
        bbatch_t *x = list;
        list = x->wnext;
        x->waiting = false;
        if (now >= x->deadline) {
            refuse(b, x, NULL, NULL, NULL, -EINPROGRESS,
                   "{\"reason\":\"the first body sent with this idempotency key is still running: "
                   "retry later for its reply\"}");
            settle(b, x);
        } else {
            go(b, x);
        }
    }
    if (b->waiters == NULL)
        uv_timer_stop(t);
}

/* Redis answered the claim of x's idempotency key. */
static void on_idem(void *arg, int rc, const char *reply, size_t n)
{
    bbatch_t *x = arg;
    jrpc_broker_t *b = x->broker;
    x->claiming = false;
    jrpc_metrics_tick();
    if (rc == 0) {   /* ours: run it, keep its reply */
        x->idem_run = true;
        if (x->cancelled) {   /* its client left meanwhile: run on for the retry */
            x->cancelled = false;
            x->detached = true;
            x->replied = false;
        }
        start(b, x);
    } else if (x->cancelled) {
        settle(b, x);
    } else if (rc == 1) {   /* it ran: its reply, marked */
        jrpc_outcome_t out = { .cls = JRPC_BODY_OK, .replayed = true };
        x->replied = true;
        access_log(b, x, NULL, out.cls, n);
        jrpc_metrics_body(x->transport, out.cls);
        x->fn(x->ctx, out, reply, n);
        settle(b, x);
    } else if (rc == -EBUSY) {
        if (uv_now(b->loop) >= x->deadline)
            on_idem(x, -EINPROGRESS, NULL, 0);
        else
            wait_add(b, x);
    } else {
        refuse(b, x, NULL, NULL, NULL, rc == -EILSEQ || rc == -EINPROGRESS ? rc : -EAGAIN,
               rc == -EILSEQ ? "{\"reason\":\"this idempotency key was used with another body\"}"
               : rc == -EINPROGRESS
                   ? "{\"reason\":\"the first body sent with this idempotency key is still "
                     "running: retry later for its reply\"}"
                   : "{\"reason\":\"idempotency keys are unavailable (Redis), retry later\"}");
        settle(b, x);
    }
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
        if (last.n && c->method.n == last.n && memcmp(c->method.p, last.p, last.n) == 0)
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
static int64_t signed_at(const jrpc_auth_req_t *req)
{
    if (req->has_timestamp)
        return req->timestamp;
    int64_t ts = 0;
    for (size_t i = 0; i < req->timestamp_text.n; i++)
        ts = ts * 10 + (req->timestamp_text.p[i] - '0');
    return ts;
}

/* Refuses x unauthorized for a JRPC_AUTH_E* reason (rc). */
static void refuse_auth(jrpc_broker_t *b, bbatch_t *x, int rc, int64_t now)
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
static bool admit(jrpc_broker_t *b, bbatch_t *x, const jrpc_admit_t *ad)
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

/* Whether everything held, or what x's address holds, is at its bound. */
static bool queue_full(const jrpc_broker_t *b, const bbatch_t *x)
{
    uint32_t all = b->opts.max_queued_bytes, one = b->opts.peer_max_queued_bytes;
    return (all && b->held >= all) || (one && x->pq && x->pq->bytes >= one);
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
    bbatch_t *x = malloc(sizeof *x + len + tp.n + peer.n + idem.n);
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
    if (idem.n) {
        memcpy(x->body + len + tp.n + peer.n, idem.p, idem.n);
        x->idem = (jrpc_span_t){ x->body + len + tp.n + peer.n, idem.n };
    }
    x->broker = b;
    x->fn = fn;
    x->answer = ad ? ad->answer : NULL;
    x->ctx = ctx;
    x->busy = true;
    jrpc_batch_init(&x->req);
    x->req.arena.pool = &b->arenas;
    x->req.msgpack_hint = wants_msgpack;   /* transcode now what msgpack workers will get */
    x->req.hint_arg = b->workers;
    if (jrpc_batch_parse(&x->req, x->body, len, &b->opts.limits) < 0 ||
        (x->handles = jrpc_arena_alloc(&x->req.arena, 2 * (x->req.ncalls ? x->req.ncalls : 1) *
                                                          sizeof *x->handles)) == NULL) {
        batch_free(x);
        return -ENOMEM;
    }
    bool notes = false;   /* it may be answered before its calls end: it may be held */
    x->mstat = x->handles + x->req.ncalls;   /* the same block */
    for (uint32_t i = 0; i < x->req.ncalls; i++) {
        x->handles[i] = NO_HANDLE;
        x->mstat[i] = NO_HANDLE;
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

/* ---- what a connection has queued ---- */

jrpc_broker_hold_t *jrpc_broker_hold_new(jrpc_broker_t *b, void (*wake)(void *ctx), void *ctx)
{
    jrpc_broker_hold_t *h = calloc(1, sizeof *h);
    if (h == NULL)
        return NULL;
    h->refs = 1;
    h->max = b->opts.conn_max_queued_bytes;
    h->wake = wake;
    h->ctx = ctx;
    return h;
}

void jrpc_broker_hold_release(jrpc_broker_hold_t **h_p)
{
    jrpc_broker_hold_t *h = *h_p;
    if (h == NULL)
        return;
    *h_p = NULL;
    h->wake = NULL;
    hold_unref(h);
}

bool jrpc_broker_hold_full(jrpc_broker_hold_t *h)
{
    if (h == NULL || h->max == 0 || h->bytes < h->max)
        return false;
    if (!h->waiting) {
        h->waiting = true;
        jrpc_metrics.queue_pushbacks++;
        JRPC_LOG(JRPC_LOG_DEBUG, "broker", "event=queue_pushback bytes=%zu limit=%u", h->bytes,
                 h->max);
    }
    return true;
}

/* ---- connections: jrpc_broker_authenticate ---- */

struct jrpc_broker_auth {
    jrpc_broker_t    *broker;
    jrpc_auth_fn      fn;
    void             *ctx;
    int               transport;
    uint8_t           key_id_n;   /* key_id's length, once the signature checked out */
    char              key_id[JRPC_KEYS_ID_MAX]; /* a copy: a reload may free the key
                                     while the nonce is in Redis */
    uint8_t           key_fp[JRPC_KEY_FP_LEN]; /* its credential when checked: a reload
                                     that replaces it meanwhile refuses the upgrade */
    bool              cancelled;  /* the connection left while claiming */
    uint64_t          t0;         /* metrics */
    jrpc_span_t       peer;       /* in peer_text: for the access line */
    char              peer_text[64];
};

/* An open body less: the drain may be over. */
static void open_done(jrpc_broker_t *b)
{
    b->open--;
    if (b->open == 0 && b->on_empty) {
        void (*fn)(void *) = b->on_empty;
        b->on_empty = NULL;
        fn(b->on_empty_arg);
    }
}

/* The refusal of a connection: counted and logged as a body refused, and
 * the same error object (id null). */
static void auth_refuse(jrpc_broker_t *b, jrpc_broker_auth_t *a, int rc, const char *data_json)
{
    jrpc_outcome_t out = jrpc_outcome_refused(rc);
    jrpc_admit_t ad = { .transport = a->transport, .peer = a->peer };
    jrpc_buf_reset(&b->out);
    if (jrpc_batch_write_error_json(&b->out, out.code, data_json) < 0)
        jrpc_buf_reset(&b->out);
    access_log(b, NULL, &ad, out.cls, b->out.len);
    jrpc_metrics_body_refused(a->transport, out.cls, out.code, a->t0);
    jrpc_status_page_refused(a->transport, out.cls, out.code, data_json);
    a->fn(a->ctx, out, b->out.p, b->out.len, (jrpc_span_t){ NULL, 0 });
}

static void auth_unavailable(jrpc_broker_t *b, jrpc_broker_auth_t *a, int rc)
{
    char data[256];
    auth_refuse(b, a, rc, unavailable_data(b, rc, data, sizeof data));
}

/* Whether the key set in force still has the key id with the credential
 * whose fingerprint is fp. */
static bool key_unchanged(const jrpc_broker_t *b, jrpc_span_t id, const uint8_t *fp)
{
    uint8_t now[JRPC_KEY_FP_LEN];
    return jrpc_broker_key_fingerprint(b, id, now) && memcmp(now, fp, sizeof now) == 0;
}

static void auth_unknown_key(jrpc_broker_t *b, jrpc_broker_auth_t *a)
{
    char data[320];
    snprintf(data, sizeof data, "{\"reason\":\"%s\",\"server_time\":%lld}",
             jrpc_auth_strerror(JRPC_AUTH_EUNKNOWN_KEY), (long long)time(NULL));
    auth_refuse(b, a, -EACCES, data);
}

static void on_auth_claimed(void *arg, int rc)
{
    jrpc_broker_auth_t *a = arg;
    jrpc_broker_t *b = a->broker;
    jrpc_metrics_tick();
    if (a->cancelled)
        ;
    else if (rc == 0 && !key_unchanged(b, (jrpc_span_t){ a->key_id, a->key_id_n }, a->key_fp))
        auth_unknown_key(b, a);   /* removed or replaced by a reload during the claim */
    else if (rc == 0)
        a->fn(a->ctx, (jrpc_outcome_t){ .cls = JRPC_BODY_OK }, "", 0,
              (jrpc_span_t){ a->key_id, a->key_id_n });
    else if (rc == -EEXIST)
        auth_refuse(b, a, rc,
                    "{\"reason\":\"this nonce was used before: sign each body with a new nonce\"}");
    else
        auth_unavailable(b, a, rc);
    free(a);
    open_done(b);
}

int jrpc_broker_authenticate(jrpc_broker_t *b, const char *body, size_t len,
                             const jrpc_admit_t *ad, jrpc_auth_fn fn, void *ctx,
                             jrpc_broker_auth_t **handle)
{
    if (handle)
        *handle = NULL;
    if (b->opts.keys == NULL || ad->key_id.n) {   /* open, or authenticated by its connection */
        fn(ctx, (jrpc_outcome_t){ .cls = JRPC_BODY_OK }, "", 0,
           b->opts.keys ? ad->key_id : (jrpc_span_t){ NULL, 0 });
        return 0;
    }
    jrpc_broker_auth_t *a = calloc(1, sizeof *a);
    if (a == NULL)
        return -ENOMEM;
    a->broker = b;
    a->fn = fn;
    a->ctx = ctx;
    a->transport = ad->transport;
    a->t0 = jrpc_metrics_tick();
    if (ad->peer.n && ad->peer.n <= sizeof a->peer_text) {
        memcpy(a->peer_text, ad->peer.p, ad->peer.n);
        a->peer = (jrpc_span_t){ a->peer_text, ad->peer.n };
    }
    int64_t now = (int64_t)time(NULL);
    const jrpc_key_t *key;
    int rc = jrpc_auth_check(b->opts.keys, b->signer, &ad->auth, body, len, now,
                             b->opts.skew_s, &key);
    if (rc < 0) {
        char data[320];
        snprintf(data, sizeof data, "{\"reason\":\"%s\",\"server_time\":%lld}",
                 jrpc_auth_strerror(rc), (long long)now);
        auth_refuse(b, a, -EACCES, data);
        free(a);
        return 0;
    }
    if (jrpc_key_is_bearer(key)) {   /* a token: nothing to claim */
        fn(ctx, (jrpc_outcome_t){ .cls = JRPC_BODY_OK }, "", 0, jrpc_key_id(key));
        free(a);
        return 0;
    }
    keep_key_id(a->key_id, &a->key_id_n, jrpc_key_id(key));
    jrpc_key_fingerprint(key, a->key_fp);
    if (handle)
        *handle = a;
    b->open++;
    rc = jrpc_replay_claim(b->replay, ad->auth.key, ad->auth.nonce, signed_at(&ad->auth),
                           on_auth_claimed, a);
    if (rc < 0) {
        auth_unavailable(b, a, rc);
        free(a);
        open_done(b);
    }
    return 0;
}

bool jrpc_broker_has_key(const jrpc_broker_t *b, jrpc_span_t id)
{
    return b->opts.keys && jrpc_keys_find(b->opts.keys, id) != NULL;
}

bool jrpc_broker_key_fingerprint(const jrpc_broker_t *b, jrpc_span_t id,
                                 uint8_t out[JRPC_KEY_FP_LEN])
{
    const jrpc_key_t *key = b->opts.keys ? jrpc_keys_find(b->opts.keys, id) : NULL;
    if (key == NULL)
        return false;
    jrpc_key_fingerprint(key, out);
    return true;
}

void jrpc_broker_authenticate_cancel(jrpc_broker_t *b, jrpc_broker_auth_t *a)
{
    (void)b;
    a->cancelled = true;   /* freed when Redis answers */
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
