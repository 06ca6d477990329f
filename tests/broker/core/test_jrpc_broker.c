/* Unit tests of the broker core (broker/core/jrpc_broker.c and the other
 * files of its module, compiled in to read a body's call outcomes while its
 * reply is delivered): outcomes as data,
 * refusals through the reply callback, deadlines, partial batches, cancel,
 * readiness and the counters.
 *
 * No network: the broker's worker ROUTER is bound on inproc://, and the test
 * plays a worker with a DEALER in the same thread (READY, then RESPONSEs
 * for the REQUESTs it reads), driving the loop with UV_RUN_NOWAIT. Waits are
 * bounded by generous limits and assert outcomes, never speeds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <unistd.h>
#include <cmocka.h>
#include <zmq.h>

#include "../../../broker/core/jrpc_broker.c"
#include "../../../broker/core/jrpc_gather.c"
#include "../../../broker/core/jrpc_admit.c"
#include "../../../broker/core/jrpc_idem.c"
#include "../../../broker/core/jrpc_queued.c"
#include "../../../broker/core/jrpc_conn_auth.c"
#include "../../../broker/core/jrpc_mcp.c"
#include "../broker_env.h"
#include "jrpc_sign.h"
#include "jrpc_wire.h"

#define MAX_SEEN 16

static struct {
    uv_loop_t      loop;
    void          *zctx, *dealer;
    jrpc_broker_t *b;
    jrpc_body_t   *handle;       /* of the body submitted last */
    unsigned       replies;      /* reply callbacks */
    jrpc_outcome_t out;          /* of the last reply */
    char           text[1024];   /* the last reply */
    size_t         len;
    int            codes[8];     /* the last reply's call outcomes (error: code, else 1) */
    uint32_t       ncodes;
    char           whole[2048];  /* the last kept body's unstreamed reply, rendered at its end */
    jrpc_seq_t     seq[MAX_SEEN];/* REQUEST items the worker received, in order */
    char           method[MAX_SEEN][16];
    uint32_t       nseen;
} G;

static int nep;   /* endpoints made: inproc names are never reused */

static void on_reply(void *ctx, jrpc_outcome_t out, const char *reply, size_t len)
{
    (void)ctx;
    G.replies++;
    G.out = out;
    assert_true(len < sizeof G.text);
    if (len)   /* (an empty reply may be NULL) */
        memcpy(G.text, reply, len);
    G.text[len] = '\0';
    G.len = len;
    /* A body the broker kept: its calls' outcomes, read as data. */
    G.ncodes = 0;
    bbatch_t *x = G.handle;
    if (x && out.cls <= JRPC_BODY_INVALID)
        for (uint32_t i = 0; i < x->req.ncalls && i < 8; i++)
            G.codes[G.ncodes++] = x->req.calls[i].notification ? 0
                                  : x->req.calls[i].error ? x->req.calls[i].code : 1;
    G.whole[0] = '\0';
    if (x && out.cls <= JRPC_BODY_INVALID) {
        jrpc_buf_t w;
        jrpc_buf_init(&w);
        assert_int_equal(jrpc_batch_write_reply(&x->req, &w), 0);
        assert_true(w.len < sizeof G.whole);
        if (w.len)
            memcpy(G.whole, w.p, w.len);
        G.whole[w.len] = '\0';
        jrpc_buf_dispose(&w);
    }
}

static jrpc_broker_t *broker_make(uint32_t max_open, const jrpc_keys_t *keys)
{
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://test-broker-%d", ++nep);
    jrpc_broker_opts_t o = {
        .limits = JRPC_LIMITS_DEFAULT, .timeout_ms = 10000, .max_open = max_open,
        .workers = { .endpoint = ep, .zmq_ctx = G.zctx, .max_queue = 100, .heartbeat_ms = 1000,
                     .liveness = 3, .max_redispatch = 3 },
        .keys = keys, .skew_s = 300,
        .replay = { .url = "redis://127.0.0.1:1", .window_s = 300, .timeout_ms = 1000 },
        .access_log = true,
    };
    jrpc_broker_t *b = jrpc_broker_new(&G.loop, &o);
    assert_non_null(b);
    G.dealer = zmq_socket(G.zctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(G.dealer, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(G.dealer, ZMQ_ROUTING_ID, "W", 1);
    assert_int_equal(zmq_connect(G.dealer, ep), 0);
    return b;
}

static void broker_free(void)
{
    jrpc_broker_destroy(&G.b);
    uv_run(&G.loop, UV_RUN_DEFAULT);   /* the close callbacks */
    zmq_close(G.dealer);
    G.dealer = NULL;
}

static int setup(void **state)
{
    (void)state;
    memset(&G, 0, sizeof G);
    broker_env_open(&G.loop, &G.zctx);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (G.b)
        broker_free();
    broker_env_close(&G.loop, G.zctx);
    return 0;
}

#include "../fake_worker.h"

static bool ready_but_redis(void) { return jrpc_broker_ready(G.b, "add", NULL) == JRPC_BROKER_EREDIS; }

/* READY for add and slow; waits until the broker routes to it. */
static void worker_ready(void)
{
    static const char *const methods[] = { "add", "slow" };
    jrpc_buf_t m;
    jrpc_buf_init(&m);
    assert_int_equal(jrpc_wire_put_ready(&m, 16, methods, 2), 0);
    worker_send(&m);
    assert_true(pump_until(is_ready));
}

static void worker_error(jrpc_seq_t seq, int code, const char *msg)
{
    jrpc_buf_t m;
    jrpc_buf_init(&m);
    jrpc_wire_put_response_begin(&m);
    jrpc_wire_put_error(&m, seq, code, msg, (jrpc_span_t){ NULL, 0 });
    jrpc_wire_put_response_end(&m, 1);
    worker_send(&m);
}

static int buf_write(void *d, const char *p, size_t n)
{
    return jrpc_buf_append(d, p, n) < 0 ? -1 : 0;
}

static int submit(const char *body, uint32_t timeout_ms)
{
    jrpc_admit_t ad = { .timeout_ms = timeout_ms, .transport = JRPC_TRANSPORT_HTTP };
    G.handle = NULL;
    return jrpc_broker_submit(G.b, body, strlen(body), &ad, on_reply, NULL, &G.handle);
}

static uint64_t errors_of(int code)
{
    for (uint32_t i = 0; i < jrpc_metrics.ncodes; i++)
        if (jrpc_metrics.codes[i] == code)
            return jrpc_metrics.code_n[i];
    return 0;
}

/* Streamed mode: the answers in the order they were sent. */
#define MAX_ANS 8
static struct {
    uint32_t n;
    uint32_t pos[MAX_ANS];
    char     json[MAX_ANS][160];
    unsigned replies_before[MAX_ANS];   /* G.replies when the answer came */
} A;

static void on_answer(void *ctx, uint32_t pos, const char *json, size_t len)
{
    (void)ctx;
    assert_true(A.n < MAX_ANS && len < sizeof A.json[0]);
    A.pos[A.n] = pos;
    memcpy(A.json[A.n], json, len);
    A.json[A.n][len] = '\0';
    A.replies_before[A.n++] = G.replies;
}

/* The n-th call the fake worker has seen answered v, and the n-th reply is
 * want. */
static void answer_nth(uint32_t n, uint8_t v, const char *want)
{
    want_seen = n;
    assert_true(pump_until(seen_enough));
    worker_result(G.seq[n - 1], v);
    want_replies = n;
    assert_true(pump_until(replied));
    assert_string_equal(G.text, want);
}

static int submit_streamed(const char *body, uint32_t timeout_ms)
{
    jrpc_admit_t ad = { .timeout_ms = timeout_ms, .transport = JRPC_TRANSPORT_HTTP,
                        .answer = on_answer };
    G.handle = NULL;
    memset(&A, 0, sizeof A);
    return jrpc_broker_submit(G.b, body, strlen(body), &ad, on_reply, NULL, &G.handle);
}

static uint32_t want_answers;
static bool answered_enough(void) { return A.n >= want_answers; }

/* ---- tests ---- */

/* The one mapping from C errors to outcomes (proto/jrpc_errors). */
static void test_error_mapping(void **state)
{
    (void)state;
    struct { int rc, cls, code; } t[] = {
        { -EBUSY, JRPC_BODY_BUSY, JRPC_SERVER_BUSY },
        { -EACCES, JRPC_BODY_UNAUTHORIZED, JRPC_UNAUTHORIZED },
        { -EEXIST, JRPC_BODY_REPLAYED, JRPC_REPLAYED },
        { -EAGAIN, JRPC_BODY_UNAVAILABLE, JRPC_REPLAY_DOWN },
        { -ESTALE, JRPC_BODY_UNAVAILABLE, JRPC_REPLAY_DOWN },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        jrpc_outcome_t o = jrpc_outcome_refused(t[i].rc);
        assert_int_equal(o.cls, t[i].cls);
        assert_int_equal(o.code, t[i].code);
    }
    assert_int_equal(jrpc_error_code(-ENOENT), JRPC_METHOD_NOT_FOUND);
    assert_int_equal(jrpc_error_code(-EBUSY), JRPC_SERVER_BUSY);
    assert_int_equal(jrpc_error_code(-ENOMEM), JRPC_INTERNAL_ERROR);
    assert_string_equal(jrpc_body_class_name(JRPC_BODY_UNAVAILABLE), "unavailable");
    assert_string_equal(jrpc_body_class_name(JRPC_BODY_CANCELLED), "cancelled");
}

/* Bodies the parser refuses whole are answered at once, outcome invalid
 * with the code; a partial batch is ok, with each call's outcome. */
static void test_invalid_and_partial(void **state)
{
    (void)state;
    G.b = broker_make(100, NULL);
    assert_int_equal(submit("[1,", 0), 0);
    assert_int_equal(G.replies, 1);
    assert_int_equal(G.out.cls, JRPC_BODY_INVALID);
    assert_int_equal(G.out.code, JRPC_PARSE_ERROR);
    assert_int_equal(G.codes[0], JRPC_PARSE_ERROR);
    assert_int_equal(submit("[]", 0), 0);
    assert_int_equal(G.out.cls, JRPC_BODY_INVALID);
    assert_int_equal(G.out.code, JRPC_INVALID_REQUEST);
    /* one object that is not a Request: the body itself is invalid */
    assert_int_equal(submit("{\"id\":1}", 0), 0);
    assert_int_equal(G.out.cls, JRPC_BODY_INVALID);
    assert_int_equal(G.out.code, JRPC_INVALID_REQUEST);
    assert_string_equal(G.text, "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32600,\"message\":"
                        "\"Invalid Request\"},\"id\":1}");
    /* a batch of one invalid element is ok: its element was refused */
    assert_int_equal(submit("[{\"id\":1}]", 0), 0);
    assert_int_equal(G.out.cls, JRPC_BODY_OK);
    assert_int_equal(G.codes[0], JRPC_INVALID_REQUEST);

    worker_ready();
    G.replies = 0;
    assert_int_equal(submit("[{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"id\":1},{\"id\":2},"
                            "{\"jsonrpc\":\"2.0\",\"method\":\"rpc.x\",\"id\":3},"
                            "{\"jsonrpc\":\"2.0\",\"method\":\"add\"},"
                            "{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"id\":5},"
                            "{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"id\":6}]", 0), 0);
    want_seen = 4;   /* 1, the notification, 5, 6 */
    assert_true(pump_until(seen_enough));
    assert_int_equal(G.replies, 0);
    worker_result(G.seq[0], 3);
    worker_result(G.seq[1], 0);                    /* the notification's */
    worker_error(G.seq[2], 0, "zero is a code");   /* a worker's code, even 0 */
    worker_error(G.seq[3], 7, "seven");
    want_replies = 1;
    assert_true(pump_until(replied));
    assert_int_equal(G.out.cls, JRPC_BODY_OK);
    assert_int_equal(G.out.code, 0);
    assert_int_equal(G.ncodes, 6);
    int want[] = { 1, JRPC_INVALID_REQUEST, JRPC_METHOD_NOT_FOUND, 0, 0, 7 };
    for (int i = 0; i < 6; i++)
        assert_int_equal(G.codes[i], want[i]);
    assert_non_null(strstr(G.text, "{\"jsonrpc\":\"2.0\",\"result\":3,\"id\":1}"));
    assert_non_null(strstr(G.text, "\"error\":{\"code\":0,\"message\":\"zero is a code\"},\"id\":5"));
    assert_non_null(strstr(G.text, "\"error\":{\"code\":7,\"message\":\"seven\"},\"id\":6"));
}

/* An idempotency key that is there but empty (ZeroMQ's header frame with
 * "idempotency_key": ""), or malformed, is refused -32600 whole and runs
 * nothing: "" used to mean "no key" (issue 36, the body ran twice). */
static void test_idem_key_refused(void **state)
{
    (void)state;
    G.b = broker_make(100, NULL);
    worker_ready();
    static const char body[] = "{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"id\":1}";
    static const char *const keys[] = { "", "a b", "\x01" };
    for (int i = 0; i < 3; i++) {
        jrpc_admit_t ad = { .transport = JRPC_TRANSPORT_ZMQ,
                            .idem_key = { keys[i], strlen(keys[i]) } };
        G.replies = 0;
        assert_int_equal(jrpc_broker_submit(G.b, body, sizeof body - 1, &ad, on_reply, NULL,
                                            NULL), 0);
        assert_int_equal(G.replies, 1);
        assert_int_equal(G.out.cls, JRPC_BODY_INVALID);
        assert_string_equal(G.text, "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32600,\"message\":"
                            "\"Invalid Request\",\"data\":{\"reason\":\"an idempotency key is 1 to 255 "
                            "characters of printable ASCII without spaces\"}},\"id\":null}");
    }
    for (int i = 0; i < 20; i++) {   /* a few turns: nothing reaches the worker */
        uv_run(&G.loop, UV_RUN_NOWAIT);
        worker_read();
    }
    assert_int_equal(G.nseen, 0);
    assert_false(jrpc_broker_idem_key_ok((jrpc_span_t){ "", 0 }));
    assert_true(jrpc_broker_idem_key_ok((jrpc_span_t){ "k-1", 3 }));
}

/* A call whose worker never answers gets -32003 at its deadline; the other
 * calls of the batch keep their answers. Its late answer is dropped. */
static void test_deadline(void **state)
{
    (void)state;
    G.b = broker_make(100, NULL);
    worker_ready();
    uint64_t timeouts = jrpc_metrics.timeouts;
    assert_int_equal(submit("[{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"id\":1},"
                            "{\"jsonrpc\":\"2.0\",\"method\":\"slow\",\"id\":2},"
                            "{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"id\":3}]", 200), 0);
    want_seen = 3;
    assert_true(pump_until(seen_enough));
    for (uint32_t i = 0; i < 3; i++)
        if (strcmp(G.method[i], "add") == 0)
            worker_result(G.seq[i], 9);
    want_replies = 1;
    assert_true(pump_until(replied));   /* at the deadline, ~200 ms */
    assert_int_equal(G.out.cls, JRPC_BODY_OK);
    assert_int_equal(G.codes[0], 1);
    assert_int_equal(G.codes[1], JRPC_TIMEOUT);
    assert_int_equal(G.codes[2], 1);
    assert_string_equal(G.text, "[{\"jsonrpc\":\"2.0\",\"result\":9,\"id\":1},"
                        "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32003,\"message\":"
                        "\"Request timeout\"},\"id\":2},"
                        "{\"jsonrpc\":\"2.0\",\"result\":9,\"id\":3}]");
    assert_int_equal(jrpc_metrics.timeouts, timeouts + 1);
    assert_int_equal(G.out.answered, 3);
    assert_int_equal(G.out.timed_out, 1);
    jrpc_broker_stats_t st;
    jrpc_workers_stats_t ws;
    jrpc_broker_stats(G.b, &st, &ws);
    assert_int_equal(st.open, 0);   /* withdrawn at the deadline: nothing holds it */
    uint64_t late = ws.late;
    for (uint32_t i = 0; i < 3; i++)
        if (strcmp(G.method[i], "slow") == 0)
            worker_result(G.seq[i], 1);
    for (int i = 0; i < 50; i++)
        uv_run(&G.loop, UV_RUN_NOWAIT), usleep(1000);
    jrpc_broker_stats(G.b, &st, &ws);
    assert_int_equal(ws.late, late + 1);
    assert_int_equal(G.replies, 1);
}

/* The deadline timer is not stopped when the body it was armed for leaves
 * (issue 35: a restart per body): a later body with a later deadline is
 * still answered at its own when the timer fires early, and one with an
 * earlier deadline than the timer's moves it up. */
static void test_deadline_after_others(void **state)
{
    (void)state;
    G.b = broker_make(100, NULL);
    worker_ready();
    /* A (100 ms) answered at once: the timer stays armed for its deadline */
    assert_int_equal(submit("{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"id\":1}", 100), 0);
    answer_nth(1, 3, "{\"jsonrpc\":\"2.0\",\"result\":3,\"id\":1}");
    assert_true(uv_is_active((uv_handle_t *)&G.b->timer));   /* not stopped */
    /* B (300 ms, later than A's): its worker never answers; the early
     * firing arms the timer again for it */
    assert_int_equal(submit("{\"jsonrpc\":\"2.0\",\"method\":\"slow\",\"id\":2}", 300), 0);
    want_seen = 2;
    assert_true(pump_until(seen_enough));
    want_replies = 2;
    assert_true(pump_until(replied));
    assert_string_equal(G.text, "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32003,\"message\":"
                                "\"Request timeout\"},\"id\":2}");
    /* C (60 s) open, then D (100 ms, earlier than the timer's): D times out
     * first, C is still open */
    assert_int_equal(submit("{\"jsonrpc\":\"2.0\",\"method\":\"slow\",\"id\":3}", 60000), 0);
    assert_int_equal(submit("{\"jsonrpc\":\"2.0\",\"method\":\"slow\",\"id\":4}", 100), 0);
    want_seen = 4;
    assert_true(pump_until(seen_enough));
    want_replies = 3;
    assert_true(pump_until(replied));
    assert_string_equal(G.text, "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32003,\"message\":"
                                "\"Request timeout\"},\"id\":4}");
    jrpc_broker_stats_t st;
    jrpc_workers_stats_t ws;
    jrpc_broker_stats(G.b, &st, &ws);
    assert_int_equal(st.open, 1);   /* C */
}

/* A small body's block is kept for the next small body (BB_SMALL; under
 * ASan poisoned while kept); a large one is never kept; a reused block answers as a new
 * one (nothing of the body before it shows). */
static void test_small_blocks_reused(void **state)
{
    (void)state;
    G.b = broker_make(5000, NULL);
    worker_ready();
    const uint32_t keep = 1;
    assert_int_equal(submit("{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"id\":\"first-one\"}", 5000), 0);
    answer_nth(1, 3, "{\"jsonrpc\":\"2.0\",\"result\":3,\"id\":\"first-one\"}");
    assert_int_equal(G.b->bb_nfree, keep);
    /* a body past BB_SMALL: its own block, freed */
    char big[BB_SMALL + 128];   /* (white space: a short reply) */
    snprintf(big, sizeof big, "{\"jsonrpc\":\"2.0\",%*s\"method\":\"add\",\"id\":8}", BB_SMALL, "");
    assert_int_equal(submit(big, 5000), 0);
    assert_int_equal(G.b->bb_nfree, keep);
    answer_nth(2, 4, "{\"jsonrpc\":\"2.0\",\"result\":4,\"id\":8}");
    assert_int_equal(G.b->bb_nfree, keep);
    /* a small one again: the kept block */
    assert_int_equal(submit("{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"id\":2}", 5000), 0);
    assert_int_equal(G.b->bb_nfree, 0);
    answer_nth(3, 5, "{\"jsonrpc\":\"2.0\",\"result\":5,\"id\":2}");
    assert_int_equal(G.b->bb_nfree, keep);
}

/* A worker error that is not a map becomes -32603, and that is its code. */
static void test_malformed_worker_error(void **state)
{
    (void)state;
    G.b = broker_make(100, NULL);
    worker_ready();
    assert_int_equal(submit("{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"id\":1}", 0), 0);
    want_seen = 1;
    assert_true(pump_until(seen_enough));
    /* [1, 3, [[seq, 1, {"code": "x", "message": "m"}]]]: no integer code */
    jrpc_buf_t m;
    jrpc_buf_init(&m);
    jrpc_wire_put_response_begin(&m);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &m, buf_write);
    msgpack_pack_array(&pk, 3);
    msgpack_pack_uint64(&pk, G.seq[0]);
    msgpack_pack_uint8(&pk, 1);
    msgpack_pack_map(&pk, 2);
    msgpack_pack_str_with_body(&pk, "code", 4);
    msgpack_pack_str_with_body(&pk, "x", 1);
    msgpack_pack_str_with_body(&pk, "message", 7);
    msgpack_pack_str_with_body(&pk, "m", 1);
    jrpc_wire_put_response_end(&m, 1);
    worker_send(&m);
    want_replies = 1;
    assert_true(pump_until(replied));
    assert_int_equal(G.codes[0], JRPC_INTERNAL_ERROR);
    assert_non_null(strstr(G.text, "worker sent a malformed error"));
}

/* The client left: fn is never called, the call is withdrawn, the body is
 * counted cancelled; the worker's answer later is late. */
static void test_cancel(void **state)
{
    (void)state;
    G.b = broker_make(100, NULL);
    worker_ready();
    jrpc_broker_stats_t st0, st;
    jrpc_workers_stats_t ws0, ws;
    jrpc_broker_stats(G.b, &st0, &ws0);
    assert_int_equal(submit("{\"jsonrpc\":\"2.0\",\"method\":\"slow\",\"id\":1}", 0), 0);
    want_seen = 1;
    assert_true(pump_until(seen_enough));
    jrpc_broker_cancel(G.b, G.handle);
    jrpc_broker_stats(G.b, &st, &ws);
    assert_int_equal(st.cancelled, st0.cancelled + 1);
    assert_int_equal(st.open, 0);
    worker_result(G.seq[0], 1);
    for (int i = 0; i < 50; i++)
        uv_run(&G.loop, UV_RUN_NOWAIT), usleep(1000);
    jrpc_broker_stats(G.b, &st, &ws);
    assert_int_equal(ws.late, ws0.late + 1);
    assert_int_equal(G.replies, 0);
}

/* Past max_open the broker answers busy through the same callback, at once:
 * no -EBUSY for the front to turn into bytes. */
static void test_busy(void **state)
{
    (void)state;
    G.b = broker_make(1, NULL);
    worker_ready();
    jrpc_broker_stats_t st0, st;
    jrpc_broker_stats(G.b, &st0, NULL);
    uint64_t n = errors_of(JRPC_SERVER_BUSY), m = jrpc_metrics.bodies[1][JRPC_BODY_BUSY];
    assert_int_equal(submit("{\"jsonrpc\":\"2.0\",\"method\":\"slow\",\"id\":1}", 0), 0);
    jrpc_body_t *held = G.handle;
    assert_int_equal(G.replies, 0);
    assert_int_equal(submit("{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"id\":2}", 0), 0);
    assert_int_equal(G.replies, 1);
    assert_null(G.handle);
    assert_int_equal(G.out.cls, JRPC_BODY_BUSY);
    assert_int_equal(G.out.code, JRPC_SERVER_BUSY);
    assert_string_equal(G.text, "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32000,\"message\":"
                        "\"Server busy\",\"data\":\"too many requests in flight, retry later\"},"
                        "\"id\":null}");
    jrpc_broker_stats(G.b, &st, NULL);
    assert_int_equal(st.busy, st0.busy + 1);
    assert_int_equal(st.bodies, st0.bodies + 1);   /* busy bodies are not taken */
    assert_int_equal(errors_of(JRPC_SERVER_BUSY), n + 1);
    assert_int_equal(jrpc_metrics.bodies[1][JRPC_BODY_BUSY], m + 1);
    jrpc_broker_cancel(G.b, held);
}

/* Streamed mode: what the parser refused goes out at once, then each
 * worker answer as it is in (here in the reverse of request order), then
 * the deadline's -32003; notifications stay silent; the end event comes
 * last with the counts, and each answer is the very object of the
 * unstreamed array. */
static void test_streamed(void **state)
{
    (void)state;
    G.b = broker_make(100, NULL);
    worker_ready();
    static const char body[] =
        "[{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"id\":1},{\"id\":2},"
        "{\"jsonrpc\":\"2.0\",\"method\":\"add\"},"
        "{\"jsonrpc\":\"2.0\",\"method\":\"slow\",\"id\":\"s\"},"
        "{\"jsonrpc\":\"2.0\",\"method\":\"rpc.x\",\"id\":5},"
        "{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"id\":6}]";
    assert_int_equal(submit_streamed(body, 300), 0);
    /* before any worker answer: the invalid element and the unknown method */
    assert_int_equal(A.n, 2);
    assert_int_equal(A.pos[0], 1);
    assert_string_equal(A.json[0], "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32600,"
                        "\"message\":\"Invalid Request\"},\"id\":2}");
    assert_int_equal(A.pos[1], 4);
    assert_non_null(strstr(A.json[1], "\"code\":-32601"));
    want_seen = 4;   /* 1, the notification, "s", 6 */
    assert_true(pump_until(seen_enough));
    assert_int_equal(A.n, 2);
    /* answer 6, then 1, then the notification; "s" never */
    for (int k = 3; k >= 0; k--)
        if (strcmp(G.method[k], "add") == 0)
            worker_result(G.seq[k], (uint8_t)(10 + k));
    want_answers = 4;
    assert_true(pump_until(answered_enough));
    assert_int_equal(A.pos[2], 5);
    assert_string_equal(A.json[2], "{\"jsonrpc\":\"2.0\",\"result\":13,\"id\":6}");
    assert_int_equal(A.pos[3], 0);
    assert_string_equal(A.json[3], "{\"jsonrpc\":\"2.0\",\"result\":10,\"id\":1}");
    assert_int_equal(G.replies, 0);
    want_replies = 1;
    assert_true(pump_until(replied));   /* the deadline, ~300 ms */
    assert_int_equal(A.n, 5);
    assert_int_equal(A.pos[4], 3);
    assert_string_equal(A.json[4], "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32003,"
                        "\"message\":\"Request timeout\"},\"id\":\"s\"}");
    for (uint32_t k = 0; k < A.n; k++)
        assert_int_equal(A.replies_before[k], 0);   /* every answer before the end */
    assert_int_equal(G.out.cls, JRPC_BODY_OK);
    assert_string_equal(G.text, "{\"answered\":5,\"timed_out\":1}");
    assert_int_equal(G.out.answered, 5);   /* the same counts, as data */
    assert_int_equal(G.out.timed_out, 1);
    /* the unstreamed reply of the same batch holds exactly these objects */
    size_t sum = 2 + A.n - 1;
    for (uint32_t k = 0; k < A.n; k++) {
        assert_non_null(strstr(G.whole, A.json[k]));
        sum += strlen(A.json[k]);
    }
    assert_int_equal(strlen(G.whole), sum);
}

/* Streamed mode, bodies with no worker call: a body the parser refused
 * whole (not JSON, []) is not streamed: no answer, its error object through
 * fn as unstreamed (invalid, its code), while a batch of one invalid member
 * ([1]) is answer 0 then the end (ok); only notifications: just the end;
 * refused busy: no answer, the error object through fn as unstreamed. */
static void test_streamed_whole_body(void **state)
{
    (void)state;
    G.b = broker_make(1, NULL);
    static const struct { const char *body; int code; const char *reply; } whole[] = {
        { "[1,", JRPC_PARSE_ERROR, "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32700,"
                                   "\"message\":\"Parse error\"},\"id\":null}" },
        { "[]", JRPC_INVALID_REQUEST, "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32600,"
                                      "\"message\":\"Invalid Request\"},\"id\":null}" },
    };
    for (size_t k = 0; k < sizeof whole / sizeof whole[0]; k++) {
        G.replies = 0;
        assert_int_equal(submit_streamed(whole[k].body, 0), 0);
        assert_int_equal(A.n, 0);
        assert_int_equal(G.replies, 1);
        assert_int_equal(G.out.cls, JRPC_BODY_INVALID);
        assert_int_equal(G.out.code, whole[k].code);
        assert_string_equal(G.text, whole[k].reply);
    }
    G.replies = 0;
    assert_int_equal(submit_streamed("[1]", 0), 0);
    assert_int_equal(A.n, 1);
    assert_int_equal(A.pos[0], 0);
    assert_string_equal(A.json[0], "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32600,"
                                   "\"message\":\"Invalid Request\"},\"id\":null}");
    assert_int_equal(G.replies, 1);
    assert_int_equal(G.out.cls, JRPC_BODY_OK);
    assert_string_equal(G.text, "{\"answered\":1,\"timed_out\":0}");

    worker_ready();
    G.replies = 0;
    assert_int_equal(submit_streamed("{\"jsonrpc\":\"2.0\",\"method\":\"rpc.x\"}", 0), 0);
    assert_int_equal(A.n, 0);
    assert_int_equal(G.replies, 1);
    assert_int_equal(G.out.cls, JRPC_BODY_OK);
    assert_string_equal(G.text, "{\"answered\":0,\"timed_out\":0}");

    assert_int_equal(submit("{\"jsonrpc\":\"2.0\",\"method\":\"slow\",\"id\":1}", 0), 0);
    jrpc_body_t *held = G.handle;
    G.replies = 0;
    assert_int_equal(submit_streamed("{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"id\":2}", 0), 0);
    assert_int_equal(A.n, 0);
    assert_int_equal(G.replies, 1);
    assert_int_equal(G.out.cls, JRPC_BODY_BUSY);
    assert_non_null(strstr(G.text, "\"code\":-32000"));
    jrpc_broker_cancel(G.b, held);
}

/* Streamed mode, the client leaves mid-stream: no more answers, no end,
 * the rest withdrawn (their late answers dropped), the body freed. */
static void test_streamed_cancel(void **state)
{
    (void)state;
    G.b = broker_make(100, NULL);
    worker_ready();
    jrpc_workers_stats_t ws0, ws;
    jrpc_broker_stats_t st;
    jrpc_broker_stats(G.b, &st, &ws0);
    assert_int_equal(submit_streamed("[{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"id\":1},"
                                     "{\"jsonrpc\":\"2.0\",\"method\":\"slow\",\"id\":2}]", 0), 0);
    want_seen = 2;
    assert_true(pump_until(seen_enough));
    int add = strcmp(G.method[0], "add") == 0 ? 0 : 1;
    worker_result(G.seq[add], 1);
    want_answers = 1;
    assert_true(pump_until(answered_enough));
    jrpc_broker_cancel(G.b, G.handle);
    jrpc_broker_stats(G.b, &st, NULL);
    assert_int_equal(st.open, 0);
    worker_result(G.seq[1 - add], 2);
    for (int i = 0; i < 50; i++)
        uv_run(&G.loop, UV_RUN_NOWAIT), usleep(1000);
    jrpc_broker_stats(G.b, &st, &ws);
    assert_int_equal(ws.late, ws0.late + 1);
    assert_int_equal(A.n, 1);
    assert_int_equal(G.replies, 0);
}

/* With keys: an unsigned body is refused unauthorized at once, a signed one
 * unavailable when Redis cannot be reached; readiness says redis down. */
static void test_refusals_signed(void **state)
{
    (void)state;
    char path[] = "/tmp/test_jrpc_broker_keysXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    static const char line[] = "demo 0123456789abcdef0123456789abcdef\n";
    assert_int_equal(write(fd, line, sizeof line - 1), (int)sizeof line - 1);
    close(fd);
    char err[256];
    jrpc_keys_t *keys = NULL;
    assert_int_equal(jrpc_keys_load(path, NULL, &keys, err, sizeof err), 0);
    unlink(path);
    assert_non_null(keys);
    G.b = broker_make(100, keys);
    assert_int_equal(jrpc_broker_ready(G.b, "", NULL), JRPC_BROKER_ENOWORKER);
    {
        static const char *const methods[] = { "add" };
        jrpc_buf_t m;
        jrpc_buf_init(&m);
        assert_int_equal(jrpc_wire_put_ready(&m, 4, methods, 1), 0);
        worker_send(&m);
        for (int i = 0; i < 50; i++)
            uv_run(&G.loop, UV_RUN_NOWAIT), usleep(1000);
        assert_int_equal(jrpc_broker_ready(G.b, NULL, NULL), JRPC_BROKER_EREDIS);
    }
    const char *body = "{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"id\":1}";
    assert_int_equal(submit(body, 0), 0);
    assert_int_equal(G.replies, 1);
    assert_int_equal(G.out.cls, JRPC_BODY_UNAUTHORIZED);
    assert_int_equal(G.out.code, JRPC_UNAUTHORIZED);
    assert_non_null(strstr(G.text, "\"code\":-32002"));

    char nonce[17], sig[JRPC_SIGN_HEX_LEN + 1], ts[24];
    assert_int_equal(jrpc_sign_new_nonce(nonce, 16), 0);
    int64_t now = (int64_t)time(NULL);
    snprintf(ts, sizeof ts, "%lld", (long long)now);
    jrpc_span_t secret = { "0123456789abcdef0123456789abcdef", 32 }, id = { "demo", 4 };
    assert_int_equal(jrpc_sign_compute(sig, secret, id, now, (jrpc_span_t){ nonce, 16 }, body,
                                       strlen(body)), 0);
    jrpc_admit_t ad = { .transport = JRPC_TRANSPORT_ZMQ,
                        .auth = { .key = id, .timestamp_text = { ts, strlen(ts) },
                                  .nonce = { nonce, 16 }, .signature = { sig, 64 } } };
    G.handle = NULL;
    assert_int_equal(jrpc_broker_submit(G.b, body, strlen(body), &ad, on_reply, NULL, &G.handle),
                     0);
    want_replies = 2;
    assert_true(pump_until(replied));
    assert_int_equal(G.out.cls, JRPC_BODY_UNAVAILABLE);
    assert_int_equal(G.out.code, JRPC_REPLAY_DOWN);
    assert_non_null(strstr(G.text, "\"code\":-32006"));
    broker_free();
    G.b = NULL;
    jrpc_keys_destroy(&keys);
}

/* A key file's text loaded as the broker loads --keys. */
static jrpc_keys_t *keys_of(const char *text)
{
    char path[] = "/tmp/test_jrpc_broker_keysXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (int)strlen(text));
    close(fd);
    char err[256];
    jrpc_keys_t *keys = NULL;
    assert_int_equal(jrpc_keys_load(path, NULL, &keys, err, sizeof err), 0);
    unlink(path);
    return keys;
}

/* A body of a connection authenticated as key_id (a WebSocket's). */
static int submit_as(const char *body, const char *key_id)
{
    jrpc_admit_t ad = { .transport = JRPC_TRANSPORT_WS,
                        .key_id = { key_id, strlen(key_id) } };
    G.handle = NULL;
    return jrpc_broker_submit(G.b, body, strlen(body), &ad, on_reply, NULL, &G.handle);
}

/* A reload (jrpc_broker_set_keys) while a body is in flight: the old set is
 * freed at once (ASan would see any pointer kept into it), the body in
 * flight finishes normally, a removed key is refused for new bodies of a
 * connection authenticated with it, a new key works, a changed ACL applies. */
static void test_keys_swap(void **state)
{
    (void)state;
    jrpc_keys_t *old = keys_of("demo 0123456789abcdef0123456789abcdef\n"
                               "gone 0123456789abcdef0123456789abcdef\n");
    jrpc_keys_t *cur = keys_of("demo 0123456789abcdef0123456789abcdef sum\n"
                               "fresh 0123456789abcdef0123456789abcdef\n");
    jrpc_log_set_level("error");
    G.b = broker_make(100, old);
    {   /* worker_ready(), but Redis is down here: "ready" but for it */
        static const char *const methods[] = { "add", "slow" };
        jrpc_buf_t m;
        jrpc_buf_init(&m);
        assert_int_equal(jrpc_wire_put_ready(&m, 16, methods, 2), 0);
        worker_send(&m);
        assert_true(pump_until(ready_but_redis));
    }
    const char *add = "{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"id\":1}";
    assert_int_equal(submit_as(add, "demo"), 0);
    want_seen = 1;
    assert_true(pump_until(seen_enough));

    jrpc_log_set_level("info");   /* the access line reads the key id at the end */
    assert_ptr_equal(jrpc_broker_set_keys(G.b, cur), old);
    jrpc_keys_destroy(&old);
    worker_result(G.seq[0], 3);
    want_replies = 1;
    assert_true(pump_until(replied));
    assert_int_equal(G.out.cls, JRPC_BODY_OK);
    assert_string_equal(G.text, "{\"jsonrpc\":\"2.0\",\"result\":3,\"id\":1}");

    assert_int_equal(submit_as(add, "gone"), 0);   /* removed: refused at once */
    assert_int_equal(G.replies, 2);
    assert_int_equal(G.out.cls, JRPC_BODY_UNAUTHORIZED);
    assert_non_null(strstr(G.text, "\"code\":-32002"));
    assert_non_null(strstr(G.text, "\"reason\":\"unknown key\""));

    assert_int_equal(submit_as(add, "demo"), 0);   /* its ACL is now "sum" only */
    assert_int_equal(G.replies, 3);
    assert_int_equal(G.out.cls, JRPC_BODY_OK);
    assert_int_equal(G.ncodes, 1);
    assert_int_equal(G.codes[0], JRPC_UNAUTHORIZED);

    assert_int_equal(submit_as(add, "fresh"), 0);  /* added: served */
    want_seen = 2;
    assert_true(pump_until(seen_enough));
    worker_result(G.seq[1], 5);
    want_replies = 4;
    assert_true(pump_until(replied));
    assert_string_equal(G.text, "{\"jsonrpc\":\"2.0\",\"result\":5,\"id\":1}");
    jrpc_log_set_level("error");
    broker_free();
    G.b = NULL;
    jrpc_keys_destroy(&cur);
}

static void on_empty(void *arg)
{
    *(bool *)arg = true;
}

/* Readiness and the metrics read come from the broker, not its parts. */
static void test_ready_and_metrics(void **state)
{
    (void)state;
    G.b = broker_make(100, NULL);
    assert_int_equal(jrpc_broker_ready(G.b, NULL, NULL), JRPC_BROKER_ENOWORKER);
    worker_ready();
    assert_int_equal(jrpc_broker_ready(G.b, "add,slow", NULL), 0);
    jrpc_span_t missing = { NULL, 0 };
    assert_int_equal(jrpc_broker_ready(G.b, "add,nope,slow", &missing), JRPC_BROKER_ENOMETHOD);
    assert_int_equal(missing.n, 4);
    assert_memory_equal(missing.p, "nope", 4);
    assert_int_equal(submit("{\"jsonrpc\":\"2.0\",\"method\":\"slow\",\"id\":1}", 0), 0);
    want_seen = 1;
    assert_true(pump_until(seen_enough));
    jrpc_metrics_read_t rd;
    jrpc_broker_metrics(G.b, &rd);
    assert_int_equal(rd.workers_connected, 1);
    assert_int_equal(rd.bodies_open, 1);
    assert_int_equal(rd.calls_inflight, 1);
    assert_int_equal(rd.redis_up, 0);
    jrpc_buf_t page;
    jrpc_buf_init(&page);
    assert_int_equal(jrpc_metrics_write(&page, &rd), 0);
    assert_non_null(strstr(page.p, "jrpc_worker_credit{worker=\"57\"} 15\n"));
    jrpc_buf_dispose(&page);
    bool empty = false;
    jrpc_broker_drain(G.b, on_empty, &empty);
    assert_int_equal(jrpc_broker_ready(G.b, "add", NULL), JRPC_BROKER_EDRAINING);
    assert_string_equal(jrpc_broker_strerror(JRPC_BROKER_EDRAINING), "draining");
    assert_string_equal(jrpc_broker_strerror(JRPC_BROKER_ENOWORKER), "no worker connected");
    assert_string_equal(jrpc_broker_strerror(JRPC_BROKER_EREDIS), "redis down");
    assert_string_equal(jrpc_broker_strerror(-12345), "unknown error");
    worker_result(G.seq[0], 2);
    want_replies = 1;
    assert_true(pump_until(replied));
    assert_true(empty);
}

static unsigned woken;
static void on_wake(void *ctx) { (void)ctx; woken++; }
static bool nothing_held(void) { return G.b->held == 0 && G.b->open == 0; }

static int submit_from(const char *body, const char *peer, jrpc_broker_hold_t *h)
{
    jrpc_admit_t ad = { .timeout_ms = 200, .transport = JRPC_TRANSPORT_HTTP,
                        .peer = { peer, strlen(peer) }, .hold = h };
    int rc = jrpc_broker_submit(G.b, body, strlen(body), &ad, on_reply, NULL, NULL);
    G.handle = NULL;   /* on_reply reads no body's outcomes here */
    return rc;
}

/* Notifications are answered before their calls end: what they hold counts
 * against their connection (full: the front stops reading), their address
 * and everyone (past those: busy) until freed; requests never (issue 36). */
static void test_queued_bytes(void **state)
{
    (void)state;
    G.b = broker_make(100, NULL);
    worker_ready();   /* the calls go to it, and it never answers */
    G.b->opts.conn_max_queued_bytes = 1;
    G.b->opts.peer_max_queued_bytes = 1;
    jrpc_broker_hold_t *h = jrpc_broker_hold_new(G.b, on_wake, NULL);
    assert_non_null(h);
    uint64_t pushbacks = jrpc_metrics.queue_pushbacks, refused = jrpc_metrics.queue_refused;
    const char *note = "{\"jsonrpc\":\"2.0\",\"method\":\"slow\"}";
    assert_false(jrpc_broker_hold_full(h));
    assert_int_equal(submit_from(note, "10.0.0.1:1000", h), 0);
    assert_int_equal(G.replies, 1);   /* answered at once, nothing to say */
    assert_int_equal(G.len, 0);
    assert_true(G.b->held > strlen(note));
    assert_int_equal(h->bytes, G.b->held);
    assert_int_equal(jrpc_metrics.queued_bytes, G.b->held);
    assert_true(jrpc_broker_hold_full(h));
    assert_true(jrpc_broker_hold_full(h));
    assert_int_equal(jrpc_metrics.queue_pushbacks, pushbacks + 1);   /* once per full */
    /* The same address from another port: past its bound, refused busy. */
    assert_int_equal(submit_from(note, "10.0.0.1:2000", NULL), 0);
    assert_int_equal(G.replies, 2);
    assert_int_equal(G.out.cls, JRPC_BODY_BUSY);
    assert_int_equal(jrpc_metrics.queue_refused, refused + 1);
    /* A request is not refused for it (nor answered yet: the worker has it). */
    assert_int_equal(submit_from("{\"jsonrpc\":\"2.0\",\"method\":\"slow\",\"id\":1}",
                                 "10.0.0.1:2000", NULL), 0);
    assert_int_equal(G.replies, 2);
    /* Another address is within its own bound, until the total is reached. */
    G.b->opts.max_queued_bytes = (uint32_t)G.b->held + 1;
    assert_int_equal(submit_from(note, "[::1]:3000", NULL), 0);
    assert_int_equal(G.replies, 3);
    assert_int_equal(G.out.cls, JRPC_BODY_OK);
    assert_int_equal(submit_from(note, "10.0.0.9", NULL), 0);
    assert_int_equal(G.out.cls, JRPC_BODY_BUSY);
    assert_int_equal(jrpc_metrics.queue_refused, refused + 2);
    /* At the deadline all is let go; the full connection is woken once. */
    assert_true(pump_until(nothing_held));
    assert_int_equal(woken, 1);
    assert_int_equal(h->bytes, 0);
    assert_false(jrpc_broker_hold_full(h));
    assert_int_equal(jrpc_metrics.queued_bytes, 0);
    for (int i = 0; i < PEER_BUCKETS; i++)
        assert_null(G.b->peers[i]);
    jrpc_broker_hold_release(&h);
    assert_null(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_mapping),
        cmocka_unit_test_setup_teardown(test_invalid_and_partial, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idem_key_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deadline_after_others, setup, teardown),
        cmocka_unit_test_setup_teardown(test_small_blocks_reused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed_worker_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_busy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusals_signed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keys_swap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ready_and_metrics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_streamed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_streamed_whole_body, setup, teardown),
        cmocka_unit_test_setup_teardown(test_streamed_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queued_bytes, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
