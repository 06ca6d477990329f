/* json_choice — which JSON code the broker's hot path uses, by measurement.
 *
 * One workload, the same for every contender: a batch of NCALLS small calls
 * like {"jsonrpc":"2.0","method":"add","params":[i,i+1],"id":i}. Per
 * iteration each contender must
 *   1. parse the body strictly,
 *   2. check the JSON-RPC envelope of every element and extract method,
 *      params and id,
 *   3. turn params into msgpack (what the broker sends to workers),
 *   4. turn each call's result, given as msgpack bytes, into JSON,
 *   5. write the whole reply array [{"jsonrpc":"2.0","result":3,"id":..},..].
 * Before timing, each contender's reply and params are compared byte for byte
 * with the expected ones; a contender that differs is reported, not timed.
 *
 * Usage: jrpc-bench-json [--iters N] [--runs R] [--warmup W] [--only NAME]
 * Prints ns per call (per batch element), the median of R runs of N batches.
 * For instruction counts, run one contender under callgrind and collect only
 * inside its iteration function, e.g.
 *   valgrind --tool=callgrind --toggle-collect=iter_ours \
 *     jrpc-bench-json --only ours --iters 200 --runs 1 --warmup 0
 * then divide the collected Ir by (iters + 1) * NCALLS (the +1 is the check). */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <jansson.h>
#include <msgpack.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "jrpc_batch.h"
#include "jrpc_buf.h"
#include "jrpc_json.h"

#define NCALLS 100
#define NOINLINE __attribute__((noinline))

typedef struct bench {
    jrpc_buf_t      body;        /* the request batch, NUL-terminated (not counted in len) */
    jrpc_buf_t      want_reply;  /* the exact reply every contender must write */
    msgpack_sbuffer want_params; /* every call's params as msgpack, concatenated */
    char            result_mp[16]; /* one call's result as msgpack: the integer 3 */
    size_t          result_mp_len; /* bytes used in result_mp */

    msgpack_sbuffer params;      /* competitors' params output, reused per batch */
    msgpack_packer  pk;          /* writes into params */
    msgpack_zone    zone;        /* for decoding results (a fixint needs none) */
    yajl_gen        yg;          /* yajl's writer, reused per batch */
    jrpc_buf_t      out;         /* our reply buffer, reused like the broker's write buffer */

    bool            capture;     /* copy reply and params out (checking, not timing) */
    jrpc_buf_t      got_reply;   /* captured reply */
    jrpc_buf_t      got_params;  /* captured params, concatenated */
    uint64_t        sink;        /* keeps results observable */
} bench_t;

typedef int (*iter_fn)(bench_t *b);

/* ---- the workload ------------------------------------------------------ */

static int id_text(char *out, size_t cap, int i)
{
    if (i % 10 == 3)  /* a few string ids */
        return snprintf(out, cap, "\"req-%d\"", i);
    return snprintf(out, cap, "%d", i == 0 ? 0 : 1000 + i * 37);
}

static int bench_init(bench_t *b)
{
    memset(b, 0, sizeof *b);
    jrpc_buf_init(&b->body);
    jrpc_buf_init(&b->want_reply);
    jrpc_buf_init(&b->got_reply);
    jrpc_buf_init(&b->got_params);
    jrpc_buf_init(&b->out);
    msgpack_sbuffer_init(&b->want_params);
    msgpack_sbuffer_init(&b->params);
    msgpack_packer_init(&b->pk, &b->params, msgpack_sbuffer_write);
    if (!msgpack_zone_init(&b->zone, 256))
        return -ENOMEM;
    if ((b->yg = yajl_gen_alloc(NULL)) == NULL)
        return -ENOMEM;

    msgpack_packer wpk;
    msgpack_packer_init(&wpk, &b->want_params, msgpack_sbuffer_write);
    int rc = 0;
    rc |= jrpc_buf_putc(&b->body, '[');
    rc |= jrpc_buf_putc(&b->want_reply, '[');
    for (int i = 0; i < NCALLS; i++) {
        char id[32], el[160];
        id_text(id, sizeof id, i);
        snprintf(el, sizeof el, "%s{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"params\":[%d,%d],\"id\":%s}",
                 i ? "," : "", i, i + 1, id);
        rc |= jrpc_buf_puts(&b->body, el);
        snprintf(el, sizeof el, "%s{\"jsonrpc\":\"2.0\",\"result\":3,\"id\":%s}", i ? "," : "", id);
        rc |= jrpc_buf_puts(&b->want_reply, el);
        msgpack_pack_array(&wpk, 2);
        msgpack_pack_int(&wpk, i);
        msgpack_pack_int(&wpk, i + 1);
    }
    rc |= jrpc_buf_putc(&b->body, ']');
    rc |= jrpc_buf_putc(&b->want_reply, ']');
    rc |= jrpc_buf_putc(&b->body, '\0');  /* yajl_tree_parse needs it; not part of len */
    if (rc != 0)
        return -ENOMEM;
    b->body.len--;

    msgpack_sbuffer rs;
    msgpack_sbuffer_init(&rs);
    msgpack_packer rpk;
    msgpack_packer_init(&rpk, &rs, msgpack_sbuffer_write);
    msgpack_pack_int(&rpk, 3);
    assert(rs.size <= sizeof b->result_mp);
    memcpy(b->result_mp, rs.data, rs.size);
    b->result_mp_len = rs.size;
    msgpack_sbuffer_destroy(&rs);
    return 0;
}

static void bench_dispose(bench_t *b)
{
    jrpc_buf_dispose(&b->body);
    jrpc_buf_dispose(&b->want_reply);
    jrpc_buf_dispose(&b->got_reply);
    jrpc_buf_dispose(&b->got_params);
    jrpc_buf_dispose(&b->out);
    msgpack_sbuffer_destroy(&b->want_params);
    msgpack_sbuffer_destroy(&b->params);
    msgpack_zone_destroy(&b->zone);
    yajl_gen_free(b->yg);
}

/* Decodes call i's result from msgpack bytes, as the broker does with a
 * worker's reply frame. Same code for every contender. */
static int decode_result(bench_t *b, msgpack_object *o)
{
    size_t off = 0;
    if (msgpack_unpack(b->result_mp, b->result_mp_len, &off, &b->zone, o) != MSGPACK_UNPACK_SUCCESS)
        return -1;
    return 0;
}

static bool is_method_add(const char *s, size_t n)
{
    return n == 3 && memcmp(s, "add", 3) == 0;
}

static void capture_reply(bench_t *b, const char *s, size_t n)
{
    if (!b->capture)
        return;
    b->got_reply.len = 0;
    if (jrpc_buf_append(&b->got_reply, s, n) != 0)
        abort();
}

static void capture_competitor_params(bench_t *b)
{
    if (!b->capture)
        return;
    b->got_params.len = 0;
    if (jrpc_buf_append(&b->got_params, b->params.data, b->params.size) != 0)
        abort();
}

/* ---- jansson ----------------------------------------------------------- */

static void jansson_pack(msgpack_packer *pk, json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *k;
        size_t kn;
        json_t *x;
        msgpack_pack_map(pk, json_object_size(v));
        json_object_keylen_foreach(v, k, kn, x) {
            msgpack_pack_str_with_body(pk, k, kn);
            jansson_pack(pk, x);
        }
        break;
    }
    case JSON_ARRAY: {
        size_t i;
        json_t *x;
        msgpack_pack_array(pk, json_array_size(v));
        json_array_foreach(v, i, x)
            jansson_pack(pk, x);
        break;
    }
    case JSON_STRING:
        msgpack_pack_str_with_body(pk, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER: msgpack_pack_int64(pk, json_integer_value(v)); break;
    case JSON_REAL:    msgpack_pack_double(pk, json_real_value(v)); break;
    case JSON_TRUE:    msgpack_pack_true(pk); break;
    case JSON_FALSE:   msgpack_pack_false(pk); break;
    case JSON_NULL:    msgpack_pack_nil(pk); break;
    }
}

static json_t *jansson_from_mp(const msgpack_object *o)
{
    switch (o->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER: return json_integer((json_int_t)o->via.u64);
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return json_integer(o->via.i64);
    case MSGPACK_OBJECT_FLOAT64:
    case MSGPACK_OBJECT_FLOAT32:          return json_real(o->via.f64);
    case MSGPACK_OBJECT_BOOLEAN:          return json_boolean(o->via.boolean);
    case MSGPACK_OBJECT_NIL:              return json_null();
    case MSGPACK_OBJECT_STR:              return json_stringn(o->via.str.ptr, o->via.str.size);
    default:                              return NULL;  /* not needed by this workload */
    }
}

/* Envelope check shared by the DOM contenders' logic, jansson flavour. */
static int jansson_envelope(json_t *el, json_t **params, json_t **id)
{
    if (!json_is_object(el))
        return -1;
    json_t *v = json_object_get(el, "jsonrpc");
    if (!json_is_string(v) || json_string_length(v) != 3 || memcmp(json_string_value(v), "2.0", 3) != 0)
        return -1;
    json_t *m = json_object_get(el, "method");
    if (!json_is_string(m) || !is_method_add(json_string_value(m), json_string_length(m)))
        return -1;
    *params = json_object_get(el, "params");
    if (*params != NULL && !json_is_array(*params) && !json_is_object(*params))
        return -1;
    *id = json_object_get(el, "id");
    if (*id == NULL || !(json_is_string(*id) || json_is_number(*id) || json_is_null(*id)))
        return -1;
    return 0;
}

NOINLINE static int iter_jansson(bench_t *b)
{
    int rc = -1;
    json_t *reply = NULL;
    json_t *root = json_loadb(b->body.p, b->body.len, 0, NULL);
    if (root == NULL || !json_is_array(root) || json_array_size(root) == 0)
        goto out;
    size_t n = json_array_size(root);
    json_t *ids[NCALLS];
    if (n > NCALLS)
        goto out;
    b->params.size = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *params;
        if (jansson_envelope(json_array_get(root, i), &params, &ids[i]) != 0)
            goto out;
        if (params != NULL)
            jansson_pack(&b->pk, params);
    }
    capture_competitor_params(b);

    reply = json_array();
    for (size_t i = 0; i < n; i++) {
        msgpack_object o;
        if (decode_result(b, &o) != 0)
            goto out;
        json_t *r = json_object();
        json_object_set_new(r, "jsonrpc", json_string("2.0"));
        json_object_set_new(r, "result", jansson_from_mp(&o));
        json_object_set(r, "id", ids[i]);
        json_array_append_new(reply, r);
    }
    char *s = json_dumps(reply, JSON_COMPACT);
    if (s == NULL)
        goto out;
    size_t sn = strlen(s);
    capture_reply(b, s, sn);
    b->sink += sn;
    free(s);
    rc = 0;
out:
    json_decref(reply);
    json_decref(root);
    return rc;
}

/* ---- yajl (tree parser, streaming generator) --------------------------- */

static yajl_val yajl_member(yajl_val obj, const char *name)
{
    for (size_t i = 0; i < obj->u.object.len; i++)
        if (strcmp(obj->u.object.keys[i], name) == 0)
            return obj->u.object.values[i];
    return NULL;
}

static void yajl_pack(msgpack_packer *pk, yajl_val v)
{
    switch (v->type) {
    case yajl_t_object:
        msgpack_pack_map(pk, v->u.object.len);
        for (size_t i = 0; i < v->u.object.len; i++) {
            msgpack_pack_str_with_body(pk, v->u.object.keys[i], strlen(v->u.object.keys[i]));
            yajl_pack(pk, v->u.object.values[i]);
        }
        break;
    case yajl_t_array:
        msgpack_pack_array(pk, v->u.array.len);
        for (size_t i = 0; i < v->u.array.len; i++)
            yajl_pack(pk, v->u.array.values[i]);
        break;
    case yajl_t_string:
        msgpack_pack_str_with_body(pk, v->u.string, strlen(v->u.string));
        break;
    case yajl_t_number:
        if (YAJL_IS_INTEGER(v))
            msgpack_pack_int64(pk, YAJL_GET_INTEGER(v));
        else
            msgpack_pack_double(pk, YAJL_GET_DOUBLE(v));
        break;
    case yajl_t_true:  msgpack_pack_true(pk); break;
    case yajl_t_false: msgpack_pack_false(pk); break;
    default:           msgpack_pack_nil(pk); break;
    }
}

static void yajl_gen_mp(yajl_gen g, const msgpack_object *o)
{
    switch (o->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER: yajl_gen_integer(g, (long long)o->via.u64); break;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: yajl_gen_integer(g, o->via.i64); break;
    case MSGPACK_OBJECT_FLOAT64:
    case MSGPACK_OBJECT_FLOAT32:          yajl_gen_double(g, o->via.f64); break;
    case MSGPACK_OBJECT_BOOLEAN:          yajl_gen_bool(g, o->via.boolean); break;
    case MSGPACK_OBJECT_STR:
        yajl_gen_string(g, (const unsigned char *)o->via.str.ptr, o->via.str.size);
        break;
    default:                              yajl_gen_null(g); break;
    }
}

static void yajl_gen_key(yajl_gen g, const char *k, size_t n)
{
    yajl_gen_string(g, (const unsigned char *)k, n);
}

NOINLINE static int iter_yajl(bench_t *b)
{
    int rc = -1;
    yajl_val root = yajl_tree_parse(b->body.p, NULL, 0);
    if (root == NULL || !YAJL_IS_ARRAY(root) || root->u.array.len == 0 || root->u.array.len > NCALLS)
        goto out;
    size_t n = root->u.array.len;
    yajl_val ids[NCALLS];
    b->params.size = 0;
    for (size_t i = 0; i < n; i++) {
        yajl_val el = root->u.array.values[i];
        if (!YAJL_IS_OBJECT(el))
            goto out;
        yajl_val v = yajl_member(el, "jsonrpc");
        if (!YAJL_IS_STRING(v) || strcmp(v->u.string, "2.0") != 0)
            goto out;
        yajl_val m = yajl_member(el, "method");
        if (!YAJL_IS_STRING(m) || !is_method_add(m->u.string, strlen(m->u.string)))
            goto out;
        yajl_val params = yajl_member(el, "params");
        if (params != NULL && !YAJL_IS_ARRAY(params) && !YAJL_IS_OBJECT(params))
            goto out;
        yajl_val id = yajl_member(el, "id");
        if (id == NULL || !(YAJL_IS_STRING(id) || YAJL_IS_NUMBER(id) || YAJL_IS_NULL(id)))
            goto out;
        ids[i] = id;
        if (params != NULL)
            yajl_pack(&b->pk, params);
    }
    capture_competitor_params(b);

    yajl_gen g = b->yg;
    yajl_gen_clear(g);
    yajl_gen_reset(g, NULL);
    yajl_gen_array_open(g);
    for (size_t i = 0; i < n; i++) {
        msgpack_object o;
        if (decode_result(b, &o) != 0)
            goto out;
        yajl_gen_map_open(g);
        yajl_gen_key(g, "jsonrpc", 7);
        yajl_gen_string(g, (const unsigned char *)"2.0", 3);
        yajl_gen_key(g, "result", 6);
        yajl_gen_mp(g, &o);
        yajl_gen_key(g, "id", 2);
        yajl_val id = ids[i];
        if (YAJL_IS_NUMBER(id))  /* the number's own text: the id as sent */
            yajl_gen_number(g, YAJL_GET_NUMBER(id), strlen(YAJL_GET_NUMBER(id)));
        else if (YAJL_IS_STRING(id))
            yajl_gen_string(g, (const unsigned char *)id->u.string, strlen(id->u.string));
        else
            yajl_gen_null(g);
        yajl_gen_map_close(g);
    }
    yajl_gen_array_close(g);
    const unsigned char *s;
    size_t sn;
    if (yajl_gen_get_buf(g, &s, &sn) != yajl_gen_status_ok)
        goto out;
    capture_reply(b, (const char *)s, sn);
    b->sink += sn;
    rc = 0;
out:
    yajl_tree_free(root);
    return rc;
}

/* ---- cJSON ------------------------------------------------------------- */

static void cjson_pack(msgpack_packer *pk, const cJSON *v)
{
    const cJSON *x;
    if (cJSON_IsObject(v)) {
        msgpack_pack_map(pk, (size_t)cJSON_GetArraySize(v));
        cJSON_ArrayForEach(x, v) {
            msgpack_pack_str_with_body(pk, x->string, strlen(x->string));
            cjson_pack(pk, x);
        }
    } else if (cJSON_IsArray(v)) {
        msgpack_pack_array(pk, (size_t)cJSON_GetArraySize(v));
        cJSON_ArrayForEach(x, v)
            cjson_pack(pk, x);
    } else if (cJSON_IsString(v)) {
        msgpack_pack_str_with_body(pk, v->valuestring, strlen(v->valuestring));
    } else if (cJSON_IsNumber(v)) {
        /* cJSON keeps only a double: an integral value in range is an int. */
        double d = v->valuedouble;
        if (d >= -9007199254740992.0 && d <= 9007199254740992.0 && d == (double)(int64_t)d)
            msgpack_pack_int64(pk, (int64_t)d);
        else
            msgpack_pack_double(pk, d);
    } else if (cJSON_IsTrue(v)) {
        msgpack_pack_true(pk);
    } else if (cJSON_IsFalse(v)) {
        msgpack_pack_false(pk);
    } else {
        msgpack_pack_nil(pk);
    }
}

static cJSON *cjson_from_mp(const msgpack_object *o)
{
    switch (o->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER: return cJSON_CreateNumber((double)o->via.u64);
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return cJSON_CreateNumber((double)o->via.i64);
    case MSGPACK_OBJECT_FLOAT64:
    case MSGPACK_OBJECT_FLOAT32:          return cJSON_CreateNumber(o->via.f64);
    case MSGPACK_OBJECT_BOOLEAN:          return cJSON_CreateBool(o->via.boolean);
    default:                              return cJSON_CreateNull();
    }
}

NOINLINE static int iter_cjson(bench_t *b)
{
    int rc = -1;
    cJSON *reply = NULL;
    /* With require_null_terminated, cJSON rejects trailing bytes only if the
     * length covers the NUL. */
    cJSON *root = cJSON_ParseWithLengthOpts(b->body.p, b->body.len + 1, NULL, 1);
    if (root == NULL || !cJSON_IsArray(root))
        goto out;
    cJSON *ids[NCALLS];
    size_t n = 0;
    const cJSON *el;
    b->params.size = 0;
    cJSON_ArrayForEach(el, root) {
        if (n == NCALLS || !cJSON_IsObject(el))
            goto out;
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(el, "jsonrpc");
        if (!cJSON_IsString(v) || strcmp(v->valuestring, "2.0") != 0)
            goto out;
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(el, "method");
        if (!cJSON_IsString(m) || !is_method_add(m->valuestring, strlen(m->valuestring)))
            goto out;
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(el, "params");
        if (params != NULL && !cJSON_IsArray(params) && !cJSON_IsObject(params))
            goto out;
        cJSON *id = cJSON_GetObjectItemCaseSensitive(el, "id");
        if (id == NULL || !(cJSON_IsString(id) || cJSON_IsNumber(id) || cJSON_IsNull(id)))
            goto out;
        ids[n++] = id;
        if (params != NULL)
            cjson_pack(&b->pk, params);
    }
    if (n == 0)
        goto out;
    capture_competitor_params(b);

    reply = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) {
        msgpack_object o;
        if (decode_result(b, &o) != 0)
            goto out;
        cJSON *r = cJSON_CreateObject();
        cJSON_AddItemToArray(reply, r);
        cJSON_AddStringToObject(r, "jsonrpc", "2.0");
        cJSON_AddItemToObject(r, "result", cjson_from_mp(&o));
        cJSON_AddItemReferenceToObject(r, "id", ids[i]);  /* no deep copy */
    }
    char *s = cJSON_PrintUnformatted(reply);
    if (s == NULL)
        goto out;
    size_t sn = strlen(s);
    capture_reply(b, s, sn);
    b->sink += sn;
    cJSON_free(s);
    rc = 0;
out:
    cJSON_Delete(reply);
    cJSON_Delete(root);
    return rc;
}

/* ---- ours: proto/jrpc_batch ------------------------------------------- */

NOINLINE static int iter_ours(bench_t *b)
{
    static const jrpc_limits_t lim = JRPC_LIMITS_DEFAULT;
    int rc = -1;
    jrpc_batch_t batch;
    jrpc_batch_init(&batch);
    if (jrpc_batch_parse(&batch, b->body.p, b->body.len, &lim) != 0)
        goto out;
    if (!batch.is_array || batch.ncalls == 0)
        goto out;
    if (b->capture)
        b->got_params.len = 0;
    for (uint32_t i = 0; i < batch.ncalls; i++) {
        const jrpc_call_t *c = &batch.calls[i];
        if (c->answered || c->notification || !is_method_add(c->method.p, c->method.n))
            goto out;
        /* Params stay JSON text in the batch; a msgpack worker gets them
         * transcoded when the call is sent (jrpc_wire_put_request_call_json):
         * that cost belongs here, as the other libraries' packing does. */
        if (!b->capture)
            b->got_params.len = 0;
        if (jrpc_json_to_msgpack(c->params.p, c->params.n, 64, &b->got_params) != 0)
            abort();
        b->sink += b->got_params.len;
    }
    for (uint32_t i = 0; i < batch.ncalls; i++) {
        msgpack_object o;
        if (decode_result(b, &o) != 0 || jrpc_batch_answer_result(&batch, i, &o) != 0)
            goto out;
    }
    jrpc_buf_reset(&b->out);
    if (jrpc_batch_write_reply(&batch, &b->out) != 0)
        goto out;
    capture_reply(b, b->out.p, b->out.len);
    b->sink += b->out.len;
    rc = 0;
out:
    jrpc_batch_dispose(&batch);
    return rc;
}

/* ---- driver ------------------------------------------------------------ */

typedef struct contender {
    const char *name;  /* for --only and the table */
    const char *how;   /* what it does, one line */
    iter_fn     fn;    /* one batch: parse, check, params->msgpack, answers, reply */
} contender_t;

static const contender_t contenders[] = {
    { "ours",    "proto/jrpc_batch: one pass, no DOM, raw id spans, msgpack out", iter_ours },
    { "jansson", "json_loadb DOM + json_object/json_dumps(JSON_COMPACT)",        iter_jansson },
    { "yajl",    "yajl_tree_parse DOM + yajl_gen streaming writer",              iter_yajl },
    { "cjson",   "cJSON_ParseWithLengthOpts DOM + cJSON_PrintUnformatted",       iter_cjson },
};

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Runs fn once with capture on and compares with the expected bytes.
 * Returns 0 when identical, -1 (with a line on stderr) otherwise. */
static int check(bench_t *b, const contender_t *c)
{
    fflush(stdout);
    b->capture = true;
    int rc = c->fn(b);
    b->capture = false;
    if (rc != 0) {
        fprintf(stderr, "contender=%s check=failed what=\"iteration returned an error\"\n", c->name);
        return -1;
    }
    if (b->got_reply.len != b->want_reply.len
        || memcmp(b->got_reply.p, b->want_reply.p, b->want_reply.len) != 0) {
        fprintf(stderr, "contender=%s check=failed what=reply got=%.*s\n", c->name,
                (int)(b->got_reply.len > 200 ? 200 : b->got_reply.len), b->got_reply.p);
        return -1;
    }
    if (b->got_params.len != b->want_params.size
        || memcmp(b->got_params.p, b->want_params.data, b->want_params.size) != 0) {
        fprintf(stderr, "contender=%s check=failed what=params got_bytes=%zu want_bytes=%zu\n",
                c->name, b->got_params.len, b->want_params.size);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    long iters = 20000, runs = 5, warmup = 2000;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--iters") == 0)
            iters = atol(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--runs") == 0)
            runs = atol(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--warmup") == 0)
            warmup = atol(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--only") == 0)
            only = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--iters N] [--runs R] [--warmup W] [--only NAME]\n", argv[0]);
            return 2;
        }
    }
    if (iters < 1 || runs < 1 || runs > 99 || warmup < 0) {
        fprintf(stderr, "error=\"iters and runs must be >= 1 (runs <= 99), warmup >= 0\"\n");
        return 2;
    }

    bench_t b;
    if (bench_init(&b) != 0) {
        fprintf(stderr, "error=\"out of memory building the workload\"\n");
        return 1;
    }
    printf("workload: batch of %d calls, body %zu bytes, reply %zu bytes; "
           "%ld batches per run, median of %ld runs\n",
           NCALLS, b.body.len, b.want_reply.len, iters, runs);
    printf("%-8s %10s %10s %10s  %-9s %s\n", "json", "ns/call", "min", "max", "output", "how");

    int failures = 0;
    for (size_t k = 0; k < sizeof contenders / sizeof contenders[0]; k++) {
        const contender_t *c = &contenders[k];
        if (only != NULL && strcmp(only, c->name) != 0)
            continue;
        if (check(&b, c) != 0) {
            printf("%-8s %10s %10s %10s  %-9s %s\n", c->name, "-", "-", "-", "DIFFERS", c->how);
            failures++;
            continue;
        }
        for (long i = 0; i < warmup; i++)
            if (c->fn(&b) != 0)
                abort();
        double per_call[99];
        for (long r = 0; r < runs; r++) {
            double t0 = now_ns();
            for (long i = 0; i < iters; i++)
                if (c->fn(&b) != 0)
                    abort();
            per_call[r] = (now_ns() - t0) / ((double)iters * NCALLS);
        }
        qsort(per_call, (size_t)runs, sizeof per_call[0], cmp_double);
        printf("%-8s %10.1f %10.1f %10.1f  %-9s %s\n", c->name, per_call[runs / 2], per_call[0],
               per_call[runs - 1], "identical", c->how);
        fflush(stdout);
    }
    fprintf(stderr, "sink=%" PRIu64 "\n", b.sink);
    bench_dispose(&b);
    return failures ? 1 : 0;
}
