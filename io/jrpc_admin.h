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
 * connection.
 *
 * What the pages say comes from the owner's hooks (the broker's metrics and
 * readiness in jrpc-broker, the children's in jrpc-stdio; any further GET
 * paths through the optional page hook, the broker's status page and JSON):
 * this module knows HTTP, not the program it reports on. */
#ifndef JRPC_ADMIN_H
#define JRPC_ADMIN_H

#include <stdint.h>
#include <uv.h>
#include "jrpc_buf.h"

typedef struct jrpc_admin jrpc_admin_t;

/* Appends the Prometheus text of GET /metrics to out: 0, or -ENOMEM
 * (answered 503). */
typedef int (*jrpc_admin_metrics_fn)(void *arg, jrpc_buf_t *out);

/* Why the program is not ready (GET /readyz answers 503 "not ready: WHY"),
 * or NULL when it is (200 "ready"). The text need only stay valid until the
 * next call. */
typedef const char *(*jrpc_admin_ready_fn)(void *arg);

/* A page of the owner's: what GET (or HEAD) path[0, plen) answers. Appends
 * the body to out (empty when called, kept by the admin until written) and
 * sets *ctype to its Content-Type (static storage) and *headers to more
 * header lines, each ending CRLF (static storage, at most 256 bytes), or
 * NULL. Returns 0 (200), -ENOENT (404 "not found") or -ENOMEM (503). The
 * path is the request target's path, without the query. Called for paths
 * other than /metrics, /healthz and /readyz only. */
typedef int (*jrpc_admin_page_fn)(void *arg, const char *path, size_t plen, jrpc_buf_t *out,
                                  const char **ctype, const char **headers);

typedef struct jrpc_admin_opts {
    const char *listen;        /* "HOST:PORT" or "[V6]:PORT"; port 0 picks one */
    uint32_t    max_conns;     /* open connections; more are closed at once */
    uint32_t    timeout_ms;    /* a request must arrive whole within this
                                  (also the idle keep-alive limit) */
    jrpc_admin_metrics_fn metrics;    /* required */
    jrpc_admin_ready_fn   not_ready;  /* required */
    jrpc_admin_page_fn    page;       /* optional: more GET paths (NULL: 404) */
    void       *arg;           /* the hooks' (borrowed) */
} jrpc_admin_opts_t;

#define JRPC_ADMIN_OPTS_DEFAULT ((jrpc_admin_opts_t){ .listen = "127.0.0.1:9090", \
                                 .max_conns = 64, .timeout_ms = 10000 })

/* Binds opts->listen and serves the hooks' metrics and probes; logs
 * event=listening endpoint=admin://... The hooks' arg is borrowed: destroy
 * the admin first. opts is copied. NULL on failure (logged). */
jrpc_admin_t *jrpc_admin_new(uv_loop_t *loop, const jrpc_admin_opts_t *opts);

/* Closes the listener and every connection at once (answers not yet
 * written are dropped); never calls the hooks again; frees from the
 * close callbacks. NULL-safe; sets *self_p = NULL. */
void jrpc_admin_destroy(jrpc_admin_t **self_p);

#endif
