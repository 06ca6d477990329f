/* jrpc_rate — GCRA and the local budget (jrpc_rate.h). */
#include "jrpc_rate.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "jrpc_proxy.h"

#define US_PER_S 1000000u

uint64_t jrpc_rate_gcra(int64_t *tat_us, int64_t now_us, jrpc_rate_limit_t lim, uint64_t n)
{
    if (lim.rate == 0 || n == 0)
        return 0;
    if (n > lim.burst)
        return UINT64_MAX;
    /* n × T and burst × T computed whole, so that T = 1 s / rate is not
     * rounded once per call (n <= burst < 2^32: no overflow). */
    int64_t inc = (int64_t)(n * US_PER_S / lim.rate);
    int64_t dvt = (int64_t)((uint64_t)lim.burst * US_PER_S / lim.rate);
    int64_t tat = *tat_us > now_us ? *tat_us : now_us;
    int64_t next = tat + inc;
    if (next - now_us > dvt)
        return (uint64_t)(next - dvt - now_us);
    *tat_us = next;
    return 0;
}

int jrpc_rate_local_init(jrpc_rate_local_t *l, uint32_t share_pct)
{
    l->share_pct = share_pct < 1 ? 1 : share_pct > 100 ? 100 : share_pct;
    l->tat = calloc(JRPC_RATE_LOCAL_CELLS, sizeof *l->tat);
    return l->tat ? 0 : -ENOMEM;
}

void jrpc_rate_local_dispose(jrpc_rate_local_t *l)
{
    free(l->tat);
    l->tat = NULL;
}

uint64_t jrpc_rate_local(jrpc_rate_local_t *l, jrpc_span_t id, int64_t now_us,
                         jrpc_rate_limit_t lim, uint64_t n)
{
    if (lim.rate == 0)
        return 0;
    if (n > lim.burst)
        return UINT64_MAX;
    uint32_t h = 2166136261u;   /* FNV-1a */
    for (size_t i = 0; i < id.n; i++)
        h = (h ^ (uint8_t)id.p[i]) * 16777619u;
    jrpc_rate_limit_t part = {
        .rate = (uint32_t)((uint64_t)lim.rate * l->share_pct / 100),
        .burst = (uint32_t)((uint64_t)lim.burst * l->share_pct / 100),
    };
    if (part.rate == 0)
        part.rate = 1;
    if (part.burst < n)
        part.burst = (uint32_t)n;
    return jrpc_rate_gcra(&l->tat[h & (JRPC_RATE_LOCAL_CELLS - 1)], now_us, part, n);
}

void jrpc_rate_count(jrpc_rate_counts_t *c, jrpc_span_t id, uint64_t calls)
{
    if (c->e == NULL && (c->e = calloc(JRPC_RATE_COUNTS, sizeof *c->e)) == NULL) {
        c->other += calls;
        return;
    }
    if (id.n == 0 || id.n >= sizeof c->e[0].id) {
        c->other += calls;
        return;
    }
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < id.n; i++)
        h = (h ^ (uint8_t)id.p[i]) * 16777619u;
    for (uint32_t k = 0; k < JRPC_RATE_COUNTS; k++) {   /* open addressing, never removed */
        struct jrpc_rate_count *e = &c->e[(h + k) & (JRPC_RATE_COUNTS - 1)];
        if (e->id[0] == '\0') {
            if (c->used >= JRPC_RATE_COUNTS / 4 * 3)
                break;
            memcpy(e->id, id.p, id.n);
            e->id[id.n] = '\0';
            c->used++;
        }
        if (strlen(e->id) == id.n && memcmp(e->id, id.p, id.n) == 0) {
            e->calls += calls;
            return;
        }
    }
    c->other += calls;
}

void jrpc_rate_counts_dispose(jrpc_rate_counts_t *c)
{
    free(c->e);
    memset(c, 0, sizeof *c);
}

size_t jrpc_rate_who_addr(char *out, size_t size, jrpc_span_t peer)
{
    /* "1.2.3.4:5" and "[::1]:5" lose their port; "1.2.3.4" and "::1" are
     * kept whole. */
    const char *a = peer.p, *colon = peer.n ? memchr(peer.p, ':', peer.n) : NULL;
    size_t n = peer.n;
    if (n && a[0] == '[') {
        const char *end = memchr(a, ']', n);
        n = end ? (size_t)(end - a - 1) : n - 1;
        a++;
    } else if (colon && memchr(colon + 1, ':', peer.n - (size_t)(colon - peer.p) - 1) == NULL) {
        n = (size_t)(colon - a);
    }
    jrpc_proxy_addr_t ip;
    char text[JRPC_PROXY_ADDR_TEXT];
    int k;
    if (n && jrpc_proxy_addr_parse(a, n, &ip) == 0 && ip.family == 6) {
        memset(ip.a + 8, 0, 8);
        k = jrpc_proxy_addr_format(&ip, text, sizeof text) > 0
                ? snprintf(out, size, "addr:%s/64", text)
                : snprintf(out, size, "addr:%.*s", (int)n, a);
    } else if (n && jrpc_proxy_addr_parse(a, n, &ip) == 0 &&
               jrpc_proxy_addr_format(&ip, text, sizeof text) > 0) {
        k = snprintf(out, size, "addr:%s", text);   /* ::ffff:1.2.3.4 is 1.2.3.4 */
    } else {
        k = n ? snprintf(out, size, "addr:%.*s", (int)n, a) : snprintf(out, size, "addr:unknown");
    }
    return k < 0 ? 0 : (size_t)k < size ? (size_t)k : size - 1;
}
