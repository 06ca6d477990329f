/* libjrpc-worker — serve JSON-RPC methods to one or more jrpc brokers.
 *
 *   jrpc_worker_t *w = jrpc_worker_new(NULL);              // defaults
 *   jrpc_worker_handle(w, "add", on_add, NULL);
 *   jrpc_worker_connect(w, "tcp://127.0.0.1:5556");
 *   jrpc_worker_run(w);                                   // until jrpc_worker_stop()
 *   jrpc_worker_destroy(&w);
 *
 *   static void on_add(jrpc_wcall_t *call, const msgpack_object *params, void *arg)
 *   {
 *       ...check params...
 *       if (bad)
 *           return (void)jrpc_wcall_error(call, JRPC_INVALID_PARAMS, "Invalid params");
 *       msgpack_pack_int64(jrpc_wcall_result(call), a + b);
 *       jrpc_wcall_finish(call);
 *   }
 *
 * The worker keeps one ZeroMQ DEALER per broker, announces its methods and
 * credit (READY), answers every call it is given, heartbeats at each
 * broker's interval, answers REJECT for a REQUEST it cannot decode, and
 * survives broker restarts by itself (see proto/PROTOCOL.md). Everything runs on one
 * libuv loop, in one thread: no function here may be called from another
 * thread. Nothing here blocks, except jrpc_worker_run() and the final
 * flush in jrpc_worker_destroy() (bounded by the linger time, and by the
 * system resolver's timeout when a dns+tcp:// name is being resolved). */
#ifndef JRPC_WORKER_H
#define JRPC_WORKER_H

#include <stdbool.h>
#include <stdint.h>
#include <msgpack.h>
#include <uv.h>
#include "jrpc_curve.h"

typedef struct jrpc_worker jrpc_worker_t;
typedef struct jrpc_wcall  jrpc_wcall_t;   /* one call the worker is serving */

typedef struct jrpc_worker_opts {
    uint32_t   credit;        /* calls held at once, per broker (>= 1; default 64) */
    uint32_t   heartbeat_ms;  /* heartbeat interval (>= 10; default 1000) */
    uint32_t   liveness;      /* silent intervals before a broker is dead (>= 1; default 3) */
                              /* Both only until a broker sends its own in a HEARTBEAT
                                 (it answers READY with one): its settings then rule
                                 that session (PROTOCOL.md 5), per broker. */
    uint32_t   linger_ms;     /* how long destroy may wait to deliver DISCONNECT (default 1000) */
    uv_loop_t *loop;          /* the loop to run on; NULL: the worker owns a new one */
    /* CURVE (both or neither; copied by jrpc_worker_new, wiped at destroy):
     * every DEALER, including the fresh one after a reset, is a CURVE client
     * with this keypair, and the broker admits it only if its public key is
     * in the broker's --worker-keys. A worker the broker refuses gets no
     * error from libzmq: it just never gets a call. */
    const jrpc_curve_keypair_t *curve_keypair;  /* the worker's own keypair */
    const char *broker_public;                  /* the broker's public key, Z85 */
    /* Sent in READY for the broker's logs and its jrpc_worker_credit{worker=}
     * label (1..63 printable ASCII bytes, copied); NULL: none (the broker
     * names the worker by its routing id). */
    const char *name;
    /* dns+tcp://NAME:PORT endpoints: how often NAME is resolved again
     * (>= 100 ms; 0 or default: 5000). A broker lost to silence or
     * DISCONNECT also asks for a resolution at once. */
    uint32_t    resolve_ms;
    /* Who speaks ZMTP to the brokers: NULL or "native", our own engine on
     * the worker's loop (io/jrpc_zdealer: tcp:// and ipc://, no libzmq
     * thread), or "libzmq"; CURVE always uses libzmq. Anything else:
     * jrpc_worker_new fails with EINVAL. Borrowed for jrpc_worker_new. */
    const char *zmq_engine;
    /* READY "service" (docs/ARCHITECTURE.md "Services"): the service this
     * worker's methods belong to, called "service.method" (and by the bare
     * name when no other service took it first). The broker refuses a READY
     * whose service is not [a-z0-9][a-z0-9_-]{0,62} (the worker is told
     * DISCONNECT, as for any refused READY); here only 1..63 printable ASCII
     * bytes are checked (else EINVAL). Copied; NULL: none (as before). */
    const char *service;
    /* READY "schemas" (PROTOCOL.md 2.1, for rpc.discover): JSON text, an
     * object {"method": {"params": [content descriptors], "result": content
     * descriptor}}, at most JRPC_WIRE_SCHEMAS_MAX bytes (else EINVAL; not
     * parsed here). Copied; NULL: none. */
    const char *schemas;
} jrpc_worker_opts_t;

/* Fills o with the defaults. */
void jrpc_worker_opts_init(jrpc_worker_opts_t *o);

/* Serves one call. params is the call's params: a msgpack array, map, or nil
 * when the request had none. params is borrowed and valid only until the
 * handler returns: copy (or pack into the result) what you need later.
 *
 * The handler must complete the call exactly once, now or later, with
 * jrpc_wcall_finish() or jrpc_wcall_error(). Until then the call object
 * stays valid and counts against the worker's credit, so a handler may start
 * timers or other work on jrpc_worker_loop() and complete the call from
 * their callbacks; the worker keeps serving other calls meanwhile.
 * Notifications are calls like any other (the broker needs the answer back
 * to return the credit, then drops it). */
typedef void (*jrpc_handler_fn)(jrpc_wcall_t *call, const msgpack_object *params, void *arg);

/* Makes a worker. opts may be NULL (defaults). Returns NULL on allocation
 * failure or when the ZeroMQ context or the loop cannot be created, and with
 * errno EINVAL for bad opts (including a curve_keypair without a
 * broker_public or the reverse, or a malformed key). */
jrpc_worker_t *jrpc_worker_new(const jrpc_worker_opts_t *opts);

/* Closes every socket (sending DISCONNECT if jrpc_worker_stop() was not
 * called), frees calls still outstanding (their handlers must not touch them
 * afterwards: close your own handles that refer to calls first), closes the
 * loop if the worker owns it, and frees w. NULL-safe; sets *self_p = NULL.
 * Call it outside jrpc_worker_run(). */
void jrpc_worker_destroy(jrpc_worker_t **self_p);

/* Registers fn (with arg) as the handler of method (copied; non-empty,
 * UTF-8). Methods are announced in READY, so register them all before the
 * first jrpc_worker_connect(). Returns 0, -EINVAL (empty name or NULL fn),
 * -EEXIST (already registered), -EBUSY (after connect), or -ENOMEM. */
int jrpc_worker_handle(jrpc_worker_t *w, const char *method, jrpc_handler_fn fn, void *arg);

/* The method may run more than once for one call with the same effect as
 * once (a pure function, a read, a put of a fixed value). Announced in
 * READY ("idempotent", PROTOCOL.md 2.1): when this worker is lost while it
 * holds such a call, the broker sends the call to another worker instead of
 * answering -32004. Do not set it for a method with side effects that add
 * up (a counter, an append, a payment, a message sent). */
#define JRPC_WORKER_IDEMPOTENT 1u

/* jrpc_worker_handle() with flags (0 or JRPC_WORKER_IDEMPOTENT); other
 * bits are -EINVAL. */
int jrpc_worker_handle_ex(jrpc_worker_t *w, const char *method, jrpc_handler_fn fn, void *arg,
                          unsigned flags);

/* Serves one call whose params are JSON text: params[0..n) is the client's
 * params as it sent them, byte for byte (an array or an object; n == 0, and
 * params NULL, when the request had none), already checked by the broker
 * (strict JSON within its limits). Borrowed until the handler returns.
 * Completes the call like a jrpc_handler_fn, typically with
 * jrpc_wcall_finish_json() or jrpc_wcall_error_json(). */
typedef void (*jrpc_json_handler_fn)(jrpc_wcall_t *call, const char *params, size_t n, void *arg);

/* Registers a handler that takes its params as JSON text: the method is
 * declared "json" in READY (PROTOCOL.md 2.1) and the broker sends the
 * client's params bytes untouched, and reads the JSON answers of
 * jrpc_wcall_finish_json() without transcoding either way. With a broker
 * that predates the option (it sends msgpack), the library converts: the
 * params to JSON text before the handler, a JSON answer to msgpack after it
 * (the same value, not the same bytes). flags as jrpc_worker_handle_ex().
 * Returns as jrpc_worker_handle_ex(). */
int jrpc_worker_handle_json(jrpc_worker_t *w, const char *method, jrpc_json_handler_fn fn,
                            void *arg, unsigned flags);

/* Connects to one broker's worker endpoint ("tcp://host:port", ...) with a
 * DEALER of its own and queues READY; call it once per broker. It does not
 * wait for the broker: ZeroMQ connects (and reconnects) in the background.
 *
 * "dns+tcp://NAME:PORT" stands for every broker NAME resolves to (A and
 * AAAA, at most 64 of them; a Kubernetes headless Service): each
 * address gets a session of its own, as if connected one by one. NAME is
 * resolved off the loop thread (uv_getaddrinfo) now, every opts.resolve_ms,
 * and when one of its brokers is lost; an address that appears gets a new
 * session, and one that disappears is left as a drain leaves it
 * (DISCONNECT, its calls answered, then closed: nothing is served twice or
 * dropped by the worker). An answer with no address, or a failed lookup,
 * keeps the sessions in force (logged; retried at the next interval).
 *
 * Returns 0, -EINVAL (no handler registered, or a bad endpoint or URL),
 * -ENOMEM, or another -errno from ZeroMQ/libuv. */
int jrpc_worker_connect(jrpc_worker_t *w, const char *endpoint);

/* Runs the loop until jrpc_worker_stop(). Returns 0, or a negative libuv
 * code. Blocks. */
int jrpc_worker_run(jrpc_worker_t *w);

/* Stops serving: answers already completed are flushed, every broker gets
 * DISCONNECT, the sockets and the worker's handles are closed, and
 * jrpc_worker_run() returns once they are. Calls completed after this are
 * dropped (and freed). Safe to call from a handler or a signal watcher on
 * the loop, and more than once. */
void jrpc_worker_stop(jrpc_worker_t *w);

/* Leaves gracefully: every broker gets DISCONNECT now and routes nothing
 * new here, while the calls held — and any a broker sent before it read the
 * DISCONNECT — are still served and their answers sent; heartbeats go on.
 * Once none is left, jrpc_worker_stop() follows by itself (jrpc_worker_run()
 * returns). It also follows when every call still held is past its
 * deadline (the broker no longer waits for it), after timeout_ms at the
 * latest, or when a broker is lost meanwhile with all the calls it gave.
 * Calls abandoned that way are dropped when completed, as after a stop; the
 * broker answers them -32003 or -32004 (or sends them elsewhere when
 * idempotent). Does not block; a no-op once draining or stopped; call
 * jrpc_worker_stop() to leave at once. */
void jrpc_worker_drain(jrpc_worker_t *w, uint32_t timeout_ms);

/* Leaves every broker for now without stopping: answers completed are
 * flushed, each broker gets DISCONNECT (it routes nothing new here) and the
 * socket is closed (lingering opts.linger_ms to deliver); no session is
 * opened again until jrpc_worker_resume(). Calls still held are lost to
 * their brokers (answered -32004 there, or sent elsewhere when idempotent;
 * completing them later drops the answer). For a program that cannot serve
 * for a while (jrpc-stdio with no child left) and must not be given calls.
 * A no-op while paused, draining or stopped; a drain or stop while paused
 * ends at once. Does not block. */
void jrpc_worker_pause(jrpc_worker_t *w);

/* Ends a pause: a fresh socket and READY to every broker (new sessions).
 * A no-op when not paused. Does not block. */
void jrpc_worker_resume(jrpc_worker_t *w);

/* How many answers the worker has sent, notifications included. */
uint64_t jrpc_worker_answered(const jrpc_worker_t *w);

/* ---- messages to and from the client (PROTOCOL.md 2.6) ---- */

/* A MESSAGE from a broker: the client's response json[0..n) (to a request
 * the worker sent through jrpc_wcall_message), or, with json NULL, the end
 * of session (the client's DELETE). session is "" when none. Both borrowed
 * for the callback. */
typedef void (*jrpc_message_fn)(const char *session, const char *json, size_t n, void *arg);

/* Makes the worker one that sends MESSAGE frames: instance (16 lower-case
 * hex digits, jrpc_mcp_sid.h; copied) goes in READY so that brokers can route
 * a session's messages to this worker, and fn gets what brokers send. Call
 * before jrpc_worker_connect(). Returns 0 or -EINVAL (instance malformed). */
int jrpc_worker_messages(jrpc_worker_t *w, const char *instance, jrpc_message_fn fn, void *arg);

/* Whether session exists at this worker (PROTOCOL.md 2.8): a broker asks
 * before it opens a GET stream or sends a DELETE. session is borrowed for
 * the call. */
typedef bool (*jrpc_probe_answer_fn)(const char *session, void *arg);

/* Makes a worker of jrpc_worker_messages() one that answers brokers'
 * PROBE frames (READY "probes": true), each at once with fn's verdict. Call
 * before jrpc_worker_connect(). Returns 0, or -EINVAL when
 * jrpc_worker_messages() was not called first. */
int jrpc_worker_probes(jrpc_worker_t *w, jrpc_probe_answer_fn fn, void *arg);

/* Whether the broker takes MESSAGE frames for this call (it sent the
 * call's 6th element): only then may jrpc_wcall_message() be used. */
bool jrpc_wcall_messages(const jrpc_wcall_t *c);

/* The MCP session the call came with (Mcp-Session-Id, checked only as
 * visible ASCII of at most 128 bytes), "" when none. Valid while the call is. */
const char *jrpc_wcall_session(const jrpc_wcall_t *c);

/* Sends the call's broker a MESSAGE for this call's client, before the
 * call's answer: json[0..n) (a JSON-RPC notification or request, at most
 * JRPC_WIRE_MESSAGE_MAX bytes, not checked here; NULL: none) and session
 * ("" or NULL: none; with json NULL: "this call started that session").
 * Returns 0, -EPERM when the broker does not take messages for the call
 * (jrpc_wcall_messages()), -E2BIG, -ENOTCONN or -ENOMEM. */
int jrpc_wcall_message(jrpc_wcall_t *c, const char *session, const char *json, size_t n);

/* Sends every connected broker a MESSAGE of session (non-empty) with no
 * call: json[0..n) for the session's stream, or json NULL: the session has
 * ended. Returns the number of brokers it was sent to. */
int jrpc_worker_message(jrpc_worker_t *w, const char *session, const char *json, size_t n);

/* Replaces what the worker declares about its methods (READY "schemas":
 * the opts field's form; NULL: none): kept for every later READY, and sent
 * at once to each broker with a session (a SCHEMAS frame, PROTOCOL.md 2.7;
 * a broker that predates it drops the frame). Copied. Returns the number of
 * brokers it was sent to, -E2BIG past JRPC_WIRE_SCHEMAS_MAX bytes, or
 * -ENOMEM (the old declaration kept). */
int jrpc_worker_set_schemas(jrpc_worker_t *w, const char *schemas);

/* The loop the worker runs on, for handlers' timers and other handles. */
uv_loop_t *jrpc_worker_loop(jrpc_worker_t *w);

/* ---- completing a call ---- */

/* Completes the call with a result given as JSON text json[0..n) (copied),
 * and frees it. The broker checks it (strict JSON, nesting at most 64) and
 * copies it into the client's answer as it is; text it refuses reaches the
 * client as -32603 "result has no JSON form". For a call whose params came
 * as msgpack (a method not declared json, or an older broker) the text is
 * transcoded to msgpack here, and text that is not JSON answers -32603.
 * Discards anything packed into jrpc_wcall_result(). Returns as
 * jrpc_wcall_finish(). */
int jrpc_wcall_finish_json(jrpc_wcall_t *c, const char *json, size_t n);

/* Completes the call with a JSON-RPC error {code, message, data} whose
 * "data" is the JSON text data[0..n) (n == 0: no data), under the same rules
 * as jrpc_wcall_finish_json() (refused data: -32603 "worker sent a malformed
 * error"). message is copied. Returns as jrpc_wcall_finish(). */
int jrpc_wcall_error_json(jrpc_wcall_t *c, int code, const char *message, const char *data,
                          size_t n);

/* The method name of the call (NUL-terminated, valid while the call is). */
const char *jrpc_wcall_method(const jrpc_wcall_t *c);

/* The W3C traceparent the call's body came with (NUL-terminated, checked
 * by the broker and again on receipt: jrpc_traceparent_valid()), or NULL
 * when it had none. Valid while the call is. A handler that calls other
 * services passes it on (with its own span id as parent-id when it records
 * spans). The worker logs one line per call when it ends (event=call, with
 * method, outcome, time_us and the traceparent): at info when the call's
 * traceparent has the sampled flag, else at debug. */
const char *jrpc_wcall_traceparent(const jrpc_wcall_t *c);

/* The loop time (uv_now(), ms) after which the broker no longer waits for
 * this answer; UINT64_MAX when it set no deadline. A handler may skip work
 * that is already late, but must still complete the call. */
uint64_t jrpc_wcall_deadline(const jrpc_wcall_t *c);

/* The packer to write the result into: pack exactly one msgpack object
 * (nil, bool, int, float, str, array, map with str keys — anything else
 * reaches the client as -32603). Packing nothing answers nil. Valid until
 * the call is completed. */
msgpack_packer *jrpc_wcall_result(jrpc_wcall_t *c);

/* Completes the call with the packed result and frees it (c is invalid
 * afterwards). Answers completed in the same loop turn travel together in
 * one RESPONSE message. Returns 0, or -ENOMEM when the answer could not be
 * queued (the call is freed anyway; the broker times it out). */
int jrpc_wcall_finish(jrpc_wcall_t *c);

/* Completes the call with a JSON-RPC error {code, message} (see
 * proto/jrpc_errors.h; message is copied and should not carry internals)
 * and frees it, discarding anything packed into the result. Returns as
 * jrpc_wcall_finish(). */
int jrpc_wcall_error(jrpc_wcall_t *c, int code, const char *message);

/* Completes the call with a JSON-RPC error {code, message, data} whose
 * "data" is the one object packed into jrpc_wcall_result(c) (section 7's
 * values, as for a result); with nothing packed it is jrpc_wcall_error().
 * For a program that passes on a service's error object as it came (the
 * stdio bridge). message is copied. Returns as jrpc_wcall_finish(). */
int jrpc_wcall_error_data(jrpc_wcall_t *c, int code, const char *message);

#endif
