/* Tests of jrpc_wire: round trips of every message, then hostile input —
 * truncations, garbage, mutations, wrong types, wrong versions, huge declared
 * lengths and deep nesting — which must give EMALFORMED/EVERSION, never a
 * crash (this suite runs under ASan+UBSan too). The msgpack decoder itself
 * is test_jrpc_mpack's, the client header frame test_jrpc_header's. Every
 * decoded frame sits in a malloc'd buffer of exactly its size, so an
 * over-read trips ASan. */
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
#include "jrpc_json.h"
#include "jrpc_mpack.h"
#include "jrpc_wire.h"
#include "jrpc_batch.h"
#include "mpack_helpers.h"
#include "mpack_gen.h"

#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

/* ---- helpers ---- */

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
        assert_true(f.m.type >= JRPC_WIRE_READY && f.m.type <= JRPC_WIRE_PROBE);
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

/* Decodes bytes into f, which must succeed. */
static void decode_ok(frame_t *f, const void *bytes, size_t n)
{
    frame_decode(f, bytes, n);
    assert_int_equal(f->rc, 0);
}

/* Every proper prefix of the n bytes is malformed. */
static void expect_prefixes_malformed(const void *bytes, size_t n)
{
    for (size_t k = 0; k < n; k++)
        assert_int_equal(check_bytes(bytes, k), JRPC_WIRE_EMALFORMED);
}

/* b holds exactly the n bytes of ex. */
static void expect_buf(const jrpc_buf_t *b, const void *ex, size_t n)
{
    assert_int_equal(b->len, n);
    assert_memory_equal(b->p, ex, n);
}

/* A packer on a fresh b, the frame's head written: [1, type, ... of nelems. */
static void pk_head(msgpack_packer *pk, jrpc_buf_t *b, uint32_t nelems, int type)
{
    pk_init(pk, b);
    msgpack_pack_array(pk, nelems);
    msgpack_pack_int(pk, 1);
    msgpack_pack_int(pk, type);
}

/* [1, type, [[ then an item of item_len elements, for the caller to write. */
static void pk_one_item(msgpack_packer *pk, jrpc_buf_t *b, int type, uint32_t item_len)
{
    pk_head(pk, b, 3, type);
    msgpack_pack_array(pk, 1);
    msgpack_pack_array(pk, item_len);
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

/* ---- round trips ---- */

static void test_ready_round_trip(void **state)
{
    jrpc_buf_t b;
    build_ready(&b);
    frame_t f;
    decode_ok(&f, b.p, b.len);
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
    pk_head(&pk, &b, 7, JRPC_WIRE_READY);
    msgpack_pack_uint32(&pk, UINT32_MAX);
    msgpack_pack_array(&pk, 1);
    pk_str(&pk, "m");
    msgpack_pack_map(&pk, 1);
    pk_str(&pk, "name");
    pk_str(&pk, "w1");
    msgpack_pack_true(&pk);
    msgpack_pack_nil(&pk);
    decode_ok(&f, b.p, b.len);
    assert_int_equal(f.m.credit, UINT32_MAX);
    assert_non_null(f.m.options);
    assert_true(str_eq(jrpc_mpack_map_get(f.m.options, "name"), "w1"));
    assert_null(jrpc_mpack_map_get(f.m.options, "idempotent"));
    assert_null(jrpc_mpack_map_get(f.m.methods, "m"));
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
    decode_ok(&f, b.p, b.len);
    assert_int_equal(f.m.type, JRPC_WIRE_READY);
    assert_non_null(f.m.options);
    assert_true(str_eq(jrpc_mpack_map_get(f.m.options, "name"), "w7"));
    assert_non_null(f.m.idempotent);
    assert_int_equal(f.m.idempotent->via.array.size, 2);
    assert_true(str_eq(&f.m.idempotent->via.array.ptr[0], "sum"));
    assert_true(str_eq(&f.m.idempotent->via.array.ptr[1], "echo"));
    frame_dispose(&f);
    /* Every truncation of it is malformed, never a crash. */
    for (size_t n = 0; n < b.len; n++)
        assert_int_not_equal(check_bytes(b.p, n), 0);
    jrpc_buf_dispose(&b);

    /* service and schemas: strings, decoded as they were sent */
    jrpc_buf_init(&b);
    o = (jrpc_wire_ready_opts_t){ .service = "billing", .schemas = "{\"m\":{}}" };
    assert_int_equal(jrpc_wire_put_ready_opts(&b, 1, demo_methods, 1, &o), 0);
    decode_ok(&f, b.p, b.len);
    assert_true(str_eq(f.m.service, "billing"));
    assert_true(str_eq(f.m.schemas, "{\"m\":{}}"));
    assert_null(f.m.idempotent);
    frame_dispose(&f);
    jrpc_buf_reset(&b);
    assert_int_equal(jrpc_wire_put_ready_opts(&b, 1, demo_methods, 1, &none), 0);
    decode_ok(&f, b.p, b.len);
    assert_null(f.m.service);
    assert_null(f.m.schemas);
    frame_dispose(&f);
    jrpc_buf_dispose(&b);
    for (int c = 0; c < 3; c++) {   /* a service that is no str, twice; schemas no str */
        msgpack_packer pk;
        jrpc_buf_init(&b);
        pk_head(&pk, &b, 5, JRPC_WIRE_READY);
        msgpack_pack_int(&pk, 4);
        msgpack_pack_array(&pk, 1);
        pk_str(&pk, "m");
        msgpack_pack_map(&pk, c == 1 ? 2 : 1);
        pk_str(&pk, c == 2 ? "schemas" : "service");
        if (c == 1)
            pk_str(&pk, "a");
        if (c == 1)
            pk_str(&pk, "service");
        if (c == 1)
            pk_str(&pk, "b");
        else
            msgpack_pack_int(&pk, 1);
        assert_int_equal(check_bytes(b.p, b.len), JRPC_WIRE_EMALFORMED);
        jrpc_buf_dispose(&b);
    }

    /* Only idempotent, and an empty list. */
    jrpc_buf_init(&b);
    o = (jrpc_wire_ready_opts_t){ .idempotent = idem, .nidempotent = 1 };
    assert_int_equal(jrpc_wire_put_ready_opts(&b, 1, demo_methods, 1, &o), 0);
    decode_ok(&f, b.p, b.len);
    assert_null(jrpc_mpack_map_get(f.m.options, "name"));
    assert_int_equal(f.m.idempotent->via.array.size, 1);
    frame_dispose(&f);
    jrpc_buf_dispose(&b);

    /* Options by hand: {key: value} with each bad value; ok says which fit. */
    enum { IDEM_STR, IDEM_INT_ELEM, IDEM_EMPTY_ELEM, IDEM_TWICE, NAME_INT, NAME_TWICE,
           NONSTR_KEY, IDEM_EMPTY_ARRAY, UNKNOWN_KEY, NCASES };
    for (int c = 0; c < NCASES; c++) {
        msgpack_packer pk;
        pk_head(&pk, &b, 5, JRPC_WIRE_READY);
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
        expect_buf(&b, ((char[]){ (char)0x92, 1, (char)type }), 3);
        frame_t f;
        decode_ok(&f, b.p, b.len);
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

/* Each of the n frames is malformed; a failure names `what` and the case. */
static void expect_malformed(const bytes_case_t *cases, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (check_bytes(cases[i].b, cases[i].n) != JRPC_WIRE_EMALFORMED)
            fail_msg("%s %zu decoded", what, i);
}

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
    expect_buf(&b, ex, sizeof ex);
    assert_int_equal(decode_msg(b.p, b.len, &m), 0);
    assert_int_equal(m.type, JRPC_WIRE_HEARTBEAT);
    assert_int_equal(m.heartbeat_ms, 5000);
    assert_int_equal(m.liveness, 3);
    expect_prefixes_malformed(b.p, b.len);
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
    expect_malformed(bad, sizeof bad / sizeof *bad, "bad heartbeat");
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
    expect_buf(&b, ex, sizeof ex);
    assert_int_equal(decode_msg(b.p, b.len, &m), 0);
    assert_int_equal(m.type, JRPC_WIRE_REJECT);
    assert_int_equal(m.request, 3);
    assert_int_equal(m.nitems, 0);
    expect_prefixes_malformed(b.p, b.len);
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
    expect_malformed(bad, sizeof bad / sizeof *bad, "bad reject");
    jrpc_buf_dispose(&b);
}

#define SID "3f9a0c41d2e87b65-0001-f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"

/* MESSAGE [1, 7, seq, session, body] (PROTOCOL.md 2.6), both ways. */
/* SCHEMAS [1, 8, str]: its bytes, decoded, every prefix malformed, and a
 * non-str third element malformed. */
static void test_schemas_frame(void **state)
{
    (void)state;
    jrpc_buf_t b;
    frame_t f;
    jrpc_buf_init(&b);
    static const char sch[] = "{\"tools/call\":{}}";
    assert_int_equal(jrpc_wire_put_schemas(&b, sch, sizeof sch - 1), 0);
    static const char head[] = { (char)0x93, 1, 8, (char)(0xa0 + sizeof sch - 1) };
    assert_int_equal(b.len, sizeof head + sizeof sch - 1);
    assert_memory_equal(b.p, head, sizeof head);
    frame_decode(&f, b.p, b.len);
    assert_int_equal(f.rc, 0);
    assert_int_equal(f.m.type, JRPC_WIRE_SCHEMAS);
    assert_int_equal(f.m.schemas->via.str.size, sizeof sch - 1);
    assert_memory_equal(f.m.schemas->via.str.ptr, sch, sizeof sch - 1);
    frame_dispose(&f);
    expect_prefixes_malformed(b.p, b.len);
    static const char bad[] = { (char)0x93, 1, 8, 5 };
    frame_decode(&f, bad, sizeof bad);
    assert_int_equal(f.rc, JRPC_WIRE_EMALFORMED);
    frame_dispose(&f);
    static const char ten[] = { (char)0x93, 1, 10, (char)0xa0 };   /* no such type */
    frame_decode(&f, ten, sizeof ten);
    assert_int_equal(f.rc, JRPC_WIRE_EMALFORMED);
    frame_dispose(&f);
    jrpc_buf_dispose(&b);
}

static void test_message(void **state)
{
    (void)state;
    jrpc_buf_t b;
    frame_t f;
    jrpc_buf_init(&b);
    static const char note[] = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}";
    jrpc_span_t body = { note, sizeof note - 1 }, none = { NULL, 0 }, sid = { SID, sizeof SID - 1 };
    /* a call's message, no session */
    assert_int_equal(jrpc_wire_put_message(&b, 9, none, body), 0);
    static const char head[] = { (char)0x95, 1, 7, 9, (char)0xc0, (char)0xc4, sizeof note - 1 };
    assert_memory_equal(b.p, head, sizeof head);
    frame_decode(&f, b.p, b.len);
    assert_int_equal(f.rc, 0);
    assert_int_equal(f.m.type, JRPC_WIRE_MESSAGE);
    assert_int_equal(f.m.seq, 9);
    assert_int_equal(f.m.session.n, 0);
    assert_int_equal(f.m.body.n, sizeof note - 1);
    assert_memory_equal(f.m.body.p, note, sizeof note - 1);
    frame_dispose(&f);
    expect_prefixes_malformed(b.p, b.len);
    /* a session's end (body nil), and a session's message (seq 0) */
    jrpc_buf_reset(&b);
    assert_int_equal(jrpc_wire_put_message(&b, 0, sid, none), 0);
    frame_decode(&f, b.p, b.len);
    assert_int_equal(f.rc, 0);
    assert_int_equal(f.m.seq, 0);
    assert_int_equal(f.m.session.n, sizeof SID - 1);
    assert_memory_equal(f.m.session.p, SID, sizeof SID - 1);
    assert_null(f.m.body.p);
    frame_dispose(&f);
    jrpc_buf_reset(&b);
    jrpc_span_t empty = { "", 0 };
    assert_int_equal(jrpc_wire_put_message(&b, UINT64_MAX, sid, empty), 0);
    frame_decode(&f, b.p, b.len);
    assert_int_equal(f.rc, 0);
    assert_true(f.m.seq == UINT64_MAX);
    assert_non_null(f.m.body.p);
    assert_int_equal(f.m.body.n, 0);
    frame_dispose(&f);
    /* trailing elements are ignored, as everywhere */
    static const char trailing[] = "\x96\x01\x07\x01\xc0\xc4\x02" "{}\x05";
    frame_decode(&f, trailing, sizeof trailing - 1);
    assert_int_equal(f.rc, 0);
    frame_dispose(&f);
    static const bytes_case_t bad[] = {
        CASE("\x94\x01\x07\x01\xc0"),               /* no body */
        CASE("\x95\x01\x07\x01\xc0\xc0"),           /* session and body both nil */
        CASE("\x95\x01\x07\xff\xc0\xc4\x00"),       /* seq -1 */
        CASE("\x95\x01\x07\xc0\xc0\xc4\x00"),       /* seq nil */
        CASE("\x95\x01\x07\x01\xa0\xc4\x00"),       /* session "" */
        CASE("\x95\x01\x07\x01\xa2" " x\xc4\x00"),     /* session with a space */
        CASE("\x95\x01\x07\x01\xa1\x7f\xc4\x00"),   /* session with DEL */
        CASE("\x95\x01\x07\x01\x01\xc4\x00"),       /* session 1 */
        CASE("\x95\x01\x07\x01\xc0\xa2" "{}"),          /* body a str */
        CASE("\x95\x01\x07\x01\xc0\x80"),            /* body a map */
    };
    expect_malformed(bad, sizeof bad / sizeof *bad, "bad message");
    /* a session of 129 bytes; a body past JRPC_WIRE_MESSAGE_MAX */
    jrpc_buf_reset(&b);
    char big[JRPC_WIRE_SESSION_MAX + 1];
    memset(big, 'a', sizeof big);
    assert_int_equal(jrpc_buf_puts(&b, "\x95\x01\x07\x01\xd9\x81"), 0);
    assert_int_equal(jrpc_buf_append(&b, big, sizeof big), 0);
    assert_int_equal(jrpc_buf_puts(&b, "\xc0"), 0);
    assert_int_equal(check_bytes(b.p, b.len), JRPC_WIRE_EMALFORMED);
    jrpc_buf_reset(&b);
    char *huge = calloc(1, JRPC_WIRE_MESSAGE_MAX + 1);
    assert_non_null(huge);
    jrpc_span_t hb = { huge, JRPC_WIRE_MESSAGE_MAX };
    assert_int_equal(jrpc_wire_put_message(&b, 1, none, hb), 0);
    assert_int_equal(check_bytes(b.p, b.len), 0);
    jrpc_buf_reset(&b);
    assert_int_equal(jrpc_buf_puts(&b, "\x95\x01\x07\x01\xc0\xc6\x00\x10\x00\x01"), 0);
    assert_int_equal(jrpc_buf_append(&b, huge, JRPC_WIRE_MESSAGE_MAX + 1), 0);
    assert_int_equal(check_bytes(b.p, b.len), JRPC_WIRE_EMALFORMED);
    free(huge);
    jrpc_buf_dispose(&b);
}

/* PROBE [1, 9, probe, session, live] (PROTOCOL.md 2.8): the question (live
 * nil), both answers, READY's "probes" option, and what is malformed. */
static void test_probe(void **state)
{
    (void)state;
    jrpc_buf_t b;
    frame_t f;
    jrpc_buf_init(&b);
    jrpc_span_t sid = { SID, sizeof SID - 1 };
    static const char head[] = { (char)0x95, 1, 9, 7, (char)0xd9, sizeof SID - 1 };   /* str 8 */
    for (int live = -1; live <= 1; live++) {
        jrpc_buf_reset(&b);
        assert_int_equal(jrpc_wire_put_probe(&b, 7, sid, live), 0);
        assert_int_equal(b.len, sizeof head + sizeof SID - 1 + 1);
        assert_memory_equal(b.p, head, sizeof head);
        assert_memory_equal(b.p + sizeof head, SID, sizeof SID - 1);
        assert_int_equal((unsigned char)b.p[b.len - 1], live < 0 ? 0xc0 : live ? 0xc3 : 0xc2);
        frame_decode(&f, b.p, b.len);
        assert_int_equal(f.rc, 0);
        assert_int_equal(f.m.type, JRPC_WIRE_PROBE);
        assert_true(f.m.probe == 7);
        assert_int_equal(f.m.live, live);
        assert_int_equal(f.m.session.n, sizeof SID - 1);
        assert_memory_equal(f.m.session.p, SID, sizeof SID - 1);
        assert_int_equal(jrpc_wire_peek_type(f.buf, b.len), JRPC_WIRE_PROBE);
        frame_dispose(&f);
        expect_prefixes_malformed(b.p, b.len);
    }
    jrpc_buf_reset(&b);
    assert_int_equal(jrpc_wire_put_probe(&b, UINT64_MAX, sid, 1), 0);
    frame_decode(&f, b.p, b.len);
    assert_int_equal(f.rc, 0);
    assert_true(f.m.probe == UINT64_MAX);
    frame_dispose(&f);
    static const bytes_case_t bad[] = {
        CASE("\x94\x01\x09\x01\xa1" "s"),              /* no live */
        CASE("\x95\x01\x09\x00\xa1" "s\xc0"),          /* probe 0 */
        CASE("\x95\x01\x09\xff\xa1" "s\xc0"),          /* probe -1 */
        CASE("\x95\x01\x09\xc0\xa1" "s\xc0"),          /* probe nil */
        CASE("\x95\x01\x09\x01\xc0\xc0"),              /* session nil */
        CASE("\x95\x01\x09\x01\xa0\xc0"),              /* session "" */
        CASE("\x95\x01\x09\x01\xa2" " x\xc0"),          /* session with a space */
        CASE("\x95\x01\x09\x01\xa1" "s\x01"),          /* live 1 */
        CASE("\x95\x01\x09\x01\xa1" "s\xa4" "true"),   /* live a str */
    };
    expect_malformed(bad, sizeof bad / sizeof *bad, "bad probe");
    /* READY "probes": true sent only when set; a bool, else malformed */
    const char *methods[] = { "initialize" };
    jrpc_wire_ready_opts_t o = { .instance = "0123456789abcdef", .probes = true };
    jrpc_buf_reset(&b);
    assert_int_equal(jrpc_wire_put_ready_opts(&b, 4, methods, 1, &o), 0);
    frame_decode(&f, b.p, b.len);
    assert_int_equal(f.rc, 0);
    assert_true(f.m.probes && f.m.has_instance);
    frame_dispose(&f);
    o.probes = false;
    jrpc_buf_reset(&b);
    assert_int_equal(jrpc_wire_put_ready_opts(&b, 4, methods, 1, &o), 0);
    assert_null(memmem(b.p, b.len, "probes", 6));
    frame_decode(&f, b.p, b.len);
    assert_false(f.m.probes);
    frame_dispose(&f);
    static const char no[] = "\x95\x01\x01\x01\x91\xa1" "m\x81\xa6" "probes\xc2";
    frame_decode(&f, no, sizeof no - 1);
    assert_int_equal(f.rc, 0);
    assert_false(f.m.probes);
    frame_dispose(&f);
    static const bytes_case_t bad_ready[] = {
        CASE("\x95\x01\x01\x01\x91\xa1" "m\x81\xa6" "probes\x01"),        /* not a bool */
        CASE("\x95\x01\x01\x01\x91\xa1" "m\x82\xa6" "probes\xc3\xa6" "probes\xc3"), /* twice */
    };
    expect_malformed(bad_ready, sizeof bad_ready / sizeof *bad_ready, "bad probes");
    jrpc_buf_dispose(&b);
}

/* READY's "instance" option and a REQUEST item's 6th element, the session. */
static void test_instance_and_session(void **state)
{
    (void)state;
    jrpc_buf_t b;
    frame_t f;
    jrpc_buf_init(&b);
    const char *methods[] = { "initialize" };
    jrpc_wire_ready_opts_t o = { .instance = "0123456789abcdef" };
    assert_int_equal(jrpc_wire_put_ready_opts(&b, 4, methods, 1, &o), 0);
    frame_decode(&f, b.p, b.len);
    assert_int_equal(f.rc, 0);
    assert_true(f.m.has_instance);
    assert_true(f.m.instance == 0x0123456789abcdefull);
    frame_dispose(&f);
    jrpc_buf_reset(&b);
    assert_int_equal(jrpc_wire_put_ready(&b, 4, methods, 1), 0);
    frame_decode(&f, b.p, b.len);
    assert_false(f.m.has_instance);
    frame_dispose(&f);
    static const bytes_case_t bad[] = {
        CASE("\x95\x01\x01\x01\x91\xa1" "m\x81\xa8" "instance\xa3" "abc"),   /* too short */
        CASE("\x95\x01\x01\x01\x91\xa1" "m\x81\xa8" "instance\x01"),      /* not a str */
        CASE("\x95\x01\x01\x01\x91\xa1" "m\x81\xa8" "instance\xb0" "0123456789ABCDEF"),
    };
    expect_malformed(bad, sizeof bad / sizeof *bad, "bad instance");
    /* the 6th element: a session, or nil (the broker takes MESSAGE frames) */
    jrpc_span_t sid = { SID, sizeof SID - 1 }, none = { NULL, 0 };
    jrpc_span_t m = { "tools/call", 10 }, params = { "{}", 2 };
    jrpc_wire_msg_t *wm;
    jrpc_wire_call_t c;
    for (int k = 0; k < 3; k++) {
        jrpc_buf_reset(&b);
        assert_int_equal(jrpc_wire_put_request_begin(&b), 0);
        if (k < 2)
            assert_int_equal(jrpc_wire_put_request_call_session(&b, 5, m, params, k == 0, 100,
                                                                none, k ? sid : none), 0);
        else
            assert_int_equal(jrpc_wire_put_request_call_json(&b, 5, m, params, true, 100, none), 0);
        jrpc_wire_put_request_end(&b, 1);
        frame_decode(&f, b.p, b.len);
        assert_int_equal(f.rc, 0);
        wm = &f.m;
        assert_int_equal(jrpc_wire_request_item(wm, 0, &c), 0);
        assert_int_equal(c.messages, k < 2);
        assert_int_equal(c.session.n, k == 1 ? sizeof SID - 1 : 0);
        if (k == 1)
            assert_memory_equal(c.session.p, SID, sizeof SID - 1);
        assert_int_equal(c.traceparent.n, 0);
        assert_int_equal(c.timeout_ms, 100);
        frame_dispose(&f);
    }
    /* with a traceparent too */
    jrpc_buf_reset(&b);
    jrpc_span_t tp = { TP, sizeof TP - 1 };
    assert_int_equal(jrpc_wire_put_request_begin(&b), 0);
    assert_int_equal(jrpc_wire_put_request_call_session(&b, 5, m, params, false, 0, tp, sid), 0);
    jrpc_wire_put_request_end(&b, 1);
    frame_decode(&f, b.p, b.len);
    assert_int_equal(jrpc_wire_request_item(&f.m, 0, &c), 0);
    assert_int_equal(c.traceparent.n, sizeof TP - 1);
    assert_int_equal(c.session.n, sizeof SID - 1);
    frame_dispose(&f);
    /* a 6th element that is no session: the item is malformed */
    static const char bad6[] = "\x93\x01\x02\x91\x96\x07\xa1" "m\xc0\x00\xc0\x01";
    frame_decode(&f, bad6, sizeof bad6 - 1);
    assert_int_equal(f.rc, 0);
    assert_int_equal(jrpc_wire_request_item(&f.m, 0, &c), JRPC_WIRE_EMALFORMED);
    frame_dispose(&f);
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
        decode_ok(&f, cases[i].c.b, cases[i].c.n);
        jrpc_seq_t seq = 0;
        if (jrpc_wire_request_item_seq(&f.m, 0, &seq) != cases[i].rc || seq != cases[i].seq)
            fail_msg("item seq case %zu", i);
        jrpc_wire_call_t c;
        if (i > 0)   /* none but the first is a valid item */
            assert_int_equal(jrpc_wire_request_item(&f.m, 0, &c), JRPC_WIRE_EMALFORMED);
        frame_dispose(&f);
    }
}

typedef void (*builder_fn)(jrpc_buf_t *);

/* A frame of three items the builder writes, of that type: its array32
 * header is the one the builder promises, and it decodes. */
static void decode_built(frame_t *f, jrpc_buf_t *b, builder_fn build, int type)
{
    build(b);
    assert_memory_equal(b->p, ((char[]){ (char)0x93, 1, (char)type, (char)0xdd, 0, 0, 0, 3 }), 8);
    decode_ok(f, b->p, b->len);
    assert_int_equal(f->m.type, type);
    assert_int_equal(f->m.nitems, 3);
}

static void test_request_round_trip(void **state)
{
    jrpc_buf_t b;
    frame_t f;
    decode_built(&f, &b, build_request, JRPC_WIRE_REQUEST);
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
    const msgpack_object *a = jrpc_mpack_map_get(c.params, "a");
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
    frame_t f;
    decode_built(&f, &b, build_response, JRPC_WIRE_RESPONSE);
    jrpc_wire_answer_t a;
    assert_int_equal(jrpc_wire_response_item(&f.m, 0, &a), 0);
    assert_int_equal(a.seq, 1);
    assert_false(a.is_error);
    assert_int_equal(a.value->via.u64, 19);
    assert_int_equal(jrpc_wire_response_item(&f.m, 1, &a), 0);
    assert_int_equal(a.seq, 2);
    assert_true(a.is_error);
    const msgpack_object *code = jrpc_mpack_map_get(a.value, "code");
    assert_int_equal(code->type, MSGPACK_OBJECT_NEGATIVE_INTEGER);
    assert_int_equal(code->via.i64, -32602);
    assert_true(str_eq(jrpc_mpack_map_get(a.value, "message"), "Invalid params"));
    assert_null(jrpc_mpack_map_get(a.value, "data"));
    assert_int_equal(jrpc_wire_response_item(&f.m, 2, &a), 0);
    assert_true(str_eq(jrpc_mpack_map_get(a.value, "data"), "bad"));
    frame_dispose(&f);
    jrpc_buf_dispose(&b);
}

/* ---- hostile input ---- */

static void test_truncated(void **state)
{
    builder_fn builders[] = { build_ready, build_request, build_response };
    for (size_t k = 0; k < sizeof builders / sizeof *builders; k++) {
        jrpc_buf_t b;
        builders[k](&b);
        expect_prefixes_malformed(b.p, b.len);
        assert_int_equal(check_bytes(b.p, b.len), 0);
        jrpc_buf_dispose(&b);
    }
    static const char hb[] = { (char)0x92, 1, 4 };
    expect_prefixes_malformed(hb, sizeof hb);
}

static void test_extra_bytes(void **state)
{
    static const char hb[] = { (char)0x92, 1, 4, 0 };
    assert_int_equal(check_bytes(hb, sizeof hb), JRPC_WIRE_EMALFORMED);
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
    }
    (void)ok;
}

/* Valid frames with one to four random bytes changed: decoding either
 * succeeds or fails cleanly. */
static void test_mutations(void **state)
{
    builder_fn builders[] = { build_ready, build_request, build_response };
    for (size_t k = 0; k < sizeof builders / sizeof *builders; k++) {
        jrpc_buf_t b;
        builders[k](&b);
        check_mutations(b.p, b.len, check_bytes, 5000);
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
    static const bytes_case_t cases[] = {
        { "\x90", 1 },                       /* [] */
        { "\x91\x01", 2 },                   /* [1] */
        { "\x92\x01\x00", 3 },               /* type 0 */
        { "\x92\x01\x06", 3 },               /* type 6 (REJECT) without its request */
        { "\x93\x01\x08\x01", 4 },           /* type 8 */
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
    expect_malformed(cases, sizeof cases / sizeof *cases, "case");
}

static void test_ready_wrong_types(void **state)
{
    for (int field = 2; field <= 4; field++) {
        for (int bad = 0; bad < NBAD; bad++) {
            jrpc_buf_t b;
            msgpack_packer pk;
            pk_head(&pk, &b, 5, JRPC_WIRE_READY);
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
        pk_head(&pk, &b, 4, JRPC_WIRE_READY);
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
            pk_one_item(&pk, &b, JRPC_WIRE_REQUEST, 6); /* a valid traceparent, then an ignored element */
            if (field == 0) pack_bad_value(&pk, bad); else msgpack_pack_uint64(&pk, 9);
            if (field == 1) pack_bad_value(&pk, bad); else pk_str(&pk, "sum");
            if (field == 2) pack_bad_value(&pk, bad); else msgpack_pack_nil(&pk);
            if (field == 3) pack_bad_value(&pk, bad); else msgpack_pack_uint32(&pk, 100);
            pk_str(&pk, TP);
            pk_str(&pk, "future");
            int rc = check_buf(&b);
            bool fits = (field == 0 && bad == 9) ||             /* seq 2^32 */
                        (field == 1 && bad == 4) ||             /* method "1" */
                        (field == 2 && (bad == 0 || bad == 5 || bad == 6 || bad == 7)) ||  /* bin: JSON */
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
    expect_buf(&b, example, sizeof example);

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
    decode_ok(&f, b.p, b.len);
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
        pk_one_item(&pk, &b, JRPC_WIRE_REQUEST, 5);
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
        decode_ok(&f, b.p, b.len);
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
                pk_one_item(&pk, &b, JRPC_WIRE_RESPONSE, 3);
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
    static const bytes_case_t cases[] = { HUGE_LENGTHS_MSGPACK, HUGE_LENGTHS_REQUEST };
    expect_malformed(cases, sizeof cases / sizeof *cases, "case");
}

/* A REQUEST whose params nest `depth` arrays deep. */
static int check_nested(int depth, int use_maps)
{
    jrpc_buf_t b;
    msgpack_packer pk;
    pk_one_item(&pk, &b, JRPC_WIRE_REQUEST, 4);
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
    fill_deep_arrays(deep, n);
    assert_int_equal(check_bytes(deep, n), JRPC_WIRE_EMALFORMED);
    /* The same as maps ({nil: {nil: ...}}). (The limit itself, an empty
     * innermost container counting as a level: test_jrpc_mpack.) */
    fill_deep_maps(deep, n);
    assert_int_equal(check_bytes(deep, n), JRPC_WIRE_EMALFORMED);
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
    decode_ok(&f, b.p, b.len);
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

static void test_strerror(void **state)
{
    assert_string_not_equal(jrpc_wire_strerror(JRPC_WIRE_EMALFORMED), "unknown error");
    assert_string_not_equal(jrpc_wire_strerror(JRPC_WIRE_EVERSION), "unknown error");
    assert_string_equal(jrpc_wire_strerror(-ENOMEM), "out of memory");
    assert_string_equal(jrpc_wire_strerror(-12345), "unknown error");
}

/* The REQUEST item and result head writers write in place: their bytes must
 * be msgpack-c's packer's, at every encoding boundary. */
static void test_writers_match_msgpack_c(void **state)
{
    (void)state;
    static const uint64_t nums[] = { 1, 127, 128, 255, 256, 65535, 65536, UINT32_MAX,
                                     (uint64_t)UINT32_MAX + 1, UINT64_MAX };
    static const size_t lens[] = { 1, 31, 32, 255, 256, 65535, 65536 };
    static const char tp[] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    char *name = malloc(65536);
    assert_non_null(name);
    memset(name, 'm', 65536);
    static const char params[] = { (char)0x92, 1, 2 };
    for (size_t a = 0; a < sizeof nums / sizeof nums[0]; a++) {
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
            for (int t = 0; t < 2; t++) {
                uint64_t seq = nums[a];
                uint32_t timeout = (uint32_t)(nums[(a + l) % 8]);
                jrpc_span_t pr = t ? (jrpc_span_t){ params, sizeof params } : NOSPAN;
                jrpc_span_t trace = t ? (jrpc_span_t){ tp, sizeof tp - 1 } : NOSPAN;
                jrpc_buf_t got, want;
                jrpc_buf_init(&got);
                jrpc_buf_init(&want);
                assert_int_equal(jrpc_wire_put_request_call(&got, seq, (jrpc_span_t){ name, lens[l] },
                                                            pr, timeout, trace), 0);
                msgpack_packer pk;
                jrpc_mpack_packer_init(&pk, &want);
                msgpack_pack_array(&pk, t ? 5 : 4);
                msgpack_pack_uint64(&pk, seq);
                msgpack_pack_str(&pk, lens[l]);
                msgpack_pack_str_body(&pk, name, lens[l]);
                if (t)
                    msgpack_pack_str_body(&pk, params, sizeof params);   /* raw bytes */
                else
                    msgpack_pack_nil(&pk);
                msgpack_pack_uint32(&pk, timeout);
                if (t) {
                    msgpack_pack_str(&pk, sizeof tp - 1);
                    msgpack_pack_str_body(&pk, tp, sizeof tp - 1);
                }
                assert_int_equal(got.len, want.len);
                assert_memory_equal(got.p, want.p, got.len);
                jrpc_buf_reset(&got);
                jrpc_buf_reset(&want);
                assert_int_equal(jrpc_wire_put_result_head(&got, seq), 0);
                msgpack_pack_array(&pk, 3);
                msgpack_pack_uint64(&pk, seq);
                msgpack_pack_uint8(&pk, 0);
                assert_int_equal(got.len, want.len);
                assert_memory_equal(got.p, want.p, got.len);
                jrpc_buf_dispose(&got);
                jrpc_buf_dispose(&want);
            }
        }
    }
    free(name);
}


/* ---- JSON text (PROTOCOL.md 2.1 "json", 2.2 bin params, 2.3 bin answers) ---- */

static void test_ready_json_option(void **state)
{
    (void)state;
    static const char *const methods[] = { "subtract", "sum" };
    static const char *const json[] = { "subtract" };
    jrpc_wire_ready_opts_t o = { .json = json, .njson = 1 };
    jrpc_buf_t b;
    jrpc_buf_init(&b);
    assert_int_equal(jrpc_wire_put_ready_opts(&b, 64, methods, 2, &o), 0);
    /* PROTOCOL.md section 3 */
    static const unsigned char want[] = {
        0x95, 0x01, 0x01, 0x40, 0x92, 0xa8, 's', 'u', 'b', 't', 'r', 'a', 'c', 't', 0xa3, 's', 'u', 'm',
        0x81, 0xa4, 'j', 's', 'o', 'n', 0x91, 0xa8, 's', 'u', 'b', 't', 'r', 'a', 'c', 't' };
    expect_buf(&b, want, sizeof want);
    frame_t f;
    decode_ok(&f, b.p, b.len);
    assert_non_null(f.m.json);
    assert_int_equal(f.m.json->via.array.size, 1);
    assert_null(f.m.idempotent);
    frame_dispose(&f);
    /* Wrong type, a non-str or empty name, given twice: malformed. */
    static const bytes_case_t bad[] = {
        CASE("\x95\x01\x01\x40\x91\xa1m\x81\xa4json\xa1m"),
        CASE("\x95\x01\x01\x40\x91\xa1m\x81\xa4json\x91\x01"),
        CASE("\x95\x01\x01\x40\x91\xa1m\x81\xa4json\x91\xa0"),
        CASE("\x95\x01\x01\x40\x91\xa1m\x82\xa4json\x91\xa1m\xa4json\x90"),
    };
    expect_malformed(bad, sizeof bad / sizeof *bad, "bad json option");
    assert_int_equal(check_bytes("\x95\x01\x01\x40\x91\xa1m\x81\xa4json\x91\xa1m", 16), 0);
    /* An empty list and an unknown key next to it are fine. */
    assert_int_equal(check_bytes("\x95\x01\x01\x40\x91\xa1m\x82\xa4json\x90\xa1z\x01", 17), 0);
    jrpc_buf_dispose(&b);
}

static void test_request_json_params(void **state)
{
    (void)state;
    jrpc_span_t method = { "subtract", 8 }, none = { NULL, 0 }, p = { "[42,23]", 7 };
    jrpc_buf_t b, mp, want;
    jrpc_buf_init(&b);
    jrpc_buf_init(&mp);
    jrpc_buf_init(&want);
    /* As JSON: the bytes in a bin. */
    assert_int_equal(jrpc_wire_put_request_call_json(&b, 7, method, p, true, 5000, none), 0);
    static const unsigned char item[] = { 0x94, 0x07, 0xa8, 's', 'u', 'b', 't', 'r', 'a', 'c', 't',
                                          0xc4, 0x07, '[', '4', '2', ',', '2', '3', ']',
                                          0xcd, 0x13, 0x88 };
    expect_buf(&b, item, sizeof item);
    /* As msgpack: what jrpc_wire_put_request_call() writes, for every
     * kind of value and at the bin/str header boundaries. */
    static const char *const texts[] = {
        "[42,23]", "{\"minuend\":42,\"subtrahend\":23}", "[]", "{}", "[null,true,false]",
        "[-0,1.0,1e5,-9223372036854775808,18446744073709551615,18446744073709551616]",
        "[\"\\u00e9\\ud83d\\ude00\\n\", \"a\"]", " [ 1 ,\t{ \"a\" : [ ] } ] ",
    };
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        jrpc_span_t t = { texts[i], strlen(texts[i]) };
        jrpc_buf_reset(&b);
        jrpc_buf_reset(&mp);
        jrpc_buf_reset(&want);
        assert_int_equal(jrpc_wire_put_request_call_json(&b, 9, method, t, false, 1, none), 0);
        assert_int_equal(jrpc_json_to_msgpack(t.p, t.n, 64, &mp), 0);
        assert_int_equal(jrpc_wire_put_request_call(&want, 9, method, (jrpc_span_t){ mp.p, mp.len },
                                                    1, none), 0);
        assert_int_equal(b.len, want.len);
        assert_memory_equal(b.p, want.p, want.len);
    }
    /* No params: nil as msgpack, an empty bin as JSON. */
    jrpc_buf_reset(&b);
    assert_int_equal(jrpc_wire_put_request_call_json(&b, 1, method, none, false, 1, none), 0);
    assert_int_equal((unsigned char)b.p[11], 0xc0);
    jrpc_buf_reset(&b);
    assert_int_equal(jrpc_wire_put_request_call_json(&b, 1, method, none, true, 1, none), 0);
    assert_memory_equal(b.p + 11, "\xc4\x00", 2);
    /* Long params: bin16 and bin32 headers; decoded, the text comes back. */
    size_t sizes[] = { 255, 256, 65535, 65536 };
    for (size_t k = 0; k < 4; k++) {
        size_t n = sizes[k];
        char *text = malloc(n);
        assert_non_null(text);
        memset(text, ' ', n);
        text[0] = '[';
        text[n - 1] = ']';
        jrpc_buf_reset(&b);
        assert_int_equal(jrpc_wire_put_request_begin(&b), 0);
        assert_int_equal(jrpc_wire_put_request_call_json(&b, 3, method, (jrpc_span_t){ text, n },
                                                         true, 1, (jrpc_span_t){ TP, 55 }), 0);
        jrpc_wire_put_request_end(&b, 1);
        frame_t f;
        decode_ok(&f, b.p, b.len);
        jrpc_wire_call_t c;
        assert_int_equal(jrpc_wire_request_item(&f.m, 0, &c), 0);
        assert_true(c.json);
        assert_int_equal(c.params_json.n, n);
        assert_memory_equal(c.params_json.p, text, n);
        assert_int_equal(c.traceparent.n, 55);
        frame_dispose(&f);
        free(text);
    }
    /* Text that does not transcode: refused, nothing written. */
    jrpc_buf_reset(&b);
    assert_int_equal(jrpc_wire_put_request_call_json(&b, 1, method, (jrpc_span_t){ "[1,", 3 },
                                                     false, 1, none), -EINVAL);
    assert_int_equal(b.len, 0);
    jrpc_buf_dispose(&b);
    jrpc_buf_dispose(&mp);
    jrpc_buf_dispose(&want);
}

static void test_response_json(void **state)
{
    (void)state;
    jrpc_buf_t b;
    jrpc_buf_init(&b);
    assert_int_equal(jrpc_wire_put_response_begin(&b), 0);
    assert_int_equal(jrpc_wire_put_result_json(&b, 7, (jrpc_span_t){ "[1, 2]", 6 }), 0);
    assert_int_equal(jrpc_wire_put_error_json(&b, 8, -32602, "Invalid params",
                                              (jrpc_span_t){ "{\"x\":1}", 7 }), 0);
    assert_int_equal(jrpc_wire_put_error_json(&b, 9, 5, "m", (jrpc_span_t){ NULL, 0 }), 0);
    jrpc_wire_put_response_end(&b, 3);
    assert_memory_equal(b.p + 8, "\x93\x07\x00\xc4\x06[1, 2]", 10);
    jrpc_buf_t ex;   /* PROTOCOL.md section 3: [7, 0, bin "19"] */
    jrpc_buf_init(&ex);
    assert_int_equal(jrpc_wire_put_result_json(&ex, 7, (jrpc_span_t){ "19", 2 }), 0);
    assert_int_equal(ex.len, 7);
    assert_memory_equal(ex.p, "\x93\x07\x00\xc4\x02" "19", 7);
    jrpc_buf_dispose(&ex);
    frame_t f;
    decode_ok(&f, b.p, b.len);
    jrpc_wire_answer_t a;
    assert_int_equal(jrpc_wire_response_item(&f.m, 0, &a), 0);
    assert_false(a.is_error);
    assert_int_equal(a.value->type, MSGPACK_OBJECT_BIN);
    assert_int_equal(a.value->via.bin.size, 6);
    assert_int_equal(jrpc_wire_response_item(&f.m, 1, &a), 0);
    assert_true(a.is_error);
    const msgpack_object *data = jrpc_mpack_map_get(a.value, "data");
    assert_non_null(data);
    assert_int_equal(data->type, MSGPACK_OBJECT_BIN);
    assert_memory_equal(data->via.bin.ptr, "{\"x\":1}", 7);
    assert_int_equal(jrpc_wire_response_item(&f.m, 2, &a), 0);
    assert_null(jrpc_mpack_map_get(a.value, "data"));
    frame_dispose(&f);
    jrpc_buf_dispose(&b);
}

/* jrpc_json_check: strict, with the range check; the value without its
 * surrounding whitespace. */
static void test_json_check(void **state)
{
    (void)state;
    jrpc_span_t v;
    assert_int_equal(jrpc_json_check(" \n[1, 2] ", 9, 64, &v), 0);
    assert_int_equal(v.n, 6);
    assert_memory_equal(v.p, "[1, 2]", 6);
    assert_int_equal(jrpc_json_check("1e400", 5, 64, &v), JRPC_JSON_ERANGE);
    assert_int_equal(jrpc_json_check("[-1E+400]", 9, 64, &v), JRPC_JSON_ERANGE);
    assert_int_equal(jrpc_json_check("1e-400", 6, 64, &v), 0);   /* underflow: 0 */
    assert_int_equal(jrpc_json_check("", 0, 64, &v), JRPC_JSON_EINCOMPLETE);
    assert_int_equal(jrpc_json_check("[[1]]", 5, 1, &v), JRPC_JSON_EDEPTH);
    assert_int_equal(jrpc_json_check("1 1", 3, 64, &v), JRPC_JSON_EMALFORMED);
    char big[400];
    memset(big, '9', sizeof big);                                  /* 400 digits */
    assert_int_equal(jrpc_json_check(big, sizeof big, 64, &v), JRPC_JSON_ERANGE);
    assert_int_equal(jrpc_json_check(big, 300, 64, &v), 0);
    /* The same text validates without the check (an id may be 1e400). */
    assert_int_equal(jrpc_json_validate("1e400", 5, 64), 0);
}

/* ---- RESPONSE frames read in place, against the tree path ----
 *
 * jrpc_wire_decode + jrpc_wire_response_item are the oracle for
 * jrpc_wire_response_open + _next: the same verdict on every frame
 * (malformed anywhere: refused before any item is read), the same verdict
 * on every item, the same seq and flag, and values that answer a call with
 * the same text. */

static const char rsp_body[] = "[{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":1}]";

static struct {
    unsigned frames, responses, items, answers;
} R;

static void rsp_batch(jrpc_batch_t *b)
{
    jrpc_limits_t lim = JRPC_LIMITS_DEFAULT;
    jrpc_batch_init(b);
    assert_int_equal(jrpc_batch_parse(b, rsp_body, sizeof rsp_body - 1, &lim), 0);
}

static void diff_response(const void *bytes, size_t n)
{
    frame_t f;
    frame_decode(&f, bytes, n);   /* its own exact-size copy: an over-read trips ASan */
    jrpc_wire_rsp_t r;
    int rc = jrpc_wire_response_open(f.buf, n, &r);
    R.frames++;
    if (rc == 1) {   /* not a RESPONSE: the tree decoder says what it is */
        assert_false(f.rc == 0 && f.m.type == JRPC_WIRE_RESPONSE);
        assert_true(jrpc_wire_peek_type(f.buf, n) != JRPC_WIRE_RESPONSE);
        frame_dispose(&f);
        return;
    }
    assert_int_equal(jrpc_wire_peek_type(f.buf, n), JRPC_WIRE_RESPONSE);
    assert_int_equal(rc, f.rc);
    if (rc == 0) {
        R.responses++;
        assert_int_equal(f.m.type, JRPC_WIRE_RESPONSE);
        assert_int_equal(r.nitems, f.m.nitems);
        for (uint32_t k = 0; k < f.m.nitems; k++) {
            jrpc_wire_answer_t a;
            jrpc_wire_answer_raw_t ar;
            assert_int_equal(r.next, k);
            int it = jrpc_wire_response_item(&f.m, k, &a);
            int ir = jrpc_wire_response_next(&r, &ar);
            assert_int_equal(it, ir);
            R.items++;
            if (it < 0)
                continue;
            assert_true(ar.seq == a.seq);
            assert_int_equal(ar.is_error, a.is_error);
            /* The span is exactly the value: it unpacks to the same tree. */
            msgpack_zone z;
            msgpack_object o;
            assert_true(msgpack_zone_init(&z, 256));
            assert_int_equal(jrpc_mpack_unpack(ar.value.p, ar.value.n, JRPC_WIRE_MAX_DEPTH, &z, &o), 0);
            jrpc_buf_t pt, pr;
            msgpack_packer kt, kr;
            pk_init(&kt, &pt);
            pk_init(&kr, &pr);
            assert_int_equal(msgpack_pack_object(&kt, *a.value), 0);
            assert_int_equal(msgpack_pack_object(&kr, o), 0);
            assert_int_equal(pt.len, pr.len);
            assert_memory_equal(pt.p, pr.p, pt.len);
            jrpc_buf_dispose(&pt);
            jrpc_buf_dispose(&pr);
            msgpack_zone_destroy(&z);
            /* And it answers a call as the tree does. */
            jrpc_batch_t bt, br;
            rsp_batch(&bt);
            rsp_batch(&br);
            if (a.is_error) {
                assert_int_equal(jrpc_batch_answer_error_obj(&bt, 0, a.value), 0);
                assert_int_equal(jrpc_batch_answer_error_raw(&br, 0, ar.value), 0);
            } else {
                assert_int_equal(jrpc_batch_answer_result(&bt, 0, a.value), 0);
                assert_int_equal(jrpc_batch_answer_result_raw(&br, 0, ar.value), 0);
            }
            const jrpc_call_t *ct = &bt.calls[0], *cr = &br.calls[0];
            assert_int_equal(ct->error, cr->error);
            assert_int_equal(ct->code, cr->code);
            assert_int_equal(ct->answer.n, cr->answer.n);
            assert_memory_equal(ct->answer.p, cr->answer.p, ct->answer.n);
            R.answers++;
            jrpc_batch_dispose(&bt);
            jrpc_batch_dispose(&br);
        }
        assert_int_equal(r.next, r.nitems);
        assert_true(r.p == r.end || r.p < r.end);   /* extra elements may follow the items */
    }
    frame_dispose(&f);
}

/* An array head of n in a random encoding. */
static void gen_array(jrpc_buf_t *b, uint32_t n)
{
    gen_len_head(b, n, 0x90, 15, 0, 0xdc, 0xdd);
}

static void gen_error_map(jrpc_buf_t *b)
{
    uint32_t n = (uint32_t)(rng() % 4);
    gen_len_head(b, n, 0x80, 15, 0, 0xde, 0xdf);
    static const char *const keys[] = { "code", "message", "data", "x" };
    for (uint32_t i = 0; i < n; i++) {
        const char *k = keys[rng() % 4];
        gen_len_head(b, (uint32_t)strlen(k), 0xa0, 31, 0xd9, 0xda, 0xdb);
        assert_int_equal(jrpc_buf_append(b, k, strlen(k)), 0);
        switch (rng() % 4) {
        case 0: gen_neg(b, -32000 - (int64_t)(rng() % 100)); break;
        case 1: gen_uint(b, rng() % 3 ? rng() % 100 : (uint64_t)1 << 31); break;
        case 2: gen_str(b, rng() % 4 != 0); break;
        default: gen_value(b, 3, false); break;
        }
    }
}

/* One item: mostly well-formed [seq, 0|1, value], sometimes not. */
static void gen_item(jrpc_buf_t *b)
{
    unsigned kind = (unsigned)(rng() % 12);
    if (kind == 0) {   /* not an array */
        gen_value(b, 2, false);
        return;
    }
    uint32_t n = kind == 1 ? (uint32_t)(rng() % 3) : kind == 2 ? 4 + (uint32_t)(rng() % 2) : 3;
    gen_array(b, n);
    for (uint32_t e = 0; e < n; e++) {
        if (e == 0) {   /* seq: 0 and non-integers now and then */
            if (kind == 3)
                pack_bad_value(&(msgpack_packer){ b, jrpc_mpack_buf_write }, (int)(rng() % NBAD));
            else
                gen_uint(b, kind == 4 ? 0 : rng() % 2 ? (rng() | 1) : 1 + rng() % 1000);
        } else if (e == 1) {
            gen_uint(b, kind == 5 ? 2 + rng() % 3 : rng() % 4 == 0);
        } else if (e == 2 && b->len > 0 && kind != 6 && rng() % 3 == 0) {
            gen_error_map(b);   /* with flag 0 too: a map result */
        } else {
            gen_value(b, 4, rng() % 2);
        }
    }
}

/* [1, 3, [items], extra...] with every head in a random encoding. */
static void gen_response(jrpc_buf_t *b, uint32_t nitems, uint32_t extra)
{
    gen_array(b, 3 + extra);
    gen_uint(b, 1);
    gen_uint(b, 3);
    gen_array(b, nitems);
    for (uint32_t k = 0; k < nitems; k++)
        gen_item(b);
    for (uint32_t k = 0; k < extra; k++)
        gen_value(b, 2, false);
}

static void test_response_in_place(void **state)
{
    (void)state;
    jrpc_buf_t b;
    jrpc_buf_init(&b);
    for (int i = 0; i < 4000; i++) {
        jrpc_buf_reset(&b);
        gen_response(&b, (uint32_t)(rng() % 6), rng() % 4 == 0 ? 1 + (uint32_t)(rng() % 2) : 0);
        diff_response(b.p, b.len);
        /* Cut short, a byte changed (the head too), a byte more. */
        if (b.len < 64) {
            for (size_t k = 0; k < b.len; k++)
                diff_response(b.p, k);
        } else {
            diff_response(b.p, (size_t)(rng() % b.len));
        }
        for (int m = 0; m < 3; m++) {
            size_t at = (size_t)(rng() % b.len);
            char keep = b.p[at];
            b.p[at] = (char)(rng() & 0xff);
            diff_response(b.p, b.len);
            b.p[at] = keep;
        }
        gen_byte(&b, rng() % 2 ? 0xc1 : (unsigned)(rng() & 0xff));
        diff_response(b.p, b.len);
    }
    /* Every other message type goes to the tree decoder. */
    void (*const builds[])(jrpc_buf_t *) = { build_ready, build_request, build_response };
    for (int k = 0; k < 3; k++) {
        jrpc_buf_t m;
        builds[k](&m);
        diff_response(m.p, m.len);
        jrpc_buf_dispose(&m);
    }
    /* The frame's depth limit, 1100 levels: the items hold three of them. */
    for (int levels = JRPC_WIRE_MAX_DEPTH - 4; levels <= JRPC_WIRE_MAX_DEPTH - 2; levels++) {
        for (int where = 0; where < 2; where++) {
            jrpc_buf_reset(&b);
            gen_byte(&b, where ? 0x94 : 0x93), gen_byte(&b, 1), gen_byte(&b, 3);
            gen_byte(&b, 0x91), gen_byte(&b, 0x93), gen_byte(&b, 0x01), gen_byte(&b, 0x00);
            gen_nested(&b, where ? 1 : levels, false);
            if (where)   /* or in an extra element after the items */
                gen_nested(&b, levels + 1, false);
            diff_response(b.p, b.len);
        }
    }
    jrpc_buf_dispose(&b);
    print_message("in place: %u frames, %u responses, %u items, %u answers\n", R.frames,
                  R.responses, R.items, R.answers);
    assert_true(R.responses > 3000 && R.answers > 5000 && R.items > R.answers);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_writers_match_msgpack_c),
        cmocka_unit_test(test_ready_round_trip),
        cmocka_unit_test(test_ready_options),
        cmocka_unit_test(test_bare_round_trip),
        cmocka_unit_test(test_heartbeat_settings),
        cmocka_unit_test(test_reject),
        cmocka_unit_test(test_message),
        cmocka_unit_test(test_schemas_frame),
        cmocka_unit_test(test_instance_and_session),
        cmocka_unit_test(test_probe),
        cmocka_unit_test(test_peek_type),
        cmocka_unit_test(test_request_item_seq),
        cmocka_unit_test(test_request_round_trip),
        cmocka_unit_test(test_response_round_trip),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_extra_bytes),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_mutations),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_bad_envelope),
        cmocka_unit_test(test_ready_wrong_types),
        cmocka_unit_test(test_request_wrong_types),
        cmocka_unit_test(test_request_traceparent),
        cmocka_unit_test(test_ready_json_option),
        cmocka_unit_test(test_request_json_params),
        cmocka_unit_test(test_response_json),
        cmocka_unit_test(test_json_check),
        cmocka_unit_test(test_response_wrong_types),
        cmocka_unit_test(test_seq_zero),
        cmocka_unit_test(test_huge_lengths),
        cmocka_unit_test(test_deep),
        cmocka_unit_test(test_deep_params_round_trip),
        cmocka_unit_test(test_strerror),
        cmocka_unit_test(test_response_in_place),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
