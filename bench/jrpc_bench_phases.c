/* jrpc_bench_phases — where a batch's time went, by the broker's own
 * account (issue 33): each answer's Server-Timing kept per phase (parse,
 * auth, redis, queue, worker, gather, total) as a histogram and a sum,
 * merged over the connections, reported beside the client's latency, a
 * run's means appended as a row to --plot-series, and --plot's picture
 * (the percentile curve, with the phases' means stacked below it). The
 * load and its checks are jrpc_bench.c's; this is the report of the
 * broker's timing and the plot. */
#include "jrpc_bench_phases.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loop.h"

void phases_init(phases_t *w)
{
    memset(w, 0, sizeof *w);
    for (int i = 0; i < JRPC_TIMING_PHASES; i++)
        hist_init(&w->phase_h[i]);
}

void phases_take(phases_t *w, const char *st, uint64_t us)
{
    if (*st == '\0')
        return;
    jrpc_timing_t t;
    if (jrpc_timing_parse(st, strlen(st), &t) <= 0) {
        w->bad_timing++;
        return;
    }
    w->timed++;
    w->timed_us += us;
    for (int i = 0; i < JRPC_TIMING_PHASES; i++) {
        if (!(t.has & (1u << i)))
            continue;
        uint64_t pus = (t.ns[i] + 500) / 1000;
        hist_record(&w->phase_h[i], pus, 1);
        w->phase_sum[i] += pus;
    }
}

void phases_merge(phases_t *into, const phases_t *from)
{
    for (int i = 0; i < JRPC_TIMING_PHASES; i++) {
        hist_merge(&into->phase_h[i], &from->phase_h[i]);
        into->phase_sum[i] += from->phase_sum[i];
    }
    into->timed += from->timed;
    into->timed_us += from->timed_us;
    into->bad_timing += from->bad_timing;
}

int phases_find_gnuplot(void)
{
    const char *path = getenv("PATH");
    if (!path)
        return 0;
    char dir[4096];
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, ":");
        if (n > 0 && n < sizeof dir - 16) {
            memcpy(dir, p, n);
            strcpy(dir + n, "/gnuplot");
            if (access(dir, X_OK) == 0)
                return 1;
        }
        p += n;
        if (*p == ':')
            p++;
    }
    return 0;
}

static double mean_us(uint64_t sum, uint64_t n)
{
    return n ? (double)sum / (double)n : 0;
}

void phases_print(const phases_t *t, int json)
{
    if (json)
        printf("\"server_timing_us\":{\"batches\":%" PRIu64 ",\"unreadable\":%" PRIu64,
               t->timed, t->bad_timing);
    else if (t->timed == 0)
        printf("  server timing: none came back%s\n",
               t->bad_timing ? " readable" : " (a broker with --server-timing off, or older)");
    else
        printf("  server ms         p50        p90        p99      p99.9        max       mean\n");
    for (int i = 0; i < JRPC_TIMING_PHASES && t->timed; i++) {
        const hist_t *h = &t->phase_h[i];
        if (h->total == 0)
            continue;
        if (json)
            printf(",\"%s\":{", jrpc_timing_name(i));
        else
            printf("  %-8s", jrpc_timing_name(i));
        loop_print_percentiles(h, json);
        double m = mean_us(t->phase_sum[i], h->total);
        if (json)
            printf(",\"mean\":%.1f}", m);
        else
            printf(" %10.3f\n", m / 1000.0);
    }
    double client = mean_us(t->timed_us, t->timed);
    double inside = mean_us(t->phase_sum[JRPC_TIMING_TOTAL], t->phase_h[JRPC_TIMING_TOTAL].total);
    if (json) {
        printf(",\"client_mean\":%.1f,\"outside_mean\":%.1f},", client,
               client > inside ? client - inside : 0);
    } else if (t->timed) {
        printf("  (the broker's Server-Timing of %" PRIu64 " batches; queue and worker are each "
               "batch's slowest call. Mean batch latency %.3f ms at the client: %.3f ms in the "
               "broker, %.3f ms outside it: network, kernel, client)\n", t->timed,
               client / 1000.0, inside / 1000.0, client > inside ? (client - inside) / 1000.0 : 0);
    }
}

void phases_series_row(FILE *f, const char *label, const phases_t *t)
{
    fputs(label, f);
    for (int i = 0; i < JRPC_TIMING_PHASES; i++)
        fprintf(f, "\t%.4f", mean_us(t->phase_sum[i], t->timed) / 1000.0);  /* absent: 0 */
    fprintf(f, "\t%.4f\n", mean_us(t->timed_us, t->timed) / 1000.0);
}

int phases_plot(const char *file, const hist_t *bh, const hist_t *ch, const phases_t *t,
                const phases_plot_t *o)
{
    FILE *g = popen("gnuplot", "w");
    if (!g) {
        fprintf(stderr, "jrpc-bench: cannot run gnuplot: %s\n", strerror(errno));
        return -1;
    }
    const hist_t *sh = t->timed ? &t->phase_h[JRPC_TIMING_TOTAL] : NULL;
    fprintf(g, "$d << EOD\n");
    /* q = 1 - 10^(-k/20): 20 points per decade while the histogram has at
     * least 1/(1-q) values, then the maximum at x = the count. */
    uint64_t total = bh->total > 0 ? bh->total : 1;
    for (int k = 0; k <= 180; k++) {
        double inv = pow(10.0, k / 20.0), q = 100.0 * (1.0 - 1.0 / inv);
        if (k > 0 && inv >= (double)total)
            break;
        fprintf(g, "%.6f %.4f %.4f %.4f\n", inv, (double)hist_percentile(bh, q) / 1000.0,
                (double)hist_percentile(ch, q) / 1000.0,
                sh ? (double)hist_percentile(sh, q) / 1000.0 : 0.0);
    }
    if (total > 1)
        fprintf(g, "%.6f %.4f %.4f %.4f\n", (double)total, (double)bh->max / 1000.0,
                (double)ch->max / 1000.0, sh ? (double)sh->max / 1000.0 : 0.0);
    fprintf(g, "EOD\n");
    if (t->timed && !o->series) {
        fprintf(g, "$s << EOD\n");
        phases_series_row(g, o->label, t);
        fprintf(g, "EOD\n");
    }
    char url[256];  /* inside a single-quoted gnuplot string */
    size_t n = 0;
    for (const char *p = o->url; *p && n < sizeof url - 1; p++)
        if (*p != '\'' && *p != '\n' && *p != '\r')
            url[n++] = *p;
    url[n] = 0;
    int stacked = t->timed > 0;
    fprintf(g, "set terminal pngcairo size 960,%d noenhanced\n"
               "set output '%s'\n"
               "%s"
               "set title 'jrpc-bench %s: %s loop",
            stacked ? 1200 : 600, file, stacked ? "set multiplot layout 2,1\n" : "", url,
            o->rate > 0 ? "open" : "closed");
    if (o->rate > 0)
        fprintf(g, " at %g batches/s", o->rate);
    fprintf(g, ", batch %d, %d connections, %.0f calls/s'\n"
               "set logscale x\n"
               /* gnuplot reads tic labels as formats: %%%% is one percent sign. */
               "set xtics ('0%%%%' 1, '90%%%%' 10, '99%%%%' 100, '99.9%%%%' 1000, '99.99%%%%' 10000, "
               "'99.999%%%%' 100000, '99.9999%%%%' 1000000, '99.99999%%%%' 10000000, "
               "'99.999999%%%%' 100000000)\n"
               "set xrange [1:%.6f]\n"
               "set xlabel 'percentile (the last point: the maximum)'\n"
               "set ylabel 'latency (ms)'\n"
               "set yrange [0:*]\n"
               "set grid\n"
               "set key top left\n"
               "plot $d using 1:2 with lines lw 2 title 'per batch (client)'",
            o->batch, o->conns, o->cps, total > 1 ? (double)total : 10.0);
    if (sh)
        fprintf(g, ", $d using 1:4 with lines lw 2 dt 3 title 'per batch: the broker''s total'");
    if (o->stream)
        fprintf(g, ", $d using 1:3 with lines lw 2 dt 2 title 'per call (each answer''s own)'");
    fprintf(g, "\n");
    if (stacked) {
        /* columns: 1 label, 2 parse, 3 auth, 4 redis, 5 queue, 6 worker,
         * 7 gather, 8 total, 9 the client's mean */
        char src[600];
        if (o->series)
            snprintf(src, sizeof src, "'%s'", o->series);
        else
            snprintf(src, sizeof src, "$s");
        fprintf(g, "unset logscale x\n"
                   "unset xrange\n"
                   "set xtics auto\n"
                   "set datafile separator tab\n"
                   "set title 'where the batch latency went: mean per phase (queue, worker: "
                   "the slowest call)'\n"
                   "set style data histograms\n"
                   "set style histogram rowstacked\n"
                   "set style fill solid 0.8 border -1\n"
                   "set boxwidth 0.7\n"
                   "set xlabel 'run (b: batch size, c: connections, r: batches/s)'\n"
                   "set ylabel 'mean latency (ms)'\n"
                   "set key outside right top\n"
                   "pos(x) = x > 0 ? x : 0\n"
                   "plot %s using 2:xtic(1) title 'parse', '' using 3 title 'auth', "
                   "'' using 4 title 'redis', '' using 5 title 'queue', '' using 6 title 'worker', "
                   "'' using 7 title 'gather', "
                   "'' using (pos($8-$2-$3-$4-$5-$6-$7)) title 'other (in the broker)', "
                   "'' using (pos($9-$8)) title 'outside the broker'\n"
                   "unset multiplot\n",
                src);
    }
    int st = pclose(g);
    if (st != 0) {
        fprintf(stderr, "jrpc-bench: gnuplot failed to draw %s (status %d)\n", file, st);
        return -1;
    }
    return 0;
}
