/* Tests of jrpc_timing: the Server-Timing value the broker writes (phase
 * order, ms with three decimals, phases that did not happen left out) and
 * the reader clients use (W3C syntax, unknown metrics and params skipped,
 * never a read past the value: each input sits at the end of a heap block
 * of its exact length). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "jrpc_timing.h"

static int parse(const char *s, jrpc_timing_t *t)
{
    size_t n = strlen(s);
    char *p = malloc(n ? n : 1);
    assert_non_null(p);
    memcpy(p, s, n);
    int rc = jrpc_timing_parse(p, n, t);
    free(p);
    return rc;
}

static void test_format_order_and_digits(void **state)
{
    (void)state;
    jrpc_timing_t t = { { 0 }, 0 };
    char out[JRPC_TIMING_MAX];
    assert_int_equal(jrpc_timing_format(&t, out), 0);
    assert_string_equal(out, "");
    t.ns[JRPC_TIMING_TOTAL] = 51234567;     /* 51.234567 ms -> 51.235 */
    t.ns[JRPC_TIMING_PARSE] = 12499;        /* 12.499 µs -> 0.012 */
    t.ns[JRPC_TIMING_WORKER] = 200000000;   /* exactly 200 ms */
    t.ns[JRPC_TIMING_REDIS] = 999;          /* not happened: left out */
    t.has = 1u << JRPC_TIMING_TOTAL | 1u << JRPC_TIMING_PARSE | 1u << JRPC_TIMING_WORKER;
    size_t n = jrpc_timing_format(&t, out);
    assert_string_equal(out, "parse;dur=0.012, worker;dur=200.000, total;dur=51.235");
    assert_int_equal(n, strlen(out));
}

static void test_format_all_at_the_bound(void **state)
{
    (void)state;
    jrpc_timing_t t;
    char out[JRPC_TIMING_MAX];
    for (int i = 0; i < JRPC_TIMING_PHASES; i++)
        t.ns[i] = UINT64_MAX;
    t.has = (1u << JRPC_TIMING_PHASES) - 1;
    size_t n = jrpc_timing_format(&t, out);
    assert_true(n < JRPC_TIMING_MAX);
    assert_non_null(strstr(out, "parse;dur=1000000000000.000, auth;"));
    assert_non_null(strstr(out, "gather;dur=1000000000000.000, total;dur=1000000000000.000"));
    /* every width around the fast path's bound (10 s) */
    static const struct { uint64_t ns; const char *s; } w[] = {
        { 999999, "total;dur=1.000" },        { 9999499, "total;dur=9.999" },
        { 10000000, "total;dur=10.000" },     { 99999000, "total;dur=99.999" },
        { 100000000, "total;dur=100.000" },   { 1234567890, "total;dur=1234.568" },
        { 9999999499, "total;dur=9999.999" }, { 9999999500, "total;dur=10000.000" },
        { 12345678901234, "total;dur=12345678.901" },
    };
    for (size_t k = 0; k < sizeof w / sizeof *w; k++) {
        t.ns[JRPC_TIMING_TOTAL] = w[k].ns;
        t.has = 1u << JRPC_TIMING_TOTAL;
        jrpc_timing_format(&t, out);
        assert_string_equal(out, w[k].s);
    }
    t.ns[JRPC_TIMING_PARSE] = 499;   /* rounds to 0 */
    t.has = 1u << JRPC_TIMING_PARSE;
    jrpc_timing_format(&t, out);
    assert_string_equal(out, "parse;dur=0.000");
}

/* The edges of put_ms: nothing, half a µs (rounded up), just under and
 * at the 32-bit path's bound (9.9995 ms), 999.9995 ms, the largest value
 * written; each one alone and as a later phase (after ", "). */
static void test_format_edges(void **state)
{
    (void)state;
    static const struct { uint64_t ns; const char *s; } e[] = {
        { 0, "0.000" },                   { 499, "0.000" },
        { 500, "0.001" },                 { 1499, "0.001" },
        { 1500, "0.002" },                { 99499, "0.099" },
        { 99500, "0.100" },               { 999499, "0.999" },
        { 999500, "1.000" },              { 9999499, "9.999" },
        { 9999500, "10.000" },            { 10000000, "10.000" },
        { 999999499, "999.999" },         { 999999500, "1000.000" },
        { 4294967295u, "4294.967" },      { 4294967296u, "4294.967" },
        { 999999999999999499ull, "999999999999.999" },
        { 999999999999999500ull, "1000000000000.000" },
        { UINT64_MAX, "1000000000000.000" },
    };
    char out[JRPC_TIMING_MAX], want[JRPC_TIMING_MAX];
    for (size_t k = 0; k < sizeof e / sizeof *e; k++) {
        jrpc_timing_t t = { { 0 }, 1u << JRPC_TIMING_QUEUE };
        t.ns[JRPC_TIMING_QUEUE] = e[k].ns;
        snprintf(want, sizeof want, "queue;dur=%s", e[k].s);
        assert_int_equal(jrpc_timing_format(&t, out), strlen(want));
        assert_string_equal(out, want);
        t.has |= 1u << JRPC_TIMING_PARSE | 1u << JRPC_TIMING_TOTAL;
        t.ns[JRPC_TIMING_PARSE] = e[k].ns;
        t.ns[JRPC_TIMING_TOTAL] = 7000;
        snprintf(want, sizeof want, "parse;dur=%s, queue;dur=%s, total;dur=0.007", e[k].s, e[k].s);
        assert_int_equal(jrpc_timing_format(&t, out), strlen(want));
        assert_string_equal(out, want);
    }
}

static void test_round_trip(void **state)
{
    (void)state;
    jrpc_timing_t t = { { 0 }, 0 }, back;
    char out[JRPC_TIMING_MAX];
    for (int i = 0; i < JRPC_TIMING_PHASES; i++) {
        t.ns[i] = (uint64_t)(i + 1) * 1234000;   /* whole µs survive */
        t.has |= 1u << i;
    }
    jrpc_timing_format(&t, out);
    assert_int_equal(parse(out, &back), JRPC_TIMING_PHASES);
    assert_int_equal(back.has, t.has);
    for (int i = 0; i < JRPC_TIMING_PHASES; i++)
        assert_int_equal(back.ns[i], t.ns[i]);
}

static void test_parse_w3c_forms(void **state)
{
    (void)state;
    jrpc_timing_t t;
    /* other metrics, desc strings with commas and semicolons, no dur,
     * spaces and tabs, empty elements, an integer dur */
    assert_int_equal(parse(" cache;desc=\"a, b; c\";dur=3 ,, queue ; desc=x ; dur = 7 ,"
                           "worker;dur=0.5\t, miss, total;dur=12", &t), 3);
    assert_int_equal(t.ns[JRPC_TIMING_QUEUE], 7000000);
    assert_int_equal(t.ns[JRPC_TIMING_WORKER], 500000);
    assert_int_equal(t.ns[JRPC_TIMING_TOTAL], 12000000);
    assert_int_equal(t.has, 1u << JRPC_TIMING_QUEUE | 1u << JRPC_TIMING_WORKER |
                                1u << JRPC_TIMING_TOTAL);
    /* the first of two wins; a name only known by prefix is not ours */
    assert_int_equal(parse("total;dur=1, total;dur=2, totals;dur=3, parse;flag;dur=4", &t), 2);
    assert_int_equal(t.ns[JRPC_TIMING_TOTAL], 1000000);
    assert_int_equal(t.ns[JRPC_TIMING_PARSE], 4000000);
    /* a dur that is no number is skipped, not an error */
    assert_int_equal(parse("total;dur=abc, auth;dur=1.", &t), 0);
    assert_int_equal(parse("", &t), 0);
}

static void test_parse_malformed(void **state)
{
    (void)state;
    jrpc_timing_t t;
    static const char *const bad[] = {
        ";dur=1", "total;", "total;=1", "total;dur=", "total;desc=\"open", "total dur=1",
        "total;dur=1 x", "to{tal;dur=1", "total;desc=\"a\\",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        print_message("%s\n", bad[i]);
        assert_int_equal(parse(bad[i], &t), -EINVAL);
    }
    /* every prefix of a good value parses or fails cleanly (ASan: no over-read) */
    const char *good = "parse;dur=0.012, redis;desc=\"r\";dur=1.5, total;dur=2.000";
    for (size_t k = 0; k <= strlen(good); k++) {
        char *p = malloc(k ? k : 1);
        assert_non_null(p);
        memcpy(p, good, k);
        int rc = jrpc_timing_parse(p, k, &t);
        assert_true(rc >= -EINVAL && rc <= 3);
        free(p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_order_and_digits),
        cmocka_unit_test(test_format_all_at_the_bound),
        cmocka_unit_test(test_format_edges),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_parse_w3c_forms),
        cmocka_unit_test(test_parse_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
