/* Tests of jrpc_wire against hostile input (wire_fixture.h): truncations,
 * extra bytes, garbage, mutations, wrong types, wrong versions, a bad
 * traceparent, seq 0, huge declared lengths and deep nesting, which must
 * give EMALFORMED/EVERSION, never a crash (this suite runs under
 * ASan+UBSan too); the words of each error. */
#include "wire_fixture.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
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
        cmocka_unit_test(test_strerror),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
