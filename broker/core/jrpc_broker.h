/* jrpc_broker — the transport-independent heart of the broker: a body in,
 * exactly one reply out.
 *
 * A front end (ZeroMQ, HTTP) hands over a request body; the broker parses it
 * (jrpc_batch), dispatches its calls (jrpc_workers), fills the answers as
 * they come back in any order, keyed by its own sequence numbers, answers
 * what passes its deadline with -32003, and calls the front end's reply
 * function exactly once with the whole reply — or, in streamed mode, each
 * answer as soon as it is in and then an end event (one gather path, two
 * ways out). */
#ifndef JRPC_BROKER_H
#define JRPC_BROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "jrpc_auth.h"
#include "jrpc_rate.h"
#include "jrpc_batch.h"
#include "jrpc_errors.h"
#include "jrpc_metrics.h"
#include "jrpc_timing.h"
#include "jrpc_replay.h"
#include "jrpc_workers.h"

typedef struct jrpc_broker jrpc_broker_t;
typedef struct bbatch jrpc_body_t;   /* one submitted body, until its reply */
typedef struct jrpc_broker_hold jrpc_broker_hold_t; /* what one connection has queued */

typedef struct jrpc_broker_opts {
    jrpc_limits_t       limits;      /* what a body may contain */
    uint32_t            timeout_ms;  /* deadline of every call, and the cap on a client's */
    uint32_t            max_open;    /* bodies waiting for answers before "busy" */
    jrpc_workers_opts_t workers;     /* the worker side */
    const jrpc_keys_t  *keys;        /* NULL: open (nothing signed); borrowed (replaced by
                                        jrpc_broker_set_keys) */
    uint32_t            skew_s;      /* timestamp window, ± seconds */
    jrpc_replay_opts_t  replay;      /* Redis, used when keys is set */
    bool                access_log;  /* one line per body at info (--access-log on) */
    jrpc_rate_limit_t   rate;        /* every identity's limit (--rate-limit, --rate-burst;
                                        a key's rate= replaces it); rate 0: none */
    uint32_t            rate_local_pct; /* the local budget while Redis is down, % */
    bool                redis;       /* connect to Redis (opts.replay) even without keys and
                                        rate limits: idempotency keys (--redis given) */
    uint32_t            idem_ttl_s;  /* how long a body's reply is kept under its
                                        idempotency key (--idempotency-ttl) */
    bool                early_dispatch; /* a signed body of idempotent methods runs while
                                        its nonce is claimed (--early-dispatch) */
    uint32_t            max_queued_bytes; /* bytes held for bodies answered before their
                                        calls ended, all clients; past it a body with a
                                        notification is refused busy (--max-queued-bytes);
                                        0: no bound */
    uint32_t            peer_max_queued_bytes; /* ... of one client address: the same
                                        (--peer-max-queued-bytes); 0: no bound */
    uint32_t            conn_max_queued_bytes; /* ... of one connection: its front stops
                                        reading it (jrpc_broker_hold_full,
                                        --conn-max-queued-bytes); 0: no bound */
    bool                server_timing; /* each reply's out.timing says where the body's time
                                        went (--server-timing); false: NULL, no clock read */
    uint32_t            metrics_max_methods; /* per-method metrics records besides
                                        "other" (--metrics-max-methods); 0: 256 */
} jrpc_broker_opts_t;

/* The front end a body came through (metrics and the access log). */
enum jrpc_transport {
    JRPC_TRANSPORT_ZMQ  = 0,
    JRPC_TRANSPORT_HTTP = 1,
    JRPC_TRANSPORT_WS   = 2,   /* a message on a WebSocket (HTTP port, after the upgrade) */
};

/* Streamed mode: receives one answer of a body as soon as it is in. pos is
 * the request's position in the body (0-based, notifications counted: the
 * index of its element in the batch array; 0 for a single request); json
 * is the finished response object, the same bytes
 * it has in the unstreamed array, valid during the call. Never called for
 * a notification. It must not call back into the broker. */
typedef void (*jrpc_answer_fn)(void *ctx, uint32_t pos, const char *json, size_t len);

/* MCP (docs/MCP.md): a message from a server for a client. json is one
 * JSON-RPC message (a notification or a request) as the server wrote it,
 * checked by nothing but the worker; json.p NULL means "the call began
 * session" (a body's) or "the session ended" (jrpc_broker_on_session_message).
 * Both spans are valid during the call, which must not call back into the
 * broker. */
typedef void (*jrpc_mcp_msg_fn)(void *ctx, jrpc_span_t session, jrpc_span_t json);

/* How a body arrived, besides its bytes. Spans are read during submit only. */
typedef struct jrpc_admit {
    uint32_t        timeout_ms;  /* the client's own deadline; 0: the broker's */
    jrpc_auth_req_t auth;        /* signing fields (all empty when unsigned) */
    int             transport;   /* a jrpc_transport */
    jrpc_span_t     traceparent; /* W3C traceparent as received (unchecked); empty: none */
    jrpc_span_t     peer;        /* the client's address as text, for the access log;
                                    empty: unknown */
    jrpc_answer_fn  answer;      /* non-NULL: streamed mode (jrpc_broker_submit) */
    jrpc_span_t     key_id;      /* non-empty: the sender was authenticated already, as
                                    the key with this id (jrpc_broker_authenticate: a
                                    WebSocket's upgrade); auth is not read, no nonce is
                                    claimed. The id is looked up in the key set in force
                                    now: a key a reload removed is refused unauthorized
                                    ("unknown key"), a changed ACL applies. Ignored when
                                    the broker has no keys */
    jrpc_span_t     idem_key;    /* the client's idempotency key (HTTP Idempotency-Key, the
                                    ZeroMQ header frame's idempotency_key); p NULL: none
                                    (an empty one with p set is refused -32600).
                                    1 to 255 bytes of printable ASCII, else the body is
                                    refused -32600. A front that sets it must not ask for
                                    streamed answers (a kept reply is one reply) */
    jrpc_broker_hold_t *hold;    /* the connection's account of what it has queued
                                    (jrpc_broker_hold_new); NULL: none (ZeroMQ) */
    jrpc_mcp_msg_fn mcp;         /* non-NULL: an MCP client's body (docs/MCP.md): its calls
                                    carry session and take the servers' messages for the
                                    client, given to mcp(ctx, ...) before the reply */
    jrpc_span_t     session;     /* with mcp: its Mcp-Session-Id (n == 0: none): its calls
                                    go to the worker the id names (or -32011) */
    const char     *path;        /* the access line's path= ("/rpc", "/mcp"); NULL: the
                                    transport's name ("zmq", "ws") */
    jrpc_span_t     service;     /* non-empty: every call of the body is of this service:
                                    its method M is called as "service.M" (ACLs, access
                                    line and routing see that name; MCP's /mcp/<service>).
                                    Not checked here: a service nobody serves finds no
                                    method (-32601) */
    bool            untimed;     /* the front shows this body no Server-Timing (a ZeroMQ
                                    header that did not ask): its stamps are not taken */
    uint32_t       *ncalls;      /* non-NULL: set to the body's number of calls (as
                                    jrpc_batch_count counts) once jrpc_broker_submit has
                                    parsed it, before any reply; untouched when it is
                                    refused unparsed. For a front that counts a body's
                                    calls in flight without a pass of its own */
} jrpc_admit_t;

/* Receives the reply of one body: JSON text, or len == 0 when the body held
 * only notifications (nothing to return). out says what it is, as data:
 * out.cls a jrpc_body_class (ok, invalid: a JSON-RPC answer; busy,
 * unauthorized, replayed, unavailable: the body refused whole with one error
 * object of code out.code, id null). The broker speaks no transport: a front
 * chooses its status from out (HTTP: one table in jrpc_front_http.c).
 * reply is valid during the call. */
typedef void (*jrpc_reply_fn)(void *ctx, jrpc_outcome_t out, const char *reply, size_t len);

/* ---- MCP sessions and messages (docs/MCP.md, PROTOCOL.md 2.6) ---- */

/* Sets who gets the messages of a session that belong to no call (its
 * GET stream), and the ends of sessions (json.p NULL); NULL: dropped. */
void jrpc_broker_on_session_message(jrpc_broker_t *b, jrpc_mcp_msg_fn fn, void *arg);

/* Sends a client's message to the worker that must have it: json (a
 * client's response to a server's request) or, with json.p NULL, the end of
 * session (the client's DELETE). The worker is the one the session's id
 * names, or for a response without a session the one its id names (the
 * bridge's "<instance>-..." ids). Returns 0, -EINVAL (nothing names a
 * worker), -ESRCH (that worker is not connected: the session is gone), or
 * a sending error. Never blocks. */
int jrpc_broker_mcp_send(jrpc_broker_t *b, jrpc_span_t session, jrpc_span_t json);

/* Whether a session exists, asked of the worker that issued it (PROTOCOL.md
 * 2.8): the answer to probe (a number jrpc_broker_mcp_probe gave) comes to
 * fn(ctx, probe, session, live), session borrowed for the call. fn may
 * call jrpc_broker_mcp_send (a DELETE passed on once its session is known
 * to exist), nothing else of the broker. NULL: answers dropped. */
typedef void (*jrpc_mcp_probe_fn)(void *ctx, uint64_t probe, jrpc_span_t session, bool live);
void jrpc_broker_on_session_probe(jrpc_broker_t *b, jrpc_mcp_probe_fn fn, void *ctx);

/* Asks the worker session's id names whether that session exists there
 * (a GET stream's or a DELETE's 404 for one it ended or never issued).
 * Returns 0 with *probe set (the answer comes to the fn above, or never: a
 * caller bounds the wait), -ESRCH (no such session: not a bridge's id, or
 * no connected worker has its instance), -ENOTSUP (that worker answers no
 * probes: a worker that predates them), or a sending error. Never blocks. */
int jrpc_broker_mcp_probe(jrpc_broker_t *b, jrpc_span_t session, uint64_t *probe);

/* Creates the broker and binds its worker socket. NULL on failure (logged). */
jrpc_broker_t *jrpc_broker_new(uv_loop_t *loop, const jrpc_broker_opts_t *opts);

/* Logs the counters (event=stats) and frees the broker; batches still open
 * are dropped without a reply, so call it after jrpc_broker_drain() has
 * reported an empty broker. */
void jrpc_broker_destroy(jrpc_broker_t **self_p);

/* Whether k is an idempotency key the broker takes: 1 to 255 bytes of
 * printable ASCII without spaces (docs/SIGNING.md "Idempotency keys"); an
 * empty one is not "no key". Pure: the HTTP front checks the header with it
 * (400), jrpc_broker_submit checks ad->idem_key with it. */
bool jrpc_broker_idem_key_ok(jrpc_span_t k);

/* Takes one request body (copied; the caller keeps its buffer). With keys,
 * admission runs: the body is parsed (limits), then the signature checks
 * (jrpc_auth_check: unauthorized on failure), then the nonce is claimed in
 * Redis (replayed, or unavailable when down), then each call is checked
 * against the key's ACL (-32002 in its slot) and dispatched.
 * admit->timeout_ms is capped by the broker's. fn(ctx, ...) is called
 * exactly once, possibly before this function returns (a body that needs no
 * worker, or one refused busy when max_open bodies are already waiting).
 * When handle is not NULL, *handle is set before fn can run (NULL for a
 * body refused busy) and stays valid until fn has been called: it is what
 * jrpc_broker_cancel() takes.
 * admit->traceparent is checked (jrpc_traceparent_valid()); a valid one is
 * sent to the workers with every call of the body, an invalid one is
 * ignored as if absent.
 * With opts.access_log, one line event=access is logged per body: when it
 * is answered, refused (also busy), or cancelled.
 * Streamed mode (admit->answer set): once the body is admitted, its calls
 * already answered by the parser (invalid members, reserved names, ACL
 * refusals, methods no worker serves) go to answer() first, then each
 * worker's answer or deadline error as it is in; then fn is called once,
 * the end event, always with out.cls ok and the text
 * {"answered":N,"timed_out":M}: N response objects sent, M of them -32003
 * because the deadline passed (the same numbers as data in out.answered
 * and out.timed_out, which an unstreamed reply carries too). A body
 * refused whole (invalid: the parser's -32700 or -32600 for the body
 * itself; busy, unauthorized, replayed, unavailable, ...) gets no answer()
 * and fn as in the unstreamed mode, its error object: any class but ok
 * means that, so a front can still choose a status and answer unstreamed.
 * A cancelled body gets no more answers.
 * Returns 0, or -ENOMEM: then fn is not called and the caller answers on
 * its own. */
int jrpc_broker_submit(jrpc_broker_t *b, const char *body, size_t len,
                       const jrpc_admit_t *admit, jrpc_reply_fn fn, void *ctx,
                       jrpc_body_t **handle);

/* The client of a submitted body is gone (an HTTP connection closed): its
 * calls are cancelled at the workers (late answers are dropped and counted)
 * and fn will never be called. Only valid before fn has been called. */
void jrpc_broker_cancel(jrpc_broker_t *b, jrpc_body_t *handle);

/* ---- what a connection has queued (docs/ARCHITECTURE.md, "Queued bytes") ----
 *
 * A body answered before its calls have ended (its notifications: 204,
 * 202, nothing on a WebSocket) is out of the front's per-connection bounds
 * (the pipeline, --ws-max-inflight) while the broker still holds it. From
 * its answer until it is freed (each call answered by a worker, withdrawn
 * at its deadline, or refused) its bytes (the body and its arena) count
 * against its connection's hold, its client address and a total. A front
 * asks jrpc_broker_hold_full() before reading more of a connection. */

/* A hold for one connection: wake(ctx) is called (from inside the broker,
 * like a reply function: it may submit) when the hold was found full and
 * its bytes have dropped to half the bound or less. NULL when out of
 * memory (the connection then has no per-connection bound). */
jrpc_broker_hold_t *jrpc_broker_hold_new(jrpc_broker_t *b, void (*wake)(void *ctx), void *ctx);

/* The connection is gone: wake is never called again; the hold is freed
 * once no body holds it. NULL-safe; sets *h_p = NULL. */
void jrpc_broker_hold_release(jrpc_broker_hold_t **h_p);

/* Whether the connection has --conn-max-queued-bytes or more held: then
 * its front reads no more of it until wake() (counted as a pushback in
 * jrpc_queue_pushbacks_total once per full). false for NULL. */
bool jrpc_broker_hold_full(jrpc_broker_hold_t *h);

/* Authenticating a connection instead of a body (a WebSocket upgrade:
 * docs/SIGNING.md, "WebSocket"). */
typedef struct jrpc_broker_auth jrpc_broker_auth_t;

/* Receives the verdict of jrpc_broker_authenticate: out.cls JRPC_BODY_OK
 * with key_id the id of the key that signed (empty for an open broker), or
 * unauthorized, replayed, unavailable with key_id empty and err the error
 * object (id null) a body refused for the same reason gets. err and key_id
 * are valid during the call only: a connection keeps a copy of the id, never
 * a pointer into the key set, which a reload replaces (jrpc_broker_set_keys). */
typedef void (*jrpc_auth_fn)(void *ctx, jrpc_outcome_t out, const char *err, size_t len,
                             jrpc_span_t key_id);

/* Runs admission's first half for a connection: ad->auth is checked
 * (jrpc_auth_check) over the signed bytes body[0, len) — empty for a
 * WebSocket upgrade — and its nonce claimed in Redis, exactly as for a
 * body, then fn(ctx, ...) is called once, possibly before this returns.
 * While the claim is out the broker counts it as an open body (a drain
 * waits for it). A refusal is counted and logged as a body of
 * ad->transport refused (so jrpc_signature_failures_total and the access
 * line see it); a success is neither: the messages that follow are the
 * bodies. Without keys, fn says ok with key NULL at once. *handle (unless
 * NULL) is set before fn can run and valid until it has: what
 * jrpc_broker_authenticate_cancel takes. Returns 0, or -ENOMEM (fn not
 * called). */
int jrpc_broker_authenticate(jrpc_broker_t *b, const char *body, size_t len,
                             const jrpc_admit_t *ad, jrpc_auth_fn fn, void *ctx,
                             jrpc_broker_auth_t **handle);

/* The connection is gone before fn was called: fn never will be. */
void jrpc_broker_authenticate_cancel(jrpc_broker_t *b, jrpc_broker_auth_t *handle);

/* Appends the OpenRPC document (docs/ARCHITECTURE.md "Discovery") of the
 * methods served now that the key key_id may call: what rpc.discover
 * answers, for GET /openrpc.json once jrpc_broker_authenticate() said ok
 * (key_id as it gave it; n == 0: an open broker, every method). Returns 0,
 * -ENOENT (no such key in the set in force any more) or -ENOMEM. Never
 * blocks. */
int jrpc_broker_discover(jrpc_broker_t *b, jrpc_span_t key_id, jrpc_buf_t *out);

/* Puts another key set in force (SIGHUP: jrpc-broker's reload) and returns
 * the one it replaces, which the caller may free at once: the broker and its
 * fronts keep no pointer into a key set from one loop turn to the next.
 * Bodies and connections keep the id of their key and look it up when they
 * need it, so from now on a removed key is refused for new bodies (also on a
 * WebSocket authenticated with it), a new key is accepted, a changed ACL
 * applies to calls dispatched from now on; calls already dispatched finish.
 * A body whose nonce is being claimed in Redis is looked up again when the
 * claim returns (its key removed meanwhile: refused unauthorized). keys must
 * be non-NULL exactly when the broker was created with keys (a reload does
 * not switch signing on or off). Never blocks. */
const jrpc_keys_t *jrpc_broker_set_keys(jrpc_broker_t *b, const jrpc_keys_t *keys);

/* Whether the key file in force has a key with this id (a transport that
 * authenticated its peer itself: mutual TLS's certificate name, then passed
 * as jrpc_admit_t.key_id); false when the broker has no keys. Ask for each
 * body: the key file may have been reloaded since. */
bool jrpc_broker_has_key(const jrpc_broker_t *b, jrpc_span_t id);

/* The fingerprint of the credential (secret, or bearer token's hash) of the
 * key with this id in the key file in force (jrpc_key_fingerprint): true
 * and out written, or false when there is no such key (or no keys). A
 * WebSocket keeps its upgrade's and compares at each reload. */
bool jrpc_broker_key_fingerprint(const jrpc_broker_t *b, jrpc_span_t id,
                                 uint8_t out[JRPC_KEY_FP_LEN]);

/* Calls on_empty (once) as soon as no body is waiting for answers. */
void jrpc_broker_drain(jrpc_broker_t *b, void (*on_empty)(void *arg), void *arg);

/* The broker's counters, read from the one counter set (jrpc_metrics):
 * bodies submitted, calls dispatched, ... The event=stats line at exit
 * prints them. */
typedef struct jrpc_broker_stats {
    uint64_t bodies;        /* bodies submitted (busy ones not included) */
    uint64_t calls;         /* calls dispatched to workers */
    uint64_t timeouts;      /* calls answered -32003 at their deadline */
    uint64_t cancelled;     /* bodies whose client left before the reply */
    uint64_t busy;          /* bodies refused busy (max_open) */
    uint64_t unauthorized;  /* bodies refused unauthorized */
    uint64_t replays;       /* bodies refused as replays */
    uint64_t replay_down;   /* bodies refused unavailable: Redis down or forgetful */
    uint64_t acl_denied;    /* calls refused by a key's ACL */
    uint32_t open;          /* bodies waiting for answers */
} jrpc_broker_stats_t;

/* Fills st (and wst unless NULL: the worker side's). Never blocks. */
void jrpc_broker_stats(const jrpc_broker_t *b, jrpc_broker_stats_t *st,
                       jrpc_workers_stats_t *wst);

/* Fills rd with what the metrics page shows besides jrpc_metrics: gauges
 * and counters of the broker's parts, and the per-worker credit walk (rd
 * borrows the broker: use it before the next loop turn). For the admin
 * listener, which then calls jrpc_metrics_write(). */
void jrpc_broker_metrics(jrpc_broker_t *b, jrpc_metrics_read_t *rd);

/* The status page's producers (issue 33: the admin listener's
 * /status/workers and /status/methods). Each appends one JSON object to
 * out, built now from the counters the hot path keeps (nothing is kept for
 * it per call); strings a worker or client chose are JSON-escaped ('<', '>'
 * and '&' too: the page may put them in HTML). Returns 0 or -ENOMEM (out
 * then holds a partial object: discard it). Never blocks.
 *
 * jrpc_broker_status_workers, one object per connected worker:
 *   {"workers":[{"id":"<routing id, hex>","name":"...","service":"",
 *     "host":"<IP it connected from, native tcp:// only; else empty>",
 *     "credit":N,"in_flight":N,"answered":N,"errors":N,"timeouts":N,
 *     "ejections":N,"last_heard_ms":N,"ejected":false,"draining":false,
 *     "methods":N}]}
 * answered: answers to calls still wanted; errors: of them, error objects;
 * timeouts: calls that passed their deadline there; last_heard_ms: since
 * its last message; methods: names it declared.
 *
 * jrpc_broker_status_methods, one object per jrpc_metrics record ("other"
 * first: methods past --metrics-max-methods and calls of methods no worker
 * had declared, "other":true):
 *   {"methods":[{"service":"","method":"...","calls":N,"ok":N,"errors":N,
 *     "timeouts":N,"p50_ms":X,"p99_ms":X,"workers":N,"other":false}],
 *    "max_methods":256}
 * calls: answered, by any outcome; errors: every call not ok (timeouts
 * included); p50/p99: of the total time (body in -> reply), estimated
 * from jrpc_method_call_seconds' fixed buckets as Prometheus'
 * histogram_quantile does (the bucket holding the rank, linear inside it;
 * past the last bound, 30 s), so at best to a bucket's width; workers:
 * connected workers serving it. */
int jrpc_broker_status_workers(jrpc_broker_t *b, jrpc_buf_t *out);
int jrpc_broker_status_methods(jrpc_broker_t *b, jrpc_buf_t *out);

/* Why the broker would not take work well (jrpc_broker_ready, /readyz). */
enum {
    JRPC_BROKER_EDRAINING = -7001,  /* jrpc_broker_drain was called */
    JRPC_BROKER_ENOMETHOD = -7002,  /* no routed worker for a required method */
    JRPC_BROKER_ENOWORKER = -7003,  /* no worker at all (no methods required) */
    JRPC_BROKER_EREDIS    = -7004,  /* signing is on and the nonce store is down */
};

/* Readiness: not draining; a routed (not draining) worker for each method
 * of methods ("m1,m2"), or any worker when methods is NULL or empty; the
 * nonce store up when signing is on. Returns 0 when ready, or the first
 * JRPC_BROKER_E* in that order; for JRPC_BROKER_ENOMETHOD, *missing (unless
 * NULL) is that method's span of methods. Never blocks. */
int jrpc_broker_ready(jrpc_broker_t *b, const char *methods, jrpc_span_t *missing);

/* The services whose connected workers serve method (an MCP bridge
 * declares "initialize"): their names, sorted, as a JSON array of strings
 * into out (replacing its contents; a worker of no service is ""), and
 * how many there are, or -ENOMEM. Never blocks; linear in the method
 * table. */
int jrpc_broker_services_serving(jrpc_broker_t *b, const char *method, jrpc_buf_t *out);

/* A short English description of a JRPC_BROKER_E* code ("draining", "no
 * worker connected", ...) or -ENOMEM. Never NULL: "unknown error" for
 * anything else. */
const char *jrpc_broker_strerror(int rc);

/* The replay guard's state for the status page (broker/jrpc_status_page). */
typedef struct jrpc_broker_guard {
    bool     on;            /* Redis is in use (--keys, or --redis given) */
    bool     up;            /* connected and answering */
    bool     draining;      /* jrpc_broker_drain was called */
    int64_t  lost_at;       /* Unix s of the last loss of Redis' memory known; 0: never */
    int64_t  refuse_to;     /* bodies signed at or before this Unix s are refused
                               (the memory-loss fence); INT64_MIN: no fence */
    uint64_t epoch_changes, reconnects, failures, masters_found;
    uint64_t rtt_us_sum, rtt_count;
} jrpc_broker_guard_t;

/* Fills g. Never blocks. */
void jrpc_broker_guard(const jrpc_broker_t *b, jrpc_broker_guard_t *g);

#endif
