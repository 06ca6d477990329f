/* jrpc_wire — codec of the broker⇄worker protocol (see PROTOCOL.md).
 *
 * Encoding uses msgpack_packer writing into a jrpc_buf_t; decoding uses our
 * own msgpack decoder (jrpc_mpack_unpack, which allows the nesting
 * JRPC_WIRE_MAX_DEPTH needs) and then checks every field. */
#include "jrpc_wire.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "jrpc_be.h"
#include "jrpc_json.h"
#include "jrpc_mcp_sid.h"
#include "jrpc_mpack.h"

/* ---- encoding ---- */

/* Every msgpack_pack_* returns 0 or -1; -1 only comes from buf_write. */
#define PACK(call)              \
    do {                        \
        if ((call) < 0)         \
            goto nomem;         \
    } while (0)

static int put_head(msgpack_packer *pk, size_t n, int type)
{
    if (msgpack_pack_array(pk, n) < 0 || msgpack_pack_uint8(pk, JRPC_WIRE_VERSION) < 0 ||
        msgpack_pack_uint8(pk, (uint8_t)type) < 0)
        return -ENOMEM;
    return 0;
}

int jrpc_wire_put_ready(jrpc_buf_t *out, uint32_t credit, const char *const *methods,
                        size_t nmethods)
{
    return jrpc_wire_put_ready_opts(out, credit, methods, nmethods, NULL);
}

int jrpc_wire_put_ready_opts(jrpc_buf_t *out, uint32_t credit, const char *const *methods,
                             size_t nmethods, const jrpc_wire_ready_opts_t *opts)
{
    assert(credit >= 1 && nmethods >= 1);
    size_t len0 = out->len;
    bool has_name = opts && opts->name != NULL;
    bool has_idem = opts && opts->nidempotent > 0;
    bool has_json = opts && opts->njson > 0;
    bool has_inst = opts && opts->instance != NULL;
    bool has_svc = opts && opts->service != NULL;
    bool has_sch = opts && opts->schemas != NULL;
    bool has_prb = opts && opts->probes;
    bool any = has_name || has_idem || has_json || has_svc || has_sch || has_inst || has_prb;
    msgpack_packer pk;
    jrpc_mpack_packer_init(&pk, out);
    PACK(put_head(&pk, any ? 5 : 4, JRPC_WIRE_READY));
    PACK(msgpack_pack_uint32(&pk, credit));
    PACK(msgpack_pack_array(&pk, nmethods));
    for (size_t i = 0; i < nmethods; i++) {
        assert(methods[i] != NULL && methods[i][0] != '\0');
        PACK(jrpc_mpack_put_str(&pk, methods[i], strlen(methods[i])));
    }
    if (!any)
        return 0;
    PACK(msgpack_pack_map(&pk, (size_t)has_name + (size_t)has_idem + (size_t)has_json +
                                   (size_t)has_svc + (size_t)has_sch + (size_t)has_inst +
                                   (size_t)has_prb));
    if (has_inst) {
        PACK(jrpc_mpack_put_str(&pk, "instance", 8));
        PACK(jrpc_mpack_put_str(&pk, opts->instance, strlen(opts->instance)));
    }
    if (has_name) {
        PACK(jrpc_mpack_put_str(&pk, "name", 4));
        PACK(jrpc_mpack_put_str(&pk, opts->name, strlen(opts->name)));
    }
    if (has_idem) {
        PACK(jrpc_mpack_put_str(&pk, "idempotent", 10));
        PACK(msgpack_pack_array(&pk, opts->nidempotent));
        for (size_t i = 0; i < opts->nidempotent; i++) {
            assert(opts->idempotent[i] != NULL && opts->idempotent[i][0] != '\0');
            PACK(jrpc_mpack_put_str(&pk, opts->idempotent[i], strlen(opts->idempotent[i])));
        }
    }
    if (has_json) {
        PACK(jrpc_mpack_put_str(&pk, "json", 4));
        PACK(msgpack_pack_array(&pk, opts->njson));
        for (size_t i = 0; i < opts->njson; i++) {
            assert(opts->json[i] != NULL && opts->json[i][0] != '\0');
            PACK(jrpc_mpack_put_str(&pk, opts->json[i], strlen(opts->json[i])));
        }
    }
    if (has_svc) {
        PACK(jrpc_mpack_put_str(&pk, "service", 7));
        PACK(jrpc_mpack_put_str(&pk, opts->service, strlen(opts->service)));
    }
    if (has_sch) {
        PACK(jrpc_mpack_put_str(&pk, "schemas", 7));
        PACK(jrpc_mpack_put_str(&pk, opts->schemas, strlen(opts->schemas)));
    }
    if (has_prb) {
        PACK(jrpc_mpack_put_str(&pk, "probes", 6));
        PACK(msgpack_pack_true(&pk));
    }
    return 0;
nomem:
    out->len = len0;
    return -ENOMEM;
}

static int put_bare(jrpc_buf_t *out, int type)
{
    const char msg[3] = { (char)0x92, JRPC_WIRE_VERSION, (char)type };
    return jrpc_buf_append(out, msg, sizeof msg);
}

int jrpc_wire_put_heartbeat(jrpc_buf_t *out)
{
    return put_bare(out, JRPC_WIRE_HEARTBEAT);
}

int jrpc_wire_put_heartbeat_settings(jrpc_buf_t *out, uint32_t heartbeat_ms, uint32_t liveness)
{
    assert(heartbeat_ms >= JRPC_WIRE_HEARTBEAT_MIN_MS && heartbeat_ms <= JRPC_WIRE_HEARTBEAT_MAX_MS);
    assert(liveness >= 1 && liveness <= JRPC_WIRE_LIVENESS_MAX);
    size_t len0 = out->len;
    msgpack_packer pk;
    jrpc_mpack_packer_init(&pk, out);
    PACK(put_head(&pk, 4, JRPC_WIRE_HEARTBEAT));
    PACK(msgpack_pack_uint32(&pk, heartbeat_ms));
    PACK(msgpack_pack_uint32(&pk, liveness));
    return 0;
nomem:
    out->len = len0;
    return -ENOMEM;
}

int jrpc_wire_put_disconnect(jrpc_buf_t *out)
{
    return put_bare(out, JRPC_WIRE_DISCONNECT);
}

int jrpc_wire_put_reject(jrpc_buf_t *out, uint64_t request)
{
    assert(request >= 1);
    size_t len0 = out->len;
    msgpack_packer pk;
    jrpc_mpack_packer_init(&pk, out);
    PACK(put_head(&pk, 3, JRPC_WIRE_REJECT));
    PACK(msgpack_pack_uint64(&pk, request));
    return 0;
nomem:
    out->len = len0;
    return -ENOMEM;
}

/* [1, type, array32(0)]: the count is patched by _end. The message must start
 * at out->p[0] (the frame buffer holds this one message). */
#define BATCH_HEAD_LEN 8

static int put_batch_begin(jrpc_buf_t *out, int type)
{
    assert(out->len == 0);
    const char head[BATCH_HEAD_LEN] = { (char)0x93, JRPC_WIRE_VERSION, (char)type,
                                        (char)0xdd, 0, 0, 0, 0 };
    return jrpc_buf_append(out, head, sizeof head);
}

static void put_batch_end(jrpc_buf_t *out, int type, uint32_t n)
{
    assert(out->len >= BATCH_HEAD_LEN && (unsigned char)out->p[0] == 0x93 &&
           out->p[2] == (char)type && (unsigned char)out->p[3] == 0xdd);
    (void)type;
    jrpc_be_store32((unsigned char *)out->p + 4, n);
}

int jrpc_wire_put_request_begin(jrpc_buf_t *out)
{
    return put_batch_begin(out, JRPC_WIRE_REQUEST);
}

/* How a REQUEST item's params are given. */
enum params_as {
    PARAMS_MSGPACK,    /* msgpack bytes, copied */
    PARAMS_JSON_BIN,   /* the client's JSON text, sent as a bin */
    PARAMS_TRANSCODE,  /* the client's JSON text, transcoded to msgpack in the frame */
};

/* One REQUEST item, written in place (one reserve, no packer): once per
 * call on the broker's hot path (bench/README.md, "Profile"). params.n == 0:
 * none (nil, or an empty bin). Returns 0, -ENOMEM, or -EINVAL when params
 * do not transcode. */
static JRPC_ALWAYS_INLINE int put_call(jrpc_buf_t *out, jrpc_seq_t seq, jrpc_span_t method, jrpc_span_t params,
                    enum params_as as, uint32_t timeout_ms, jrpc_span_t traceparent,
                    const jrpc_span_t *session)
{
    assert(seq != 0 && method.n > 0 && method.n <= UINT32_MAX && params.n <= UINT32_MAX);
    assert(traceparent.n == 0 || jrpc_traceparent_valid(traceparent.p, traceparent.n));
    size_t pbound = as == PARAMS_JSON_BIN    ? 5 + params.n
                    : as == PARAMS_TRANSCODE ? JRPC_JSON_MSGPACK_BOUND(params.n) + 1
                                             : (params.n ? params.n : 1);
    size_t room = 1 + 9 + 5 + method.n + pbound + 5 + (traceparent.n ? 5 + traceparent.n : 0) +
                  (session ? 6 + session->n : 0);
    if (room > out->cap - out->len && jrpc_buf_reserve(out, room) < 0)
        return -ENOMEM;
    unsigned char *u = (unsigned char *)out->p + out->len;
    *u++ = session ? 0x96 : traceparent.n ? 0x95 : 0x94;  /* array of 6, 5 or 4 */
    u = jrpc_mpack_put_uint(u, seq);
    u = jrpc_mpack_put_str_head(u, (uint32_t)method.n);
    jrpc_move(u, method.p, method.n);
    u += method.n;
    if (as == PARAMS_JSON_BIN)
        u = jrpc_mpack_put_bin_head(u, (uint32_t)params.n);   /* empty: no params */
    if (params.n == 0 && as != PARAMS_JSON_BIN) {
        *u++ = 0xc0;                                  /* nil */
    } else if (as == PARAMS_TRANSCODE) {
        if ((u = (unsigned char *)jrpc_json_msgpack_at((char *)u, params.p, params.n)) == NULL)
            return -EINVAL;
    } else if (params.n) {
        jrpc_move(u, params.p, params.n);
        u += params.n;
    }
    u = jrpc_mpack_put_uint(u, timeout_ms);
    if (traceparent.n) {
        u = jrpc_mpack_put_str_head(u, (uint32_t)traceparent.n);
        memcpy(u, traceparent.p, traceparent.n);
        u += traceparent.n;
    } else if (session) {
        *u++ = 0xc0;                                  /* traceparent nil */
    }
    if (session && session->n) {
        u = jrpc_mpack_put_str_head(u, (uint32_t)session->n);
        memcpy(u, session->p, session->n);
        u += session->n;
    } else if (session) {
        *u++ = 0xc0;
    }
    out->len = (size_t)((char *)u - out->p);
    return 0;
}

int jrpc_wire_put_request_call(jrpc_buf_t *out, jrpc_seq_t seq, jrpc_span_t method,
                               jrpc_span_t params, uint32_t timeout_ms, jrpc_span_t traceparent)
{
    return put_call(out, seq, method, params, PARAMS_MSGPACK, timeout_ms, traceparent, NULL);
}

int jrpc_wire_put_request_call_json(jrpc_buf_t *out, jrpc_seq_t seq, jrpc_span_t method,
                                    jrpc_span_t params, bool as_json, uint32_t timeout_ms,
                                    jrpc_span_t traceparent)
{
    return put_call(out, seq, method, params, as_json ? PARAMS_JSON_BIN : PARAMS_TRANSCODE,
                    timeout_ms, traceparent, NULL);
}

static bool session_ok(const char *p, size_t n)
{
    if (n == 0 || n > JRPC_WIRE_SESSION_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (p[i] < 0x21 || p[i] > 0x7e)
            return false;
    return true;
}

int jrpc_wire_put_request_call_session(jrpc_buf_t *out, jrpc_seq_t seq, jrpc_span_t method,
                                       jrpc_span_t params, bool as_json, uint32_t timeout_ms,
                                       jrpc_span_t traceparent, jrpc_span_t session)
{
    assert(session.n == 0 || session_ok(session.p, session.n));
    return put_call(out, seq, method, params, as_json ? PARAMS_JSON_BIN : PARAMS_TRANSCODE,
                    timeout_ms, traceparent, &session);
}

int jrpc_wire_put_message(jrpc_buf_t *out, jrpc_seq_t seq, jrpc_span_t session, jrpc_span_t body)
{
    assert(session.n == 0 || session_ok(session.p, session.n));
    assert(body.p == NULL || body.n <= JRPC_WIRE_MESSAGE_MAX);
    assert(session.n > 0 || body.p != NULL);
    size_t len0 = out->len;
    msgpack_packer pk;
    jrpc_mpack_packer_init(&pk, out);
    PACK(put_head(&pk, 5, JRPC_WIRE_MESSAGE));
    PACK(msgpack_pack_uint64(&pk, seq));
    if (session.n)
        PACK(jrpc_mpack_put_str(&pk, session.p, session.n));
    else
        PACK(msgpack_pack_nil(&pk));
    if (body.p == NULL) {
        PACK(msgpack_pack_nil(&pk));
    } else {
        PACK(msgpack_pack_bin(&pk, body.n));
        PACK(msgpack_pack_bin_body(&pk, body.p, body.n));
    }
    return 0;
nomem:
    out->len = len0;
    return -ENOMEM;
}

void jrpc_wire_put_request_end(jrpc_buf_t *out, uint32_t ncalls)
{
    put_batch_end(out, JRPC_WIRE_REQUEST, ncalls);
}

int jrpc_wire_put_response_begin(jrpc_buf_t *out)
{
    return put_batch_begin(out, JRPC_WIRE_RESPONSE);
}

int jrpc_wire_put_result_head(jrpc_buf_t *out, jrpc_seq_t seq)
{
    assert(seq != 0);
    if (11 > out->cap - out->len && jrpc_buf_reserve(out, 11) < 0)
        return -ENOMEM;
    unsigned char *u = (unsigned char *)out->p + out->len;
    *u++ = 0x93;                                      /* [seq, 0 (result), */
    u = jrpc_mpack_put_uint(u, seq);
    *u++ = 0;
    out->len = (size_t)((char *)u - out->p);
    return 0;
}

/* An error item; data (n == 0: none) is msgpack bytes, or with as_bin JSON
 * text sent as a bin. */
static int put_error(jrpc_buf_t *out, jrpc_seq_t seq, int code, const char *message,
                     jrpc_span_t data, bool as_bin)
{
    assert(seq != 0 && message != NULL);
    size_t len0 = out->len;
    msgpack_packer pk;
    jrpc_mpack_packer_init(&pk, out);
    PACK(msgpack_pack_array(&pk, 3));
    PACK(msgpack_pack_uint64(&pk, seq));
    PACK(msgpack_pack_uint8(&pk, 1));
    PACK(msgpack_pack_map(&pk, data.n ? 3 : 2));
    PACK(jrpc_mpack_put_str(&pk, "code", 4));
    PACK(msgpack_pack_int(&pk, code));
    PACK(jrpc_mpack_put_str(&pk, "message", 7));
    PACK(jrpc_mpack_put_str(&pk, message, strlen(message)));
    if (data.n) {
        PACK(jrpc_mpack_put_str(&pk, "data", 4));
        if (as_bin) {
            PACK(msgpack_pack_bin(&pk, data.n));
            PACK(msgpack_pack_bin_body(&pk, data.p, data.n));
        } else {
            PACK(jrpc_buf_append(out, data.p, data.n));
        }
    }
    return 0;
nomem:
    out->len = len0;
    return -ENOMEM;
}

int jrpc_wire_put_error(jrpc_buf_t *out, jrpc_seq_t seq, int code, const char *message,
                        jrpc_span_t data)
{
    return put_error(out, seq, code, message, data, false);
}

int jrpc_wire_put_result_json(jrpc_buf_t *out, jrpc_seq_t seq, jrpc_span_t json)
{
    assert(seq != 0 && json.n <= UINT32_MAX);
    size_t room = 11 + 5 + json.n;
    if (room > out->cap - out->len && jrpc_buf_reserve(out, room) < 0)
        return -ENOMEM;
    unsigned char *u = (unsigned char *)out->p + out->len;
    *u++ = 0x93;                                      /* [seq, 0 (result), bin] */
    u = jrpc_mpack_put_uint(u, seq);
    *u++ = 0;
    u = jrpc_mpack_put_bin_head(u, (uint32_t)json.n);
    if (json.n) {
        memcpy(u, json.p, json.n);
        u += json.n;
    }
    out->len = (size_t)((char *)u - out->p);
    return 0;
}

int jrpc_wire_put_error_json(jrpc_buf_t *out, jrpc_seq_t seq, int code, const char *message,
                             jrpc_span_t data_json)
{
    return put_error(out, seq, code, message, data_json, true);
}

void jrpc_wire_put_response_end(jrpc_buf_t *out, uint32_t nanswers)
{
    put_batch_end(out, JRPC_WIRE_RESPONSE, nanswers);
}

int jrpc_wire_put_probe(jrpc_buf_t *out, uint64_t probe, jrpc_span_t session, int live)
{
    assert(probe >= 1 && session.n > 0 && session_ok(session.p, session.n));
    size_t len0 = out->len;
    msgpack_packer pk;
    jrpc_mpack_packer_init(&pk, out);
    PACK(put_head(&pk, 5, JRPC_WIRE_PROBE));
    PACK(msgpack_pack_uint64(&pk, probe));
    PACK(jrpc_mpack_put_str(&pk, session.p, session.n));
    PACK(live < 0 ? msgpack_pack_nil(&pk) : live ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk));
    return 0;
nomem:
    out->len = len0;
    return -ENOMEM;
}

int jrpc_wire_put_schemas(jrpc_buf_t *out, const char *schemas, size_t n)
{
    assert(n <= JRPC_WIRE_SCHEMAS_MAX);
    size_t len0 = out->len;
    msgpack_packer pk;
    jrpc_mpack_packer_init(&pk, out);
    PACK(put_head(&pk, 3, JRPC_WIRE_SCHEMAS));
    PACK(jrpc_mpack_put_str(&pk, schemas, n));
    return 0;
nomem:
    out->len = len0;
    return -ENOMEM;
}

/* ---- decoding ---- */

static int get_uint(const msgpack_object *o, uint64_t max, uint64_t *v)
{
    return jrpc_mpack_get_uint(o, max, v) ? 0 : JRPC_WIRE_EMALFORMED;
}

static bool is_nonempty_str(const msgpack_object *o)
{
    return o->type == MSGPACK_OBJECT_STR && o->via.str.size > 0;
}

/* The READY options we know are checked like the header frame's: a known
 * key with the wrong type, or given twice, is malformed (the broker must
 * never guess which methods it may run twice); other keys are ignored. */
static bool is_name_array(const msgpack_object *v)
{
    if (v->type != MSGPACK_OBJECT_ARRAY)
        return false;
    for (uint32_t j = 0; j < v->via.array.size; j++)
        if (!is_nonempty_str(&v->via.array.ptr[j]))
            return false;
    return true;
}

static int decode_ready_options(const msgpack_object *options, const msgpack_object **idempotent,
                                const msgpack_object **json, const msgpack_object **service,
                                const msgpack_object **schemas, jrpc_wire_msg_t *m)
{
    bool seen_name = false, seen_probes = false;
    for (uint32_t i = 0; i < options->via.map.size; i++) {
        const msgpack_object *k = &options->via.map.ptr[i].key;
        const msgpack_object *v = &options->via.map.ptr[i].val;
        if (k->type != MSGPACK_OBJECT_STR)
            return JRPC_WIRE_EMALFORMED;
        if (jrpc_mpack_str_is(k, "name")) {
            if (seen_name || v->type != MSGPACK_OBJECT_STR)
                return JRPC_WIRE_EMALFORMED;
            seen_name = true;
        } else if (jrpc_mpack_str_is(k, "idempotent")) {
            if (*idempotent != NULL || !is_name_array(v))
                return JRPC_WIRE_EMALFORMED;
            *idempotent = v;
        } else if (jrpc_mpack_str_is(k, "json")) {
            if (*json != NULL || !is_name_array(v))
                return JRPC_WIRE_EMALFORMED;
            *json = v;
        } else if (jrpc_mpack_str_is(k, "instance")) {
            if (m->has_instance || v->type != MSGPACK_OBJECT_STR ||
                jrpc_mcp_instance_parse(v->via.str.ptr, v->via.str.size, &m->instance) < 0)
                return JRPC_WIRE_EMALFORMED;
            m->has_instance = true;
        } else if (jrpc_mpack_str_is(k, "service")) {
            if (*service != NULL || v->type != MSGPACK_OBJECT_STR)
                return JRPC_WIRE_EMALFORMED;
            *service = v;
        } else if (jrpc_mpack_str_is(k, "schemas")) {
            if (*schemas != NULL || v->type != MSGPACK_OBJECT_STR)
                return JRPC_WIRE_EMALFORMED;
            *schemas = v;
        } else if (jrpc_mpack_str_is(k, "probes")) {
            if (seen_probes || v->type != MSGPACK_OBJECT_BOOLEAN)
                return JRPC_WIRE_EMALFORMED;
            seen_probes = true;
            m->probes = v->via.boolean;
        }
    }
    return 0;
}

static int decode_ready(const msgpack_object_array *a, jrpc_wire_msg_t *m)
{
    if (a->size < 4)
        return JRPC_WIRE_EMALFORMED;
    uint64_t credit;
    if (get_uint(&a->ptr[2], UINT32_MAX, &credit) < 0 || credit == 0)
        return JRPC_WIRE_EMALFORMED;
    const msgpack_object *methods = &a->ptr[3];
    if (methods->type != MSGPACK_OBJECT_ARRAY || methods->via.array.size == 0)
        return JRPC_WIRE_EMALFORMED;
    for (uint32_t i = 0; i < methods->via.array.size; i++)
        if (!is_nonempty_str(&methods->via.array.ptr[i]))
            return JRPC_WIRE_EMALFORMED;
    const msgpack_object *options = NULL, *idempotent = NULL, *json = NULL, *service = NULL,
                         *schemas = NULL;
    if (a->size >= 5 && a->ptr[4].type != MSGPACK_OBJECT_NIL) {
        if (a->ptr[4].type != MSGPACK_OBJECT_MAP)
            return JRPC_WIRE_EMALFORMED;
        options = &a->ptr[4];
        if (decode_ready_options(options, &idempotent, &json, &service, &schemas, m) < 0)
            return JRPC_WIRE_EMALFORMED;
    }
    m->credit = (uint32_t)credit;
    m->methods = methods;
    m->options = options;
    m->idempotent = idempotent;
    m->json = json;
    m->service = service;
    m->schemas = schemas;
    return 0;
}

/* [1, 4] or [1, 4, heartbeat_ms, liveness]; nil settings are absent ones. */
static int decode_heartbeat(const msgpack_object_array *a, jrpc_wire_msg_t *m)
{
    if (a->size < 3 || a->ptr[2].type == MSGPACK_OBJECT_NIL)
        return 0;
    uint64_t hb, live;
    if (a->size < 4 || get_uint(&a->ptr[2], JRPC_WIRE_HEARTBEAT_MAX_MS, &hb) < 0 ||
        hb < JRPC_WIRE_HEARTBEAT_MIN_MS || get_uint(&a->ptr[3], JRPC_WIRE_LIVENESS_MAX, &live) < 0 ||
        live == 0)
        return JRPC_WIRE_EMALFORMED;
    m->heartbeat_ms = (uint32_t)hb;
    m->liveness = (uint32_t)live;
    return 0;
}

static int decode_reject(const msgpack_object_array *a, jrpc_wire_msg_t *m)
{
    uint64_t request;
    if (a->size < 3 || get_uint(&a->ptr[2], UINT64_MAX, &request) < 0 || request == 0)
        return JRPC_WIRE_EMALFORMED;
    m->request = request;
    return 0;
}

/* A session: nil (n == 0) or a str of 1..JRPC_WIRE_SESSION_MAX visible ASCII. */
static int get_session(const msgpack_object *o, jrpc_span_t *s)
{
    s->p = NULL;
    s->n = 0;
    if (o->type == MSGPACK_OBJECT_NIL)
        return 0;
    if (o->type != MSGPACK_OBJECT_STR || !session_ok(o->via.str.ptr, o->via.str.size))
        return JRPC_WIRE_EMALFORMED;
    s->p = o->via.str.ptr;
    s->n = o->via.str.size;
    return 0;
}

/* [1, 7, seq, session, body]: session and body not both nil. */
static int decode_message(const msgpack_object_array *a, jrpc_wire_msg_t *m)
{
    uint64_t seq;
    if (a->size < 5 || get_uint(&a->ptr[2], UINT64_MAX, &seq) < 0 ||
        get_session(&a->ptr[3], &m->session) < 0)
        return JRPC_WIRE_EMALFORMED;
    const msgpack_object *b = &a->ptr[4];
    if (b->type == MSGPACK_OBJECT_BIN) {
        if (b->via.bin.size > JRPC_WIRE_MESSAGE_MAX)
            return JRPC_WIRE_EMALFORMED;
        m->body.p = b->via.bin.size ? b->via.bin.ptr : "";
        m->body.n = b->via.bin.size;
    } else if (b->type != MSGPACK_OBJECT_NIL || m->session.n == 0) {
        return JRPC_WIRE_EMALFORMED;
    }
    m->seq = seq;
    return 0;
}

/* [1, 9, probe, session, live]: probe >= 1, a session (not nil), live nil
 * or a bool. */
static int decode_probe(const msgpack_object_array *a, jrpc_wire_msg_t *m)
{
    uint64_t probe;
    if (a->size < 5 || get_uint(&a->ptr[2], UINT64_MAX, &probe) < 0 || probe == 0 ||
        get_session(&a->ptr[3], &m->session) < 0 || m->session.n == 0)
        return JRPC_WIRE_EMALFORMED;
    const msgpack_object *l = &a->ptr[4];
    if (l->type == MSGPACK_OBJECT_NIL)
        m->live = -1;
    else if (l->type == MSGPACK_OBJECT_BOOLEAN)
        m->live = l->via.boolean;
    else
        return JRPC_WIRE_EMALFORMED;
    m->probe = probe;
    return 0;
}

/* [1, 8, schemas]: a str (its JSON is the broker's to check). */
static int decode_schemas(const msgpack_object_array *a, jrpc_wire_msg_t *m)
{
    if (a->size < 3 || a->ptr[2].type != MSGPACK_OBJECT_STR)
        return JRPC_WIRE_EMALFORMED;
    m->schemas = &a->ptr[2];
    return 0;
}

static int decode_items(const msgpack_object_array *a, jrpc_wire_msg_t *m)
{
    if (a->size < 3)
        return JRPC_WIRE_EMALFORMED;
    const msgpack_object *items = &a->ptr[2];
    if (items->type != MSGPACK_OBJECT_ARRAY || items->via.array.size == 0)
        return JRPC_WIRE_EMALFORMED;
    m->items = items;
    m->nitems = items->via.array.size;
    return 0;
}

int jrpc_wire_decode(const char *buf, size_t n, msgpack_zone *zone, jrpc_wire_msg_t *m)
{
    memset(m, 0, sizeof *m);
    msgpack_object root;
    int rc = jrpc_mpack_unpack(buf, n, JRPC_WIRE_MAX_DEPTH, zone, &root);
    if (rc < 0)
        return rc == -ENOMEM ? rc : JRPC_WIRE_EMALFORMED;
    if (root.type != MSGPACK_OBJECT_ARRAY || root.via.array.size < 1)
        return JRPC_WIRE_EMALFORMED;
    const msgpack_object_array *a = &root.via.array;
    /* The version is checked first: another version may change the rest. */
    if (a->ptr[0].type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        return JRPC_WIRE_EVERSION;
    if (a->ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return JRPC_WIRE_EMALFORMED;
    if (a->ptr[0].via.u64 != JRPC_WIRE_VERSION)
        return JRPC_WIRE_EVERSION;
    uint64_t type;
    if (a->size < 2 || get_uint(&a->ptr[1], JRPC_WIRE_PROBE, &type) < 0)
        return JRPC_WIRE_EMALFORMED;
    switch (type) {
    case JRPC_WIRE_READY:
        rc = decode_ready(a, m);
        break;
    case JRPC_WIRE_REQUEST:
    case JRPC_WIRE_RESPONSE:
        rc = decode_items(a, m);
        break;
    case JRPC_WIRE_HEARTBEAT:
        rc = decode_heartbeat(a, m);
        break;
    case JRPC_WIRE_DISCONNECT:
        rc = 0;
        break;
    case JRPC_WIRE_REJECT:
        rc = decode_reject(a, m);
        break;
    case JRPC_WIRE_MESSAGE:
        rc = decode_message(a, m);
        break;
    case JRPC_WIRE_SCHEMAS:
        rc = decode_schemas(a, m);
        break;
    case JRPC_WIRE_PROBE:
        rc = decode_probe(a, m);
        break;
    default:
        rc = JRPC_WIRE_EMALFORMED;
        break;
    }
    if (rc < 0) {
        memset(m, 0, sizeof *m);
        return rc;
    }
    m->type = (int)type;
    return 0;
}

int jrpc_wire_peek_type(const char *buf, size_t n)
{
    size_t pos = 0;
    msgpack_object o;
    uint64_t count = 0, v[2];
    int64_t used;
    if ((used = jrpc_mpack_head(buf, n, &o, &count)) < 0 ||
        o.type != MSGPACK_OBJECT_ARRAY || count < 2)
        return JRPC_WIRE_EMALFORMED;
    pos = (size_t)used;
    for (int k = 0; k < 2; k++) {
        if ((used = jrpc_mpack_head(buf + pos, n - pos, &o, &count)) < 0)
            return JRPC_WIRE_EMALFORMED;
        pos += (size_t)used;
        if (k == 0 && o.type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
            return JRPC_WIRE_EVERSION;
        if (o.type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            return JRPC_WIRE_EMALFORMED;
        v[k] = o.via.u64;
        if (k == 0 && v[0] != JRPC_WIRE_VERSION)
            return JRPC_WIRE_EVERSION;
    }
    return v[1] > INT32_MAX ? INT32_MAX : (int)v[1];
}

static const msgpack_object_array *item_array(const jrpc_wire_msg_t *m, uint32_t i,
                                              uint32_t min_size)
{
    assert(m->items != NULL && i < m->nitems);
    const msgpack_object *it = &m->items->via.array.ptr[i];
    if (it->type != MSGPACK_OBJECT_ARRAY || it->via.array.size < min_size)
        return NULL;
    return &it->via.array;
}

int jrpc_wire_request_item(const jrpc_wire_msg_t *m, uint32_t i, jrpc_wire_call_t *c)
{
    assert(m->type == JRPC_WIRE_REQUEST);
    memset(c, 0, sizeof *c);
    const msgpack_object_array *a = item_array(m, i, 4);
    if (a == NULL)
        return JRPC_WIRE_EMALFORMED;
    uint64_t seq, timeout;
    if (get_uint(&a->ptr[0], UINT64_MAX, &seq) < 0 || seq == 0)
        return JRPC_WIRE_EMALFORMED;
    if (!is_nonempty_str(&a->ptr[1]))
        return JRPC_WIRE_EMALFORMED;
    const msgpack_object *params = &a->ptr[2];
    if (params->type != MSGPACK_OBJECT_NIL && params->type != MSGPACK_OBJECT_ARRAY &&
        params->type != MSGPACK_OBJECT_MAP && params->type != MSGPACK_OBJECT_BIN)
        return JRPC_WIRE_EMALFORMED;
    if (params->type == MSGPACK_OBJECT_BIN) {   /* JSON text: the worker declared "json" */
        c->json = true;
        c->params_json.p = params->via.bin.ptr;
        c->params_json.n = params->via.bin.size;
    }
    if (get_uint(&a->ptr[3], UINT32_MAX, &timeout) < 0)
        return JRPC_WIRE_EMALFORMED;
    if (a->size >= 5 && a->ptr[4].type != MSGPACK_OBJECT_NIL) {
        const msgpack_object *tp = &a->ptr[4];
        if (tp->type != MSGPACK_OBJECT_STR ||
            !jrpc_traceparent_valid(tp->via.str.ptr, tp->via.str.size))
            return JRPC_WIRE_EMALFORMED;
        c->traceparent.p = tp->via.str.ptr;
        c->traceparent.n = tp->via.str.size;
    }
    if (a->size >= 6) {
        if (get_session(&a->ptr[5], &c->session) < 0)
            return JRPC_WIRE_EMALFORMED;
        c->messages = true;
    }
    c->seq = seq;
    c->method.p = a->ptr[1].via.str.ptr;
    c->method.n = a->ptr[1].via.str.size;
    c->params = params;
    c->timeout_ms = (uint32_t)timeout;
    return 0;
}

int jrpc_wire_request_item_seq(const jrpc_wire_msg_t *m, uint32_t i, jrpc_seq_t *seq)
{
    assert(m->type == JRPC_WIRE_REQUEST);
    uint64_t v;
    const msgpack_object_array *a = item_array(m, i, 1);
    if (a == NULL || get_uint(&a->ptr[0], UINT64_MAX, &v) < 0 || v == 0)
        return JRPC_WIRE_EMALFORMED;
    *seq = v;
    return 0;
}

int jrpc_wire_response_item(const jrpc_wire_msg_t *m, uint32_t i, jrpc_wire_answer_t *an)
{
    assert(m->type == JRPC_WIRE_RESPONSE);
    memset(an, 0, sizeof *an);
    const msgpack_object_array *a = item_array(m, i, 3);
    if (a == NULL)
        return JRPC_WIRE_EMALFORMED;
    uint64_t seq, flag;
    if (get_uint(&a->ptr[0], UINT64_MAX, &seq) < 0 || seq == 0)
        return JRPC_WIRE_EMALFORMED;
    if (get_uint(&a->ptr[1], 1, &flag) < 0)
        return JRPC_WIRE_EMALFORMED;
    if (flag == 1 && a->ptr[2].type != MSGPACK_OBJECT_MAP)
        return JRPC_WIRE_EMALFORMED;
    an->seq = seq;
    an->is_error = flag == 1;
    an->value = &a->ptr[2];
    return 0;
}

/* ---- RESPONSE frames read in place ---- */

/* The head of the value at *p (inside a checked frame), *p moved past it. */
static bool head_at(const char **p, const char *end, msgpack_object *o, uint64_t *count)
{
    if (*p == end)
        return false;
    int64_t used = jrpc_mpack_read_head(*p, (size_t)(end - *p), o, count);
    if (used < 0)
        return false;
    *p += used;
    return true;
}

/* Checking the frame as jrpc_mpack_check() would, item by item: an item
 * of three scalars (nearly all of them) by its first bytes, any other with
 * the general walk at the depth it sits at (the frame's own array, then the
 * items', then the item's). */
static int check_items(const char *p, const char *end, uint64_t nitems, uint64_t rest)
{
    for (uint64_t k = 0; k < nitems; k++) {
        const unsigned char *u = (const unsigned char *)p;
        size_t avail = (size_t)(end - p), s1, s2, s3;
        if (avail >= 4 && u[0] == 0x93 && (s1 = jrpc_mpack_scalar_size[u[1]]) != 0 &&
            avail >= 3 + s1 && (s2 = jrpc_mpack_scalar_size[u[1 + s1]]) != 0 &&
            avail >= 2 + s1 + s2 && (s3 = jrpc_mpack_scalar_size[u[1 + s1 + s2]]) != 0 &&
            avail >= 1 + s1 + s2 + s3) {
            p += 1 + s1 + s2 + s3;
            continue;
        }
        int64_t used = jrpc_mpack_check_values(p, avail, 1, JRPC_WIRE_MAX_DEPTH - 2);
        if (used < 0)
            return (int)used;
        p += used;
    }
    int64_t used = jrpc_mpack_check_values(p, (size_t)(end - p), rest, JRPC_WIRE_MAX_DEPTH - 1);
    if (used < 0)
        return (int)used;
    return p + used == end ? 0 : JRPC_MPACK_EMALFORMED;
}

int jrpc_wire_response_open(const char *buf, size_t n, jrpc_wire_rsp_t *r)
{
    const char *p = buf, *end = buf + n;
    msgpack_object o;
    uint64_t count, unused, nitems;
    if (buf == NULL || !head_at(&p, end, &o, &count) || o.type != MSGPACK_OBJECT_ARRAY ||
        count < 2 || !head_at(&p, end, &o, &unused) ||
        o.type != MSGPACK_OBJECT_POSITIVE_INTEGER || o.via.u64 != JRPC_WIRE_VERSION ||
        !head_at(&p, end, &o, &unused) || o.type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
        o.via.u64 != JRPC_WIRE_RESPONSE)
        return 1;
    /* From here on jrpc_wire_decode() has only EMALFORMED (or -ENOMEM) to
     * say, whichever fault comes first. */
    int rc;
    if (count < 3 || !head_at(&p, end, &o, &nitems) || o.type != MSGPACK_OBJECT_ARRAY ||
        nitems == 0) {
        rc = jrpc_mpack_check(buf, n, JRPC_WIRE_MAX_DEPTH);
        return rc == -ENOMEM ? rc : JRPC_WIRE_EMALFORMED;
    }
    rc = check_items(p, end, nitems, count - 3);
    if (rc < 0)
        return rc == -ENOMEM ? rc : JRPC_WIRE_EMALFORMED;
    *r = (jrpc_wire_rsp_t){ .p = p, .end = end, .nitems = (uint32_t)nitems, .next = 0 };
    return 0;
}

/* The element of an item at r->p: *owed counts the values after it still
 * inside the item, its own elements included when it is a container. */
static bool item_elem(jrpc_wire_rsp_t *r, msgpack_object *o, uint64_t *owed)
{
    uint64_t count;
    if (!head_at(&r->p, r->end, o, &count))
        return false;
    *owed += jrpc_mpack_slots(o, count) - 1;
    return true;
}

/* Any item, element by element (what the fast path below leaves). Not
 * inlined: its registers would make every call of the fast path pay. */
__attribute__((noinline)) static int next_item(jrpc_wire_rsp_t *r, jrpc_wire_answer_raw_t *a)
{
    msgpack_object o;
    uint64_t owed = 1;   /* values left of this item, itself included */
    int rc = JRPC_WIRE_EMALFORMED;
    if (!item_elem(r, &o, &owed))
        goto broken;
    if (o.type != MSGPACK_OBJECT_ARRAY || owed < 3)
        goto skip;
    if (!item_elem(r, &o, &owed))
        goto broken;
    if (o.type != MSGPACK_OBJECT_POSITIVE_INTEGER || o.via.u64 == 0)
        goto skip;
    jrpc_seq_t seq = o.via.u64;
    if (!item_elem(r, &o, &owed))
        goto broken;
    if (o.type != MSGPACK_OBJECT_POSITIVE_INTEGER || o.via.u64 > 1)
        goto skip;
    bool is_error = o.via.u64 == 1;
    const char *value = r->p;
    uint64_t before = owed;
    if (!item_elem(r, &o, &owed))
        goto broken;
    if (is_error && o.type != MSGPACK_OBJECT_MAP)
        goto skip;
    int64_t inside = jrpc_mpack_skip(r->p, (size_t)(r->end - r->p), owed - (before - 1));
    if (inside < 0)
        goto broken;
    r->p += inside;
    owed = before - 1;
    a->seq = seq;
    a->is_error = is_error;
    a->value = (jrpc_span_t){ value, (size_t)(r->p - value) };
    rc = 0;
skip:
    if (owed > 0) {
        int64_t rest = jrpc_mpack_skip(r->p, (size_t)(r->end - r->p), owed);
        if (rest < 0)
            goto broken;
        r->p += rest;
    }
    return rc;
broken:   /* only in a frame jrpc_wire_response_open() did not check: read no further */
    r->p = r->end;
    r->next = r->nitems;
    return JRPC_WIRE_EMALFORMED;
}

/* The fast path: nearly every item is [seq, 0, value] as a fixarray, seq a
 * positive fixint or uint8..64 (what every encoder writes), value a scalar
 * or a container skipped whole; anything else goes element by element. */
int jrpc_wire_response_next(jrpc_wire_rsp_t *r, jrpc_wire_answer_raw_t *a)
{
    assert(r->next < r->nitems);
    r->next++;
    const unsigned char *u = (const unsigned char *)r->p;
    size_t avail = (size_t)(r->end - r->p);
    if (avail >= 4 && u[0] == 0x93 && (u[1] <= 0x7f || (u[1] >= 0xcc && u[1] <= 0xcf))) {
        size_t sl = jrpc_mpack_scalar_size[u[1]];
        jrpc_seq_t seq = 0;
        if (avail >= 3 + sl)   /* the broker's seqs are uint64 (generation << 32 | slot) */
            seq = sl == 1 ? u[1] : u[1] == 0xcf ? jrpc_be_load64(u + 2)
                                                : jrpc_be_load(u + 2, (int)sl - 1);
        if (seq != 0 && u[1 + sl] == 0) {
            const char *v = (const char *)u + 2 + sl;
            size_t left = avail - 2 - sl;
            int64_t vl = jrpc_mpack_scalar_size[u[2 + sl]];
            if (vl == 0 && (vl = jrpc_mpack_skip(v, left, 1)) < 0)
                vl = (int64_t)left + 1;
            if ((size_t)vl <= left) {
                a->seq = seq;
                a->is_error = false;
                a->value = (jrpc_span_t){ v, (size_t)vl };
                r->p = v + vl;
                return 0;
            }
        }
    }
    return next_item(r, a);
}

const char *jrpc_wire_strerror(int rc)
{
    switch (rc) {
    case 0:                    return "success";
    case JRPC_WIRE_EMALFORMED: return "malformed worker-protocol frame";
    case JRPC_WIRE_EVERSION:   return "unsupported worker-protocol version";
    case -ENOMEM:              return "out of memory";
    default:                   return "unknown error";
    }
}
