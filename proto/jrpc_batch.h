/* jrpc_batch — a JSON-RPC 2.0 request body as calls, and its reply.
 *
 * jrpc_batch_parse() makes one pass over the body: strict JSON, the JSON-RPC
 * 2.0 envelope checked exactly by the specification, params transcoded to
 * msgpack for the workers. Each element becomes a call: either valid (to
 * dispatch) or already answered with an error. The answers are filled in any
 * order, then jrpc_batch_write_reply() writes the reply in request order.
 *
 * Memory: everything the batch makes lives in its arena; ids are borrowed
 * from the body, which must outlive the batch. */
#ifndef JRPC_BATCH_H
#define JRPC_BATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <msgpack.h>
#include "jrpc_buf.h"

typedef struct jrpc_limits {
    unsigned max_depth;       /* nesting depth of the body */
    unsigned max_batch;       /* elements in one batch array */
    unsigned max_method_len;  /* bytes in a method name */
} jrpc_limits_t;

#define JRPC_LIMITS_DEFAULT ((jrpc_limits_t){ .max_depth = 64, .max_batch = 1000, \
                                              .max_method_len = 256 })

typedef struct jrpc_call {
    jrpc_span_t id;            /* raw JSON text of the id as sent ("1.0", "\"a\"", "null");
                                  "null" for an invalid request whose id was absent or invalid */
    jrpc_span_t method;        /* unescaped UTF-8 method name (arena); valid calls only */
    jrpc_span_t params;        /* params as msgpack (arena); n == 0 when absent */
    jrpc_span_t answer;        /* `"result":<json>` or `"error":{...}` (arena), once answered */
    bool        notification;  /* no id member: dispatched, never answered */
    bool        answered;      /* answer is set (a notification is never answered) */
} jrpc_call_t;

typedef struct jrpc_batch {
    jrpc_arena_t arena;    /* owns calls[], methods, params, answers */
    bool         is_array; /* the body was a (non-empty, valid) array: reply is an array */
    jrpc_call_t *calls;    /* in request order */
    uint32_t     ncalls;   /* number of calls (a whole-body error is one answered call) */
} jrpc_batch_t;

void jrpc_batch_init(jrpc_batch_t *b);
void jrpc_batch_dispose(jrpc_batch_t *b);

/* Parses one request body. Afterwards every call is either valid and not
 * answered (dispatch it), a notification (dispatch it, never answer it), or
 * answered (an Invalid Request, a reserved rpc.* method, ...). A body that
 * is not JSON, too deep, an empty array or too long a batch becomes a single
 * answered call with id null (-32700 or -32600); is_array is then false.
 * Call on a freshly initialised batch. Returns 0 or -ENOMEM. */
int jrpc_batch_parse(jrpc_batch_t *b, const char *body, size_t len, const jrpc_limits_t *lim);

/* Answers call i with a result given as msgpack. A result with no JSON form
 * answers -32603 instead. Returns 0 or -ENOMEM. */
int jrpc_batch_answer_result(jrpc_batch_t *b, uint32_t i, const msgpack_object *result);

/* Answers call i with an error object from a worker. It must be a map with
 * an integer "code" and a string "message", "data" optional; anything else
 * answers -32603 instead. Returns 0 or -ENOMEM. */
int jrpc_batch_answer_error_obj(jrpc_batch_t *b, uint32_t i, const msgpack_object *error);

/* Answers call i with one of our codes, its standard message and, when data
 * is not NULL, a string "data" member. Returns 0 or -ENOMEM. */
int jrpc_batch_answer_error(jrpc_batch_t *b, uint32_t i, int code, const char *data);

/* True when at least one call expects an answer (the reply is not empty). */
bool jrpc_batch_expects_reply(const jrpc_batch_t *b);

/* Appends the reply: one object, an array in request order (notifications
 * left out), or nothing at all when no call expects an answer. Every call
 * that expects an answer must be answered. Returns 0 or -ENOMEM. */
int jrpc_batch_write_reply(const jrpc_batch_t *b, jrpc_buf_t *out);

/* Appends a whole error response with id null, for transport-level refusals:
 * {"jsonrpc":"2.0","error":{"code":C,"message":M[,"data":"..."]},"id":null}.
 * Returns 0 or -ENOMEM. */
int jrpc_batch_write_error(jrpc_buf_t *out, int code, const char *data);

#endif
