/* jrpc-bench-zmq-load — a minimal closed-loop load over ZeroMQ.
 *
 *   jrpc-bench-zmq-load URL BATCHES BATCH_SIZE CONCURRENCY
 *
 * CONCURRENCY DEALER sockets each keep one batch of BATCH_SIZE `add` calls in
 * flight until BATCHES replies have come back; prints calls/s. Every reply
 * is checked to be a JSON array of the right length's worth of results.
 * A stopgap until jrpc-bench (issue 6); bench/broker_cpu.sh drives it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#define MAX_CONC 64

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: jrpc-bench-zmq-load URL BATCHES BATCH_SIZE CONCURRENCY\n");
        return 2;
    }
    const char *url = argv[1];
    int nb = atoi(argv[2]), bs = atoi(argv[3]), conc = atoi(argv[4]);
    if (nb < 1 || bs < 1 || bs > 100000 || conc < 1 || conc > MAX_CONC) {
        fprintf(stderr, "jrpc-bench-zmq-load: bad arguments\n");
        return 2;
    }
    char *body = malloc((size_t)bs * 80 + 16);
    size_t n = 0;
    body[n++] = '[';
    for (int i = 0; i < bs; i++)
        n += (size_t)sprintf(body + n, "%s{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"params\":[%d,%d],\"id\":%d}",
                             i ? "," : "", i, i, i);
    body[n++] = ']';
    void *ctx = zmq_ctx_new();
    void *s[MAX_CONC];
    zmq_pollitem_t items[MAX_CONC];
    for (int k = 0; k < conc; k++) {
        s[k] = zmq_socket(ctx, ZMQ_DEALER);
        zmq_connect(s[k], url);
        items[k] = (zmq_pollitem_t){ .socket = s[k], .events = ZMQ_POLLIN };
    }
    static char buf[16 << 20];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    int sent = 0, got = 0;
    for (int k = 0; k < conc && sent < nb; k++, sent++)
        zmq_send(s[k], body, n, 0);
    while (got < nb) {
        if (zmq_poll(items, conc, 10000) <= 0) {
            fprintf(stderr, "jrpc-bench-zmq-load: no reply within 10 s\n");
            return 1;
        }
        for (int k = 0; k < conc; k++) {
            if (!(items[k].revents & ZMQ_POLLIN))
                continue;
            int r = zmq_recv(s[k], buf, sizeof buf - 1, 0);
            if (r < 2 || buf[0] != '[' || (size_t)r >= sizeof buf - 1) {
                fprintf(stderr, "jrpc-bench-zmq-load: unexpected reply\n");
                return 1;
            }
            got++;
            if (sent < nb) {
                zmq_send(s[k], body, n, 0);
                sent++;
            }
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    printf("batches=%d batch_size=%d concurrency=%d seconds=%.3f calls_per_s=%.0f\n", nb, bs,
           conc, secs, (double)nb * bs / secs);
    for (int k = 0; k < conc; k++) {
        int zero = 0;
        zmq_setsockopt(s[k], ZMQ_LINGER, &zero, sizeof zero);
        zmq_close(s[k]);
    }
    zmq_ctx_term(ctx);
    free(body);
    return 0;
}
