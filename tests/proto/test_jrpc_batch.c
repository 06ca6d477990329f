/* Tests of jrpc_batch: every example of section 7 of the JSON-RPC 2.0
 * specification, answered by a fake server and compared byte for byte; the
 * envelope rules (ids, notifications, duplicates, rpc.*, limits); worker
 * results and errors; and the whole JSONTestSuite as request bodies. Bodies
 * sit in malloc'd buffers of exactly their size (ASan+UBSan build). */
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
#include <limits.h>
#include <msgpack.h>
#include "jrpc_batch.h"
#include "jrpc_errors.h"
#include "jrpc_json.h"

#define SUITE_DIR JRPC_TESTDATA "/jsontestsuite/test_parsing"

#define INVALID "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32600,\"message\":\"Invalid Request\"},\"id\":null}"
#define PARSE   "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32700,\"message\":\"Parse error\"},\"id\":null}"

/* ---- helpers ---- */

typedef struct req {
    char         *body;   /* exact-size copy: outlives the batch */
    jrpc_batch_t  b;
    jrpc_buf_t    out;    /* the reply, NUL-terminated */
} req_t;

static void req_parse_n(req_t *r, const char *body, size_t n, const jrpc_limits_t *lim)
{
    r->body = malloc(n ? n : 1);
    assert_non_null(r->body);
    if (n)
        memcpy(r->body, body, n);
    jrpc_batch_init(&r->b);
    jrpc_buf_init(&r->out);
    assert_int_equal(jrpc_batch_parse(&r->b, r->body, n, lim), 0);
    assert_true(r->b.ncalls >= 1);
}

static void req_parse(req_t *r, const char *body)
{
    jrpc_limits_t lim = JRPC_LIMITS_DEFAULT;
    req_parse_n(r, body, strlen(body), &lim);
}

static const char *req_reply(req_t *r)
{
    jrpc_buf_reset(&r->out);
    assert_int_equal(jrpc_batch_write_reply(&r->b, &r->out), 0);
    assert_int_equal(jrpc_buf_putc(&r->out, '\0'), 0);
    return r->out.p;
}

static void req_dispose(req_t *r)
{
    jrpc_batch_dispose(&r->b);
    jrpc_buf_dispose(&r->out);
    free(r->body);
}

static bool method_is(const jrpc_call_t *c, const char *m)
{
    return c->method.n == strlen(m) && memcmp(c->method.p, m, c->method.n) == 0;
}

/* Answers call i with the msgpack value pack() writes. */
static void answer_packed(jrpc_batch_t *b, uint32_t i, void (*pack)(msgpack_packer *, int64_t),
                          int64_t v)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    pack(&pk, v);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    assert_int_equal(msgpack_unpack_next(&u, sb.data, sb.size, NULL), MSGPACK_UNPACK_SUCCESS);
    assert_int_equal(jrpc_batch_answer_result(b, i, &u.data), 0);
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&sb);
}

static void pack_int(msgpack_packer *pk, int64_t v)
{
    msgpack_pack_int64(pk, v);
}

static void pack_hello(msgpack_packer *pk, int64_t v)
{
    msgpack_pack_array(pk, 2);
    msgpack_pack_str(pk, 5);
    msgpack_pack_str_body(pk, "hello", 5);
    msgpack_pack_int64(pk, v);
}

static int64_t map_int(const msgpack_object *m, const char *key)
{
    for (uint32_t i = 0; i < m->via.map.size; i++) {
        const msgpack_object_kv *kv = &m->via.map.ptr[i];
        if (kv->key.via.str.size == strlen(key) &&
            memcmp(kv->key.via.str.ptr, key, strlen(key)) == 0)
            return kv->val.via.i64;
    }
    fail_msg("no member %s", key);
    return 0;
}

/* A fake server with the methods of the specification's examples. */
static void serve(jrpc_batch_t *b)
{
    for (uint32_t i = 0; i < b->ncalls; i++) {
        const jrpc_call_t *c = &b->calls[i];
        if (c->answered)
            continue;  /* already answered, or dropped */
        msgpack_unpacked u;
        msgpack_unpacked_init(&u);
        const msgpack_object *p = NULL;
        jrpc_buf_t mp;   /* the params as a msgpack worker gets them */
        jrpc_buf_init(&mp);
        if (c->params.n) {
            size_t off = 0;
            assert_int_equal(jrpc_json_to_msgpack(c->params.p, c->params.n, 64, &mp), 0);
            assert_int_equal(msgpack_unpack_next(&u, mp.p, mp.len, &off), MSGPACK_UNPACK_SUCCESS);
            assert_int_equal(off, mp.len);
            p = &u.data;
        }
        if (method_is(c, "subtract")) {
            int64_t r = p->type == MSGPACK_OBJECT_ARRAY
                      ? p->via.array.ptr[0].via.i64 - p->via.array.ptr[1].via.i64
                      : map_int(p, "minuend") - map_int(p, "subtrahend");
            answer_packed(b, i, pack_int, r);
        } else if (method_is(c, "sum")) {
            int64_t r = 0;
            for (uint32_t k = 0; k < p->via.array.size; k++)
                r += p->via.array.ptr[k].via.i64;
            answer_packed(b, i, pack_int, r);
        } else if (method_is(c, "get_data")) {
            answer_packed(b, i, pack_hello, 5);
        } else if (method_is(c, "echo")) {
            assert_int_equal(jrpc_batch_answer_result(b, i, p), 0);
        } else if (!c->notification) {
            assert_int_equal(jrpc_batch_answer_error(b, i, JRPC_METHOD_NOT_FOUND, NULL), 0);
        }
        msgpack_unpacked_destroy(&u);
        jrpc_buf_dispose(&mp);
    }
}

/* Parses, serves and checks the exact reply ("" for no reply). */
static void assert_exchange(const char *body, const char *want)
{
    req_t r;
    req_parse(&r, body);
    serve(&r.b);
    const char *got = req_reply(&r);
    if (strcmp(got, want) != 0)
        fail_msg("body %s\n got  %s\n want %s", body, got, want);
    assert_int_equal(jrpc_batch_expects_reply(&r.b), want[0] != '\0');
    uint32_t expecting = 0;   /* nanswers is the calls that are not notifications */
    for (uint32_t i = 0; i < r.b.ncalls; i++)
        expecting += !r.b.calls[i].notification;
    assert_int_equal(r.b.nanswers, expecting);
    req_dispose(&r);
}

/* ---- specification, section 7 ---- */

static void test_spec_examples(void **state)
{
    (void)state;
    assert_exchange("{\"jsonrpc\": \"2.0\", \"method\": \"subtract\", \"params\": [42, 23], \"id\": 1}",
                    "{\"jsonrpc\":\"2.0\",\"result\":19,\"id\":1}");
    assert_exchange("{\"jsonrpc\": \"2.0\", \"method\": \"subtract\", \"params\": [23, 42], \"id\": 2}",
                    "{\"jsonrpc\":\"2.0\",\"result\":-19,\"id\":2}");
    assert_exchange("{\"jsonrpc\": \"2.0\", \"method\": \"subtract\", \"params\": "
                    "{\"subtrahend\": 23, \"minuend\": 42}, \"id\": 3}",
                    "{\"jsonrpc\":\"2.0\",\"result\":19,\"id\":3}");
    assert_exchange("{\"jsonrpc\": \"2.0\", \"method\": \"subtract\", \"params\": "
                    "{\"minuend\": 42, \"subtrahend\": 23}, \"id\": 4}",
                    "{\"jsonrpc\":\"2.0\",\"result\":19,\"id\":4}");
    assert_exchange("{\"jsonrpc\": \"2.0\", \"method\": \"update\", \"params\": [1,2,3,4,5]}", "");
    assert_exchange("{\"jsonrpc\": \"2.0\", \"method\": \"foobar\"}", "");
    assert_exchange("{\"jsonrpc\": \"2.0\", \"method\": \"foobar\", \"id\": \"1\"}",
                    "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32601,\"message\":\"Method not found\"},\"id\":\"1\"}");
    assert_exchange("{\"jsonrpc\": \"2.0\", \"method\": \"foobar, \"params\": \"bar\", \"baz]", PARSE);
    assert_exchange("{\"jsonrpc\": \"2.0\", \"method\": 1, \"params\": \"bar\"}", INVALID);
    assert_exchange("[\n  {\"jsonrpc\": \"2.0\", \"method\": \"sum\", \"params\": [1,2,4], \"id\": \"1\"},\n"
                    "  {\"jsonrpc\": \"2.0\", \"method\"\n]", PARSE);
    assert_exchange("[]", INVALID);
    assert_exchange("[1]", "[" INVALID "]");
    assert_exchange("[1,2,3]", "[" INVALID "," INVALID "," INVALID "]");
    assert_exchange(
        "[\n"
        "  {\"jsonrpc\": \"2.0\", \"method\": \"sum\", \"params\": [1,2,4], \"id\": \"1\"},\n"
        "  {\"jsonrpc\": \"2.0\", \"method\": \"notify_hello\", \"params\": [7]},\n"
        "  {\"jsonrpc\": \"2.0\", \"method\": \"subtract\", \"params\": [42,23], \"id\": \"2\"},\n"
        "  {\"foo\": \"boo\"},\n"
        "  {\"jsonrpc\": \"2.0\", \"method\": \"foo.get\", \"params\": {\"name\": \"myself\"}, \"id\": \"5\"},\n"
        "  {\"jsonrpc\": \"2.0\", \"method\": \"get_data\", \"id\": \"9\"}\n"
        "]",
        "[{\"jsonrpc\":\"2.0\",\"result\":7,\"id\":\"1\"},"
        "{\"jsonrpc\":\"2.0\",\"result\":19,\"id\":\"2\"},"
        INVALID ","
        "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32601,\"message\":\"Method not found\"},\"id\":\"5\"},"
        "{\"jsonrpc\":\"2.0\",\"result\":[\"hello\",5],\"id\":\"9\"}]");
    assert_exchange("[\n"
                    "  {\"jsonrpc\": \"2.0\", \"method\": \"notify_sum\", \"params\": [1,2,4]},\n"
                    "  {\"jsonrpc\": \"2.0\", \"method\": \"notify_hello\", \"params\": [7]}\n"
                    "]", "");
}

static void test_calls(void **state)
{
    (void)state;
    req_t r;
    req_parse(&r, "{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"params\":[42,23],\"id\":1}");
    assert_false(r.b.is_array);
    assert_int_equal(r.b.ncalls, 1);
    const jrpc_call_t *c = &r.b.calls[0];
    assert_false(c->answered);
    assert_false(c->notification);
    assert_int_equal(c->method.n, 3);
    assert_memory_equal(c->method.p, "add", 3);
    assert_int_equal(c->params.n, 7);   /* the client's text, borrowed from the body */
    assert_memory_equal(c->params.p, "[42,23]", 7);
    assert_int_equal(c->id.n, 1);
    assert_memory_equal(c->id.p, "1", 1);
    req_dispose(&r);

    /* No params; an escaped method name; unknown members ignored. */
    req_parse(&r, "{\"x\":[{}],\"jsonrpc\":\"2\\u002e0\",\"m\\u0065thod\":\"a\\u00e9\\n\",\"id\":null}");
    c = &r.b.calls[0];
    assert_false(c->answered);
    assert_int_equal(c->params.n, 0);
    assert_int_equal(c->method.n, 4);
    assert_memory_equal(c->method.p, "a\xc3\xa9\n", 4);
    req_dispose(&r);

    /* Duplicate ids in a batch are two calls. */
    req_parse(&r, "[{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":[1],\"id\":7},"
                  "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":[2],\"id\":7}]");
    assert_int_equal(r.b.ncalls, 2);
    serve(&r.b);
    assert_string_equal(req_reply(&r), "[{\"jsonrpc\":\"2.0\",\"result\":[1],\"id\":7},"
                                       "{\"jsonrpc\":\"2.0\",\"result\":[2],\"id\":7}]");
    req_dispose(&r);
}

static void test_ids(void **state)
{
    (void)state;
    static const char *ids[] = {
        "1.0", "9007199254740993", "\"\\u00e9\"", "-0", "1e5", "null", "\"\"",
        "-1.5E-7", "\"a\\\"b\"", "123456789012345678901234567890",
    };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        char body[256], want[256];
        snprintf(body, sizeof body, "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":[],\"id\": %s }", ids[i]);
        snprintf(want, sizeof want, "{\"jsonrpc\":\"2.0\",\"result\":[],\"id\":%s}", ids[i]);
        assert_exchange(body, want);
        /* Echoed on an invalid request too, since the id itself is valid. */
        snprintf(body, sizeof body, "{\"jsonrpc\":\"2.1\",\"method\":\"echo\",\"id\":%s}", ids[i]);
        snprintf(want, sizeof want, "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32600,"
                 "\"message\":\"Invalid Request\"},\"id\":%s}", ids[i]);
        assert_exchange(body, want);
    }
    /* Ids of the wrong type: Invalid Request, id null. */
    assert_exchange("{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":[1]}", INVALID);
    assert_exchange("{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":{}}", INVALID);
    assert_exchange("{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":true}", INVALID);
    /* "id": null is a request, answered. */
    assert_exchange("{\"jsonrpc\":\"2.0\",\"method\":\"nope\",\"id\":null}",
                    "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32601,\"message\":\"Method not found\"},\"id\":null}");
}

static void test_envelope(void **state)
{
    (void)state;
    static const char *invalid[] = {
        "{}",
        "{\"method\":\"a\"}",                                      /* no jsonrpc */
        "{\"jsonrpc\":\"2.00\",\"method\":\"a\"}",
        "{\"jsonrpc\":2.0,\"method\":\"a\"}",
        "{\"jsonrpc\":\"2.0\"}",                                     /* no method */
        "{\"jsonrpc\":\"2.0\",\"method\":null}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\"}",                     /* empty */
        "{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"params\":null}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"params\":1}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"params\":\"x\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"method\":\"a\"}",   /* duplicates */
        "{\"jsonrpc\":\"2.0\",\"jsonrpc\":\"2.0\",\"method\":\"a\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"params\":[],\"params\":[]}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"id\":1,\"id\":1}",
        "1", "\"x\"", "null", "true", " 1.5 ",                      /* scalars */
        "[ ]",
    };
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        req_t r;
        req_parse(&r, invalid[i]);
        assert_int_equal(r.b.ncalls, 1);
        assert_false(r.b.is_array);
        assert_true(r.b.calls[0].answered);
        assert_false(r.b.calls[0].notification);  /* answered even without an id */
        const char *got = req_reply(&r);
        if (strcmp(got, INVALID) != 0)
            fail_msg("%s gave %s", invalid[i], got);
        req_dispose(&r);
    }
    /* A duplicate member other than id keeps the (valid) id. */
    assert_exchange("{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"method\":\"a\",\"id\":3}",
                    "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32600,\"message\":\"Invalid Request\"},\"id\":3}");
    static const char *parse_errors[] = {
        "", "  ", "{", "[", "[1,", "{\"jsonrpc\":\"2.0\",\"method\":\"a\"} x", "[][]", "\xef\xbb\xbf{}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"a\\ud800\"}", "[{}, 01]",
    };
    for (size_t i = 0; i < sizeof parse_errors / sizeof parse_errors[0]; i++)
        assert_exchange(parse_errors[i], PARSE);
    /* Out-of-range numbers in params are a parse error with a reason. */
    assert_exchange("[{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"params\":{\"x\":[-1e400]},\"id\":1}]",
                    "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32700,\"message\":\"Parse error\","
                    "\"data\":\"number out of range\"},\"id\":null}");
}

/* The member names and "2.0" are recognised by their bytes when spelled as
 * requests usually spell them; every other spelling (escapes, spaces, cut
 * short, another order, a near miss) takes the general path: the verdicts
 * must be the same. */
static void test_member_spellings(void **state)
{
    (void)state;
    static const char *same[] = {
        "{\"jsonrpc\":\"2.0\",\"method\":\"subtract\",\"params\":[5,3],\"id\":7}",
        "{\"id\":7,\"params\":[5,3],\"method\":\"subtract\",\"jsonrpc\":\"2.0\"}",
        "{ \"jsonrpc\" : \"2.0\" , \"method\" : \"subtract\" , \"params\" : [5,3] , \"id\" : 7 }",
        "{\"jsonrpc\":\t\"2.0\",\"method\":\n\"subtract\",\"params\":\r[5,3],\"id\": 7}",
        "{\"j\\u0073onrpc\":\"2\\u002e0\",\"\\u006dethod\":\"subtract\",\"p\\u0061rams\":[5,3],\"\\u0069d\":7}",
        ("{\"jsonrpc\":\"2.0\",\"idx\":1,\"methods\":2,\"param\":3,\"jsonrpc2\":4,\"method\":\"subtract\","
         "\"params\":[5,3],\"id\":7}"),   /* one string, in two lines */
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        assert_exchange(same[i], "{\"jsonrpc\":\"2.0\",\"result\":2,\"id\":7}");
    static const char *invalid[] = {
        "{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"i\\u0064\":1,\"id\":1}",   /* the same key twice */
        "{\"jsonrpc\":\"2.0 \",\"method\":\"a\",\"id\":1}",
        "{\"jsonrpc\":\"2.0\",\"jsonrpc\":\"2.0\",\"method\":\"a\",\"id\":1}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"params\":7,\"id\":1}",
    };
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        req_t r;
        req_parse(&r, invalid[i]);
        assert_int_equal(r.b.ncalls, 1);
        assert_true(r.b.calls[0].answered);
        req_dispose(&r);
    }
    static const char *cut[] = {   /* cut inside or right after a known name */
        "{\"id\"", "{\"id\":", "{\"id\": ", "{\"jsonrpc\":\"2.0\"", "{\"jsonrpc\":\"2.", "{\"params\":",
        "{\"method\":", "{\"jsonrpc\":", "{\"jsonrpc\"",
    };
    for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++)
        assert_exchange(cut[i], PARSE);
}

static void test_reserved(void **state)
{
    (void)state;
    assert_exchange("{\"jsonrpc\":\"2.0\",\"method\":\"rpc.ping\",\"id\":1}",
                    "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32601,\"message\":\"Method not found\","
                    "\"data\":\"rpc.* names are reserved\"},\"id\":1}");
    req_t r;
    req_parse(&r, "[{\"jsonrpc\":\"2.0\",\"method\":\"rpc.ping\"},"
                  "{\"jsonrpc\":\"2.0\",\"method\":\"rpc\"},"
                  "{\"jsonrpc\":\"2.0\",\"method\":\"rpc\\u002eping\"}]");
    assert_int_equal(r.b.ncalls, 3);
    assert_true(r.b.calls[0].notification);
    assert_true(r.b.calls[0].answered);   /* dropped: not dispatched */
    assert_true(r.b.calls[1].notification);
    assert_false(r.b.calls[1].answered);  /* "rpc" itself is not reserved */
    assert_true(r.b.calls[2].answered);
    assert_false(jrpc_batch_expects_reply(&r.b));
    assert_string_equal(req_reply(&r), "");
    req_dispose(&r);
    /* rpc.discover: left for the broker (a request), dropped (a notification) */
    req_parse(&r, "[{\"jsonrpc\":\"2.0\",\"method\":\"rpc.discover\",\"id\":1},"
                  "{\"jsonrpc\":\"2.0\",\"method\":\"rpc.discover\"},"
                  "{\"jsonrpc\":\"2.0\",\"method\":\"rpc.discovery\",\"id\":2}]");
    assert_int_equal(r.b.ncalls, 3);
    assert_false(r.b.calls[0].answered);
    assert_true(jrpc_batch_is_discover(&r.b.calls[0]));
    assert_true(r.b.calls[1].answered);
    assert_false(jrpc_batch_is_discover(&r.b.calls[1]));
    assert_true(r.b.calls[2].answered);
    assert_int_equal(r.b.calls[2].code, JRPC_METHOD_NOT_FOUND);
    req_dispose(&r);
}

static void test_limits(void **state)
{
    (void)state;
    jrpc_limits_t lim = JRPC_LIMITS_DEFAULT;
    lim.max_batch = 3;
    lim.max_method_len = 5;
    req_t r;
    const char *three = "[1,{\"jsonrpc\":\"2.0\",\"method\":\"abcde\"},3]";
    req_parse_n(&r, three, strlen(three), &lim);
    assert_true(r.b.is_array);
    assert_int_equal(r.b.ncalls, 3);
    assert_false(r.b.calls[1].answered);
    req_dispose(&r);
    const char *four = "[1,2,3,{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"id\":1}]";
    req_parse_n(&r, four, strlen(four), &lim);
    assert_false(r.b.is_array);
    assert_string_equal(req_reply(&r), "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32600,"
                        "\"message\":\"Invalid Request\",\"data\":\"batch too large\"},\"id\":null}");
    req_dispose(&r);
    const char *four_bad = "[1,2,3,4,]";
    req_parse_n(&r, four_bad, strlen(four_bad), &lim);
    assert_string_equal(req_reply(&r), PARSE);
    req_dispose(&r);
    const char *longname = "{\"jsonrpc\":\"2.0\",\"method\":\"abcdef\",\"id\":1}";
    req_parse_n(&r, longname, strlen(longname), &lim);
    assert_string_equal(req_reply(&r), "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32600,"
                        "\"message\":\"Invalid Request\"},\"id\":1}");
    req_dispose(&r);

    /* Depth: 64 levels in all pass, 65 are a parse error. */
    jrpc_limits_t def = JRPC_LIMITS_DEFAULT;
    char body[512];
    for (unsigned depth = 64; depth <= 65; depth++) {
        /* the request object is level 1, params level 2 */
        int n = snprintf(body, sizeof body, "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":");
        for (unsigned k = 1; k < depth; k++)
            body[n++] = '[';
        for (unsigned k = 1; k < depth; k++)
            body[n++] = ']';
        n += snprintf(body + n, sizeof body - (size_t)n, ",\"id\":1}");
        req_parse_n(&r, body, (size_t)n, &def);
        if (depth == 64) {
            assert_false(r.b.calls[0].answered);
            assert_int_equal(r.b.calls[0].params.n, 2 * 63);   /* [[...]] as sent */
        } else {
            assert_string_equal(req_reply(&r), "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32700,"
                                "\"message\":\"Parse error\",\"data\":\"nesting depth exceeds 64\"},\"id\":null}");
        }
        req_dispose(&r);
    }
    memset(body, '[', 64);
    memset(body + 64, ']', 64);
    req_parse_n(&r, body, 128, &def);
    assert_string_equal(req_reply(&r), "[" INVALID "]");
    req_dispose(&r);
    memset(body, '[', 65);
    req_parse_n(&r, body, 65, &def);  /* incomplete too: depth wins */
    assert_string_equal(req_reply(&r), "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32700,"
                        "\"message\":\"Parse error\",\"data\":\"nesting depth exceeds 64\"},\"id\":null}");
    req_dispose(&r);
}

static void test_params_round_trip(void **state)
{
    (void)state;
    static const char *params[] = {
        "[18446744073709551615,-9223372036854775808,0,-1,127,128,-33,65536,4294967296]",
        "[0.1,1e+300,-0.0,5e-324,2.5]",
        "[\"a\\\"\\\\\\n\\u0001\xc3\xa9\xf0\x9d\x84\x9e\"]",
        "{\"a\":{\"b\":[[],{},null,true,false]},\"\":\"\"}",
    };
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
        char body[512], want[512];
        snprintf(body, sizeof body, "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":%s,\"id\":1}", params[i]);
        snprintf(want, sizeof want, "{\"jsonrpc\":\"2.0\",\"result\":%s,\"id\":1}", params[i]);
        assert_exchange(body, want);
    }
}

static void test_worker_answers(void **state)
{
    (void)state;
    req_t r;
    req_parse(&r, "[{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"id\":1},{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"id\":2},"
                  "{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"id\":3}]");
    /* A well-formed error, data any value, other members dropped. */
    msgpack_object_kv kv[4] = {
        { .key = { .type = MSGPACK_OBJECT_STR, .via.str = { 4, "code" } },
          .val = { .type = MSGPACK_OBJECT_NEGATIVE_INTEGER, .via.i64 = -32000 } },
        { .key = { .type = MSGPACK_OBJECT_STR, .via.str = { 7, "message" } },
          .val = { .type = MSGPACK_OBJECT_STR, .via.str = { 4, "busy" } } },
        { .key = { .type = MSGPACK_OBJECT_STR, .via.str = { 5, "extra" } },
          .val = { .type = MSGPACK_OBJECT_BIN, .via.bin = { 1, "x" } } },
        { .key = { .type = MSGPACK_OBJECT_STR, .via.str = { 4, "data" } },
          .val = { .type = MSGPACK_OBJECT_BOOLEAN, .via.boolean = true } },
    };
    msgpack_object err = { .type = MSGPACK_OBJECT_MAP, .via.map = { 4, kv } };
    assert_int_equal(jrpc_batch_answer_error_obj(&r.b, 0, &err), 0);
    /* A result with no JSON form: -32603. */
    msgpack_object bin = { .type = MSGPACK_OBJECT_BIN, .via.bin = { 1, "x" } };
    assert_int_equal(jrpc_batch_answer_result(&r.b, 1, &bin), 0);
    /* Positive code, no data. */
    err.via.map.size = 2;
    kv[0].val = (msgpack_object){ .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = 7 };
    assert_int_equal(jrpc_batch_answer_error_obj(&r.b, 2, &err), 0);
    assert_string_equal(req_reply(&r),
        "[{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32000,\"message\":\"busy\",\"data\":true},\"id\":1},"
        "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32603,\"message\":\"Internal error\","
        "\"data\":\"result has no JSON form\"},\"id\":2},"
        "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":7,\"message\":\"busy\"},\"id\":3}]");

    /* Malformed worker errors. */
    const char *malformed = "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32603,\"message\":\"Internal error\","
                            "\"data\":\"worker sent a malformed error\"},\"id\":1}";
    msgpack_object nil = { .type = MSGPACK_OBJECT_NIL };
    msgpack_object_kv bad[3];
    msgpack_object bad_err = { .type = MSGPACK_OBJECT_MAP, .via.map = { 2, bad } };
    for (int variant = 0; variant < 9; variant++) {
        memcpy(bad, kv, sizeof bad);
        bad[0].val = (msgpack_object){ .type = MSGPACK_OBJECT_NEGATIVE_INTEGER, .via.i64 = -1 };
        bad_err.via.map.size = 2;
        const msgpack_object *e = &bad_err;
        switch (variant) {
        case 0: e = &nil; break;
        case 1: bad_err.via.map.size = 1; break;  /* no message */
        case 2: bad[0].val = (msgpack_object){ .type = MSGPACK_OBJECT_STR, .via.str = { 1, "1" } }; break;
        case 3: bad[0].val = (msgpack_object){ .type = MSGPACK_OBJECT_POSITIVE_INTEGER,
                                               .via.u64 = (uint64_t)INT_MAX + 1 }; break;
        case 4: bad[1].val = (msgpack_object){ .type = MSGPACK_OBJECT_NIL }; break;
        case 5: bad[1].val = (msgpack_object){ .type = MSGPACK_OBJECT_STR, .via.str = { 1, "\xff" } }; break;
        case 6: bad[2] = (msgpack_object_kv){ .key = { .type = MSGPACK_OBJECT_STR, .via.str = { 4, "data" } },
                                              .val = bin };
                bad_err.via.map.size = 3; break;
        case 7: bad[2] = bad[0]; bad_err.via.map.size = 3; break;  /* duplicate code */
        case 8: bad[2] = (msgpack_object_kv){ .key = nil, .val = nil }; bad_err.via.map.size = 3; break;
        }
        req_t q;
        req_parse(&q, "{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"id\":1}");
        assert_int_equal(jrpc_batch_answer_error_obj(&q.b, 0, e), 0);
        const char *got = req_reply(&q);
        if (strcmp(got, malformed) != 0)
            fail_msg("variant %d gave %s", variant, got);
        req_dispose(&q);
    }
    req_dispose(&r);

    jrpc_buf_t out;
    jrpc_buf_init(&out);
    assert_int_equal(jrpc_batch_write_error(&out, JRPC_SERVER_BUSY, "queue \"full\""), 0);
    assert_int_equal(jrpc_batch_write_error(&out, JRPC_PARSE_ERROR, NULL), 0);
    jrpc_buf_putc(&out, '\0');
    assert_string_equal(out.p, "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32000,\"message\":\"Server busy\","
                        "\"data\":\"queue \\\"full\\\"\"},\"id\":null}" PARSE);
    jrpc_buf_reset(&out);
    assert_int_equal(jrpc_batch_write_error_json(&out, JRPC_UNAUTHORIZED,
                                                 "{\"reason\":\"unknown key\",\"server_time\":7}"), 0);
    assert_int_equal(jrpc_batch_write_error_json(&out, JRPC_REPLAYED, NULL), 0);
    jrpc_buf_putc(&out, '\0');
    assert_string_equal(out.p, "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32002,\"message\":\"Unauthorized\","
                        "\"data\":{\"reason\":\"unknown key\",\"server_time\":7}},\"id\":null}"
                        "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32005,\"message\":\"Replay detected\"},"
                        "\"id\":null}");
    jrpc_buf_dispose(&out);
}

/* jrpc_batch_count: the parser's number of calls, without parsing. */
static void test_count(void **state)
{
    (void)state;
    static const struct { const char *body; uint32_t n; } cases[] = {
        { "{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"params\":[1,2,3],\"id\":1}", 1 },
        { " \r\n\t[1, 2 ,3]", 3 },
        { "[]", 1 }, { "[ ]", 1 }, { "[1]", 1 }, { "[[1,2],{\"a\":[3,4]},\"x,y\"]", 3 },
        { "[\"a\\\",b\", \"\\\\\", 2]", 3 },  /* ["a\",b", "\\", 2] */
        { "[{},{},{}] , 7", 3 },                 /* after the array: not counted */
        { "[1,", 2 }, { "[", 1 }, { "", 1 }, { "x", 1 }, { "\"[1,2]\"", 1 }, { "[\"", 1 },
        { "[[]]", 1 }, { "[{}]", 1 }, { "[,,,]", 1 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *b = cases[i].body;
        char *copy = malloc(strlen(b) + 1);   /* exactly its length: an over-read trips ASan */
        memcpy(copy, b, strlen(b));
        uint32_t got = jrpc_batch_count(copy, strlen(b));
        free(copy);
        if (got != cases[i].n)
            fail_msg("%s: counted %u, want %u", b, got, cases[i].n);
    }
}

/* ---- JSONTestSuite bodies ---- */

static void suite_file(const char *name, const char *p, size_t n)
{
    jrpc_batch_t b;
    jrpc_limits_t lim = JRPC_LIMITS_DEFAULT;
    jrpc_batch_init(&b);
    assert_int_equal(jrpc_batch_parse(&b, p, n, &lim), 0);
    static const char pe[] = "\"error\":{\"code\":-32700,";
    bool parse_error = b.ncalls == 1 && b.calls[0].answered && b.calls[0].answer.n > sizeof pe &&
                       memcmp(b.calls[0].answer.p, pe, sizeof pe - 1) == 0;
    if (name[0] == 'n') {
        if (!parse_error || b.is_array || b.calls[0].id.n != 4)
            fail_msg("%s: not a single -32700", name);
    } else if (name[0] == 'y' && parse_error) {
        fail_msg("%s: -32700", name);
    }
    /* the count a front takes before submitting: the parser's, for every body it takes */
    uint32_t counted = jrpc_batch_count(p, n);
    if (b.body_code == 0 && counted != b.ncalls)
        fail_msg("%s: counted %u, parsed %u", name, counted, b.ncalls);
    assert_true(counted >= 1);
    msgpack_object nil = { .type = MSGPACK_OBJECT_NIL };
    for (uint32_t i = 0; i < b.ncalls; i++)
        if (!b.calls[i].answered)
            assert_int_equal(jrpc_batch_answer_result(&b, i, &nil), 0);
    jrpc_buf_t out;
    jrpc_buf_init(&out);
    assert_int_equal(jrpc_batch_write_reply(&b, &out), 0);
    if (out.len)  /* the reply is strict JSON itself */
        assert_int_equal(jrpc_json_validate(out.p, out.len, 64), 0);
    jrpc_buf_dispose(&out);
    jrpc_batch_dispose(&b);
}

static void test_suite(void **state)
{
    (void)state;
    DIR *d = opendir(SUITE_DIR);
    assert_non_null(d);
    struct dirent *e;
    int count = 0;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0)
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", SUITE_DIR, e->d_name);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        char *p = malloc(n ? (size_t)n : 1);
        assert_non_null(p);
        assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
        fclose(f);
        suite_file(e->d_name, p, (size_t)n);
        free(p);
        count++;
    }
    closedir(d);
    assert_true(count >= 300);
}


/* Answers call i from the msgpack bytes mp[0..n): a result, or an error. */
static void answer_mp(jrpc_batch_t *b, uint32_t i, bool error, const char *mp, size_t n)
{
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    assert_int_equal(msgpack_unpack_next(&u, mp, n, &off), MSGPACK_UNPACK_SUCCESS);
    assert_int_equal(off, n);
    if (error)
        assert_int_equal(jrpc_batch_answer_error_obj(b, i, &u.data), 0);
    else
        assert_int_equal(jrpc_batch_answer_result(b, i, &u.data), 0);
    msgpack_unpacked_destroy(&u);
}

/* A result as JSON text: msgpack bin8 of the text. */
static void answer_json(jrpc_batch_t *b, uint32_t i, const char *json)
{
    size_t n = strlen(json);
    assert_true(n < 256);
    char mp[260] = { (char)0xc4, (char)n };
    memcpy(mp + 2, json, n);
    answer_mp(b, i, false, mp, n + 2);
}

/* An error {"code": -1, "message": "m", "data": bin(json)}. */
static void answer_json_error(jrpc_batch_t *b, uint32_t i, const char *json)
{
    size_t n = strlen(json);
    assert_true(n < 200);
    char mp[260];
    size_t k = 0;
    memcpy(mp, "\x83\xa4" "code" "\xff" "\xa7" "message" "\xa1m" "\xa4" "data", 22);
    k = 22;
    mp[k++] = (char)0xc4;
    mp[k++] = (char)n;
    memcpy(mp + k, json, n);
    answer_mp(b, i, true, mp, k + n);
}

/* PROTOCOL.md 2.3: a result or error data as JSON text is checked as
 * strictly as a client's body and copied as it is (without the whitespace
 * around it); anything else is the -32603 a malformed answer gets. */
static void test_json_text_answers(void **state)
{
    (void)state;
    char deep[200];
    req_t r;
    req_parse(&r, "[{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"id\":1},"
                  "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"id\":2},"
                  "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"id\":3},"
                  "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"id\":4},"
                  "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"id\":5},"
                  "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"id\":6},"
                  "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"id\":7},"
                  "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"id\":8},"
                  "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"id\":9}]");
    assert_int_equal(r.b.ncalls, 9);
    answer_json(&r.b, 0, " \n{\"a\" : [1, 2.50, \"x\\u00e9\"]}\t");
    answer_json(&r.b, 1, "{\"a\":");                       /* not JSON */
    for (int k = 0; k < 64; k++)                           /* 64 deep: the limit */
        deep[k] = '[', deep[64 + k] = ']';
    deep[128] = '\0';
    answer_json(&r.b, 2, deep);
    memmove(deep + 1, deep, 129);                          /* 65 deep */
    deep[0] = '[';
    strcat(deep, "]");
    answer_json(&r.b, 3, deep);
    answer_json(&r.b, 4, "1e400");                         /* no double: as NaN would be */
    answer_json(&r.b, 5, "1 2");                           /* two values */
    answer_json_error(&r.b, 6, "{\"k\": true}");
    answer_json_error(&r.b, 7, "nope");
    answer_json(&r.b, 8, "\"\xff\"");                      /* not UTF-8 */
    assert_string_equal(req_reply(&r),
        "[{\"jsonrpc\":\"2.0\",\"result\":{\"a\" : [1, 2.50, \"x\\u00e9\"]},\"id\":1},"
        "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32603,\"message\":\"Internal error\",\"data\":\"result has no JSON form\"},\"id\":2},"
        "{\"jsonrpc\":\"2.0\",\"result\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],\"id\":3},"
        "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32603,\"message\":\"Internal error\",\"data\":\"result has no JSON form\"},\"id\":4},"
        "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32603,\"message\":\"Internal error\",\"data\":\"result has no JSON form\"},\"id\":5},"
        "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32603,\"message\":\"Internal error\",\"data\":\"result has no JSON form\"},\"id\":6},"
        "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-1,\"message\":\"m\",\"data\":{\"k\": true}},\"id\":7},"
        "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32603,\"message\":\"Internal error\",\"data\":\"worker sent a malformed error\"},\"id\":8},"
        "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32603,\"message\":\"Internal error\",\"data\":\"result has no JSON form\"},\"id\":9}]");
    req_dispose(&r);
}

/* Params are the client's bytes, whatever their spelling; a number out of a
 * double's range there is still a parse error (whichever worker would have
 * got them), one elsewhere (an id, an unknown member) is not. */
static void test_params_text(void **state)
{
    (void)state;
    req_t r;
    const char *body = "{\"params\" :\t{ \"a\" : [ 1 , -0, 1E5 ] } , \"jsonrpc\":\"2.0\",\"method\":\"x\",\"id\":1}";
    req_parse(&r, body);
    assert_false(r.b.calls[0].answered);
    assert_int_equal(r.b.calls[0].params.n, strlen("{ \"a\" : [ 1 , -0, 1E5 ] }"));
    assert_memory_equal(r.b.calls[0].params.p, "{ \"a\" : [ 1 , -0, 1E5 ] }", r.b.calls[0].params.n);
    req_dispose(&r);
    req_parse(&r, "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":[1e400],\"id\":1}");
    assert_string_equal(req_reply(&r), "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32700,"
                        "\"message\":\"Parse error\",\"data\":\"number out of range\"},\"id\":null}");
    req_dispose(&r);
    req_parse(&r, "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":[1],\"x\":1e400,\"id\":1}");
    assert_false(r.b.calls[0].answered);
    assert_int_equal(r.b.calls[0].params_mp.n, 2);   /* no hint: made, 91 01 */
    assert_memory_equal(r.b.calls[0].params_mp.p, "\x91\x01", 2);
    req_dispose(&r);
}

static bool hint_not_echo(void *arg, jrpc_span_t method)
{
    (*(int *)arg)++;
    return !(method.n == 4 && memcmp(method.p, "echo", 4) == 0);
}

/* The hint: params of a method whose workers all take JSON stay text only;
 * the others are transcoded in the same pass; params before the method are
 * transcoded (the hint cannot be asked). The verdicts do not change. */
static void test_params_hint(void **state)
{
    (void)state;
    static const char body[] =
        "[{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":[1,\"a\"],\"id\":1},"
        "{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"params\":[1,2],\"id\":2},"
        "{\"params\":{\"k\":null},\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":3},"
        "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":[1e400],\"id\":4}]";
    jrpc_limits_t lim = JRPC_LIMITS_DEFAULT;
    jrpc_batch_t b;
    int asked = 0;
    jrpc_batch_init(&b);
    b.msgpack_hint = hint_not_echo;
    b.hint_arg = &asked;
    assert_int_equal(jrpc_batch_parse(&b, body, sizeof body - 1, &lim), 0);
    assert_int_equal(b.body_code, JRPC_PARSE_ERROR);   /* 1e400 in echo's params still */
    jrpc_batch_dispose(&b);
    static const char three[] =
        "[{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":[1,\"a\"],\"id\":1},"
        "{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"params\":[1,2],\"id\":2},"
        "{\"params\":{\"k\":null},\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":3}]";
    jrpc_batch_init(&b);
    asked = 0;
    b.msgpack_hint = hint_not_echo;
    b.hint_arg = &asked;
    assert_int_equal(jrpc_batch_parse(&b, three, sizeof three - 1, &lim), 0);
    assert_int_equal(b.ncalls, 3);
    assert_int_equal(asked, 2);
    assert_int_equal(b.calls[0].params.n, 7);
    assert_int_equal(b.calls[0].params_mp.n, 0);              /* echo: text only */
    assert_int_equal(b.calls[1].params_mp.n, 3);              /* add: 92 01 02 */
    assert_memory_equal(b.calls[1].params_mp.p, "\x92\x01\x02", 3);
    assert_int_equal(b.calls[2].params_mp.n, 4);              /* before the method: 81 a1 6b c0 */
    jrpc_batch_dispose(&b);
}

/* Every "{\"jsonrpc\"" of body with a space after its '{': the same
 * request, outside the usual shape. */
static char *spaced(const char *body)
{
    char *out = malloc(2 * strlen(body) + 1), *w = out;
    assert_non_null(out);
    for (const char *p = body; *p; p++) {
        *w++ = *p;
        if (*p == '{' && strncmp(p + 1, "\"jsonrpc\"", 9) == 0)
            *w++ = ' ';
    }
    *w = '\0';
    return out;
}

/* The usual shape, {"jsonrpc":"2.0","method":"M","params":P,"id":I}, has a
 * fast path of its own (jrpc_batch.c, request): each body here must get
 * exactly the reply of the same body with a space after its '{' (read by
 * the general loop), and each of its prefixes a parse error (read within
 * its bytes: the ASan build checks). */
static void test_usual_shape(void **state)
{
    (void)state;
    static const char *bodies[] = {
        "{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"params\":[1,2],\"id\":1}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"params\":[1,2],\"id\":\"a\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"params\":[1,2],\"id\": 7 }",
        "{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"params\":[1,2],\"id\":\n7}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"params\":[1,2]}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"params\":[1,2] }",
        "{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"params\":[1,2],\"id\":1,\"x\":0}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"params\":[1,2],\"id\":1,\"id\":2}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"params\":[1,2],\"params\":[3],\"id\":1}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"params\":3,\"id\":1}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"params\":null,\"id\":1}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"params\" :[1,2],\"id\":1}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"id\":1,\"params\":[1,2]}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"s\\u0075m\",\"params\":[1,2],\"id\":1}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":{\"a\":[1e400]},\"id\":1}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":[123456789012345678,1234567890123456789,"
        "12345678901234567890123,-0,0,0.5,1E2,9e-1,-17],\"id\":1}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":[007],\"id\":1}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":[1.],\"id\":1}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":[1,2],\"id\":[1]}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":[1,2],\"id\":null}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":[1,2],\"id\":tru}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\",\"params\":[],\"id\":1}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"rpc.x\",\"params\":[],\"id\":1}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"rpc.x\",\"params\":[]}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"nope\",\"params\":[],\"id\":1}",
        "[{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"params\":[1,2],\"id\":1},"
        "{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"params\":[3,4],\"id\":2},"
        "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":[5],\"id\":3},"
        "{\"jsonrpc\":\"2.0\",\"method\":\"s\\u0075m\",\"params\":[6,7],\"id\":4},"
        "{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"params\":[8],\"id\":5},"
        "{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"params\":3,\"id\":6},"
        "{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"params\":[9],\"id\":7}]",
    };
    jrpc_limits_t lim = JRPC_LIMITS_DEFAULT;
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        char *other = spaced(bodies[i]);
        req_t a, b;
        req_parse(&a, bodies[i]);
        req_parse(&b, other);
        serve(&a.b);
        serve(&b.b);
        const char *got = req_reply(&a), *want = req_reply(&b);
        if (strcmp(got, want) != 0)
            fail_msg("body %s\n got  %s\n want %s", bodies[i], got, want);
        assert_int_equal(a.b.ncalls, b.b.ncalls);
        for (uint32_t k = 0; k < a.b.ncalls; k++) {
            const jrpc_call_t *x = &a.b.calls[k], *y = &b.b.calls[k];
            assert_int_equal(x->method.n, y->method.n);
            assert_memory_equal(x->method.p, y->method.p, x->method.n);
            assert_int_equal(x->params_mp.n, y->params_mp.n);
            assert_memory_equal(x->params_mp.p, y->params_mp.p, x->params_mp.n);
            assert_int_equal(x->notification, y->notification);
        }
        req_dispose(&a);
        req_dispose(&b);
        free(other);
        for (size_t n = 1; n < strlen(bodies[i]); n++) {
            req_t t;
            req_parse_n(&t, bodies[i], n, &lim);
            static const char parse_error[] = "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32700,";
            if (strncmp(req_reply(&t), parse_error, sizeof parse_error - 1) != 0)
                fail_msg("prefix of %zu bytes of %s: %s", n, bodies[i], t.out.p);
            req_dispose(&t);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec_examples),
        cmocka_unit_test(test_calls),
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_envelope),
        cmocka_unit_test(test_member_spellings),
        cmocka_unit_test(test_reserved),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_params_round_trip),
        cmocka_unit_test(test_worker_answers),
        cmocka_unit_test(test_json_text_answers),
        cmocka_unit_test(test_params_text),
        cmocka_unit_test(test_params_hint),
        cmocka_unit_test(test_usual_shape),
        cmocka_unit_test(test_suite),
        cmocka_unit_test(test_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
