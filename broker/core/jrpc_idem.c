/* jrpc_idem — idempotency keys (docs/SIGNING.md "Idempotency keys").
 *
 * A body sent with a key runs once: its key claimed in Redis first, its
 * reply kept for a retry; a retry with the same bytes gets the kept reply
 * (or waits while the first run runs), another body under the key is
 * refused. Here: the key's namespace and syntax, the claim and what its
 * answer means, the wait list. Not here: the claim scripts (guard/
 * jrpc_replay), storing the reply (jrpc_gather.c, reply), admission before
 * the key (jrpc_admit.c). */
#include "jrpc_broker_int.h"

/* The namespace of x's idempotency key (docs/SIGNING.md "Idempotency
 * keys"): its key id; for a body without a key (issue 36) its address
 * AND the body's fingerprint, so that another client — behind the same
 * NAT, in the same /64 — can neither read the reply nor learn that the key
 * exists (a 422) without sending these very bytes under this very key.
 * Written into buf (IDEM_WHO_MAX bytes) when it needs building. */
jrpc_span_t idem_who(const bbatch_t *x, char *buf)
{
    if (x->key_id_n)
        return (jrpc_span_t){ x->rwho, x->rwho_n };
    memcpy(buf, x->rwho, x->rwho_n);
    buf[x->rwho_n] = '#';
    memcpy(buf + x->rwho_n + 1, x->fp, sizeof x->fp);
    return (jrpc_span_t){ buf, x->rwho_n + 1 + sizeof x->fp };
}

/* ---- idempotency keys (docs/SIGNING.md "Idempotency keys") ---- */

#define IDEM_RUN_SLACK_MS 5000   /* a run holds its key this long past its deadline */
#define IDEM_POLL_MS      20     /* how often a body whose key another run holds asks again */

static void on_idem(void *arg, int rc, const char *reply, size_t n);

bool jrpc_broker_idem_key_ok(jrpc_span_t k)
{
    if (k.n == 0 || k.n > 255)
        return false;
    for (size_t i = 0; i < k.n; i++)
        if ((unsigned char)k.p[i] <= 0x20 || (unsigned char)k.p[i] >= 0x7f)
            return false;
    return true;
}

/* Runs x — first claiming its idempotency key, when it has one: the first
 * body under the key runs, a later one with the same bytes gets the kept
 * reply (or waits while the first runs), another body is refused. */
void go(jrpc_broker_t *b, bbatch_t *x)
{
    if (x->idem.n == 0) {
        start(b, x);
        return;
    }
    int rc = -EAGAIN;
    if (b->replay) {
        uint64_t now = uv_now(b->loop);
        uint64_t run = (x->deadline > now ? x->deadline - now : 0) + IDEM_RUN_SLACK_MS;
        x->claiming = true;
        char who[IDEM_WHO_MAX];
        rc = jrpc_replay_idem_claim(b->replay, idem_who(x, who), x->idem, x->fp,
                                    run > UINT32_MAX ? UINT32_MAX : (uint32_t)run, on_idem, x);
        if (rc == 0)
            return;
        x->claiming = false;
    }
    refuse(b, x, NULL, NULL, NULL, -EAGAIN, b->replay
           ? "{\"reason\":\"idempotency keys are unavailable (Redis), retry later\"}"
           : "{\"reason\":\"idempotency keys need Redis: this broker has none (--redis)\"}");
    settle(b, x);
}

static void on_idem_timer(uv_timer_t *t);

/* x waits: another run holds its key. Asked again every IDEM_POLL_MS. */
static void wait_add(jrpc_broker_t *b, bbatch_t *x)
{
    x->waiting = true;
    x->wnext = b->waiters;
    b->waiters = x;
    if (!uv_is_active((uv_handle_t *)&b->idem_timer))
        uv_timer_start(&b->idem_timer, on_idem_timer, IDEM_POLL_MS, IDEM_POLL_MS);
}

void wait_del(jrpc_broker_t *b, bbatch_t *x)
{
    for (bbatch_t **pp = &b->waiters; *pp; pp = &(*pp)->wnext)
        if (*pp == x) {
            *pp = x->wnext;
            break;
        }
    x->waiting = false;
}

/* Each waiting body asks again, or past its deadline is refused: the first
 * run of its key still runs (409 / -32008). */
static void on_idem_timer(uv_timer_t *t)
{
    jrpc_broker_t *b = t->data;
    bbatch_t *list = b->waiters;
    b->waiters = NULL;
    uint64_t now = uv_now(b->loop);
    jrpc_metrics_tick();
    while (list) {
        bbatch_t *x = list;
        list = x->wnext;
        x->waiting = false;
        if (now >= x->deadline) {
            refuse(b, x, NULL, NULL, NULL, -EINPROGRESS,
                   "{\"reason\":\"the first body sent with this idempotency key is still running: "
                   "retry later for its reply\"}");
            settle(b, x);
        } else {
            go(b, x);
        }
    }
    if (b->waiters == NULL)
        uv_timer_stop(t);
}

/* Redis answered the claim of x's idempotency key. */
static void on_idem(void *arg, int rc, const char *reply, size_t n)
{
    bbatch_t *x = arg;
    jrpc_broker_t *b = x->broker;
    x->claiming = false;
    jrpc_metrics_tick();
    if (rc == 0) {   /* ours: run it, keep its reply */
        x->idem_run = true;
        if (x->cancelled) {   /* its client left meanwhile: run on for the retry */
            x->cancelled = false;
            x->detached = true;
            x->replied = false;
        }
        start(b, x);
    } else if (x->cancelled) {
        settle(b, x);
    } else if (rc == 1) {   /* it ran: its reply, marked */
        jrpc_outcome_t out = { .cls = JRPC_BODY_OK, .replayed = true };
        x->replied = true;
        access_log(b, x, NULL, out.cls, n);
        jrpc_metrics_body(x->transport, out.cls);
        x->fn(x->ctx, out, reply, n);
        settle(b, x);
    } else if (rc == -EBUSY) {
        if (uv_now(b->loop) >= x->deadline)
            on_idem(x, -EINPROGRESS, NULL, 0);
        else
            wait_add(b, x);
    } else {
        refuse(b, x, NULL, NULL, NULL, rc == -EILSEQ || rc == -EINPROGRESS ? rc : -EAGAIN,
               rc == -EILSEQ ? "{\"reason\":\"this idempotency key was used with another body\"}"
               : rc == -EINPROGRESS
                   ? "{\"reason\":\"the first body sent with this idempotency key is still "
                     "running: retry later for its reply\"}"
                   : "{\"reason\":\"idempotency keys are unavailable (Redis), retry later\"}");
        settle(b, x);
    }
}
