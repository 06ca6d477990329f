/* fuzz_http_diff — differential libFuzzer target (issue 18): the HTTP request
 * reader (http/jrpc_http_reader.c, our own parser) against the reader it
 * replaced (tests/fuzz/ref_http_reader.c: http-parser 2.9 under it).
 *
 * The first two bytes choose the limits (max_header_bytes = 32 + 16 *
 * data[0], max_body one of eight sizes by data[1] & 7), the next two the
 * split point; the rest is the byte stream of one connection, fed to both in
 * two pieces, each copied into a malloc'd buffer of exactly its length (the
 * unconsumed rest first) so that a read past the input trips ASan. Each run
 * writes a transcript: every HEAD with all its fields and kept values, each
 * request's body bytes joined, END, REFUSE with its status, CLOSED, and "N"
 * when the input ended with more wanted. The transcripts must be equal, or
 * abort(), with one class accepted: the new reader refuses (400) a request
 * whose request line is not method SP target SP "HTTP/" DIGIT "." DIGIT CRLF
 * with a visible-ASCII target (http-parser let several spaces, any four bytes
 * for "TTP/", tabs and bytes above 0x7e through; RFC 9112 section 3 does not).
 * A second class is accepted the other way: the old reader refused a head
 * with a field whose name starts with "Transfer-Encoding" and goes on
 * ("Transfer-Encodings: x", or spaces and more), an http-parser quirk; the
 * new reader reads it (or refuses it for what else is wrong with it).
 * A third: a byte above 0x7f in a chunk size, which http-parser read as a
 * hex 0 (its table stops at 0x7f), is refused by the new reader (the
 * body read before it then differs too).
 * Reasons are not compared (the new reader's follow the old ones where tests
 * look at them). JRPC_FUZZ_DUMP=1 prints both transcripts. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jrpc_http_reader.h"
#include "ref_http_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define TRACE_CAP (1u << 20)

typedef struct trace {
    char  *p;
    size_t len;
    size_t ev[4096];   /* where each event starts in p */
    int    kind[4096];
    size_t nev;
    size_t starts[4096]; /* each request's first byte in the stream */
    size_t nreq;
    size_t refused_at;   /* REFUSE: the stream offset of the byte refused */
    const char *reason;
} trace_t;

static void putf(trace_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(trace_t *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->p + t->len, TRACE_CAP - t->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= TRACE_CAP - t->len)
        abort();
    t->len += (size_t)n;
}

static void mark(trace_t *t, int kind)
{
    if (t->nev < 4096) {
        t->ev[t->nev] = t->len;
        t->kind[t->nev++] = kind;
    }
}

/* One head, the same words for both readers (the macro is expanded once per
 * reader type: their structs have the same fields under other names). */
#define PUT_HEAD(t, h, name, nf, valfn)                                                     \
    do {                                                                                    \
        putf(t, "H %s m%u v%u ka%d ch%d hl%d cl%llu ec%d eo%d cc%d cu%d tc%d [%.*s]", name, \
             (h)->method, (h)->version_minor, (h)->keep_alive, (h)->chunked,                \
             (h)->has_length, (unsigned long long)(h)->content_length,                      \
             (h)->expect_continue, (h)->expect_other, (h)->content_coded,                   \
             (h)->conn_upgrade, (h)->target_cut, (int)(h)->target_len, (h)->target);        \
        for (int f = 0; f < (nf); f++) {                                                    \
            __typeof__(valfn((h), 0)) v = valfn((h), f);                                    \
            if (v.count)                                                                    \
                putf(t, " f%d:%u%s=%.*s", f, v.count, v.cut ? "cut" : "", (int)v.n, v.p);   \
        }                                                                                   \
        putf(t, "\n");                                                                      \
    } while (0)

static void body_flush(trace_t *t, const char *b, size_t *bn)
{
    if (*bn) {
        mark(t, 'B');
        putf(t, "B%zu:%.*s\n", *bn, (int)*bn, b);
        *bn = 0;
    }
}

static size_t skip_crlf(const uint8_t *s, size_t n, size_t at)
{
    while (at < n && (s[at] == '\r' || s[at] == '\n'))
        at++;
    return at;
}

static char bodybuf[2][1 << 17];

/* Drives one reader over s[0, n) cut at `cut`: FEED(buf, len, &ev) returns
 * the bytes used. */
#define DRIVE(t, which, FEED, FINAL_HEAD)                                                   \
    do {                                                                                    \
        size_t bn = 0, pos = 0, pieces[2] = { cut, n - cut }, carry = 0;                    \
        bool final = false;                                                                 \
        (t)->starts[(t)->nreq++] = skip_crlf(s, n, 0);                                      \
        for (int pi = 0; pi < 2 && !final; pi++) {                                          \
            size_t plen = carry + pieces[pi];                                               \
            char *b = malloc(plen ? plen : 1);                                              \
            memcpy(b, s + pos, plen);                                                       \
            size_t off = 0;                                                                 \
            int spins = 0;                                                                  \
            for (;;) {                                                                      \
                size_t k = FEED(b + off, plen - off);                                       \
                off += k;                                                                   \
                if (ev_kind == NEED)                                                        \
                    break;                                                                  \
                if (ev_kind == BODYK) {                                                     \
                    memcpy(bodybuf[which] + bn, ev_data, ev_len);                           \
                    bn += ev_len;                                                           \
                    continue;                                                               \
                }                                                                           \
                body_flush(t, bodybuf[which], &bn);                                         \
                if (ev_kind == HEADK) {                                                     \
                    mark(t, 'H');                                                           \
                    FINAL_HEAD;                                                             \
                } else if (ev_kind == ENDK) {                                               \
                    mark(t, 'E');                                                           \
                    putf(t, "E\n");                                                         \
                    if ((t)->nreq < 4096)                                                   \
                        (t)->starts[(t)->nreq++] = skip_crlf(s, n, pos + off);              \
                } else if (ev_kind == REFUSEK) {                                            \
                    mark(t, 'R');                                                           \
                    putf(t, "R%u\n", ev_status);                                            \
                    (t)->refused_at = pos + off;                                            \
                    (t)->reason = ev_reason;                                                \
                    if (getenv("JRPC_FUZZ_DUMP"))                                           \
                        fprintf(stderr, "reason %d: %s\n", which, ev_reason);               \
                    final = true;                                                           \
                    break;                                                                  \
                } else {                                                                    \
                    mark(t, 'C');                                                           \
                    putf(t, "C\n");                                                         \
                    final = true;                                                           \
                    break;                                                                  \
                }                                                                           \
                if (++spins > 100000)                                                       \
                    abort();                                                                \
            }                                                                               \
            pos += off;                                                                     \
            carry = plen - off;                                                             \
            free(b);                                                                        \
        }                                                                                   \
        body_flush(t, bodybuf[which], &bn);                                                 \
        if (!final) {                                                                       \
            mark(t, 'N');                                                                   \
            putf(t, "N\n");                                                                 \
        }                                                                                   \
    } while (0)

/* The request line at s[at, n) is (a prefix of) method SP target SP
 * "HTTP/" DIGIT "." DIGIT CR LF, target visible ASCII. */
static bool strict_line(const uint8_t *s, size_t n, size_t at)
{
    size_t i = at;
    size_t m = 0;
    for (; i < n && ((s[i] >= 'A' && s[i] <= 'Z') || s[i] == '-'); i++)
        m++;
    if (i == n)
        return true;
    if (m == 0 || s[i] != ' ')
        return false;
    i++;
    size_t tl = 0;
    for (; i < n && s[i] >= 0x21 && s[i] <= 0x7e; i++)
        tl++;
    if (i == n)
        return true;
    if (tl == 0 || s[i] != ' ')
        return s[i] == '\r' && tl > 0; /* no version: HTTP/0.9, refused alike */
    i++;
    static const char v[] = "HTTP/d.d\r\n";
    for (size_t j = 0; j < 10 && i < n; j++, i++) {
        if (v[j] == 'd') {
            if (s[i] < '0' || s[i] > '9')
                return false;
        } else if (s[i] != (uint8_t)v[j]) {
            return j >= 8; /* the line's end: what the readers say of it is compared */
        }
    }
    return true;
}

/* The head starting at s[at, n) has a field whose name starts with
 * "Transfer-Encoding" and goes on (http-parser flagged a Transfer-Encoding
 * at the name's 17th byte, and the old reader refused the head for it). */
static bool te_prefixed(const uint8_t *s, size_t n, size_t at)
{
    static const char te[] = "transfer-encoding";
    for (size_t i = at; i + 19 < n; i++) {
        if (s[i] == '\r' && s[i + 1] == '\n' && s[i + 2] == '\r')
            return false; /* the head's end */
        if (s[i] != '\n')
            continue;
        size_t j = 0;
        while (j < 17 && (s[i + 1 + j] | 0x20) == (uint8_t)te[j])
            j++;
        if (j == 17 && s[i + 18] != ':')
            return true;
    }
    return false;
}

static trace_t ta, tb;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint64_t bodies[8] = { 0, 1, 5, 16, 100, 1000, 4096, 65536 };
    if (size < 4 || size > (1u << 16))
        return 0;
    if (!ta.p) {
        ta.p = malloc(TRACE_CAP);
        tb.p = malloc(TRACE_CAP);
    }
    ta.reason = tb.reason = NULL;
    ta.len = tb.len = ta.nev = tb.nev = ta.nreq = tb.nreq = 0;
    uint32_t mh = 32 + 16u * data[0];
    uint64_t mb = bodies[data[1] & 7];
    const uint8_t *s = data + 4;
    size_t n = size - 4;
    size_t cut = ((size_t)data[2] << 8 | data[3]) % (n + 1);

    /* the new reader */
    {
        jrpc_http_reader_t *r = malloc(sizeof *r);
        jrpc_http_reader_init(r, &(jrpc_http_limits_t){ mh, mb });
        jrpc_http_event_t e;
        enum { NEED = JRPC_HTTP_NEED_MORE, BODYK = JRPC_HTTP_BODY, HEADK = JRPC_HTTP_HEAD,
               ENDK = JRPC_HTTP_END, REFUSEK = JRPC_HTTP_REFUSE };
#define FEED_A(p, l) jrpc_http_reader_feed(r, p, l, &e)
#define ev_kind e.kind
#define ev_data e.data
#define ev_len e.len
#define ev_status e.status
#define ev_reason e.reason
        DRIVE(&ta, 0, FEED_A,
              PUT_HEAD(&ta, jrpc_http_reader_head(r), jrpc_http_head_method_name(r),
                       JRPC_HTTP_NFIELDS, jrpc_http_head_value));
#undef ev_kind
#undef ev_data
#undef ev_len
#undef ev_status
#undef ev_reason
        free(r);
    }
    /* the reference */
    {
        ref_http_reader_t *r = malloc(sizeof *r);
        ref_http_reader_init(r, &(ref_http_limits_t){ mh, mb });
        ref_http_event_t e;
        enum { NEED = REF_HTTP_NEED_MORE, BODYK = REF_HTTP_BODY, HEADK = REF_HTTP_HEAD,
               ENDK = REF_HTTP_END, REFUSEK = REF_HTTP_REFUSE };
#define FEED_B(p, l) ref_http_reader_feed(r, p, l, &e)
#define ev_kind e.kind
#define ev_data e.data
#define ev_len e.len
#define ev_status e.status
#define ev_reason e.reason
        DRIVE(&tb, 1, FEED_B,
              PUT_HEAD(&tb, ref_http_reader_head(r), ref_http_head_method_name(r),
                       REF_HTTP_NFIELDS, ref_http_head_value));
#undef ev_kind
#undef ev_data
#undef ev_len
#undef ev_status
#undef ev_reason
        free(r);
    }
    if (getenv("JRPC_FUZZ_DUMP"))
        fprintf(stderr, "--- new\n%.*s--- ref\n%.*s", (int)ta.len, ta.p, (int)tb.len, tb.p);
    if (ta.len == tb.len && memcmp(ta.p, tb.p, ta.len) == 0)
        return 0;
    /* The first event that differs, and the request it belongs to. */
    size_t i = 0, req = 0;
    while (i < ta.nev && i < tb.nev) {
        size_t ea = i + 1 < ta.nev ? ta.ev[i + 1] : ta.len;
        size_t eb = i + 1 < tb.nev ? tb.ev[i + 1] : tb.len;
        if (ea - ta.ev[i] != eb - tb.ev[i] || memcmp(ta.p + ta.ev[i], tb.p + tb.ev[i], ea - ta.ev[i]))
            break;
        if (ta.kind[i] == 'E')
            req++;
        i++;
    }
    bool accepted = i < ta.nev && ta.kind[i] == 'R' && memcmp(ta.p + ta.ev[i], "R400", 4) == 0 &&
                    req < tb.nreq && !strict_line(s, n, tb.starts[req]);
    /* The second class: the old reader's refusal of a field named
     * Transfer-Encoding-something (RFC 9110 5.1: a field it does not know
     * is ignored); the new reader reads the head (or refuses it for
     * something else: the old refusal came first). */
    accepted = accepted || (i < tb.nev &&
                            memcmp(tb.p + tb.ev[i], "R400", 4) == 0 && req < tb.nreq &&
                            te_prefixed(s, n, tb.starts[req]));
    /* The third: http-parser read a byte above 0x7f in a chunk size as a
     * hex digit 0 (its table stops at 0x7f); RFC 9112 7.1 has HEXDIG only. */
    size_t last_h = 0;
    for (size_t j = 0; j < ta.nev; j++)
        if (ta.kind[j] == 'H')
            last_h = j;
    accepted = accepted || (i < ta.nev && i > last_h && ta.kind[ta.nev - 1] == 'R' && ta.reason &&
                            strcmp(ta.reason, "invalid character in chunk size header") == 0 &&
                            ta.refused_at < n && s[ta.refused_at] >= 0x80);
    if (!accepted) {
        fprintf(stderr, "fuzz_http_diff: the readers differ (max_header_bytes %u, max_body %llu, "
                "cut %zu)\n--- new\n%.*s--- ref\n%.*s", mh, (unsigned long long)mb, cut,
                (int)ta.len, ta.p, (int)tb.len, tb.p);
        abort();
    }
    return 0;
}
