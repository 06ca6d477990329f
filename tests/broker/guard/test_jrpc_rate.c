/* Unit tests of GCRA and the local budget (broker/guard/jrpc_rate.c): exact
 * admissions at a steady rate, the burst, no double burst across any
 * "window edge", a batch over the burst refused whole, costs, and the
 * local budget's share and cells. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "jrpc_rate.h"

#define S(x) ((jrpc_span_t){ (x), sizeof(x) - 1 })

/* 1000 calls/s, burst 10: 10 at once, then one per millisecond. */
static void test_gcra_rate_and_burst(void **state)
{
    (void)state;
    jrpc_rate_limit_t lim = { .rate = 1000, .burst = 10 };
    int64_t tat = 0, now = 5000000;
    for (int i = 0; i < 10; i++)
        assert_int_equal(jrpc_rate_gcra(&tat, now, lim, 1), 0);
    uint64_t wait = jrpc_rate_gcra(&tat, now, lim, 1);
    assert_int_equal(wait, 1000);                        /* the next in 1 ms */
    assert_int_equal(jrpc_rate_gcra(&tat, now + 999, lim, 1), 1);
    assert_int_equal(jrpc_rate_gcra(&tat, now + 1000, lim, 1), 0);
    /* steady: over 10 s, one call every 100 us is tried; ~1 in 10 passes */
    unsigned ok = 0;
    for (int64_t t = now + 1000; t < now + 1000 + 10000000; t += 100)
        ok += jrpc_rate_gcra(&tat, t, lim, 1) == 0;
    assert_true(ok >= 10000 - 1 && ok <= 10000 + 10);
}

/* A fixed window's flaw: a full burst just before an edge and another just
 * after. GCRA: after a burst at t, the next burst needs burst × T. */
static void test_gcra_no_double_burst(void **state)
{
    (void)state;
    jrpc_rate_limit_t lim = { .rate = 100, .burst = 100 };
    int64_t tat = 0, t = 999999;
    assert_int_equal(jrpc_rate_gcra(&tat, t, lim, 100), 0);
    assert_true(jrpc_rate_gcra(&tat, t + 2, lim, 100) > 0);      /* not across the "edge" */
    assert_true(jrpc_rate_gcra(&tat, t + 500000, lim, 100) > 0); /* half way: 50 fit, not 100 */
    assert_int_equal(jrpc_rate_gcra(&tat, t + 500000, lim, 50), 0);
}

/* A batch is counted by its calls, and one over the burst never passes. */
static void test_gcra_cost(void **state)
{
    (void)state;
    jrpc_rate_limit_t lim = { .rate = 1000, .burst = 100 };
    int64_t tat = 0;
    assert_int_equal(jrpc_rate_gcra(&tat, 0, lim, 101), UINT64_MAX);
    assert_int_equal(tat, 0);                                   /* a refusal costs nothing */
    assert_int_equal(jrpc_rate_gcra(&tat, 0, lim, 100), 0);
    assert_int_equal(jrpc_rate_gcra(&tat, 0, lim, 1), 1000);
    assert_int_equal(jrpc_rate_gcra(&tat, 50000, lim, 50), 0);  /* 50 ms: 50 calls back */
    assert_int_equal(jrpc_rate_gcra(&tat, 50000, lim, 1), 1000);
    /* no limit */
    assert_int_equal(jrpc_rate_gcra(&tat, 0, (jrpc_rate_limit_t){ 0, 1 }, 1000000), 0);
}

/* The local budget: share_pct of the rate and burst, per cell. */
static void test_local_budget(void **state)
{
    (void)state;
    jrpc_rate_local_t l;
    assert_int_equal(jrpc_rate_local_init(&l, 10), 0);
    jrpc_rate_limit_t lim = { .rate = 1000, .burst = 100 };
    /* 10 % of it: 100/s with a burst of 10 */
    unsigned ok = 0;
    for (int i = 0; i < 100; i++)
        ok += jrpc_rate_local(&l, S("alice"), 0, lim, 1) == 0;
    assert_int_equal(ok, 10);
    assert_int_equal(jrpc_rate_local(&l, S("alice"), 0, lim, 1), 10000);   /* 10 ms */
    /* another identity has its own cell */
    assert_int_equal(jrpc_rate_local(&l, S("bob"), 0, lim, 1), 0);
    /* a batch within the full burst is not refused for its size alone */
    assert_int_equal(jrpc_rate_local(&l, S("carol"), 0, lim, 50), 0);
    assert_true(jrpc_rate_local(&l, S("carol"), 0, lim, 1) > 0);
    assert_int_equal(jrpc_rate_local(&l, S("carol"), 0, lim, 101), UINT64_MAX);
    /* never open: even a 1 % share of 1/s admits something, and limits */
    jrpc_rate_local_dispose(&l);
    assert_int_equal(jrpc_rate_local_init(&l, 0), 0);
    assert_int_equal(l.share_pct, 1);
    lim = (jrpc_rate_limit_t){ .rate = 1, .burst = 1 };
    assert_int_equal(jrpc_rate_local(&l, S("x"), 0, lim, 1), 0);
    assert_int_equal(jrpc_rate_local(&l, S("x"), 0, lim, 1), 1000000);
    jrpc_rate_local_dispose(&l);
}

/* jrpc_rate_who_addr (issue 36): ports dropped, IPv6 grouped by /64 (one
 * host commonly holds a whole /64), mapped IPv4 as IPv4, the rest as text. */
static void test_who_addr(void **state)
{
    (void)state;
    static const struct { const char *peer, *want; } cases[] = {
        { "127.0.0.1:5555", "addr:127.0.0.1" },
        { "203.0.113.7", "addr:203.0.113.7" },
        { "[::1]:8080", "addr:::/64" },
        { "::1", "addr:::/64" },
        { "[2001:db8:1:2:aaaa:bbbb:cccc:dddd]:443", "addr:2001:db8:1:2::/64" },
        { "2001:db8:1:2::17", "addr:2001:db8:1:2::/64" },
        { "2001:db8:1:3::17", "addr:2001:db8:1:3::/64" },
        { "[::ffff:192.0.2.1]:80", "addr:192.0.2.1" },
        { "::ffff:192.0.2.1", "addr:192.0.2.1" },
        { "", "addr:unknown" },
        { "not-an-address", "addr:not-an-address" },
        { "[2001:db8::1", "addr:2001:db8::/64" },   /* no ']': the rest, parsed */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char out[72];
        size_t n = jrpc_rate_who_addr(out, sizeof out, (jrpc_span_t){ cases[i].peer,
                                                                      strlen(cases[i].peer) });
        if (strcmp(out, cases[i].want) != 0 || n != strlen(out))
            fail_msg("'%s': '%s', want '%s'", cases[i].peer, out, cases[i].want);
    }
    char small[8];
    assert_int_equal(jrpc_rate_who_addr(small, sizeof small, S("203.0.113.7")), 7);
    assert_string_equal(small, "addr:20");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gcra_rate_and_burst),
        cmocka_unit_test(test_who_addr),
        cmocka_unit_test(test_gcra_no_double_burst),
        cmocka_unit_test(test_gcra_cost),
        cmocka_unit_test(test_local_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
