/* jrpc_stop — how the worker programs (jrpc-worker, jrpc-stdio) take
 * signals: the first SIGINT or SIGTERM drains (jrpc_worker_drain, at most
 * drain_timeout_ms, with STOPPING=1 to systemd), a second of either stops
 * at once (jrpc_worker_stop); SIGHUP is logged and ignored — a worker has
 * nothing to reload, and a closed terminal must not kill it
 * (docs/CONFIG.md, "Signals"). Not part of libjrpc-worker's API: the
 * programs' shared piece. */
#ifndef JRPC_STOP_H
#define JRPC_STOP_H

#include <stdint.h>
#include <uv.h>
#include "jrpc_worker.h"

typedef struct jrpc_stop {
    uv_signal_t    sig[3];            /* SIGINT, SIGTERM, SIGHUP */
    jrpc_worker_t *w;
    uint32_t       drain_timeout_ms;
    int            signals;           /* SIGINT and SIGTERM received so far */
} jrpc_stop_t;

/* Starts the three watchers on loop (the worker's). */
void jrpc_stop_start(jrpc_stop_t *s, uv_loop_t *loop, jrpc_worker_t *w, uint32_t drain_timeout_ms);
/* Closes them (their close callbacks run at the loop's next turn). */
void jrpc_stop_close(jrpc_stop_t *s);

#endif
