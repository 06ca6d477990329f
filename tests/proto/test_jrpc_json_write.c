/* Tests of jrpc_json's writer (proto/jrpc_json_write.c): msgpack → JSON
 * refusals (bin, ext, NaN, bad UTF-8, a non-string key: the buffer
 * restored), scalars' exact text, and the in-place path over msgpack bytes
 * against the tree path, for every head, edge values and random values.
 * Every input sits in a malloc'd buffer of exactly its size, so an
 * over-read trips ASan (this suite runs under ASan+UBSan). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <math.h>
#include <msgpack.h>
#include "jrpc_batch.h"
#include "jrpc_json.h"
#include "jrpc_json_internal.h"
#include "jrpc_mpack.h"
#include "jrpc_wire.h"
#include "mpack_helpers.h"
#include "mpack_gen.h"

static void test_write_refusals(void **state)
{
    (void)state;
    jrpc_buf_t js;
    jrpc_buf_init(&js);
    msgpack_object o;

    o.type = MSGPACK_OBJECT_BIN;
    o.via.bin.size = 1;
    o.via.bin.ptr = "x";
    assert_int_equal(jrpc_json_write_msgpack(&js, &o, 64), JRPC_JSON_EUNREPR);
    o.type = MSGPACK_OBJECT_EXT;
    o.via.ext.type = 1;
    o.via.ext.size = 1;
    o.via.ext.ptr = "x";
    assert_int_equal(jrpc_json_write_msgpack(&js, &o, 64), JRPC_JSON_EUNREPR);
    o.type = MSGPACK_OBJECT_FLOAT64;
    o.via.f64 = NAN;
    assert_int_equal(jrpc_json_write_msgpack(&js, &o, 64), JRPC_JSON_EUNREPR);
    o.via.f64 = INFINITY;
    assert_int_equal(jrpc_json_write_msgpack(&js, &o, 64), JRPC_JSON_EUNREPR);
    o.type = MSGPACK_OBJECT_STR;
    o.via.str.ptr = "ab\xc0\xaf";
    o.via.str.size = 4;
    assert_int_equal(jrpc_json_write_msgpack(&js, &o, 64), JRPC_JSON_EUNREPR);
    o.via.str.ptr = "ab\xe2\x82";  /* truncated */
    assert_int_equal(jrpc_json_write_msgpack(&js, &o, 64), JRPC_JSON_EUNREPR);

    /* Non-string key, nested inside an array after valid output. */
    msgpack_object_kv kv = { .key = { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = 1 },
                             .val = { .type = MSGPACK_OBJECT_NIL } };
    msgpack_object map = { .type = MSGPACK_OBJECT_MAP, .via.map = { .size = 1, .ptr = &kv } };
    msgpack_object items[2] = { { .type = MSGPACK_OBJECT_NIL }, map };
    msgpack_object arr = { .type = MSGPACK_OBJECT_ARRAY, .via.array = { .size = 2, .ptr = items } };
    jrpc_buf_puts(&js, "keep");
    assert_int_equal(jrpc_json_write_msgpack(&js, &arr, 64), JRPC_JSON_EUNREPR);
    assert_int_equal(js.len, 4);  /* restored */

    assert_int_equal(jrpc_json_write_double(&js, NAN), JRPC_JSON_EUNREPR);
    assert_int_equal(jrpc_json_write_string(&js, "\xff", 1), JRPC_JSON_EUNREPR);
    assert_int_equal(js.len, 4);
    jrpc_buf_dispose(&js);
}

static void test_write_scalars(void **state)
{
    (void)state;
    static const struct { double d; const char *s; } dbl[] = {
        { 0.0, "0.0" }, { -0.0, "-0.0" }, { 1.0, "1.0" }, { -3.0, "-3.0" },
        { 0.1, "0.1" }, { 1e300, "1e+300" }, { 5e-324, "5e-324" }, { 1e15, "1000000000000000.0" }, { 1e16, "1e+16" },
        { 123456.789, "123456.789" }, { 9007199254740993.0, "9007199254740992.0" },
        { 2.2250738585072014e-308, "2.2250738585072014e-308" }, { 1.0 / 3, "0.3333333333333333" },
    };
    for (size_t i = 0; i < sizeof dbl / sizeof dbl[0]; i++) {
        jrpc_buf_t js;
        jrpc_buf_init(&js);
        assert_int_equal(jrpc_json_write_double(&js, dbl[i].d), 0);
        jrpc_buf_putc(&js, '\0');
        assert_string_equal(js.p, dbl[i].s);
        jrpc_buf_dispose(&js);
    }
    /* float32 round-trips as a float. */
    msgpack_object f = { .type = MSGPACK_OBJECT_FLOAT32, .via.f64 = (double)0.1f };
    jrpc_buf_t js;
    jrpc_buf_init(&js);
    assert_int_equal(jrpc_json_write_msgpack(&js, &f, 64), 0);
    assert_int_equal(js.len, 3);
    assert_memory_equal(js.p, "0.1", 3);
    jrpc_buf_reset(&js);
    assert_int_equal(jrpc_json_write_string(&js, "a\"\\\x01\x1f\n\xc3\xa9/", 9), 0);
    assert_int_equal(js.len, strlen("\"a\\\"\\\\\\u0001\\u001f\\n\xc3\xa9/\""));
    assert_memory_equal(js.p, "\"a\\\"\\\\\\u0001\\u001f\\n\xc3\xa9/\"", js.len);
    jrpc_buf_dispose(&js);
}

/* ---- msgpack bytes as JSON in place, against the tree path ----
 *
 * The tree path is the oracle: jrpc_mpack_unpack, jrpc_json_msgpack_size and
 * _put, jrpc_batch_answer_result and _error_obj. The in-place path must give
 * the same verdict on the bytes (jrpc_mpack_check), the same error, bound
 * and text (jrpc_json_raw_size/_put), and the same answers
 * (jrpc_batch_answer_result_raw, _error_raw), for every input. */

static const char diff_body[] =
    "[{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":1},{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":2}]";

static struct {
    unsigned inputs, wellformed, json;   /* how many took each way (the test asserts all ran) */
} D;

static void diff_batch(jrpc_batch_t *b)
{
    jrpc_limits_t lim = JRPC_LIMITS_DEFAULT;
    jrpc_batch_init(b);
    assert_int_equal(jrpc_batch_parse(b, diff_body, sizeof diff_body - 1, &lim), 0);
    assert_int_equal(b->ncalls, 2);
}

static void assert_same_call(const jrpc_call_t *t, const jrpc_call_t *r)
{
    assert_int_equal(t->answered, r->answered);
    assert_int_equal(t->error, r->error);
    assert_int_equal(t->code, r->code);
    assert_int_equal(t->answer.n, r->answer.n);
    assert_memory_equal(t->answer.p, r->answer.p, t->answer.n);
}

static void diff_value(const char *bytes, size_t n)
{
    char *buf = exact(bytes, n);
    msgpack_zone z;
    msgpack_object o;
    assert_true(msgpack_zone_init(&z, 256));
    D.inputs++;
    int rt = jrpc_mpack_unpack(buf, n, JRPC_WIRE_MAX_DEPTH, &z, &o);
    int rr = jrpc_mpack_check(buf, n, JRPC_WIRE_MAX_DEPTH);
    assert_int_equal(rt, rr);
    jrpc_batch_t bt, br;
    diff_batch(&bt);
    diff_batch(&br);
    if (rt == 0) {
        D.wellformed++;
        assert_int_equal(jrpc_mpack_skip(buf, n, 1), (int64_t)n);
        for (unsigned depth = 1; depth <= JRPC_JSON_MAX_DEPTH; depth += depth < 4 ? 1 : 60) {
            size_t nt = 0, nr = 0;
            int et = jrpc_json_msgpack_size(&o, depth, &nt);
            int er = jrpc_json_raw_size(buf, n, depth, &nr);
            assert_int_equal(et, er);
            if (et < 0)
                continue;
            D.json += depth == JRPC_JSON_MAX_DEPTH;
            assert_int_equal(nt, nr);
            char *wt = malloc(nt), *wr = malloc(nr);   /* exact: an overrun trips ASan */
            assert_true(wt != NULL && wr != NULL);
            size_t lt = (size_t)(jrpc_json_msgpack_put(wt, &o) - wt);
            size_t lr = (size_t)(jrpc_json_raw_put(wr, buf, n) - wr);
            assert_int_equal(lt, lr);
            assert_memory_equal(wt, wr, lt);
            assert_int_equal(jrpc_json_validate(wr, lr, depth), 0);
            free(wt);
            free(wr);
        }
        assert_int_equal(jrpc_batch_answer_result(&bt, 0, &o), 0);
        assert_int_equal(jrpc_batch_answer_result_raw(&br, 0, (jrpc_span_t){ buf, n }), 0);
        assert_same_call(&bt.calls[0], &br.calls[0]);
    } else {
        assert_int_equal(rt, JRPC_MPACK_EMALFORMED);
        assert_int_equal(o.type, MSGPACK_OBJECT_NIL);   /* what an error object then is */
    }
    /* An error object from its bytes: malformed bytes are a malformed error. */
    assert_int_equal(jrpc_batch_answer_error_obj(&bt, 1, &o), 0);
    assert_int_equal(jrpc_batch_answer_error_raw(&br, 1, (jrpc_span_t){ buf, n }), 0);
    assert_same_call(&bt.calls[1], &br.calls[1]);
    jrpc_batch_dispose(&bt);
    jrpc_batch_dispose(&br);
    msgpack_zone_destroy(&z);
    free(buf);
}

static void diff_buf(const jrpc_buf_t *b)
{
    diff_value(b->p, b->len);
}

/* The value, every prefix of it, and it with a byte more. */
static void diff_cut(const char *bytes, size_t n)
{
    for (size_t k = 0; k <= n; k++)
        diff_value(bytes, k);
    char *more = malloc(n + 1);
    assert_non_null(more);
    memcpy(more, bytes, n);
    more[n] = 0;
    diff_value(more, n + 1);
    more[n] = (char)0xc1;
    diff_value(more, n + 1);
    free(more);
}

static void test_raw_every_head(void **state)
{
    (void)state;
    /* Every first byte, followed by 0..20 bytes of three fillers: every
     * scalar encoding, truncated lengths, trailing bytes, the reserved c1. */
    static const unsigned char fill[] = { 0x00, 0x41, 0xff };
    for (unsigned b = 0; b < 256; b++)
        for (unsigned f = 0; f < 3; f++)
            for (size_t len = 1; len <= 21; len++) {
                char v[21];
                memset(v, (char)fill[f], sizeof v);
                v[0] = (char)b;
                diff_value(v, len);
            }
    assert_true(D.wellformed > 0);
}

static void test_raw_edge_values(void **state)
{
    (void)state;
    static const struct {
        const char *p;
        size_t n;
    } cases[] = {
#define C(s) { s, sizeof s - 1 }
        C("\xca\x7f\xc0\x00\x00"), C("\xca\x7f\x80\x00\x00"), C("\xca\xff\x80\x00\x00"),   /* f32 NaN, +-Inf */
        C("\xcb\x7f\xf8\x00\x00\x00\x00\x00\x00"), C("\xcb\x7f\xf0\x00\x00\x00\x00\x00\x00"),
        C("\xcb\xff\xf0\x00\x00\x00\x00\x00\x00"), C("\xcb\x80\x00\x00\x00\x00\x00\x00\x00"),
        C("\xca\x3d\xcc\xcc\xcd"), C("\xcb\x3f\xb9\x99\x99\x99\x99\x99\x9a"),           /* 0.1 */
        C("\xcb\x00\x00\x00\x00\x00\x00\x00\x01"), C("\xca\x00\x00\x00\x01"),            /* denormals */
        C("\xcf\xff\xff\xff\xff\xff\xff\xff\xff"), C("\xd3\x80\x00\x00\x00\x00\x00\x00\x00"),
        C("\xd3\x7f\xff\xff\xff\xff\xff\xff\xff"), C("\xd0\x7f"), C("\xd0\x80"), C("\xe0"),
        C("\xa3\x01\x1f\x7f"), C("\xa2\x22\x5c"), C("\xa1\xff"), C("\xa2\xc0\x80"),
        C("\xa3\xed\xa0\x80"), C("\xa4\xf4\x90\x80\x80"), C("\xd9\x03\xe2\x82\xac"),
        C("\xda\x00\x01\x0a"), C("\xdb\x00\x00\x00\x01\x09"), C("\xd9\x00"),
        C("\xc4\x00"), C("\xc5\x00\x02{}"), C("\xc6\x00\x00\x00\x01x"),                   /* bin */
        C("\xd4\x01\x00"), C("\xc7\x00\x05"), C("\xc8\x00\x01\x05x"), C("\xc9\x00\x00\x00\x00\x05"),
        C("\x81\x01\x02"), C("\x81\xc0\x02"), C("\x81\xc4\x01k\x02"), C("\x81\xa1\xff\x02"),
        C("\x82\xa1k\x01\xa1k\x02"), C("\xde\x00\x01\xa1k\xc3"), C("\xdf\x00\x00\x00\x01\xa1k\xc2"),
        C("\xdc\x00\x02\x01\x02"), C("\xdd\x00\x00\x00\x02\x01\x02"), C("\x90"), C("\x80"),
        C("\xdc\x00\x00"), C("\xde\x00\x00"), C("\xdd\xff\xff\xff\xff"), C("\xdf\xff\xff\xff\xff"),
        C("\x92\xd4\x01\x00\x01"), C("\x92\x91\x91\x91\x01\x81\x01\x02"),
        C("\x93\xc0\xc2\xc3"), C("\x81\xa1k\x81\x01\x02"), C("\x82\xa1k\x01\x02\x03"),
#undef C
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        diff_cut(cases[i].p, cases[i].n);
    /* Depth 63, 64 and 65 (JRPC_JSON_MAX_DEPTH is 64), arrays and maps, and
     * which refusal comes first when a value has two. */
    for (int levels = 63; levels <= 65; levels++)
        for (int maps = 0; maps <= 1; maps++) {
            jrpc_buf_t b;
            jrpc_buf_init(&b);
            gen_nested(&b, levels, maps);
            diff_cut(b.p, b.len);
            jrpc_buf_reset(&b);
            gen_byte(&b, 0x92);               /* [deep, {1: 2}] and [{1: 2}, deep] */
            gen_nested(&b, levels, maps);
            gen_byte(&b, 0x81), gen_byte(&b, 0x01), gen_byte(&b, 0x02);
            diff_buf(&b);
            jrpc_buf_reset(&b);
            gen_byte(&b, 0x92);
            gen_byte(&b, 0x81), gen_byte(&b, 0x01), gen_byte(&b, 0x02);
            gen_nested(&b, levels, maps);
            diff_buf(&b);
            jrpc_buf_dispose(&b);
        }
    /* The frame's own limit (JRPC_WIRE_MAX_DEPTH), and past the 32 levels
     * the checker keeps on its stack. */
    for (int levels = JRPC_WIRE_MAX_DEPTH - 1; levels <= JRPC_WIRE_MAX_DEPTH + 1; levels++) {
        jrpc_buf_t b;
        jrpc_buf_init(&b);
        gen_nested(&b, levels, levels % 2);
        diff_buf(&b);
        jrpc_buf_dispose(&b);
    }
    assert_true(D.json > 0);
}

static void test_raw_random(void **state)
{
    (void)state;
    jrpc_buf_t b;
    jrpc_buf_init(&b);
    unsigned json0 = D.json, inputs0 = D.inputs;
    for (int i = 0; i < 6000; i++) {
        jrpc_buf_reset(&b);
        gen_value(&b, 1 + i % 6, i % 3 == 0);
        diff_buf(&b);
        if (b.len > 1) {   /* cut short, a byte changed, a byte more */
            diff_value(b.p, (size_t)(rng() % b.len));
            size_t at = (size_t)(rng() % b.len);
            char keep = b.p[at];
            b.p[at] = (char)(rng() & 0xff);
            diff_buf(&b);
            b.p[at] = keep;
            gen_byte(&b, (unsigned)(rng() & 0xff));
            diff_buf(&b);
        }
    }
    jrpc_buf_dispose(&b);
    print_message("raw: %u inputs, %u well-formed, %u as JSON\n", D.inputs, D.wellformed, D.json);
    assert_true(D.json - json0 > 1000 && D.inputs - inputs0 > 20000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_refusals),
        cmocka_unit_test(test_write_scalars),
        cmocka_unit_test(test_raw_every_head),
        cmocka_unit_test(test_raw_edge_values),
        cmocka_unit_test(test_raw_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
