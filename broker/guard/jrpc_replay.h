/* jrpc_replay — replay protection: nonces claimed in Redis, shared by every
 * broker replica, and an epoch that tells when Redis lost its memory.
 *
 * One atomic round trip per body, whatever the batch size (and one script
 * call for the claims of every body read in the same loop turn): a Lua
 * script (EVALSHA) that checks the epoch key `jrpc:epoch` is still the one
 * this broker knows and then does
 *     SET jrpc:nonce:<key id>:<nonce> 1 NX EX <2 × window>
 * A fresh nonce is claimed; a nonce seen before (by any broker on that
 * Redis) is a replay. When the epoch is missing or different, Redis has
 * lost nonces (restart without persistence, FLUSHALL, an empty replica):
 * bodies signed at or before "loss + window" are refused from then on
 * (-ESTALE), since they may have been claimed before the loss. Our own
 * small client on libuv (hiredis' non-blocking context and reply reader,
 * not its async API): Redis down, slow, answering nonsense or out of step
 * (a reply no command is waiting for) fails closed (the caller answers
 * 503); the module drops the connection and reconnects by itself with
 * backoff. With sentinel:// every (re)connection first finds the master
 * through Sentinel (jrpc_sentinel.h). docs/SIGNING.md states what is
 * promised. */
#ifndef JRPC_REPLAY_H
#define JRPC_REPLAY_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>
#include "jrpc_buf.h"

typedef struct jrpc_replay jrpc_replay_t;

typedef struct jrpc_replay_opts {
    const char *url;          /* redis://, unix:// or sentinel:// (jrpc_sentinel.h) */
    const char *password_file;/* the master's password, first line (NULL: none or in the URL) */
    uint32_t    window_s;     /* the timestamp window (--skew); keys live 2 × this */
    uint32_t    timeout_ms;   /* a command not answered within this fails (and reconnects) */
    uint32_t    wait_replicas;/* a claim is fresh only once WAIT counts this many replicas */
} jrpc_replay_opts_t;

/* Validates the URL and reads the password file (-EINVAL with a message in
 * err) and starts connecting (the connection may come up later). NULL on
 * error. */
jrpc_replay_t *jrpc_replay_new(uv_loop_t *loop, const jrpc_replay_opts_t *opts,
                               char *err, size_t errlen);
/* Only the checks of jrpc_replay_new(), for the option table and
 * --check-config: the URL, and the password file when not NULL. 0, or
 * -EINVAL / -ENOMEM with a message in err ("--redis: ...", never the URL
 * nor a password). Connects nothing. */
int jrpc_replay_check_url(const char *url, const char *password_file, char *err, size_t errlen);

/* Fails pending claims with -ECANCELED, closes, frees from close callbacks. */
void jrpc_replay_destroy(jrpc_replay_t **self_p);

/* Called exactly once per claim: rc 0 = fresh (claimed now, and with
 * wait_replicas N, WAIT counted at least N replicas that have it), -EEXIST =
 * replay, -ESTALE = Redis lost its memory and the body is signed too early
 * to tell (see jrpc_replay_refuse_to), -EAGAIN = Redis unavailable (down,
 * being found through Sentinel, not a master, timed out, error reply,
 * protocol out of step, fewer replicas than asked), -ECANCELED = module
 * destroyed. */
typedef void (*jrpc_replay_cb)(void *arg, int rc);

/* Claims key:nonce for a body signed at ts (Unix seconds, as checked by
 * jrpc_auth). Never blocks; cb runs later (never inside this call).
 * Returns 0, or at once (cb is then not called): -EAGAIN when Redis is
 * known to be down, -ESTALE when ts <= jrpc_replay_refuse_to(), -ENOMEM. */
int jrpc_replay_claim(jrpc_replay_t *r, jrpc_span_t key, jrpc_span_t nonce, int64_t ts,
                      jrpc_replay_cb cb, void *arg);

/* The rate limit a claim also checks (jrpc_rate.h): who is limited, what
 * the body costs (n × 1 s / rate) and the burst (burst × 1 s / rate), both
 * in microseconds. */
typedef struct jrpc_replay_rate {
    jrpc_span_t who;        /* key id, or "addr:<ip>"; the Redis key jrpc:rate:<who> */
    uint64_t    cost_us;
    uint64_t    burst_us;
} jrpc_replay_rate_t;

/* As jrpc_replay_cb, and rc -EDQUOT = over the rate limit, wait_us the
 * microseconds until the body would pass (Redis' clock). */
typedef void (*jrpc_replay_admit_cb)(void *arg, int rc, uint64_t wait_us);

/* jrpc_replay_claim and the rate limit in the same round trip: the nonce
 * first (a replay costs nothing), then GCRA on jrpc:rate:<who>; a body the
 * rate refuses gets its nonce released. nonce.n == 0: the rate limit alone
 * (a body without a signature; key and ts are not read, no epoch check, no
 * WAIT). rate NULL: jrpc_replay_claim. Returns as jrpc_replay_claim. */
int jrpc_replay_admit(jrpc_replay_t *r, jrpc_span_t key, jrpc_span_t nonce, int64_t ts,
                      const jrpc_replay_rate_t *rate, jrpc_replay_admit_cb cb, void *arg);

/* Idempotency keys (docs/SIGNING.md "Idempotency keys"), under
 * jrpc:idem:<who>:<key> (who: a key id or "addr:<ip>", so that one client
 * never reads another's replies). jrpc_replay_idem_claim claims the key for
 * a body of fingerprint fp (64 hex: the SHA-256 of its bytes) for run_ms;
 * cb later gets rc 0 (claimed: run the body, then store its reply), 1 (it
 * ran already: reply[0..n) is its stored reply), -EBUSY (running, under
 * another claim: ask again later), -EILSEQ (the key holds another body),
 * -EAGAIN (Redis unavailable). jrpc_replay_idem_store keeps a body's reply
 * (at most JRPC_REPLAY_IDEM_MAX bytes: -EMSGSIZE) for ttl_s seconds; no
 * callback (a failure is logged). Both return 0, -EAGAIN when Redis is
 * known down, -ENOMEM. */
#define JRPC_REPLAY_IDEM_MAX (8u << 20)
typedef void (*jrpc_replay_idem_cb)(void *arg, int rc, const char *reply, size_t n);
int jrpc_replay_idem_claim(jrpc_replay_t *r, jrpc_span_t who, jrpc_span_t key,
                           const char fp[64], uint32_t run_ms, jrpc_replay_idem_cb cb, void *arg);
int jrpc_replay_idem_store(jrpc_replay_t *r, jrpc_span_t who, jrpc_span_t key, const char fp[64],
                           const char *reply, size_t len, uint32_t ttl_s);

/* Bodies signed at or before this Unix second are refused (-ESTALE): the
 * last loss of Redis' memory this broker knows of, plus the window.
 * INT64_MIN when no loss is known. */
int64_t jrpc_replay_refuse_to(const jrpc_replay_t *r);

/* When Redis last lost its memory as far as this broker knows (the epoch's
 * time, broker clocks), 0 when never. */
int64_t jrpc_replay_lost_at(const jrpc_replay_t *r);

/* True while connected and answering. */
bool jrpc_replay_up(const jrpc_replay_t *r);

typedef struct jrpc_replay_stats {
    uint64_t claims;       /* fresh nonces */
    uint64_t replays;      /* -EEXIST */
    uint64_t failures;     /* -EAGAIN given */
    uint64_t stale;        /* -ESTALE given (signed before a loss of Redis' memory) */
    uint64_t limited;      /* -EDQUOT given (over a rate limit) */
    uint64_t epoch_changes;/* losses of Redis' memory noticed */
    uint64_t reconnects;
    uint64_t wait_short;   /* fresh claims refused: WAIT counted too few replicas (in failures) */
    uint64_t masters_found;/* Sentinel rounds that gave an address */
    uint64_t rtt_us_sum;   /* round-trip time of answered commands, summed */
    uint64_t rtt_count;
} jrpc_replay_stats_t;

void jrpc_replay_stats(const jrpc_replay_t *r, jrpc_replay_stats_t *st);

#endif
