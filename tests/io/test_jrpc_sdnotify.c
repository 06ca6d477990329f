/* io/jrpc_sdnotify: the datagram reaches a path or an abstract socket;
 * no $NOTIFY_SOCKET is a no-op; a malformed one is -EINVAL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "jrpc_sdnotify.h"

/* Binds a datagram socket at name (path, or '@' for abstract). */
static int bind_at(const char *name)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    size_t n = strlen(name);
    memcpy(sa.sun_path, name, n);
    if (name[0] == '@')
        sa.sun_path[0] = '\0';
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    assert_true(fd >= 0);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (name[0] != '@'));
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, len), 0);
    return fd;
}

static void expect_datagram(int fd, const char *want)
{
    char buf[256];
    ssize_t n = recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT);
    assert_int_equal(n, (ssize_t)strlen(want));
    buf[n] = '\0';
    assert_string_equal(buf, want);
}

static void test_unset(void **state)
{
    unsetenv("NOTIFY_SOCKET");
    assert_int_equal(jrpc_sdnotify("READY=1"), 0);
    setenv("NOTIFY_SOCKET", "", 1);
    assert_int_equal(jrpc_sdnotify("READY=1"), 0);
}

static void test_malformed(void **state)
{
    setenv("NOTIFY_SOCKET", "relative/path", 1);
    assert_int_equal(jrpc_sdnotify("READY=1"), -EINVAL);
    char longpath[200];
    memset(longpath, 'a', sizeof longpath - 1);
    longpath[0] = '/';
    longpath[sizeof longpath - 1] = '\0';
    setenv("NOTIFY_SOCKET", longpath, 1);
    assert_int_equal(jrpc_sdnotify("READY=1"), -EINVAL);
    setenv("NOTIFY_SOCKET", "/nonexistent/notify.sock", 1);
    assert_int_equal(jrpc_sdnotify("READY=1"), -ENOENT);
}

static void test_path(void **state)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_sdnotify.%d.sock", (int)getpid());
    unlink(path);
    int fd = bind_at(path);
    setenv("NOTIFY_SOCKET", path, 1);
    assert_int_equal(jrpc_sdnotify("READY=1\nSTATUS=serving"), 1);
    expect_datagram(fd, "READY=1\nSTATUS=serving");
    close(fd);
    unlink(path);
}

static void test_abstract(void **state)
{
    char name[64];
    snprintf(name, sizeof name, "@test_sdnotify.%d", (int)getpid());
    int fd = bind_at(name);
    setenv("NOTIFY_SOCKET", name, 1);
    assert_int_equal(jrpc_sdnotify("STOPPING=1"), 1);
    expect_datagram(fd, "STOPPING=1");
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unset),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_path),
        cmocka_unit_test(test_abstract),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
