/* Unit tests of the worker library (worker/jrpc_worker.c and the files
 * beside it, compiled in to reach its state and its tick callback). The test plays the broker: a
 * ZeroMQ ROUTER bound on inproc:// in the worker's own ZeroMQ context
 * (w->zctx), read and written by hand, while the worker's loop is turned
 * with uv_run(UV_RUN_NOWAIT) in the same thread until what the test waits
 * for has happened (bounded by generous wall-clock limits: the tests assert
 * outcomes, never speeds). Where only time would trigger something (a
 * deferred reset), the tick's callback is called by hand. REQUEST frames
 * are built with the proto codec, or written byte by byte from
 * PROTOCOL.md's examples; what the worker sends is checked byte-exactly
 * where the bytes are cheap to state. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "../../worker/jrpc_worker.c"
#include "../../worker/jrpc_worker_tick.c"
#include "../../worker/jrpc_worker_names.c"
#include "../../worker/jrpc_worker_life.c"

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

/* ---- PROBE (PROTOCOL.md 2.8) ---- */

static int probes_asked;

static bool probe_live(const char *session, void *arg)
{
    (void)arg;
    probes_asked++;
    return strcmp(session, "s-live") == 0;
}

static void no_message(const char *session, const char *json, size_t n, void *arg)
{
    (void)session, (void)json, (void)n, (void)arg;
}

/* A worker of jrpc_worker_probes() says so in READY ("probes": true, with
 * its "instance") and answers each question at once, on the connection
 * that asked, with the callback's verdict; an answer sent to it (live not
 * nil) asks nothing. Without jrpc_worker_messages() first: -EINVAL. */
static void test_probes(void **state)
{
    (void)state;
    G.w = jrpc_worker_new(&(jrpc_worker_opts_t){ .credit = 4, .heartbeat_ms = 1000,
                                                  .liveness = 3, .linger_ms = 100 });
    assert_non_null(G.w);
    assert_int_equal(jrpc_worker_handle(G.w, "echo", h_echo, NULL), 0);
    assert_int_equal(jrpc_worker_probes(G.w, probe_live, NULL), -EINVAL);
    assert_int_equal(jrpc_worker_messages(G.w, "00112233445566aa", no_message, NULL), 0);
    assert_int_equal(jrpc_worker_probes(G.w, probe_live, NULL), 0);
    char ep[64], buf[512];
    G.router = bind_router(ep, sizeof ep);
    assert_int_equal(jrpc_worker_connect(G.w, ep), 0);
    int n = recv_ok(JRPC_WIRE_READY, buf, sizeof buf);
    jrpc_wire_msg_t m;
    assert_int_equal(jrpc_wire_decode(buf, (size_t)n, &G.zone, &m), 0);
    assert_true(m.has_instance && m.probes);
    probes_asked = 0;
    /* [1, 9, 5, "s-live", nil] -> [1, 9, 5, "s-live", true] */
    send_hex("95010905a6732d6c697665c0");
    expect_msg(JRPC_WIRE_PROBE, "95010905a6732d6c697665c3");
    /* an answer sent to the worker: dropped; then [1, 9, 6, "s-gone", nil] -> false */
    send_hex("95010905a6732d6c697665c3");
    send_hex("95010906a6732d676f6e65c0");
    expect_msg(JRPC_WIRE_PROBE, "95010906a6732d676f6e65c2");
    assert_int_equal(probes_asked, 2);
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

/* ---- brokers found by name (issue 16) ---- */

/* dns+tcp://: the first answer (localhost, through the real uv_getaddrinfo)
 * gives sessions; a later answer is applied as a difference: a new address
 * gets READY, one gone gets DISCONNECT and keeps serving the call it holds
 * (its answer still reaches that broker: nothing lost, nothing twice), and
 * is freed once closed with no call left; an answer with no address keeps
 * the set in force. */
static void test_dns_name_set(void **state)
{
    (void)state;
    jrpc_worker_opts_t o;
    jrpc_worker_opts_init(&o);
    o.linger_ms = 100;
    G.w = jrpc_worker_new(&o);
    assert_non_null(G.w);
    assert_int_equal(jrpc_worker_handle(G.w, "hold", h_hold, NULL), 0);
    assert_int_equal(jrpc_worker_handle(G.w, "echo", h_echo, NULL), 0);
    assert_int_equal(jrpc_worker_connect(G.w, "dns+tcp://bad name:1"), -EINVAL);
    assert_int_equal(jrpc_worker_connect(G.w, "dns+tcp://localhost:1"), 0);
    assert_int_equal(jrpc_worker_handle(G.w, "late", h_echo, NULL), -EBUSY);
    resolver_t *rs = G.w->resolvers[0];
    uint64_t until = now_ms() + WAIT_MS;
    while ((rs->busy || G.w->nconns == 0) && now_ms() < until)
        turn();
    assert_true(G.w->nconns >= 1); /* 127.0.0.1, and ::1 where the hosts file has it */
    for (size_t i = 0; i < G.w->nconns; i++)
        assert_ptr_equal(G.w->conns[i]->rs, rs);
    assert_string_equal(G.w->conns[0]->endpoint, "tcp://127.0.0.1:1");
    size_t first = G.w->nconns;

    /* Two brokers instead: the localhost sessions are retired (never heard
     * from: closed at once), A and B get READY. */
    char a[64], b[64], buf[512];
    void *ra = bind_router(a, sizeof a), *rb = bind_router(b, sizeof b);
    char eps[2][JRPC_DNS_EP_MAX];
    snprintf(eps[0], sizeof eps[0], "%s", a);
    snprintf(eps[1], sizeof eps[1], "%s", b);
    resolver_apply(rs, eps, 2);
    assert_int_equal(G.w->nconns, first + 2);
    for (size_t i = 0; i < first; i++) {
        assert_true(G.w->conns[i]->retiring);
        assert_null(G.w->conns[i]->sock);
    }
    G.router = rb;
    assert_true(recv_type(JRPC_WIRE_READY, buf, sizeof buf, WAIT_MS) > 0);
    G.router = ra;
    G.router2 = rb;
    assert_true(recv_type(JRPC_WIRE_READY, buf, sizeof buf, WAIT_MS) > 0);
    turn();              /* their watchers' close callbacks */
    on_tick(&G.w->tick); /* frees the retired localhost conns */
    assert_int_equal(G.w->nconns, 2);
    conn_t *ca = G.w->conns[0];
    assert_string_equal(ca->endpoint, a);

    /* A holds a call when its address leaves the name. */
    hold_one(7, 0);
    resolver_apply(rs, &eps[1], 1);
    assert_true(ca->retiring);
    assert_int_equal(recv_type(JRPC_WIRE_DISCONNECT, buf, sizeof buf, WAIT_MS), 3);
    assert_non_null(ca->sock); /* still open: it holds a call */
    on_tick(&G.w->tick);
    assert_non_null(ca->sock);
    finish_held(0);
    resp_t r;
    assert_int_equal(recv_response(&r), 1);
    assert_int_equal(r.seqs[0], 7);
    assert_int_equal(r.vals[0], 7);
    on_tick(&G.w->tick); /* nothing held: closed */
    assert_null(ca->sock);
    on_tick(&G.w->tick); /* its watcher is still closing: kept */
    assert_int_equal(G.w->nconns, 2);
    turn();
    on_tick(&G.w->tick); /* closed, no call points at it: freed */
    assert_int_equal(G.w->nconns, 1);
    assert_string_equal(G.w->conns[0]->endpoint, b);

    /* The same answer again changes nothing; A back is a new session. */
    resolver_apply(rs, &eps[1], 1);
    assert_int_equal(G.w->nconns, 1);
    resolver_apply(rs, eps, 2);
    assert_int_equal(G.w->nconns, 2);
    assert_true(recv_type(JRPC_WIRE_READY, buf, sizeof buf, WAIT_MS) > 0);

    /* No address (the name is gone from DNS, or DNS is down): kept. */
    rs->busy = true;
    G.w->nresolving++;
    on_resolved(&rs->req, UV_EAI_NONAME, NULL);
    assert_int_equal(G.w->nconns, 2);
    assert_false(G.w->conns[0]->retiring || G.w->conns[1]->retiring);
    assert_non_null(strstr(G.log, "event=resolve_failed name=dns+tcp://localhost:1"));
    assert_int_equal(jrpc_worker_answered(G.w), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ready, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ready_name_credit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_probes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_protocol_example, setup, teardown),
        cmocka_unit_test_setup_teardown(test_method_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_async_any_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_credit_exceeded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deadlines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_traceparent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reject, setup, teardown),
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
        cmocka_unit_test_setup_teardown(test_dns_name_set, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
