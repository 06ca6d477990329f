/* Tests of jrpc_trace: the traceparent check, W3C Trace Context level 1,
 * edge by edge. Every input sits at the end of a heap block of its exact
 * length, so a read past it trips ASan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "jrpc_trace.h"

#define TID "4bf92f3577b34da6a3ce929d0e0e4736"
#define PID "00f067aa0ba902b7"
#define GOOD "00-" TID "-" PID "-01"

static bool check(const char *s)
{
    size_t n = strlen(s);
    char *p = malloc(n ? n : 1);
    assert_non_null(p);
    memcpy(p, s, n);
    bool ok = jrpc_traceparent_valid(p, n);
    free(p);
    return ok;
}

static void test_valid_v00(void **state)
{
    (void)state;
    assert_true(check(GOOD));
    assert_int_equal(strlen(GOOD), JRPC_TRACEPARENT_LEN);
    assert_true(check("00-" TID "-" PID "-00"));
    assert_true(check("00-" TID "-" PID "-ff"));   /* unknown flags are kept */
    assert_true(check("00-00000000000000000000000000000001-0000000000000001-00"));
}

static void test_length(void **state)
{
    (void)state;
    assert_false(check(""));
    assert_false(check("00"));
    assert_false(check("00-" TID "-" PID "-0"));    /* 54 */
    assert_false(check(GOOD "0"));                  /* 56 */
    assert_false(check(GOOD "-"));                  /* v00 has nothing after flags */
    assert_false(check(GOOD "-extra"));
    assert_false(check(" " GOOD));
    assert_false(check(GOOD " "));
    /* the prefix of a good one is checked against its given length */
    assert_false(jrpc_traceparent_valid(GOOD, JRPC_TRACEPARENT_LEN - 1));
    assert_false(jrpc_traceparent_valid(GOOD, 0));
}

static void test_version(void **state)
{
    (void)state;
    assert_false(check("ff-" TID "-" PID "-01"));   /* forbidden version */
    assert_false(check("0g-" TID "-" PID "-01"));
    assert_false(check("0A-" TID "-" PID "-01"));   /* upper case */
    assert_false(check("-0-" TID "-" PID "-01"));
    assert_false(check("000" TID "-" PID "-01"));   /* shifted: no dash at 2 */
}

static void test_ids(void **state)
{
    (void)state;
    assert_false(check("00-00000000000000000000000000000000-" PID "-01")); /* zero trace-id */
    assert_false(check("00-" TID "-0000000000000000-01"));                 /* zero parent-id */
    assert_false(check("00-4BF92F3577B34DA6A3CE929D0E0E4736-" PID "-01")); /* upper case */
    assert_false(check("00-" TID "-00F067AA0BA902B7-01"));
    assert_false(check("00-4bf92f3577b34da6a3ce929d0e0e473g-" PID "-01")); /* non-hex */
    assert_false(check("00-" TID "-00f067aa0ba902bz-01"));
    assert_false(check("00-" TID "-" PID "-0F"));                         /* flags upper */
    assert_false(check("00-" TID "-" PID "-0x"));
    assert_false(check("00_" TID "-" PID "-01"));                         /* separators */
    assert_false(check("00-" TID "_" PID "-01"));
    assert_false(check("00-" TID "-" PID "_01"));
    /* a dash moved by one: the field lengths are fixed */
    assert_false(check("00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01"));
}

static void test_future_versions(void **state)
{
    (void)state;
    assert_true(check("01-" TID "-" PID "-01"));                 /* same shape */
    assert_true(check("cc-" TID "-" PID "-01-what-the-future-holds"));
    assert_false(check("cc-" TID "-" PID "-01.what"));           /* not a dash after flags */
    assert_false(check("cc-" TID "-" PID "-01-"  "with space"));  /* unsafe in a log line */
    assert_false(check("cc-" TID "-" PID "-01-\"q\""));
    assert_false(check("cc-" TID "-" PID "-01-\n"));
    assert_false(check("cc-00000000000000000000000000000000-" PID "-01-x"));
    /* the length bound */
    char big[JRPC_TRACEPARENT_MAX + 2];
    memset(big, 'x', sizeof big);
    memcpy(big, "cc-" TID "-" PID "-01-", 56);
    big[JRPC_TRACEPARENT_MAX] = '\0';
    assert_true(check(big));
    big[JRPC_TRACEPARENT_MAX] = 'x';
    big[JRPC_TRACEPARENT_MAX + 1] = '\0';
    assert_false(check(big));
}

static void test_sampled(void **state)
{
    (void)state;
    assert_true(jrpc_traceparent_sampled(GOOD, JRPC_TRACEPARENT_LEN));
    assert_false(jrpc_traceparent_sampled("00-" TID "-" PID "-00", JRPC_TRACEPARENT_LEN));
    assert_true(jrpc_traceparent_sampled("00-" TID "-" PID "-0b", JRPC_TRACEPARENT_LEN));
    assert_false(jrpc_traceparent_sampled("00-" TID "-" PID "-fe", JRPC_TRACEPARENT_LEN));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_v00),
        cmocka_unit_test(test_length),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_future_versions),
        cmocka_unit_test(test_sampled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
