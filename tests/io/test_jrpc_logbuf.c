/* jrpc_logbuf: lines are held until the loop turns, then written whole, at
 * most PIPE_BUF bytes per write(2), in order; warn lines go at once; exit()
 * loses nothing. stderr is a SOCK_SEQPACKET socket here, so that each
 * read() returns exactly one write(). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "jrpc_log.h"
#include "jrpc_logbuf.h"

static int rd = -1;   /* our end of the socket pair */
static int wr = -1;   /* the other end, put on fd 2 while capturing */
static int saved_stderr = -1;

static int setup(void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    int big = 1 << 20;
    setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    rd = sv[0];
    wr = sv[1];
    fcntl(rd, F_SETFL, O_NONBLOCK);
    saved_stderr = dup(2);
    jrpc_log_init("test");
    jrpc_log_level = JRPC_LOG_INFO;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    close(saved_stderr);
    close(rd);
    close(wr);
    return 0;
}

/* stderr is the socket between these two (cmocka reports on the real one). */
static void capture(void)  { dup2(wr, 2); }
static void release(void)  { dup2(saved_stderr, 2); }

/* Reads every pending write; checks each is whole lines within PIPE_BUF
 * and appends them to all (size cap). Returns the number of writes. */
static int drain(char *all, size_t cap, size_t *len)
{
    static char rec[1 << 16];
    int writes = 0;
    for (;;) {
        ssize_t n = recv(rd, rec, sizeof rec, 0);
        if (n <= 0)
            break;
        writes++;
        assert_true(n <= PIPE_BUF);
        assert_int_equal(rec[n - 1], '\n');
        assert_true(*len + (size_t)n <= cap);
        memcpy(all + *len, rec, (size_t)n);
        *len += (size_t)n;
    }
    return writes;
}

static void on_timer(uv_timer_t *t)
{
    (void)t;
}

static void test_held_then_whole_lines(void **state)
{
    (void)state;
    static char all[1 << 20];
    size_t len = 0;
    uv_loop_t loop;
    uv_loop_init(&loop);
    capture();
    int rc = jrpc_logbuf_start(&loop);
    for (int i = 0; i < 1000; i++)
        JRPC_LOG(JRPC_LOG_INFO, "t", "event=line i=%d pad=%s", i,
                 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
    /* The buffer (16 x PIPE_BUF) filled up a few times: those went out,
     * the rest waits for the loop. */
    release();
    assert_int_equal(rc, 0);
    int early = drain(all, sizeof all, &len);
    assert_true(early > 0);
    /* One turn of a loop with something to do (the logbuf handle alone
     * does not keep a loop alive): the prepare handle flushes. */
    uv_timer_t t;
    uv_timer_init(&loop, &t);
    uv_timer_start(&t, on_timer, 0, 0);
    capture();
    uv_run(&loop, UV_RUN_NOWAIT);
    release();
    uv_close((uv_handle_t *)&t, NULL);
    int later = drain(all, sizeof all, &len);
    assert_true(later > 0);
    /* Every line, once, in order; far fewer writes than lines. */
    assert_true(early + later < 1000 / 10);
    const char *p = all;
    for (int i = 0; i < 1000; i++) {
        char want[32];
        snprintf(want, sizeof want, "event=line i=%d ", i);
        const char *q = strstr(p, want);
        assert_non_null(q);
        assert_true(q < all + len);
        p = q + 1;
    }
    /* A warning goes at once, after what was held. */
    capture();
    JRPC_LOG(JRPC_LOG_INFO, "t", "event=held");
    JRPC_LOG(JRPC_LOG_WARN, "t", "event=urgent");
    release();
    len = 0;
    drain(all, sizeof all, &len);
    all[len] = '\0';
    assert_non_null(strstr(all, "event=held"));
    assert_true(strstr(all, "event=held") < strstr(all, "event=urgent"));
    /* Stopped: back to a write per line. */
    jrpc_logbuf_stop();
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    capture();
    JRPC_LOG(JRPC_LOG_INFO, "t", "event=direct");
    release();
    len = 0;
    assert_int_equal(drain(all, sizeof all, &len), 1);
}

static void test_nothing_lost_at_exit(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        capture();
        uv_loop_t loop;
        uv_loop_init(&loop);
        if (jrpc_logbuf_start(&loop) < 0)
            _exit(3);
        for (int i = 0; i < 10; i++)
            JRPC_LOG(JRPC_LOG_INFO, "t", "event=last i=%d", i);
        exit(0); /* no loop turn, no stop: atexit must flush */
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    static char all[1 << 16];
    size_t len = 0;
    assert_int_equal(drain(all, sizeof all - 1, &len), 1);
    all[len] = '\0';
    assert_non_null(strstr(all, "event=last i=0\n"));
    assert_non_null(strstr(all, "event=last i=9\n"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_held_then_whole_lines),
        cmocka_unit_test(test_nothing_lost_at_exit),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
