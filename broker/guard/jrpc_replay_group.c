/* jrpc_replay_group — several claims, one script (issue 35: group commit).
 * The claims of one loop turn wait on the batch and go to Redis as one
 * EVALSHA of CLAIM_LUA in mode 'm' (batch_write, the RESP bytes written
 * here); its answer is split back into one verdict per claim
 * (handle_multi). Part of the jrpc_replay module: the state and the
 * functions the files lend each other are in jrpc_replay_int.h; a lone
 * claim's answer and the epoch are jrpc_replay.c's. */
#include "jrpc_replay_int.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

/* ---- the answers --------------------------------------------------------- */

/* The flags of a MULTI answer for n claims: n characters, each '1' (claimed
 * now) or '0' (a replay). Returns fresh[i] set for each, 0; or -1 when the
 * value cannot answer n claims (a desynchronised connection). Pure. */
static int multi_flags(const redisReply *v, size_t n, bool *fresh)
{
    if (v->type != REDIS_REPLY_STRING || v->len != n)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (v->str[i] != '0' && v->str[i] != '1')
            return -1;
        fresh[i] = v->str[i] == '1';
    }
    return 0;
}

/* Whether some claim of list (linked by next) checks a rate limit: its
 * script then answers in the long form (multi_verdicts). */
static bool any_rate(const pending_t *list)
{
    for (; list != NULL; list = list->next)
        if (list->rate)
            return true;
    return false;
}

/* The verdicts of a long MULTI answer {tag,'MULTI',flags,epoch,waits} for
 * the n claims of list: rc[i] 0 (passed), -EEXIST (a replay), -EDQUOT with
 * the claim's wait_us set (over its rate), -EAGAIN (its nonce not claimed:
 * the epoch differs, see handle_multi). Returns 0, or -1 when the answer
 * cannot be to these claims: a flag per claim, '0' and 'E' only for a
 * nonce, 'L' only for a rate limit, one wait (1 to 19 digits) per 'L', an
 * epoch value exactly when some flag is 'E' (or every claim is a rate
 * limit alone, which never reads it). Writes only the waits into list. */
static int multi_verdicts(const redisReply *rep, pending_t *list, size_t n, int *rc)
{
    const redisReply *f = rep->element[2], *e = rep->element[3], *w = rep->element[4];
    size_t at = 0;
    bool stale = false, nonces = false;
    if (f->len != n)
        return -1;
    for (size_t i = 0; i < n; i++, list = list->next) {
        char c = f->str[i];
        nonces |= list->nonce;
        if ((c == '0' || c == 'E') && !list->nonce)
            return -1;
        if (c == 'L' && !list->rate)
            return -1;
        if (c == '1')
            rc[i] = 0;
        else if (c == '0')
            rc[i] = -EEXIST;
        else if (c == 'E')
            rc[i] = -EAGAIN, stale = true;
        else if (c != 'L')
            return -1;
        if (c != 'L')
            continue;
        uint64_t us = 0;
        size_t d = 0;
        if (at < w->len && at > 0 && w->str[at++] != ' ')
            return -1;
        for (; at < w->len && w->str[at] != ' ' && d < 19; at++, d++) {
            if (w->str[at] < '0' || w->str[at] > '9')
                return -1;
            us = us * 10 + (uint64_t)(w->str[at] - '0');
        }
        if (d == 0 || (at < w->len && w->str[at] != ' '))
            return -1;
        list->wait_us = us ? us : 1;
        rc[i] = -EDQUOT;
    }
    if (at != w->len || (stale != (e->len > 0) && nonces))
        return -1;
    return 0;
}

/* A claim's answer out of its script's: a fresh nonce waits for WAIT (with
 * --redis-wait-replicas) while the connection is the one that claimed it,
 * and fails closed when that connection is gone (its WAIT never comes). */
static void multi_claim_done(jrpc_replay_t *r, const conn_t *conn, pending_t *c, int rc)
{
    if (rc == 0 && r->wait_n > 0 && c->nonce) {
        if (r->conn != conn) {
            claim_done(r, c, r->closing ? -ECANCELED : -EAGAIN);
            return;
        }
        pending_append(&r->held, &r->held_tail, c);
        return;
    }
    claim_done(r, c, rc);
}

/* The answer to a script of several claims (mode 'm'): each claim gets its
 * own answer, as if it had been sent alone — fresh, a replay, over its
 * rate, the epoch's verdict (one for every nonce), Redis' error, or, for a
 * reply that does not answer it, the dropped connection's -EAGAIN. Callbacks run in claim order;
 * one may claim again (the others still get their answers) or destroy r
 * (the others then get -ECANCELED, as claims still queued would). */
void handle_multi(jrpc_replay_t *r, conn_t *conn, pending_t *p, const redisReply *rep)
{
    bool fresh[MULTI_MAX];
    int verdict[MULTI_MAX];
    size_t n = p->nclaims;
    pending_t *list = p->claims;
    int all = 1;   /* 1: per flag; 2: per verdict; else the rc of every claim */
    bool epoch = false;   /* Redis lost its memory: -ESTALE for those signed too early */
    int drop = 0;   /* > 0: the connection goes (drop_for) */

    assert(n >= 1 && n <= MULTI_MAX);
    if (rep->type == REDIS_REPLY_ERROR) {
        /* The same verdicts as for one claim (claim_result). */
        int rc = claim_result(r, rep, p);
        all = rc > 0 ? -EAGAIN : rc;
        if (rc > 0)
            drop = rc;
    } else {
        const redisReply *word = script_word(rep, p);
        bool rated = any_rate(list);   /* asked in the long form */
        if (word != NULL && str_is(word, "MULTI") && rep->elements == 5 && rated &&
            multi_verdicts(rep, list, n, verdict) == 0 &&
            (rep->element[3]->len == 0 ||
             adopt_epoch(r, rep->element[3]->str, rep->element[3]->len) == 0)) {
            all = 2;
            epoch = rep->element[3]->len > 0;
        } else if (word != NULL && str_is(word, "MULTI") && rep->elements == 3 && !rated &&
                   multi_flags(rep->element[2], n, fresh) == 0) {
            all = 1;
        } else if (word != NULL && str_is(word, "EPOCH") && !rated &&
                   adopt_epoch(r, rep->element[2]->str, rep->element[2]->len) == 0) {
            all = -EAGAIN;
            epoch = true;
        } else {
            all = -EAGAIN;
            drop = DROP_DESYNC;
        }
    }
    free(p);
    if (drop > 0)   /* unanswered for sure: fail closed with the rest of the FIFO */
        drop_for(r, drop);
    for (size_t i = 0; list != NULL; i++) {
        pending_t *c = list;
        list = c->next;
        int rc = all == 2 ? verdict[i] : all != 1 ? all : fresh[i] ? 0 : -EEXIST;
        if (epoch && rc == -EAGAIN && c->nonce && c->ts <= r->refuse_to)
            rc = -ESTALE;
        if (r->closing)   /* destroyed by a callback: the rest are cancelled, as if queued */
            rc = -ECANCELED;
        multi_claim_done(r, conn, c, rc);
    }
}

/* ---- the writes ---------------------------------------------------------- */

/* Several claims, one script (issue 35: group commit). The claims of one
 * loop turn (nonces, rate limits, or both: every body admitted in it)
 * wait on `batch` instead of being formatted at once;
 * the write of the turn (write_out) sends them as one EVALSHA in mode 'm'
 * (at most MULTI_MAX each), or as before when the turn had only one. Redis
 * then checks the epoch once and runs one script instead of N: the script
 * call's own cost, the epoch GET and the argument tables are paid once per
 * turn, and the broker formats and parses one command. Each claim still
 * gets its own answer (handle_multi). A claim waits for no other: only for
 * the end of its own loop turn, as before. */
void batch_push(jrpc_replay_t *r, pending_t *p)
{
    pending_append(&r->batch, &r->batch_tail, p);
    r->nbatch++;
    if (!r->conn->connected)
        set_writing(r->conn, true);
    else if (!r->conn->writing) {
        uv_check_start(&r->flush, on_flush);
        uv_idle_start(&r->unblock, on_unblock);
    }
}

/* The RESP bytes of one command (an array of bulk strings), as hiredis'
 * redisFormatCommandArgv writes them: "*<argc>\r\n" then "$<len>\r\n<arg>\r\n"
 * each. Writes at most cap bytes at out; returns the length, or 0 when it
 * does not fit. The claims' hot path writes its command this way and hands
 * the bytes to redisAppendFormattedCommand: hiredis' own formatter builds
 * it in sds pieces (sdscatfmt per header, sdsMakeRoomFor), about 4 000
 * instructions per script. Pure. */
static size_t resp_format(char *out, size_t cap, int argc, const char **argv,
                          const size_t *lens)
{
    size_t need = 1 + 20 + 2, n = 0;   /* the bound: each length at most 20 digits */
    for (int i = 0; i < argc; i++) {
        if (need > cap || lens[i] > cap - need || 25 > cap - need - lens[i])
            return 0;
        need += 25 + lens[i];
    }
    if (need > cap)
        return 0;
    out[n++] = '*';
    n += put_u64(out + n, (uint64_t)argc);
    out[n++] = '\r';
    out[n++] = '\n';
    for (int i = 0; i < argc; i++) {
        out[n++] = '$';
        n += put_u64(out + n, lens[i]);
        out[n++] = '\r';
        out[n++] = '\n';
        if (lens[i])
            memcpy(out + n, argv[i], lens[i]);
        n += lens[i];
        out[n++] = '\r';
        out[n++] = '\n';
    }
    return n;
}

/* Arguments of the longest claim script: EVALSHA, the sha, the key count,
 * the epoch key, a nonce key and a rate key per claim, the epoch, the
 * proposal, the TTL, the tag, the mode, the kinds, a cost and a burst per
 * claim. */
#define BATCH_ARGS_MAX (4 + 2 * MULTI_MAX + 6 + 2 * MULTI_MAX)
/* Its bytes, each argument with resp_format's bound of 25 bytes around it. */
#define BATCH_CMD_MAX (23 + BATCH_ARGS_MAX * 25 + 7 + 40 + 7 + sizeof EPOCH_KEY + \
                       MULTI_MAX * (NKEY_MAX + RKEY_MAX) + 2 * EPOCH_MAX + 2 * 23 + 2 + \
                       MULTI_MAX + 2 * MULTI_MAX * 20 + 1)

/* Appends the batch's commands to conn's output buffer and their FIFO
 * entries: at most MULTI_MAX claims a script, in mode 'm' (with the kinds
 * and the rate arguments when some claim has a rate limit), or a lone
 * claim in its own mode. Returns 0, or -ENOMEM (what is left of the batch
 * stays on it: the caller drops the connection, which fails it). */
int batch_write(jrpc_replay_t *r)
{
    while (r->batch != NULL) {
        size_t n = r->nbatch < MULTI_MAX ? r->nbatch : MULTI_MAX;
        const char *argv[BATCH_ARGS_MAX];
        size_t lens[BATCH_ARGS_MAX];
        char nk[8], prop[EPOCH_MAX + 1], tag[24], kinds[MULTI_MAX];
        char nums[2 * MULTI_MAX][24];
        size_t numn[2 * MULTI_MAX], nnum = 0, nkeys = 1, nonces = 0;
        char cmd[BATCH_CMD_MAX];
        pending_t *m = NULL, *p = r->batch;
        bool rated = false;
        int argc = 0;
        uint64_t t;
        if (n > 1) {
            if ((m = pending_new(r, CMD_MULTI, NULL)) == NULL)
                return -ENOMEM;
            t = m->tag;
        } else {
            t = p->tag;
        }
        argv[argc] = "EVALSHA", lens[argc++] = 7;
        argv[argc] = r->sha, lens[argc++] = strlen(r->sha);
        argv[argc] = nk, lens[argc++] = 0;   /* the count, once known */
        argv[argc] = EPOCH_KEY, lens[argc++] = sizeof EPOCH_KEY - 1;
        for (size_t i = 0; i < n; i++, p = p->next) {
            if (p->nonce)
                argv[argc] = p->nkey, lens[argc++] = p->nkey_n;
            if (p->rate) {
                argv[argc] = p->rkey, lens[argc++] = p->rkey_n;
                numn[nnum] = put_u64(nums[nnum], p->cost_us), nnum++;
                numn[nnum] = put_u64(nums[nnum], p->burst_us), nnum++;
            }
            kinds[i] = p->nonce && p->rate ? 'b' : p->rate ? 'r' : 'n';
            nkeys += (size_t)p->nonce + p->rate;
            nonces += p->nonce;
            rated |= p->rate;
        }
        lens[2] = put_u64(nk, nkeys);
        size_t tagn = put_u64(tag, t);
        proposal(r, prop, sizeof prop);
        argv[argc] = r->epoch, lens[argc++] = strlen(r->epoch);
        argv[argc] = prop, lens[argc++] = strlen(prop);
        argv[argc] = r->ttl, lens[argc++] = strlen(r->ttl);
        argv[argc] = tag, lens[argc++] = tagn;
        argv[argc] = n > 1 ? "m" : kinds[0] == 'b' ? "nr" : kinds[0] == 'r' ? "r" : "n";
        lens[argc] = strlen(argv[argc]);
        argc++;
        if (n > 1 && rated)
            argv[argc] = kinds, lens[argc++] = n;
        for (size_t i = 0; i < nnum; i++)
            argv[argc] = nums[i], lens[argc++] = numn[i];
        size_t len = resp_format(cmd, sizeof cmd, argc, argv, lens);
        assert(len > 0);   /* BATCH_CMD_MAX bounds every argument */
        if (redisAppendFormattedCommand(r->conn->c, cmd, len) != REDIS_OK) {
            free(m);
            return -ENOMEM;
        }
        /* Written: the first n leave the batch, for the FIFO. */
        pending_t *first = r->batch, *last = first;
        for (size_t i = 1; i < n; i++)
            last = last->next;
        r->batch = last->next;
        if (r->batch == NULL)
            r->batch_tail = NULL;
        r->nbatch -= n;
        last->next = NULL;
        if (m != NULL) {
            m->claims = first;
            m->nclaims = n;
            fifo_push(r, m);
        } else {
            fifo_push(r, first);
        }
        if (r->wait_n > 0)
            r->unwaited += nonces;
    }
    return 0;
}
