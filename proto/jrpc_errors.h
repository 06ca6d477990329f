/* jrpc_errors — the one table of JSON-RPC error codes and their messages.
 *
 * JSON-RPC error objects are data; C functions return 0 or a negative code.
 * Conversion between the two happens here and in jrpc_batch only.
 *
 * The negative codes: -errno, or a module's own JRPC_<MODULE>_E*, each
 * module in a range of its own (json -1000s, wire -2000s, client -3000s,
 * mpack -4000s, header -5000s, auth -6000s, broker -7000s). A module whose
 * codes reach a log or a user has jrpc_<module>_strerror() for their
 * words (json, wire, client, auth, broker); mpack's are turned into its
 * callers' codes, and a malformed header frame is answered by the ZeroMQ
 * front in its own words. */
#ifndef JRPC_ERRORS_H
#define JRPC_ERRORS_H

#include <stdbool.h>
#include <stdint.h>

enum jrpc_code {
    JRPC_PARSE_ERROR      = -32700, /* invalid JSON */
    JRPC_INVALID_REQUEST  = -32600, /* not a valid Request object */
    JRPC_METHOD_NOT_FOUND = -32601, /* no connected worker serves it */
    JRPC_INVALID_PARAMS   = -32602, /* the worker refused the params */
    JRPC_INTERNAL_ERROR   = -32603, /* broker or worker fault */
    JRPC_SERVER_BUSY      = -32000, /* queue full: try again later */
    JRPC_VALIDATION_FAILED= -32001, /* admission check failed */
    JRPC_UNAUTHORIZED     = -32002, /* signature, key or ACL */
    JRPC_TIMEOUT          = -32003, /* deadline passed before an answer */
    JRPC_WORKER_FAILED    = -32004, /* the worker was lost or failed */
    JRPC_REPLAYED         = -32005, /* the nonce of a signed body was seen before */
    JRPC_REPLAY_DOWN      = -32006, /* replay protection (Redis) unavailable: fail closed */
    JRPC_RATE_LIMITED     = -32007, /* over the rate limit (docs/SIGNING.md "Rate limits") */
    JRPC_IDEM_CONFLICT    = -32008, /* the idempotency key holds another body, or its body
                                       is still running (docs/SIGNING.md "Idempotency keys") */
    JRPC_NOT_REPRESENTABLE= -32010, /* a worker's result holds a number no double holds
                                       (sent by the Python worker, worker/python README) */
    JRPC_SESSION_UNKNOWN  = -32011, /* an MCP session that does not exist (any more): the
                                       HTTP front answers 404 on /mcp (docs/MCP.md) */
};

/* How a whole body ended: the transport-neutral class every front, the
 * access line and the metrics read (the HTTP front maps it to a status;
 * jrpc_bodies_total{outcome} and the access line's outcome= use its name). */
enum jrpc_body_class {
    JRPC_BODY_OK,           /* a JSON-RPC answer (possibly empty: only notifications) */
    JRPC_BODY_INVALID,      /* a JSON-RPC answer refusing the body itself: -32700/-32600 */
    JRPC_BODY_BUSY,         /* refused: too many bodies open, -32000 */
    JRPC_BODY_UNAUTHORIZED, /* refused: signature checks failed, -32002 */
    JRPC_BODY_REPLAYED,     /* refused: nonce seen before, -32005 */
    JRPC_BODY_UNAVAILABLE,  /* refused: replay protection down or lost its memory, -32006 */
    JRPC_BODY_LIMITED,      /* refused: over its rate limit, -32007 */
    JRPC_BODY_MISMATCH,     /* refused: its idempotency key holds another body, -32008 */
    JRPC_BODY_INPROGRESS,   /* refused: its idempotency key's body still runs, -32008 */
    JRPC_BODY_CANCELLED,    /* the client left before the reply (never replied) */
    JRPC_BODY_NOUTCOMES
};

/* The outcome of one body, as data: its class and, for a body refused
 * whole, the JSON-RPC code of the error object sent (0 otherwise). */
typedef struct jrpc_outcome {
    int      cls;        /* a jrpc_body_class */
    int      code;       /* JSON-RPC code of a whole-body error; 0 for JRPC_BODY_OK, but
                            JRPC_SESSION_UNKNOWN for an MCP body whose one call was
                            answered so (the HTTP front's 404) */
    uint32_t answered;   /* ok/invalid: response objects in the reply (streamed: sent) */
    uint32_t timed_out;  /* ... of them -32003 because the deadline passed */
    uint32_t retry_after_s; /* limited: when the body would pass (>= 1); 0 never */
    bool     replayed;   /* ok/invalid: the stored reply of an idempotency key (it ran before) */
    const struct jrpc_timing *timing; /* where the body's time went (jrpc_timing.h), valid
                                     during the reply call; NULL: not measured */
} jrpc_outcome_t;

/* The name of a class ("ok", "invalid", "busy", "unauthorized", "replayed",
 * "unavailable", "limited", "mismatch", "inprogress", "cancelled"): the
 * metrics label and the access line. */
const char *jrpc_body_class_name(int cls);

/* The one C-error → JSON-RPC mapping. For a refusal of a whole body:
 * -EBUSY (too many open) → busy/-32000, -EACCES (signature) →
 * unauthorized/-32002, -EEXIST (nonce seen) → replayed/-32005, -EDQUOT
 * (rate limit) → limited/-32007, -EILSEQ (idempotency key, other body) →
 * mismatch/-32008, -EINPROGRESS (idempotency key, still running) →
 * inprogress/-32008, -EINVAL → invalid/-32600, -EAGAIN, -ESTALE and any
 * other error of the store → unavailable/-32006. */
jrpc_outcome_t jrpc_outcome_refused(int rc);

/* For one call that could not be dispatched: -ENOENT → -32601, -EBUSY →
 * -32000 (queue full), -ETIMEDOUT → -32003, -EACCES → -32002, anything
 * else -32603. */
int jrpc_error_code(int rc);

/* The standard message for a code ("Parse error", ...). Never NULL:
 * unknown codes give "Server error". */
const char *jrpc_error_message(int code);

#include <stddef.h>

/* Formats a message into err[0..errlen) (nothing when err is NULL or
 * errlen is 0): how functions that fail at start-up say why. */
void jrpc_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
