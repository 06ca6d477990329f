/* jrpc_sessions — a worker's session in jrpc_workers (see jrpc_workers.h;
 * the state is in jrpc_workers_int.h), from READY to its end: the READY
 * checked and the worker named, or refused; heartbeats and liveness;
 * ejection after timeouts; a lost worker's calls sent again or failed; the
 * dead reaped.
 *
 * The worker port is a trust boundary: a READY is read in time linear in
 * its size (a per-READY mark on the method entries finds duplicates, the
 * hash table grows), and is refused past opts.max_worker_methods names or
 * when it would take the table past opts.max_methods.
 * Liveness counts heartbeat ticks without a message, so a long callback
 * (which delays the ticks as well as the reading) cannot expire a worker. */
#include "jrpc_workers_int.h"

#include <stdio.h>

#include "jrpc_errors.h"
#include "jrpc_json.h"
#include "jrpc_mpack.h"
#include "jrpc_openrpc.h"
#include "jrpc_mcp_sid.h"

#define NATIVE_IDLEN 5   /* a zero byte and a 32-bit number, as libzmq makes them */

/* The routing id of a peer, for labels and logs: buf has NATIVE_IDLEN bytes. */
static const char *peer_id(const peer_t *p, char *buf, size_t *len)
{
    if (p->conn == NULL) {
        *len = p->idlen;
        return p->id;
    }
    uint32_t n = jrpc_zmtp_conn_id(p->conn);
    buf[0] = 0;
    for (int i = 4; i >= 1; i--, n >>= 8)
        buf[i] = (char)(uint8_t)n;
    *len = NATIVE_IDLEN;
    return buf;
}

/* Stops routing new calls to wk (DISCONNECT or death). Its method list
 * stays: worker_kill still needs to know what it declared idempotent. */
void worker_unroute(jrpc_workers_t *w, worker_t *wk)
{
    if (!wk->routed)
        return;
    wk->routed = false;
    w->njson_workers -= wk->njson > 0;
    for (uint32_t i = 0; i < wk->nmethods; i++) {
        method_t *m = wk->methods[i];
        method_remove_worker(m, wk);
        if (wk->ejected_until)
            m->nejected--;
        if (m->nworkers == 0) {
            method_release_bare(w, m);
            method_fail_queue(w, m);
        }
    }
}

/* Drops wk's references to the methods it listed (once unrouted, when
 * nothing needs its idempotent flags any more). */
static void worker_release_methods(jrpc_workers_t *w, worker_t *wk)
{
    for (uint32_t i = 0; i < wk->nmethods; i++)
        method_unref(w, wk->methods[i]);
    wk->nmethods = 0;
}

/* Removes a worker. Each call it held is sent again when that cannot run it
 * twice — the worker declared the method idempotent, or the REQUEST never
 * left our socket — up to max_redispatch times per call; the others are
 * answered -32004 at once ("may or may not have run"). */
void worker_kill(jrpc_workers_t *w, worker_t *wk, const char *why)
{
    if (wk->dead)
        return;
    wk->dead = true;
    w->nworkers--;
    uint32_t held = wk->inflight, resent = 0, failed = 0;
    worker_unroute(w, wk);
    w->inflight -= wk->inflight;
    wk->inflight = 0;
    wk->bytes = 0;
    wk->out_n = 0;
    for (uint32_t i = 0; i < w->nslots; i++) {
        slot_t *s = &w->slots[i];
        if (s->state != SLOT_SENT || s->worker != wk)
            continue;
        if (s->owner == NULL || s->twin != NIL) { /* cancelled, or its twin goes on alone */
            slot_free(w, i);
            continue;
        }
        bool delivered = s->flush_no != wk->flushes;
        if ((!delivered || worker_idempotent(wk, s->method)) &&
            s->resent < w->opts.max_redispatch && redispatch(w, i) == 0) {
            resent++;
            continue;
        }
        failed++;
        slot_finish(w, i, JRPC_DONE_FAILED, JRPC_WORKER_FAILED, NO_VALUE);
    }
    worker_release_methods(w, wk);
    w->redispatched += resent;
    w->lost += failed;
    JRPC_LOG(JRPC_LOG_WARN, "workers",
             "event=worker_lost reason=%s inflight=%u redispatched=%u failed=%u workers=%u worker=%s",
             why, held, resent, failed, w->nworkers, wk->name);
}

static void worker_free(jrpc_workers_t *w, worker_t *wk)
{
    if (wk->conn && jrpc_zmtp_conn_data(wk->conn) == wk)   /* not a later session's */
        jrpc_zmtp_conn_set_data(wk->conn, NULL);
    jrpc_zmtp_conn_unref(&wk->conn);
    worker_release_methods(w, wk);
    jrpc_buf_dispose(&wk->out);
    free(wk->methods);
    free(wk->idem);
    free(wk->sch);
    free(wk->schemas);
    free(wk);
}

worker_t *instance_worker(jrpc_workers_t *w, uint64_t instance)
{
    for (worker_t *wk = w->workers; wk; wk = wk->next)
        if (!wk->dead && wk->has_instance && wk->instance == instance)
            return wk;
    return NULL;
}

/* A worker with READY "instance" left: when no connected worker has that
 * instance any more, its sessions are gone with it, and the receiver of
 * MESSAGE frames is told so as for one session's end (session = the
 * instance alone, 16 hex digits; body nil): their GET streams end. */
static void instance_gone(jrpc_workers_t *w, uint64_t instance)
{
    if (w->on_msg == NULL || instance_worker(w, instance) != NULL)
        return;
    char text[JRPC_MCP_INSTANCE_LEN + 1];
    jrpc_mcp_instance_format(instance, text);
    w->on_msg(NULL, 0, (jrpc_span_t){ text, JRPC_MCP_INSTANCE_LEN }, (jrpc_span_t){ NULL, 0 },
              w->on_msg_arg);
}

/* Frees the workers marked dead (never from inside a loop over them). */
void reap(jrpc_workers_t *w)
{
    worker_t **pp = &w->workers;
    while (*pp) {
        worker_t *wk = *pp;
        if (wk->dead || (wk->draining && wk->inflight == 0)) {
            if (!wk->dead) {
                wk->dead = true;
                w->nworkers--;
                JRPC_LOG(JRPC_LOG_INFO, "workers", "event=worker_drained workers=%u",
                         w->nworkers);
            }
            *pp = wk->next;
            bool had = wk->has_instance && !w->destroying;
            uint64_t instance = wk->instance;
            worker_free(w, wk);
            if (had)
                instance_gone(w, instance);
        } else {
            pp = &wk->next;
        }
    }
    method_sweep(w);
}

/* A READY name becomes a metrics label and goes into log lines: 1 to
 * MAX_NAME bytes of [A-Za-z0-9._:@/-], nothing that needs escaping. */
static bool name_ok(const char *p, size_t n)
{
    if (n == 0 || n > MAX_NAME)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == ':' || c == '@' || c == '/' || c == '-'))
            return false;
    }
    return true;
}

/* The worker's label in the metrics and logs: its READY name when
 * name_ok(), else its routing id in hex (a refused name is logged). */
static void worker_name(worker_t *wk, const msgpack_object *name)
{
    if (name && name->type == MSGPACK_OBJECT_STR && name_ok(name->via.str.ptr, name->via.str.size)) {
        memcpy(wk->name, name->via.str.ptr, name->via.str.size);
        wk->name[name->via.str.size] = '\0';
        return;
    }
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    for (size_t i = 0; i < wk->idlen && n + 2 <= MAX_NAME; i++) {
        wk->name[n++] = hex[(uint8_t)wk->id[i] >> 4];
        wk->name[n++] = hex[(uint8_t)wk->id[i] & 15];
    }
    wk->name[n] = '\0';
    if (name && name->type == MSGPACK_OBJECT_STR)
        JRPC_LOG(JRPC_LOG_WARN, "workers",
                 "event=worker_name_refused worker=%s bytes=%u detail=\"not 1-64 bytes of "
                 "[A-Za-z0-9._:@/-]: labelled by its routing id\"", wk->name, name->via.str.size);
}

/* Refuses a READY: logged, counted, and the worker told DISCONNECT ("I do
 * not know you": it reconnects and tries again, at most once per heartbeat
 * interval, PROTOCOL.md section 6). */
static void ready_refuse(jrpc_workers_t *w, const peer_t *from, const char *why, uint32_t n,
                         uint32_t limit)
{
    w->ready_refused++;
    char idbuf[NATIVE_IDLEN];
    size_t idlen;
    const char *id = peer_id(from, idbuf, &idlen);
    char hexid[2 * 16 + 1];
    size_t k = 0;
    for (size_t i = 0; i < idlen && i < 16; i++)
        k += (size_t)snprintf(hexid + k, sizeof hexid - k, "%02x", (uint8_t)id[i]);
    hexid[k] = '\0';
    if (strcmp(why, "bad_service") == 0)   /* the name itself is not logged: hostile */
        JRPC_LOG(JRPC_LOG_WARN, "workers",
                 "event=worker_refused reason=bad_service id=%s methods=%u detail=\"service "
                 "is not [a-z0-9][a-z0-9_-]{0,62}\"", hexid, n);
    else
        JRPC_LOG(JRPC_LOG_WARN, "workers",
                 "event=ready_refused id=%s reason=%s methods=%u limit=%u", hexid, why, n, limit);
    send_simple(w, from, JRPC_WIRE_DISCONNECT);
}

/* A name a worker sent, for a log line: at most 64 bytes, anything but
 * [A-Za-z0-9._:@/-] shown as '?'. buf has 65 bytes. */
static const char *log_safe(char *buf, const char *p, size_t n)
{
    size_t k = 0;
    for (; k < n && k < 64; k++) {
        unsigned char c = (unsigned char)p[k];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == ':' || c == '@' || c == '/' || c == '-';
        buf[k] = ok ? (char)c : '?';
    }
    buf[k] = '\0';
    return buf;
}

/* What one READY declares its names under: its service (slen bytes, 0:
 * none) and a buffer where "service.name" keys are built. */
typedef struct ready_ctx {
    jrpc_workers_t *w;
    worker_t       *wk;
    const char     *svc;
    uint32_t        slen;
    char           *key;    /* slen + 1 + max_method_len bytes when slen > 0 */
    uint32_t        stamp;  /* this READY's mark; 0: a SCHEMAS frame (no marks) */
    uint32_t        dropped; /* methods whose declaration was dropped */
    bool            mcp;    /* a service's READY that lists "initialize": an MCP server */
    uint32_t        mcp_refused;      /* MCP's own methods whose bare name another owns */
    char            mcp_owner[JRPC_WORKERS_SERVICE_MAX + 1]; /* the service owning the
                                                                first of them ("-": none) */
} ready_ctx_t;

/* Makes c->key, the "service." buffer its names are looked up in (c->slen
 * > 0). 0 or -ENOMEM. */
static int ready_key(ready_ctx_t *c)
{
    if ((c->key = malloc(c->slen + 1 + (size_t)c->w->opts.max_method_len)) == NULL)
        return -ENOMEM;
    memcpy(c->key, c->svc, c->slen);
    c->key[c->slen] = '.';
    return 0;
}

/* The entry a declared name of this READY is kept under (NULL: none yet). */
static method_t *ready_find(const ready_ctx_t *c, const char *name, size_t n)
{
    if (c->slen == 0)
        return method_find(c->w, name, n);
    if (n > c->w->opts.max_method_len)
        return NULL;
    memcpy(c->key + c->slen + 1, name, n);
    return method_find_svc(c->w, c->key, c->slen + 1 + n, c->slen);
}

/* mt's index in c's worker's methods (UINT32_MAX: the worker does not
 * serve it): the mark this READY left, or a walk (SCHEMAS). */
static uint32_t ready_pos(const ready_ctx_t *c, const method_t *mt)
{
    if (c->stamp)
        return mt->mark == c->stamp ? mt->pos : UINT32_MAX;
    for (uint32_t j = 0; j < c->wk->nmethods; j++)
        if (c->wk->methods[j] == mt)
            return j;
    return UINT32_MAX;
}

#define SCHEMA_DROP_LINES 4   /* methods' dropped declarations logged one by one per READY */

/* One member of READY "schemas": {"params": [...], "result": {...}, ...}
 * for a method this READY declared; kept when jrpc_openrpc_decl_check()
 * passes it (the document stays valid), else dropped and logged (the
 * method is served all the same). */
static void ready_schema(void *arg, jrpc_span_t name, jrpc_span_t value)
{
    ready_ctx_t *c = arg;
    method_t *mt = ready_find(c, name.p, name.n);
    uint32_t j = mt ? ready_pos(c, mt) : UINT32_MAX;
    if (j == UINT32_MAX)
        return;
    const char *why;
    if (jrpc_openrpc_decl_check(value.p, value.n, &why) < 0) {
        char mbuf[65];
        if (c->dropped++ < SCHEMA_DROP_LINES)
            JRPC_LOG(JRPC_LOG_WARN, "workers",
                     "event=schema_dropped worker=%s service=%s method=%s reason=%s bytes=%zu",
                     c->wk->name, c->wk->service[0] ? c->wk->service : "-",
                     log_safe(mbuf, name.p, name.n), why, value.n);
        return;
    }
    jrpc_span_t *sp = &c->wk->sch[3 * j];
    if (jrpc_json_member(value.p, value.n, "params", &sp[0]) < 0)
        sp[0] = (jrpc_span_t){ NULL, 0 };
    if (jrpc_json_member(value.p, value.n, "result", &sp[1]) < 0)
        sp[1] = (jrpc_span_t){ NULL, 0 };
    sp[2] = value;
}

/* Keeps the READY's (or SCHEMAS') "schemas" (a JSON object by method name)
 * when it is at most JRPC_WIRE_SCHEMAS_MAX bytes of valid JSON; else logged
 * and ignored (schemas are documentation: the worker is served all the
 * same). Each method's declaration is checked on its own (ready_schema). */
static void ready_schemas(ready_ctx_t *c, const msgpack_object *sch)
{
    worker_t *wk = c->wk;
    if (sch == NULL || wk->nmethods == 0)
        return;
    size_t n = sch->via.str.size;
    if (n > JRPC_WIRE_SCHEMAS_MAX || (wk->schemas = malloc(n + 1)) == NULL ||
        (wk->sch = calloc(3 * (size_t)wk->nmethods, sizeof *wk->sch)) == NULL) {
        free(wk->schemas);
        wk->schemas = NULL;
        if (n > JRPC_WIRE_SCHEMAS_MAX)
            JRPC_LOG(JRPC_LOG_WARN, "workers",
                     "event=schemas_ignored worker=%s reason=too_large bytes=%zu limit=%d",
                     wk->name, n, JRPC_WIRE_SCHEMAS_MAX);
        return;
    }
    memcpy(wk->schemas, sch->via.str.ptr, n);
    wk->schemas[n] = '\0';
    if (jrpc_json_each_member(wk->schemas, n, 32, ready_schema, c) < 0) {
        JRPC_LOG(JRPC_LOG_WARN, "workers",
                 "event=schemas_ignored worker=%s reason=not_a_json_object bytes=%zu", wk->name, n);
        free(wk->sch);
        free(wk->schemas);
        wk->sch = NULL;
        wk->schemas = NULL;
    }
    if (c->dropped > SCHEMA_DROP_LINES)
        JRPC_LOG(JRPC_LOG_WARN, "workers", "event=schema_dropped worker=%s service=%s methods=%u",
                 wk->name, wk->service[0] ? wk->service : "-", c->dropped);
}

void on_schemas(jrpc_workers_t *w, worker_t *wk, const jrpc_wire_msg_t *m)
{
    ready_ctx_t c = { .w = w, .wk = wk, .svc = wk->service, .slen = (uint32_t)strlen(wk->service) };
    if (c.slen && ready_key(&c) < 0)
        return;
    free(wk->sch);
    free(wk->schemas);
    wk->sch = NULL;
    wk->schemas = NULL;
    ready_schemas(&c, m->schemas);
    free(c.key);
    JRPC_LOG(JRPC_LOG_INFO, "workers", "event=worker_schemas worker=%s service=%s bytes=%u "
             "schemas=%s dropped=%u", wk->name, wk->service[0] ? wk->service : "-",
             m->schemas->via.str.size, wk->schemas ? "yes" : "no", c.dropped);
}

/* Whether name is one of MCP's own methods (2025-06-18: the lifecycle,
 * utilities, server features), which every MCP service declares and a
 * client reaches through /mcp/<service> as service.name. */
static bool mcp_protocol(const char *name, size_t n)
{
    static const char *const exact[] = { "initialize", "ping" };
    static const char *const prefix[] = { "notifications/", "tools/", "resources/", "prompts/",
                                          "completion/", "logging/", "tasks/" };
    for (size_t i = 0; i < sizeof exact / sizeof *exact; i++)
        if (n == strlen(exact[i]) && memcmp(name, exact[i], n) == 0)
            return true;
    for (size_t i = 0; i < sizeof prefix / sizeof *prefix; i++)
        if (n > strlen(prefix[i]) && memcmp(name, prefix[i], strlen(prefix[i])) == 0)
            return true;
    return false;
}

/* The bare name of mt (a service's entry this READY lists): taken when
 * free, else refused for it (counted; logged at WARN, except MCP's own
 * methods of an MCP service, told at INFO in one line per READY); the
 * worker serves service.method either way. */
static void ready_bare(ready_ctx_t *c, method_t *mt, const char *name, size_t n)
{
    if (mt->bare != NULL)
        return;
    jrpc_workers_t *w = c->w;
    method_t *bare = method_find(w, name, n);
    if (bare == NULL || (bare->to == NULL && bare->nworkers == 0)) {
        if (bare == NULL && (bare = method_get(w, name, n)) == NULL)
            return;
        method_own_bare(w, mt, bare);
        return;
    }
    const method_t *owner = method_target(bare);
    char mbuf[65];
    w->methods_refused++;
    if (c->mcp && mcp_protocol(name, n)) {   /* expected: told in one line (on_ready) */
        if (c->mcp_refused++ == 0)
            snprintf(c->mcp_owner, sizeof c->mcp_owner, "%.*s",
                     owner->slen ? (int)owner->slen : 1, owner->slen ? owner->name : "-");
        return;
    }
    JRPC_LOG(JRPC_LOG_WARN, "workers",
             "event=method_refused reason=service_conflict method=%s service=%s owner=%.*s "
             "worker=%s", log_safe(mbuf, name, n), c->wk->service,
             owner->slen ? (int)owner->slen : 1, owner->slen ? owner->name : "-", c->wk->name);
}

/* Starts a session. Linear in the size of the READY: one hash lookup per
 * name, duplicates found by the mark the READY leaves on each entry. */
void on_ready(jrpc_workers_t *w, const peer_t *from, const jrpc_wire_msg_t *m)
{
    worker_t *old = worker_find(w, from);
    if (old)
        worker_kill(w, old, "ready_again");
    method_sweep(w);   /* what the old session alone listed */
    uint32_t n = m->methods->via.array.size;
    const msgpack_object *names = m->methods->via.array.ptr;
    if (n > w->opts.max_worker_methods) {
        ready_refuse(w, from, "too_many_methods", n, w->opts.max_worker_methods);
        return;
    }
    ready_ctx_t c = { .w = w };
    if (m->service) {
        c.svc = m->service->via.str.ptr;
        c.slen = m->service->via.str.size;
        if (!jrpc_workers_service_ok(c.svc, c.slen)) {
            ready_refuse(w, from, "bad_service", n, 0);
            return;
        }
        if (ready_key(&c) < 0)
            return;
    }
    for (uint32_t i = 0; c.slen && i < n && !c.mcp; i++)
        c.mcp = names[i].via.str.size == 10 && memcmp(names[i].via.str.ptr, "initialize", 10) == 0;
    uint32_t fresh = 0;   /* names not known yet (a repeated one counted each time) */
    for (uint32_t i = 0; i < n; i++)
        if (names[i].via.str.size <= w->opts.max_method_len) {
            fresh += ready_find(&c, names[i].via.str.ptr, names[i].via.str.size) == NULL;
            fresh += c.slen && method_find(w, names[i].via.str.ptr, names[i].via.str.size) == NULL;
        }
    if (fresh > w->opts.max_methods - (w->nmethods < w->opts.max_methods ? w->nmethods
                                                                           : w->opts.max_methods)) {
        ready_refuse(w, from, "method_table_full", w->nmethods + fresh, w->opts.max_methods);
        free(c.key);
        return;
    }
    worker_t *wk = calloc(1, sizeof *wk);
    if (wk == NULL || (wk->methods = calloc(n, sizeof *wk->methods)) == NULL ||
        (wk->idem = calloc(2 * (size_t)n, sizeof *wk->idem)) == NULL) {
        if (wk)
            free(wk->methods);
        free(wk);
        free(c.key);
        return;
    }
    c.wk = wk;
    wk->json = wk->idem + n;
    memcpy(wk->service, c.svc ? c.svc : "", c.slen);
    char idbuf[NATIVE_IDLEN];
    const char *id = peer_id(from, idbuf, &wk->idlen);
    memcpy(wk->id, id, wk->idlen);
    if (from->conn) {   /* the connection finds its worker without a search */
        jrpc_zmtp_conn_ref(from->conn);
        wk->conn = from->conn;
        jrpc_zmtp_conn_set_data(wk->conn, wk);
    }
    worker_name(wk, jrpc_mpack_map_get(m->options, "name"));
    wk->has_instance = m->has_instance;
    wk->probes = m->has_instance && m->probes;
    wk->instance = m->instance;
    if (from->ip)
        snprintf(wk->host, sizeof wk->host, "%s", from->ip);
    wk->credit = m->credit < w->opts.max_worker_credit ? m->credit : w->opts.max_worker_credit;
    wk->last_seen = jrpc_metrics.now;
    wk->seen = true;
    jrpc_buf_init(&wk->out);
    if (++w->ready_no == 0)
        w->ready_no = 1;
    uint32_t stamp = w->ready_no, ignored = 0;
    c.stamp = stamp;
    for (uint32_t i = 0; i < n; i++) {
        const msgpack_object_str *s = &names[i].via.str;
        if (s->size > w->opts.max_method_len) {
            ignored++;
            continue;
        }
        method_t *mt;
        if (c.slen) {
            memcpy(c.key + c.slen + 1, s->ptr, s->size);
            mt = method_get_svc(w, c.key, c.slen + 1 + s->size, c.slen);
        } else {
            mt = method_get(w, s->ptr, s->size);
            if (mt && mt->to) {   /* a service owns this bare name */
                char mbuf[65];
                w->methods_refused++;
                JRPC_LOG(JRPC_LOG_WARN, "workers",
                         "event=method_refused reason=service_conflict method=%s service=- "
                         "owner=%.*s worker=%s", log_safe(mbuf, s->ptr, s->size),
                         (int)mt->to->slen, mt->to->name, wk->name);
                continue;
            }
        }
        if (mt == NULL || mt->mark == stamp)
            continue;
        if (mt->stat == JRPC_METRICS_OTHER) {   /* its metrics record, found once */
            char svc[JRPC_WORKERS_SERVICE_MAX + 1];   /* {service, method} labels */
            jrpc_span_t bare = method_wire_name(mt);
            memcpy(svc, mt->name, mt->slen);
            svc[mt->slen] = '\0';
            mt->stat = jrpc_metrics_method_id(svc, bare.p, bare.n);
        }
        worker_t **ws = realloc(mt->workers, (mt->nworkers + 1) * sizeof *ws);
        if (ws == NULL) {
            method_check(w, mt);   /* freed if it was new */
            continue;
        }
        mt->workers = ws;
        mt->workers[mt->nworkers++] = wk;
        mt->mark = stamp;
        mt->pos = wk->nmethods;
        mt->refs++;
        wk->methods[wk->nmethods++] = mt;
        if (c.slen) {
            ready_bare(&c, mt, s->ptr, s->size);
            /* calls for "service.method" made before the service was known */
            method_adopt_queue(w, mt, method_find(w, c.key, c.slen + 1 + s->size));
        }
    }
    wk->routed = true;
    uint32_t nidem = 0;
    for (uint32_t i = 0; m->idempotent && i < m->idempotent->via.array.size; i++) {
        const msgpack_object_str *s = &m->idempotent->via.array.ptr[i].via.str;
        method_t *mt = ready_find(&c, s->ptr, s->size);
        if (mt && mt->mark == stamp && !wk->idem[mt->pos]) {
            wk->idem[mt->pos] = true;
            nidem++;
        }
    }
    for (uint32_t i = 0; m->json && i < m->json->via.array.size; i++) {
        const msgpack_object_str *s = &m->json->via.array.ptr[i].via.str;
        method_t *mt = ready_find(&c, s->ptr, s->size);
        if (mt && mt->mark == stamp && !wk->json[mt->pos]) {
            wk->json[mt->pos] = true;
            wk->njson++;
            mt->njson++;
        }
    }
    ready_schemas(&c, m->schemas);
    free(c.key);
    if (c.mcp_refused)   /* expected: the first MCP service keeps the bare names */
        JRPC_LOG(JRPC_LOG_INFO, "workers",
                 "event=method_refused reason=mcp_protocol methods=%u service=%s owner=%s "
                 "worker=%s", c.mcp_refused, wk->service, c.mcp_owner, wk->name);
    w->njson_workers += wk->njson > 0;
    wk->next = w->workers;
    w->workers = wk;
    w->nworkers++;
    JRPC_LOG(JRPC_LOG_INFO, "workers",
             "event=worker_ready worker=%s credit=%u credit_asked=%u methods=%u "
             "idempotent=%u json=%u ignored=%u workers=%u service=%s schemas=%s", wk->name,
             wk->credit, m->credit, wk->nmethods, nidem, wk->njson, ignored, w->nworkers,
             wk->service[0] ? wk->service : "-", wk->schemas ? "yes" : "no");
    /* The answer to READY: our heartbeat settings, before any REQUEST. */
    peer_t to = worker_peer(wk);
    send_simple(w, &to, JRPC_WIRE_HEARTBEAT);
    worker_pull(w, wk);
}

/* Ejects wk (no new calls until the ejection ends, unless every worker of
 * a method is ejected), or ends its ejection. */
void worker_set_ejected(jrpc_workers_t *w, worker_t *wk, bool on)
{
    if (on == (wk->ejected_until != 0))
        return;
    wk->ejected_until = on ? jrpc_metrics.now + (uint64_t)w->opts.eject_ms * NS_PER_MS : 0;
    for (uint32_t k = 0; wk->routed && k < wk->nmethods; k++) {
        if (on)
            wk->methods[k]->nejected++;
        else
            wk->methods[k]->nejected--;
    }
    if (on) {
        w->ejections++;
        wk->ejections++;
        JRPC_LOG(JRPC_LOG_WARN, "workers",
                 "event=worker_ejected worker=%s timeouts=%u eject_ms=%u inflight=%u", wk->name,
                 wk->timeouts, w->opts.eject_ms, wk->inflight);
        wk->timeouts = 0;
    } else {
        JRPC_LOG(JRPC_LOG_INFO, "workers", "event=worker_ejection_ended worker=%s", wk->name);
        worker_pull(w, wk);
    }
}

/* Heartbeat tick. A worker is lost when no message came from it during
 * the last `liveness` ticks AND for liveness x heartbeat_ms of wall time
 * (fresh clock). Counting ticks is what a long callback cannot fake: it
 * delays the ticks as much as the reading, so messages queued meanwhile are
 * not mistaken for silence. */
void on_heartbeat(uv_timer_t *t)
{
    jrpc_workers_t *w = t->data;
    uint64_t now = now_ms(w);
    uint64_t now_ns = jrpc_metrics_tick();
    uint64_t limit = (uint64_t)w->opts.heartbeat_ms * w->opts.liveness * NS_PER_MS;
    if (w->grace_until && now >= w->grace_until)
        grace_end(w);
    for (worker_t *wk = w->workers; wk; wk = wk->next) {
        if (wk->dead)
            continue;
        wk->missed = wk->seen ? 0 : wk->missed + 1;
        wk->seen = false;
        if (wk->ejected_until && now_ns >= wk->ejected_until)
            worker_set_ejected(w, wk, false);
        /* A connection that closed (a killed process) is seen at the next
         * heartbeat, before the liveness runs out. */
        peer_t to = worker_peer(wk);
        if (wk->missed >= w->opts.liveness && now_ns - wk->last_seen > limit)
            worker_kill(w, wk, "heartbeat_expired");
        else if (send_simple(w, &to, JRPC_WIRE_HEARTBEAT) == -EHOSTUNREACH)
            worker_kill(w, wk, "unreachable");
    }
    jrpc_workers_flush(w); /* calls re-dispatched above */
    reap(w);
    if (w->sock)
        jrpc_zwatch_kick(&w->watch);
}

/* Frees every worker, dead or alive, and unties the bare names their
 * services owned (so that nothing is left referring to them). */
void free_workers(jrpc_workers_t *w)
{
    while (w->workers) {
        worker_t *wk = w->workers;
        w->workers = wk->next;
        worker_free(w, wk);
    }
    for (uint32_t b = 0; b < w->mtab_size; b++)
        for (method_t *m = w->mtab[b]; m; m = m->next)
            method_release_bare(w, m);
}
