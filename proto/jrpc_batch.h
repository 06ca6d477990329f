/* jrpc_batch — a JSON-RPC 2.0 request body as calls, and its reply.
 *
 * jrpc_batch_parse() makes one pass over the body: strict JSON, the JSON-RPC
 * 2.0 envelope checked exactly by the specification, params kept as the
 * client's JSON text (checked so that they transcode to msgpack, for the
 * workers that want msgpack, when the call is sent). Each element becomes a call: either valid (to
 * dispatch) or already answered with an error. The answers are filled in any
 * order, then jrpc_batch_write_reply() writes the reply in request order.
 *
 * Memory: everything the batch makes lives in its arena; ids are borrowed
 * and params are borrowed from the body, which must outlive the batch (and
 * every call dispatched from it). Parsing takes one block of 3 * len bytes
 * from the arena up front (the worst case of params as msgpack plus method
 * names), so no call allocates on its own.
 *
 * Dispatch rule: dispatch exactly the calls with answered == false. */
#ifndef JRPC_BATCH_H
#define JRPC_BATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
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
    jrpc_span_t params;        /* params as the client's JSON text, byte for byte (an
                                  array or object, borrowed from the body); n == 0
                                  when absent */
    jrpc_span_t params_mp;     /* the same as msgpack (arena) when the parser made it
                                  (the hint below); n == 0 when it did not (or no
                                  params): transcode params when sending, if needed */
    jrpc_span_t answer;        /* `"result":<json>` or `"error":{...}` (arena), once answered */
    int         code;          /* the outcome, set with answer: 0 for a result, else the
                                  error's code (a worker's own as it sent it, which may be 0;
                                  -32603 when we wrote that instead, e.g. for its malformed
                                  error) */
    bool        error;         /* set with answer: it is an error object (code is its code) */
    bool        notification;  /* no id member: never answered, left out of the reply */
    bool        answered;      /* answer is set; on a notification: dropped (reserved
                                  rpc.* name), do not dispatch it */
} jrpc_call_t;

/* Whether calls of a method are likely to go to a worker that wants msgpack
 * params (one that did not declare the method "json"): the parser then
 * transcodes them in the same pass that checks them (params_mp), instead of
 * leaving them for a second pass when sent. method is the name as sent
 * (no escapes). Only a hint: either way is correct. */
typedef bool (*jrpc_batch_hint_fn)(void *arg, jrpc_span_t method);

typedef struct jrpc_batch {
    jrpc_arena_t arena;    /* owns calls[], methods, params, answers */
    jrpc_batch_hint_fn msgpack_hint; /* set before parsing; NULL: transcode every call's
                              params (params_mp always made) */
    void        *hint_arg;
    bool         is_array; /* the body was a (non-empty, valid) array: reply is an array */
    jrpc_call_t *calls;    /* in request order */
    uint32_t     ncalls;   /* number of calls (a whole-body error is one answered call) */
    uint32_t     nanswers; /* calls that expect an answer (not notifications): the
                              response objects of the reply */
    int          body_code;/* the whole-body outcome, set by jrpc_batch_parse: 0, or
                              -32700/-32600 when the body itself was refused (not
                              JSON, too deep, an empty array, too long a batch, or
                              one object that is not a valid Request) */
} jrpc_batch_t;

void jrpc_batch_init(jrpc_batch_t *b);
void jrpc_batch_dispose(jrpc_batch_t *b);

/* Parses one request body. Afterwards every call is either valid and not
 * answered (dispatch it), a notification (dispatch it, never answer it), or
 * answered (an Invalid Request, a reserved rpc.* method, ...). A body that
 * is not JSON, too deep, an empty array or too long a batch becomes a single
 * answered call with id null (-32700 or -32600); is_array is then false and
 * body_code is that code.
 *
 * Our choices where the specification leaves room:
 *  - any JSON error anywhere in the body is one -32700 for the whole body;
 *    nesting deeper than lim->max_depth adds data "nesting depth exceeds N",
 *    a number in params that overflows a double (1e400) adds data "number
 *    out of range" (underflow rounds to 0 and is accepted);
 *  - an element that is not a valid Request gets -32600 even without an id;
 *    its id is echoed when it is a string, number or null (and not given
 *    twice), null otherwise; "id": null is a request, not a notification;
 *  - a duplicate envelope member (jsonrpc, method, params, id), even with
 *    the same value, is -32600; unknown members are ignored; "jsonrpc" and
 *    member names are compared after unescaping ("2\u002e0" is "2.0");
 *  - an empty method name, or one longer than lim->max_method_len bytes
 *    (unescaped), is -32600;
 *  - methods named rpc.*: a request gets -32601 with data "rpc.* names are
 *    reserved", except rpc.discover (JRPC_BATCH_DISCOVER), left unanswered
 *    for the broker to answer itself (never dispatched to a worker); a
 *    notification of any rpc.* name is dropped (answered set, nothing sent);
 *  - more than lim->max_batch elements: one -32600, data "batch too large".
 * Call on a freshly initialised batch. Returns 0 or -ENOMEM. */
int jrpc_batch_parse(jrpc_batch_t *b, const char *body, size_t len, const jrpc_limits_t *lim);

/* The one rpc.* method the parser leaves to its caller (OpenRPC's service
 * discovery method). */
#define JRPC_BATCH_DISCOVER "rpc.discover"

/* True when call c is an rpc.discover request to answer. */
static inline bool jrpc_batch_is_discover(const jrpc_call_t *c)
{
    return !c->answered && c->method.n == sizeof JRPC_BATCH_DISCOVER - 1 &&
           memcmp(c->method.p, JRPC_BATCH_DISCOVER, c->method.n) == 0;
}

/* How many calls jrpc_batch_parse() makes of body, without parsing it:
 * the elements of a top-level array, else 1 (an empty array, one -32600,
 * is 1). Exact for valid JSON; for text that is not JSON, some number of
 * at least 1 (the parser then makes one call of the whole body). One pass
 * over the bytes (strings skipped, escapes honoured), no allocation: for a
 * front that must know a message's weight before submitting it. */
uint32_t jrpc_batch_count(const char *body, size_t len);

/* Each answer function below sets the call's answer, answered and code
 * together (error false and code 0 for a result, else error true and the
 * code written).
 *
 * Answers call i with a result given as msgpack (the object is copied),
 * or, when result is a bin, as JSON text (PROTOCOL.md 2.3: checked by
 * jrpc_json_check() to JRPC_JSON_MAX_DEPTH and copied verbatim, without the
 * whitespace around it). A result with no JSON form (ext, NaN, non-string
 * key, invalid UTF-8, deeper than JRPC_JSON_MAX_DEPTH; a bin that is not
 * strict JSON) answers -32603 with data "result has no JSON form" instead. On a notification this does nothing; the same holds
 * for the two functions below. Returns 0 or -ENOMEM. */
int jrpc_batch_answer_result(jrpc_batch_t *b, uint32_t i, const msgpack_object *result);

/* The same for a result given as the msgpack bytes of one value (read in
 * place from a RESPONSE frame jrpc_wire_response_open() checked; borrowed
 * for the call): the same answer, byte for byte, as
 * jrpc_batch_answer_result() gives for the tree of those bytes, without
 * one. Returns 0 or -ENOMEM. */
int jrpc_batch_answer_result_raw(jrpc_batch_t *b, uint32_t i, jrpc_span_t result);

/* Answers call i with an error object from a worker. It must be a map with
 * an integer "code" in int range and a valid UTF-8 string "message", "data"
 * optional (any value with a JSON form, or a bin of JSON text checked as
 * a result's); other members are dropped. Anything
 * else (duplicate or non-string keys included) answers -32603 with data
 * "worker sent a malformed error" instead. Returns 0 or -ENOMEM. */
int jrpc_batch_answer_error_obj(jrpc_batch_t *b, uint32_t i, const msgpack_object *error);

/* The same for an error object given as msgpack bytes (as above): unpacked
 * into a tree of its own for the call (errors are rare), then the same
 * answer; bytes that are not one msgpack value are a malformed error.
 * Returns 0 or -ENOMEM. */
int jrpc_batch_answer_error_raw(jrpc_batch_t *b, uint32_t i, jrpc_span_t error);

/* Answers call i with one of our codes, its standard message and, when data
 * is not NULL, a string "data" member (left out if not valid UTF-8).
 * Returns 0 or -ENOMEM. */
int jrpc_batch_answer_error(jrpc_batch_t *b, uint32_t i, int code, const char *data);

/* True when at least one call expects an answer (the reply is not empty). */
bool jrpc_batch_expects_reply(const jrpc_batch_t *b);

/* Appends the reply: one object, an array in request order (notifications
 * left out), or nothing at all when no call expects an answer. Every call
 * that expects an answer must be answered (asserted; without asserts, and
 * for a call marked answered with no answer set, -32603 with data "no
 * answer" is written). Returns 0 or -ENOMEM. */
int jrpc_batch_write_reply(const jrpc_batch_t *b, jrpc_buf_t *out);

/* Appends the response object of call i alone (streamed answers): the
 * same bytes the call has inside jrpc_batch_write_reply()'s array. The call
 * must expect an answer and be answered (asserted; without asserts, a call
 * marked answered with no answer set gets -32603 "no answer", as there).
 * Returns 0 or -ENOMEM. */
int jrpc_batch_write_answer(const jrpc_batch_t *b, uint32_t i, jrpc_buf_t *out);

/* Appends a whole error response with id null, for transport-level refusals:
 * {"jsonrpc":"2.0","error":{"code":C,"message":M[,"data":"..."]},"id":null}.
 * Returns 0 or -ENOMEM. */
int jrpc_batch_write_error(jrpc_buf_t *out, int code, const char *data);

/* The same with a "data" member given as JSON text (trusted: the caller
 * writes it), e.g. {"reason":"unknown key","server_time":1764000000}. */
int jrpc_batch_write_error_json(jrpc_buf_t *out, int code, const char *data_json);

#endif
