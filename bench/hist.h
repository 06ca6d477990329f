/* hist — a log-bucketed latency histogram (HdrHistogram-style), values in µs.
 *
 * Values below 128 are exact; above, each power of two is split into 64
 * linear sub-buckets, so a value is known to within 1/64 (~1.6%) of itself.
 * Values above HIST_MAX_US (100 s) are clamped to it; the exact maximum is
 * kept separately. Not thread-safe: one per thread, merged at the end. */
#ifndef JRPC_BENCH_HIST_H
#define JRPC_BENCH_HIST_H

#include <stdint.h>

#define HIST_MAX_US   100000000ull           /* 100 s */
#define HIST_BUCKETS  (128 + (27 - 7) * 64)  /* 100 s < 2^27 µs */

typedef struct hist {
    uint64_t count[HIST_BUCKETS];
    uint64_t total;
    uint64_t max;  /* exact, not clamped */
} hist_t;

void hist_init(hist_t *h);
/* Records `times` occurrences of value v (µs). */
void hist_record(hist_t *h, uint64_t v, uint64_t times);
void hist_merge(hist_t *into, const hist_t *from);
/* The value at percentile q (0..100): the highest value equivalent to the
 * bucket holding it, never above the exact max. 0 for an empty histogram. */
uint64_t hist_percentile(const hist_t *h, double q);

#endif
