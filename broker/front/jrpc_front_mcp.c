/* jrpc_front_mcp — MCP Streamable HTTP on the HTTP front (docs/MCP.md): the
 * path, the protocol versions, the Accept it needs, one message per POST
 * and the client's responses taken and dropped.
 *
 * Not here: what may reach the path (headers_done in jrpc_front_http),
 * MCP's SSE (jrpc_front_stream), the bodies themselves (the broker, as on
 * /rpc). */
#include "jrpc_front_http_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "jrpc_errors.h"
#include "jrpc_json.h"
#include "jrpc_log.h"
#include "jrpc_wire.h"

/* ---- MCP Streamable HTTP (docs/MCP.md) ------------------------------------ */

/* The target is opts.mcp_path or opts.mcp_path/<service> (a query is
 * allowed; a service is a name a READY may declare). *svc (unless NULL) is
 * the service, n == 0 for the path alone. */
bool mcp_route(const jrpc_front_http_t *f, const jrpc_http_head_t *h, jrpc_span_t *svc)
{
    const char *u;
    size_t n;
    const char *m = f->opts.mcp_path;
    if (svc)
        *svc = (jrpc_span_t){ NULL, 0 };
    if (m == NULL || !jrpc_http_head_path(h, &u, &n))
        return false;
    size_t k = f->mcp_path_len;   /* (every POST asks: no strlen, and "/rpc" is told by a byte) */
    if (n < k || (k > 1 && u[1] != m[1]) || memcmp(u, m, k) != 0)
        return false;
    if (n == k)
        return true;
    if (u[k] != '/' || !jrpc_workers_service_ok(u + k + 1, n - k - 1))
        return false;
    if (svc)
        *svc = (jrpc_span_t){ u + k + 1, n - k - 1 };
    return true;
}

bool mcp_target(const jrpc_front_http_t *f, const jrpc_http_head_t *h)
{
    return mcp_route(f, h, NULL);
}

/* The target is opts.mcp_path itself, no service. */
bool mcp_target_alone(const jrpc_front_http_t *f, const jrpc_http_head_t *h)
{
    jrpc_span_t svc;
    return mcp_route(f, h, &svc) && svc.n == 0;
}

/* The path alone while several MCP services are connected (their workers
 * declare "initialize"): which one is meant cannot be told, so r is
 * answered 409 naming them (docs/MCP.md "Several services"); returns
 * false then. With none or one the body goes on, as before services. */
bool mcp_one_service(conn_t *c, req_t *r)
{
    jrpc_buf_t names, why;
    jrpc_buf_init(&names);
    jrpc_buf_init(&why);
    int n = jrpc_broker_services_serving(c->front->broker, "initialize", &names);
    bool one = n <= 1;   /* -ENOMEM: as before services */
    if (!one) {
        if (jrpc_buf_puts(&why, "several MCP services are connected: POST ") < 0 ||
            jrpc_buf_puts(&why, c->front->opts.mcp_path) < 0 ||
            jrpc_buf_puts(&why, "/<service>, one of ") < 0 ||
            jrpc_buf_append(&why, names.p, names.len) < 0 || jrpc_buf_putc(&why, '\0') < 0)
            jrpc_buf_reset(&why);
        JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=refused status=409 reason=mcp_services services=%.*s",
                 (int)names.len, names.p);
        rec_error(c, r, 409, JRPC_INVALID_REQUEST,
                  why.len ? why.p : "several MCP services are connected: POST /mcp/<service>");
    }
    jrpc_buf_dispose(&names);
    jrpc_buf_dispose(&why);
    return one;
}

/* The versions of MCP whose transport this endpoint speaks. */
static const char *const mcp_versions[] = { "2024-11-05", "2025-03-26", "2025-06-18",
                                            "2025-11-25" };

/* MCP-Protocol-Version: absent is 2025-03-26 (the spec: a server assumes
 * it), so fine; one of mcp_versions, once, is fine; anything else is 400. */
bool mcp_version_ok(const jrpc_http_head_t *h)
{
    jrpc_http_value_t v = jrpc_http_head_value(h, JRPC_HTTP_F_MCP_VERSION);
    if (v.count == 0)
        return true;
    if (v.count > 1 || v.cut)
        return false;
    for (size_t i = 0; i < sizeof mcp_versions / sizeof *mcp_versions; i++)
        if (eq_nocase(v.p, v.n, mcp_versions[i]))
            return true;
    return false;
}

/* How a request on the MCP path is answered: MCP's SSE when the Accept
 * header prefers text/event-stream to application/json (as on /rpc, a tie
 * is JSON: the SDKs send "application/json, text/event-stream"), else JSON. */
uint8_t mcp_stream_mode(const jrpc_http_head_t *h)
{
    return stream_mode(h) == S_SSE ? S_MCP : S_NONE;
}

/* The answer is application/json or text/event-stream, so an Accept must
 * allow one of them (q > 0; the ranges of any type and of any application
 * type count). The spec has clients list both; one is enough here:
 * refusing a client for a type it will not get helps no one. No Accept at
 * all is anything (RFC 9110 12.5.1). */
bool mcp_accept_ok(const jrpc_http_head_t *h)
{
    jrpc_http_value_t a = jrpc_http_head_value(h, JRPC_HTTP_F_ACCEPT);
    return a.count == 0 || mcp_stream_mode(h) == S_MCP ||
           (!a.cut && jrpc_http_accept_q(a.p, a.n, "application/json", true) > 0);
}

/* True when p[0..n) is a JSON-RPC response: an object with "result" or
 * "error" and no "method". Parsed only when "result" or "error" appears in
 * the text (requests and notifications mostly cost two memmem). */
static bool mcp_is_response(const char *p, size_t n)
{
    jrpc_span_t v;
    if (memmem(p, n, "\"result\"", 8) == NULL && memmem(p, n, "\"error\"", 7) == NULL)
        return false;
    return jrpc_json_member(p, n, "method", &v) == -ENOENT &&
           (jrpc_json_member(p, n, "result", &v) == 0 || jrpc_json_member(p, n, "error", &v) == 0);
}

/* One message per POST: a batch is -32600 (MCP 2025-06-18 removed them);
 * a response from the client (to a server's request, passed on through
 * jrpc_stdio --mcp's MESSAGE frames) goes to the worker that asked, 202. Returns false when r is answered here;
 * every other body goes to the broker, which checks it as on /rpc. */
bool mcp_message(conn_t *c, req_t *r, const char *p, size_t n)
{
    size_t i = 0;
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n'))
        i++;
    if (i < n && p[i] == '[') {
        rec_error(c, r, 400, JRPC_INVALID_REQUEST,
                  "one JSON-RPC message per POST on the MCP path (no batches)");
        return false;
    }
    if (i < n && p[i] == '{' && mcp_is_response(p, n)) {
        /* To the server that asked: the worker the session (or the
         * response's id) names; 404 when a session names none. */
        jrpc_span_t sid = mcp_session_of(jrpc_http_reader_head(&c->rd));
        int rc = jrpc_broker_mcp_send(c->front->broker, sid, (jrpc_span_t){ p, n });
        JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=mcp_response bytes=%zu sent=%d", n, rc == 0);
        if (rc == -ESRCH && sid.n) {
            rec_error(c, r, 404, JRPC_SESSION_UNKNOWN, "no such session");
            r->state = R_READY;
            return false;
        }
        r->status = 202;
        r->body = r->inl;
        r->blen = 0;
        r->state = R_READY;
        return false;
    }
    return true;
}

/* ---- sessions and the servers' messages (docs/MCP.md "Sessions") -------- */

/* The request's Mcp-Session-Id: one, whole, 1 to 128 visible ASCII bytes;
 * empty otherwise (none, repeated, or not a possible id: such a session
 * does not exist, so the request is served as if it named none). */
jrpc_span_t mcp_session_of(const jrpc_http_head_t *h)
{
    jrpc_http_value_t v = jrpc_http_head_value(h, JRPC_HTTP_F_MCP_SESSION);
    jrpc_span_t none = { NULL, 0 };
    if (v.count != 1 || v.cut || v.n == 0 || v.n > JRPC_WIRE_SESSION_MAX)
        return none;
    for (size_t i = 0; i < v.n; i++)
        if ((unsigned char)v.p[i] < 0x21 || (unsigned char)v.p[i] > 0x7e)
            return none;
    return (jrpc_span_t){ v.p, v.n };
}

/* The client accepts text/event-stream (q > 0): a server's message during
 * a call may turn the answer into a stream. */
bool mcp_sse_ok(const jrpc_http_head_t *h)
{
    jrpc_http_value_t a = jrpc_http_head_value(h, JRPC_HTTP_F_ACCEPT);
    return a.count > 0 && !a.cut && jrpc_http_accept_q(a.p, a.n, "text/event-stream", false) > 0;
}

/* base, then "Mcp-Session-Id: <r's>", in buf. */
const char *mcp_sid_line(const req_t *r, const char *base, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%sMcp-Session-Id: %.*s\r\n", base ? base : "", r->sid_len, r->sid);
    return n > 0 && (size_t)n < cap ? buf : base;
}

/* One server message as an event of r's stream: "event: message", the
 * JSON on one data line (a CR or LF in it, whitespace in checked JSON,
 * becomes a space: the stream's framing stays ours). */
static void gevent(req_t *r, jrpc_span_t json)
{
    char *t = malloc(json.n ? json.n : 1);
    if (t == NULL) {
        r->conn->broken = true;
        mark_dirty(r->conn);
        return;
    }
    for (size_t i = 0; i < json.n; i++)
        t[i] = json.p[i] == '\n' || json.p[i] == '\r' ? ' ' : json.p[i];
    on_answer(r, 0, t, json.n);
    free(t);
}

/* jrpc_mcp_msg_fn of an MCP body: the session its call began (the answer
 * says Mcp-Session-Id), or a server's message for its client: an event of
 * the POST's stream, which it becomes now if the client accepts one (the
 * answer is then its last event); dropped for a client that takes JSON
 * only. */
void mcp_on_message(void *ctx, jrpc_span_t session, jrpc_span_t json)
{
    req_t *r = ctx;
    if (json.p == NULL) {
        if (session.n <= JRPC_MCP_SID_LEN) {
            memcpy(r->sid, session.p, session.n);
            r->sid[session.n] = '\0';
            r->sid_len = (uint8_t)session.n;
        }
        return;
    }
    if (r->stream == S_NONE && r->sse_ok) {
        r->stream = S_MCP;
        r->switched = true;
    }
    if (r->stream != S_MCP) {
        JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=mcp_message_dropped reason=json_only bytes=%zu",
                 json.n);
        return;
    }
    gevent(r, json);
}

/* ---- GET and DELETE of a session: the bridge asked first ---------------- */

/* How long a GET or DELETE waits for the answer to its probe (PROTOCOL.md
 * 2.8) before it is answered 503: a bridge answers at once, from memory. */
#define PROBE_MS 2000

/* DELETE: the session's worker told (204), or 404 when no connected worker
 * has it, 503 when it could not be told. */
static void delete_send(conn_t *c, req_t *r, jrpc_span_t sid)
{
    int rc = jrpc_broker_mcp_send(c->front->broker, sid, (jrpc_span_t){ NULL, 0 });
    /* the id's first 21 bytes (instance and child), never its secret */
    JRPC_LOG(JRPC_LOG_INFO, COMP, "event=mcp_session_delete session=%.*s ok=%d",
             (int)(sid.n < 21 ? sid.n : 21), sid.p, rc == 0);
    if (rc == 0) {
        r->status = 204;
        r->body = r->inl;
        r->blen = 0;
    } else {
        rec_error(c, r, rc == -ESRCH ? 404 : 503, JRPC_SESSION_UNKNOWN,
                  rc == -ESRCH ? "no such session" : "the session's worker is unreachable");
    }
}

/* GET: r becomes the session's stream, open until the client or the
 * session ends; the servers' messages outside calls come on it. */
static void gstream_open(conn_t *c, req_t *r)
{
    jrpc_front_http_t *f = c->front;
    r->stream = S_MCP;
    if (!r->gstream) {
        r->gstream = true;
        r->gnext = f->gstreams;
        f->gstreams = r;
    }
    if (stream_begin(c, r) < 0)
        c->broken = true;
    mark_dirty(c);
}

/* A GET or DELETE (del) of session sid: the worker that issued it is asked
 * whether it still has it (jrpc_broker_mcp_probe), r waits on the front's
 * list for the answer (mcp_on_probe) or PROBE_MS (mcp_probes_expire).
 * A worker that answers no probes (one that predates them): as before, a
 * GET opens its stream and a DELETE is sent, on the instance alone. */
static void probe_start(conn_t *c, req_t *r, jrpc_span_t sid, bool del)
{
    jrpc_front_http_t *f = c->front;
    c->discard = true;   /* the client's body, if any, is skipped */
    r->state = R_SUBMITTED;   /* answered from here, never from the skipped body */
    uint64_t id = 0;
    int rc = -ESRCH;   /* longer than a bridge's ids: no bridge issued it */
    if (sid.n <= JRPC_MCP_SID_LEN) {
        memcpy(r->sid, sid.p, sid.n);
        r->sid[sid.n] = '\0';
        r->sid_len = (uint8_t)sid.n;
        rc = jrpc_broker_mcp_probe(f->broker, sid, &id);
    }
    JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=mcp_probe session=%.*s probe=%llu del=%d rc=%d",
             (int)(sid.n < 21 ? sid.n : 21), sid.p, (unsigned long long)id, del, rc);
    if (rc == 0) {
        r->probe = id;
        r->probe_del = del;
        r->probe_at = uv_now(f->loop) + PROBE_MS;
        r->gstream = true;
        r->gnext = f->gstreams;
        f->gstreams = r;
        f->nprobes++;
        tick_by(f, r->probe_at);
        return;
    }
    if (rc == -ENOTSUP && !del) {
        gstream_open(c, r);
        return;
    }
    r->sid_len = 0;   /* the answer carries no Mcp-Session-Id */
    if (rc == -ENOTSUP)
        delete_send(c, r, sid);
    else
        rec_error(c, r, rc == -ESRCH ? 404 : 503, JRPC_SESSION_UNKNOWN,
                  rc == -ESRCH ? "no such session" : "the session's worker is unreachable");
    r->state = R_READY;
    flush(c);
}

/* r's probe is answered: live 1 (the session exists), 0 (it does not: 404),
 * -1 (no answer in PROBE_MS: 503). A GET of a live session opens its
 * stream; a DELETE of one is sent to the worker. */
static void probe_done(jrpc_front_http_t *f, req_t *r, int live)
{
    conn_t *c = r->conn;
    jrpc_span_t sid = { r->sid, r->sid_len };
    if (live > 0 && !r->probe_del) {
        r->probe = 0;
        f->nprobes--;
        gstream_open(c, r);
        return;
    }
    mcp_gstream_drop(f, r);
    char id[JRPC_MCP_SID_LEN + 1];
    memcpy(id, r->sid, r->sid_len);
    sid.p = id;
    r->sid_len = 0;
    if (live > 0)
        delete_send(c, r, sid);
    else
        rec_error(c, r, live == 0 ? 404 : 503, JRPC_SESSION_UNKNOWN,
                  live == 0 ? "no such session" : "the session's worker did not answer in time");
    r->state = R_READY;
    flush(c);
}

/* jrpc_mcp_probe_fn of the broker: the request waiting for probe, if it
 * is still here (its connection may have closed) and names that session. */
void mcp_on_probe(void *ctx, uint64_t probe, jrpc_span_t session, bool live)
{
    jrpc_front_http_t *f = ctx;
    for (req_t *r = f->gstreams; r != NULL; r = r->gnext)
        if (r->probe == probe) {
            if (r->sid_len == session.n && memcmp(r->sid, session.p, session.n) == 0)
                probe_done(f, r, live);
            return;
        }
}

/* Answers 503 the requests whose probe had no answer by now; returns the
 * earliest deadline of those still waiting (0: none). */
uint64_t mcp_probes_expire(jrpc_front_http_t *f, uint64_t now)
{
    uint64_t next = 0;
    for (req_t *r = f->gstreams, *after; r != NULL; r = after) {
        after = r->gnext;
        if (r->probe == 0)
            continue;
        if (r->probe_at <= now)
            probe_done(f, r, -1);
        else if (next == 0 || r->probe_at < next)
            next = r->probe_at;
    }
    return next;
}

/* DELETE with Mcp-Session-Id: 204 once the session's worker has it and is
 * told; 404 when it has not (ended, never issued) or no connected worker
 * has its instance. The client's body, if any, is skipped. */
void mcp_delete(conn_t *c, req_t *r, const jrpc_http_head_t *h)
{
    r->close = !h->keep_alive;
    probe_start(c, r, mcp_session_of(h), true);
}

/* GET with Mcp-Session-Id: the session's stream, once its worker says it
 * has the session; 404 (MCP: a session that does not exist) when it has
 * not, or when the id names no worker connected here. */
void mcp_get(conn_t *c, req_t *r, const jrpc_http_head_t *h)
{
    r->close = !h->keep_alive;
    probe_start(c, r, mcp_session_of(h), false);
}

/* r leaves the front's list of GET streams (its record is freed). */
void mcp_gstream_drop(jrpc_front_http_t *f, req_t *r)
{
    for (req_t **p = &f->gstreams; *p != NULL; p = &(*p)->gnext)
        if (*p == r) {
            *p = r->gnext;
            break;
        }
    r->gstream = false;
    if (r->probe) {
        r->probe = 0;
        f->nprobes--;
    }
}

/* jrpc_mcp_msg_fn of the broker for messages of a session outside any
 * call: an event on each of its GET streams here; json NULL (the session
 * ended at its worker) ends them. */
void mcp_on_session(void *arg, jrpc_span_t session, jrpc_span_t json)
{
    jrpc_front_http_t *f = arg;
    /* an instance alone (its bridge left): every session whose id it begins */
    bool all = json.p == NULL && session.n == JRPC_MCP_INSTANCE_LEN;
    for (req_t *r = f->gstreams, *next; r != NULL; r = next) {
        next = r->gnext;
        bool of = all ? r->sid_len > session.n && r->sid[session.n] == '-' &&
                            memcmp(r->sid, session.p, session.n) == 0
                      : r->sid_len == session.n && memcmp(r->sid, session.p, session.n) == 0;
        if (!of || r->s_ended)
            continue;
        if (r->probe) {   /* not open yet: an end is the probe's answer, a message is lost */
            if (json.p == NULL)
                probe_done(f, r, 0);
            continue;
        }
        if (json.p != NULL) {
            gevent(r, json);
            continue;
        }
        jrpc_outcome_t out = { .cls = JRPC_BODY_OK };
        if (stream_end(r->conn, r, out, NULL, 0) < 0)
            r->conn->broken = true;
        r->state = R_READY;
        mcp_gstream_drop(f, r);
        mark_dirty(r->conn);
    }
}
