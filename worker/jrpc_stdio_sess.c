/* jrpc_stdio_sess — jrpc-stdio --mcp: sessions and the children's messages to clients.
 *
 * --sessions: a client's initialize begins a session pinned to one child
 * (the one with the fewest sessions); its id (jrpc_mcp_sid.h) names this
 * bridge's instance and the child, and goes to the broker in a MESSAGE
 * before the answer (the broker puts it in Mcp-Session-Id). Every later call
 * of the session goes to that child; a child that died since (another pid)
 * ended its sessions: their calls are answered JRPC_SESSION_UNKNOWN (404 at
 * the front), and so are ids never issued, ended (the client's DELETE) or
 * idle past --session-idle-ms.
 *
 * Messages: what a child sends that is no answer — a notification
 * (progress, logging, list changes) or a request (sampling, elicitation,
 * roots) — goes to a client: to the call whose progressToken it names, else
 * to the oldest call the child holds, else to the sessions pinned to the
 * child (their GET streams). A request goes on under an id of the bridge's,
 * "<instance>-<slot>-<n>" (the broker routes the client's response by its
 * instance), and the response comes back to the child under its own id.
 *
 * Not here: a call's path (jrpc_stdio_calls.c), the handshake
 * (jrpc_stdio_mcp.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "jrpc_json.h"
#include "jrpc_stdio_int.h"

static int random_bytes(void *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom((char *)p + got, n - got, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        got += (size_t)r;
    }
    return 0;
}

static void on_client_message(const char *session, const char *json, size_t n, void *arg);
static bool on_probe(const char *session, void *arg);

/* The instance (random), the table; the worker told it sends MESSAGE frames. */
int sess_init(bridge_t *b)
{
    int rc = random_bytes(&b->instance_v, sizeof b->instance_v);
    if (rc < 0)
        return rc;
    jrpc_mcp_instance_format(b->instance_v, b->instance);
    if (b->sessions && (b->sess = calloc(b->max_sessions, sizeof *b->sess)) == NULL)
        return -ENOMEM;
    if ((rc = jrpc_worker_messages(b->w, b->instance, on_client_message, b)) < 0)
        return rc;
    return jrpc_worker_probes(b->w, on_probe, b);
}

void sess_dispose(bridge_t *b)
{
    free(b->sess);
    b->sess = NULL;
    for (size_t i = 0; i < PEND_MAX; i++)
        free(b->pend[i].id_raw);
}

static sess_t *sess_find(bridge_t *b, const char *id)
{
    for (uint32_t i = 0; b->sess && i < b->max_sessions; i++)
        if (b->sess[i].id[0] && strcmp(b->sess[i].id, id) == 0)
            return &b->sess[i];
    return NULL;
}

/* A broker asks whether a session is ours and alive (PROTOCOL.md 2.8): one
 * issued here, not ended (DELETE, idle) and its child not replaced since. */
static bool on_probe(const char *session, void *arg)
{
    bridge_t *b = arg;
    const sess_t *s = sess_find(b, session);
    return s != NULL && b->children[s->slot].pid == s->pid;
}

static void sess_end(bridge_t *b, sess_t *s, const char *why, bool tell)
{
    JRPC_LOG(JRPC_LOG_INFO, "stdio", "event=session_end session=%.21s slot=%u reason=%s", s->id,
             s->slot, why);
    if (tell)   /* the brokers close its GET streams */
        jrpc_worker_message(b->w, s->id, NULL, 0);
    s->id[0] = '\0';
}

/* A new session on the up child with the fewest sessions; NULL when the
 * table is full or no child is up. */
static sess_t *sess_new(bridge_t *b)
{
    sess_t *free_s = NULL;
    uint32_t count[1024] = { 0 };
    for (uint32_t i = 0; i < b->max_sessions; i++) {
        if (b->sess[i].id[0])
            count[b->sess[i].slot]++;
        else if (free_s == NULL)
            free_s = &b->sess[i];
    }
    child_t *best = NULL;
    for (unsigned i = 0; i < b->procs; i++) {
        child_t *c = &b->children[i];
        if (c->state == CHILD_UP && c->ready && (best == NULL || count[i] < count[best->slot]))
            best = c;
    }
    if (free_s == NULL || best == NULL)
        return NULL;
    jrpc_mcp_sid_t sid = { .instance = b->instance_v, .child = (uint16_t)best->slot };
    if (random_bytes(sid.secret, sizeof sid.secret) < 0)
        return NULL;
    jrpc_mcp_sid_format(&sid, free_s->id);
    free_s->slot = best->slot;
    free_s->pid = best->pid;
    free_s->last = uv_now(b->loop);
    return free_s;
}

/* --sessions: pins call k (of wc) to its session's child. Returns 0 (k may
 * go on: pinned, or no session involved), or -1 when wc was answered (an
 * unknown session, or no room for a new one). An initialize begins a
 * session (the client's initialize then goes to the child: its
 * capabilities reach the server); any other call names one by its
 * Mcp-Session-Id or goes to any child, as without --sessions. */
int sess_pin(bridge_t *b, jrpc_wcall_t *wc, call_t *k)
{
    const char *id = jrpc_wcall_session(wc);
    sess_t *s;
    if (strcmp(jrpc_wcall_method(wc), "initialize") == 0) {
        if (!jrpc_wcall_messages(wc))
            return 0;   /* a broker that cannot return the id: no session */
        if ((s = sess_new(b)) == NULL) {
            JRPC_LOG(JRPC_LOG_WARN, "stdio", "event=session_refused max_sessions=%u up=%u",
                     b->max_sessions, children_up(b));
            jrpc_wcall_error(wc, JRPC_SERVER_BUSY, "Too many sessions");
            return -1;
        }
        if (jrpc_wcall_message(wc, s->id, NULL, 0) < 0) {
            s->id[0] = '\0';
            jrpc_wcall_error(wc, JRPC_INTERNAL_ERROR, jrpc_error_message(JRPC_INTERNAL_ERROR));
            return -1;
        }
        JRPC_LOG(JRPC_LOG_INFO, "stdio", "event=session_begin session=%.21s slot=%u pid=%d",
                 s->id, s->slot, s->pid);
    } else if (id[0] == '\0') {
        return 0;
    } else if ((s = sess_find(b, id)) == NULL || b->children[s->slot].pid != s->pid) {
        if (s != NULL)
            sess_end(b, s, "child_replaced", false);
        jrpc_wcall_error(wc, JRPC_SESSION_UNKNOWN, jrpc_error_message(JRPC_SESSION_UNKNOWN));
        return -1;
    }
    s->last = uv_now(b->loop);
    k->pin = s->slot + 1;
    k->pin_pid = s->pid;
    return 0;
}

/* --sessions: the client's notifications/initialized of session wc names,
 * passed to its child as the notification it is (a server may act on it:
 * offer what the client's capabilities allow), and wc answered. Returns
 * false when wc names no session of ours (the caller swallows it). */
bool sess_initialized(bridge_t *b, jrpc_wcall_t *wc)
{
    static const char note[] = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}";
    const char *id = jrpc_wcall_session(wc);
    sess_t *s = id[0] ? sess_find(b, id) : NULL;
    if (s == NULL)
        return false;
    child_t *c = &b->children[s->slot];
    if (c->state == CHILD_UP && c->pid == s->pid)
        child_write(c, note, sizeof note - 1);
    s->last = uv_now(b->loop);
    msgpack_pack_nil(jrpc_wcall_result(wc));
    jrpc_wcall_finish(wc);
    return true;
}

/* Child c is lost: its sessions end now (their state was its), and the
 * brokers close their GET streams; a later call or PROBE finds none. */
void sess_child_lost(bridge_t *b, const child_t *c)
{
    for (uint32_t i = 0; b->sess && i < b->max_sessions; i++)
        if (b->sess[i].id[0] && b->sess[i].slot == c->slot && b->sess[i].pid == c->pid)
            sess_end(b, &b->sess[i], "child_lost", true);
}

void sess_sweep(bridge_t *b, uint64_t now)
{
    for (size_t i = 0; i < PEND_MAX; i++) {
        pend_t *e = &b->pend[i];
        if (e->n && (now - e->at >= PEND_TTL_MS || b->children[e->slot].pid != e->pid)) {
            free(e->id_raw);
            e->id_raw = NULL;
            e->n = 0;
        }
    }
    for (uint32_t i = 0; b->sess && i < b->max_sessions; i++)
        if (b->sess[i].id[0] && now - b->sess[i].last >= b->session_idle_ms)
            sess_end(b, &b->sess[i], "idle", true);
}

/* ---- the children's messages to clients ---- */

/* The call child c holds that message p[0..n) belongs to: the one whose
 * params' _meta.progressToken is the notification's params.progressToken,
 * else the oldest one whose broker takes messages; NULL: none. */
static call_t *message_call(child_t *c, const char *p, size_t n)
{
    jrpc_span_t params, token, meta, t2;
    bool has_token = jrpc_json_member(p, n, "params", &params) == 0 &&
                     jrpc_json_member(params.p, params.n, "progressToken", &token) == 0;
    call_t *first = NULL;
    for (call_t *k = c->held.head; k; k = k->next) {
        if (k->wc == NULL || !jrpc_wcall_messages(k->wc))
            continue;
        if (first == NULL)
            first = k;
        if (has_token && k->params.len > 0 &&
            jrpc_json_member(k->params.p, k->params.len, "_meta", &meta) == 0 &&
            jrpc_json_member(meta.p, meta.n, "progressToken", &t2) == 0 && t2.n == token.n &&
            memcmp(t2.p, token.p, token.n) == 0)
            return k;
    }
    return has_token ? NULL : first;   /* progress of no call we hold: stale */
}

/* Sends the message to call k's client, or to the GET streams of the
 * sessions pinned to c. Returns true when it went somewhere. */
static bool message_send(child_t *c, call_t *k, const char *p, size_t n)
{
    bridge_t *b = c->b;
    if (k != NULL) {
        if (k->nmsg >= MSG_PER_CALL || jrpc_wcall_message(k->wc, NULL, p, n) < 0)
            return false;
        k->nmsg++;
        return true;
    }
    int sent = 0;
    for (uint32_t i = 0; b->sess && i < b->max_sessions; i++)
        if (b->sess[i].id[0] && b->sess[i].slot == c->slot && b->sess[i].pid == c->pid)
            sent += jrpc_worker_message(b->w, b->sess[i].id, p, n) > 0;
    return sent > 0;
}

/* A child's request, sent on under the bridge's id; false when there is no
 * room or no client to ask. */
static bool request_send(child_t *c, const jrpc_child_msg_t *m, const char *p, size_t n)
{
    bridge_t *b = c->b;
    pend_t *e = NULL;
    for (size_t i = 0; i < PEND_MAX; i++)
        if (b->pend[i].n == 0) {
            e = &b->pend[i];
            break;
        }
    if (e == NULL)
        return false;
    jrpc_span_t params = { NULL, 0 };
    if (jrpc_json_member(p, n, "params", &params) < 0)
        params.n = 0;
    jrpc_buf_t r;
    jrpc_buf_init(&r);
    char head[96];
    uint64_t seq = ++b->next_pend;
    snprintf(head, sizeof head, "{\"jsonrpc\":\"2.0\",\"id\":\"%s-%04x-%" PRIu64 "\",\"method\":",
             b->instance, c->slot, seq);
    bool ok = jrpc_buf_puts(&r, head) == 0 && jrpc_buf_append(&r, m->method.p, m->method.n) == 0 &&
              (params.n == 0 || (jrpc_buf_puts(&r, ",\"params\":") == 0 &&
                                 jrpc_buf_append(&r, params.p, params.n) == 0)) &&
              jrpc_buf_putc(&r, '}') == 0 && (e->id_raw = strndup(m->id_raw.p, m->id_raw.n)) != NULL;
    if (ok && !message_send(c, message_call(c, r.p, r.len), r.p, r.len)) {
        ok = false;
    }
    if (ok) {
        e->n = seq;
        e->slot = c->slot;
        e->pid = c->pid;
        e->at = uv_now(b->loop);
    } else {
        free(e->id_raw);
        e->id_raw = NULL;
    }
    jrpc_buf_dispose(&r);
    return ok;
}

/* A child's notification or request (m->kind): passed to a client when one
 * can take it. Returns false when it went nowhere (the caller logs it, and
 * answers a request -32601). */
bool sess_child_message(child_t *c, const jrpc_child_msg_t *m, const char *p, size_t n)
{
    bridge_t *b = c->b;
    bool ok = m->kind == JRPC_CHILD_REQUEST ? request_send(c, m, p, n)
                                            : message_send(c, message_call(c, p, n), p, n);
    if (ok)
        b->msgs_sent++;
    else
        b->msgs_dropped++;
    return ok;
}

/* A client's answer to a child's request: the id back to the child's own,
 * written to the child that asked (if it is still the same process). */
static void client_response(bridge_t *b, const char *p, size_t n)
{
    jrpc_span_t id, val;
    const char *key = "result";
    if (jrpc_json_member(p, n, "id", &id) < 0 || id.n < JRPC_MCP_INSTANCE_LEN + 9 ||
        id.p[0] != '"' || memcmp(id.p + 1, b->instance, JRPC_MCP_INSTANCE_LEN) != 0)
        goto drop;
    if (jrpc_json_member(p, n, key, &val) < 0 &&
        jrpc_json_member(p, n, key = "error", &val) < 0)
        goto drop;
    unsigned slot = 0;
    uint64_t seq = 0;
    char tail[48];
    size_t tn = id.n - 2 - JRPC_MCP_INSTANCE_LEN;
    if (tn >= sizeof tail)
        goto drop;
    memcpy(tail, id.p + 1 + JRPC_MCP_INSTANCE_LEN, tn);
    tail[tn] = '\0';
    if (sscanf(tail, "-%4x-%" SCNu64, &slot, &seq) != 2 || seq == 0)
        goto drop;
    for (size_t i = 0; i < PEND_MAX; i++) {
        pend_t *e = &b->pend[i];
        if (e->n != seq || e->slot != slot)
            continue;
        child_t *c = slot < b->procs ? &b->children[slot] : NULL;
        if (c && c->state == CHILD_UP && c->pid == e->pid) {
            jrpc_buf_t r;
            jrpc_buf_init(&r);
            if (jrpc_buf_puts(&r, "{\"jsonrpc\":\"2.0\",\"id\":") == 0 &&
                jrpc_buf_puts(&r, e->id_raw) == 0 && jrpc_buf_putc(&r, ',') == 0 &&
                jrpc_json_write_string(&r, key, strlen(key)) == 0 && jrpc_buf_putc(&r, ':') == 0 &&
                jrpc_buf_append(&r, val.p, val.n) == 0 && jrpc_buf_putc(&r, '}') == 0)
                child_write(c, r.p, r.len);
            jrpc_buf_dispose(&r);
        }
        free(e->id_raw);
        e->id_raw = NULL;
        e->n = 0;
        return;
    }
drop:
    JRPC_LOG(JRPC_LOG_DEBUG, "stdio", "event=client_response_dropped bytes=%zu", n);
}

/* What a broker sends: a client's response, or (json NULL) a session the
 * client ended with DELETE. The child is told nothing of the end (a stdio
 * server has no per-client end; docs/MCP.md): the session's id is freed. */
static void on_client_message(const char *session, const char *json, size_t n, void *arg)
{
    bridge_t *b = arg;
    if (json != NULL) {
        client_response(b, json, n);
        return;
    }
    sess_t *s = session[0] ? sess_find(b, session) : NULL;
    if (s != NULL)
        sess_end(b, s, "deleted", false);
}
