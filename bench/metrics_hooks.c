/* metrics_hooks.c — the cost per call of the metrics hooks (jrpc_metrics):
 * the work one batch of 100 answered calls makes them do — two clock reads,
 * the batch size, a queue and a worker observation per call, and the reply
 * classification with its total latency. Figure in docs/ARCHITECTURE.md,
 * "Metrics and the admin listener". */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "jrpc_batch.h"
#include "jrpc_metrics.h"

int main(void)
{
    char body[20000]; size_t n = 0;
    n += sprintf(body + n, "[");
    for (int i = 0; i < 100; i++)
        n += sprintf(body + n, "%s{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"params\":[1,2],\"id\":%d}", i ? "," : "", i);
    n += sprintf(body + n, "]");
    jrpc_batch_t b; jrpc_batch_init(&b);
    jrpc_limits_t lim = JRPC_LIMITS_DEFAULT;
    jrpc_batch_parse(&b, body, n, &lim);
    msgpack_object one = { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = 3 };
    for (uint32_t i = 0; i < b.ncalls; i++)
        if (i % 10) jrpc_batch_answer_result(&b, i, &one); else jrpc_batch_answer_error(&b, i, -32601, NULL);
    jrpc_metrics_init();
    struct timespec t0, t1;
    int rounds = 200000;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int r = 0; r < rounds; r++) {
        uint64_t start = jrpc_metrics_tick();            /* submit */
        jrpc_hist_observe(&jrpc_metrics.batch, b.ncalls);
        for (uint32_t i = 0; i < b.ncalls; i++)          /* dispatch + sent */
            jrpc_hist_observe(&jrpc_metrics.queue, jrpc_metrics_since(start));
        jrpc_metrics_tick();                             /* RESPONSE frame */
        for (uint32_t i = 0; i < b.ncalls; i++)
            jrpc_hist_observe(&jrpc_metrics.worker, jrpc_metrics_since(start));
        jrpc_metrics_reply(1, &b, NULL, start);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
    printf("metrics hooks: %.2f ns per call (batch of 100, 10%% errors)\n", ns / rounds / 100);
    return 0;
}
