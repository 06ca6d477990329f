/* io/jrpc_log: the key=value to JSON conversion (--log-format json) and
 * that both formats write one whole line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <unistd.h>

#include "../../io/jrpc_log.c"

static char out[JSON_LINE_MAX];

static const char *conv(const char *msg, bool cut, size_t cap)
{
    size_t n = kv_to_json(out, cap, "T", "info", "main", msg, cut);
    assert_true(n <= cap);
    assert_true(n >= 2);
    assert_int_equal(out[n - 1], '\n');
    out[n] = '\0';
    return out;
}

#define HEAD "{\"ts\":\"T\",\"level\":\"info\",\"proc\":\"test\",\"comp\":\"main\""

static void test_plain(void **state)
{
    assert_string_equal(conv("event=started version=0.1.0 n=42", false, sizeof out),
                        HEAD ",\"event\":\"started\",\"version\":\"0.1.0\",\"n\":\"42\"}\n");
    assert_string_equal(conv("", false, sizeof out), HEAD "}\n");
    assert_string_equal(conv("  event=x   ", false, sizeof out), HEAD ",\"event\":\"x\"}\n");
    assert_string_equal(conv("empty= next=1", false, sizeof out),
                        HEAD ",\"empty\":\"\",\"next\":\"1\"}\n");
}

static void test_quoted(void **state)
{
    assert_string_equal(conv("detail=\"no --keys: open\" n=1", false, sizeof out),
                        HEAD ",\"detail\":\"no --keys: open\",\"n\":\"1\"}\n");
    /* '=' inside a quoted value */
    assert_string_equal(conv("q=\"a=b c=d\"", false, sizeof out), HEAD ",\"q\":\"a=b c=d\"}\n");
    /* \" and \\ inside quotes; a bare quote not followed by a blank stays */
    assert_string_equal(conv("e=\"say \\\"hi\\\" \\\\ x\" f=\"a\"b\"", false, sizeof out),
                        HEAD ",\"e\":\"say \\\"hi\\\" \\\\ x\",\"f\":\"a\\\"b\"}\n");
    /* a quote in a bare value, a backslash */
    assert_string_equal(conv("p=a\"b\\c", false, sizeof out), HEAD ",\"p\":\"a\\\"b\\\\c\"}\n");
}

static void test_escapes(void **state)
{
    assert_string_equal(conv("c=\"tab\there\nnl\x01\x7f\"", false, sizeof out),
                        HEAD ",\"c\":\"tab\\there\\nnl\\u0001\\u007f\"}\n");
    /* valid UTF-8 stays, invalid bytes become U+FFFD */
    assert_string_equal(conv("u=h\xc3\xa9 b=\xff\xc3 s=\xed\xa0\x80", false, sizeof out),
                        HEAD ",\"u\":\"h\xc3\xa9\",\"b\":\"\\ufffd\\ufffd\","
                        "\"s\":\"\\ufffd\\ufffd\\ufffd\"}\n");
}

static void test_words(void **state)
{
    assert_string_equal(conv("hello event=x world =y", false, sizeof out),
                        HEAD ",\"event\":\"x\",\"msg\":\"hello world =y\"}\n");
}

static void test_truncation(void **state)
{
    /* cut inside a quoted value: the part kept, flagged */
    assert_string_equal(conv("a=1 b=\"unfinished val", true, sizeof out),
                        HEAD ",\"a\":\"1\",\"b\":\"unfinished val\",\"truncated\":true}\n");
    /* the message was cut elsewhere: flagged */
    assert_string_equal(conv("a=1", true, sizeof out), HEAD ",\"a\":\"1\",\"truncated\":true}\n");
    /* does not fit: whole fields dropped from the end, never half a field */
    char msg[900];
    size_t k = 0;
    for (int i = 0; k + 20 < sizeof msg; i++)
        k += (size_t)snprintf(msg + k, sizeof msg - k, "k%d=\"v v %d\" ", i, i);
    const char *j = conv(msg, false, 256);
    size_t n = strlen(j);
    assert_true(n <= 256);
    const char *tail = ",\"truncated\":true}\n";
    assert_string_equal(j + n - strlen(tail), tail);
    assert_non_null(strstr(j, "\"k0\":\"v v 0\""));
    /* escapes that grow the line past the buffer */
    memset(msg, '\x01', sizeof msg - 1);
    memcpy(msg, "x=", 2);
    msg[sizeof msg - 1] = '\0';
    j = conv(msg, false, 1024);
    assert_string_equal(j, HEAD ",\"truncated\":true}\n");
}

/* Runs jrpc_log_write with stderr going to a file; returns what was written. */
static const char *capture(void (*fn)(void))
{
    static char buf[8192];
    FILE *f = tmpfile();
    int saved = dup(2);
    fflush(stderr);
    dup2(fileno(f), 2);
    fn();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(f);
    buf[fread(buf, 1, sizeof buf - 1, f)] = '\0';
    fclose(f);
    return buf;
}

static void write_two(void)
{
    JRPC_LOG(JRPC_LOG_INFO, "comp", "event=one detail=\"%s\"", "a b");
    JRPC_LOG(JRPC_LOG_DEBUG, "comp", "event=hidden");
    JRPC_LOG(JRPC_LOG_WARN, "comp", "event=two");
}

static void write_long(void)
{
    char big[3000];
    memset(big, 'z', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    JRPC_LOG(JRPC_LOG_ERROR, "comp", "event=long v=\"%s\"", big);
}

static void test_write(void **state)
{
    jrpc_log_init("test");
    assert_int_equal(jrpc_log_set_format("yaml"), -EINVAL);
    assert_int_equal(jrpc_log_set_format("kv"), 0);
    const char *kv = capture(write_two);
    assert_int_equal(strncmp(kv, "ts=", 3), 0);
    assert_non_null(strstr(kv, " level=info proc=test comp=comp event=one detail=\"a b\"\n"));
    assert_non_null(strstr(kv, " level=warn proc=test comp=comp event=two\n"));
    assert_null(strstr(kv, "hidden"));
    assert_int_equal(jrpc_log_set_format("json"), 0);
    const char *js = capture(write_two);
    assert_int_equal(strncmp(js, "{\"ts\":\"", 7), 0);
    assert_non_null(strstr(js, "\"level\":\"info\",\"proc\":\"test\",\"comp\":\"comp\","
                               "\"event\":\"one\",\"detail\":\"a b\"}\n{\"ts\":"));
    assert_non_null(strstr(js, "\"event\":\"two\"}\n"));
    js = capture(write_long);
    assert_non_null(strstr(js, "\"event\":\"long\",\"v\":\"zzz"));
    assert_non_null(strstr(js, "\",\"truncated\":true}\n"));
    assert_int_equal(strchr(js, '\n')[1], '\0');   /* one line */
    kv = NULL;
    assert_int_equal(jrpc_log_set_format("kv"), 0);
    kv = capture(write_long);
    assert_true(strlen(kv) == KV_LINE_MAX - 1);
    assert_int_equal(kv[strlen(kv) - 1], '\n');
}

static int setup(void **state)
{
    jrpc_log_init("test");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain),
        cmocka_unit_test(test_quoted),
        cmocka_unit_test(test_escapes),
        cmocka_unit_test(test_words),
        cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_write),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
