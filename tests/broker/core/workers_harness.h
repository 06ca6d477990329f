/* workers_harness — what the unit tests of broker/core/jrpc_workers and the
 * files beside it share: the module compiled in (to reach its statics), an
 * inproc ROUTER with DEALERs "A", "B", "C" nobody reads (so sends to them
 * succeed), make()/destroy() of a jrpc_workers_t on it with no loop handle
 * started, and find() of a worker by its one-byte routing id. Included by
 * test_jrpc_workers.c and test_jrpc_methods.c only. */
#ifndef WORKERS_HARNESS_H
#define WORKERS_HARNESS_H

#define HARNESS_DEALERS 3

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "../../../broker/core/jrpc_workers.c"
#include "../../../broker/core/jrpc_methods.c"
#include "../../../broker/core/jrpc_hedge.c"
#include "../../../broker/core/jrpc_sessions.c"
#include "../../../broker/core/jrpc_status.c"
#include "jrpc_json.h"

static struct {
    uv_loop_t loop;
    void     *zctx, *router, *dealers[HARNESS_DEALERS];
    unsigned  done;       /* on_done calls */
    int       last_code;
} G;

static void on_done(void *owner, uint32_t index, int kind, int code, jrpc_span_t value,
                    void *arg)
{
    (void)owner, (void)index, (void)kind, (void)value, (void)arg;
    G.done++;
    G.last_code = code;
}

static int setup(void **state)
{
    (void)state;
    memset(&G, 0, sizeof G);
    uv_loop_init(&G.loop);
    G.zctx = zmq_ctx_new();
    G.router = zmq_socket(G.zctx, ZMQ_ROUTER);
    int one = 1, zero = 0;
    zmq_setsockopt(G.router, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    zmq_setsockopt(G.router, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(zmq_bind(G.router, "inproc://test-workers"), 0);
    for (int i = 0; i < HARNESS_DEALERS; i++) {
        char id = (char)('A' + i);
        G.dealers[i] = zmq_socket(G.zctx, ZMQ_DEALER);
        zmq_setsockopt(G.dealers[i], ZMQ_LINGER, &zero, sizeof zero);
        zmq_setsockopt(G.dealers[i], ZMQ_ROUTING_ID, &id, 1);
        assert_int_equal(zmq_connect(G.dealers[i], "inproc://test-workers"), 0);
    }
    int ev;
    size_t len = sizeof ev;
    zmq_getsockopt(G.router, ZMQ_EVENTS, &ev, &len);   /* the ROUTER learns their ids */
    jrpc_metrics_init();
    jrpc_log_set_level("error");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < HARNESS_DEALERS; i++)
        zmq_close(G.dealers[i]);
    zmq_close(G.router);
    zmq_ctx_term(G.zctx);
    uv_loop_close(&G.loop);
    return 0;
}

/* What jrpc_workers_new() makes (defaults as main.c's), on the test ROUTER,
 * no loop handle started. */
static jrpc_workers_t *make(uint32_t eject_after)
{
    jrpc_workers_t *w = calloc(1, sizeof *w);
    assert_non_null(w);
    w->loop = &G.loop;
    w->opts = (jrpc_workers_opts_t){
        .max_queue = 100, .heartbeat_ms = 1000, .liveness = 3, .max_redispatch = 3,
        .max_worker_methods = JRPC_WORKERS_MAX_WORKER_METHODS,
        .max_methods = JRPC_WORKERS_MAX_METHODS, .max_method_len = 256,
        .max_worker_credit = JRPC_WORKERS_MAX_WORKER_CREDIT,
        .max_worker_bytes = JRPC_WORKERS_MAX_WORKER_BYTES, .eject_after = eject_after,
        .eject_ms = JRPC_WORKERS_EJECT_MS,
    };
    w->done = on_done;
    w->free_head = NIL;
    w->generation = 1;
    w->mtab_size = 256;
    w->mtab = calloc(w->mtab_size, sizeof *w->mtab);
    jrpc_buf_init(&w->scratch);
    msgpack_zone_init(&w->zone, 4096);
    w->sock = G.router;
    w->heartbeat.data = w;
    hedge_init(w);
    return w;
}

static void destroy(jrpc_workers_t *w)
{
    free_workers(w);
    method_sweep(w);
    bool calls = false;
    for (uint32_t i = 0; i < w->nslots; i++)
        calls |= w->slots[i].state != SLOT_FREE;
    if (!calls)   /* nothing left once nobody refers to it */
        assert_int_equal(w->nmethods, 0);
    free_rest(w);
    char buf[64];
    for (int i = 0; i < HARNESS_DEALERS; i++)
        while (zmq_recv(G.dealers[i], buf, sizeof buf, ZMQ_DONTWAIT) >= 0)
            ;
}

static worker_t *find(jrpc_workers_t *w, char id)
{
    return worker_find(w, &(peer_t){ .id = &id, .idlen = 1 });
}

#endif
