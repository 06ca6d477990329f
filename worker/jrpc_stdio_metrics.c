/* jrpc_stdio_metrics — jrpc-stdio's answers to the admin listener (--admin).
 *
 * /metrics: Prometheus text of the bridge and of each slot's children
 * (docs/STDIO.md, "Metrics"); /readyz: why the bridge is not ready, if it
 * is not. Reads the bridge's state, changes nothing.
 *
 * Not here: the counting (where it happens: jrpc_stdio_calls.c,
 * jrpc_stdio_child.c), the listener (io/jrpc_admin). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "jrpc_stdio_int.h"

/* ---- /metrics and /readyz (--admin) ---- */

static int put(jrpc_buf_t *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int put(jrpc_buf_t *out, const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    return jrpc_buf_append(out, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

#define COUNTER(name, help, field)                                                          \
    do {                                                                                    \
        rc |= put(out, "# HELP " name " " help "\n# TYPE " name " counter\n");               \
        for (unsigned i = 0; i < b->procs; i++)                                             \
            rc |= put(out, name "{slot=\"%u\"} %llu\n", i,                                  \
                      (unsigned long long)b->children[i].field);                            \
    } while (0)

/* Prometheus text 0.0.4 (docs/STDIO.md, "Metrics"). */
int write_metrics(void *arg, jrpc_buf_t *out)
{
    bridge_t *b = arg;
    int rc = 0;
    rc |= put(out, "# HELP jrpc_stdio_children Children the bridge runs (--procs).\n"
                   "# TYPE jrpc_stdio_children gauge\njrpc_stdio_children %u\n", b->procs);
    rc |= put(out, "# HELP jrpc_stdio_children_alive Children up and taking calls.\n"
                   "# TYPE jrpc_stdio_children_alive gauge\njrpc_stdio_children_alive %u\n",
              children_up(b));
    rc |= put(out, "# HELP jrpc_stdio_not_ready 1 while the restart budget is spent.\n"
                   "# TYPE jrpc_stdio_not_ready gauge\njrpc_stdio_not_ready %d\n", b->not_ready);
    rc |= put(out, "# HELP jrpc_stdio_queued Calls waiting for a child's window.\n"
                   "# TYPE jrpc_stdio_queued gauge\njrpc_stdio_queued %u\n", b->queue.n);
    rc |= put(out, "# HELP jrpc_stdio_child_up The slot's child (pid) is up.\n"
                   "# TYPE jrpc_stdio_child_up gauge\n");
    for (unsigned i = 0; i < b->procs; i++)
        rc |= put(out, "jrpc_stdio_child_up{slot=\"%u\",pid=\"%d\"} %d\n", i,
                  b->children[i].pid, b->children[i].state == CHILD_UP);
    rc |= put(out, "# HELP jrpc_stdio_inflight Calls a slot's child holds.\n"
                   "# TYPE jrpc_stdio_inflight gauge\n");
    for (unsigned i = 0; i < b->procs; i++)
        rc |= put(out, "jrpc_stdio_inflight{slot=\"%u\"} %u\n", i, b->children[i].held.n);
    COUNTER("jrpc_stdio_restarts_total", "Restarts of the slot's child.", restarts);
    COUNTER("jrpc_stdio_calls_total", "Answers the slot's children gave (late ones too).", calls);
    COUNTER("jrpc_stdio_call_errors_total", "Answers that were error objects.", errors);
    COUNTER("jrpc_stdio_calls_lost_total", "Calls answered -32004 when a child was lost.", lost);
    COUNTER("jrpc_stdio_calls_late_total", "Calls answered -32003 at their deadline.", late);
    COUNTER("jrpc_stdio_child_skipped_total", "Messages of a child logged and skipped "
            "(not JSON, unknown id, too big, requests).", hostile);
    rc |= put(out, "# HELP jrpc_stdio_answer_seconds A child's answer time, from the write of "
                   "the call to the read of the answer.\n"
                   "# TYPE jrpc_stdio_answer_seconds histogram\n");
    for (unsigned i = 0; i < b->procs; i++) {
        const child_t *c = &b->children[i];
        uint64_t cum = 0;
        for (size_t k = 0; k < NLAT; k++) {
            cum += c->lat[k];
            rc |= put(out, "jrpc_stdio_answer_seconds_bucket{slot=\"%u\",le=\"%g\"} %llu\n", i,
                      lat_le[k], (unsigned long long)cum);
        }
        cum += c->lat[NLAT];
        rc |= put(out, "jrpc_stdio_answer_seconds_bucket{slot=\"%u\",le=\"+Inf\"} %llu\n"
                       "jrpc_stdio_answer_seconds_sum{slot=\"%u\"} %.6f\n"
                       "jrpc_stdio_answer_seconds_count{slot=\"%u\"} %llu\n",
                  i, (unsigned long long)cum, i, (double)c->lat_sum_us / 1e6, i,
                  (unsigned long long)cum);
    }
    return rc < 0 ? -ENOMEM : 0;
}

const char *bridge_not_ready(void *arg)
{
    bridge_t *b = arg;
    if (b->stop.signals > 0)
        return "draining";
    if (b->not_ready)
        return "restart budget spent";
    if (children_up(b) == 0)
        return "no child up";
    bool ready = false;
    for (unsigned i = 0; i < b->procs; i++)
        ready = ready || (b->children[i].state == CHILD_UP && b->children[i].ready);
    if (!ready)
        return "no child initialized (--mcp)";
    return NULL;
}
