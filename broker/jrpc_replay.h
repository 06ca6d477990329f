/* jrpc_replay — replay protection: nonces claimed in Redis, shared by every
 * broker replica.
 *
 * One atomic command per body, whatever the batch size:
 *     SET jrpc:nonce:<key id>:<nonce> 1 NX EX <2 × window>
 * A fresh nonce is claimed; a nonce seen before (by any broker on that
 * Redis) is a replay. hiredis' async API runs in the broker's libuv loop.
 * Redis down, slow or answering nonsense fails closed (the caller answers
 * 503); the module reconnects by itself with backoff. */
#ifndef JRPC_REPLAY_H
#define JRPC_REPLAY_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>
#include "jrpc_buf.h"

typedef struct jrpc_replay jrpc_replay_t;

typedef struct jrpc_replay_opts {
    const char *url;          /* redis://[user:password@]host:port[/db] or unix:///path */
    uint32_t    window_s;     /* the timestamp window (--skew); keys live 2 × this */
    uint32_t    timeout_ms;   /* a command not answered within this fails (and reconnects) */
} jrpc_replay_opts_t;

/* Validates the URL (-EINVAL with a message in err) and starts connecting
 * (the connection may come up later). NULL on error. */
jrpc_replay_t *jrpc_replay_new(uv_loop_t *loop, const jrpc_replay_opts_t *opts,
                               char *err, size_t errlen);
/* Only the URL check of jrpc_replay_new(), for --check-config: 0, or
 * -EINVAL / -ENOMEM with a message in err ("--redis: ...", never the URL,
 * which may hold a password). Connects nothing. */
int jrpc_replay_check_url(const char *url, char *err, size_t errlen);

/* Fails pending claims with -ECANCELED, closes, frees from close callbacks. */
void jrpc_replay_destroy(jrpc_replay_t **self_p);

/* Called exactly once per claim: rc 0 = fresh (claimed now), -EEXIST =
 * replay, -EAGAIN = Redis unavailable (down, timed out, error reply),
 * -ECANCELED = module destroyed. */
typedef void (*jrpc_replay_cb)(void *arg, int rc);

/* Claims key:nonce. Never blocks; cb runs later (never inside this call).
 * Returns 0, or -EAGAIN at once when Redis is known to be down (cb is then
 * not called), or -ENOMEM. */
int jrpc_replay_claim(jrpc_replay_t *r, jrpc_span_t key, jrpc_span_t nonce,
                      jrpc_replay_cb cb, void *arg);

/* True while connected and answering. */
bool jrpc_replay_up(const jrpc_replay_t *r);

typedef struct jrpc_replay_stats {
    uint64_t claims;       /* fresh nonces */
    uint64_t replays;      /* -EEXIST */
    uint64_t failures;     /* -EAGAIN given */
    uint64_t reconnects;
    uint64_t rtt_us_sum;   /* round-trip time of answered commands, summed */
    uint64_t rtt_count;
} jrpc_replay_stats_t;

void jrpc_replay_stats(const jrpc_replay_t *r, jrpc_replay_stats_t *st);

#endif
