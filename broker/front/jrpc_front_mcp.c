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

/* The target is opts.mcp_path (a query is allowed). */
bool mcp_target(const jrpc_front_http_t *f, const jrpc_http_head_t *h)
{
    const char *u;
    size_t n;
    const char *m = f->opts.mcp_path;
    return m != NULL && jrpc_http_head_path(h, &u, &n) && strlen(m) == n && memcmp(u, m, n) == 0;
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
