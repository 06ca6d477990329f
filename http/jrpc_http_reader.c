/* jrpc_http_reader — see jrpc_http_reader.h.
 *
 * Our own RFC 9112 request parser, resumable at any byte. One file on
 * purpose, over the ~1,000 lines a module usually keeps to (issue 31): its
 * state machine reads best whole, every state beside the ones it hands to. Nothing of the
 * input is kept between calls, only what was learnt from it: the state
 * (where in the request line, a header line or the chunked framing), the
 * method and header name read so far (short), the kept values in their
 * rooms. The common case, a whole head in one read, costs little because
 * each state consumes a run of bytes at a time: the target and the header
 * values eight bytes per step (a word test for the bytes that end them),
 * names through the token table; only the short request-line constants,
 * Content-Length, the Connection tokens and the chunked framing go byte by
 * byte. docs/ARCHITECTURE.md ("HTTP: the reader, the heads, the front") says
 * why no head buffer.
 *
 * The verdicts are those the reader gave when http-parser 2.9 (lenient) was
 * under it and its own checks over it (tests/fuzz/ref_http_reader.c keeps
 * that reader; jrpc-fuzz-http-diff compares the two), with one class
 * stricter: the request line is exactly method SP target SP "HTTP/" DIGIT "."
 * DIGIT, its target visible ASCII (http-parser let several spaces, any four
 * bytes for "TTP/", tabs and bytes above 0x7e through). Byte errors (a
 * method, a URL, a header byte, a Content-Length or chunk-size digit, a line
 * end) are refused at the byte; the checks that need the whole head
 * (version, Host, Transfer-Encoding, a space in a name) at its end, in the
 * order they have always been made.
 *
 * Every limit is applied by reading no more bytes than the limit leaves, so
 * a verdict falls at the same byte whatever the split of the input. */
#include "jrpc_http_reader.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

enum body { B_NONE, B_IDENTITY, B_CHUNKED, B_TOO_LARGE };
/* What a header is to us: H_KEPT + a jrpc_http_field_t is a value we keep. */
enum hid { H_OTHER, H_CL, H_TE, H_CE, H_EXPECT, H_HOST, H_CONN, H_KEPT };
/* Where the parser is. S_* are the head's (and the trailer section's), C_*
 * the chunked framing's. */
enum st {
    S_METHOD, S_TARGET, S_VERSION, S_RL_LF, /* the request line */
    S_LINE,     /* at the start of a header line (or the empty line) */
    S_NAME,     /* in a header name */
    S_OWS,      /* after the colon, before the value */
    S_VALUE,    /* in a value */
    S_LF,       /* a header line's CR was read */
    S_END_LF,   /* the empty line's CR was read */
    C_SIZE0, C_SIZE, C_EXT, C_SIZE_LF, /* a chunk-size line */
    C_DATA, C_DATA_CR, C_DATA_LF,      /* chunk data and the CRLF after it */
};
/* S_TARGET's step (r->sub): http-parser's URL grammar, which the verdicts
 * keep (origin-form and what follows a path take any visible byte). */
enum url { U_START, U_SCHEMA, U_SLASH, U_SLASH2, U_SERVER_START, U_SERVER, U_SERVER_AT, U_PATH };
/* The Connection matcher (r->sub while a Connection value is read), byte
 * for byte http-parser's: a token counts when it is close, keep-alive or
 * upgrade followed by spaces only, up to a comma or the end of the line. */
enum conn { CM_FIRST, CM_START, CM_TOKEN, CM_GENERAL, CM_MATCH, CM_DONE };
enum { CONN_KEEP = 1, CONN_CLOSE = 2, CONN_UPGRADE = 4 };
enum { CL_NONE, CL_DIGITS, CL_WS }; /* r->cl_state */

/* The reasons (those of http-parser's errors keep its words: clients and
 * tests have seen them). */
#define WHY_HEAD     "malformed header section"
#define WHY_LINE     "malformed request line"
#define WHY_FRAMING  "malformed chunked framing"
#define WHY_METHOD   "invalid HTTP method"
#define WHY_URL      "invalid URL"
#define WHY_CONSTANT "invalid constant string"
#define WHY_VERSION  "invalid HTTP version"
#define WHY_LF       "LF character expected"
#define WHY_HCHAR    "invalid character in header"
#define WHY_CL       "invalid character in content-length header"
#define WHY_CL_AGAIN "unexpected content-length header"
#define WHY_CHUNK    "invalid character in chunk size header"

static const struct { uint16_t off, room; bool list; } rooms[JRPC_HTTP_NFIELDS] = {
    [JRPC_HTTP_F_CONTENT_TYPE] = { 0, 256, false },
    [JRPC_HTTP_F_ACCEPT]       = { 256, 256, true },
    [JRPC_HTTP_F_UPGRADE]      = { 512, 64, false },
    [JRPC_HTTP_F_TIMEOUT_MS]   = { 576, 16, false },
    [JRPC_HTTP_F_TRACEPARENT]  = { 592, 128, false },
    [JRPC_HTTP_F_KEY]          = { 720, 72, false },
    [JRPC_HTTP_F_TIMESTAMP]    = { 792, 72, false },
    [JRPC_HTTP_F_NONCE]        = { 864, 72, false },
    [JRPC_HTTP_F_SIGNATURE]    = { 936, 72, false },
    [JRPC_HTTP_F_WS_KEY]       = { 1008, 32, false },
    [JRPC_HTTP_F_WS_VERSION]   = { 1040, 16, false },
    [JRPC_HTTP_F_WS_PROTOCOL]  = { 1056, 128, true },
    [JRPC_HTTP_F_ORIGIN]       = { 1184, 256, false },
    [JRPC_HTTP_F_MCP_VERSION]  = { 1440, 32, false },
    [JRPC_HTTP_F_AUTHORIZATION] = { 1472, 256, false },
    [JRPC_HTTP_F_IDEM_KEY]     = { 1728, 264, false },
    [JRPC_HTTP_F_FORWARDED]    = { 1992, 256, true },
    [JRPC_HTTP_F_XFF]          = { 2248, 256, true },
    [JRPC_HTTP_F_MCP_SESSION]  = { 2504, 128, false },
};
_Static_assert(2504 + 128 == JRPC_HTTP_STORE, "the rooms fill the store");
const uint16_t jrpc_http_room_at[JRPC_HTTP_NFIELDS] = {
    0, 256, 512, 576, 592, 720, 792, 864, 936, 1008, 1040, 1056, 1184, 1440, 1472, 1728,
    1992, 2248, 2504,
};

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
    if (n >= 4) { /* two words of four, overlapping: the names host, accept, origin */
        uint32_t a, b, c, d;
        memcpy(&a, p, 4);
        memcpy(&b, lit, 4);
        memcpy(&c, p + n - 4, 4);
        memcpy(&d, lit + n - 4, 4);
        return (a | 0x20202020u) == b && (c | 0x20202020u) == d;
    }
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)(p[i] | 0x20) != (unsigned char)lit[i])
            return false;
    return true;
}
#define IS(p, n, lit) eq_nocase(p, n, lit, sizeof(lit) - 1)

void jrpc_http_trim(const char **p, size_t *n)
{
    while (*n && (**p == ' ' || **p == '\t')) {
        (*p)++;
        (*n)--;
    }
    while (*n && ((*p)[*n - 1] == ' ' || (*p)[*n - 1] == '\t'))
        (*n)--;
}

bool jrpc_http_next_elem(const char **p, size_t *n, char sep, const char **e, size_t *en)
{
    if (*n == 0)
        return false;
    const char *at = memchr(*p, sep, *n);
    size_t len = at ? (size_t)(at - *p) : *n;
    *e = *p;
    *en = len;
    jrpc_http_trim(e, en);
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

int jrpc_http_accept_q(const char *p, size_t n, const char *type, bool any_json)
{
    int best = -1;
    size_t tl = strlen(type);
    const char *range, *param;
    size_t rn, pn;
    while (jrpc_http_next_elem(&p, &n, ',', &range, &rn)) {
        const char *t = range;   /* (set by the call; initialised for -O3's sake) */
        size_t tn = 0;
        jrpc_http_next_elem(&range, &rn, ';', &t, &tn);
        if (!(tn == tl && strncasecmp(t, type, tl) == 0) &&
            !(any_json && (IS(t, tn, "*/*") || IS(t, tn, "application/*"))))
            continue;
        int q = 1000;
        while (jrpc_http_next_elem(&range, &rn, ';', &param, &pn))
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
    while (jrpc_http_next_elem(&p, &n, ',', &e, &el))
        if (el != 0 && !IS(e, el, "identity"))
            return false;
    return true;
}

/* Appends a piece of the value of kept field f to its room. */
static void keep_piece(jrpc_http_reader_t *r, jrpc_http_field_t f, const char *at, size_t len)
{
    jrpc_http_head_t *h = &r->head;
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
static bool keep_start(jrpc_http_reader_t *r, jrpc_http_field_t f)
{
    jrpc_http_head_t *h = &r->head;
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
static void keep_end(jrpc_http_reader_t *r, jrpc_http_field_t f)
{
    jrpc_http_head_t *h = &r->head;
    char *v = h->store + rooms[f].off;
    size_t a = r->val_start, b = h->f[f].n;
    if (b > a && v[a] != ' ' && v[a] != '\t' && v[b - 1] != ' ' && v[b - 1] != '\t')
        return; /* nothing to trim (the usual) */
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


/* ---- methods ------------------------------------------------------------ */

/* http-parser's methods, by the names it knew (the verdicts keep them: any
 * other method is a 400). Index 0 is "none yet". */
static const char *const methods[] = {
    "", "DELETE", "GET", "HEAD", "POST", "PUT", "CONNECT", "OPTIONS", "TRACE", "COPY",
    "LOCK", "MKCOL", "MOVE", "PROPFIND", "PROPPATCH", "SEARCH", "UNLOCK", "BIND",
    "REBIND", "UNBIND", "ACL", "REPORT", "MKACTIVITY", "CHECKOUT", "MERGE", "M-SEARCH",
    "NOTIFY", "SUBSCRIBE", "UNSUBSCRIBE", "PATCH", "PURGE", "MKCALENDAR", "LINK",
    "UNLINK", "SOURCE",
};
enum { M_DELETE = 1, M_GET = 2, M_HEAD = 3, M_POST = 4, M_CONNECT = 6, M_OPTIONS = 7, M_COUNT = 35 };
#define METHOD_MAX 11 /* UNSUBSCRIBE */

/* The method named p[0, n), 0 when none: by length, then the names of
 * that length (the common ones first). */
static uint8_t method_id(const char *p, size_t n)
{
    static const uint8_t by_len[METHOD_MAX + 1][9] = {
        [3] = { M_GET, 5, 20 },
        [4] = { M_POST, M_HEAD, 9, 10, 12, 17, 32 },
        [5] = { 8, 11, 24, 29, 30 },
        [6] = { M_DELETE, 15, 16, 18, 19, 21, 26, 33, 34 },
        [7] = { M_OPTIONS, M_CONNECT },
        [8] = { 13, 23, 25 },
        [9] = { 14, 27 },
        [10] = { 22, 31 },
        [11] = { 28 },
    };
    if (n == 4 && memcmp(p, "POST", 4) == 0)
        return M_POST;
    if (n == 3 && memcmp(p, "GET", 3) == 0)
        return M_GET;
    if (n > METHOD_MAX)
        return 0;
    for (const uint8_t *m = by_len[n]; m < by_len[n] + 9 && *m; m++)
        if (memcmp(p, methods[*m], n) == 0)
            return *m;
    return 0;
}

/* Some method starts with p[0, n) (a method cut by the end of the bytes). */
static bool method_prefix(const char *p, size_t n)
{
    for (size_t m = 1; m < M_COUNT; m++)
        if (strlen(methods[m]) >= n && memcmp(methods[m], p, n) == 0)
            return true;
    return false;
}

/* ---- byte classes ------------------------------------------------------- */


/* The first byte of [p, end) outside visible ASCII (0x21..0x7e), or end.
 * Eight bytes a step: the mask flags each byte outside the range (and maybe
 * bytes after one, by a borrow): the lowest flag is exact. */
static const char *visible_run(const char *p, const char *end)
{
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    while (end - p >= 8) {
        uint64_t x = load8(p);
        uint64_t m = (((x - 0x21 * ones) & ~x) | (x + ones) | x) & highs;
        if (m)
            return p + __builtin_ctzll(m) / 8; /* little-endian */
        p += 8;
    }
    while (p < end && (unsigned)((unsigned char)*p - 0x21) < 0x5e)
        p++;
    return p;
}

/* The first byte of [p, end) that a field value cannot hold as it is: a
 * control byte (tab included: the caller looks at it) or DEL; or end. */
static const char *value_run(const char *p, const char *end)
{
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    while (end - p >= 8) {
        uint64_t x = load8(p);
        uint64_t y = x ^ (0x7f * ones);
        uint64_t m = (((x - 0x20 * ones) & ~x) | ((y - ones) & ~y)) & highs;
        if (m)
            return p + __builtin_ctzll(m) / 8;
        p += 8;
    }
    while (p < end && (unsigned char)*p >= 0x20 && *p != 0x7f)
        p++;
    return p;
}

static inline bool is_alpha(unsigned char c)
{
    return (unsigned)((c | 0x20) - 'a') < 26;
}

static inline bool is_digit(unsigned char c)
{
    return (unsigned)(c - '0') < 10;
}

static int unhex(unsigned char c)
{
    if (is_digit(c))
        return c - '0';
    if ((unsigned)((c | 0x20) - 'a') < 6)
        return (c | 0x20) - 'a' + 10;
    return -1;
}

/* RFC 3986 userinfo bytes, as http-parser's URL grammar has them. */
static bool userinfo_char(unsigned char c)
{
    if (is_alpha(c) || is_digit(c))
        return true;
    switch (c) {
    case '-': case '_': case '.': case '!': case '~': case '*': case '\'': case '(': case ')':
    case '%': case ';': case ':': case '&': case '=': case '+': case '$': case ',':
        return true;
    default:
        return false;
    }
}

/* The first byte of [p, end) that is ':', a control byte or a space (where
 * a plain header name ends), or end; eight bytes a step (the lowest flag is
 * exact, as in visible_run). Stopping at control bytes matters: eq_nocase
 * would take CR for '-'. */
static inline const char *name_end(const char *p, const char *end)
{
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    while (end - p >= 8) {
        uint64_t x = load8(p), y = x ^ (':' * ones);
        uint64_t m = (((y - ones) & ~y) | ((x - 0x21 * ones) & ~x)) & highs;
        if (m)
            return p + __builtin_ctzll(m) / 8;
        p += 8;
    }
    while (p < end && *p != ':' && (unsigned char)*p > 0x20)
        p++;
    return p;
}

/* One byte of a target that does not start with '/' or '*' (absolute-form,
 * or a CONNECT's authority): the next step, or -1 when it cannot be. */
static int url_step(int s, unsigned char c)
{
    switch (s) {
    case U_SCHEMA:
        return is_alpha(c) ? U_SCHEMA : c == ':' ? U_SLASH : -1;
    case U_SLASH:
        return c == '/' ? U_SLASH2 : -1;
    case U_SLASH2:
        return c == '/' ? U_SERVER_START : -1;
    case U_SERVER_START:
    case U_SERVER:
    case U_SERVER_AT:
        if (c == '/' || c == '?')
            return U_PATH;
        if (c == '@')
            return s == U_SERVER_AT ? -1 : U_SERVER_AT;
        if (userinfo_char(c) || c == '[' || c == ']')
            return U_SERVER;
        return -1;
    default:
        return U_PATH;
    }
}

/* ---- header names --------------------------------------------------------- */

/* What the header named n[0, l) is to us; by length first, so most names
 * cost one switch and at most three comparisons. In a trailer section only
 * Content-Length is looked at (its value is still checked). */
static uint8_t classify(const char *n, size_t l, bool trailer)
{
    if (trailer)
        return l == 14 && IS(n, l, "content-length") ? H_CL : H_OTHER;
    switch (l) {
    case 4:  return IS(n, l, "host") ? H_HOST : H_OTHER;
    case 6:
        if (IS(n, l, "accept")) return H_KEPT + JRPC_HTTP_F_ACCEPT;
        if (IS(n, l, "expect")) return H_EXPECT;
        if (IS(n, l, "origin")) return H_KEPT + JRPC_HTTP_F_ORIGIN;
        return H_OTHER;
    case 7:  return IS(n, l, "upgrade") ? H_KEPT + JRPC_HTTP_F_UPGRADE : H_OTHER;
    case 10:
        if (IS(n, l, "connection")) return H_CONN;
        return IS(n, l, "x-jrpc-key") ? H_KEPT + JRPC_HTTP_F_KEY : H_OTHER;
    case 11: return IS(n, l, "traceparent") ? H_KEPT + JRPC_HTTP_F_TRACEPARENT : H_OTHER;
    case 12:
        if (IS(n, l, "content-type")) return H_KEPT + JRPC_HTTP_F_CONTENT_TYPE;
        if (IS(n, l, "x-jrpc-nonce")) return H_KEPT + JRPC_HTTP_F_NONCE;
        return H_OTHER;
    case 13: return IS(n, l, "authorization") ? H_KEPT + JRPC_HTTP_F_AUTHORIZATION : H_OTHER;
    case 14:
        if (IS(n, l, "content-length")) return H_CL;
        return IS(n, l, "mcp-session-id") ? H_KEPT + JRPC_HTTP_F_MCP_SESSION : H_OTHER;
    case 9:  return IS(n, l, "forwarded") ? H_KEPT + JRPC_HTTP_F_FORWARDED : H_OTHER;
    case 15:
        if (IS(n, l, "idempotency-key")) return H_KEPT + JRPC_HTTP_F_IDEM_KEY;
        return IS(n, l, "x-forwarded-for") ? H_KEPT + JRPC_HTTP_F_XFF : H_OTHER;
    case 16:
        if (IS(n, l, "content-encoding")) return H_CE;
        if (IS(n, l, "x-jrpc-timestamp")) return H_KEPT + JRPC_HTTP_F_TIMESTAMP;
        if (IS(n, l, "x-jrpc-signature")) return H_KEPT + JRPC_HTTP_F_SIGNATURE;
        /* http-parser read it as Connection: so do the verdicts */
        if (IS(n, l, "proxy-connection")) return H_CONN;
        return H_OTHER;
    case 17:
        if (IS(n, l, "transfer-encoding")) return H_TE;
        if (IS(n, l, "x-jrpc-timeout-ms")) return H_KEPT + JRPC_HTTP_F_TIMEOUT_MS;
        if (IS(n, l, "sec-websocket-key")) return H_KEPT + JRPC_HTTP_F_WS_KEY;
        return H_OTHER;
    case 20: return IS(n, l, "mcp-protocol-version") ? H_KEPT + JRPC_HTTP_F_MCP_VERSION : H_OTHER;
    case 21: return IS(n, l, "sec-websocket-version") ? H_KEPT + JRPC_HTTP_F_WS_VERSION : H_OTHER;
    case 22:
        return IS(n, l, "sec-websocket-protocol") ? H_KEPT + JRPC_HTTP_F_WS_PROTOCOL : H_OTHER;
    default: return H_OTHER;
    }
}

/* ---- header values ---------------------------------------------------------- */

/* The value of the header whose name was n[0, l) starts. */
static inline __attribute__((always_inline)) void value_start(jrpc_http_reader_t *r, const char *n, size_t l)
{
    r->hid = classify(n, l, r->trailer);
    r->hval_len = 0;
    r->hval_cut = false;
    r->cl_state = CL_NONE;
    r->sub = CM_FIRST;
    r->keeping = r->hid >= H_KEPT && keep_start(r, (jrpc_http_field_t)(r->hid - H_KEPT));
}

/* One byte of a Connection value, as http-parser matched its tokens. */
static void conn_byte(jrpc_http_reader_t *r, unsigned char ch)
{
    static const char *const words[3] = { "keep-alive", "close", "upgrade" };
    static const uint8_t lens[3] = { 10, 5, 7 };
    unsigned char c = ch | 0x20;
    uint8_t w = r->cidx >> 4, i = r->cidx & 15;
    switch (r->sub) {
    case CM_FIRST:
    case CM_START:
        if (c == 'k' || c == 'c' || c == 'u') {
            r->sub = CM_MATCH;
            r->cidx = (uint8_t)((c == 'k' ? 0 : c == 'c' ? 1 : 2) << 4);
        } else if (r->sub == CM_FIRST || tchar[c]) {
            r->sub = CM_TOKEN;
        } else if (c != ' ') {
            r->sub = CM_GENERAL; /* the rest of the value is not looked at */
        }
        break;
    case CM_MATCH:
        i++;
        if (i >= lens[w] || c != (unsigned char)words[w][i])
            r->sub = CM_TOKEN;
        else if (i == lens[w] - 1)
            r->sub = CM_DONE;
        r->cidx = (uint8_t)(w << 4 | i);
        break;
    case CM_DONE:
        if (ch == ',') {
            r->conn |= (uint8_t)(1u << w);
            r->sub = CM_START;
        } else if (ch != ' ') {
            r->sub = CM_TOKEN;
        }
        break;
    case CM_TOKEN:
        if (ch == ',')
            r->sub = CM_START;
        break;
    default:
        break;
    }
}

/* Bytes p[0, n) of a Content-Length value, as http-parser read them
 * (digits, then spaces only; 2^64 - 11 and up overflow its conservative
 * test). Returns the index of a byte refused (*why set), or n. */
static size_t cl_bytes(jrpc_http_reader_t *r, const char *p, size_t n, const char **why)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        switch (r->cl_state) {
        case CL_NONE:
            if (!is_digit(ch)) {
                *why = WHY_CL;
                return i;
            }
            if (r->cl_seen) {
                *why = WHY_CL_AGAIN;
                return i;
            }
            r->cl_seen = true;
            r->cl_val = ch - '0';
            r->cl_state = CL_DIGITS;
            r->cl_at = r->head_bytes + (uint32_t)(p + i - r->scan_buf);
            r->cl_n = 1;
            break;
        case CL_DIGITS:
            if (ch == ' ') {
                r->cl_state = CL_WS;
                break;
            }
            if (!is_digit(ch) || (UINT64_MAX - 10) / 10 < r->cl_val) {
                *why = WHY_CL;
                return i;
            }
            r->cl_val = r->cl_val * 10 + (ch - '0');
            r->cl_n++;
            break;
        default:
            if (ch != ' ') {
                *why = WHY_CL;
                return i;
            }
            break;
        }
    }
    return n;
}

/* Value bytes p[0, n) (none of them CR, LF or a control byte but tab) go
 * where this header's value goes. Returns n, or the index of a byte refused. */
static inline __attribute__((always_inline)) size_t value_piece(jrpc_http_reader_t *r, const char *p, size_t n, const char **why)
{
    switch (r->hid) {
    case H_OTHER:
    case H_HOST:
        return n;
    case H_CL:
        return cl_bytes(r, p, n, why);
    case H_CONN:
        for (size_t i = 0; i < n; i++)
            conn_byte(r, (unsigned char)p[i]);
        return n;
    case H_TE:
    case H_CE:
    case H_EXPECT: {
        size_t k = n;
        if (k > sizeof r->hval - r->hval_len) {
            k = sizeof r->hval - r->hval_len;
            r->hval_cut = true;
        }
        memcpy(r->hval + r->hval_len, p, k);
        r->hval_len = (uint16_t)(r->hval_len + k);
        return n;
    }
    default:
        if (r->keeping)
            keep_piece(r, (jrpc_http_field_t)(r->hid - H_KEPT), p, n);
        return n;
    }
}

/* Takes the value bytes value_run finds at *pp (maybe none) where this
 * header's value goes and moves *pp past them. Returns true, or false with
 * *pp at the byte value_piece refused. */
static inline __attribute__((always_inline)) bool value_take(jrpc_http_reader_t *r,
                                                             const char **pp,
                                                             const char *end,
                                                             const char **why)
{
    const char *p = *pp, *q = value_run(p, end);
    if (q > p) {
        size_t k = value_piece(r, p, (size_t)(q - p), why);
        if (k < (size_t)(q - p)) {
            *pp = p + k;
            return false;
        }
    }
    *pp = q;
    return true;
}

/* "chunked" and spaces after it (http-parser took a tab there for another
 * token), the value as it came after the optional white space before it. */
static bool chunked_only(const char *v, size_t n)
{
    if (n < 7 || !eq_nocase(v, 7, "chunked", 7))
        return false;
    for (size_t i = 7; i < n; i++)
        if (v[i] != ' ')
            return false;
    return true;
}

/* A header line is complete (its LF read). */
static inline __attribute__((always_inline)) void finish_header(jrpc_http_reader_t *r)
{
    const char *v = r->hval;
    size_t n = r->hval_len;
    switch (r->hid) {
    case H_OTHER: break;
    case H_CL:
        if (r->n_cl < 255)
            r->n_cl++;
        if (r->cl_state == CL_NONE)
            r->cl_empty = true; /* refused at the next byte, as http-parser did */
        break;
    case H_TE:
        if (r->n_te < 255)
            r->n_te++;
        r->te_ok = !r->hval_cut && chunked_only(v, n);
        break;
    case H_CE:
        jrpc_http_trim(&v, &n);
        if (r->hval_cut || !identity_only(v, n))
            r->head.content_coded = true;
        break;
    case H_EXPECT:
        jrpc_http_trim(&v, &n);
        if (!r->hval_cut && IS(v, n, "100-continue"))
            r->head.expect_continue = true;
        else
            r->head.expect_other = true;
        break;
    case H_HOST:
        if (r->n_host < 255)
            r->n_host++;
        break;
    case H_CONN:
        if (r->sub == CM_DONE)
            r->conn |= (uint8_t)(1u << (r->cidx >> 4));
        break;
    default:
        if (r->keeping)
            keep_end(r, (jrpc_http_field_t)(r->hid - H_KEPT));
        break;
    }
}

/* ---- the head ----------------------------------------------------------------- */

enum { MORE = 0, DONE = 1, BAD = -1 };

/* Reads head bytes (or a trailer section's: r->trailer) from [p, end).
 * Returns the bytes used; *res is DONE when the final LF was among them,
 * BAD when the byte after them is refused (*why), else MORE (all used). */
static size_t head_scan(jrpc_http_reader_t *r, const char *const buf, const char *end,
                        int *res, const char **why)
{
    const char *p = buf;
    r->scan_buf = buf;
#define RAW (r->trailer ? WHY_FRAMING : WHY_HEAD) /* what the raw scan said */
#define FAIL(w)        do { *why = (w); *res = BAD; return (size_t)(p - buf); } while (0)
    while (p < end) {
        unsigned char ch = (unsigned char)*p;
        switch (r->st) {
        case S_METHOD: {
            if (r->mlen == 0 && end - p >= 5 && memcmp(p, "POST ", 5) == 0) {
                r->mname = M_POST; /* the usual request: no copy, no lookup */
                p += 5;
                r->st = S_TARGET;
                r->sub = U_START;
                break;
            }
            const char *q = p;
            while (q < end && ((unsigned)(*q - 'A') < 26 || *q == '-'))
                q++;
            size_t k = (size_t)(q - p);
            if (r->mlen + k > METHOD_MAX) {
                p += METHOD_MAX - r->mlen;
                FAIL(WHY_METHOD);
            }
            memcpy(r->mbuf + r->mlen, p, k);
            r->mlen = (uint8_t)(r->mlen + k);
            p = q;
            if (p == end) {
                if (!method_prefix(r->mbuf, r->mlen)) /* refused where http-parser did */
                    FAIL(WHY_METHOD);
                break;
            }
            if (*p != ' ' || (r->mname = method_id(r->mbuf, r->mlen)) == 0)
                FAIL(WHY_METHOD);
            p++;
            r->st = S_TARGET;
            r->sub = r->mname == M_CONNECT ? U_SERVER_START : U_START;
            break;
        }
        case S_TARGET: {
            jrpc_http_head_t *h = &r->head;
            const char *q = p;
            if (r->sub == U_START) {
                if (ch == '/' || ch == '*')
                    r->sub = U_PATH;
                else if (is_alpha(ch))
                    r->sub = U_SCHEMA;
                else if (ch == ' ')
                    FAIL(WHY_LINE);
                else
                    FAIL(ch == '\n' ? WHY_HEAD : WHY_URL);
                q++;
            }
            if (r->sub == U_PATH) {
                q = visible_run(q, end);
            } else {
                for (; q < end && (unsigned)((unsigned char)*q - 0x21) < 0x5e; q++) {
                    int s = url_step(r->sub, (unsigned char)*q);
                    if (s < 0) {
                        p = q;
                        FAIL(WHY_URL);
                    }
                    r->sub = (uint8_t)s;
                }
            }
            size_t k = (size_t)(q - p);
            if (k > (size_t)(JRPC_HTTP_TARGET_MAX - h->target_len)) {
                k = JRPC_HTTP_TARGET_MAX - h->target_len;
                h->target_cut = true;
            }
            memcpy(h->target + h->target_len, p, k);
            h->target_len = (uint16_t)(h->target_len + k);
            p = q;
            if (p == end)
                break;
            ch = (unsigned char)*p;
            bool can_end = r->sub == U_SERVER || r->sub == U_SERVER_AT || r->sub == U_PATH;
            if (ch == ' ' && can_end) {
                r->st = S_VERSION;
                r->sub = 0;
                /* The whole version and its CRLF here (the common case):
                 * at once. */
                if (end - p >= 11 && memcmp(p + 1, "HTTP/", 5) == 0 && is_digit((unsigned char)p[6]) &&
                    p[7] == '.' && is_digit((unsigned char)p[8]) && p[9] == '\r' && p[10] == '\n') {
                    r->major = (uint8_t)(p[6] - '0');
                    r->minor = (uint8_t)(p[8] - '0');
                    r->st = S_LINE;
                    p += 11;
                    break;
                }
            } else if (ch == '\r' && can_end) { /* no version: HTTP/0.9, refused at the end */
                r->major = 0;
                r->minor = 9;
                r->st = S_RL_LF;
            } else if (ch == '\n' && can_end) {
                FAIL(WHY_HEAD);
            } else if (ch == '\t' || ch >= 0x80) {
                FAIL(WHY_LINE);
            } else {
                FAIL(WHY_URL);
            }
            p++;
            break;
        }
        case S_VERSION: {
            static const char lit[] = "HTTP/";
            unsigned i = r->sub;
            if (i < 5) {
                if (ch != (unsigned char)lit[i])
                    FAIL(i == 0 && ch != ' ' ? WHY_CONSTANT : WHY_LINE);
            } else if (i == 5 || i == 7) {
                if (!is_digit(ch))
                    FAIL(WHY_VERSION);
                if (i == 5)
                    r->major = (uint8_t)(ch - '0');
                else
                    r->minor = (uint8_t)(ch - '0');
            } else if (i == 6) {
                if (ch != '.')
                    FAIL(WHY_VERSION);
            } else {
                if (ch != '\r')
                    FAIL(ch == '\n' ? WHY_HEAD : WHY_VERSION);
                r->st = S_RL_LF;
            }
            r->sub = (uint8_t)(i + 1);
            p++;
            break;
        }
        case S_RL_LF:
            if (ch != '\n')
                FAIL(WHY_LF);
            r->st = S_LINE;
            p++;
            break;
        case S_LINE:
            /* Whole lines straight through while they are here (the common
             * case): a token name, a colon, a value without tab up to CRLF.
             * Anything else, or a line cut by the end of the bytes, is left
             * to the states below from its start or the byte concerned. */
            for (;;) {
                if (r->cl_empty) {
                    r->cl_empty = false;
                    if (ch != ' ' && ch != '\t')
                        FAIL(WHY_CL);
                }
                if (ch == '\r')
                    break;
                const char *q = name_end(p, end);
                if (q == end || *q != ':')
                    break; /* cut, or a space or control byte: byte by byte */
                value_start(r, p, (size_t)(q - p));
                if (r->hid == H_OTHER) { /* a name we know is all token bytes */
                    const char *t = p;
                    while (t < q && tchar[(unsigned char)*t])
                        t++;
                    if (t == p || t < q)
                        break; /* empty, or not a token: byte by byte */
                }
                p = q + 1;
                if (end - p >= 2 && *p == ' ' && (unsigned char)p[1] > ' ')
                    p++; /* one space, then the value (the usual) */
                else
                    while (p < end && (*p == ' ' || *p == '\t'))
                        p++;
                if (p == end) {
                    r->st = S_OWS;
                    goto next;
                }
                if (!value_take(r, &p, end, why)) {
                    *res = BAD;
                    return (size_t)(p - buf);
                }
                if (end - p < 2 || p[0] != '\r' || p[1] != '\n') {
                    r->st = S_VALUE; /* a tab, a fault, or cut: byte by byte */
                    goto next;
                }
                finish_header(r);
                p += 2;
                if (p == end)
                    goto next; /* (still at a line's start) */
                ch = (unsigned char)*p;
            }
            if (ch == '\r') {
                r->st = S_END_LF;
                p++;
                break;
            }
            if (!tchar[ch])
                FAIL(ch == ' ' || ch == '\t' || ch == '\n' ? RAW : WHY_HCHAR);
            r->st = S_NAME;
            r->hname_len = 0;
            r->name_sp = false;
            /* fall through */
        case S_NAME: {
            const char *q = p;
            while (q < end && tchar[(unsigned char)*q])
                q++;
            const char *n = p;
            size_t l = (size_t)(q - p);
            if (l > 0 && r->name_sp)
                r->hname_len = 255; /* a token after a space: no name of ours */
            if (q < end && *q == ':' && r->hname_len == 0) {
                /* the whole name is here: no copy */
            } else if (r->hname_len != 255) {
                if (l <= sizeof r->hname - r->hname_len) {
                    memcpy(r->hname + r->hname_len, p, l);
                    r->hname_len = (uint8_t)(r->hname_len + l);
                } else {
                    r->hname_len = 255;
                }
                n = r->hname;
                l = r->hname_len;
            }
            p = q;
            if (p == end)
                break;
            if (*p == ':') {
                if (r->hname_len == 255)
                    l = 0; /* (no name of ours is empty) */
                value_start(r, n, l);
                r->st = S_OWS;
                p++;
                break;
            }
            if (*p == ' ') { /* http-parser took it; the head is refused at its end */
                if (!r->trailer)
                    r->name_bad = true;
                r->name_sp = true;
                p++;
                break;
            }
            FAIL(*p == '\n' ? RAW : WHY_HCHAR);
        }
        case S_OWS:
            while (p < end && (*p == ' ' || *p == '\t'))
                p++;
            if (p == end)
                break;
            r->st = S_VALUE;
            /* fall through */
        case S_VALUE: {
            if (!value_take(r, &p, end, why)) {
                *res = BAD;
                return (size_t)(p - buf);
            }
            if (p == end)
                break;
            ch = (unsigned char)*p;
            if (ch == '\t') {
                size_t k = value_piece(r, p, 1, why);
                if (k == 0) {
                    *res = BAD;
                    return (size_t)(p - buf);
                }
                p++;
                break;
            }
            if (ch != '\r')
                FAIL(ch == '\n' ? RAW : WHY_HCHAR);
            r->st = S_LF;
            p++;
            break;
        }
        case S_LF:
            if (ch != '\n')
                FAIL(RAW);
            finish_header(r);
            r->st = S_LINE;
            p++;
            break;
        case S_END_LF:
            if (ch != '\n')
                FAIL(RAW);
            p++;
            *res = DONE;
            return (size_t)(p - buf);
        default:
            assert(0 && "not a head state");
            FAIL(WHY_HEAD);
        }
    next:;
    }
#undef FAIL
#undef RAW
    *res = MORE;
    return (size_t)(p - buf);
}

/* ---- events -------------------------------------------------------------- */

static size_t refuse(jrpc_http_reader_t *r, jrpc_http_event_t *ev, size_t used,
                     uint16_t status, const char *why)
{
    r->phase = JRPC_HTTP_DONE;
    r->final_status = status;
    r->final_reason = why;
    *ev = (jrpc_http_event_t){ .kind = JRPC_HTTP_REFUSE, .status = status, .close = true,
                               .reason = why };
    return used;
}

static const char *too_large(jrpc_http_reader_t *r)
{
    snprintf(r->why, sizeof r->why, "body larger than %llu bytes",
             (unsigned long long)r->lim.max_body);
    return r->why;
}

static void set(jrpc_http_event_t *ev, jrpc_http_ev_t kind)
{
    *ev = (jrpc_http_event_t){ .kind = kind };
}

/* A new request starts at its first byte: nothing of the last one is kept. */
static void begin(jrpc_http_reader_t *r)
{
    jrpc_http_head_t *h = &r->head;
    r->phase = JRPC_HTTP_IN_HEAD;
    r->body = B_NONE;
    r->st = S_METHOD;
    r->sub = 0;
    r->mname = 0;
    r->mlen = 0;
    r->major = r->minor = 0;
    r->hname_len = 0;
    r->name_sp = r->name_bad = false;
    r->trailer = false;
    r->cl_seen = r->cl_empty = false;
    r->cl_val = 0;
    r->n_cl = r->n_te = r->n_host = 0;
    r->conn = 0;
    r->te_ok = false;
    r->head_bytes = 0;
    r->body_seen = 0;
    r->again = false;
    h->method = JRPC_HTTP_M_OTHER;
    h->keep_alive = h->chunked = h->has_length = false;
    h->content_length = 0;
    h->expect_continue = h->expect_other = h->content_coded = false;
    h->conn_upgrade = h->target_cut = false;
    h->target_len = 0;
    h->path_ok = false;
    memset(h->f, 0, sizeof h->f);
}

/* The path of h's target (jrpc_http_head_path), kept in h. */
static void find_path(jrpc_http_head_t *h)
{
    const char *u = h->target;
    size_t n = h->target_len;
    h->path_ok = false;
    h->path_at = h->path_len = 0;
    if (h->target_cut && memchr(u, '?', n) == NULL)
        return; /* the path itself was cut */
    /* absolute-form (origin-form, "/...", is the usual: one byte tells) */
    if (n >= 7 && (u[0] | 0x20) == 'h' && strncasecmp(u, "http://", 7) == 0) {
        const char *slash = memchr(u + 7, '/', n - 7);
        if (slash == NULL)
            return;
        n -= (size_t)(slash - u);
        u = slash;
    }
    const char *q = memchr(u, '?', n);
    if (q)
        n = (size_t)(q - u);
    h->path_ok = true;
    h->path_at = (uint16_t)(u - h->target);
    h->path_len = (uint16_t)n;
}

static size_t body_framing(jrpc_http_reader_t *r, jrpc_http_event_t *ev, size_t used);

/* The head is in: the checks that need all of it, in the order they have
 * always been made (in_head makes the first, http-parser's at the head's
 * last byte, which comes before the limit's). */
static size_t head_done(jrpc_http_reader_t *r, jrpc_http_event_t *ev, size_t used)
{
    jrpc_http_head_t *h = &r->head;
    if (r->major != 1 || r->minor > 1)
        return refuse(r, ev, used, r->major == 0 ? 400 : 505, "HTTP/1.0 or HTTP/1.1 only");
    bool v11 = r->minor == 1;
    if (r->name_bad)
        return refuse(r, ev, used, 400, WHY_HEAD);
    if (r->n_host > 1 || (v11 && r->n_host == 0))
        return refuse(r, ev, used, 400, "exactly one Host header is required");
    if (r->n_te > 0) {
        if (r->n_cl > 0)
            return refuse(r, ev, used, 400, "both Transfer-Encoding and Content-Length");
        if (r->n_te != 1 || !r->te_ok)
            return refuse(r, ev, used, 400, "Transfer-Encoding must be exactly chunked");
        if (!v11)
            return refuse(r, ev, used, 400, "Transfer-Encoding in an HTTP/1.0 request");
    }
    if (r->n_cl > 1)
        return refuse(r, ev, used, 400, "several Content-Length headers");
    switch (r->mname) {
    case M_GET:     h->method = JRPC_HTTP_M_GET; break;
    case M_HEAD:    h->method = JRPC_HTTP_M_HEAD; break;
    case M_POST:    h->method = JRPC_HTTP_M_POST; break;
    case M_OPTIONS: h->method = JRPC_HTTP_M_OPTIONS; break;
    case M_CONNECT: h->method = JRPC_HTTP_M_CONNECT; break;
    case M_DELETE:  h->method = JRPC_HTTP_M_DELETE; break;
    default:        h->method = JRPC_HTTP_M_OTHER; break;
    }
    h->version_minor = r->minor;
    h->chunked = r->n_te > 0;
    h->has_length = r->cl_seen;
    h->conn_upgrade = (r->conn & CONN_UPGRADE) != 0;
    find_path(h);
    /* HTTP/1.1 stays open unless told to close, 1.0 closes unless told to
     * stay; what follows a CONNECT is a tunnel, never another request. */
    h->keep_alive = (v11 ? !(r->conn & CONN_CLOSE) : (r->conn & CONN_KEEP) != 0) &&
                    h->method != JRPC_HTTP_M_CONNECT;
    return body_framing(r, ev, used);
}

/* How the body of the head in r->head comes: the last step of head_done,
 * and all of what the same head read again (same_head) changes. */
static size_t body_framing(jrpc_http_reader_t *r, jrpc_http_event_t *ev, size_t used)
{
    jrpc_http_head_t *h = &r->head;
    h->content_length = h->has_length ? r->cl_val : 0;
    if (h->method == JRPC_HTTP_M_CONNECT)
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
    if (r->body == B_CHUNKED) {
        r->st = C_SIZE0;
        r->frame_bytes = 0;
        r->cl_val = 0;
    }
    r->phase = JRPC_HTTP_IN_BODY;
    set(ev, JRPC_HTTP_HEAD);
    return used;
}

/* The request has ended: what comes next. */
static void ended(jrpc_http_reader_t *r)
{
    r->phase = r->head.keep_alive ? JRPC_HTTP_IDLE : JRPC_HTTP_DONE;
    r->idle_cr = false; /* as after a line: empty lines may follow */
}

static size_t end(jrpc_http_reader_t *r, jrpc_http_event_t *ev, size_t used)
{
    ended(r);
    set(ev, JRPC_HTTP_END);
    return used;
}

/* ---- the same head again ------------------------------------------------------ */

/* A keep-alive client sends the same head request after request, its
 * Content-Length aside (bench/profile.sh http 1: ~900 Ir of ~7,500 a call
 * were reading it). The reader is a function of the bytes from begin()'s
 * state, and what it learnt from the last head (r's scan fields, r->head)
 * is left as it was until begin() (nothing after head_done changes it for
 * a body that is not chunked): a head equal to it byte for byte, the
 * Content-Length digits excepted, is that head with another length. */

/* Keeps the head just read, buf[0, k), to compare the next one with: when
 * it was read whole in this call (it starts at buf), fits, was answered
 * HEAD, keeps the connection (no other request follows one that does not:
 * CONNECT never does), and is not chunked (a chunked body's trailer
 * section reads header lines again). Otherwise none is kept; nor once
 * JRPC_HTTP_SAME_TRIES heads in a row were not the kept one (a client
 * whose heads differ, by a traceparent say, would pay the compare and the
 * copy on every request: ~170 Ir). */
static void keep_same(jrpc_http_reader_t *r, const char *buf, size_t k, const jrpc_http_event_t *ev)
{
    r->same_len = 0;
    if (ev->kind != JRPC_HTTP_HEAD || r->head_bytes != k || k > JRPC_HTTP_SAME_MAX ||
        r->same_misses >= JRPC_HTTP_SAME_TRIES ||
        r->n_te != 0 || !r->head.keep_alive || (r->cl_seen && r->cl_at + r->cl_n >= k))
        return;
    memcpy(r->same, buf, k);
    r->same_len = (uint16_t)k;
    r->same_cl_at = r->cl_seen ? (uint16_t)r->cl_at : 0; /* (never 0: a method comes first) */
    r->same_cl_n = r->cl_seen ? r->cl_n : 0;
}

/* The length of the head at p[0, n) when it is the kept head (any run of
 * up to 19 digits in place of its Content-Length's: no overflow, which the
 * scan would refuse), within the head limit; then r holds what reading it
 * would have left (the length in cl_val, head_bytes) and the kept head has
 * its digits' count. 0 otherwise: the head is read as usual. */
static size_t same_head(jrpc_http_reader_t *r, const char *p, size_t n)
{
    size_t k = r->same_len, at = r->same_cl_at;
    if (at == 0) {
        if (n < k || memcmp(p, r->same, k) != 0 || k > r->lim.max_header_bytes)
            return 0;
        r->head_bytes = (uint32_t)k;
        r->body_seen = 0;
        return k;
    }
    size_t old = r->same_cl_n, rest = k - at - old, d = 0;
    if (n < at || memcmp(p, r->same, at) != 0)
        return 0;
    uint64_t v = 0;
    while (d < 20 && at + d < n && is_digit((unsigned char)p[at + d])) {
        v = v * 10 + (uint64_t)(p[at + d] - '0');
        d++;
    }
    size_t len = at + d + rest;
    if (d == 0 || d > 19 || len > n || len > r->lim.max_header_bytes ||
        memcmp(p + at + d, r->same + at + old, rest) != 0)
        return 0;
    if (d != old) { /* the same head with a longer or shorter length */
        if (len > JRPC_HTTP_SAME_MAX) {
            r->same_len = 0;
            return 0;
        }
        memmove(r->same + at + d, r->same + at + old, rest);
        r->same_len = (uint16_t)len;
        r->same_cl_n = (uint8_t)d;
    }
    r->cl_val = v;
    r->cl_n = (uint8_t)d;
    r->head_bytes = (uint32_t)len;
    r->body_seen = 0;
    return len;
}

/* ---- the phases ------------------------------------------------------------ */

static size_t idle(jrpc_http_reader_t *r, const char *buf, size_t len, jrpc_http_event_t *ev)
{
    /* Empty lines before a request line are skipped (RFC 9112 2.2), as
     * CRLFs: a bare CR or LF there is refused. */
    size_t i = 0;
    for (; i < len; i++) {
        if (buf[i] == '\r') {
            if (r->idle_cr)
                return refuse(r, ev, i, 400, WHY_HEAD);
            r->idle_cr = true;
        } else if (buf[i] == '\n') {
            if (!r->idle_cr)
                return refuse(r, ev, i, 400, WHY_HEAD);
            r->idle_cr = false;
        } else {
            break;
        }
    }
    if (i < len) {
        if (r->idle_cr)
            return refuse(r, ev, i, 400, WHY_HEAD);
        if (r->same_len) {
            size_t k = same_head(r, buf + i, len - i);
            if (k > 0) { /* head_done's checks and fields hold: only the length differs */
                r->same_misses = 0;
                r->again = true;
                return body_framing(r, ev, i + k);
            }
            r->same_misses++; /* (stops at JRPC_HTTP_SAME_TRIES: none kept from then) */
        }
        begin(r);
    }
    set(ev, JRPC_HTTP_NEED_MORE);
    return i;
}

static size_t in_head(jrpc_http_reader_t *r, const char *buf, size_t len, jrpc_http_event_t *ev)
{
    /* No more bytes than the limit leaves: the byte past it is a 431
     * unless it is refused itself. */
    uint32_t room = r->lim.max_header_bytes + 1 - r->head_bytes;
    size_t n = len < room ? len : room;
    int res;
    const char *why = NULL;
    size_t k = head_scan(r, buf, buf + n, &res, &why);
    r->head_bytes += (uint32_t)k;
    if (res == BAD)
        return refuse(r, ev, k, 400, why);
    if (res == DONE && r->n_te > 0 && r->cl_seen) /* a fault of the last byte */
        return refuse(r, ev, k, 400, WHY_CL_AGAIN);
    if (r->head_bytes > r->lim.max_header_bytes)
        return refuse(r, ev, k, 431, "request headers too large");
    if (res == DONE) {
        size_t used = head_done(r, ev, k);
        keep_same(r, buf, k, ev);
        return used;
    }
    set(ev, JRPC_HTTP_NEED_MORE);
    return k;
}

/* One byte of a chunk-size line or of the CRLF after chunk data. Returns
 * MORE, DONE (a chunk-size line is complete: its size in r->cl_val) or BAD. */
static int frame_byte(jrpc_http_reader_t *r, unsigned char ch, const char **why)
{
    int v;
    switch (r->st) {
    case C_SIZE0:
    case C_SIZE:
        if ((v = unhex(ch)) >= 0) {
            if (r->st == C_SIZE && (UINT64_MAX - 16) / 16 < r->cl_val) {
                *why = WHY_CL; /* (http-parser's words for an overflowing size) */
                return BAD;
            }
            r->cl_val = r->cl_val * 16 + (uint64_t)v;
            r->st = C_SIZE;
        } else if (r->st == C_SIZE && ch == '\r') {
            r->st = C_SIZE_LF;
        } else if (r->st == C_SIZE && (ch == ';' || ch == ' ')) {
            r->st = C_EXT; /* extensions are read by nobody */
        } else {
            *why = WHY_CHUNK;
            return BAD;
        }
        return MORE;
    case C_EXT:
        if (ch == '\r')
            r->st = C_SIZE_LF;
        else if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
            goto bad;
        return MORE;
    case C_SIZE_LF:
        if (ch != '\n')
            goto bad;
        return DONE;
    case C_DATA_CR:
        if (ch != '\r')
            goto bad;
        r->st = C_DATA_LF;
        return MORE;
    case C_DATA_LF:
        if (ch != '\n')
            goto bad;
        r->st = C_SIZE0;
        r->cl_val = 0;
        return MORE;
    default:
        assert(0 && "not a framing state");
        goto bad;
    }
bad:
    *why = WHY_FRAMING;
    return BAD;
}

static size_t in_chunked(jrpc_http_reader_t *r, const char *buf, size_t len,
                         jrpc_http_event_t *ev)
{
    const uint32_t max_frame = r->lim.max_header_bytes;
    size_t done = 0;
    for (;;) {
        if (r->st == C_DATA) {
            if (done == len) {
                set(ev, JRPC_HTTP_NEED_MORE);
                return done;
            }
            size_t n = len - done < r->body_left ? len - done : (size_t)r->body_left;
            r->body_left -= n;
            r->body_seen += n;
            if (r->body_left == 0)
                r->st = C_DATA_CR;
            *ev = (jrpc_http_event_t){ .kind = JRPC_HTTP_BODY, .data = buf + done, .len = n };
            return done + n;
        }
        if (done == len) {
            set(ev, JRPC_HTTP_NEED_MORE);
            return done;
        }
        /* No more framing bytes than the limit leaves. */
        size_t room = max_frame + 1 - r->frame_bytes;
        size_t n = len - done < room ? len - done : room;
        const char *q = buf + done, *why = NULL;
        int res = MORE;
        size_t k;
        if (r->trailer) {
            k = head_scan(r, q, q + n, &res, &why);
        } else {
            for (k = 0; k < n && res == MORE; k++)
                res = frame_byte(r, (unsigned char)q[k], &why);
            if (res == BAD)
                k--; /* the byte refused is not consumed */
        }
        r->frame_bytes += (uint32_t)k;
        done += k;
        if (res == BAD)
            return refuse(r, ev, done, 400, why);
        if (r->frame_bytes > max_frame)
            return refuse(r, ev, done, 431,
                          res == MORE ? "chunk-size line or trailer section too large"
                                      : r->trailer ? "trailer section too large"
                                                   : "chunk-size line too large");
        if (res == DONE && r->trailer)
            return end(r, ev, done);
        if (res == DONE) { /* a chunk-size line */
            uint64_t size = r->cl_val, max = r->lim.max_body;
            if (size > max || r->body_seen + size > max)
                return refuse(r, ev, done, 413, too_large(r));
            r->frame_bytes = 0; /* the next line (or the trailer section) counts afresh */
            r->body_left = size;
            if (size > 0) {
                r->st = C_DATA;
            } else {
                r->st = S_LINE;
                r->trailer = true;
                r->cl_empty = false;
            }
        }
    }
}

static size_t in_body(jrpc_http_reader_t *r, const char *buf, size_t len, jrpc_http_event_t *ev)
{
    switch (r->body) {
    case B_CHUNKED:
        return in_chunked(r, buf, len, ev);
    case B_TOO_LARGE:
        return refuse(r, ev, 0, 413, too_large(r));
    case B_IDENTITY:
        if (r->body_left > 0) {
            if (len == 0) {
                set(ev, JRPC_HTTP_NEED_MORE);
                return 0;
            }
            size_t n = len < r->body_left ? len : (size_t)r->body_left;
            r->body_left -= n;
            r->body_seen += n;
            *ev = (jrpc_http_event_t){ .kind = JRPC_HTTP_BODY, .data = buf, .len = n };
            if (r->body_left == 0 && r->fused_end) {
                ended(r);
                ev->end = true;
            }
            return n;
        }
        return end(r, ev, 0);
    default:
        return end(r, ev, 0);
    }
}

/* ---- the API --------------------------------------------------------------- */

void jrpc_http_reader_init(jrpc_http_reader_t *r, const jrpc_http_limits_t *lim)
{
    memset(r, 0, sizeof *r);
    r->lim = *lim;
    if (r->lim.max_header_bytes < 1)
        r->lim.max_header_bytes = 1;
    if (r->lim.max_header_bytes > 1u << 30) /* room arithmetic stays far from overflow */
        r->lim.max_header_bytes = 1u << 30;
    r->phase = JRPC_HTTP_IDLE;
}

size_t jrpc_http_reader_feed(jrpc_http_reader_t *r, const char *buf, size_t len,
                             jrpc_http_event_t *ev)
{
    size_t done = 0;
    for (;;) {
        size_t k;
        switch (r->phase) {
        case JRPC_HTTP_IDLE:
            k = idle(r, buf + done, len - done, ev);
            done += k;
            if (r->phase == JRPC_HTTP_IN_HEAD)
                continue; /* a request line starts here */
            return done;
        case JRPC_HTTP_IN_HEAD:
            return done + in_head(r, buf + done, len - done, ev);
        case JRPC_HTTP_IN_BODY:
            return done + in_body(r, buf + done, len - done, ev);
        default:
            if (r->final_status != 0)
                *ev = (jrpc_http_event_t){ .kind = JRPC_HTTP_REFUSE, .status = r->final_status,
                                           .close = true, .reason = r->final_reason };
            else
                set(ev, JRPC_HTTP_CLOSED);
            return done;
        }
    }
}

int jrpc_http_reader_takeover(jrpc_http_reader_t *r)
{
    /* At HEAD: the phase is IN_BODY and nothing of a body has been read. */
    if (r->phase != JRPC_HTTP_IN_BODY || r->body != B_NONE || r->body_seen != 0 ||
        r->head.chunked || r->head.content_length != 0)
        return -1;
    r->phase = JRPC_HTTP_DONE;
    r->final_status = 0; /* CLOSED from now on */
    return 0;
}

void jrpc_http_reader_fuse_end(jrpc_http_reader_t *r)
{
    r->fused_end = true;
}

jrpc_http_phase_t jrpc_http_reader_phase(const jrpc_http_reader_t *r)
{
    return (jrpc_http_phase_t)r->phase;
}

bool jrpc_http_reader_again(const jrpc_http_reader_t *r)
{
    return r->again;
}

const jrpc_http_head_t *jrpc_http_reader_head(const jrpc_http_reader_t *r)
{
    return &r->head;
}

const char *jrpc_http_head_method_name(const jrpc_http_reader_t *r)
{
    return methods[r->mname < M_COUNT ? r->mname : 0];
}
