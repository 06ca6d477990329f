/* Tests of jrpc_wire's JSON text (wire_fixture.h; PROTOCOL.md 2.1 "json",
 * 2.2 bin params, 2.3 bin answers): the READY option, params and answers
 * carried as JSON bytes, and the check of that text. */
#include "wire_fixture.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ready_json_option),
        cmocka_unit_test(test_request_json_params),
        cmocka_unit_test(test_response_json),
        cmocka_unit_test(test_json_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
