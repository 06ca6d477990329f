/* fuzz_http — libFuzzer target for the HTTP front door, over real TCP.
 *
 * No test hook in broker/front/jrpc_front_http.c: the harness runs the real thing
 * in one process, on one libuv loop — a broker (jrpc_broker_new) whose
 * workers socket is ipc://@jrpc-fuzz-<pid>, one in-process worker on the
 * same loop (libjrpc-worker: "echo", "fail", and "late", which answers 1 ms
 * later so that pipelined answers complete out of order), and a
 * jrpc_front_http on 127.0.0.1. Each input is the byte stream of one client
 * connection:
 *   connect, write the input, then let the loop run until the broker has no
 *   body open and nothing moved for two idle turns; then half-close (FIN) and
 *   read until the server closes. The client socket is closed with a reset
 *   after both FINs (no TIME_WAIT pile-up at thousands of connections/s).
 * Invariants (abort() on violation, reported as a crash by libFuzzer):
 *  - a connection finishes within 4 s of loop time (no hang, no lost reply);
 *  - everything the server sent parses as HTTP/1.1 responses (http-parser,
 *    response mode), ends on a response boundary, and every non-empty
 *    response body is valid JSON (jrpc_json_validate) — checked only when
 *    the input has no "HEAD", whose answers carry a Content-Length and no body.
 * JRPC_FUZZ_DUMP=1 prints each answer; JRPC_FUZZ_LOG=debug|info|warn sets the log level. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <http_parser.h>
#include <zmq.h>

#include "jrpc_broker.h"
#include "jrpc_errors.h"
#include "jrpc_front_http.h"
#include "jrpc_json.h"
#include "jrpc_log.h"
#include "jrpc_worker.h"

#define GUARD_MS 4000  /* one connection may take this long (loop time) */

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "fuzz_http: invariant failed: %s (%s:%d)\n", #cond,      \
                    __FILE__, __LINE__);                                             \
            abort();                                                                 \
        }                                                                            \
    } while (0)

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct {
    uv_loop_t          loop;
    void              *zctx;
    jrpc_broker_t     *broker;
    jrpc_front_http_t *front;
    jrpc_worker_t     *worker;
    struct sockaddr_in addr;   /* where the front listens */
} G;

/* ---- the in-process worker ---- */

static void on_echo(jrpc_wcall_t *call, const msgpack_object *params, void *arg)
{
    msgpack_pack_object(jrpc_wcall_result(call), *params);
    jrpc_wcall_finish(call);
}

static void on_fail(jrpc_wcall_t *call, const msgpack_object *params, void *arg)
{
    jrpc_wcall_error(call, JRPC_INVALID_PARAMS, "Invalid params");
}

typedef struct late {
    uv_timer_t    timer;
    jrpc_wcall_t *call;
} late_t;

static void on_late_closed(uv_handle_t *h)
{
    free(h->data);
}

static void on_late_timer(uv_timer_t *t)
{
    late_t *l = t->data;
    msgpack_pack_true(jrpc_wcall_result(l->call));
    jrpc_wcall_finish(l->call);
    uv_close((uv_handle_t *)&l->timer, on_late_closed);
}

static void on_late(jrpc_wcall_t *call, const msgpack_object *params, void *arg)
{
    late_t *l = malloc(sizeof *l);
    CHECK(l != NULL);
    l->call = call;
    uv_timer_init(&G.loop, &l->timer);
    l->timer.data = l;
    uv_timer_start(&l->timer, on_late_timer, 1, 0);
}

static bool broker_idle(void)
{
    jrpc_broker_stats_t st;
    jrpc_workers_stats_t wst;
    jrpc_broker_stats(G.broker, &st, &wst);
    return st.open == 0 && wst.inflight == 0 && wst.queued == 0;
}

static uint64_t broker_bodies(void)
{
    jrpc_broker_stats_t st;
    jrpc_workers_stats_t wst;
    jrpc_broker_stats(G.broker, &st, &wst);
    return st.bodies;
}

static void on_init_timeout(uv_timer_t *t)
{
    *(bool *)t->data = true;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    signal(SIGPIPE, SIG_IGN);
    jrpc_log_init("jrpc-fuzz-http");
    jrpc_log_level = JRPC_LOG_ERROR;
    if (getenv("JRPC_FUZZ_LOG"))
        CHECK(jrpc_log_set_level(getenv("JRPC_FUZZ_LOG")) == 0);
    CHECK(uv_loop_init(&G.loop) == 0);
    CHECK((G.zctx = zmq_ctx_new()) != NULL);

    char wep[64];
    snprintf(wep, sizeof wep, "ipc://@jrpc-fuzz-%d", (int)getpid());
    jrpc_broker_opts_t o = {
        .limits = JRPC_LIMITS_DEFAULT,
        .timeout_ms = 2000,
        .max_open = 10000,
        .skew_s = 300,
        .workers = { .endpoint = wep, .zmq_ctx = G.zctx, .max_queue = 100000,
                     .heartbeat_ms = 1000, .liveness = 3 },
    };
    CHECK((G.broker = jrpc_broker_new(&G.loop, &o)) != NULL);

    /* A free port: bound and released here, then bound by the front. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t alen = sizeof a;
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
          getsockname(fd, (struct sockaddr *)&a, &alen) == 0);
    close(fd);
    G.addr = a;
    char listen[32];
    snprintf(listen, sizeof listen, "127.0.0.1:%u", ntohs(a.sin_port));
    jrpc_front_http_opts_t ho = JRPC_FRONT_HTTP_OPTS_DEFAULT;
    ho.listen = listen;
    ho.max_body = 4096;           /* 413 within reach of the fuzzer's input sizes */
    ho.max_header_bytes = 2048;   /* 431 likewise */
    CHECK((G.front = jrpc_front_http_new(&G.loop, G.broker, &ho)) != NULL);

    jrpc_worker_opts_t wo;
    jrpc_worker_opts_init(&wo);
    wo.loop = &G.loop;
    wo.credit = 16;               /* small: bigger batches queue for credit */
    CHECK((G.worker = jrpc_worker_new(&wo)) != NULL);
    CHECK(jrpc_worker_handle(G.worker, "echo", on_echo, NULL) == 0);
    CHECK(jrpc_worker_handle(G.worker, "fail", on_fail, NULL) == 0);
    CHECK(jrpc_worker_handle(G.worker, "late", on_late, NULL) == 0);
    CHECK(jrpc_worker_connect(G.worker, wep) == 0);

    /* Wait for the worker's READY. */
    bool timed_out = false;
    uv_timer_t t;
    uv_timer_init(&G.loop, &t);
    t.data = &timed_out;
    uv_timer_start(&t, on_init_timeout, 5000, 0);
    for (;;) {
        jrpc_broker_stats_t st;
        jrpc_workers_stats_t wst;
        jrpc_broker_stats(G.broker, &st, &wst);
        if (wst.workers >= 1)
            break;
        CHECK(!timed_out);
        uv_run(&G.loop, UV_RUN_ONCE);
    }
    uv_timer_stop(&t);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&G.loop, UV_RUN_NOWAIT);
    return 0;
}

/* ---- checking what the server sent ---- */

typedef struct rcheck {
    http_parser p;
    jrpc_buf_t  body;      /* the current response's body */
    unsigned    nresp;     /* complete responses */
    bool        in_msg;    /* inside a response */
} rcheck_t;

static int rc_begin(http_parser *p)
{
    rcheck_t *r = p->data;
    r->in_msg = true;
    jrpc_buf_reset(&r->body);
    return 0;
}

static int rc_body(http_parser *p, const char *at, size_t n)
{
    rcheck_t *r = p->data;
    CHECK(jrpc_buf_append(&r->body, at, n) == 0);
    return 0;
}

static int rc_complete(http_parser *p)
{
    rcheck_t *r = p->data;
    r->in_msg = false;
    r->nresp++;
    if (r->body.len > 0 && jrpc_json_validate(r->body.p, r->body.len, 2000) != 0) {
        fprintf(stderr, "fuzz_http: response %u (status %u) body is not JSON: %.*s\n",
                r->nresp, p->status_code, (int)(r->body.len > 2000 ? 2000 : r->body.len),
                r->body.p);
        abort();
    }
    return 0;
}

static void check_responses(const char *p, size_t n)
{
    static http_parser_settings s;
    s.on_message_begin = rc_begin;
    s.on_body = rc_body;
    s.on_message_complete = rc_complete;
    rcheck_t r = { .nresp = 0 };
    jrpc_buf_init(&r.body);
    http_parser_init(&r.p, HTTP_RESPONSE);
    r.p.data = &r;
    size_t k = http_parser_execute(&r.p, &s, p, n);
    if (HTTP_PARSER_ERRNO(&r.p) != HPE_OK || k != n || r.in_msg) {
        fprintf(stderr, "fuzz_http: server sent no valid HTTP (%s at %zu of %zu, in_msg=%d):\n%.*s\n",
                http_errno_name(HTTP_PARSER_ERRNO(&r.p)), k, n, r.in_msg,
                (int)(n > 4000 ? 4000 : n), p);
        abort();
    }
    jrpc_buf_dispose(&r.body);
}

/* ---- one client connection ---- */

typedef struct client {
    uv_tcp_t      tcp;
    uv_connect_t  creq;
    uv_write_t    wreq;
    uv_shutdown_t sreq;
    uv_buf_t      out;
    jrpc_buf_t    in;        /* everything the server sent */
    bool          written;   /* our write is done (or failed) */
    bool          shut;      /* our FIN is requested */
    bool          eof;       /* the server closed (or reset) */
    bool          closed;    /* our handle's close callback ran */
} client_t;

static void on_client_closed(uv_handle_t *h)
{
    ((client_t *)h->data)->closed = true;
}

static void client_close(client_t *c)
{
    if (uv_is_closing((uv_handle_t *)&c->tcp))
        return;
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0) {
        struct linger l = { .l_onoff = 1, .l_linger = 0 };
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    uv_close((uv_handle_t *)&c->tcp, on_client_closed);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    static char rbuf[65536];
    *buf = uv_buf_init(rbuf, sizeof rbuf);
}

static void on_client_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    client_t *c = s->data;
    if (n > 0) {
        CHECK(jrpc_buf_append(&c->in, buf->base, (size_t)n) == 0);
    } else if (n < 0) {
        c->eof = true;
        client_close(c);
    }
}

static void on_client_write(uv_write_t *w, int status)
{
    ((client_t *)w->handle->data)->written = true; /* EPIPE/ECONNRESET: refused early */
}

static void on_connect(uv_connect_t *cr, int status)
{
    client_t *c = cr->handle->data;
    CHECK(status == 0);
    CHECK(uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_client_read) == 0);
    if (c->out.len == 0) {
        c->written = true;
        return;
    }
    if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &c->out, 1, on_client_write) < 0)
        c->written = true;
}

static void on_shutdown(uv_shutdown_t *sr, int status)
{
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    client_t c = { .written = false };
    jrpc_buf_init(&c.in);
    /* An exact-size copy, as the front reads it from the socket anyway. */
    char *copy = malloc(size ? size : 1);
    CHECK(copy != NULL);
    memcpy(copy, data, size);
    c.out = uv_buf_init(copy, (unsigned)size);
    CHECK(uv_tcp_init(&G.loop, &c.tcp) == 0);
    c.tcp.data = &c;
    CHECK(uv_tcp_connect(&c.creq, &c.tcp, (struct sockaddr *)&G.addr, on_connect) == 0);

    uv_update_time(&G.loop);
    uint64_t start = uv_now(&G.loop);
    unsigned quiet = 0;
    size_t last_in = 0;
    uint64_t last_bodies = broker_bodies();
    while (!c.closed) {
        /* Block only while something is sure to happen: our write, the
         * broker's answers (worker or deadline), the server's close. */
        bool busy = !c.written || c.shut || c.eof || !broker_idle();
        uv_run(&G.loop, busy ? UV_RUN_ONCE : UV_RUN_NOWAIT);
        if (uv_now(&G.loop) - start > GUARD_MS) {
            jrpc_broker_stats_t st;
            jrpc_workers_stats_t wst;
            jrpc_broker_stats(G.broker, &st, &wst);
            fprintf(stderr, "fuzz_http: connection not finished after %d ms (written=%d shut=%d "
                    "eof=%d received=%zu; broker open=%u timeouts=%llu cancelled=%llu; workers=%u "
                    "inflight=%u queued=%u late=%llu malformed=%llu)\n", GUARD_MS, c.written,
                    c.shut, c.eof, c.in.len, st.open, (unsigned long long)st.timeouts,
                    (unsigned long long)st.cancelled, wst.workers, wst.inflight, wst.queued,
                    (unsigned long long)wst.late, (unsigned long long)wst.malformed);
            abort();
        }
        if (c.closed || c.shut || c.eof || !c.written || !broker_idle()) {
            quiet = 0;
            continue;
        }
        uint64_t bodies = broker_bodies();
        if (c.in.len == last_in && bodies == last_bodies)
            quiet++;
        else
            quiet = 0;
        last_in = c.in.len;
        last_bodies = bodies;
        if (quiet >= 2) { /* nothing moves: we are done sending */
            c.shut = true;
            if (uv_shutdown(&c.sreq, (uv_stream_t *)&c.tcp, on_shutdown) < 0)
                client_close(&c);
        }
    }
    /* Let the server side see our reset/close and free the connection. */
    uv_run(&G.loop, UV_RUN_NOWAIT);

    if (getenv("JRPC_FUZZ_DUMP")) /* what the server answered, for a reproducer */
        fprintf(stderr, "---- %zu bytes in, %zu bytes out:\n%.*s\n----\n", size, c.in.len,
                (int)c.in.len, c.in.p ? c.in.p : "");
    if (c.in.len > 0 && memmem(data, size, "HEAD", 4) == NULL)
        check_responses(c.in.p, c.in.len);
    jrpc_buf_dispose(&c.in);
    free(copy);
    return 0;
}
