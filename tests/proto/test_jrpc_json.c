/* Tests of jrpc_json: the whole JSONTestSuite (whole, and every prefix of the
 * y_ files), exact msgpack bytes of the transcoder, JSON → msgpack → JSON
 * round trips, depth limits and member lookup (the writer alone:
 * test_jrpc_json_write.c).
 * Every input sits in a malloc'd buffer of exactly its size, so an over-read
 * trips ASan (this suite runs under ASan+UBSan). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <msgpack.h>
#include "jrpc_batch.h"
#include "jrpc_json.h"
#include "jrpc_json_internal.h"
#include "jrpc_mpack.h"
#include "jrpc_wire.h"
#include "mpack_helpers.h"
#include "mpack_gen.h"

#define SUITE_DIR JRPC_TESTDATA "/jsontestsuite/test_parsing"

/* ---- helpers ---- */

static char *load(const char *name, size_t *n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", SUITE_DIR, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc(len ? (size_t)len : 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

typedef void (*file_fn)(const char *name, const char *p, size_t n, int *count);

static void each_file(file_fn fn, int *count)
{
    DIR *d = opendir(SUITE_DIR);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0)
            continue;
        size_t n;
        char *p = load(e->d_name, &n);
        fn(e->d_name, p, n, count);
        free(p);
    }
    closedir(d);
}

static int validate_str(const char *s, unsigned depth)
{
    char *b = exact(s, strlen(s));
    int rc = jrpc_json_validate(b, strlen(s), depth);
    free(b);
    return rc;
}

/* JSON text → msgpack bytes (rc returned; bytes into out). */
static int to_mp(const char *s, jrpc_buf_t *out)
{
    char *b = exact(s, strlen(s));
    jrpc_buf_init(out);
    int rc = jrpc_json_to_msgpack(b, strlen(s), JRPC_JSON_MAX_DEPTH, out);
    free(b);
    return rc;
}

/* msgpack bytes → JSON text (NUL-terminated in out); returns rc. */
static int mp_to_json(const char *mp, size_t n, jrpc_buf_t *out, unsigned depth)
{
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    assert_int_equal(msgpack_unpack_next(&u, mp, n, &off), MSGPACK_UNPACK_SUCCESS);
    assert_int_equal(off, n);
    jrpc_buf_init(out);
    int rc = jrpc_json_write_msgpack(out, &u.data, depth);
    if (rc == 0)
        jrpc_buf_putc(out, '\0');
    msgpack_unpacked_destroy(&u);
    return rc;
}

static void assert_round_trip(const char *in, const char *expect)
{
    jrpc_buf_t mp, js;
    assert_int_equal(to_mp(in, &mp), 0);
    int rc = mp_to_json(mp.p, mp.len, &js, JRPC_JSON_MAX_DEPTH);
    if (rc != 0 || strcmp(js.p, expect) != 0)
        fail_msg("round trip of %s gave rc=%d %s, want %s", in, rc, rc ? "" : js.p, expect);
    jrpc_buf_dispose(&mp);
    jrpc_buf_dispose(&js);
}

static void assert_mp(const char *in, const char *bytes, size_t n)
{
    jrpc_buf_t mp;
    assert_int_equal(to_mp(in, &mp), 0);
    if (mp.len != n || memcmp(mp.p, bytes, n) != 0) {
        char hex[512] = "";
        for (size_t i = 0; i < mp.len && i < 100; i++)
            snprintf(hex + strlen(hex), sizeof hex - strlen(hex), "%02x ", (unsigned char)mp.p[i]);
        fail_msg("msgpack of %s: got %s", in, hex);
    }
    jrpc_buf_dispose(&mp);
}

/* ---- JSONTestSuite ---- */

static void suite_whole(const char *name, const char *p, size_t n, int *count)
{
    int rc = jrpc_json_validate(p, n, JRPC_JSON_MAX_DEPTH);
    jrpc_buf_t mp;
    jrpc_buf_init(&mp);
    int mrc = jrpc_json_to_msgpack(p, n, JRPC_JSON_MAX_DEPTH, &mp);
    if (name[0] == 'y') {
        if (rc != 0 || mrc != 0)
            fail_msg("%s: validate=%d to_msgpack=%d, want 0", name, rc, mrc);
    } else if (name[0] == 'n') {
        if (rc == 0 || mrc == 0)
            fail_msg("%s: validate=%d to_msgpack=%d, want an error", name, rc, mrc);
        assert_int_equal(mp.len, 0);
    }
    if (rc == 0 && mrc != 0 && mrc != JRPC_JSON_ERANGE)
        fail_msg("%s: validate=0 but to_msgpack=%d", name, mrc);
    if (mrc == 0) {  /* whatever was accepted must be msgpack that writes back as JSON */
        jrpc_buf_t js;
        int wrc = mp_to_json(mp.p, mp.len, &js, JRPC_JSON_MAX_DEPTH);
        if (wrc != 0)
            fail_msg("%s: msgpack → JSON gave %d", name, wrc);
        /* ... which is itself strict JSON */
        assert_int_equal(jrpc_json_validate(js.p, js.len - 1, JRPC_JSON_MAX_DEPTH), 0);
        jrpc_buf_dispose(&js);
    }
    jrpc_buf_dispose(&mp);
    (*count)++;
}

static void test_suite_whole(void **state)
{
    (void)state;
    int count = 0;
    each_file(suite_whole, &count);
    assert_true(count >= 300);
}

static void suite_prefixes(const char *name, const char *p, size_t n, int *count)
{
    if (name[0] != 'y')
        return;
    size_t start = 0, stop = n;
    while (start < n && strchr(" \t\r\n", p[start]))
        start++;
    if (start == n || (p[start] != '[' && p[start] != '{'))
        return;
    while (stop > 0 && strchr(" \t\r\n", p[stop - 1]))
        stop--;
    for (size_t k = 0; k <= n; k++) {
        char *b = exact(p, k);
        int rc = jrpc_json_validate(b, k, JRPC_JSON_MAX_DEPTH);
        free(b);
        /* A prefix reaching past the value differs from it by whitespace
         * only, so it is itself complete. */
        int want = k < stop ? JRPC_JSON_EINCOMPLETE : 0;
        if (rc != want)
            fail_msg("%s: prefix of %zu/%zu bytes gave %d, want %d", name, k, n, rc, want);
    }
    (*count)++;
}

static void test_suite_prefixes(void **state)
{
    (void)state;
    int count = 0;
    each_file(suite_prefixes, &count);
    assert_true(count >= 50);
}

/* ---- the reader ---- */

static void test_validate_cases(void **state)
{
    (void)state;
    static const struct { const char *s; int rc; } cases[] = {
        { "", JRPC_JSON_EINCOMPLETE },
        { "  ", JRPC_JSON_EINCOMPLETE },
        { "1", 0 },
        { "-", JRPC_JSON_EINCOMPLETE },
        { "1.", JRPC_JSON_EINCOMPLETE },
        { "1e+", JRPC_JSON_EINCOMPLETE },
        { "01", JRPC_JSON_EMALFORMED },
        { "-01", JRPC_JSON_EMALFORMED },
        { "1 2", JRPC_JSON_EMALFORMED },
        { "[1][2]", JRPC_JSON_EMALFORMED },
        { "[1,]", JRPC_JSON_EMALFORMED },
        { "{\"a\":1,}", JRPC_JSON_EMALFORMED },
        { "\xef\xbb\xbf{}", JRPC_JSON_EMALFORMED },        /* BOM */
        { "\"\\ud800\"", JRPC_JSON_EMALFORMED },           /* lone high surrogate */
        { "\"\\udc00\"", JRPC_JSON_EMALFORMED },           /* lone low surrogate */
        { "\"\\ud800\\u0041\"", JRPC_JSON_EMALFORMED },
        { "\"\\ud834\\udd1e\"", 0 },
        { "\"\\ud834", JRPC_JSON_EINCOMPLETE },
        { "\"\\ud834\\ud", JRPC_JSON_EINCOMPLETE },
        { "\"\\ud834\\u0", JRPC_JSON_EMALFORMED },
        { "\"\\x\"", JRPC_JSON_EMALFORMED },
        { "\"a\tb\"", JRPC_JSON_EMALFORMED },              /* raw control char */
        { "\"\x7f\"", 0 },                                 /* DEL is allowed */
        { "\"\xc0\xaf\"", JRPC_JSON_EMALFORMED },          /* overlong */
        { "\"\xe0\x80\xaf\"", JRPC_JSON_EMALFORMED },      /* overlong */
        { "\"\xed\xa0\x80\"", JRPC_JSON_EMALFORMED },      /* UTF-8 surrogate */
        { "\"\xf4\x90\x80\x80\"", JRPC_JSON_EMALFORMED },  /* > U+10FFFF */
        { "\"\xf0\x9f\x98", JRPC_JSON_EINCOMPLETE },       /* cut sequence */
        { "\"\xf0\x9f\x98\"", JRPC_JSON_EMALFORMED },      /* truncated sequence */
        { "\"\xf0\x9f\x98\x80\"", 0 },
        { "tru", JRPC_JSON_EINCOMPLETE },
        { "trUe", JRPC_JSON_EMALFORMED },
        { "[1e400]", 0 },                                  /* grammar only */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = validate_str(cases[i].s, JRPC_JSON_MAX_DEPTH);
        if (rc != cases[i].rc)
            fail_msg("validate(%s) = %d, want %d", cases[i].s, rc, cases[i].rc);
    }
}

static char *nested(unsigned depth)
{
    char *s = malloc(2 * depth + 1);
    assert_non_null(s);
    memset(s, '[', depth);
    memset(s + depth, ']', depth);
    s[2 * depth] = '\0';
    return s;
}

static void test_depth(void **state)
{
    (void)state;
    char *s64 = nested(64), *s65 = nested(65);
    assert_int_equal(validate_str(s64, 64), 0);
    assert_int_equal(validate_str(s65, 64), JRPC_JSON_EDEPTH);
    assert_int_equal(validate_str("[[{\"a\":[]}]]", 4), 0);
    assert_int_equal(validate_str("[[{\"a\":[]}]]", 3), JRPC_JSON_EDEPTH);
    /* 64 levels transcode (msgpack-c itself unpacks only 32 levels, so the
     * writer is checked on hand-made objects). */
    jrpc_buf_t mp;
    assert_int_equal(to_mp(s64, &mp), 0);
    assert_int_equal(mp.len, 64);
    jrpc_buf_dispose(&mp);
    msgpack_object levels[65];
    levels[64] = (msgpack_object){ .type = MSGPACK_OBJECT_ARRAY, .via.array = { 0, NULL } };
    for (int i = 63; i >= 0; i--)
        levels[i] = (msgpack_object){ .type = MSGPACK_OBJECT_ARRAY,
                                      .via.array = { 1, &levels[i + 1] } };
    jrpc_buf_t js;
    jrpc_buf_init(&js);
    assert_int_equal(jrpc_json_write_msgpack(&js, &levels[1], 64), 0);
    assert_int_equal(js.len, 128);
    assert_memory_equal(js.p, s64, 128);
    jrpc_buf_reset(&js);
    assert_int_equal(jrpc_json_write_msgpack(&js, &levels[0], 64), JRPC_JSON_EDEPTH);
    assert_int_equal(js.len, 0);
    jrpc_buf_dispose(&js);
    assert_int_equal(to_mp(s65, &mp), JRPC_JSON_EDEPTH);
    assert_int_equal(mp.len, 0);
    jrpc_buf_dispose(&mp);
    /* Far deeper than the limit: refused without recursing. */
    char *deep = malloc(1000000);
    memset(deep, '[', 1000000);
    assert_int_equal(jrpc_json_validate(deep, 1000000, 64), JRPC_JSON_EDEPTH);
    free(deep);
    free(s64);
    free(s65);
}

static void test_msgpack_bytes(void **state)
{
    (void)state;
#define MP(in, lit) assert_mp(in, lit, sizeof lit - 1)
    MP("[1,2]", "\x92\x01\x02");
    MP("127", "\x7f");
    MP("128", "\xcc\x80");
    MP("256", "\xcd\x01\x00");
    MP("65536", "\xce\x00\x01\x00\x00");
    MP("4294967296", "\xcf\x00\x00\x00\x01\x00\x00\x00\x00");
    MP("18446744073709551615", "\xcf\xff\xff\xff\xff\xff\xff\xff\xff");
    MP("-1", "\xff");
    MP("-32", "\xe0");
    MP("-33", "\xd0\xdf");
    MP("-129", "\xd1\xff\x7f");
    MP("-32769", "\xd2\xff\xff\x7f\xff");
    MP("-2147483649", "\xd3\xff\xff\xff\xff\x7f\xff\xff\xff");
    MP("-9223372036854775808", "\xd3\x80\x00\x00\x00\x00\x00\x00\x00");
    MP("-0", "\x00");
    MP("1.5", "\xcb\x3f\xf8\x00\x00\x00\x00\x00\x00");
    MP("1e0", "\xcb\x3f\xf0\x00\x00\x00\x00\x00\x00");
    MP("18446744073709551616", "\xcb\x43\xf0\x00\x00\x00\x00\x00\x00");
    MP("-9223372036854775809", "\xcb\xc3\xe0\x00\x00\x00\x00\x00\x00");
    MP("1e-400", "\xcb\x00\x00\x00\x00\x00\x00\x00\x00");  /* underflow: 0 */
    MP("[true,false,null]", "\x93\xc3\xc2\xc0");
    MP("{\"a\":[]}", "\x81\xa1" "a" "\x90");
    MP("\"a\\nb\\u00e9\"", "\xa5" "a\nb\xc3\xa9");
    MP("\"\\ud834\\udd1e\"", "\xa4\xf0\x9d\x84\x9e");
    MP("\"\\u0000\"", "\xa1\x00");
#undef MP
    /* 32 raw bytes: str8 header; 16 elements: array32 header. */
    jrpc_buf_t mp;
    assert_int_equal(to_mp("\"0123456789abcdef0123456789abcdef\"", &mp), 0);
    assert_int_equal(mp.len, 34);
    assert_memory_equal(mp.p, "\xd9\x20", 2);
    jrpc_buf_dispose(&mp);
    assert_int_equal(to_mp("[0,1,2,3,4,5,6,7,8,9,0,1,2,3,4,5]", &mp), 0);
    assert_memory_equal(mp.p, "\xdd\x00\x00\x00\x10", 5);
    assert_int_equal(mp.len, 21);
    jrpc_buf_dispose(&mp);
    /* Out-of-range numbers are refused, and out is left as it was. */
    jrpc_buf_init(&mp);
    jrpc_buf_puts(&mp, "keep");
    char *b = exact("[1, 1e400]", 10);
    assert_int_equal(jrpc_json_to_msgpack(b, 10, 64, &mp), JRPC_JSON_ERANGE);
    assert_int_equal(mp.len, 4);
    free(b);
    b = exact("-1e400", 6);
    assert_int_equal(jrpc_json_to_msgpack(b, 6, 64, &mp), JRPC_JSON_ERANGE);
    free(b);
    jrpc_buf_dispose(&mp);
}

static void test_round_trips(void **state)
{
    (void)state;
    assert_round_trip("0", "0");
    assert_round_trip("-0", "0");
    assert_round_trip("18446744073709551615", "18446744073709551615");
    assert_round_trip("-9223372036854775808", "-9223372036854775808");
    assert_round_trip("9223372036854775807", "9223372036854775807");
    assert_round_trip("[1,-1,127,-32,-33,255,65535,-32768,4294967295,-2147483648]",
                      "[1,-1,127,-32,-33,255,65535,-32768,4294967295,-2147483648]");
    assert_round_trip("0.1", "0.1");
    assert_round_trip("1e300", "1e+300");
    assert_round_trip("-0.0", "-0.0");
    assert_round_trip("5e-324", "5e-324");
    assert_round_trip("1.7976931348623157e308", "1.7976931348623157e+308");
    assert_round_trip("2.5", "2.5");
    assert_round_trip("1.0", "1.0");
    assert_round_trip("1e5", "100000.0");
    assert_round_trip("0.30000000000000004", "0.30000000000000004");
    assert_round_trip("123456789012345678901234567890", "1.2345678901234568e+29");
    assert_round_trip("\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u0001\\u001f\"",
                      "\"a\\\"b\\\\c/d\\b\\f\\n\\r\\t\\u0001\\u001f\"");
    assert_round_trip("\"\\u00e9\xc3\xa9\\ud834\\udd1e\xe2\x82\xac\x7f\"",
                      "\"\xc3\xa9\xc3\xa9\xf0\x9d\x84\x9e\xe2\x82\xac\x7f\"");
    assert_round_trip(" { \"a\" : [ 1 , { \"b\" : null } , true ] , \"\" : \"x\" } ",
                      "{\"a\":[1,{\"b\":null},true],\"\":\"x\"}");
    assert_round_trip("{\"a\":1,\"a\":2}", "{\"a\":1,\"a\":2}");  /* passed through */
    assert_round_trip("[[],{},[[]]]", "[[],{},[[]]]");
}

static void test_member(void **state)
{
    (void)state;
    const char *s = " {\"jsonrpc\":\"2.0\",\"r\\u0065sult\" : {\"a\":[1,2]} ,\"id\":1} ";
    char *b = exact(s, strlen(s));
    jrpc_span_t v;
    assert_int_equal(jrpc_json_member(b, strlen(s), "result", &v), 0);
    assert_int_equal(v.n, strlen("{\"a\":[1,2]}"));
    assert_memory_equal(v.p, "{\"a\":[1,2]}", v.n);
    assert_int_equal(jrpc_json_member(b, strlen(s), "id", &v), 0);
    assert_memory_equal(v.p, "1", v.n);
    assert_int_equal(jrpc_json_member(b, strlen(s), "error", &v), -ENOENT);
    assert_int_equal(jrpc_json_member(b, strlen(s) - 3, "id", &v), JRPC_JSON_EINCOMPLETE);
    free(b);
    b = exact("{}", 2);
    assert_int_equal(jrpc_json_member(b, 2, "id", &v), -ENOENT);
    free(b);
    b = exact("[1]", 3);
    assert_int_equal(jrpc_json_member(b, 3, "id", &v), -ENOENT);
    free(b);
    b = exact("{\"a\":1}x", 8);
    assert_int_equal(jrpc_json_member(b, 8, "a", &v), JRPC_JSON_EMALFORMED);
    free(b);
    assert_string_equal(jrpc_json_strerror(JRPC_JSON_ERANGE), "number out of range");
}

typedef struct members {
    char s[256];
    int  n;
} members_t;

static void on_member(void *arg, jrpc_span_t name, jrpc_span_t value)
{
    members_t *m = arg;
    size_t k = strlen(m->s);
    snprintf(m->s + k, sizeof m->s - k, "%.*s=%.*s;", (int)name.n, name.p, (int)value.n, value.p);
    m->n++;
}

/* Every member of an object once, in order, names unescaped; not an
 * object or not JSON: no call. */
static void test_each_member(void **state)
{
    (void)state;
    const char *s = " {\"a\":1, \"b\\u0063\" : {\"x\":[1,{}]} ,\"\":\"v\"} ";
    char *b = exact(s, strlen(s));
    members_t m = { "", 0 };
    assert_int_equal(jrpc_json_each_member(b, strlen(s), 8, on_member, &m), 0);
    assert_string_equal(m.s, "a=1;bc={\"x\":[1,{}]};=\"v\";");
    free(b);
    static const char *const bad[] = { "[1]", "{\"a\":1", "{\"a\":[[[[1]]]]}", "{}" };
    static const int want[] = { -ENOENT, JRPC_JSON_EINCOMPLETE, JRPC_JSON_EDEPTH, 0 };
    for (int i = 0; i < 4; i++) {
        members_t z = { "", 0 };
        b = exact(bad[i], strlen(bad[i]));
        assert_int_equal(jrpc_json_each_member(b, strlen(bad[i]), 3, on_member, &z), want[i]);
        assert_int_equal(z.n, 0);
        free(b);
    }
}

/* The UTF-8 check on its own (WebSocket text messages): the parser's rules. */
static void test_utf8_valid(void **state)
{
    (void)state;
    static const struct { const char *s; size_t n; bool ok; } t[] = {
        { "", 0, true }, { "ascii", 5, true }, { "\xc3\xa9", 2, true },
        { "\xe2\x82\xac", 3, true }, { "\xf0\x9f\x98\x80", 4, true },
        { "\xf4\x8f\xbf\xbf", 4, true },
        { "\xc3", 1, false },               /* cut */
        { "\xc0\xaf", 2, false },           /* overlong */
        { "\xe0\x80\xaf", 3, false },       /* overlong */
        { "\xed\xa0\x80", 3, false },       /* a surrogate */
        { "\xf4\x90\x80\x80", 4, false },   /* past U+10FFFF */
        { "\xff", 1, false }, { "\x80", 1, false }, { "a\0b", 3, true },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char *p = malloc(t[i].n ? t[i].n : 1);   /* at the end of its block: an over-read trips ASan */
        memcpy(p, t[i].s, t[i].n);
        assert_int_equal(jrpc_json_utf8_valid(p, t[i].n), t[i].ok);
        free(p);
    }
}

/* jrpc_jp_string reads eight bytes a step: each byte value, at each of the
 * first 20 positions of a string followed by more text (so that whole
 * words are read around it), must stop the scan exactly where a byte-by-byte
 * reading stops it: the closing quote's position, or the verdict. */
static void test_string_scan_positions(void **state)
{
    (void)state;
    for (unsigned pos = 0; pos < 20; pos++) {
        for (unsigned v = 0; v < 256; v++) {
            /* "aaaa..X..aaaa" then a tail, in a block of exactly its size */
            char text[64];
            size_t n = 0;
            text[n++] = '"';
            for (unsigned k = 0; k < 24; k++)
                text[n++] = k == pos ? (char)v : 'a';
            text[n++] = '"';
            memcpy(text + n, ",\"tail\":1}", 11);
            n += 11;
            char *buf = exact(text, n);
            jrpc_jp_t j = { .p = buf, .end = buf + n, .w = NULL, .max_depth = 8 };
            jrpc_span_t raw;
            bool plain;
            int rc = jrpc_jp_string(&j, &raw, &plain);
            if (v == '"') {          /* the string ends there */
                assert_int_equal(rc, 0);
                assert_int_equal(raw.n, pos);
                assert_true(plain);
            } else if (v < 0x20 || v >= 0x80) {   /* a control byte, or a lone non-ASCII byte */
                assert_int_equal(rc, JRPC_JSON_EMALFORMED);
            } else if (v == '\\') {  /* "\a" is no escape */
                assert_int_equal(rc, JRPC_JSON_EMALFORMED);
            } else {
                assert_int_equal(rc, 0);
                assert_int_equal(raw.n, 24);
                assert_true(plain);
                assert_ptr_equal(j.p, buf + 26);
            }
            free(buf);
        }
    }
    /* a string cut anywhere before its quote is incomplete, never over-read */
    static const char whole[] = "\"0123456789abcdefghij\\u00e9\xc3\xa9\"";
    for (size_t cut = 1; cut < sizeof whole - 1; cut++) {
        char *buf = exact(whole, cut);
        jrpc_jp_t j = { .p = buf, .end = buf + cut, .w = NULL, .max_depth = 8 };
        jrpc_span_t raw;
        bool plain;
        assert_int_equal(jrpc_jp_string(&j, &raw, &plain), JRPC_JSON_EINCOMPLETE);
        free(buf);
    }
    char *buf = exact(whole, sizeof whole - 1);
    jrpc_jp_t j = { .p = buf, .end = buf + sizeof whole - 1, .w = NULL, .max_depth = 8 };
    jrpc_span_t raw;
    bool plain = true;
    assert_int_equal(jrpc_jp_string(&j, &raw, &plain), 0);
    assert_false(plain);
    assert_int_equal(raw.n, sizeof whole - 3);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_suite_whole),
        cmocka_unit_test(test_suite_prefixes),
        cmocka_unit_test(test_validate_cases),
        cmocka_unit_test(test_depth),
        cmocka_unit_test(test_msgpack_bytes),
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_member),
        cmocka_unit_test(test_each_member),
        cmocka_unit_test(test_utf8_valid),
        cmocka_unit_test(test_string_scan_positions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
