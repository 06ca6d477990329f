/* jrpc-peer-zmq-echo — the hop floor: a raw ZeroMQ DEALER -> ROUTER echo.
 *
 *   jrpc-peer-zmq-echo serve ENDPOINT      a ROUTER that sends every message back
 *   jrpc-peer-zmq-echo load --url ENDPOINT [options]   (see peer_load.h)
 *
 * One message per call, no parsing on the server: what one request and one
 * answer over a ZeroMQ hop cost, with no broker in the way. A "batch" of N is
 * N messages sent at once on one DEALER and the N echoes waited for. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "peer_load.h"

static int serve(const char *ep)
{
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_ROUTER);
    if (zmq_bind(s, ep) != 0) {
        fprintf(stderr, "jrpc-peer-zmq-echo: cannot bind %s: %s\n", ep, zmq_strerror(zmq_errno()));
        return 1;
    }
    fprintf(stderr, "jrpc-peer-zmq-echo: listening on %s\n", ep);
    for (;;) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, s, 0) < 0)
            return 1;
        int more = zmq_msg_more(&m);
        if (zmq_msg_send(&m, s, more ? ZMQ_SNDMORE : 0) < 0)   /* else it took the content */
            zmq_msg_close(&m);   /* a peer gone: drop the frame, keep serving */
    }
}

static void *echo_open(const char *url)
{
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    if (zmq_connect(s, url) != 0) {
        fprintf(stderr, "jrpc-peer-zmq-echo: cannot connect to %s: %s\n", url,
                zmq_strerror(zmq_errno()));
        zmq_close(s);
        zmq_ctx_term(ctx);
        return NULL;
    }
    void **c = malloc(2 * sizeof *c);
    c[0] = ctx;
    c[1] = s;
    return c;
}

static int echo_call(void *conn, uint64_t base, int n, int timeout_ms, peer_seen_t *seen)
{
    void *s = ((void **)conn)[1];
    char buf[128];
    for (int i = 0; i < n; i++) {
        int len = peer_request(buf, base + (uint64_t)i);
        if (zmq_send(s, buf, (size_t)len, 0) < 0)
            return -1;
    }
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeout_ms, sizeof timeout_ms);
    for (int i = 0; i < n; i++) {
        int r = zmq_recv(s, buf, sizeof buf, 0);
        if (r < 0)
            return -1;
        peer_seen_mark_echo(seen, base, buf, r < (int)sizeof buf ? r : 0);
    }
    return 0;
}

static void echo_close(void *conn)
{
    void **c = conn;
    zmq_close(c[1]);
    zmq_ctx_term(c[0]);
    free(c);
}

int main(int argc, char **argv)
{
    static const peer_ops_t ops = { "zmq-echo", "ENDPOINT", serve, echo_open, echo_call, echo_close };
    return peer_main(argc, argv, &ops);
}
