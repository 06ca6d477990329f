/* Tests of broker/jrpc_status_page: the ring of the last refusals (newest
 * first, 16 kept of any number, reasons cut at a character boundary, the
 * broker's {"reason":...} data shown as its words), GET /status's JSON
 * (valid, every part present, with no broker), and the page hook's paths
 * (the built-in page, script and style with their types and a CSP; 404
 * for anything else). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "jrpc_broker.h"
#include "jrpc_json.h"
#include "jrpc_metrics.h"
#include "jrpc_status_page.h"

static const jrpc_status_page_info_t info = {
    .version = "9.9.9", .redis_mode = "redis",
    .listeners = { { "zmq", "tcp://127.0.0.1:5555", false }, { "http", "0.0.0.0:8080", true } },
    .nlisteners = 2,
};

/* The member path a.b of the JSON text p as its raw text, in buf. */
static const char *member(const char *p, size_t n, const char *a, const char *b, char *buf, size_t cap)
{
    jrpc_span_t v, w;
    assert_int_equal(jrpc_json_member(p, n, a, &v), 0);
    if (b) {
        assert_int_equal(jrpc_json_member(v.p, v.n, b, &w), 0);
        v = w;
    }
    snprintf(buf, cap, "%.*s", (int)v.n, v.p);
    return buf;
}

static jrpc_buf_t status(void)
{
    jrpc_buf_t out;
    jrpc_buf_init(&out);
    assert_int_equal(jrpc_status_page_write(&out, NULL, &info), 0);
    assert_int_equal(jrpc_json_validate(out.p, out.len, 8), 0);
    return out;
}

static void test_status_json(void **state)
{
    (void)state;
    jrpc_metrics_init();
    jrpc_status_page_refused_clear();
    jrpc_buf_t out = status();
    char buf[512];
    assert_string_equal(member(out.p, out.len, "version", NULL, buf, sizeof buf), "\"9.9.9\"");
    assert_string_equal(member(out.p, out.len, "listeners", NULL, buf, sizeof buf),
                        "[{\"name\":\"zmq\",\"endpoint\":\"tcp://127.0.0.1:5555\",\"tls\":false},"
                        "{\"name\":\"http\",\"endpoint\":\"0.0.0.0:8080\",\"tls\":true}]");
    assert_string_equal(member(out.p, out.len, "redis", "mode", buf, sizeof buf), "\"none\"");
    assert_string_equal(member(out.p, out.len, "replay", "fence", buf, sizeof buf),
                        "{\"active\":false,\"refuse_signed_to\":0,\"ends_at\":0,\"ends_in_s\":0}");
    assert_string_equal(member(out.p, out.len, "refusals", NULL, buf, sizeof buf), "[]");
    assert_string_equal(member(out.p, out.len, "latency", "count", buf, sizeof buf), "0");
    for (const char *k = "bodies_open\0calls_queued\0queued_bytes\0workers_connected\0uptime_ms\0"; *k;
         k += strlen(k) + 1)
        member(out.p, out.len, k, NULL, buf, sizeof buf);
    jrpc_buf_dispose(&out);
}

static void test_refusal_ring(void **state)
{
    (void)state;
    jrpc_metrics_init();
    jrpc_status_page_refused_clear();
    char reason[64];
    for (int i = 0; i < 20; i++) {
        snprintf(reason, sizeof reason, "{\"reason\":\"number %d\"}", i);
        jrpc_status_page_refused(JRPC_TRANSPORT_HTTP, JRPC_BODY_BUSY, -32000, reason);
    }
    jrpc_status_page_refused(JRPC_TRANSPORT_ZMQ, JRPC_BODY_INVALID, -32600, "plain <words> \"quoted\"");
    jrpc_status_page_refused(JRPC_TRANSPORT_WS, 99, -32002, NULL);   /* an unknown class: invalid */
    jrpc_buf_t out = status();
    char buf[8192];
    assert_string_equal(member(out.p, out.len, "refused_total", NULL, buf, sizeof buf), "22");
    member(out.p, out.len, "refusals", NULL, buf, sizeof buf);
    /* newest first, 16 kept: the two last, then numbers 19 down to 6 */
    const char *first = strstr(buf, "\"transport\":\"ws\",\"outcome\":\"invalid\",\"code\":-32002");
    const char *second = strstr(buf, "\"reason\":\"plain <words> \\\"quoted\\\"\"");
    const char *n19 = strstr(buf, "\"reason\":\"number 19\"");
    const char *n6 = strstr(buf, "\"reason\":\"number 6\"");
    assert_non_null(first);
    assert_non_null(second);
    assert_non_null(n19);
    assert_non_null(n6);
    assert_true(first < second && second < n19 && n19 < n6);
    assert_null(strstr(buf, "\"number 5\""));
    assert_non_null(strstr(buf, "\"outcome\":\"busy\",\"code\":-32000,\"message\":\"Server busy\""));
    jrpc_buf_dispose(&out);
}

/* A reason longer than the slot is cut before a character, never inside. */
static void test_refusal_cut(void **state)
{
    (void)state;
    jrpc_status_page_refused_clear();
    char reason[JRPC_STATUS_REASON_MAX + 8];
    memset(reason, 'a', JRPC_STATUS_REASON_MAX - 1);
    memcpy(reason + JRPC_STATUS_REASON_MAX - 1, "\xc3\xa9\xc3\xa9", 5);   /* é straddles the cut */
    jrpc_status_page_refused(JRPC_TRANSPORT_HTTP, JRPC_BODY_INVALID, -32600, reason);
    jrpc_buf_t out = status();   /* validates: the cut is valid UTF-8 */
    char buf[1024], want[JRPC_STATUS_REASON_MAX + 16];
    member(out.p, out.len, "refusals", NULL, buf, sizeof buf);
    snprintf(want, sizeof want, "\"reason\":\"%.*s\"}", JRPC_STATUS_REASON_MAX - 1, reason);
    assert_non_null(strstr(buf, want));
    jrpc_buf_dispose(&out);
}

static void test_page_paths(void **state)
{
    (void)state;
    jrpc_buf_t out;
    jrpc_buf_init(&out);
    const char *ct = NULL, *more = NULL;
    assert_int_equal(jrpc_status_page_serve(NULL, &info, "/", 1, &out, &ct, &more), 0);
    assert_string_equal(ct, "text/html; charset=utf-8");
    assert_non_null(strstr(more, "Content-Security-Policy: default-src 'none'; script-src 'self';"));
    assert_true(out.len > 100 && memcmp(out.p, "<!doctype html>", 15) == 0);
    /* no inline script or style: the CSP allows only these files */
    assert_non_null(memmem(out.p, out.len, "<script src=\"/status.js\" defer></script>", 40));
    assert_null(memmem(out.p, out.len, "<script>", 8));
    assert_null(memmem(out.p, out.len, "<style", 6));
    assert_null(memmem(out.p, out.len, "style=", 6));
    assert_null(memmem(out.p, out.len, "http", 4));   /* no external asset */
    jrpc_buf_reset(&out);
    assert_int_equal(jrpc_status_page_serve(NULL, &info, "/status.js", 10, &out, &ct, &more), 0);
    assert_string_equal(ct, "text/javascript; charset=utf-8");
    assert_null(memmem(out.p, out.len, "innerHTML", 9));   /* names go in as text */
    jrpc_buf_reset(&out);
    assert_int_equal(jrpc_status_page_serve(NULL, &info, "/status.css", 11, &out, &ct, &more), 0);
    assert_string_equal(ct, "text/css; charset=utf-8");
    jrpc_buf_reset(&out);
    assert_int_equal(jrpc_status_page_serve(NULL, &info, "/status", 7, &out, &ct, &more), 0);
    assert_string_equal(ct, "application/json; charset=utf-8");
    assert_int_equal(jrpc_json_validate(out.p, out.len, 8), 0);
    jrpc_buf_reset(&out);
    assert_int_equal(jrpc_status_page_serve(NULL, &info, "/index.html", 11, &out, &ct, &more), -ENOENT);
    assert_int_equal(jrpc_status_page_serve(NULL, &info, "/status/", 8, &out, &ct, &more), -ENOENT);
    assert_int_equal(jrpc_status_page_serve(NULL, &info, "/status/workers", 15, &out, &ct, &more), -ENOENT);
    assert_int_equal(out.len, 0);
    jrpc_buf_dispose(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_json),
        cmocka_unit_test(test_refusal_ring),
        cmocka_unit_test(test_refusal_cut),
        cmocka_unit_test(test_page_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
