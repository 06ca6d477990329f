/* Tests of jrpc_wire's round trips (wire_fixture.h): every message written
 * and read back (READY and its options, HEARTBEAT settings, REJECT,
 * SCHEMAS, MESSAGE, the instance and session, REQUEST, RESPONSE), the
 * writers against msgpack-c's, the type peeked. The msgpack decoder itself
 * is test_jrpc_mpack's, the client header frame test_jrpc_header's; hostile
 * input is test_jrpc_wire_hostile's. */
#include "wire_fixture.h"

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
    static const char nine[] = { (char)0x93, 1, 9, (char)0xa0 };
    frame_decode(&f, nine, sizeof nine);
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
        cmocka_unit_test(test_peek_type),
        cmocka_unit_test(test_request_item_seq),
        cmocka_unit_test(test_request_round_trip),
        cmocka_unit_test(test_response_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
