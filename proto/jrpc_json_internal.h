/* jrpc_json_internal — the parser and writer pieces jrpc_batch builds on.
 *
 * Not part of the public API: only jrpc_json.c and jrpc_batch.c (and their
 * tests) include this. Everything here works on raw pointers into memory
 * whose size the caller has already bounded, so nothing reallocates mid-way. */
#ifndef JRPC_JSON_INTERNAL_H
#define JRPC_JSON_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <msgpack.h>
#include "jrpc_buf.h"
#include "jrpc_json.h"


/* Parser state: one pass over p[0..end), restartable, not resumable. */
typedef struct jrpc_jp {
    const char *p;          /* next byte to read */
    const char *end;        /* one past the last byte */
    char       *w;          /* msgpack output cursor; NULL: validate only */
    unsigned    max_depth;  /* containers allowed to nest this deep */
    bool        range;      /* validating (w NULL): refuse numbers that overflow a
                               double too, as transcoding does (JRPC_JSON_ERANGE) */
} jrpc_jp_t;

static inline void jrpc_jp_skip_ws(jrpc_jp_t *j)
{
    const char *p = j->p, *end = j->end;
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    j->p = p;
}

/* After an object's key: skips whitespace and passes the ':' (returns 0),
 * else JRPC_JSON_EINCOMPLETE or JRPC_JSON_EMALFORMED. */
static inline int jrpc_jp_colon(jrpc_jp_t *j)
{
    jrpc_jp_skip_ws(j);
    if (j->p == j->end)
        return JRPC_JSON_EINCOMPLETE;
    if (*j->p != ':')
        return JRPC_JSON_EMALFORMED;
    j->p++;
    return 0;
}

/* After an element of a container: skips whitespace, then either stops at
 * the closing byte (returns 1, the byte not consumed) or passes a ',' and
 * the whitespace after it (returns 0); otherwise JRPC_JSON_EINCOMPLETE or
 * JRPC_JSON_EMALFORMED. */
static inline int jrpc_jp_next(jrpc_jp_t *j, char close)
{
    if (j->end - j->p >= 2) {   /* compact text: no whitespace on either side */
        char c = j->p[0];
        if (c == close)
            return 1;
        if (c == ',' && (unsigned char)j->p[1] > ' ') {
            j->p++;
            return 0;
        }
    }
    jrpc_jp_skip_ws(j);
    if (j->p == j->end)
        return JRPC_JSON_EINCOMPLETE;
    if (*j->p == close)
        return 1;
    if (*j->p != ',')
        return JRPC_JSON_EMALFORMED;
    j->p++;
    jrpc_jp_skip_ws(j);
    return 0;
}

/* Parses one value at j->p (no leading whitespace), depth being the number of
 * containers already open around it; transcodes it to j->w when j->w is set.
 * Returns 0 or a JRPC_JSON_E* code (ERANGE only when transcoding, or
 * validating with j->range). */
int jrpc_jp_value(jrpc_jp_t *j, unsigned depth);
/* The same for a value known to be an array or an object (j->p is '[' or
 * '{'): without the switch over every kind of value. */
int jrpc_jp_container(jrpc_jp_t *j, unsigned depth);

/* The bytes of w (8, loaded little-endian) that end a run of plain string
 * bytes — a control byte, '"', '\\' or any byte >= 0x80 — each as its top
 * bit: (x - 0x01..) & ~x & 0x80.. finds the zero bytes of x, and
 * (w - 0x20..) & ~w the bytes below 0x20; ~w's top bits are those of ~q and
 * ~b, so one mask serves them all, and OR-ing w adds the bytes >= 0x80. A
 * borrow can mark a byte above a true one, never below: the lowest set bit
 * is always true, and it is the only one used (so little-endian only: a
 * big-endian machine reads byte by byte). */
static inline uint64_t jrpc_jp_special8(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101u, high = 0x8080808080808080u;
    uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
    return ((w - ones * 0x20) | (q - ones) | (b - ones) | w) & high;
}

/* The rest of jrpc_jp_string: from p, where its fast path stopped. */
int jrpc_jp_string_rest(jrpc_jp_t *j, const char *s, const char *p, jrpc_span_t *raw, bool *plain);

/* Scans the string at j->p (which is '"'), validating UTF-8 and escapes.
 * Sets *raw to the bytes between the quotes and *plain to true when they hold
 * no escape (so raw is the value itself). Returns 0 or a JRPC_JSON_E* code.
 * Inline, eight bytes a step, for the common string: plain ASCII with eight
 * more bytes of body after it; anything else goes on in
 * jrpc_jp_string_rest() from where the fast path stopped. */
static inline int jrpc_jp_string(jrpc_jp_t *j, jrpc_span_t *raw, bool *plain)
{
    const char *s = j->p + 1, *p = s, *end = j->end;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (end - p >= 8) {
        uint64_t w, m;
        memcpy(&w, p, sizeof w);
        if ((m = jrpc_jp_special8(w)) != 0) {
            p += __builtin_ctzll(m) >> 3;
            if (*p != '"')
                break;
            raw->p = s;
            raw->n = (size_t)(p - s);
            *plain = true;
            j->p = p + 1;
            return 0;
        }
        p += 8;
    }
#endif
    return jrpc_jp_string_rest(j, s, p, raw, plain);
}

/* Unescapes the raw body of a string jrpc_jp_string() accepted into dst
 * (room for n bytes suffices). Returns the number of bytes written. */
size_t jrpc_json_unescape(const char *raw, size_t n, char *dst);

/* Checks the UTF-8 sequence at p (p < end) for jrpc_json_write.c's string
 * sizing: the reader's own check. Returns its length, JRPC_JSON_EINCOMPLETE
 * when end cuts a sequence that is valid so far, or JRPC_JSON_EMALFORMED. */
int jrpc_json_utf8_seq(const uint8_t *p, const uint8_t *end);

/* Sizing and writing of msgpack as JSON, in two passes so that the writer
 * never checks room: _size checks representability and sets *n to an upper
 * bound of the text's length; _put writes it (only after _size said 0) and
 * returns the new cursor. */
int   jrpc_json_msgpack_size(const msgpack_object *o, unsigned max_depth, size_t *n);
char *jrpc_json_msgpack_put(char *w, const msgpack_object *o);
/* The same two passes over the bytes p[0..n) of one msgpack value (read in
 * place: no tree), with the same verdicts, bound and text as the two above
 * for the tree jrpc_mpack_unpack() makes of those bytes. The bytes must be
 * one well-formed value (e.g. inside a frame jrpc_mpack_check() accepted);
 * others are never read past p + n and get an error (JRPC_JSON_EMALFORMED
 * when nothing else was found first). _put only after _size said 0. */
int   jrpc_json_raw_size(const char *p, size_t n, unsigned max_depth, size_t *out);
char *jrpc_json_raw_put(char *w, const char *p, size_t n);
int   jrpc_json_string_size(const char *s, size_t n, size_t *out);
char *jrpc_json_string_put(char *w, const char *s, size_t n);
char *jrpc_json_int_put(char *w, int64_t v);

#endif
