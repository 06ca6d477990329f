/* jrpc_proxy — who the client is behind a trusted reverse proxy (jrpc_proxy.h). */
#include "jrpc_proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define CHAIN_MAX 160   /* entries of one chain: a kept value is at most 256 bytes */

static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

int jrpc_proxy_addr_parse(const char *s, size_t n, jrpc_proxy_addr_t *out)
{
    char buf[INET6_ADDRSTRLEN];
    if (n == 0 || n >= sizeof buf || memchr(s, '\0', n) != NULL)
        return -EINVAL;
    memcpy(buf, s, n);
    buf[n] = '\0';
    memset(out, 0, sizeof *out);
    if (memchr(s, ':', n) == NULL) {
        if (inet_pton(AF_INET, buf, out->a) != 1)
            return -EINVAL;
        out->family = 4;
        return 0;
    }
    if (inet_pton(AF_INET6, buf, out->a) != 1)
        return -EINVAL;
    out->family = 6;
    if (memcmp(out->a, v4mapped, sizeof v4mapped) == 0) {   /* ::ffff:a.b.c.d is a.b.c.d */
        memmove(out->a, out->a + 12, 4);
        memset(out->a + 4, 0, 12);
        out->family = 4;
    }
    return 0;
}

int jrpc_proxy_addr_format(const jrpc_proxy_addr_t *a, char *out, size_t size)
{
    char buf[INET6_ADDRSTRLEN];
    if (inet_ntop(a->family == 4 ? AF_INET : AF_INET6, a->a, buf, sizeof buf) == NULL)
        return -EINVAL;
    size_t n = strlen(buf);
    if (n >= size)
        return -ENOSPC;
    memcpy(out, buf, n + 1);
    return (int)n;
}

/* Clears the bits of a below the first `bits`. */
static void mask(uint8_t a[16], unsigned bits)
{
    for (unsigned i = 0; i < 16; i++) {
        unsigned keep = bits >= 8 * (i + 1) ? 8 : bits > 8 * i ? bits - 8 * i : 0;
        a[i] &= (uint8_t)(0xff00u >> keep);
    }
}

int jrpc_proxy_cidr_parse(const char *s, size_t n, jrpc_proxy_cidr_t *out)
{
    const char *slash = memchr(s, '/', n);
    size_t an = slash ? (size_t)(slash - s) : n;
    if (jrpc_proxy_addr_parse(s, an, &out->net) < 0)
        return -EINVAL;
    bool mapped = out->net.family == 4 && memchr(s, ':', an) != NULL;
    unsigned max = out->net.family == 4 && !mapped ? 32 : 128, bits = out->net.family == 4 ? 32 : 128;
    if (slash) {
        const char *d = slash + 1, *end = s + n;
        if (d == end || end - d > 3 || (d[0] == '0' && end - d > 1))
            return -EINVAL;
        bits = 0;
        for (; d < end; d++) {
            if (*d < '0' || *d > '9')
                return -EINVAL;
            bits = bits * 10 + (unsigned)(*d - '0');
        }
        if (bits > max)
            return -EINVAL;
        /* a mapped address's prefix counts the 96 bits of ::ffff:0:0/96 */
        if (mapped) {
            if (bits < 96)
                return -EINVAL;
            bits -= 96;
        }
    }
    mask(out->net.a, bits);
    out->bits = (uint8_t)bits;
    return 0;
}

static bool cidr_has(const jrpc_proxy_cidr_t *c, const jrpc_proxy_addr_t *a)
{
    if (c->net.family != a->family)
        return false;
    uint8_t m[16];
    memcpy(m, a->a, 16);
    mask(m, c->bits);
    return memcmp(m, c->net.a, 16) == 0;
}

bool jrpc_proxy_trusted(const jrpc_proxy_cidr_t *list, size_t n, const jrpc_proxy_addr_t *a)
{
    for (size_t i = 0; i < n; i++)
        if (cidr_has(&list[i], a))
            return true;
    return false;
}

/* ---- chains ---- */

typedef struct span { const char *p; size_t n; } span_t;

static span_t trim(span_t s)
{
    while (s.n && (s.p[0] == ' ' || s.p[0] == '\t')) {
        s.p++;
        s.n--;
    }
    while (s.n && (s.p[s.n - 1] == ' ' || s.p[s.n - 1] == '\t'))
        s.n--;
    return s;
}

/* Splits v at the separator sep outside double quotes (a backslash inside
 * quotes escapes the next byte) into at most max trimmed parts. Returns
 * their number, or -1 (an unclosed quote, too many parts). */
static int split(span_t v, char sep, span_t *parts, int max)
{
    int k = 0;
    bool quoted = false;
    size_t start = 0;
    for (size_t i = 0; i <= v.n; i++) {
        if (i < v.n && quoted) {
            if (v.p[i] == '\\')
                i++;
            else if (v.p[i] == '"')
                quoted = false;
            continue;
        }
        if (i < v.n && v.p[i] == '"') {
            quoted = true;
            continue;
        }
        if (i < v.n && v.p[i] != sep)
            continue;
        if (k == max)
            return -1;
        parts[k++] = trim((span_t){ v.p + start, i - start });
        start = i + 1;
    }
    return quoted ? -1 : k;
}

/* A node as X-Forwarded-For or Forwarded's for= write it: an address, with
 * a port or not ("192.0.2.1", "192.0.2.1:80", "2001:db8::1", "[2001:db8::1]",
 * "[2001:db8::1]:80"). Returns 0, or -EINVAL ("unknown", "_hidden", junk). */
static int node_addr(span_t s, jrpc_proxy_addr_t *a)
{
    if (s.n && s.p[0] == '[') {
        const char *end = memchr(s.p, ']', s.n);
        if (end == NULL)
            return -EINVAL;
        size_t rest = s.n - (size_t)(end + 1 - s.p);
        if (rest) {   /* ":PORT" */
            if (end[1] != ':' || rest < 2 || rest > 6)
                return -EINVAL;
            for (size_t i = 2; i < rest + 1; i++)
                if (end[i] < '0' || end[i] > '9')
                    return -EINVAL;
        }
        if (jrpc_proxy_addr_parse(s.p + 1, (size_t)(end - s.p - 1), a) < 0 || a->family != 6)
            return -EINVAL;
        return 0;
    }
    const char *colon = memchr(s.p, ':', s.n);
    if (colon && memchr(colon + 1, ':', s.n - (size_t)(colon + 1 - s.p)) == NULL) {   /* v4:PORT */
        size_t pn = s.n - (size_t)(colon + 1 - s.p);
        if (pn == 0 || pn > 5)
            return -EINVAL;
        for (size_t i = 0; i < pn; i++)
            if (colon[1 + i] < '0' || colon[1 + i] > '9')
                return -EINVAL;
        s.n = (size_t)(colon - s.p);
        return jrpc_proxy_addr_parse(s.p, s.n, a) < 0 || a->family != 4 ? -EINVAL : 0;
    }
    return jrpc_proxy_addr_parse(s.p, s.n, a);
}

/* The for= node of one Forwarded element ("for=192.0.2.1;proto=https"),
 * unquoted. Returns 0, -ENOENT (no for=: a node we cannot name), -EINVAL. */
static int forwarded_for(span_t el, span_t *node)
{
    span_t pairs[16];
    int np = split(el, ';', pairs, 16);
    if (np < 0)
        return -EINVAL;
    bool found = false;
    for (int i = 0; i < np; i++) {
        const char *eq = memchr(pairs[i].p, '=', pairs[i].n);
        if (eq == NULL || eq == pairs[i].p)
            return -EINVAL;
        size_t kn = (size_t)(eq - pairs[i].p);
        span_t v = { eq + 1, pairs[i].n - kn - 1 };
        if (v.n >= 2 && v.p[0] == '"' && v.p[v.n - 1] == '"') {
            v = (span_t){ v.p + 1, v.n - 2 };
            if (memchr(v.p, '\\', v.n) || memchr(v.p, '"', v.n))
                return -EINVAL;   /* no address needs an escape */
        } else if (memchr(v.p, '"', v.n)) {
            return -EINVAL;
        }
        if (kn == 3 && strncasecmp(pairs[i].p, "for", 3) == 0) {
            if (found)
                return -EINVAL;   /* two for= in one element */
            found = true;
            *node = v;
        }
    }
    return found ? 0 : -ENOENT;
}

/* The client of one chain (see jrpc_proxy_client). */
static int chain_client(const jrpc_proxy_cidr_t *trusted, size_t ntrusted, jrpc_http_value_t v,
                        bool forwarded, jrpc_proxy_addr_t *out, const char **why)
{
    span_t el[CHAIN_MAX];
    if (v.cut) {
        *why = forwarded ? "Forwarded is too long" : "X-Forwarded-For is too long";
        return -EINVAL;
    }
    int n = split((span_t){ v.p, v.n }, ',', el, CHAIN_MAX);
    int used = 0;
    for (int i = 0; i < n; i++)
        if (el[i].n)
            el[used++] = el[i];   /* empty list elements count for nothing (RFC 9110 5.6.1) */
    if (n < 0 || used == 0) {
        *why = forwarded ? "Forwarded is malformed" : "X-Forwarded-For is malformed";
        return -EINVAL;
    }
    for (int i = used - 1; i >= 0; i--) {
        span_t node = el[i];
        if (forwarded) {
            int rc = forwarded_for(el[i], &node);
            if (rc < 0) {
                *why = rc == -ENOENT ? "a Forwarded element without for=" : "Forwarded is malformed";
                return -EINVAL;
            }
        }
        jrpc_proxy_addr_t a;
        if (node_addr(node, &a) < 0) {
            *why = forwarded ? "Forwarded names no address for the client"
                             : "X-Forwarded-For names no address for the client";
            return -EINVAL;
        }
        *out = a;
        if (!jrpc_proxy_trusted(trusted, ntrusted, &a))
            return 1;
    }
    return 1;   /* proxies all the way: the left-most one */
}

int jrpc_proxy_client(const jrpc_proxy_cidr_t *trusted, size_t ntrusted,
                      jrpc_http_value_t forwarded, jrpc_http_value_t xff,
                      jrpc_proxy_addr_t *out, const char **why)
{
    jrpc_proxy_addr_t f, x;
    *why = "";
    if (forwarded.p == NULL && xff.p == NULL)
        return 0;
    if (forwarded.p && chain_client(trusted, ntrusted, forwarded, true, &f, why) < 0)
        return -EINVAL;
    if (xff.p && chain_client(trusted, ntrusted, xff, false, &x, why) < 0)
        return -EINVAL;
    if (forwarded.p && xff.p && memcmp(&f, &x, sizeof f) != 0) {
        *why = "Forwarded and X-Forwarded-For name different clients";
        return -EINVAL;
    }
    *out = forwarded.p ? f : x;
    return 1;
}
