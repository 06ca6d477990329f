/* loop — the clock, the send schedule and the latency rows shared by
 * jrpc-bench and the peer harnesses (bench/peers), so that both sides of a
 * comparison are timed and reported by the same code. */
#ifndef JRPC_BENCH_LOOP_H
#define JRPC_BENCH_LOOP_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "hist.h"

/* Monotonic seconds. */
double loop_now(void);
/* Sleeps until loop_now() >= t (EINTR retried). */
void loop_sleep_until(double t);

/* When one connection sends. Closed loop (rate 0): at once, each time the
 * previous batch is answered. Open loop: conns connections share `rate`
 * batches/s, each sending every conns/rate s, offset by its index, and a
 * batch's latency counts from its scheduled time, not the actual one
 * (coordinated omission corrected). */
typedef struct loop_sched {
    double interval;  /* s between this connection's sends; 0: closed loop */
    double next;      /* the next scheduled send */
    double end;       /* no send is scheduled at or after this */
} loop_sched_t;

void loop_sched_init(loop_sched_t *s, double start, double end, double rate, int conns, int idx);
/* The time the next batch counts from, after sleeping until it in open
 * loop; or a negative value when the run is over. */
double loop_sched_next(loop_sched_t *s);

/* What every connection thread of a load program keeps; the first member
 * of the program's own per-connection struct. */
typedef struct loop_conn {
    int       idx;             /* 0 .. conns-1 */
    pthread_t tid;
    hist_t    batch_h, call_h; /* latency per batch; per call, only where each call's
                                  own is known (streamed answers) (µs) */
    hist_t    first_h;         /* streamed batches: time to the first answer (µs) */
    uint64_t  batches, calls;  /* answered while measured */
    double    finished;        /* loop_now() when the thread ended */
} loop_conn_t;

/* One measured batch of `calls` calls, answered `us` µs after it counted from
 * (the batch histogram; a call's own latency is not known from a whole reply). */
void loop_conn_record(loop_conn_t *c, uint64_t us, int calls);

/* conns: n structs of `size` bytes, each starting with a loop_conn_t. Sets
 * each one's idx and histograms and starts fn(struct) on a thread of its
 * own. Returns 0, or -1 after saying so on stderr as `who`. */
int loop_start(void *conns, size_t size, int n, void *(*fn)(void *), const char *who);

/* Joins the n threads and adds their histograms and counts into *tot (whose
 * histograms loop_join initialises). Returns when the last one finished,
 * at least since. */
double loop_join(void *conns, size_t size, int n, loop_conn_t *tot, double since);

/* p50, p90, p99, p99.9 and max of h: JSON members "p50":N,..."max":N in
 * µs (no braces), or five text columns " %10.3f" in ms. */
void loop_print_percentiles(const hist_t *h, int json);

/* What every report starts with. */
typedef struct loop_report {
    const char *who;             /* "jrpc-bench", or the peer's name */
    const char *url;
    double rate;                 /* batches/s; 0: closed loop */
    int batch, conns;
    double secs, warmup;         /* measured; warm-up before */
    uint64_t batches, calls;     /* answered while measured */
    const hist_t *batch_h;
    const hist_t *call_h;        /* each call's own latency; NULL: not known (a whole
                                    reply: every call's would be its batch's) */
    const hist_t *first_h;       /* streamed: time to the first answer; NULL: not streamed */
} loop_report_t;

/* Prints the part of the report that jrpc-bench and the peer harnesses
 * share. JSON: the opening brace and the members url, mode, rate, batch,
 * connections, duration_s, warmup_s, batches, calls, batches_per_s,
 * calls_per_s and latency_us (batch, call when known, and first when streamed: p50,
 * p90, p99, p99_9, max in µs), followed by a comma: the caller adds its own members and the closing
 * brace. Text: the heading, the counts and the latency table in ms. */
void loop_print_report(const loop_report_t *r, int json);

#endif
