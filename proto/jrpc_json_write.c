/* jrpc_json_write — JSON written from msgpack: an object of msgpack-c
 * (jrpc_json_msgpack_size/_put), msgpack bytes in place (jrpc_json_raw_size
 * /_put), strings, integers and doubles; each sized first, then written
 * into room the caller guaranteed (or through a jrpc_buf_t: the
 * jrpc_json_write_* functions). Part of jrpc_json (one header,
 * jrpc_json.h; the reader is jrpc_json.c, whose UTF-8 check strings share:
 * jrpc_json_utf8_seq). */
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

/* Output length of an ASCII byte inside a JSON string; 0 for non-ASCII,
 * which is copied after UTF-8 validation. */
static const uint8_t ecls[256] = {
    [0x00 ... 0x07] = 6,
    ['\b'] = 2, ['\t'] = 2, ['\n'] = 2,
    [0x0b] = 6,
    ['\f'] = 2, ['\r'] = 2,
    [0x0e ... 0x1f] = 6,
    [0x20 ... 0x21] = 1,
    ['"'] = 2,
    [0x23 ... 0x5b] = 1,
    ['\\'] = 2,
    [0x5d ... 0x7f] = 1,
};

/* ---- msgpack → JSON ---- */

int jrpc_json_string_size(const char *s, size_t n, size_t *out)
{
    const uint8_t *p = (const uint8_t *)s, *end = n ? p + n : p;   /* NULL + 0 is UB */
    size_t extra = 2;
    while (p < end) {
        uint8_t c = ecls[*p];
        if (c == 1) {
            p++;
        } else if (c == 0) {
            int r = jrpc_json_utf8_seq(p, end);
            if (r < 0)
                return JRPC_JSON_EUNREPR;
            p += r;
        } else {
            extra += c - 1u;
            p++;
        }
    }
    *out = n + extra;
    return 0;
}

char *jrpc_json_string_put(char *w, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const uint8_t *p = (const uint8_t *)s, *end = n ? p + n : p, *run = p;
    *w++ = '"';
    for (; p < end; p++) {
        uint8_t c = *p;
        if (ecls[c] <= 1)
            continue;
        memcpy(w, run, (size_t)(p - run));
        w += p - run;
        run = p + 1;
        *w++ = '\\';
        switch (c) {
        case '"':  *w++ = '"'; break;
        case '\\': *w++ = '\\'; break;
        case '\b': *w++ = 'b'; break;
        case '\f': *w++ = 'f'; break;
        case '\n': *w++ = 'n'; break;
        case '\r': *w++ = 'r'; break;
        case '\t': *w++ = 't'; break;
        default:
            *w++ = 'u';
            *w++ = '0';
            *w++ = '0';
            *w++ = hex[c >> 4];
            *w++ = hex[c & 15];
            break;
        }
    }
    if (end > run)  /* s may be NULL when n == 0 */
        memcpy(w, run, (size_t)(end - run));
    w += end - run;
    *w++ = '"';
    return w;
}

/* The digits are counted first and written backwards in place: no copy (a
 * call to memcpy of a variable length cost more than the digits). */

char *jrpc_json_int_put(char *w, int64_t v)
{
    if (v < 0) {
        *w++ = '-';
        return jrpc_u64_put(w, (uint64_t)0 - (uint64_t)v);
    }
    return jrpc_u64_put(w, (uint64_t)v);
}

#define DOUBLE_MAX_TEXT 32  /* "-2.2250738585072014e-308" and then some */

/* Writes a finite double in the shortest form that reads back exactly.
 * %.15g is exact and shortest for every normal double that has a form of
 * at most 15 digits (DBL_DIG); denormals carry fewer digits, so try them all.
 * is_float: the value came from a float32; round-trip as a float. */
static char *double_put(char *w, double d, bool is_float)
{
    char buf[DOUBLE_MAX_TEXT];
    int n = 0;
    if (d == 0) {
        memcpy(w, signbit(d) ? "-0.0" : "0.0", 4);
        return w + (signbit(d) ? 4 : 3);
    }
    if (fabs(d) < 9007199254740992.0 && d == trunc(d)) {
        w = jrpc_json_int_put(w, (int64_t)d);
        memcpy(w, ".0", 2);
        return w + 2;
    }
    bool tiny = fabs(d) < (is_float ? FLT_MIN : DBL_MIN);
    int lo = tiny ? 1 : is_float ? 6 : 15;
    int hi = is_float ? 9 : 17;
    for (int prec = lo; prec <= hi; prec++) {
        n = snprintf(buf, sizeof buf, "%.*g", prec, d);
        if (prec == hi)
            break;
        if (is_float ? strtof(buf, NULL) == (float)d : strtod(buf, NULL) == d)
            break;
    }
    memcpy(w, buf, (size_t)n);
    w += n;
    if (strpbrk(buf, ".eE") == NULL) {
        memcpy(w, ".0", 2);
        w += 2;
    }
    return w;
}

/* Adds the JSON size bound of a scalar to *acc (0), refuses what has no
 * JSON form (JRPC_JSON_E*), or returns 1: not a scalar (an array, a map,
 * bin, ext). The tree's walker and the bytes' walker both use it. */
static int scalar_size(const msgpack_object *o, size_t *acc)
{
    size_t n;
    int rc;
    switch (o->type) {
    case MSGPACK_OBJECT_NIL:
        *acc += 4;
        return 0;
    case MSGPACK_OBJECT_BOOLEAN:
        *acc += 5;
        return 0;
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        *acc += 20;
        return 0;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        if (!isfinite(o->via.f64))
            return JRPC_JSON_EUNREPR;
        *acc += DOUBLE_MAX_TEXT;
        return 0;
    case MSGPACK_OBJECT_STR:
        if ((rc = jrpc_json_string_size(o->via.str.ptr, o->via.str.size, &n)) < 0)
            return rc;
        *acc += n;
        return 0;
    default:
        return 1;
    }
}

static int msize(const msgpack_object *o, unsigned depth, unsigned max_depth, size_t *acc)
{
    int rc = scalar_size(o, acc);
    if (rc <= 0)
        return rc;
    switch (o->type) {
    case MSGPACK_OBJECT_ARRAY:
        if (depth + 1 > max_depth)
            return JRPC_JSON_EDEPTH;
        *acc += 2 + (size_t)o->via.array.size;
        for (uint32_t i = 0; i < o->via.array.size; i++)
            if ((rc = msize(&o->via.array.ptr[i], depth + 1, max_depth, acc)) < 0)
                return rc;
        return 0;
    case MSGPACK_OBJECT_MAP:
        if (depth + 1 > max_depth)
            return JRPC_JSON_EDEPTH;
        *acc += 2 + 2 * (size_t)o->via.map.size;
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            const msgpack_object_kv *kv = &o->via.map.ptr[i];
            if (kv->key.type != MSGPACK_OBJECT_STR)
                return JRPC_JSON_EUNREPR;
            if ((rc = msize(&kv->key, depth + 1, max_depth, acc)) < 0 ||
                (rc = msize(&kv->val, depth + 1, max_depth, acc)) < 0)
                return rc;
        }
        return 0;
    default:  /* bin, ext */
        return JRPC_JSON_EUNREPR;
    }
}

int jrpc_json_msgpack_size(const msgpack_object *o, unsigned max_depth, size_t *n)
{
    *n = 0;
    return msize(o, 0, max_depth, n);
}

char *jrpc_json_msgpack_put(char *w, const msgpack_object *o)
{
    switch (o->type) {
    case MSGPACK_OBJECT_NIL:
        memcpy(w, "null", 4);
        return w + 4;
    case MSGPACK_OBJECT_BOOLEAN:
        if (o->via.boolean) {
            memcpy(w, "true", 4);
            return w + 4;
        }
        memcpy(w, "false", 5);
        return w + 5;
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        return jrpc_u64_put(w, o->via.u64);
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        return jrpc_json_int_put(w, o->via.i64);
    case MSGPACK_OBJECT_FLOAT32:
        return double_put(w, o->via.f64, true);
    case MSGPACK_OBJECT_FLOAT64:
        return double_put(w, o->via.f64, false);
    case MSGPACK_OBJECT_STR:
        return jrpc_json_string_put(w, o->via.str.ptr, o->via.str.size);
    case MSGPACK_OBJECT_ARRAY:
        *w++ = '[';
        for (uint32_t i = 0; i < o->via.array.size; i++) {
            if (i)
                *w++ = ',';
            w = jrpc_json_msgpack_put(w, &o->via.array.ptr[i]);
        }
        *w++ = ']';
        return w;
    case MSGPACK_OBJECT_MAP:
        *w++ = '{';
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            if (i)
                *w++ = ',';
            w = jrpc_json_msgpack_put(w, &o->via.map.ptr[i].key);
            *w++ = ':';
            w = jrpc_json_msgpack_put(w, &o->via.map.ptr[i].val);
        }
        *w++ = '}';
        return w;
    default:
        return w;  /* unreachable after jrpc_json_msgpack_size() */
    }
}

/* ---- msgpack bytes → JSON, in place ----
 *
 * The same two passes as msize/jrpc_json_msgpack_put, over the bytes of a
 * value instead of its tree (RESPONSE results, read in place): the same
 * visiting order, so the same first refusal, the same bound and the same
 * text. Both recurse as the tree walkers do, at most max_depth deep: a
 * container deeper than that is refused before anything inside it. */

static bool is_str_head(unsigned char b)
{
    return (b >= 0xa0 && b <= 0xbf) || (b >= 0xd9 && b <= 0xdb);
}

static int rsize(const char **pp, const char *end, unsigned depth, unsigned max_depth, size_t *acc)
{
    if (*pp == end)
        return JRPC_JSON_EMALFORMED;
    if ((unsigned char)**pp <= 0x7f) {   /* positive fixint: the commonest result */
        ++*pp;
        *acc += 20;
        return 0;
    }
    msgpack_object o = { .type = MSGPACK_OBJECT_NIL };   /* set by the read (for gcc's -O3) */
    uint64_t count;
    int64_t used = jrpc_mpack_read_head(*pp, (size_t)(end - *pp), &o, &count);
    if (used < 0)
        return JRPC_JSON_EMALFORMED;
    *pp += used;
    int rc = scalar_size(&o, acc);
    if (rc <= 0)
        return rc;
    switch (o.type) {
    case MSGPACK_OBJECT_ARRAY:
        if (depth + 1 > max_depth)
            return JRPC_JSON_EDEPTH;
        *acc += 2 + (size_t)count;
        for (uint64_t i = 0; i < count; i++)
            if ((rc = rsize(pp, end, depth + 1, max_depth, acc)) < 0)
                return rc;
        return 0;
    case MSGPACK_OBJECT_MAP:
        if (depth + 1 > max_depth)
            return JRPC_JSON_EDEPTH;
        *acc += 2 + 2 * (size_t)count;
        for (uint64_t i = 0; i < count; i++) {
            if (*pp == end)
                return JRPC_JSON_EMALFORMED;
            if (!is_str_head((unsigned char)**pp))
                return JRPC_JSON_EUNREPR;
            if ((rc = rsize(pp, end, depth + 1, max_depth, acc)) < 0 ||
                (rc = rsize(pp, end, depth + 1, max_depth, acc)) < 0)
                return rc;
        }
        return 0;
    default:  /* bin, ext */
        return JRPC_JSON_EUNREPR;
    }
}

int jrpc_json_raw_size(const char *p, size_t n, unsigned max_depth, size_t *out)
{
    const char *q = p, *end = p + n;
    if (n == 1 && (unsigned char)*p <= 0x7f) {   /* a positive fixint alone: rsize's bound, */
        *out = 20;                                /* without its frame */
        return 0;
    }
    *out = 0;
    int rc = rsize(&q, end, 0, max_depth, out);
    if (rc == 0 && q != end)
        rc = JRPC_JSON_EMALFORMED;
    return rc;
}

static char *rput(char *w, const char **pp, const char *end)
{
    unsigned char b = (unsigned char)**pp;
    if (b <= 0x7f) {   /* positive fixint: the commonest result */
        ++*pp;
        return jrpc_u64_put(w, b);
    }
    msgpack_object o = { .type = MSGPACK_OBJECT_NIL };   /* set by the read (for gcc's -O3) */
    uint64_t count;
    int64_t used = jrpc_mpack_read_head(*pp, (size_t)(end - *pp), &o, &count);
    if (used < 0)
        return w;   /* unreachable after jrpc_json_raw_size() */
    *pp += used;
    switch (o.type) {
    case MSGPACK_OBJECT_NIL:
        memcpy(w, "null", 4);
        return w + 4;
    case MSGPACK_OBJECT_BOOLEAN:
        if (o.via.boolean) {
            memcpy(w, "true", 4);
            return w + 4;
        }
        memcpy(w, "false", 5);
        return w + 5;
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        return jrpc_u64_put(w, o.via.u64);
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        return jrpc_json_int_put(w, o.via.i64);
    case MSGPACK_OBJECT_FLOAT32:
        return double_put(w, o.via.f64, true);
    case MSGPACK_OBJECT_FLOAT64:
        return double_put(w, o.via.f64, false);
    case MSGPACK_OBJECT_STR:
        return jrpc_json_string_put(w, o.via.str.ptr, o.via.str.size);
    case MSGPACK_OBJECT_ARRAY:
        *w++ = '[';
        for (uint64_t i = 0; i < count; i++) {
            if (i)
                *w++ = ',';
            w = rput(w, pp, end);
        }
        *w++ = ']';
        return w;
    case MSGPACK_OBJECT_MAP:
        *w++ = '{';
        for (uint64_t i = 0; i < count; i++) {
            if (i)
                *w++ = ',';
            w = rput(w, pp, end);
            *w++ = ':';
            w = rput(w, pp, end);
        }
        *w++ = '}';
        return w;
    default:
        return w;  /* unreachable after jrpc_json_raw_size() */
    }
}

char *jrpc_json_raw_put(char *w, const char *p, size_t n)
{
    unsigned char b = (unsigned char)*p;
    if (n == 1 && b <= 0x7f) {   /* a positive fixint alone: without rput's frame */
        size_t k = b >= 100 ? 3 : b >= 10 ? 2 : 1;
        for (size_t i = k; i-- > 0; b /= 10)
            w[i] = (char)('0' + b % 10);
        return w + k;
    }
    return rput(w, &p, p + n);
}

int jrpc_json_write_msgpack(jrpc_buf_t *out, const msgpack_object *o, unsigned max_depth)
{
    size_t n;
    int rc = jrpc_json_msgpack_size(o, max_depth, &n);
    if (rc < 0 || (rc = jrpc_buf_reserve(out, n)) < 0)
        return rc;
    char *w = jrpc_json_msgpack_put(out->p + out->len, o);
    out->len = (size_t)(w - out->p);
    return 0;
}

int jrpc_json_write_string(jrpc_buf_t *out, const char *s, size_t n)
{
    size_t len;
    int rc = jrpc_json_string_size(s, n, &len);
    if (rc < 0 || (rc = jrpc_buf_reserve(out, len)) < 0)
        return rc;
    char *w = jrpc_json_string_put(out->p + out->len, s, n);
    out->len = (size_t)(w - out->p);
    return 0;
}

int jrpc_json_write_double(jrpc_buf_t *out, double d)
{
    if (!isfinite(d))
        return JRPC_JSON_EUNREPR;
    int rc = jrpc_buf_reserve(out, DOUBLE_MAX_TEXT);
    if (rc < 0)
        return rc;
    char *w = double_put(out->p + out->len, d, false);
    out->len = (size_t)(w - out->p);
    return 0;
}
