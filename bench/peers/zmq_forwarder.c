/* jrpc-peer-zmq-forwarder — the floor for jrpc's ZeroMQ shape: two raw hops,
 * client -> forwarder -> worker and back, with no JSON work anywhere.
 *
 *   jrpc-peer-zmq-forwarder proxy FRONT BACK   a ROUTER bound at FRONT, a DEALER
 *                                              bound at BACK, zmq_proxy() between
 *   jrpc-peer-zmq-forwarder serve BACK         the echo worker: a DEALER that
 *                                              connects to BACK and sends every
 *                                              frame back as it came
 *   jrpc-peer-zmq-forwarder load --url FRONT [options]   (see peer_load.h)
 *
 * The same shape as jrpc's (a client DEALER, the broker's ROUTER, the workers'
 * side where the worker connects), with the least work per message: the
 * ROUTER prepends the client's identity, the back DEALER hands [identity,
 * body] to the worker, whose DEALER adds and strips nothing, so echoing the
 * frames as they come routes the answer back to the client.
 *
 * Unlike jrpc-peer-zmq-echo (one message per call), a "batch" of N here is ONE
 * message, the bytes jrpc-bench sends for --batch N: an empty delimiter frame
 * and a JSON array of N `add` calls with jrpc-bench's ids
 * ("<connection>-<batch>-<index>"); the client waits for the echo and
 * compares it with what it sent (memcmp, not a parser). Calls are counted N
 * per message, so calls/s compare with jrpc-bench's.
 *
 * A program of its own rather than a mode of zmq_echo.c: its load side sends
 * another shape (one message per batch), and peer_main names the program in
 * its usage and reports. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "jrpc_buf.h"   /* jrpc_u64_put, as jrpc-bench writes its ids */
#include "peer_load.h"

#define NAME "jrpc-peer-zmq-forwarder"

/* Receives every frame on s and sends it back with the same more flag, until
 * the socket fails. */
static int echo_frames(void *s)
{
    for (;;) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, s, 0) < 0)
            return 1;
        int more = zmq_msg_more(&m);
        if (zmq_msg_send(&m, s, more ? ZMQ_SNDMORE : 0) < 0) {  /* takes the content */
            zmq_msg_close(&m);
            return 1;
        }
    }
}

static int proxy(const char *front, const char *back)
{
    void *ctx = zmq_ctx_new();
    void *f = zmq_socket(ctx, ZMQ_ROUTER), *b = zmq_socket(ctx, ZMQ_DEALER);
    if (zmq_bind(f, front) != 0 || zmq_bind(b, back) != 0) {
        fprintf(stderr, NAME ": cannot bind %s and %s: %s\n", front, back, zmq_strerror(zmq_errno()));
        return 1;
    }
    fprintf(stderr, NAME ": forwarding %s -> %s\n", front, back);
    zmq_proxy(f, b, NULL);  /* returns only when the context is terminated */
    return 1;
}

static int serve(const char *back)
{
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    if (zmq_connect(s, back) != 0) {
        fprintf(stderr, NAME ": cannot connect to %s: %s\n", back, zmq_strerror(zmq_errno()));
        return 1;
    }
    fprintf(stderr, NAME ": echoing for %s\n", back);
    return echo_frames(s);
}

/* ---- the load side ------------------------------------------------------- */

typedef struct {
    void *ctx, *s;
    int timeout_ms;
    char *buf;       /* the batch sent, kept to compare the echo with */
    size_t cap;
} fwd_conn_t;

static void *fwd_open(const char *url)
{
    fwd_conn_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->ctx = zmq_ctx_new();
    c->s = zmq_socket(c->ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(c->s, ZMQ_LINGER, &zero, sizeof zero);
    if (zmq_connect(c->s, url) != 0) {
        fprintf(stderr, NAME ": cannot connect to %s: %s\n", url, zmq_strerror(zmq_errno()));
        zmq_close(c->s);
        zmq_ctx_term(c->ctx);
        free(c);
        return NULL;
    }
    return c;
}

/* jrpc-bench's body for --batch n (build_batch with the default method and
 * params, no notifications): its ids are "<connection>-<seq>-<index>", where
 * peer_load's base is the connection in the top bits and n ids per batch. */
static size_t build_batch(char *out, uint64_t base, int n)
{
    static const char head[] = "{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"params\":[1,2],\"id\":\"";
    uint64_t idx = base >> 40, seq = (base & ((UINT64_C(1) << 40) - 1)) / (uint64_t)n;
    char prefix[64];
    size_t pl = (size_t)(jrpc_u64_put(prefix, idx) - prefix);
    prefix[pl++] = '-';
    pl = (size_t)(jrpc_u64_put(prefix + pl, seq) - prefix);
    prefix[pl++] = '-';
    size_t len = 0;
    if (n > 1)
        out[len++] = '[';
    for (int i = 0; i < n; i++) {
        if (i)
            out[len++] = ',';
        memcpy(out + len, head, sizeof head - 1);
        len += sizeof head - 1;
        memcpy(out + len, prefix, pl);
        len += pl;
        len = (size_t)(jrpc_u64_put(out + len, (uint64_t)i) - out);
        out[len++] = '"';
        out[len++] = '}';
    }
    if (n > 1)
        out[len++] = ']';
    return len;
}

static int fwd_call(void *conn, uint64_t base, int n, int timeout_ms, peer_seen_t *seen)
{
    fwd_conn_t *c = conn;
    size_t need = (size_t)n * 128 + 2;   /* head 53 + prefix <= 30 + index + 3 per call */
    if (c->cap < need) {
        free(c->buf);
        if (!(c->buf = malloc(need)))
            return -1;
        c->cap = need;
    }
    if (c->timeout_ms != timeout_ms) {
        zmq_setsockopt(c->s, ZMQ_RCVTIMEO, &timeout_ms, sizeof timeout_ms);
        c->timeout_ms = timeout_ms;
    }
    size_t len = build_batch(c->buf, base, n);
    /* jrpc's client sends an empty delimiter frame, then the body. */
    if (zmq_send(c->s, "", 0, ZMQ_SNDMORE) < 0 || zmq_send(c->s, c->buf, len, 0) < 0)
        return -1;
    /* The echo must be the message sent, frame for frame and byte for byte:
     * then every call in it counts as answered; otherwise none does
     * (peer_load counts them lost). */
    int same = 1, frame = 0, more;
    do {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, c->s, 0) < 0) {
            zmq_msg_close(&m);
            return -1;
        }
        more = zmq_msg_more(&m);
        size_t want = frame == 0 ? 0 : len;
        if (frame > 1 || zmq_msg_size(&m) != want ||
            (frame == 1 && memcmp(zmq_msg_data(&m), c->buf, len) != 0))
            same = 0;
        frame++;
        zmq_msg_close(&m);
    } while (more);
    if (same && frame == 2)
        for (int i = 0; i < n; i++)
            peer_seen_mark_id(seen, base, base + (uint64_t)i);
    return 0;
}

static void fwd_close(void *conn)
{
    fwd_conn_t *c = conn;
    zmq_close(c->s);
    zmq_ctx_term(c->ctx);
    free(c->buf);
    free(c);
}

int main(int argc, char **argv)
{
    static const peer_ops_t ops = { "zmq-forwarder", "ENDPOINT", serve, fwd_open, fwd_call, fwd_close };
    if (argc == 4 && strcmp(argv[1], "proxy") == 0)
        return proxy(argv[2], argv[3]);
    if (argc == 2 && strcmp(argv[1], "--help") == 0)
        printf("usage: " NAME " proxy FRONT BACK   the forwarder: a ROUTER at FRONT, a DEALER at BACK\n"
               "       (serve: the echo worker, ENDPOINT the proxy's BACK; load: --url its FRONT)\n");
    return peer_main(argc, argv, &ops);
}
