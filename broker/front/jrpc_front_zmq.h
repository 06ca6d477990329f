/* jrpc_front_zmq — the ZeroMQ front door: a ROUTER socket for clients.
 *
 * A client message is, after the routing id: an optional empty delimiter
 * (REQ sockets add it; the reply then carries it too), an optional header
 * frame (msgpack map, see jrpc_header.h), and one frame of JSON text. The
 * reply is one frame of JSON, or one empty frame where the specification
 * returns nothing, so a REQ client never deadlocks. */
#ifndef JRPC_FRONT_ZMQ_H
#define JRPC_FRONT_ZMQ_H

#include <stdint.h>
#include <uv.h>
#include "jrpc_broker.h"

typedef struct jrpc_front_zmq jrpc_front_zmq_t;

struct jrpc_curve_keypair;

/* Who speaks ZMTP to clients: our own engine on the loop thread
 * (io/jrpc_zmtp, tcp:// and ipc://, NULL mechanism), or libzmq (its I/O
 * thread; CURVE and every other transport). */
typedef enum jrpc_front_zmq_engine {
    JRPC_FRONT_ZMQ_NATIVE,   /* the default: falls back to libzmq for CURVE and
                                transports other than tcp:// and ipc:// */
    JRPC_FRONT_ZMQ_LIBZMQ,
} jrpc_front_zmq_engine_t;

typedef struct jrpc_front_zmq_opts {
    const char *endpoint;   /* where the ROUTER binds: tcp://HOST:PORT, ipc://PATH */
    uint32_t    max_body;   /* largest JSON frame in bytes (--max-body, as HTTP's) */
    const struct jrpc_curve_keypair *curve;  /* the broker's keypair (read during
                                                _new only), or NULL: no CURVE */
    jrpc_front_zmq_engine_t engine;  /* --zmq-engine */
} jrpc_front_zmq_opts_t;

/* Binds opts->endpoint in zmq_ctx and starts reading; the broker is
 * borrowed (destroy the front first). With opts->curve the socket is a
 * CURVE server in ZAP domain "clients": bind the ZAP handler first. A JSON
 * frame larger than max_body is answered -32600 "body larger than N bytes",
 * logged and counted (jrpc_bodies_total{outcome="invalid"}); a frame larger
 * than twice max_body drops the connection unread. NULL on failure
 * (logged). */
jrpc_front_zmq_t *jrpc_front_zmq_new(uv_loop_t *loop, void *zmq_ctx, jrpc_broker_t *broker,
                                     const jrpc_front_zmq_opts_t *opts);
/* Stops taking new messages; replies still go out. */
void jrpc_front_zmq_pause(jrpc_front_zmq_t *f);
/* Closes the socket (after the broker has drained). */
void jrpc_front_zmq_destroy(jrpc_front_zmq_t **self_p);

#endif
