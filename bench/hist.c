/* hist — see hist.h. */
#include "hist.h"

#include <string.h>

static unsigned hist_index(uint64_t v)
{
    if (v > HIST_MAX_US)
        v = HIST_MAX_US;
    if (v < 128)
        return (unsigned)v;
    unsigned msb = 63u - (unsigned)__builtin_clzll(v);  /* >= 7 */
    unsigned shift = msb - 6;
    unsigned sub = (unsigned)(v >> shift);              /* 64..127 */
    return 128 + (msb - 7) * 64 + (sub - 64);
}

/* The highest value that falls into bucket i. */
static uint64_t hist_high(unsigned i)
{
    if (i < 128)
        return i;
    unsigned k = (i - 128) / 64, sub = 64 + (i - 128) % 64, shift = k + 1;
    return ((uint64_t)sub << shift) + ((uint64_t)1 << shift) - 1;
}

void hist_init(hist_t *h)
{
    memset(h, 0, sizeof *h);
}

void hist_record(hist_t *h, uint64_t v, uint64_t times)
{
    if (times == 0)
        return;
    h->count[hist_index(v)] += times;
    h->total += times;
    if (v > h->max)
        h->max = v;
}

void hist_merge(hist_t *into, const hist_t *from)
{
    for (unsigned i = 0; i < HIST_BUCKETS; i++)
        into->count[i] += from->count[i];
    into->total += from->total;
    if (from->max > into->max)
        into->max = from->max;
}

uint64_t hist_percentile(const hist_t *h, double q)
{
    if (h->total == 0)
        return 0;
    if (q >= 100.0)
        return h->max;
    double want = q / 100.0 * (double)h->total;
    uint64_t rank = (uint64_t)want;
    if ((double)rank < want || rank == 0)
        rank++;                           /* ceil, at least the first value */
    uint64_t seen = 0;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        seen += h->count[i];
        if (seen >= rank) {
            uint64_t v = hist_high(i);
            return v < h->max ? v : h->max;
        }
    }
    return h->max;
}
