/* jrpc_workers — see jrpc_workers.h.
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
 * worker's seq can never match it again, whatever that worker does later.
 *
 * The worker port is a trust boundary: a READY is read in time linear in
 * its size (a per-READY mark on the method entries finds duplicates, the
 * hash table grows), and is refused past opts.max_worker_methods names or
 * when it would take the table past opts.max_methods. A method entry lives
 * while something refers to it (a worker that listed it, a call pointing at
 * it: m->refs) and is freed at the next safe point after the last goes
 * (method_sweep), so READYs with new names in turn do not grow the table.
 * Liveness counts heartbeat ticks without a message, so a long callback
 * (which delays the ticks as well as the reading) cannot expire a worker.
 *
 * Hedging (opts.hedge_budget_pct): a call sent to a worker that declared
 * its method idempotent joins the watch list (slots linked in the order
 * they were sent); a timer walks it from the oldest and gives a call that
 * has waited past its method's threshold a twin slot: the same owner,
 * index and params, sent to another worker. The two slots point at each
 * other; the first answer finishes the call and takes the owner from the
 * other, whose answer is then dropped when it comes (so credit stays
 * exact), and a twin whose worker is lost simply goes away. */
#include "jrpc_workers.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "jrpc_curve.h"
#include "jrpc_errors.h"
#include "jrpc_log.h"
#include "jrpc_metrics.h"
#include "jrpc_mpack.h"
#include "jrpc_wire.h"
#include "jrpc_zmtp.h"
#include "jrpc_zwatch.h"

#define NIL UINT32_MAX
#define MAX_GRACE_METHODS 4096  /* method entries the start-up grace may create */
#define NS_PER_MS 1000000ull
#define READ_BUDGET 256      /* messages per readable callback, for fairness */
#define MAX_ROUTING_ID 255   /* ZeroMQ's own limit */
#define MAX_NAME 64          /* bytes of a worker's name kept for its metrics label */
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
/* Answer times per method, for the hedging threshold: LAT_BUCKETS buckets
 * of a quarter octave from LAT_BASE_US (so a p95 within 19 %), halved when
 * LAT_DECAY answers are counted (the last few thousand answers count). */
#define LAT_BUCKETS 64
#define LAT_BASE_US 50
#define LAT_DECAY   2048
#define LAT_MIN_N   20       /* answers seen before the p95 is trusted */
#define HEDGE_COST  100      /* budget units a hedge spends; a call earns budget_pct */
#define HEDGE_BURST (20 * HEDGE_COST)   /* budget kept at most: 20 hedges at once */

enum { SLOT_FREE, SLOT_QUEUED, SLOT_SENT };
enum { SL_HEDGE = 1, SL_LOST_RACE = 2, SL_WATCHED = 4 };   /* slot_t.flags */

typedef struct worker worker_t;
typedef struct method method_t;

typedef struct slot {
    uint64_t    seq;        /* generation << 32 | (index + 1); 0 when free */
    void       *owner;      /* NULL once cancelled */
    uint32_t    index;      /* the owner's index of the call */
    uint32_t    next;       /* free list or method queue link */
    uint8_t     state;      /* SLOT_* */
    uint8_t     resent;     /* times re-dispatched after losing its worker */
    uint32_t    flush_no;   /* SLOT_SENT: worker->flushes when added; equal to it
                               means the REQUEST never left (not delivered) */
    worker_t   *worker;     /* SLOT_SENT: who holds it */
    method_t   *method;     /* its method (queue when SLOT_QUEUED) */
    jrpc_span_t params;     /* the client's JSON text, borrowed from the owner until
                               on_done or cancel; encoded for each worker it is sent
                               to (worker_add_call) */
    jrpc_span_t params_mp;  /* the same as msgpack, borrowed likewise, when the parser
                               made it; n == 0: transcoded at send if need be */
    jrpc_span_t trace;      /* W3C traceparent (valid) or n == 0; borrowed likewise */
    uint64_t    deadline;   /* loop ms, sent as the time left */
    uint64_t    t_ns;       /* metrics clock: dispatched (queued), then sent */
    uint32_t    bytes;      /* SLOT_SENT: its bytes in the REQUEST (worker->bytes) */
    uint8_t     flags;      /* SL_*: a hedge copy; lost the race; on the watch list */
    uint32_t    twin;       /* the other copy of a hedged call, or NIL */
    uint32_t    wprev, wnext; /* the watch list (SL_WATCHED) */
    uint64_t    sent_ms;    /* SL_WATCHED: loop ms when sent */
} slot_t;

struct method {
    char       *name;       /* NUL-terminated */
    size_t      len;        /* bytes in name */
    worker_t  **workers;    /* live workers serving it */
    uint32_t    nworkers;
    uint32_t    rr;         /* where the next search for credit starts */
    uint32_t    qhead, qtail; /* FIFO of queued slots */
    method_t   *next;       /* hash chain */
    uint32_t    hash;       /* of name */
    uint32_t    refs;       /* workers listing it + slots pointing at it */
    uint32_t    mark;       /* the READY that last listed it (duplicates) */
    uint32_t    pos;        /* its index in that READY's worker->methods */
    uint32_t    nejected;   /* of workers[], those ejected */
    uint32_t    njson;      /* of workers[], those that declared it "json" */
    bool        in_gc;      /* on the jrpc_workers gc list */
    method_t   *gc_next;    /* gc list */
    uint32_t   *lat;        /* hedging: answer times, LAT_BUCKETS counts (lazy) */
    uint32_t    nlat;       /* answers in lat */
    uint32_t    p95_ms;     /* the hedging threshold, refreshed every 32 answers; 0: unknown */
};

struct worker {
    jrpc_zmtp_conn_t *conn; /* native engine: its connection (a reference); NULL with libzmq */
    char        id[MAX_ROUTING_ID]; /* ROUTER routing id (native: 0 and the conn id, as libzmq's) */
    size_t      idlen;
    char        name[MAX_NAME + 1]; /* READY's "name" option, else the id in hex (metrics) */
    uint32_t    credit;     /* announced at READY, at most max_worker_credit */
    uint32_t    inflight;   /* calls sent, not answered */
    uint64_t    last_seen;  /* jrpc_metrics clock (ns) at its last message */
    bool        seen;       /* a message since the last heartbeat tick */
    uint32_t    missed;     /* heartbeat ticks in a row without a message */
    uint64_t    bytes;      /* REQUEST bytes of its calls sent, not answered */
    bool        bytes_full; /* at max_worker_bytes (logged once per crossing) */
    uint64_t    bytes_logged; /* jrpc_metrics clock of the last worker_bytes_full line */
    uint32_t    timeouts;   /* calls timed out in a row (no answer in time since) */
    uint64_t    ejected_until; /* jrpc_metrics clock (ns); 0: not ejected */
    bool        draining;   /* sent DISCONNECT: no new calls */
    bool        routed;     /* in its methods' worker lists */
    method_t  **methods;    /* served (kept after unrouting: see idem) */
    bool       *idem;       /* per method: declared idempotent at READY (2 * nmethods
                               entries: json is the second half) */
    bool       *json;       /* per method: declared "json" at READY (params sent as
                               the client's text); inside idem's block */
    uint32_t    njson;      /* methods declared json: 0 (none) and nmethods (all)
                               need no lookup */
    const method_t *json_m; /* the last method looked up in json[], and its flag */
    bool        json_v;
    uint32_t    nmethods;
    uint32_t    flushes;    /* REQUESTs handed to ZeroMQ successfully */
    jrpc_buf_t  out;        /* REQUEST being built for the next flush */
    uint32_t    out_n;      /* calls in out */
    bool        dead;       /* removed; freed at the end of the turn */
    worker_t   *next;       /* all workers */
};

struct jrpc_workers {
    uv_loop_t      *loop;
    jrpc_zmtp_t    *zmtp;          /* the native ROUTER (io/jrpc_zmtp), or NULL: */
    void           *sock;          /* the libzmq ROUTER, or NULL */
    jrpc_zwatch_t   watch;         /* libzmq */
    bool            destroying;    /* jrpc_workers_destroy ran: no more losses */
    uv_timer_t      heartbeat;
    int             closing;       /* handles still closing */
    jrpc_workers_opts_t opts;
    jrpc_done_fn    done;
    void           *done_arg;
    worker_t       *workers;       /* list of connected workers */
    uint32_t        nworkers;
    method_t      **mtab;          /* method hash table */
    uint32_t        mtab_size;     /* power of two */
    slot_t         *slots;
    uint32_t        nslots, cap_slots, free_head;
    uint32_t        generation;
    uint32_t        queued, inflight;
    uint64_t        late, malformed;
    uint64_t        grace_until;   /* loop ms; 0 once the start-up grace is over */
    uint32_t        nmethods;      /* entries in mtab */
    uint64_t        redispatched;  /* calls sent again after losing their worker */
    uint64_t        lost;          /* calls answered -32004 (worker lost) */
    uint32_t        ready_no;      /* READYs read: the stamp of method_t.mark */
    method_t       *gc;            /* methods whose refs fell to 0 (method_sweep) */
    uint64_t        ready_refused; /* READYs refused */
    uint64_t        ejections;     /* workers ejected */
    msgpack_zone    zone;          /* for decoding one frame at a time */
    uint32_t        njson_workers; /* connected workers that declared any method "json" */
    method_t       *hint_m;        /* the last method looked up by name (a batch is
                                      mostly one method); NULL when freed */
    jrpc_buf_t      scratch;       /* encoding of small messages */
    uv_timer_t      hedge_timer;   /* walks the watch list while it is not empty */
    uint32_t        whead, wtail;  /* the watch list, oldest first */
    uint32_t        hedge_budget;  /* units: a first send earns budget_pct, a hedge costs 100 */
    uint64_t        hedges, hedges_won;
    uint32_t        lat_edge[LAT_BUCKETS]; /* upper edge of each bucket, us */
};

static uint64_t now_ms(jrpc_workers_t *w)
{
    return uv_now(w->loop);
}

static uint32_t hash(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

/* ---- methods ---- */

static bool same_name(const method_t *m, jrpc_span_t s)
{
    return m->len == s.n && jrpc_same(m->name, s.p, s.n);
}

static method_t *method_find(jrpc_workers_t *w, const char *name, size_t len)
{
    uint32_t h = hash(name, len);
    for (method_t *m = w->mtab[h & (w->mtab_size - 1)]; m; m = m->next)
        if (m->hash == h && m->len == len && memcmp(m->name, name, len) == 0)
            return m;
    return NULL;
}

/* Doubles the table when it is 3/4 full (a failed allocation keeps the old
 * one: longer chains, nothing lost). */
static void method_grow(jrpc_workers_t *w)
{
    if (w->nmethods < w->mtab_size / 4 * 3 || w->mtab_size >= 1u << 30)
        return;
    uint32_t size = w->mtab_size * 2;
    method_t **t = calloc(size, sizeof *t);
    if (t == NULL)
        return;
    for (uint32_t b = 0; b < w->mtab_size; b++) {
        while (w->mtab[b]) {
            method_t *m = w->mtab[b];
            w->mtab[b] = m->next;
            m->next = t[m->hash & (size - 1)];
            t[m->hash & (size - 1)] = m;
        }
    }
    free(w->mtab);
    w->mtab = t;
    w->mtab_size = size;
}

/* The entry for name, made when missing (refs 0: the caller takes a
 * reference, or hands it to method_unref's check). NULL on ENOMEM. */
static method_t *method_get(jrpc_workers_t *w, const char *name, size_t len)
{
    method_t *m = method_find(w, name, len);
    if (m)
        return m;
    m = calloc(1, sizeof *m);
    if (m == NULL || (m->name = malloc(len + 1)) == NULL) {
        free(m);
        return NULL;
    }
    memcpy(m->name, name, len);
    m->name[len] = '\0';
    m->len = len;
    m->hash = hash(name, len);
    m->qhead = m->qtail = NIL;
    method_grow(w);
    uint32_t b = m->hash & (w->mtab_size - 1);
    m->next = w->mtab[b];
    w->mtab[b] = m;
    w->nmethods++;
    return m;
}

/* An entry nobody refers to goes on the gc list, freed at the next
 * method_sweep (never here: callers up the stack may still be walking it,
 * e.g. method_fail_queue). */
static void method_check(jrpc_workers_t *w, method_t *m)
{
    if (m->refs == 0 && !m->in_gc) {
        m->in_gc = true;
        m->gc_next = w->gc;
        w->gc = m;
    }
}

/* Drops one reference. */
static void method_unref(jrpc_workers_t *w, method_t *m)
{
    m->refs--;
    method_check(w, m);
}

/* Frees the entries still unreferenced on the gc list. Called only where no
 * method pointer is held up the stack: reap() and the start of on_ready. */
static void method_sweep(jrpc_workers_t *w)
{
    while (w->gc) {
        method_t *m = w->gc;
        w->gc = m->gc_next;
        m->in_gc = false;
        if (m->refs > 0)
            continue;
        method_t **pp = &w->mtab[m->hash & (w->mtab_size - 1)];
        while (*pp != m)
            pp = &(*pp)->next;
        *pp = m->next;
        w->nmethods--;
        if (w->hint_m == m)
            w->hint_m = NULL;
        free(m->workers);
        free(m->lat);
        free(m->name);
        free(m);
    }
}

static void method_fail_queue(jrpc_workers_t *w, method_t *m);

/* Ends the start-up grace: calls still waiting for a method that no worker
 * has declared are answered "method not found". */
static void grace_end(jrpc_workers_t *w)
{
    w->grace_until = 0;
    for (uint32_t b = 0; b < w->mtab_size; b++)
        for (method_t *m = w->mtab[b]; m; m = m->next)
            if (m->nworkers == 0 && m->qhead != NIL)
                method_fail_queue(w, m);
}

/* ---- slots ---- */

/* Makes one more free slot. Returns 0 or -ENOMEM. */
static int slot_grow(jrpc_workers_t *w)
{
    if (w->nslots == w->cap_slots) {
        uint32_t cap = w->cap_slots ? w->cap_slots * 2 : 1024;
        slot_t *s = realloc(w->slots, (size_t)cap * sizeof *s);
        if (s == NULL)
            return -ENOMEM;
        w->slots = s;
        w->cap_slots = cap;
    }
    w->slots[w->nslots].next = NIL;
    w->free_head = w->nslots++;
    return 0;
}

/* Takes a free slot and returns its index, or NIL when out of memory. The
 * array may move: pointers into it are stale after. The caller then writes
 * the whole slot in one assignment, w->slots[i] = (slot_t){ SLOT_NEW(w, i),
 * ... }: a compound literal assigned in place, no copy on the stack
 * (building it first and copying it in cost about 40 instructions a call). */
static inline uint32_t slot_take(jrpc_workers_t *w)
{
    if (w->free_head == NIL && slot_grow(w) < 0)
        return NIL;
    uint32_t i = w->free_head;
    w->free_head = w->slots[i].next;
    if (++w->generation == 0)
        w->generation = 1;
    return i;
}

/* The fields every new slot i starts with: a new seq, no links. */
#define SLOT_NEW(w, i)                                                         \
    .seq = (uint64_t)(w)->generation << 32 | (uint64_t)((i) + 1), .next = NIL, \
    .twin = NIL, .wprev = NIL, .wnext = NIL

static void watch_del(jrpc_workers_t *w, uint32_t i);

static void slot_free(jrpc_workers_t *w, uint32_t i)
{
    slot_t *s = &w->slots[i];
    watch_del(w, i);
    if (s->twin != NIL) {   /* the other copy goes on alone */
        w->slots[s->twin].twin = NIL;
        s->twin = NIL;
    }
    if (s->method) {
        method_unref(w, s->method);
        s->method = NULL;
    }
    s->seq = 0;
    s->state = SLOT_FREE;
    s->owner = NULL;
    s->next = w->free_head;
    w->free_head = i;
}

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

/* The value of a call that ends without the worker's answer. */
#define NO_VALUE ((jrpc_span_t){ NULL, 0 })

/* Ends a call: tells its owner (unless cancelled) and frees the slot. */
static void slot_finish(jrpc_workers_t *w, uint32_t i, int kind, int code,
                        jrpc_span_t value)
{
    slot_t *s = &w->slots[i];
    void *owner = s->owner;
    uint32_t index = s->index;
    slot_free(w, i);
    if (owner)
        w->done(owner, index, kind, code, value, w->done_arg);
}

/* ---- sending ---- */

/* Whom a message comes from or goes to: a native connection (its routing id
 * made up when needed: peer_id), or a libzmq routing id. */
typedef struct peer {
    jrpc_zmtp_conn_t *conn;
    const char       *id;       /* libzmq */
    size_t            idlen;
} peer_t;

#define NATIVE_IDLEN 5   /* a zero byte and a 32-bit number, as libzmq makes them */

/* The routing id of a peer, for labels and logs: buf has NATIVE_IDLEN bytes. */
static const char *peer_id(const peer_t *p, char *buf, size_t *len)
{
    if (p->conn == NULL) {
        *len = p->idlen;
        return p->id;
    }
    uint32_t n = jrpc_zmtp_conn_id(p->conn);
    buf[0] = 0;
    for (int i = 4; i >= 1; i--, n >>= 8)
        buf[i] = (char)(uint8_t)n;
    *len = NATIVE_IDLEN;
    return buf;
}

static peer_t worker_peer(const worker_t *wk)
{
    return (peer_t){ .conn = wk->conn, .id = wk->id, .idlen = wk->idlen };
}

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
static int send_simple(jrpc_workers_t *w, const peer_t *to, int type)
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

/* ---- hedging ---- */

static void on_hedge_tick(uv_timer_t *t);
static bool worker_has_room(const jrpc_workers_t *w, const worker_t *wk);
static bool worker_eligible(const worker_t *wk, const method_t *m);
static inline int worker_add_call(jrpc_workers_t *w, worker_t *wk, uint32_t i);

static void watch_del(jrpc_workers_t *w, uint32_t i)
{
    slot_t *s = &w->slots[i];
    if (!(s->flags & SL_WATCHED))
        return;
    s->flags &= (uint8_t)~SL_WATCHED;
    if (s->wprev == NIL)
        w->whead = s->wnext;
    else
        w->slots[s->wprev].wnext = s->wnext;
    if (s->wnext == NIL)
        w->wtail = s->wprev;
    else
        w->slots[s->wnext].wprev = s->wprev;
    s->wprev = s->wnext = NIL;
}

static bool worker_idempotent(const worker_t *wk, const method_t *m);
static bool worker_json(worker_t *wk, const method_t *m);

/* Call i was just given to wk: a first send earns hedging budget, and a
 * call of a method wk declared idempotent is watched (at the tail: the
 * list stays in the order of sending). */
static void hedge_watch(jrpc_workers_t *w, worker_t *wk, uint32_t i)
{
    slot_t *s = &w->slots[i];
    if (s->flags & SL_HEDGE)
        return;
    if (s->resent == 0 && w->hedge_budget < HEDGE_BURST)
        w->hedge_budget += w->opts.hedge_budget_pct;
    watch_del(w, i);   /* sent again: watched from now */
    if (s->twin != NIL || !worker_idempotent(wk, s->method))
        return;
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
static void hedge_init(jrpc_workers_t *w)
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
static void lat_observe(jrpc_workers_t *w, method_t *m, uint64_t ns)
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

/* Adds call i (its method, params and deadline are in the slot) to the
 * worker's REQUEST under construction. Inline: it runs once for every call
 * sent, and its frame cost about 39 instructions a call (bench/profile.sh). */
static inline int worker_add_call(jrpc_workers_t *w, worker_t *wk, uint32_t i)
{
    slot_t *s = &w->slots[i];
    uint64_t now = now_ms(w);
    /* 0 would mean "no deadline" on the wire: a call already late gets 1. */
    uint32_t timeout_ms = s->deadline > now ? (uint32_t)(s->deadline - now) : 1;
    if (wk->out_n == 0) {
        jrpc_buf_reset(&wk->out);
        if (jrpc_wire_put_request_begin(&wk->out) < 0)
            return -ENOMEM;
    }
    size_t before = wk->out.len;
    jrpc_span_t method = { s->method->name, s->method->len };
    bool as_json = worker_json(wk, s->method);
    int rc = !as_json && s->params_mp.n
                 ? jrpc_wire_put_request_call(&wk->out, s->seq, method, s->params_mp, timeout_ms,
                                              s->trace)
                 : jrpc_wire_put_request_call_json(&wk->out, s->seq, method, s->params, as_json,
                                                   timeout_ms, s->trace);
    if (rc < 0)
        return rc;
    s->bytes = (uint32_t)(wk->out.len - before);
    wk->bytes += s->bytes;
    /* Logged when the cap starts refusing (not for one call alone larger
     * than it), at most every 10 s per worker. */
    if (wk->bytes >= w->opts.max_worker_bytes && !wk->bytes_full && wk->inflight >= 1 &&
        jrpc_metrics.now - wk->bytes_logged >= 10000 * NS_PER_MS) {
        wk->bytes_full = true;
        wk->bytes_logged = jrpc_metrics.now;
        JRPC_LOG(JRPC_LOG_WARN, "workers",
                 "event=worker_bytes_full worker=%s bytes=%llu limit=%u inflight=%u", wk->name,
                 (unsigned long long)wk->bytes, w->opts.max_worker_bytes, wk->inflight + 1);
    }
    wk->out_n++;
    wk->inflight++;
    w->inflight++;
    if (s->resent == 0 && !(s->flags & SL_HEDGE))
        jrpc_hist_observe(&jrpc_metrics.queue, jrpc_metrics_since(s->t_ns));
    s->t_ns = jrpc_metrics.now;   /* it leaves at the flush ending this loop turn */
    s->state = SLOT_SENT;
    s->worker = wk;
    s->flush_no = wk->flushes;
    if (w->opts.hedge_budget_pct)
        hedge_watch(w, wk, i);
    return 0;
}

/* Whether wk may take one more call: credit left, and fewer than
 * max_worker_bytes outstanding (a worker holding nothing takes any call). */
static bool worker_has_room(const jrpc_workers_t *w, const worker_t *wk)
{
    return wk->inflight < wk->credit && (wk->bytes < w->opts.max_worker_bytes || wk->inflight == 0);
}

/* Whether wk takes calls of m: not ejected, or every worker of m is
 * (better a suspect worker than none, as Envoy's panic threshold). */
static bool worker_eligible(const worker_t *wk, const method_t *m)
{
    return wk->ejected_until == 0 || m->nejected == m->nworkers;
}

/* The live worker serving m with the most free credit, searching from a
 * rotating start; NULL when all are full. */
static worker_t *method_pick(const jrpc_workers_t *w, method_t *m)
{
    worker_t *best = NULL;
    uint32_t best_free = 0, n = m->nworkers;
    if (n == 0)
        return NULL;
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

/* ---- worker lifecycle ---- */

/* The live worker speaking through a peer: the connection's own pointer
 * (native), or a search by routing id (libzmq). */
static worker_t *worker_find(jrpc_workers_t *w, const peer_t *from)
{
    if (from->conn) {
        worker_t *wk = jrpc_zmtp_conn_data(from->conn);
        return wk && !wk->dead ? wk : NULL;
    }
    for (worker_t *wk = w->workers; wk; wk = wk->next)
        if (!wk->dead && wk->idlen == from->idlen && memcmp(wk->id, from->id, from->idlen) == 0)
            return wk;
    return NULL;
}

static void method_remove_worker(method_t *m, worker_t *wk)
{
    for (uint32_t i = 0; i < m->nworkers; i++) {
        if (m->workers[i] == wk) {
            m->njson -= worker_json(wk, m);
            m->workers[i] = m->workers[--m->nworkers];
            return;
        }
    }
}

/* Answers every queued call of a method that nobody serves any more:
 * -32601, or -32004 for a call re-dispatched there (it may have run on the
 * worker that was lost). */
static void method_fail_queue(jrpc_workers_t *w, method_t *m)
{
    while (m->qhead != NIL) {
        uint32_t i = m->qhead;
        slot_t *s = &w->slots[i];
        m->qhead = s->next;
        if (s->owner)
            w->queued--;
        if (s->resent && s->owner)
            w->lost++;
        slot_finish(w, i, JRPC_DONE_FAILED, s->resent ? JRPC_WORKER_FAILED : JRPC_METHOD_NOT_FOUND,
                    NO_VALUE);
    }
    m->qtail = NIL;
}

/* Stops routing new calls to wk (DISCONNECT or death). Its method list
 * stays: worker_kill still needs to know what it declared idempotent. */
static void worker_unroute(jrpc_workers_t *w, worker_t *wk)
{
    if (!wk->routed)
        return;
    wk->routed = false;
    w->njson_workers -= wk->njson > 0;
    for (uint32_t i = 0; i < wk->nmethods; i++) {
        method_t *m = wk->methods[i];
        method_remove_worker(m, wk);
        if (wk->ejected_until)
            m->nejected--;
        if (m->nworkers == 0)
            method_fail_queue(w, m);
    }
}

/* Whether wk takes m's params as JSON text: once per call sent, so the
 * usual cases (a worker that declared none or all of its methods, a batch of
 * one method) need no walk of its methods. */
static bool worker_json(worker_t *wk, const method_t *m)
{
    if (wk->njson == 0 || wk->njson == wk->nmethods)
        return wk->njson != 0;
    if (wk->json_m == m)
        return wk->json_v;
    bool v = false;
    for (uint32_t k = 0; k < wk->nmethods; k++)
        if (wk->methods[k] == m) {
            v = wk->json[k];
            break;
        }
    wk->json_m = m;
    wk->json_v = v;
    return v;
}

static bool worker_idempotent(const worker_t *wk, const method_t *m)
{
    for (uint32_t k = 0; k < wk->nmethods; k++)
        if (wk->methods[k] == m)
            return wk->idem[k];
    return false;
}

/* Sends call i again, to another live worker serving its method, or queues
 * it there when all are out of credit (past --max-queue: it was admitted
 * long ago, and the queue it joins is bounded by the calls in flight). The
 * slot gets a new seq first, so the worker that lost it can never answer
 * it. Returns 0, -ENOENT when nobody else serves the method, or -ENOMEM. */
static int redispatch(jrpc_workers_t *w, uint32_t i)
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

/* Drops wk's references to the methods it listed (once unrouted, when
 * nothing needs its idempotent flags any more). */
static void worker_release_methods(jrpc_workers_t *w, worker_t *wk)
{
    for (uint32_t i = 0; i < wk->nmethods; i++)
        method_unref(w, wk->methods[i]);
    wk->nmethods = 0;
}

/* Removes a worker. Each call it held is sent again when that cannot run it
 * twice — the worker declared the method idempotent, or the REQUEST never
 * left our socket — up to max_redispatch times per call; the others are
 * answered -32004 at once ("may or may not have run"). */
static void worker_kill(jrpc_workers_t *w, worker_t *wk, const char *why)
{
    if (wk->dead)
        return;
    wk->dead = true;
    w->nworkers--;
    uint32_t held = wk->inflight, resent = 0, failed = 0;
    worker_unroute(w, wk);
    w->inflight -= wk->inflight;
    wk->inflight = 0;
    wk->bytes = 0;
    wk->out_n = 0;
    for (uint32_t i = 0; i < w->nslots; i++) {
        slot_t *s = &w->slots[i];
        if (s->state != SLOT_SENT || s->worker != wk)
            continue;
        if (s->owner == NULL || s->twin != NIL) { /* cancelled, or its twin goes on alone */
            slot_free(w, i);
            continue;
        }
        bool delivered = s->flush_no != wk->flushes;
        if ((!delivered || worker_idempotent(wk, s->method)) &&
            s->resent < w->opts.max_redispatch && redispatch(w, i) == 0) {
            resent++;
            continue;
        }
        failed++;
        slot_finish(w, i, JRPC_DONE_FAILED, JRPC_WORKER_FAILED, NO_VALUE);
    }
    worker_release_methods(w, wk);
    w->redispatched += resent;
    w->lost += failed;
    JRPC_LOG(JRPC_LOG_WARN, "workers",
             "event=worker_lost reason=%s inflight=%u redispatched=%u failed=%u workers=%u worker=%s",
             why, held, resent, failed, w->nworkers, wk->name);
}

static void worker_free(jrpc_workers_t *w, worker_t *wk)
{
    if (wk->conn && jrpc_zmtp_conn_data(wk->conn) == wk)   /* not a later session's */
        jrpc_zmtp_conn_set_data(wk->conn, NULL);
    jrpc_zmtp_conn_unref(&wk->conn);
    worker_release_methods(w, wk);
    jrpc_buf_dispose(&wk->out);
    free(wk->methods);
    free(wk->idem);
    free(wk);
}

/* Frees the workers marked dead (never from inside a loop over them). */
static void reap(jrpc_workers_t *w)
{
    worker_t **pp = &w->workers;
    while (*pp) {
        worker_t *wk = *pp;
        if (wk->dead || (wk->draining && wk->inflight == 0)) {
            if (!wk->dead) {
                wk->dead = true;
                w->nworkers--;
                JRPC_LOG(JRPC_LOG_INFO, "workers", "event=worker_drained workers=%u",
                         w->nworkers);
            }
            *pp = wk->next;
            worker_free(w, wk);
        } else {
            pp = &wk->next;
        }
    }
    method_sweep(w);
}

/* Moves queued calls to wk while it has credit. */
static void worker_pull(jrpc_workers_t *w, worker_t *wk)
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

/* A READY name becomes a metrics label and goes into log lines: 1 to
 * MAX_NAME bytes of [A-Za-z0-9._:@/-], nothing that needs escaping. */
static bool name_ok(const char *p, size_t n)
{
    if (n == 0 || n > MAX_NAME)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == ':' || c == '@' || c == '/' || c == '-'))
            return false;
    }
    return true;
}

/* The worker's label in the metrics and logs: its READY name when
 * name_ok(), else its routing id in hex (a refused name is logged). */
static void worker_name(worker_t *wk, const msgpack_object *name)
{
    if (name && name->type == MSGPACK_OBJECT_STR && name_ok(name->via.str.ptr, name->via.str.size)) {
        memcpy(wk->name, name->via.str.ptr, name->via.str.size);
        wk->name[name->via.str.size] = '\0';
        return;
    }
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    for (size_t i = 0; i < wk->idlen && n + 2 <= MAX_NAME; i++) {
        wk->name[n++] = hex[(uint8_t)wk->id[i] >> 4];
        wk->name[n++] = hex[(uint8_t)wk->id[i] & 15];
    }
    wk->name[n] = '\0';
    if (name && name->type == MSGPACK_OBJECT_STR)
        JRPC_LOG(JRPC_LOG_WARN, "workers",
                 "event=worker_name_refused worker=%s bytes=%u detail=\"not 1-64 bytes of "
                 "[A-Za-z0-9._:@/-]: labelled by its routing id\"", wk->name, name->via.str.size);
}

/* Refuses a READY: logged, counted, and the worker told DISCONNECT ("I do
 * not know you": it reconnects and tries again, at most once per heartbeat
 * interval, PROTOCOL.md section 6). */
static void ready_refuse(jrpc_workers_t *w, const peer_t *from, const char *why, uint32_t n,
                         uint32_t limit)
{
    w->ready_refused++;
    char idbuf[NATIVE_IDLEN];
    size_t idlen;
    const char *id = peer_id(from, idbuf, &idlen);
    char hexid[2 * 16 + 1];
    size_t k = 0;
    for (size_t i = 0; i < idlen && i < 16; i++)
        k += (size_t)snprintf(hexid + k, sizeof hexid - k, "%02x", (uint8_t)id[i]);
    hexid[k] = '\0';
    JRPC_LOG(JRPC_LOG_WARN, "workers", "event=ready_refused id=%s reason=%s methods=%u limit=%u",
             hexid, why, n, limit);
    send_simple(w, from, JRPC_WIRE_DISCONNECT);
}

/* Starts a session. Linear in the size of the READY: one hash lookup per
 * name, duplicates found by the mark the READY leaves on each entry. */
static void on_ready(jrpc_workers_t *w, const peer_t *from, const jrpc_wire_msg_t *m)
{
    worker_t *old = worker_find(w, from);
    if (old)
        worker_kill(w, old, "ready_again");
    method_sweep(w);   /* what the old session alone listed */
    uint32_t n = m->methods->via.array.size;
    const msgpack_object *names = m->methods->via.array.ptr;
    if (n > w->opts.max_worker_methods) {
        ready_refuse(w, from, "too_many_methods", n, w->opts.max_worker_methods);
        return;
    }
    uint32_t fresh = 0;   /* names not known yet (a repeated one counted each time) */
    for (uint32_t i = 0; i < n; i++)
        if (names[i].via.str.size <= w->opts.max_method_len &&
            method_find(w, names[i].via.str.ptr, names[i].via.str.size) == NULL)
            fresh++;
    if (fresh > w->opts.max_methods - (w->nmethods < w->opts.max_methods ? w->nmethods
                                                                           : w->opts.max_methods)) {
        ready_refuse(w, from, "method_table_full", w->nmethods + fresh, w->opts.max_methods);
        return;
    }
    worker_t *wk = calloc(1, sizeof *wk);
    if (wk == NULL || (wk->methods = calloc(n, sizeof *wk->methods)) == NULL ||
        (wk->idem = calloc(2 * (size_t)n, sizeof *wk->idem)) == NULL) {
        if (wk)
            free(wk->methods);
        free(wk);
        return;
    }
    wk->json = wk->idem + n;
    char idbuf[NATIVE_IDLEN];
    const char *id = peer_id(from, idbuf, &wk->idlen);
    memcpy(wk->id, id, wk->idlen);
    if (from->conn) {   /* the connection finds its worker without a search */
        jrpc_zmtp_conn_ref(from->conn);
        wk->conn = from->conn;
        jrpc_zmtp_conn_set_data(wk->conn, wk);
    }
    worker_name(wk, jrpc_mpack_map_get(m->options, "name"));
    wk->credit = m->credit < w->opts.max_worker_credit ? m->credit : w->opts.max_worker_credit;
    wk->last_seen = jrpc_metrics.now;
    wk->seen = true;
    jrpc_buf_init(&wk->out);
    if (++w->ready_no == 0)
        w->ready_no = 1;
    uint32_t stamp = w->ready_no, ignored = 0;
    for (uint32_t i = 0; i < n; i++) {
        const msgpack_object_str *s = &names[i].via.str;
        if (s->size > w->opts.max_method_len) {
            ignored++;
            continue;
        }
        method_t *mt = method_get(w, s->ptr, s->size);
        if (mt == NULL || mt->mark == stamp)
            continue;
        worker_t **ws = realloc(mt->workers, (mt->nworkers + 1) * sizeof *ws);
        if (ws == NULL) {
            method_check(w, mt);   /* freed if it was new */
            continue;
        }
        mt->workers = ws;
        mt->workers[mt->nworkers++] = wk;
        mt->mark = stamp;
        mt->pos = wk->nmethods;
        mt->refs++;
        wk->methods[wk->nmethods++] = mt;
    }
    wk->routed = true;
    uint32_t nidem = 0;
    for (uint32_t i = 0; m->idempotent && i < m->idempotent->via.array.size; i++) {
        const msgpack_object_str *s = &m->idempotent->via.array.ptr[i].via.str;
        method_t *mt = method_find(w, s->ptr, s->size);
        if (mt && mt->mark == stamp && !wk->idem[mt->pos]) {
            wk->idem[mt->pos] = true;
            nidem++;
        }
    }
    for (uint32_t i = 0; m->json && i < m->json->via.array.size; i++) {
        const msgpack_object_str *s = &m->json->via.array.ptr[i].via.str;
        method_t *mt = method_find(w, s->ptr, s->size);
        if (mt && mt->mark == stamp && !wk->json[mt->pos]) {
            wk->json[mt->pos] = true;
            wk->njson++;
            mt->njson++;
        }
    }
    w->njson_workers += wk->njson > 0;
    wk->next = w->workers;
    w->workers = wk;
    w->nworkers++;
    JRPC_LOG(JRPC_LOG_INFO, "workers",
             "event=worker_ready worker=%s credit=%u credit_asked=%u methods=%u idempotent=%u "
             "json=%u ignored=%u workers=%u", wk->name, wk->credit, m->credit, wk->nmethods, nidem,
             wk->njson, ignored, w->nworkers);
    /* The answer to READY: our heartbeat settings, before any REQUEST. */
    peer_t to = worker_peer(wk);
    send_simple(w, &to, JRPC_WIRE_HEARTBEAT);
    worker_pull(w, wk);
}

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

/* The items of a RESPONSE read in place (jrpc_wire_response_open checked
 * the whole frame: nothing is answered from a malformed one). */
static void on_response(jrpc_workers_t *w, worker_t *wk, jrpc_wire_rsp_t *r)
{
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
        jrpc_hist_observe(&jrpc_metrics.worker, took);
        if (w->opts.hedge_budget_pct)
            lat_observe(w, s->method, took);
        if (s->owner == NULL) {
            if (!(s->flags & SL_LOST_RACE))   /* a hedge's loser is no late answer */
                w->late++;
        } else {
            wk->timeouts = 0;   /* answered in time */
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
    worker_pull(w, wk);
}

/* A message from a peer we do not know (we restarted, or it timed out): ask
 * it to start over. Its answers are for calls we gave up on or sent
 * elsewhere. */
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
    (void)peer_ip;
    jrpc_workers_t *w = data;
    if (n != 1 || excess) {
        w->malformed++;
        return;
    }
    peer_t from = { .conn = conn };
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

/* Ejects wk (no new calls until the ejection ends, unless every worker of
 * a method is ejected), or ends its ejection. */
static void worker_set_ejected(jrpc_workers_t *w, worker_t *wk, bool on)
{
    if (on == (wk->ejected_until != 0))
        return;
    wk->ejected_until = on ? jrpc_metrics.now + (uint64_t)w->opts.eject_ms * NS_PER_MS : 0;
    for (uint32_t k = 0; wk->routed && k < wk->nmethods; k++) {
        if (on)
            wk->methods[k]->nejected++;
        else
            wk->methods[k]->nejected--;
    }
    if (on) {
        w->ejections++;
        JRPC_LOG(JRPC_LOG_WARN, "workers",
                 "event=worker_ejected worker=%s timeouts=%u eject_ms=%u inflight=%u", wk->name,
                 wk->timeouts, w->opts.eject_ms, wk->inflight);
        wk->timeouts = 0;
    } else {
        JRPC_LOG(JRPC_LOG_INFO, "workers", "event=worker_ejection_ended worker=%s", wk->name);
        worker_pull(w, wk);
    }
}

/* Heartbeat tick. A worker is lost when no message came from it during
 * the last `liveness` ticks AND for liveness x heartbeat_ms of wall time
 * (fresh clock). Counting ticks is what a long callback cannot fake: it
 * delays the ticks as much as the reading, so messages queued meanwhile are
 * not mistaken for silence. */
static void on_heartbeat(uv_timer_t *t)
{
    jrpc_workers_t *w = t->data;
    uint64_t now = now_ms(w);
    uint64_t now_ns = jrpc_metrics_tick();
    uint64_t limit = (uint64_t)w->opts.heartbeat_ms * w->opts.liveness * NS_PER_MS;
    if (w->grace_until && now >= w->grace_until)
        grace_end(w);
    for (worker_t *wk = w->workers; wk; wk = wk->next) {
        if (wk->dead)
            continue;
        wk->missed = wk->seen ? 0 : wk->missed + 1;
        wk->seen = false;
        if (wk->ejected_until && now_ns >= wk->ejected_until)
            worker_set_ejected(w, wk, false);
        /* A connection that closed (a killed process) is seen at the next
         * heartbeat, before the liveness runs out. */
        peer_t to = worker_peer(wk);
        if (wk->missed >= w->opts.liveness && now_ns - wk->last_seen > limit)
            worker_kill(w, wk, "heartbeat_expired");
        else if (send_simple(w, &to, JRPC_WIRE_HEARTBEAT) == -EHOSTUNREACH)
            worker_kill(w, wk, "unreachable");
    }
    jrpc_workers_flush(w); /* calls re-dispatched above */
    reap(w);
    if (w->sock)
        jrpc_zwatch_kick(&w->watch);
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

int jrpc_workers_dispatch(jrpc_workers_t *w, jrpc_span_t method, jrpc_span_t params,
                          jrpc_span_t params_mp, jrpc_span_t traceparent, uint64_t deadline, uint64_t submitted_ns,
                          void *owner, uint32_t index, uint32_t *handle)
{
    method_t *m = w->hint_m;
    if (m == NULL || !same_name(m, method)) {
        if ((m = method_find(w, method.p, method.n)) != NULL)
            w->hint_m = m;
    }
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
    w->slots[i] = (slot_t){ SLOT_NEW(w, i), .owner = owner, .index = index, .method = m,
                            .params = params, .params_mp = params_mp, .trace = traceparent,
                            .deadline = deadline,
                            .t_ns = submitted_ns };  /* queue time: from the body's arrival */
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
    st->ejections = w->ejections;
    st->hedges = w->hedges;
    st->hedges_won = w->hedges_won;
}

bool jrpc_workers_serves(jrpc_workers_t *w, const char *method, size_t len)
{
    method_t *m = method_find(w, method, len);
    return m != NULL && m->nworkers > 0;
}

/* m's name is s: short names compared inline (a call of libc's memcmp
 * costs more than the bytes, once per call). */
bool jrpc_workers_wants_msgpack(jrpc_workers_t *w, jrpc_span_t method)
{
    if (w->njson_workers == 0)   /* nobody takes JSON: msgpack, no lookup */
        return true;
    method_t *m = w->hint_m;
    if (m == NULL || !same_name(m, method)) {
        if ((m = method_find(w, method.p, method.n)) == NULL)
            return true;
        w->hint_m = m;
    }
    return m->njson < m->nworkers;
}

bool jrpc_workers_idempotent(jrpc_workers_t *w, jrpc_span_t method)
{
    method_t *m = method.n ? method_find(w, method.p, method.n) : NULL;
    if (m == NULL || m->nworkers == 0)
        return false;
    for (uint32_t k = 0; k < m->nworkers; k++)
        if (!worker_idempotent(m->workers[k], m))
            return false;
    return true;
}

void jrpc_workers_each_credit(jrpc_workers_t *w, jrpc_credit_fn fn, void *arg)
{
    for (worker_t *wk = w->workers; wk; wk = wk->next) {
        if (wk->dead)
            continue;
        /* Two workers may give the same name: the later ones get their id
         * appended, so that every series stays distinct. */
        bool dup = false;
        for (worker_t *o = w->workers; o != wk && !dup; o = o->next)
            dup = !o->dead && strcmp(o->name, wk->name) == 0;
        char label[MAX_NAME + 2 + 2 * MAX_ROUTING_ID];
        size_t n = strlen(wk->name);
        memcpy(label, wk->name, n + 1);
        if (dup) {
            label[n++] = '@';
            for (size_t i = 0; i < wk->idlen; i++)
                n += (size_t)snprintf(label + n, sizeof label - n, "%02x", (uint8_t)wk->id[i]);
        }
        fn(arg, label, wk->credit > wk->inflight ? wk->credit - wk->inflight : 0);
    }
}

/* Frees every worker, dead or alive. */
static void free_workers(jrpc_workers_t *w)
{
    while (w->workers) {
        worker_t *wk = w->workers;
        w->workers = wk->next;
        worker_free(w, wk);
    }
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
