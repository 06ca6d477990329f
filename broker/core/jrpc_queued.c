/* jrpc_queued — the bytes bodies hold once answered (issue 36).
 *
 * A body answered while calls of it (notifications) are still at workers
 * keeps its memory until they end: those bytes count against its connection
 * (--conn-max-queued-bytes: the front stops reading it, and is woken at
 * half), its client address (--peer-max-queued-bytes) and the total
 * (--max-queued-bytes). Here: the accounts, charging and freeing a body
 * with what it held, and the bounds' checks. Not here: when a body is
 * answered or freed (jrpc_broker.c, settle), nor the refusal itself
 * (jrpc_gather.c). */
#include "jrpc_broker_int.h"

static void hold_unref(jrpc_broker_hold_t *h)
{
    if (--h->refs == 0)
        free(h);
}

static peerq_t **peer_bucket(jrpc_broker_t *b, const char *p, size_t n)
{
    uint32_t h = 2166136261u;   /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)p[i]) * 16777619u;
    return &b->peers[h % PEER_BUCKETS];
}

/* The account of the address of peer, with one more reference; NULL when
 * there is no address or no memory. */
peerq_t *peer_ref(jrpc_broker_t *b, jrpc_span_t peer)
{
    char text[sizeof ((peerq_t *)0)->addr];
    if (peer.n == 0)
        return NULL;
    /* as rate limits see it: no port, IPv6 by its /64 */
    jrpc_span_t a = { text, jrpc_rate_who_addr(text, sizeof text, peer) };
    peerq_t **pp = peer_bucket(b, a.p, a.n);
    for (peerq_t *q = *pp; q; q = q->next)
        if (q->n == a.n && memcmp(q->addr, a.p, a.n) == 0) {
            q->refs++;
            return q;
        }
    peerq_t *q = calloc(1, sizeof *q);
    if (q == NULL)
        return NULL;
    memcpy(q->addr, a.p, a.n);
    q->n = (uint8_t)a.n;
    q->refs = 1;
    q->next = *pp;
    *pp = q;
    return q;
}

static void peer_unref(jrpc_broker_t *b, peerq_t *q)
{
    if (--q->refs > 0)
        return;
    for (peerq_t **qq = peer_bucket(b, q->addr, q->n); *qq; qq = &(*qq)->next)
        if (*qq == q) {
            *qq = q->next;
            free(q);
            return;
        }
}

/* x was answered while calls of it are still out: what it holds counts
 * against its connection, its address and the total until it is freed. */
void hold_charge(jrpc_broker_t *b, bbatch_t *x)
{
    size_t n = sizeof *x + x->len;
    for (const jrpc_arena_chunk_t *c = x->req.arena.head; c; c = c->next)
        n += sizeof *c + c->size;
    x->held = n;
    b->held += n;
    jrpc_metrics.queued_bytes = b->held;
    if (x->hold)
        x->hold->bytes += n;
    if (x->pq)
        x->pq->bytes += n;
}

void batch_free(bbatch_t *x)
{
    jrpc_broker_t *b = x->broker;
    jrpc_broker_hold_t *h = x->hold;
    size_t held = x->held;
    b->held -= held;
    jrpc_metrics.queued_bytes = b->held;
    if (x->pq) {
        x->pq->bytes -= held;
        peer_unref(b, x->pq);
    }
    jrpc_batch_dispose(&x->req);
    if (x->pooled && b->bb_nfree < BB_KEEP)   /* kept for the next small body */
        bb_keep(b, x);
    else
        free(x);
    if (h == NULL)
        return;
    h->bytes -= held;
    /* The connection reads again (it may submit: as from a reply function). */
    if (h->waiting && h->bytes <= h->max / 2 && h->wake) {
        h->waiting = false;
        h->wake(h->ctx);
    }
    hold_unref(h);
}

/* Whether everything held, or what x's address holds, is at its bound. */
bool queue_full(const jrpc_broker_t *b, const bbatch_t *x)
{
    uint32_t all = b->opts.max_queued_bytes, one = b->opts.peer_max_queued_bytes;
    return (all && b->held >= all) || (one && x->pq && x->pq->bytes >= one);
}

/* ---- what a connection has queued ---- */

jrpc_broker_hold_t *jrpc_broker_hold_new(jrpc_broker_t *b, void (*wake)(void *ctx), void *ctx)
{
    jrpc_broker_hold_t *h = calloc(1, sizeof *h);
    if (h == NULL)
        return NULL;
    h->refs = 1;
    h->max = b->opts.conn_max_queued_bytes;
    h->wake = wake;
    h->ctx = ctx;
    return h;
}

void jrpc_broker_hold_release(jrpc_broker_hold_t **h_p)
{
    jrpc_broker_hold_t *h = *h_p;
    if (h == NULL)
        return;
    *h_p = NULL;
    h->wake = NULL;
    hold_unref(h);
}

bool jrpc_broker_hold_full(jrpc_broker_hold_t *h)
{
    if (h == NULL || h->max == 0 || h->bytes < h->max)
        return false;
    if (!h->waiting) {
        h->waiting = true;
        jrpc_metrics.queue_pushbacks++;
        JRPC_LOG(JRPC_LOG_DEBUG, "broker", "event=queue_pushback bytes=%zu limit=%u", h->bytes,
                 h->max);
    }
    return true;
}
