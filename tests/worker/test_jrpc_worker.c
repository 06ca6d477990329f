/* Unit tests of the worker library's calls (worker_fixture.h: the test
 * plays the broker on inproc://): READY byte for byte, calls and their
 * answers (PROTOCOL.md's example, method errors, any order, credit,
 * deadlines, traceparent), and what cannot be decoded (REJECT). */
#include "worker_fixture.h"

/* ---- READY ---- */

/* READY names every method in registration order, the idempotent ones in
 * its options, the credit, and the name; byte for byte as PROTOCOL.md 3. */
static void test_ready(void **state)
{
    (void)state;
    G.w = jrpc_worker_new(&(jrpc_worker_opts_t){ .credit = 64, .heartbeat_ms = 1000,
                                                  .liveness = 3 });
    assert_non_null(G.w);
    assert_int_equal(jrpc_worker_connect(G.w, "inproc://x"), -EINVAL); /* no method yet */
    assert_int_equal(jrpc_worker_handle(G.w, "subtract", h_subtract, NULL), 0);
    assert_int_equal(jrpc_worker_handle_ex(G.w, "sum", h_echo, NULL, JRPC_WORKER_IDEMPOTENT), 0);
    assert_int_equal(jrpc_worker_handle(G.w, "sum", h_echo, NULL), -EEXIST);
    assert_int_equal(jrpc_worker_handle_ex(G.w, "x", h_echo, NULL, 2), -EINVAL);
    char ep[64], buf[512];
    G.router = bind_router(ep, sizeof ep);
    assert_int_equal(jrpc_worker_connect(G.w, ep), 0);
    assert_int_equal(jrpc_worker_handle(G.w, "late", h_echo, NULL), -EBUSY);
    int n = recv_frame(buf, sizeof buf, WAIT_MS);
    /* [1, 1, 64, ["subtract", "sum"], {"idempotent": ["sum"]}] */
    expect_bytes(buf, n, "9501014092a87375627472616374a373756d"
                         "81aa6964656d706f74656e7491a373756d");
}

static void test_ready_name_credit(void **state)
{
    (void)state;
    jrpc_worker_opts_t o;
    jrpc_worker_opts_init(&o);
    o.credit = 5;
    o.name = "w-1";
    char buf[512];
    int n = start(&o, 0, 0, buf, sizeof buf);
    jrpc_wire_msg_t m;
    assert_int_equal(jrpc_wire_decode(buf, (size_t)n, &G.zone, &m), 0);
    assert_int_equal(m.type, JRPC_WIRE_READY);
    assert_int_equal(m.credit, 5);
    assert_int_equal(m.methods->via.array.size, 6);
    assert_memory_equal(m.methods->via.array.ptr[5].via.str.ptr, "hold", 4);
    const msgpack_object *name = jrpc_mpack_map_get(m.options, "name");
    assert_non_null(name);
    assert_int_equal(name->via.str.size, 3);
    assert_memory_equal(name->via.str.ptr, "w-1", 3);
    assert_non_null(m.idempotent);
    assert_int_equal(m.idempotent->via.array.size, 1);
    assert_memory_equal(m.idempotent->via.array.ptr[0].via.str.ptr, "sum", 3);
    /* Bad names are refused at new. */
    o.name = "has space";
    assert_null(jrpc_worker_new(&o));
    assert_int_equal(errno, EINVAL);
}

/* ---- calls and answers ---- */

/* PROTOCOL.md 3's example: the REQUEST's bytes in, the RESPONSE's bytes out
 * (two answers completed in one read: one RESPONSE). */
static void test_protocol_example(void **state)
{
    (void)state;
    start_default();
    send_hex("930102dd00000002"
             "9407a87375627472616374922a17cd1388"
             "9408a86765745f64617461c0cd1388");
    expect_msg(JRPC_WIRE_RESPONSE,
               "930103dd00000002" "93070013" "930801"
               "82a4636f6465d180a6a76d657373616765ae496e76616c696420706172616d73");
    assert_int_equal(jrpc_worker_answered(G.w), 2);
}

/* A method the worker did not register: -32601 "Method not found"; a
 * handler's errors, reserved code or its own, travel as {code, message}. */
static void test_method_errors(void **state)
{
    (void)state;
    static const struct {
        item_t      call;
        const char *hex;   /* the RESPONSE it gets */
    } cases[] = {
        /* [1, 3, [[5, 1, {"code": -32601, "message": "Method not found"}]]] */
        { { 5, "nope", -1, 0, NULL },
          "930103dd00000001" "930501"
          "82a4636f6465d180a7a76d657373616765b04d6574686f64206e6f7420666f756e64" },
        /* [1, 3, [[6, 1, {"code": 42, "message": "no such account"}]]] */
        { { 6, "apperr", 1, 0, NULL },
          "930103dd00000001" "930601"
          "82a4636f6465" "2a" "a76d657373616765af6e6f2073756368206163636f756e74" },
        /* [1, 3, [[8, 1, {"code": 42, "message": "no such account", "data": {"n": 1}}]]] */
        { { 8, "apperr", 2, 0, NULL },
          "930103dd00000001" "930801"
          "83a4636f6465" "2a" "a76d657373616765af6e6f2073756368206163636f756e74"
          "a464617461" "81a16e01" },
        { { 9, "apperr", 3, 0, NULL },
          "930103dd00000001" "930901"
          "82a4636f6465" "2a" "a76d657373616765af6e6f2073756368206163636f756e74" },
    };
    start_default();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        send_request(&cases[i].call, 1);
        expect_msg(JRPC_WIRE_RESPONSE, cases[i].hex);
    }
    send_request(&(item_t){ 7, "subtract", 1, 0, NULL }, 1);   /* one param: -32602 */
    resp_t r;
    assert_int_equal(recv_response(&r), 1);
    assert_int_equal(r.seqs[0], 7);
    assert_true(r.err[0]);
    assert_int_equal(r.vals[0], JRPC_INVALID_PARAMS);
    assert_int_equal(jrpc_worker_answered(G.w), 5);
}

/* Async calls answered in any order, each matched by its seq; answers
 * completed in one turn travel in one RESPONSE, in completion order. */
static void test_async_any_order(void **state)
{
    (void)state;
    start_default();
    item_t it[3] = { { 7, "hold", 70, 0, NULL }, { 8, "hold", 80, 0, NULL },
                     { 9, "hold", 90, 0, NULL } };
    send_request(it, 3);
    wait_held(3);
    assert_int_equal(conn0()->inflight, 3);
    expect_quiet(20);   /* nothing is answered before it is completed */
    finish_held(2);
    finish_held(0);
    resp_t r;
    assert_int_equal(recv_response(&r), 2);
    assert_int_equal(r.seqs[0], 9);
    assert_int_equal(r.vals[0], 90);
    assert_int_equal(r.seqs[1], 7);
    assert_int_equal(r.vals[1], 70);
    assert_false(r.err[0] || r.err[1]);
    finish_held(1);
    assert_int_equal(recv_response(&r), 1);
    assert_int_equal(r.seqs[0], 8);
    assert_int_equal(r.vals[0], 80);
    assert_int_equal(conn0()->inflight, 0);
    assert_int_equal(jrpc_worker_answered(G.w), 3);
}

/* Credit is the broker's to honour (PROTOCOL.md 4): a worker given more
 * calls than its credit (a broker bug) serves them all, logs
 * event=credit_exceeded, and answers every one. */
static void test_credit_exceeded(void **state)
{
    (void)state;
    jrpc_worker_opts_t o;
    jrpc_worker_opts_init(&o);
    o.credit = 2;
    start(&o, 1000, 3, NULL, 0);
    item_t it[3] = { { 1, "hold", 1, 0, NULL }, { 2, "hold", 2, 0, NULL },
                     { 3, "hold", 3, 0, NULL } };
    send_request(it, 3);
    wait_held(3);
    assert_non_null(strstr(G.log, "event=credit_exceeded"));
    assert_non_null(strstr(G.log, "inflight=3 credit=2"));
    for (int i = 0; i < 3; i++)
        finish_held(i);
    resp_t r;
    assert_int_equal(recv_response(&r), 3);
    assert_int_equal(jrpc_worker_answered(G.w), 3);
}

/* timeout_ms is "how long the broker still waits": the call's deadline is
 * now + timeout_ms, none for 0. A call already late is still run and
 * answered (the answer returns the credit; PROTOCOL.md 2.2). */
static void test_deadlines(void **state)
{
    (void)state;
    start_default();
    uint64_t before = uv_now(G.w->loop);
    item_t it[3] = { { 1, "hold", 1, 0, NULL }, { 2, "hold", 2, 5000, NULL },
                     { 3, "hold", 3, 1, NULL } };
    send_request(it, 3);
    wait_held(3);
    uint64_t after = uv_now(G.w->loop);
    assert_int_equal(jrpc_wcall_deadline(G.held[0]), UINT64_MAX);
    assert_in_range(jrpc_wcall_deadline(G.held[1]), before + 5000, after + 5000);
    assert_in_range(jrpc_wcall_deadline(G.held[2]), before + 1, after + 1);
    uv_sleep(5);
    uv_update_time(G.w->loop);
    assert_true(uv_now(G.w->loop) > jrpc_wcall_deadline(G.held[2]));
    finish_held(2);   /* late, but answered */
    resp_t r;
    assert_int_equal(recv_response(&r), 1);
    assert_int_equal(r.seqs[0], 3);
    finish_held(0);
    finish_held(1);
    assert_int_equal(recv_response(&r), 2);
}

/* The traceparent reaches the handler; a call without one has none. */
static void test_traceparent(void **state)
{
    (void)state;
    start_default();
    const char *tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    item_t it[2] = { { 1, "hold", 1, 0, tp }, { 2, "hold", 2, 0, NULL } };
    send_request(it, 2);
    wait_held(2);
    assert_string_equal(jrpc_wcall_traceparent(G.held[0]), tp);
    assert_null(jrpc_wcall_traceparent(G.held[1]));
    assert_string_equal(jrpc_wcall_method(G.held[1]), "hold");
    finish_held(0);
    finish_held(1);
}

/* ---- what cannot be decoded (PROTOCOL.md 2.2, 2.5) ---- */

static void test_reject(void **state)
{
    (void)state;
    start_default();
    char buf[512];
    /* REQUEST 1: served. */
    send_request(&(item_t){ 1, "echo", 1, 0, NULL }, 1);
    recv_ok(JRPC_WIRE_RESPONSE, buf, sizeof buf);
    /* Not counted: a malformed non-REQUEST, another version, a multipart message. */
    send_hex("c1");
    send_hex("93020290");
    assert_true(zmq_send(G.router, G.id, G.idlen, ZMQ_SNDMORE) >= 0);
    assert_true(zmq_send(G.router, "\x93\x01\x02", 3, ZMQ_SNDMORE) >= 0);
    assert_true(zmq_send(G.router, "x", 1, 0) >= 0);
    /* REQUEST 2: truncated → REJECT [1, 6, 2]. */
    send_hex("930102919409");
    expect_msg(JRPC_WIRE_REJECT, "93010602");
    /* REQUEST 3: an item whose seq cannot be read (0) beside a good one:
     * REJECT, and none of its calls runs. */
    G.echoed = 0;
    send_hex("930102929400a46563686fc000940aa46563686fc000");
    expect_msg(JRPC_WIRE_REJECT, "93010603");
    assert_int_equal(G.echoed, 0);
    /* REQUEST 4: an item with a readable seq and a bad method (an int):
     * -32603 for it, the other served. */
    send_hex("93010292940905c000940ba46563686f910b00");
    /* [1, 3, [[9, 1, {"code": -32603, "message": "Internal error"}], [11, 0, [11]]]] */
    expect_msg(JRPC_WIRE_RESPONSE,
               "930103dd00000002" "930901"
               "82a4636f6465d180a5a76d657373616765ae496e7465726e616c206572726f72"
               "930b00910b");
    assert_int_equal(G.echoed, 1);
    /* REQUEST 5: one more bad one: still counted right. */
    send_hex("93010290");
    expect_msg(JRPC_WIRE_REJECT, "93010605");
    assert_int_equal(jrpc_worker_answered(G.w), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ready, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ready_name_credit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_protocol_example, setup, teardown),
        cmocka_unit_test_setup_teardown(test_method_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_async_any_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_credit_exceeded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deadlines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_traceparent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reject, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
