/* Tests of libjrpc-client's native ZeroMQ engine (client/jrpc_client_zmtp.c)
 * against a scripted ZMTP 3.1 ROUTER in a thread, written from the spec's
 * bytes (rfc.zeromq.org/spec/37): the frames on the wire, PING answered
 * mid-call, a long frame, the broker closing mid-call, an idle connection
 * closed between calls, a late answer never taken for the next call's, a
 * broker that starts after the call, a peer that is not ZMTP or wants
 * CURVE, ipc://; and the libzmq engine against the same server, for the
 * same bytes. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "jrpc_client.h"
#include "jrpc_zmtp_codec.h"
#include "../scripted_server.h"

typedef enum {
    ANSWER,       /* [empty][OK_BODY] */
    ANSWER_CLOSE, /* the same, then close */
    PING_FIRST,   /* PING (context "ctx"), wait for its PONG, then answer */
    BIG,          /* a BIG_LEN-byte body, in one long frame */
    CLOSE,        /* close without answering */
    HANG,         /* never answer */
    LATE,         /* answer STALE_BODY after 600 ms */
} action_t;

typedef enum { GREET_ZMTP, GREET_CURVE, GREET_HTTP } greet_t;

typedef struct server {
    acceptor_t      acc;                /* up to 8 connections */
    int             port;
    char            path[108];          /* ipc: the socket's path; "" for tcp */
    greet_t         greet;
    const action_t *steps;              /* per message, over all connections */
    size_t          nsteps;
    atomic_int      messages;
    atomic_int      pongs;              /* PONGs with the right context */
    /* the frames of the last message: sizes, and the last frame's bytes */
    int             last_nframes;
    size_t          last_sizes[4];
    char            last_body[256];
} server_t;

#define REQ        "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":1}"
#define OK_BODY    "{\"jsonrpc\":\"2.0\",\"result\":19,\"id\":1}"
#define STALE_BODY "{\"jsonrpc\":\"2.0\",\"result\":\"stale\",\"id\":1}"
#define BIG_LEN    (3u << 20)

/* One frame: flags and body (malloc'd, *size bytes). */
static int read_frame(server_t *s, int fd, uint8_t *flags, char **body, size_t *size)
{
    uint8_t h[9];
    *body = NULL;
    if (acceptor_read_n(&s->acc, fd, h, 2) < 0)
        return -1;
    *flags = h[0];
    uint64_t n = h[1];
    if (h[0] & JRPC_ZMTP_FLAG_LONG) {
        if (acceptor_read_n(&s->acc, fd, h + 2, 7) < 0)
            return -1;
        n = 0;
        for (int i = 1; i <= 8; i++)
            n = n << 8 | h[i];
    }
    *body = malloc(n + 1);
    *size = (size_t)n;
    return acceptor_read_n(&s->acc, fd, *body, (size_t)n);
}

static void send_frame(int fd, uint8_t flags, const void *p, size_t n)
{
    uint8_t h[9];
    size_t hl = jrpc_zmtp_frame_head(h, flags, n);
    if (send(fd, h, hl, MSG_NOSIGNAL) != (ssize_t)hl)
        return;   /* the client has gone: no assert off the main thread */
    size_t off = 0;
    while (off < n) {
        ssize_t w = send(fd, (const char *)p + off, n - off, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        off += (size_t)w;
    }
}

static void answer(int fd, const char *body, size_t n)
{
    send_frame(fd, JRPC_ZMTP_FLAG_MORE, "", 0);
    send_frame(fd, 0, body, n);
}

static void serve(void *owner, int fd)
{
    server_t *s = owner;
    uint8_t greeting[64];
    if (s->greet == GREET_HTTP) {
        const char *r = "HTTP/1.1 400 Bad Request\r\n\r\n";
        send(fd, r, strlen(r), MSG_NOSIGNAL);
        /* Held open until the client goes: closing with its greeting
         * unread would reset the connection, and a reset may beat the
         * bytes that show it is not ZMTP. */
        char sink[256];
        while (acceptor_read_n(&s->acc, fd, sink, sizeof sink) == 0)
            ;
        goto out;
    }
    memcpy(greeting, jrpc_zmtp_greeting, 64);
    if (s->greet == GREET_CURVE)
        memcpy(greeting + 12, "CURVE", 5);
    send(fd, greeting, 64, MSG_NOSIGNAL);
    uint8_t ready[JRPC_ZMTP_READY_MAX];
    size_t rl = jrpc_zmtp_ready_put(ready, "ROUTER");
    send(fd, ready, rl, MSG_NOSIGNAL);
    if (acceptor_read_n(&s->acc, fd, greeting, 64) < 0 || greeting[0] != 0xFF || greeting[10] != 3)
        goto out;
    for (bool ready_seen = false;;) {
        /* one message: frames until one without MORE; commands apart */
        int nframes = 0;
        size_t sizes[4] = { 0 };
        char last[256] = "";
        uint8_t flags;
        do {
            char *body;
            size_t size;
            if (read_frame(s, fd, &flags, &body, &size) < 0) {
                free(body);
                goto out;
            }
            if (flags & JRPC_ZMTP_FLAG_COMMAND) {
                if (!ready_seen && size > 6 && memcmp(body, "\5READY", 6) == 0)
                    ready_seen = true;
                if (size == 8 && memcmp(body, "\4PONGctx", 8) == 0)
                    atomic_fetch_add(&s->pongs, 1);
                free(body);
                flags = JRPC_ZMTP_FLAG_MORE;   /* not a message's end */
                continue;
            }
            if (nframes < 4)
                sizes[nframes] = size;
            nframes++;
            size_t n = size < sizeof last - 1 ? size : sizeof last - 1;
            memcpy(last, body, n);
            last[n] = '\0';
            free(body);
        } while (flags & JRPC_ZMTP_FLAG_MORE);
        int k = atomic_fetch_add(&s->messages, 1);
        s->last_nframes = nframes;
        memcpy(s->last_sizes, sizes, sizeof sizes);
        memcpy(s->last_body, last, sizeof last);
        action_t a = (size_t)k < s->nsteps ? s->steps[k] : CLOSE;
        if (a == CLOSE)
            goto out;
        if (a == HANG) {
            while (!atomic_load(&s->acc.stop))
                usleep(10000);
            goto out;
        }
        if (a == LATE) {
            usleep(600000);
            answer(fd, STALE_BODY, strlen(STALE_BODY));
            continue;
        }
        if (a == PING_FIRST) {
            static const uint8_t ping[] = { 4, 'P', 'I', 'N', 'G', 0, 10, 'c', 't', 'x' };
            send_frame(fd, JRPC_ZMTP_FLAG_COMMAND, ping, sizeof ping);
            int64_t until = now_ms() + 2000;
            while (atomic_load(&s->pongs) == 0 && now_ms() < until) {
                char *body;
                size_t size;
                if (read_frame(s, fd, &flags, &body, &size) < 0) {
                    free(body);
                    goto out;
                }
                if ((flags & JRPC_ZMTP_FLAG_COMMAND) && size == 8 &&
                    memcmp(body, "\4PONGctx", 8) == 0)
                    atomic_fetch_add(&s->pongs, 1);
                free(body);
            }
        }
        if (a == BIG) {
            char *big = malloc(BIG_LEN);
            memset(big, 'x', BIG_LEN);
            big[0] = '"';
            big[BIG_LEN - 1] = '"';
            answer(fd, big, BIG_LEN);
            free(big);
            continue;
        }
        answer(fd, OK_BODY, strlen(OK_BODY));
        if (a == ANSWER_CLOSE)
            goto out;
    }
out:
    close(fd);
}

/* port 0: any; path non-NULL: ipc at path. */
static server_t *server_start_at(int port, const char *path, greet_t greet,
                                 const action_t *steps, size_t nsteps)
{
    server_t *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->greet = greet;
    s->steps = steps;
    s->nsteps = nsteps;
    int lfd;
    if (path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(s->path, sizeof s->path, "%s", path);
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
        unlink(path);
        lfd = socket(AF_UNIX, SOCK_STREAM, 0);
        assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    } else {
        lfd = bind_loopback(port, &s->port);
    }
    acceptor_start(&s->acc, lfd, 8, serve, s);
    return s;
}

static server_t *server_start(greet_t greet, const action_t *steps, size_t nsteps)
{
    return server_start_at(0, NULL, greet, steps, nsteps);
}

static void server_stop(server_t **s_p)
{
    server_t *s = *s_p;
    acceptor_stop(&s->acc);
    if (s->path[0])
        unlink(s->path);
    free(s);
    *s_p = NULL;
}

static jrpc_client_t *client_at(const char *url, const char *engine)
{
    jrpc_client_opts_t o = { .zmq_engine = engine };
    jrpc_client_t *c = jrpc_client_new(url, &o);
    assert_non_null(c);
    return c;
}

static jrpc_client_t *client_for(const server_t *s, const char *engine)
{
    char url[160];
    if (s->path[0])
        snprintf(url, sizeof url, "ipc://%s", s->path);
    else
        snprintf(url, sizeof url, "tcp://127.0.0.1:%d", s->port);
    return client_at(url, engine);
}

static void expect_reply(jrpc_client_t *c, const char *body, int timeout_ms)
{
    jrpc_buf_t reply;
    jrpc_buf_init(&reply);
    int rc = jrpc_client_send(c, REQ, strlen(REQ), NULL, &reply, timeout_ms);
    if (rc != 0)
        fprintf(stderr, "unexpected failure: %s\n", jrpc_client_last_error(c));
    assert_int_equal(rc, 0);
    assert_int_equal(reply.len, strlen(body));
    assert_memory_equal(reply.p, body, reply.len);
    jrpc_buf_dispose(&reply);
}

static int send_fails(jrpc_client_t *c, int timeout_ms)
{
    jrpc_buf_t reply;
    jrpc_buf_init(&reply);
    int rc = jrpc_client_send(c, REQ, strlen(REQ), NULL, &reply, timeout_ms);
    assert_true(rc < 0);
    jrpc_buf_dispose(&reply);
    return rc;
}

/* The bytes on the wire: [empty][body] without a header, [empty][header]
 * [body] with one; both engines send the same frames. */
static void test_frames(void **state)
{
    (void)state;
    static const action_t steps[] = { ANSWER, ANSWER, ANSWER, ANSWER };
    server_t *s = server_start(GREET_ZMTP, steps, 4);
    const char *engines[] = { "native", "libzmq" };
    for (int e = 0; e < 2; e++) {
        jrpc_client_t *c = client_for(s, engines[e]);
        expect_reply(c, OK_BODY, 3000);
        assert_int_equal(s->last_nframes, 2);
        assert_int_equal(s->last_sizes[0], 0);
        assert_int_equal(s->last_sizes[1], strlen(REQ));
        assert_string_equal(s->last_body, REQ);
        jrpc_client_header_t h = { .timeout_ms = 1234 };
        jrpc_buf_t reply;
        jrpc_buf_init(&reply);
        assert_int_equal(jrpc_client_send(c, REQ, strlen(REQ), &h, &reply, 3000), 0);
        assert_int_equal(s->last_nframes, 3);
        assert_int_equal(s->last_sizes[0], 0);
        assert_true(s->last_sizes[1] > 0);
        assert_string_equal(s->last_body, REQ);
        jrpc_buf_dispose(&reply);
        jrpc_client_destroy(&c);
    }
    assert_int_equal(atomic_load(&s->acc.accepts), 2);   /* one connection per client */
    server_stop(&s);
}

static void test_ping_then_big_answer(void **state)
{
    (void)state;
    static const action_t steps[] = { PING_FIRST, BIG, ANSWER };
    server_t *s = server_start(GREET_ZMTP, steps, 3);
    jrpc_client_t *c = client_for(s, NULL);
    expect_reply(c, OK_BODY, 3000);
    assert_int_equal(atomic_load(&s->pongs), 1);   /* PONG with the PING's context */
    jrpc_buf_t reply;
    jrpc_buf_init(&reply);
    assert_int_equal(jrpc_client_send(c, REQ, strlen(REQ), NULL, &reply, 5000), 0);
    assert_int_equal(reply.len, BIG_LEN);
    assert_int_equal(reply.p[0], '"');
    assert_int_equal(reply.p[BIG_LEN / 2], 'x');
    jrpc_buf_dispose(&reply);
    expect_reply(c, OK_BODY, 3000);
    assert_int_equal(atomic_load(&s->acc.accepts), 1);
    jrpc_client_destroy(&c);
    server_stop(&s);
}

/* The broker closes while the call waits: the call fails at once, not at
 * its deadline; the next call gets a fresh connection. */
static void test_closed_mid_call(void **state)
{
    (void)state;
    static const action_t steps[] = { CLOSE, ANSWER };
    server_t *s = server_start(GREET_ZMTP, steps, 2);
    jrpc_client_t *c = client_for(s, NULL);
    int64_t t0 = now_ms();
    assert_int_equal(send_fails(c, 5000), -ECONNRESET);
    assert_true(now_ms() - t0 < 2500);
    assert_non_null(strstr(jrpc_client_last_error(c), "lost while waiting"));
    expect_reply(c, OK_BODY, 3000);
    assert_int_equal(atomic_load(&s->acc.accepts), 2);
    jrpc_client_destroy(&c);
    server_stop(&s);
}

/* An idle connection the broker closed is replaced before the call is
 * written: the call succeeds. */
static void test_idle_close(void **state)
{
    (void)state;
    static const action_t steps[] = { ANSWER_CLOSE, ANSWER };
    server_t *s = server_start(GREET_ZMTP, steps, 2);
    jrpc_client_t *c = client_for(s, NULL);
    expect_reply(c, OK_BODY, 3000);
    usleep(100000);   /* the close reaches the client while it is idle */
    expect_reply(c, OK_BODY, 3000);
    assert_int_equal(atomic_load(&s->acc.accepts), 2);
    jrpc_client_destroy(&c);
    server_stop(&s);
}

/* A call that timed out: its late answer is never read as the next call's. */
static void test_late_answer_not_taken(void **state)
{
    (void)state;
    static const action_t steps[] = { LATE, ANSWER };
    server_t *s = server_start(GREET_ZMTP, steps, 2);
    jrpc_client_t *c = client_for(s, NULL);
    assert_int_equal(send_fails(c, 200), -ETIMEDOUT);
    usleep(700000);   /* the stale answer is sent now, on the old connection */
    expect_reply(c, OK_BODY, 3000);
    assert_int_equal(atomic_load(&s->acc.accepts), 2);
    jrpc_client_destroy(&c);
    server_stop(&s);
}

typedef struct later {
    int             port;
    server_t       *s;
    const action_t *steps;
} later_t;

static void *start_later(void *arg)
{
    later_t *l = arg;
    usleep(400000);
    l->s = server_start_at(l->port, NULL, GREET_ZMTP, l->steps, 1);
    return NULL;
}

/* No broker yet: retried until the deadline (as libzmq does), and served
 * once it is up; with none at all, a timeout. */
static void test_broker_starts_later(void **state)
{
    (void)state;
    static const action_t steps[] = { ANSWER };
    server_t *probe = server_start(GREET_ZMTP, steps, 0);
    int port = probe->port;
    server_stop(&probe);
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
    jrpc_client_t *c = client_at(url, NULL);
    int64_t t0 = now_ms();
    assert_int_equal(send_fails(c, 300), -ETIMEDOUT);
    assert_true(now_ms() - t0 >= 290);
    assert_non_null(strstr(jrpc_client_last_error(c), "is it running"));
    later_t l = { .port = port, .steps = steps };
    pthread_t t;
    pthread_create(&t, NULL, start_later, &l);
    expect_reply(c, OK_BODY, 3000);
    pthread_join(t, NULL);
    jrpc_client_destroy(&c);
    server_stop(&l.s);
}

static void test_not_zmtp(void **state)
{
    (void)state;
    server_t *s = server_start(GREET_HTTP, NULL, 0);
    jrpc_client_t *c = client_for(s, NULL);
    int64_t t0 = now_ms();
    assert_int_equal(send_fails(c, 3000), -ECONNREFUSED);
    assert_true(now_ms() - t0 < 2000);   /* said at once, not retried */
    assert_non_null(strstr(jrpc_client_last_error(c), "not a ZeroMQ 3 ROUTER"));
    jrpc_client_destroy(&c);
    server_stop(&s);
    s = server_start(GREET_CURVE, NULL, 0);
    c = client_for(s, NULL);
    assert_int_equal(send_fails(c, 3000), -ECONNREFUSED);
    assert_non_null(strstr(jrpc_client_last_error(c), "CURVE"));
    jrpc_client_destroy(&c);
    server_stop(&s);
}

static void test_ipc(void **state)
{
    (void)state;
    static const action_t steps[] = { ANSWER, ANSWER };
    char path[64];
    snprintf(path, sizeof path, "/tmp/jrpc-test-zmtp-%d.sock", (int)getpid());
    server_t *s = server_start_at(0, path, GREET_ZMTP, steps, 2);
    jrpc_client_t *c = client_for(s, NULL);
    expect_reply(c, OK_BODY, 3000);
    expect_reply(c, OK_BODY, 3000);
    assert_int_equal(atomic_load(&s->acc.accepts), 1);
    jrpc_client_destroy(&c);
    server_stop(&s);
}

static void test_engine_option(void **state)
{
    (void)state;
    jrpc_client_opts_t o = { .zmq_engine = "zmtp" };
    errno = 0;
    assert_null(jrpc_client_new("tcp://127.0.0.1:1", &o));
    assert_int_equal(errno, EINVAL);
    o.zmq_engine = "libzmq";
    jrpc_client_t *c = jrpc_client_new("tcp://127.0.0.1:1", &o);
    assert_non_null(c);
    jrpc_client_destroy(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frames),
        cmocka_unit_test(test_ping_then_big_answer),
        cmocka_unit_test(test_closed_mid_call),
        cmocka_unit_test(test_idle_close),
        cmocka_unit_test(test_late_answer_not_taken),
        cmocka_unit_test(test_broker_starts_later),
        cmocka_unit_test(test_not_zmtp),
        cmocka_unit_test(test_ipc),
        cmocka_unit_test(test_engine_option),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
