/* fuzz_http_reader — libFuzzer target for http/jrpc_http_reader, in process.
 *
 * No sockets, no loop: the input is the byte stream of one connection, fed
 * to the reader whole, in pseudo-random pieces (seeded from the input), and
 * a byte at a time (inputs up to 512 bytes). The first two bytes choose the
 * limits: max_header_bytes = 32 + 16 * data[0] (32..4112), max_body one of
 * eight sizes from 0 to 65536 by data[1] & 7; make_corpus.py writes the seeds
 * with ff ff (the largest limits) in front.
 * Every piece is copied into its own malloc'd buffer of exactly its length,
 * the unconsumed rest of the previous piece first, so that a read past the
 * bytes given trips AddressSanitizer. Each run writes a transcript: every
 * event, the head at HEAD (all its fields and kept values), the body bytes
 * of each request joined (their pieces follow the split), the refusal with
 * its reason, the phase at the end.
 * Invariants (abort() on violation, reported as a crash by libFuzzer):
 *  - the three transcripts are identical (the verdict does not depend on
 *    the split, nor do the bytes delivered);
 *  - a call consumes at most what it was given, NEED_MORE consumes all of
 *    it, a BODY span lies inside the bytes its call consumed, a call with
 *    nothing consumed and no new verdict never repeats (no spin);
 *  - a head is at most max_header_bytes (leading empty lines aside); a
 *    request's body is at most max_body and, with a Content-Length, exactly
 *    that long when END comes; a chunked body is never longer than max_body;
 *  - REFUSE carries 400, 413, 431 or 505 and close; REFUSE and CLOSED are
 *    final: later calls return them again and consume nothing;
 *  - no crash, leak or undefined behaviour (ASan, UBSan).
 * JRPC_FUZZ_DUMP=1 prints the whole-input transcript of each input. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jrpc_http_reader.h"

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "fuzz_http_reader: invariant failed: %s (%s:%d)\n",      \
                    #cond, __FILE__, __LINE__);                                      \
            abort();                                                                 \
        }                                                                            \
    } while (0)

#define MAX_INPUT   (1u << 16)
#define BYTEWISE_MAX 512

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct trace {
    char  *p;
    size_t len, cap;
} trace_t;

static void put(trace_t *t, const void *p, size_t n)
{
    CHECK(t->len + n <= t->cap);
    memcpy(t->p + t->len, p, n);
    t->len += n;
}

static void putf(trace_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(trace_t *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    CHECK(n >= 0 && (size_t)n < t->cap - t->len);
    t->len += (size_t)n;
}

static void put_head(trace_t *t, const jrpc_http_reader_t *r)
{
    const jrpc_http_head_t *h = jrpc_http_reader_head(r);
    putf(t, "H %s m%u v%u ka%d ch%d hl%d cl%llu ec%d eo%d cc%d cu%d tc%d [", 
         jrpc_http_head_method_name(r), h->method, h->version_minor, h->keep_alive,
         h->chunked, h->has_length, (unsigned long long)h->content_length,
         h->expect_continue, h->expect_other, h->content_coded, h->conn_upgrade, h->target_cut);
    CHECK(h->target_len <= JRPC_HTTP_TARGET_MAX);
    put(t, h->target, h->target_len);
    putf(t, "]");
    for (int f = 0; f < JRPC_HTTP_NFIELDS; f++) {
        jrpc_http_value_t v = jrpc_http_head_value(h, (jrpc_http_field_t)f);
        if (v.count == 0) {
            CHECK(v.p == NULL && v.n == 0);
            continue;
        }
        putf(t, " f%d#%u%s=", f, v.count, v.cut ? "~" : "");
        put(t, v.p, v.n);
    }
    const char *path;
    size_t plen;
    if (jrpc_http_head_path(h, &path, &plen)) {
        CHECK(path >= h->target && path + plen <= h->target + h->target_len);
        putf(t, " path=%zu", plen);
    }
    putf(t, "\n");
}

typedef struct run_state {
    jrpc_http_limits_t lim;
    const uint8_t     *in;       /* the whole stream, for the head-size check */
    size_t             n;
    size_t             consumed; /* stream offset of the next unconsumed byte */
    size_t             req_start; /* where the current request began (after the last END) */
    uint64_t           body;     /* body bytes of the current request */
    size_t             pending;  /* body bytes in bodybuf, not yet in the transcript */
    char              *bodybuf;
} run_state_t;

/* The body bytes since the last event that was not BODY, joined. */
static void flush_body(trace_t *t, run_state_t *s)
{
    if (s->pending == 0)
        return;
    putf(t, "B%zu:", s->pending);
    put(t, s->bodybuf, s->pending);
    putf(t, "\n");
    s->pending = 0;
}

/* Feeds in[0, n) cut after the offsets cuts[0..ncuts), writing t. */
static void run(run_state_t *s, const size_t *cuts, size_t ncuts, trace_t *t)
{
    jrpc_http_reader_t r;
    jrpc_http_reader_init(&r, &s->lim);
    const uint8_t *in = s->in;
    size_t n = s->n;
    t->len = 0;
    s->consumed = s->req_start = 0;
    s->body = 0;
    s->pending = 0;
    char *pend = NULL;
    size_t plen = 0, pos = 0;
    bool final = false;
    for (size_t c = 0; c <= ncuts && !final; c++) {
        size_t to = c < ncuts ? cuts[c] : n;
        size_t blen = plen + (to - pos);
        char *b = malloc(blen ? blen : 1);
        CHECK(b != NULL);
        if (plen)
            memcpy(b, pend, plen);
        memcpy(b + plen, in + pos, to - pos);
        free(pend);
        pend = NULL;
        pos = to;
        const char *base = blen ? b : b + 1; /* 0 bytes: at the end of the allocation */
        size_t off = 0;
        int idle_calls = 0;                  /* calls in a row that consumed nothing */
        for (;;) {
            jrpc_http_event_t ev;
            jrpc_http_phase_t before = jrpc_http_reader_phase(&r);
            size_t k = jrpc_http_reader_feed(&r, base + off, blen - off, &ev);
            CHECK(k <= blen - off);
            idle_calls = k == 0 && ev.kind != JRPC_HTTP_NEED_MORE ? idle_calls + 1 : 0;
            CHECK(idle_calls <= 3); /* e.g. END after HEAD, then CLOSED: never a loop */
            if (ev.kind != JRPC_HTTP_NEED_MORE && ev.kind != JRPC_HTTP_BODY)
                flush_body(t, s);
            switch (ev.kind) {
            case JRPC_HTTP_NEED_MORE:
                CHECK(k == blen - off);
                break;
            case JRPC_HTTP_HEAD: {
                CHECK(before != JRPC_HTTP_IN_BODY && before != JRPC_HTTP_DONE);
                /* the head, from its first byte that is not an empty line */
                size_t start = s->req_start;
                while (start < n && (in[start] == '\r' || in[start] == '\n'))
                    start++;
                CHECK(s->consumed + k - start <= s->lim.max_header_bytes);
                put_head(t, &r);
                s->body = 0;
                break;
            }
            case JRPC_HTTP_BODY: {
                CHECK(before == JRPC_HTTP_IN_BODY);
                CHECK(ev.len > 0 && ev.data >= base + off && ev.data + ev.len <= base + off + k);
                const jrpc_http_head_t *h = jrpc_http_reader_head(&r);
                CHECK(s->body + ev.len <= s->lim.max_body);
                CHECK(!h->has_length || s->body + ev.len <= h->content_length);
                memcpy(s->bodybuf + s->pending, ev.data, ev.len);
                s->pending += ev.len;
                s->body += ev.len;
                break;
            }
            case JRPC_HTTP_END: {
                CHECK(before == JRPC_HTTP_IN_BODY);
                const jrpc_http_head_t *h = jrpc_http_reader_head(&r);
                if (h->has_length && h->method != JRPC_HTTP_M_CONNECT)
                    CHECK(s->body == h->content_length);
                putf(t, "E\n");
                s->body = 0;
                s->req_start = s->consumed + k;
                break;
            }
            case JRPC_HTTP_REFUSE:
            case JRPC_HTTP_CLOSED: {
                if (ev.kind == JRPC_HTTP_REFUSE) {
                    CHECK(ev.status == 400 || ev.status == 413 || ev.status == 431 ||
                          ev.status == 505);
                    CHECK(ev.close && ev.reason != NULL);
                    putf(t, "R%u %s\n", ev.status, ev.reason);
                } else {
                    CHECK(before == JRPC_HTTP_DONE);
                    putf(t, "C\n");
                }
                CHECK(jrpc_http_reader_phase(&r) == JRPC_HTTP_DONE);
                jrpc_http_event_t again;
                CHECK(jrpc_http_reader_feed(&r, base + off + k, blen - off - k, &again) == 0);
                CHECK(again.kind == ev.kind && again.status == ev.status);
                final = true;
                break;
            }
            }
            off += k;
            s->consumed += k;
            if (ev.kind == JRPC_HTTP_NEED_MORE || final)
                break;
        }
        if (!final && off < blen) {
            plen = blen - off;
            pend = malloc(plen);
            CHECK(pend != NULL);
            memcpy(pend, base + off, plen);
        } else {
            plen = 0;
        }
        free(b);
    }
    free(pend);
    flush_body(t, s);
    putf(t, "phase %d\n", (int)jrpc_http_reader_phase(&r));
}

static void dump(const char *what, const trace_t *t)
{
    fprintf(stderr, "---- %s (%zu bytes)\n", what, t->len);
    for (size_t i = 0; i < t->len; i++) {
        unsigned char ch = (unsigned char)t->p[i];
        if (ch == '\n' || (ch >= 0x20 && ch < 0x7f))
            fputc(ch, stderr);
        else
            fprintf(stderr, "\\x%02x", ch);
    }
}

static void same(const trace_t *a, const trace_t *b, const char *what)
{
    if (a->len == b->len && memcmp(a->p, b->p, a->len) == 0)
        return;
    dump("whole", a);
    dump(what, b);
    CHECK(!"the same transcript whatever the split");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint64_t bodies[8] = { 0, 1, 16, 100, 1000, 4096, 16384, 65536 };
    if (size < 2 || size > MAX_INPUT)
        return 0;
    run_state_t s = {
        .lim = { 32u + 16u * data[0], bodies[data[1] & 7] },
        .in = data + 2,
        .n = size - 2,
    };
    /* A head's line is at most ~200 bytes plus its bytes in the input, a
     * request takes 16 bytes at least, bodies are at most the input. */
    size_t cap = 16 * s.n + 16384;
    static trace_t t[2];
    static size_t have;
    static char *bodybuf;
    static size_t *cuts;
    if (have < cap) {
        free(t[0].p);
        free(t[1].p);
        free(bodybuf);
        free(cuts);
        t[0].p = malloc(cap);
        t[1].p = malloc(cap);
        bodybuf = malloc(cap);
        cuts = malloc(cap * sizeof *cuts);
        CHECK(t[0].p && t[1].p && bodybuf && cuts);
        have = cap;
    }
    t[0].cap = t[1].cap = cap;
    s.bodybuf = bodybuf;

    run(&s, NULL, 0, &t[0]);
    if (getenv("JRPC_FUZZ_DUMP"))
        dump("whole", &t[0]);

    /* pseudo-random pieces of 1 to 32 bytes, seeded from the input */
    uint64_t x = 1469598103934665603u;
    for (size_t i = 0; i < size; i++)
        x = (x ^ data[i]) * 1099511628211u;
    size_t k = 0;
    for (size_t at = 0; at < s.n;) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        at += 1 + (size_t)(x % 32);
        if (at < s.n)
            cuts[k++] = at;
    }
    run(&s, cuts, k, &t[1]);
    same(&t[0], &t[1], "random pieces");

    if (s.n <= BYTEWISE_MAX && s.n > 1) {
        for (size_t i = 0; i + 1 < s.n; i++)
            cuts[i] = i + 1;
        run(&s, cuts, s.n - 1, &t[1]);
        same(&t[0], &t[1], "a byte at a time");
    }
    return 0;
}
