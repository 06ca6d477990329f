/* Tests for jrpc_metrics: histogram buckets (edges, +Inf, _sum, _count),
 * label escaping, the answer classification of a reply, and the page. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "jrpc_batch.h"
#include "jrpc_errors.h"
#include "jrpc_metrics.h"

static char *text(jrpc_buf_t *b)
{
    jrpc_buf_putc(b, '\0');
    b->len--;
    return b->p;
}

static void test_batch_buckets_edges(void **state)
{
    (void)state;
    jrpc_hist_t h;
    jrpc_hist_init_batch(&h);
    jrpc_hist_observe(&h, 1);      /* on the edge: le="1" */
    jrpc_hist_observe(&h, 2);      /* le="2" */
    jrpc_hist_observe(&h, 3);      /* le="5" */
    jrpc_hist_observe(&h, 1000);   /* le="1000" */
    jrpc_hist_observe(&h, 1001);   /* +Inf only */
    jrpc_hist_observe_n(&h, 7, 3); /* le="10", three times */
    jrpc_buf_t out;
    jrpc_buf_init(&out);
    assert_int_equal(jrpc_expo_hist(&out, "x", "help.", &h), 0);
    const char *want =
        "# HELP x help.\n# TYPE x histogram\n"
        "x_bucket{le=\"1\"} 1\n"
        "x_bucket{le=\"2\"} 2\n"
        "x_bucket{le=\"5\"} 3\n"
        "x_bucket{le=\"10\"} 6\n"
        "x_bucket{le=\"20\"} 6\n"
        "x_bucket{le=\"50\"} 6\n"
        "x_bucket{le=\"100\"} 6\n"
        "x_bucket{le=\"200\"} 6\n"
        "x_bucket{le=\"500\"} 6\n"
        "x_bucket{le=\"1000\"} 7\n"
        "x_bucket{le=\"+Inf\"} 8\n"
        "x_sum 2028\n"
        "x_count 8\n";
    assert_string_equal(text(&out), want);
    jrpc_buf_dispose(&out);
}

/* The last bucket remembered (observe_n's shortcut) never puts a value in
 * another bucket than the search would: runs of one value, values on
 * every edge and either side of it, 0 and the largest, in an order that
 * jumps between buckets, against a plain search, for both kinds. */
static void test_buckets_memo(void **state)
{
    (void)state;
    for (int kind = 0; kind < 2; kind++) {
        jrpc_hist_t h;
        if (kind == 0)
            jrpc_hist_init_batch(&h);
        else
            jrpc_hist_init_seconds(&h);
        uint64_t want[JRPC_HIST_MAX + 1] = { 0 };
        uint64_t vals[3 * JRPC_HIST_MAX + 4];
        size_t nv = 0;
        for (uint32_t b = 0; b < h.nb; b++) {
            vals[nv++] = h.bounds[b] - 1;
            vals[nv++] = h.bounds[b];
            vals[nv++] = h.bounds[b] + 1;
        }
        vals[nv++] = 0;
        vals[nv++] = UINT64_MAX / 4;
        unsigned x = 12345;
        for (int k = 0; k < 20000; k++) {
            x = x * 1103515245u + 12345u;
            uint64_t v = vals[(x >> 8) % nv];
            uint64_t n = 1 + (x >> 24) % 3;   /* a run: the same value again */
            for (uint64_t r = 0; r < n; r++) {
                uint32_t i = 0;
                while (i < h.nb && v > h.bounds[i])
                    i++;
                want[i]++;
                jrpc_hist_observe(&h, v);
            }
        }
        for (uint32_t i = 0; i <= h.nb; i++)
            assert_int_equal(h.counts[i], want[i]);
    }
}

static void test_seconds_buckets(void **state)
{
    (void)state;
    jrpc_hist_t h;
    jrpc_hist_init_seconds(&h);
    assert_int_equal(h.nb, 17);
    jrpc_hist_observe(&h, 0);             /* le="0.0001" */
    jrpc_hist_observe(&h, 100000);        /* 100 us: on the first edge */
    jrpc_hist_observe(&h, 100001);        /* just past: le="0.00025" */
    jrpc_hist_observe(&h, 30000000000ull); /* 30 s: the last finite edge */
    jrpc_hist_observe(&h, 30000000001ull); /* +Inf */
    jrpc_buf_t out;
    jrpc_buf_init(&out);
    assert_int_equal(jrpc_expo_hist(&out, "s", "h", &h), 0);
    const char *t = text(&out);
    assert_non_null(strstr(t, "s_bucket{le=\"0.0001\"} 2\n"));
    assert_non_null(strstr(t, "s_bucket{le=\"0.00025\"} 3\n"));
    assert_non_null(strstr(t, "s_bucket{le=\"10\"} 3\n"));
    assert_non_null(strstr(t, "s_bucket{le=\"30\"} 4\n"));
    assert_non_null(strstr(t, "s_bucket{le=\"+Inf\"} 5\n"));
    assert_non_null(strstr(t, "s_count 5\n"));
    /* (0 + 100000 + 100001 + 30e9 + 30e9+1) ns */
    assert_non_null(strstr(t, "s_sum 60.000200002\n"));
    jrpc_buf_dispose(&out);
}

static void test_label_escaping(void **state)
{
    (void)state;
    jrpc_buf_t out;
    jrpc_buf_init(&out);
    const char *lab[4] = { "worker", "a\"b\\c\nd", "x", "" };
    assert_int_equal(jrpc_expo_sample(&out, "m", lab, 2, 3), 0);
    assert_string_equal(text(&out), "m{worker=\"a\\\"b\\\\c\\nd\",x=\"\"} 3\n");
    jrpc_buf_reset(&out);
    assert_int_equal(jrpc_expo_sample(&out, "m", NULL, 0, 0.5), 0);
    assert_string_equal(text(&out), "m 0.5\n");
    jrpc_buf_reset(&out);
    assert_int_equal(jrpc_expo_family(&out, "m", "counter", "What m counts."), 0);
    assert_string_equal(text(&out), "# HELP m What m counts.\n# TYPE m counter\n");
    jrpc_buf_dispose(&out);
}

static uint64_t errors_of(int code)
{
    for (uint32_t i = 0; i < jrpc_metrics.ncodes; i++)
        if (jrpc_metrics.codes[i] == code)
            return jrpc_metrics.code_n[i];
    return 0;
}

static void parse(jrpc_batch_t *b, const char *body)
{
    jrpc_batch_init(b);
    jrpc_limits_t lim = JRPC_LIMITS_DEFAULT;
    assert_int_equal(jrpc_batch_parse(b, body, strlen(body), &lim), 0);
}

static void test_reply_counts(void **state)
{
    (void)state;
    memset(&jrpc_metrics, 0, sizeof jrpc_metrics);
    jrpc_metrics_init();
    /* three calls, a notification and an invalid element */
    jrpc_batch_t b;
    parse(&b, "[{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"id\":1},"
              "{\"jsonrpc\":\"2.0\",\"method\":\"b\",\"id\":2},"
              "{\"jsonrpc\":\"2.0\",\"method\":\"c\"},"
              "{\"jsonrpc\":\"2.0\",\"method\":\"d\",\"id\":3},"
              "{\"id\":4}]");
    msgpack_object one = { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = 1 };
    assert_int_equal(jrpc_batch_answer_result(&b, 0, &one), 0);
    assert_int_equal(jrpc_batch_answer_result(&b, 1, &one), 0);
    assert_int_equal(jrpc_batch_answer_error(&b, 3, JRPC_METHOD_NOT_FOUND, NULL), 0);
    jrpc_metrics.now = 5000;
    jrpc_metrics_reply(1, &b, NULL, 2000);
    assert_int_equal(jrpc_metrics.calls[1][0], 2);
    assert_int_equal(jrpc_metrics.calls[1][1], 2);
    assert_int_equal(errors_of(-32601), 1);
    assert_int_equal(errors_of(-32600), 1);
    assert_int_equal(jrpc_metrics.bodies[1][JRPC_BODY_OK], 1);
    assert_int_equal(jrpc_metrics.total.counts[0], 4);   /* 3 us, four answers */
    assert_int_equal(jrpc_metrics.total.sum, 4 * 3000);
    jrpc_batch_dispose(&b);

    /* a body that is not JSON: invalid, -32700 */
    parse(&b, "[1,");
    jrpc_metrics_reply(0, &b, NULL, 0);
    assert_int_equal(jrpc_metrics.bodies[0][JRPC_BODY_INVALID], 1);
    assert_int_equal(errors_of(-32700), 1);
    jrpc_batch_dispose(&b);

    /* only notifications: ok, no answers */
    parse(&b, "{\"jsonrpc\":\"2.0\",\"method\":\"n\"}");
    jrpc_metrics_reply(0, &b, NULL, 0);
    assert_int_equal(jrpc_metrics.bodies[0][JRPC_BODY_OK], 1);
    assert_int_equal(jrpc_metrics.calls[0][0] + jrpc_metrics.calls[0][1], 1);
    jrpc_batch_dispose(&b);

    /* refusals */
    jrpc_metrics_body_refused(1, JRPC_BODY_REPLAYED, JRPC_REPLAYED, 5000);
    assert_int_equal(jrpc_metrics.bodies[1][JRPC_BODY_REPLAYED], 1);
    assert_int_equal(errors_of(-32005), 1);
    /* busy is the broker's own refusal now (one path, counted once there);
     * what a front refuses before the broker is invalid */
    jrpc_metrics_front_refused(1, JRPC_INVALID_REQUEST);
    assert_int_equal(jrpc_metrics.bodies[1][JRPC_BODY_INVALID], 1);
    assert_int_equal(errors_of(-32000), 0);
}

static void test_error_code_table_bounded(void **state)
{
    (void)state;
    memset(&jrpc_metrics, 0, sizeof jrpc_metrics);
    jrpc_metrics_init();
    for (int i = 0; i < JRPC_METRICS_CODES + 10; i++)
        jrpc_metrics_error(1000 + i);
    jrpc_metrics_error(1000);
    assert_int_equal(jrpc_metrics.ncodes, JRPC_METRICS_CODES);
    assert_int_equal(jrpc_metrics.code_other, 10);
    assert_int_equal(errors_of(1000), 2);
}

static void emit_two(void *src, jrpc_metrics_credit_fn emit, void *arg)
{
    emit(arg, "w\"1", 5);
    emit(arg, "0a0b", 0);
}

static const char *const families[] = {
    "jrpc_build_info gauge", "jrpc_bodies_total counter", "jrpc_calls_total counter",
    "jrpc_errors_total counter", "jrpc_batch_size histogram", "jrpc_call_queue_seconds histogram",
    "jrpc_call_worker_seconds histogram", "jrpc_call_seconds histogram", "jrpc_bodies_open gauge",
    "jrpc_calls_inflight gauge", "jrpc_calls_queued gauge", "jrpc_workers_connected gauge",
    "jrpc_worker_credit gauge", "jrpc_redis_up gauge", "jrpc_redis_rtt_seconds histogram",
    "jrpc_redis_failures_total counter", "jrpc_replays_total counter",
    "jrpc_signature_failures_total counter", "jrpc_acl_denied_total counter",
    "jrpc_late_answers_total counter", "jrpc_redispatched_total counter",
    "jrpc_calls_lost_total counter", "jrpc_worker_frames_malformed_total counter",
    "jrpc_http_connections gauge", "jrpc_ws_connections gauge", "jrpc_ws_closes_total counter",
    "jrpc_tls_handshakes_total counter", "jrpc_tls_failures_total counter",
    "jrpc_reloads_total counter", "jrpc_reload_last_success_timestamp_seconds gauge",
};

static void test_page(void **state)
{
    (void)state;
    memset(&jrpc_metrics, 0, sizeof jrpc_metrics);
    jrpc_metrics_init();
    jrpc_metrics.http_connections = 3;
    jrpc_metrics_read_t rd = { .bodies_open = 11, .calls_inflight = 12, .calls_queued = 13,
                               .workers_connected = 2, .redis_up = 1, .redis_failures = 14,
                               .replays = 15, .signature_failures = 16, .acl_denied = 17,
                               .late_answers = 18, .redispatched = 19, .calls_lost = 20,
                               .frames_malformed = 21, .each_credit = emit_two };
    jrpc_buf_t out;
    jrpc_buf_init(&out);
    assert_int_equal(jrpc_metrics_write(&out, &rd), 0);
    const char *t = text(&out);
    char line[128];
    size_t nf = sizeof families / sizeof families[0];
    assert_int_equal(nf, 30);
    for (size_t i = 0; i < nf; i++) {
        snprintf(line, sizeof line, "\n# TYPE %s\n", families[i]);
        if (i == 0)
            snprintf(line, sizeof line, "# TYPE %s\n", families[i]);
        assert_non_null(strstr(t, line));
    }
    const char *samples[] = {
        "jrpc_build_info{version=\"" JRPC_VERSION "\"} 1\n",
        "\njrpc_bodies_total{transport=\"zmq\",outcome=\"cancelled\"} 0\n",
        "\njrpc_calls_total{transport=\"http\",outcome=\"error\"} 0\n",
        "\njrpc_bodies_total{transport=\"ws\",outcome=\"ok\"} 0\n",
        "\njrpc_calls_total{transport=\"ws\",outcome=\"result\"} 0\n",
        "\njrpc_ws_closes_total{code=\"1008\"} 0\n", "\njrpc_ws_connections 0\n",
        "\njrpc_bodies_open 11\n", "\njrpc_calls_inflight 12\n", "\njrpc_calls_queued 13\n",
        "\njrpc_workers_connected 2\n", "\njrpc_worker_credit{worker=\"w\\\"1\"} 5\n",
        "\njrpc_worker_credit{worker=\"0a0b\"} 0\n", "\njrpc_redis_up 1\n",
        "\njrpc_redis_failures_total 14\n", "\njrpc_replays_total 15\n",
        "\njrpc_signature_failures_total 16\n", "\njrpc_acl_denied_total 17\n",
        "\njrpc_late_answers_total 18\n", "\njrpc_redispatched_total 19\n",
        "\njrpc_calls_lost_total 20\n", "\njrpc_worker_frames_malformed_total 21\n",
        "\njrpc_http_connections 3\n", "\njrpc_call_seconds_bucket{le=\"+Inf\"} 0\n",
    };
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        if (strstr(t, samples[i]) == NULL)
            fail_msg("missing %s", samples[i]);
    }
    assert_int_equal(t[out.len - 1], '\n');
    jrpc_buf_dispose(&out);
}

/* Issue 33: per-method records found once by name, bounded (the rest:
 * record 0, "other"), their families on the page with the method label
 * escaped, and the quantile estimate the status page shows. Last: the
 * records it makes live as long as the process. */
static void test_methods(void **state)
{
    (void)state;
    memset(&jrpc_metrics, 0, sizeof jrpc_metrics);
    jrpc_metrics_init();
    jrpc_metrics_set_max_methods(2);
    uint32_t a = jrpc_metrics_method_id("", "add", 3);
    uint32_t q = jrpc_metrics_method_id(NULL, "q\"\\\n", 4);
    assert_int_not_equal(a, JRPC_METRICS_OTHER);
    assert_int_not_equal(q, JRPC_METRICS_OTHER);
    assert_int_not_equal(a, q);
    assert_int_equal(jrpc_metrics_method_id("", "add", 3), a);       /* found, not made */
    assert_int_equal(jrpc_metrics_method_id("", "sub", 3), JRPC_METRICS_OTHER);  /* bound */
    assert_int_equal(jrpc_metrics_method_id("svc", "add", 3), JRPC_METRICS_OTHER);
    jrpc_metrics_set_max_methods(100);   /* too late: records exist */
    assert_int_equal(jrpc_metrics.max_meth, 2);

    jrpc_metrics_call(a, JRPC_CALL_OK, 0, 3000000);
    jrpc_metrics_call(a, JRPC_CALL_ERROR, -32602, 3000000);
    jrpc_metrics_call(a, jrpc_metrics_outcome_of(JRPC_TIMEOUT), JRPC_TIMEOUT, 400000000);
    jrpc_metrics_call(JRPC_METRICS_OTHER, jrpc_metrics_outcome_of(JRPC_METHOD_NOT_FOUND),
                      JRPC_METHOD_NOT_FOUND, 1000);
    for (int code = 1; code <= JRPC_METRICS_METHOD_CODES + 2; code++)   /* 10 codes */
        jrpc_metrics_call(q, JRPC_CALL_ERROR, code, 1000);
    jrpc_hist_observe(&jrpc_metrics.meth[a].worker, 2000000);
    /* a body's answers counted at its reply, by their tags: an ok, the
     * worker's -32602, the broker's -32003 (all add), a -32601 (other), a
     * notification and a call the parser refused (not counted per method) */
    jrpc_batch_t b;
    parse(&b, "[{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"id\":1},"
              "{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"id\":2},"
              "{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"id\":3},"
              "{\"jsonrpc\":\"2.0\",\"method\":\"nope\",\"id\":4},"
              "{\"jsonrpc\":\"2.0\",\"method\":\"add\"},{\"id\":5}]");
    msgpack_object one = { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = 1 };
    assert_int_equal(jrpc_batch_answer_result(&b, 0, &one), 0);
    assert_int_equal(jrpc_batch_answer_error(&b, 1, JRPC_INVALID_PARAMS, NULL), 0);
    assert_int_equal(jrpc_batch_answer_error(&b, 2, JRPC_TIMEOUT, NULL), 0);
    assert_int_equal(jrpc_batch_answer_error(&b, 3, JRPC_METHOD_NOT_FOUND, NULL), 0);
    const uint32_t tags[6] = { a, a | JRPC_METRICS_WORKER_ERROR, a, JRPC_METRICS_OTHER, a,
                               JRPC_METRICS_NONE };
    jrpc_metrics.now = 10000000;
    jrpc_metrics_reply(1, &b, tags, 7000000);   /* 3 ms */
    jrpc_batch_dispose(&b);

    jrpc_buf_t out;
    jrpc_buf_init(&out);
    jrpc_metrics_read_t rd = { 0 };
    assert_int_equal(jrpc_metrics_write(&out, &rd), 0);
    const char *t = text(&out);
    assert_non_null(strstr(t, "jrpc_method_calls_total{service=\"\",method=\"add\",outcome=\"ok\"} 2\n"));
    assert_non_null(strstr(t, "jrpc_method_calls_total{service=\"\",method=\"add\",outcome=\"error\"} 2\n"));
    assert_non_null(strstr(t, "jrpc_method_calls_total{service=\"\",method=\"add\",outcome=\"timeout\"} 2\n"));
    assert_non_null(strstr(t, "jrpc_method_calls_total{service=\"\",method=\"other\",outcome=\"not_found\"} 2\n"));
    assert_non_null(strstr(t, "jrpc_method_errors_total{service=\"\",method=\"add\",code=\"-32602\"} 2\n"));
    assert_non_null(strstr(t, "jrpc_method_errors_total{service=\"\",method=\"add\",code=\"-32003\"} 2\n"));
    assert_non_null(strstr(t, "jrpc_method_errors_total{service=\"\",method=\"q\\\"\\\\\\n\",code=\"other\"} 2\n"));
    assert_non_null(strstr(t, "jrpc_method_worker_seconds_bucket{service=\"\",method=\"add\",le=\"0.0025\"} 1\n"));
    assert_non_null(strstr(t, "jrpc_method_call_seconds_count{service=\"\",method=\"add\"} 6\n"));
    assert_non_null(strstr(t, "jrpc_method_call_seconds_bucket{service=\"\",method=\"add\",le=\"0.25\"} 5\n"));
    assert_non_null(strstr(t, "# TYPE jrpc_worker_last_heard_timestamp_seconds gauge\n"));
    assert_null(strstr(t, "method=\"sub\""));
    jrpc_buf_dispose(&out);

    /* quantiles: 5 of 6 in (2.5 ms, 5 ms], 1 in (250 ms, 500 ms] */
    const jrpc_hist_t *h = &jrpc_metrics.meth[a].total;
    assert_true(jrpc_hist_quantile(h, 0.5) > 0.0025 && jrpc_hist_quantile(h, 0.5) <= 0.005);
    assert_true(jrpc_hist_quantile(h, 0.99) > 0.25 && jrpc_hist_quantile(h, 0.99) <= 0.5);
    jrpc_hist_t empty;
    jrpc_hist_init_seconds(&empty);
    assert_true(jrpc_hist_quantile(&empty, 0.5) == 0);
    jrpc_hist_observe(&empty, 60ull * 1000000000);   /* past the last bound: 30 s */
    assert_true(jrpc_hist_quantile(&empty, 0.99) > 29.999 && jrpc_hist_quantile(&empty, 0.99) < 30.001);
}

/* hist h's observations (its _count) */
static uint64_t hist_count(const jrpc_hist_t *h)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i <= h->nb; i++)
        n += h->counts[i];
    return n;
}

/* A body's answers are counted per method by runs of one record
 * (jrpc_metrics_reply): interleaved runs A,A,B,A,B,B with errors inside
 * them (the worker's own, one the broker made), a notification and a call
 * not counted per method between them count every call in its own record,
 * exactly. Counts are read as differences: the records live as long as the
 * process (after test_methods, or made here when run alone). */
static void test_reply_runs_exact(void **state)
{
    (void)state;
    if (jrpc_metrics.meth == NULL)
        jrpc_metrics_init();
    uint32_t a = jrpc_metrics_method_id("", "add", 3);
    uint32_t q = jrpc_metrics_method_id(NULL, "q\"\\\n", 4);
    assert_int_not_equal(a, q);
    jrpc_metrics_method_t *ra = &jrpc_metrics.meth[a], *rq = &jrpc_metrics.meth[q];
    uint64_t a_ok = ra->calls[JRPC_CALL_OK], a_err = ra->calls[JRPC_CALL_ERROR];
    uint64_t q_ok = rq->calls[JRPC_CALL_OK], q_to = rq->calls[JRPC_CALL_TIMEOUT];
    uint64_t a_n = hist_count(&ra->total), q_n = hist_count(&rq->total);
    uint64_t ok0 = jrpc_metrics.calls[0][0], err0 = jrpc_metrics.calls[0][1];
    jrpc_batch_t b;
    parse(&b, "[{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"id\":1},"
              "{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"id\":2},"
              "{\"jsonrpc\":\"2.0\",\"method\":\"q\",\"id\":3},"
              "{\"jsonrpc\":\"2.0\",\"method\":\"add\"},"
              "{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"id\":4},"
              "{\"id\":5},"
              "{\"jsonrpc\":\"2.0\",\"method\":\"q\",\"id\":6},"
              "{\"jsonrpc\":\"2.0\",\"method\":\"q\",\"id\":7}]");
    msgpack_object one = { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = 1 };
    assert_int_equal(jrpc_batch_answer_result(&b, 0, &one), 0);
    assert_int_equal(jrpc_batch_answer_result(&b, 1, &one), 0);
    assert_int_equal(jrpc_batch_answer_result(&b, 2, &one), 0);
    assert_int_equal(jrpc_batch_answer_error(&b, 4, JRPC_INVALID_PARAMS, NULL), 0);
    assert_int_equal(jrpc_batch_answer_error(&b, 6, JRPC_TIMEOUT, NULL), 0);
    assert_int_equal(jrpc_batch_answer_result(&b, 7, &one), 0);
    /* A, A, B, (notification), A (the worker's error), (refused: none), B (timeout), B */
    const uint32_t tags[8] = { a, a, q, a, a | JRPC_METRICS_WORKER_ERROR, JRPC_METRICS_NONE, q, q };
    jrpc_metrics.now = 10000000;
    jrpc_metrics_reply(0, &b, tags, 7000000);
    jrpc_batch_dispose(&b);
    assert_int_equal(ra->calls[JRPC_CALL_OK] - a_ok, 2);
    assert_int_equal(ra->calls[JRPC_CALL_ERROR] - a_err, 1);
    assert_int_equal(rq->calls[JRPC_CALL_OK] - q_ok, 2);
    assert_int_equal(rq->calls[JRPC_CALL_TIMEOUT] - q_to, 1);
    assert_int_equal(hist_count(&ra->total) - a_n, 3);
    assert_int_equal(hist_count(&rq->total) - q_n, 3);
    assert_int_equal(jrpc_metrics.calls[0][0] - ok0, 4);    /* 4 results */
    assert_int_equal(jrpc_metrics.calls[0][1] - err0, 3);   /* the two errors and the refused call */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_buckets_edges),
        cmocka_unit_test(test_seconds_buckets),
        cmocka_unit_test(test_buckets_memo),
        cmocka_unit_test(test_label_escaping),
        cmocka_unit_test(test_reply_counts),
        cmocka_unit_test(test_error_code_table_bounded),
        cmocka_unit_test(test_page),
        cmocka_unit_test(test_methods),
        cmocka_unit_test(test_reply_runs_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
