/* The fixture every test_jrpc_worker*.c program shares. It compiles in the
 * worker library (worker/jrpc_worker.c and the files beside it) to reach its
 * state and its tick callback, and plays the broker: a ZeroMQ ROUTER bound
 * on inproc:// in the worker's own ZeroMQ context (w->zctx), read and
 * written by hand, while the worker's loop is turned with
 * uv_run(UV_RUN_NOWAIT) in the same thread until what the test waits for
 * has happened (bounded by generous wall-clock limits: the tests assert
 * outcomes, never speeds). Where only time would trigger something (a
 * deferred reset), the tick's callback is called by hand. REQUEST frames
 * are built with the proto codec, or written byte by byte from
 * PROTOCOL.md's examples; what the worker sends is checked byte-exactly
 * where the bytes are cheap to state. Include it once from one .c per
 * program; not every program uses every helper, hence -Wunused-function
 * is off for the helpers. */
#ifndef JRPC_TEST_WORKER_FIXTURE_H
#define JRPC_TEST_WORKER_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "../../worker/jrpc_worker.c"
#include "../../worker/jrpc_worker_tick.c"
#include "../../worker/jrpc_worker_names.c"
#include "../../worker/jrpc_worker_life.c"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"

#define WAIT_MS 10000  /* the longest any wait may take (a loaded machine) */
#define HELD_MAX 16

static struct {
    jrpc_worker_t *w;
    void          *router;
    void          *router2;       /* a second broker, when a test has one */
    char           id[256];       /* routing id of the last frame the ROUTER read */
    size_t         idlen;
    jrpc_wcall_t  *held[HELD_MAX]; /* calls "hold" keeps */
    int64_t        held_arg[HELD_MAX]; /* their params[0] (or -1) */
    int            nheld;
    int            echoed;        /* "echo" calls served */
    char           log[8192];     /* warn lines the worker wrote */
    size_t         loglen;
    msgpack_zone   zone;          /* for decoding what the worker sent */
} G;

static int buf_write_t(void *data, const char *p, size_t n)
{
    return jrpc_buf_append(data, p, n) < 0 ? -1 : 0;
}

static void on_log(int level, const char *line, size_t len)
{
    (void)level;
    if (G.loglen + len < sizeof G.log) {
        memcpy(G.log + G.loglen, line, len);
        G.loglen += len;
        G.log[G.loglen] = '\0';
    }
}

/* ---- handlers ---- */

/* subtract [a, b] → a - b; anything else → -32602 (PROTOCOL.md 3). */
static void h_subtract(jrpc_wcall_t *call, const msgpack_object *params, void *arg)
{
    (void)arg;
    if (params->type != MSGPACK_OBJECT_ARRAY || params->via.array.size != 2 ||
        params->via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
        params->via.array.ptr[1].type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
        jrpc_wcall_error(call, JRPC_INVALID_PARAMS, "Invalid params");
        return;
    }
    msgpack_pack_int64(jrpc_wcall_result(call), (int64_t)params->via.array.ptr[0].via.u64 -
                                                    (int64_t)params->via.array.ptr[1].via.u64);
    jrpc_wcall_finish(call);
}

static void h_invalid(jrpc_wcall_t *call, const msgpack_object *params, void *arg)
{
    (void)params, (void)arg;
    jrpc_wcall_error(call, JRPC_INVALID_PARAMS, "Invalid params");
}

/* An application error outside the reserved range, with its own message;
 * params [2]: with data {"n": 1} (jrpc_wcall_error_data: the data is what
 * was packed); [3]: jrpc_wcall_error_data with nothing packed (no data). */
static void h_apperr(jrpc_wcall_t *call, const msgpack_object *params, void *arg)
{
    (void)arg;
    uint64_t mode = params->type == MSGPACK_OBJECT_ARRAY && params->via.array.size == 1 &&
                            params->via.array.ptr[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER
                        ? params->via.array.ptr[0].via.u64
                        : 0;
    if (mode == 2) {
        msgpack_packer *pk = jrpc_wcall_result(call);
        msgpack_pack_map(pk, 1);
        msgpack_pack_str(pk, 1);
        msgpack_pack_str_body(pk, "n", 1);
        msgpack_pack_int(pk, 1);
    }
    if (mode >= 2)
        jrpc_wcall_error_data(call, 42, "no such account");
    else
        jrpc_wcall_error(call, 42, "no such account");
}

static void h_echo(jrpc_wcall_t *call, const msgpack_object *params, void *arg)
{
    (void)arg;
    G.echoed++;
    msgpack_pack_object(jrpc_wcall_result(call), *params);
    jrpc_wcall_finish(call);
}

/* Keeps the call to be completed later by the test (an async method). */
static void h_hold(jrpc_wcall_t *call, const msgpack_object *params, void *arg)
{
    (void)arg;
    assert_true(G.nheld < HELD_MAX);
    G.held_arg[G.nheld] = params->type == MSGPACK_OBJECT_ARRAY && params->via.array.size > 0 &&
                                  params->via.array.ptr[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER
                              ? (int64_t)params->via.array.ptr[0].via.u64
                              : -1;
    G.held[G.nheld++] = call;
}

/* Completes held call i with its params[0] as result. */
static void finish_held(int i)
{
    assert_non_null(G.held[i]);
    msgpack_pack_int64(jrpc_wcall_result(G.held[i]), G.held_arg[i]);
    assert_int_equal(jrpc_wcall_finish(G.held[i]), 0);
    G.held[i] = NULL;
}

/* ---- the broker's side ---- */

static uint64_t now_ms(void)
{
    return uv_hrtime() / 1000000;
}

static void turn(void)
{
    uv_run(G.w->loop, UV_RUN_NOWAIT);
}

/* Turns the loop until the ROUTER has a message (stored in buf, its routing
 * id in G.id); returns its size, or -1 after ms. */
static int recv_frame(char *buf, size_t cap, uint32_t ms)
{
    uint64_t until = now_ms() + ms;
    do {
        turn();
        char id[256];
        int n = zmq_recv(G.router, id, sizeof id, ZMQ_DONTWAIT);
        if (n >= 0) {
            memcpy(G.id, id, (size_t)n);
            G.idlen = (size_t)n;
            int k = zmq_recv(G.router, buf, cap, 0);
            assert_true(k >= 0 && (size_t)k <= cap);
            return k;
        }
        uv_sleep(1);
    } while (now_ms() < until);
    return -1;
}

/* The next message of type `type`, skipping the worker's HEARTBEATs. */
static int recv_type(int type, char *buf, size_t cap, uint32_t ms)
{
    uint64_t until = now_ms() + ms;
    for (;;) {
        uint64_t t = now_ms();
        if (t >= until)
            return -1;
        int n = recv_frame(buf, cap, (uint32_t)(until - t));
        if (n < 0)
            return -1;
        if (jrpc_wire_peek_type(buf, (size_t)n) == type)
            return n;
        assert_int_equal(jrpc_wire_peek_type(buf, (size_t)n), JRPC_WIRE_HEARTBEAT);
    }
}

/* Nothing but heartbeats reaches the ROUTER for ms. */
static void expect_quiet(uint32_t ms)
{
    char buf[512];
    assert_int_equal(recv_type(JRPC_WIRE_RESPONSE, buf, sizeof buf, ms), -1);
}

static void send_raw(const void *p, size_t n)
{
    assert_true(zmq_send(G.router, G.id, G.idlen, ZMQ_SNDMORE) >= 0);
    assert_true(zmq_send(G.router, p, n, 0) >= 0);
}

static void send_hex(const char *hex)
{
    unsigned char b[512];
    size_t n = 0;
    for (; hex[0] && hex[1]; hex += 2) {
        unsigned v;
        sscanf(hex, "%2x", &v);
        b[n++] = (unsigned char)v;
    }
    send_raw(b, n);
}

static void send_heartbeat(uint32_t hb_ms, uint32_t liveness)
{
    jrpc_buf_t b;
    jrpc_buf_init(&b);
    assert_int_equal(jrpc_wire_put_heartbeat_settings(&b, hb_ms, liveness), 0);
    send_raw(b.p, b.len);
    jrpc_buf_dispose(&b);
}

typedef struct item {
    jrpc_seq_t  seq;
    const char *method;
    int64_t     arg;          /* params [arg]; < 0: no params */
    uint32_t    timeout_ms;
    const char *traceparent;  /* NULL: none */
} item_t;

/* One REQUEST with the items, built with the proto codec. */
static void send_request(const item_t *it, uint32_t n)
{
    jrpc_buf_t b, params;
    jrpc_buf_init(&b);
    jrpc_buf_init(&params);
    assert_int_equal(jrpc_wire_put_request_begin(&b), 0);
    for (uint32_t i = 0; i < n; i++) {
        jrpc_buf_reset(&params);
        if (it[i].arg >= 0) {
            msgpack_packer pk;
            msgpack_packer_init(&pk, &params, buf_write_t);
            msgpack_pack_array(&pk, 1);
            msgpack_pack_int64(&pk, it[i].arg);
        }
        const char *tp = it[i].traceparent;
        assert_int_equal(jrpc_wire_put_request_call(&b, it[i].seq,
                                                    (jrpc_span_t){ it[i].method, strlen(it[i].method) },
                                                    (jrpc_span_t){ params.p, params.len },
                                                    it[i].timeout_ms,
                                                    (jrpc_span_t){ tp, tp ? strlen(tp) : 0 }),
                         0);
    }
    jrpc_wire_put_request_end(&b, n);
    send_raw(b.p, b.len);
    jrpc_buf_dispose(&b);
    jrpc_buf_dispose(&params);
}

/* Decodes a RESPONSE the worker sent into seqs[], results (or error codes)[]. */
static uint32_t decode_response(const char *p, size_t n, jrpc_seq_t *seqs, int64_t *vals,
                                bool *is_err, uint32_t cap)
{
    jrpc_wire_msg_t m;
    msgpack_zone_clear(&G.zone);
    assert_int_equal(jrpc_wire_decode(p, n, &G.zone, &m), 0);
    assert_int_equal(m.type, JRPC_WIRE_RESPONSE);
    assert_true(m.nitems <= cap);
    for (uint32_t i = 0; i < m.nitems; i++) {
        jrpc_wire_answer_t a;
        assert_int_equal(jrpc_wire_response_item(&m, i, &a), 0);
        seqs[i] = a.seq;
        is_err[i] = a.is_error;
        const msgpack_object *v = a.value;
        if (a.is_error)
            v = jrpc_mpack_map_get(v, "code");
        assert_non_null(v);
        vals[i] = v->type == MSGPACK_OBJECT_NIL ? INT64_MIN : v->via.i64;
    }
    return m.nitems;
}

static void expect_bytes(const char *p, int n, const char *hex)
{
    char got[2 * 1024 + 1];
    assert_true(n >= 0 && n < 1024);
    for (int i = 0; i < n; i++)
        snprintf(got + 2 * i, 3, "%02x", (unsigned char)p[i]);
    got[2 * n] = '\0';
    assert_string_equal(got, hex);
}

/* ---- fixtures ---- */

static int setup(void **state)
{
    (void)state;
    memset(&G, 0, sizeof G);
    msgpack_zone_init(&G.zone, 4096);
    jrpc_log_set_level("warn");
    jrpc_log_set_sink(on_log);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (G.router)
        zmq_close(G.router);
    if (G.router2)
        zmq_close(G.router2);
    jrpc_worker_destroy(&G.w);
    msgpack_zone_destroy(&G.zone);
    jrpc_log_set_sink(NULL);
    return 0;
}

/* A ROUTER in the worker's context, bound to a fresh inproc endpoint. */
static void *bind_router(char *ep, size_t cap)
{
    static unsigned seq;
    snprintf(ep, cap, "inproc://test-worker-%u", ++seq);
    void *r = zmq_socket(G.w->zctx, ZMQ_ROUTER);
    assert_non_null(r);
    int zero = 0;
    zmq_setsockopt(r, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(zmq_bind(r, ep), 0);
    return r;
}

/* A worker with opts (linger 0) serving the test's methods, connected to
 * G.router; its READY is read (into buf when given) and the broker's
 * HEARTBEAT with settings hb_ms × liveness answers it (0: none). */
static int start(jrpc_worker_opts_t *o, uint32_t hb_ms, uint32_t liveness, char *buf, size_t cap)
{
    o->linger_ms = 100;
    G.w = jrpc_worker_new(o);
    assert_non_null(G.w);
    assert_int_equal(jrpc_worker_handle(G.w, "subtract", h_subtract, NULL), 0);
    assert_int_equal(jrpc_worker_handle_ex(G.w, "sum", h_echo, NULL, JRPC_WORKER_IDEMPOTENT), 0);
    assert_int_equal(jrpc_worker_handle(G.w, "get_data", h_invalid, NULL), 0);
    assert_int_equal(jrpc_worker_handle(G.w, "apperr", h_apperr, NULL), 0);
    assert_int_equal(jrpc_worker_handle(G.w, "echo", h_echo, NULL), 0);
    assert_int_equal(jrpc_worker_handle(G.w, "hold", h_hold, NULL), 0);
    char ep[64];
    G.router = bind_router(ep, sizeof ep);
    assert_int_equal(jrpc_worker_connect(G.w, ep), 0);
    char tmp[512];
    if (buf == NULL)
        buf = tmp, cap = sizeof tmp;
    int n = recv_type(JRPC_WIRE_READY, buf, cap, WAIT_MS);
    assert_true(n > 0);
    if (hb_ms)
        send_heartbeat(hb_ms, liveness);
    return n;
}

/* start() with the default options but for the worker's own heartbeat
 * (own_hb_ms; 0: the default), the broker answering hb_ms × liveness. */
static void start_with(uint32_t own_hb_ms, uint32_t hb_ms, uint32_t liveness)
{
    jrpc_worker_opts_t o;
    jrpc_worker_opts_init(&o);
    if (own_hb_ms)
        o.heartbeat_ms = own_hb_ms;
    start(&o, hb_ms, liveness, NULL, 0);
}

/* The usual worker: default options, the broker's 1000 ms × 3. */
static void start_default(void)
{
    start_with(0, 1000, 3);
}

static conn_t *conn0(void)
{
    return G.w->conns[0];
}

/* Turns the loop until *flag, or fails after WAIT_MS. */
static void turn_until(const bool *flag)
{
    uint64_t until = now_ms() + WAIT_MS;
    while (!*flag && now_ms() < until) {
        turn();
        uv_sleep(1);
    }
    assert_true(*flag);
}

/* Turns the loop until "hold" keeps n calls in all, or fails after WAIT_MS. */
static void wait_held(int n)
{
    uint64_t until = now_ms() + WAIT_MS;
    while (G.nheld < n && now_ms() < until)
        turn();
    assert_int_equal(G.nheld, n);
}

/* One REQUEST with one "hold" call [seq] (its deadline timeout_ms), waited
 * for until the handler keeps it. */
static void hold_one(jrpc_seq_t seq, uint32_t timeout_ms)
{
    int before = G.nheld;
    send_request(&(item_t){ seq, "hold", (int64_t)seq, timeout_ms, NULL }, 1);
    wait_held(before + 1);
}

/* The next message of type `type`; asserts there is one, returns its size. */
static int recv_ok(int type, char *buf, size_t cap)
{
    int n = recv_type(type, buf, cap, WAIT_MS);
    assert_true(n > 0);
    return n;
}

/* The next message of type `type` is, byte for byte, hex. */
static void expect_msg(int type, const char *hex)
{
    char buf[512];
    expect_bytes(buf, recv_type(type, buf, sizeof buf, WAIT_MS), hex);
}

/* A RESPONSE read and decoded (up to 4 answers). */
typedef struct resp {
    jrpc_seq_t seqs[4];
    int64_t    vals[4];
    bool       err[4];
} resp_t;

/* The next RESPONSE, decoded into r; returns how many answers it has. */
static uint32_t recv_response(resp_t *r)
{
    char buf[512];
    int n = recv_type(JRPC_WIRE_RESPONSE, buf, sizeof buf, WAIT_MS);
    return decode_response(buf, (size_t)n, r->seqs, r->vals, r->err, 4);
}

/* The routing id the ROUTER last read, kept to tell a fresh socket by. */
typedef struct rid {
    char   id[256];
    size_t len;
} rid_t;

static rid_t save_id(void)
{
    rid_t r;
    r.len = G.idlen;
    memcpy(r.id, G.id, r.len);
    return r;
}

/* The worker speaks from another socket than the one saved. */
static void assert_new_id(const rid_t *old)
{
    assert_false(G.idlen == old->len && memcmp(G.id, old->id, old->len) == 0);
}

/* A second broker: the first one's ROUTER moves to G.router2 (not read any
 * more), a fresh one in G.router, and the worker's READY read from it. */
static void connect_second_broker(void)
{
    char ep[64], buf[512];
    G.router2 = G.router;
    G.router = bind_router(ep, sizeof ep);
    assert_int_equal(jrpc_worker_connect(G.w, ep), 0);
    recv_ok(JRPC_WIRE_READY, buf, sizeof buf);
}

#pragma GCC diagnostic pop

#endif
