/* Unit tests of brokers found by name (worker_fixture.h; issue 16):
 * dns+tcp:// answers applied as differences to the worker's sessions. */
#include "worker_fixture.h"

/* ---- brokers found by name (issue 16) ---- */

/* dns+tcp://: the first answer (localhost, through the real uv_getaddrinfo)
 * gives sessions; a later answer is applied as a difference: a new address
 * gets READY, one gone gets DISCONNECT and keeps serving the call it holds
 * (its answer still reaches that broker: nothing lost, nothing twice), and
 * is freed once closed with no call left; an answer with no address keeps
 * the set in force. */
static void test_dns_name_set(void **state)
{
    (void)state;
    jrpc_worker_opts_t o;
    jrpc_worker_opts_init(&o);
    o.linger_ms = 100;
    G.w = jrpc_worker_new(&o);
    assert_non_null(G.w);
    assert_int_equal(jrpc_worker_handle(G.w, "hold", h_hold, NULL), 0);
    assert_int_equal(jrpc_worker_handle(G.w, "echo", h_echo, NULL), 0);
    assert_int_equal(jrpc_worker_connect(G.w, "dns+tcp://bad name:1"), -EINVAL);
    assert_int_equal(jrpc_worker_connect(G.w, "dns+tcp://localhost:1"), 0);
    assert_int_equal(jrpc_worker_handle(G.w, "late", h_echo, NULL), -EBUSY);
    resolver_t *rs = G.w->resolvers[0];
    uint64_t until = now_ms() + WAIT_MS;
    while ((rs->busy || G.w->nconns == 0) && now_ms() < until)
        turn();
    assert_true(G.w->nconns >= 1); /* 127.0.0.1, and ::1 where the hosts file has it */
    for (size_t i = 0; i < G.w->nconns; i++)
        assert_ptr_equal(G.w->conns[i]->rs, rs);
    assert_string_equal(G.w->conns[0]->endpoint, "tcp://127.0.0.1:1");
    size_t first = G.w->nconns;

    /* Two brokers instead: the localhost sessions are retired (never heard
     * from: closed at once), A and B get READY. */
    char a[64], b[64], buf[512];
    void *ra = bind_router(a, sizeof a), *rb = bind_router(b, sizeof b);
    char eps[2][JRPC_DNS_EP_MAX];
    snprintf(eps[0], sizeof eps[0], "%s", a);
    snprintf(eps[1], sizeof eps[1], "%s", b);
    resolver_apply(rs, eps, 2);
    assert_int_equal(G.w->nconns, first + 2);
    for (size_t i = 0; i < first; i++) {
        assert_true(G.w->conns[i]->retiring);
        assert_null(G.w->conns[i]->sock);
    }
    G.router = rb;
    assert_true(recv_type(JRPC_WIRE_READY, buf, sizeof buf, WAIT_MS) > 0);
    G.router = ra;
    G.router2 = rb;
    assert_true(recv_type(JRPC_WIRE_READY, buf, sizeof buf, WAIT_MS) > 0);
    turn();              /* their watchers' close callbacks */
    on_tick(&G.w->tick); /* frees the retired localhost conns */
    assert_int_equal(G.w->nconns, 2);
    conn_t *ca = G.w->conns[0];
    assert_string_equal(ca->endpoint, a);

    /* A holds a call when its address leaves the name. */
    hold_one(7, 0);
    resolver_apply(rs, &eps[1], 1);
    assert_true(ca->retiring);
    assert_int_equal(recv_type(JRPC_WIRE_DISCONNECT, buf, sizeof buf, WAIT_MS), 3);
    assert_non_null(ca->sock); /* still open: it holds a call */
    on_tick(&G.w->tick);
    assert_non_null(ca->sock);
    finish_held(0);
    resp_t r;
    assert_int_equal(recv_response(&r), 1);
    assert_int_equal(r.seqs[0], 7);
    assert_int_equal(r.vals[0], 7);
    on_tick(&G.w->tick); /* nothing held: closed */
    assert_null(ca->sock);
    on_tick(&G.w->tick); /* its watcher is still closing: kept */
    assert_int_equal(G.w->nconns, 2);
    turn();
    on_tick(&G.w->tick); /* closed, no call points at it: freed */
    assert_int_equal(G.w->nconns, 1);
    assert_string_equal(G.w->conns[0]->endpoint, b);

    /* The same answer again changes nothing; A back is a new session. */
    resolver_apply(rs, &eps[1], 1);
    assert_int_equal(G.w->nconns, 1);
    resolver_apply(rs, eps, 2);
    assert_int_equal(G.w->nconns, 2);
    assert_true(recv_type(JRPC_WIRE_READY, buf, sizeof buf, WAIT_MS) > 0);

    /* No address (the name is gone from DNS, or DNS is down): kept. */
    rs->busy = true;
    G.w->nresolving++;
    on_resolved(&rs->req, UV_EAI_NONAME, NULL);
    assert_int_equal(G.w->nconns, 2);
    assert_false(G.w->conns[0]->retiring || G.w->conns[1]->retiring);
    assert_non_null(strstr(G.log, "event=resolve_failed name=dns+tcp://localhost:1"));
    assert_int_equal(jrpc_worker_answered(G.w), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_dns_name_set, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
