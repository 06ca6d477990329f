/* jrpc_wire — the broker⇄worker protocol.
 *
 * Every worker message is one ZeroMQ frame holding one msgpack array
 * [version, type, ...] (the ROUTER's routing-id frame aside). See
 * proto/PROTOCOL.md, which is the contract; this module is its only codec.
 * Decoding never trusts a frame: every field is checked, and any deviation is
 * JRPC_WIRE_EMALFORMED, never a crash. The msgpack decoding itself, and
 * lookups in the decoded objects (jrpc_mpack_map_get), are jrpc_mpack's; the
 * client header frame is jrpc_header's. */
#ifndef JRPC_WIRE_H
#define JRPC_WIRE_H

#include <stdbool.h>
#include <stdint.h>
#include <msgpack.h>
#include "jrpc_buf.h"
#include "jrpc_trace.h"

#define JRPC_WIRE_VERSION 1

/* The deepest nesting a frame may have, counting every container including
 * the message's own array: the broker's largest --max-depth (1024) plus the
 * three levels that wrap params and results ([1, type, [[..., params, ...]]]),
 * with room to spare. Deeper frames are JRPC_WIRE_EMALFORMED. */
#define JRPC_WIRE_MAX_DEPTH 1100

enum jrpc_wire_type {
    JRPC_WIRE_READY      = 1,  /* worker → broker: credit, methods served */
    JRPC_WIRE_REQUEST    = 2,  /* broker → worker: one or more calls */
    JRPC_WIRE_RESPONSE   = 3,  /* worker → broker: one or more answers */
    JRPC_WIRE_HEARTBEAT  = 4,  /* both ways */
    JRPC_WIRE_DISCONNECT = 5,  /* both ways: I am leaving / I do not know you */
    JRPC_WIRE_REJECT     = 6,  /* worker → broker: a REQUEST it could not decode */
    JRPC_WIRE_MESSAGE    = 7,  /* both ways: a message for the client of a call or a
                                  session, or the client's response / end of session */
    JRPC_WIRE_SCHEMAS    = 8,  /* worker → broker: its READY "schemas" replaced (the
                                  methods stay as READY declared them) */
    JRPC_WIRE_PROBE      = 9,  /* broker → worker: does this MCP session exist? worker
                                  → broker: the answer (PROTOCOL.md 2.8) */
};

/* MESSAGE bounds (PROTOCOL.md 2.6): a body's bytes, a session id's bytes. */
#define JRPC_WIRE_MESSAGE_MAX (1u << 20)
#define JRPC_WIRE_SESSION_MAX 128

/* The bounds of the heartbeat settings a HEARTBEAT may carry (the broker's
 * --heartbeat-ms and --liveness take the same). */
#define JRPC_WIRE_HEARTBEAT_MIN_MS 10
#define JRPC_WIRE_HEARTBEAT_MAX_MS 3600000
#define JRPC_WIRE_LIVENESS_MAX     1000

enum {
    JRPC_WIRE_EMALFORMED = -2001,  /* not a message of this protocol */
    JRPC_WIRE_EVERSION   = -2002,  /* a protocol version we do not speak */
};

/* Sequence number 0 is never used for a call. */
typedef uint64_t jrpc_seq_t;

/* ---- encoding: each function appends to out; returns 0 or -ENOMEM ---- */

/* READY with no options: [1, 1, credit, methods]. */
int jrpc_wire_put_ready(jrpc_buf_t *out, uint32_t credit,
                        const char *const *methods, size_t nmethods);

/* The READY options a worker may send (PROTOCOL.md 2.1). Strings are
 * borrowed for the call; each non-empty. */
typedef struct jrpc_wire_ready_opts {
    const char        *name;         /* "name": for the broker's logs; NULL: not sent */
    const char *const *idempotent;   /* "idempotent": methods the broker may re-dispatch
                                        to another worker when this one is lost mid-call */
    size_t             nidempotent;  /* 0: not sent */
    const char *const *json;         /* "json": methods that take their params, and may
                                        answer, as JSON text (PROTOCOL.md 2.1) */
    size_t             njson;        /* 0: not sent */
    const char        *instance;     /* "instance": 16 lower-case hex digits naming this
                                        worker process (jrpc_mcp_sid.h); it sends MESSAGE
                                        frames. NULL: not sent */
    const char        *service;      /* "service": the service its methods belong to,
                                        [a-z0-9][a-z0-9_-]{0,62}; NULL: not sent */
    const char        *schemas;      /* "schemas": JSON text, an object {method:
                                        {"params": [...], "result": {...}}} (PROTOCOL.md
                                        2.1), at most JRPC_WIRE_SCHEMAS_MAX bytes; NULL:
                                        not sent */
    bool               probes;       /* "probes": true, the worker answers PROBE frames
                                        (with instance only); false: not sent */
} jrpc_wire_ready_opts_t;

/* The largest READY "schemas" text a broker reads (bytes); a longer one is
 * ignored (the READY is not refused: schemas are documentation). */
#define JRPC_WIRE_SCHEMAS_MAX 65536

/* READY with options: [1, 1, credit, methods, {options}]; with opts NULL or
 * nothing set, the same bytes as jrpc_wire_put_ready(). */
int jrpc_wire_put_ready_opts(jrpc_buf_t *out, uint32_t credit,
                             const char *const *methods, size_t nmethods,
                             const jrpc_wire_ready_opts_t *opts);
int jrpc_wire_put_heartbeat(jrpc_buf_t *out);
/* HEARTBEAT with the sender's settings, [1, 4, heartbeat_ms, liveness]: what
 * the broker sends (PROTOCOL.md 5), so that its workers adopt them for the
 * session. Both within the JRPC_WIRE_HEARTBEAT_* / _LIVENESS_MAX bounds
 * (asserted). */
int jrpc_wire_put_heartbeat_settings(jrpc_buf_t *out, uint32_t heartbeat_ms, uint32_t liveness);
int jrpc_wire_put_disconnect(jrpc_buf_t *out);
/* REJECT [1, 6, request]: the worker could not decode the request-th REQUEST
 * of this session (counted from 1) and runs none of its calls; the broker
 * answers them. request >= 1 (asserted). */
int jrpc_wire_put_reject(jrpc_buf_t *out, uint64_t request);

/* REQUEST: _begin, then one _call per call, then _end with the count. */
int jrpc_wire_put_request_begin(jrpc_buf_t *out);
/* params is msgpack (n == 0: no params, sent as nil); timeout_ms is how long
 * the broker will still wait for the answer, counted from when it sent it;
 * traceparent is the W3C trace context of the call's body, valid by
 * jrpc_traceparent_valid() (asserted), or n == 0: none, and then the item
 * is the same 4 elements as before the field existed. */
int jrpc_wire_put_request_call(jrpc_buf_t *out, jrpc_seq_t seq, jrpc_span_t method,
                               jrpc_span_t params, uint32_t timeout_ms, jrpc_span_t traceparent);
/* The same from params given as JSON text (n == 0: no params) that the
 * batch parser or jrpc_json_check() accepted, encoded for the worker it goes
 * to: as_json (the worker declared the method "json" at READY) sends the
 * bytes as they are, as a bin (an empty bin for no params: PROTOCOL.md
 * 2.2); otherwise they are transcoded to msgpack in place, the same bytes
 * jrpc_wire_put_request_call() writes for jrpc_json_to_msgpack()'s output.
 * Returns 0, -ENOMEM, or -EINVAL when params do not transcode (a caller's
 * bug: out unchanged). */
int jrpc_wire_put_request_call_json(jrpc_buf_t *out, jrpc_seq_t seq, jrpc_span_t method,
                                    jrpc_span_t params, bool as_json, uint32_t timeout_ms,
                                    jrpc_span_t traceparent);
/* The same as jrpc_wire_put_request_call_json() with the 6th element
 * (PROTOCOL.md 2.2): session (n == 0: nil; else 1..JRPC_WIRE_SESSION_MAX
 * visible ASCII bytes, asserted), which also tells the worker that this
 * broker takes MESSAGE frames for the call. */
int jrpc_wire_put_request_call_session(jrpc_buf_t *out, jrpc_seq_t seq, jrpc_span_t method,
                                       jrpc_span_t params, bool as_json, uint32_t timeout_ms,
                                       jrpc_span_t traceparent, jrpc_span_t session);
void jrpc_wire_put_request_end(jrpc_buf_t *out, uint32_t ncalls);

/* MESSAGE [1, 7, seq, session, body] (PROTOCOL.md 2.6): seq the call it
 * belongs to (0: none), session (n == 0: nil; else as above), body JSON text
 * sent as a bin (at most JRPC_WIRE_MESSAGE_MAX bytes, asserted) or, with
 * body.p == NULL, nil. Returns 0 or -ENOMEM. */
int jrpc_wire_put_message(jrpc_buf_t *out, jrpc_seq_t seq, jrpc_span_t session, jrpc_span_t body);

/* PROBE [1, 9, probe, session, live] (PROTOCOL.md 2.8): probe >= 1, session
 * 1..JRPC_WIRE_SESSION_MAX visible ASCII bytes (both asserted); live < 0:
 * nil (the broker's question), 0: false, > 0: true (the worker's answer).
 * Returns 0 or -ENOMEM. */
int jrpc_wire_put_probe(jrpc_buf_t *out, uint64_t probe, jrpc_span_t session, int live);

/* SCHEMAS [1, 8, schemas] (PROTOCOL.md 2.7): JSON text of the READY option's
 * form, at most JRPC_WIRE_SCHEMAS_MAX bytes (asserted), replacing what the
 * worker declared for its methods (a discovery document's facts only).
 * Returns 0 or -ENOMEM. */
int jrpc_wire_put_schemas(jrpc_buf_t *out, const char *schemas, size_t n);

/* RESPONSE: _begin, then per answer either _result_head followed by the
 * result's msgpack bytes appended by the caller, or _error; then _end. */
int jrpc_wire_put_response_begin(jrpc_buf_t *out);
int jrpc_wire_put_result_head(jrpc_buf_t *out, jrpc_seq_t seq);
int jrpc_wire_put_error(jrpc_buf_t *out, jrpc_seq_t seq, int code, const char *message,
                        jrpc_span_t data /* msgpack, n == 0: none */);
/* A result given as JSON text, [seq, 0, bin]: only in answer to a call whose
 * params came as JSON text (jrpc_wire_call_t.json), since only a broker that
 * sends those reads it (PROTOCOL.md 2.3). json is not checked here (the
 * broker checks it). */
int jrpc_wire_put_result_json(jrpc_buf_t *out, jrpc_seq_t seq, jrpc_span_t json);
/* An error whose "data" is JSON text (n == 0: none), under the same rule. */
int jrpc_wire_put_error_json(jrpc_buf_t *out, jrpc_seq_t seq, int code, const char *message,
                             jrpc_span_t data_json);
void jrpc_wire_put_response_end(jrpc_buf_t *out, uint32_t nanswers);

/* ---- decoding ---- */

typedef struct jrpc_wire_msg {
    int      type;                      /* enum jrpc_wire_type */
    /* READY */
    uint32_t credit;                    /* calls the worker can hold at once (>= 1) */
    const msgpack_object *methods;      /* array of str, each non-empty */
    const msgpack_object *options;      /* map, or NULL */
    const msgpack_object *idempotent;   /* options "idempotent": array of non-empty str,
                                           or NULL when not sent */
    const msgpack_object *json;         /* options "json": array of non-empty str, or
                                           NULL when not sent */
    const msgpack_object *service;      /* options "service": a str (not checked against
                                           the token rule here), or NULL when not sent */
    const msgpack_object *schemas;      /* options "schemas" (or SCHEMAS' own): a str
                                           (JSON text, not checked here), or NULL when
                                           not sent */
    /* REQUEST and RESPONSE */
    const msgpack_object *items;        /* the items array */
    uint32_t nitems;                    /* >= 1 */
    /* HEARTBEAT: the sender's settings, both 0 when it sent none */
    uint32_t heartbeat_ms;              /* JRPC_WIRE_HEARTBEAT_MIN_MS..._MAX_MS */
    uint32_t liveness;                  /* 1..JRPC_WIRE_LIVENESS_MAX */
    /* REJECT */
    uint64_t request;                   /* which REQUEST of the session (>= 1) */
    /* READY option "instance" */
    bool     has_instance;
    uint64_t instance;
    /* READY option "probes" (true: the worker answers PROBE frames) */
    bool     probes;
    /* PROBE: probe (>= 1), session (below, never nil), live: -1 nil (a
     * question), 0 false, 1 true */
    uint64_t probe;
    int      live;
    /* MESSAGE: spans borrowed from the frame */
    jrpc_seq_t  seq;                    /* the call it belongs to; 0: none */
    jrpc_span_t session;                /* n == 0: nil */
    jrpc_span_t body;                   /* JSON text, not checked here; p == NULL: nil */
} jrpc_wire_msg_t;

typedef struct jrpc_wire_call {         /* one REQUEST item */
    jrpc_seq_t  seq;
    jrpc_span_t method;                 /* borrowed from the decoded frame */
    const msgpack_object *params;       /* nil, array or map; or a bin (json) */
    bool        json;                   /* params came as JSON text (a bin): the broker
                                           reads JSON answers for this call */
    jrpc_span_t params_json;            /* json: the client's params text, borrowed from
                                           the frame (n == 0: none); not checked here */
    uint32_t    timeout_ms;
    jrpc_span_t traceparent;            /* 5th element: a valid W3C traceparent (borrowed
                                           from the frame), n == 0 when absent or nil */
    bool        messages;               /* a 6th element: the broker takes MESSAGE frames
                                           for this call */
    jrpc_span_t session;                /* 6th element: the MCP session (borrowed), n == 0:
                                           nil or absent */
} jrpc_wire_call_t;

typedef struct jrpc_wire_answer {       /* one RESPONSE item */
    jrpc_seq_t  seq;
    bool        is_error;
    const msgpack_object *value;        /* result (any), or error (map: checked by jrpc_batch) */
} jrpc_wire_answer_t;

/* Decodes one frame into m. Objects point into zone and into buf (both must
 * outlive m). READY (with its known options: "name" a str, "idempotent" and
 * "json" arrays of non-empty str, none given twice), HEARTBEAT (with its optional
 * settings: both or neither, within bounds), DISCONNECT and REJECT are
 * fully checked here;
 * MESSAGE (seq, session of 1..JRPC_WIRE_SESSION_MAX visible ASCII bytes or
 * nil, body a bin of at most JRPC_WIRE_MESSAGE_MAX bytes or nil; session and
 * body not both nil), PROBE (probe >= 1, a session as MESSAGE's, live nil
 * or a bool) and the READY options "instance" (16 lower-case hex digits)
 * and "probes" (a bool) too;
 * REQUEST and RESPONSE items are checked by the _item functions.
 * Returns 0, JRPC_WIRE_EMALFORMED, JRPC_WIRE_EVERSION or -ENOMEM. */
int jrpc_wire_decode(const char *buf, size_t n, msgpack_zone *zone, jrpc_wire_msg_t *m);

/* Reads only the start of a frame, "[version, type": what a worker needs to
 * know that a frame jrpc_wire_decode() refused was a REQUEST, which it must
 * count and REJECT (PROTOCOL.md 2.5). Returns the type (>= 0) when the frame
 * starts with an array of at least 2 elements, version 1 and an unsigned
 * type (any type, known or not; INT32_MAX for larger ones);
 * JRPC_WIRE_EVERSION for another version; JRPC_WIRE_EMALFORMED otherwise.
 * Never allocates. */
int jrpc_wire_peek_type(const char *buf, size_t n);

/* Where a REQUEST item's seq can still be read, for answering an item that
 * jrpc_wire_request_item() refused: the item is an array whose first
 * element is a seq (an unsigned integer >= 1). Returns 0 and sets *seq, or
 * JRPC_WIRE_EMALFORMED. */
int jrpc_wire_request_item_seq(const jrpc_wire_msg_t *m, uint32_t i, jrpc_seq_t *seq);

/* Item i (< m->nitems) of a REQUEST / RESPONSE. Returns 0 or JRPC_WIRE_EMALFORMED
 * (a REQUEST item's optional traceparent that is neither nil nor a str
 * passing jrpc_traceparent_valid() is malformed too, and so is an optional
 * 6th element that is neither nil nor a session as MESSAGE's). */
int jrpc_wire_request_item(const jrpc_wire_msg_t *m, uint32_t i, jrpc_wire_call_t *c);
int jrpc_wire_response_item(const jrpc_wire_msg_t *m, uint32_t i, jrpc_wire_answer_t *a);

/* ---- RESPONSE frames read in place (the broker's answer path) ----
 *
 * The same verdicts as jrpc_wire_decode() + jrpc_wire_response_item(),
 * without a tree: the whole frame is checked first (jrpc_mpack_check), so a
 * frame malformed anywhere is refused before any item is read, then the
 * items are walked in order, each value handed out as its msgpack bytes. */

typedef struct jrpc_wire_rsp {
    const char *p;        /* the next item's first byte */
    const char *end;      /* the end of the frame */
    uint32_t    nitems;   /* items in the frame (>= 1) */
    uint32_t    next;     /* the next item's index (== nitems: all read) */
} jrpc_wire_rsp_t;

typedef struct jrpc_wire_answer_raw {   /* one RESPONSE item, in place */
    jrpc_seq_t  seq;
    bool        is_error;
    jrpc_span_t value;    /* the result (any), or the error (a map: checked by jrpc_batch),
                             as msgpack bytes borrowed from the frame */
} jrpc_wire_answer_raw_t;

/* Opens buf[0..n) as a RESPONSE. Returns 1 when it is not one (its head is
 * not [1, 3, ...]: jrpc_wire_decode() it, which says what it is, even
 * malformed); otherwise what jrpc_wire_decode() would return for it, 0 (r
 * set, buf must outlive it), JRPC_WIRE_EMALFORMED, or -ENOMEM (nesting
 * beyond 32 levels only). Never blocks. */
int jrpc_wire_response_open(const char *buf, size_t n, jrpc_wire_rsp_t *r);

/* Reads item r->next (< r->nitems) and moves past it, as
 * jrpc_wire_response_item() reads that item of the decoded frame: 0 with *a
 * set, or JRPC_WIRE_EMALFORMED (*a unset; the next item can still be read). */
int jrpc_wire_response_next(jrpc_wire_rsp_t *r, jrpc_wire_answer_raw_t *a);

/* A short English description of a JRPC_WIRE_E* code (or -ENOMEM). Never
 * NULL: "unknown error" for anything else. */
const char *jrpc_wire_strerror(int rc);

#endif
