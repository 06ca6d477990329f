/* Tests of jrpc_wire: round trips of every message, then hostile input —
 * truncations, garbage, mutations, wrong types, wrong versions, huge declared
 * lengths and deep nesting — which must give EMALFORMED/EVERSION, never a
 * crash (this suite runs under ASan+UBSan). Every decoded frame sits in a
 * malloc'd buffer of exactly its size, so an over-read trips ASan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>
#include <msgpack.h>
#include "jrpc_wire.h"

/* ---- helpers ---- */

static int buf_write(void *data, const char *p, size_t n)
{
    return jrpc_buf_append(data, p, n) < 0 ? -1 : 0;
}

/* A packer appending to b, for hand-made (possibly invalid) frames. */
static void pk_init(msgpack_packer *pk, jrpc_buf_t *b)
{
    jrpc_buf_init(b);
    msgpack_packer_init(pk, b, buf_write);
}

static void pk_str(msgpack_packer *pk, const char *s)
{
    msgpack_pack_str(pk, strlen(s));
    msgpack_pack_str_body(pk, s, strlen(s));
}

/* A decoded frame: owns its exact-size copy of the bytes and the zone. */
typedef struct frame {
    char           *buf;
    msgpack_zone    zone;
    jrpc_wire_msg_t m;
    int             rc;
} frame_t;

static void frame_decode(frame_t *f, const void *bytes, size_t n)
{
    f->buf = malloc(n ? n : 1);
    assert_non_null(f->buf);
    if (n)
        memcpy(f->buf, bytes, n);
    assert_true(msgpack_zone_init(&f->zone, 256));
    f->rc = jrpc_wire_decode(f->buf, n, &f->zone, &f->m);
}

static void frame_dispose(frame_t *f)
{
    msgpack_zone_destroy(&f->zone);
    free(f->buf);
}

/* Decodes, then every item of a REQUEST/RESPONSE: returns the first error,
 * or 0 when the whole frame is valid. */
static int check_bytes(const void *bytes, size_t n)
{
    frame_t f;
    frame_decode(&f, bytes, n);
    int rc = f.rc;
    if (rc == 0) {
        assert_true(f.m.type >= JRPC_WIRE_READY && f.m.type <= JRPC_WIRE_DISCONNECT);
        for (uint32_t i = 0; i < f.m.nitems && rc == 0; i++) {
            if (f.m.type == JRPC_WIRE_REQUEST) {
                jrpc_wire_call_t c;
                rc = jrpc_wire_request_item(&f.m, i, &c);
            } else {
                jrpc_wire_answer_t a;
                rc = jrpc_wire_response_item(&f.m, i, &a);
            }
        }
    } else {
        assert_true(rc == JRPC_WIRE_EMALFORMED || rc == JRPC_WIRE_EVERSION);
    }
    frame_dispose(&f);
    return rc;
}

static int check_buf(jrpc_buf_t *b)
{
    int rc = check_bytes(b->p, b->len);
    jrpc_buf_dispose(b);
    return rc;
}

static int check_header_bytes(const void *bytes, size_t n)
{
    char *buf = malloc(n ? n : 1);
    assert_non_null(buf);
    if (n)
        memcpy(buf, bytes, n);
    msgpack_zone z;
    msgpack_zone_init(&z, 256);
    jrpc_wire_header_t h;
    int rc = jrpc_wire_decode_header(buf, n, &z, &h);
    if (rc != 0)
        assert_int_equal(rc, JRPC_WIRE_EMALFORMED);
    msgpack_zone_destroy(&z);
    free(buf);
    return rc;
}

static jrpc_span_t span(const char *s)
{
    return (jrpc_span_t){ s, strlen(s) };
}

static bool str_eq(const msgpack_object *o, const char *s)
{
    return o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(s) &&
           memcmp(o->via.str.ptr, s, o->via.str.size) == 0;
}

/* Valid frames used by the truncation and mutation tests. */
static const char *const demo_methods[] = { "subtract", "sum", "echo" };

static void build_ready(jrpc_buf_t *b)
{
    jrpc_buf_init(b);
    assert_int_equal(jrpc_wire_put_ready(b, 64, demo_methods, 3), 0);
}

static void build_request(jrpc_buf_t *b)
{
    /* params: [42, 23] and {"a": [1.5, "x"]} as msgpack */
    static const char p1[] = { (char)0x92, 42, 23 };
    static const char p2[] = { (char)0x81, (char)0xa1, 'a', (char)0x92, (char)0xcb, 0x3f,
                               (char)0xf8, 0, 0, 0, 0, 0, 0, (char)0xa1, 'x' };
    jrpc_buf_init(b);
    assert_int_equal(jrpc_wire_put_request_begin(b), 0);
    assert_int_equal(jrpc_wire_put_request_call(b, 1, span("subtract"),
                                                (jrpc_span_t){ p1, sizeof p1 }, 5000), 0);
    assert_int_equal(jrpc_wire_put_request_call(b, UINT64_MAX, span("echo"),
                                                (jrpc_span_t){ p2, sizeof p2 }, 0), 0);
    assert_int_equal(jrpc_wire_put_request_call(b, 7, span("get_data"),
                                                (jrpc_span_t){ NULL, 0 }, UINT32_MAX), 0);
    jrpc_wire_put_request_end(b, 3);
}

static void build_response(jrpc_buf_t *b)
{
    static const char data[] = { (char)0xa3, 'b', 'a', 'd' };
    jrpc_buf_init(b);
    assert_int_equal(jrpc_wire_put_response_begin(b), 0);
    assert_int_equal(jrpc_wire_put_result_head(b, 1), 0);
    assert_int_equal(jrpc_buf_putc(b, 19), 0);
    assert_int_equal(jrpc_wire_put_error(b, 2, -32602, "Invalid params",
                                         (jrpc_span_t){ NULL, 0 }), 0);
    assert_int_equal(jrpc_wire_put_error(b, 3, -32000, "Server busy",
                                         (jrpc_span_t){ data, sizeof data }), 0);
    jrpc_wire_put_response_end(b, 3);
}

static void build_header(jrpc_buf_t *b)
{
    jrpc_wire_header_t h = { .key = span("k1"), .timestamp = 1700000000,
                             .nonce = span("n-1"), .signature = span("abcdef"),
                             .timeout_ms = 2500, .traceparent = span("00-abc-def-01") };
    jrpc_buf_init(b);
    assert_int_equal(jrpc_wire_put_header(b, &h), 0);
}

/* ---- round trips ---- */

static void test_ready_round_trip(void **state)
{
    jrpc_buf_t b;
    build_ready(&b);
    frame_t f;
    frame_decode(&f, b.p, b.len);
    assert_int_equal(f.rc, 0);
    assert_int_equal(f.m.type, JRPC_WIRE_READY);
    assert_int_equal(f.m.credit, 64);
    assert_null(f.m.options);
    assert_int_equal(f.m.methods->via.array.size, 3);
    for (int i = 0; i < 3; i++)
        assert_true(str_eq(&f.m.methods->via.array.ptr[i], demo_methods[i]));
    frame_dispose(&f);
    jrpc_buf_dispose(&b);

    /* With an options map and trailing elements (later versions). */
    msgpack_packer pk;
    pk_init(&pk, &b);
    msgpack_pack_array(&pk, 7);
    msgpack_pack_int(&pk, 1);
    msgpack_pack_int(&pk, 1);
    msgpack_pack_uint32(&pk, UINT32_MAX);
    msgpack_pack_array(&pk, 1);
    pk_str(&pk, "m");
    msgpack_pack_map(&pk, 1);
    pk_str(&pk, "name");
    pk_str(&pk, "w1");
    msgpack_pack_true(&pk);
    msgpack_pack_nil(&pk);
    frame_decode(&f, b.p, b.len);
    assert_int_equal(f.rc, 0);
    assert_int_equal(f.m.credit, UINT32_MAX);
    assert_non_null(f.m.options);
    assert_true(str_eq(jrpc_wire_map_get(f.m.options, "name"), "w1"));
    assert_null(jrpc_wire_map_get(f.m.options, "idempotent"));
    assert_null(jrpc_wire_map_get(f.m.methods, "m"));
    frame_dispose(&f);
    jrpc_buf_dispose(&b);
}

static void test_bare_round_trip(void **state)
{
    for (int type = JRPC_WIRE_HEARTBEAT; type <= JRPC_WIRE_DISCONNECT; type++) {
        jrpc_buf_t b;
        jrpc_buf_init(&b);
        if (type == JRPC_WIRE_HEARTBEAT)
            assert_int_equal(jrpc_wire_put_heartbeat(&b), 0);
        else
            assert_int_equal(jrpc_wire_put_disconnect(&b), 0);
        assert_int_equal(b.len, 3);
        assert_memory_equal(b.p, ((char[]){ (char)0x92, 1, (char)type }), 3);
        frame_t f;
        frame_decode(&f, b.p, b.len);
        assert_int_equal(f.rc, 0);
        assert_int_equal(f.m.type, type);
        assert_int_equal(f.m.nitems, 0);
        frame_dispose(&f);
        jrpc_buf_dispose(&b);
    }
    /* Trailing elements are ignored. */
    static const char hb[] = { (char)0x94, 1, 4, (char)0xa1, 'x', (char)0xc0 };
    assert_int_equal(check_bytes(hb, sizeof hb), 0);
}

static void test_request_round_trip(void **state)
{
    jrpc_buf_t b;
    build_request(&b);
    /* The array32 header the builder promises. */
    assert_memory_equal(b.p, ((char[]){ (char)0x93, 1, 2, (char)0xdd, 0, 0, 0, 3 }), 8);
    frame_t f;
    frame_decode(&f, b.p, b.len);
    assert_int_equal(f.rc, 0);
    assert_int_equal(f.m.type, JRPC_WIRE_REQUEST);
    assert_int_equal(f.m.nitems, 3);
    jrpc_wire_call_t c;
    assert_int_equal(jrpc_wire_request_item(&f.m, 0, &c), 0);
    assert_int_equal(c.seq, 1);
    assert_int_equal(c.method.n, 8);
    assert_memory_equal(c.method.p, "subtract", 8);
    assert_int_equal(c.params->type, MSGPACK_OBJECT_ARRAY);
    assert_int_equal(c.params->via.array.ptr[0].via.u64, 42);
    assert_int_equal(c.params->via.array.ptr[1].via.u64, 23);
    assert_int_equal(c.timeout_ms, 5000);
    assert_int_equal(jrpc_wire_request_item(&f.m, 1, &c), 0);
    assert_true(c.seq == UINT64_MAX);
    assert_int_equal(c.params->type, MSGPACK_OBJECT_MAP);
    const msgpack_object *a = jrpc_wire_map_get(c.params, "a");
    assert_non_null(a);
    assert_true(a->via.array.ptr[0].type == MSGPACK_OBJECT_FLOAT64);
    assert_true(a->via.array.ptr[0].via.f64 == 1.5);
    assert_true(str_eq(&a->via.array.ptr[1], "x"));
    assert_int_equal(c.timeout_ms, 0);
    assert_int_equal(jrpc_wire_request_item(&f.m, 2, &c), 0);
    assert_int_equal(c.seq, 7);
    assert_int_equal(c.params->type, MSGPACK_OBJECT_NIL);
    assert_int_equal(c.timeout_ms, UINT32_MAX);
    frame_dispose(&f);
    jrpc_buf_dispose(&b);
}

static void test_response_round_trip(void **state)
{
    jrpc_buf_t b;
    build_response(&b);
    assert_memory_equal(b.p, ((char[]){ (char)0x93, 1, 3, (char)0xdd, 0, 0, 0, 3 }), 8);
    frame_t f;
    frame_decode(&f, b.p, b.len);
    assert_int_equal(f.rc, 0);
    assert_int_equal(f.m.type, JRPC_WIRE_RESPONSE);
    assert_int_equal(f.m.nitems, 3);
    jrpc_wire_answer_t a;
    assert_int_equal(jrpc_wire_response_item(&f.m, 0, &a), 0);
    assert_int_equal(a.seq, 1);
    assert_false(a.is_error);
    assert_int_equal(a.value->via.u64, 19);
    assert_int_equal(jrpc_wire_response_item(&f.m, 1, &a), 0);
    assert_int_equal(a.seq, 2);
    assert_true(a.is_error);
    const msgpack_object *code = jrpc_wire_map_get(a.value, "code");
    assert_int_equal(code->type, MSGPACK_OBJECT_NEGATIVE_INTEGER);
    assert_int_equal(code->via.i64, -32602);
    assert_true(str_eq(jrpc_wire_map_get(a.value, "message"), "Invalid params"));
    assert_null(jrpc_wire_map_get(a.value, "data"));
    assert_int_equal(jrpc_wire_response_item(&f.m, 2, &a), 0);
    assert_true(str_eq(jrpc_wire_map_get(a.value, "data"), "bad"));
    frame_dispose(&f);
    jrpc_buf_dispose(&b);
}

static void test_header_round_trip(void **state)
{
    jrpc_buf_t b;
    build_header(&b);
    msgpack_zone z;
    msgpack_zone_init(&z, 256);
    jrpc_wire_header_t h;
    assert_int_equal(jrpc_wire_decode_header(b.p, b.len, &z, &h), 0);
    assert_int_equal(h.key.n, 2);
    assert_memory_equal(h.key.p, "k1", 2);
    assert_true(h.timestamp == 1700000000);
    assert_memory_equal(h.nonce.p, "n-1", 3);
    assert_memory_equal(h.signature.p, "abcdef", 6);
    assert_int_equal(h.timeout_ms, 2500);
    assert_memory_equal(h.traceparent.p, "00-abc-def-01", 13);
    msgpack_zone_destroy(&z);
    jrpc_buf_dispose(&b);

    /* Empty header: an empty map. */
    jrpc_wire_header_t empty = { 0 };
    jrpc_buf_init(&b);
    assert_int_equal(jrpc_wire_put_header(&b, &empty), 0);
    assert_int_equal(b.len, 1);
    msgpack_zone_init(&z, 256);
    assert_int_equal(jrpc_wire_decode_header(b.p, b.len, &z, &h), 0);
    assert_int_equal(h.key.n, 0);
    assert_true(h.timestamp == 0);
    msgpack_zone_destroy(&z);
    jrpc_buf_dispose(&b);
}

/* ---- hostile input ---- */

typedef void (*builder_fn)(jrpc_buf_t *);

static void test_truncated(void **state)
{
    builder_fn builders[] = { build_ready, build_request, build_response };
    for (size_t k = 0; k < sizeof builders / sizeof *builders; k++) {
        jrpc_buf_t b;
        builders[k](&b);
        for (size_t n = 0; n < b.len; n++)
            assert_int_equal(check_bytes(b.p, n), JRPC_WIRE_EMALFORMED);
        assert_int_equal(check_bytes(b.p, b.len), 0);
        jrpc_buf_dispose(&b);
    }
    jrpc_buf_t b;
    build_header(&b);
    for (size_t n = 0; n < b.len; n++)
        assert_int_equal(check_header_bytes(b.p, n), JRPC_WIRE_EMALFORMED);
    jrpc_buf_dispose(&b);
    static const char hb[] = { (char)0x92, 1, 4 };
    for (size_t n = 0; n < sizeof hb; n++)
        assert_int_equal(check_bytes(hb, n), JRPC_WIRE_EMALFORMED);
}

static void test_extra_bytes(void **state)
{
    static const char hb[] = { (char)0x92, 1, 4, 0 };
    assert_int_equal(check_bytes(hb, sizeof hb), JRPC_WIRE_EMALFORMED);
    static const char hdr[] = { (char)0x80, (char)0x80 };
    assert_int_equal(check_header_bytes(hdr, sizeof hdr), JRPC_WIRE_EMALFORMED);
}

/* xorshift64*: a fixed-seed generator, the same cases on every run. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

static void test_garbage(void **state)
{
    unsigned char bytes[96];
    int ok = 0;
    for (int i = 0; i < 20000; i++) {
        size_t n = rng() % sizeof bytes;
        for (size_t j = 0; j < n; j++)
            bytes[j] = (unsigned char)rng();
        /* Half the cases start like a frame, to get past the first checks. */
        if (i % 2 && n >= 3) {
            bytes[0] = (unsigned char)(0x90 | (rng() % 6));
            bytes[1] = 1;
            bytes[2] = (unsigned char)(1 + rng() % 5);
        }
        if (check_bytes(bytes, n) == 0)
            ok++;
        (void)check_header_bytes(bytes, n);
    }
    (void)ok;
}

/* Valid frames with one to four random bytes changed: decoding either
 * succeeds or fails cleanly. */
static void test_mutations(void **state)
{
    builder_fn builders[] = { build_ready, build_request, build_response, build_header };
    for (size_t k = 0; k < sizeof builders / sizeof *builders; k++) {
        jrpc_buf_t b;
        builders[k](&b);
        char *copy = malloc(b.len);
        assert_non_null(copy);
        for (int i = 0; i < 5000; i++) {
            memcpy(copy, b.p, b.len);
            int nflip = 1 + (int)(rng() % 4);
            for (int j = 0; j < nflip; j++)
                copy[rng() % b.len] = (char)rng();
            if (k == 3)
                (void)check_header_bytes(copy, b.len);
            else
                (void)check_bytes(copy, b.len);
        }
        free(copy);
        jrpc_buf_dispose(&b);
    }
}

static void test_version(void **state)
{
    static const char v0[] = { (char)0x92, 0, 4 };
    static const char v2[] = { (char)0x92, 2, 4 };
    static const char vneg[] = { (char)0x92, (char)0xff, 4 };
    static const char vbig[] = { (char)0x92, (char)0xcf, 1, 0, 0, 0, 0, 0, 0, 1, 4 };
    static const char vonly[] = { (char)0x91, 2 };          /* another version, any shape */
    static const char vstr[] = { (char)0x92, (char)0xa1, '1', 4 };
    static const char vnil[] = { (char)0x92, (char)0xc0, 4 };
    static const char vfloat[] = { (char)0x92, (char)0xca, 0x3f, (char)0x80, 0, 0, 4 };
    assert_int_equal(check_bytes(v0, sizeof v0), JRPC_WIRE_EVERSION);
    assert_int_equal(check_bytes(v2, sizeof v2), JRPC_WIRE_EVERSION);
    assert_int_equal(check_bytes(vneg, sizeof vneg), JRPC_WIRE_EVERSION);
    assert_int_equal(check_bytes(vbig, sizeof vbig), JRPC_WIRE_EVERSION);
    assert_int_equal(check_bytes(vonly, sizeof vonly), JRPC_WIRE_EVERSION);
    assert_int_equal(check_bytes(vstr, sizeof vstr), JRPC_WIRE_EMALFORMED);
    assert_int_equal(check_bytes(vnil, sizeof vnil), JRPC_WIRE_EMALFORMED);
    assert_int_equal(check_bytes(vfloat, sizeof vfloat), JRPC_WIRE_EMALFORMED);
    /* Version 1 encoded non-minimally (uint64) is still version 1. */
    static const char v1wide[] = { (char)0x92, (char)0xcf, 0, 0, 0, 0, 0, 0, 0, 1, 4 };
    assert_int_equal(check_bytes(v1wide, sizeof v1wide), 0);
}

static void test_bad_envelope(void **state)
{
    static const struct { const char *b; size_t n; } cases[] = {
        { "\x90", 1 },                       /* [] */
        { "\x91\x01", 2 },                   /* [1] */
        { "\x92\x01\x00", 3 },               /* type 0 */
        { "\x92\x01\x06", 3 },               /* type 6 */
        { "\x92\x01\xff", 3 },               /* type -1 */
        { "\x92\x01\xa1\x04", 4 },           /* type "\x04" */
        { "\x92\x01\xc0", 3 },               /* type nil */
        { "\x80", 1 },                       /* {} */
        { "\x01", 1 },                       /* 1 */
        { "\xa3" "abc", 4 },                 /* "abc" */
        { "\xc1", 1 },                       /* reserved byte */
        { "\x92\x01\x02", 3 },               /* REQUEST without items */
        { "\x93\x01\x02\x90", 4 },           /* REQUEST, zero items */
        { "\x93\x01\x02\xdd\x00\x00\x00\x00", 8 }, /* zero items, array32 */
        { "\x93\x01\x03\x90", 4 },           /* RESPONSE, zero items */
        { "\x93\x01\x02\xc0", 4 },           /* items nil */
        { "\x93\x01\x03\x80", 4 },           /* items a map */
        { "\x93\x01\x02\x91\x90", 5 },       /* item [] */
        { "\x93\x01\x02\x91\xc0", 5 },       /* item nil */
        { "\x93\x01\x03\x91\x92\x01\x00", 7 }, /* answer too short */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (check_bytes(cases[i].b, cases[i].n) != JRPC_WIRE_EMALFORMED)
            fail_msg("case %zu decoded", i);
    }
}

/* READY with one field replaced by each wrong value. */
static void pack_bad_value(msgpack_packer *pk, int which)
{
    switch (which) {
    case 0: msgpack_pack_nil(pk); break;
    case 1: msgpack_pack_true(pk); break;
    case 2: msgpack_pack_int(pk, -1); break;
    case 3: msgpack_pack_double(pk, 1.0); break;
    case 4: pk_str(pk, "1"); break;
    case 5: msgpack_pack_bin(pk, 1); msgpack_pack_bin_body(pk, "x", 1); break;
    case 6: msgpack_pack_array(pk, 0); break;
    case 7: msgpack_pack_map(pk, 0); break;
    case 8: msgpack_pack_ext(pk, 1, 1); msgpack_pack_ext_body(pk, "x", 1); break;
    case 9: msgpack_pack_uint64(pk, (uint64_t)UINT32_MAX + 1); break;
    case 10: msgpack_pack_uint8(pk, 0); break;
    case 11: pk_str(pk, ""); break;
    }
}
#define NBAD 12

static void test_ready_wrong_types(void **state)
{
    for (int field = 2; field <= 4; field++) {
        for (int bad = 0; bad < NBAD; bad++) {
            jrpc_buf_t b;
            msgpack_packer pk;
            pk_init(&pk, &b);
            msgpack_pack_array(&pk, 5);
            msgpack_pack_int(&pk, 1);
            msgpack_pack_int(&pk, JRPC_WIRE_READY);
            if (field == 2) {
                pack_bad_value(&pk, bad);
            } else {
                msgpack_pack_int(&pk, 8);
            }
            if (field == 3) {
                pack_bad_value(&pk, bad);
            } else {
                msgpack_pack_array(&pk, 1);
                pk_str(&pk, "m");
            }
            if (field == 4)
                pack_bad_value(&pk, bad);
            else
                msgpack_pack_map(&pk, 0);
            int rc = check_buf(&b);
            /* The only values that fit: options nil or a map. */
            bool fits = field == 4 && (bad == 0 || bad == 7);
            if (rc != (fits ? 0 : JRPC_WIRE_EMALFORMED))
                fail_msg("field %d value %d: rc %d", field, bad, rc);
        }
    }
    /* Methods: an element of each wrong kind, and a missing methods field. */
    for (int bad = 0; bad < NBAD; bad++) {
        if (bad == 4)
            continue; /* "1" is a valid method name */
        jrpc_buf_t b;
        msgpack_packer pk;
        pk_init(&pk, &b);
        msgpack_pack_array(&pk, 4);
        msgpack_pack_int(&pk, 1);
        msgpack_pack_int(&pk, 1);
        msgpack_pack_int(&pk, 1);
        msgpack_pack_array(&pk, 2);
        pk_str(&pk, "ok");
        pack_bad_value(&pk, bad);
        assert_int_equal(check_buf(&b), JRPC_WIRE_EMALFORMED);
    }
    static const char short_ready[] = { (char)0x93, 1, 1, 8 };
    assert_int_equal(check_bytes(short_ready, sizeof short_ready), JRPC_WIRE_EMALFORMED);
}

/* A REQUEST whose only item has field `field` replaced by a bad value. */
static void test_request_wrong_types(void **state)
{
    for (int field = 0; field < 4; field++) {
        for (int bad = 0; bad < NBAD; bad++) {
            jrpc_buf_t b;
            msgpack_packer pk;
            pk_init(&pk, &b);
            msgpack_pack_array(&pk, 3);
            msgpack_pack_int(&pk, 1);
            msgpack_pack_int(&pk, JRPC_WIRE_REQUEST);
            msgpack_pack_array(&pk, 1);
            msgpack_pack_array(&pk, 5); /* a fifth, ignored element */
            if (field == 0) pack_bad_value(&pk, bad); else msgpack_pack_uint64(&pk, 9);
            if (field == 1) pack_bad_value(&pk, bad); else pk_str(&pk, "sum");
            if (field == 2) pack_bad_value(&pk, bad); else msgpack_pack_nil(&pk);
            if (field == 3) pack_bad_value(&pk, bad); else msgpack_pack_uint32(&pk, 100);
            pk_str(&pk, "future");
            int rc = check_buf(&b);
            bool fits = (field == 0 && bad == 9) ||             /* seq 2^32 */
                        (field == 1 && bad == 4) ||             /* method "1" */
                        (field == 2 && (bad == 0 || bad == 6 || bad == 7)) ||
                        (field == 3 && bad == 10);              /* timeout 0 */
            if (rc != (fits ? 0 : JRPC_WIRE_EMALFORMED))
                fail_msg("field %d value %d: rc %d", field, bad, rc);
        }
    }
}

static void test_response_wrong_types(void **state)
{
    for (int field = 0; field < 3; field++) {
        for (int err = 0; err < 2; err++) {
            for (int bad = 0; bad < NBAD; bad++) {
                jrpc_buf_t b;
                msgpack_packer pk;
                pk_init(&pk, &b);
                msgpack_pack_array(&pk, 3);
                msgpack_pack_int(&pk, 1);
                msgpack_pack_int(&pk, JRPC_WIRE_RESPONSE);
                msgpack_pack_array(&pk, 1);
                msgpack_pack_array(&pk, 3);
                if (field == 0) pack_bad_value(&pk, bad); else msgpack_pack_uint64(&pk, 9);
                if (field == 1) pack_bad_value(&pk, bad); else msgpack_pack_uint8(&pk, (uint8_t)err);
                if (field == 2) {
                    pack_bad_value(&pk, bad);
                } else if (err) {
                    msgpack_pack_map(&pk, 2);
                    pk_str(&pk, "code");
                    msgpack_pack_int(&pk, -32000);
                    pk_str(&pk, "message");
                    pk_str(&pk, "Server busy");
                } else {
                    msgpack_pack_nil(&pk);
                }
                int rc = check_buf(&b);
                bool fits = (field == 0 && bad == 9) ||
                            (field == 1 && bad == 10) ||        /* flag 0 */
                            (field == 2 && (!err || bad == 7)); /* result any; error a map */
                if (rc != (fits ? 0 : JRPC_WIRE_EMALFORMED))
                    fail_msg("field %d err %d value %d: rc %d", field, err, bad, rc);
            }
        }
    }
    /* flag 2 */
    static const char flag2[] = { (char)0x93, 1, 3, (char)0x91, (char)0x93, 1, 2, (char)0xc0 };
    assert_int_equal(check_bytes(flag2, sizeof flag2), JRPC_WIRE_EMALFORMED);
}

static void test_seq_zero(void **state)
{
    static const char req[] = { (char)0x93, 1, 2, (char)0x91, (char)0x94, 0,
                                (char)0xa1, 'm', (char)0xc0, 0 };
    static const char resp[] = { (char)0x93, 1, 3, (char)0x91, (char)0x93, 0, 0, (char)0xc0 };
    assert_int_equal(check_bytes(req, sizeof req), JRPC_WIRE_EMALFORMED);
    assert_int_equal(check_bytes(resp, sizeof resp), JRPC_WIRE_EMALFORMED);
    /* The same with seq 1 is fine. */
    char ok[sizeof req];
    memcpy(ok, req, sizeof req);
    ok[5] = 1;
    assert_int_equal(check_bytes(ok, sizeof ok), 0);
}

static void test_huge_lengths(void **state)
{
    static const struct { const char *b; size_t n; } cases[] = {
        { "\xdd\xff\xff\xff\xff", 5 },                       /* array32 2^32-1 */
        { "\xdf\xff\xff\xff\xff", 5 },                       /* map32 */
        { "\xdc\xff\xff", 3 },                               /* array16 */
        { "\xde\xff\xff", 3 },                               /* map16 */
        { "\xdb\xff\xff\xff\xff", 5 },                       /* str32 */
        { "\xc6\xff\xff\xff\xff", 5 },                       /* bin32 */
        { "\xc9\xff\xff\xff\xff\x01", 6 },                   /* ext32 */
        { "\x93\x01\x02\xdd\xff\xff\xff\xff", 8 },           /* REQUEST, 2^32-1 items */
        { "\x93\x01\x02\xdd\x00\x00\x00\x02\x94", 9 },       /* 2 items, one half there */
        { "\x93\x01\x02\x91\x94\x01\xdb\xff\xff\xff\xff", 11 }, /* method str32 */
        { "\x93\x01\x02\x91\x94\x01\xa1m\xdf\x7f\xff\xff\xff", 13 }, /* params map32 */
        { "\x9f\x01\x04", 3 },                               /* fixarray 15 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (check_bytes(cases[i].b, cases[i].n) != JRPC_WIRE_EMALFORMED)
            fail_msg("case %zu decoded", i);
        if (check_header_bytes(cases[i].b, cases[i].n) != JRPC_WIRE_EMALFORMED)
            fail_msg("header case %zu decoded", i);
    }
}

/* A REQUEST whose params nest `depth` arrays deep. */
static int check_nested(int depth, int use_maps)
{
    jrpc_buf_t b;
    msgpack_packer pk;
    pk_init(&pk, &b);
    msgpack_pack_array(&pk, 3);
    msgpack_pack_int(&pk, 1);
    msgpack_pack_int(&pk, JRPC_WIRE_REQUEST);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_array(&pk, 4);
    msgpack_pack_int(&pk, 1);
    pk_str(&pk, "echo");
    for (int i = 0; i < depth; i++) {
        if (use_maps && i > 0) {
            msgpack_pack_map(&pk, 1);
            pk_str(&pk, "k");
        } else {
            msgpack_pack_array(&pk, 1);
        }
    }
    msgpack_pack_nil(&pk);
    msgpack_pack_int(&pk, 0);
    return check_buf(&b);
}

static void test_deep(void **state)
{
    /* 3 levels of envelope + params: 32 containers in all is the limit. */
    assert_int_equal(check_nested(29, 0), 0);
    assert_int_equal(check_nested(29, 1), 0);
    assert_int_equal(check_nested(30, 0), JRPC_WIRE_EMALFORMED);
    assert_int_equal(check_nested(30, 1), JRPC_WIRE_EMALFORMED);
    assert_int_equal(check_nested(1000, 0), JRPC_WIRE_EMALFORMED);
    /* 100000 nested fixarrays of one element: no recursion, no crash. */
    size_t n = 100000;
    char *deep = malloc(n);
    assert_non_null(deep);
    memset(deep, (char)0x91, n - 1);
    deep[n - 1] = (char)0xc0;
    assert_int_equal(check_bytes(deep, n), JRPC_WIRE_EMALFORMED);
    assert_int_equal(check_header_bytes(deep, n), JRPC_WIRE_EMALFORMED);
    free(deep);
}

static void test_header_cases(void **state)
{
    /* Unknown keys ignored, whatever their value. */
    {
        jrpc_buf_t b;
        msgpack_packer pk;
        pk_init(&pk, &b);
        msgpack_pack_map(&pk, 3);
        pk_str(&pk, "future");
        msgpack_pack_array(&pk, 1);
        msgpack_pack_map(&pk, 0);
        pk_str(&pk, "timestamp");
        msgpack_pack_int64(&pk, -5);
        pk_str(&pk, "timeout_ms");
        msgpack_pack_uint32(&pk, UINT32_MAX);
        char *copy = malloc(b.len);
        memcpy(copy, b.p, b.len);
        msgpack_zone z;
        msgpack_zone_init(&z, 256);
        jrpc_wire_header_t h;
        assert_int_equal(jrpc_wire_decode_header(copy, b.len, &z, &h), 0);
        assert_true(h.timestamp == -5);
        assert_int_equal(h.timeout_ms, UINT32_MAX);
        assert_int_equal(h.key.n, 0);
        msgpack_zone_destroy(&z);
        free(copy);
        jrpc_buf_dispose(&b);
    }
    /* Each known key with each wrong type. */
    static const char *const keys[] = { "key", "timestamp", "nonce", "signature",
                                        "timeout_ms", "traceparent" };
    for (size_t k = 0; k < 6; k++) {
        for (int bad = 0; bad < NBAD; bad++) {
            jrpc_buf_t b;
            msgpack_packer pk;
            pk_init(&pk, &b);
            msgpack_pack_map(&pk, 1);
            pk_str(&pk, keys[k]);
            pack_bad_value(&pk, bad);
            int rc = check_header_bytes(b.p, b.len);
            jrpc_buf_dispose(&b);
            bool is_str = bad == 4 || bad == 11;
            bool is_int = bad == 2 || bad == 9 || bad == 10;
            bool fits = (k == 1) ? is_int : (k == 4) ? (bad == 9 ? false : bad == 10)
                                                     : is_str;
            if (rc != (fits ? 0 : JRPC_WIRE_EMALFORMED))
                fail_msg("key %s value %d: rc %d", keys[k], bad, rc);
        }
    }
    /* Not a map; a non-string key; a known key twice; timestamp > INT64_MAX. */
    static const struct { const char *b; size_t n; } cases[] = {
        { "\x90", 1 },
        { "\xc0", 1 },
        { "\x81\x01\x02", 3 },
        { "\x82\xa3key\xa1" "a\xa3key\xa1" "b", 13 },
        { "\x81\xa9timestamp\xcf\x80\x00\x00\x00\x00\x00\x00\x00", 20 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (check_header_bytes(cases[i].b, cases[i].n) != JRPC_WIRE_EMALFORMED)
            fail_msg("case %zu decoded", i);
    }
}

static void test_strerror(void **state)
{
    assert_string_not_equal(jrpc_wire_strerror(JRPC_WIRE_EMALFORMED), "unknown error");
    assert_string_not_equal(jrpc_wire_strerror(JRPC_WIRE_EVERSION), "unknown error");
    assert_string_equal(jrpc_wire_strerror(-12345), "unknown error");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ready_round_trip),
        cmocka_unit_test(test_bare_round_trip),
        cmocka_unit_test(test_request_round_trip),
        cmocka_unit_test(test_response_round_trip),
        cmocka_unit_test(test_header_round_trip),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_extra_bytes),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_mutations),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_bad_envelope),
        cmocka_unit_test(test_ready_wrong_types),
        cmocka_unit_test(test_request_wrong_types),
        cmocka_unit_test(test_response_wrong_types),
        cmocka_unit_test(test_seq_zero),
        cmocka_unit_test(test_huge_lengths),
        cmocka_unit_test(test_deep),
        cmocka_unit_test(test_header_cases),
        cmocka_unit_test(test_strerror),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
