/* Unit tests of jrpc_proxy (--trusted-proxy, issue 36): the CIDR parser and
 * matcher, and the client picked from Forwarded / X-Forwarded-For chains —
 * IPv4 and IPv6, ports and brackets, garbage, cut values, spoofed left-most
 * entries, and the two headers disagreeing. Inputs are copied to the end
 * of a buffer so that an over-read trips the sanitizer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "jrpc_proxy.h"

/* s copied to the end of a heap block of exactly its length. */
static char *tail_copy(const char *s)
{
    size_t n = strlen(s);
    char *p = malloc(n ? n : 1);
    assert_non_null(p);
    memcpy(p, s, n);
    return p;
}

static int cidr(const char *s, jrpc_proxy_cidr_t *c)
{
    char *p = tail_copy(s);
    int rc = jrpc_proxy_cidr_parse(p, strlen(s), c);
    free(p);
    return rc;
}

static jrpc_proxy_addr_t addr(const char *s)
{
    jrpc_proxy_addr_t a;
    assert_int_equal(jrpc_proxy_addr_parse(s, strlen(s), &a), 0);
    return a;
}

static void test_cidr_parse(void **state)
{
    (void)state;
    static const struct { const char *in; int rc; const char *net; unsigned bits; } cases[] = {
        { "127.0.0.1/32", 0, "127.0.0.1", 32 },
        { "127.0.0.1", 0, "127.0.0.1", 32 },
        { "10.0.0.0/8", 0, "10.0.0.0", 8 },
        { "10.1.2.3/8", 0, "10.0.0.0", 8 },      /* host bits cleared */
        { "0.0.0.0/0", 0, "0.0.0.0", 0 },
        { "192.168.1.129/25", 0, "192.168.1.128", 25 },
        { "2001:db8::/32", 0, "2001:db8::", 32 },
        { "2001:db8:1:2:3:4:5:6/64", 0, "2001:db8:1:2::", 64 },
        { "::1", 0, "::1", 128 },
        { "::/0", 0, "::", 0 },
        { "fd00::1/7", 0, "fc00::", 7 },
        { "::ffff:10.0.0.0/104", 0, "10.0.0.0", 8 },   /* mapped: an IPv4 range */
        { "::ffff:10.0.0.1", 0, "10.0.0.1", 32 },
        { "10.0.0.0/33", -22, NULL, 0 },
        { "2001:db8::/129", -22, NULL, 0 },
        { "10.0.0.0/", -22, NULL, 0 },
        { "10.0.0.0/08", -22, NULL, 0 },
        { "10.0.0.0/-1", -22, NULL, 0 },
        { "10.0.0.0/8/8", -22, NULL, 0 },
        { "10.0.0.0/ 8", -22, NULL, 0 },
        { "10.0.0/8", -22, NULL, 0 },
        { "10.0.0.256/32", -22, NULL, 0 },
        { "010.0.0.1", -22, NULL, 0 },
        { "localhost", -22, NULL, 0 },
        { "", -22, NULL, 0 },
        { "/8", -22, NULL, 0 },
        { "fe80::1%eth0/64", -22, NULL, 0 },
        { "[::1]/128", -22, NULL, 0 },
        { "::ffff:10.0.0.0/95", -22, NULL, 0 },
        { "1.2.3.4/1000", -22, NULL, 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        jrpc_proxy_cidr_t c;
        int rc = cidr(cases[i].in, &c);
        if (rc != cases[i].rc)
            fail_msg("'%s': rc %d, want %d", cases[i].in, rc, cases[i].rc);
        if (rc < 0)
            continue;
        char text[JRPC_PROXY_ADDR_TEXT];
        assert_true(jrpc_proxy_addr_format(&c.net, text, sizeof text) > 0);
        if (strcmp(text, cases[i].net) != 0 || c.bits != cases[i].bits)
            fail_msg("'%s': %s/%u, want %s/%u", cases[i].in, text, c.bits, cases[i].net,
                     cases[i].bits);
    }
}

static void test_cidr_match(void **state)
{
    (void)state;
    jrpc_proxy_cidr_t list[4];
    assert_int_equal(cidr("10.0.0.0/8", &list[0]), 0);
    assert_int_equal(cidr("192.168.1.128/25", &list[1]), 0);
    assert_int_equal(cidr("2001:db8:aa::/48", &list[2]), 0);
    assert_int_equal(cidr("::1", &list[3]), 0);
    static const struct { const char *a; bool in; } cases[] = {
        { "10.0.0.1", true }, { "10.255.255.255", true }, { "11.0.0.0", false },
        { "9.255.255.255", false }, { "192.168.1.128", true }, { "192.168.1.255", true },
        { "192.168.1.127", false }, { "2001:db8:aa::1", true }, { "2001:db8:aa:ffff::1", true },
        { "2001:db8:ab::1", false }, { "::1", true }, { "::2", false },
        { "::ffff:10.1.2.3", true },   /* a mapped peer (a dual-stack listener) */
        { "::a00:1", false },          /* ::10.0.0.1 (compatible, not mapped): IPv6 */
        { "127.0.0.1", false },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        jrpc_proxy_addr_t a = addr(cases[i].a);
        if (jrpc_proxy_trusted(list, 4, &a) != cases[i].in)
            fail_msg("%s: want %s", cases[i].a, cases[i].in ? "trusted" : "not trusted");
    }
    jrpc_proxy_cidr_t all;
    assert_int_equal(cidr("0.0.0.0/0", &all), 0);
    jrpc_proxy_addr_t v6 = addr("2001:db8::1"), v4 = addr("203.0.113.9");
    assert_false(jrpc_proxy_trusted(&all, 1, &v6));   /* no family crosses */
    assert_true(jrpc_proxy_trusted(&all, 1, &v4));
    assert_false(jrpc_proxy_trusted(NULL, 0, &v4));
}

/* The trusted proxies of the chain cases: 10.0.0.0/8 and 2001:db8:ffff::/48. */
static jrpc_proxy_cidr_t trusted[2];

/* A kept header value as the reader gives it: s (NULL: absent) copied at
 * copy, a trailing '~' marking a cut one. */
static jrpc_http_value_t value_of(const char *s, const char *copy)
{
    if (s == NULL)
        return (jrpc_http_value_t){ NULL, 0, 0, false };
    size_t n = strlen(s);
    bool cut = n && s[n - 1] == '~';
    return (jrpc_http_value_t){ copy, (uint16_t)(n - cut), 1, cut };
}

/* The client picked from Forwarded fwd and X-Forwarded-For xff (NULL:
 * absent; a trailing '~' marks a cut value) as "1 ADDR", "0", or "-22". */
static const char *pick(const char *fwd, const char *xff)
{
    static char out[96];
    char *fp = fwd ? tail_copy(fwd) : NULL, *xp = xff ? tail_copy(xff) : NULL;
    jrpc_http_value_t f = value_of(fwd, fp), x = value_of(xff, xp);
    jrpc_proxy_addr_t a;
    const char *why = NULL;
    int rc = jrpc_proxy_client(trusted, 2, f, x, &a, &why);
    if (rc == 1) {
        char text[JRPC_PROXY_ADDR_TEXT];
        assert_true(jrpc_proxy_addr_format(&a, text, sizeof text) > 0);
        snprintf(out, sizeof out, "1 %s", text);
    } else {
        snprintf(out, sizeof out, "%d", rc);
        if (rc < 0)
            assert_true(why != NULL && why[0] != '\0');
    }
    free(fp);
    free(xp);
    return out;
}

static void test_chain_pick(void **state)
{
    (void)state;
    assert_int_equal(cidr("10.0.0.0/8", &trusted[0]), 0);
    assert_int_equal(cidr("2001:db8:ffff::/48", &trusted[1]), 0);
    static const struct { const char *fwd, *xff, *want; } cases[] = {
        /* neither header: the peer */
        { NULL, NULL, "0" },
        /* X-Forwarded-For */
        { NULL, "203.0.113.7", "1 203.0.113.7" },
        { NULL, "203.0.113.7, 10.0.0.2", "1 203.0.113.7" },         /* a second proxy */
        { NULL, "203.0.113.7,10.0.0.2 ,\t10.9.9.9", "1 203.0.113.7" },
        { NULL, "6.6.6.6, 203.0.113.7", "1 203.0.113.7" },          /* spoofed left-most */
        { NULL, "10.0.0.5, 203.0.113.7", "1 203.0.113.7" },         /* a spoofed "proxy" */
        { NULL, "garbage, 203.0.113.7", "1 203.0.113.7" },          /* left of the pick: unread */
        { NULL, "<script>, 1.1.1.1, 203.0.113.7, 10.0.0.1", "1 203.0.113.7" },
        { NULL, "10.0.0.3, 10.0.0.2", "1 10.0.0.3" },                /* proxies only: left-most */
        { NULL, "203.0.113.7:4711", "1 203.0.113.7" },
        { NULL, "2001:db8::17", "1 2001:db8::17" },
        { NULL, "[2001:db8::17]", "1 2001:db8::17" },
        { NULL, "[2001:db8::17]:4711, 2001:db8:ffff::1", "1 2001:db8::17" },
        { NULL, "::ffff:203.0.113.7", "1 203.0.113.7" },
        { NULL, "203.0.113.7,, 10.0.0.2", "1 203.0.113.7" },        /* empty elements: nothing */
        { NULL, "203.0.113.7, garbage", "-22" },                     /* the pick is junk */
        { NULL, "unknown", "-22" },
        { NULL, "", "-22" },
        { NULL, " , ", "-22" },
        { NULL, "203.0.113.7 10.0.0.2", "-22" },
        { NULL, "203.0.113.7:", "-22" },
        { NULL, "203.0.113.7:123456", "-22" },
        { NULL, "203.0.113.7:12a", "-22" },
        { NULL, "[203.0.113.7]", "-22" },
        { NULL, "[2001:db8::17", "-22" },
        { NULL, "[2001:db8::17]x", "-22" },
        { NULL, "[2001:db8::17]:", "-22" },
        { NULL, "fe80::1%eth0", "-22" },
        { NULL, "2001:db8::17:80:1:2:3:4:5", "-22" },
        { NULL, "203.0.113.7, 10.0.0.2~", "-22" },                   /* cut: not trusted */
        { NULL, "\"203.0.113.7", "-22" },
        /* Forwarded */
        { "for=203.0.113.7", NULL, "1 203.0.113.7" },
        { "for=203.0.113.7;proto=https;by=10.0.0.1", NULL, "1 203.0.113.7" },
        { "For=\"203.0.113.7:80\"", NULL, "1 203.0.113.7" },
        { "for=\"[2001:db8::17]:4711\"", NULL, "1 2001:db8::17" },
        { "for=\"[2001:db8::17]\", for=10.0.0.2", NULL, "1 2001:db8::17" },
        { "for=6.6.6.6, for=203.0.113.7;by=x, for=10.0.0.2", NULL, "1 203.0.113.7" },
        { "for=\"_hidden\", for=203.0.113.7", NULL, "1 203.0.113.7" },
        { "for=\"a,b\";by=c, for=203.0.113.7", NULL, "1 203.0.113.7" },   /* a comma in quotes */
        { "for=203.0.113.7, for=unknown", NULL, "-22" },
        { "for=203.0.113.7, for=_hidden", NULL, "-22" },
        { "for=203.0.113.7, proto=https", NULL, "-22" },             /* an element without for= */
        { "for=203.0.113.7;for=1.1.1.1", NULL, "-22" },
        { "for", NULL, "-22" },
        { "=203.0.113.7", NULL, "-22" },
        { "for=\"203.0.113.7", NULL, "-22" },
        { "for=\"203.0.113.7\\\"\"", NULL, "-22" },
        { "for=203.0\"113.7", NULL, "-22" },
        { "for=2001:db8::17", NULL, "1 2001:db8::17" },             /* unquoted: taken anyway */
        { "for=10.0.0.9, for=10.0.0.2", NULL, "1 10.0.0.9" },
        { "for=203.0.113.7~", NULL, "-22" },
        /* both: they must agree */
        { "for=203.0.113.7", "203.0.113.7", "1 203.0.113.7" },
        { "for=203.0.113.7, for=10.0.0.2", "6.6.6.6, 203.0.113.7", "1 203.0.113.7" },
        { "for=6.6.6.6", "203.0.113.7", "-22" },                     /* one came from the client */
        { "for=203.0.113.7", "garbage", "-22" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *got = pick(cases[i].fwd, cases[i].xff);
        if (strcmp(got, cases[i].want) != 0)
            fail_msg("Forwarded '%s', X-Forwarded-For '%s': %s, want %s",
                     cases[i].fwd ? cases[i].fwd : "(none)", cases[i].xff ? cases[i].xff : "(none)",
                     got, cases[i].want);
    }
}

/* A chain of 160 and more elements (the reader's room holds 256 bytes, but
 * the picker must not trust its caller for that). */
static void test_chain_long(void **state)
{
    (void)state;
    assert_int_equal(cidr("10.0.0.0/8", &trusted[0]), 0);
    assert_int_equal(cidr("2001:db8:ffff::/48", &trusted[1]), 0);
    char buf[4096] = "";
    for (int i = 0; i < 200; i++)
        strcat(buf, "1,");
    strcat(buf, "203.0.113.7");
    assert_string_equal(pick(NULL, buf), "-22");   /* too many elements: not guessed */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cidr_parse),
        cmocka_unit_test(test_cidr_match),
        cmocka_unit_test(test_chain_pick),
        cmocka_unit_test(test_chain_long),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
