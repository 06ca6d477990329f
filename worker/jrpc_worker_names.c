/* jrpc_worker_names — brokers found by name in jrpc_worker (see
 * jrpc_worker.h; the state is in jrpc_worker_int.h).
 *
 * Brokers found by name (dns+tcp://NAME:PORT, issue 16): a resolver per
 * name runs uv_getaddrinfo (the libuv thread pool: the loop never waits on
 * DNS) at connect, every resolve_ms, and when one of its conns loses its
 * broker. jrpc_dns (pure) turns the answer into a set of endpoints and
 * compares it with the conns in force: an address that appears gets a conn
 * of its own, exactly like one given to jrpc_worker_connect(); one that
 * disappears is retired: DISCONNECT at once, then the conn is drained as a
 * whole worker would be (its calls are served and answered, heartbeats go
 * on) and closed when it holds none, or when its broker is lost. A retired
 * conn is never reopened, and freed only when no call object points at it
 * (refs): a call's answer must still find its endpoint and generation. */
#include "jrpc_worker_int.h"

#include <zmq.h>

#include "jrpc_log.h"

/* ---- brokers found by name ---- */

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *ai);

/* The address of c left its name: c leaves as a drain leaves (PROTOCOL.md
 * 6), alone. The tick closes it once it holds no call, jrpc_worker_conn_reset() when
 * its broker is lost or says DISCONNECT. */
static void conn_retire(conn_t *c)
{
    jrpc_worker_t *w = c->w;
    c->retiring = true;
    JRPC_LOG(JRPC_LOG_INFO, "worker", "event=broker_dropped endpoint=%s name=%s inflight=%u",
             c->endpoint, c->rs->url, c->inflight);
    if (c->sock == NULL)
        return;
    if (c->reset_due) { /* the broker does not know this session: nothing to finish */
        jrpc_worker_conn_close(c, 0);
        return;
    }
    jrpc_worker_conn_flush(c);
    jrpc_worker_conn_send_bare(c, JRPC_WIRE_DISCONNECT);
    if (c->inflight == 0)
        jrpc_worker_conn_close(c, c->alive ? (int)w->opts.linger_ms : 0);
}

/* Starts a lookup of rs's name, or asks for one more after the one running. */
void jrpc_worker_resolver_start(resolver_t *rs)
{
    jrpc_worker_t *w = rs->w;
    if (w->stopping || w->draining)
        return;
    if (rs->busy) {
        rs->again = true;
        return;
    }
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;      /* A and AAAA */
    hints.ai_socktype = SOCK_STREAM;  /* one entry per address, not one per socket type */
    rs->req.data = rs;
    int rc = uv_getaddrinfo(w->loop, &rs->req, on_resolved, rs->name.host, NULL, &hints);
    if (rc < 0) {
        JRPC_LOG(JRPC_LOG_WARN, "worker", "event=resolve_failed name=%s err=\"%s\"", rs->url,
                 uv_strerror(rc));
        return;
    }
    rs->busy = true;
    w->nresolving++;
}

/* Makes the conns of rs match the endpoints eps (n of them, from
 * jrpc_dns_endpoints): new ones get a conn, gone ones are retired. */
static void resolver_apply(resolver_t *rs, char (*eps)[JRPC_DNS_EP_MAX], size_t n)
{
    jrpc_worker_t *w = rs->w;
    /* Zeroed: GCC's -Wmaybe-uninitialized (Release) cannot see that only
     * the first nold are read. Not a hot path (one resolve). */
    conn_t *oldc[JRPC_DNS_ADDRS_MAX] = { 0 };
    const char *old[JRPC_DNS_ADDRS_MAX] = { 0 }, *cur[JRPC_DNS_ADDRS_MAX] = { 0 };
    bool gone[JRPC_DNS_ADDRS_MAX], added[JRPC_DNS_ADDRS_MAX];
    size_t nold = 0, ngone = 0, nadded = 0;
    /* The conns in force are the last answer's addresses: at most
     * JRPC_DNS_ADDRS_MAX. */
    for (size_t i = 0; i < w->nconns && nold < JRPC_DNS_ADDRS_MAX; i++) {
        if (w->conns[i]->rs == rs && !w->conns[i]->retiring) {
            oldc[nold] = w->conns[i];
            old[nold++] = w->conns[i]->endpoint;
        }
    }
    for (size_t j = 0; j < n; j++)
        cur[j] = eps[j];
    if (jrpc_dns_diff(old, nold, cur, n, gone, added) == 0) {
        JRPC_LOG(JRPC_LOG_DEBUG, "worker", "event=resolved name=%s addrs=%zu changed=0", rs->url, n);
        return;
    }
    for (size_t i = 0; i < nold; i++) {
        if (gone[i]) {
            conn_retire(oldc[i]);
            ngone++;
        }
    }
    for (size_t j = 0; j < n; j++) {
        if (!added[j])
            continue;
        int rc = jrpc_worker_conn_add(w, cur[j], rs);
        if (rc < 0)
            JRPC_LOG(JRPC_LOG_ERROR, "worker", "event=connect_failed endpoint=%s name=%s err=\"%s\"",
                     cur[j], rs->url, zmq_strerror(-rc));
        else
            nadded++;
    }
    JRPC_LOG(JRPC_LOG_INFO, "worker", "event=resolved name=%s addrs=%zu added=%zu dropped=%zu",
             rs->url, n, nadded, ngone);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *ai)
{
    resolver_t *rs = req->data;
    jrpc_worker_t *w = rs->w;
    rs->busy = false;
    w->nresolving--;
    if (w->stopping || w->draining || status == UV_ECANCELED) {
        uv_freeaddrinfo(ai);
        return;
    }
    char eps[JRPC_DNS_ADDRS_MAX][JRPC_DNS_EP_MAX];
    bool cut = false;
    size_t n = status == 0 ? jrpc_dns_endpoints(ai, rs->name.port, eps, JRPC_DNS_ADDRS_MAX, &cut) : 0;
    uv_freeaddrinfo(ai);
    if (n == 0) {
        /* A name that resolves to nothing is more likely a DNS hiccup than
         * every broker gone: keep the sessions in force. Warned once per
         * outage, not at every interval. */
        JRPC_LOG(rs->failures++ ? JRPC_LOG_DEBUG : JRPC_LOG_WARN, "worker",
                 "event=resolve_failed name=%s err=\"%s\" action=keep", rs->url,
                 status < 0 ? uv_strerror(status) : "no address");
    } else {
        if (rs->failures > 0)
            JRPC_LOG(JRPC_LOG_INFO, "worker", "event=resolve_recovered name=%s failures=%u",
                     rs->url, rs->failures);
        rs->failures = 0;
        if (cut)
            JRPC_LOG(JRPC_LOG_WARN, "worker", "event=resolve_truncated name=%s kept=%d", rs->url,
                     JRPC_DNS_ADDRS_MAX);
        resolver_apply(rs, eps, n);
    }
    if (rs->again) {
        rs->again = false;
        jrpc_worker_resolver_start(rs);
    }
}

static void on_resolve_timer(uv_timer_t *t)
{
    jrpc_worker_resolver_start(t->data);
}

int jrpc_worker_resolver_add(jrpc_worker_t *w, const char *url)
{
    jrpc_dns_name_t name;
    if (jrpc_dns_parse(url, &name) < 0)
        return -EINVAL;
    resolver_t **rss = realloc(w->resolvers, (w->nresolvers + 1) * sizeof *rss);
    if (rss == NULL)
        return -ENOMEM;
    w->resolvers = rss;
    resolver_t *rs = calloc(1, sizeof *rs);
    if (rs == NULL || (rs->url = strdup(url)) == NULL) {
        free(rs);
        return -ENOMEM;
    }
    rs->w = w;
    rs->name = name;
    uv_timer_init(w->loop, &rs->timer);
    rs->timer.data = rs;
    uv_timer_start(&rs->timer, on_resolve_timer, w->opts.resolve_ms, w->opts.resolve_ms);
    w->resolvers[w->nresolvers++] = rs;
    jrpc_worker_tick_start(w);
    JRPC_LOG(JRPC_LOG_INFO, "worker", "event=resolving name=%s resolve_ms=%u", url,
             w->opts.resolve_ms);
    jrpc_worker_resolver_start(rs);
    return 0;
}
