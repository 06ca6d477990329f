/* jrpc_workers_int — the state the files of jrpc_workers share.
 *
 * Internal to broker/core: not installed, and included only by the four
 * files of the module and their tests. jrpc_workers is one module (one
 * public header, jrpc_workers.h) in four files, one job each:
 *
 *   jrpc_workers.c   the calls: slots, dispatch and the methods' queues,
 *                    sending REQUESTs, reading the workers' messages, the API
 *   jrpc_methods.c   the method table: entries by name, who serves each,
 *                    their references and sweeping, the start-up grace
 *   jrpc_hedge.c     hedging: the watch list, the budget, answer times
 *   jrpc_sessions.c  a worker's session: READY, heartbeats and liveness,
 *                    ejection, loss (calls sent again or failed), reaping
 *
 * What the hot paths (dispatching a call, reading a RESPONSE) need from more
 * than one file is here as static inline, so that the split costs them no
 * call: the method lookup, the slots, worker_add_call. The functions one
 * file lends another are declared at the end, each described where it is
 * defined, under the names they had as static functions of one file (the
 * unit tests compile the files in and call them by these names): they are
 * seen by the broker only, as nothing outside broker/core includes this. */
#ifndef JRPC_WORKERS_INT_H
#define JRPC_WORKERS_INT_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jrpc_log.h"
#include "jrpc_metrics.h"
#include "jrpc_wire.h"
#include "jrpc_workers.h"
#include "jrpc_zmtp.h"
#include "jrpc_zwatch.h"

#define NIL UINT32_MAX
#define NS_PER_MS 1000000ull
#define MAX_ROUTING_ID 255   /* ZeroMQ's own limit */
#define SESSION_EXTRA  64    /* calls of MCP sessions a worker may hold past its credit */
#define MAX_NAME 64          /* bytes of a worker's name kept for its metrics label */
/* Answer times per method, for the hedging threshold: LAT_BUCKETS buckets
 * of a quarter octave from LAT_BASE_US (so a p95 within 19 %), halved when
 * LAT_DECAY answers are counted (the last few thousand answers count). */
#define LAT_BUCKETS 64
#define LAT_BASE_US 50
#define LAT_DECAY   2048
#define LAT_MIN_N   20       /* answers seen before the p95 is trusted */

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
    jrpc_span_t sess;       /* MCP session (n == 0: none); borrowed likewise */
    bool        msgs;       /* an MCP call: sent with the 6th element (MESSAGE frames) */
    uint64_t    deadline;   /* loop ms, sent as the time left */
    uint64_t    t_ns;       /* metrics clock: dispatched (queued), then sent */
    uint64_t    queue_ns;   /* SLOT_SENT: dispatched to first sent (Server-Timing) */
    uint32_t    bytes;      /* SLOT_SENT: its bytes in the REQUEST (worker->bytes) */
    uint8_t     flags;      /* SL_*: a hedge copy; lost the race; on the watch list */
    uint32_t    twin;       /* the other copy of a hedged call, or NIL */
    uint32_t    wprev, wnext; /* the watch list (SL_WATCHED) */
    uint64_t    sent_ms;    /* SL_WATCHED: loop ms when sent */
} slot_t;

struct method {
    char       *name;       /* NUL-terminated: the key, what a client calls: "method"
                               (no service), or "service.method" (canonical) */
    size_t      len;        /* bytes in name */
    uint32_t    slen;       /* bytes of the service at name's start; 0: no service */
    jrpc_span_t wire;       /* in name: the key without its service (method_wire_name) */
    method_t   *bare;       /* a service's entry owning its bare name: that no-service
                               entry (its alias; refs held both ways), else NULL */
    method_t   *to;         /* a bare name owned by a service: that service's entry
                               (calls by the bare name go there), else NULL */
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
    uint32_t    stat;       /* its jrpc_metrics record (jrpc_metrics_method_id at the first
                               READY naming it); 0: "other" */
};

struct worker {
    jrpc_zmtp_conn_t *conn; /* native engine: its connection (a reference); NULL with libzmq */
    char        id[MAX_ROUTING_ID]; /* ROUTER routing id (native: 0 and the conn id, as libzmq's) */
    size_t      idlen;
    char        name[MAX_NAME + 1]; /* READY's "name" option, else the id in hex (metrics) */
    char        host[48];   /* the IP it connected from (native tcp://), else "" */
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
    uint64_t    answered;   /* answers to calls still wanted (metrics, status) */
    uint64_t    errors;     /* of them, error objects */
    uint64_t    timeouts_all; /* calls that passed their deadline here, ever */
    uint32_t    ejections;  /* times ejected */
    bool        draining;   /* sent DISCONNECT: no new calls */
    bool        routed;     /* in its methods' worker lists */
    method_t  **methods;    /* served (kept after unrouting: see idem) */
    bool       *idem;       /* per method: declared idempotent at READY (2 * nmethods
                               entries: json is the second half) */
    bool       *json;       /* per method: declared "json" at READY (params sent as
                               the client's text); inside idem's block */
    char        service[JRPC_WORKERS_SERVICE_MAX + 1]; /* READY's "service", "" none */
    char       *schemas;    /* READY's "schemas" JSON text (owned), or NULL */
    jrpc_span_t *sch;       /* per method: its params, result and whole declaration in
                               schemas (3 * nmethods, n == 0: none), or NULL */
    uint32_t    njson;      /* methods declared json: 0 (none) and nmethods (all)
                               need no lookup */
    const method_t *json_m; /* the last method looked up in json[], and its flag */
    bool        json_v;
    uint32_t    nmethods;
    bool        has_instance; /* READY "instance": it sends MESSAGE frames */
    bool        probes;     /* READY "probes" (with "instance"): it answers PROBE frames */
    uint64_t    instance;   /* names its MCP sessions (jrpc_mcp_sid.h) */
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
    jrpc_msg_fn     on_msg;        /* MESSAGE frames; NULL: dropped */
    void           *on_msg_arg;
    uint64_t        msgs_dropped;  /* MESSAGE and PROBE frames nobody took */
    jrpc_probe_fn   on_probe;      /* PROBE answers; NULL: dropped */
    void           *on_probe_arg;
    uint64_t        done_queue_ns;  /* the call being answered (a worker's answer): its time */
    uint64_t        done_worker_ns; /* ... in its method's queue, and at its worker (ns) */
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
    uint32_t        nsvc_methods;  /* of them, service entries (slen > 0): 0 means no
                                      service anywhere, names resolve as before */
    uint64_t        methods_refused; /* bare names refused at READY (service_conflict) */
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
    uint32_t        last_stat;     /* the metrics record of the last dispatch's method */
};

static inline uint64_t now_ms(jrpc_workers_t *w)
{
    return uv_now(w->loop);
}

static inline uint32_t hash(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

/* ---- methods ---- */

static inline bool same_name(const method_t *m, jrpc_span_t s)
{
    return m->len == s.n && jrpc_same(m->name, s.p, s.n);
}

/* The entry keyed name[0, len) whose service is its first slen bytes (0: the
 * no-service entry, or a bare name's alias). */
static inline method_t *method_find_svc(jrpc_workers_t *w, const char *name, size_t len,
                                        uint32_t slen)
{
    uint32_t h = hash(name, len);
    for (method_t *m = w->mtab[h & (w->mtab_size - 1)]; m; m = m->next)
        if (m->hash == h && m->len == len && m->slen == slen && memcmp(m->name, name, len) == 0)
            return m;
    return NULL;
}

static inline method_t *method_find(jrpc_workers_t *w, const char *name, size_t len)
{
    return method_find_svc(w, name, len, 0);
}

/* The entry a client's name finds, before a bare name's alias is followed
 * (method_target): the exact no-service entry when it is served (or no
 * service exists: the one lookup of before), else `service.method` split at
 * the first '.' when that service serves it, else the no-service entry or
 * NULL. */
static inline method_t *method_lookup(jrpc_workers_t *w, const char *name, size_t len)
{
    method_t *m = method_find(w, name, len);
    if (w->nsvc_methods == 0 || (m != NULL && (m->to != NULL || m->nworkers > 0)))
        return m;
    const char *dot = memchr(name, '.', len);
    if (dot != NULL && dot != name) {
        method_t *q = method_find_svc(w, name, len, (uint32_t)(dot - name));
        if (q != NULL)
            return q;
    }
    return m;
}

/* Where calls found at m go: the owner of a bare name, else m itself. */
static inline method_t *method_target(method_t *m)
{
    return m != NULL && m->to != NULL ? m->to : m;
}

/* The method name sent to workers: the key without its service (kept in
 * the entry: read once for every call sent). */
static inline jrpc_span_t method_wire_name(const method_t *m)
{
    return m->wire;
}

/* An entry nobody refers to goes on the gc list, freed at the next
 * method_sweep (never here: callers up the stack may still be walking it,
 * e.g. method_fail_queue). */
static inline void method_check(jrpc_workers_t *w, method_t *m)
{
    if (m->refs == 0 && !m->in_gc) {
        m->in_gc = true;
        m->gc_next = w->gc;
        w->gc = m;
    }
}

/* Drops one reference. */
static inline void method_unref(jrpc_workers_t *w, method_t *m)
{
    m->refs--;
    method_check(w, m);
}

/* ---- slots ---- */

/* Makes one more free slot. Returns 0 or -ENOMEM. */
static inline int slot_grow(jrpc_workers_t *w)
{
    if (w->nslots == w->cap_slots) {
        uint32_t cap = w->cap_slots ? w->cap_slots * 2 : 1024;
        slot_t *s = realloc(w->slots, (size_t)cap * sizeof *s);
        if (s == NULL)
            return -ENOMEM;
        w->slots = s;
        w->cap_slots = cap;
    }
    /* A free slot's twin and watch links are NIL (slot_free and watch_del
     * keep them so): dispatch() writes only a call's own fields and resets
     * what a freed slot may keep (resent, flags, sess). */
    w->slots[w->nslots] = (slot_t){ .next = NIL, .twin = NIL, .wprev = NIL, .wnext = NIL };
    w->free_head = w->nslots++;
    return 0;
}

/* Takes a free slot and returns its index, or NIL when out of memory. The
 * array may move: pointers into it are stale after. The caller then writes
 * the whole slot in one assignment, w->slots[i] = (slot_t){ SLOT_NEW(w, i),
 * ... }: a compound literal assigned in place, no copy on the stack
 * (building it first and copying it in cost about 40 instructions a call);
 * dispatch(), once a call, writes only the fields a free slot may hold
 * stale (SLOT_SEQ and the rest in its comment). */
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

/* The seq of slot i just taken (generation << 32 | (i + 1)). */
#define SLOT_SEQ(w, i) ((uint64_t)(w)->generation << 32 | (uint64_t)((i) + 1))

/* The fields every new slot i starts with: a new seq, no links. */
#define SLOT_NEW(w, i)                                                         \
    .seq = SLOT_SEQ(w, i), .next = NIL, .twin = NIL, .wprev = NIL, .wnext = NIL

static inline void watch_del(jrpc_workers_t *w, uint32_t i)
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

static inline void slot_free(jrpc_workers_t *w, uint32_t i)
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

/* The value of a call that ends without the worker's answer. */
#define NO_VALUE ((jrpc_span_t){ NULL, 0 })

/* Ends a call: tells its owner (unless cancelled) and frees the slot. */
static inline void slot_finish(jrpc_workers_t *w, uint32_t i, int kind, int code,
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
    const char       *ip;       /* native tcp://: the peer's IP (status); else NULL */
} peer_t;

static inline peer_t worker_peer(const worker_t *wk)
{
    return (peer_t){ .conn = wk->conn, .id = wk->id, .idlen = wk->idlen };
}

/* ---- workers ---- */

/* Whether wk may take one more call: credit left, and fewer than
 * max_worker_bytes outstanding (a worker holding nothing takes any call). */
static inline bool worker_has_room(const jrpc_workers_t *w, const worker_t *wk)
{
    return wk->inflight < wk->credit && (wk->bytes < w->opts.max_worker_bytes || wk->inflight == 0);
}

/* Whether wk takes calls of m: not ejected, or every worker of m is
 * (better a suspect worker than none, as Envoy's panic threshold). */
static inline bool worker_eligible(const worker_t *wk, const method_t *m)
{
    return wk->ejected_until == 0 || m->nejected == m->nworkers;
}

/* Whether wk takes m's params as JSON text: once per call sent, so the
 * usual cases (a worker that declared none or all of its methods, a batch of
 * one method) need no walk of its methods. */
static inline bool worker_json(worker_t *wk, const method_t *m)
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

static inline bool worker_idempotent(const worker_t *wk, const method_t *m)
{
    for (uint32_t k = 0; k < wk->nmethods; k++)
        if (wk->methods[k] == m)
            return wk->idem[k];
    return false;
}

/* The live worker speaking through a peer: the connection's own pointer
 * (native), or a search by routing id (libzmq). */
static inline worker_t *worker_find(jrpc_workers_t *w, const peer_t *from)
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

/* ---- lent across the files (described where they are defined) ---- */

/* jrpc_workers.c */
int  send_simple(jrpc_workers_t *w, const peer_t *to, int type);
int  redispatch(jrpc_workers_t *w, uint32_t i);
void worker_pull(jrpc_workers_t *w, worker_t *wk);

/* jrpc_methods.c */
method_t *method_get(jrpc_workers_t *w, const char *name, size_t len);
method_t *method_get_svc(jrpc_workers_t *w, const char *name, size_t len, uint32_t slen);
void method_own_bare(jrpc_workers_t *w, method_t *svc, method_t *bare);
void method_release_bare(jrpc_workers_t *w, method_t *svc);
void method_adopt_queue(jrpc_workers_t *w, method_t *to, method_t *from);
void method_sweep(jrpc_workers_t *w);
void grace_end(jrpc_workers_t *w);
void method_remove_worker(method_t *m, worker_t *wk);
void method_fail_queue(jrpc_workers_t *w, method_t *m);

/* jrpc_hedge.c */
void hedge_init(jrpc_workers_t *w);
void hedge_watch(jrpc_workers_t *w, worker_t *wk, uint32_t i);
void lat_observe(jrpc_workers_t *w, method_t *m, uint64_t ns);

/* jrpc_sessions.c */
void on_ready(jrpc_workers_t *w, const peer_t *from, const jrpc_wire_msg_t *m);
/* SCHEMAS from wk (PROTOCOL.md 2.7): its declaration replaced, each
 * method's checked as at READY (jrpc_sessions.c). */
void on_schemas(jrpc_workers_t *w, worker_t *wk, const jrpc_wire_msg_t *m);
void worker_kill(jrpc_workers_t *w, worker_t *wk, const char *why);
void reap(jrpc_workers_t *w);
void worker_unroute(jrpc_workers_t *w, worker_t *wk);
/* The connected worker whose READY "instance" is instance; NULL: none. */
worker_t *instance_worker(jrpc_workers_t *w, uint64_t instance);
void worker_set_ejected(jrpc_workers_t *w, worker_t *wk, bool on);
void on_heartbeat(uv_timer_t *t);
void free_workers(jrpc_workers_t *w);

/* Adds call i (its method, params and deadline are in the slot) to the
 * worker's REQUEST under construction. Inline: it runs once for every call
 * sent, and its frame cost about 39 instructions a call (bench/profile.sh). */
static JRPC_ALWAYS_INLINE int worker_add_call(jrpc_workers_t *w, worker_t *wk, uint32_t i)
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
    jrpc_span_t method = method_wire_name(s->method);
    bool as_json = worker_json(wk, s->method);
    int rc = s->msgs ? jrpc_wire_put_request_call_session(&wk->out, s->seq, method, s->params,
                                                          as_json, timeout_ms, s->trace, s->sess)
             : !as_json && s->params_mp.n
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
    if (s->resent == 0 && !(s->flags & SL_HEDGE)) {
        s->queue_ns = jrpc_metrics_since(s->t_ns);
        jrpc_hist_observe(&jrpc_metrics.queue, s->queue_ns);
    }
    s->t_ns = jrpc_metrics.now;   /* it leaves at the flush ending this loop turn */
    s->state = SLOT_SENT;
    s->worker = wk;
    s->flush_no = wk->flushes;
    if (w->opts.hedge_budget_pct)
        hedge_watch(w, wk, i);
    return 0;
}

#endif
