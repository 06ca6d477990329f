/* jrpc_front_head — what a request's head says, for the HTTP front: the
 * Content-Type it may have, X-JRPC-Timeout-Ms, the signing headers and a
 * bearer token as the broker takes them, Idempotency-Key, the client a
 * trusted proxy names, whether the target is / or /rpc.
 *
 * Not here: deciding what the request may do with these (headers_done in
 * jrpc_front_http), the head's framing and parsing (http/jrpc_http_reader),
 * Accept (jrpc_front_stream), Origin (jrpc_front_answer), MCP's headers
 * (jrpc_front_mcp), the WebSocket handshake's (jrpc_front_ws). */
#include "jrpc_front_http_int.h"

#include <stdint.h>

#include "jrpc_keys.h"
#include "jrpc_log.h"
#include "jrpc_proxy.h"

/* application/json or application/json-rpc, parameters allowed; a charset
 * must be utf-8. */
bool content_type_ok(const char *p, size_t n)
{
    const char *t, *q;
    size_t tn, qn;
    if (n == 16 && memcmp(p, "application/json", 16) == 0)
        return true;   /* what nearly every client sends: no split, no strncasecmp */
    jrpc_http_next_elem(&p, &n, ';', &t, &tn);
    if (!eq_nocase(t, tn, "application/json") && !eq_nocase(t, tn, "application/json-rpc"))
        return false;
    while (jrpc_http_next_elem(&p, &n, ';', &q, &qn)) {
        if (qn >= 8 && strncasecmp(q, "charset=", 8) == 0) {
            const char *v = q + 8;
            size_t vn = qn - 8;
            if (vn >= 2 && v[0] == '"' && v[vn - 1] == '"') {
                v++;
                vn -= 2;
            }
            if (!eq_nocase(v, vn, "utf-8") && !eq_nocase(v, vn, "utf8"))
                return false;
        }
    }
    return true;
}

/* X-JRPC-Timeout-Ms: one, a whole number from 1 to 2^32-1. */
bool timeout_of(const jrpc_http_head_t *h, uint32_t *ms)
{
    jrpc_http_value_t v = jrpc_http_head_value(h, JRPC_HTTP_F_TIMEOUT_MS);
    *ms = 0;
    if (v.count == 0)
        return true;
    uint64_t t = 0;
    bool ok = v.count == 1 && !v.cut && v.n > 0 && v.n <= 10;
    for (size_t i = 0; ok && i < v.n; i++) {
        ok = v.p[i] >= '0' && v.p[i] <= '9';
        t = t * 10 + (uint64_t)(v.p[i] - '0');
    }
    if (!ok || t == 0 || t > UINT32_MAX)
        return false;
    *ms = (uint32_t)t;
    return true;
}

/* A signing header as the broker gets it: empty when absent; when given
 * twice or too long to keep, a value that fails its check. */
static jrpc_span_t auth_value(const jrpc_http_head_t *h, jrpc_http_field_t f)
{
    static const char invalid[72];
    jrpc_http_value_t v = jrpc_http_head_value(h, f);
    if (v.count == 0)
        return (jrpc_span_t){ "", 0 };
    if (v.count > 1 || v.cut)
        return (jrpc_span_t){ invalid, sizeof invalid };
    return (jrpc_span_t){ v.p, v.n };
}

/* The token of "Authorization: Bearer TOKEN" (RFC 6750: the scheme in any
 * case, then spaces). Empty when there is no Authorization header or it
 * has another scheme (meant for someone else, say a proxy: ignored); when
 * the header is given twice, cut, or Bearer has no token, a value that no
 * key has as its token. */
static jrpc_span_t bearer_value(const jrpc_http_head_t *h)
{
    static const char invalid[JRPC_KEYS_TOKEN_MAX + 1];
    jrpc_http_value_t v = jrpc_http_head_value(h, JRPC_HTTP_F_AUTHORIZATION);
    if (v.count == 0 || v.n < 6 || !eq_nocase(v.p, 6, "bearer") ||
        (v.n > 6 && v.p[6] != ' ' && v.p[6] != '\t'))
        return (jrpc_span_t){ "", 0 };
    const char *p = v.p + 6;
    size_t n = v.n - 6;
    jrpc_http_trim(&p, &n);
    if (v.count > 1 || v.cut || n == 0)
        return (jrpc_span_t){ invalid, sizeof invalid };
    return (jrpc_span_t){ p, n };
}

/* Idempotency-Key (docs/SIGNING.md "Idempotency keys"): its value, the
 * quotes of a structured-field string (the IETF draft's form) removed;
 * twice or cut: a value the broker refuses (a space in it). */
jrpc_span_t idem_value(const jrpc_http_head_t *h)
{
    jrpc_http_value_t v = jrpc_http_head_value(h, JRPC_HTTP_F_IDEM_KEY);
    if (v.count == 0)
        return (jrpc_span_t){ NULL, 0 };
    if (v.count > 1 || v.cut || v.n == 0)
        return (jrpc_span_t){ " ", 1 };
    if (v.n >= 2 && v.p[0] == '"' && v.p[v.n - 1] == '"')
        return (jrpc_span_t){ v.p + 1, (size_t)v.n - 2 };
    return (jrpc_span_t){ v.p, v.n };
}

/* Who sent the request whose head is h, as text for its admission (rate
 * limits and idempotency keys without a key, the access line): the TCP
 * peer; or, when the peer is a --trusted-proxy, the client its Forwarded /
 * X-Forwarded-For name (docs/SIGNING.md "Behind a proxy"), written into
 * buf (JRPC_PROXY_ADDR_TEXT bytes). A malformed chain from a trusted proxy
 * falls back to the peer, said at debug. */
jrpc_span_t client_of(const conn_t *c, const jrpc_http_head_t *h, char *buf)
{
    jrpc_span_t peer = { c->peer, c->peer_len };
    if (!c->peer_trusted)
        return peer;
    const jrpc_front_http_opts_t *o = &c->front->opts;
    jrpc_proxy_addr_t a;
    const char *why;
    int rc = jrpc_proxy_client(o->trusted_proxies, o->ntrusted_proxies,
                               jrpc_http_head_value(h, JRPC_HTTP_F_FORWARDED),
                               jrpc_http_head_value(h, JRPC_HTTP_F_XFF), &a, &why);
    int n;
    if (rc == 1 && (n = jrpc_proxy_addr_format(&a, buf, JRPC_PROXY_ADDR_TEXT)) > 0)
        return (jrpc_span_t){ buf, (size_t)n };
    if (rc < 0)
        JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=forwarded_ignored reason=\"%s\" peer=%.*s "
                 "detail=\"the proxy itself is taken as the client\"", why, (int)c->peer_len, c->peer);
    return peer;
}

/* What a request carries to prove who sent it (docs/SIGNING.md). */
jrpc_auth_req_t auth_req(const jrpc_http_head_t *h)
{
    if ((h->f[JRPC_HTTP_F_KEY].count | h->f[JRPC_HTTP_F_TIMESTAMP].count |
         h->f[JRPC_HTTP_F_NONCE].count | h->f[JRPC_HTTP_F_SIGNATURE].count |
         h->f[JRPC_HTTP_F_AUTHORIZATION].count) == 0)   /* none: what the five would say */
        return (jrpc_auth_req_t){ .key = { "", 0 }, .timestamp_text = { "", 0 },
                                  .nonce = { "", 0 }, .signature = { "", 0 },
                                  .bearer = { "", 0 } };
    return (jrpc_auth_req_t){ .key = auth_value(h, JRPC_HTTP_F_KEY),
                              .timestamp_text = auth_value(h, JRPC_HTTP_F_TIMESTAMP),
                              .nonce = auth_value(h, JRPC_HTTP_F_NONCE),
                              .signature = auth_value(h, JRPC_HTTP_F_SIGNATURE),
                              .bearer = bearer_value(h) };
}

/* GET or HEAD /openrpc.json (a query is allowed): the OpenRPC document. */
bool openrpc_target(const jrpc_http_head_t *h)
{
    const char *u;
    size_t n;
    return (h->method == JRPC_HTTP_M_GET || h->method == JRPC_HTTP_M_HEAD) &&
           jrpc_http_head_path(h, &u, &n) && n == 13 && memcmp(u, "/openrpc.json", 13) == 0;
}

/* POST / or POST /rpc (a query is allowed; absolute-form too). */
bool rpc_target(const jrpc_http_head_t *h)
{
    const char *u;
    size_t n;
    if (!jrpc_http_head_path(h, &u, &n))
        return false;
    return (n == 1 && u[0] == '/') || (n == 4 && memcmp(u, "/rpc", 4) == 0);
}
