/* jrpc-bench-stdio-floor — the floor of bench/stdio_overhead.sh: the same
 * child driven directly over its pipes, one call at a time (as jrpc-stdio
 * with --inflight 1 does), for SECONDS; prints calls/s, p50 and p99 in µs.
 *
 *   jrpc-bench-stdio-floor SECONDS -- COMMAND [ARGS...] */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include "hist.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc < 4 || strcmp(argv[2], "--") != 0) {
        fprintf(stderr, "usage: jrpc-bench-stdio-floor SECONDS -- COMMAND [ARGS...]\n");
        return 2;
    }
    double secs = atof(argv[1]);
    int in[2], out[2];
    if (pipe(in) < 0 || pipe(out) < 0)
        return 1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        execvp(argv[3], argv + 3);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    FILE *to = fdopen(in[1], "w"), *from = fdopen(out[0], "r");
    static hist_t h;
    hist_init(&h);
    char line[4096];
    uint64_t t_end = now_ns() + (uint64_t)(secs * 1e9), t0 = now_ns(), n = 0;
    for (uint64_t id = 1; now_ns() < t_end; id++) {
        uint64_t t = now_ns();
        fprintf(to, "{\"jsonrpc\":\"2.0\",\"id\":%llu,\"method\":\"echo\",\"params\":[1,2]}\n",
                (unsigned long long)id);
        fflush(to);
        if (fgets(line, sizeof line, from) == NULL) {
            fprintf(stderr, "the child closed its stdout\n");
            return 1;
        }
        hist_record(&h, (now_ns() - t) / 1000, 1);
        n++;
    }
    double el = (double)(now_ns() - t0) / 1e9;
    printf("{\"calls_per_s\":%.0f,\"p50\":%llu,\"p99\":%llu}\n", (double)n / el,
           (unsigned long long)hist_percentile(&h, 50), (unsigned long long)hist_percentile(&h, 99));
    fclose(to);
    fclose(from);
    waitpid(pid, NULL, 0);
    return 0;
}
