/* jrpc-bench-log: the cost of one access line (docs/ARCHITECTURE.md,
 * "Buffered writes"), written once per line or buffered with jrpc_logbuf
 * and flushed every 20 lines (about one loop turn under load).
 *
 *   jrpc-bench-log direct|buffered 2>FILE-OR-PIPE
 *
 * Prints microseconds per line on stdout. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "jrpc_log.h"
#include "jrpc_logbuf.h"

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "direct") != 0 && strcmp(argv[1], "buffered") != 0)) {
        fprintf(stderr, "usage: jrpc-bench-log direct|buffered 2>FILE\n");
        return 2;
    }
    bool buffered = strcmp(argv[1], "buffered") == 0;
    enum { N = 200000 };
    uv_loop_t loop;
    uv_loop_init(&loop);
    jrpc_log_init("jrpc-bench-log");
    if (buffered && jrpc_logbuf_start(&loop) < 0)
        return 1;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < N; i++) {
        JRPC_LOG(JRPC_LOG_INFO, "access",
                 "event=access transport=http peer=127.0.0.1:45678 key=demo calls=%u errors=%u "
                 "status=%d outcome=%s bytes_in=%zu bytes_out=%zu latency_us=%llu traceparent=%s",
                 1u, 0u, 200, "ok", (size_t)54, (size_t)35, 123ULL,
                 "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        if (buffered && i % 20 == 19)
            jrpc_logbuf_flush();
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    jrpc_logbuf_stop();
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    printf("%s: %.3f us/line\n", argv[1],
           ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / N / 1000.0);
    return 0;
}
