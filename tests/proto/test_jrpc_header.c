/* Tests of jrpc_header, the client header frame (PROTOCOL.md 9.1): round
 * trips, unknown keys, each known key with each wrong type, duplicates, then
 * hostile input — truncations, trailing bytes, garbage, mutations, huge
 * declared lengths, deep nesting — which must give EMALFORMED, never a crash
 * (this suite runs under ASan+UBSan too). Every decoded frame sits in a
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
#include "jrpc_header.h"
#include "mpack_helpers.h"

static int check_header_bytes(const void *bytes, size_t n)
{
    char *buf = malloc(n ? n : 1);
    assert_non_null(buf);
    if (n)
        memcpy(buf, bytes, n);
    msgpack_zone z;
    msgpack_zone_init(&z, 256);
    jrpc_header_t h;
    int rc = jrpc_header_decode(buf, n, &z, &h);
    if (rc != 0)
        assert_int_equal(rc, JRPC_HEADER_EMALFORMED);
    msgpack_zone_destroy(&z);
    free(buf);
    return rc;
}

static void build_header(jrpc_buf_t *b)
{
    jrpc_header_t h = { .key = span("k1"), .timestamp = 1700000000,
                             .nonce = span("n-1"), .signature = span("abcdef"),
                             .timeout_ms = 2500, .traceparent = span("00-abc-def-01") };
    jrpc_buf_init(b);
    assert_int_equal(jrpc_header_put(b, &h), 0);
}

static void test_header_round_trip(void **state)
{
    jrpc_buf_t b;
    build_header(&b);
    msgpack_zone z;
    msgpack_zone_init(&z, 256);
    jrpc_header_t h;
    assert_int_equal(jrpc_header_decode(b.p, b.len, &z, &h), 0);
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
    jrpc_header_t empty = { 0 };
    jrpc_buf_init(&b);
    assert_int_equal(jrpc_header_put(&b, &empty), 0);
    assert_int_equal(b.len, 1);
    msgpack_zone_init(&z, 256);
    assert_int_equal(jrpc_header_decode(b.p, b.len, &z, &h), 0);
    assert_int_equal(h.key.n, 0);
    assert_true(h.timestamp == 0);
    msgpack_zone_destroy(&z);
    jrpc_buf_dispose(&b);
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
        jrpc_header_t h;
        assert_int_equal(jrpc_header_decode(copy, b.len, &z, &h), 0);
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
            if (rc != (fits ? 0 : JRPC_HEADER_EMALFORMED))
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
        if (check_header_bytes(cases[i].b, cases[i].n) != JRPC_HEADER_EMALFORMED)
            fail_msg("case %zu decoded", i);
    }
}

/* ---- hostile input ---- */

static void test_truncated(void **state)
{
    jrpc_buf_t b;
    build_header(&b);
    for (size_t n = 0; n < b.len; n++)
        assert_int_equal(check_header_bytes(b.p, n), JRPC_HEADER_EMALFORMED);
    assert_int_equal(check_header_bytes(b.p, b.len), 0);
    jrpc_buf_dispose(&b);
}

static void test_extra_bytes(void **state)
{
    static const char hdr[] = { (char)0x80, (char)0x80 };
    assert_int_equal(check_header_bytes(hdr, sizeof hdr), JRPC_HEADER_EMALFORMED);
}

static void test_garbage(void **state)
{
    unsigned char bytes[96];
    for (int i = 0; i < 20000; i++) {
        size_t n = rng() % sizeof bytes;
        for (size_t j = 0; j < n; j++)
            bytes[j] = (unsigned char)rng();
        /* Half the cases start like a small map, to get past the first checks. */
        if (i % 2 && n >= 1)
            bytes[0] = (unsigned char)(0x80 | (rng() % 7));
        (void)check_header_bytes(bytes, n);
    }
}

/* A valid frame with one to four random bytes changed: decoding either
 * succeeds or fails cleanly. */
static void test_mutations(void **state)
{
    jrpc_buf_t b;
    build_header(&b);
    check_mutations(b.p, b.len, check_header_bytes, 5000);
    jrpc_buf_dispose(&b);
}

static void test_huge_lengths(void **state)
{
    static const struct { const char *b; size_t n; } cases[] = {
        HUGE_LENGTHS_MSGPACK,
        HUGE_LENGTHS_REQUEST,
        { "\x81\xa3key\xdb\xff\xff\xff\xff", 10 },           /* "key": str32 */
        { "\x81\xa6" "future\xdf\x7f\xff\xff\xff", 13 },     /* unknown key: map32 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (check_header_bytes(cases[i].b, cases[i].n) != JRPC_HEADER_EMALFORMED)
            fail_msg("header case %zu decoded", i);
}

static void test_deep(void **state)
{
    /* 100000 nested fixarrays of one element: no recursion, no crash. */
    size_t n = 100000;
    char *deep = malloc(n);
    assert_non_null(deep);
    fill_deep_arrays(deep, n);
    assert_int_equal(check_header_bytes(deep, n), JRPC_HEADER_EMALFORMED);
    /* The same as maps ({nil: {nil: ...}}). */
    fill_deep_maps(deep, n);
    assert_int_equal(check_header_bytes(deep, n), JRPC_HEADER_EMALFORMED);
    /* An unknown key may hold a value nested up to the limit, its own map
     * included, and no deeper. */
    size_t d = JRPC_HEADER_MAX_DEPTH;
    deep[0] = (char)0x81;
    deep[1] = (char)0xa1;
    deep[2] = 'x';
    memset(deep + 3, (char)0x91, d - 2);
    deep[3 + d - 2] = (char)0x90;
    assert_int_equal(check_header_bytes(deep, 3 + d - 1), 0);
    memset(deep + 3, (char)0x91, d - 1);
    deep[3 + d - 1] = (char)0x90;
    assert_int_equal(check_header_bytes(deep, 3 + d), JRPC_HEADER_EMALFORMED);
    free(deep);
}

/* "stream" in the client header, and the reply header of streamed answers. */
static void test_stream_and_reply_head(void **state)
{
    (void)state;
    msgpack_zone z;
    msgpack_zone_init(&z, 256);
    jrpc_buf_t b;
    jrpc_buf_init(&b);
    jrpc_header_t h = { .timeout_ms = 5, .stream = true }, back;
    assert_int_equal(jrpc_header_put(&b, &h), 0);
    assert_int_equal(jrpc_header_decode(b.p, b.len, &z, &back), 0);
    assert_true(back.stream);
    assert_int_equal(back.timeout_ms, 5);
    /* "stream" must be a bool, and given once */
    msgpack_packer pk;
    jrpc_buf_t m;
    pk_init(&pk, &m);
    msgpack_pack_map(&pk, 1);
    pk_str(&pk, "stream");
    msgpack_pack_uint8(&pk, 1);
    assert_int_equal(jrpc_header_decode(m.p, m.len, &z, &back), JRPC_HEADER_EMALFORMED);
    jrpc_buf_dispose(&m);
    pk_init(&pk, &m);
    msgpack_pack_map(&pk, 2);
    pk_str(&pk, "stream");
    msgpack_pack_true(&pk);
    pk_str(&pk, "stream");
    msgpack_pack_false(&pk);
    assert_int_equal(jrpc_header_decode(m.p, m.len, &z, &back), JRPC_HEADER_EMALFORMED);
    jrpc_buf_dispose(&m);

    /* reply heads: exact bytes, round trips */
    jrpc_reply_head_t rh;
    b.len = 0;
    assert_int_equal(jrpc_header_put_reply(&b, &(jrpc_reply_head_t){ .pos = 7 }), 0);
    assert_int_equal(b.len, 6);
    assert_memory_equal(b.p, "\x81\xa3pos\x07", 6);
    assert_int_equal(jrpc_header_decode_reply(b.p, b.len, &z, &rh), 0);
    assert_false(rh.end);
    assert_int_equal(rh.pos, 7);
    b.len = 0;
    assert_int_equal(jrpc_header_put_reply(&b, &(jrpc_reply_head_t){ .pos = 70000 }), 0);
    assert_int_equal(jrpc_header_decode_reply(b.p, b.len, &z, &rh), 0);
    assert_int_equal(rh.pos, 70000);
    b.len = 0;
    assert_int_equal(jrpc_header_put_reply(&b, &(jrpc_reply_head_t){ .end = true }), 0);
    assert_int_equal(b.len, 6);
    assert_memory_equal(b.p, "\x81\xa3" "end\xc3", 6);
    assert_int_equal(jrpc_header_decode_reply(b.p, b.len, &z, &rh), 0);
    assert_true(rh.end);
    /* malformed: neither, both, wrong types, not a map, cut */
    static const char *const bad[] = {
        "\x80", "\x82\xa3pos\x01\xa3" "end\xc3", "\x81\xa3pos\xa1x", "\x81\xa3" "end\xc2",
        "\x81\xa3" "end\x01", "\x91\x01", "\x81\xa3pos\xcf\x00\x00\x00\x01\x00\x00\x00\x00",
        "\x82\xa3pos\x01\xa3pos\x02",
    };
    static const size_t badn[] = { 1, 11, 7, 6, 6, 2, 14, 11 };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *p = malloc(badn[i]);
        memcpy(p, bad[i], badn[i]);
        assert_int_equal(jrpc_header_decode_reply(p, badn[i], &z, &rh), JRPC_HEADER_EMALFORMED);
        free(p);
    }
    for (size_t cut = 0; cut < 6; cut++)
        assert_int_equal(jrpc_header_decode_reply("\x81\xa3pos\x07", cut, &z, &rh),
                         JRPC_HEADER_EMALFORMED);
    /* an unknown key beside pos is ignored */
    assert_int_equal(jrpc_header_decode_reply("\x82\xa1x\x00\xa3pos\x02", 9, &z, &rh), 0);
    assert_int_equal(rh.pos, 2);
    jrpc_buf_dispose(&b);
    msgpack_zone_destroy(&z);
}

/* "timing" in the client header, "server_timing" in the reply head
 * (PROTOCOL.md 9.3): unstreamed ("whole"), at the end, malformed. */
static void test_timing_heads(void **state)
{
    (void)state;
    msgpack_zone z;
    msgpack_zone_init(&z, 256);
    jrpc_buf_t b;
    jrpc_buf_init(&b);
    jrpc_header_t h = { .timing = true }, back;
    assert_int_equal(jrpc_header_put(&b, &h), 0);
    assert_int_equal(b.len, 9);
    assert_memory_equal(b.p, "\x81\xa6timing\xc3", 9);
    assert_int_equal(jrpc_header_decode(b.p, b.len, &z, &back), 0);
    assert_true(back.timing);
    assert_int_equal(jrpc_header_decode("\x81\xa6timing\x01", 9, &z, &back),
                     JRPC_HEADER_EMALFORMED);
    assert_int_equal(jrpc_header_decode("\x82\xa6timing\xc3\xa6timing\xc2", 17, &z, &back),
                     JRPC_HEADER_EMALFORMED);
    jrpc_span_t st = { "total;dur=1.000", 15 };
    jrpc_reply_head_t rh;
    b.len = 0;
    assert_int_equal(jrpc_header_put_reply(&b, &(jrpc_reply_head_t){ .whole = true, .timing = st }), 0);
    assert_memory_equal(b.p, "\x81\xadserver_timing\xaftotal;dur=1.000", b.len);
    assert_int_equal(jrpc_header_decode_reply(b.p, b.len, &z, &rh), 0);
    assert_true(rh.whole);
    assert_false(rh.end);
    assert_int_equal(rh.timing.n, 15);
    assert_memory_equal(rh.timing.p, st.p, 15);
    b.len = 0;
    assert_int_equal(jrpc_header_put_reply(&b, &(jrpc_reply_head_t){ .end = true, .timing = st }), 0);
    assert_int_equal(jrpc_header_decode_reply(b.p, b.len, &z, &rh), 0);
    assert_true(rh.end);
    assert_false(rh.whole);
    assert_int_equal(rh.timing.n, 15);
    /* without timing the heads are the bytes they always were */
    b.len = 0;
    assert_int_equal(jrpc_header_put_reply(&b, &(jrpc_reply_head_t){ .end = true }), 0);
    assert_int_equal(b.len, 6);
    /* server_timing not a str, or twice */
    assert_int_equal(jrpc_header_decode_reply("\x81\xadserver_timing\x01", 16, &z, &rh),
                     JRPC_HEADER_EMALFORMED);
    assert_int_equal(jrpc_header_decode_reply("\x82\xadserver_timing\xa0\xadserver_timing\xa0",
                                              31, &z, &rh), JRPC_HEADER_EMALFORMED);
    jrpc_buf_dispose(&b);
    msgpack_zone_destroy(&z);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timing_heads),
        cmocka_unit_test(test_header_round_trip),
        cmocka_unit_test(test_header_cases),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_extra_bytes),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_mutations),
        cmocka_unit_test(test_huge_lengths),
        cmocka_unit_test(test_deep),
        cmocka_unit_test(test_stream_and_reply_head),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
