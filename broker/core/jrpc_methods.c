/* jrpc_methods — the method table of jrpc_workers (see jrpc_workers.h;
 * the state is in jrpc_workers_int.h): entries by name in a hash table that
 * grows, who serves each, their references and sweeping, the start-up
 * grace, and what the broker asks of a method by name (is it served, does
 * it want msgpack, is it idempotent everywhere).
 *
 * A method entry lives while something refers to it (a worker that listed
 * it, a call pointing at it: m->refs) and is freed at the next safe point
 * after the last goes (method_sweep), so READYs with new names in turn do
 * not grow the table.
 *
 * Services (docs/ARCHITECTURE.md "Services"): an entry is keyed by what a
 * client calls, "method" (no service) or "service.method" (slen bytes of
 * service); a service's method that owns its bare name has an alias, the
 * no-service entry of that name pointing at it (to/bare), so a bare call
 * costs the one lookup it cost before and a branch. */
#include "jrpc_workers_int.h"

#include "jrpc_errors.h"

/* Doubles the table when it is 3/4 full (a failed allocation keeps the old
 * one: longer chains, nothing lost). */
static void method_grow(jrpc_workers_t *w)
{
    if (w->nmethods < w->mtab_size / 4 * 3 || w->mtab_size >= 1u << 30)
        return;
    uint32_t size = w->mtab_size * 2;
    method_t **t = calloc(size, sizeof *t);
    if (t == NULL)
        return;
    for (uint32_t b = 0; b < w->mtab_size; b++) {
        while (w->mtab[b]) {
            method_t *m = w->mtab[b];
            w->mtab[b] = m->next;
            m->next = t[m->hash & (size - 1)];
            t[m->hash & (size - 1)] = m;
        }
    }
    free(w->mtab);
    w->mtab = t;
    w->mtab_size = size;
}

/* The entry for name, made when missing (refs 0: the caller takes a
 * reference, or hands it to method_unref's check). NULL on ENOMEM. */
method_t *method_get(jrpc_workers_t *w, const char *name, size_t len)
{
    return method_get_svc(w, name, len, 0);
}

/* method_get for the key name[0, len) whose first slen bytes are its
 * service (0: none). */
method_t *method_get_svc(jrpc_workers_t *w, const char *name, size_t len, uint32_t slen)
{
    method_t *m = method_find_svc(w, name, len, slen);
    if (m)
        return m;
    m = calloc(1, sizeof *m);
    if (m == NULL || (m->name = malloc(len + 1)) == NULL) {
        free(m);
        return NULL;
    }
    memcpy(m->name, name, len);
    m->name[len] = '\0';
    m->len = len;
    m->slen = slen;
    size_t off = slen ? slen + 1 : 0;
    m->wire = (jrpc_span_t){ m->name + off, len - off };
    m->hash = hash(name, len);
    w->nsvc_methods += slen > 0;
    if (slen == 0)   /* an exact no-service name now wins over a cached service.method */
        w->hint_m = NULL;
    m->qhead = m->qtail = NIL;
    method_grow(w);
    uint32_t b = m->hash & (w->mtab_size - 1);
    m->next = w->mtab[b];
    w->mtab[b] = m;
    w->nmethods++;
    return m;
}

/* Frees the entries still unreferenced on the gc list. Called only where no
 * method pointer is held up the stack: reap() and the start of on_ready. */
void method_sweep(jrpc_workers_t *w)
{
    while (w->gc) {
        method_t *m = w->gc;
        w->gc = m->gc_next;
        m->in_gc = false;
        if (m->refs > 0)
            continue;
        method_t **pp = &w->mtab[m->hash & (w->mtab_size - 1)];
        while (*pp != m)
            pp = &(*pp)->next;
        *pp = m->next;
        w->nmethods--;
        w->nsvc_methods -= m->slen > 0;
        if (w->hint_m == m)
            w->hint_m = NULL;
        free(m->workers);
        free(m->lat);
        free(m->name);
        free(m);
    }
}

/* Ends the start-up grace: calls still waiting for a method that no worker
 * has declared are answered "method not found". */
void grace_end(jrpc_workers_t *w)
{
    w->grace_until = 0;
    for (uint32_t b = 0; b < w->mtab_size; b++)
        for (method_t *m = w->mtab[b]; m; m = m->next)
            if (m->nworkers == 0 && m->qhead != NIL)
                method_fail_queue(w, m);
}

/* Moves the calls queued at from (a name nobody served yet, in the
 * start-up grace) to the end of to's queue: its worker takes them. */
void method_adopt_queue(jrpc_workers_t *w, method_t *to, method_t *from)
{
    if (from == NULL || from == to || from->qhead == NIL)
        return;
    for (uint32_t i = from->qhead; i != NIL; i = w->slots[i].next) {
        w->slots[i].method = to;
        to->refs++;
        from->refs--;
    }
    if (to->qtail == NIL)
        to->qhead = from->qhead;
    else
        w->slots[to->qtail].next = from->qhead;
    to->qtail = from->qtail;
    from->qhead = from->qtail = NIL;
    method_check(w, from);
}

/* svc (a service's entry) takes the bare name whose no-service entry is
 * bare (no workers, no owner): calls by the bare name go to svc, those
 * waiting for it too. */
void method_own_bare(jrpc_workers_t *w, method_t *svc, method_t *bare)
{
    bare->to = svc;
    svc->bare = bare;
    bare->refs++;
    svc->refs++;
    method_adopt_queue(w, svc, bare);
}

/* svc's last worker left: its bare name is free again (the next READY
 * declaring it takes it). */
void method_release_bare(jrpc_workers_t *w, method_t *svc)
{
    method_t *bare = svc->bare;
    if (bare == NULL)
        return;
    bare->to = NULL;
    svc->bare = NULL;
    method_unref(w, bare);
    method_unref(w, svc);
}

void method_remove_worker(method_t *m, worker_t *wk)
{
    for (uint32_t i = 0; i < m->nworkers; i++) {
        if (m->workers[i] == wk) {
            m->njson -= worker_json(wk, m);
            m->workers[i] = m->workers[--m->nworkers];
            return;
        }
    }
}

/* Answers every queued call of a method that nobody serves any more:
 * -32601, or -32004 for a call re-dispatched there (it may have run on the
 * worker that was lost). */
void method_fail_queue(jrpc_workers_t *w, method_t *m)
{
    while (m->qhead != NIL) {
        uint32_t i = m->qhead;
        slot_t *s = &w->slots[i];
        m->qhead = s->next;
        if (s->owner)
            w->queued--;
        if (s->resent && s->owner)
            w->lost++;
        slot_finish(w, i, JRPC_DONE_FAILED, s->resent ? JRPC_WORKER_FAILED : JRPC_METHOD_NOT_FOUND,
                    NO_VALUE);
    }
    m->qtail = NIL;
}

bool jrpc_workers_serves(jrpc_workers_t *w, const char *method, size_t len)
{
    method_t *m = method_target(method_lookup(w, method, len));
    return m != NULL && m->nworkers > 0;
}

/* m's name is s: short names compared inline (a call of libc's memcmp
 * costs more than the bytes, once per call). */
bool jrpc_workers_wants_msgpack(jrpc_workers_t *w, jrpc_span_t method)
{
    if (w->njson_workers == 0)   /* nobody takes JSON: msgpack, no lookup */
        return true;
    method_t *m = w->hint_m;
    if (m == NULL || !same_name(m, method)) {
        if ((m = method_lookup(w, method.p, method.n)) == NULL)
            return true;
        w->hint_m = m;
    }
    m = method_target(m);
    return m->njson < m->nworkers;
}

bool jrpc_workers_idempotent(jrpc_workers_t *w, jrpc_span_t method)
{
    method_t *m = method.n ? method_target(method_lookup(w, method.p, method.n)) : NULL;
    if (m == NULL || m->nworkers == 0)
        return false;
    for (uint32_t k = 0; k < m->nworkers; k++)
        if (!worker_idempotent(m->workers[k], m))
            return false;
    return true;
}

bool jrpc_workers_service_ok(const char *s, size_t n)
{
    if (n == 0 || n > JRPC_WORKERS_SERVICE_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || (c != '_' && c != '-')))
            return false;
    }
    return true;
}

jrpc_span_t jrpc_workers_canonical(jrpc_workers_t *w, jrpc_span_t method, jrpc_span_t *service)
{
    if (service)
        *service = (jrpc_span_t){ NULL, 0 };
    if (w->nsvc_methods == 0)
        return method;
    method_t *m = method_target(method_lookup(w, method.p, method.n));
    if (m == NULL || m->slen == 0)
        return method;
    if (service)
        *service = (jrpc_span_t){ m->name, m->slen };
    return (jrpc_span_t){ m->name, m->len };
}

void jrpc_workers_each_method(jrpc_workers_t *w, jrpc_method_fn fn, void *arg)
{
    for (uint32_t b = 0; b < w->mtab_size; b++) {
        for (method_t *m = w->mtab[b]; m; m = m->next) {
            uint32_t live = 0;
            for (uint32_t k = 0; k < m->nworkers; k++)
                live += !m->workers[k]->draining;
            if (m->to != NULL || live == 0)
                continue;
            jrpc_method_info_t mi = {
                .service = { m->name, m->slen },
                .method = method_wire_name(m),
                .canonical = { m->name, m->len },
                .owns_bare = m->slen == 0 || m->bare != NULL,
                .idempotent = true,
                .json = m->njson > 0,
                .workers = live,
            };
            for (uint32_t k = 0; k < m->nworkers; k++) {
                const worker_t *wk = m->workers[k];
                /* m's index in wk->methods: m->pos when wk sent the last READY
                 * that listed m (no walk), else found by a walk */
                uint32_t j = m->pos < wk->nmethods && wk->methods[m->pos] == m ? m->pos : 0;
                while (j < wk->nmethods && wk->methods[j] != m)
                    j++;
                if (j == wk->nmethods)
                    continue;
                mi.idempotent = mi.idempotent && wk->idem[j];
                if (wk->sch != NULL && mi.decl.n == 0) {
                    mi.params = wk->sch[3 * j];
                    mi.result = wk->sch[3 * j + 1];
                    mi.decl = wk->sch[3 * j + 2];
                }
            }
            fn(arg, &mi);
        }
    }
}

uint32_t jrpc_workers_method_stat(jrpc_workers_t *w, jrpc_span_t method)
{
    method_t *m = method.n ? method_target(method_lookup(w, method.p, method.n)) : NULL;
    return m ? m->stat : JRPC_METRICS_OTHER;
}
