/* Tests of jrpc_replay's link and nonce claims against real redis-server
 * processes (replay_fixture.h): the claim command's bytes, bad URLs,
 * fresh/replay/TTL, 1000 claims in flight, Redis killed and restarted,
 * Redis frozen (SIGSTOP), AUTH, SELECT, a unix socket, nothing listening,
 * destroying from a callback, claiming from one, and an unsolicited reply
 * through a fault proxy. Every wait runs the loop under a deadline. */
#include "replay_fixture.h"

/* ---- tests --------------------------------------------------------------- */

/* resp_format (the claims' command, written without hiredis' formatter)
 * gives the very bytes of hiredis' redisFormatCommandArgv: random argument
 * vectors of binary bytes, empty strings and lengths across digit counts,
 * and the longest claim script (MULTI_MAX nonce keys of the longest key
 * id and nonce, the longest epoch and proposal), which must fit
 * BATCH_CMD_MAX. A buffer one byte short is refused. */
static void test_resp_format_as_hiredis(void **state)
{
    (void)state;
    static char pool[20000], out[BATCH_CMD_MAX];
    const char *argv[4 + MULTI_MAX + 5];
    size_t lens[4 + MULTI_MAX + 5];
    unsigned seed = 12345;
    for (size_t i = 0; i < sizeof pool; i++)
        pool[i] = (char)(rand_r(&seed) & 0xff);
    for (int round = 0; round < 500; round++) {
        int argc = 1 + rand_r(&seed) % 12;
        for (int i = 0; i < argc; i++) {
            static const size_t sizes[] = { 0, 1, 9, 10, 99, 100, 999, 1000, 1400 };
            lens[i] = rand_r(&seed) % 3 ? (size_t)(rand_r(&seed) % 200)
                                        : sizes[rand_r(&seed) % 9];
            argv[i] = pool + rand_r(&seed) % (sizeof pool - lens[i]);
        }
        char *want = NULL;
        long long wn = redisFormatCommandArgv(&want, argc, argv, lens);
        assert_true(wn > 0);
        size_t n = resp_format(out, sizeof out, argc, argv, lens);
        assert_int_equal(n, (size_t)wn);
        assert_memory_equal(out, want, n);
        redisFreeCommand(want);
    }
    /* The longest claim script. */
    static char nkey[NKEY_MAX], epoch[EPOCH_MAX], sha[40];
    memset(nkey, 'k', sizeof nkey);
    memset(epoch, 'e', sizeof epoch);
    memset(sha, 'f', sizeof sha);
    int argc = 0;
    argv[argc] = "EVALSHA", lens[argc++] = 7;
    argv[argc] = sha, lens[argc++] = sizeof sha;
    argv[argc] = "65", lens[argc++] = 2;
    argv[argc] = EPOCH_KEY, lens[argc++] = sizeof EPOCH_KEY - 1;
    for (int i = 0; i < MULTI_MAX; i++)
        argv[argc] = nkey, lens[argc++] = sizeof nkey;
    argv[argc] = epoch, lens[argc++] = sizeof epoch;
    argv[argc] = epoch, lens[argc++] = sizeof epoch;
    argv[argc] = "18446744073709551615", lens[argc++] = 20;
    argv[argc] = "18446744073709551615", lens[argc++] = 20;
    argv[argc] = "m", lens[argc++] = 1;
    char *want = NULL;
    long long wn = redisFormatCommandArgv(&want, argc, argv, lens);
    size_t n = resp_format(out, sizeof out, argc, argv, lens);
    assert_int_equal(n, (size_t)wn);
    assert_memory_equal(out, want, n);
    redisFreeCommand(want);
    /* Refused, not overrun, when the buffer is short of resp_format's bound. */
    assert_int_equal(resp_format(out, 10, 1, argv, lens), 0);
    char u[24];
    size_t un = put_u64(u, UINT64_MAX);
    assert_int_equal(un, 20);
    assert_memory_equal(u, "18446744073709551615", 20);
    assert_int_equal(put_u64(u, 0), 1);
    assert_int_equal(u[0], '0');
}

static void test_bad_urls(void **state)
{
    fx_t *f = *state;
    static const char *const bad[] = {
        "http://x", "redis://host:0", "redis://host:99999", "redis://host:6379/x",
        "redis://host", "redis://:6379", "redis://host:", "redis://host:6a", "redis://host:-1",
        "redis://user@host:6379", "redis://user:@host:6379", "redis://host:6379/1x",
        "redis://::1:6379", "redis://[::1:6379", "redis://:pw%zz@host:1", "unix://", "unix://rel.sock",
        "rediss://host:6379", "redis://host:6379?db=1", "", "redis://ho st:1",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[256] = "";
        jrpc_replay_opts_t o = { .url = bad[i], .window_s = 30, .timeout_ms = 200 };
        jrpc_replay_t *r = jrpc_replay_new(&f->loop, &o, err, sizeof err);
        if (r != NULL)
            fail_msg("accepted bad URL '%s'", bad[i]);
        assert_true(strlen(err) > 10);
        assert_non_null(strstr(err, "--redis"));
    }
    /* The message never repeats a password. */
    char err[256] = "";
    jrpc_replay_opts_t o = { .url = "redis://:topsecret@host:0", .window_s = 30, .timeout_ms = 200 };
    assert_null(jrpc_replay_new(&f->loop, &o, err, sizeof err));
    assert_null(strstr(err, "topsecret"));
    /* Zero window or timeout. */
    o.url = "redis://127.0.0.1:6379";
    o.window_s = 0;
    assert_null(jrpc_replay_new(&f->loop, &o, err, sizeof err));
    o.window_s = 30;
    o.timeout_ms = 0;
    assert_null(jrpc_replay_new(&f->loop, &o, err, sizeof err));

    static const char *const good[] = {
        "redis://127.0.0.1:6379", "redis://localhost:1/", "redis://u:p@h:65535/15",
        "redis://:p%40ss@h:1/0", "redis://[::1]:6379/2", "unix:///tmp/redis.sock",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        o = (jrpc_replay_opts_t){ .url = good[i], .window_s = 30, .timeout_ms = 200 };
        jrpc_replay_t *r = jrpc_replay_new(&f->loop, &o, err, sizeof err);
        if (r == NULL)
            fail_msg("rejected good URL '%s': %s", good[i], err);
        assert_false(jrpc_replay_up(r));
        jrpc_replay_destroy(&r);
    }
}

static void test_fresh_replay_ttl(void **state)
{
    fx_t *f = *state;
    make_up_shared(f, 1000);

    assert_int_equal(claim_wait(&f->loop, f->r, "k1", "n-fresh"), 0);
    assert_int_equal(claim_wait(&f->loop, f->r, "k1", "n-fresh"), -EEXIST);
    assert_int_equal(claim_wait(&f->loop, f->r, "k2", "n-fresh"), 0);

    redisReply *rep = srv_cmd(&shared, "TTL jrpc:nonce:k1:n-fresh");
    assert_int_equal(rep->type, REDIS_REPLY_INTEGER);
    /* TTL rounds to the second: 2 × window unless the host stalled. */
    assert_true(rep->integer == 2 * WINDOW_S || rep->integer == 2 * WINDOW_S - 1);
    freeReplyObject(rep);

    /* Spans are binary-safe and need no NUL: "key\0 x" / "no nce:1" inside larger buffers. */
    static const char kb[] = "key\0 xTRAILING", nb[] = "no nce:1TRAILING";
    res_t res = { 0 };
    in_claim = true;
    assert_int_equal(jrpc_replay_claim(f->r, (jrpc_span_t){ kb, 6 }, (jrpc_span_t){ nb, 8 },
                                       now_s(), on_claim, &res), 0);
    in_claim = false;
    assert_true(run_until(&f->loop, res_done, &res, 5000));
    assert_int_equal(res.rc, 0);
    rep = srv_cmd(&shared, "EXISTS %b", "jrpc:nonce:key\0 x:no nce:1", (size_t)26);
    assert_int_equal(rep->integer, 1);
    freeReplyObject(rep);

    jrpc_replay_stats_t st;
    jrpc_replay_stats(f->r, &st);
    assert_int_equal(st.claims, 3);
    assert_int_equal(st.replays, 1);
    assert_int_equal(st.failures, 0);
    assert_int_equal(st.rtt_count, 4);
    assert_true(st.rtt_us_sum > 0);
}

#define MANY 1000

static bool all_done(void *ctx)
{
    res_t *res = ctx;
    for (int i = 0; i < MANY; i++)
        if (res[i].calls == 0)
            return false;
    return true;
}

static void test_many_in_flight(void **state)
{
    fx_t *f = *state;
    make_up_shared(f, 2000);

    static res_t res[MANY];
    char nonce[32];
    for (int i = 0; i < MANY; i++) {
        snprintf(nonce, sizeof nonce, "many-%d", i);
        assert_int_equal(claim_now(f->r, "kmany", nonce, &res[i]), 0);
    }
    assert_true(run_until(&f->loop, all_done, res, 10000));
    run_for(&f->loop, 20);
    for (int i = 0; i < MANY; i++) {
        assert_int_equal(res[i].calls, 1);
        assert_int_equal(res[i].rc, 0);
    }
    jrpc_replay_stats_t st;
    jrpc_replay_stats(f->r, &st);
    assert_int_equal(st.claims, MANY);
}

static void test_killed_and_restarted(void **state)
{
    fx_t *f = *state;
    srv_start(&f->srv);
    char url[128];
    url_of(url, sizeof url, &f->srv, "", "");
    make_up(f, url, 500);
    assert_int_equal(claim_wait(&f->loop, f->r, "kk", "before"), 0);

    /* A claim in flight when Redis dies. */
    res_t res;
    assert_int_equal(claim_now(f->r, "kk", "inflight", &res), 0);
    kill(f->srv.pid, SIGKILL);
    waitpid(f->srv.pid, NULL, 0);
    f->srv.pid = 0;
    assert_true(run_until(&f->loop, res_done, &res, 3000));
    assert_int_equal(res.rc, -EAGAIN);
    run_for(&f->loop, 50);
    assert_int_equal(res.calls, 1);

    /* While down: never 0, at once or via the callback. */
    int rc = claim_wait(&f->loop, f->r, "kk", "while-down");
    assert_int_equal(rc, -EAGAIN);
    assert_false(jrpc_replay_up(f->r));
    run_for(&f->loop, 500);
    assert_int_equal(claim_wait(&f->loop, f->r, "kk", "while-down-2"), -EAGAIN);

    /* Back on the same port, empty (no persistence): the same module
     * recovers by itself, notices the lost epoch, and refuses the body
     * claimed before the restart and anything else signed before the loss
     * plus the window; a body signed after that passes, once. */
    srv_start(&f->srv);
    assert_true(run_until(&f->loop, is_up, f->r, 6000));
    int64_t t = now_s();
    assert_int_equal(claim_wait_ts(&f->loop, f->r, "kk", "before", t), -ESTALE);
    assert_int_equal(claim_wait(&f->loop, f->r, "kk", "after"), -ESTALE);
    assert_true(jrpc_replay_refuse_to(f->r) >= t + WINDOW_S - 2);
    assert_true(jrpc_replay_refuse_to(f->r) <= now_s() + WINDOW_S);
    int64_t later = jrpc_replay_refuse_to(f->r) + 1;
    assert_int_equal(claim_wait_ts(&f->loop, f->r, "kk", "after", later), 0);
    assert_int_equal(claim_wait_ts(&f->loop, f->r, "kk", "after", later), -EEXIST);
    redisReply *rep = srv_cmd(&f->srv, "EXISTS jrpc:nonce:kk:before");
    assert_int_equal(rep->integer, 0);   /* refused before Redis */
    freeReplyObject(rep);

    jrpc_replay_stats_t st;
    jrpc_replay_stats(f->r, &st);
    assert_true(st.reconnects >= 1);
    assert_true(st.failures >= 3);
    assert_int_equal(st.epoch_changes, 1);
    assert_int_equal(st.stale, 2);
}

static void test_frozen_redis_times_out(void **state)
{
    fx_t *f = *state;
    srv_start(&f->srv);
    char url[128];
    url_of(url, sizeof url, &f->srv, "", "");
    make_up(f, url, 200);
    assert_int_equal(claim_wait(&f->loop, f->r, "kf", "before"), 0);

    kill(f->srv.pid, SIGSTOP);
    res_t res[3];
    uint64_t t0 = uv_hrtime();
    for (int i = 0; i < 3; i++) {
        char nonce[16];
        snprintf(nonce, sizeof nonce, "frozen-%d", i);
        assert_int_equal(claim_now(f->r, "kf", nonce, &res[i]), 0);
    }
    assert_true(run_until(&f->loop, res_done, &res[2], 3000));
    for (int i = 0; i < 3; i++) {
        assert_int_equal(res[i].calls, 1);
        assert_int_equal(res[i].rc, -EAGAIN);
    }
    uint64_t ms = (res[0].at - t0) / 1000000;
    if (ms < 190 || ms > 1000)
        fail_msg("timed out after %llu ms, expected about 200", (unsigned long long)ms);
    assert_false(jrpc_replay_up(f->r));
    /* Fail closed while frozen: reconnects connect (the kernel accepts)
     * but the handshake is never answered. */
    run_for(&f->loop, 400);
    assert_false(jrpc_replay_up(f->r));
    assert_int_equal(claim_wait(&f->loop, f->r, "kf", "frozen-x"), -EAGAIN);

    kill(f->srv.pid, SIGCONT);
    assert_true(run_until(&f->loop, is_up, f->r, 6000));
    assert_int_equal(claim_wait(&f->loop, f->r, "kf", "thawed"), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(res[i].calls, 1);
}

static void test_auth(void **state)
{
    fx_t *f = *state;
    snprintf(f->srv.pass, sizeof f->srv.pass, "secretpw");
    srv_start(&f->srv);
    char url[128];

    url_of(url, sizeof url, &f->srv, ":secretpw@", "");
    make_up(f, url, 1000);
    assert_int_equal(claim_wait(&f->loop, f->r, "ka", "pw-only"), 0);
    jrpc_replay_destroy(&f->r);

    url_of(url, sizeof url, &f->srv, "default:secret%70w@", "");   /* %70 = 'p' */
    make_up(f, url, 1000);
    assert_int_equal(claim_wait(&f->loop, f->r, "ka", "user-pw"), 0);
    assert_int_equal(claim_wait(&f->loop, f->r, "ka", "pw-only"), -EEXIST);
    jrpc_replay_destroy(&f->r);

    capture_t cap;
    capture_start(&cap);
    url_of(url, sizeof url, &f->srv, ":wrongpw@", "");
    f->r = make(f, url, 1000);
    run_for(&f->loop, 600);
    int rc = claim_wait(&f->loop, f->r, "ka", "wrong");
    bool up = jrpc_replay_up(f->r);
    char *log = capture_end(&cap);
    assert_int_equal(rc, -EAGAIN);
    assert_false(up);
    assert_non_null(strstr(log, "event=auth_failed"));
    assert_non_null(strstr(log, "comp=replay"));
    assert_null(strstr(log, "wrongpw"));
    assert_null(strstr(log, "secretpw"));
    free(log);
}

static void test_select_db(void **state)
{
    fx_t *f = *state;
    char url[128];
    url_of(url, sizeof url, &shared, "", "/3");
    make_up(f, url, 1000);
    assert_int_equal(claim_wait(&f->loop, f->r, "kdb", "n1"), 0);
    redisReply *rep = srv_cmd(&shared, "EXISTS jrpc:nonce:kdb:n1");
    assert_int_equal(rep->integer, 0);   /* not in db 0 */
    freeReplyObject(rep);
    redisContext *c = srv_connect(&shared);
    assert_non_null(c);
    freeReplyObject(redisCommand(c, "SELECT 3"));
    rep = redisCommand(c, "TTL jrpc:nonce:kdb:n1");
    assert_true(rep->integer == 2 * WINDOW_S || rep->integer == 2 * WINDOW_S - 1);
    freeReplyObject(rep);
    redisFree(c);
}

static void test_unix_socket(void **state)
{
    fx_t *f = *state;
    snprintf(f->srv.sock, sizeof f->srv.sock, "/tmp/jrpc-replay-%d.sock", (int)getpid());
    srv_start(&f->srv);
    char url[160];
    snprintf(url, sizeof url, "unix://%s", f->srv.sock);
    make_up(f, url, 1000);
    assert_int_equal(claim_wait(&f->loop, f->r, "ku", "n1"), 0);
    assert_int_equal(claim_wait(&f->loop, f->r, "ku", "n1"), -EEXIST);
}

static void test_nothing_listening(void **state)
{
    fx_t *f = *state;
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", free_port());
    f->r = make(f, url, 200);
    assert_int_equal(claim_wait(&f->loop, f->r, "kn", "n1"), -EAGAIN);
    run_for(&f->loop, 1000);
    assert_false(jrpc_replay_up(f->r));
    jrpc_replay_stats_t st;
    jrpc_replay_stats(f->r, &st);
    assert_true(st.reconnects >= 2);   /* 100 ms, 200 ms, 400 ms ... */
    assert_true(st.failures >= 1);
}

static void test_destroy_cancels(void **state)
{
    fx_t *f = *state;
    make_up_shared(f, 1000);
    res_t res[10];
    for (int i = 0; i < 10; i++) {
        char nonce[16];
        snprintf(nonce, sizeof nonce, "cancel-%d", i);
        assert_int_equal(claim_now(f->r, "kc", nonce, &res[i]), 0);
    }
    jrpc_replay_destroy(&f->r);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(res[i].calls, 1);
        assert_int_equal(res[i].rc, -ECANCELED);
    }
    run_for(&f->loop, 20);
    for (int i = 0; i < 10; i++)
        assert_int_equal(res[i].calls, 1);
}

/* A callback that destroys the module from inside a hiredis reply callback. */
typedef struct reentry {
    jrpc_replay_t **rp;
    res_t           res[3];
    int             calls;
} reentry_t;

static void on_claim_destroy(void *arg, int rc)
{
    reentry_t *re = arg;
    re->res[re->calls++].rc = rc;
    if (*re->rp != NULL)
        jrpc_replay_destroy(re->rp);
}

static bool reentry_done(void *ctx)
{
    return ((reentry_t *)ctx)->calls >= 3;
}

static void test_destroy_from_callback(void **state)
{
    fx_t *f = *state;
    make_up_shared(f, 1000);
    reentry_t re = { .rp = &f->r };
    for (int i = 0; i < 3; i++) {
        char nonce[16];
        snprintf(nonce, sizeof nonce, "reent-%d", i);
        assert_int_equal(jrpc_replay_claim(f->r, (jrpc_span_t){ "kr", 2 },
                                           (jrpc_span_t){ nonce, strlen(nonce) },
                                           now_s(), on_claim_destroy, &re), 0);
    }
    assert_true(run_until(&f->loop, reentry_done, &re, 3000));
    assert_null(f->r);
    assert_int_equal(re.res[0].rc, 0);
    assert_int_equal(re.res[1].rc, -ECANCELED);
    assert_int_equal(re.res[2].rc, -ECANCELED);
    run_for(&f->loop, 20);
    assert_int_equal(re.calls, 3);
}

/* A callback that claims again, from inside a hiredis reply callback. */
typedef struct chain {
    jrpc_replay_t *r;
    int            left;   /* claims still to make */
    int            calls;
    int            bad;    /* callbacks with rc != 0 */
} chain_t;

static void on_chain(void *arg, int rc)
{
    assert_false(in_claim);
    chain_t *c = arg;
    c->calls++;
    c->bad += rc != 0;
    if (c->left-- > 0) {
        char nonce[24];
        snprintf(nonce, sizeof nonce, "chain-%d", c->left);
        in_claim = true;
        int crc = jrpc_replay_claim(c->r, (jrpc_span_t){ "kch", 3 },
                                    (jrpc_span_t){ nonce, strlen(nonce) }, now_s(), on_chain, c);
        in_claim = false;
        assert_int_equal(crc, 0);
    }
}

static bool chain_done(void *ctx)
{
    return ((chain_t *)ctx)->calls == 51;
}

static void test_claim_from_callback(void **state)
{
    fx_t *f = *state;
    make_up_shared(f, 1000);
    chain_t c = { .r = f->r, .left = 50 };
    assert_int_equal(jrpc_replay_claim(f->r, (jrpc_span_t){ "kch", 3 }, (jrpc_span_t){ "first", 5 },
                                       now_s(), on_chain, &c), 0);
    assert_true(run_until(&f->loop, chain_done, &c, 5000));
    run_for(&f->loop, 20);
    assert_int_equal(c.calls, 51);
    assert_int_equal(c.bad, 0);
}

static void test_select_fails(void **state)
{
    fx_t *f = *state;
    char url[128];
    url_of(url, sizeof url, &shared, "", "/999");   /* Redis has 16 databases by default */
    capture_t cap;
    capture_start(&cap);
    f->r = make(f, url, 1000);
    run_for(&f->loop, 300);
    int rc = claim_wait(&f->loop, f->r, "ks", "n1");
    bool up = jrpc_replay_up(f->r);
    char *log = capture_end(&cap);
    assert_int_equal(rc, -EAGAIN);
    assert_false(up);
    assert_non_null(strstr(log, "event=select_failed"));
    free(log);
}

/* ---- a fault proxy: one unsolicited reply ---------------------------------- */

typedef struct proxy {
    acceptor_t   acc;        /* each connection proxied in a thread of its own */
    int          port;       /* its port */
    int          upstream;   /* Redis port */
    atomic_int   inject;     /* 1: put "+OK\r\n" before the next bytes from Redis;
                                2: send it now, unasked */
} proxy_t;

static void proxy_serve(void *owner, int c)
{
    proxy_t *px = owner;
    int u = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)px->upstream),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (connect(u, (struct sockaddr *)&a, sizeof a) < 0) {
        close(c);
        close(u);
        return;
    }
    for (;;) {
        if (atomic_load(&px->acc.stop))
            break;
        /* Taken in one step: another connection's thread may see it too. */
        int unasked = 2;
        if (atomic_compare_exchange_strong(&px->inject, &unasked, 0) && write(c, "+OK\r\n", 5) != 5)
            break;
        struct pollfd p[2] = { { c, POLLIN, 0 }, { u, POLLIN, 0 } };
        if (poll(p, 2, 20) < 0)
            break;
        char buf[65536];
        if (p[0].revents) {
            ssize_t n = read(c, buf, sizeof buf);
            if (n <= 0 || write(u, buf, (size_t)n) != n)
                break;
        }
        if (p[1].revents) {
            ssize_t n = read(u, buf, sizeof buf);
            if (n <= 0)
                break;
            if (atomic_exchange(&px->inject, 0) == 1 && write(c, "+OK\r\n", 5) != 5)
                break;
            if (write(c, buf, (size_t)n) != n)
                break;
        }
    }
    close(c);
    close(u);
}

static void proxy_start(proxy_t *px, int upstream)
{
    memset(px, 0, sizeof *px);
    px->upstream = upstream;
    acceptor_start(&px->acc, bind_loopback(0, &px->port), ACCEPTOR_MAX_CONNS, proxy_serve, px);
}

static void proxy_stop(proxy_t *px)
{
    acceptor_stop(&px->acc);
}

static bool res3_done(void *ctx)
{
    res_t *res = ctx;
    return res[0].calls && res[1].calls && res[2].calls;
}

/* One extra "+OK" before a real reply, then one with nothing asked: the
 * module (hiredis' async API used to assert and abort here) drops the
 * connection, fails the claims in flight closed, reconnects, and serves
 * again; a nonce never reads as fresh because of the extra reply. */
static void test_unsolicited_reply(void **state)
{
    fx_t *f = *state;
    srv_start(&f->srv);
    proxy_t px;
    proxy_start(&px, f->srv.port);
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", px.port);
    make_up(f, url, 1000);
    assert_int_equal(claim_wait(&f->loop, f->r, "kp", "seen"), 0);

    capture_t cap;
    capture_start(&cap);
    atomic_store(&px.inject, 1);
    res_t res[3];
    /* a replay: must never read OK */
    assert_int_equal(claim_now(f->r, "kp", "seen", &res[0]), 0);
    assert_int_equal(claim_now(f->r, "kp", "d1", &res[1]), 0);
    assert_int_equal(claim_now(f->r, "kp", "d2", &res[2]), 0);
    assert_true(run_until(&f->loop, res3_done, res, 5000));
    run_for(&f->loop, 20);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(res[i].calls, 1);
        assert_int_equal(res[i].rc, -EAGAIN);
    }
    assert_true(run_until(&f->loop, is_up, f->r, 5000));
    assert_int_equal(claim_wait(&f->loop, f->r, "kp", "seen"), -EEXIST);
    assert_int_equal(claim_wait(&f->loop, f->r, "kp", "after-1"), 0);

    /* Unasked, while idle. */
    atomic_store(&px.inject, 2);
    run_for(&f->loop, 300);
    assert_true(run_until(&f->loop, is_up, f->r, 5000));
    assert_int_equal(claim_wait(&f->loop, f->r, "kp", "after-2"), 0);
    char *log = capture_end(&cap);
    assert_non_null(strstr(log, "event=desync"));
    assert_true(atomic_load(&px.acc.accepts) >= 3);
    free(log);
    jrpc_replay_destroy(&f->r);
    uv_run(&f->loop, UV_RUN_NOWAIT);
    proxy_stop(&px);
}

int main(void)
{
    jrpc_log_init("test_jrpc_replay");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_bad_urls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fresh_replay_ttl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_killed_and_restarted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_frozen_redis_times_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_auth, setup, teardown),
        cmocka_unit_test_setup_teardown(test_select_db, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unix_socket, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nothing_listening, setup, teardown),
        cmocka_unit_test_setup_teardown(test_destroy_cancels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_destroy_from_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_claim_from_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_select_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unsolicited_reply, setup, teardown),
        cmocka_unit_test(test_resp_format_as_hiredis),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
