/* The worker's side of a broker unit test, shared by test_jrpc_broker.c and
 * test_jrpc_broker_redis.c: a DEALER in the test's own thread, the loop
 * turned with UV_RUN_NOWAIT between its reads.
 *
 * The including file defines MAX_SEEN and, before including this, a G with
 * at least: uv_loop_t loop; void *dealer; jrpc_broker_t *b; unsigned
 * replies; jrpc_seq_t seq[MAX_SEEN]; char method[MAX_SEEN][16]; uint32_t
 * nseen. */
#ifndef TEST_FAKE_WORKER_H
#define TEST_FAKE_WORKER_H

/* Reads what the broker sent: REQUEST items recorded in G.seq/G.method. */
static void worker_read(void)
{
    char buf[8192];
    int n;
    while ((n = zmq_recv(G.dealer, buf, sizeof buf, ZMQ_DONTWAIT)) >= 0) {
        msgpack_zone z;
        msgpack_zone_init(&z, 1024);
        jrpc_wire_msg_t m;
        if (jrpc_wire_decode(buf, (size_t)n, &z, &m) == 0 && m.type == JRPC_WIRE_REQUEST)
            for (uint32_t i = 0; i < m.nitems; i++) {
                jrpc_wire_call_t c;
                assert_int_equal(jrpc_wire_request_item(&m, i, &c), 0);
                assert_true(G.nseen < MAX_SEEN);
                G.seq[G.nseen] = c.seq;
                snprintf(G.method[G.nseen++], 16, "%.*s", (int)c.method.n, c.method.p);
            }
        msgpack_zone_destroy(&z);
    }
}

/* Turns the loop and reads the worker's socket until cond() or ~5 s. */
static bool pump_until(bool (*cond)(void))
{
    for (int i = 0; i < 5000; i++) {
        uv_run(&G.loop, UV_RUN_NOWAIT);
        worker_read();
        if (cond())
            return true;
        usleep(1000);
    }
    return false;
}

static uint32_t want_seen;
static bool seen_enough(void) { return G.nseen >= want_seen; }
static unsigned want_replies;
static bool replied(void) { return G.replies >= want_replies; }
static bool is_ready(void) { return jrpc_broker_ready(G.b, NULL, NULL) == 0; }

static void worker_send(jrpc_buf_t *m)
{
    assert_int_equal(zmq_send(G.dealer, m->p, m->len, 0), (int)m->len);
    jrpc_buf_dispose(m);
}

/* One RESPONSE with the result v (a positive fixint) for seq. */
static void worker_result(jrpc_seq_t seq, uint8_t v)
{
    jrpc_buf_t m;
    jrpc_buf_init(&m);
    jrpc_wire_put_response_begin(&m);
    jrpc_wire_put_result_head(&m, seq);
    jrpc_buf_putc(&m, (char)v);
    jrpc_wire_put_response_end(&m, 1);
    worker_send(&m);
}

#endif
