/* Unit tests of the broker core with its nonce claims in a real
 * redis-server (started here on 127.0.0.1, a free port): early dispatch
 * (docs/SIGNING.md "Early dispatch"). test_jrpc_broker.c has no network by
 * design; these need Redis' answers, and Redis frozen (SIGSTOP) to hold a
 * claim in flight while the worker answers.
 *
 * The test plays the worker with a DEALER on inproc:// in the same thread
 * (READY declaring add and echo idempotent, count not), drives the loop
 * with UV_RUN_NOWAIT, and asserts what the client gets: the reply bytes,
 * and that no answer leaves before the claim did. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <unistd.h>
#include <cmocka.h>
#include <zmq.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "../../../broker/core/jrpc_broker.c"
#include "../../../broker/core/jrpc_gather.c"
#include "../../../broker/core/jrpc_admit.c"
#include "../../../broker/core/jrpc_idem.c"
#include "../../../broker/core/jrpc_queued.c"
#include "../../../broker/core/jrpc_conn_auth.c"
#include "../broker_env.h"
#include "jrpc_sign.h"
#include "jrpc_wire.h"

extern char **environ;

#define MAX_SEEN 16
#define SECRET "0123456789abcdef0123456789abcdef"

static const char REPLAY_BYTES[] =
    "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32005,\"message\":\"Replay detected\",\"data\":"
    "{\"reason\":\"this nonce was used before: sign each body with a new nonce\"}},\"id\":null}";
static const char DOWN_BYTES[] =
    "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32006,\"message\":\"Replay protection unavailable\","
    "\"data\":{\"reason\":\"replay protection is unavailable, retry later\"}},\"id\":null}";

static struct {
    uv_loop_t      loop;
    void          *zctx, *dealer;
    jrpc_broker_t *b;
    jrpc_keys_t   *keys;
    pid_t          redis;        /* redis-server, 0: not running */
    int            port;
    unsigned       replies;      /* reply callbacks */
    jrpc_outcome_t out;          /* of the last reply */
    char           text[1024];   /* the last reply */
    jrpc_seq_t     seq[MAX_SEEN];/* REQUEST items the worker received, in order */
    char           method[MAX_SEEN][16];
    uint32_t       nseen;
} G;

static int nep;   /* endpoints made: inproc names are never reused */

/* What one body got, for the tests that follow several (ctx of on_reply). */
typedef struct body_reply {
    unsigned       calls;
    jrpc_outcome_t out;
    char           text[512];
} body_reply_t;

static void on_reply(void *ctx, jrpc_outcome_t out, const char *reply, size_t len)
{
    body_reply_t *br = ctx;
    if (br != NULL) {
        br->calls++;
        br->out = out;
        assert_true(len < sizeof br->text);
        memcpy(br->text, reply, len);
        br->text[len] = '\0';
    }
    G.replies++;
    G.out = out;
    assert_true(len < sizeof G.text);
    memcpy(G.text, reply, len);
    G.text[len] = '\0';
}

/* ---- redis-server ---- */

#include "../free_port.h"

static void redis_start(void)
{
    char port[16];
    G.port = free_port();
    snprintf(port, sizeof port, "%d", G.port);
    const char *argv[] = { "redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "",
                           "--appendonly", "no", "--daemonize", "no", NULL };
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    int rc = posix_spawnp(&G.redis, "redis-server", &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        fail_msg("cannot start redis-server (these tests need a real Redis): %s", strerror(rc));
}

static void redis_stop(void)
{
    if (G.redis > 0) {
        kill(G.redis, SIGCONT);
        kill(G.redis, SIGKILL);
        waitpid(G.redis, NULL, 0);
        G.redis = 0;
    }
}

/* ---- the loop and the worker ---- */

#include "../fake_worker.h"

/* Turns the loop for about ms milliseconds. */
static void pump_for(int ms)
{
    for (int i = 0; i < ms; i++) {
        uv_run(&G.loop, UV_RUN_NOWAIT);
        worker_read();
        usleep(1000);
    }
}


/* A broker with the key "demo", its nonces in our Redis (claims time out
 * after redis_timeout_ms), a rate limit when rate > 0, and our worker
 * READY; returns once Redis and the worker are both there. */
static void broker_start(uint32_t redis_timeout_ms, uint32_t rate, bool early)
{
    char ep[64], url[64], err[256];
    snprintf(ep, sizeof ep, "inproc://test-broker-redis-%d", ++nep);
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", G.port);
    char path[] = "/tmp/test_jrpc_broker_redis_keysXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    static const char line[] = "demo " SECRET "\n";
    assert_int_equal(write(fd, line, sizeof line - 1), (int)sizeof line - 1);
    close(fd);
    assert_int_equal(jrpc_keys_load(path, NULL, &G.keys, err, sizeof err), 0);
    unlink(path);
    jrpc_broker_opts_t o = {
        .limits = JRPC_LIMITS_DEFAULT, .timeout_ms = 10000, .max_open = 100,
        .workers = { .endpoint = ep, .zmq_ctx = G.zctx, .max_queue = 100, .heartbeat_ms = 1000,
                     .liveness = 3, .max_redispatch = 3 },
        .keys = G.keys, .skew_s = 300,
        .replay = { .url = url, .window_s = 300, .timeout_ms = redis_timeout_ms },
        .rate = { .rate = rate, .burst = rate ? 2 * rate : 0 }, .rate_local_pct = 10,
        .early_dispatch = early,
    };
    G.b = jrpc_broker_new(&G.loop, &o);
    assert_non_null(G.b);
    G.dealer = zmq_socket(G.zctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(G.dealer, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(G.dealer, ZMQ_ROUTING_ID, "W", 1);
    assert_int_equal(zmq_connect(G.dealer, ep), 0);
    static const char *const methods[] = { "add", "echo", "count" };
    static const char *const idem[] = { "add", "echo" };
    jrpc_wire_ready_opts_t ro = { .idempotent = idem, .nidempotent = 2 };
    jrpc_buf_t m;
    jrpc_buf_init(&m);
    assert_int_equal(jrpc_wire_put_ready_opts(&m, 16, methods, 3, &ro), 0);
    assert_int_equal(zmq_send(G.dealer, m.p, m.len, 0), (int)m.len);
    jrpc_buf_dispose(&m);
    assert_true(pump_until(is_ready));   /* the worker, and Redis up (else EREDIS) */
}

/* Submits body signed by "demo" with nonce (a fresh one when NULL); its
 * reply also goes to br (may be NULL), its handle to *handle (may be NULL). */
static void submit_signed_to(const char *body, const char *nonce, body_reply_t *br,
                             jrpc_body_t **handle)
{
    char fresh[17], sig[JRPC_SIGN_HEX_LEN + 1], ts[24];
    if (nonce == NULL) {
        assert_int_equal(jrpc_sign_new_nonce(fresh, 16), 0);
        nonce = fresh;
    }
    int64_t now = (int64_t)time(NULL);
    snprintf(ts, sizeof ts, "%lld", (long long)now);
    jrpc_span_t id = { "demo", 4 }, n = { nonce, strlen(nonce) };
    assert_int_equal(jrpc_sign_compute(sig, (jrpc_span_t){ SECRET, 32 }, id, now, n, body,
                                       strlen(body)), 0);
    jrpc_admit_t ad = { .transport = JRPC_TRANSPORT_ZMQ,
                        .auth = { .key = id, .timestamp_text = { ts, strlen(ts) }, .nonce = n,
                                  .signature = { sig, 64 } } };
    assert_int_equal(jrpc_broker_submit(G.b, body, strlen(body), &ad, on_reply, br, handle), 0);
}

/* Submits body signed by "demo" with nonce (a fresh one when NULL). */
static void submit_signed(const char *body, const char *nonce)
{
    submit_signed_to(body, nonce, NULL, NULL);
}

/* The worker answers every call it got since call `from` with 40 + its index. */
static void worker_answer_from(uint32_t from)
{
    for (uint32_t i = from; i < G.nseen; i++)
        worker_result(G.seq[i], (uint8_t)(40 + i));
}

static int setup(void **state)
{
    (void)state;
    memset(&G, 0, sizeof G);
    broker_env_open(&G.loop, &G.zctx);
    redis_start();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    redis_stop();
    jrpc_broker_destroy(&G.b);
    uv_run(&G.loop, UV_RUN_DEFAULT);   /* the close callbacks */
    zmq_close(G.dealer);
    jrpc_keys_destroy(&G.keys);
    broker_env_close(&G.loop, G.zctx);
    return 0;
}

static const char TWO_ADDS[] = "[{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"params\":[1,2],\"id\":1},"
                               "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":[3],\"id\":2}]";

/* ---- tests ---- */

/* A body of idempotent methods runs while its claim is in flight (Redis
 * frozen), and its reply waits for the claim. */
static void test_early_held_until_claimed(void **state)
{
    (void)state;
    broker_start(5000, 0, true);
    kill(G.redis, SIGSTOP);
    submit_signed(TWO_ADDS, NULL);
    worker_read();
    assert_int_equal(G.nseen, 2);   /* dispatched before Redis could answer */
    worker_answer_from(0);
    pump_for(100);
    assert_int_equal(G.replies, 0);   /* the answers are in; the claim is not */
    kill(G.redis, SIGCONT);
    want_replies = 1;
    assert_true(pump_until(replied));
    assert_int_equal(G.out.cls, JRPC_BODY_OK);
    assert_string_equal(G.text, "[{\"jsonrpc\":\"2.0\",\"result\":40,\"id\":1},"
                                "{\"jsonrpc\":\"2.0\",\"result\":41,\"id\":2}]");
}

/* The same bytes sent again: dispatched early, answered by the worker, and
 * the client gets exactly the 409 it gets without early dispatch, once. */
static void test_early_replay_refused(void **state)
{
    (void)state;
    broker_start(5000, 0, true);
    submit_signed(TWO_ADDS, "replayed-nonce-0001");
    want_seen = 2;
    assert_true(pump_until(seen_enough));
    worker_answer_from(0);
    want_replies = 1;
    assert_true(pump_until(replied));
    assert_int_equal(G.out.cls, JRPC_BODY_OK);

    kill(G.redis, SIGSTOP);
    submit_signed(TWO_ADDS, "replayed-nonce-0001");
    worker_read();
    assert_int_equal(G.nseen, 4);   /* the replay ran early: the calls are idempotent */
    worker_answer_from(2);
    pump_for(100);
    assert_int_equal(G.replies, 1);   /* nothing leaves before the claim */
    kill(G.redis, SIGCONT);
    want_replies = 2;
    assert_true(pump_until(replied));
    assert_int_equal(G.out.cls, JRPC_BODY_REPLAYED);
    assert_string_equal(G.text, REPLAY_BYTES);
    pump_for(50);
    assert_int_equal(G.replies, 2);   /* and the answers never do */
    assert_int_equal(G.b->open, 0);

    /* Issue 36: the key was just refused a replay, so it cools down for a
     * window: a third send of the bytes is not dispatched early (it never
     * reaches the worker), and neither is a fresh body of the key, which
     * runs after its claim as without early dispatch. */
    kill(G.redis, SIGSTOP);
    submit_signed(TWO_ADDS, "replayed-nonce-0001");
    submit_signed(TWO_ADDS, NULL);
    pump_for(100);
    assert_int_equal(G.nseen, 4);
    kill(G.redis, SIGCONT);
    want_seen = 6;
    assert_true(pump_until(seen_enough));   /* the fresh one, after its claim */
    worker_answer_from(4);
    want_replies = 4;
    assert_true(pump_until(replied));
    pump_for(50);
    assert_int_equal(G.nseen, 6);   /* the replay: never at the worker */
    assert_int_equal(G.b->open, 0);
}

/* Replays racing the first claim of their nonce (Redis frozen): only the
 * first body goes early; the replays wait for their claims and are refused
 * without ever reaching the worker (issue 36: N replays used to run N
 * times). */
static void test_early_replays_in_flight(void **state)
{
    (void)state;
    broker_start(5000, 0, true);
    kill(G.redis, SIGSTOP);
    body_reply_t r[6] = { { 0 } };
    for (int i = 0; i < 6; i++)
        submit_signed_to(TWO_ADDS, "raced-nonce-00000001", &r[i], NULL);
    pump_for(100);
    assert_int_equal(G.nseen, 2);   /* the first body's two calls, early */
    worker_answer_from(0);
    kill(G.redis, SIGCONT);
    want_replies = 6;
    assert_true(pump_until(replied));
    assert_int_equal(r[0].out.cls, JRPC_BODY_OK);
    for (int i = 1; i < 6; i++)
        assert_string_equal(r[i].text, REPLAY_BYTES);
    pump_for(50);
    assert_int_equal(G.nseen, 2);
    assert_int_equal(G.b->open, 0);
}

/* The claim times out (Redis frozen past --redis-timeout-ms): the body
 * whose calls ran early is refused 503 with today's bytes. */
static void test_early_redis_down(void **state)
{
    (void)state;
    broker_start(300, 0, true);
    kill(G.redis, SIGSTOP);
    submit_signed(TWO_ADDS, NULL);
    worker_read();
    assert_int_equal(G.nseen, 2);
    want_replies = 1;
    assert_true(pump_until(replied));
    assert_int_equal(G.out.cls, JRPC_BODY_UNAVAILABLE);
    assert_int_equal(G.out.code, JRPC_REPLAY_DOWN);
    assert_string_equal(G.text, DOWN_BYTES);
    assert_int_equal(G.b->open, 0);   /* its calls taken back from the worker at once */
    worker_answer_from(0);            /* answers after the refusal: dropped */
    pump_for(50);
    assert_int_equal(G.replies, 1);
    jrpc_workers_stats_t ws;
    jrpc_workers_stats(G.b->workers, &ws);
    assert_int_equal(ws.late, 2);
    kill(G.redis, SIGCONT);
}

/* One method not declared idempotent (count): nothing is dispatched before
 * the claim answers, as always. */
static void test_mixed_waits_for_claim(void **state)
{
    (void)state;
    broker_start(5000, 0, true);
    kill(G.redis, SIGSTOP);
    submit_signed("[{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"params\":[1,2],\"id\":1},"
                  "{\"jsonrpc\":\"2.0\",\"method\":\"count\",\"id\":2}]", NULL);
    pump_for(100);
    assert_int_equal(G.nseen, 0);
    kill(G.redis, SIGCONT);
    want_seen = 2;
    assert_true(pump_until(seen_enough));
    assert_string_equal(G.method[1], "count");
    worker_answer_from(0);
    want_replies = 1;
    assert_true(pump_until(replied));
    assert_int_equal(G.out.cls, JRPC_BODY_OK);
}

/* Under a rate limit (2 calls/s, burst 4): not early — a client over its
 * limit must not keep the workers busy — and the body over the limit is
 * refused 429 with the reply it always got, its calls never sent. */
static void test_limited_not_early(void **state)
{
    (void)state;
    broker_start(5000, 2, true);
    for (int k = 0; k < 2; k++) {   /* the burst: 4 calls */
        kill(G.redis, SIGSTOP);
        submit_signed(TWO_ADDS, NULL);
        pump_for(50);
        assert_int_equal(G.nseen, 2u * (uint32_t)k);
        kill(G.redis, SIGCONT);
        want_seen = 2u * (uint32_t)k + 2;
        assert_true(pump_until(seen_enough));
        worker_answer_from(2u * (uint32_t)k);
        want_replies = (unsigned)k + 1;
        assert_true(pump_until(replied));
        assert_int_equal(G.out.cls, JRPC_BODY_OK);
    }
    submit_signed(TWO_ADDS, NULL);
    want_replies = 3;
    assert_true(pump_until(replied));
    assert_int_equal(G.out.cls, JRPC_BODY_LIMITED);
    static const char head[] =
        "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32007,\"message\":\"Rate limited\",\"data\":"
        "{\"reason\":\"rate limit: 2 calls/s, burst 4\",\"cost\":2,\"retry_after_ms\":";
    assert_memory_equal(G.text, head, sizeof head - 1);
    pump_for(50);
    assert_int_equal(G.nseen, 4);
}

/* --early-dispatch off: the claim first, even for idempotent methods; the
 * replay's refusal is the same bytes. */
static void test_early_off(void **state)
{
    (void)state;
    broker_start(5000, 0, false);
    kill(G.redis, SIGSTOP);
    submit_signed(TWO_ADDS, "replayed-nonce-0002");
    pump_for(50);
    assert_int_equal(G.nseen, 0);
    kill(G.redis, SIGCONT);
    want_seen = 2;
    assert_true(pump_until(seen_enough));
    worker_answer_from(0);
    want_replies = 1;
    assert_true(pump_until(replied));
    submit_signed(TWO_ADDS, "replayed-nonce-0002");
    want_replies = 2;
    assert_true(pump_until(replied));
    assert_string_equal(G.text, REPLAY_BYTES);
    assert_int_equal(G.nseen, 2);
}

/* The broker destroyed while an early body's claim is in flight (its calls
 * at the worker): the body is refused through the reply callback, once,
 * and freed once (ASan). */
static void test_early_destroyed_in_flight(void **state)
{
    (void)state;
    broker_start(5000, 0, true);
    kill(G.redis, SIGSTOP);
    submit_signed(TWO_ADDS, NULL);
    worker_read();
    assert_int_equal(G.nseen, 2);
    jrpc_broker_destroy(&G.b);
    uv_run(&G.loop, UV_RUN_DEFAULT);
    assert_int_equal(G.replies, 1);
    assert_int_equal(G.out.cls, JRPC_BODY_UNAVAILABLE);
}

/* Bodies read in one loop turn have their nonces claimed by one script
 * (jrpc_replay: mode 'm'); each is still answered on its own: one replayed
 * nonce among fresh ones refuses exactly that body with the usual bytes,
 * and a body whose client left while the claims were out (cancelled) is
 * dropped without disturbing the others. Early dispatch off and on. */
static void batched_claims(bool early)
{
    broker_start(5000, 0, early);
    body_reply_t first = { 0 };
    submit_signed_to(TWO_ADDS, "used-before-nonce-01", &first, NULL);
    want_seen = 2;
    assert_true(pump_until(seen_enough));
    worker_answer_from(0);
    want_replies = 1;
    assert_true(pump_until(replied));
    assert_int_equal(first.out.cls, JRPC_BODY_OK);

    /* Four bodies in one turn: fresh, fresh then gone, a replay, fresh. */
    body_reply_t br[4] = { { 0 } };
    jrpc_body_t *gone = NULL;
    uint32_t seen0 = G.nseen;
    submit_signed_to(TWO_ADDS, NULL, &br[0], NULL);
    submit_signed_to(TWO_ADDS, NULL, &br[1], &gone);
    submit_signed_to(TWO_ADDS, "used-before-nonce-01", &br[2], NULL);
    submit_signed_to(TWO_ADDS, NULL, &br[3], NULL);
    assert_non_null(gone);
    jrpc_broker_cancel(G.b, gone);
    /* The worker answers whatever reaches it (early: the cancelled body's
     * and the replay's calls too) until the three bodies left are answered. */
    uint32_t answered = seen0;
    for (int i = 0; i < 5000 && G.replies < 1 + 3; i++) {
        pump_for(1);
        worker_answer_from(answered);
        answered = G.nseen;
    }
    assert_true(G.nseen >= seen0 + 4);   /* the calls of the two fresh bodies */
    pump_for(50);
    assert_int_equal(G.replies, 4);
    assert_int_equal(br[0].calls, 1);
    assert_int_equal(br[0].out.cls, JRPC_BODY_OK);
    assert_int_equal(br[1].calls, 0);   /* cancelled: never answered */
    assert_int_equal(br[2].calls, 1);
    assert_int_equal(br[2].out.cls, JRPC_BODY_REPLAYED);
    assert_string_equal(br[2].text, REPLAY_BYTES);
    assert_int_equal(br[3].calls, 1);
    assert_int_equal(br[3].out.cls, JRPC_BODY_OK);
    assert_string_equal(br[0].text + strlen(br[0].text) - 2, "}]");
    assert_int_equal(G.b->open, 0);
}

static void test_batched_claims(void **state)
{
    (void)state;
    batched_claims(false);
}

static void test_batched_claims_early(void **state)
{
    (void)state;
    batched_claims(true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_early_held_until_claimed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_early_replay_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_early_replays_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_early_redis_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mixed_waits_for_claim, setup, teardown),
        cmocka_unit_test_setup_teardown(test_limited_not_early, setup, teardown),
        cmocka_unit_test_setup_teardown(test_early_off, setup, teardown),
        cmocka_unit_test_setup_teardown(test_early_destroyed_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batched_claims, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batched_claims_early, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
