/* loop — see loop.h. */
#include "loop.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

double loop_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void loop_sleep_until(double t)
{
    struct timespec ts;
    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L)
        ts.tv_nsec = 999999999L;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

void loop_sched_init(loop_sched_t *s, double start, double end, double rate, int conns, int idx)
{
    s->interval = rate > 0 ? (double)conns / rate : 0;
    s->next = start + (rate > 0 ? s->interval * idx / conns : 0);
    s->end = end;
}

double loop_sched_next(loop_sched_t *s)
{
    if (s->interval == 0) {
        double now = loop_now();
        return now < s->end ? now : -1;
    }
    double sched = s->next;
    s->next += s->interval;
    /* Behind schedule past the end (answers slower than the rate: a broker
     * gone, every batch waiting its timeout): no more batches. Catching up
     * would send each one missed, a timeout each, long after the run. */
    if (sched >= s->end || loop_now() >= s->end)
        return -1;
    if (sched > loop_now())
        loop_sleep_until(sched);
    return sched;
}

static const double PCT[] = { 50, 90, 99, 99.9, 100 };
static const char *const PCT_NAME[] = { "p50", "p90", "p99", "p99_9", "max" };

void loop_print_percentiles(const hist_t *h, int json)
{
    for (int i = 0; i < 5; i++) {
        uint64_t us = hist_percentile(h, PCT[i]);
        if (json)
            printf("%s\"%s\":%" PRIu64, i ? "," : "", PCT_NAME[i], us);
        else
            printf(" %10.3f", (double)us / 1000.0);
    }
}

static void print_latency(const char *name, const hist_t *h, int json)
{
    if (json)
        printf("\"%s\":{", name);
    else
        printf("  %-8s", name);
    loop_print_percentiles(h, json);
    printf(json ? "}" : "\n");
}

void loop_print_report(const loop_report_t *r, int json)
{
    double bps = (double)r->batches / r->secs, cps = (double)r->calls / r->secs;
    const char *mode = r->rate > 0 ? "open" : "closed";
    if (json) {
        printf("{\"url\":\"%s\",\"mode\":\"%s\",\"rate\":%g,\"batch\":%d,\"connections\":%d,"
               "\"duration_s\":%.3f,\"warmup_s\":%g,\"batches\":%" PRIu64 ",\"calls\":%" PRIu64
               ",\"batches_per_s\":%.1f,\"calls_per_s\":%.1f,\"latency_us\":{",
               r->url, mode, r->rate, r->batch, r->conns, r->secs, r->warmup, r->batches, r->calls,
               bps, cps);
        print_latency("batch", r->batch_h, 1);
        if (r->call_h) {
            printf(",");
            print_latency("call", r->call_h, 1);
        }
        if (r->first_h) {
            printf(",");
            print_latency("first", r->first_h, 1);
        }
        printf("},");
        return;
    }
    printf("%s %s: %s loop", r->who, r->url, mode);
    if (r->rate > 0)
        printf(" at %g batches/s", r->rate);
    printf(", batch %d, %d connections, %.2f s measured (after %g s warm-up)\n", r->batch,
           r->conns, r->secs, r->warmup);
    printf("  batches %" PRIu64 " (%.1f/s), calls %" PRIu64 " (%.1f/s)\n", r->batches, bps,
           r->calls, cps);
    printf("  latency ms        p50        p90        p99      p99.9        max\n");
    print_latency("batch", r->batch_h, 0);
    if (r->call_h)
        print_latency("call", r->call_h, 0);
    if (r->first_h)
        print_latency("first", r->first_h, 0);
}

void loop_conn_record(loop_conn_t *c, uint64_t us, int calls)
{
    c->batches++;
    c->calls += (uint64_t)calls;
    hist_record(&c->batch_h, us, 1);
}

static loop_conn_t *conn_at(void *conns, size_t size, int k)
{
    return (loop_conn_t *)((char *)conns + (size_t)k * size);
}

int loop_start(void *conns, size_t size, int n, void *(*fn)(void *), const char *who)
{
    for (int k = 0; k < n; k++) {
        loop_conn_t *c = conn_at(conns, size, k);
        c->idx = k;
        hist_init(&c->batch_h);
        hist_init(&c->call_h);
        hist_init(&c->first_h);
        if (pthread_create(&c->tid, NULL, fn, c) != 0) {
            fprintf(stderr, "%s: cannot start thread %d\n", who, k);
            return -1;
        }
    }
    return 0;
}

double loop_join(void *conns, size_t size, int n, loop_conn_t *tot, double since)
{
    memset(tot, 0, sizeof *tot);
    hist_init(&tot->batch_h);
    hist_init(&tot->call_h);
    hist_init(&tot->first_h);
    double last = since;
    for (int k = 0; k < n; k++) {
        loop_conn_t *c = conn_at(conns, size, k);
        pthread_join(c->tid, NULL);
        hist_merge(&tot->batch_h, &c->batch_h);
        hist_merge(&tot->call_h, &c->call_h);
        hist_merge(&tot->first_h, &c->first_h);
        tot->batches += c->batches;
        tot->calls += c->calls;
        if (c->finished > last)
            last = c->finished;
    }
    return last;
}
