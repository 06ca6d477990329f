/* jrpc_admin — the admin listener (--admin HOST:PORT), apart from the RPC
 * ports: GET /metrics (Prometheus text 0.0.4), GET /healthz, GET /readyz.
 *
 * A deliberately small HTTP/1.1 server: GET and HEAD only, no request
 * bodies, heads of at most 4 KiB, one answer at a time per connection
 * (keep-alive and pipelining work, served in order), a bounded number of
 * connections, and a deadline on every request. Requests are read by the
 * RPC front's reader (http/jrpc_http_reader: the same RFC 9112 checks) and
 * answered with its response heads (http/jrpc_http_response). Anything else
 * gets 400, 404, 405, 431 or 505 and, for what cannot be framed, a closed
 * connection. */
#ifndef JRPC_ADMIN_H
#define JRPC_ADMIN_H

#include <stdint.h>
#include <uv.h>
#include "jrpc_broker.h"

typedef struct jrpc_admin jrpc_admin_t;

typedef struct jrpc_admin_opts {
    const char *listen;        /* "HOST:PORT" or "[V6]:PORT"; port 0 picks one */
    const char *ready_methods; /* "m1,m2": /readyz needs a worker for each;
                                  NULL or "": any worker at all (copied) */
    uint32_t    max_conns;     /* open connections; more are closed at once */
    uint32_t    timeout_ms;    /* a request must arrive whole within this
                                  (also the idle keep-alive limit) */
} jrpc_admin_opts_t;

#define JRPC_ADMIN_OPTS_DEFAULT ((jrpc_admin_opts_t){ .listen = "127.0.0.1:9090", \
                                 .ready_methods = NULL, .max_conns = 64, .timeout_ms = 10000 })

/* Binds opts->listen and serves the broker's metrics and probes; logs
 * event=listening endpoint=admin://... The broker is borrowed: destroy the
 * admin first. opts is copied (its strings too). NULL on failure
 * (logged). */
jrpc_admin_t *jrpc_admin_new(uv_loop_t *loop, jrpc_broker_t *broker, const jrpc_admin_opts_t *opts);

/* Closes the listener and every connection at once (answers not yet
 * written are dropped); never touches the broker again; frees from the
 * close callbacks. NULL-safe; sets *self_p = NULL. */
void jrpc_admin_destroy(jrpc_admin_t **self_p);

#endif
