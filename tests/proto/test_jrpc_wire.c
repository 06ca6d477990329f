/* Tests of jrpc_wire: round trips of every message, then hostile input —
 * truncations, garbage, mutations, wrong types, wrong versions, huge declared
 * lengths and deep nesting — which must give EMALFORMED/EVERSION, never a
 * crash (this suite runs under ASan+UBSan) — and our msgpack decoder checked
 * against msgpack-c's own on thousands of random values. Every decoded frame sits in a
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
        assert_true(f.m.type >= JRPC_WIRE_READY && f.m.type <= JRPC_WIRE_REJECT);
        /* Whatever decodes, its head reads the same way. */
        assert_int_equal(jrpc_wire_peek_type(f.buf, n), f.m.type);
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

#define NOSPAN ((jrpc_span_t){ NULL, 0 })
#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

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
                                                (jrpc_span_t){ p1, sizeof p1 }, 5000, NOSPAN), 0);
    assert_int_equal(jrpc_wire_put_request_call(b, UINT64_MAX, span("echo"),
                                                (jrpc_span_t){ p2, sizeof p2 }, 0, NOSPAN), 0);
    assert_int_equal(jrpc_wire_put_request_call(b, 7, span("get_data"),
                                                (jrpc_span_t){ NULL, 0 }, UINT32_MAX, NOSPAN), 0);
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

/* READY options: what jrpc_wire_put_ready_opts writes decodes back, no
 * options is byte-identical to jrpc_wire_put_ready, and the known keys are
 * type-checked (the broker must never guess what it may run twice). */
static void test_ready_options(void **state)
{
    static const char *const idem[] = { "sum", "echo" };
    jrpc_buf_t a, b;
    jrpc_buf_init(&a);
    jrpc_buf_init(&b);
    assert_int_equal(jrpc_wire_put_ready(&a, 8, demo_methods, 3), 0);
    jrpc_wire_ready_opts_t none = { 0 };
    assert_int_equal(jrpc_wire_put_ready_opts(&b, 8, demo_methods, 3, &none), 0);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.p, b.p, a.len);
    jrpc_buf_reset(&b);
    assert_int_equal(jrpc_wire_put_ready_opts(&b, 8, demo_methods, 3, NULL), 0);
    assert_memory_equal(a.p, b.p, a.len);
    jrpc_buf_dispose(&a);

    jrpc_buf_reset(&b);
    jrpc_wire_ready_opts_t o = { .name = "w7", .idempotent = idem, .nidempotent = 2 };
    assert_int_equal(jrpc_wire_put_ready_opts(&b, 8, demo_methods, 3, &o), 0);
    frame_t f;
    frame_decode(&f, b.p, b.len);
    assert_int_equal(f.rc, 0);
    assert_int_equal(f.m.type, JRPC_WIRE_READY);
    assert_non_null(f.m.options);
    assert_true(str_eq(jrpc_wire_map_get(f.m.options, "name"), "w7"));
    assert_non_null(f.m.idempotent);
    assert_int_equal(f.m.idempotent->via.array.size, 2);
    assert_true(str_eq(&f.m.idempotent->via.array.ptr[0], "sum"));
    assert_true(str_eq(&f.m.idempotent->via.array.ptr[1], "echo"));
    frame_dispose(&f);
    /* Every truncation of it is malformed, never a crash. */
    for (size_t n = 0; n < b.len; n++)
        assert_int_not_equal(check_bytes(b.p, n), 0);
    jrpc_buf_dispose(&b);

    /* Only idempotent, and an empty list. */
    jrpc_buf_init(&b);
    o = (jrpc_wire_ready_opts_t){ .idempotent = idem, .nidempotent = 1 };
    assert_int_equal(jrpc_wire_put_ready_opts(&b, 1, demo_methods, 1, &o), 0);
    frame_decode(&f, b.p, b.len);
    assert_int_equal(f.rc, 0);
    assert_null(jrpc_wire_map_get(f.m.options, "name"));
    assert_int_equal(f.m.idempotent->via.array.size, 1);
    frame_dispose(&f);
    jrpc_buf_dispose(&b);

    /* Options by hand: {key: value} with each bad value; ok says which fit. */
    enum { IDEM_STR, IDEM_INT_ELEM, IDEM_EMPTY_ELEM, IDEM_TWICE, NAME_INT, NAME_TWICE,
           NONSTR_KEY, IDEM_EMPTY_ARRAY, UNKNOWN_KEY, NCASES };
    for (int c = 0; c < NCASES; c++) {
        msgpack_packer pk;
        pk_init(&pk, &b);
        msgpack_pack_array(&pk, 5);
        msgpack_pack_int(&pk, 1);
        msgpack_pack_int(&pk, JRPC_WIRE_READY);
        msgpack_pack_int(&pk, 4);
        msgpack_pack_array(&pk, 1);
        pk_str(&pk, "m");
        bool ok = false;
        switch (c) {
        case IDEM_STR:
            msgpack_pack_map(&pk, 1); pk_str(&pk, "idempotent"); pk_str(&pk, "m"); break;
        case IDEM_INT_ELEM:
            msgpack_pack_map(&pk, 1); pk_str(&pk, "idempotent");
            msgpack_pack_array(&pk, 2); pk_str(&pk, "m"); msgpack_pack_int(&pk, 1); break;
        case IDEM_EMPTY_ELEM:
            msgpack_pack_map(&pk, 1); pk_str(&pk, "idempotent");
            msgpack_pack_array(&pk, 1); pk_str(&pk, ""); break;
        case IDEM_TWICE:
            msgpack_pack_map(&pk, 2);
            pk_str(&pk, "idempotent"); msgpack_pack_array(&pk, 1); pk_str(&pk, "m");
            pk_str(&pk, "idempotent"); msgpack_pack_array(&pk, 0); break;
        case NAME_INT:
            msgpack_pack_map(&pk, 1); pk_str(&pk, "name"); msgpack_pack_int(&pk, 3); break;
        case NAME_TWICE:
            msgpack_pack_map(&pk, 2); pk_str(&pk, "name"); pk_str(&pk, "a");
            pk_str(&pk, "name"); pk_str(&pk, "b"); break;
        case NONSTR_KEY:
            msgpack_pack_map(&pk, 1); msgpack_pack_int(&pk, 1); pk_str(&pk, "m"); break;
        case IDEM_EMPTY_ARRAY:
            ok = true;
            msgpack_pack_map(&pk, 1); pk_str(&pk, "idempotent"); msgpack_pack_array(&pk, 0); break;
        case UNKNOWN_KEY:
            ok = true;
            msgpack_pack_map(&pk, 1); pk_str(&pk, "later"); msgpack_pack_int(&pk, 3); break;
        }
        int rc = check_buf(&b);
        if (rc != (ok ? 0 : JRPC_WIRE_EMALFORMED))
            fail_msg("case %d: rc %d", c, rc);
    }
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
    /* Trailing elements are ignored (HEARTBEAT's settings come first). */
    static const char hb[] = { (char)0x95, 1, 4, (char)0xc0, (char)0xc0, (char)0xa1, 'x' };
    assert_int_equal(check_bytes(hb, sizeof hb), 0);
    static const char dc[] = { (char)0x94, 1, 5, (char)0xa1, 'x', (char)0xc0 };
    assert_int_equal(check_bytes(dc, sizeof dc), 0);
}

/* Decodes a hand-made frame into *m (a copy of exactly n bytes); returns rc.
 * Only m's scalars may be read afterwards. */
static int decode_msg(const void *bytes, size_t n, jrpc_wire_msg_t *m)
{
    frame_t f;
    frame_decode(&f, bytes, n);
    *m = f.m;
    int rc = f.rc;
    frame_dispose(&f);
    return rc;
}

typedef struct bytes_case {
    const char *b;
    size_t      n;
} bytes_case_t;

#define CASE(lit) { lit, sizeof lit - 1 }

/* HEARTBEAT [1, 4, heartbeat_ms, liveness]: the broker's settings (PROTOCOL.md
 * 2.4, 5), both or neither, within the bounds of the broker's options. */
static void test_heartbeat_settings(void **state)
{
    jrpc_buf_t b;
    jrpc_wire_msg_t m;
    jrpc_buf_init(&b);
    /* The example of PROTOCOL.md 3. */
    assert_int_equal(jrpc_wire_put_heartbeat_settings(&b, 5000, 3), 0);
    static const char ex[] = { (char)0x94, 1, 4, (char)0xcd, 0x13, (char)0x88, 3 };
    assert_int_equal(b.len, sizeof ex);
    assert_memory_equal(b.p, ex, sizeof ex);
    assert_int_equal(decode_msg(b.p, b.len, &m), 0);
    assert_int_equal(m.type, JRPC_WIRE_HEARTBEAT);
    assert_int_equal(m.heartbeat_ms, 5000);
    assert_int_equal(m.liveness, 3);
    for (size_t n = 0; n < b.len; n++)
        assert_int_equal(check_bytes(b.p, n), JRPC_WIRE_EMALFORMED);
    static const uint32_t ok[][2] = { { JRPC_WIRE_HEARTBEAT_MIN_MS, 1 },
                                      { JRPC_WIRE_HEARTBEAT_MAX_MS, JRPC_WIRE_LIVENESS_MAX },
                                      { 1000, 3 } };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        jrpc_buf_reset(&b);
        assert_int_equal(jrpc_wire_put_heartbeat_settings(&b, ok[i][0], ok[i][1]), 0);
        assert_int_equal(decode_msg(b.p, b.len, &m), 0);
        assert_int_equal(m.heartbeat_ms, ok[i][0]);
        assert_int_equal(m.liveness, ok[i][1]);
    }
    /* Without settings, or nil in their place: both 0 (none sent). */
    static const bytes_case_t none[] = {
        CASE("\x92\x01\x04"),
        CASE("\x94\x01\x04\xc0\xc0"),
        CASE("\x93\x01\x04\xc0"),
        CASE("\x94\x01\x04\xc0\x05"),       /* interval nil: the rest is not read */
    };
    for (size_t i = 0; i < sizeof none / sizeof *none; i++) {
        assert_int_equal(decode_msg(none[i].b, none[i].n, &m), 0);
        assert_int_equal(m.type, JRPC_WIRE_HEARTBEAT);
        assert_int_equal(m.heartbeat_ms + m.liveness, 0);
    }
    /* Any integer encoding; trailing elements ignored. */
    static const char wide[] = "\x96\x01\x04\xcf\0\0\0\0\0\0\0\x64\xd3\0\0\0\0\0\0\0\x02\xa1x\xc0";
    assert_int_equal(decode_msg(wide, sizeof wide - 1, &m), 0);
    assert_int_equal(m.heartbeat_ms, 100);
    assert_int_equal(m.liveness, 2);
    static const bytes_case_t bad[] = {
        CASE("\x93\x01\x04\x64"),                   /* interval without liveness */
        CASE("\x94\x01\x04\x64\xc0"),               /* liveness nil */
        CASE("\x94\x01\x04\x09\x03"),               /* 9 ms: below the minimum */
        CASE("\x94\x01\x04\xce\x00\x36\xee\x81\x03"), /* 3600001 ms */
        CASE("\x94\x01\x04\x64\x00"),               /* liveness 0 */
        CASE("\x94\x01\x04\x64\xcd\x03\xe9"),       /* liveness 1001 */
        CASE("\x94\x01\x04\xff\x03"),               /* interval -1 */
        CASE("\x94\x01\x04\xa3" "100\x03"),         /* interval "100" */
        CASE("\x94\x01\x04\xcb\x40\x59\0\0\0\0\0\0\x03"), /* interval 100.0 */
        CASE("\x94\x01\x04\x64\x91\x03"),           /* liveness [3] */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (check_bytes(bad[i].b, bad[i].n) != JRPC_WIRE_EMALFORMED)
            fail_msg("bad heartbeat %zu decoded", i);
    jrpc_buf_dispose(&b);
}

/* REJECT [1, 6, request] (PROTOCOL.md 2.5). */
static void test_reject(void **state)
{
    jrpc_buf_t b;
    jrpc_wire_msg_t m;
    jrpc_buf_init(&b);
    assert_int_equal(jrpc_wire_put_reject(&b, 3), 0);
    static const char ex[] = { (char)0x93, 1, 6, 3 };   /* the example of PROTOCOL.md 3 */
    assert_int_equal(b.len, sizeof ex);
    assert_memory_equal(b.p, ex, sizeof ex);
    assert_int_equal(decode_msg(b.p, b.len, &m), 0);
    assert_int_equal(m.type, JRPC_WIRE_REJECT);
    assert_int_equal(m.request, 3);
    assert_int_equal(m.nitems, 0);
    for (size_t n = 0; n < b.len; n++)
        assert_int_equal(check_bytes(b.p, n), JRPC_WIRE_EMALFORMED);
    jrpc_buf_reset(&b);
    assert_int_equal(jrpc_wire_put_reject(&b, UINT64_MAX), 0);
    assert_int_equal(decode_msg(b.p, b.len, &m), 0);
    assert_true(m.request == UINT64_MAX);
    static const char trailing[] = "\x95\x01\x06\xcd\x01\x00\xc0\x90";
    assert_int_equal(decode_msg(trailing, sizeof trailing - 1, &m), 0);
    assert_int_equal(m.request, 256);
    static const bytes_case_t bad[] = {
        CASE("\x92\x01\x06"),           /* no request */
        CASE("\x93\x01\x06\x00"),       /* request 0 */
        CASE("\x93\x01\x06\xff"),       /* request -1 */
        CASE("\x93\x01\x06\xc0"),       /* request nil */
        CASE("\x93\x01\x06\xa1\x31"),   /* request "1" */
        CASE("\x93\x01\x06\x91\x01"),   /* request [1] */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (check_bytes(bad[i].b, bad[i].n) != JRPC_WIRE_EMALFORMED)
            fail_msg("bad reject %zu decoded", i);
    jrpc_buf_dispose(&b);
}

static int peek_copy(const void *bytes, size_t n)
{
    char *buf = malloc(n ? n : 1);
    assert_non_null(buf);
    if (n)
        memcpy(buf, bytes, n);
    int rc = jrpc_wire_peek_type(buf, n);
    free(buf);
    return rc;
}

/* The head of a frame the decoder refuses still says whether it was a
 * REQUEST: a worker counts it and REJECTs it (PROTOCOL.md 2.5). */
static void test_peek_type(void **state)
{
    jrpc_buf_t b;
    build_request(&b);
    for (size_t n = 0; n <= b.len; n++)
        assert_int_equal(peek_copy(b.p, n), n < 3 ? JRPC_WIRE_EMALFORMED : JRPC_WIRE_REQUEST);
    /* Undecodable after the head (a byte after the value): still a REQUEST. */
    assert_int_equal(jrpc_buf_putc(&b, 0), 0);
    assert_int_equal(check_bytes(b.p, b.len), JRPC_WIRE_EMALFORMED);
    assert_int_equal(peek_copy(b.p, b.len), JRPC_WIRE_REQUEST);
    jrpc_buf_dispose(&b);
    static const struct { bytes_case_t c; int want; } cases[] = {
        { CASE("\x93\x01\x02\xc1"), JRPC_WIRE_REQUEST },
        { CASE("\xdd\x00\x00\x00\x03\xcf\0\0\0\0\0\0\0\x01\xd0\x02"), JRPC_WIRE_REQUEST },
        { CASE("\x92\x01\x07"), 7 },                          /* unknown types too */
        { CASE("\x92\x01\xcf\xff\xff\xff\xff\xff\xff\xff\xff"), INT32_MAX },
        { CASE("\x92\x02\x02"), JRPC_WIRE_EVERSION },
        { CASE("\x92\xff\x02"), JRPC_WIRE_EVERSION },
        { CASE("\x92\x00\x02"), JRPC_WIRE_EVERSION },
        { CASE("\x91\x01"), JRPC_WIRE_EMALFORMED },           /* one element */
        { CASE("\x92\x01\xff"), JRPC_WIRE_EMALFORMED },       /* type -1 */
        { CASE("\x92\x01\xc0"), JRPC_WIRE_EMALFORMED },       /* type nil */
        { CASE("\x92\xa1\x31\x02"), JRPC_WIRE_EMALFORMED },   /* version "1" */
        { CASE("\x82\x01\x02"), JRPC_WIRE_EMALFORMED },       /* a map */
        { CASE("\xc1\x01\x02"), JRPC_WIRE_EMALFORMED },
        { CASE("\x92\x01\xcd\x00"), JRPC_WIRE_EMALFORMED },   /* type cut short */
        { CASE("\xdd\x00\x00\x00"), JRPC_WIRE_EMALFORMED },   /* array32 header cut short */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int rc = peek_copy(cases[i].c.b, cases[i].c.n);
        if (rc != cases[i].want)
            fail_msg("peek case %zu: %d", i, rc);
    }
    assert_int_equal(jrpc_wire_peek_type(NULL, 0), JRPC_WIRE_EMALFORMED);
}

/* The seq of an item the worker cannot otherwise read: it answers that
 * seq -32603, and REJECTs the REQUEST when even the seq is unreadable. */
static void test_request_item_seq(void **state)
{
    static const struct { bytes_case_t c; int rc; uint64_t seq; } cases[] = {
        { CASE("\x93\x01\x02\x91\x94\x07\xa1m\xc0\x00"), 0, 7 },   /* a valid item */
        { CASE("\x93\x01\x02\x91\x94\x07\x05\xc0\x00"), 0, 7 },    /* method 5 */
        { CASE("\x93\x01\x02\x91\x91\xcf\xff\xff\xff\xff\xff\xff\xff\xff"), 0, UINT64_MAX },
        { CASE("\x93\x01\x02\x91\x91\x00"), JRPC_WIRE_EMALFORMED, 0 },     /* seq 0 */
        { CASE("\x93\x01\x02\x91\x91\xff"), JRPC_WIRE_EMALFORMED, 0 },     /* seq -1 */
        { CASE("\x93\x01\x02\x91\x91\xa1\x31"), JRPC_WIRE_EMALFORMED, 0 }, /* seq "1" */
        { CASE("\x93\x01\x02\x91\x90"), JRPC_WIRE_EMALFORMED, 0 },         /* [] */
        { CASE("\x93\x01\x02\x91\xc0"), JRPC_WIRE_EMALFORMED, 0 },         /* nil */
        { CASE("\x93\x01\x02\x91\x81\x07\x07"), JRPC_WIRE_EMALFORMED, 0 }, /* {7: 7} */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        frame_t f;
        frame_decode(&f, cases[i].c.b, cases[i].c.n);
        assert_int_equal(f.rc, 0);
        jrpc_seq_t seq = 0;
        if (jrpc_wire_request_item_seq(&f.m, 0, &seq) != cases[i].rc || seq != cases[i].seq)
            fail_msg("item seq case %zu", i);
        jrpc_wire_call_t c;
        if (i > 0)   /* none but the first is a valid item */
            assert_int_equal(jrpc_wire_request_item(&f.m, 0, &c), JRPC_WIRE_EMALFORMED);
        frame_dispose(&f);
    }
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
            bytes[2] = (unsigned char)(1 + rng() % 6);
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
        { "\x92\x01\x06", 3 },               /* type 6 (REJECT) without its request */
        { "\x93\x01\x07\x01", 4 },           /* type 7 */
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
            msgpack_pack_array(&pk, 6); /* a valid traceparent, then an ignored element */
            if (field == 0) pack_bad_value(&pk, bad); else msgpack_pack_uint64(&pk, 9);
            if (field == 1) pack_bad_value(&pk, bad); else pk_str(&pk, "sum");
            if (field == 2) pack_bad_value(&pk, bad); else msgpack_pack_nil(&pk);
            if (field == 3) pack_bad_value(&pk, bad); else msgpack_pack_uint32(&pk, 100);
            pk_str(&pk, TP);
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

/* The optional 5th item element (PROTOCOL.md 2.2): a traceparent. */
static void test_request_traceparent(void **state)
{
    (void)state;
    /* Without one: the bytes of PROTOCOL.md section 3, as before the field. */
    static const unsigned char example[] = {
        0x93, 0x01, 0x02, 0xdd, 0, 0, 0, 2,
        0x94, 0x07, 0xa8, 's', 'u', 'b', 't', 'r', 'a', 'c', 't', 0x92, 0x2a, 0x17, 0xcd, 0x13, 0x88,
        0x94, 0x08, 0xa8, 'g', 'e', 't', '_', 'd', 'a', 't', 'a', 0xc0, 0xcd, 0x13, 0x88 };
    static const char p1[] = { (char)0x92, 42, 23 };
    jrpc_buf_t b;
    jrpc_buf_init(&b);
    assert_int_equal(jrpc_wire_put_request_begin(&b), 0);
    assert_int_equal(jrpc_wire_put_request_call(&b, 7, span("subtract"),
                                                (jrpc_span_t){ p1, sizeof p1 }, 5000, NOSPAN), 0);
    assert_int_equal(jrpc_wire_put_request_call(&b, 8, span("get_data"), NOSPAN, 5000, NOSPAN), 0);
    jrpc_wire_put_request_end(&b, 2);
    assert_int_equal(b.len, sizeof example);
    assert_memory_equal(b.p, example, sizeof example);

    /* With one on the first call: a 5-element item; the second has none. */
    jrpc_buf_reset(&b);
    assert_int_equal(jrpc_wire_put_request_begin(&b), 0);
    assert_int_equal(jrpc_wire_put_request_call(&b, 7, span("subtract"),
                                                (jrpc_span_t){ p1, sizeof p1 }, 5000, span(TP)), 0);
    assert_int_equal(jrpc_wire_put_request_call(&b, 8, span("get_data"), NOSPAN, 5000, NOSPAN), 0);
    jrpc_wire_put_request_end(&b, 2);
    assert_int_equal(b.len, sizeof example + 2 + 55);  /* str8 head + 55 bytes */
    assert_int_equal((unsigned char)b.p[8], 0x95);
    frame_t f;
    frame_decode(&f, b.p, b.len);
    assert_int_equal(f.rc, 0);
    jrpc_wire_call_t c;
    assert_int_equal(jrpc_wire_request_item(&f.m, 0, &c), 0);
    assert_int_equal(c.traceparent.n, 55);
    assert_memory_equal(c.traceparent.p, TP, 55);
    assert_int_equal(c.timeout_ms, 5000);
    assert_int_equal(jrpc_wire_request_item(&f.m, 1, &c), 0);
    assert_int_equal(c.traceparent.n, 0);
    frame_dispose(&f);
    jrpc_buf_dispose(&b);

    /* Hand-made 5th elements: nil is absent; anything but a valid str is
     * malformed. */
    for (int which = 0; which < 9; which++) {
        msgpack_packer pk;
        pk_init(&pk, &b);
        msgpack_pack_array(&pk, 3);
        msgpack_pack_int(&pk, 1);
        msgpack_pack_int(&pk, JRPC_WIRE_REQUEST);
        msgpack_pack_array(&pk, 1);
        msgpack_pack_array(&pk, 5);
        msgpack_pack_uint64(&pk, 9);
        pk_str(&pk, "sum");
        msgpack_pack_nil(&pk);
        msgpack_pack_uint32(&pk, 100);
        bool ok = false;
        switch (which) {
        case 0: msgpack_pack_nil(&pk); ok = true; break;
        case 1: pk_str(&pk, TP); ok = true; break;
        case 2: pk_str(&pk, ""); break;
        case 3: pk_str(&pk, "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"); break;
        case 4: pk_str(&pk, "00-00000000000000000000000000000000-00f067aa0ba902b7-01"); break;
        case 5: pk_str(&pk, TP "-x"); break;
        case 6: msgpack_pack_bin(&pk, 55); msgpack_pack_bin_body(&pk, TP, 55); break;
        case 7: msgpack_pack_int(&pk, 1); break;
        case 8: msgpack_pack_array(&pk, 1); pk_str(&pk, TP); break;
        }
        frame_decode(&f, b.p, b.len);
        assert_int_equal(f.rc, 0);
        int rc = jrpc_wire_request_item(&f.m, 0, &c);
        if (rc != (ok ? 0 : JRPC_WIRE_EMALFORMED))
            fail_msg("5th element %d: rc %d", which, rc);
        if (ok)
            assert_int_equal(c.traceparent.n, which == 1 ? 55 : 0);
        frame_dispose(&f);
        jrpc_buf_dispose(&b);
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
    /* 3 levels of envelope + params: JRPC_WIRE_MAX_DEPTH containers in all
     * is the limit, far beyond msgpack-c's own 32. */
    int max_params = JRPC_WIRE_MAX_DEPTH - 3;
    assert_true(max_params >= 1024);    /* the broker's largest --max-depth */
    assert_int_equal(check_nested(29, 0), 0);
    assert_int_equal(check_nested(30, 0), 0);
    assert_int_equal(check_nested(30, 1), 0);
    assert_int_equal(check_nested(1024, 0), 0);
    assert_int_equal(check_nested(1024, 1), 0);
    assert_int_equal(check_nested(max_params, 0), 0);
    assert_int_equal(check_nested(max_params, 1), 0);
    assert_int_equal(check_nested(max_params + 1, 0), JRPC_WIRE_EMALFORMED);
    assert_int_equal(check_nested(max_params + 1, 1), JRPC_WIRE_EMALFORMED);
    assert_int_equal(check_nested(5000, 1), JRPC_WIRE_EMALFORMED);
    /* 100000 nested fixarrays of one element: no recursion, no crash. */
    size_t n = 100000;
    char *deep = malloc(n);
    assert_non_null(deep);
    memset(deep, (char)0x91, n - 1);
    deep[n - 1] = (char)0xc0;
    assert_int_equal(check_bytes(deep, n), JRPC_WIRE_EMALFORMED);
    assert_int_equal(check_header_bytes(deep, n), JRPC_WIRE_EMALFORMED);
    /* The same as maps ({nil: {nil: ...}}), and exactly at the limit with an
     * empty container innermost: it counts as a level too. */
    for (size_t i = 0; i + 1 < n; i += 2) {
        deep[i] = (char)0x81;
        deep[i + 1] = (char)0xc0;
    }
    deep[n - 1] = (char)0x80;
    assert_int_equal(check_bytes(deep, n), JRPC_WIRE_EMALFORMED);
    assert_int_equal(check_header_bytes(deep, n), JRPC_WIRE_EMALFORMED);
    msgpack_zone z;
    msgpack_zone_init(&z, 256);
    msgpack_object o;
    memset(deep, (char)0x91, JRPC_WIRE_MAX_DEPTH);
    deep[JRPC_WIRE_MAX_DEPTH - 1] = (char)0x90;
    assert_int_equal(jrpc_wire_unpack(deep, JRPC_WIRE_MAX_DEPTH, &z, &o), 0);
    memset(deep, (char)0x91, JRPC_WIRE_MAX_DEPTH + 1);
    deep[JRPC_WIRE_MAX_DEPTH] = (char)0x90;
    assert_int_equal(jrpc_wire_unpack(deep, JRPC_WIRE_MAX_DEPTH + 1, &z, &o),
                     JRPC_WIRE_EMALFORMED);
    assert_int_equal(o.type, MSGPACK_OBJECT_NIL);
    msgpack_zone_destroy(&z);
    free(deep);
}

/* A REQUEST whose params nest 200 deep (arrays and maps with siblings of
 * every kind) decodes, and its params packed again are the bytes sent. */
static void test_deep_params_round_trip(void **state)
{
    jrpc_buf_t params;
    msgpack_packer pk;
    pk_init(&pk, &params);
    for (int i = 0; i < 200; i++) {
        if (i % 3 == 1) {           /* {"n": -i, "s": "sibling", "next": ...} */
            msgpack_pack_map(&pk, 3);
            pk_str(&pk, "n");
            msgpack_pack_int64(&pk, -i);
            pk_str(&pk, "s");
            pk_str(&pk, "sibling");
            pk_str(&pk, "next");
        } else {                    /* [i + 0.5, ..., UINT64_MAX - i] */
            msgpack_pack_array(&pk, 3);
            msgpack_pack_double(&pk, i + 0.5);
        }
    }
    msgpack_pack_nil(&pk);
    for (int i = 200 - 1; i >= 0; i--)
        if (i % 3 != 1)
            msgpack_pack_uint64(&pk, UINT64_MAX - (uint64_t)i);
    jrpc_buf_t b;
    jrpc_buf_init(&b);
    assert_int_equal(jrpc_wire_put_request_begin(&b), 0);
    assert_int_equal(jrpc_wire_put_request_call(&b, 5, span("echo"),
                                                (jrpc_span_t){ params.p, params.len }, 9, NOSPAN), 0);
    jrpc_wire_put_request_end(&b, 1);
    frame_t f;
    frame_decode(&f, b.p, b.len);
    assert_int_equal(f.rc, 0);
    jrpc_wire_call_t c;
    assert_int_equal(jrpc_wire_request_item(&f.m, 0, &c), 0);
    assert_int_equal(c.seq, 5);
    assert_int_equal(c.timeout_ms, 9);
    int depth = 0;
    for (const msgpack_object *o = c.params; o->type != MSGPACK_OBJECT_NIL; depth++) {
        if (o->type == MSGPACK_OBJECT_MAP) {
            assert_int_equal(o->via.map.ptr[0].val.via.i64, -depth);
            o = &o->via.map.ptr[2].val;
        } else {
            assert_int_equal(o->type, MSGPACK_OBJECT_ARRAY);
            assert_true(o->via.array.ptr[2].via.u64 == UINT64_MAX - (uint64_t)depth);
            o = &o->via.array.ptr[1];
        }
    }
    assert_int_equal(depth, 200);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer spk;
    msgpack_packer_init(&spk, &sb, msgpack_sbuffer_write);
    assert_int_equal(msgpack_pack_object(&spk, *c.params), 0);
    assert_int_equal(sb.size, params.len);
    assert_memory_equal(sb.data, params.p, params.len);
    msgpack_sbuffer_destroy(&sb);
    frame_dispose(&f);
    jrpc_buf_dispose(&b);
    jrpc_buf_dispose(&params);
}

/* ---- jrpc_wire_unpack against msgpack_unpack ---- */

static void sb_raw(msgpack_sbuffer *sb, const void *p, size_t n)
{
    assert_int_equal(msgpack_sbuffer_write(sb, p, n), 0);
}

/* A big-endian header byte followed by v in w bytes. */
static void sb_head(msgpack_sbuffer *sb, unsigned char b, uint64_t v, int w)
{
    unsigned char h[9] = { b };
    for (int i = 0; i < w; i++)
        h[1 + i] = (unsigned char)(v >> (8 * (w - 1 - i)));
    sb_raw(sb, h, 1 + (size_t)w);
}

static size_t rnd_len(void)
{
    switch (rng() % 64) {
    case 0:  return 256 + rng() % 1000;         /* 16-bit length */
    case 1:  return rng() % 50 == 0 ? 65536 + rng() % 1000 : 32 + rng() % 224; /* 32 */
    default: return rng() % 32;
    }
}

static void rnd_bytes(msgpack_sbuffer *sb, size_t n)
{
    char chunk[64];
    while (n > 0) {
        size_t k = n < sizeof chunk ? n : sizeof chunk;
        for (size_t i = 0; i < k; i++)
            chunk[i] = (char)rng();
        sb_raw(sb, chunk, k);
        n -= k;
    }
}

/* Appends one random value: a scalar of any msgpack format, or (depth > 0)
 * an array or map of random values. On the spine, the value is a container
 * and one of its children continues the spine, so the tree is exactly
 * `depth` levels deep. Mostly through msgpack_pack_* (canonical encodings);
 * with wide, also non-minimal ones (uint64 1, str32 "abc", array32 of 2...)
 * that msgpack_pack_object would not write back the same (*canonical). */
static void rnd_value(msgpack_packer *pk, msgpack_sbuffer *sb, int depth, bool spine, bool wide,
                      bool *canonical, int *budget)
{
    --*budget;
    if (depth > 0 && (spine || (*budget > 0 && rng() % 3 == 0))) {
        int kind = (int)(rng() % 3);        /* array, array, map */
        bool wide_head = wide && rng() % 4 == 0;
        size_t n = rng() % 16 == 0 ? 16 + rng() % 4 : rng() % 4;
        if (spine && n == 0)
            n = 1;
        size_t nslots = kind == 2 ? 2 * n : n;
        size_t next = spine ? rng() % nslots : SIZE_MAX;
        if (wide_head) {
            *canonical = false;
            sb_head(sb, kind == 2 ? 0xdf : 0xdd, n, 4);     /* map32 / array32 */
        } else if (kind == 2) {
            msgpack_pack_map(pk, n);
        } else {
            msgpack_pack_array(pk, n);
        }
        for (size_t i = 0; i < nslots; i++) {
            if (i == next)
                rnd_value(pk, sb, depth - 1, true, wide, canonical, budget);
            else
                rnd_value(pk, sb, (int)(rng() % (unsigned)depth), false, wide, canonical,
                          budget);
        }
        return;
    }
    switch (rng() % (wide ? 12 : 11)) {
    case 0:
        msgpack_pack_nil(pk);
        break;
    case 1:
        (rng() & 1) ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
        break;
    case 2:
        msgpack_pack_uint64(pk, rng() >> (rng() % 64));
        break;
    case 3:
        msgpack_pack_int64(pk, -(int64_t)(rng() >> (1 + rng() % 63)) - 1);
        break;
    case 4:
        msgpack_pack_int64(pk, (int64_t)(rng() >> (1 + rng() % 63)));
        break;
    case 5: {
        uint32_t bits;
        float f;
        do {
            bits = (uint32_t)rng();
            memcpy(&f, &bits, sizeof f);
        } while (f != f);           /* msgpack_object_equal: NaN != NaN */
        msgpack_pack_float(pk, f);
        break;
    }
    case 6: {
        uint64_t bits;
        double d;
        do {
            bits = rng();
            memcpy(&d, &bits, sizeof d);
        } while (d != d);
        msgpack_pack_double(pk, rng() % 4 ? d : (double)(int64_t)rng() / 7.0);
        break;
    }
    case 7: {
        size_t n = rnd_len();
        msgpack_pack_str(pk, n);
        rnd_bytes(sb, n);
        break;
    }
    case 8: {
        size_t n = rnd_len();
        msgpack_pack_bin(pk, n);
        rnd_bytes(sb, n);
        break;
    }
    case 9: {
        static const size_t fixed[] = { 1, 2, 4, 8, 16 };
        size_t n = rng() % 2 ? fixed[rng() % 5] : rnd_len();
        msgpack_pack_ext(pk, n, (int8_t)rng());
        rnd_bytes(sb, n);
        break;
    }
    case 10:
        msgpack_pack_uint8(pk, (uint8_t)rng());
        break;
    default: {                      /* a non-minimal encoding */
        uint64_t small = rng() % 100;
        *canonical = false;
        switch (rng() % 9) {
        case 0: sb_head(sb, 0xcf, small, 8); break;                 /* uint64 */
        case 1: sb_head(sb, 0xce, small, 4); break;                 /* uint32 */
        case 2: sb_head(sb, 0xd3, small, 8); break;                 /* int64 >= 0 */
        case 3: sb_head(sb, 0xd1, (uint64_t)-(int64_t)small - 1, 2); break; /* int16 < 0 */
        case 4: sb_head(sb, 0xd0, small, 1); break;                 /* int8 >= 0 */
        case 5: sb_head(sb, 0xdb, 3, 4); sb_raw(sb, "abc", 3); break; /* str32 */
        case 6: sb_head(sb, 0xd9, 0, 1); break;                     /* str8 "" */
        case 7: sb_head(sb, 0xc6, 2, 4); sb_raw(sb, "\0\1", 2); break; /* bin32 */
        default: sb_head(sb, 0xc9, 1, 4); sb_raw(sb, "\x85x", 2); break; /* ext32 */
        }
        break;
    }
    }
}

/* Both trees equal, and their non-empty str/bin/ext payloads at the same
 * addresses (zero-copy into the input, as msgpack_unpack). An empty one's
 * pointer differs: msgpack-c gives NULL or the header's last byte, we give
 * the (non-NULL) end of its header. */
static void assert_same_tree(const msgpack_object *a, const msgpack_object *b)
{
    assert_int_equal(a->type, b->type);
    switch (a->type) {
    case MSGPACK_OBJECT_STR:
    case MSGPACK_OBJECT_BIN:
        assert_int_equal(a->via.str.size, b->via.str.size);
        if (a->via.str.size > 0)
            assert_ptr_equal(a->via.str.ptr, b->via.str.ptr);
        assert_non_null(b->via.str.ptr);
        break;
    case MSGPACK_OBJECT_EXT:
        assert_int_equal(a->via.ext.type, b->via.ext.type);
        assert_int_equal(a->via.ext.size, b->via.ext.size);
        if (a->via.ext.size > 0)
            assert_ptr_equal(a->via.ext.ptr, b->via.ext.ptr);
        assert_non_null(b->via.ext.ptr);
        break;
    case MSGPACK_OBJECT_ARRAY:
        assert_int_equal(a->via.array.size, b->via.array.size);
        for (uint32_t i = 0; i < a->via.array.size; i++)
            assert_same_tree(&a->via.array.ptr[i], &b->via.array.ptr[i]);
        break;
    case MSGPACK_OBJECT_MAP:
        assert_int_equal(a->via.map.size, b->via.map.size);
        for (uint32_t i = 0; i < a->via.map.size; i++) {
            assert_same_tree(&a->via.map.ptr[i].key, &b->via.map.ptr[i].key);
            assert_same_tree(&a->via.map.ptr[i].val, &b->via.map.ptr[i].val);
        }
        break;
    default:
        assert_true(msgpack_object_equal(*a, *b));
        break;
    }
}

/* Containers nesting in o; counts its values of each type into seen. */
static int tree_depth(const msgpack_object *o, int seen[16])
{
    int d = 0;
    seen[o->type & 15]++;
    if (o->type == MSGPACK_OBJECT_ARRAY)
        for (uint32_t i = 0; i < o->via.array.size; i++) {
            int c = tree_depth(&o->via.array.ptr[i], seen);
            d = c > d ? c : d;
        }
    else if (o->type == MSGPACK_OBJECT_MAP)
        for (uint32_t i = 0; i < 2 * o->via.map.size; i++) {
            const msgpack_object_kv *kv = &o->via.map.ptr[i / 2];
            int c = tree_depth(i % 2 ? &kv->val : &kv->key, seen);
            d = c > d ? c : d;
        }
    else
        return 0;
    return d + 1;
}

static void pack_to(msgpack_sbuffer *sb, const msgpack_object *o)
{
    msgpack_packer pk;
    msgpack_sbuffer_init(sb);
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    assert_int_equal(msgpack_pack_object(&pk, *o), 0);
}

/* Thousands of random values (fixed seed) decode to what msgpack_unpack
 * gives; packed again they are the input bytes; every strict prefix and an
 * extra trailing byte are malformed. */
static void test_unpack_differential(void **state)
{
    int kinds_seen[16] = { 0 };
    int deep_trees = 0;         /* 15 levels or more */
    size_t bytes = 0, biggest = 0;
    for (int iter = 0; iter < 4000; iter++) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        bool canonical = true;
        int budget = 400;
        int depth = (int)(rng() % 21);
        rnd_value(&pk, &sb, depth, true, iter % 4 == 3, &canonical, &budget);
        size_t n = sb.size;
        char *buf = malloc(n + 1);  /* exact size for the decoders; +1 below */
        assert_non_null(buf);
        memcpy(buf, sb.data, n);

        msgpack_zone zr, zo;
        msgpack_zone_init(&zr, 1024);
        msgpack_zone_init(&zo, 1024);
        msgpack_object ref, ours;
        size_t off = 0;
        char *exact = malloc(n);
        assert_non_null(exact);
        memcpy(exact, buf, n);
        assert_int_equal(msgpack_unpack(exact, n, &off, &zr, &ref), MSGPACK_UNPACK_SUCCESS);
        assert_int_equal(off, n);
        assert_int_equal(jrpc_wire_unpack(exact, n, &zo, &ours), 0);
        assert_true(msgpack_object_equal(ref, ours));
        assert_same_tree(&ref, &ours);
        assert_int_equal(tree_depth(&ours, kinds_seen), depth);
        deep_trees += depth >= 15;
        bytes += n;
        biggest = n > biggest ? n : biggest;

        msgpack_sbuffer back, refback;
        pack_to(&back, &ours);
        pack_to(&refback, &ref);
        assert_int_equal(back.size, refback.size);
        assert_memory_equal(back.data, refback.data, back.size);
        if (canonical) {
            assert_int_equal(back.size, n);
            assert_memory_equal(back.data, exact, n);
        }
        msgpack_sbuffer_destroy(&back);
        msgpack_sbuffer_destroy(&refback);

        if (n < 300) {
            for (size_t k = 0; k < n; k++) {
                char *pre = malloc(k ? k : 1);
                memcpy(pre, exact, k);
                msgpack_object o;
                assert_int_equal(jrpc_wire_unpack(pre, k, &zo, &o), JRPC_WIRE_EMALFORMED);
                free(pre);
            }
            buf[n] = (char)(rng() & 0x7f);
            msgpack_object o;
            assert_int_equal(jrpc_wire_unpack(buf, n + 1, &zo, &o), JRPC_WIRE_EMALFORMED);
        }
        msgpack_zone_destroy(&zr);
        msgpack_zone_destroy(&zo);
        free(exact);
        free(buf);
        msgpack_sbuffer_destroy(&sb);
    }
    for (int t = MSGPACK_OBJECT_NIL; t <= MSGPACK_OBJECT_FLOAT32; t++)
        if (kinds_seen[t] < 100)
            fail_msg("only %d values of type %d", kinds_seen[t], t);
    print_message("differential: %zu bytes, biggest %zu, %d trees 15+ deep\n", bytes, biggest,
                  deep_trees);
    assert_true(deep_trees > 50 && biggest > 65536);
}

/* Every format byte, one value each, by hand: the types and values
 * msgpack-c gives, then garbage after a header. */
static void test_unpack_formats(void **state)
{
    static const struct { const char *b; size_t n; } cases[] = {
        { "\xc0", 1 }, { "\xc2", 1 }, { "\xc3", 1 },
        { "\x00", 1 }, { "\x7f", 1 }, { "\xe0", 1 }, { "\xff", 1 },
        { "\xcc\xff", 2 }, { "\xcd\xff\xfe", 3 }, { "\xce\xff\xff\xff\xfe", 5 },
        { "\xcf\xff\xff\xff\xff\xff\xff\xff\xfe", 9 },
        { "\xd0\x80", 2 }, { "\xd0\x7f", 2 }, { "\xd1\x80\x00", 3 }, { "\xd1\x00\x01", 3 },
        { "\xd2\x80\x00\x00\x00", 5 }, { "\xd2\x7f\xff\xff\xff", 5 },
        { "\xd3\x80\x00\x00\x00\x00\x00\x00\x00", 9 },
        { "\xd3\x7f\xff\xff\xff\xff\xff\xff\xff", 9 },
        { "\xd3\xff\xff\xff\xff\xff\xff\xff\xff", 9 },
        { "\xca\x3f\xc0\x00\x00", 5 }, { "\xca\xff\x80\x00\x00", 5 },
        { "\xcb\x40\x09\x21\xfb\x54\x44\x2d\x18", 9 },
        { "\xa0", 1 }, { "\xa3" "abc", 4 }, { "\xbf" "0123456789012345678901234567890", 32 },
        { "\xd9\x02hi", 4 }, { "\xda\x00\x02hi", 5 }, { "\xdb\x00\x00\x00\x02hi", 7 },
        { "\xc4\x00", 2 }, { "\xc5\x00\x01\x00", 4 }, { "\xc6\x00\x00\x00\x01\xff", 6 },
        { "\xd4\x01" "a", 3 }, { "\xd5\xff" "ab", 4 }, { "\xd6\x80" "abcd", 6 },
        { "\xd7\x7f" "abcdefgh", 10 }, { "\xd8\x05" "abcdefghijklmnop", 18 },
        { "\xc7\x00\x03", 3 }, { "\xc7\x02\xfe" "ab", 5 }, { "\xc8\x00\x01\x01" "z", 5 },
        { "\xc9\x00\x00\x00\x01\xff" "z", 7 },
        { "\x90", 1 }, { "\x92\x01\xc0", 3 }, { "\xdc\x00\x01\x01", 4 },
        { "\xdd\x00\x00\x00\x02\xc2\xc3", 7 },
        { "\x80", 1 }, { "\x81\x01\x02", 3 }, { "\xde\x00\x01\xa1k\x90", 6 },
        { "\xdf\x00\x00\x00\x01\x80\x80", 7 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *buf = malloc(cases[i].n);
        memcpy(buf, cases[i].b, cases[i].n);
        msgpack_zone zr, zo;
        msgpack_zone_init(&zr, 256);
        msgpack_zone_init(&zo, 256);
        msgpack_object ref, ours;
        size_t off = 0;
        if (msgpack_unpack(buf, cases[i].n, &off, &zr, &ref) != MSGPACK_UNPACK_SUCCESS)
            fail_msg("case %zu: msgpack_unpack refused it", i);
        if (jrpc_wire_unpack(buf, cases[i].n, &zo, &ours) != 0)
            fail_msg("case %zu: refused", i);
        if (!msgpack_object_equal(ref, ours))
            fail_msg("case %zu: different objects", i);
        assert_same_tree(&ref, &ours);
        for (size_t k = 0; k < cases[i].n; k++) {
            msgpack_object o;
            if (jrpc_wire_unpack(buf, k, &zo, &o) != JRPC_WIRE_EMALFORMED)
                fail_msg("case %zu: prefix %zu decoded", i, k);
        }
        msgpack_zone_destroy(&zr);
        msgpack_zone_destroy(&zo);
        free(buf);
    }
    /* Reserved byte, anywhere; a NULL or empty buffer. */
    msgpack_zone z;
    msgpack_zone_init(&z, 256);
    msgpack_object o;
    assert_int_equal(jrpc_wire_unpack("\x92\x01\xc1", 3, &z, &o), JRPC_WIRE_EMALFORMED);
    assert_int_equal(jrpc_wire_unpack("\x81\xc1\x01", 3, &z, &o), JRPC_WIRE_EMALFORMED);
    assert_int_equal(jrpc_wire_unpack(NULL, 0, &z, &o), JRPC_WIRE_EMALFORMED);
    assert_int_equal(jrpc_wire_unpack("", 0, &z, &o), JRPC_WIRE_EMALFORMED);
    msgpack_zone_destroy(&z);
}

/* Heap bytes in use, to bound what one decode allocates; 0 when unknown. */
#if defined(__SANITIZE_ADDRESS__)
size_t __sanitizer_get_current_allocated_bytes(void);
static size_t heap_in_use(void)
{
    return __sanitizer_get_current_allocated_bytes();
}
#elif defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
#include <malloc.h>
static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}
#else
static size_t heap_in_use(void)
{
    return 0;
}
#endif

/* Nested array16s each claiming every byte left pass a per-container check
 * but not the running count of values owed: refused after two headers,
 * where checking each container alone would allocate ~60000 slots at each
 * of the 200 levels (300 MB) before finding the frame short. */
static void test_unpack_claims(void **state)
{
    size_t levels = 200, n = 3 * levels + 60000;
    unsigned char *buf = malloc(n);
    assert_non_null(buf);
    memset(buf, 0xc0, n);
    for (size_t i = 0; i < levels; i++) {
        size_t left = n - 3 * (i + 1);
        buf[3 * i] = 0xdc;
        buf[3 * i + 1] = (unsigned char)(left >> 8);
        buf[3 * i + 2] = (unsigned char)left;
    }
    msgpack_zone z;
    msgpack_zone_init(&z, 256);
    msgpack_object o;
    size_t before = heap_in_use();
    assert_int_equal(jrpc_wire_unpack((char *)buf, n, &z, &o), JRPC_WIRE_EMALFORMED);
    size_t grew = heap_in_use() - before;
    if (grew > 64 * n)
        fail_msg("a %zu-byte frame made the decoder allocate %zu bytes", n, grew);
    msgpack_zone_destroy(&z);
    /* A claim of exactly the bytes left, all there, is fine. */
    msgpack_zone_init(&z, 256);
    buf[0] = 0xdc;
    buf[1] = (unsigned char)((n - 3) >> 8);
    buf[2] = (unsigned char)(n - 3);
    memset(buf + 3, 0xc0, n - 3);
    before = heap_in_use();
    assert_int_equal(jrpc_wire_unpack((char *)buf, n, &z, &o), 0);
    assert_int_equal(o.via.array.size, n - 3);
    grew = heap_in_use() - before;
    if (grew > 64 * n)
        fail_msg("a %zu-byte frame made the decoder allocate %zu bytes", n, grew);
    msgpack_zone_destroy(&z);
    free(buf);
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
        cmocka_unit_test(test_ready_options),
        cmocka_unit_test(test_bare_round_trip),
        cmocka_unit_test(test_heartbeat_settings),
        cmocka_unit_test(test_reject),
        cmocka_unit_test(test_peek_type),
        cmocka_unit_test(test_request_item_seq),
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
        cmocka_unit_test(test_request_traceparent),
        cmocka_unit_test(test_response_wrong_types),
        cmocka_unit_test(test_seq_zero),
        cmocka_unit_test(test_huge_lengths),
        cmocka_unit_test(test_deep),
        cmocka_unit_test(test_deep_params_round_trip),
        cmocka_unit_test(test_unpack_differential),
        cmocka_unit_test(test_unpack_formats),
        cmocka_unit_test(test_unpack_claims),
        cmocka_unit_test(test_header_cases),
        cmocka_unit_test(test_strerror),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
