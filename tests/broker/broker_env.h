/* broker_env — what each broker test (test_jrpc_broker, test_jrpc_broker_redis,
 * test_jrpc_front_ws) starts from and ends with: a loop of its own and a
 * ZeroMQ context of its own. Header only: include after cmocka.h. */
#ifndef BROKER_ENV_H
#define BROKER_ENV_H

#include <stdlib.h>
#include <uv.h>
#include <zmq.h>

#include "jrpc_log.h"

/* A new loop and context, and the log level from TEST_LOG (default error:
 * a test that passes prints nothing). */
static inline void broker_env_open(uv_loop_t *loop, void **zctx)
{
    uv_loop_init(loop);
    *zctx = zmq_ctx_new();
    jrpc_log_set_level(getenv("TEST_LOG") ? getenv("TEST_LOG") : "error");
}

/* Ends them; a handle the test left open fails it. */
static inline void broker_env_close(uv_loop_t *loop, void *zctx)
{
    zmq_ctx_term(zctx);
    assert_int_equal(uv_loop_close(loop), 0);
}

#endif
