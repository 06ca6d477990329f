/* jrpc_json — strict JSON reading (validate, transcode to msgpack, find
 * members). See jrpc_json.h for the contract and jrpc_json_internal.h for
 * the pieces jrpc_batch reuses; the writer (msgpack to JSON) is
 * jrpc_json_write.c.
 *
 * The reader is a recursive-descent parser over (p, end) whose recursion is
 * bounded by max_depth: a container opening deeper than that is refused
 * before anything inside it is read. Reaching end inside a value that could
 * still become valid is EINCOMPLETE; anything no continuation could fix is
 * EMALFORMED. */
#include "jrpc_json.h"
#include "jrpc_json_internal.h"
#include "jrpc_be.h"
#include "jrpc_mpack.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- byte classes ---- */

enum {
    S_OK = 0,  /* printable ASCII: copied as is */
    S_QUOTE,   /* '"' ends the string */
    S_BSL,     /* '\\' starts an escape */
    S_CTRL,    /* < 0x20: must have been escaped */
    S_U2,      /* C2..DF: lead of a 2-byte sequence */
    S_E0,      /* E0: 3 bytes, second A0..BF (no overlongs) */
    S_U3,      /* E1..EC, EE..EF: 3 bytes */
    S_ED,      /* ED: 3 bytes, second 80..9F (no surrogates) */
    S_F0,      /* F0: 4 bytes, second 90..BF (no overlongs) */
    S_U4,      /* F1..F3: 4 bytes */
    S_F4,      /* F4: 4 bytes, second 80..8F (nothing above U+10FFFF) */
    S_BAD,     /* 80..C1, F5..FF: never a lead byte */
};

static const uint8_t scls[256] = {
    [0x00 ... 0x1f] = S_CTRL,
    ['"'] = S_QUOTE,
    ['\\'] = S_BSL,
    [0x80 ... 0xc1] = S_BAD,
    [0xc2 ... 0xdf] = S_U2,
    [0xe0] = S_E0,
    [0xe1 ... 0xec] = S_U3,
    [0xed] = S_ED,
    [0xee ... 0xef] = S_U3,
    [0xf0] = S_F0,
    [0xf1 ... 0xf3] = S_U4,
    [0xf4] = S_F4,
    [0xf5 ... 0xff] = S_BAD,
};

/* Checks the UTF-8 sequence at p. Returns its length, EINCOMPLETE when end
 * cuts a sequence that is valid so far, or EMALFORMED. */
static int utf8_seq(const uint8_t *p, const uint8_t *end)
{
    uint8_t lo = 0x80, hi = 0xbf;
    int n;
    switch (scls[*p]) {
    case S_U2: n = 2; break;
    case S_E0: n = 3; lo = 0xa0; break;
    case S_U3: n = 3; break;
    case S_ED: n = 3; hi = 0x9f; break;
    case S_F0: n = 4; lo = 0x90; break;
    case S_U4: n = 4; break;
    case S_F4: n = 4; hi = 0x8f; break;
    default:   return JRPC_JSON_EMALFORMED;
    }
    for (int k = 1; k < n; k++) {
        if (p + k >= end)
            return JRPC_JSON_EINCOMPLETE;
        if (p[k] < lo || p[k] > hi)
            return JRPC_JSON_EMALFORMED;
        lo = 0x80;
        hi = 0xbf;
    }
    return n;
}

int jrpc_json_utf8_seq(const uint8_t *p, const uint8_t *end)
{
    return utf8_seq(p, end);
}

bool jrpc_json_utf8_valid(const char *p, size_t n)
{
    const uint8_t *u = (const uint8_t *)p, *end = u + n;
    while (u < end) {
        if (*u < 0x80) {
            u++;
            continue;
        }
        int r = utf8_seq(u, end);
        if (r < 0)
            return false;
        u += r;
    }
    return true;
}

static int hexval(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Checks the escape at p ('\\'). Returns the bytes it takes (a surrogate
 * pair takes both \u escapes), or a JRPC_JSON_E* code. */
static int scan_escape(const uint8_t *p, const uint8_t *end)
{
    if (end - p < 2)
        return JRPC_JSON_EINCOMPLETE;
    switch (p[1]) {
    case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
        return 2;
    case 'u':
        break;
    default:
        return JRPC_JSON_EMALFORMED;
    }
    int cp = 0;
    for (int k = 2; k < 6; k++) {
        if (p + k >= end)
            return JRPC_JSON_EINCOMPLETE;
        int h = hexval(p[k]);
        if (h < 0)
            return JRPC_JSON_EMALFORMED;
        cp = cp * 16 + h;
    }
    if (cp < 0xd800 || cp > 0xdfff)
        return 6;
    if (cp >= 0xdc00)
        return JRPC_JSON_EMALFORMED;  /* a low surrogate alone */
    /* A high surrogate: the next 6 bytes must be \uDC00..\uDFFF. */
    static const char want[2] = { '\\', 'u' };
    for (int k = 6; k < 12; k++) {
        if (p + k >= end)
            return JRPC_JSON_EINCOMPLETE;
        if (k < 8) {
            if (p[k] != want[k - 6])
                return JRPC_JSON_EMALFORMED;
            continue;
        }
        int h = hexval(p[k]);
        if (h < 0 || (k == 8 && h != 0xd) || (k == 9 && h < 0xc))
            return JRPC_JSON_EMALFORMED;
    }
    return 12;
}

/* Past the fast path of jrpc_jp_string (jrpc_json_internal.h): p is at a
 * byte that is not plain, or fewer than eight bytes remain. */
int jrpc_jp_string_rest(jrpc_jp_t *j, const char *s0, const char *p0, jrpc_span_t *raw, bool *plain)
{
    const uint8_t *s = (const uint8_t *)s0, *p = (const uint8_t *)p0;
    const uint8_t *end = (const uint8_t *)j->end;
    bool esc = false;
    for (;;) {
        while (p < end && scls[*p] == S_OK)
            p++;
        if (p == end)
            return JRPC_JSON_EINCOMPLETE;
        switch (scls[*p]) {
        case S_QUOTE:
            raw->p = (const char *)s;
            raw->n = (size_t)(p - s);
            *plain = !esc;
            j->p = (const char *)p + 1;
            return 0;
        case S_BSL: {
            esc = true;
            int r = scan_escape(p, end);
            if (r < 0)
                return r;
            p += r;
            break;
        }
        case S_CTRL:
            return JRPC_JSON_EMALFORMED;
        default: {
            int r = utf8_seq(p, end);
            if (r < 0)
                return r;
            p += r;
            break;
        }
        }
    }
}

static unsigned hex4(const char *p)
{
    unsigned v = 0;
    for (int k = 0; k < 4; k++)
        v = v * 16 + (unsigned)hexval((uint8_t)p[k]);
    return v;
}

static char *utf8_put(char *w, unsigned cp)
{
    unsigned char *u = (unsigned char *)w;
    if (cp < 0x80) {
        *u++ = (unsigned char)cp;
    } else if (cp < 0x800) {
        *u++ = (unsigned char)(0xc0 | (cp >> 6));
        *u++ = (unsigned char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        *u++ = (unsigned char)(0xe0 | (cp >> 12));
        *u++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        *u++ = (unsigned char)(0x80 | (cp & 0x3f));
    } else {
        *u++ = (unsigned char)(0xf0 | (cp >> 18));
        *u++ = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
        *u++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        *u++ = (unsigned char)(0x80 | (cp & 0x3f));
    }
    return (char *)u;
}

size_t jrpc_json_unescape(const char *raw, size_t n, char *dst)
{
    const char *p = raw, *end = raw + n;
    char *w = dst;
    while (p < end) {
        const char *bs = memchr(p, '\\', (size_t)(end - p));
        if (bs == NULL) {
            memcpy(w, p, (size_t)(end - p));
            w += end - p;
            break;
        }
        memcpy(w, p, (size_t)(bs - p));
        w += bs - p;
        p = bs;
        switch (p[1]) {
        case 'b': *w++ = '\b'; p += 2; break;
        case 'f': *w++ = '\f'; p += 2; break;
        case 'n': *w++ = '\n'; p += 2; break;
        case 'r': *w++ = '\r'; p += 2; break;
        case 't': *w++ = '\t'; p += 2; break;
        case 'u': {
            unsigned cp = hex4(p + 2);
            p += 6;
            if (cp >= 0xd800 && cp <= 0xdbff) {  /* validated: a low one follows */
                cp = 0x10000 + ((cp - 0xd800) << 10) + (hex4(p + 2) - 0xdc00);
                p += 6;
            }
            w = utf8_put(w, cp);
            break;
        }
        default:  /* '"', '\\', '/' */
            *w++ = p[1];
            p += 2;
            break;
        }
    }
    return (size_t)(w - dst);
}

/* ---- msgpack emission (room already guaranteed by the bound) ---- */


/* mag is the magnitude of a negative integer, 1 .. 2^63. */
static unsigned char *mp_neg(unsigned char *u, uint64_t mag)
{
    if (mag <= 32) {
        *u++ = (unsigned char)(0x100 - mag);
    } else if (mag <= 128) {
        *u++ = 0xd0;
        *u++ = (unsigned char)(0x100 - mag);
    } else if (mag <= 32768) {
        *u++ = 0xd1;
        u = jrpc_be_store16(u, (uint16_t)(0x10000 - mag));
    } else if (mag <= 0x80000000u) {
        *u++ = 0xd2;
        u = jrpc_be_store32(u, (uint32_t)(0x100000000u - mag));
    } else {
        *u++ = 0xd3;
        u = jrpc_be_store64(u, (uint64_t)0 - mag);
    }
    return u;
}

/* Closes a container whose 5-byte header was reserved at hdr: a fix header
 * when small (moving a little content back), otherwise array32/map32. */
static void finish_container(jrpc_jp_t *j, unsigned char *hdr, uint32_t count,
                             unsigned char fix, unsigned char big)
{
    unsigned char *content = hdr + 5;
    size_t len = (size_t)((unsigned char *)j->w - content);
    if (count < 16 && len <= 256) {
        hdr[0] = (unsigned char)(fix | count);
        jrpc_move(hdr + 1, content, len);
        j->w -= 4;
    } else {
        hdr[0] = big;
        jrpc_be_store32(hdr + 1, count);
    }
}

/* ---- the parser ---- */

static int value_string(jrpc_jp_t *j)
{
    jrpc_span_t raw;
    bool plain;
    int rc = jrpc_jp_string(j, &raw, &plain);
    if (rc < 0 || j->w == NULL)
        return rc;
    /* The header is sized from the raw length, an upper bound of the
     * unescaped one, so the bytes never move. */
    unsigned char *u = (unsigned char *)j->w;
    size_t h = raw.n < 32 ? 1 : raw.n < 256 ? 2 : raw.n < 65536 ? 3 : 5;
    size_t n;
    if (plain) {
        jrpc_move(u + h, raw.p, raw.n);
        n = raw.n;
    } else {
        n = jrpc_json_unescape(raw.p, raw.n, (char *)u + h);
    }
    switch (h) {
    case 1: u[0] = (unsigned char)(0xa0 | n); break;
    case 2: u[0] = 0xd9; u[1] = (unsigned char)n; break;
    case 3: u[0] = 0xda; jrpc_be_store16(u + 1, (uint16_t)n); break;
    default: u[0] = 0xdb; jrpc_be_store32(u + 1, (uint32_t)n); break;
    }
    j->w = (char *)u + h + n;
    return 0;
}

/* Reads the number s[0..n) as a double: 0, JRPC_JSON_ERANGE or -ENOMEM. */
static int read_double(const char *s, size_t n, double *d)
{
    char local[64], *buf = local;
    if (n >= sizeof local && (buf = malloc(n + 1)) == NULL)  /* rare: huge numbers */
        return -ENOMEM;
    memcpy(buf, s, n);
    buf[n] = '\0';
    errno = 0;
    *d = strtod(buf, NULL);
    int rc = 0;
    /* Overflow is refused; underflow rounds to a denormal or zero. */
    if (errno == ERANGE && isinf(*d))
        rc = JRPC_JSON_ERANGE;
    if (buf != local)
        free(buf);
    return rc;
}

static int double_check(const char *s, size_t n)
{
    double d;
    return read_double(s, n, &d);
}

static int emit_double(jrpc_jp_t *j, const char *s, size_t n)
{
    double d;
    int rc = read_double(s, n, &d);
    if (rc < 0)
        return rc;
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    unsigned char *u = (unsigned char *)j->w;
    *u++ = 0xcb;
    j->w = (char *)jrpc_be_store64(u, bits);
    return 0;
}

static int number(jrpc_jp_t *j)
{
    const char *s = j->p, *p = s, *end = j->end;
    bool neg = false, isint = true, ovf = false, has_exp = false;
    uint64_t v = 0;
    if (*p == '-') {
        neg = true;
        if (++p == end)
            return JRPC_JSON_EINCOMPLETE;
    }
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        do {
            if (__builtin_mul_overflow(v, 10, &v) ||
                __builtin_add_overflow(v, (uint64_t)(*p - '0'), &v))
                ovf = true;
            p++;
        } while (p < end && *p >= '0' && *p <= '9');
    } else {
        return JRPC_JSON_EMALFORMED;
    }
    if (p < end && *p == '.') {
        isint = false;
        if (++p == end)
            return JRPC_JSON_EINCOMPLETE;
        if (*p < '0' || *p > '9')
            return JRPC_JSON_EMALFORMED;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        isint = false;
        has_exp = true;
        if (++p == end)
            return JRPC_JSON_EINCOMPLETE;
        if ((*p == '+' || *p == '-') && ++p == end)
            return JRPC_JSON_EINCOMPLETE;
        if (*p < '0' || *p > '9')
            return JRPC_JSON_EMALFORMED;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    }
    j->p = p;
    if (j->w == NULL) {
        /* Only an exponent, or more digits than a double's range, can
         * overflow (DBL_MAX is 309 digits): the common number costs nothing. */
        if (j->range && (has_exp || p - s > 300))
            return double_check(s, (size_t)(p - s));
        return 0;
    }
    if (isint && !ovf && (!neg || v <= (uint64_t)1 << 63)) {
        unsigned char *u = (unsigned char *)j->w;
        j->w = (char *)(neg && v ? mp_neg(u, v) : jrpc_mpack_put_uint(u, v));  /* -0 is int 0 */
        return 0;
    }
    return emit_double(j, s, (size_t)(p - s));
}

static int literal(jrpc_jp_t *j, const char *word, size_t n, unsigned char mp)
{
    size_t avail = (size_t)(j->end - j->p);
    size_t k = avail < n ? avail : n;
    if (memcmp(j->p, word, k) != 0)
        return JRPC_JSON_EMALFORMED;
    if (k < n)
        return JRPC_JSON_EINCOMPLETE;
    j->p += n;
    if (j->w)
        *(unsigned char *)j->w++ = mp;
    return 0;
}

/* Enters an array or object at j->p: checks the depth, reserves room for a
 * 5-byte msgpack header (patched by finish_container) when transcoding, and
 * skips the opening byte and the whitespace after it. Returns 0 or a
 * JRPC_JSON_E* code. */
static int container_open(jrpc_jp_t *j, unsigned depth, unsigned char **hdr)
{
    if (depth > j->max_depth)
        return JRPC_JSON_EDEPTH;
    *hdr = (unsigned char *)j->w;
    if (*hdr)
        j->w += 5;
    j->p++;
    jrpc_jp_skip_ws(j);
    return j->p == j->end ? JRPC_JSON_EINCOMPLETE : 0;
}

/* One value inside a container: numbers and strings, most of them, are
 * read here without the frame and switch of jrpc_jp_value. */
static inline int element(jrpc_jp_t *j, unsigned depth)
{
    if (j->p == j->end)
        return JRPC_JSON_EINCOMPLETE;
    unsigned char c = (unsigned char)*j->p;
    if ((unsigned)(c - '1') <= 8u) {
        /* The usual number, here: at most 18 digits (no overflow), no
         * leading zero, then neither a fraction nor an exponent nor the
         * end of the text. Anything else is number()'s. */
        const char *p = j->p, *end = j->end;
        const char *lim = end - p > 18 ? p + 18 : end;
        uint64_t v = 0;
        while (p < lim && (unsigned char)(*p - '0') <= 9u)
            v = v * 10 + (uint64_t)(*p++ - '0');
        if (p == lim || *p == '.' || *p == 'e' || *p == 'E')
            return number(j);
        j->p = p;
        if (j->w)
            j->w = (char *)jrpc_mpack_put_uint((unsigned char *)j->w, v);
        return 0;
    }
    if (c == '0' || c == '-')
        return number(j);
    if (c == '"')
        return value_string(j);
    return jrpc_jp_value(j, depth);
}

static int parse_array(jrpc_jp_t *j, unsigned depth)
{
    unsigned char *hdr;
    uint32_t count = 0;
    int rc = container_open(j, depth, &hdr);
    if (rc < 0)
        return rc;
    if (*j->p != ']') {
        for (;;) {
            if ((rc = element(j, depth)) < 0)
                return rc;
            count++;
            if ((rc = jrpc_jp_next(j, ']')) != 0) {
                if (rc < 0)
                    return rc;
                break;
            }
        }
    }
    j->p++;
    if (hdr)
        finish_container(j, hdr, count, 0x90, 0xdd);
    return 0;
}

static int parse_object(jrpc_jp_t *j, unsigned depth)
{
    unsigned char *hdr;
    uint32_t count = 0;
    int rc = container_open(j, depth, &hdr);
    if (rc < 0)
        return rc;
    if (*j->p != '}') {
        for (;;) {
            if (j->p == j->end)
                return JRPC_JSON_EINCOMPLETE;
            if (*j->p != '"')
                return JRPC_JSON_EMALFORMED;
            if ((rc = value_string(j)) < 0 || (rc = jrpc_jp_colon(j)) < 0)
                return rc;
            jrpc_jp_skip_ws(j);
            if ((rc = element(j, depth)) < 0)
                return rc;
            count++;
            if ((rc = jrpc_jp_next(j, '}')) != 0) {
                if (rc < 0)
                    return rc;
                break;
            }
        }
    }
    j->p++;
    if (hdr)
        finish_container(j, hdr, count, 0x80, 0xdf);
    return 0;
}

int jrpc_jp_container(jrpc_jp_t *j, unsigned depth)
{
    return *j->p == '[' ? parse_array(j, depth + 1) : parse_object(j, depth + 1);
}

int jrpc_jp_value(jrpc_jp_t *j, unsigned depth)
{
    if (j->p == j->end)
        return JRPC_JSON_EINCOMPLETE;
    switch (*j->p) {
    case '{': return parse_object(j, depth + 1);
    case '[': return parse_array(j, depth + 1);
    case '"': return value_string(j);
    case 't': return literal(j, "true", 4, 0xc3);
    case 'f': return literal(j, "false", 5, 0xc2);
    case 'n': return literal(j, "null", 4, 0xc0);
    case '-': case '0': case '1': case '2': case '3': case '4':
    case '5': case '6': case '7': case '8': case '9':
        return number(j);
    default:
        return JRPC_JSON_EMALFORMED;
    }
}

/* Parses the whole text: one value with optional whitespace around it. */
static int parse_text(jrpc_jp_t *j)
{
    jrpc_jp_skip_ws(j);
    int rc = jrpc_jp_value(j, 0);
    if (rc < 0)
        return rc;
    jrpc_jp_skip_ws(j);
    return j->p == j->end ? 0 : JRPC_JSON_EMALFORMED;
}

const char *jrpc_json_strerror(int rc)
{
    switch (rc) {
    case 0:                     return "success";
    case JRPC_JSON_EINCOMPLETE: return "truncated JSON text";
    case JRPC_JSON_EMALFORMED:  return "malformed JSON text";
    case JRPC_JSON_EDEPTH:      return "nesting too deep";
    case JRPC_JSON_ERANGE:      return "number out of range";
    case JRPC_JSON_EUNREPR:     return "value has no JSON form";
    case -ENOMEM:               return "out of memory";
    default:                    return "unknown error";
    }
}

int jrpc_json_validate(const char *p, size_t n, unsigned max_depth)
{
    jrpc_jp_t j = { .p = p, .end = p + n, .w = NULL, .max_depth = max_depth };
    return parse_text(&j);
}

int jrpc_json_check(const char *p, size_t n, unsigned max_depth, jrpc_span_t *value)
{
    jrpc_jp_t j = { .p = p, .end = p + n, .w = NULL, .max_depth = max_depth, .range = true };
    jrpc_jp_skip_ws(&j);
    const char *start = j.p;
    int rc = jrpc_jp_value(&j, 0);
    if (rc < 0)
        return rc;
    const char *stop = j.p;
    jrpc_jp_skip_ws(&j);
    if (j.p != j.end)
        return JRPC_JSON_EMALFORMED;
    *value = (jrpc_span_t){ start, (size_t)(stop - start) };
    return 0;
}

char *jrpc_json_msgpack_at(char *w, const char *p, size_t n)
{
    jrpc_jp_t j = { .p = p, .end = p + n, .w = w, .max_depth = UINT_MAX - 1 };
    return parse_text(&j) < 0 ? NULL : j.w;
}

int jrpc_json_to_msgpack(const char *p, size_t n, unsigned max_depth, jrpc_buf_t *out)
{
    int rc = jrpc_buf_reserve(out, JRPC_JSON_MSGPACK_BOUND(n) + 1);
    if (rc < 0)
        return rc;
    jrpc_jp_t j = { .p = p, .end = p + n, .w = out->p + out->len, .max_depth = max_depth };
    if ((rc = parse_text(&j)) < 0)
        return rc;  /* out->len was never moved */
    out->len = (size_t)(j.w - out->p);
    return 0;
}

/* Walks the members of the top-level object of p[0..n), validated first
 * (max_depth): visit(arg, name, value) for each, the name unescaped (a
 * name escaped over 256 bytes is skipped), until it returns true. Returns
 * 1 when a visit stopped the walk, 0 at the end, -ENOENT when the top
 * level is not an object, or a JRPC_JSON_E* code. */
static int walk_members(const char *p, size_t n, unsigned max_depth,
                        bool (*visit)(void *arg, jrpc_span_t name, jrpc_span_t value), void *arg)
{
    int rc = jrpc_json_validate(p, n, max_depth);
    if (rc < 0)
        return rc;
    jrpc_jp_t j = { .p = p, .end = p + n, .w = NULL, .max_depth = max_depth };
    jrpc_jp_skip_ws(&j);
    if (*j.p != '{')
        return -ENOENT;
    j.p++;
    /* The text is valid, so the walk below needs no end checks. */
    for (;;) {
        jrpc_jp_skip_ws(&j);
        if (*j.p == '}')
            return 0;
        jrpc_span_t key;
        bool plain;
        char buf[256];
        jrpc_jp_string(&j, &key, &plain);
        bool named = plain || key.n <= sizeof buf;
        if (!plain && named)
            key = (jrpc_span_t){ buf, jrpc_json_unescape(key.p, key.n, buf) };
        jrpc_jp_skip_ws(&j);
        j.p++;  /* ':' */
        jrpc_jp_skip_ws(&j);
        const char *start = j.p;
        jrpc_jp_value(&j, 1);
        if (named && visit(arg, key, (jrpc_span_t){ start, (size_t)(j.p - start) }))
            return 1;
        jrpc_jp_skip_ws(&j);
        j.p++;  /* ',' or '}' (then the next key or the end) */
        if (j.p[-1] == '}')
            return 0;
    }
}

typedef struct member_find {
    const char  *name;
    size_t       name_n;
    jrpc_span_t *value;
} member_find_t;

static bool member_is(void *arg, jrpc_span_t name, jrpc_span_t value)
{
    member_find_t *f = arg;
    if (name.n != f->name_n || memcmp(name.p, f->name, name.n) != 0)
        return false;
    *f->value = value;
    return true;
}

int jrpc_json_member(const char *p, size_t n, const char *name, jrpc_span_t *value)
{
    member_find_t f = { name, strlen(name), value };
    int rc = walk_members(p, n, JRPC_JSON_MAX_DEPTH, member_is, &f);
    return rc == 1 ? 0 : rc == 0 ? -ENOENT : rc;
}

typedef struct member_each {
    jrpc_json_member_fn fn;
    void               *arg;
} member_each_t;

static bool member_visit(void *arg, jrpc_span_t name, jrpc_span_t value)
{
    member_each_t *e = arg;
    e->fn(e->arg, name, value);
    return false;
}

int jrpc_json_each_member(const char *p, size_t n, unsigned max_depth, jrpc_json_member_fn fn,
                          void *arg)
{
    member_each_t e = { fn, arg };
    return walk_members(p, n, max_depth, member_visit, &e);
}
