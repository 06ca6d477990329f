/* Tests of jrpc_replay_group (replay_fixture.h): several claims written as
 * one script and its answer split into a verdict per claim, a replay among
 * fresh nonces, the epoch lost under a batch, claims with a rate limit
 * grouped (issue 35) and failing together. */
#include "replay_fixture.h"

/* ---- several claims, one script ---------------------------------------- */

/* One reply parsed from RESP bytes by a reader with our object functions. */
static redisReply *reply_of(const char *resp, size_t n)
{
    assert_int_equal(init_reply_fns(), 0);
    redisReader *rd = redisReaderCreate();
    assert_non_null(rd);
    rd->fn = &reply_fns;
    assert_int_equal(redisReaderFeed(rd, resp, n), REDIS_OK);
    void *rep = NULL;
    assert_int_equal(redisReaderGetReply(rd, &rep), REDIS_OK);
    redisReaderFree(rd);
    assert_non_null(rep);
    return rep;
}

#define REPLY(lit) reply_of(lit, sizeof lit - 1)

/* multi_flags: exactly one '0' or '1' per claim, in a bulk string. */
static void test_multi_flags(void **state)
{
    (void)state;
    bool fresh[MULTI_MAX];
    redisReply *v = REPLY("$4\r\n1011\r\n");
    assert_int_equal(multi_flags(v, 4, fresh), 0);
    assert_true(fresh[0]);
    assert_false(fresh[1]);
    assert_true(fresh[2]);
    assert_true(fresh[3]);
    assert_int_equal(multi_flags(v, 3, fresh), -1);   /* answers 4 claims, not 3 or 5 */
    assert_int_equal(multi_flags(v, 5, fresh), -1);
    freeReplyObject(v);
    redisReply *bad[] = { REPLY("$4\r\n10x1\r\n"), REPLY("$4\r\n10\0001\r\n"), REPLY("+1011\r\n"),
                          REPLY(":1011\r\n"), REPLY("$-1\r\n"), REPLY("*1\r\n$4\r\n1011\r\n"),
                          REPLY("$4\r\n1 11\r\n") };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(multi_flags(bad[i], 4, fresh), -1);
        freeReplyObject(bad[i]);
    }
    v = REPLY("$0\r\n\r\n");
    assert_int_equal(multi_flags(v, 0, fresh), 0);
    freeReplyObject(v);
}

/* The long MULTI answer (claims with rate limits in the group): each claim
 * its verdict, and every answer that cannot be to these claims refused
 * (a flag the claim cannot have, a wait too many or too few, an epoch
 * without an 'E' or the other way round, a malformed wait). Pure. */
static void test_multi_verdicts(void **state)
{
    (void)state;
    pending_t c[3] = { { .nonce = true, .rate = true }, { .nonce = true }, { .rate = true } };
    c[0].next = &c[1];
    c[1].next = &c[2];
    int rc[3];
    static const struct { const char *bytes; int ok, rc0, rc1, rc2; uint64_t w0, w2; } cases[] = {
        { "$3\r\nL01\r\n$0\r\n\r\n$3\r\n250\r\n", 1, -EDQUOT, -EEXIST, 0, 250, 0 },
        { "$3\r\nEE1\r\n$3\r\nx:1\r\n$0\r\n\r\n", 1, -EAGAIN, -EAGAIN, 0, 0, 0 },
        { "$3\r\nL1L\r\n$0\r\n\r\n$5\r\n0 777\r\n", 1, -EDQUOT, 0, -EDQUOT, 1, 777 },
        { "$3\r\n110\r\n$0\r\n\r\n$0\r\n\r\n", 0, 0, 0, 0, 0, 0 },     /* '0': no nonce */
        { "$3\r\n1L1\r\n$0\r\n\r\n$1\r\n5\r\n", 0, 0, 0, 0, 0, 0 },    /* 'L': no rate */
        { "$3\r\nE11\r\n$0\r\n\r\n$0\r\n\r\n", 0, 0, 0, 0, 0, 0 },     /* 'E', no epoch */
        { "$3\r\n111\r\n$3\r\nx:1\r\n$0\r\n\r\n", 0, 0, 0, 0, 0, 0 },  /* an epoch, no 'E' */
        { "$3\r\nL01\r\n$0\r\n\r\n$0\r\n\r\n", 0, 0, 0, 0, 0, 0 },     /* a wait too few */
        { "$3\r\nL01\r\n$0\r\n\r\n$3\r\n1 2\r\n", 0, 0, 0, 0, 0, 0 },  /* a wait too many */
        { "$3\r\nL01\r\n$0\r\n\r\n$2\r\n 5\r\n", 0, 0, 0, 0, 0, 0 },
        { "$3\r\nL01\r\n$0\r\n\r\n$2\r\n5a\r\n", 0, 0, 0, 0, 0, 0 },
        { "$3\r\nL01\r\n$0\r\n\r\n$20\r\n12345678901234567890\r\n", 0, 0, 0, 0, 0, 0 },
        { "$2\r\n11\r\n$0\r\n\r\n$0\r\n\r\n", 0, 0, 0, 0, 0, 0 },
        { "$4\r\n1111\r\n$0\r\n\r\n$0\r\n\r\n", 0, 0, 0, 0, 0, 0 },
        { "$3\r\n1x1\r\n$0\r\n\r\n$0\r\n\r\n", 0, 0, 0, 0, 0, 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char bytes[200];
        snprintf(bytes, sizeof bytes, "*5\r\n$1\r\n1\r\n$5\r\nMULTI\r\n%s", cases[i].bytes);
        redisReply *rep = reply_of(bytes, strlen(bytes));
        assert_non_null(rep);
        c[0].wait_us = c[2].wait_us = 0;
        int got = multi_verdicts(rep, c, 3, rc);
        if (got != (cases[i].ok ? 0 : -1))
            fail_msg("case %zu: %d", i, got);
        if (cases[i].ok) {
            assert_int_equal(rc[0], cases[i].rc0);
            assert_int_equal(rc[1], cases[i].rc1);
            assert_int_equal(rc[2], cases[i].rc2);
            assert_int_equal(c[0].wait_us, cases[i].w0);
            assert_int_equal(c[2].wait_us, cases[i].w2);
        }
        freeReplyObject(rep);
    }
    /* Rate limits alone never read the epoch: any value passes with them. */
    pending_t r2[2] = { { .rate = true }, { .rate = true } };
    r2[0].next = &r2[1];
    redisReply *rep = REPLY("*5\r\n$1\r\n1\r\n$5\r\nMULTI\r\n$2\r\n1L\r\n$3\r\nx:1\r\n$1\r\n9\r\n");
    assert_int_equal(multi_verdicts(rep, r2, 2, rc), 0);
    assert_int_equal(rc[0], 0);
    assert_int_equal(rc[1], -EDQUOT);
    assert_int_equal(r2[1].wait_us, 9);
    freeReplyObject(rep);
}

/* handle_multi through the reply loop, on a module with a fake connection
 * (as the fuzz target builds it): every claim of a script gets one answer;
 * a reply that is not the script's answer (another tag, a flag count that
 * does not match, MULTI to a lone claim) drops the connection and fails
 * every claim closed, never a guess. */
typedef struct fake_mod {
    uv_loop_t      loop;
    jrpc_replay_t *r;
    conn_t        *conn;
    res_t          res[4];
} fake_mod_t;

static void fake_mod_start(fake_mod_t *m, size_t nclaims, bool multi)
{
    assert_int_equal(uv_loop_init(&m->loop), 0);
    char err[128];
    jrpc_replay_opts_t o = { .url = "redis://127.0.0.1:1", .window_s = WINDOW_S,
                             .timeout_ms = 1000 };
    m->r = jrpc_replay_new(&m->loop, &o, err, sizeof err);
    assert_non_null(m->r);
    m->conn = calloc(1, sizeof *m->conn);
    assert_non_null(m->conn);
    m->conn->rd = redisReaderCreate();
    m->conn->rd->fn = &reply_fns;
    m->r->conn = m->conn;
    m->r->up = m->r->had_epoch = true;
    snprintf(m->r->epoch, sizeof m->r->epoch, "00112233445566778899aabbccddeeff:0");
    m->r->next_tag = 7;
    pending_t *mp = multi ? pending_new(m->r, CMD_MULTI, NULL) : NULL;   /* tag 7 */
    pending_t **end = mp ? &mp->claims : NULL;
    for (size_t i = 0; i < nclaims; i++) {
        memset(&m->res[i], 0, sizeof m->res[i]);
        pending_t *p = pending_new(m->r, CMD_CLAIM, &m->res[i]);
        assert_non_null(p);
        p->cb = on_claim;
        p->nonce = true;
        p->ts = now_s();
        if (mp) {
            *end = p;
            end = &p->next;
            mp->nclaims++;
        } else {
            fifo_push(m->r, p);
        }
    }
    if (mp)
        fifo_push(m->r, mp);
}

static void fake_mod_feed(fake_mod_t *m, const char *resp, size_t n)
{
    redisReaderFeed(m->conn->rd, resp, n);
    process_replies(m->r, m->conn);   /* may drop (and free) conn */
}

static void fake_mod_stop(fake_mod_t *m)
{
    jrpc_replay_destroy(&m->r);
    uv_run(&m->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&m->loop), 0);
}

#define FEED(m, lit) fake_mod_feed(m, lit, sizeof lit - 1)

static void test_multi_answers(void **state)
{
    (void)state;
    fake_mod_t m;
    /* Three claims, the second a replay. */
    fake_mod_start(&m, 3, true);
    FEED(&m, "*3\r\n$1\r\n7\r\n$5\r\nMULTI\r\n$3\r\n101\r\n");
    assert_true(m.r->conn == m.conn);   /* still connected */
    int want[] = { 0, -EEXIST, 0 };
    for (int i = 0; i < 3; i++) {
        assert_int_equal(m.res[i].calls, 1);
        assert_int_equal(m.res[i].rc, want[i]);
    }
    jrpc_replay_stats_t st;
    jrpc_replay_stats(m.r, &st);
    assert_int_equal(st.claims, 2);
    assert_int_equal(st.replays, 1);
    fake_mod_stop(&m);

    /* The same reply one byte at a time: nobody is answered before its end. */
    static const char one[] = "*3\r\n$1\r\n7\r\n$5\r\nMULTI\r\n$3\r\n011\r\n";
    fake_mod_start(&m, 3, true);
    for (size_t i = 0; i + 1 < sizeof one - 1; i++) {
        fake_mod_feed(&m, one + i, 1);
        assert_int_equal(m.res[0].calls + m.res[1].calls + m.res[2].calls, 0);
    }
    fake_mod_feed(&m, one + sizeof one - 2, 1);
    assert_true(m.r->conn == m.conn);
    assert_int_equal(m.res[0].rc, -EEXIST);
    assert_int_equal(m.res[1].rc, 0);
    assert_int_equal(m.res[2].rc, 0);
    fake_mod_stop(&m);

    /* Not the answer: another tag, one flag too few, a bad flag, MULTI to
     * a lone claim, the lone claim's OK to a script of two. */
    static const struct { const char *resp; size_t nclaims; bool multi; } cases[] = {
        { "*3\r\n$1\r\n8\r\n$5\r\nMULTI\r\n$2\r\n11\r\n", 2, true },
        { "*3\r\n$1\r\n7\r\n$5\r\nMULTI\r\n$1\r\n1\r\n", 2, true },
        { "*3\r\n$1\r\n7\r\n$5\r\nMULTI\r\n$2\r\n1?\r\n", 2, true },
        { "*3\r\n$1\r\n7\r\n$5\r\nMULTI\r\n$1\r\n1\r\n", 1, false },
        { "*2\r\n$1\r\n7\r\n$2\r\nOK\r\n", 2, true },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        fake_mod_start(&m, cases[c].nclaims, cases[c].multi);
        fake_mod_feed(&m, cases[c].resp, strlen(cases[c].resp));
        assert_null(m.r->conn);   /* dropped: out of step */
        for (size_t i = 0; i < cases[c].nclaims; i++) {
            assert_int_equal(m.res[i].calls, 1);
            assert_int_equal(m.res[i].rc, -EAGAIN);
        }
        fake_mod_stop(&m);
    }

    /* An error reply: each claim fails closed, the connection stays (as for
     * one claim); NOSCRIPT drops it (the next connection loads the script). */
    fake_mod_start(&m, 2, true);
    FEED(&m, "-OOM command not allowed\r\n");
    assert_true(m.r->conn == m.conn);
    assert_int_equal(m.res[0].rc, -EAGAIN);
    assert_int_equal(m.res[1].rc, -EAGAIN);
    fake_mod_stop(&m);
    fake_mod_start(&m, 2, true);
    FEED(&m, "-NOSCRIPT No matching script\r\n");
    assert_null(m.r->conn);
    assert_int_equal(m.res[0].calls + m.res[1].calls, 2);
    assert_int_equal(m.res[1].rc, -EAGAIN);
    fake_mod_stop(&m);
}

/* Claims queued in one loop turn leave as one script; one replayed nonce
 * among fresh ones is refused alone, as is a nonce twice in the same
 * script; the same nonce under another key id is fresh. */
static void test_batch_replay_among_fresh(void **state)
{
    fx_t *f = *state;
    make_up_shared(f, 2000);
    assert_int_equal(claim_wait(&f->loop, f->r, "kb", "batch-used-before"), 0);

    static const struct { const char *key, *nonce; int rc; } claims[] = {
        { "kb", "batch-fresh-00", 0 },      { "kb", "batch-fresh-01", 0 },
        { "kb", "batch-used-before", -EEXIST }, { "kb", "batch-fresh-02", 0 },
        { "kb", "batch-fresh-00", -EEXIST }, { "kb2", "batch-used-before", 0 },
    };
    enum { N = sizeof claims / sizeof claims[0] };
    res_t res[N];
    long long scripts = commandstat(&shared, "evalsha");
    for (int i = 0; i < N; i++)
        assert_int_equal(claim_ts(f->r, claims[i].key, claims[i].nonce, now_s(), &res[i]), 0);
    for (int i = 0; i < N; i++)
        assert_true(run_until(&f->loop, res_done, &res[i], 5000));
    run_for(&f->loop, 5);
    for (int i = 0; i < N; i++) {
        assert_int_equal(res[i].calls, 1);
        assert_int_equal(res[i].rc, claims[i].rc);
    }
    assert_int_equal(commandstat(&shared, "evalsha") - scripts, 1);
    redisReply *rep = srv_cmd(&shared, "TTL jrpc:nonce:kb:batch-fresh-02");
    assert_true(rep->integer == 2 * WINDOW_S || rep->integer == 2 * WINDOW_S - 1);
    freeReplyObject(rep);
    assert_true(key_exists(&shared, "jrpc:nonce:kb2:batch-used-before"));
    jrpc_replay_stats_t st;
    jrpc_replay_stats(f->r, &st);
    assert_int_equal(st.claims, 5);
    assert_int_equal(st.replays, 2);

    /* More than a script takes: 150 claims in three scripts (64, 64, 22). */
    static res_t many[150];
    char nonce[32];
    scripts = commandstat(&shared, "evalsha");
    for (int i = 0; i < 150; i++) {
        snprintf(nonce, sizeof nonce, "batch-many-%03d", i);
        assert_int_equal(claim_ts(f->r, "kb", nonce, now_s(), &many[i]), 0);
    }
    for (int i = 0; i < 150; i++) {
        assert_true(run_until(&f->loop, res_done, &many[i], 5000));
        assert_int_equal(many[i].rc, 0);
    }
    assert_int_equal(commandstat(&shared, "evalsha") - scripts, 3);
}

/* Redis lost its memory: the script's one epoch check answers every claim
 * of it, as it would each alone (-ESTALE signed too early, -EAGAIN later),
 * and claims none. */
static void test_batch_epoch_lost(void **state)
{
    fx_t *f = *state;
    srv_start(&f->srv);
    char url[128];
    url_of(url, sizeof url, &f->srv, "", "");
    make_up(f, url, 1000);
    freeReplyObject(srv_cmd(&f->srv, "FLUSHALL"));
    int64_t now = now_s();
    res_t res[3];
    assert_int_equal(claim_ts(f->r, "ke", "epoch-a-0000000", now, &res[0]), 0);
    assert_int_equal(claim_ts(f->r, "ke", "epoch-b-0000000", now + 3 * WINDOW_S, &res[1]), 0);
    assert_int_equal(claim_ts(f->r, "ke", "epoch-c-0000000", now - 1, &res[2]), 0);
    for (int i = 0; i < 3; i++)
        assert_true(run_until(&f->loop, res_done, &res[i], 5000));
    assert_int_equal(res[0].rc, -ESTALE);
    assert_int_equal(res[1].rc, -EAGAIN);
    assert_int_equal(res[2].rc, -ESTALE);
    assert_int_equal(commandstat(&f->srv, "evalsha"), 1);
    assert_false(key_exists(&f->srv, "jrpc:nonce:ke:epoch-a-0000000"));
    assert_false(key_exists(&f->srv, "jrpc:nonce:ke:epoch-b-0000000"));
    assert_true(jrpc_replay_up(f->r));
}

/* ---- claims with a rate limit, grouped (issue 35) ------------------------ */

typedef struct ares {
    int      rc;
    int      calls;
    uint64_t wait_us;
} ares_t;

static void on_admit(void *arg, int rc, uint64_t wait_us)
{
    assert_false(in_claim);
    ares_t *a = arg;
    a->rc = rc;
    a->wait_us = wait_us;
    a->calls++;
}

static bool ares_done(void *ctx)
{
    return ((ares_t *)ctx)->calls > 0;
}

/* One claim through jrpc_replay_admit: nonce "" for none, who NULL for no
 * rate limit; 10 calls/s, a burst of 2, each claim costing one call. */
static int admit_one(jrpc_replay_t *r, const char *key, const char *nonce, const char *who,
                     int64_t ts, ares_t *a)
{
    jrpc_replay_rate_t rr = { .who = { who, who ? strlen(who) : 0 },
                              .cost_us = 100000, .burst_us = 200000 };
    memset(a, 0, sizeof *a);
    a->rc = 1;
    in_claim = true;
    int rc = jrpc_replay_admit(r, (jrpc_span_t){ key, strlen(key) },
                               (jrpc_span_t){ nonce, strlen(nonce) }, ts, who ? &rr : NULL,
                               on_admit, a);
    in_claim = false;
    return rc;
}

/* The claims of one loop turn with rate limits among them leave as ONE
 * script, each answered as it would be alone: passed, over its rate (its
 * nonce released, the wait given), a replay (the rate not charged), a
 * nonce twice in the group refused the second time only, a rate limit
 * alone, a nonce alone. */
static void test_batch_rates(void **state)
{
    fx_t *f = *state;
    make_up_shared(f, 2000);
    assert_int_equal(claim_wait(&f->loop, f->r, "kr", "rate-used-before"), 0);
    static const struct { const char *nonce, *who; int rc; } claims[] = {
        { "rate-a", "kr", 0 },          { "rate-b", "kr", 0 },
        { "rate-c", "kr", -EDQUOT },    /* the third within the burst of 2 */
        { "rate-used-before", "kr", -EEXIST }, { "rate-a", "kr2", -EEXIST },
        { "", "addr:192.0.2.7", 0 },    { "rate-d", NULL, 0 },
        { "rate-e", "kr3", 0 },
    };
    enum { N = sizeof claims / sizeof claims[0] };
    ares_t res[N];
    long long scripts = commandstat(&shared, "evalsha");
    for (int i = 0; i < N; i++)
        assert_int_equal(admit_one(f->r, "kr", claims[i].nonce, claims[i].who, now_s(), &res[i]), 0);
    for (int i = 0; i < N; i++)
        assert_true(run_until(&f->loop, ares_done, &res[i], 5000));
    run_for(&f->loop, 5);
    for (int i = 0; i < N; i++) {
        assert_int_equal(res[i].calls, 1);
        if (res[i].rc != claims[i].rc)
            fail_msg("claim %d: rc %d, expected %d", i, res[i].rc, claims[i].rc);
    }
    assert_int_equal(commandstat(&shared, "evalsha") - scripts, 1);
    assert_true(res[2].wait_us > 0 && res[2].wait_us <= 100000);
    assert_false(key_exists(&shared, "jrpc:nonce:kr:rate-c"));   /* released: it ran nowhere */
    assert_true(key_exists(&shared, "jrpc:nonce:kr:rate-e"));
    assert_true(key_exists(&shared, "jrpc:rate:addr:192.0.2.7"));
    assert_true(key_exists(&shared, "jrpc:rate:kr3"));
    assert_false(key_exists(&shared, "jrpc:rate:kr2"));          /* a replay costs its key nothing */
    jrpc_replay_stats_t st;
    jrpc_replay_stats(f->r, &st);
    assert_int_equal(st.limited, 1);
}

/* A group with rate limits that Redis answers with an error, or not at all
 * (frozen: --redis-timeout-ms), fails every body of it with -EAGAIN, once
 * each, and claims nothing. */
static void test_batch_rates_fail(void **state)
{
    fx_t *f = *state;
    srv_start(&f->srv);
    char url[128];
    url_of(url, sizeof url, &f->srv, "", "");
    make_up(f, url, 300);
    ares_t res[4];
    char nonce[32];

    freeReplyObject(srv_cmd(&f->srv, "CONFIG SET maxmemory 1"));   /* every write: -OOM */
    long long scripts = commandstat(&f->srv, "evalsha");
    for (int i = 0; i < 4; i++) {
        snprintf(nonce, sizeof nonce, "oom-%d", i);
        assert_int_equal(admit_one(f->r, "ko", i == 3 ? "" : nonce, i == 0 ? NULL : "ko",
                                   now_s(), &res[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        assert_true(run_until(&f->loop, ares_done, &res[i], 5000));
    run_for(&f->loop, 5);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(res[i].calls, 1);
        assert_int_equal(res[i].rc, -EAGAIN);
    }
    assert_int_equal(commandstat(&f->srv, "evalsha") - scripts, 1);
    freeReplyObject(srv_cmd(&f->srv, "CONFIG SET maxmemory 0"));
    assert_false(key_exists(&f->srv, "jrpc:nonce:ko:oom-1"));
    assert_false(key_exists(&f->srv, "jrpc:rate:ko"));
    assert_true(jrpc_replay_up(f->r));

    kill(f->srv.pid, SIGSTOP);
    for (int i = 0; i < 4; i++) {
        snprintf(nonce, sizeof nonce, "frozen-rate-%d", i);
        assert_int_equal(admit_one(f->r, "ko", i == 3 ? "" : nonce, i == 0 ? NULL : "ko",
                                   now_s(), &res[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        assert_true(run_until(&f->loop, ares_done, &res[i], 5000));
    run_for(&f->loop, 5);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(res[i].calls, 1);
        assert_int_equal(res[i].rc, -EAGAIN);
    }
    kill(f->srv.pid, SIGCONT);
    assert_true(run_until(&f->loop, is_up, f->r, 6000));
}

int main(void)
{
    jrpc_log_init("test_jrpc_replay_group");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_multi_flags),
        cmocka_unit_test(test_multi_answers),
        cmocka_unit_test(test_multi_verdicts),
        cmocka_unit_test_setup_teardown(test_batch_replay_among_fresh, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_epoch_lost, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_rates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_rates_fail, setup, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
