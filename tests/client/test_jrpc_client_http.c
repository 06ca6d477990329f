/* Tests of the http:// transport of jrpc_client against a scripted server
 * in a thread: connection reuse, transparent reconnect after an idle close,
 * never resending a request the server may have run, response framings
 * (Content-Length, chunked, close-delimited, 1xx, 204), HTTP error statuses
 * and timeouts. Also request signing, over http:// (the X-JRPC-* headers)
 * and over tcp:// (the header frame, caught by an in-process ROUTER). */
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
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <zmq.h>

#include "jrpc_client.h"
#include "jrpc_header.h"
#include "jrpc_sign.h"
#include "../scripted_server.h"

/* What the server does with request number n (1-based, over all
 * connections) that arrived as request k (1-based) on its connection. */
typedef enum {
    ANSWER,        /* write response */
    ANSWER_CLOSE,  /* write response, close */
    DROP,          /* close without answering */
    HANG,          /* never answer */
    EARLY,         /* write response once the head is in, close with the body unread */
} action_t;
typedef struct step {
    action_t    action;
    const char *response;  /* raw bytes written for ANSWER/ANSWER_CLOSE */
} step_t;

typedef struct server {
    acceptor_t   acc;              /* up to 16 connections */
    int          port;
    const step_t *steps;           /* one per request; past the end: DROP */
    size_t       nsteps;
    atomic_int   requests;         /* whole requests read */
    char         last_head[1024];  /* head of the last request, for checks */
    char         last_body[1024];  /* its body (truncated), NUL-terminated */
    char         heads[8][1024];   /* the first 8 requests' heads and bodies, in order */
    char         bodies[8][1024];
} server_t;

/* Reads one request (head + Content-Length body). Returns 1, or 0 on EOF,
 * error or stop. */
static int read_request(server_t *s, int fd, char *buf, size_t cap, size_t *have)
{
    for (;;) {
        char *end = memmem(buf, *have, "\r\n\r\n", 4);
        if (end) {
            size_t head = (size_t)(end - buf) + 4;
            const char *cl = strcasestr(buf, "content-length:");
            size_t blen = cl && cl < end ? strtoul(cl + 15, NULL, 10) : 0;
            size_t next = (size_t)atomic_load(&s->requests);
            if (next < s->nsteps && s->steps[next].action == EARLY) {
                *have = 0;
                return 1;
            }
            if (*have >= head + blen) {
                size_t hl = head < sizeof s->last_head ? head : sizeof s->last_head - 1;
                memcpy(s->last_head, buf, hl);
                s->last_head[hl] = '\0';
                size_t bl = blen < sizeof s->last_body ? blen : sizeof s->last_body - 1;
                memcpy(s->last_body, buf + head, bl);
                s->last_body[bl] = '\0';
                memmove(buf, buf + head + blen, *have - head - blen);
                *have -= head + blen;
                return 1;
            }
        }
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        if (atomic_load(&s->acc.stop))
            return 0;
        if (poll(&pfd, 1, 50) <= 0)
            continue;
        ssize_t n = recv(fd, buf + *have, cap - *have, 0);
        if (n <= 0)
            return 0;
        *have += (size_t)n;
    }
}

static void conn_main(void *owner, int fd)
{
    server_t *s = owner;
    char buf[65536];
    size_t have = 0;
    while (read_request(s, fd, buf, sizeof buf, &have)) {
        int n = atomic_fetch_add(&s->requests, 1) + 1;
        if (n <= 8) {
            memcpy(s->heads[n - 1], s->last_head, sizeof s->last_head);
            memcpy(s->bodies[n - 1], s->last_body, sizeof s->last_body);
        }
        step_t st = (size_t)n <= s->nsteps ? s->steps[n - 1] : (step_t){ DROP, NULL };
        if (st.action == DROP)
            break;
        if (st.action == HANG) {   /* read on until the client gives up */
            while (read_request(s, fd, buf, sizeof buf, &have))
                ;
            break;
        }
        size_t len = strlen(st.response);
        if (send(fd, st.response, len, MSG_NOSIGNAL) != (ssize_t)len || st.action != ANSWER)
            break;   /* EARLY: closing with unread bytes sends a reset */
    }
    close(fd);
}

static server_t *server_start(const step_t *steps, size_t nsteps)
{
    server_t *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->steps = steps;
    s->nsteps = nsteps;
    acceptor_start(&s->acc, bind_loopback(0, &s->port), 16, conn_main, s);
    return s;
}

static void server_stop(server_t **s_p)
{
    server_t *s = *s_p;
    acceptor_stop(&s->acc);
    free(s);
    *s_p = NULL;
}

static jrpc_client_t *client_for(const server_t *s, const char *path)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", s->port, path);
    jrpc_client_t *c = jrpc_client_new(url, NULL);
    assert_non_null(c);
    return c;
}

#define REQ "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":1}"
#define OK_BODY "{\"jsonrpc\":\"2.0\",\"result\":19,\"id\":1}"
#define OK_RESP "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" \
                "Content-Length: 36\r\n\r\n" OK_BODY

static void expect_reply(jrpc_client_t *c, int status, const char *body)
{
    jrpc_buf_t reply;
    jrpc_buf_init(&reply);
    int rc = jrpc_client_send(c, REQ, strlen(REQ), NULL, &reply, 2000);
    if (rc != 0)
        fprintf(stderr, "unexpected failure: %s\n", jrpc_client_last_error(c));
    assert_int_equal(rc, 0);
    assert_int_equal(jrpc_client_http_status(c), status);
    assert_int_equal(reply.len, strlen(body));
    assert_memory_equal(reply.p ? reply.p : "", body, reply.len);
    jrpc_buf_dispose(&reply);
}

static int expect_failure(jrpc_client_t *c, int timeout_ms)
{
    jrpc_buf_t reply;
    jrpc_buf_init(&reply);
    int rc = jrpc_client_send(c, REQ, strlen(REQ), NULL, &reply, timeout_ms);
    assert_true(rc < 0);
    assert_int_equal(reply.len, 0);
    assert_true(jrpc_client_last_error(c)[0] != '\0');
    jrpc_buf_dispose(&reply);
    return rc;
}

static void test_keep_alive_reuses_one_connection(void **state)
{
    static const step_t steps[] = { { ANSWER, OK_RESP }, { ANSWER, OK_RESP }, { ANSWER, OK_RESP } };
    server_t *s = server_start(steps, 3);
    jrpc_client_t *c = client_for(s, "");
    for (int i = 0; i < 3; i++)
        expect_reply(c, 200, OK_BODY);
    assert_int_equal(atomic_load(&s->acc.accepts), 1);
    assert_int_equal(atomic_load(&s->requests), 3);
    assert_non_null(strstr(s->last_head, "POST /rpc HTTP/1.1\r\n"));
    assert_non_null(strstr(s->last_head, "Content-Type: application/json\r\n"));
    char cl[64];
    snprintf(cl, sizeof cl, "Content-Length: %zu\r\n", strlen(REQ));
    assert_non_null(strstr(s->last_head, cl));
    assert_null(strstr(s->last_head, "X-JRPC-Timeout-Ms"));
    jrpc_client_destroy(&c);
    server_stop(&s);
}

static void test_path_and_timeout_header(void **state)
{
    static const step_t steps[] = { { ANSWER, OK_RESP } };
    server_t *s = server_start(steps, 1);
    jrpc_client_t *c = client_for(s, "/v1/json?x=1");
    jrpc_client_header_t h = { .timeout_ms = 1500 };
    jrpc_buf_t reply;
    jrpc_buf_init(&reply);
    assert_int_equal(jrpc_client_send(c, REQ, strlen(REQ), &h, &reply, 2000), 0);
    assert_non_null(strstr(s->last_head, "POST /v1/json?x=1 HTTP/1.1\r\n"));
    assert_non_null(strstr(s->last_head, "X-JRPC-Timeout-Ms: 1500\r\n"));
    jrpc_buf_dispose(&reply);
    jrpc_client_destroy(&c);
    server_stop(&s);
}

/* The server closes the kept-alive connection while it is idle: the next
 * call goes out on a fresh one, and the server sees each request once. */
static void test_reconnects_after_idle_close(void **state)
{
    static const step_t steps[] = { { ANSWER_CLOSE, OK_RESP }, { ANSWER, OK_RESP } };
    server_t *s = server_start(steps, 2);
    jrpc_client_t *c = client_for(s, "");
    expect_reply(c, 200, OK_BODY);
    usleep(50 * 1000);   /* let the FIN arrive */
    expect_reply(c, 200, OK_BODY);
    assert_int_equal(atomic_load(&s->acc.accepts), 2);
    assert_int_equal(atomic_load(&s->requests), 2);
    jrpc_client_destroy(&c);
    server_stop(&s);
}

/* The server reads the second request whole and closes without answering:
 * it may have run it, so the client must fail, not send it again. */
static void test_never_resends_a_received_request(void **state)
{
    static const step_t steps[] = { { ANSWER, OK_RESP }, { DROP, NULL }, { ANSWER, OK_RESP } };
    server_t *s = server_start(steps, 3);
    jrpc_client_t *c = client_for(s, "");
    expect_reply(c, 200, OK_BODY);
    assert_int_equal(expect_failure(c, 2000), -ECONNRESET);
    usleep(100 * 1000);
    assert_int_equal(atomic_load(&s->requests), 2);
    assert_int_equal(atomic_load(&s->acc.accepts), 1);
    expect_reply(c, 200, OK_BODY);   /* and the client recovers */
    assert_int_equal(atomic_load(&s->acc.accepts), 2);
    jrpc_client_destroy(&c);
    server_stop(&s);
}

static void test_timeout_drops_the_connection(void **state)
{
    static const step_t steps[] = { { HANG, NULL }, { ANSWER, OK_RESP } };
    server_t *s = server_start(steps, 2);
    jrpc_client_t *c = client_for(s, "");
    int64_t t0 = now_ms();
    assert_int_equal(expect_failure(c, 300), -ETIMEDOUT);
    int64_t ms = now_ms() - t0;
    assert_true(ms >= 280 && ms < 1500);
    expect_reply(c, 200, OK_BODY);   /* a late answer can never be taken for this one */
    assert_int_equal(atomic_load(&s->acc.accepts), 2);
    jrpc_client_destroy(&c);
    server_stop(&s);
}

static void test_framings(void **state)
{
    static const step_t steps[] = {
        { ANSWER, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                  "Transfer-Encoding: chunked\r\n\r\n"
                  "a\r\n{\"jsonrpc\"\r\n1a\r\n:\"2.0\",\"result\":19,\"id\":1}\r\n0\r\n\r\n" },
        { ANSWER, "HTTP/1.1 100 Continue\r\n\r\n" OK_RESP },
        { ANSWER, "HTTP/1.1 204 No Content\r\n\r\n" },
        { ANSWER_CLOSE, "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" OK_BODY },
    };
    server_t *s = server_start(steps, 4);
    jrpc_client_t *c = client_for(s, "");
    expect_reply(c, 200, OK_BODY);
    expect_reply(c, 200, OK_BODY);
    expect_reply(c, 204, "");
    expect_reply(c, 200, OK_BODY);   /* body ends at EOF */
    assert_int_equal(atomic_load(&s->acc.accepts), 1);
    jrpc_client_destroy(&c);
    server_stop(&s);
}

#define ERR_BODY "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32000,\"message\":\"Server busy\"},\"id\":null}"

static void test_error_statuses(void **state)
{
    char busy[512];
    snprintf(busy, sizeof busy, "HTTP/1.1 503 Service Unavailable\r\n"
             "Content-Type: application/json; charset=utf-8\r\nContent-Length: %zu\r\n\r\n%s",
             strlen(ERR_BODY), ERR_BODY);
    const step_t steps[] = {
        { ANSWER, busy },
        { ANSWER, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/html\r\n"
                  "Content-Length: 5\r\n\r\n<html" },
        { ANSWER, "HTTP/1.1 200 OK\r\nContent-Length: zz\r\n\r\n" },
    };
    server_t *s = server_start(steps, 3);
    jrpc_client_t *c = client_for(s, "");
    expect_reply(c, 503, ERR_BODY);   /* a JSON-RPC answer: returned as one */
    assert_int_equal(expect_failure(c, 2000), JRPC_CLIENT_EHTTP);
    assert_int_equal(jrpc_client_http_status(c), 502);
    assert_int_equal(expect_failure(c, 2000), -EPROTO);
    jrpc_client_destroy(&c);
    server_stop(&s);
}

/* A body the server will not take: it answers 413 after the head and closes
 * without reading the rest, so our write fails. The answer must still be
 * read, and the request not sent again. */
static void test_early_answer_while_sending(void **state)
{
    char resp[512];
    snprintf(resp, sizeof resp, "HTTP/1.1 413 Payload Too Large\r\nConnection: close\r\n"
             "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
             strlen(ERR_BODY), ERR_BODY);
    const step_t steps[] = { { ANSWER, OK_RESP }, { EARLY, resp } };
    server_t *s = server_start(steps, 2);
    jrpc_client_t *c = client_for(s, "");
    size_t n = 8u << 20;
    char *big = malloc(n);
    jrpc_buf_t reply;
    assert_non_null(big);
    memset(big, ' ', n);
    jrpc_buf_init(&reply);
    expect_reply(c, 200, OK_BODY);   /* so the big one goes on a reused connection */
    int rc = jrpc_client_send(c, big, n, NULL, &reply, 3000);
    /* Linux may drop the unread answer when the reset arrives: then the
     * call fails, but it must not have been retried either way. */
    if (rc == 0) {
        assert_int_equal(jrpc_client_http_status(c), 413);
        assert_int_equal(reply.len, strlen(ERR_BODY));
    } else {
        fprintf(stderr, "early answer lost: %s\n", jrpc_client_last_error(c));
    }
    usleep(100 * 1000);
    assert_int_equal(atomic_load(&s->requests), 2);
    jrpc_buf_dispose(&reply);
    free(big);
    jrpc_client_destroy(&c);
    server_stop(&s);
}

static void test_refused_and_bad_urls(void **state)
{
    server_t *s = server_start(NULL, 0);
    int port = s->port;
    server_stop(&s);   /* nothing listens there now */
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    jrpc_client_t *c = jrpc_client_new(url, NULL);
    assert_non_null(c);
    assert_int_equal(expect_failure(c, 1000), -ECONNREFUSED);
    char want[128];
    snprintf(want, sizeof want, "cannot connect to http://127.0.0.1:%d/rpc: Connection refused", port);
    assert_string_equal(jrpc_client_last_error(c), want);
    jrpc_client_destroy(&c);

    static const char *bad[] = { "http://", "http://:80", "http://h:", "http://h:0",
                                 "http://h:65536", "http://[::1", "http://u@h:1",
                                 "http://h:1/a b", "http://h:x" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        assert_null(jrpc_client_new(bad[i], NULL));
        assert_int_equal(errno, EINVAL);
    }
    static const char *tbad[] = { "https://", "https://:443", "https://h:", "https://h:0",
                                  "https://u@h", "https://[::1" };
    for (size_t i = 0; i < sizeof tbad / sizeof tbad[0]; i++) {
        errno = 0;
        assert_null(jrpc_client_new(tbad[i], NULL));
        assert_int_equal(errno, EINVAL);
    }
    c = jrpc_client_new("https://h:1", NULL);   /* https:// is a transport now */
    assert_non_null(c);
    jrpc_client_destroy(&c);
    /* The ZeroMQ transport checks its own URLs; unknown schemes are EINVAL. */
    static const char *zbad[] = { "tcp://", "tcp://h", "tcp://h:", "tcp://h:0", "tcp://h:65536",
                                  "tcp://[::1:5", "ipc://", "udp://h:1", "", "http:/h" };
    for (size_t i = 0; i < sizeof zbad / sizeof zbad[0]; i++) {
        errno = 0;
        assert_null(jrpc_client_new(zbad[i], NULL));
        assert_int_equal(errno, EINVAL);
    }
    errno = 0;
    assert_null(jrpc_client_new(NULL, NULL));
    assert_int_equal(errno, EINVAL);
    c = jrpc_client_new("http://[::1]:8080/x", NULL);
    assert_non_null(c);
    /* CURVE is the ZeroMQ transport's: not over http://. */
    static const char z85[] = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
    assert_int_equal(jrpc_client_set_curve(c, z85, z85, z85), -ENOTSUP);
    assert_int_equal(jrpc_client_set_curve(c, NULL, NULL, NULL), -ENOTSUP);
    assert_int_equal(jrpc_client_set_curve(c, z85, NULL, NULL), -EINVAL);
    jrpc_client_destroy(&c);
}

/* https:// to a server that never speaks TLS: the handshake is bounded by
 * the call's deadline and the message says so, host and port included. */
static void test_https_handshake_timeout(void **state)
{
    static const step_t steps[] = { { HANG, NULL } };
    server_t *s = server_start(steps, 1);
    char url[64];
    snprintf(url, sizeof url, "https://127.0.0.1:%d", s->port);
    jrpc_client_opts_t opts = { .insecure = 1 };
    jrpc_client_t *c = jrpc_client_new(url, &opts);
    assert_non_null(c);
    int64_t t0 = now_ms();
    assert_int_equal(expect_failure(c, 300), -ETIMEDOUT);
    assert_true(now_ms() - t0 < 2000);
    char want[128];
    snprintf(want, sizeof want, "TLS handshake with 127.0.0.1:%d timed out after 300 ms", s->port);
    assert_string_equal(jrpc_client_last_error(c), want);
    jrpc_client_destroy(&c);
    server_stop(&s);
    /* A CA file that is not there is said before any connection. */
    jrpc_client_opts_t bad = { .cacert = "/nonexistent/ca.pem" };
    c = jrpc_client_new("https://127.0.0.1:1/x", &bad);
    assert_non_null(c);
    assert_int_equal(expect_failure(c, 300), JRPC_CLIENT_ETLS);
    assert_string_equal(jrpc_client_last_error(c), "cannot set up TLS for https://127.0.0.1:1/x: "
                        "cannot read CA file /nonexistent/ca.pem: No such file or directory");
    jrpc_client_destroy(&c);
}

/* jrpc_client_disconnect: the next call makes a new connection; not for
 * ZeroMQ. */
static void test_disconnect(void **state)
{
    static const step_t steps[] = { { ANSWER, OK_RESP }, { ANSWER, OK_RESP }, { ANSWER, OK_RESP } };
    server_t *s = server_start(steps, 3);
    jrpc_client_t *c = client_for(s, "");
    expect_reply(c, 200, OK_BODY);
    expect_reply(c, 200, OK_BODY);
    assert_int_equal(atomic_load(&s->acc.accepts), 1);
    assert_int_equal(jrpc_client_disconnect(c, 0), 0);
    expect_reply(c, 200, OK_BODY);
    assert_int_equal(atomic_load(&s->acc.accepts), 2);
    jrpc_client_destroy(&c);
    server_stop(&s);
    c = jrpc_client_new("tcp://127.0.0.1:1", NULL);
    assert_non_null(c);
    assert_int_equal(jrpc_client_disconnect(c, 0), -ENOTSUP);
    jrpc_client_destroy(&c);
}

/* ---- signing ---- */

#define KEY_ID "client-7"
#define SECRET "s3cr3t with spaces"
#define BATCH "[" REQ "," REQ "]"

/* The value of header `name` in head (first occurrence, any case), copied
 * into out; "" when absent. */
static const char *header_of(const char *head, const char *name, char *out, size_t cap)
{
    size_t nl = strlen(name);
    out[0] = '\0';
    for (const char *l = strstr(head, "\r\n"); l && l[2] != '\r'; l = strstr(l + 2, "\r\n")) {
        const char *f = l + 2;
        if (strncasecmp(f, name, nl) == 0 && f[nl] == ':') {
            const char *v = f + nl + 1 + strspn(f + nl + 1, " ");
            size_t vl = (size_t)(strstr(v, "\r\n") - v);
            assert_true(vl < cap);
            memcpy(out, v, vl);
            out[vl] = '\0';
            break;
        }
    }
    return out;
}

/* Parses canonical decimal Unix seconds (no sign, no leading zero). */
static int64_t canonical_ts(const char *t)
{
    assert_true(t[0] >= '1' && t[0] <= '9');
    assert_int_equal(strspn(t, "0123456789"), strlen(t));
    return strtoll(t, NULL, 10);
}

/* What a broker would check: signature recomputed from what came in. */
static void assert_signed(const char *key, int64_t ts, const char *nonce, const char *sig,
                          const char *body, size_t len)
{
    char want[JRPC_SIGN_HEX_LEN + 1];
    assert_string_equal(key, KEY_ID);
    assert_int_equal(strlen(nonce), 22);
    assert_true(jrpc_sign_nonce_ok(nonce, strlen(nonce)));
    assert_int_equal(jrpc_sign_compute(want, (jrpc_span_t){ SECRET, strlen(SECRET) },
                                       (jrpc_span_t){ key, strlen(key) }, ts,
                                       (jrpc_span_t){ nonce, strlen(nonce) }, body, len), 0);
    assert_string_equal(sig, want);
}

typedef struct http_sig {
    char key[128], ts[32], nonce[80], sig[80];
} http_sig_t;

static void http_sig_of(const server_t *s, http_sig_t *h)
{
    header_of(s->last_head, "X-JRPC-Key", h->key, sizeof h->key);
    header_of(s->last_head, "X-JRPC-Timestamp", h->ts, sizeof h->ts);
    header_of(s->last_head, "X-JRPC-Nonce", h->nonce, sizeof h->nonce);
    header_of(s->last_head, "X-JRPC-Signature", h->sig, sizeof h->sig);
}

static void send_ok(jrpc_client_t *c, const char *body, const jrpc_client_header_t *hdr)
{
    jrpc_buf_t reply;
    jrpc_buf_init(&reply);
    int rc = jrpc_client_send(c, body, strlen(body), hdr, &reply, 2000);
    if (rc != 0)
        fprintf(stderr, "unexpected failure: %s\n", jrpc_client_last_error(c));
    assert_int_equal(rc, 0);
    assert_int_equal(reply.len, strlen(OK_BODY));
    jrpc_buf_dispose(&reply);
}

/* Each body (one request, a batch) carries the four headers; the signature
 * is the one the broker will recompute; nonces are never reused; the
 * caller's own header fields still go out. */
static void test_signed_http(void **state)
{
    static const step_t steps[] = { { ANSWER, OK_RESP }, { ANSWER, OK_RESP } };
    server_t *s = server_start(steps, 2);
    jrpc_client_t *c = client_for(s, "");
    http_sig_t a, b;
    assert_int_equal(jrpc_client_set_key(c, KEY_ID, SECRET), 0);

    send_ok(c, REQ, NULL);
    http_sig_of(s, &a);
    int64_t ts = canonical_ts(a.ts);
    assert_true(llabs(ts - (int64_t)time(NULL)) <= 2);
    assert_string_equal(s->last_body, REQ);
    assert_signed(a.key, ts, a.nonce, a.sig, REQ, strlen(REQ));
    assert_null(strstr(s->last_head, SECRET));

    jrpc_client_header_t h = { .timeout_ms = 1500,
                             .traceparent = { "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", 55 } };
    send_ok(c, BATCH, &h);
    http_sig_of(s, &b);
    assert_string_equal(s->last_body, BATCH);
    assert_signed(b.key, canonical_ts(b.ts), b.nonce, b.sig, BATCH, strlen(BATCH));
    assert_string_not_equal(a.nonce, b.nonce);
    assert_non_null(strstr(s->last_head, "X-JRPC-Timeout-Ms: 1500\r\n"));
    assert_non_null(strstr(s->last_head, "traceparent: 00-0af7651916cd43dd8448eb211c80319c-"));
    assert_int_equal(atomic_load(&s->acc.accepts), 1);
    jrpc_client_destroy(&c);
    server_stop(&s);
}

/* clock_offset_s moves the timestamp (tests make stale ones with it); the
 * key can be checked, replaced and dropped; an unsigned client passes a
 * caller's own signing fields through. */
static void test_signing_options(void **state)
{
    static const step_t steps[] = { { ANSWER, OK_RESP }, { ANSWER, OK_RESP }, { ANSWER, OK_RESP } };
    server_t *s = server_start(steps, 3);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s->port);
    jrpc_client_opts_t o = { .clock_offset_s = -600 };
    jrpc_client_t *c = jrpc_client_new(url, &o);
    http_sig_t a;
    assert_non_null(c);

    assert_int_equal(jrpc_client_set_key(c, KEY_ID, NULL), -EINVAL);
    assert_int_equal(jrpc_client_set_key(c, NULL, SECRET), -EINVAL);
    assert_int_equal(jrpc_client_set_key(c, "", SECRET), -EINVAL);
    assert_int_equal(jrpc_client_set_key(c, "a b", SECRET), -EINVAL);
    assert_int_equal(jrpc_client_set_key(c, "a\nb", SECRET), -EINVAL);
    assert_int_equal(jrpc_client_set_key(c, KEY_ID, ""), -EINVAL);
    assert_int_equal(jrpc_client_set_key(c, "old", "old"), 0);
    assert_int_equal(jrpc_client_set_key(c, KEY_ID, SECRET), 0);   /* replaces */

    send_ok(c, REQ, NULL);
    http_sig_of(s, &a);
    int64_t ts = canonical_ts(a.ts);
    assert_true(llabs(ts - ((int64_t)time(NULL) - 600)) <= 2);
    assert_signed(a.key, ts, a.nonce, a.sig, REQ, strlen(REQ));

    assert_int_equal(jrpc_client_set_key(c, NULL, NULL), 0);
    send_ok(c, REQ, NULL);
    assert_null(strcasestr(s->last_head, "X-JRPC-"));

    jrpc_client_header_t h = { .key = { "k", 1 }, .timestamp = 1700000000,
                             .nonce = { "nnnnnnnnnnnnnnnn", 16 }, .signature = { "ab", 2 } };
    send_ok(c, REQ, &h);
    assert_non_null(strstr(s->last_head, "X-JRPC-Key: k\r\nX-JRPC-Timestamp: 1700000000\r\n"
                                         "X-JRPC-Nonce: nnnnnnnnnnnnnnnn\r\nX-JRPC-Signature: ab\r\n"));
    jrpc_client_destroy(&c);
    server_stop(&s);
}

/* A ROUTER standing in for the broker's ZeroMQ front: keeps the header
 * frame and body of each request and answers OK_BODY. */
typedef struct router {
    void     *ctx, *sock;
    char      endpoint[64];
    int       n;                 /* requests to serve */
    pthread_t thr;
    int       nframes[2];        /* frames after the routing id, per request */
    char      hdr[2][512];       /* header frame of request i */
    size_t    hdr_len[2];
    char      body[2][256];      /* its body, NUL-terminated */
} router_t;

static void *router_main(void *arg)
{
    router_t *r = arg;
    for (int i = 0; i < r->n; i++) {
        char id[256], frame[512];
        int more = 1, k = 0, idn = zmq_recv(r->sock, id, sizeof id, 0);
        size_t ml = sizeof more;
        if (idn < 0)
            return NULL;   /* timed out: the test fails on what is missing */
        for (zmq_getsockopt(r->sock, ZMQ_RCVMORE, &more, &ml); more;
             zmq_getsockopt(r->sock, ZMQ_RCVMORE, &more, &ml), k++) {
            int n = zmq_recv(r->sock, frame, sizeof frame, 0);
            if (n < 0 || n > (int)sizeof frame)
                return NULL;
            if (k == 1) {
                memcpy(r->hdr[i], frame, (size_t)n);
                r->hdr_len[i] = (size_t)n;
            } else if (k == 2 && n < (int)sizeof r->body[i]) {
                memcpy(r->body[i], frame, (size_t)n);
            }
        }
        r->nframes[i] = k;
        zmq_send(r->sock, id, (size_t)idn, ZMQ_SNDMORE);
        zmq_send(r->sock, "", 0, ZMQ_SNDMORE);
        zmq_send(r->sock, OK_BODY, strlen(OK_BODY), 0);
    }
    return NULL;
}

static void test_signed_zmq_header_frame(void **state)
{
    router_t r = { .n = 2 };
    const int tmo = 5000;
    size_t el = sizeof r.endpoint;
    r.ctx = zmq_ctx_new();
    r.sock = zmq_socket(r.ctx, ZMQ_ROUTER);
    assert_int_equal(zmq_setsockopt(r.sock, ZMQ_RCVTIMEO, &tmo, sizeof tmo), 0);
    assert_int_equal(zmq_bind(r.sock, "tcp://127.0.0.1:*"), 0);
    assert_int_equal(zmq_getsockopt(r.sock, ZMQ_LAST_ENDPOINT, r.endpoint, &el), 0);
    pthread_create(&r.thr, NULL, router_main, &r);

    jrpc_client_t *c = jrpc_client_new(r.endpoint, NULL);
    assert_non_null(c);
    assert_int_equal(jrpc_client_set_key(c, KEY_ID, SECRET), 0);
    send_ok(c, REQ, NULL);
    jrpc_client_header_t h = { .timeout_ms = 1500, .traceparent = { "tp", 2 } };
    send_ok(c, BATCH, &h);
    pthread_join(r.thr, NULL);

    char nonces[2][80];
    for (int i = 0; i < 2; i++) {
        msgpack_zone zone;
        jrpc_header_t got;
        char key[128], nonce[80], sig[80];
        const char *body = i == 0 ? REQ : BATCH;
        assert_int_equal(r.nframes[i], 3);   /* [empty][header][body] */
        assert_string_equal(r.body[i], body);
        msgpack_zone_init(&zone, 1024);
        assert_int_equal(jrpc_header_decode(r.hdr[i], r.hdr_len[i], &zone, &got), 0);
        snprintf(key, sizeof key, "%.*s", (int)got.key.n, got.key.p);
        snprintf(nonce, sizeof nonce, "%.*s", (int)got.nonce.n, got.nonce.p);
        snprintf(sig, sizeof sig, "%.*s", (int)got.signature.n, got.signature.p);
        assert_true(llabs(got.timestamp - (int64_t)time(NULL)) <= 2);
        assert_signed(key, got.timestamp, nonce, sig, body, strlen(body));
        assert_int_equal(got.timeout_ms, i == 0 ? 0 : 1500);
        assert_int_equal(got.traceparent.n, i == 0 ? 0 : 2);
        memcpy(nonces[i], nonce, sizeof nonce);
        msgpack_zone_destroy(&zone);
    }
    assert_string_not_equal(nonces[0], nonces[1]);
    jrpc_client_destroy(&c);
    zmq_close(r.sock);
    zmq_ctx_term(r.ctx);
}

/* ---- MCP (opts.mcp): the session a client opens and keeps ---- */

static jrpc_client_t *mcp_client(const server_t *s)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/mcp", s->port);
    jrpc_client_t *c = jrpc_client_new(url, &(jrpc_client_opts_t){ .mcp = 1 });
    assert_non_null(c);
    return c;
}

#define MCP_INIT_SSE_DATA "{\"jsonrpc\":\"2.0\",\"id\":\"jrpc-client-initialize\",\"result\":" \
    "{\"protocolVersion\":\"2025-03-26\",\"capabilities\":{},\"serverInfo\":{\"name\":\"s\"}}}"
#define MCP_INIT_SSE_BODY "event: message\r\ndata: " MCP_INIT_SSE_DATA "\r\n\r\n"
#define MCP_ACCEPTED "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"
#define PROGRESS "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}"
#define CALL_SSE_BODY ": ping\n\nevent: message\ndata: " PROGRESS "\n\nevent: message\ndata: " \
    OK_BODY "\n\n"
#define GONE_BODY "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32001,\"message\":\"Session not found\"},\"id\":null}"
#define MCP_INIT_JSON_BODY "{\"jsonrpc\":\"2.0\",\"id\":\"jrpc-client-initialize\",\"result\":" \
    "{\"protocolVersion\" : \"2025-06-18\",\"capabilities\":{}}}"

static char *fmt(const char *f, ...)
{
    static char bufs[8][1024];
    static int next;
    char *b = bufs[next++ % 8];
    va_list ap;
    va_start(ap, f);
    vsnprintf(b, sizeof bufs[0], f, ap);
    va_end(ap);
    return b;
}

/* initialize (an event stream), the notification, a call answered as an
 * event stream after a progress notification (the reply: the response
 * alone), a call the server refuses 404 (the session ended): a new session
 * (plain JSON this time) and the call again, once; at destroy the session
 * ends with a DELETE. One connection. */
static void test_mcp_session(void **state)
{
    step_t steps[8] = {
        { ANSWER, fmt("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nMcp-Session-Id: sess-1\r\n"
                      "Content-Length: %zu\r\n\r\n%s", strlen(MCP_INIT_SSE_BODY), MCP_INIT_SSE_BODY) },
        { ANSWER, MCP_ACCEPTED },
        { ANSWER, fmt("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n%zx\r\n%s\r\n0\r\n\r\n",
                      strlen(CALL_SSE_BODY), CALL_SSE_BODY) },
        { ANSWER, fmt("HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n\r\n%s", strlen(GONE_BODY), GONE_BODY) },
        { ANSWER, fmt("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nmcp-session-id: sess-2\r\n"
                      "Content-Length: %zu\r\n\r\n%s", strlen(MCP_INIT_JSON_BODY), MCP_INIT_JSON_BODY) },
        { ANSWER, MCP_ACCEPTED },
        { ANSWER, OK_RESP },
        { ANSWER, "HTTP/1.1 204 No Content\r\n\r\n" },
    };
    server_t *s = server_start(steps, 8);
    jrpc_client_t *c = mcp_client(s);
    expect_reply(c, 200, OK_BODY);
    assert_int_equal(atomic_load(&s->requests), 3);
    expect_reply(c, 200, OK_BODY);
    assert_int_equal(atomic_load(&s->requests), 7);
    assert_int_equal(atomic_load(&s->acc.accepts), 1);

    for (int i = 0; i < 7; i++) {
        assert_non_null(strstr(s->heads[i], "POST /mcp HTTP/1.1\r\n"));
        assert_non_null(strstr(s->heads[i], "Accept: application/json, text/event-stream\r\n"));
    }
    /* 1 and 5: initialize, no session yet */
    for (int i = 0; i < 7; i += 4) {
        assert_non_null(strstr(s->bodies[i], "\"method\":\"initialize\""));
        assert_non_null(strstr(s->bodies[i], "\"protocolVersion\":\"2025-06-18\""));
        assert_null(strcasestr(s->heads[i], "Mcp-Session-Id"));
        assert_null(strcasestr(s->heads[i], "MCP-Protocol-Version"));
        assert_string_equal(s->bodies[i + 1],
                            "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
    }
    /* 2-4: the first session, the version the server chose */
    for (int i = 1; i < 4; i++) {
        assert_non_null(strstr(s->heads[i], "\r\nMcp-Session-Id: sess-1\r\n"));
        assert_non_null(strstr(s->heads[i], "\r\nMCP-Protocol-Version: 2025-03-26\r\n"));
    }
    assert_string_equal(s->bodies[2], REQ);
    assert_string_equal(s->bodies[3], REQ);
    /* 6-7: the second */
    for (int i = 5; i < 7; i++) {
        assert_non_null(strstr(s->heads[i], "\r\nMcp-Session-Id: sess-2\r\n"));
        assert_non_null(strstr(s->heads[i], "\r\nMCP-Protocol-Version: 2025-06-18\r\n"));
    }
    assert_string_equal(s->bodies[6], REQ);
    jrpc_client_destroy(&c);
    assert_int_equal(atomic_load(&s->requests), 8);
    assert_non_null(strstr(s->heads[7], "DELETE /mcp HTTP/1.1\r\n"));
    assert_non_null(strstr(s->heads[7], "\r\nMcp-Session-Id: sess-2\r\n"));
    assert_non_null(strstr(s->heads[7], "\r\nContent-Length: 0\r\n"));
    server_stop(&s);
}

/* A server with no session ids (stateless): none sent, no new session per
 * call, and a 404 is then an answer like any other (no session to renew). */
static void test_mcp_stateless(void **state)
{
    step_t steps[4] = {
        { ANSWER, fmt("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n\r\n%s", strlen(MCP_INIT_JSON_BODY), MCP_INIT_JSON_BODY) },
        { ANSWER, MCP_ACCEPTED },
        { ANSWER, OK_RESP },
        { ANSWER, fmt("HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n\r\n%s", strlen(GONE_BODY), GONE_BODY) },
    };
    server_t *s = server_start(steps, 4);
    jrpc_client_t *c = mcp_client(s);
    expect_reply(c, 200, OK_BODY);
    expect_reply(c, 404, GONE_BODY);
    assert_int_equal(atomic_load(&s->requests), 4);
    assert_null(strcasestr(s->heads[2], "Mcp-Session-Id"));
    assert_non_null(strstr(s->heads[2], "\r\nMCP-Protocol-Version: 2025-06-18\r\n"));
    jrpc_client_destroy(&c);
    assert_int_equal(atomic_load(&s->requests), 4);   /* no session: nothing to DELETE */
    server_stop(&s);
}

static void no_answer(void *arg, uint32_t pos, const char *json, size_t len)
{
    (void)arg, (void)pos, (void)json, (void)len;
    fail_msg("an answer streamed over MCP");
}

/* What fails the call, and says why: initialize refused (401 text), an
 * initialize answer without a result, a session id past 256 bytes or with
 * a byte that is not visible ASCII, a refused notification, a stream asked
 * for. Nothing of the call itself is sent then. */
static void test_mcp_refusals(void **state)
{
    char longid[300];
    memset(longid, 'a', sizeof longid - 1);
    longid[sizeof longid - 1] = '\0';
    static const char err_body[] = "{\"jsonrpc\":\"2.0\",\"id\":\"jrpc-client-initialize\","
                                   "\"error\":{\"code\":-32602,\"message\":\"bad version\"}}";
    struct { const char *resp; int rc; const char *says; int requests; } cases[] = {
        { "HTTP/1.1 401 Unauthorized\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nno",
          JRPC_CLIENT_EHTTP, "refused initialize: HTTP 401", 1 },
        { fmt("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
              strlen(err_body), err_body), -EPROTO, "without a result", 1 },
        { fmt("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: %s\r\n"
              "Content-Length: %zu\r\n\r\n%s", longid, strlen(MCP_INIT_JSON_BODY), MCP_INIT_JSON_BODY),
          -EPROTO, "longer than 256", 1 },
        { fmt("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: a\x80" "b\r\n"
              "Content-Length: %zu\r\n\r\n%s", strlen(MCP_INIT_JSON_BODY), MCP_INIT_JSON_BODY),
          -EPROTO, "not visible ASCII", 1 },
        { fmt("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: s\r\n"
              "Content-Length: %zu\r\n\r\n%s", strlen(MCP_INIT_JSON_BODY), MCP_INIT_JSON_BODY),
          JRPC_CLIENT_EHTTP, "refused notifications/initialized: HTTP 400", 2 },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        step_t steps[2] = { { ANSWER, cases[k].resp },
                            { ANSWER, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n" } };
        server_t *s = server_start(steps, 2);
        jrpc_client_t *c = mcp_client(s);
        assert_int_equal(expect_failure(c, 2000), cases[k].rc);
        if (strstr(jrpc_client_last_error(c), cases[k].says) == NULL)
            fail_msg("case %zu: %s", k, jrpc_client_last_error(c));
        assert_int_equal(atomic_load(&s->requests), cases[k].requests);
        jrpc_client_destroy(&c);
        server_stop(&s);
    }
    server_t *s = server_start(NULL, 0);
    jrpc_client_t *c = mcp_client(s);
    jrpc_buf_t end;
    jrpc_buf_init(&end);
    assert_int_equal(jrpc_client_send_stream(c, REQ, strlen(REQ), NULL, no_answer, NULL, &end, 500),
                     -ENOTSUP);
    assert_int_equal(atomic_load(&s->requests), 0);
    jrpc_buf_dispose(&end);
    jrpc_client_destroy(&c);
    server_stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keep_alive_reuses_one_connection),
        cmocka_unit_test(test_path_and_timeout_header),
        cmocka_unit_test(test_reconnects_after_idle_close),
        cmocka_unit_test(test_never_resends_a_received_request),
        cmocka_unit_test(test_timeout_drops_the_connection),
        cmocka_unit_test(test_framings),
        cmocka_unit_test(test_error_statuses),
        cmocka_unit_test(test_early_answer_while_sending),
        cmocka_unit_test(test_refused_and_bad_urls),
        cmocka_unit_test(test_https_handshake_timeout),
        cmocka_unit_test(test_disconnect),
        cmocka_unit_test(test_signed_http),
        cmocka_unit_test(test_signing_options),
        cmocka_unit_test(test_signed_zmq_header_frame),
        cmocka_unit_test(test_mcp_session),
        cmocka_unit_test(test_mcp_stateless),
        cmocka_unit_test(test_mcp_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
