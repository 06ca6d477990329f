/* fuzz_stdio_frame — libFuzzer target for jrpc-stdio's frame reader
 * (worker/jrpc_stdio_frame.c): what a child writes on its stdout.
 *
 * The first byte picks the framing (bit 0: NDJSON or LSP) and the message
 * limit (bits 1-2: 1..64 from the second byte, 100, 8192, 16 MiB); the
 * rest is the child's stdout. It is read twice: fed whole, and fed in
 * pieces whose sizes come from a generator seeded by the input (1 byte to
 * a few KiB, each piece addressable for exactly its size (fuzz_piece.h),
 * so that an over-read in the feed trips ASan), draining after every feed. Both
 * runs must give exactly the events (message bytes, too big, malformed,
 * in order) of a reference reader written here over the whole input.
 * Also: a message is never over the limit, lies inside the reader's
 * buffer, has no '\n' (NDJSON); the reader never holds more than
 * limit + JRPC_FRAME_HEADER_MAX + the piece; each message framed again
 * with jrpc_frame_put reads back alone and unchanged (in NDJSON, unless it
 * ends in '\r'); and what
 * jrpc_child_msg_parse says of it points inside it. A broken invariant is
 * an abort(). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_piece.h"
#include "jrpc_stdio_frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The harness's own loops (hashes, the reference) carry no coverage
 * callbacks: they found nothing new and took most of the time. Not inlined
 * either: inlined into LLVMFuzzerTestOneInput they were instrumented as
 * part of it (a fifth of an execution went to their comparisons). */
#define HARNESS __attribute__((no_sanitize("coverage"), noinline))

enum { EV_MSG = 1, EV_TOOBIG, EV_MALFORMED };

typedef struct ev {
    int      kind;
    size_t   n;      /* EV_MSG: length */
    uint64_t hash;   /* EV_MSG: of the bytes */
} ev_t;

typedef struct evs {
    ev_t  *v;
    size_t n, cap;
} evs_t;

static void check(int ok)
{
    if (!ok)
        abort();
}

/* Eight bytes a step (a byte a step was 7 % of an execution): each step is
 * a bijection of the state, so two inputs of one length that differ in one
 * word never collide; any other difference collides with odds ~2^-64. */
HARNESS static uint64_t hash_of(const char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
        h ^= h >> 29;
    }
    for (; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 0x100000001b3ULL;
    return h;
}

HARNESS static void push(evs_t *e, int kind, const char *p, size_t n)
{
    if (e->n == e->cap) {
        e->cap = e->cap ? e->cap * 2 : 16;
        e->v = realloc(e->v, e->cap * sizeof *e->v);
        check(e->v != NULL);
    }
    e->v[e->n++] = (ev_t){ kind, kind == EV_MSG ? n : 0, kind == EV_MSG ? hash_of(p, n) : 0 };
}

HARNESS static int same(const evs_t *a, const evs_t *b)
{
    if (a->n != b->n)
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (a->v[i].kind != b->v[i].kind || a->v[i].n != b->v[i].n || a->v[i].hash != b->v[i].hash)
            return 0;
    return 1;
}

/* ---- the reference: whole input, written for clarity, not speed ---- */

HARNESS static void ref_ndjson(const char *in, size_t n, size_t max, evs_t *e)
{
    size_t i = 0;
    for (;;) {
        const char *nl = memchr(in + i, '\n', n - i);
        if (nl == NULL) {
            /* An unfinished line is refused once it cannot fit any more:
             * over max, unless max bytes and a '\r' that a '\n' may follow. */
            size_t tail = n - i;
            if (tail > max && (tail - 1 > max || in[n - 1] != '\r'))
                push(e, EV_TOOBIG, NULL, 0);
            return;
        }
        size_t len = (size_t)(nl - (in + i));
        if (len > 0 && in[i + len - 1] == '\r')
            len--;
        if (len > max)
            push(e, EV_TOOBIG, NULL, 0);
        else if (len > 0)
            push(e, EV_MSG, in + i, len);
        i = (size_t)(nl - in) + 1;
    }
}

HARNESS static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* Content-Length of the header block h[0..n) (ending "\r\n\r\n"): each
 * line (one trailing '\r' off) that starts "content-length:" in any case
 * holds blanks, 1 to 15 digits, blanks; all such lines agree; -1 else. */
HARNESS static int64_t ref_clen(const char *h, size_t n)
{
    static const char name[] = "content-length:";
    int64_t len = -1;
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        if (h[i] != '\n')
            continue;
        const char *l = h + start;
        size_t ln = i - start;
        start = i + 1;
        if (ln > 0 && l[ln - 1] == '\r')
            ln--;
        if (ln < sizeof name - 1)
            continue;
        size_t k = 0;
        while (k < sizeof name - 1 && lower((unsigned char)l[k]) == name[k])
            k++;
        if (k < sizeof name - 1)
            continue;
        const char *v = l + k;
        size_t vn = ln - k;
        while (vn > 0 && (v[0] == ' ' || v[0] == '\t'))
            v++, vn--;
        while (vn > 0 && (v[vn - 1] == ' ' || v[vn - 1] == '\t'))
            vn--;
        if (vn == 0 || vn > 15)
            return -1;
        int64_t x = 0;
        for (size_t d = 0; d < vn; d++) {
            if (v[d] < '0' || v[d] > '9')
                return -1;
            x = x * 10 + (v[d] - '0');
        }
        if (len >= 0 && len != x)
            return -1;
        len = x;
    }
    return len;
}

HARNESS static void ref_lsp(const char *in, size_t n, size_t max, evs_t *e)
{
    size_t i = 0;
    while (i < n) {
        size_t avail = n - i, hend = 0;
        const char *h = in + i;
        for (size_t k = 4; k <= avail && k <= JRPC_FRAME_HEADER_MAX; k++)
            if (h[k - 1] == '\n' && h[k - 2] == '\r' && h[k - 3] == '\n' && h[k - 4] == '\r') {
                hend = k;
                break;
            }
        if (hend == 0) {
            if (avail < JRPC_FRAME_HEADER_MAX)
                return;
            push(e, EV_MALFORMED, NULL, 0);
            i += JRPC_FRAME_HEADER_MAX - 3;
            continue;
        }
        int64_t clen = ref_clen(in + i, hend);
        if (clen < 0) {
            push(e, EV_MALFORMED, NULL, 0);
            i += hend;
            continue;
        }
        if ((uint64_t)clen > max) {
            push(e, EV_TOOBIG, NULL, 0);
            if ((uint64_t)clen >= avail - hend)
                return;   /* the body to skip runs past the end */
            i += hend + (size_t)clen;
            continue;
        }
        if (avail - hend < (size_t)clen)
            return;
        if (clen > 0)
            push(e, EV_MSG, in + i + hend, (size_t)clen);
        i += hend + (size_t)clen;
    }
}

/* ---- the reader under test ---- */

/* What is said of a message: spans inside it, an ANSWER with one of
 * result and error and an id of ours. */
static void check_classify(const char *p, size_t n)
{
    jrpc_child_msg_t m;
    int kind = jrpc_child_msg_parse(p, n, &m);
    check(kind == m.kind);
    const jrpc_span_t *spans[] = { &m.id_raw, &m.method, &m.result, &m.error };
    for (size_t i = 0; i < 4; i++)
        check(spans[i]->n == 0 || (spans[i]->p >= p && spans[i]->p + spans[i]->n <= p + n));
    if (kind == JRPC_CHILD_ANSWER) {
        check((m.result.n > 0) != (m.error.n > 0));
        check(m.id >= 1 && m.id <= (uint64_t)INT64_MAX);
    }
}

/* A message framed again reads back alone and unchanged. */
static void check_roundtrip(int mode, size_t max, const char *p, size_t n)
{
    static jrpc_buf_t out;   /* kept between calls: one allocation, not one per message */
    jrpc_buf_reset(&out);
    check(jrpc_frame_put(&out, mode, p, n) == 0);
    jrpc_frame_reader_t r;
    jrpc_frame_reader_init(&r, mode, max);
    check(jrpc_frame_feed(&r, out.p, out.len) == 0);
    jrpc_span_t m;
    check(jrpc_frame_next(&r, &m) == 1 && m.n == n && memcmp(m.p, p, n) == 0);
    check(jrpc_frame_next(&r, &m) == 0);
    jrpc_frame_reader_dispose(&r);
}

static void drain(jrpc_frame_reader_t *r, size_t piece, evs_t *e, int deep)
{
    jrpc_span_t m;
    int rc;
    while ((rc = jrpc_frame_next(r, &m)) != 0) {
        check(r->off <= r->buf.len);
        if (rc == JRPC_FRAME_ETOOBIG) {
            push(e, EV_TOOBIG, NULL, 0);
            continue;
        }
        if (rc == JRPC_FRAME_EMALFORMED) {
            check(r->mode == JRPC_FRAME_LSP);
            push(e, EV_MALFORMED, NULL, 0);
            continue;
        }
        check(rc == 1);
        check(m.n >= 1 && m.n <= r->max);
        check(m.p >= r->buf.p && m.p + m.n <= r->buf.p + r->buf.len);
        check(r->mode == JRPC_FRAME_LSP || memchr(m.p, '\n', m.n) == NULL);
        push(e, EV_MSG, m.p, m.n);
        if (deep) {
            check_classify(m.p, m.n);
            /* (NDJSON cannot carry a message ending in '\r': the bridge
             * writes compact JSON, which never does.) */
            if (m.n <= 65536 && (r->mode == JRPC_FRAME_LSP || m.p[m.n - 1] != '\r'))
                check_roundtrip(r->mode, r->max, m.p, m.n);
        }
    }
    check(r->buf.len - r->off <= r->max + JRPC_FRAME_HEADER_MAX + piece);
}

HARNESS static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    int mode = data[0] & 1 ? JRPC_FRAME_LSP : JRPC_FRAME_NDJSON;
    static const size_t maxes[] = { 0, 100, 8192, 16u << 20 };
    size_t max = maxes[(data[0] >> 1) & 3];
    if (max == 0)
        max = 1 + data[1] % 64;
    const char *in = (const char *)data + 2;
    size_t n = size - 2;

    /* Kept between inputs (emptied here): their arrays grow once. */
    static evs_t want, whole, cut;
    want.n = whole.n = cut.n = 0;
    if (mode == JRPC_FRAME_LSP)
        ref_lsp(in, n, max, &want);
    else
        ref_ndjson(in, n, max, &want);

    jrpc_frame_reader_t r;
    jrpc_frame_reader_init(&r, mode, max);
    check(jrpc_frame_feed(&r, in, n) == 0);
    drain(&r, n, &whole, 1);
    jrpc_frame_reader_dispose(&r);
    check(same(&want, &whole));

    uint64_t seed = hash_of(in, n) | 1;
    /* One short input in four: a byte at a time. */
    int bytewise = (data[0] & 0x18) == 0x18 && n <= 1024;
    static fuzz_piece_t piece;   /* one allocation for the process (fuzz_piece.h) */
    check(fuzz_piece_room(&piece, n < 4096 ? n : 4096) == 0);
    jrpc_frame_reader_init(&r, mode, max);
    for (size_t i = 0; i < n;) {
        size_t k = bytewise ? 1 : 1 + (size_t)(next_rand(&seed) % (next_rand(&seed) % 4 ? 64 : 4096));
        if (k > n - i)
            k = n - i;
        check(jrpc_frame_feed(&r, fuzz_piece_put(&piece, (const uint8_t *)in + i, k), k) == 0);
        drain(&r, k, &cut, 0);
        i += k;
    }
    jrpc_frame_reader_dispose(&r);
    check(same(&want, &cut));
    return 0;
}
