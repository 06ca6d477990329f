/* jrpc_broker — the transport-independent heart of the broker: a body in,
 * exactly one reply out.
 *
 * A front end (ZeroMQ, HTTP) hands over a request body; the broker parses it
 * (jrpc_batch), dispatches its calls (jrpc_workers), fills the answers as
 * they come back in any order, keyed by its own sequence numbers, answers
 * what passes its deadline with -32003, and calls the front end's reply
 * function exactly once with the whole reply. */
#ifndef JRPC_BROKER_H
#define JRPC_BROKER_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "jrpc_batch.h"
#include "jrpc_workers.h"

typedef struct jrpc_broker jrpc_broker_t;
typedef struct bbatch jrpc_body_t;   /* one submitted body, until its reply */

typedef struct jrpc_broker_opts {
    jrpc_limits_t       limits;      /* what a body may contain */
    uint32_t            timeout_ms;  /* deadline of every call, and the cap on a client's */
    uint32_t            max_open;    /* bodies waiting for answers before -EBUSY */
    jrpc_workers_opts_t workers;     /* the worker side */
} jrpc_broker_opts_t;

/* Receives the reply of one body: JSON text, or len == 0 when the body held
 * only notifications (nothing to return). reply is valid during the call. */
typedef void (*jrpc_reply_fn)(void *ctx, const char *reply, size_t len);

/* Creates the broker and binds its worker socket. NULL on failure (logged). */
jrpc_broker_t *jrpc_broker_new(uv_loop_t *loop, const jrpc_broker_opts_t *opts);

/* Frees the broker; batches still open are dropped without a reply, so call
 * it after jrpc_broker_drain() has reported an empty broker. */
void jrpc_broker_destroy(jrpc_broker_t **self_p);

/* Takes one request body (copied; the caller keeps its buffer). timeout_ms
 * is the client's own deadline, 0 for the broker's; it is capped by the
 * broker's. fn(ctx, ...) is called exactly once, possibly before this
 * function returns (a body that needs no worker). When handle is not NULL,
 * *handle is set before fn can run and stays valid until fn has been called:
 * it is what jrpc_broker_cancel() takes.
 * Returns 0; -EBUSY when max_open bodies are already waiting (overload:
 * answer "server busy" at once), or -ENOMEM. On error fn is not called and
 * the caller answers on its own. */
int jrpc_broker_submit(jrpc_broker_t *b, const char *body, size_t len, uint32_t timeout_ms,
                       jrpc_reply_fn fn, void *ctx, jrpc_body_t **handle);

/* The client of a submitted body is gone (an HTTP connection closed): its
 * calls are cancelled at the workers (late answers are dropped and counted)
 * and fn will never be called. Only valid before fn has been called. */
void jrpc_broker_cancel(jrpc_broker_t *b, jrpc_body_t *handle);

/* Calls on_empty (once) as soon as no body is waiting for answers. */
void jrpc_broker_drain(jrpc_broker_t *b, void (*on_empty)(void *arg), void *arg);

typedef struct jrpc_broker_stats {
    uint64_t bodies;        /* bodies submitted */
    uint64_t calls;         /* calls dispatched to workers */
    uint64_t timeouts;      /* calls answered -32003 */
    uint64_t cancelled;     /* bodies whose client left before the reply */
    uint64_t busy;          /* bodies refused with -EBUSY */
    uint32_t open;          /* bodies waiting for answers */
} jrpc_broker_stats_t;

void jrpc_broker_stats(const jrpc_broker_t *b, jrpc_broker_stats_t *st,
                       jrpc_workers_stats_t *wst);

#endif
