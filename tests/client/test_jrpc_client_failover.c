/* Tests of a client with several brokers (issue 34): the URL list and
 * dns+tcp:// names (jrpc_failover_split, jrpc_client_new), the order of the
 * brokers and the retry decision (jrpc_client_failover, pure), and the
 * decision acted on against scripted HTTP servers in threads: a broker that
 * takes the body and closes, another that answers. */
#include <errno.h>
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
#include <unistd.h>
#include <cmocka.h>

#include "jrpc_client.h"
#include "jrpc_client_failover.h"
#include "../scripted_server.h"

/* ---- the list ---- */

static void test_split(void **state)
{
    (void)state;
    char *u[4];
    char a[] = "tcp://a:1";
    assert_int_equal(jrpc_failover_split(a, u, 4), 1);
    assert_string_equal(u[0], "tcp://a:1");
    char b[] = "tcp://a:1, http://b:2/rpc ,dns+tcp://c:3";
    assert_int_equal(jrpc_failover_split(b, u, 4), 3);
    assert_string_equal(u[0], "tcp://a:1");
    assert_string_equal(u[1], "http://b:2/rpc");
    assert_string_equal(u[2], "dns+tcp://c:3");
    const char *bad[] = { "", " ", "tcp://a:1,", ",tcp://a:1", "tcp://a:1,,tcp://b:2",
                          "a,b,c,d,e" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char copy[64];
        snprintf(copy, sizeof copy, "%s", bad[i]);
        assert_int_equal(jrpc_failover_split(copy, u, 4), -EINVAL);
    }
}

static void test_new_with_a_list(void **state)
{
    (void)state;
    jrpc_client_t *c = jrpc_client_new("tcp://127.0.0.1:5555, http://127.0.0.1:8080/rpc", NULL);
    assert_non_null(c);
    assert_int_equal(jrpc_client_brokers(c), 2);
    assert_string_equal(jrpc_client_broker_url(c, 0), "tcp://127.0.0.1:5555");
    assert_string_equal(jrpc_client_broker_url(c, 1), "http://127.0.0.1:8080/rpc");
    assert_null(jrpc_client_broker_url(c, 2));
    assert_string_equal(jrpc_client_url(c), "tcp://127.0.0.1:5555, http://127.0.0.1:8080/rpc");
    jrpc_client_destroy(&c);

    const char *bad[] = { "tcp://127.0.0.1:5555,", "tcp://127.0.0.1:5555,ftp://x",
                          "tcp://127.0.0.1:5555,,tcp://127.0.0.1:5556", "dns+tcp://a b:1",
                          "dns+tcp://name", "dns+tcp://name:0" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        assert_null(jrpc_client_new(bad[i], NULL));
        assert_int_equal(errno, EINVAL);
    }
    jrpc_client_opts_t o = { .retry = 7 };
    errno = 0;
    assert_null(jrpc_client_new("tcp://127.0.0.1:5555", &o));
    assert_int_equal(errno, EINVAL);
    /* 65 brokers: one too many. */
    char many[65 * 24] = "";
    for (int i = 0; i < 65; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%stcp://127.0.0.1:%d",
                 i ? "," : "", 1000 + i);
    errno = 0;
    assert_null(jrpc_client_new(many, NULL));
    assert_int_equal(errno, EINVAL);
    *strrchr(many, ',') = '\0';
    c = jrpc_client_new(many, NULL);
    assert_non_null(c);
    assert_int_equal(jrpc_client_brokers(c), 64);
    jrpc_client_destroy(&c);
}

static void test_dns_name(void **state)
{
    (void)state;
    /* localhost: 127.0.0.1, and ::1 where the resolver gives it. */
    jrpc_client_t *c = jrpc_client_new("dns+tcp://localhost:5999,tcp://10.0.0.1:1", NULL);
    assert_non_null(c);
    size_t n = jrpc_client_brokers(c);
    assert_true(n == 2 || n == 3);
    bool v4 = false;
    for (size_t i = 0; i + 1 < n; i++) {
        const char *u = jrpc_client_broker_url(c, i);
        v4 |= strcmp(u, "tcp://127.0.0.1:5999") == 0;
        assert_true(strcmp(u, "tcp://127.0.0.1:5999") == 0 || strcmp(u, "tcp://[::1]:5999") == 0);
    }
    assert_true(v4);
    assert_string_equal(jrpc_client_broker_url(c, n - 1), "tcp://10.0.0.1:1");
    jrpc_client_destroy(&c);
    errno = 0;
    assert_null(jrpc_client_new("dns+tcp://no-such-name.invalid:5555", NULL));
    assert_int_equal(-errno, JRPC_CLIENT_ENONAME);
    assert_non_null(strstr(jrpc_client_strerror(JRPC_CLIENT_ENONAME), "dns+tcp://"));
}

/* ---- the order and the decision ---- */

static void test_order(void **state)
{
    (void)state;
    size_t o[4];
    int64_t never[4] = { 0 };
    jrpc_failover_order(4, 2, never, 100000, o);
    assert_int_equal(o[0], 2);
    assert_int_equal(o[1], 3);
    assert_int_equal(o[2], 0);
    assert_int_equal(o[3], 1);
    /* 3 failed 1 s ago: last; 0 failed 3 s ago: forgiven. */
    int64_t failed[4] = { 97000, 0, 0, 99000 };
    jrpc_failover_order(4, 2, failed, 100000, o);
    assert_int_equal(o[0], 2);
    assert_int_equal(o[1], 0);
    assert_int_equal(o[2], 1);
    assert_int_equal(o[3], 3);
}

static void test_decide(void **state)
{
    (void)state;
    int lost[] = { -ECONNRESET, -EPIPE, -ETIMEDOUT, -ECONNREFUSED, -EHOSTUNREACH };
    for (size_t i = 0; i < sizeof lost / sizeof lost[0]; i++) {
        assert_int_equal(jrpc_failover_decide(lost[i], false, false), JRPC_FAILOVER_NEXT);
        assert_int_equal(jrpc_failover_decide(lost[i], false, true), JRPC_FAILOVER_NEXT);
        assert_int_equal(jrpc_failover_decide(lost[i], true, true), JRPC_FAILOVER_RESEND);
        assert_int_equal(jrpc_failover_decide(lost[i], true, false), JRPC_FAILOVER_MAY_HAVE_RUN);
    }
    int other[] = { -ENOMEM, -EINVAL, -EINTR, -EPROTO, -EMSGSIZE, JRPC_CLIENT_ETLS,
                    JRPC_CLIENT_EHTTP, -EIO };
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        assert_int_equal(jrpc_failover_decide(other[i], true, true), JRPC_FAILOVER_STOP);
        assert_int_equal(jrpc_failover_decide(other[i], false, false), JRPC_FAILOVER_STOP);
    }
    /* The resend ends before the first run's claim could (t0 + 4.8 s). */
    assert_int_equal(jrpc_failover_resend_ms(10000, 1000, 1200), 4600);
    assert_int_equal(jrpc_failover_resend_ms(2000, 1000, 1200), 2000);
    assert_int_equal(jrpc_failover_resend_ms(10000, 1000, 5701), 0);
    assert_int_equal(jrpc_failover_resend_ms(10000, 1000, 9000), 0);
    const char *held = "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32008,\"message\":"
                       "\"Idempotency conflict\",\"data\":{\"reason\":\"the first body sent with "
                       "this idempotency key is still running: retry later\"}}}";
    assert_true(jrpc_failover_still_running(held, strlen(held)));
    const char *other422 = "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32008}}";
    assert_false(jrpc_failover_still_running(other422, strlen(other422)));
    const char *batch = "[{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"still running -32008\"}]";
    assert_false(jrpc_failover_still_running(batch, strlen(batch)));
}

/* ---- the decision acted on: two scripted HTTP brokers ---- */

typedef struct server {
    acceptor_t acc;
    int        port;
    bool       answer;         /* answer each request, or close after reading it */
    atomic_int requests;       /* whole requests read */
    char       last_head[1024];
} server_t;

static void conn_main(void *owner, int fd)
{
    server_t *s = owner;
    char buf[8192];
    size_t have = 0;
    for (;;) {
        char *end = memmem(buf, have, "\r\n\r\n", 4);
        if (end) {
            size_t head = (size_t)(end - buf) + 4;
            const char *cl = strcasestr(buf, "content-length:");
            size_t blen = cl && cl < end ? strtoul(cl + 15, NULL, 10) : 0;
            if (have >= head + blen) {
                size_t hl = head < sizeof s->last_head ? head : sizeof s->last_head - 1;
                memcpy(s->last_head, buf, hl);
                s->last_head[hl] = '\0';
                atomic_fetch_add(&s->requests, 1);
                if (!s->answer)
                    break;
                static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                         "Content-Length: 36\r\n\r\n"
                                         "{\"jsonrpc\":\"2.0\",\"result\":19,\"id\":1}";
                if (send(fd, ok, sizeof ok - 1, MSG_NOSIGNAL) < 0)
                    break;
                memmove(buf, buf + head + blen, have - head - blen);
                have -= head + blen;
                continue;
            }
        }
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        if (atomic_load(&s->acc.stop))
            break;
        if (poll(&pfd, 1, 50) <= 0)
            continue;
        ssize_t n = recv(fd, buf + have, sizeof buf - 1 - have, 0);
        if (n <= 0)
            break;
        have += (size_t)n;
        buf[have] = '\0';
    }
    close(fd);
}

static server_t *server_start(bool answer)
{
    server_t *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->answer = answer;
    acceptor_start(&s->acc, bind_loopback(0, &s->port), 16, conn_main, s);
    return s;
}

static void server_stop(server_t **s_p)
{
    acceptor_stop(&(*s_p)->acc);
    free(*s_p);
    *s_p = NULL;
}

#define REQ "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":1}"

/* A client for "dying, answering" (the dying one first in turn). */
static jrpc_client_t *pair_client(const server_t *dies, const server_t *answers, int retry)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d,http://127.0.0.1:%d", dies->port,
             answers->port);
    jrpc_client_opts_t o = { .retry = retry };
    jrpc_client_t *c = jrpc_client_new(url, &o);
    assert_non_null(c);
    return c;
}

static int send_req(jrpc_client_t *c, const jrpc_client_header_t *h, jrpc_buf_t *reply)
{
    return jrpc_client_send(c, REQ, strlen(REQ), h, reply, 3000);
}

static void test_lost_without_key_may_have_run(void **state)
{
    (void)state;
    server_t *dies = server_start(false), *ok = server_start(true);
    jrpc_client_t *c = pair_client(dies, ok, JRPC_CLIENT_RETRY_NONE);
    jrpc_buf_t reply;
    jrpc_buf_init(&reply);
    assert_int_equal(send_req(c, NULL, &reply), JRPC_CLIENT_EMAYHAVERUN);
    assert_int_equal(reply.len, 0);
    assert_non_null(strstr(jrpc_client_last_error(c), "may or may not have run"));
    assert_non_null(strstr(jrpc_client_strerror(JRPC_CLIENT_EMAYHAVERUN),
                           "may or may not have run"));
    assert_int_equal(atomic_load(&dies->requests), 1);
    assert_int_equal(atomic_load(&ok->requests), 0);   /* never sent twice */
    /* The next body goes to the other broker first (in turn). */
    assert_int_equal(send_req(c, NULL, &reply), 0);
    assert_int_equal(atomic_load(&ok->requests), 1);
    assert_false(strcasestr(ok->last_head, "Idempotency-Key") != NULL);
    /* A body marked retryable is sent again (without a key). */
    jrpc_client_header_t h = { .retryable = 1 };
    jrpc_client_destroy(&c);
    c = pair_client(dies, ok, JRPC_CLIENT_RETRY_NONE);
    assert_int_equal(send_req(c, &h, &reply), 0);
    assert_int_equal(atomic_load(&dies->requests), 2);
    assert_int_equal(atomic_load(&ok->requests), 2);
    assert_false(strcasestr(ok->last_head, "Idempotency-Key") != NULL);
    jrpc_buf_dispose(&reply);
    jrpc_client_destroy(&c);
    server_stop(&dies);
    server_stop(&ok);
}

static void test_retry_safe_resends_with_the_same_key(void **state)
{
    (void)state;
    server_t *dies = server_start(false), *ok = server_start(true);
    jrpc_client_t *c = pair_client(dies, ok, JRPC_CLIENT_RETRY_SAFE);
    assert_int_equal(jrpc_client_set_key(c, "k1", "s3cr3t"), 0);
    jrpc_buf_t reply;
    jrpc_buf_init(&reply);
    assert_int_equal(send_req(c, NULL, &reply), 0);
    assert_int_equal(jrpc_client_http_status(c), 200);
    assert_int_equal(atomic_load(&dies->requests), 1);
    assert_int_equal(atomic_load(&ok->requests), 1);
    const char *d = strcasestr(dies->last_head, "Idempotency-Key: ");
    const char *o = strcasestr(ok->last_head, "Idempotency-Key: ");
    assert_non_null(d);
    assert_non_null(o);
    size_t dn = strcspn(d, "\r"), on = strcspn(o, "\r");
    assert_int_equal(dn, on);
    assert_memory_equal(d, o, dn);   /* the same key ... */
    assert_true(dn > strlen("Idempotency-Key: ") + 30);
    const char *dnonce = strcasestr(dies->last_head, "X-JRPC-Nonce: ");
    const char *ononce = strcasestr(ok->last_head, "X-JRPC-Nonce: ");
    assert_non_null(dnonce);
    assert_non_null(ononce);
    assert_true(memcmp(dnonce, ononce, strcspn(dnonce, "\r")) != 0);   /* ... a fresh nonce */
    assert_non_null(strcasestr(ok->last_head, "X-JRPC-Timeout-Ms: "));  /* bounded resend */
    /* The user's own key is kept. */
    jrpc_client_header_t h = { .idem_key = { "my-key-1", 8 } };
    jrpc_client_destroy(&c);
    c = pair_client(dies, ok, JRPC_CLIENT_RETRY_SAFE);
    assert_int_equal(send_req(c, &h, &reply), 0);
    assert_non_null(strstr(ok->last_head, "my-key-1"));
    assert_non_null(strstr(dies->last_head, "my-key-1"));
    jrpc_buf_dispose(&reply);
    jrpc_client_destroy(&c);
    server_stop(&dies);
    server_stop(&ok);
}

static void test_refused_goes_to_the_next(void **state)
{
    (void)state;
    int port;
    int lfd = bind_loopback(0, &port);   /* bound, never listening: refused */
    server_t *ok = server_start(true);
    char url[128];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d,http://127.0.0.1:%d", port, ok->port);
    jrpc_client_t *c = jrpc_client_new(url, NULL);
    assert_non_null(c);
    jrpc_buf_t reply;
    jrpc_buf_init(&reply);
    int64_t t0 = now_ms();
    assert_int_equal(send_req(c, NULL, &reply), 0);   /* no key needed: it never ran */
    assert_true(now_ms() - t0 < 2500);                 /* one connect try, not the deadline */
    assert_int_equal(atomic_load(&ok->requests), 1);
    jrpc_client_destroy(&c);
    /* None reachable: the last broker's code, "not sent". */
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d,http://127.0.0.1:%d", port, port);
    c = jrpc_client_new(url, NULL);
    assert_int_equal(send_req(c, NULL, &reply), -ECONNREFUSED);
    assert_non_null(strstr(jrpc_client_last_error(c), "not sent"));
    jrpc_buf_dispose(&reply);
    jrpc_client_destroy(&c);
    close(lfd);
    server_stop(&ok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_new_with_a_list),
        cmocka_unit_test(test_dns_name),
        cmocka_unit_test(test_order),
        cmocka_unit_test(test_decide),
        cmocka_unit_test(test_lost_without_key_may_have_run),
        cmocka_unit_test(test_retry_safe_resends_with_the_same_key),
        cmocka_unit_test(test_refused_goes_to_the_next),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
