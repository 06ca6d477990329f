/* Unit tests of a worker session's life (worker_fixture.h: the test plays
 * the broker on inproc://): heartbeats and liveness (PROTOCOL.md 5), two
 * brokers, DISCONNECT from the broker (PROTOCOL.md 6), and leaving: pause
 * and resume, drain (its deadlines, its timeout, a DISCONNECT or a lost
 * connection during it), stop. */
#include "worker_fixture.h"

/* ---- heartbeats and liveness (PROTOCOL.md 5) ---- */

/* The broker's settings rule the session: the worker heartbeats at the
 * broker's interval (its own is a minute here), and its tick follows. */
static void test_heartbeat_adopted(void **state)
{
    (void)state;
    start_with(60000, 0, 0);
    char buf[512];
    /* Malformed settings (below 10 ms) are dropped: own settings stay. */
    send_hex("94010405" "03");
    expect_quiet(20);
    assert_int_equal(conn0()->hb_ms, 60000);
    send_heartbeat(20, 1000);
    int n = recv_frame(buf, sizeof buf, WAIT_MS);
    expect_bytes(buf, n, "920104");   /* the worker's HEARTBEAT, well before a minute */
    assert_int_equal(conn0()->hb_ms, 20);
    assert_int_equal(conn0()->liveness, 1000);
    assert_int_equal(G.w->tick_ms, 20);
    /* A HEARTBEAT without settings changes nothing. */
    send_hex("920104");
    expect_quiet(20);
    assert_int_equal(conn0()->hb_ms, 20);
}

/* The broker falls silent for its heartbeat × liveness: the worker opens a
 * fresh socket (a new routing id), sends READY again, and is back on its own
 * settings until the new session's broker speaks. */
static void test_liveness(void **state)
{
    (void)state;
    start_with(60000, 20, 2);
    rid_t old = save_id();
    uint64_t gen = conn0()->gen;
    char buf[512];
    /* Silent from here on: only the worker speaks. Its own settings would
     * take three minutes. */
    recv_ok(JRPC_WIRE_READY, buf, sizeof buf);
    assert_int_equal(conn0()->gen, gen + 1);
    assert_new_id(&old);
    assert_int_equal(conn0()->hb_ms, 60000);
    assert_int_equal(conn0()->liveness, 3);
    assert_int_equal(G.w->tick_ms, 60000);
}

/* Two brokers, two sessions, two sets of settings; the tick runs at the
 * shorter interval. */
static void test_two_brokers(void **state)
{
    (void)state;
    start_with(60000, 500, 7);
    connect_second_broker();
    send_heartbeat(200, 9);
    uint64_t until = now_ms() + WAIT_MS;
    while ((G.w->conns[0]->hb_ms != 500 || G.w->conns[1]->hb_ms != 200) && now_ms() < until)
        turn();
    assert_int_equal(G.w->conns[0]->hb_ms, 500);
    assert_int_equal(G.w->conns[0]->liveness, 7);
    assert_int_equal(G.w->conns[1]->hb_ms, 200);
    assert_int_equal(G.w->conns[1]->liveness, 9);
    assert_int_equal(G.w->tick_ms, 200);
}

/* ---- DISCONNECT from the broker (PROTOCOL.md 6) ---- */

/* DISCONNECT: a fresh socket and READY again; a call of the old session
 * completed afterwards is not answered on the new one. */
static void test_disconnect(void **state)
{
    (void)state;
    jrpc_worker_opts_t o;
    jrpc_worker_opts_init(&o);
    start(&o, 1000, 3, NULL, 0);
    hold_one(3, 0);
    conn0()->last_reset -= o.heartbeat_ms;   /* not "just reset": act at once */
    char buf[512];
    rid_t old = save_id();
    send_hex("920105");
    recv_ok(JRPC_WIRE_READY, buf, sizeof buf);
    assert_new_id(&old);
    assert_int_equal(conn0()->inflight, 0);
    finish_held(0);   /* stale: dropped */
    expect_quiet(50);
    assert_int_equal(jrpc_worker_answered(G.w), 0);
    /* The new session serves. */
    send_request(&(item_t){ 4, "echo", 4, 0, NULL }, 1);
    recv_ok(JRPC_WIRE_RESPONSE, buf, sizeof buf);
    assert_int_equal(jrpc_worker_answered(G.w), 1);
}

/* A DISCONNECT right after a (re)connect waits for the tick (no busy loop
 * with a broker that keeps refusing); meanwhile REQUESTs are ignored. */
static void test_disconnect_deferred(void **state)
{
    (void)state;
    start_with(60000, 0, 0);
    uint64_t gen = conn0()->gen;
    send_hex("920105");
    uint64_t until = now_ms() + WAIT_MS;
    while (!conn0()->reset_due && now_ms() < until)
        turn();
    assert_true(conn0()->reset_due);
    assert_int_equal(conn0()->gen, gen);
    G.echoed = 0;
    send_request(&(item_t){ 1, "echo", 1, 0, NULL }, 1);
    expect_quiet(50);
    assert_int_equal(G.echoed, 0);
    on_tick(&G.w->tick);
    char buf[512];
    recv_ok(JRPC_WIRE_READY, buf, sizeof buf);
    assert_int_equal(conn0()->gen, gen + 1);
    assert_false(conn0()->reset_due);
}

/* ---- leaving (PROTOCOL.md 6) ---- */

/* drain: DISCONNECT at once, the calls held and one that arrives after are
 * served, then the worker stops by itself. */
/* pause: DISCONNECT, the socket closed, no session on the ticks that
 * follow; resume: READY on a fresh socket, and it serves. */
static void test_pause_resume(void **state)
{
    (void)state;
    start_default();
    char buf[512];
    rid_t old = save_id();
    jrpc_worker_pause(G.w);
    recv_ok(JRPC_WIRE_DISCONNECT, buf, sizeof buf);
    assert_null(conn0()->sock);
    on_tick(&G.w->tick);   /* a tick would reopen a lost session: not a paused one */
    on_tick(&G.w->tick);
    assert_null(conn0()->sock);
    assert_int_equal(recv_frame(buf, sizeof buf, 50), -1);
    jrpc_worker_pause(G.w);   /* no-op */
    jrpc_worker_resume(G.w);
    recv_ok(JRPC_WIRE_READY, buf, sizeof buf);
    assert_new_id(&old);
    send_request(&(item_t){ 4, "echo", 4, 0, NULL }, 1);
    recv_ok(JRPC_WIRE_RESPONSE, buf, sizeof buf);
    assert_int_equal(jrpc_worker_answered(G.w), 1);
}

static void test_drain(void **state)
{
    (void)state;
    start_default();
    item_t it[2] = { { 1, "hold", 1, 0, NULL }, { 2, "hold", 2, 0, NULL } };
    send_request(it, 2);
    wait_held(2);
    jrpc_worker_drain(G.w, 600000);
    expect_msg(JRPC_WIRE_DISCONNECT, "920105");
    assert_true(G.w->draining);
    /* Sent before the broker read the DISCONNECT: still served. */
    hold_one(3, 0);
    finish_held(0);
    finish_held(2);
    char buf[512];
    recv_ok(JRPC_WIRE_RESPONSE, buf, sizeof buf);
    assert_false(G.w->stopping);
    finish_held(1);   /* the last: the worker stops */
    assert_true(G.w->stopping);
    assert_int_equal(jrpc_worker_run(G.w), 0);   /* returns at once */
    resp_t r;
    assert_int_equal(recv_response(&r), 1);
    assert_int_equal(r.seqs[0], 2);
    assert_int_equal(jrpc_worker_answered(G.w), 3);
}

/* One call held (its deadline call_timeout_ms), then a drain of drain_ms:
 * the worker stops by itself, logging `logged`, and the call completed
 * afterwards is dropped. */
static void drain_abandons(uint32_t call_timeout_ms, uint32_t drain_ms, const char *logged)
{
    start_default();
    hold_one(1, call_timeout_ms);
    jrpc_worker_drain(G.w, drain_ms);
    turn_until(&G.w->stopping);
    assert_non_null(strstr(G.log, logged));
    finish_held(0);
    assert_int_equal(jrpc_worker_answered(G.w), 0);
}

/* A drain ends when every call held is past its deadline (the broker
 * answered them -32003) — long before its own timeout — and a call
 * completed afterwards is dropped. */
static void test_drain_deadlines(void **state)
{
    (void)state;
    drain_abandons(1, 600000, "reason=deadlines_passed abandoned=1");
}

/* A drain gives up at its timeout; DISCONNECT from the broker during a
 * drain closes that session without reconnecting. */
static void test_drain_timeout(void **state)
{
    (void)state;
    drain_abandons(0, 30, "reason=timeout abandoned=1");
}

static void test_drain_disconnect(void **state)
{
    (void)state;
    start_default();
    hold_one(1, 0);
    jrpc_worker_drain(G.w, 600000);
    expect_msg(JRPC_WIRE_DISCONNECT, "920105");
    uint64_t gen = conn0()->gen;
    send_hex("920105");
    turn_until(&G.w->stopping);
    assert_int_equal(conn0()->gen, gen);   /* no fresh socket */
    assert_null(conn0()->sock);
    finish_held(0);
    assert_int_equal(jrpc_worker_answered(G.w), 0);
}

/* A session a drain lost (its broker said DISCONNECT) stays closed, and
 * quietly: the tick does not "retry" it (nor log it again) each interval
 * while the other broker's calls finish. */
static int count_lines(const char *what)
{
    int k = 0;
    for (const char *p = G.log; (p = strstr(p, what)) != NULL; p++)
        k++;
    return k;
}

static void test_drain_lost_conn_quiet(void **state)
{
    (void)state;
    start_default();
    rid_t id_a = save_id();
    connect_second_broker();   /* broker A now in G.router2 */
    send_heartbeat(1000, 3);
    hold_one(1, 0);   /* held for broker B */
    jrpc_worker_drain(G.w, 600000);
    assert_true(zmq_send(G.router2, id_a.id, id_a.len, ZMQ_SNDMORE) >= 0);
    assert_true(zmq_send(G.router2, "\x92\x01\x05", 3, 0) >= 0);   /* A: DISCONNECT */
    uint64_t until = now_ms() + WAIT_MS;
    while (G.w->conns[0]->sock != NULL && now_ms() < until)
        turn();
    assert_null(G.w->conns[0]->sock);
    assert_int_equal(count_lines("event=drain_conn_lost"), 1);
    uint64_t gen = G.w->conns[0]->gen;
    for (int i = 0; i < 3; i++)
        on_tick(&G.w->tick);
    assert_int_equal(count_lines("event=drain_conn_lost"), 1);
    assert_int_equal(G.w->conns[0]->gen, gen);
    assert_false(G.w->stopping);
    finish_held(0);   /* B's call: the drain is done */
    assert_true(G.w->stopping);
    assert_int_equal(jrpc_worker_answered(G.w), 1);
}

/* stop: DISCONNECT at once; answers completed afterwards are dropped. */
static void test_stop(void **state)
{
    (void)state;
    start_default();
    hold_one(1, 0);
    jrpc_worker_stop(G.w);
    jrpc_worker_stop(G.w);   /* twice is fine */
    assert_int_equal(jrpc_worker_run(G.w), 0);
    expect_msg(JRPC_WIRE_DISCONNECT, "920105");
    finish_held(0);
    assert_int_equal(jrpc_worker_answered(G.w), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_heartbeat_adopted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_liveness, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_brokers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disconnect, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disconnect_deferred, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pause_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drain_deadlines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drain_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drain_disconnect, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drain_lost_conn_quiet, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
