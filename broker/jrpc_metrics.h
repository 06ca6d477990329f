/* jrpc_metrics — the broker's Prometheus metrics: counters and histograms
 * the hot path bumps, gauges read at scrape time from the other modules'
 * stats, and the text exposition (format 0.0.4) of all of them.
 *
 * One instance per process (jrpc_metrics, like Redis' `server`): the broker
 * runs one libuv loop on one thread, so hooks are plain increments — no
 * atomics, no allocation, no system call. Time comes from a cached clock
 * (jrpc_metrics.now, uv_hrtime() in ns) refreshed once per event that can
 * start or end calls (a body submitted, a worker message, a Redis answer, a
 * timer) and applied to every call that event touches.
 *
 * The names and labels are a contract (docs/METRICS.md): dashboards and
 * probes are built against them. */
#ifndef JRPC_METRICS_H
#define JRPC_METRICS_H

#include <stdint.h>
#include <uv.h>
#include "jrpc_buf.h"
#include "jrpc_errors.h"

#define JRPC_HIST_MAX 17   /* finite buckets at most (the seconds histograms) */

/* A fixed-bucket histogram of integer observations (ns, or a count). */
typedef struct jrpc_hist {
    const uint64_t *bounds;           /* upper bounds, ascending, in units */
    const char *const *le;            /* the same bounds as printed in "le" */
    uint32_t        nb;               /* finite buckets (<= JRPC_HIST_MAX) */
    double          scale;            /* printed value = units * scale (1e-9 for ns) */
    uint64_t        counts[JRPC_HIST_MAX + 1]; /* per bucket, not cumulative; [nb]: +Inf */
    uint64_t        sum;              /* of observations, in units */
    uint64_t        lo, hi;           /* the last observation's bucket: [lo, hi] (all zero: */
    uint32_t        bi;               /* bucket 0 holds 0, true of every histogram) is bi */
} jrpc_hist_t;

/* Counts n observations of v. The last observation's bucket first: the
 * calls of one batch are observed with one value each time (one body's
 * queue time, one RESPONSE's worker time), and latencies cluster. Else a
 * linear search from the smallest bound: a value in the first buckets
 * (most calls) costs a comparison or three. */
static inline void jrpc_hist_observe_n(jrpc_hist_t *h, uint64_t v, uint64_t n)
{
    uint32_t i = h->bi;
    if (v < h->lo || v > h->hi) {
        i = 0;
        while (i < h->nb && v > h->bounds[i])
            i++;
        h->bi = i;
        h->lo = i > 0 ? h->bounds[i - 1] + 1 : 0;
        h->hi = i < h->nb ? h->bounds[i] : UINT64_MAX;
    }
    h->counts[i] += n;
    h->sum += v * n;
}

static inline void jrpc_hist_observe(jrpc_hist_t *h, uint64_t v)
{
    jrpc_hist_observe_n(h, v, 1);
}

/* Initialises h with the contract's buckets: calls per body, or seconds
 * (observed in ns). */
void jrpc_hist_init_batch(jrpc_hist_t *h);
void jrpc_hist_init_seconds(jrpc_hist_t *h);

#define JRPC_METRICS_CODES 64  /* distinct error codes kept; the rest go to "other" */
/* The transports, in the order of enum jrpc_transport (jrpc_broker.h):
 * zmq, http, ws; the label values of the metrics and the access line. */
#define JRPC_METRICS_TRANSPORTS 3
extern const char *const jrpc_metrics_transport_names[JRPC_METRICS_TRANSPORTS];
/* The WebSocket close codes the broker sends, counted by code (the label
 * values of jrpc_ws_closes_total): 1000 1001 1002 1003 1007 1008 1009. */
#define JRPC_METRICS_WS_CODES 7

/* ---- per method (issue 33) ----
 *
 * One record per (service, method) the worker side has declared, found once
 * by name (jrpc_metrics_method_id, at a worker's READY) and bumped by index
 * on the hot path: no string, no allocation per call. Record 0 is "other":
 * methods past --metrics-max-methods, and calls of a method no worker had
 * declared. The records are never removed (counters only grow): a method
 * whose workers left keeps its series. */
enum jrpc_call_outcome {      /* how an answered call ended (the outcome label) */
    JRPC_CALL_OK,             /* the worker's result */
    JRPC_CALL_ERROR,          /* the worker's error object */
    JRPC_CALL_TIMEOUT,        /* -32003: its deadline passed */
    JRPC_CALL_LOST,           /* -32004: its worker was lost */
    JRPC_CALL_BUSY,           /* -32000: the queue for credit was full */
    JRPC_CALL_NOT_FOUND,      /* -32601: no worker serves the method */
    JRPC_CALL_DENIED,         /* -32002: the key's ACL refused it */
    JRPC_CALL_FAILED,         /* any other error the broker made (-32603, ...) */
    JRPC_CALL_NOUTCOMES
};
extern const char *const jrpc_call_outcome_names[JRPC_CALL_NOUTCOMES];

#define JRPC_METRICS_METHOD_CODES 8   /* error codes kept per method; the rest: "other" */
#define JRPC_METRICS_MAX_METHODS 256  /* --metrics-max-methods' default */
#define JRPC_METRICS_OTHER 0          /* the record of everything else */

typedef struct jrpc_metrics_method {
    const char *service;      /* "" until services exist; owned (one block with method) */
    const char *method;       /* NUL-terminated; "other" for record 0 */
    uint64_t    calls[JRPC_CALL_NOUTCOMES]; /* answered calls by outcome */
    int         codes[JRPC_METRICS_METHOD_CODES]; /* error codes seen, in order of first sight */
    uint64_t    code_n[JRPC_METRICS_METHOD_CODES]; /* answers per code */
    uint32_t    ncodes;
    uint64_t    code_other;   /* answers with a code past the table */
    jrpc_hist_t worker;       /* REQUEST sent -> answer received (ns) */
    jrpc_hist_t total;        /* body in -> the reply written (ns) */
} jrpc_metrics_method_t;

typedef struct jrpc_metrics {
    uint64_t    now;                        /* cached uv_hrtime(), see jrpc_metrics_tick */
    uint64_t    bodies[JRPC_METRICS_TRANSPORTS][JRPC_BODY_NOUTCOMES]; /* [transport][class] */
    uint64_t    bodies_in;                  /* bodies the broker took (not busy ones) */
    uint64_t    dispatched;                 /* calls handed to the worker side */
    uint64_t    timeouts;                   /* calls answered -32003 at their deadline */
    uint64_t    acl_denied;                 /* calls refused by a key's ACL */
    uint64_t    calls[JRPC_METRICS_TRANSPORTS][2]; /* [transport][0 result, 1 error] */
    int         codes[JRPC_METRICS_CODES];  /* error codes seen, in order of first sight */
    uint64_t    code_n[JRPC_METRICS_CODES]; /* answers per code */
    uint32_t    ncodes;
    uint64_t    code_other;                 /* answers with a code past the table */
    jrpc_hist_t batch;                      /* jrpc_batch_size */
    jrpc_hist_t queue;                      /* jrpc_call_queue_seconds */
    jrpc_hist_t worker;                     /* jrpc_call_worker_seconds */
    jrpc_hist_t total;                      /* jrpc_call_seconds */
    jrpc_hist_t redis_rtt;                  /* jrpc_redis_rtt_seconds */
    int64_t     http_connections;           /* open HTTP connections (WebSockets included) */
    int64_t     ws_connections;             /* of those, switched to WebSocket */
    uint64_t    queued_bytes;               /* bytes held for bodies answered before their
                                               calls ended (jrpc_broker: queued bytes) */
    uint64_t    queue_pushbacks;            /* connections stopped for their queued bytes */
    uint64_t    queue_refused;              /* bodies refused busy for queued bytes */
    uint64_t    ws_closes[JRPC_METRICS_WS_CODES]; /* close frames sent, by code */
    uint64_t    tls_handshakes;             /* TLS handshakes completed on the HTTP listener */
    uint64_t    tls_failed;                 /* TLS sessions that failed (handshake or record) */
    uint64_t    reloads[2];                 /* SIGHUP reloads (jrpc_reload): [0] ok, [1] failed */
    double      reload_last_success;        /* Unix seconds the files in force were read:
                                               start-up (set by main), then each good reload */
    jrpc_metrics_method_t *meth;            /* per-method records; [0] "other" (never NULL
                                               after jrpc_metrics_init) */
    uint32_t    nmeth, cap_meth;            /* records in use (>= 1), allocated */
    uint32_t    max_meth;                   /* --metrics-max-methods: records besides "other" */
    uint32_t   *meth_hash;                  /* open addressing: index + 1, 0 empty */
    uint32_t    meth_hash_size;             /* power of two, > 2 * max_meth */
} jrpc_metrics_t;

extern jrpc_metrics_t jrpc_metrics;

/* Sets the histograms' buckets and zeroes everything. Called once by
 * jrpc_broker_new (idempotent: later calls change nothing). */
void jrpc_metrics_init(void);

/* Refreshes the cached clock and returns it (ns). */
static inline uint64_t jrpc_metrics_tick(void)
{
    return jrpc_metrics.now = uv_hrtime();
}

/* Elapsed ns from t0 to the cached clock (0 when the clock is behind). */
static inline uint64_t jrpc_metrics_since(uint64_t t0)
{
    return jrpc_metrics.now > t0 ? jrpc_metrics.now - t0 : 0;
}

/* One error answer with this JSON-RPC code, and one call answered. */
void jrpc_metrics_error(int code);

/* The metrics' index of a jrpc_transport (anything unknown counts as zmq). */
static inline unsigned jrpc_metrics_transport(int transport)
{
    return transport > 0 && transport < JRPC_METRICS_TRANSPORTS ? (unsigned)transport : 0;
}

/* A whole body ended (transport: a jrpc_transport; outcome: a
 * jrpc_body_class). */
static inline void jrpc_metrics_body(int transport, int outcome)
{
    jrpc_metrics.bodies[jrpc_metrics_transport(transport)][outcome]++;
}

/* The broker sent a WebSocket close frame with this code (one of the seven
 * above; any other is not counted). */
void jrpc_metrics_ws_close(unsigned code);

/* A body ended without a per-call reply (refused whole, or busy): one error
 * answer with this code, total latency since t0. */
void jrpc_metrics_body_refused(int transport, int outcome, int code, uint64_t t0);

/* A front end refused a body before the broker saw it (malformed framing,
 * too large, ...): counted invalid, with its one error answer. */
void jrpc_metrics_front_refused(int transport, int code);

struct jrpc_batch;
/* The reply of a body is written: counts its answers by outcome and code
 * (each call's error and code fields), observes its total latency since t0
 * once per answer, and counts the body ok (or invalid when the parser
 * refused the whole body, req->body_code). With mstat (one tag per call,
 * above; NULL: none) each answer is counted in its method's record too:
 * outcome, code, total latency (by runs of one method: a batch of one
 * method costs a compare a call). */
void jrpc_metrics_reply(int transport, const struct jrpc_batch *req, const uint32_t *mstat,
                        uint64_t t0);

/* The record index of (service, method): made at first sight, while fewer
 * than jrpc_metrics.max_meth exist (and memory allows), else
 * JRPC_METRICS_OTHER. service may be NULL (""). Costs a hash and a compare:
 * call it once per method entry (a worker's READY), never per call. */
uint32_t jrpc_metrics_method_id(const char *service, const char *method, size_t len);

/* Sets --metrics-max-methods (0: the default), while no method has a
 * record yet (later calls change nothing). */
void jrpc_metrics_set_max_methods(uint32_t max);

/* Counts one error with this code in record r (the per-method code table). */
void jrpc_metrics_method_error(jrpc_metrics_method_t *r, int code);

/* One answered call of record id (a jrpc_metrics_method_id): its outcome
 * (enum jrpc_call_outcome), its error code when not ok, and its total time
 * (ns from the body's arrival). jrpc_metrics_reply counts a body's calls
 * this way, by runs of one method; for a call counted on its own. */
static inline void jrpc_metrics_call(uint32_t id, int outcome, int code, uint64_t total_ns)
{
    jrpc_metrics_method_t *r = &jrpc_metrics.meth[id];
    r->calls[outcome]++;
    if (outcome != JRPC_CALL_OK)
        jrpc_metrics_method_error(r, code);
    jrpc_hist_observe(&r->total, total_ns);
}

/* A call's per-method tag in jrpc_metrics_reply's mstat: its record id, or
 * JRPC_METRICS_NONE (not counted per method), with JRPC_METRICS_WORKER_ERROR
 * set when its error object is the worker's own (outcome "error", whatever
 * its code; any other error's outcome comes from its code). */
#define JRPC_METRICS_NONE         UINT32_MAX
#define JRPC_METRICS_WORKER_ERROR 0x80000000u

/* The outcome of a call the broker answered itself with this code. */
int jrpc_metrics_outcome_of(int code);

/* An estimate of quantile q (0..1) of h, in h's printed unit (seconds for
 * the seconds histograms): the bucket holding the q-th observation, linear
 * within it (as Prometheus' histogram_quantile); an observation past the
 * last bound counts as the last bound. 0 when h is empty. */
double jrpc_hist_quantile(const jrpc_hist_t *h, double q);

/* ---- the exposition writer ---- */

/* Appends "# HELP name help\n# TYPE name type\n". Returns 0 or -ENOMEM. */
int jrpc_expo_family(jrpc_buf_t *out, const char *name, const char *type, const char *help);

/* Appends one sample: name{k1="v1",...} value\n. labels holds nlabels
 * key/value pairs (keys are trusted names; values are escaped: \\ \" \n).
 * Returns 0 or -ENOMEM. */
int jrpc_expo_sample(jrpc_buf_t *out, const char *name, const char *const *labels,
                     unsigned nlabels, double value);

/* Appends a histogram family (HELP, TYPE, cumulative _bucket lines with
 * "+Inf", _sum, _count). Returns 0 or -ENOMEM. */
int jrpc_expo_hist(jrpc_buf_t *out, const char *name, const char *help, const jrpc_hist_t *h);

/* What the page shows that other modules count: read at scrape time. */
typedef void (*jrpc_metrics_credit_fn)(void *arg, const char *label, uint32_t credit_left);
typedef void (*jrpc_metrics_count_fn)(void *arg, const char *label, uint64_t n);
/* One worker's figures, read at scrape time (jrpc_workers fills them). */
typedef struct jrpc_metrics_worker {
    const char *label;        /* as jrpc_worker_credit's: distinct per worker */
    uint32_t    credit_left;
    uint32_t    inflight;     /* calls sent, not answered */
    uint64_t    answered;     /* answers it sent for calls still wanted */
    uint64_t    errors;       /* of them, error objects */
    uint64_t    timeouts;     /* calls that passed their deadline there */
    uint64_t    ejections;    /* times it was ejected */
    double      last_heard;   /* Unix time (s) of its last message */
} jrpc_metrics_worker_t;
typedef void (*jrpc_metrics_worker_fn)(void *arg, const jrpc_metrics_worker_t *wk);
typedef struct jrpc_metrics_read {
    uint32_t bodies_open, calls_inflight, calls_queued, workers_connected;
    int      redis_up;                  /* 0 or 1 */
    uint64_t redis_failures, replays, signature_failures, acl_denied;
    uint64_t late_answers, redispatched, calls_lost, frames_malformed, hedges, hedges_won;
    uint32_t methods;                   /* method names known to the worker side */
    uint64_t ready_refused, ejections;  /* READYs refused; workers ejected */
    /* Calls emit(emit_arg, label, credit) once per worker; NULL: none. */
    void   (*each_credit)(void *src, jrpc_metrics_credit_fn emit, void *emit_arg);
    void    *src;
    /* Calls emit(emit_arg, key id, calls) once per identity a rate limit
     * refused; NULL: none. */
    void   (*each_limited)(void *src, jrpc_metrics_count_fn emit, void *emit_arg);
    void    *limited_src;
    /* Calls emit(emit_arg, figures) once per worker; NULL: none. */
    void   (*each_worker)(void *src, jrpc_metrics_worker_fn emit, void *emit_arg);
} jrpc_metrics_read_t;

/* Appends the whole page: every family of the contract, in a fixed order,
 * from jrpc_metrics and rd. Returns 0 or -ENOMEM. */
int jrpc_metrics_write(jrpc_buf_t *out, const jrpc_metrics_read_t *rd);

#endif
