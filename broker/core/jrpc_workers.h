/* jrpc_workers — the worker side of the broker: the ROUTER socket workers
 * connect to, who serves which method, credit, the wait queue, and the table
 * of calls in flight keyed by the broker's own sequence numbers.
 *
 * The module knows nothing of batches or clients: a call is dispatched with
 * an opaque owner pointer and an index, and comes back exactly once through
 * on_done — with the worker's answer, or with an error the module decided
 * (worker lost, method gone) — unless the owner cancelled it first.
 *
 * A worker lost mid-call (heartbeat expiry, connection gone, send refused):
 * each call it held of a method it declared idempotent at READY, and each
 * call whose REQUEST never left the socket, is sent again to another worker
 * serving the method (queued when none has credit), with a new sequence
 * number, at most max_redispatch times per call; every other call it held
 * ends JRPC_DONE_FAILED with -32004. */
#ifndef JRPC_WORKERS_H
#define JRPC_WORKERS_H

#include <stdbool.h>
#include <stdint.h>
#include <msgpack.h>
#include <uv.h>
#include "jrpc_buf.h"

typedef struct jrpc_workers jrpc_workers_t;

typedef struct jrpc_workers_opts {
    const char *endpoint;      /* ROUTER bind address for workers */
    void       *zmq_ctx;       /* ZeroMQ context (borrowed) */
    bool        libzmq;        /* --workers-engine libzmq: a libzmq ROUTER even where
                                  io/jrpc_zmtp could serve (tcp://, ipc://, no CURVE) */
    uint32_t    max_queue;     /* calls waiting for credit, all methods together */
    uint32_t    heartbeat_ms;  /* heartbeat interval, both ways (10..3600000) */
    uint32_t    liveness;      /* missed heartbeats before a worker is dead (1..1000);
                                  both travel in every HEARTBEAT, and workers
                                  adopt them (PROTOCOL.md 5) */
    uint32_t    max_redispatch; /* times one call may be sent again after losing
                                  its worker (idempotent methods); 0: never */
    const struct jrpc_curve_keypair *curve; /* NULL: plain TCP; else the broker's
                                  keypair: CURVE server, ZAP domain "workers"
                                  (bind the ZAP handler first; read only
                                  during jrpc_workers_new) */
    /* The worker port is a trust boundary (docs/RELIABILITY.md): what one
     * worker may claim. 0 in any of these: the default in brackets. */
    uint32_t    max_worker_methods; /* names in one READY; more: refused [1024] */
    uint32_t    max_methods;   /* distinct method names known at once (all
                                  workers, and calls waiting in the start-up
                                  grace); a READY that would pass it: refused [16384] */
    uint32_t    max_method_len; /* longer READY names are ignored (no client
                                  can call them) [65535] */
    uint32_t    max_worker_credit; /* credit honoured per worker, whatever its
                                  READY says [1024] */
    uint32_t    max_worker_bytes; /* REQUEST bytes outstanding at one worker
                                  (sent, not answered) before it gets no more
                                  calls; a call is always sent to a worker
                                  holding none [16 MiB] */
    uint32_t    eject_after;   /* calls timed out in a row at one worker before
                                  it is ejected; 0: never */
    uint32_t    eject_ms;      /* how long an ejected worker gets no new calls
                                  (unless every worker of the method is
                                  ejected) [30000] */
    /* Hedged calls (docs/ARCHITECTURE.md "Hedged calls"): a call of a
     * method its worker declared idempotent that has waited longer than the
     * method's observed p95 answer time, bounded by [hedge_min_ms,
     * hedge_max_ms], gets a second copy at another worker that declared it
     * idempotent too; the first answer wins, the other is dropped when it
     * comes (its credit returns then). At most hedge_budget_pct copies per
     * 100 calls sent, over time. 0: no hedging. */
    uint32_t    hedge_budget_pct;
    uint32_t    hedge_min_ms;  /* [10] */
    uint32_t    hedge_max_ms;  /* [1000] */
} jrpc_workers_opts_t;

#define JRPC_WORKERS_MAX_WORKER_METHODS 1024
#define JRPC_WORKERS_MAX_METHODS        16384
#define JRPC_WORKERS_MAX_WORKER_CREDIT  1024
#define JRPC_WORKERS_MAX_WORKER_BYTES   (16u << 20)
#define JRPC_WORKERS_EJECT_MS           30000
#define JRPC_WORKERS_SERVICE_MAX        63   /* bytes of a READY "service" */

/* Why a call is cancelled (jrpc_workers_cancel). */
enum jrpc_cancel_why {
    JRPC_CANCEL_GONE,     /* its client left, or the broker gave up otherwise */
    JRPC_CANCEL_TIMEOUT,  /* its deadline passed: counts against the worker
                             holding it (ejection) */
};

/* How a call ended. */
enum jrpc_done_kind {
    JRPC_DONE_RESULT,  /* value is the worker's result */
    JRPC_DONE_ERROR,   /* value is the worker's error object (unchecked map) */
    JRPC_DONE_FAILED,  /* value is empty; code says why (-32601, -32004, ...) */
};

/* Called once per dispatched call that was not cancelled. value is the
 * msgpack bytes of the worker's result or error, one well-formed value read
 * in place from its RESPONSE (jrpc_batch_answer_result_raw and
 * jrpc_batch_answer_error_raw take it as it is); it borrows from the
 * worker's frame: use it before returning. */
typedef void (*jrpc_done_fn)(void *owner, uint32_t index, int kind, int code,
                             jrpc_span_t value, void *arg);

/* Inside a jrpc_done_fn called with JRPC_DONE_RESULT or JRPC_DONE_ERROR:
 * how long that call waited in its method's queue (dispatched to sent) and
 * at its worker (sent to its answer read), in ns of the metrics clock (the
 * times the histograms jrpc_call_queue_seconds and jrpc_call_worker_seconds
 * take: no clock is read for them). Meaningless at any other time. */
void jrpc_workers_done_times(const jrpc_workers_t *w, uint64_t *queue_ns, uint64_t *worker_ns);

/* Creates the module and binds its socket: io/jrpc_zmtp on the loop thread
 * for tcp:// and ipc:// paths without CURVE unless opts.libzmq, else a libzmq
 * ROUTER (event=listening says which, and why). NULL on failure (logged). */
jrpc_workers_t *jrpc_workers_new(uv_loop_t *loop, const jrpc_workers_opts_t *opts,
                                 jrpc_done_fn done, void *arg);
/* Closes the socket and the loop handles; frees from the close callbacks.
 * Calls still known are dropped without on_done. */
void jrpc_workers_destroy(jrpc_workers_t **self_p);

/* Routes one call (method, params) to a worker that serves it, or
 * queues it when all such workers are out of credit. The REQUEST leaves at
 * the next jrpc_workers_flush(), together with the other calls for the same
 * worker. For heartbeat_ms × liveness after start (the time workers take to
 * find a restarted broker), a call for a method no worker has declared yet
 * is queued rather than refused; at the end of that grace it gets -32601.
 * On success *handle identifies the call for jrpc_workers_cancel().
 * deadline (loop ms) travels to the worker as the time left when the call is
 * sent; traceparent (valid by jrpc_traceparent_valid(), or n == 0: none) in
 * the REQUEST item. submitted_ns (uv_hrtime() clock) is when the call's
 * body came in: its queue time (jrpc_call_queue_seconds) runs from there.
 * params is the client's JSON text (n == 0: none), checked so that it
 * transcodes; params_mp the same as msgpack when the caller made it (n == 0:
 * not made). Each time the call is sent (re-dispatch and hedging may send
 * it to several workers) it is encoded for that worker: the text as it is
 * to one that declared the method "json", else params_mp, or the text
 * transcoded into the REQUEST when there is none.
 * method, params, params_mp and traceparent are borrowed until on_done or
 * cancel.
 * Returns 0, -ENOENT when no connected
 * worker serves the method, -EBUSY when the queue is full, or -ENOMEM. */
int jrpc_workers_dispatch(jrpc_workers_t *w, jrpc_span_t method, jrpc_span_t params,
                          jrpc_span_t params_mp, jrpc_span_t traceparent, uint64_t deadline, uint64_t submitted_ns,
                          void *owner, uint32_t index, uint32_t *handle);

/* ---- MCP sessions and messages (PROTOCOL.md 2.6, docs/MCP.md) ---- */

/* A MESSAGE from a worker: for the client of the call (owner, index) when
 * owner is not NULL (body p == NULL: "this call began session"), else for
 * session's stream (body p == NULL: the session ended at the worker; a
 * session of JRPC_MCP_INSTANCE_LEN bytes, an instance alone: the last
 * worker of that instance left, every session of it ended).
 * Spans borrow from the frame: use them before returning. */
typedef void (*jrpc_msg_fn)(void *owner, uint32_t index, jrpc_span_t session, jrpc_span_t body,
                            void *arg);

/* Sets the receiver of MESSAGE frames (NULL: they are dropped, counted). */
void jrpc_workers_on_message(jrpc_workers_t *w, jrpc_msg_fn fn, void *arg);

/* What a call of an MCP client carries besides the call. */
typedef struct jrpc_workers_mcp {
    jrpc_span_t session;    /* its Mcp-Session-Id (n == 0: none); borrowed like method */
    bool        messages;   /* the caller takes MESSAGE frames for it (jrpc_msg_fn) */
} jrpc_workers_mcp_t;

/* jrpc_workers_dispatch() for an MCP client's call: the call's item tells
 * the worker mcp (PROTOCOL.md 2.2, 6th element). A call of a session goes
 * only to the worker its id names (jrpc_mcp_sid.h: READY's "instance"),
 * even past that worker's credit (up to SESSION_EXTRA more calls: no other
 * worker can take them, and the worker queues them for the child); it is
 * never hedged. Returns as jrpc_workers_dispatch(), and -ESRCH when no
 * connected worker serving the method has the session's instance (the
 * session is gone: 404), -EBUSY past SESSION_EXTRA. */
int jrpc_workers_dispatch_mcp(jrpc_workers_t *w, jrpc_span_t method, jrpc_span_t params,
                              jrpc_span_t traceparent, uint64_t deadline, uint64_t submitted_ns,
                              const jrpc_workers_mcp_t *mcp, void *owner, uint32_t index,
                              uint32_t *handle);

/* Sends a MESSAGE [0, session, body] to the connected worker whose READY
 * "instance" is instance: a client's response (body JSON text), or the end
 * of a session (body.p NULL, session non-empty). Returns 0, -ESRCH (no such
 * worker), or a sending error. */
int jrpc_workers_message(jrpc_workers_t *w, uint64_t instance, jrpc_span_t session,
                         jrpc_span_t body);

/* A worker's answer to a PROBE (PROTOCOL.md 2.8): whether session, one of
 * the answering worker's own (its instance), exists there. session borrows
 * from the frame. */
typedef void (*jrpc_probe_fn)(uint64_t probe, jrpc_span_t session, bool live, void *arg);

/* Sets the receiver of PROBE answers (NULL: they are dropped, counted). */
void jrpc_workers_on_probe(jrpc_workers_t *w, jrpc_probe_fn fn, void *arg);

/* Sends the question PROBE [probe, session, nil] to the connected worker
 * whose READY "instance" is instance. Returns 0, -ESRCH (no such worker),
 * -ENOTSUP (it answers no PROBE: its READY had no "probes"), or a sending
 * error. */
int jrpc_workers_probe(jrpc_workers_t *w, uint64_t instance, uint64_t probe, jrpc_span_t session);

/* Forgets a dispatched call: on_done will not be called for it. A queued
 * call leaves the queue; an answer that arrives later is dropped (counted)
 * and still returns the worker's credit. why is a jrpc_cancel_why: with
 * JRPC_CANCEL_TIMEOUT a call at a worker counts as one timeout there, and
 * opts.eject_after of them in a row (no answer in time between them) eject
 * the worker for opts.eject_ms. */
void jrpc_workers_cancel(jrpc_workers_t *w, uint32_t handle, int why);

/* Sends the REQUEST messages built since the last flush. */
void jrpc_workers_flush(jrpc_workers_t *w);

typedef struct jrpc_workers_stats {
    uint32_t workers;      /* connected */
    uint32_t inflight;     /* calls at workers */
    uint32_t queued;       /* calls waiting for credit */
    uint64_t late;         /* answers that came after their call was cancelled, or
                              from a worker already removed */
    uint64_t malformed;    /* frames dropped as malformed */
    uint64_t redispatched; /* calls sent again after their worker was lost */
    uint64_t lost;         /* calls answered -32004 because their worker was lost */
    uint32_t methods;      /* method names known (entries in the method table) */
    uint64_t ready_refused; /* READYs refused (too many methods, a bad service) */
    uint64_t methods_refused; /* bare names refused at READY: another service owns
                              them (the worker still serves service.method) */
    uint64_t ejections;    /* workers ejected after eject_after timeouts in a row */
    uint64_t hedges;       /* second copies sent */
    uint64_t hedges_won;   /* of them, answered before the first copy */
} jrpc_workers_stats_t;

void jrpc_workers_stats(const jrpc_workers_t *w, jrpc_workers_stats_t *st);

/* True when at least one connected worker (not draining) serves the method
 * (readiness). */
bool jrpc_workers_serves(jrpc_workers_t *w, const char *method, size_t len);

/* Whether a call of the method would go to a worker that wants msgpack
 * params: some connected worker serving it did not declare it "json" at
 * READY, or none serves it yet. The batch parser's hint
 * (jrpc_batch_hint_fn): it then transcodes the params while it checks them.
 * Never blocks; one lookup. */
bool jrpc_workers_wants_msgpack(jrpc_workers_t *w, jrpc_span_t method);

/* True when at least one connected worker serves the method and every
 * connected worker serving it declared it idempotent at READY (what the
 * broker needs before it runs a signed body's calls while the body's nonce
 * is still being claimed: docs/SIGNING.md). A method no worker serves yet
 * is not idempotent. Never blocks; a lookup and a walk of its workers. */
bool jrpc_workers_idempotent(jrpc_workers_t *w, jrpc_span_t method);

/* Calls fn once per connected worker with its label — the "name" it gave
 * at READY when that is 1 to 64 bytes of [A-Za-z0-9._:@/-], else its
 * routing id in hex; distinct per worker — and the
 * credit it has left. label is valid during the call. */
typedef void (*jrpc_credit_fn)(void *arg, const char *label, uint32_t credit_left);
void jrpc_workers_each_credit(jrpc_workers_t *w, jrpc_credit_fn fn, void *arg);

/* True when s[0, n) is a service name a READY may declare:
 * [a-z0-9][a-z0-9_-]{0,62}. Pure. */
bool jrpc_workers_service_ok(const char *s, size_t n);

/* The canonical name of what a call of `method` reaches now (docs/
 * ARCHITECTURE.md "Services"): "service.method" for a service's method,
 * called bare or qualified; the name itself otherwise (no-service methods,
 * names nobody serves). *service (may be NULL) is set to the service, n == 0
 * when none. What key ACLs match. Borrowed from the method table or from
 * method: valid until control returns to the loop. One lookup, none at all
 * while no worker declared a service. */
jrpc_span_t jrpc_workers_canonical(jrpc_workers_t *w, jrpc_span_t method, jrpc_span_t *service);

/* One method served now, as jrpc_workers_each_method() gives it; every
 * span borrowed for the call. */
typedef struct jrpc_method_info {
    jrpc_span_t service;    /* n == 0: no service */
    jrpc_span_t method;     /* the name its workers declared (the bare name) */
    jrpc_span_t canonical;  /* "service.method", or method */
    bool        owns_bare;  /* a service's method that also answers to its bare name
                               (no-service methods: always true) */
    bool        idempotent; /* every worker serving it declared it idempotent */
    bool        json;       /* some worker serving it takes its params as JSON text */
    uint32_t    workers;    /* connected workers serving it */
    jrpc_span_t params;     /* READY "schemas": params (a JSON array), n == 0: none */
    jrpc_span_t result;     /* READY "schemas": result (a JSON object), n == 0: none */
    jrpc_span_t decl;       /* READY "schemas": the method's whole declaration (its other
                               members: summary, x-*, ...), n == 0: none */
} jrpc_method_info_t;

typedef void (*jrpc_method_fn)(void *arg, const jrpc_method_info_t *m);

/* Calls fn once per method served now by at least one connected worker, in
 * no particular order; schemas from the first of its workers that declared
 * one for it. Never blocks; linear in the table and the schemas' size. */
void jrpc_workers_each_method(jrpc_workers_t *w, jrpc_method_fn fn, void *arg);
/* Calls fn once per connected worker with its figures (jrpc_metrics.h:
 * the same label as above, credit, calls in flight, answers, errors,
 * timeouts, ejections, when it was last heard). Valid during the call. */
struct jrpc_metrics_worker;
void jrpc_workers_each_worker(jrpc_workers_t *w,
                              void (*fn)(void *arg, const struct jrpc_metrics_worker *wk),
                              void *arg);

/* The jrpc_metrics record (jrpc_metrics_method_id) of the method the last
 * jrpc_workers_dispatch() looked up, whatever it returned: JRPC_METRICS_OTHER
 * when no worker had declared it or its name came past
 * --metrics-max-methods. One load: the broker asks after each dispatch. */
uint32_t jrpc_workers_last_stat(const jrpc_workers_t *w);

/* The same for a method by name (one lookup: for the calls that never
 * reach dispatch, such as those a key's ACL refuses). */
uint32_t jrpc_workers_method_stat(jrpc_workers_t *w, jrpc_span_t method);

/* Appends the workers as JSON, {"workers":[{...}, ...]} (the status page's
 * /status/workers: jrpc_broker_status_workers says the fields), names
 * JSON-escaped. Built only when asked. Returns 0 or -ENOMEM. */
int jrpc_workers_status(jrpc_workers_t *w, jrpc_buf_t *out);

/* Appends the methods with a jrpc_metrics record as JSON,
 * {"methods":[{...}, ...],"max_methods":N} (the status page's
 * /status/methods: jrpc_broker_status_methods says the fields). Returns 0
 * or -ENOMEM. */
int jrpc_workers_status_methods(jrpc_workers_t *w, jrpc_buf_t *out);

#endif
