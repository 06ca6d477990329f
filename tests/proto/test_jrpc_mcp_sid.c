/* Tests of jrpc_mcp_sid: the MCP session id formatted and read back, and
 * every malformed id refused. Inputs sit at the end of a heap block of their
 * exact length, so a read past one trips ASan. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "jrpc_mcp_sid.h"

static int parse(const char *s, jrpc_mcp_sid_t *out)
{
    size_t n = strlen(s);
    char *p = malloc(n ? n : 1);
    assert_non_null(p);
    memcpy(p, s, n);
    int rc = jrpc_mcp_sid_parse(p, n, out);
    free(p);
    return rc;
}

static void test_round_trip(void **state)
{
    (void)state;
    jrpc_mcp_sid_t s = { .instance = 0x3f9a0c41d2e87b65ull, .child = 1 }, t;
    for (unsigned i = 0; i < sizeof s.secret; i++)
        s.secret[i] = (uint8_t)(0xf0 + i);
    char id[JRPC_MCP_SID_LEN + 1];
    jrpc_mcp_sid_format(&s, id);
    assert_string_equal(id, "3f9a0c41d2e87b65-0001-f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff");
    assert_int_equal(strlen(id), JRPC_MCP_SID_LEN);
    assert_int_equal(parse(id, &t), 0);
    assert_true(t.instance == s.instance);
    assert_int_equal(t.child, 1);
    assert_memory_equal(t.secret, s.secret, sizeof s.secret);
    /* the extremes */
    memset(&s, 0xff, sizeof s);
    jrpc_mcp_sid_format(&s, id);
    assert_int_equal(parse(id, &t), 0);
    assert_true(t.instance == UINT64_MAX);
    assert_int_equal(t.child, 0xffff);
    /* every byte visible ASCII (the spec's rule for a session id) */
    for (size_t i = 0; i < JRPC_MCP_SID_LEN; i++)
        assert_true(id[i] >= 0x21 && id[i] <= 0x7e);
}

static void test_malformed(void **state)
{
    (void)state;
    jrpc_mcp_sid_t t;
    const char *good = "3f9a0c41d2e87b65-0001-f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";
    assert_int_equal(parse(good, &t), 0);
    assert_int_equal(parse("", &t), -EINVAL);
    assert_int_equal(parse("3f9a0c41d2e87b65-0001-f0f1f2f3f4f5f6f7f8f9fafbfcfdfef", &t), -EINVAL);
    assert_int_equal(parse("3f9a0c41d2e87b65-0001-f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff0", &t), -EINVAL);
    assert_int_equal(parse("3F9a0c41d2e87b65-0001-f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff", &t), -EINVAL);
    assert_int_equal(parse("3f9a0c41d2e87b65_0001-f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff", &t), -EINVAL);
    assert_int_equal(parse("3f9a0c41d2e87b65-0001_f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff", &t), -EINVAL);
    assert_int_equal(parse("3f9a0c41d2e87b65-00g1-f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff", &t), -EINVAL);
    assert_int_equal(parse("3f9a0c41d2e87b65-0001-f0f1f2f3f4f5f6f7f8f9fafbfcfdfe f", &t), -EINVAL);
    /* every position, one bad byte at a time */
    char bad[JRPC_MCP_SID_LEN + 1];
    for (size_t i = 0; i < JRPC_MCP_SID_LEN; i++) {
        memcpy(bad, good, sizeof bad);
        bad[i] = 'x';
        assert_int_equal(parse(bad, &t), -EINVAL);
    }
}

static void test_instance(void **state)
{
    (void)state;
    char s[JRPC_MCP_INSTANCE_LEN + 1];
    uint64_t v;
    jrpc_mcp_instance_format(0x0123456789abcdefull, s);
    assert_string_equal(s, "0123456789abcdef");
    assert_int_equal(jrpc_mcp_instance_parse(s, strlen(s), &v), 0);
    assert_true(v == 0x0123456789abcdefull);
    assert_int_equal(jrpc_mcp_instance_parse(s, 15, &v), -EINVAL);
    assert_int_equal(jrpc_mcp_instance_parse("0123456789ABCDEF", 16, &v), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_instance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
