/* jrpc_replay — nonces claimed in Redis, one script call per loop turn, and an
 * epoch that tells when Redis lost its memory. This file is what is asked
 * of Redis and what its answers mean, and the API; the link that carries
 * them (connecting, Sentinel, reconnects, writes) is jrpc_redis.c, the
 * claims of one loop turn in one script are jrpc_replay_group.c, over the
 * state in jrpc_replay_int.h.
 *
 * Every claim is one EVALSHA of CLAIM_LUA (alone, or in mode 'm' with the
 * other claims of its loop turn: jrpc_replay_group.c): it reads the epoch
 * key, creates it if missing (SET only when absent, inside the script, so
 * several brokers converge on one value), and claims the nonce only when
 * the epoch is the one this broker knows. The epoch value is "<32 hex>:<unix s>", the
 * seconds being when the broker that wrote it noticed the loss (0 when a
 * broker found a Redis with no epoch at its first connect: a new Redis, as
 * far as anyone can tell). When the epoch differs from ours, Redis lost
 * what we had written (restart without persistence, FLUSHALL, failover to
 * an empty replica): we adopt the new value and refuse every body whose
 * signed timestamp is <= loss + window, since such a body may have been
 * claimed before the loss and still be inside its window. Times are the
 * brokers' wall clocks (the clock that checks the timestamps), never
 * Redis' TIME.
 *
 * --redis-wait-replicas N: a WAIT N follows the claims written in one go
 * (one WAIT per write, however many claims it carries: WAIT waits for
 * every write the connection made before it). A claim the script answered
 * OK waits on the `held` list for that WAIT's count: at least N is fresh,
 * fewer fails closed (-EAGAIN; the nonce stays claimed on the master). */
#include "jrpc_replay_int.h"
#include "jrpc_errors.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>

#include "jrpc_log.h"
#include "jrpc_metrics.h"

#define MAX_BUFFERED (JRPC_REPLAY_IDEM_MAX + (1u << 20)) /* unparsed reply bytes before the
                                  connection is dropped: a stored reply and then some */

/* KEYS[1] the epoch key, KEYS[2] the nonce key or (mode r) the rate key,
 * KEYS[3] (mode nr) the rate key; only KEYS[1]: hello, which only reads or
 * creates the epoch. ARGV: known epoch ("" before the first), proposal
 * (written when the epoch is missing), TTL seconds, tag (echoed so a reply
 * is matched to its command), mode ('n' the nonce, 'nr' the nonce then the
 * rate limit, 'r' the rate limit alone: a body without a nonce), then for
 * the rate limit the cost as microseconds (n × 1 s / rate) and the burst's
 * (burst × 1 s / rate). The rate limit is GCRA on Redis' own clock (TIME:
 * the brokers' clocks need not agree; jrpc_rate.h), the TAT stored as
 * decimal microseconds with a TTL that ends when it is in the past. A nonce
 * is checked before the rate (a replay costs its key nothing) and released
 * when the rate refuses the body (it ran nowhere: the same signed body may
 * come again). Replies: {tag,'OK'}, {tag,'DUP'}, {tag,'EPOCH',value},
 * {tag,'LIMITED',microseconds until it would pass}.
 * Mode 'm' answers several claims at once (the claims of one loop turn:
 * jrpc_replay_group.c). Without ARGV[6] they are nonce
 * claims, KEYS[2..], after the one epoch check: {tag,'MULTI',flags}, flags
 * one character per nonce in KEYS order, '1' claimed now, '0' a replay; or
 * {tag,'EPOCH',value} for all. With ARGV[6], one character per claim says
 * what each is, as the single modes do: 'n' a nonce (one key), 'b' a nonce
 * then a rate limit ('nr': two keys), 'r' a rate limit alone (one key);
 * each claim with a rate limit takes its cost and burst from ARGV[7..], in
 * claim order. Redis' clock is read once. The answer is then {tag,'MULTI',
 * flags,epoch,waits}: a flag per claim, '1' passed, '0' a replay, 'L' over
 * the rate (its nonce released), 'E' a nonce not claimed for the epoch
 * differs (epoch: its value, "" when it matches; a rate limit alone never
 * looks at it), and waits the microseconds of each 'L', space-separated.
 * A rate key several claims share (one client's burst in one loop turn) is
 * read once and written once, after the last of them (its TAT kept in the
 * script meanwhile: the same verdicts as a GET and SET per claim, on one
 * clock; issue 35, Redis' CPU per claim of signed single calls). */
const char CLAIM_LUA[] =
    "local e = redis.call('GET', KEYS[1]) "
    "if not e then redis.call('SET', KEYS[1], ARGV[2]) e = ARGV[2] end "
    "if #KEYS < 2 then return {ARGV[4], 'EPOCH', e} end "
    "local m = ARGV[5] "
    "if m == 'm' and ARGV[6] then "
    "  local ok, f, w, k, a, now, tats, dirty = e == ARGV[1], {}, {}, 2, 7, nil, {}, {} "
    "  for i = 1, #ARGV[6] do "
    "    local c, v, nk = string.sub(ARGV[6], i, i), '1', nil "
    "    if c ~= 'r' then "
    "      nk = KEYS[k] k = k + 1 "
    "      if not ok then v = 'E' "
    "      elseif not redis.call('SET', nk, '1', 'NX', 'EX', ARGV[3]) then v = '0' end "
    "    end "
    "    if c ~= 'n' then "
    "      local rk = KEYS[k] k = k + 1 "
    "      local inc, dvt = tonumber(ARGV[a]), tonumber(ARGV[a + 1]) a = a + 2 "
    "      if v == '1' then "
    "        if not now then "
    "          local t = redis.call('TIME') "
    "          now = tonumber(t[1]) * 1000000 + tonumber(t[2]) "
    "        end "
    "        local tat = tats[rk] "
    "        if not tat then tat = tonumber(redis.call('GET', rk) or '0') or 0 end "
    "        if tat < now then tat = now end "
    "        local nxt = tat + inc "
    "        local over = nxt - now - dvt "
    "        if over > 0 then "
    "          tats[rk] = tat "
    "          if nk then redis.call('DEL', nk) end "
    "          v = 'L' w[#w + 1] = string.format('%.0f', over) "
    "        else "
    "          if not dirty[rk] then dirty[rk] = true dirty[#dirty + 1] = rk end "
    "          tats[rk] = nxt "
    "        end "
    "      end "
    "    end "
    "    f[i] = v "
    "  end "
    "  for _, rk in ipairs(dirty) do "
    "    local nxt = tats[rk] "
    "    redis.call('SET', rk, string.format('%.0f', nxt), 'PX', math.floor((nxt - now) / 1000) + 1) "
    "  end "
    "  return {ARGV[4], 'MULTI', table.concat(f), ok and '' or e, table.concat(w, ' ')} "
    "end "
    "if m == 'm' then "
    "  if e ~= ARGV[1] then return {ARGV[4], 'EPOCH', e} end "
    "  local f = {} "
    "  for i = 2, #KEYS do "
    "    f[i - 1] = redis.call('SET', KEYS[i], '1', 'NX', 'EX', ARGV[3]) and '1' or '0' "
    "  end "
    "  return {ARGV[4], 'MULTI', table.concat(f)} "
    "end "
    "if m ~= 'r' then "
    "  if e ~= ARGV[1] then return {ARGV[4], 'EPOCH', e} end "
    "  if not redis.call('SET', KEYS[2], '1', 'NX', 'EX', ARGV[3]) then "
    "    return {ARGV[4], 'DUP'} end "
    "end "
    "if m ~= 'n' then "
    "  local k = KEYS[#KEYS] "
    "  local t = redis.call('TIME') "
    "  local now = tonumber(t[1]) * 1000000 + tonumber(t[2]) "
    "  local tat = tonumber(redis.call('GET', k) or '0') or 0 "
    "  if tat < now then tat = now end "
    "  local nxt = tat + tonumber(ARGV[6]) "
    "  local over = nxt - now - tonumber(ARGV[7]) "
    "  if over > 0 then "
    "    if m ~= 'r' then redis.call('DEL', KEYS[2]) end "
    "    return {ARGV[4], 'LIMITED', string.format('%.0f', over)} "
    "  end "
    "  redis.call('SET', k, string.format('%.0f', nxt), 'PX', math.floor((nxt - now) / 1000) + 1) "
    "end "
    "return {ARGV[4], 'OK'}";

/* Idempotency keys (jrpc_replay_idem_*): KEYS[1] jrpc:idem:<who>:<key>;
 * ARGV tag, the body's fingerprint (64 hex), how long a run may hold the
 * key (ms). The value is "run:<fp>" while the body runs, "done:<fp>:<the
 * reply>" once it answered (jrpc_replay_idem_store, with --idempotency-ttl).
 * Replies: {tag,'RUN'} (claimed now: run it), {tag,'WAIT'} (running
 * elsewhere), {tag,'MISMATCH'} (another body under this key), {tag,'DONE',
 * reply}. Loaded at each connection with CLAIM_LUA and sent with EVALSHA;
 * after NOSCRIPT (SCRIPT FLUSH) the claim fails closed and the next
 * connection loads both again (script_error), as for the nonce claims. */
const char IDEM_LUA[] =
    "local v = redis.call('GET', KEYS[1]) "
    "if not v then "
    "  redis.call('SET', KEYS[1], 'run:' .. ARGV[2], 'PX', ARGV[3]) "
    "  return {ARGV[1], 'RUN'} "
    "end "
    "local run = string.sub(v, 1, 4) == 'run:' "
    "local fp = run and string.sub(v, 5, 68) or string.sub(v, 6, 69) "
    "if fp ~= ARGV[2] then return {ARGV[1], 'MISMATCH'} end "
    "if run then return {ARGV[1], 'WAIT'} end "
    "return {ARGV[1], 'DONE', string.sub(v, 71)}";

/* ---- replies ------------------------------------------------------------- */

/* Checks a script reply {tag, word[, value]} for pending p. Returns the
 * word's element (OK, DUP, EPOCH) or NULL when the reply is not an answer to
 * p: a desynchronised connection. */
const redisReply *script_word(const redisReply *rep, const pending_t *p)
{
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 2 || rep->elements > 5)
        return NULL;
    const redisReply *tag = rep->element[0], *word = rep->element[1];
    char want[24];
    snprintf(want, sizeof want, "%llu", (unsigned long long)p->tag);
    if (tag->type != REDIS_REPLY_STRING || !str_is(tag, want) || word->type != REDIS_REPLY_STRING)
        return NULL;
    if (rep->elements == 2 && (str_is(word, "OK") || str_is(word, "DUP")))
        return word;
    if (rep->elements == 3 &&
        (str_is(word, "EPOCH") || str_is(word, "LIMITED") || str_is(word, "MULTI")) &&
        rep->element[2]->type == REDIS_REPLY_STRING)
        return word;
    if (rep->elements == 5 && str_is(word, "MULTI") &&   /* claims of every kind (mode 'm') */
        rep->element[2]->type == REDIS_REPLY_STRING &&
        rep->element[3]->type == REDIS_REPLY_STRING && rep->element[4]->type == REDIS_REPLY_STRING)
        return word;
    return NULL;
}

/* The seconds after the last ':' of an epoch value, or -1 when malformed. */
static int64_t epoch_time(const char *v, size_t n)
{
    const char *colon = NULL;
    for (size_t i = 0; i < n; i++)
        if (v[i] == ':')
            colon = v + i;
    if (colon == NULL || colon + 1 == v + n || v + n - colon - 1 > 18)
        return -1;
    int64_t t = 0;
    for (const char *p = colon + 1; p < v + n; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        t = t * 10 + (*p - '0');
    }
    return t;
}

/* Takes the epoch value Redis holds now. Returns 0, or -EPROTO when the
 * value cannot be ours to send back (empty or too long). */
int adopt_epoch(jrpc_replay_t *r, const char *v, size_t n)
{
    if (n == 0 || n > EPOCH_MAX || memchr(v, '\0', n) != NULL)
        return -EPROTO;
    if (r->had_epoch && strlen(r->epoch) == n && memcmp(r->epoch, v, n) == 0)
        return 0;
    int64_t now = (int64_t)time(NULL);
    int64_t t = epoch_time(v, n);
    /* The loss happened before we read this, so never later than now: a
     * writer whose clock runs ahead (or a bogus value) cannot make us
     * refuse for longer than one window from now. On our first connect a
     * time of 0 means "never lost" (a new Redis, as far as anyone knows);
     * once we knew an epoch, a different one means lost by now at the latest. */
    int64_t lost;
    if (t < 0 || t > now)
        lost = now;
    else if (t == 0)
        lost = r->had_epoch ? now : 0;
    else
        lost = t;
    memcpy(r->epoch, v, n);
    r->epoch[n] = '\0';
    bool changed = r->had_epoch;
    r->had_epoch = true;
    if (lost > 0) {
        int64_t until = lost + (int64_t)r->window_s;
        if (until > r->refuse_to)
            r->refuse_to = until;
        if (lost > r->lost_at)
            r->lost_at = lost;
        r->st.epoch_changes += changed;
    }
    bool recent = lost > 0 && r->refuse_to >= now - (int64_t)r->window_s;
    JRPC_LOG(changed || recent ? JRPC_LOG_WARN : JRPC_LOG_INFO, COMP,
             "event=%s target=%s lost_at=%lld refuse_signed_until=%lld",
             changed ? "memory_lost" : "epoch", r->target, (long long)(lost > 0 ? lost : 0),
             (long long)(lost > 0 ? r->refuse_to : 0));
    return 0;
}

/* What Redis' error reply to a script (claims and idempotency keys) means:
 * DROP_READONLY (-READONLY: a replica now, a failover demoted it; find the
 * master), DROP_DESYNC (NOSCRIPT: SCRIPT FLUSH; the next connection loads
 * the scripts again), else -EAGAIN (fail this one closed, keep the
 * connection). Logs the first of a connection at WARN. */
int script_error(jrpc_replay_t *r, const redisReply *rep)
{
    int level = r->warned_reply ? JRPC_LOG_DEBUG : JRPC_LOG_WARN;
    r->warned_reply = true;
    JRPC_LOG(level, COMP, "event=error_reply target=%s error=\"%.200s\"", r->target, rep->str);
    if (jrpc_sentinel_is_readonly(rep))
        return DROP_READONLY;
    return strncmp(rep->str, "NOSCRIPT", 8) == 0 ? DROP_DESYNC : -EAGAIN;
}

/* Drops the connection for why (DROP_READONLY or DROP_DESYNC): what was
 * sent on it is unanswered for sure and fails closed with the FIFO. */
void drop_for(jrpc_replay_t *r, int why)
{
    conn_drop(r, why == DROP_READONLY ? "not_master" : "desync",
              why == DROP_READONLY ? "READONLY: Redis is a replica now"
                                   : "a reply that does not answer the command sent");
}

/* The claim's answer: 0, -EEXIST, -EAGAIN, -ESTALE; or DROP_DESYNC when
 * the reply does not answer this claim, DROP_READONLY when Redis says it
 * is not a master (the connection must go either way). */
int claim_result(jrpc_replay_t *r, const redisReply *rep, pending_t *p)
{
    if (rep->type == REDIS_REPLY_ERROR)
        return script_error(r, rep);
    const redisReply *word = script_word(rep, p);
    if (word == NULL)
        return DROP_DESYNC;
    if (str_is(word, "OK"))
        return 0;
    if (str_is(word, "DUP"))
        return -EEXIST;
    if (str_is(word, "MULTI"))   /* the answer to several claims, not to this one */
        return DROP_DESYNC;
    const redisReply *v = rep->element[2];
    if (str_is(word, "LIMITED")) {
        uint64_t us = 0;
        if (!p->rate)   /* an answer to a question not asked */
            return DROP_DESYNC;
        for (size_t i = 0; i < v->len && i < 19; i++) {
            if (v->str[i] < '0' || v->str[i] > '9')
                return DROP_DESYNC;
            us = us * 10 + (uint64_t)(v->str[i] - '0');
        }
        if (v->len == 0 || v->len > 19)
            return DROP_DESYNC;
        p->wait_us = us ? us : 1;
        return -EDQUOT;
    }
    if (adopt_epoch(r, v->str, v->len) < 0)
        return DROP_DESYNC;
    return p->ts <= r->refuse_to ? -ESTALE : -EAGAIN;
}

/* Counts, frees and answers one claim. The callback may claim again or
 * destroy r (which stays allocated until its close callbacks). */
void claim_done(jrpc_replay_t *r, pending_t *p, int rc)
{
    uint64_t rtt_ns = jrpc_metrics_tick() - p->sent_ns;
    jrpc_hist_observe(&jrpc_metrics.redis_rtt, rtt_ns);
    r->st.rtt_us_sum += rtt_ns / 1000;
    r->st.rtt_count++;
    if (rc == 0)
        r->st.claims++;
    else if (rc == -EEXIST)
        r->st.replays++;
    else if (rc == -ESTALE)
        r->st.stale++;
    else if (rc == -EDQUOT)
        r->st.limited++;
    else
        r->st.failures++;
    jrpc_replay_cb cb = p->cb;
    jrpc_replay_admit_cb acb = p->acb;
    void *arg = p->arg;
    uint64_t wait_us = p->wait_us;
    free(p);
    if (acb)
        acb(arg, rc, wait_us);
    else
        cb(arg, rc);
}

static void handle_claim(jrpc_replay_t *r, pending_t *p, const redisReply *rep)
{
    int rc = claim_result(r, rep, p);
    if (rc > 0) {
        /* Unanswered for sure: fail it closed with the rest of the FIFO. */
        drop_for(r, rc);
        claim_done(r, p, -EAGAIN);
        return;
    }
    if (rc == 0 && r->wait_n > 0 && p->nonce) {   /* fresh once its WAIT counts enough replicas */
        pending_append(&r->held, &r->held_tail, p);
        return;
    }
    claim_done(r, p, rc);
}

/* WAIT's reply: how many replicas have every write before it, so every
 * held claim is fresh (enough) or fails closed. */
static void handle_wait(jrpc_replay_t *r, pending_t *p, const redisReply *rep)
{
    free(p);
    if (rep->type != REDIS_REPLY_INTEGER) {
        conn_drop(r, "wait_failed", rep->type == REDIS_REPLY_ERROR ? rep->str : "not a count");
        return;
    }
    pending_t *list = r->held;
    r->held = r->held_tail = NULL;
    int rc = rep->integer >= (long long)r->wait_n ? 0 : -EAGAIN;
    if (rc < 0 && list != NULL) {
        int level = r->st.wait_short == 0 ? JRPC_LOG_WARN : JRPC_LOG_DEBUG;
        JRPC_LOG(level, COMP, "event=wait_short target=%s replicas=%lld want=%u detail=\"fewer "
                 "replicas acknowledged the claims than --redis-wait-replicas: refused (503)\"",
                 r->target, rep->integer, r->wait_n);
    }
    while (list != NULL) {
        pending_t *c = list;
        list = c->next;
        r->st.wait_short += rc < 0;
        claim_done(r, c, rc);
    }
}

/* The answer to an idempotency claim or store. A reply that is not one of
 * the script's (or not +OK to a store) fails it closed and drops the
 * connection, as for claims. */
static void handle_idem(jrpc_replay_t *r, pending_t *p, const redisReply *rep)
{
    int rc = -EAGAIN;
    const char *v = NULL;
    size_t n = 0;
    int drop = DROP_DESYNC;   /* > 0: the connection goes (drop_for) */
    if (p->kind == CMD_STORE) {
        free(p);
        if (rep->type == REDIS_REPLY_ERROR)
            JRPC_LOG(JRPC_LOG_WARN, COMP, "event=idem_store_failed target=%s error=\"%.200s\"",
                     r->target, rep->str);
        else if (rep->type != REDIS_REPLY_STATUS || !str_is(rep, "OK"))
            drop_for(r, DROP_DESYNC);
        return;
    }
    char want[24];
    snprintf(want, sizeof want, "%llu", (unsigned long long)p->tag);
    if (rep->type == REDIS_REPLY_ERROR) {
        drop = script_error(r, rep);
    } else if (rep->type == REDIS_REPLY_ARRAY && (rep->elements == 2 || rep->elements == 3) &&
               rep->element[0]->type == REDIS_REPLY_STRING && str_is(rep->element[0], want) &&
               rep->element[1]->type == REDIS_REPLY_STRING) {
        const redisReply *w = rep->element[1];
        drop = 0;
        if (rep->elements == 2 && str_is(w, "RUN"))
            rc = 0;
        else if (rep->elements == 2 && str_is(w, "WAIT"))
            rc = -EBUSY;
        else if (rep->elements == 2 && str_is(w, "MISMATCH"))
            rc = -EILSEQ;
        else if (rep->elements == 3 && str_is(w, "DONE") &&
                 rep->element[2]->type == REDIS_REPLY_STRING) {
            rc = 1;
            v = rep->element[2]->str;
            n = rep->element[2]->len;
        } else {
            drop = DROP_DESYNC;
        }
    }
    jrpc_replay_idem_cb cb = p->icb;
    void *arg = p->arg;
    free(p);
    if (drop > 0) {
        drop_for(r, drop);
        cb(arg, -EAGAIN, NULL, 0);
        return;
    }
    cb(arg, rc, v, n);
}

/* Matches every complete reply in conn's reader with the head of the FIFO.
 * Stops when the connection is dropped (a callback may even destroy r,
 * which stays allocated until its close callbacks). */
void process_replies(jrpc_replay_t *r, conn_t *conn)
{
    while (r->conn == conn) {
        void *reply = NULL;
        if (redisReaderGetReply(conn->rd, &reply) != REDIS_OK) {
            char why[sizeof conn->rd->errstr];
            snprintf(why, sizeof why, "%s", conn->rd->errstr);
            conn_drop(r, "protocol_error", why);
            return;
        }
        if (reply == NULL)
            break;
        pending_t *p = fifo_pop(r);
        if (p == NULL) {
            freeReplyObject(reply);
            conn_drop(r, "desync", "a reply with no command waiting");
            return;
        }
        if (p->kind == CMD_CLAIM)
            handle_claim(r, p, reply);
        else if (p->kind == CMD_MULTI)
            handle_multi(r, conn, p, reply);
        else if (p->kind == CMD_WAIT)
            handle_wait(r, p, reply);
        else if (p->kind == CMD_IDEM || p->kind == CMD_STORE)
            handle_idem(r, p, reply);
        else
            handle_handshake(r, p, reply);
        freeReplyObject(reply);
    }
    if (r->conn == conn && conn->rd->len - conn->rd->pos > MAX_BUFFERED)
        conn_drop(r, "protocol_error", "reply too large");
}

/* ---- writes -------------------------------------------------------------- */

/* "<id>:<seconds>", what we write when the epoch key is missing: the time
 * Redis lost its memory at the latest (0 before we ever saw an epoch). */
void proposal(const jrpc_replay_t *r, char *buf, size_t n)
{
    time_t now = r->had_epoch ? time(NULL) : 0;
    size_t idn = strlen(r->id);
    assert(n >= idn + 1 + 20 + 1);
    (void)n;
    memcpy(buf, r->id, idn);
    buf[idn] = ':';
    buf[idn + 1 + put_u64(buf + idn + 1, now > 0 ? (uint64_t)now : 0)] = '\0';
}

/* One WAIT after the claims written since the last one (see the top). */
int send_wait(jrpc_replay_t *r)
{
    pending_t *p = calloc(1, sizeof *p);
    if (p == NULL)
        return -ENOMEM;
    p->kind = CMD_WAIT;
    p->sent_ns = uv_hrtime();
    int rc = send_cmd(r, p, "WAIT %u %u", r->wait_n, r->wait_ms);
    if (rc < 0)
        free(p);
    else
        r->unwaited = 0;
    return rc;
}

/* ---- API ----------------------------------------------------------------- */

void free_self(jrpc_replay_t *r)
{
    jrpc_sentinel_destroy(&r->where);
    free(r);
}

int jrpc_replay_check_url(const char *url, const char *password_file, char *err, size_t errlen)
{
    jrpc_sentinel_t *s = NULL;
    int rc = jrpc_sentinel_parse(url, password_file, &s, err, errlen);
    jrpc_sentinel_destroy(&s);
    return rc;
}

static void on_timer_closed(uv_handle_t *h)
{
    jrpc_replay_t *r = h->data;
    if (--r->nclosing == 0)
        free_self(r);
}

jrpc_replay_t *jrpc_replay_new(uv_loop_t *loop, const jrpc_replay_opts_t *opts,
                               char *err, size_t errlen)
{
    assert(loop != NULL && opts != NULL);
    jrpc_errf(err, errlen, "no error");
    if (opts->window_s == 0 || opts->timeout_ms == 0) {
        jrpc_errf(err, errlen, "replay: window_s and timeout_ms must be > 0");
        return NULL;
    }
    unsigned char rnd[16];
    jrpc_replay_t *r = calloc(1, sizeof *r);
    if (r == NULL || init_reply_fns() < 0) {
        free(r);
        jrpc_errf(err, errlen, "replay: out of memory");
        return NULL;
    }
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        free(r);
        jrpc_errf(err, errlen, "replay: getrandom: %s", strerror(errno));
        return NULL;
    }
    if (jrpc_sentinel_parse(opts->url, opts->password_file, &r->where, err, errlen) < 0) {
        free_self(r);
        return NULL;
    }
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(r->id + 2 * i, 3, "%02x", rnd[i]);
    r->loop = loop;
    r->timeout_ns = (uint64_t)opts->timeout_ms * 1000000;
    r->window_s = opts->window_s;
    r->refuse_to = INT64_MIN;
    r->backoff_ms = BACKOFF_MIN_MS;
    r->backoff_max = jrpc_sentinel_enabled(r->where) ? BACKOFF_MAX_SENTINEL_MS : BACKOFF_MAX_MS;
    r->wait_n = opts->wait_replicas;
    r->wait_ms = opts->timeout_ms / 2 > 0 ? opts->timeout_ms / 2 : 1;   /* WAIT 0 never ends */
    snprintf(r->ttl, sizeof r->ttl, "%llu", 2ULL * opts->window_s);
    snprintf(r->dbs, sizeof r->dbs, "%lu", jrpc_sentinel_db(r->where));
    const jrpc_redis_node_t *m = jrpc_sentinel_master(r->where);
    snprintf(r->target, sizeof r->target, "%s", m ? m->name : jrpc_sentinel_node(r->where, 0)->name);
    uv_timer_init(loop, &r->watchdog);
    uv_timer_init(loop, &r->retry);
    uv_check_init(loop, &r->flush);
    uv_idle_init(loop, &r->unblock);
    r->watchdog.data = r->retry.data = r->flush.data = r->unblock.data = r;
    /* Background work: the module alone must not keep the loop alive. */
    uv_unref((uv_handle_t *)&r->watchdog);
    uv_unref((uv_handle_t *)&r->retry);
    uv_unref((uv_handle_t *)&r->flush);
    uv_unref((uv_handle_t *)&r->unblock);
    uv_timer_start(&r->retry, on_retry, 0, 0);
    return r;
}

void jrpc_replay_destroy(jrpc_replay_t **self_p)
{
    if (self_p == NULL || *self_p == NULL)
        return;
    jrpc_replay_t *r = *self_p;
    *self_p = NULL;
    assert(!r->closing);
    r->closing = true;
    pending_t *list = conn_detach(r);
    r->nclosing = 4 + r->nlookups;   /* each lookup still owes its callback */
    uv_close((uv_handle_t *)&r->watchdog, on_timer_closed);
    uv_close((uv_handle_t *)&r->retry, on_timer_closed);
    uv_close((uv_handle_t *)&r->flush, on_timer_closed);
    uv_close((uv_handle_t *)&r->unblock, on_timer_closed);
    JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=closed target=%s", r->target);
    fail_list(r, list, -ECANCELED);
}

/* A command to queue: its kind, its callback's argument, sent now, and a
 * tag for the scripts to echo. NULL when out of memory. */
pending_t *pending_new(jrpc_replay_t *r, enum cmd_kind kind, void *arg)
{
    pending_t *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->kind = kind;
    p->arg = arg;
    p->sent_ns = uv_hrtime();
    p->tag = r->next_tag++;
    return p;
}

/* One claim: the nonce (nonce.n > 0), the rate limit (rate != NULL), or
 * both, in one EVALSHA. */
static int claim(jrpc_replay_t *r, jrpc_span_t key, jrpc_span_t nonce, int64_t ts,
                 const jrpc_replay_rate_t *rate, jrpc_replay_cb cb, jrpc_replay_admit_cb acb,
                 void *arg)
{
    assert(r != NULL && (cb != NULL || acb != NULL) && !r->closing);
    assert(nonce.n > 0 || rate != NULL);
    if (!r->up || r->conn == NULL) {
        r->st.failures++;
        return -EAGAIN;
    }
    if (nonce.n && ts <= r->refuse_to) {
        r->st.stale++;
        return -ESTALE;
    }
    pending_t *p = pending_new(r, CMD_CLAIM, arg);
    if (p == NULL)
        return -ENOMEM;
    p->cb = cb;
    p->acb = acb;
    p->ts = ts;
    p->nonce = nonce.n > 0;
    p->rate = rate != NULL;
    /* KEYS[2] (and KEYS[3]) spelled out here, so that the command goes to
     * hiredis as an argument vector (send_argv). Spans too long for the
     * buffers (never from jrpc_auth: ids and nonces are at most 64 bytes)
     * take the formatter. */
    char nkey[160], rkey[160];
    size_t nn = 0, rn = 0;
    bool fits = (!nonce.n || sizeof "jrpc:nonce::" + key.n + nonce.n <= sizeof nkey) &&
                (!rate || sizeof "jrpc:rate:" + rate->who.n <= sizeof rkey);
    int rc;
    if (fits) {
        if (nonce.n) {
            memcpy(nkey, "jrpc:nonce:", 11);
            nn = 11;
            if (key.n)
                memcpy(nkey + nn, key.p, key.n);
            nn += key.n;
            nkey[nn++] = ':';
            memcpy(nkey + nn, nonce.p, nonce.n);
            nn += nonce.n;
        }
        if (rate) {
            memcpy(rkey, "jrpc:rate:", 10);
            memcpy(rkey + 10, rate->who.p, rate->who.n);
            rn = 10 + rate->who.n;
        }
    }
    if (fits && nn <= sizeof p->nkey && rn <= sizeof p->rkey) {
        /* Written with the turn's other claims (batch_write). */
        memcpy(p->nkey, nkey, nn);
        p->nkey_n = (uint8_t)nn;
        if (rate) {
            memcpy(p->rkey, rkey, rn);
            p->rkey_n = (uint8_t)rn;
            p->cost_us = rate->cost_us;
            p->burst_us = rate->burst_us;
        }
        batch_push(r, p);
        return 0;
    }
    char prop[EPOCH_MAX + 1], tag[24], inc[24] = "", dvt[24] = "";
    proposal(r, prop, sizeof prop);
    snprintf(tag, sizeof tag, "%llu", (unsigned long long)p->tag);
    if (rate) {
        snprintf(inc, sizeof inc, "%llu", (unsigned long long)rate->cost_us);
        snprintf(dvt, sizeof dvt, "%llu", (unsigned long long)rate->burst_us);
    }
    if (fits) {
        const char *argv[16] = { "EVALSHA", r->sha, NULL, EPOCH_KEY };   /* at most 13 */
        size_t lens[16] = { 7, strlen(r->sha), 1, sizeof EPOCH_KEY - 1 };
        int argc = 4;
        if (nonce.n) {
            argv[argc] = nkey;
            lens[argc++] = nn;
        }
        if (rate) {
            argv[argc] = rkey;
            lens[argc++] = rn;
        }
        argv[2] = argc == 6 ? "3" : "2";
        const char *tail[] = { r->epoch, prop, r->ttl, tag,
                               !rate ? "n" : nonce.n ? "nr" : "r", inc, dvt };
        int ntail = rate ? 7 : 5;
        for (int i = 0; i < ntail; i++) {
            argv[argc] = tail[i];
            lens[argc++] = strlen(tail[i]);
        }
        assert(argc <= (int)(sizeof argv / sizeof *argv));
        rc = send_argv(r, p, argc, argv, lens);
    /* %b: binary-safe, the spans need no NUL. */
    } else if (rate == NULL)
        rc = send_cmd(r, p, "EVALSHA %s 2 " EPOCH_KEY " jrpc:nonce:%b:%b %s %s %s %s n", r->sha,
                      key.n ? key.p : "", key.n, nonce.p, nonce.n, r->epoch, prop, r->ttl, tag);
    else if (nonce.n)
        rc = send_cmd(r, p, "EVALSHA %s 3 " EPOCH_KEY " jrpc:nonce:%b:%b jrpc:rate:%b %s %s %s %s "
                      "nr %s %s", r->sha, key.n ? key.p : "", key.n, nonce.p, nonce.n,
                      rate->who.p, rate->who.n, r->epoch, prop, r->ttl, tag, inc, dvt);
    else
        rc = send_cmd(r, p, "EVALSHA %s 2 " EPOCH_KEY " jrpc:rate:%b %s %s %s %s r %s %s", r->sha,
                      rate->who.p, rate->who.n, r->epoch, prop, r->ttl, tag, inc, dvt);
    if (rc < 0) {
        free(p);
        r->st.failures++;
        return rc;
    }
    if (r->wait_n > 0 && p->nonce)
        r->unwaited++;   /* its WAIT is queued when the buffer is written */
    return 0;
}

int jrpc_replay_claim(jrpc_replay_t *r, jrpc_span_t key, jrpc_span_t nonce, int64_t ts,
                      jrpc_replay_cb cb, void *arg)
{
    return claim(r, key, nonce, ts, NULL, cb, NULL, arg);
}

int jrpc_replay_admit(jrpc_replay_t *r, jrpc_span_t key, jrpc_span_t nonce, int64_t ts,
                      const jrpc_replay_rate_t *rate, jrpc_replay_admit_cb cb, void *arg)
{
    return claim(r, key, nonce, ts, rate, NULL, cb, arg);
}

int jrpc_replay_idem_claim(jrpc_replay_t *r, jrpc_span_t who, jrpc_span_t key,
                           const char fp[64], uint32_t run_ms, jrpc_replay_idem_cb cb, void *arg)
{
    assert(r != NULL && cb != NULL && !r->closing);
    if (!r->up || r->conn == NULL)
        return -EAGAIN;
    pending_t *p = pending_new(r, CMD_IDEM, arg);
    if (p == NULL)
        return -ENOMEM;
    p->icb = cb;
    char tag[24], ms[16];
    snprintf(tag, sizeof tag, "%llu", (unsigned long long)p->tag);
    snprintf(ms, sizeof ms, "%u", run_ms ? run_ms : 1);
    int rc = send_cmd(r, p, "EVALSHA %s 1 jrpc:idem:%b:%b %s %b %s", r->idem_sha, who.p, who.n,
                      key.p, key.n, tag, fp, (size_t)64, ms);
    if (rc < 0)
        free(p);
    return rc;
}

int jrpc_replay_idem_store(jrpc_replay_t *r, jrpc_span_t who, jrpc_span_t key, const char fp[64],
                           const char *reply, size_t len, uint32_t ttl_s)
{
    assert(r != NULL && !r->closing);
    if (len > JRPC_REPLAY_IDEM_MAX)
        return -EMSGSIZE;
    if (!r->up || r->conn == NULL)
        return -EAGAIN;
    pending_t *p = pending_new(r, CMD_STORE, NULL);
    char *v = malloc(5 + 64 + 1 + len + 1);
    if (p == NULL || v == NULL) {
        free(p);
        free(v);
        return -ENOMEM;
    }
    memcpy(v, "done:", 5);
    memcpy(v + 5, fp, 64);
    v[69] = ':';
    if (len)
        memcpy(v + 70, reply, len);
    char ttl[16];
    snprintf(ttl, sizeof ttl, "%u", ttl_s ? ttl_s : 1);
    int rc = send_cmd(r, p, "SET jrpc:idem:%b:%b %b EX %s", who.p, who.n, key.p, key.n, v,
                      70 + len, ttl);
    free(v);   /* hiredis copied it into its output buffer */
    if (rc < 0)
        free(p);
    return rc;
}

bool jrpc_replay_up(const jrpc_replay_t *r)
{
    return r->up;
}

int64_t jrpc_replay_lost_at(const jrpc_replay_t *r)
{
    return r->lost_at;
}

int64_t jrpc_replay_refuse_to(const jrpc_replay_t *r)
{
    return r->refuse_to;
}

void jrpc_replay_stats(const jrpc_replay_t *r, jrpc_replay_stats_t *st)
{
    *st = r->st;
}
