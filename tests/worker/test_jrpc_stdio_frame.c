/* Unit tests of jrpc-stdio's pure parts (worker/jrpc_stdio_frame.c,
 * compiled in): the NDJSON and LSP readers fed whole, one byte at a time
 * and in random pieces (the same messages must come out every way),
 * oversized and malformed messages skipped with the reader back in step,
 * the writer, and the classification of what a child says with the
 * bridge's id mapping (only plain decimal ids 1..2^63-1 are ours). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <cmocka.h>

#include "../../worker/jrpc_stdio_frame.c"

#define OUT_MAX 64

typedef struct got {
    char  *msg[OUT_MAX];  /* messages, NUL-terminated copies */
    int    n;
    int    toobig;        /* JRPC_FRAME_ETOOBIG seen */
    int    malformed;     /* JRPC_FRAME_EMALFORMED seen */
} got_t;

static void got_free(got_t *g)
{
    for (int i = 0; i < g->n; i++)
        free(g->msg[i]);
    memset(g, 0, sizeof *g);
}

static void drain(jrpc_frame_reader_t *r, got_t *g)
{
    jrpc_span_t m;
    int rc;
    while ((rc = jrpc_frame_next(r, &m)) != 0) {
        if (rc == JRPC_FRAME_ETOOBIG) {
            g->toobig++;
        } else if (rc == JRPC_FRAME_EMALFORMED) {
            g->malformed++;
        } else {
            assert_int_equal(rc, 1);
            assert_true(g->n < OUT_MAX);
            g->msg[g->n++] = strndup(m.p, m.n);
        }
    }
}

/* Feeds text in pieces: step 0 random sizes (seeded), else step bytes a
 * time. Each piece is copied to the end of a buffer of its own size, so an
 * over-read trips the sanitizer. */
static void feed(int mode, size_t max, const char *text, size_t len, size_t step, got_t *g)
{
    jrpc_frame_reader_t r;
    jrpc_frame_reader_init(&r, mode, max);
    size_t i = 0;
    while (i < len) {
        size_t k = step ? step : 1 + (size_t)(rand() % 97);
        if (k > len - i)
            k = len - i;
        char *piece = malloc(k);
        memcpy(piece, text + i, k);
        assert_int_equal(jrpc_frame_feed(&r, piece, k), 0);
        free(piece);
        drain(&r, g);
        i += k;
    }
    jrpc_frame_reader_dispose(&r);
}

/* Every way of cutting text gives the same messages, too-bigs and bad headers. */
static void check_all_ways(int mode, size_t max, const char *text, const char *const *want,
                           int nwant, int toobig, int malformed)
{
    size_t len = strlen(text);
    size_t steps[] = { SIZE_MAX, 1, 2, 3, 7, 0, 0, 0, 0, 0 };
    for (size_t s = 0; s < sizeof steps / sizeof *steps; s++) {
        got_t g = { 0 };
        feed(mode, max, text, len, steps[s] == SIZE_MAX ? len : steps[s], &g);
        assert_int_equal(g.n, nwant);
        for (int i = 0; i < nwant; i++)
            assert_string_equal(g.msg[i], want[i]);
        assert_int_equal(g.toobig, toobig);
        assert_int_equal(g.malformed, malformed);
        got_free(&g);
    }
}

static void test_ndjson_lines(void **state)
{
    (void)state;
    static const char *const want[] = { "{\"a\":1}", "{\"b\":2}", "x y", "[3]" };
    check_all_ways(JRPC_FRAME_NDJSON, 1024, "{\"a\":1}\n{\"b\":2}\r\n\n\r\nx y\n[3]\n", want, 4, 0, 0);
}

static void test_ndjson_partial_line_waits(void **state)
{
    (void)state;
    static const char *const want[] = { "one" };
    check_all_ways(JRPC_FRAME_NDJSON, 1024, "one\ntwo-without-end", want, 1, 0, 0);
}

static void test_ndjson_too_big_skipped(void **state)
{
    (void)state;
    /* max 16: a line of 40 bytes is skipped once, whether it arrives whole
     * or in pieces, and the lines around it come through. */
    static const char *const want[] = { "before", "after" };
    check_all_ways(JRPC_FRAME_NDJSON, 16,
                   "before\n0123456789012345678901234567890123456789\nafter\n", want, 2, 1, 0);
    static const char *const want2[] = { "exactly-16-bytes" };
    check_all_ways(JRPC_FRAME_NDJSON, 16, "exactly-16-bytes\n", want2, 1, 0, 0);
}

static void test_ndjson_crlf_at_the_limit(void **state)
{
    (void)state;
    /* max bytes then "\r\n" is a line of max bytes however the pipe cuts
     * it (before, a cut between '\r' and '\n' made it too big); max + 1
     * bytes and a '\r' are too big every way. */
    static const char *const want[] = { "exactly-16-bytes", "next" };
    check_all_ways(JRPC_FRAME_NDJSON, 16, "exactly-16-bytes\r\nnext\n", want, 2, 0, 0);
    static const char *const want2[] = { "next" };
    check_all_ways(JRPC_FRAME_NDJSON, 16, "exactly-17-bytes!\r\nnext\n", want2, 1, 1, 0);
    /* nothing fed yet: nothing to take */
    jrpc_frame_reader_t r;
    jrpc_span_t m;
    jrpc_frame_reader_init(&r, JRPC_FRAME_NDJSON, 16);
    assert_int_equal(jrpc_frame_next(&r, &m), 0);
    assert_int_equal(jrpc_frame_feed(&r, "", 0), 0);
    assert_int_equal(jrpc_frame_next(&r, &m), 0);
    jrpc_frame_reader_dispose(&r);
}

static void test_ndjson_holds_little_when_skipping(void **state)
{
    (void)state;
    jrpc_frame_reader_t r;
    jrpc_frame_reader_init(&r, JRPC_FRAME_NDJSON, 100);
    char chunk[1000];
    memset(chunk, 'x', sizeof chunk);
    got_t g = { 0 };
    for (int i = 0; i < 100; i++) {
        assert_int_equal(jrpc_frame_feed(&r, chunk, sizeof chunk), 0);
        drain(&r, &g);
        assert_true(r.buf.len - r.off <= 100 + sizeof chunk);
    }
    assert_int_equal(jrpc_frame_feed(&r, "\nok\n", 4), 0);
    drain(&r, &g);
    assert_int_equal(g.toobig, 1);
    assert_int_equal(g.n, 1);
    assert_string_equal(g.msg[0], "ok");
    got_free(&g);
    jrpc_frame_reader_dispose(&r);
}

static void test_lsp_messages(void **state)
{
    (void)state;
    static const char *const want[] = { "{\"a\":1}", "{\"b\":\"\\r\\n\"}", "[]" };
    check_all_ways(JRPC_FRAME_LSP, 1024,
                   "Content-Length: 7\r\n\r\n{\"a\":1}"
                   "Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n"
                   "content-length:12\r\n\r\n{\"b\":\"\\r\\n\"}"
                   "Content-Length: 0\r\n\r\n"
                   "CONTENT-LENGTH:   2  \r\n\r\n[]",
                   want, 3, 0, 0);
}

static void test_lsp_too_big_and_malformed(void **state)
{
    (void)state;
    static const char *const want[] = { "ok1", "ok2", "ok3" };
    check_all_ways(JRPC_FRAME_LSP, 8,
                   "Content-Length: 3\r\n\r\nok1"
                   "Content-Length: 20\r\n\r\n01234567890123456789"   /* too big: body skipped */
                   "Content-Length: 3\r\n\r\nok2"
                   "X-No-Length: 1\r\n\r\n"                           /* malformed: block skipped */
                   "Content-Length: 1x\r\n\r\n"                       /* malformed */
                   "Content-Length: 3\r\nContent-Length: 4\r\n\r\n"   /* two lengths: malformed */
                   "Content-Length: 3\r\n\r\nok3",
                   want, 3, 1, 3);
}

static void test_lsp_header_flood(void **state)
{
    (void)state;
    size_t n = JRPC_FRAME_HEADER_MAX * 3;
    char *text = malloc(n + 64);
    memset(text, 'h', n);
    strcpy(text + n, "\r\n\r\nContent-Length: 2\r\n\r\nok");
    got_t g = { 0 };
    feed(JRPC_FRAME_LSP, 1024, text, strlen(text), 1000, &g);
    /* The flood is dropped; the reader finds the next block. */
    assert_true(g.malformed >= 1);
    assert_int_equal(g.n, 1);
    assert_string_equal(g.msg[0], "ok");
    got_free(&g);
    free(text);
}

static void test_lsp_flood_same_every_way(void **state)
{
    (void)state;
    /* A header flood is dropped JRPC_FRAME_HEADER_MAX - 3 bytes at a time,
     * whatever the feeds were: the block after it in the same read is
     * found (before, the whole read was dropped with it). */
    char *text = malloc(9000 + 64);
    memset(text, 'h', 9000);
    strcpy(text + 9000, "\r\n\r\nContent-Length: 2\r\n\r\nok");
    static const char *const want[] = { "ok" };
    check_all_ways(JRPC_FRAME_LSP, 1024, text, want, 1, 0, 2);
    free(text);
    /* A header line ended by a bare '\n' keeps its last digit. */
    static const char *const want2[] = { "{\"a\":[1,2,3]}" };
    check_all_ways(JRPC_FRAME_LSP, 1024, "Content-Length: 13\nX: y\r\n\r\n{\"a\":[1,2,3]}",
                   want2, 1, 0, 0);
}

static void test_put_roundtrip(void **state)
{
    (void)state;
    for (int mode = JRPC_FRAME_NDJSON; mode <= JRPC_FRAME_LSP; mode++) {
        jrpc_buf_t out;
        jrpc_buf_init(&out);
        const char *msgs[] = { "{\"id\":1}", "{\"s\":\"é\"}", "[1,2,3]" };
        for (int i = 0; i < 3; i++)
            assert_int_equal(jrpc_frame_put(&out, mode, msgs[i], strlen(msgs[i])), 0);
        assert_int_equal(jrpc_buf_putc(&out, '\0'), 0);
        check_all_ways(mode, 1024, out.p, msgs, 3, 0, 0);
        jrpc_buf_dispose(&out);
    }
}

static void test_id_parse(void **state)
{
    (void)state;
    struct { const char *raw; bool ok; uint64_t id; } cases[] = {
        { "1", true, 1 }, { "17", true, 17 },
        { "9223372036854775807", true, 9223372036854775807ull },
        { "9223372036854775808", false, 0 }, { "99999999999999999999", false, 0 },
        { "0", false, 0 }, { "01", false, 0 }, { "-1", false, 0 }, { "1.0", false, 0 },
        { "1e1", false, 0 }, { "\"1\"", false, 0 }, { "null", false, 0 }, { "", false, 0 },
        { " 1", false, 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint64_t id = 0;
        jrpc_span_t raw = { cases[i].raw, strlen(cases[i].raw) };
        assert_int_equal(jrpc_child_id_parse(raw, &id), cases[i].ok);
        if (cases[i].ok)
            assert_int_equal(id, cases[i].id);
    }
}

static int kind(const char *s, jrpc_child_msg_t *m)
{
    /* at the end of a buffer of its own size */
    size_t n = strlen(s);
    char *p = malloc(n ? n : 1);
    memcpy(p, s, n);
    int k = jrpc_child_msg_parse(p, n, m);
    /* spans point into p: check what we need before freeing */
    static char copy[256];
    if (m->result.n)
        snprintf(copy, sizeof copy, "%.*s", (int)m->result.n, m->result.p);
    else if (m->error.n)
        snprintf(copy, sizeof copy, "%.*s", (int)m->error.n, m->error.p);
    else
        copy[0] = '\0';
    m->result.p = m->error.p = copy;
    m->id_raw = m->method = (jrpc_span_t){ NULL, 0 };
    free(p);
    return k;
}

static void test_child_messages(void **state)
{
    (void)state;
    jrpc_child_msg_t m;
    assert_int_equal(kind("{\"jsonrpc\":\"2.0\",\"id\":42,\"result\":{\"x\":[1]}}", &m), JRPC_CHILD_ANSWER);
    assert_int_equal(m.id, 42);
    assert_string_equal(m.result.p, "{\"x\":[1]}");
    assert_int_equal(kind("{\"id\":7,\"error\":{\"code\":-1,\"message\":\"m\"},\"jsonrpc\":\"2.0\"}", &m),
                     JRPC_CHILD_ANSWER);
    assert_int_equal(m.id, 7);
    assert_int_equal(m.result.n, 0);
    assert_string_equal(m.error.p, "{\"code\":-1,\"message\":\"m\"}");
    assert_int_equal(kind("{\"id\":7,\"result\":null}", &m), JRPC_CHILD_ANSWER);
    assert_int_equal(kind("{\"id\":7}", &m), JRPC_CHILD_BAD_ANSWER);
    assert_int_equal(kind("{\"id\":7,\"result\":1,\"error\":{}}", &m), JRPC_CHILD_BAD_ANSWER);
    assert_int_equal(kind("{\"id\":\"7\",\"result\":1}", &m), JRPC_CHILD_BAD_ID);
    assert_int_equal(kind("{\"id\":null,\"error\":{\"code\":-32700,\"message\":\"x\"}}", &m),
                     JRPC_CHILD_BAD_ID);
    assert_int_equal(kind("{\"id\":-3,\"result\":1}", &m), JRPC_CHILD_BAD_ID);
    assert_int_equal(kind("{\"result\":1}", &m), JRPC_CHILD_BAD_ID);
    assert_int_equal(kind("{\"jsonrpc\":\"2.0\",\"method\":\"roots/list\",\"id\":\"s1\"}", &m),
                     JRPC_CHILD_REQUEST);
    assert_int_equal(kind("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}", &m),
                     JRPC_CHILD_NOTIFICATION);
    assert_int_equal(kind("not json", &m), JRPC_CHILD_GARBAGE);
    assert_int_equal(kind("{\"id\":1,\"result\":1", &m), JRPC_CHILD_GARBAGE);
    assert_int_equal(kind("{\"id\":1,\"result\":1} trailing", &m), JRPC_CHILD_GARBAGE);
    assert_int_equal(kind("[{\"id\":1,\"result\":1}]", &m), JRPC_CHILD_GARBAGE);
    assert_int_equal(kind("42", &m), JRPC_CHILD_GARBAGE);
    assert_int_equal(kind("", &m), JRPC_CHILD_GARBAGE);
    assert_int_equal(kind("  {\"id\":3,\"result\":\"\\u00e9\"}  ", &m), JRPC_CHILD_ANSWER);
    assert_int_equal(m.id, 3);
}

int main(void)
{
    srand(13);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ndjson_lines),
        cmocka_unit_test(test_ndjson_partial_line_waits),
        cmocka_unit_test(test_ndjson_too_big_skipped),
        cmocka_unit_test(test_ndjson_crlf_at_the_limit),
        cmocka_unit_test(test_ndjson_holds_little_when_skipping),
        cmocka_unit_test(test_lsp_messages),
        cmocka_unit_test(test_lsp_too_big_and_malformed),
        cmocka_unit_test(test_lsp_header_flood),
        cmocka_unit_test(test_lsp_flood_same_every_way),
        cmocka_unit_test(test_put_roundtrip),
        cmocka_unit_test(test_id_parse),
        cmocka_unit_test(test_child_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
