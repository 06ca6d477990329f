/* Tests of jrpc_client_url (pure): http:// and https:// URLs, their default
 * ports and paths, the Host header's authority, the names used in
 * messages, and the URLs refused. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "jrpc_client_url.h"

static void expect_url(const char *url, int tls, const char *host, const char *port,
                       const char *authority, const char *path, const char *where,
                       const char *peer)
{
    jrpc_client_url_t u;
    /* On the heap, ending where the URL ends, so that an over-read trips
     * the sanitizer. */
    size_t n = strlen(url) + 1;
    char *copy = malloc(n);
    assert_non_null(copy);
    memcpy(copy, url, n);
    assert_int_equal(jrpc_client_url_parse(copy, &u), 0);
    free(copy);
    assert_int_equal(u.tls, tls);
    assert_string_equal(u.host, host);
    assert_string_equal(u.port, port);
    assert_string_equal(u.authority, authority);
    assert_string_equal(u.path, path);
    assert_string_equal(u.where, where);
    assert_string_equal(u.peer, peer);
    jrpc_client_url_dispose(&u);
    jrpc_client_url_dispose(&u);   /* idempotent */
}

static void test_https_default_port_and_path(void **state)
{
    expect_url("https://example.com", 1, "example.com", "443", "example.com", "/rpc",
               "https://example.com/rpc", "example.com:443");
    expect_url("https://127.0.0.1:8443", 1, "127.0.0.1", "8443", "127.0.0.1:8443", "/rpc",
               "https://127.0.0.1:8443/rpc", "127.0.0.1:8443");
    expect_url("https://[::1]/v1/json?x=1", 1, "::1", "443", "[::1]", "/v1/json?x=1",
               "https://[::1]/v1/json?x=1", "[::1]:443");
    expect_url("https://[::1]:9/", 1, "::1", "9", "[::1]:9", "/", "https://[::1]:9/", "[::1]:9");
}

static void test_http_unchanged(void **state)
{
    expect_url("http://h", 0, "h", "80", "h", "/rpc", "http://h/rpc", "h:80");
    expect_url("http://h:65535/x", 0, "h", "65535", "h:65535", "/x", "http://h:65535/x", "h:65535");
}

static void test_refused(void **state)
{
    static const char *bad[] = {
        "https://", "https://:443", "https://h:", "https://h:0", "https://h:65536",
        "https://[::1", "https://[::1]x", "https://u@h", "https://h/a b", "https://h:x",
        "https://h#f", "https:/h", "HTTPS://h", "ftp://h", "http://", "", "https://[]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        jrpc_client_url_t u;
        assert_int_equal(jrpc_client_url_parse(bad[i], &u), -EINVAL);
        jrpc_client_url_dispose(&u);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_https_default_port_and_path),
        cmocka_unit_test(test_http_unchanged),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
