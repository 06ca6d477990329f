/* Tests of jrpc_replay when Redis loses its memory (replay_fixture.h): the
 * epoch that fences it off (FLUSHALL, an epoch from the future), the claim
 * scripts flushed from the script cache (nonces and idempotency keys). */
#include "replay_fixture.h"

/* ---- Redis losing its memory ---------------------------------------------- */

static char *epoch_value(const redis_srv_t *s)
{
    redisReply *rep = srv_cmd(s, "GET jrpc:epoch");
    char *v = rep->type == REDIS_REPLY_STRING ? strdup(rep->str) : NULL;
    freeReplyObject(rep);
    return v;
}

/* FLUSHALL: the captured body (claimed before) and anything signed up to
 * loss + window is refused, by this broker and by one started later; a
 * body signed after passes once; two brokers converge on one epoch. */
static void test_flushall(void **state)
{
    fx_t *f = *state;
    srv_start(&f->srv);
    char url[128];
    url_of(url, sizeof url, &f->srv, "", "");
    make_up(f, url, 1000);
    /* A Redis with no epoch at the first connect counts as new. */
    assert_true(jrpc_replay_refuse_to(f->r) == INT64_MIN);
    char *e0 = epoch_value(&f->srv);
    assert_non_null(e0);
    assert_non_null(strstr(e0, ":0"));
    int64_t t0 = now_s();
    assert_int_equal(claim_wait_ts(&f->loop, f->r, "kf", "captured", t0), 0);
    assert_int_equal(claim_wait_ts(&f->loop, f->r, "kf", "captured", t0), -EEXIST);

    /* A second broker, up before the loss. */
    char err[256];
    jrpc_replay_opts_t o = { .url = url, .window_s = WINDOW_S, .timeout_ms = 1000 };
    jrpc_replay_t *r2 = jrpc_replay_new(&f->loop, &o, err, sizeof err);
    assert_non_null(r2);
    assert_true(run_until(&f->loop, is_up, r2, 5000));

    freeReplyObject(srv_cmd(&f->srv, "FLUSHALL"));
    int64_t t_flush = now_s();
    /* The replay of the captured body: refused, and never claimed. */
    assert_int_equal(claim_wait_ts(&f->loop, f->r, "kf", "captured", t0), -ESTALE);
    redisReply *rep = srv_cmd(&f->srv, "EXISTS jrpc:nonce:kf:captured");
    assert_int_equal(rep->integer, 0);
    freeReplyObject(rep);
    /* Now known: refused at once, no round trip. */
    res_t res;
    assert_int_equal(claim_now(f->r, "kf", "fresh-now", &res), -ESTALE);
    assert_int_equal(res.calls, 0);
    int64_t until = jrpc_replay_refuse_to(f->r);
    assert_true(until >= t_flush + WINDOW_S && until <= now_s() + WINDOW_S);
    assert_true(jrpc_replay_lost_at(f->r) >= t_flush);
    char *e1 = epoch_value(&f->srv);
    assert_non_null(e1);
    assert_string_not_equal(e0, e1);

    /* The second broker notices on its next claim, and takes the same epoch. */
    assert_int_equal(claim_wait_ts(&f->loop, r2, "kf", "captured", t0), -ESTALE);
    assert_int_equal(jrpc_replay_refuse_to(r2), until);
    char *e2 = epoch_value(&f->srv);
    assert_string_equal(e1, e2);

    /* A broker started after the loss learns it from the epoch's time. */
    jrpc_replay_t *r3 = jrpc_replay_new(&f->loop, &o, err, sizeof err);
    assert_non_null(r3);
    assert_true(run_until(&f->loop, is_up, r3, 5000));
    assert_int_equal(jrpc_replay_refuse_to(r3), until);
    assert_int_equal(claim_wait_ts(&f->loop, r3, "kf", "captured", t0), -ESTALE);

    /* Signed after loss + window: accepted once, by any of them. */
    assert_int_equal(claim_wait_ts(&f->loop, f->r, "kf", "later", until + 1), 0);
    assert_int_equal(claim_wait_ts(&f->loop, r2, "kf", "later", until + 1), -EEXIST);
    assert_int_equal(claim_wait_ts(&f->loop, r3, "kf", "later", until + 1), -EEXIST);

    jrpc_replay_stats_t st;
    jrpc_replay_stats(f->r, &st);
    assert_int_equal(st.epoch_changes, 1);
    assert_int_equal(st.stale, 2);
    jrpc_replay_destroy(&r2);
    jrpc_replay_destroy(&r3);
    free(e0);
    free(e1);
    free(e2);
}

/* An epoch value that is not ours to trust (bad time, far future) cannot
 * make a broker refuse for more than one window from now. */
static void test_epoch_from_the_future(void **state)
{
    fx_t *f = *state;
    srv_start(&f->srv);
    freeReplyObject(srv_cmd(&f->srv, "SET jrpc:epoch x:999999999999999999"));
    char url[128];
    url_of(url, sizeof url, &f->srv, "", "");
    make_up(f, url, 1000);
    int64_t until = jrpc_replay_refuse_to(f->r);
    assert_true(until <= now_s() + WINDOW_S);
    assert_int_equal(claim_wait_ts(&f->loop, f->r, "kx", "n1", until + 1), 0);
    /* Junk longer than an epoch can be: fails closed, never up. */
    jrpc_replay_destroy(&f->r);
    char junk[200];
    memset(junk, 'j', sizeof junk - 1);
    junk[sizeof junk - 1] = '\0';
    freeReplyObject(srv_cmd(&f->srv, "SET jrpc:epoch %s", junk));
    f->r = make(f, url, 1000);
    run_for(&f->loop, 300);
    assert_false(jrpc_replay_up(f->r));
    assert_int_equal(claim_wait(&f->loop, f->r, "kx", "n2"), -EAGAIN);
}

/* SCRIPT FLUSH under our feet: the claim fails closed, the reconnect loads
 * the script again. */
static void test_script_flushed(void **state)
{
    fx_t *f = *state;
    srv_start(&f->srv);
    char url[128];
    url_of(url, sizeof url, &f->srv, "", "");
    make_up(f, url, 1000);
    assert_int_equal(claim_wait(&f->loop, f->r, "ks", "n1"), 0);
    freeReplyObject(srv_cmd(&f->srv, "SCRIPT FLUSH"));
    assert_int_equal(claim_wait(&f->loop, f->r, "ks", "n2"), -EAGAIN);
    assert_true(run_until(&f->loop, is_up, f->r, 5000));
    assert_int_equal(claim_wait(&f->loop, f->r, "ks", "n2"), 0);
    assert_int_equal(claim_wait(&f->loop, f->r, "ks", "n1"), -EEXIST);
}

/* An idempotency claim's answer (rc, and the stored reply when rc is 1). */
typedef struct idem_res {
    int  rc;
    int  calls;
    char reply[64];
} idem_res_t;

static void on_idem_res(void *arg, int rc, const char *reply, size_t n)
{
    idem_res_t *res = arg;
    res->rc = rc;
    res->calls++;
    snprintf(res->reply, sizeof res->reply, "%.*s", (int)n, reply ? reply : "");
}

static bool idem_done(void *ctx)
{
    return ((idem_res_t *)ctx)->calls > 0;
}

/* Claims idempotency key `key` for a body of fingerprint fp and waits for
 * the answer (the callback's rc, or the immediate rc). */
static int idem_wait(fx_t *f, const char *key, const char fp[64], idem_res_t *res)
{
    memset(res, 0, sizeof *res);
    int rc = jrpc_replay_idem_claim(f->r, (jrpc_span_t){ "who", 3 },
                                    (jrpc_span_t){ key, strlen(key) }, fp, 5000, on_idem_res, res);
    if (rc < 0)
        return rc;
    assert_true(run_until(&f->loop, idem_done, res, 5000));
    return res->rc;
}

/* Idempotency keys go as EVALSHA of the script loaded at connect: after
 * SCRIPT FLUSH the claim fails closed (NOSCRIPT drops the connection, as
 * for nonces), the reconnect loads the scripts again, and the keys are as
 * they were: the kept reply, a new key claimed once. */
static void test_idem_script_flushed(void **state)
{
    fx_t *f = *state;
    char fp[64];
    memset(fp, 'a', sizeof fp);
    idem_res_t res;
    srv_start(&f->srv);
    char url[128];
    url_of(url, sizeof url, &f->srv, "", "");
    make_up(f, url, 1000);
    assert_int_equal(idem_wait(f, "i1", fp, &res), 0);
    assert_int_equal(jrpc_replay_idem_store(f->r, (jrpc_span_t){ "who", 3 }, (jrpc_span_t){ "i1", 2 },
                                            fp, "kept", 4, 60), 0);
    assert_int_equal(idem_wait(f, "i1", fp, &res), 1);   /* after the store: one connection */
    assert_string_equal(res.reply, "kept");
    freeReplyObject(srv_cmd(&f->srv, "SCRIPT FLUSH"));
    assert_int_equal(idem_wait(f, "i2", fp, &res), -EAGAIN);
    assert_true(run_until(&f->loop, is_up, f->r, 5000));
    assert_int_equal(idem_wait(f, "i1", fp, &res), 1);
    assert_string_equal(res.reply, "kept");
    assert_int_equal(idem_wait(f, "i2", fp, &res), 0);
    assert_int_equal(idem_wait(f, "i2", fp, &res), -EBUSY);
    memset(fp, 'b', sizeof fp);
    assert_int_equal(idem_wait(f, "i2", fp, &res), -EILSEQ);
}

int main(void)
{
    jrpc_log_init("test_jrpc_replay_fence");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_flushall, setup, teardown),
        cmocka_unit_test_setup_teardown(test_epoch_from_the_future, setup, teardown),
        cmocka_unit_test_setup_teardown(test_script_flushed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idem_script_flushed, setup, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
