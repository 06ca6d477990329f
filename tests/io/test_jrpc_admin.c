/* Tests of io/jrpc_admin, the admin listener, in the test's libuv loop and
 * over real TCP: the owner's page hook (GET and HEAD of its paths, its
 * content type and header lines, 404 for what it does not know, 405 for
 * other methods on its paths) and the admin's own limits that still hold
 * around it (no request bodies, 64 connections, /metrics and the probes unchanged, 404
 * everywhere else without the hook). The .c is included to read the
 * listener's port. */
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../io/jrpc_admin.c"

static int metrics(void *arg, jrpc_buf_t *out)
{
    (void)arg;
    return jrpc_buf_append(out, "m 1\n", 4);
}

static const char *not_ready(void *arg)
{
    (void)arg;
    return NULL;
}

static int page_calls;

static int page(void *arg, const char *path, size_t plen, jrpc_buf_t *out, const char **ctype,
                const char **headers)
{
    (void)arg;
    page_calls++;
    if (plen == 7 && memcmp(path, "/status", 7) == 0) {
        *ctype = "application/json; charset=utf-8";
        *headers = NULL;
        return jrpc_buf_append(out, "{\"up\":true}", 11);
    }
    if (plen == 1 && path[0] == '/') {
        *ctype = "text/html; charset=utf-8";
        *headers = "Content-Security-Policy: default-src 'self'\r\n";
        return jrpc_buf_append(out, "<p>hi</p>", 9);
    }
    if (plen == 4 && memcmp(path, "/oom", 4) == 0)
        return -ENOMEM;
    return -ENOENT;
}

/* Runs the loop until the peer has closed or the answer holds want (and
 * then the bytes after it for a little longer); returns what came. */
static char *exchange(uv_loop_t *loop, jrpc_admin_t *a, const char *req, const char *want)
{
    struct sockaddr_storage ss;
    int sl = sizeof ss;
    assert_int_equal(uv_tcp_getsockname(&a->listener, (struct sockaddr *)&ss, &sl), 0);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    assert_true(fd >= 0);
    int rc = connect(fd, (struct sockaddr *)&ss, (socklen_t)sl);
    assert_true(rc == 0 || errno == EINPROGRESS);
    size_t cap = 1 << 16, len = 0, sent = 0, rlen = strlen(req);
    char *got = calloc(1, cap);
    assert_non_null(got);
    /* bounded: 20000 turns of at most 1 ms each */
    for (int turn = 0; turn < 20000; turn++) {
        uv_run(loop, UV_RUN_NOWAIT);
        if (sent < rlen) {
            ssize_t n = send(fd, req + sent, rlen - sent, MSG_NOSIGNAL);
            if (n > 0)
                sent += (size_t)n;
        }
        ssize_t n = recv(fd, got + len, cap - 1 - len, 0);
        if (n == 0)
            break;
        if (n > 0) {
            len += (size_t)n;
            if (want && strstr(got, want))
                break;
        } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
            break;
        }
        usleep(1000);
    }
    close(fd);
    for (int i = 0; i < 50; i++)   /* the admin sees the close */
        uv_run(loop, UV_RUN_NOWAIT);
    got[len] = '\0';
    return got;
}

typedef struct fixture {
    uv_loop_t     loop;
    jrpc_admin_t *admin;
} fixture_t;

static fixture_t *start(bool with_page)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    uv_loop_init(&f->loop);
    jrpc_admin_opts_t o = JRPC_ADMIN_OPTS_DEFAULT;
    o.listen = "127.0.0.1:0";
    o.metrics = metrics;
    o.not_ready = not_ready;
    o.page = with_page ? page : NULL;
    f->admin = jrpc_admin_new(&f->loop, &o);
    assert_non_null(f->admin);
    page_calls = 0;
    return f;
}

static void stop(fixture_t *f)
{
    jrpc_admin_destroy(&f->admin);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    free(f);
}

static void test_page_get(void **state)
{
    (void)state;
    fixture_t *f = start(true);
    char *r = exchange(&f->loop, f->admin, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", NULL);
    assert_non_null(strstr(r, "HTTP/1.1 200 OK\r\n"));
    assert_non_null(strstr(r, "Content-Type: text/html; charset=utf-8\r\n"));
    assert_non_null(strstr(r, "Cache-Control: no-store\r\n"));
    assert_non_null(strstr(r, "Content-Security-Policy: default-src 'self'\r\n"));
    assert_non_null(strstr(r, "Content-Length: 9\r\n"));
    assert_non_null(strstr(r, "\r\n\r\n<p>hi</p>"));
    free(r);
    /* a query is not part of the path */
    r = exchange(&f->loop, f->admin, "GET /status?x=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", NULL);
    assert_non_null(strstr(r, "HTTP/1.1 200 OK\r\n"));
    assert_non_null(strstr(r, "Content-Type: application/json; charset=utf-8\r\n"));
    assert_non_null(strstr(r, "\r\n\r\n{\"up\":true}"));
    free(r);
    stop(f);
}

static void test_page_head(void **state)
{
    (void)state;
    fixture_t *f = start(true);
    char *r = exchange(&f->loop, f->admin, "HEAD /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", NULL);
    assert_non_null(strstr(r, "HTTP/1.1 200 OK\r\n"));
    assert_non_null(strstr(r, "Content-Length: 11\r\n"));
    const char *end = strstr(r, "\r\n\r\n");
    assert_non_null(end);
    assert_string_equal(end + 4, "");   /* no body after a HEAD */
    free(r);
    stop(f);
}

static void test_page_refusals(void **state)
{
    (void)state;
    fixture_t *f = start(true);
    char *r = exchange(&f->loop, f->admin, "GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", NULL);
    assert_non_null(strstr(r, "HTTP/1.1 404 "));
    free(r);
    r = exchange(&f->loop, f->admin, "GET /oom HTTP/1.1\r\nHost: x\r\n\r\n", NULL);
    assert_non_null(strstr(r, "HTTP/1.1 503 "));
    free(r);
    /* a body is refused before any page is built, and the connection closed */
    int before = page_calls;
    r = exchange(&f->loop, f->admin,
                 "GET /status HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", NULL);
    assert_non_null(strstr(r, "HTTP/1.1 400 "));
    assert_non_null(strstr(r, "request bodies are not accepted"));
    assert_null(strstr(r, "{\"up\""));
    assert_int_equal(page_calls, before);
    free(r);
    r = exchange(&f->loop, f->admin, "DELETE /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", NULL);
    assert_non_null(strstr(r, "HTTP/1.1 405 "));
    assert_non_null(strstr(r, "Allow: GET, HEAD\r\n"));
    assert_null(strstr(r, "{\"up\""));
    free(r);
    r = exchange(&f->loop, f->admin, "DELETE /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", NULL);
    assert_non_null(strstr(r, "HTTP/1.1 404 "));
    free(r);
    stop(f);
}

/* keep-alive: the owner's page, then /metrics, on one connection */
static void test_page_keepalive(void **state)
{
    (void)state;
    fixture_t *f = start(true);
    char *r = exchange(&f->loop, f->admin,
                       "GET /status HTTP/1.1\r\nHost: x\r\n\r\n"
                       "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", NULL);
    const char *second = strstr(r, "{\"up\":true}HTTP/1.1 200 OK\r\n");
    assert_non_null(second);
    assert_non_null(strstr(second, "\r\n\r\nm 1\n"));
    free(r);
    stop(f);
}

static void test_no_page_hook(void **state)
{
    (void)state;
    fixture_t *f = start(false);
    char *r = exchange(&f->loop, f->admin, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", NULL);
    assert_non_null(strstr(r, "HTTP/1.1 404 "));
    free(r);
    r = exchange(&f->loop, f->admin, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", NULL);
    assert_non_null(strstr(r, "HTTP/1.1 200 OK\r\n"));
    assert_non_null(strstr(r, "\r\n\r\nok\n"));
    free(r);
    stop(f);
}

/* 64 connections at most, the page hook or not: the 65th is closed at
 * once, and one of the 64 is still served. */
static void test_page_max_conns(void **state)
{
    (void)state;
    fixture_t *f = start(true);
    struct sockaddr_storage ss;
    int sl = sizeof ss, fds[65];
    assert_int_equal(uv_tcp_getsockname(&f->admin->listener, (struct sockaddr *)&ss, &sl), 0);
    for (int i = 0; i < 65; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        assert_true(fds[i] >= 0);
        int rc = connect(fds[i], (struct sockaddr *)&ss, (socklen_t)sl);
        assert_true(rc == 0 || errno == EINPROGRESS);
        for (int t = 0; t < 200 && f->admin->nconns < (uint32_t)(i < 64 ? i + 1 : 64); t++) {
            uv_run(&f->loop, UV_RUN_NOWAIT);
            usleep(500);
        }
    }
    /* the 65th: closed by the admin (EOF or reset), within 2 s */
    int closed = 0;
    char c;
    for (int t = 0; t < 2000 && !closed; t++) {
        uv_run(&f->loop, UV_RUN_NOWAIT);
        ssize_t n = recv(fds[64], &c, 1, 0);
        closed = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
        usleep(1000);
    }
    assert_true(closed);
    assert_int_equal(f->admin->nconns, 64);
    /* the first of the 64 still gets its page */
    const char *req = "GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    assert_int_equal(send(fds[0], req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
    char got[1024] = "";
    size_t len = 0;
    for (int t = 0; t < 2000; t++) {
        uv_run(&f->loop, UV_RUN_NOWAIT);
        ssize_t n = recv(fds[0], got + len, sizeof got - 1 - len, 0);
        if (n == 0)
            break;
        if (n > 0)
            len += (size_t)n;
        usleep(1000);
    }
    got[len] = '\0';
    assert_non_null(strstr(got, "HTTP/1.1 200 OK\r\n"));
    assert_non_null(strstr(got, "{\"up\":true}"));
    for (int i = 0; i < 65; i++)
        close(fds[i]);
    for (int i = 0; i < 50; i++)
        uv_run(&f->loop, UV_RUN_NOWAIT);
    stop(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_page_get),
        cmocka_unit_test(test_page_head),
        cmocka_unit_test(test_page_refusals),
        cmocka_unit_test(test_page_keepalive),
        cmocka_unit_test(test_no_page_hook),
        cmocka_unit_test(test_page_max_conns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
