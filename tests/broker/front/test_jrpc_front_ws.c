/* Unit tests of broker/jrpc_front_ws: the handshake as a decision over a
 * head read by the real HTTP reader, and the session over a fake
 * connection (its io records the bytes written and the reading state)
 * with a real broker core whose worker ROUTER is on inproc:// and has no
 * worker: calls to a method nobody serves wait in the broker's queue for
 * the start-up grace, which is what keeps them "in flight" here, and are
 * answered -32601 when it ends. Client frames are masked, as RFC 6455
 * requires; what the session writes is parsed back into frames. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <zmq.h>

#include "../broker_env.h"
#include "jrpc_front_ws.h"
#include "jrpc_http_reader.h"
#include "jrpc_log.h"

/* ---- the handshake ----------------------------------------------------------- */

static const jrpc_http_limits_t LIM = { 16384, 1 << 20 };

/* Reads the head of req into r; returns it. */
static const jrpc_http_head_t *head_of(jrpc_http_reader_t *r, const char *req)
{
    jrpc_http_reader_init(r, &LIM);
    jrpc_http_event_t ev;
    jrpc_http_reader_feed(r, req, strlen(req), &ev);
    assert_int_equal(ev.kind, JRPC_HTTP_HEAD);
    return jrpc_http_reader_head(r);
}

#define UPG "Upgrade: websocket\r\nConnection: Upgrade\r\n"
#define KEY "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
#define V13 "Sec-WebSocket-Version: 13\r\n"

static void handshake(void **state)
{
    (void)state;
    static const struct {
        const char *req;
        bool        origin_ok;
        uint16_t    status;
        const char *protocol;  /* 101: echoed, or NULL */
        bool        stream;
    } cases[] = {
        { "GET /rpc HTTP/1.1\r\nHost: x\r\n" UPG KEY V13 "\r\n", true, 101, NULL, false },
        { "GET /rpc?a=b&stream=1 HTTP/1.1\r\nHost: x\r\n" UPG KEY V13 "\r\n", true, 101, NULL, true },
        { "GET /?stream=true HTTP/1.1\r\nHost: x\r\n" UPG KEY V13 "\r\n", true, 101, NULL, true },
        { "GET /?streams=1 HTTP/1.1\r\nHost: x\r\n" UPG KEY V13 "\r\n", true, 101, NULL, false },
        { "GET / HTTP/1.1\r\nHost: x\r\n" UPG KEY V13
          "Sec-WebSocket-Protocol: chat, jrpc.stream, jrpc\r\n\r\n", true, 101, "jrpc.stream", true },
        { "GET /?stream=1 HTTP/1.1\r\nHost: x\r\n" UPG KEY V13
          "Sec-WebSocket-Protocol: jrpc\r\n\r\n", true, 101, "jrpc", false },
        { "GET / HTTP/1.1\r\nHost: x\r\n" UPG KEY V13 "Sec-WebSocket-Protocol: JRPC, x\r\n\r\n",
          true, 101, NULL, false },
        { "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: h2c, WebSocket\r\nConnection: keep-alive, upgrade\r\n"
          KEY V13 "\r\n", true, 101, NULL, false },
        /* refusals */
        { "GET / HTTP/1.1\r\nHost: x\r\n" UPG V13 "\r\n", true, 400, NULL, false },
        { "GET / HTTP/1.1\r\nHost: x\r\n" UPG KEY KEY V13 "\r\n", true, 400, NULL, false },
        { "GET / HTTP/1.1\r\nHost: x\r\n" UPG "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=\r\n" V13
          "\r\n", true, 400, NULL, false },
        { "GET / HTTP/1.1\r\nHost: x\r\n" UPG KEY "\r\n", true, 400, NULL, false },
        { "GET / HTTP/1.1\r\nHost: x\r\n" UPG KEY V13 V13 "\r\n", true, 400, NULL, false },
        { "GET / HTTP/1.1\r\nHost: x\r\n" UPG KEY "Sec-WebSocket-Version: 8\r\n\r\n", true, 426,
          NULL, false },
        { "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n" KEY V13 "\r\n", true, 400, NULL, false },
        { "GET / HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: h2c\r\n" KEY V13 "\r\n", true,
          400, NULL, false },
        { "GET / HTTP/1.0\r\n" UPG KEY V13 "\r\n", true, 400, NULL, false },
        { "GET / HTTP/1.1\r\nHost: x\r\n" UPG KEY V13 "Content-Length: 2\r\n\r\n", true, 400, NULL,
          false },
        { "GET / HTTP/1.1\r\nHost: x\r\n" UPG KEY V13 "\r\n", false, 403, NULL, false },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        jrpc_http_reader_t r;
        const jrpc_http_head_t *h = head_of(&r, cases[i].req);
        assert_true(jrpc_front_ws_wanted(h));
        jrpc_front_ws_hs_t hs;
        jrpc_front_ws_handshake(h, cases[i].origin_ok, &hs);
        if (hs.status != cases[i].status)
            fail_msg("case %zu: status %u, want %u (%s)", i, hs.status, cases[i].status,
                     hs.reason ? hs.reason : "-");
        if (hs.status != 101) {
            assert_non_null(hs.reason);
            continue;
        }
        assert_string_equal(hs.accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="); /* RFC 6455 1.3 */
        if (cases[i].protocol)
            assert_string_equal(hs.protocol, cases[i].protocol);
        else
            assert_null(hs.protocol);
        assert_int_equal(hs.stream, cases[i].stream);
    }
    /* what is a WebSocket request at all */
    jrpc_http_reader_t r;
    assert_false(jrpc_front_ws_wanted(head_of(&r, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")));
    assert_false(jrpc_front_ws_wanted(head_of(&r, "POST / HTTP/1.1\r\nHost: x\r\n" UPG "\r\n")));
    assert_false(jrpc_front_ws_wanted(head_of(&r, "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\n\r\n")));
    assert_true(jrpc_front_ws_wanted(head_of(&r, "GET / HTTP/1.1\r\nHost: x\r\n" KEY "\r\n")));
    /* a cut protocol list: the last element kept may be a piece, and is not taken */
    char req[1024], list[200];
    memset(list, 'a', sizeof list);
    memcpy(list + 119, ", jrpc.stream", 13);
    list[132] = '\0';
    snprintf(req, sizeof req, "GET / HTTP/1.1\r\nHost: x\r\n" UPG KEY V13
             "Sec-WebSocket-Protocol: %s\r\n\r\n", list);
    jrpc_front_ws_hs_t hs;
    jrpc_front_ws_handshake(head_of(&r, req), true, &hs);
    assert_int_equal(hs.status, 101);
    assert_null(hs.protocol);   /* "jrpc" of "jrpc.stream" was all the room kept */
}

static void head101(void **state)
{
    (void)state;
    jrpc_front_ws_hs_t hs = { .status = 101, .protocol = "jrpc.stream" };
    strcpy(hs.accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    char out[256];
    int n = jrpc_front_ws_head101(&hs, "D", out, sizeof out);
    assert_true(n > 0);
    out[n] = '\0';
    assert_string_equal(out, "HTTP/1.1 101 Switching Protocols\r\nDate: D\r\nUpgrade: websocket\r\n"
                             "Connection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
                             "Sec-WebSocket-Protocol: jrpc.stream\r\n\r\n");
    hs.protocol = NULL;
    n = jrpc_front_ws_head101(&hs, NULL, out, sizeof out);
    out[n] = '\0';
    assert_string_equal(out, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                             "Connection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n");
    assert_int_equal(jrpc_front_ws_head101(&hs, NULL, out, 40), -1);
}

/* ---- the session --------------------------------------------------------------- */

static struct {
    uv_loop_t      loop;
    void          *zctx;
    jrpc_broker_t *b;
    char           out[1 << 16];  /* bytes the session wrote */
    size_t         len;
    size_t         queued;        /* what io.queued reports */
    bool           reading;
    int            overs;         /* io.over calls */
    jrpc_front_ws_t *s;           /* the session (for teardown after a failure) */
} G;

static int nep;   /* endpoints made: inproc names are never reused */

static int io_write(void *conn, const char *p, size_t n)
{
    (void)conn;
    assert_true(G.len + n <= sizeof G.out);
    memcpy(G.out + G.len, p, n);
    G.len += n;
    return 0;
}
static size_t io_queued(void *conn) { (void)conn; return G.queued; }
static void io_reading(void *conn, bool on) { (void)conn; G.reading = on; }
static void io_over(void *conn) { (void)conn; G.overs++; }
static const jrpc_front_ws_io_t IO = { io_write, io_queued, io_reading, io_over };

/* The frames written so far, as "T:payload" (T: opcode; a close as C:code). */
static void frames(char *dst, size_t cap)
{
    size_t at = 0, w = 0;
    dst[0] = '\0';
    while (at + 2 <= G.len) {
        unsigned op = (unsigned char)G.out[at] & 0x0f;
        size_t n = (unsigned char)G.out[at + 1] & 0x7f, off = 2;
        assert_false((unsigned char)G.out[at + 1] & 0x80);   /* never masked */
        if (n == 126) {
            n = ((size_t)(unsigned char)G.out[at + 2] << 8) | (unsigned char)G.out[at + 3];
            off = 4;
        }
        assert_true(n < 127 || off == 4);
        const char *p = G.out + at + off;
        int k;
        if (op == 8)
            k = snprintf(dst + w, cap - w, "C:%u|", ((unsigned char)p[0] << 8) | (unsigned char)p[1]);
        else
            k = snprintf(dst + w, cap - w, "%u:%.*s|", op, (int)n, p);
        w += (size_t)k;
        at += off + n;
    }
}

/* A masked client text frame of msg (under 64 KiB). */
static size_t client_frame(char *dst, const char *msg)
{
    size_t n = strlen(msg), off = 2;
    static const unsigned char key[4] = { 0x11, 0x22, 0x33, 0x44 };
    dst[0] = (char)0x81;
    if (n < 126) {
        dst[1] = (char)(0x80 | n);
    } else {
        assert_true(n < 65536);
        dst[1] = (char)(0x80 | 126);
        dst[2] = (char)(n >> 8);
        dst[3] = (char)(n & 0xff);
        off = 4;
    }
    memcpy(dst + off, key, 4);
    for (size_t i = 0; i < n; i++)
        dst[off + 4 + i] = (char)(msg[i] ^ key[i % 4]);
    return off + 4 + n;
}

static int feed_rc(jrpc_front_ws_t *s, const char *msg)
{
    char f[1024];
    assert_true(strlen(msg) + 8 <= sizeof f);
    size_t n = client_frame(f, msg);
    return jrpc_front_ws_feed(s, f, n);
}

static void feed(jrpc_front_ws_t *s, const char *msg)
{
    assert_int_equal(feed_rc(s, msg), 0);
}

/* Turns the loop until the written frames are want (or fails after 5 s). */
static void expect_frames(const char *want)
{
    char got[4096];
    uint64_t until = uv_hrtime() + 5000000000ull;
    for (;;) {
        frames(got, sizeof got);
        if (strcmp(got, want) == 0)
            return;
        if (uv_hrtime() > until)
            fail_msg("frames:\n  got  %s\n  want %s", got, want);
        uv_run(&G.loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
}

static jrpc_front_ws_t *session(bool stream, uint32_t max_inflight)
{
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://test-front-ws-%d", ++nep);
    /* No worker: a call waits for the start-up grace (heartbeat x liveness,
     * 300 ms), then -32601. */
    jrpc_broker_opts_t o = {
        .limits = JRPC_LIMITS_DEFAULT, .timeout_ms = 10000, .max_open = 100,
        .workers = { .endpoint = ep, .zmq_ctx = G.zctx, .max_queue = 100, .heartbeat_ms = 100,
                     .liveness = 3, .max_redispatch = 3, .max_worker_methods = 64,
                     .max_methods = 64, .max_worker_credit = 64, .max_worker_bytes = 1 << 20 },
        .skew_s = 300,
    };
    G.b = jrpc_broker_new(&G.loop, &o);
    assert_non_null(G.b);
    jrpc_front_ws_opts_t wo = { .max_msg = 4096, .max_inflight = max_inflight,
                                .max_queued = 1 << 20, .ping_ms = 60000, .idle_ms = 60000,
                                .stream = stream, .peer = { "test", 4 } };
    G.len = 0;
    G.reading = true;
    jrpc_front_ws_t *s = jrpc_front_ws_new(&G.loop, G.b, &wo, &IO, NULL);
    assert_non_null(s);
    G.s = s;
    return s;
}

static void finish(jrpc_front_ws_t **s)
{
    jrpc_front_ws_destroy(s);
    G.s = NULL;
    jrpc_broker_destroy(&G.b);
    uv_run(&G.loop, UV_RUN_DEFAULT);
}

static int setup(void **state)
{
    (void)state;
    memset(&G, 0, sizeof G);
    broker_env_open(&G.loop, &G.zctx);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (G.b) { /* a test failed half-way */
        jrpc_front_ws_destroy(&G.s);
        jrpc_broker_destroy(&G.b);
        uv_run(&G.loop, UV_RUN_DEFAULT);
    }
    broker_env_close(&G.loop, G.zctx);
    return 0;
}

#define NOSUCH(id) "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":" #id "}"
#define E32601(id) "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32601,\"message\":\"Method not found\"},\"id\":" #id "}"

/* Mode jrpc: one message per body; notifications only: none; whole-body
 * errors as JSON-RPC. */
static void whole_bodies(void **state)
{
    (void)state;
    jrpc_front_ws_t *s = session(false, 64);
    feed(s, "[{\"id\":1},{\"jsonrpc\":\"2.0\",\"method\":\"rpc.x\",\"id\":2}]");
    feed(s, "{\"jsonrpc\":\"2.0\",\"method\":\"rpc.x\"}");
    feed(s, "[1,");
    expect_frames("1:[{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32600,\"message\":\"Invalid Request\"},\"id\":1},"
                  "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32601,\"message\":\"Method not found\","
                  "\"data\":\"rpc.* names are reserved\"},\"id\":2}]|"
                  "1:{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32700,\"message\":\"Parse error\"},\"id\":null}|");
    finish(&s);
}

/* Mode jrpc.stream: one message per answer, no summary. */
static void streamed(void **state)
{
    (void)state;
    jrpc_front_ws_t *s = session(true, 64);
    feed(s, "[" NOSUCH(1) ",{\"id\":2}," NOSUCH(3) "]");
    /* the invalid member at once; the others when the grace ends */
    expect_frames("1:{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32600,\"message\":\"Invalid Request\"},\"id\":2}|");
    expect_frames("1:{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32600,\"message\":\"Invalid Request\"},\"id\":2}|"
                  "1:" E32601(1) "|1:" E32601(3) "|");
    finish(&s);
}

/* In flight: batch items count; the message that does not fit waits and
 * the socket is not read until answers make room. */
static void inflight(void **state)
{
    (void)state;
    jrpc_front_ws_t *s = session(false, 3);
    feed(s, "[" NOSUCH(1) "," NOSUCH(2) "]");
    assert_true(G.reading);
    feed(s, "[" NOSUCH(3) "," NOSUCH(4) "]");   /* 2 + 2 > 3: waits */
    assert_false(G.reading);
    feed(s, NOSUCH(5));                            /* behind it, in order */
    assert_int_equal(G.len, 0);
    expect_frames("1:[" E32601(1) "," E32601(2) "]|1:[" E32601(3) "," E32601(4) "]|1:" E32601(5) "|");
    assert_true(G.reading);
    finish(&s);
}

/* A batch larger than the limit starts once nothing else is in flight. */
static void inflight_big(void **state)
{
    (void)state;
    jrpc_front_ws_t *s = session(false, 3);   /* a new broker: in its start-up grace */
    feed(s, NOSUCH(6));
    feed(s, "[" NOSUCH(7) "," NOSUCH(8) "," NOSUCH(9) "," NOSUCH(10) "]");
    assert_false(G.reading);
    expect_frames("1:" E32601(6) "|1:[" E32601(7) "," E32601(8) "," E32601(9) "," E32601(10) "]|");
    finish(&s);
}

/* The send queue past its limit: 1008 after the answer, bodies cancelled,
 * the front told once (from the timer, outside the broker's callback). */
static void send_queue(void **state)
{
    (void)state;
    jrpc_front_ws_t *s = session(false, 64);
    feed(s, NOSUCH(1));
    G.queued = 2 << 20;   /* the client stopped reading */
    /* answered at once, over the limit: feed reports the end itself (the
     * front then closes); nothing more is sent */
    assert_int_equal(feed_rc(s, "{\"id\":2}"), 1);
    expect_frames("1:{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32600,\"message\":\"Invalid Request\"},\"id\":2}|C:1008|");
    assert_int_equal(G.overs, 0);
    G.queued = 0;
    finish(&s);
}

/* Drain: what is in flight is answered, then 1001. */
static void drain(void **state)
{
    (void)state;
    jrpc_front_ws_t *s = session(false, 64);
    feed(s, NOSUCH(1));
    jrpc_front_ws_drain(s);
    assert_false(G.reading);
    expect_frames("1:" E32601(1) "|C:1001|");
    while (G.overs == 0)
        uv_run(&G.loop, UV_RUN_ONCE);
    assert_int_equal(G.overs, 1);
    finish(&s);
}

/* The connection goes with a body in flight: cancelled, nothing leaks. */
static void gone(void **state)
{
    (void)state;
    jrpc_front_ws_t *s = session(true, 64);
    jrpc_broker_stats_t st0, st;
    jrpc_broker_stats(G.b, &st0, NULL);   /* (the counters are the process's) */
    feed(s, "[" NOSUCH(1) "," NOSUCH(2) "]");
    jrpc_front_ws_destroy(&s);
    G.s = NULL;
    jrpc_broker_stats(G.b, &st, NULL);
    assert_int_equal(st.cancelled - st0.cancelled, 1);
    finish(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(handshake),
        cmocka_unit_test(head101),
        cmocka_unit_test_setup_teardown(whole_bodies, setup, teardown),
        cmocka_unit_test_setup_teardown(streamed, setup, teardown),
        cmocka_unit_test_setup_teardown(inflight, setup, teardown),
        cmocka_unit_test_setup_teardown(inflight_big, setup, teardown),
        cmocka_unit_test_setup_teardown(send_queue, setup, teardown),
        cmocka_unit_test_setup_teardown(drain, setup, teardown),
        cmocka_unit_test_setup_teardown(gone, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
