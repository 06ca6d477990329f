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

/* DELETE with Mcp-Session-Id: the session's worker told (204), or 404 when
 * no connected worker has it. The client's body, if any, is skipped. */
void mcp_delete(conn_t *c, req_t *r, const jrpc_http_head_t *h)
{
    jrpc_span_t sid = mcp_session_of(h);
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
        r->state = R_PARSING;   /* ready once the body is skipped */
    }
    c->discard = true;
}

/* GET with Mcp-Session-Id: the session's stream, open until the client or
 * the session ends; the servers' messages outside calls come on it. 404
 * (MCP: a session that does not exist) when the id names no bridge
 * connected here (jrpc_broker_mcp_session_live). */
void mcp_get(conn_t *c, req_t *r, const jrpc_http_head_t *h)
{
    jrpc_front_http_t *f = c->front;
    jrpc_span_t sid = mcp_session_of(h);
    c->discard = true;
    if (sid.n > JRPC_MCP_SID_LEN || !jrpc_broker_mcp_session_live(f->broker, sid)) {
        rec_error(c, r, 404, JRPC_SESSION_UNKNOWN, "no such session");
        r->state = R_PARSING;
        return;
    }
    memcpy(r->sid, sid.p, sid.n);
    r->sid[sid.n] = '\0';
    r->sid_len = (uint8_t)sid.n;
    r->state = R_SUBMITTED;   /* never R_READY: it ends with the session or the connection */
    r->stream = S_MCP;
    r->gstream = true;
    r->gnext = f->gstreams;
    f->gstreams = r;
    if (stream_begin(c, r) < 0)
        c->broken = true;
    mark_dirty(c);
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
}

/* jrpc_mcp_msg_fn of the broker for messages of a session outside any
 * call: an event on each of its GET streams here; json NULL (the session
 * ended at its worker) ends them. */
void mcp_on_session(void *arg, jrpc_span_t session, jrpc_span_t json)
{
    jrpc_front_http_t *f = arg;
    for (req_t *r = f->gstreams, *next; r != NULL; r = next) {
        next = r->gnext;
        if (r->sid_len != session.n || memcmp(r->sid, session.p, session.n) != 0 || r->s_ended)
            continue;
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
