/* fuzz_redis — libFuzzer target for the Redis reply path of the replay guard
 * (broker/guard/jrpc_replay.c, jrpc_replay_group.c and jrpc_redis.c,
 * included so their static functions are reachable).
 *
 * Each input is what Redis (or anything on the path) sends back to the
 * broker. A jrpc_replay_t is put in the state it has on a live connection —
 * up, an epoch known, the script loaded — with a connection whose reader is
 * fed the input, in chunks of 1 + data[1] % 64 bytes, through the same
 * process_replies() the socket path uses. Waiting in the FIFO, chosen by
 * data[0]: optionally the handshake's SCRIPT LOAD and hello, then 1 to 4
 * claims with tags in sequence — plain claims, or (data[0] bits 5-6) claims
 * with a rate limit (jrpc_replay_admit's), idempotency claims, or
 * idempotency claims with a store queued after each; plain and rate claims
 * (data[0] bit 2) as one script of mode m (its long answer for rate claims).
 * Invariants (abort() on failure, which libFuzzer reports):
 *  - every claim's callback runs at most once before destroy and exactly
 *    once in all, with 0, -EEXIST, -ESTALE, -EAGAIN or (destroy) -ECANCELED;
 *  - 0 or -EEXIST only for a reply that really is {tag, "OK"|"DUP"} of that
 *    claim (checked by re-reading the bytes with a fresh reader); -EDQUOT
 *    only for a rate claim, with a wait of at least 1 us; an idempotency
 *    claim's 0 only for {tag, "RUN"}, 1 only for {tag, "DONE", reply} (the
 *    reply handed over whole);
 *  - the refusal horizon never moves past now + window;
 *  - no crash, leak or unbounded allocation (ASan, UBSan, -malloc_limit_mb). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jrpc_replay.c"
#include "jrpc_replay_group.c"
#include "jrpc_redis.c"

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "fuzz_redis: invariant failed: %s (%s:%d)\n", #cond,     \
                    __FILE__, __LINE__);                                             \
            abort();                                                                 \
        }                                                                            \
    } while (0)

#define WINDOW 300
#define MAXC 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct seen {
    int calls;    /* callback runs */
    int rc;       /* the last rc */
    uint64_t wait_us;   /* rate claims: what came with -EDQUOT */
    size_t reply_n;     /* idempotency claims: the kept reply's length with 1 */
} seen_t;

static void on_claim(void *arg, int rc)
{
    seen_t *s = arg;
    s->calls++;
    s->rc = rc;
}

static void on_admit(void *arg, int rc, uint64_t wait_us)
{
    seen_t *s = arg;
    s->calls++;
    s->rc = rc;
    s->wait_us = wait_us;
}

static void on_idem_claim(void *arg, int rc, const char *reply, size_t n)
{
    seen_t *s = arg;
    s->calls++;
    s->rc = rc;
    CHECK(rc == 1 ? reply != NULL || n == 0 : reply == NULL && n == 0);
    volatile unsigned char touch = 0;
    for (size_t i = 0; i < n; i++)   /* the whole of it is readable (ASan checks) */
        touch ^= (unsigned char)reply[i];
    (void)touch;
    s->reply_n = n;
}

static uv_loop_t loop;

/* Replies a fresh reader gets from the bytes (at most max). */
static size_t parse_all(const uint8_t *d, size_t n, redisReply **out, size_t max)
{
    redisReader *rd = redisReaderCreate();
    CHECK(rd != NULL);
    rd->fn = &reply_fns;
    redisReaderFeed(rd, (const char *)d, n);
    size_t k = 0;
    void *rep;
    while (k < max && redisReaderGetReply(rd, &rep) == REDIS_OK && rep != NULL)
        out[k++] = rep;
    redisReaderFree(rd);
    return k;
}

static bool is_answer_n(const redisReply *rep, uint64_t tag, const char *word, size_t elements)
{
    char t[24];
    snprintf(t, sizeof t, "%llu", (unsigned long long)tag);
    return rep->type == REDIS_REPLY_ARRAY && rep->elements == elements &&
           rep->element[0]->type == REDIS_REPLY_STRING && strcmp(rep->element[0]->str, t) == 0 &&
           rep->element[0]->len == strlen(t) &&
           rep->element[1]->type == REDIS_REPLY_STRING && rep->element[1]->len == strlen(word) &&
           memcmp(rep->element[1]->str, word, strlen(word)) == 0;
}

static bool is_answer(const redisReply *rep, uint64_t tag, const char *word)
{
    return is_answer_n(rep, tag, word, 2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool init;
    if (!init) {
        init = true;
        jrpc_log_init("jrpc-fuzz-redis");
        jrpc_log_level = JRPC_LOG_ERROR + 1;
        if (getenv("JRPC_FUZZ_LOG"))
            CHECK(jrpc_log_set_level(getenv("JRPC_FUZZ_LOG")) == 0);
        CHECK(uv_loop_init(&loop) == 0);
    }
    if (size < 2)
        return 0;
    bool handshake = data[0] & 0x10;
    int mix = (data[0] >> 5) & 3;   /* 0 claims, 1 rate claims, 2 idempotency, 3 with stores */
    int nclaims = 1 + (data[0] & 3);
    bool multi = mix < 2 && (data[0] & 4);   /* the claims as one script (mode m) */
    size_t chunk = 1 + data[1] % 64;
    const uint8_t *in = data + 2;
    size_t n = size - 2;

    char err[128];
    jrpc_replay_opts_t o = { .url = "redis://127.0.0.1:1", .window_s = WINDOW, .timeout_ms = 1000 };
    jrpc_replay_t *r = jrpc_replay_new(&loop, &o, err, sizeof err);
    CHECK(r != NULL);
    conn_t *conn = calloc(1, sizeof *conn);
    CHECK(conn != NULL);
    conn->rd = redisReaderCreate();
    CHECK(conn->rd != NULL);
    conn->rd->fn = &reply_fns;
    r->conn = conn;
    r->next_tag = 1;
    int64_t now = (int64_t)time(NULL);
    if (!handshake) {
        r->up = true;
        r->had_epoch = true;
        snprintf(r->epoch, sizeof r->epoch, "%s:0", "00112233445566778899aabbccddeeff");
        memset(r->sha, 'a', 40);
        r->sha[40] = '\0';
    } else {
        pending_t *p = calloc(1, sizeof *p);
        CHECK(p != NULL);
        p->kind = CMD_LOAD;
        fifo_push(r, p);
        p = calloc(1, sizeof *p);
        CHECK(p != NULL);
        p->kind = CMD_HELLO;
        p->tag = r->next_tag++;
        fifo_push(r, p);
    }
    seen_t seen[MAXC] = { { .calls = 0, .rc = 1 } };
    uint64_t tags[MAXC];
    pending_t *mp = multi ? pending_new(r, CMD_MULTI, NULL) : NULL;
    pending_t **mend = mp ? &mp->claims : NULL;
    CHECK(!multi || mp != NULL);
    for (int i = 0; i < nclaims; i++) {
        pending_t *p = pending_new(r, mix >= 2 ? CMD_IDEM : CMD_CLAIM, &seen[i]);
        CHECK(p != NULL);
        if (mix == 0)
            p->cb = on_claim;
        else if (mix == 1)
            p->acb = on_admit;
        else
            p->icb = on_idem_claim;
        p->nonce = mix < 2;
        p->rate = mix == 1;
        p->ts = now - WINDOW + i * WINDOW;   /* before, at and after now */
        tags[i] = mp ? mp->tag : p->tag;
        if (mp) {
            *mend = p;
            mend = &p->next;
            mp->nclaims++;
            continue;
        }
        fifo_push(r, p);
        if (mix == 3) {   /* a store after it: +OK or an error, nothing else */
            pending_t *st = pending_new(r, CMD_STORE, NULL);
            CHECK(st != NULL);
            fifo_push(r, st);
        }
    }

    if (mp)
        fifo_push(r, mp);
    for (size_t off = 0; off < n && r->conn == conn; off += chunk) {
        size_t k = n - off < chunk ? n - off : chunk;
        redisReaderFeed(conn->rd, (const char *)in + off, k);
        process_replies(r, conn);   /* may drop (and free) conn */
    }
    for (int i = 0; i < nclaims; i++) {
        CHECK(seen[i].calls <= 1);
        if (seen[i].calls && mix < 2)
            CHECK(seen[i].rc == 0 || seen[i].rc == -EEXIST || seen[i].rc == -ESTALE ||
                  seen[i].rc == -EAGAIN || (mix == 1 && seen[i].rc == -EDQUOT));
        if (seen[i].calls && mix >= 2)
            CHECK(seen[i].rc == 0 || seen[i].rc == 1 || seen[i].rc == -EBUSY ||
                  seen[i].rc == -EILSEQ || seen[i].rc == -EAGAIN);
        if (seen[i].calls && seen[i].rc == -EDQUOT)
            CHECK(seen[i].wait_us >= 1);
    }
    CHECK(r->refuse_to == INT64_MIN || r->refuse_to <= (int64_t)time(NULL) + WINDOW);

    /* 0 / -EEXIST only for the real answer in the claim's place. */
    redisReply *reps[16] = { 0 };
    size_t nrep = parse_all(in, n, reps, 16);
    size_t first = handshake ? 2 : 0, step = mix == 3 ? 2 : 1;
    for (int i = 0; i < nclaims; i++) {
        size_t at = first + (size_t)i * step;
        if (!seen[i].calls)
            continue;
        if (multi && (seen[i].rc == 0 || seen[i].rc == -EEXIST || seen[i].rc == -EDQUOT)) {
            /* one script: its one reply (the long form with rate claims), this claim's flag */
            CHECK(first < nrep);
            CHECK(is_answer_n(reps[first], tags[i], "MULTI", mix == 1 ? 5 : 3));
            CHECK(reps[first]->element[2]->len == (size_t)nclaims);
            CHECK(reps[first]->element[2]->str[i] ==
                  (seen[i].rc == 0 ? '1' : seen[i].rc == -EEXIST ? '0' : 'L'));
        } else if (mix < 2 && (seen[i].rc == 0 || seen[i].rc == -EEXIST)) {
            CHECK(at < nrep);
            CHECK(is_answer(reps[at], tags[i], seen[i].rc == 0 ? "OK" : "DUP"));
        } else if (mix >= 2 && seen[i].rc == 0) {
            CHECK(at < nrep);
            CHECK(is_answer(reps[at], tags[i], "RUN"));
        } else if (mix >= 2 && seen[i].rc == 1) {
            CHECK(at < nrep);
            CHECK(is_answer_n(reps[at], tags[i], "DONE", 3));
            CHECK(reps[at]->element[2]->len == seen[i].reply_n);
        }
    }
    for (size_t i = 0; i < nrep; i++)
        freeReplyObject(reps[i]);

    jrpc_replay_destroy(&r);
    for (int i = 0; i < nclaims; i++) {
        CHECK(seen[i].calls == 1);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    return 0;
}
