/* The reference for jrpc-fuzz-http-diff: http/jrpc_http_reader as it was
 * before issue 18 (http-parser 2.9 under it, its raw scan over it), with
 * every jrpc_http_ name renamed ref_http_. Not built into anything else. */
/* ref_http_reader — see ref_http_reader.h.
 *
 * How http-parser is driven. It runs over the head and, for chunked bodies,
 * over the chunked framing; a Content-Length body is counted here and never
 * handed to it (the library would only count it too). It is paused in its
 * callbacks at every point that yields an event or a decision: the end of
 * the head, each chunk-size line, each piece of chunk data, the end of the
 * message. A pause in on_headers_complete leaves the head's last byte (its
 * LF) looked at but not counted; the reader counts it as the head's, and
 * for a chunked body hands the library a copy of it (owed) before the next
 * bytes. After each request the library is initialised afresh.
 *
 * Every limit is applied by giving the library no more bytes than the limit
 * leaves, and the raw scan covers every byte the library executed before
 * any decision is taken on them; so a verdict falls at the same byte
 * whatever the split of the input (the fuzzer checks it). */
#include "ref_http_reader.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

enum body { B_NONE, B_IDENTITY, B_CHUNKED, B_TOO_LARGE };
enum pause { P_NONE, P_HEADERS, P_CHUNK, P_DATA, P_MESSAGE };
enum hstate { HS_NONE, HS_FIELD, HS_VALUE };
/* What a header is to us: H_KEPT + a ref_http_field_t is a value we keep. */
enum hid { H_OTHER, H_CL, H_TE, H_CE, H_EXPECT, H_HOST, H_KEPT };

static const struct { uint16_t off, room; bool list; } rooms[REF_HTTP_NFIELDS] = {
    [REF_HTTP_F_CONTENT_TYPE] = { 0, 256, false },
    [REF_HTTP_F_ACCEPT]       = { 256, 256, true },
    [REF_HTTP_F_UPGRADE]      = { 512, 64, false },
    [REF_HTTP_F_TIMEOUT_MS]   = { 576, 16, false },
    [REF_HTTP_F_TRACEPARENT]  = { 592, 128, false },
    [REF_HTTP_F_KEY]          = { 720, 72, false },
    [REF_HTTP_F_TIMESTAMP]    = { 792, 72, false },
    [REF_HTTP_F_NONCE]        = { 864, 72, false },
    [REF_HTTP_F_SIGNATURE]    = { 936, 72, false },
    [REF_HTTP_F_WS_KEY]       = { 1008, 32, false },
    [REF_HTTP_F_WS_VERSION]   = { 1040, 16, false },
    [REF_HTTP_F_WS_PROTOCOL]  = { 1056, 128, true },
    [REF_HTTP_F_ORIGIN]       = { 1184, 256, false },
    [REF_HTTP_F_MCP_VERSION]  = { 1440, 32, false },
    [REF_HTTP_F_AUTHORIZATION] = { 1472, 256, false },
    [REF_HTTP_F_IDEM_KEY]     = { 1728, 264, false },
    [REF_HTTP_F_FORWARDED]    = { 1992, 256, true },
    [REF_HTTP_F_XFF]          = { 2248, 256, true },
};
_Static_assert(2248 + 256 == REF_HTTP_STORE, "the rooms fill the store");
const uint16_t ref_http_room_at[REF_HTTP_NFIELDS] = {
    0, 256, 512, 576, 592, 720, 792, 864, 936, 1008, 1040, 1056, 1184, 1440, 1472, 1728,
    1992, 2248,
};

static ref_http_reader_t *reader_of(http_parser *p)
{
    return (ref_http_reader_t *)((char *)p - offsetof(ref_http_reader_t, hp));
}

/* ---- the raw scan ------------------------------------------------------- */

/* Checks bytes the lenient library does not: every line ends in CRLF (no
 * bare CR or LF), no obs-fold, no control bytes, and chunk data is followed
 * by CRLF. Runs over the head and the chunked framing, never over data. */
static void scan_raw(ref_http_reader_t *r, const char *p, const char *end)
{
    /* Locals, not r->...: stores through p's char type would force a reload
     * of every field at every byte. */
    char prev = r->prevch;
    uint8_t want = r->want_crlf;
    bool bad = false;
    for (; p < end; p++) {
        /* Visible ASCII (0x21..0x7e) is fine after anything but CR: skip it
         * eight bytes at a time. The mask flags each byte outside that range
         * (and maybe bytes after one, by a borrow): the lowest flag is exact. */
        const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
        while (end - p >= 8 && !want && prev != '\r') {
            uint64_t x;
            memcpy(&x, p, 8);
            uint64_t m = (((x - 0x21 * ones) & ~x) | (x + ones) | x) & highs;
            size_t k = m ? (size_t)__builtin_ctzll(m) / 8 : 8; /* little-endian */
            if (k == 0)
                break;
            p += k;
            prev = p[-1];
            if (k < 8)
                break;
        }
        if (p == end)
            break;
        unsigned char ch = (unsigned char)*p;
        if ((unsigned)(ch - 0x21) < 0x5e && !want && prev != '\r') {
            prev = (char)ch;
            continue;
        }
        if (want) {
            if (ch != (want == 2 ? '\r' : '\n'))
                bad = true;
            want--;
        } else if (prev == '\r' && ch != '\n') {
            bad = true;
        } else if (ch == '\n' && prev != '\r') {
            bad = true;
        } else if ((ch == ' ' || ch == '\t') && prev == '\n') {
            bad = true; /* obs-fold */
        } else if ((ch < 0x20 && ch != '\t' && ch != '\r' && ch != '\n') || ch == 0x7f) {
            bad = true;
        }
        prev = (char)ch;
    }
    r->prevch = prev;
    r->want_crlf = want;
    if (bad)
        r->raw_bad = true;
}

/* ---- header values ------------------------------------------------------ */

/* RFC 9110 token bytes: ! # $ % & ' * + - . ^ _ ` | ~ DIGIT ALPHA. */
static const bool tchar[256] = {
    ['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1, ['*'] = 1,
    ['+'] = 1, ['-'] = 1, ['.'] = 1, ['^'] = 1, ['_'] = 1, ['`'] = 1, ['|'] = 1, ['~'] = 1,
    ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1,
    ['8'] = 1, ['9'] = 1,
    ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1,
    ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1,
    ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1,
    ['Y'] = 1, ['Z'] = 1,
    ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1,
    ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1,
    ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1,
    ['y'] = 1, ['z'] = 1,
};

/* p[0, n) equals lit (lower case letters, digits and '-') in any case.
 * Byte | 0x20 maps A-Z to a-z and leaves a-z, 0-9 and '-' alone; what else
 * it maps onto those (control bytes 0x10-0x19, CR) is never in a header
 * name the library passes, nor in a value compared here. */
static inline uint64_t load8(const char *p)
{
    uint64_t x;
    memcpy(&x, p, 8);
    return x;
}

static inline bool eq_nocase(const char *p, size_t n, const char *lit, size_t litn)
{
    const uint64_t low = 0x2020202020202020u;
    if (n != litn)
        return false;
    if (n >= 8) { /* words; the last one overlaps the one before (lit is constant) */
        for (size_t i = 0; i + 8 < n; i += 8)
            if ((load8(p + i) | low) != load8(lit + i))
                return false;
        return (load8(p + n - 8) | low) == load8(lit + n - 8);
    }
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)(p[i] | 0x20) != (unsigned char)lit[i])
            return false;
    return true;
}
#define IS(p, n, lit) eq_nocase(p, n, lit, sizeof(lit) - 1)

void ref_http_trim(const char **p, size_t *n)
{
    while (*n && (**p == ' ' || **p == '\t')) {
        (*p)++;
        (*n)--;
    }
    while (*n && ((*p)[*n - 1] == ' ' || (*p)[*n - 1] == '\t'))
        (*n)--;
}

/* What the header named hname is to us; by length first, so most names
 * cost one switch and at most two comparisons. */
static uint8_t classify(const ref_http_reader_t *r)
{
    const char *n = r->hname;
    size_t l = r->hname_len;
    switch (l) {
    case 4:  return IS(n, l, "host") ? H_HOST : H_OTHER;
    case 6:
        if (IS(n, l, "expect")) return H_EXPECT;
        if (IS(n, l, "accept")) return H_KEPT + REF_HTTP_F_ACCEPT;
        if (IS(n, l, "origin")) return H_KEPT + REF_HTTP_F_ORIGIN;
        return H_OTHER;
    case 7:  return IS(n, l, "upgrade") ? H_KEPT + REF_HTTP_F_UPGRADE : H_OTHER;
    case 10: return IS(n, l, "x-jrpc-key") ? H_KEPT + REF_HTTP_F_KEY : H_OTHER;
    case 11: return IS(n, l, "traceparent") ? H_KEPT + REF_HTTP_F_TRACEPARENT : H_OTHER;
    case 12:
        if (IS(n, l, "content-type")) return H_KEPT + REF_HTTP_F_CONTENT_TYPE;
        if (IS(n, l, "x-jrpc-nonce")) return H_KEPT + REF_HTTP_F_NONCE;
        return H_OTHER;
    case 13: return IS(n, l, "authorization") ? H_KEPT + REF_HTTP_F_AUTHORIZATION : H_OTHER;
    case 14: return IS(n, l, "content-length") ? H_CL : H_OTHER;
    case 9:  return IS(n, l, "forwarded") ? H_KEPT + REF_HTTP_F_FORWARDED : H_OTHER;
    case 15:
        if (IS(n, l, "idempotency-key")) return H_KEPT + REF_HTTP_F_IDEM_KEY;
        return IS(n, l, "x-forwarded-for") ? H_KEPT + REF_HTTP_F_XFF : H_OTHER;
    case 16:
        if (IS(n, l, "content-encoding")) return H_CE;
        if (IS(n, l, "x-jrpc-timestamp")) return H_KEPT + REF_HTTP_F_TIMESTAMP;
        if (IS(n, l, "x-jrpc-signature")) return H_KEPT + REF_HTTP_F_SIGNATURE;
        return H_OTHER;
    case 17:
        if (IS(n, l, "transfer-encoding")) return H_TE;
        if (IS(n, l, "x-jrpc-timeout-ms")) return H_KEPT + REF_HTTP_F_TIMEOUT_MS;
        if (IS(n, l, "sec-websocket-key")) return H_KEPT + REF_HTTP_F_WS_KEY;
        return H_OTHER;
    case 20: return IS(n, l, "mcp-protocol-version") ? H_KEPT + REF_HTTP_F_MCP_VERSION : H_OTHER;
    case 21: return IS(n, l, "sec-websocket-version") ? H_KEPT + REF_HTTP_F_WS_VERSION : H_OTHER;
    case 22:
        return IS(n, l, "sec-websocket-protocol") ? H_KEPT + REF_HTTP_F_WS_PROTOCOL : H_OTHER;
    default: return H_OTHER;
    }
}

bool ref_http_next_elem(const char **p, size_t *n, char sep, const char **e, size_t *en)
{
    if (*n == 0)
        return false;
    const char *at = memchr(*p, sep, *n);
    size_t len = at ? (size_t)(at - *p) : *n;
    *e = *p;
    *en = len;
    ref_http_trim(e, en);
    *p += len + (at != NULL);
    *n -= len + (at != NULL);
    return true;
}

/* A qvalue ("0", "0.5", "1.000") in thousandths; what does not follow the
 * grammar reads as far as it does. */
static int qvalue(const char *v, size_t n)
{
    size_t i = 0;
    int q = 0;
    if (i < n && (v[i] == '0' || v[i] == '1'))
        q = (v[i++] - '0') * 1000;
    if (i < n && v[i] == '.')
        for (int scale = 100, k = 0; ++i < n && k < 3 && v[i] >= '0' && v[i] <= '9'; k++, scale /= 10)
            q += (v[i] - '0') * scale;
    return q > 1000 ? 1000 : q;
}

int ref_http_accept_q(const char *p, size_t n, const char *type, bool any_json)
{
    int best = -1;
    size_t tl = strlen(type);
    const char *range, *param;
    size_t rn, pn;
    while (ref_http_next_elem(&p, &n, ',', &range, &rn)) {
        const char *t = range;   /* (set by the call; initialised for -O3's sake) */
        size_t tn = 0;
        ref_http_next_elem(&range, &rn, ';', &t, &tn);
        if (!(tn == tl && strncasecmp(t, type, tl) == 0) &&
            !(any_json && (IS(t, tn, "*/*") || IS(t, tn, "application/*"))))
            continue;
        int q = 1000;
        while (ref_http_next_elem(&range, &rn, ';', &param, &pn))
            if (pn >= 2 && (param[0] == 'q' || param[0] == 'Q') && param[1] == '=')
                q = qvalue(param + 2, pn - 2);
        if (q > best)
            best = q;
    }
    return best;
}

/* A Content-Encoding list naming no coding but identity (empty elements,
 * which RFC 9110's list syntax allows, are skipped). */
static bool identity_only(const char *p, size_t n)
{
    const char *e;
    size_t el;
    while (ref_http_next_elem(&p, &n, ',', &e, &el))
        if (el != 0 && !IS(e, el, "identity"))
            return false;
    return true;
}

/* Appends a piece of the value of kept field f to its room. */
static void keep_piece(ref_http_reader_t *r, ref_http_field_t f, const char *at, size_t len)
{
    ref_http_head_t *h = &r->head;
    size_t room = rooms[f].room, have = h->f[f].n;
    if (len > room - have) {
        len = room - have;
        h->f[f].cut = true;
    }
    memcpy(h->store + rooms[f].off + have, at, len);
    h->f[f].n = (uint16_t)(have + len);
}

/* A value of kept field f starts: the first one is kept, a list field's
 * later ones are joined to it with ", " (RFC 9110 5.3); count them all. */
static bool keep_start(ref_http_reader_t *r, ref_http_field_t f)
{
    ref_http_head_t *h = &r->head;
    if (h->f[f].count < 255)
        h->f[f].count++;
    r->val_start = h->f[f].n;
    r->val_prev = h->f[f].n;
    if (h->f[f].count == 1)
        return true;
    if (!rooms[f].list)
        return false;
    if (h->f[f].n > 0) /* something to join to */
        keep_piece(r, f, ", ", 2);
    r->val_start = h->f[f].n;
    return true;
}

/* The kept value just read, trimmed of spaces and tabs at both ends. */
static void keep_end(ref_http_reader_t *r, ref_http_field_t f)
{
    ref_http_head_t *h = &r->head;
    char *v = h->store + rooms[f].off;
    size_t a = r->val_start, b = h->f[f].n;
    while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t'))
        b--;
    size_t lead = 0;
    while (a + lead < b && (v[a + lead] == ' ' || v[a + lead] == '\t'))
        lead++;
    if (lead)
        memmove(v + a, v + a + lead, b - a - lead);
    h->f[f].n = (uint16_t)(b - lead);
    if (b - lead == a)
        h->f[f].n = r->val_prev; /* an empty element adds nothing, not even ", " */
}

static void value_start(ref_http_reader_t *r);

/* A header is complete (its name, and its value if we read it). */
static void finish_header(ref_http_reader_t *r)
{
    if (r->hstate == HS_FIELD) /* a header with no value callback: empty */
        value_start(r);
    const char *v = r->hval;
    size_t n = r->hval_len;
    ref_http_trim(&v, &n);
    switch (r->hid) {
    case H_OTHER: break;
    case H_CL: r->n_cl++; break;
    case H_TE:
        r->n_te++;
        r->te_ok = !r->hval_cut && IS(v, n, "chunked");
        break;
    case H_CE:
        if (r->hval_cut || !identity_only(v, n))
            r->head.content_coded = true;
        break;
    case H_EXPECT:
        if (!r->hval_cut && IS(v, n, "100-continue"))
            r->head.expect_continue = true;
        else
            r->head.expect_other = true;
        break;
    case H_HOST:
        if (r->n_host < 255)
            r->n_host++;
        break;
    default:
        if (r->keeping)
            keep_end(r, (ref_http_field_t)(r->hid - H_KEPT));
        break;
    }
    r->hname_len = 0;
    r->hstate = HS_NONE;
}

/* ---- http-parser callbacks --------------------------------------------- */

/* The value of the header whose name was just read starts. */
static void value_start(ref_http_reader_t *r)
{
    r->hstate = HS_VALUE;
    r->hid = classify(r);
    r->hval_len = 0;
    r->hval_cut = false;
    r->keeping = r->hid >= H_KEPT && keep_start(r, (ref_http_field_t)(r->hid - H_KEPT));
}

static int on_url(http_parser *p, const char *at, size_t len)
{
    ref_http_head_t *h = &reader_of(p)->head;
    if (len > (size_t)(REF_HTTP_TARGET_MAX - h->target_len)) {
        len = REF_HTTP_TARGET_MAX - h->target_len;
        h->target_cut = true;
    }
    memcpy(h->target + h->target_len, at, len);
    h->target_len = (uint16_t)(h->target_len + len);
    return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
    ref_http_reader_t *r = reader_of(p);
    if (r->phase != REF_HTTP_IN_HEAD)
        return 0; /* a chunked trailer: nothing is read from it */
    /* A name continues only across the end of the bytes executed; any other
     * name after a name is a new header (the previous one was empty). */
    if (r->hstate == HS_VALUE ||
        (r->hstate == HS_FIELD && !(r->field_at_end && at == r->exec_start)))
        finish_header(r);
    r->hstate = HS_FIELD;
    bool ok = true;
    for (size_t i = 0; i < len; i++)
        ok &= tchar[(unsigned char)at[i]];
    if (!ok)
        r->name_bad = true;
    if (r->hname_len <= sizeof r->hname && len <= sizeof r->hname - r->hname_len) {
        memcpy(r->hname + r->hname_len, at, len);
        r->hname_len = (uint8_t)(r->hname_len + len);
    } else {
        r->hname_len = 255; /* longer than any name we look at */
    }
    r->field_at_end = at + len == r->exec_end;
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
    ref_http_reader_t *r = reader_of(p);
    if (r->phase != REF_HTTP_IN_HEAD)
        return 0;
    if (r->hstate != HS_VALUE) {
        if (r->hstate == HS_NONE) /* a value with no name: not expected */
            r->name_bad = true;
        value_start(r);
    }
    if (r->hid >= H_KEPT) {
        if (r->keeping)
            keep_piece(r, (ref_http_field_t)(r->hid - H_KEPT), at, len);
        return 0;
    }
    if (r->hid == H_OTHER || r->hid == H_CL || r->hid == H_HOST)
        return 0; /* the library reads Content-Length; Host is only counted */
    if (len > sizeof r->hval - r->hval_len) {
        len = sizeof r->hval - r->hval_len;
        r->hval_cut = true;
    }
    memcpy(r->hval + r->hval_len, at, len);
    r->hval_len = (uint16_t)(r->hval_len + len);
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    ref_http_reader_t *r = reader_of(p);
    if (r->hstate != HS_NONE)
        finish_header(r);
    r->paused = P_HEADERS;
    http_parser_pause(p, 1);
    return 0;
}

static int on_chunk_header(http_parser *p)
{
    ref_http_reader_t *r = reader_of(p);
    r->paused = P_CHUNK;
    http_parser_pause(p, 1);
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    ref_http_reader_t *r = reader_of(p);
    scan_raw(r, r->scan_pos, at); /* the framing before the data */
    r->bad_before_data = r->raw_bad;
    r->scan_pos = at + len;
    r->span = at;
    r->span_len = len;
    r->body_left = p->content_length; /* what is left of this chunk */
    if (r->body_left == 0) {          /* the chunk's data ends here: CRLF next */
        r->want_crlf = 2;
        r->prevch = 0;
    }
    r->paused = P_DATA;
    http_parser_pause(p, 1);
    return 0;
}

static int on_message_complete(http_parser *p)
{
    ref_http_reader_t *r = reader_of(p);
    r->paused = P_MESSAGE;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings settings = {
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
    .on_chunk_header = on_chunk_header,
};

/* ---- events -------------------------------------------------------------- */

static size_t refuse(ref_http_reader_t *r, ref_http_event_t *ev, size_t used,
                     uint16_t status, const char *why)
{
    r->phase = REF_HTTP_DONE;
    r->final_status = status;
    r->final_reason = why;
    *ev = (ref_http_event_t){ .kind = REF_HTTP_REFUSE, .status = status, .close = true,
                               .reason = why };
    return used;
}

static const char *too_large(ref_http_reader_t *r)
{
    snprintf(r->why, sizeof r->why, "body larger than %llu bytes",
             (unsigned long long)r->lim.max_body);
    return r->why;
}

static void set(ref_http_event_t *ev, ref_http_ev_t kind)
{
    *ev = (ref_http_event_t){ .kind = kind };
}

/* A new request starts at its first byte: nothing of the last one is kept. */
static void begin(ref_http_reader_t *r)
{
    ref_http_head_t *h = &r->head;
    http_parser_init(&r->hp, HTTP_REQUEST);
    r->phase = REF_HTTP_IN_HEAD;
    r->body = B_NONE;
    r->hstate = HS_NONE;
    r->hname_len = 0;
    r->name_bad = false;
    r->n_cl = r->n_te = r->n_host = 0;
    r->te_ok = false;
    r->head_bytes = 0;
    r->body_seen = 0;
    h->method = REF_HTTP_M_OTHER;
    h->keep_alive = h->chunked = h->has_length = false;
    h->content_length = 0;
    h->expect_continue = h->expect_other = h->content_coded = false;
    h->conn_upgrade = h->target_cut = false;
    h->target_len = 0;
    memset(h->f, 0, sizeof h->f);
}

/* The head is in: the checks the lenient library does not make, in the
 * order they have always been made. */
static size_t head_done(ref_http_reader_t *r, ref_http_event_t *ev, size_t used)
{
    http_parser *p = &r->hp;
    ref_http_head_t *h = &r->head;
    if (p->http_major != 1 || p->http_minor > 1)
        return refuse(r, ev, used, p->http_major == 0 ? 400 : 505, "HTTP/1.0 or HTTP/1.1 only");
    bool v11 = p->http_minor == 1;
    if (r->name_bad)
        return refuse(r, ev, used, 400, "malformed header section");
    if (r->n_host > 1 || (v11 && r->n_host == 0))
        return refuse(r, ev, used, 400, "exactly one Host header is required");
    if (r->n_te > 0 || p->uses_transfer_encoding) {
        if (r->n_cl > 0 || (p->flags & F_CONTENTLENGTH))
            return refuse(r, ev, used, 400, "both Transfer-Encoding and Content-Length");
        if (r->n_te != 1 || !r->te_ok || !(p->flags & F_CHUNKED))
            return refuse(r, ev, used, 400, "Transfer-Encoding must be exactly chunked");
        if (!v11)
            return refuse(r, ev, used, 400, "Transfer-Encoding in an HTTP/1.0 request");
    }
    if (r->n_cl > 1)
        return refuse(r, ev, used, 400, "several Content-Length headers");
    switch (p->method) {
    case HTTP_GET:     h->method = REF_HTTP_M_GET; break;
    case HTTP_HEAD:    h->method = REF_HTTP_M_HEAD; break;
    case HTTP_POST:    h->method = REF_HTTP_M_POST; break;
    case HTTP_OPTIONS: h->method = REF_HTTP_M_OPTIONS; break;
    case HTTP_CONNECT: h->method = REF_HTTP_M_CONNECT; break;
    default:           h->method = REF_HTTP_M_OTHER; break;
    }
    h->version_minor = (uint8_t)p->http_minor;
    h->chunked = (p->flags & F_CHUNKED) != 0;
    h->has_length = (p->flags & F_CONTENTLENGTH) != 0;
    h->content_length = h->has_length ? p->content_length : 0;
    h->conn_upgrade = (p->flags & F_CONNECTION_UPGRADE) != 0;
    /* What follows a CONNECT is a tunnel, never another request. */
    h->keep_alive = http_should_keep_alive(p) && h->method != REF_HTTP_M_CONNECT;
    if (h->method == REF_HTTP_M_CONNECT)
        r->body = B_NONE; /* RFC 9110 9.3.6: no content */
    else if (h->chunked)
        r->body = B_CHUNKED;
    else if (h->content_length > r->lim.max_body)
        r->body = B_TOO_LARGE;
    else if (h->content_length > 0)
        r->body = B_IDENTITY;
    else
        r->body = B_NONE;
    r->body_left = r->body == B_IDENTITY ? h->content_length : 0;
    r->owe = r->body == B_CHUNKED; /* the library steps over owed before the framing */
    r->phase = REF_HTTP_IN_BODY;
    set(ev, REF_HTTP_HEAD);
    return used;
}

static size_t end(ref_http_reader_t *r, ref_http_event_t *ev, size_t used)
{
    r->phase = r->head.keep_alive ? REF_HTTP_IDLE : REF_HTTP_DONE;
    r->prevch = '\n';     /* as after a line: empty lines may follow */
    r->want_crlf = 0;
    set(ev, REF_HTTP_END);
    return used;
}

/* ---- the phases ------------------------------------------------------------ */

static size_t idle(ref_http_reader_t *r, const char *buf, size_t len, ref_http_event_t *ev)
{
    /* Empty lines before a request line are skipped (RFC 9112 2.2), as
     * CRLFs: the raw scan sees them. */
    size_t i = 0;
    while (i < len && (buf[i] == '\r' || buf[i] == '\n'))
        i++;
    if (i > 0)
        scan_raw(r, buf, buf + i);
    if (r->raw_bad)
        return refuse(r, ev, i, 400, "malformed header section");
    if (i < len)
        begin(r);
    set(ev, REF_HTTP_NEED_MORE);
    return i;
}

static size_t in_head(ref_http_reader_t *r, const char *buf, size_t len, ref_http_event_t *ev)
{
    if (len == 0) { /* the library would take 0 bytes for the end of the stream */
        set(ev, REF_HTTP_NEED_MORE);
        return 0;
    }
    uint32_t room = r->lim.max_header_bytes + 1 - r->head_bytes;
    size_t n = len < room ? len : room;
    r->paused = P_NONE;
    r->exec_start = buf;
    r->exec_end = buf + n;
    size_t k = http_parser_execute(&r->hp, &settings, buf, n);
    enum http_errno e = HTTP_PARSER_ERRNO(&r->hp);
    bool complete = e == HPE_PAUSED && r->paused == P_HEADERS;
    /* At the pause the library is at the head's last byte, not counted. */
    size_t used = complete ? k + 1 : k;
    scan_raw(r, buf, buf + used);
    r->head_bytes += (uint32_t)used;
    if (r->raw_bad)
        return refuse(r, ev, used, 400, "malformed header section");
    if (r->head_bytes > r->lim.max_header_bytes) /* the head ends on the byte past the limit */
        return refuse(r, ev, k, 431, "request headers too large");
    if (complete) {
        http_parser_pause(&r->hp, 0);
        r->owed = buf[k];
        return head_done(r, ev, used);
    }
    if (e != HPE_OK)
        return refuse(r, ev, k, e == HPE_HEADER_OVERFLOW ? 431 : 400,
                      e == HPE_HEADER_OVERFLOW ? "request headers too large"
                                               : http_errno_description(e));
    if (k != len)
        return refuse(r, ev, k, 400, "parser stalled"); /* not expected */
    set(ev, REF_HTTP_NEED_MORE);
    return k;
}

static size_t in_chunked(ref_http_reader_t *r, const char *buf, size_t len,
                         ref_http_event_t *ev)
{
    const uint32_t max_frame = r->lim.max_header_bytes;
    if (r->owe) { /* the head's last byte, which the library still has to step over */
        char b = r->owed;
        r->owe = false;
        r->paused = P_NONE;
        r->exec_start = &b;
        r->exec_end = &b + 1;
        r->scan_pos = &b + 1; /* scanned with the head */
        if (http_parser_execute(&r->hp, &settings, &b, 1) != 1 ||
            HTTP_PARSER_ERRNO(&r->hp) != HPE_OK || r->paused != P_NONE)
            return refuse(r, ev, 0, 400, "malformed chunked framing");
        r->frame_bytes = 0;
        r->body_left = 0;
    }
    size_t done = 0;
    for (;;) {
        if (r->raw_bad) /* after the data just returned (see P_DATA below) */
            return refuse(r, ev, done, 400, "malformed chunked framing");
        if (done == len) { /* never 0 bytes to the library: that means end of stream */
            set(ev, REF_HTTP_NEED_MORE);
            return done;
        }
        /* The library gets the data left in the chunk and no more framing
         * bytes than the limit leaves: the limit falls on the exact byte. */
        uint64_t room = r->body_left + (max_frame + 1 - r->frame_bytes);
        const char *q = buf + done;
        size_t n = len - done < room ? len - done : (size_t)room;
        r->paused = P_NONE;
        r->span_len = 0;
        r->bad_before_data = false;
        r->exec_start = r->scan_pos = q;
        r->exec_end = q + n;
        size_t k = http_parser_execute(&r->hp, &settings, q, n);
        enum http_errno e = HTTP_PARSER_ERRNO(&r->hp);
        scan_raw(r, r->scan_pos, q + k);
        r->frame_bytes += (uint32_t)(k - r->span_len);
        done += k;
        /* A fault in the bytes after a piece of data (the library may have
         * stepped over them before pausing, or not, by the split) is
         * refused after that data is returned, by the next call. */
        if (r->raw_bad && !(e == HPE_PAUSED && r->paused == P_DATA && !r->bad_before_data))
            return refuse(r, ev, done, 400, "malformed chunked framing");
        if (e == HPE_PAUSED) {
            http_parser_pause(&r->hp, 0);
            switch (r->paused) {
            case P_DATA:
                if (r->frame_bytes > max_frame) /* (room allows at most the CR after data) */
                    return refuse(r, ev, done, 431, "chunk-size line too large");
                r->body_seen += r->span_len;
                *ev = (ref_http_event_t){ .kind = REF_HTTP_BODY, .data = r->span,
                                           .len = r->span_len };
                return done;
            case P_CHUNK: {
                uint64_t size = r->hp.content_length, max = r->lim.max_body;
                if (r->frame_bytes > max_frame)
                    return refuse(r, ev, done, 431, "chunk-size line too large");
                if (size > max || r->body_seen + size > max)
                    return refuse(r, ev, done, 413, too_large(r));
                r->frame_bytes = 0; /* the next line (or the trailer section) counts afresh */
                r->body_left = size;
                continue;
            }
            case P_MESSAGE:
                if (r->frame_bytes > max_frame)
                    return refuse(r, ev, done, 431, "trailer section too large");
                return end(r, ev, done);
            default:
                return refuse(r, ev, done, 400, "parser stalled"); /* not expected */
            }
        }
        if (e != HPE_OK)
            return refuse(r, ev, done, e == HPE_HEADER_OVERFLOW ? 431 : 400,
                          e == HPE_HEADER_OVERFLOW ? "trailer section too large"
                                                   : http_errno_description(e));
        if (r->frame_bytes > max_frame)
            return refuse(r, ev, done, 431, "chunk-size line or trailer section too large");
        if (k != n)
            return refuse(r, ev, done, 400, "parser stalled"); /* not expected */
    }
}

static size_t in_body(ref_http_reader_t *r, const char *buf, size_t len, ref_http_event_t *ev)
{
    switch (r->body) {
    case B_CHUNKED:
        return in_chunked(r, buf, len, ev);
    case B_TOO_LARGE:
        return refuse(r, ev, 0, 413, too_large(r));
    case B_IDENTITY:
        if (r->body_left > 0) {
            if (len == 0) {
                set(ev, REF_HTTP_NEED_MORE);
                return 0;
            }
            size_t n = len < r->body_left ? len : (size_t)r->body_left;
            r->body_left -= n;
            r->body_seen += n;
            *ev = (ref_http_event_t){ .kind = REF_HTTP_BODY, .data = buf, .len = n };
            return n;
        }
        return end(r, ev, 0);
    default:
        return end(r, ev, 0);
    }
}

/* ---- the API --------------------------------------------------------------- */

void ref_http_reader_init(ref_http_reader_t *r, const ref_http_limits_t *lim)
{
    memset(r, 0, sizeof *r);
    r->lim = *lim;
    if (r->lim.max_header_bytes < 1)
        r->lim.max_header_bytes = 1;
    if (r->lim.max_header_bytes > 1u << 30) /* room arithmetic stays far from overflow */
        r->lim.max_header_bytes = 1u << 30;
    r->phase = REF_HTTP_IDLE;
    r->prevch = '\n';
    http_parser_init(&r->hp, HTTP_REQUEST);
    /* The library counts header bytes too, process-wide (80 KiB by default);
     * it must never be the tighter limit. */
    static uint32_t raised;
    uint32_t want = r->lim.max_header_bytes + 1024u;
    if (want > 80u * 1024 && want > raised) {
        raised = want;
        http_parser_set_max_header_size(raised);
    }
}

size_t ref_http_reader_feed(ref_http_reader_t *r, const char *buf, size_t len,
                             ref_http_event_t *ev)
{
    size_t done = 0;
    for (;;) {
        size_t k;
        switch (r->phase) {
        case REF_HTTP_IDLE:
            k = idle(r, buf + done, len - done, ev);
            done += k;
            if (r->phase == REF_HTTP_IN_HEAD)
                continue; /* a request line starts here */
            return done;
        case REF_HTTP_IN_HEAD:
            return done + in_head(r, buf + done, len - done, ev);
        case REF_HTTP_IN_BODY:
            return done + in_body(r, buf + done, len - done, ev);
        default:
            if (r->final_status != 0)
                *ev = (ref_http_event_t){ .kind = REF_HTTP_REFUSE, .status = r->final_status,
                                           .close = true, .reason = r->final_reason };
            else
                set(ev, REF_HTTP_CLOSED);
            return done;
        }
    }
}

int ref_http_reader_takeover(ref_http_reader_t *r)
{
    /* At HEAD: the phase is IN_BODY and nothing of a body has been read. */
    if (r->phase != REF_HTTP_IN_BODY || r->body != B_NONE || r->body_seen != 0 ||
        r->head.chunked || r->head.content_length != 0)
        return -1;
    r->phase = REF_HTTP_DONE;
    r->final_status = 0; /* CLOSED from now on */
    return 0;
}

ref_http_phase_t ref_http_reader_phase(const ref_http_reader_t *r)
{
    return (ref_http_phase_t)r->phase;
}

const ref_http_head_t *ref_http_reader_head(const ref_http_reader_t *r)
{
    return &r->head;
}

bool ref_http_head_path(const ref_http_head_t *h, const char **path, size_t *len)
{
    const char *u = h->target;
    size_t n = h->target_len;
    if (h->target_cut && memchr(u, '?', n) == NULL)
        return false; /* the path itself was cut */
    if (n >= 7 && strncasecmp(u, "http://", 7) == 0) { /* absolute-form */
        const char *slash = memchr(u + 7, '/', n - 7);
        if (slash == NULL)
            return false;
        n -= (size_t)(slash - u);
        u = slash;
    }
    const char *q = memchr(u, '?', n);
    if (q)
        n = (size_t)(q - u);
    *path = u;
    *len = n;
    return true;
}

const char *ref_http_head_method_name(const ref_http_reader_t *r)
{
    return http_method_str((enum http_method)r->hp.method);
}
