/* jrpc_bench_phases — the broker's timing per phase, as jrpc-bench collects
 * and reports it, and the --plot picture (jrpc_bench_phases.c says more).
 * Not thread-safe: one phases_t per connection thread, merged at the end. */
#ifndef JRPC_BENCH_PHASES_H
#define JRPC_BENCH_PHASES_H

#include <stdint.h>
#include <stdio.h>

#include "hist.h"
#include "jrpc_timing.h"

typedef struct phases {
    hist_t phase_h[JRPC_TIMING_PHASES];   /* the broker's timing per phase (µs) */
    uint64_t phase_sum[JRPC_TIMING_PHASES]; /* ... their sums (µs), for the means */
    uint64_t timed, timed_us;   /* batches with a timing; the sum of their client latency */
    uint64_t bad_timing;        /* timings that did not read as Server-Timing */
} phases_t;

/* What --plot draws besides the histograms: the run's description. All borrowed. */
typedef struct phases_plot {
    const char *url;      /* the broker's URL, in the title */
    const char *label;    /* this run's label ("b100 c4 r500"), its bar */
    const char *series;   /* --plot-series FILE (every run's bar), or NULL: this run alone */
    double rate;          /* --rate (0: closed loop) */
    int batch, conns;     /* --batch, --connections */
    int stream;           /* --stream: the per-call curve too */
    double cps;           /* calls per second measured */
} phases_plot_t;

/* Empties w (caller's storage). */
void phases_init(phases_t *w);

/* Takes the broker's timing of one answered batch: st, its Server-Timing
 * value as libjrpc-client kept it (from the header, the trailer, the SSE
 * end event or the ZeroMQ reply head; "" when none came), measured us µs by
 * the client. A value that does not read as Server-Timing is counted. */
void phases_take(phases_t *w, const char *st, uint64_t us);

/* Adds from's histograms and counts to into. */
void phases_merge(phases_t *into, const phases_t *from);

/* The broker's timing beside the client's latency on stdout: each phase's
 * percentiles and mean (phases that never happened are left out), then the
 * mean batch latency split into inside and outside the broker; with json,
 * the "server_timing_us" member and its comma. */
void phases_print(const phases_t *t, int json);

/* This run's means in ms, one TSV row on f: label, then parse ... total,
 * then the client's mean batch latency (the --plot-series format). */
void phases_series_row(FILE *f, const char *label, const phases_t *t);

/* Whether an executable gnuplot is on the PATH (checked before the run, so
 * that a missing one does not cost the user the whole measurement). */
int phases_find_gnuplot(void);

/* The percentile curve, HdrHistogram-style: x is 1/(1-q) on a log axis, so
 * 90%, 99%, 99.9%... are evenly spaced; y is the latency, per batch (bh),
 * the broker's total beside it (when it sent its timing) and per call (ch,
 * when streamed). The curve ends at the maximum: the last point is the
 * highest value, at x = the count (q = 1 - 1/count). Below it, when timings
 * came back: where the batch latency went, each phase's mean stacked, one
 * bar per run of the --plot-series file (or this run alone). The data go to
 * gnuplot inline (datablocks), the script through a pipe. Writes file (PNG);
 * returns 0, or -1 with the reason on stderr. */
int phases_plot(const char *file, const hist_t *bh, const hist_t *ch, const phases_t *t,
                const phases_plot_t *o);

#endif
