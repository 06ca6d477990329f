/* fuzz_body — libFuzzer target for the JSON-RPC body parser (proto/jrpc_batch).
 *
 * Each input is one request body: jrpc_batch_parse(), then every call that
 * expects an answer is answered (a fixed result, its own params echoed back,
 * or a worker-style error object, by call index), then the reply is written.
 * Invariants, checked with abort() so libFuzzer reports a crash:
 *  - parse returns 0 (-ENOMEM aside) and the batch is consistent (ids set,
 *    valid calls have a method, ncalls >= 1);
 *  - every call's params (n > 0) are a span of the body that
 *    jrpc_json_check() accepts as an array or object; transcoded as the
 *    broker does for a msgpack worker (jrpc_json_msgpack_at), they decode
 *    as exactly one msgpack value, with jrpc_mpack_unpack() and, when
 *    shallow enough, msgpack-c's unpacker agrees; answering with them as
 *    JSON text (a bin, as a json worker's echo does) copies them;
 *  - the reply is valid JSON (jrpc_json_validate) when anything expects one,
 *    and empty otherwise. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <msgpack.h>

#include "jrpc_batch.h"
#include "jrpc_json.h"
#include "jrpc_mpack.h"
#include "jrpc_wire.h"

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "fuzz_body: invariant failed: %s (%s:%d)\n", #cond,      \
                    __FILE__, __LINE__);                                             \
            abort();                                                                 \
        }                                                                            \
    } while (0)

static bool hint(void *arg, jrpc_span_t method)
{
    (void)arg;
    return method.n == 0 || method.p[0] != 'a';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A worker-style error object: {"code":-32000,"message":"boom","data":<params>}. */
static void answer_error(jrpc_batch_t *b, uint32_t i, const msgpack_object *data)
{
    msgpack_object_kv kv[3];
    kv[0].key = (msgpack_object){ .type = MSGPACK_OBJECT_STR, .via.str = { 4, "code" } };
    kv[0].val = (msgpack_object){ .type = MSGPACK_OBJECT_NEGATIVE_INTEGER, .via.i64 = -32000 };
    kv[1].key = (msgpack_object){ .type = MSGPACK_OBJECT_STR, .via.str = { 7, "message" } };
    kv[1].val = (msgpack_object){ .type = MSGPACK_OBJECT_STR, .via.str = { 4, "boom" } };
    kv[2].key = (msgpack_object){ .type = MSGPACK_OBJECT_STR, .via.str = { 4, "data" } };
    kv[2].val = *data;
    msgpack_object err = { .type = MSGPACK_OBJECT_MAP, .via.map = { 3, kv } };
    CHECK(jrpc_batch_answer_error_obj(b, i, &err) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exact-size copy: an over-read past the body trips ASan. */
    char *body = malloc(size ? size : 1);
    CHECK(body != NULL);
    memcpy(body, data, size);

    jrpc_limits_t lim = JRPC_LIMITS_DEFAULT;
    jrpc_batch_t b;
    jrpc_batch_init(&b);
    jrpc_buf_t out;
    jrpc_buf_init(&out);
    jrpc_buf_t mp;   /* params as a msgpack worker gets them */
    jrpc_buf_init(&mp);
    msgpack_zone zone;
    CHECK(msgpack_zone_init(&zone, 1024));

    if (size % 2) {   /* the broker's hint: calls of "a..." methods stay text only */
        b.msgpack_hint = hint;
        b.hint_arg = NULL;
    }
    int rc = jrpc_batch_parse(&b, body, size, &lim);
    CHECK(rc == 0);
    CHECK(b.ncalls >= 1 && b.calls != NULL);

    const msgpack_object fixed = { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = 19 };
    for (uint32_t i = 0; i < b.ncalls; i++) {
        jrpc_call_t *c = &b.calls[i];
        CHECK(c->notification || c->id.n > 0);
        CHECK(c->answered || c->method.n > 0);
        msgpack_object params = { .type = MSGPACK_OBJECT_NIL };
        msgpack_object params_text = { .type = MSGPACK_OBJECT_NIL };
        if (c->params.n > 0) {
            jrpc_span_t v;
            CHECK(c->params.p >= body && c->params.p + c->params.n <= body + size);
            CHECK(jrpc_json_check(c->params.p, c->params.n, JRPC_WIRE_MAX_DEPTH, &v) == 0);
            CHECK(v.p == c->params.p && v.n == c->params.n && (v.p[0] == '[' || v.p[0] == '{'));
            params_text.type = MSGPACK_OBJECT_BIN;
            params_text.via.bin.ptr = c->params.p;
            params_text.via.bin.size = (uint32_t)c->params.n;
            jrpc_buf_reset(&mp);
            CHECK(jrpc_buf_reserve(&mp, JRPC_JSON_MSGPACK_BOUND(c->params.n)) == 0);
            char *end = jrpc_json_msgpack_at(mp.p, c->params.p, c->params.n);
            CHECK(end != NULL && (size_t)(end - mp.p) <= JRPC_JSON_MSGPACK_BOUND(c->params.n));
            mp.len = (size_t)(end - mp.p);
            /* what the parser transcoded, when it did, is the same */
            CHECK(c->params_mp.n == 0 ||
                  (c->params_mp.n == mp.len && memcmp(c->params_mp.p, mp.p, mp.len) == 0));
            msgpack_zone_clear(&zone);
            CHECK(jrpc_mpack_unpack(mp.p, mp.len, JRPC_WIRE_MAX_DEPTH, &zone, &params) == 0);
            CHECK(c->answered || params.type == MSGPACK_OBJECT_ARRAY ||
                  params.type == MSGPACK_OBJECT_MAP);
            /* msgpack-c's unpacker gives up past 32 levels; when it does
             * decode, it must agree on where the value ends. */
            msgpack_unpacked u;
            msgpack_unpacked_init(&u);
            size_t off = 0;
            if (msgpack_unpack_next(&u, mp.p, mp.len, &off) == MSGPACK_UNPACK_SUCCESS)
                CHECK(off == mp.len && u.data.type == params.type);
            msgpack_unpacked_destroy(&u);
        }
        if (c->answered || c->notification)
            continue;
        switch (i % 3) {
        case 0: CHECK(jrpc_batch_answer_result(&b, i, &fixed) == 0); break;
        case 1:   /* echo: as msgpack, or as the JSON text a json worker sends */
            CHECK(jrpc_batch_answer_result(&b, i, (i / 3) % 2 && c->params.n ? &params_text
                                                                               : &params) == 0);
            break;
        default: answer_error(&b, i, &params); break;
        }
    }

    CHECK(jrpc_batch_write_reply(&b, &out) == 0);
    if (jrpc_batch_expects_reply(&b)) {
        CHECK(out.len > 0);
        rc = jrpc_json_validate(out.p, out.len, JRPC_WIRE_MAX_DEPTH);
        if (rc != 0) {
            fprintf(stderr, "fuzz_body: reply is not JSON (%d): %.*s\n", rc,
                    (int)(out.len > 2000 ? 2000 : out.len), out.p);
            abort();
        }
    } else {
        CHECK(out.len == 0);
    }

    msgpack_zone_destroy(&zone);
    jrpc_buf_dispose(&out);
    jrpc_buf_dispose(&mp);
    jrpc_batch_dispose(&b);
    free(body);
    return 0;
}
