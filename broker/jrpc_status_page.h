/* jrpc_status_page — what the admin listener shows of the broker beyond
 * /metrics (issue 33): GET /status (the broker as a whole, JSON), the live
 * status page (GET /, /status.js, /status.css: built into the binary from
 * broker/status/), and the ring of the last bodies refused with their
 * reasons, which the broker and the fronts fill.
 *
 * Everything here is built only when asked (an admin request); the one
 * thing on the request path is jrpc_status_page_refused(), a copy into a fixed
 * slot. One loop, one thread: no locks. */
#ifndef JRPC_STATUS_PAGE_H
#define JRPC_STATUS_PAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "jrpc_buf.h"

struct jrpc_broker;

#define JRPC_STATUS_REFUSALS   16   /* refusals kept, newest over oldest */
#define JRPC_STATUS_REASON_MAX 120  /* bytes of a refusal's reason kept */
#define JRPC_STATUS_LISTENERS  8

/* Records one refused body: transport (a jrpc_transport), cls (a
 * jrpc_body_class), its JSON-RPC code and reason (the error's "data" JSON
 * or plain words; NULL: none), copied and cut to JRPC_STATUS_REASON_MAX at
 * a character boundary. No allocation, no system call: the time is the
 * metrics' cached clock. */
void jrpc_status_page_refused(int transport, int cls, int code, const char *reason);

/* Forgets every recorded refusal (tests). */
void jrpc_status_page_refused_clear(void);

typedef struct jrpc_status_page_listener {
    const char *name;      /* "zmq", "workers", "http", "admin" */
    const char *endpoint;  /* as configured (borrowed) */
    bool        tls;       /* TLS on this listener */
} jrpc_status_page_listener_t;

/* What the owner (main.c) knows and the broker does not: borrowed. */
typedef struct jrpc_status_page_info {
    const char *version;
    uint64_t    started_ns;   /* uv_hrtime() at start-up */
    int64_t     started_unix; /* time(NULL) at start-up */
    const char *redis_mode;   /* "redis", "unix", "sentinel", or "none" */
    jrpc_status_page_listener_t listeners[JRPC_STATUS_LISTENERS];
    unsigned    nlisteners;
} jrpc_status_page_info_t;

/* Appends GET /status's JSON object: version, uptime, listeners, Redis and
 * the replay guard (with its memory-loss fence), bodies open, calls queued
 * and queued bytes, workers connected, the refusal ring (newest first) and
 * the broker-wide call latency histogram. b may be NULL (tests: no broker
 * figures). Returns 0 or -ENOMEM. */
int jrpc_status_page_write(jrpc_buf_t *out, struct jrpc_broker *b, const jrpc_status_page_info_t *info);

/* The admin's page hook (jrpc_admin_page_fn) for the broker: "/" (the
 * page), "/status.js", "/status.css", "/status" (jrpc_status_page_write),
 * "/status/workers" and "/status/methods" (the broker's producers).
 * Static assets and JSON answer with Content-Security-Policy (self only)
 * and X-Content-Type-Options. Returns 0, -ENOENT or -ENOMEM. */
int jrpc_status_page_serve(struct jrpc_broker *b, const jrpc_status_page_info_t *info, const char *path,
                     size_t plen, jrpc_buf_t *out, const char **ctype, const char **headers);

#endif
