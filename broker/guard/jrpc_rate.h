/* jrpc_rate — rate limits by cost (docs/ARCHITECTURE.md "Rate limits").
 *
 * GCRA, the generic cell rate algorithm: a limit of `rate` calls per second
 * with a burst of `burst` calls is one number per identity, its theoretical
 * arrival time (TAT). A body of cost n (its calls, each weighted by its
 * method's cost) is admitted when, after adding n emission intervals
 * (T = 1 s / rate) to max(TAT, now), the TAT is at most burst × T ahead of
 * now; otherwise it is refused whole and told when it would pass. No
 * window edges (a fixed window admits two bursts across an edge), one
 * integer of state, and the same arithmetic in C (the local budget) and in
 * Lua (Redis, shared by every broker: jrpc_replay's script).
 *
 * Pure code: no I/O, no clock of its own (now is an argument). */
#ifndef JRPC_RATE_H
#define JRPC_RATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "jrpc_buf.h"

/* One limit: calls per second, and how many may come at once. */
typedef struct jrpc_rate_limit {
    uint32_t rate;    /* calls per second; 0: no limit */
    uint32_t burst;   /* calls admitted at once (>= 1) */
} jrpc_rate_limit_t;

/* The GCRA step on one TAT (microseconds, same clock as now_us): admits
 * cost n at now_us (updating *tat_us) and returns 0, or returns the
 * microseconds until it would be admitted (> 0; UINT64_MAX when n alone is
 * more than the burst: never). A limit with rate 0 admits everything. */
uint64_t jrpc_rate_gcra(int64_t *tat_us, int64_t now_us, jrpc_rate_limit_t lim, uint64_t n);

/* The local budget: what each broker admits by itself while Redis (the
 * shared state) is unavailable — share_pct % of every limit, never
 * unlimited. A fixed table of cells; an identity takes the cell its hash
 * names, and two identities in one cell share its budget (stricter, never
 * looser). Memory is fixed whatever the number of identities. */
#define JRPC_RATE_LOCAL_CELLS 65536

typedef struct jrpc_rate_local {
    int64_t *tat;        /* JRPC_RATE_LOCAL_CELLS TATs, microseconds */
    uint32_t share_pct;  /* 1..100 */
} jrpc_rate_local_t;

/* 0 or -ENOMEM. */
int jrpc_rate_local_init(jrpc_rate_local_t *l, uint32_t share_pct);
void jrpc_rate_local_dispose(jrpc_rate_local_t *l);

/* jrpc_rate_gcra on the identity's cell with share_pct % of lim (a rate of
 * at least 1/s, a burst of at least 1 call — or of n when the whole limit's
 * burst admits n, so that a batch the limit allows is not refused for its
 * size alone). */
uint64_t jrpc_rate_local(jrpc_rate_local_t *l, jrpc_span_t id, int64_t now_us,
                         jrpc_rate_limit_t lim, uint64_t n);

/* Who a body without a key is to its rate limit and its idempotency key:
 * "addr:" and the client's address without its port, an IPv6 address
 * grouped by its /64 ("addr:2001:db8:1:2::/64": one host, or one home,
 * commonly holds a whole /64, so finer would let it take a budget per
 * address), an IPv4-mapped one as IPv4. peer is "1.2.3.4:5" or "[v6]:5"
 * (the HTTP peer), or a bare address (ZeroMQ's Peer-Address, the client a
 * trusted proxy named); other text is kept as it is, empty is "unknown".
 * Writes out NUL-terminated (cut to size); returns the length written. */
size_t jrpc_rate_who_addr(char *out, size_t size, jrpc_span_t peer);

/* Calls refused per identity, for the metrics: at most JRPC_RATE_COUNTS
 * identities by name (key ids are bounded by the key file; unsigned
 * traffic counts under one name), the rest under "other". */
#define JRPC_RATE_COUNTS 1024

typedef struct jrpc_rate_counts {
    struct jrpc_rate_count { char id[72]; uint64_t calls; } *e;   /* JRPC_RATE_COUNTS, lazily */
    uint32_t used;
    uint64_t other;
} jrpc_rate_counts_t;

void jrpc_rate_count(jrpc_rate_counts_t *c, jrpc_span_t id, uint64_t calls);
void jrpc_rate_counts_dispose(jrpc_rate_counts_t *c);

#endif
