/* Unit tests of jrpc_dns (io/jrpc_dns.c): dns+tcp:// URLs, good and
 * bad (each bad one also at the very end of a heap buffer, so that a read
 * past its NUL trips the sanitizer), getaddrinfo answers built by hand
 * (mixed families, duplicates, more addresses than kept), and the set
 * difference the worker acts on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jrpc_dns.h"

/* Parses a copy of url placed at the end of its own allocation. */
static int parse_tight(const char *url, jrpc_dns_name_t *out)
{
    size_t n = strlen(url) + 1;
    char *p = malloc(n);
    assert_non_null(p);
    memcpy(p, url, n);
    int rc = jrpc_dns_parse(p, out);
    free(p);
    return rc;
}

static void test_parse_good(void **state)
{
    (void)state;
    jrpc_dns_name_t n;
    assert_int_equal(parse_tight("dns+tcp://brokers:5556", &n), 0);
    assert_string_equal(n.host, "brokers");
    assert_int_equal(n.port, 5556);
    assert_int_equal(parse_tight("dns+tcp://jrpc-broker-workers.jrpc.svc.cluster.local.:1", &n), 0);
    assert_string_equal(n.host, "jrpc-broker-workers.jrpc.svc.cluster.local.");
    assert_int_equal(n.port, 1);
    assert_int_equal(parse_tight("dns+tcp://_x.B-2:65535", &n), 0);
    assert_int_equal(n.port, 65535);
    /* A numeric address is a name too: getaddrinfo returns it as is. */
    assert_int_equal(parse_tight("dns+tcp://10.1.2.3:5556", &n), 0);
    assert_string_equal(n.host, "10.1.2.3");

    /* 253 bytes in labels of 63: the longest name. */
    char url[300], label[64];
    memset(label, 'a', 63);
    label[63] = '\0';
    snprintf(url, sizeof url, "dns+tcp://%s.%s.%s.%.61s:80", label, label, label, label);
    assert_int_equal(parse_tight(url, &n), 0);
    assert_int_equal(strlen(n.host), 253);
}

static void test_parse_bad(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "", "dns+tcp://", "dns+tcp://:5556", "dns+tcp://name", "dns+tcp://name:",
        "dns+tcp://name:0", "dns+tcp://name:05556", "dns+tcp://name:65536", "dns+tcp://name:+1",
        "dns+tcp://name:-1", "dns+tcp://name:55x", "dns+tcp://name:99999999999999999999",
        "dns+udp://name:53", "tcp://name:5556", "DNS+TCP://name:5556", "dns+tcp:/name:5556",
        "dns+tcp://na me:5556", "dns+tcp://name/x:5556", "dns+tcp://.name:5556",
        "dns+tcp://a..b:5556", "dns+tcp://[::1]:5556", "dns+tcp://::1:5556", "dns+tcp://.:5556",
        "dns+tcp://user@name:5556", "dns+tcp://n\xc3\xa4me:5556", "dns+tcp://name:5556/",
    };
    jrpc_dns_name_t n;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (parse_tight(bad[i], &n) != -EINVAL)
            fail_msg("accepted '%s'", bad[i]);
    }
    /* A label of 64, a name of 254. */
    char url[300], label[65];
    memset(label, 'a', 64);
    label[64] = '\0';
    snprintf(url, sizeof url, "dns+tcp://%s:80", label);
    assert_int_equal(parse_tight(url, &n), -EINVAL);
    snprintf(url, sizeof url, "dns+tcp://%.63s.%.63s.%.63s.%.62s:80", label, label, label, label);
    assert_int_equal(parse_tight(url, &n), -EINVAL);
}

static void test_is_name(void **state)
{
    (void)state;
    assert_true(jrpc_dns_is_name("dns+tcp://a:1"));
    assert_true(jrpc_dns_is_name("dns+udp://a:1")); /* ours to refuse, not ZeroMQ's */
    assert_false(jrpc_dns_is_name("tcp://a:1"));
    assert_false(jrpc_dns_is_name("dns"));
    assert_false(jrpc_dns_is_name(""));
}

/* ---- answers built by hand ---- */

typedef struct {
    struct addrinfo     ai[80];
    struct sockaddr_in6 sa[80]; /* large enough for either family */
    int                 n;
} answer_t;

static void add(answer_t *a, const char *text)
{
    struct addrinfo *ai = &a->ai[a->n];
    memset(ai, 0, sizeof *ai);
    memset(&a->sa[a->n], 0, sizeof a->sa[a->n]);
    ai->ai_addr = (struct sockaddr *)&a->sa[a->n];
    if (strchr(text, ':')) {
        struct sockaddr_in6 *s6 = &a->sa[a->n];
        s6->sin6_family = AF_INET6;
        assert_int_equal(inet_pton(AF_INET6, text, &s6->sin6_addr), 1);
        ai->ai_family = AF_INET6;
        ai->ai_addrlen = sizeof *s6;
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&a->sa[a->n];
        s4->sin_family = AF_INET;
        assert_int_equal(inet_pton(AF_INET, text, &s4->sin_addr), 1);
        ai->ai_family = AF_INET;
        ai->ai_addrlen = sizeof *s4;
    }
    if (a->n > 0)
        a->ai[a->n - 1].ai_next = ai;
    a->n++;
}

static void test_endpoint(void **state)
{
    (void)state;
    answer_t a = { .n = 0 };
    add(&a, "10.0.0.1");
    add(&a, "fd00::1:2");
    char ep[JRPC_DNS_EP_MAX];
    assert_int_equal(jrpc_dns_endpoint(&a.ai[0], 5556, ep), 0);
    assert_string_equal(ep, "tcp://10.0.0.1:5556");
    assert_int_equal(jrpc_dns_endpoint(&a.ai[1], 65535, ep), 0);
    assert_string_equal(ep, "tcp://[fd00::1:2]:65535");
    /* The longest IPv6 text fits. */
    answer_t b = { .n = 0 };
    add(&b, "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255");
    assert_int_equal(jrpc_dns_endpoint(&b.ai[0], 65535, ep), 0);
    assert_string_equal(ep, "tcp://[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535");
    /* Another family, or a short address, is skipped. */
    a.ai[0].ai_family = AF_UNIX;
    assert_int_equal(jrpc_dns_endpoint(&a.ai[0], 1, ep), -EAFNOSUPPORT);
    a.ai[1].ai_addrlen = 4;
    assert_int_equal(jrpc_dns_endpoint(&a.ai[1], 1, ep), -EAFNOSUPPORT);
}

static void test_endpoints_sorted_unique(void **state)
{
    (void)state;
    answer_t a = { .n = 0 };
    add(&a, "10.0.0.3");
    add(&a, "::1");
    add(&a, "10.0.0.1");
    add(&a, "10.0.0.3"); /* the same address twice (A records, or one per protocol) */
    add(&a, "10.0.0.2");
    char out[8][JRPC_DNS_EP_MAX];
    bool cut = true;
    size_t n = jrpc_dns_endpoints(&a.ai[0], 5556, out, 8, &cut);
    assert_int_equal(n, 4);
    assert_false(cut);
    assert_string_equal(out[0], "tcp://10.0.0.1:5556");
    assert_string_equal(out[1], "tcp://10.0.0.2:5556");
    assert_string_equal(out[2], "tcp://10.0.0.3:5556");
    assert_string_equal(out[3], "tcp://[::1]:5556");
    assert_int_equal(jrpc_dns_endpoints(NULL, 5556, out, 8, &cut), 0);
    assert_false(cut);
}

/* More addresses than kept: the smallest max of them, whatever the order. */
static void test_endpoints_truncated(void **state)
{
    (void)state;
    answer_t fwd = { .n = 0 }, rev = { .n = 0 };
    char text[32];
    for (int i = 0; i < 70; i++) {
        snprintf(text, sizeof text, "10.0.1.%d", 100 + i);
        add(&fwd, text);
        snprintf(text, sizeof text, "10.0.1.%d", 169 - i);
        add(&rev, text);
    }
    static char out1[JRPC_DNS_ADDRS_MAX][JRPC_DNS_EP_MAX], out2[JRPC_DNS_ADDRS_MAX][JRPC_DNS_EP_MAX];
    bool cut1 = false, cut2 = false;
    size_t n1 = jrpc_dns_endpoints(&fwd.ai[0], 1, out1, JRPC_DNS_ADDRS_MAX, &cut1);
    size_t n2 = jrpc_dns_endpoints(&rev.ai[0], 1, out2, JRPC_DNS_ADDRS_MAX, &cut2);
    assert_int_equal(n1, JRPC_DNS_ADDRS_MAX);
    assert_int_equal(n2, JRPC_DNS_ADDRS_MAX);
    assert_true(cut1 && cut2);
    assert_memory_equal(out1, out2, sizeof out1);
    assert_string_equal(out1[0], "tcp://10.0.1.100:1");
    assert_string_equal(out1[JRPC_DNS_ADDRS_MAX - 1], "tcp://10.0.1.163:1");
}

static void test_diff(void **state)
{
    (void)state;
    const char *old[] = { "tcp://a:1", "tcp://b:1", "tcp://c:1" };
    const char *cur[] = { "tcp://c:1", "tcp://d:1", "tcp://b:1", "tcp://d:1" };
    bool gone[3], added[4];
    assert_int_equal(jrpc_dns_diff(old, 3, cur, 4, gone, added), 2);
    assert_true(gone[0]);
    assert_false(gone[1]);
    assert_false(gone[2]);
    assert_false(added[0]);
    assert_true(added[1]);
    assert_false(added[2]);
    assert_false(added[3]); /* d once */

    /* The same set in another order: nothing to do. */
    const char *same[] = { "tcp://c:1", "tcp://a:1", "tcp://b:1" };
    bool g3[3], a3[3];
    assert_int_equal(jrpc_dns_diff(old, 3, same, 3, g3, a3), 0);

    /* From nothing (the first answer), and to a disjoint set. */
    bool a4[4];
    assert_int_equal(jrpc_dns_diff(NULL, 0, cur, 4, NULL, a4), 3);
    const char *other[] = { "tcp://x:1" };
    bool g5[3], a5[1];
    assert_int_equal(jrpc_dns_diff(old, 3, other, 1, g5, a5), 4);
    assert_true(g5[0] && g5[1] && g5[2] && a5[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_good),
        cmocka_unit_test(test_parse_bad),
        cmocka_unit_test(test_is_name),
        cmocka_unit_test(test_endpoint),
        cmocka_unit_test(test_endpoints_sorted_unique),
        cmocka_unit_test(test_endpoints_truncated),
        cmocka_unit_test(test_diff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
