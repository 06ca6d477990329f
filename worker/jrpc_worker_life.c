/* jrpc_worker_life — the worker's life in jrpc_worker (see jrpc_worker.h;
 * the state is in jrpc_worker_int.h): made, given its handlers, connected
 * (to endpoints, or to brokers found by name), run, drained, paused and
 * resumed, stopped, destroyed.
 *
 * Draining (jrpc_worker_drain): DISCONNECT goes out at once but the sockets
 * stay open; calls held, and any the broker sent before it read the
 * DISCONNECT, are served and answered; heartbeats go on so that the broker
 * does not take a long call for a dead worker. Nothing reconnects: a conn
 * whose broker is lost or says DISCONNECT is closed (its calls have nobody
 * to answer to). The worker stops once no live call is left, or when every
 * live call is past its deadline, or at the drain timeout. */
#include "jrpc_worker_int.h"

#include <errno.h>
#include <zmq.h>

#include "jrpc_log.h"
#include "jrpc_wire.h"

/* ---- options ---- */

void jrpc_worker_opts_init(jrpc_worker_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->credit = 64;
    o->heartbeat_ms = 1000;
    o->liveness = 3;
    o->linger_ms = 1000;
    o->resolve_ms = 5000;
}

/* ---- the worker ---- */

/* A READY "name" or "service" the worker may send: NULL (none), or 1..63
 * printable ASCII bytes. */
static bool label_ok(const char *s)
{
    if (s == NULL)
        return true;
    size_t n = strlen(s);
    bool ok = n > 0 && n < 64;
    for (size_t i = 0; ok && i < n; i++)
        ok = s[i] > 0x20 && s[i] < 0x7f;
    return ok;
}

jrpc_worker_t *jrpc_worker_new(const jrpc_worker_opts_t *opts)
{
    jrpc_worker_opts_t o;
    if (opts == NULL)
        jrpc_worker_opts_init(&o);
    else
        o = *opts;
    if (o.credit == 0 || o.heartbeat_ms < 10 || o.liveness == 0 || (o.resolve_ms != 0 && o.resolve_ms < 100) ||
        (o.curve_keypair == NULL) != (o.broker_public == NULL) ||
        (o.zmq_engine && strcmp(o.zmq_engine, "native") != 0 &&
         strcmp(o.zmq_engine, "libzmq") != 0) ||
        (o.broker_public && (!jrpc_curve_key_ok(o.broker_public) ||
                             !jrpc_curve_key_ok(o.curve_keypair->public_z85) ||
                             !jrpc_curve_key_ok(o.curve_keypair->secret_z85)))) {
        errno = EINVAL;
        return NULL;
    }
    if (!label_ok(o.name) || !label_ok(o.service) ||
        (o.schemas && strlen(o.schemas) > JRPC_WIRE_SCHEMAS_MAX)) {
        errno = EINVAL;
        return NULL;
    }
    jrpc_worker_t *w = calloc(1, sizeof *w);
    if (w == NULL)
        return NULL;
    if (o.schemas && (w->schemas = strdup(o.schemas)) == NULL) {
        free(w);
        return NULL;
    }
    if (o.name)
        memcpy(w->name, o.name, strlen(o.name) + 1);
    if (o.service)
        memcpy(w->service, o.service, strlen(o.service) + 1);
    o.name = o.service = o.schemas = NULL;   /* borrowed by the caller: not kept */
    if (o.resolve_ms == 0) /* opts made by hand before the field existed */
        o.resolve_ms = 5000;
    if (o.curve_keypair) {
        w->curve = true;
        w->curve_kp = *o.curve_keypair;
        memcpy(w->broker_public, o.broker_public, sizeof w->broker_public);
    }
    o.curve_keypair = NULL;   /* borrowed by the caller: not kept */
    o.broker_public = NULL;
    /* CURVE is libzmq's: our own engine speaks the NULL mechanism only. */
    w->native = !w->curve && (o.zmq_engine == NULL || strcmp(o.zmq_engine, "native") == 0);
    o.zmq_engine = NULL;
    w->opts = o;
    jrpc_buf_init(&w->tmp);
    jrpc_buf_init(&w->jparams);
    if (o.loop != NULL) {
        w->loop = o.loop;
    } else {
        if (uv_loop_init(&w->own_loop) < 0)
            goto fail_loop;
        w->loop = &w->own_loop;
        w->owns_loop = true;
    }
    if ((w->zctx = zmq_ctx_new()) == NULL)
        goto fail_ctx;
    if (!msgpack_zone_init(&w->zone, 8192))
        goto fail_zone;
    uv_timer_init(w->loop, &w->tick);
    uv_idle_init(w->loop, &w->flush_idle);
    uv_timer_init(w->loop, &w->drain_timer);
    w->tick.data = w->flush_idle.data = w->drain_timer.data = w;
    return w;
fail_zone:
    zmq_ctx_term(w->zctx);
fail_ctx:
    if (w->owns_loop)
        uv_loop_close(&w->own_loop);
fail_loop:
    jrpc_curve_keypair_wipe(&w->curve_kp);
    free(w->schemas);
    free(w);
    return NULL;
}

int jrpc_worker_handle(jrpc_worker_t *w, const char *method, jrpc_handler_fn fn, void *arg)
{
    return jrpc_worker_handle_ex(w, method, fn, arg, 0);
}

int jrpc_worker_handle_ex(jrpc_worker_t *w, const char *method, jrpc_handler_fn fn, void *arg,
                          unsigned flags)
{
    if (method == NULL || method[0] == '\0' || fn == NULL || (flags & ~JRPC_WORKER_IDEMPOTENT))
        return -EINVAL;
    if (w->nconns > 0 || w->nresolvers > 0)
        return -EBUSY;
    size_t len = strlen(method);
    if (find_handler(w, (jrpc_span_t){ method, len }) != NULL)
        return -EEXIST;
    handler_t *hs = realloc(w->handlers, (w->nhandlers + 1) * sizeof *hs);
    if (hs == NULL)
        return -ENOMEM;
    w->handlers = hs;
    char *name = strdup(method);
    if (name == NULL)
        return -ENOMEM;
    hs[w->nhandlers++] = (handler_t){ .name = name, .len = len, .fn = fn, .arg = arg,
                                      .flags = flags };
    return 0;
}

static void json_placeholder(jrpc_wcall_t *call, const msgpack_object *params, void *arg)
{
    (void)call, (void)params, (void)arg;   /* never called: replaced at once */
}

int jrpc_worker_handle_json(jrpc_worker_t *w, const char *method, jrpc_json_handler_fn fn,
                            void *arg, unsigned flags)
{
    if (fn == NULL)
        return -EINVAL;
    /* Registered as a msgpack handler first (the same checks), then made json. */
    int rc = jrpc_worker_handle_ex(w, method, json_placeholder, arg, flags);
    if (rc < 0)
        return rc;
    handler_t *h = &w->handlers[w->nhandlers - 1];
    h->fn = NULL;
    h->jfn = fn;
    return 0;
}

/* A conn to endpoint (given, or an address of rs's name), opened at once
 * unless paused (resume opens it). */
int jrpc_worker_conn_add(jrpc_worker_t *w, const char *endpoint, resolver_t *rs)
{
    int rc = -ENOMEM;
    conn_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        goto out;
    c->w = w;
    c->rs = rs;
    jrpc_buf_init(&c->out);
    if ((c->endpoint = strdup(endpoint)) == NULL)
        goto out;
    conn_t **cs = realloc(w->conns, (w->nconns + 1) * sizeof *cs);
    if (cs == NULL)
        goto out;
    w->conns = cs;
    if (!w->paused && (rc = jrpc_worker_conn_open(c)) < 0)
        goto out;
    w->conns[w->nconns++] = c;
    c = NULL;
    jrpc_worker_tick_start(w);
    JRPC_LOG(JRPC_LOG_INFO, "worker", "event=connecting endpoint=%s name=%s credit=%u "
             "heartbeat_ms=%u curve=%s", endpoint, rs ? rs->url : "-", w->opts.credit,
             w->opts.heartbeat_ms, w->curve ? "on" : "off");
    rc = 0;
out:
    if (c != NULL)
        conn_free(c);
    return rc;
}

int jrpc_worker_connect(jrpc_worker_t *w, const char *endpoint)
{
    if (w->nhandlers == 0 || endpoint == NULL || w->stopping)
        return -EINVAL;
    if (jrpc_dns_is_name(endpoint))
        return jrpc_worker_resolver_add(w, endpoint);
    return jrpc_worker_conn_add(w, endpoint, NULL);
}

/* Lets the handles and sockets closed by jrpc_worker_stop() finish, and a
 * lookup it could not cancel (already running in the thread pool): that
 * one is waited for, not spun on. */
static void stop_wait(jrpc_worker_t *w)
{
    while (w->nclosing > 0)
        uv_run(w->loop, UV_RUN_NOWAIT);
    while (w->nresolving > 0)
        uv_run(w->loop, UV_RUN_ONCE);
}

int jrpc_worker_run(jrpc_worker_t *w)
{
    int rc = 0;
    if (!w->stopping)
        rc = uv_run(w->loop, UV_RUN_DEFAULT);
    stop_wait(w);
    return rc < 0 ? rc : 0;
}

static void on_handle_closed(uv_handle_t *h)
{
    jrpc_worker_t *w = h->data;
    w->nclosing--;
}

static void on_resolve_timer_closed(uv_handle_t *h)
{
    resolver_t *rs = h->data;
    rs->w->nclosing--;
}

void jrpc_worker_stop(jrpc_worker_t *w)
{
    if (w->stopping)
        return;
    for (size_t i = 0; i < w->nconns; i++) {
        conn_t *c = w->conns[i];
        if (c->sock == NULL)
            continue;
        jrpc_worker_conn_flush(c);
        if (!w->draining && !c->retiring) { /* a drain or a retirement sent it already */
            jrpc_worker_conn_send_bare(c, JRPC_WIRE_DISCONNECT);
            JRPC_LOG(JRPC_LOG_INFO, "worker", "event=disconnect_sent endpoint=%s inflight=%u",
                     c->endpoint, c->inflight);
        }
        /* A broker we never heard from would only make exit wait. */
        jrpc_worker_conn_close(c, c->alive ? (int)w->opts.linger_ms : 0);
    }
    w->stopping = true;
    for (size_t i = 0; i < w->nresolvers; i++) {
        resolver_t *rs = w->resolvers[i];
        w->nclosing++;
        uv_close((uv_handle_t *)&rs->timer, on_resolve_timer_closed);
        if (rs->busy)
            uv_cancel((uv_req_t *)&rs->req); /* its callback still comes (UV_ECANCELED) */
    }
    w->nclosing += 3;
    uv_close((uv_handle_t *)&w->tick, on_handle_closed);
    uv_close((uv_handle_t *)&w->flush_idle, on_handle_closed);
    uv_close((uv_handle_t *)&w->drain_timer, on_handle_closed);
    uv_stop(w->loop);
}

void jrpc_worker_drain(jrpc_worker_t *w, uint32_t timeout_ms)
{
    if (w->stopping || w->draining)
        return;
    w->draining = true;
    w->drain_until = uv_now(w->loop) + timeout_ms;
    for (size_t i = 0; i < w->nconns; i++) {
        conn_t *c = w->conns[i];
        if (c->sock == NULL)
            continue;
        if (c->reset_due) { /* the broker does not know this session: nothing to finish */
            jrpc_worker_conn_close(c, 0);
            continue;
        }
        if (c->retiring) /* DISCONNECT sent already; its calls count below */
            continue;
        jrpc_worker_conn_flush(c);
        jrpc_worker_conn_send_bare(c, JRPC_WIRE_DISCONNECT);
        JRPC_LOG(JRPC_LOG_INFO, "worker", "event=disconnect_sent endpoint=%s inflight=%u drain=1",
                 c->endpoint, c->inflight);
    }
    jrpc_worker_drain_check(w);
}

void jrpc_worker_pause(jrpc_worker_t *w)
{
    if (w->stopping || w->draining || w->paused)
        return;
    w->paused = true;
    for (size_t i = 0; i < w->nconns; i++) {
        conn_t *c = w->conns[i];
        if (c->sock == NULL)
            continue;
        jrpc_worker_conn_flush(c);
        if (!c->retiring) /* a retired conn sent it already */
            jrpc_worker_conn_send_bare(c, JRPC_WIRE_DISCONNECT);
        JRPC_LOG(JRPC_LOG_INFO, "worker", "event=paused endpoint=%s inflight=%u", c->endpoint,
                 c->inflight);
        jrpc_worker_conn_close(c, c->alive ? (int)w->opts.linger_ms : 0);
    }
}

void jrpc_worker_resume(jrpc_worker_t *w)
{
    if (!w->paused || w->stopping || w->draining)
        return;
    w->paused = false;
    for (size_t i = 0; i < w->nconns; i++) {
        conn_t *c = w->conns[i];
        if (c->sock != NULL || c->retiring)
            continue;
        JRPC_LOG(JRPC_LOG_INFO, "worker", "event=resumed endpoint=%s", c->endpoint);
        jrpc_worker_conn_reset(c, "resume");
    }
}

uint64_t jrpc_worker_answered(const jrpc_worker_t *w)
{
    return w->answered;
}

uv_loop_t *jrpc_worker_loop(jrpc_worker_t *w)
{
    return w->loop;
}

void jrpc_worker_destroy(jrpc_worker_t **self_p)
{
    jrpc_worker_t *w = *self_p;
    if (w == NULL)
        return;
    *self_p = NULL;
    jrpc_worker_stop(w);
    stop_wait(w);
    while (w->calls) {
        JRPC_LOG(JRPC_LOG_DEBUG, "worker", "event=call_abandoned seq=%llu",
                 (unsigned long long)w->calls->seq);
        jrpc_wcall_t *wc = w->calls;
        w->calls = wc->next;
        jrpc_buf_dispose(&wc->result);
        free(wc);
    }
    while (w->free_calls) {
        jrpc_wcall_t *wc = w->free_calls;
        w->free_calls = wc->next;
        jrpc_buf_dispose(&wc->result);
        free(wc);
    }
    for (size_t i = 0; i < w->nconns; i++)
        conn_free(w->conns[i]);
    free(w->conns);
    for (size_t i = 0; i < w->nresolvers; i++) {
        free(w->resolvers[i]->url);
        free(w->resolvers[i]);
    }
    free(w->resolvers);
    for (size_t i = 0; i < w->nhandlers; i++)
        free(w->handlers[i].name);
    free(w->handlers);
    msgpack_zone_destroy(&w->zone);
    jrpc_buf_dispose(&w->tmp);
    jrpc_buf_dispose(&w->jparams);
    jrpc_curve_keypair_wipe(&w->curve_kp);
    free(w->schemas);
    zmq_ctx_term(w->zctx); /* waits up to linger_ms for DISCONNECTs to leave */
    if (w->owns_loop) {
        uv_run(w->loop, UV_RUN_NOWAIT);
        int rc = uv_loop_close(w->loop);
        if (rc < 0)
            JRPC_LOG(JRPC_LOG_WARN, "worker", "event=loop_busy err=\"%s\" hint=\"close your handles before destroy\"",
                     uv_strerror(rc));
    }
    free(w);
}
