/* jrpc_client_failover — the pure part of a client with several brokers
 * (issue 34, "Calls that survive a broker's death"): splitting the URL list,
 * the order in which the brokers are tried for one body, and what a failed
 * attempt means for the body (try the next broker, or stop with "may or may
 * not have run"). No socket, no clock, no resolver: jrpc_client.c does the
 * calls and passes the times in. Internal to libjrpc-client. */
#ifndef JRPC_CLIENT_FAILOVER_H
#define JRPC_CLIENT_FAILOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JRPC_FAILOVER_MAX       64    /* brokers of one client (names resolved included) */
#define JRPC_FAILOVER_COOL_MS   2000  /* a broker that failed is tried last this long */
#define JRPC_FAILOVER_CLAIM_MS  4800  /* a lost run's claim on its key lasts >= 5 s
                                         from when the body first left */
#define JRPC_FAILOVER_MIN_MS    100   /* a resend with less time than this is not sent */

/* Splits list ("url1,url2,..."; spaces around a comma are skipped) in place:
 * each URL's start is stored in urls[] and its end turned into a NUL.
 * Returns the count (1..max), or -EINVAL for an empty list, an empty item,
 * or more than max items. list is modified (the caller's copy). */
int jrpc_failover_split(char *list, char **urls, size_t max);

/* The order in which to try n brokers for one body: start first, then the
 * ones after it in turn, those that failed within JRPC_FAILOVER_COOL_MS of
 * now_ms (failed_at[i], 0: never) moved to the end in the same turn order.
 * Writes n indexes into order. */
void jrpc_failover_order(size_t n, size_t start, const int64_t *failed_at, int64_t now_ms,
                         size_t *order);

/* What to do after one attempt failed with rc (< 0). */
typedef enum jrpc_failover_next {
    JRPC_FAILOVER_STOP = 0,   /* return rc as is: not a broker failure (no memory,
                                 a bad header, a signal, TLS refused ...) */
    JRPC_FAILOVER_NEXT,       /* the body never reached the broker: try the next */
    JRPC_FAILOVER_RESEND,     /* it reached it and the connection died (or no
                                 answer came): safe, so send it to the next */
    JRPC_FAILOVER_MAY_HAVE_RUN, /* it reached it, not safe: the call may or may
                                   not have run; stop */
} jrpc_failover_next_t;

/* The decision for an attempt that failed with rc: sent says whether the
 * body may have reached the broker (the transport's word), safe whether a
 * resend cannot run it twice (it carries an idempotency key, or the caller
 * marked it retryable). Connection failures (-ECONNREFUSED, -ECONNRESET,
 * -EPIPE, -ETIMEDOUT, -EHOSTUNREACH, ...) move on; anything else stops. */
jrpc_failover_next_t jrpc_failover_decide(int rc, bool sent, bool safe);

/* The timeout for resending a body that first left at t0_ms (its run lost
 * at a broker that may still hold its idempotency key) at now_ms: the
 * caller's timeout_ms, shortened so that the resend's deadline ends before
 * the lost run's claim could. Returns it, or 0 when it is below
 * JRPC_FAILOVER_MIN_MS (too late to send it again safely). */
int jrpc_failover_resend_ms(int timeout_ms, int64_t t0_ms, int64_t now_ms);

/* Whether reply is a whole-body -32008 saying the first run under the key
 * is still running (the broker's words "still running"): the lost run may
 * have reached a worker and must not be run again. */
bool jrpc_failover_still_running(const char *reply, size_t len);

#endif
