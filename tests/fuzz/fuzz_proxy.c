/* fuzz_proxy — libFuzzer target for http/jrpc_proxy (issue 36: who the
 * client is behind a --trusted-proxy): bytes a client writes into
 * Forwarded and X-Forwarded-For, read through a trusted proxy.
 *
 * Input: byte 0 says which headers are there (bit 0 Forwarded, bit 1
 * X-Forwarded-For) and which were cut by the reader (bits 2, 3); the rest
 * is split at its first two NUL bytes into the trusted ranges (comma-
 * separated, up to 8, each through jrpc_proxy_cidr_parse), the Forwarded
 * value and the X-Forwarded-For value (each in a buffer of its exact size,
 * so that ASan sees any read past it). Invariants (abort on failure):
 *  - every range and address that parses formats and parses back to
 *    itself; a range's host bits are clear and its prefix fits its family;
 *  - jrpc_proxy_client returns 1, 0 (only with neither header) or -EINVAL
 *    (with a reason), the same twice;
 *  - a client named is an IPv4 or IPv6 address whose text reads back;
 *  - the right-most entry decides when it is no trusted proxy: if with
 *    no trusted ranges the client is an address outside the ranges, the
 *    ranges give the same client;
 *  - a trusted proxy appended on the right (X-Forwarded-For ", T",
 *    Forwarded ", for=T") changes nothing: the same client, or a chain
 *    then too long (malformed). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jrpc_proxy.h"

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "fuzz_proxy: invariant failed: %s (%s:%d)\n", #cond,     \
                    __FILE__, __LINE__);                                             \
            abort();                                                                 \
        }                                                                            \
    } while (0)

#define MAX_TRUSTED 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool same_addr(const jrpc_proxy_addr_t *a, const jrpc_proxy_addr_t *b)
{
    return a->family == b->family && memcmp(a->a, b->a, sizeof a->a) == 0;
}

/* a's text parses back to a. */
static void check_roundtrip(const jrpc_proxy_addr_t *a)
{
    char text[JRPC_PROXY_ADDR_TEXT];
    CHECK(a->family == 4 || a->family == 6);
    int n = jrpc_proxy_addr_format(a, text, sizeof text);
    CHECK(n > 0 && (size_t)n < sizeof text && text[n] == '\0');
    jrpc_proxy_addr_t back;
    CHECK(jrpc_proxy_addr_parse(text, (size_t)n, &back) == 0);
    CHECK(same_addr(a, &back));
}

static void check_range(const jrpc_proxy_cidr_t *c)
{
    check_roundtrip(&c->net);
    unsigned max = c->net.family == 4 ? 32 : 128;
    CHECK(c->bits <= max);
    for (unsigned bit = c->bits; bit < max; bit++)   /* host bits clear */
        CHECK((c->net.a[bit / 8] & (0x80u >> (bit % 8))) == 0);
    CHECK(jrpc_proxy_trusted(c, 1, &c->net));
}

/* A header value in a buffer of its exact size (NULL when absent). */
static jrpc_http_value_t value_of(const uint8_t *p, size_t n, bool present, bool cut, char **own)
{
    *own = NULL;
    if (!present)
        return (jrpc_http_value_t){ NULL, 0, 0, false };
    if (n > UINT16_MAX)
        n = UINT16_MAX;
    *own = malloc(n ? n : 1);
    CHECK(*own != NULL);
    if (n)
        memcpy(*own, p, n);
    return (jrpc_http_value_t){ *own, (uint16_t)n, 1, cut };
}

/* v with suffix appended, in a buffer of its exact size (own). */
static jrpc_http_value_t appended(jrpc_http_value_t v, const char *suffix, char **own)
{
    size_t sn = strlen(suffix), n = v.n + sn;
    *own = NULL;
    if (n > UINT16_MAX)
        return (jrpc_http_value_t){ NULL, 0, 0, false };
    *own = malloc(n);
    CHECK(*own != NULL);
    if (v.n)
        memcpy(*own, v.p, v.n);
    memcpy(*own + v.n, suffix, sn);
    return (jrpc_http_value_t){ *own, (uint16_t)n, 1, false };
}

static int client(const jrpc_proxy_cidr_t *t, size_t nt, jrpc_http_value_t f, jrpc_http_value_t x,
                  jrpc_proxy_addr_t *out, const char **why)
{
    memset(out, 0, sizeof *out);
    *why = NULL;
    int rc = jrpc_proxy_client(t, nt, f, x, out, why);
    CHECK(rc == 1 || rc == 0 || rc == -EINVAL);
    CHECK(rc != 0 || (f.p == NULL && x.p == NULL));
    CHECK(*why != NULL);
    CHECK(rc != -EINVAL || (*why)[0] != '\0');
    if (rc == 1)
        check_roundtrip(out);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned flags = data[0];
    const uint8_t *p = data + 1, *end = data + size;
    const uint8_t *cut1 = memchr(p, 0, (size_t)(end - p));
    const uint8_t *ranges_end = cut1 ? cut1 : end;
    const uint8_t *fwd = cut1 ? cut1 + 1 : end;
    const uint8_t *cut2 = fwd < end ? memchr(fwd, 0, (size_t)(end - fwd)) : NULL;
    const uint8_t *fwd_end = cut2 ? cut2 : end;
    const uint8_t *xff = cut2 ? cut2 + 1 : end;

    /* The trusted ranges, and every piece read as an address too. */
    jrpc_proxy_cidr_t trusted[MAX_TRUSTED];
    size_t nt = 0;
    for (const uint8_t *s = p; s < ranges_end;) {
        const uint8_t *comma = memchr(s, ',', (size_t)(ranges_end - s));
        const uint8_t *e = comma ? comma : ranges_end;
        jrpc_proxy_addr_t a;
        if (jrpc_proxy_addr_parse((const char *)s, (size_t)(e - s), &a) == 0)
            check_roundtrip(&a);
        jrpc_proxy_cidr_t c;
        if (jrpc_proxy_cidr_parse((const char *)s, (size_t)(e - s), &c) == 0) {
            check_range(&c);
            if (nt < MAX_TRUSTED)
                trusted[nt++] = c;
        }
        s = comma ? comma + 1 : ranges_end;
    }

    char *fown, *xown;
    jrpc_http_value_t f = value_of(fwd, (size_t)(fwd_end - fwd), flags & 1, flags & 4, &fown);
    jrpc_http_value_t x = value_of(xff, (size_t)(end - xff), flags & 2, flags & 8, &xown);
    jrpc_proxy_addr_t out, again, plain;
    const char *why;
    int rc = client(trusted, nt, f, x, &out, &why);
    CHECK(client(trusted, nt, f, x, &again, &why) == rc);
    CHECK(rc != 1 || same_addr(&out, &again));

    /* The right-most entry decides when it is no trusted proxy. */
    if (client(trusted, 0, f, x, &plain, &why) == 1 && !jrpc_proxy_trusted(trusted, nt, &plain)) {
        CHECK(rc == 1);
        CHECK(same_addr(&out, &plain));
    }

    /* A trusted proxy appended on the right changes nothing. */
    if (rc == 1 && nt > 0) {
        char text[JRPC_PROXY_ADDR_TEXT], suffix[JRPC_PROXY_ADDR_TEXT + 16];
        CHECK(jrpc_proxy_addr_format(&trusted[0].net, text, sizeof text) > 0);
        char *f2own = NULL, *x2own = NULL;
        jrpc_http_value_t f2 = f, x2 = x;
        if (f.p) {
            snprintf(suffix, sizeof suffix, trusted[0].net.family == 6 ? ", for=\"[%s]\"" : ", for=%s",
                     text);
            f2 = appended(f, suffix, &f2own);
        }
        if (x.p) {
            snprintf(suffix, sizeof suffix, ", %s", text);
            x2 = appended(x, suffix, &x2own);
        }
        if ((f.p == NULL || f2.p) && (x.p == NULL || x2.p)) {
            jrpc_proxy_addr_t out2;
            int rc2 = client(trusted, nt, f2, x2, &out2, &why);
            CHECK(rc2 == 1 || strstr(why, "malformed") != NULL);
            CHECK(rc2 != 1 || same_addr(&out, &out2));
        }
        free(f2own);
        free(x2own);
    }
    free(fown);
    free(xown);
    return 0;
}
