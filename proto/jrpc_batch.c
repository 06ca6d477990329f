/* jrpc_batch — JSON-RPC 2.0 envelopes and batches over the strict reader of
 * jrpc_json. See jrpc_batch.h for the contract.
 *
 * One pass over the body: each request object is read member by member, its
 * params checked and kept as a span of the body, and transcoded to msgpack
 * as they are read when the call is likely to go to a msgpack worker (the
 * caller's hint), into one scratch block taken from the arena up front
 * (JRPC_JSON_MSGPACK_BOUND(len) bytes cover the params and method names of
 * the whole body, so nothing grows mid-way). Any JSON error anywhere throws
 * the calls away and answers a single -32700. */
#include "jrpc_batch.h"
#include "jrpc_errors.h"
#include "jrpc_json.h"
#include "jrpc_json_internal.h"
#include "jrpc_mpack.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#define LIT(s) s, (sizeof s - 1)

#define ANSWER_INVALID "\"error\":{\"code\":-32600,\"message\":\"Invalid Request\"}"
#define ANSWER_PARSE   "\"error\":{\"code\":-32700,\"message\":\"Parse error\"}"
#define ANSWER_LOST    "\"error\":{\"code\":-32603,\"message\":\"Internal error\"," \
                       "\"data\":\"no answer\"}"

static const jrpc_span_t id_null = { "null", 4 };

enum whole {              /* the body as a whole is answered with one error */
    WHOLE_NONE = 0,
    WHOLE_NOT_REQUEST,    /* a scalar: -32600 */
    WHOLE_EMPTY,          /* []: -32600 */
    WHOLE_TOO_LARGE,      /* more than max_batch elements: -32600 */
};

typedef struct bparse {
    jrpc_jp_t            j;        /* the reader; j.w is set only inside params */
    jrpc_batch_t        *b;        /* the batch being filled */
    const jrpc_limits_t *lim;      /* the caller's limits */
    char                *scratch;  /* next free byte for params and method names */
    uint32_t             cap;      /* room in b->calls */
    enum whole           whole;    /* set when the body gets a single error */
    /* A batch mostly calls one method: the last plain method name read (its
     * bytes in the body), its copy made for a valid call (n == 0: none
     * yet), and the hint's answer for it (-1: not asked), reused by the
     * calls that name it again. */
    jrpc_span_t          prev_raw;
    jrpc_span_t          prev_copy;
    int                  prev_hint;
} bparse_t;

void jrpc_batch_init(jrpc_batch_t *b)
{
    jrpc_arena_init(&b->arena, 16384);
    b->msgpack_hint = NULL;
    b->hint_arg = NULL;
    b->is_array = false;
    b->calls = NULL;
    b->ncalls = 0;
    b->nanswers = 0;
    b->body_code = 0;
}

void jrpc_batch_dispose(jrpc_batch_t *b)
{
    jrpc_arena_dispose(&b->arena);
    jrpc_batch_init(b);
}

/* Doubles calls[] (the first time: a guess from the body's size). Returns
 * 0 or -ENOMEM. */
static int calls_grow(bparse_t *bp)
{
    jrpc_batch_t *b = bp->b;
    uint32_t cap = bp->cap * 2;
    if (cap == 0) {  /* guess from the body: a small call is ~50 bytes */
        size_t guess = (size_t)(bp->j.end - bp->j.p) / 48 + 1;
        cap = guess < bp->lim->max_batch ? (uint32_t)guess : bp->lim->max_batch;
        if (cap == 0)
            cap = 1;
    }
    jrpc_call_t *calls = jrpc_arena_alloc(&b->arena, (size_t)cap * sizeof *calls);
    if (calls == NULL)
        return -ENOMEM;
    if (b->ncalls)
        memcpy(calls, b->calls, (size_t)b->ncalls * sizeof *calls);
    b->calls = calls;
    bp->cap = cap;
    return 0;
}

/* Appends the call *init (every member set by the caller's compound
 * literal, written once: inline, so the literal is built in place). NULL
 * when out of memory. */
static inline jrpc_call_t *new_call(bparse_t *bp, const jrpc_call_t *init)
{
    jrpc_batch_t *b = bp->b;
    if (b->ncalls == bp->cap && calls_grow(bp) < 0)
        return NULL;
    jrpc_call_t *c = &b->calls[b->ncalls++];
    *c = *init;
    b->nanswers += !c->notification;
    return c;
}

static int add_invalid(bparse_t *bp, jrpc_span_t id)
{
    return new_call(bp, &(jrpc_call_t){ .id = id, .answer = { LIT(ANSWER_INVALID) },
                                        .code = JRPC_INVALID_REQUEST, .error = true,
                                        .answered = true })
               ? 0 : -ENOMEM;
}

/* ---- error objects ---- */

#define ERROR_HEAD     "\"error\":{\"code\":"
#define ERROR_MESSAGE  ",\"message\":"
#define ERROR_DATA     ",\"data\":"

/* Room for `"error":{"code":C,"message":M` (without data and closing brace). */
static size_t error_head_size(const char *msg, size_t msg_n)
{
    size_t n = 0;
    jrpc_json_string_size(msg, msg_n, &n);  /* our own message table: valid UTF-8 */
    return sizeof ERROR_HEAD + 11 + sizeof ERROR_MESSAGE + n;
}

static char *error_head_put(char *w, int code, const char *msg, size_t msg_n)
{
    memcpy(w, LIT(ERROR_HEAD));
    w = jrpc_json_int_put(w + sizeof ERROR_HEAD - 1, code);
    memcpy(w, LIT(ERROR_MESSAGE));
    return jrpc_json_string_put(w + sizeof ERROR_MESSAGE - 1, msg, msg_n);
}

/* Writes `"error":{...}` for one of our codes into the arena. Data that is
 * not valid UTF-8 is left out rather than sent broken. */
static int error_answer(jrpc_arena_t *a, int code, const char *data, jrpc_span_t *answer)
{
    const char *msg = jrpc_error_message(code);
    size_t msg_n = strlen(msg), data_n = 0, data_size = 0;
    if (data) {
        data_n = strlen(data);
        if (jrpc_json_string_size(data, data_n, &data_size) < 0)
            data = NULL;
    }
    size_t room = error_head_size(msg, msg_n) + (data ? sizeof ERROR_DATA + data_size : 0) + 1;
    char *w0 = jrpc_arena_alloc(a, room);
    if (w0 == NULL)
        return -ENOMEM;
    char *w = error_head_put(w0, code, msg, msg_n);
    if (data) {
        memcpy(w, LIT(ERROR_DATA));
        w = jrpc_json_string_put(w + sizeof ERROR_DATA - 1, data, data_n);
    }
    *w++ = '}';
    *answer = (jrpc_span_t){ w0, (size_t)(w - w0) };
    return 0;
}

/* ---- parsing ---- */

enum member { M_OTHER, M_JSONRPC, M_METHOD, M_PARAMS, M_ID };

static enum member member_kind(jrpc_span_t key, bool plain)
{
    char buf[64];
    const char *k = key.p;
    size_t n = key.n;
    if (!plain) {
        if (n > sizeof buf)
            return M_OTHER;  /* unescapes to more than 7 bytes */
        n = jrpc_json_unescape(k, n, buf);
        k = buf;
    }
    switch (n) {
    case 2:
        return memcmp(k, "id", 2) == 0 ? M_ID : M_OTHER;
    case 6:
        if (memcmp(k, "method", 6) == 0)
            return M_METHOD;
        return memcmp(k, "params", 6) == 0 ? M_PARAMS : M_OTHER;
    case 7:
        return memcmp(k, "jsonrpc", 7) == 0 ? M_JSONRPC : M_OTHER;
    default:
        return M_OTHER;
    }
}

static bool is_version(jrpc_span_t v, bool plain)
{
    char buf[32];
    if (!plain) {
        if (v.n > sizeof buf)
            return false;
        v.n = jrpc_json_unescape(v.p, v.n, buf);
        v.p = buf;
    }
    return v.n == 3 && memcmp(v.p, "2.0", 3) == 0;
}

/* The four member names as requests spell them: `"id":` and the others,
 * with the colon right after the closing quote. Recognised by their bytes at
 * once (j->p is at the opening quote), past the colon; M_OTHER (nothing
 * consumed) for anything else, which the general path then reads — the same
 * verdict either way, only faster for the bytes every request has. */
static enum member known_key(jrpc_jp_t *j)
{
    const char *p = j->p;
    size_t left = (size_t)(j->end - p);
    if (left < 6)
        return M_OTHER;
    switch (p[1]) {
    case 'i':
        if (memcmp(p, "\"id\":", 5) != 0)
            return M_OTHER;
        j->p = p + 5;
        return M_ID;
    case 'm':
        if (left < 10 || memcmp(p, "\"method\":", 9) != 0)
            return M_OTHER;
        j->p = p + 9;
        return M_METHOD;
    case 'p':
        if (left < 10 || memcmp(p, "\"params\":", 9) != 0)
            return M_OTHER;
        j->p = p + 9;
        return M_PARAMS;
    case 'j':
        if (left < 11 || memcmp(p, "\"jsonrpc\":", 10) != 0)
            return M_OTHER;
        j->p = p + 10;
        return M_JSONRPC;
    default:
        return M_OTHER;
    }
}

/* Notes the plain method name just read; returns whether it is the one
 * read before (whose copy and hint may then be reused). */
static bool method_seen(bparse_t *bp, jrpc_span_t method)
{
    if (bp->prev_raw.p && bp->prev_raw.n == method.n &&
        jrpc_same(bp->prev_raw.p, method.p, method.n))
        return true;
    bp->prev_raw = method;
    bp->prev_copy = (jrpc_span_t){ NULL, 0 };
    bp->prev_hint = -1;
    return false;
}

/* Whether to transcode the params being read: yes unless the hint says the
 * method's workers all take JSON; the method must be known by then (it
 * usually comes first) and plain, or we cannot ask: yes. same: the method
 * is bp->prev_raw (method_seen), whose answer is kept. */
static bool want_msgpack(bparse_t *bp, unsigned seen, jrpc_span_t method, bool plain, bool same)
{
    const jrpc_batch_t *b = bp->b;
    if (b->msgpack_hint == NULL || !(seen & (1u << M_METHOD)) || method.p == NULL || !plain)
        return true;
    if (same && bp->prev_hint >= 0)
        return bp->prev_hint;
    bool v = b->msgpack_hint(b->hint_arg, method);
    bp->prev_hint = v;   /* method is bp->prev_raw: method_seen ran for it */
    return v;
}

/* Reads the params member's value at j->p, an array or an object (the caller
 * saw its first byte): with mp,
 * transcoded to msgpack into the scratch block (even in a request already
 * known to be invalid, so that an out-of-range number is a parse error
 * whatever the member order); without, kept as the client's text only,
 * checked so that it transcodes when sent to a msgpack worker (the same
 * verdict, out-of-range numbers included). */
static int read_params(bparse_t *bp, unsigned depth, bool mp, jrpc_span_t *params,
                       jrpc_span_t *params_mp)
{
    jrpc_jp_t *j = &bp->j;
    const char *start = j->p;
    int rc;
    if (mp) {
        j->w = bp->scratch;
        rc = jrpc_jp_container(j, depth + 1);
        *params_mp = (jrpc_span_t){ bp->scratch, (size_t)(j->w - bp->scratch) };
        bp->scratch = j->w;
        j->w = NULL;
    } else {
        j->range = true;
        rc = jrpc_jp_container(j, depth + 1);
        j->range = false;
    }
    *params = (jrpc_span_t){ start, (size_t)(j->p - start) };
    return rc;
}

#define HEAD_USUAL "{\"jsonrpc\":\"2.0\",\"method\":\""
#define PARAMS_USUAL ",\"params\":"
#define ID_USUAL ",\"id\":"

/* Reads the object at j->p as a request and adds its call. depth is the
 * number of containers open around it. Returns 0, -ENOMEM or a JSON error. */
static int request(bparse_t *bp, unsigned depth)
{
    jrpc_jp_t *j = &bp->j;
    char *mark = bp->scratch;
    unsigned seen = 0;
    bool dup = false, id_dup = false, version_ok = false, method_ok = false;
    bool params_ok = false, id_ok = false, method_plain = true, same = false;
    jrpc_span_t method = { NULL, 0 }, params = { NULL, 0 }, params_mp = { NULL, 0 }, id = id_null;
    int rc;

    if (depth + 1 > j->max_depth)
        return JRPC_JSON_EDEPTH;
    /* The shape nearly every client sends, compact and in this order:
     * {"jsonrpc":"2.0","method":"M","params":P[,"id":I]} with a plain M and
     * P an array or object, read here without the general loop's
     * bookkeeping. At the first byte that differs from that shape, the
     * loop below reads the object again from its start. A JSON error on
     * the way is returned at once: the loop, reading the same members in
     * the same order, would meet the same one. */
    if ((size_t)(j->end - j->p) > sizeof HEAD_USUAL &&
        memcmp(j->p, HEAD_USUAL, sizeof HEAD_USUAL - 1) == 0) {
        const char *obj = j->p;
        j->p += sizeof HEAD_USUAL - 2;   /* the method's opening quote */
        if ((rc = jrpc_jp_string(j, &method, &method_plain)) < 0)
            return rc;
        if (method_plain && (size_t)(j->end - j->p) > sizeof PARAMS_USUAL &&
            memcmp(j->p, PARAMS_USUAL, sizeof PARAMS_USUAL - 1) == 0 &&
            (j->p[sizeof PARAMS_USUAL - 1] == '[' || j->p[sizeof PARAMS_USUAL - 1] == '{')) {
            j->p += sizeof PARAMS_USUAL - 1;
            same = method_seen(bp, method);
            seen = 1u << M_JSONRPC | 1u << M_METHOD | 1u << M_PARAMS;
            if ((rc = read_params(bp, depth, want_msgpack(bp, seen, method, true, same), &params,
                                  &params_mp)) < 0)
                return rc;
            if ((size_t)(j->end - j->p) > sizeof ID_USUAL &&
                memcmp(j->p, ID_USUAL, sizeof ID_USUAL - 1) == 0) {
                j->p += sizeof ID_USUAL - 1;
                jrpc_jp_skip_ws(j);
                if (j->p == j->end)
                    return JRPC_JSON_EINCOMPLETE;
                const char *start = j->p;
                char c = *start;
                jrpc_span_t v;
                bool plain;
                rc = c == '"' ? jrpc_jp_string(j, &v, &plain) : jrpc_jp_value(j, depth + 1);
                if (rc < 0)
                    return rc;
                id = (jrpc_span_t){ start, (size_t)(j->p - start) };
                id_ok = c == '"' || c == 'n' || c == '-' || (c >= '0' && c <= '9');
                seen |= 1u << M_ID;
            }
            if (j->p < j->end && *j->p == '}') {
                version_ok = method_ok = params_ok = true;
                goto end;
            }
        }
        /* Not that shape after all: all over again. */
        j->p = obj;
        bp->scratch = mark;
        seen = 0;
        same = false;
        method_plain = true;
        method = params = params_mp = (jrpc_span_t){ NULL, 0 };
        id = id_null;
        id_ok = false;
    }
    j->p++;
    jrpc_jp_skip_ws(j);
    if (j->p == j->end)
        return JRPC_JSON_EINCOMPLETE;
    if (*j->p != '}') {
        for (;;) {
            jrpc_span_t key, v;
            bool plain;
            if (j->p == j->end)
                return JRPC_JSON_EINCOMPLETE;
            if (*j->p != '"')
                return JRPC_JSON_EMALFORMED;
            enum member kind = known_key(j);
            if (kind == M_OTHER) {   /* the general way: any key, escapes, spaces */
                if ((rc = jrpc_jp_string(j, &key, &plain)) < 0 || (rc = jrpc_jp_colon(j)) < 0)
                    return rc;
                kind = member_kind(key, plain);
            }
            jrpc_jp_skip_ws(j);
            if (j->p == j->end)
                return JRPC_JSON_EINCOMPLETE;

            if (kind != M_OTHER) {
                if (seen & (1u << kind)) {
                    dup = true;
                    id_dup |= kind == M_ID;
                }
                seen |= 1u << kind;
            }
            const char *start = j->p;
            char c = *start;
            switch (kind) {
            case M_JSONRPC:
                if (j->end - j->p >= 5 && memcmp(j->p, "\"2.0\"", 5) == 0) {
                    j->p += 5;          /* the usual value, read at once */
                    version_ok = true;
                    rc = 0;
                } else if (c == '"') {
                    rc = jrpc_jp_string(j, &v, &plain);
                    version_ok = rc == 0 && is_version(v, plain);
                } else {
                    rc = jrpc_jp_value(j, depth + 1);
                    version_ok = false;
                }
                break;
            case M_METHOD:
                method_ok = c == '"';
                rc = method_ok ? jrpc_jp_string(j, &method, &method_plain)
                               : jrpc_jp_value(j, depth + 1);
                same = rc == 0 && method_ok && method_plain && method_seen(bp, method);
                break;
            case M_PARAMS:
                params_ok = c == '[' || c == '{';
                rc = params_ok ? read_params(bp, depth,
                                             want_msgpack(bp, seen, method, method_plain, same),
                                             &params, &params_mp)
                               : jrpc_jp_value(j, depth + 1);
                break;
            case M_ID:   /* a string, the usual id, read without jrpc_jp_value */
                rc = c == '"' ? jrpc_jp_string(j, &v, &plain) : jrpc_jp_value(j, depth + 1);
                id = (jrpc_span_t){ start, (size_t)(j->p - start) };
                id_ok = c == '"' || c == 'n' || c == '-' || (c >= '0' && c <= '9');
                break;
            default:  /* unknown members are read and ignored */
                rc = jrpc_jp_value(j, depth + 1);
                break;
            }
            if (rc < 0)
                return rc;
            if ((rc = jrpc_jp_next(j, '}')) != 0) {
                if (rc < 0)
                    return rc;
                break;
            }
        }
    }
end:
    j->p++;

    bool has_id = seen & (1u << M_ID);
    if (!has_id || !id_ok || id_dup)
        id = id_null;
    bool valid = !dup && version_ok && method_ok &&
                 (!(seen & (1u << M_PARAMS)) || params_ok) && (!has_id || id_ok);
    size_t mn = 0;
    char *m = bp->scratch;
    if (valid && same && bp->prev_copy.n) {   /* the method of the call before */
        m = (char *)bp->prev_copy.p;
        mn = bp->prev_copy.n;
    } else if (valid) {
        if (method_plain) {
            memcpy(m, method.p, method.n);
            mn = method.n;
        } else {
            mn = jrpc_json_unescape(method.p, method.n, m);
        }
        valid = mn > 0 && mn <= bp->lim->max_method_len;
    }
    if (!valid) {
        bp->scratch = mark;  /* its params are not needed */
        return add_invalid(bp, id);
    }
    if (m == bp->scratch) {
        bp->scratch += mn;
        if (method_plain)   /* a copy of bp->prev_raw: method_seen ran for it */
            bp->prev_copy = (jrpc_span_t){ m, mn };
    }

    /* The valid call, written field by field (a compound literal for
     * new_call is zeroed, filled and copied: ~20 instructions a call more).
     * Every member is written: one added to jrpc_call_t must be added here. */
    _Static_assert(sizeof(jrpc_call_t) == 5 * sizeof(jrpc_span_t) + 8,
                   "jrpc_call_t changed: write its new member below");
    jrpc_batch_t *b = bp->b;
    if (b->ncalls == bp->cap && calls_grow(bp) < 0)
        return -ENOMEM;
    jrpc_call_t *call = &b->calls[b->ncalls++];
    call->id = id;
    call->method = (jrpc_span_t){ m, mn };
    call->params = params;
    call->params_mp = params_mp;
    call->answer = (jrpc_span_t){ NULL, 0 };
    call->code = 0;
    call->error = false;
    call->notification = !has_id;
    call->answered = false;
    b->nanswers += has_id;
    if (mn >= 4 && memcmp(m, "rpc.", 4) == 0) {
        if (call->notification) {
            call->answered = true;  /* dropped: never dispatched */
            return 0;
        }
        if (mn == sizeof JRPC_BATCH_DISCOVER - 1 && memcmp(m, JRPC_BATCH_DISCOVER, mn) == 0)
            return 0;   /* the broker answers it itself */
        if ((rc = error_answer(&bp->b->arena, JRPC_METHOD_NOT_FOUND,
                               "rpc.* names are reserved", &call->answer)) < 0)
            return rc;
        call->code = JRPC_METHOD_NOT_FOUND;
        call->error = true;
        call->answered = true;
    }
    return 0;
}

static int batch(bparse_t *bp)
{
    jrpc_jp_t *j = &bp->j;
    bool too_large = false;
    uint32_t n = 0;
    int rc;

    if (j->max_depth < 1)
        return JRPC_JSON_EDEPTH;
    j->p++;
    jrpc_jp_skip_ws(j);
    if (j->p == j->end)
        return JRPC_JSON_EINCOMPLETE;
    if (*j->p == ']') {
        j->p++;
        bp->whole = WHOLE_EMPTY;
        return 0;
    }
    for (;;) {
        if (n == bp->lim->max_batch)
            too_large = true;  /* keep reading: a parse error still wins */
        if (j->p == j->end)
            return JRPC_JSON_EINCOMPLETE;
        if (!too_large && *j->p == '{') {
            rc = request(bp, 1);
        } else {
            rc = jrpc_jp_value(j, 1);
            if (rc == 0 && !too_large)
                rc = add_invalid(bp, id_null);
        }
        if (rc < 0)
            return rc;
        n++;
        if ((rc = jrpc_jp_next(j, ']')) != 0) {
            if (rc < 0)
                return rc;
            break;
        }
    }
    j->p++;
    if (too_large)
        bp->whole = WHOLE_TOO_LARGE;
    else
        bp->b->is_array = true;
    return 0;
}

static int parse_body(bparse_t *bp)
{
    jrpc_jp_t *j = &bp->j;
    int rc;
    jrpc_jp_skip_ws(j);
    if (j->p == j->end)
        return JRPC_JSON_EINCOMPLETE;
    if (*j->p == '{') {
        rc = request(bp, 0);
    } else if (*j->p == '[') {
        rc = batch(bp);
    } else {
        rc = jrpc_jp_value(j, 0);
        bp->whole = WHOLE_NOT_REQUEST;
    }
    if (rc < 0)
        return rc;
    jrpc_jp_skip_ws(j);
    return j->p == j->end ? 0 : JRPC_JSON_EMALFORMED;
}

int jrpc_batch_parse(jrpc_batch_t *b, const char *body, size_t len, const jrpc_limits_t *lim)
{
    assert(b->ncalls == 0);
    bparse_t bp = {
        .j = { .p = body, .end = body + len, .w = NULL, .max_depth = lim->max_depth },
        .b = b,
        .lim = lim,
    };
    bp.scratch = jrpc_arena_alloc(&b->arena, JRPC_JSON_MSGPACK_BOUND(len) + 1);
    if (bp.scratch == NULL)
        return -ENOMEM;

    int rc = parse_body(&bp);
    if (rc == -ENOMEM)
        return rc;
    if (rc == 0 && bp.whole == WHOLE_NONE) {
        /* One object that is not a valid Request: the body itself is. */
        if (!b->is_array && b->ncalls == 1 && b->calls[0].answered &&
            b->calls[0].code == JRPC_INVALID_REQUEST)
            b->body_code = JRPC_INVALID_REQUEST;
        return 0;
    }

    /* The body as a whole gets one error, with id null. */
    b->ncalls = 0;
    b->nanswers = 0;
    b->is_array = false;
    b->body_code = rc == 0 ? JRPC_INVALID_REQUEST : JRPC_PARSE_ERROR;
    jrpc_call_t *c = new_call(&bp, &(jrpc_call_t){ .id = id_null, .code = b->body_code,
                                                   .error = true, .answered = true });
    if (c == NULL)
        return -ENOMEM;
    char data[64];
    switch (rc) {
    case 0:
        if (bp.whole != WHOLE_TOO_LARGE) {
            c->answer = (jrpc_span_t){ LIT(ANSWER_INVALID) };
            return 0;
        }
        return error_answer(&b->arena, JRPC_INVALID_REQUEST, "batch too large", &c->answer);
    case JRPC_JSON_EDEPTH:
        snprintf(data, sizeof data, "nesting depth exceeds %u", lim->max_depth);
        return error_answer(&b->arena, JRPC_PARSE_ERROR, data, &c->answer);
    case JRPC_JSON_ERANGE:
        return error_answer(&b->arena, JRPC_PARSE_ERROR, "number out of range", &c->answer);
    default:
        c->answer = (jrpc_span_t){ LIT(ANSWER_PARSE) };
        return 0;
    }
}

/* ---- answers ---- */

/* A worker's result or error data given as JSON text (a msgpack bin at the
 * top: PROTOCOL.md 2.3): never trusted, checked as strictly as a client's
 * body (numbers that overflow a double included) and as deep as a msgpack
 * result may nest. *text is the value without surrounding whitespace,
 * borrowed from the frame. Returns 0 or a JRPC_JSON_E* code. */
static int json_text(const msgpack_object *bin, jrpc_span_t *text)
{
    return jrpc_json_check(bin->via.bin.ptr, bin->via.bin.size, JRPC_JSON_MAX_DEPTH, text);
}

int jrpc_batch_answer_error(jrpc_batch_t *b, uint32_t i, int code, const char *data)
{
    assert(i < b->ncalls);
    jrpc_call_t *c = &b->calls[i];
    if (c->notification)
        return 0;
    int rc = error_answer(&b->arena, code, data, &c->answer);
    if (rc == 0) {
        c->code = code;
        c->error = true;
        c->answered = true;
    }
    return rc;
}

/* Answers call i with `"result":` and the result's JSON: a bin's bytes
 * (JSON text, PROTOCOL.md 2.3: checked, copied verbatim) when bin, else
 * written from the tree obj or, without one, from the msgpack bytes raw;
 * -32603 when the result has no JSON form. */
static JRPC_ALWAYS_INLINE int result_answer(jrpc_batch_t *b, uint32_t i, const msgpack_object *bin,
                         const msgpack_object *obj, jrpc_span_t raw)
{
    assert(i < b->ncalls);
    jrpc_call_t *c = &b->calls[i];
    if (c->notification)
        return 0;
    size_t n = 0;
    jrpc_span_t text = { NULL, 0 };
    int rc = bin ? json_text(bin, &text)
           : obj ? jrpc_json_msgpack_size(obj, JRPC_JSON_MAX_DEPTH, &n)
                 : jrpc_json_raw_size(raw.p, raw.n, JRPC_JSON_MAX_DEPTH, &n);
    if (rc < 0)
        return jrpc_batch_answer_error(b, i, JRPC_INTERNAL_ERROR, "result has no JSON form");
    if (bin)
        n = text.n;
    char *w0 = jrpc_arena_alloc(&b->arena, sizeof "\"result\":" - 1 + n);
    if (w0 == NULL)
        return -ENOMEM;
    memcpy(w0, LIT("\"result\":"));
    char *w = w0 + sizeof "\"result\":" - 1;
    if (bin) {
        memcpy(w, text.p, text.n);
        w += text.n;
    } else if (obj) {
        w = jrpc_json_msgpack_put(w, obj);
    } else {
        w = jrpc_json_raw_put(w, raw.p, raw.n);
    }
    c->answer = (jrpc_span_t){ w0, (size_t)(w - w0) };
    c->code = 0;
    c->error = false;
    c->answered = true;
    return 0;
}

int jrpc_batch_answer_result(jrpc_batch_t *b, uint32_t i, const msgpack_object *result)
{
    return result_answer(b, i, result->type == MSGPACK_OBJECT_BIN ? result : NULL, result,
                         (jrpc_span_t){ NULL, 0 });
}

int jrpc_batch_answer_result_raw(jrpc_batch_t *b, uint32_t i, jrpc_span_t result)
{
    msgpack_object bin;
    uint64_t count;
    bool is_bin = result.n > 0 && (unsigned char)result.p[0] - 0xc4u < 3 &&   /* bin8/16/32 */
                  jrpc_mpack_read_head(result.p, result.n, &bin, &count) > 0;
    return result_answer(b, i, is_bin ? &bin : NULL, NULL, result);
}

static bool str_is(const msgpack_object *o, const char *s, size_t n)
{
    return o->via.str.size == n && memcmp(o->via.str.ptr, s, n) == 0;
}

int jrpc_batch_answer_error_obj(jrpc_batch_t *b, uint32_t i, const msgpack_object *error)
{
    assert(i < b->ncalls);
    jrpc_call_t *c = &b->calls[i];
    const msgpack_object *code = NULL, *msg = NULL, *data = NULL;
    size_t msg_size, data_size = 0;
    if (c->notification)
        return 0;
    if (error->type != MSGPACK_OBJECT_MAP)
        goto malformed;
    for (uint32_t k = 0; k < error->via.map.size; k++) {
        const msgpack_object *key = &error->via.map.ptr[k].key;
        const msgpack_object **slot;
        if (key->type != MSGPACK_OBJECT_STR)
            goto malformed;
        if (str_is(key, LIT("code")))
            slot = &code;
        else if (str_is(key, LIT("message")))
            slot = &msg;
        else if (str_is(key, LIT("data")))
            slot = &data;
        else
            continue;  /* other members are dropped */
        if (*slot)
            goto malformed;
        *slot = &error->via.map.ptr[k].val;
    }
    if (code == NULL || msg == NULL || msg->type != MSGPACK_OBJECT_STR)
        goto malformed;
    if (!(code->type == MSGPACK_OBJECT_POSITIVE_INTEGER && code->via.u64 <= INT_MAX) &&
        !(code->type == MSGPACK_OBJECT_NEGATIVE_INTEGER && code->via.i64 >= INT_MIN))
        goto malformed;
    if (jrpc_json_string_size(msg->via.str.ptr, msg->via.str.size, &msg_size) < 0)
        goto malformed;
    jrpc_span_t data_text = { NULL, 0 };
    if (data && data->type == MSGPACK_OBJECT_BIN) {
        if (json_text(data, &data_text) < 0)
            goto malformed;
        data_size = data_text.n;
    } else if (data && jrpc_json_msgpack_size(data, JRPC_JSON_MAX_DEPTH, &data_size) < 0) {
        goto malformed;
    }

    size_t room = sizeof ERROR_HEAD + 11 + sizeof ERROR_MESSAGE + msg_size +
                  (data ? sizeof ERROR_DATA + data_size : 0) + 1;
    char *w0 = jrpc_arena_alloc(&b->arena, room);
    if (w0 == NULL)
        return -ENOMEM;
    char *w = error_head_put(w0, (int)code->via.i64, msg->via.str.ptr, msg->via.str.size);
    if (data) {
        memcpy(w, LIT(ERROR_DATA));
        w += sizeof ERROR_DATA - 1;
        if (data_text.p) {
            memcpy(w, data_text.p, data_text.n);
            w += data_text.n;
        } else {
            w = jrpc_json_msgpack_put(w, data);
        }
    }
    *w++ = '}';
    c->answer = (jrpc_span_t){ w0, (size_t)(w - w0) };
    c->code = (int)code->via.i64;
    c->error = true;
    c->answered = true;
    return 0;
malformed:
    return jrpc_batch_answer_error(b, i, JRPC_INTERNAL_ERROR, "worker sent a malformed error");
}

/* Rare (workers answer errors far less often than results): the error is
 * made a tree from its own bytes and checked as one. No depth limit of its
 * own: the frame it came in had one, and members other than "data" (dropped)
 * may nest as deep as that allows. */
int jrpc_batch_answer_error_raw(jrpc_batch_t *b, uint32_t i, jrpc_span_t error)
{
    assert(i < b->ncalls);
    if (b->calls[i].notification)
        return 0;
    msgpack_zone zone;
    msgpack_object o;
    if (!msgpack_zone_init(&zone, 1024))
        return -ENOMEM;
    int rc = jrpc_mpack_unpack(error.p, error.n, SIZE_MAX, &zone, &o);
    if (rc != -ENOMEM)   /* bytes that do not unpack leave o nil: a malformed error */
        rc = jrpc_batch_answer_error_obj(b, i, &o);
    msgpack_zone_destroy(&zone);
    return rc;
}

bool jrpc_batch_expects_reply(const jrpc_batch_t *b)
{
    return b->nanswers > 0;
}

/* A call marked answered without an answer (the caller's fallback when
 * answering ran out of memory) still gets a well-formed error. */
static const jrpc_span_t *answer_of(const jrpc_call_t *c, const jrpc_span_t *lost)
{
    return c->answered && c->answer.n ? &c->answer : lost;
}

#define REPLY_HEAD "{\"jsonrpc\":\"2.0\","
#define REPLY_ID   ",\"id\":"

static const jrpc_span_t answer_lost_span = { LIT(ANSWER_LOST) };

/* Bytes of call c's response object. */
static size_t object_size(const jrpc_call_t *c)
{
    return sizeof REPLY_HEAD - 1 + sizeof REPLY_ID - 1 + answer_of(c, &answer_lost_span)->n
           + c->id.n + 1;
}

/* Writes call c's response object at w (object_size(c) bytes of room);
 * returns the end. The one writer of response objects, for whole replies
 * and streamed answers alike. */
static char *object_put(char *w, const jrpc_call_t *c)
{
    const jrpc_span_t *a = answer_of(c, &answer_lost_span);
    memcpy(w, LIT(REPLY_HEAD));
    w += sizeof REPLY_HEAD - 1;
    jrpc_move(w, a->p, a->n);
    w += a->n;
    memcpy(w, LIT(REPLY_ID));
    w += sizeof REPLY_ID - 1;
    jrpc_move(w, c->id.p, c->id.n);
    w += c->id.n;
    *w++ = '}';
    return w;
}

int jrpc_batch_write_reply(const jrpc_batch_t *b, jrpc_buf_t *out)
{
    size_t room = 2;
    uint32_t n = 0;
    for (uint32_t i = 0; i < b->ncalls; i++) {
        const jrpc_call_t *c = &b->calls[i];
        if (c->notification)
            continue;
        assert(c->answered);
        room += object_size(c) + 1;
        n++;
    }
    if (n == 0)
        return 0;
    assert(b->is_array || n == 1);
    int rc = jrpc_buf_reserve(out, room);
    if (rc < 0)
        return rc;
    char *w = out->p + out->len;
    if (b->is_array)
        *w++ = '[';
    n = 0;
    for (uint32_t i = 0; i < b->ncalls; i++) {
        const jrpc_call_t *c = &b->calls[i];
        if (c->notification)
            continue;
        if (n++)
            *w++ = ',';
        w = object_put(w, c);
    }
    if (b->is_array)
        *w++ = ']';
    out->len = (size_t)(w - out->p);
    return 0;
}

int jrpc_batch_write_answer(const jrpc_batch_t *b, uint32_t i, jrpc_buf_t *out)
{
    const jrpc_call_t *c = &b->calls[i];
    assert(i < b->ncalls && !c->notification && c->answered);
    int rc = jrpc_buf_reserve(out, object_size(c));
    if (rc < 0)
        return rc;
    out->len = (size_t)(object_put(out->p + out->len, c) - out->p);
    return 0;
}

int jrpc_batch_write_error(jrpc_buf_t *out, int code, const char *data)
{
    jrpc_arena_t a;
    jrpc_span_t answer;
    jrpc_arena_init(&a, 256);
    int rc = error_answer(&a, code, data, &answer);
    if (rc == 0 && (rc = jrpc_buf_reserve(out, answer.n + 32)) == 0) {
        jrpc_buf_append(out, LIT(REPLY_HEAD));
        jrpc_buf_append(out, answer.p, answer.n);
        jrpc_buf_append(out, LIT(",\"id\":null}"));
    }
    jrpc_arena_dispose(&a);
    return rc;
}

int jrpc_batch_write_error_json(jrpc_buf_t *out, int code, const char *data_json)
{
    char head[64];
    const char *msg = jrpc_error_message(code);
    size_t len0 = out->len;
    int n = snprintf(head, sizeof head, "%s\"error\":{\"code\":%d,\"message\":", REPLY_HEAD,
                     code);
    int rc = jrpc_buf_append(out, head, (size_t)n);
    if (rc == 0)
        rc = jrpc_json_write_string(out, msg, strlen(msg));
    if (rc == 0 && data_json) {
        if ((rc = jrpc_buf_puts(out, ",\"data\":")) == 0)
            rc = jrpc_buf_puts(out, data_json);
    }
    if (rc == 0)
        rc = jrpc_buf_puts(out, "},\"id\":null}");
    if (rc < 0)
        out->len = len0;
    return rc;
}

/* What jrpc_batch_count() looks at: the bytes that open or close a
 * value, a string's quote, a comma, white space; 0 for every other. */
enum { CC_OTHER, CC_QUOTE, CC_OPEN, CC_CLOSE, CC_COMMA, CC_SPACE };
static const uint8_t count_class[256] = {
    ['"'] = CC_QUOTE, ['['] = CC_OPEN, ['{'] = CC_OPEN, [']'] = CC_CLOSE, ['}'] = CC_CLOSE,
    [','] = CC_COMMA, [' '] = CC_SPACE, ['\t'] = CC_SPACE, ['\n'] = CC_SPACE, ['\r'] = CC_SPACE,
};

uint32_t jrpc_batch_count(const char *body, size_t len)
{
    const uint8_t *u = (const uint8_t *)body;
    size_t i = 0;
    while (i < len && count_class[u[i]] == CC_SPACE)
        i++;
    if (i == len || body[i] != '[')
        return 1;
    uint64_t commas = 0;
    unsigned depth = 0;
    bool any = false;   /* something inside the outer array */
    /* A table lookup a byte (issue 35: a WebSocket message is counted
     * before it starts, and the switch this was cost about 11 instructions
     * a byte). */
    for (; i < len; i++) {
        switch (count_class[u[i]]) {
        case CC_OTHER:
            any = true;
            break;
        case CC_QUOTE:   /* a string: to its closing quote, past escapes */
            for (i++; i < len && u[i] != '"'; i++)
                if (u[i] == '\\')
                    i++;
            any = true;
            break;
        case CC_OPEN:
            if (depth++ > 0)
                any = true;
            break;
        case CC_CLOSE:
            if (depth > 0 && --depth == 0)
                i = len - 1;   /* the outer array is closed: what follows is not counted */
            break;
        case CC_COMMA:
            commas += depth == 1;
            break;
        default:   /* white space */
            break;
        }
    }
    uint64_t n = any ? commas + 1 : 1;
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}
