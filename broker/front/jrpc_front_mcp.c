/* jrpc_front_mcp — MCP Streamable HTTP on the HTTP front (docs/MCP.md): the
 * path, the protocol versions, the Accept it needs, one message per POST
 * and the client's responses taken and dropped.
 *
 * Not here: what may reach the path (headers_done in jrpc_front_http),
 * MCP's SSE (jrpc_front_stream), the bodies themselves (the broker, as on
 * /rpc). */
#include "jrpc_front_http_int.h"

#include <errno.h>

#include "jrpc_errors.h"
#include "jrpc_json.h"
#include "jrpc_log.h"

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
    size_t k = strlen(m);
    if (n < k || memcmp(u, m, k) != 0)
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
 * a response from the client is taken and dropped, 202 (this endpoint
 * sends no requests to clients). Returns false when r is answered here;
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
        JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=mcp_response_dropped bytes=%zu", n);
        r->status = 202;
        r->body = r->inl;
        r->blen = 0;
        r->state = R_READY;
        return false;
    }
    return true;
}
