/* jrpc_mpack — msgpack-c as the protocols use it: our own decoder, map
 * lookup, small readers of msgpack_object, and a packer into a jrpc_buf_t.
 *
 * Protocol-free: the worker codec (jrpc_wire), the client header frame
 * (jrpc_header), the worker library and the demo worker build on it; none
 * of their messages are known here. The decoder exists because msgpack-c's
 * own C unpacker has a nesting limit of 32 compiled into the library
 * (docs/ARCHITECTURE.md, "Own msgpack decoder for the wire"). */
#ifndef JRPC_MPACK_H
#define JRPC_MPACK_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <msgpack.h>
#include "jrpc_be.h"
#include "jrpc_buf.h"

/* Its users return their own codes for it (JRPC_WIRE_EMALFORMED,
 * JRPC_HEADER_EMALFORMED), so it needs no words of its own. */
enum {
    JRPC_MPACK_EMALFORMED = -4001,  /* not exactly one msgpack value within the limits */
};

/* The bytes a value takes when its first byte b alone tells (fixed-size
 * scalars and fixstr), else 0: the in-place readers' fast path. */
extern const uint8_t jrpc_mpack_scalar_size[256];

/* jrpc_mpack_head() without its checks, inline for the in-place readers
 * (the decoder, jrpc_mpack_check, RESPONSE frames, msgpack bytes as JSON):
 * p[0..avail) with avail >= 1 (not checked). */
static inline int64_t jrpc_mpack_read_head(const char *s, size_t avail, msgpack_object *o,
                                           uint64_t *count)
{
    const unsigned char *p = (const unsigned char *)s;
    unsigned char b = p[0];
    uint64_t len = 0;
    size_t head = 1;        /* bytes before the payload */
    int lenbytes = 0;       /* a big-endian length field after b */
    *count = 0;
    if (b <= 0x7f) {
        o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
        o->via.u64 = b;
        return 1;
    }
    if (b >= 0xe0) {
        o->type = MSGPACK_OBJECT_NEGATIVE_INTEGER;
        o->via.i64 = (int8_t)b;
        return 1;
    }
    if (b <= 0x8f) {
        o->type = MSGPACK_OBJECT_MAP;
        *count = b & 0x0f;
        return 1;
    }
    if (b <= 0x9f) {
        o->type = MSGPACK_OBJECT_ARRAY;
        *count = b & 0x0f;
        return 1;
    }
    if (b <= 0xbf) {
        o->type = MSGPACK_OBJECT_STR;
        len = b & 0x1f;
        goto payload;
    }
    switch (b) {
    case 0xc0:
        o->type = MSGPACK_OBJECT_NIL;
        return 1;
    case 0xc2:
    case 0xc3:
        o->type = MSGPACK_OBJECT_BOOLEAN;
        o->via.boolean = b == 0xc3;
        return 1;
    case 0xc4: case 0xc5: case 0xc6:                /* bin8/16/32 */
        o->type = MSGPACK_OBJECT_BIN;
        lenbytes = 1 << (b - 0xc4);
        break;
    case 0xd9: case 0xda: case 0xdb:                /* str8/16/32 */
        o->type = MSGPACK_OBJECT_STR;
        lenbytes = 1 << (b - 0xd9);
        break;
    case 0xc7: case 0xc8: case 0xc9:                /* ext8/16/32: length, type */
        o->type = MSGPACK_OBJECT_EXT;
        lenbytes = 1 << (b - 0xc7);
        break;
    case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8: /* fixext1..16: type */
        o->type = MSGPACK_OBJECT_EXT;
        len = 1u << (b - 0xd4);
        break;
    case 0xdc: case 0xdd:                           /* array16/32 */
        o->type = MSGPACK_OBJECT_ARRAY;
        lenbytes = 2 << (b - 0xdc);
        break;
    case 0xde: case 0xdf:                           /* map16/32 */
        o->type = MSGPACK_OBJECT_MAP;
        lenbytes = 2 << (b - 0xde);
        break;
    case 0xca: case 0xcb: {                         /* float32/64 */
        size_t w = b == 0xca ? 4 : 8;
        if (avail < 1 + w)
            return JRPC_MPACK_EMALFORMED;
        uint64_t bits = jrpc_be_load(p + 1, (int)w);
        if (w == 4) {
            uint32_t b32 = (uint32_t)bits;
            float f;
            memcpy(&f, &b32, sizeof f);
            o->type = MSGPACK_OBJECT_FLOAT32;
            o->via.f64 = f;
        } else {
            double d;
            memcpy(&d, &bits, sizeof d);
            o->type = MSGPACK_OBJECT_FLOAT64;
            o->via.f64 = d;
        }
        return (int64_t)(1 + w);
    }
    case 0xcc: case 0xcd: case 0xce: case 0xcf: {   /* uint8..64 */
        int w = 1 << (b - 0xcc);
        if (avail < 1 + (size_t)w)
            return JRPC_MPACK_EMALFORMED;
        o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
        o->via.u64 = jrpc_be_load(p + 1, w);
        return 1 + w;
    }
    case 0xd0: case 0xd1: case 0xd2: case 0xd3: {   /* int8..64 */
        int w = 1 << (b - 0xd0);
        if (avail < 1 + (size_t)w)
            return JRPC_MPACK_EMALFORMED;
        uint64_t u = jrpc_be_load(p + 1, w);
        int64_t v;
        if (w < 8 && (u >> (8 * w - 1)))
            u |= ~(uint64_t)0 << (8 * w);       /* sign-extend */
        memcpy(&v, &u, sizeof v);
        /* As msgpack-c: a non-negative value is a positive integer
         * whatever its encoding. */
        if (v < 0) {
            o->type = MSGPACK_OBJECT_NEGATIVE_INTEGER;
            o->via.i64 = v;
        } else {
            o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
            o->via.u64 = (uint64_t)v;
        }
        return 1 + w;
    }
    default:                                        /* 0xc1, reserved */
        return JRPC_MPACK_EMALFORMED;
    }
    if (lenbytes) {
        if (avail - head < (size_t)lenbytes)
            return JRPC_MPACK_EMALFORMED;
        len = jrpc_be_load(p + head, lenbytes);
        head += (size_t)lenbytes;
    }
    if (o->type == MSGPACK_OBJECT_ARRAY || o->type == MSGPACK_OBJECT_MAP) {
        *count = len;
        return (int64_t)head;
    }
    if (o->type == MSGPACK_OBJECT_EXT) {
        if (avail - head < 1)
            return JRPC_MPACK_EMALFORMED;
        o->via.ext.type = (int8_t)p[head];
        head++;
    }
payload:
    if (len > avail - head)
        return JRPC_MPACK_EMALFORMED;
    /* len < 2^32 here: every length field is at most 32 bits wide. */
    if (o->type == MSGPACK_OBJECT_EXT) {
        o->via.ext.size = (uint32_t)len;
        o->via.ext.ptr = (const char *)p + head;
    } else if (o->type == MSGPACK_OBJECT_STR) {
        o->via.str.size = (uint32_t)len;
        o->via.str.ptr = (const char *)p + head;
    } else {
        o->via.bin.size = (uint32_t)len;
        o->via.bin.ptr = (const char *)p + head;
    }
    return (int64_t)(head + len);
}

/* Decodes exactly one msgpack value covering buf[0..n) into *out, as
 * msgpack_unpack() would (same object types and values), but with nesting
 * allowed up to max_depth (>= 1) containers, counting the outermost.
 * Array and map slots are allocated from zone; str, bin and ext payloads
 * point into buf (zero-copy), so buf and zone must both outlive *out.
 * Allocates at most a small multiple of n whatever the input claims, and
 * never recurses, however deep max_depth allows.
 * Returns 0; JRPC_MPACK_EMALFORMED when the bytes are empty, truncated, use
 * the reserved byte 0xc1, nest deeper than max_depth, or have bytes after
 * the value; or -ENOMEM. On error *out is nil, and zone may hold garbage
 * until cleared. Never blocks. */
int jrpc_mpack_unpack(const char *buf, size_t n, size_t max_depth, msgpack_zone *zone,
                      msgpack_object *out);

/* Reads the head of the value at p[0..avail) without allocating: a scalar
 * whole into *o (a str, bin or ext payload pointing into p); for an array or
 * a map only its type into o->type and its element (entry) count into
 * *count, its slots left unset (*count is 0 for a scalar). What a caller
 * needs to look at the start of a message before deciding to decode it.
 * Returns the bytes read (a container's header only; a scalar's payload
 * included), or JRPC_MPACK_EMALFORMED (avail 0, truncated, reserved byte
 * 0xc1). */
int64_t jrpc_mpack_head(const char *p, size_t avail, msgpack_object *o, uint64_t *count);

/* Checks that buf[0..n) is exactly one msgpack value within max_depth (>= 1)
 * levels of nesting: what jrpc_mpack_unpack() accepts, without building
 * anything (the in-place readers then walk the bytes trusting their
 * structure). Keeps a stack of counts only beyond 32 levels.
 * Returns 0, JRPC_MPACK_EMALFORMED (as jrpc_mpack_unpack would), or -ENOMEM
 * (deep nesting only). Never blocks. */
int jrpc_mpack_check(const char *buf, size_t n, size_t max_depth);

/* The same for a run of count values at p[0..avail), each within max_depth
 * levels, and bytes may follow: returns the bytes the run takes (0 for
 * count 0), JRPC_MPACK_EMALFORMED or -ENOMEM. */
int64_t jrpc_mpack_check_values(const char *p, size_t avail, uint64_t count, size_t max_depth);

/* The bytes the next count values at p[0..avail) take (0 for count 0), with
 * no depth limit (for bytes jrpc_mpack_check() accepted), or
 * JRPC_MPACK_EMALFORMED when they are not there. Never allocates, never
 * recurses. */
int64_t jrpc_mpack_skip(const char *p, size_t avail, uint64_t count);

/* The slots a container head read by jrpc_mpack_head() opens: its elements,
 * twice its entries for a map, 0 for a scalar. */
static inline uint64_t jrpc_mpack_slots(const msgpack_object *o, uint64_t count)
{
    return o->type == MSGPACK_OBJECT_MAP ? 2 * count : count;
}

/* The value of the first string key equal to key in map o; NULL when absent
 * or when o is NULL or not a map. Borrowed from o. */
const msgpack_object *jrpc_mpack_map_get(const msgpack_object *o, const char *key);

/* True when o is a str holding exactly the bytes of the C string s. */
static inline bool jrpc_mpack_str_is(const msgpack_object *o, const char *s)
{
    size_t n = strlen(s);
    return o->type == MSGPACK_OBJECT_STR && o->via.str.size == n &&
           memcmp(o->via.str.ptr, s, n) == 0;
}

/* True, with *v set, when o is a non-negative integer no larger than max
 * (msgpack-c types every non-negative integer POSITIVE_INTEGER). */
static inline bool jrpc_mpack_get_uint(const msgpack_object *o, uint64_t max, uint64_t *v)
{
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER || o->via.u64 > max)
        return false;
    *v = o->via.u64;
    return true;
}

/* msgpack-c's write callback appending to the jrpc_buf_t in data: 0, or -1
 * when out of memory (every msgpack_pack_* then returns -1). Inline, and
 * so a copy per file: packing into a local packer then calls it directly
 * and open-codes the short appends (the broker's REQUEST writer is on the
 * hot path; bench/README.md, "Profile"). */
static inline int jrpc_mpack_buf_write(void *data, const char *p, size_t n)
{
    return jrpc_buf_append(data, p, n) < 0 ? -1 : 0;
}

/* Direct writers for the hot paths, into room the caller reserved: each
 * writes the same bytes msgpack-c's packer would (the smallest encoding) and
 * returns u past them. At most 9 bytes for an integer, 5 for a str head. */
static inline unsigned char *jrpc_mpack_put_uint(unsigned char *u, uint64_t v)
{
    if (v < 128) {
        *u++ = (unsigned char)v;
    } else if (v < 256) {
        *u++ = 0xcc;
        *u++ = (unsigned char)v;
    } else if (v < 65536) {
        *u++ = 0xcd;
        u = jrpc_be_store16(u, (uint16_t)v);
    } else if (v <= UINT32_MAX) {
        *u++ = 0xce;
        u = jrpc_be_store32(u, (uint32_t)v);
    } else {
        *u++ = 0xcf;
        u = jrpc_be_store64(u, v);
    }
    return u;
}

static inline unsigned char *jrpc_mpack_put_str_head(unsigned char *u, uint32_t n)
{
    if (n < 32) {
        *u++ = (unsigned char)(0xa0 | n);
    } else if (n < 256) {
        *u++ = 0xd9;
        *u++ = (unsigned char)n;
    } else if (n < 65536) {
        *u++ = 0xda;
        u = jrpc_be_store16(u, (uint16_t)n);
    } else {
        *u++ = 0xdb;
        u = jrpc_be_store32(u, n);
    }
    return u;
}

/* A bin header for n bytes (bin8/16/32: 2, 3 or 5 bytes). */
static inline unsigned char *jrpc_mpack_put_bin_head(unsigned char *u, uint32_t n)
{
    if (n < 256) {
        *u++ = 0xc4;
        *u++ = (unsigned char)n;
    } else if (n < 65536) {
        *u++ = 0xc5;
        u = jrpc_be_store16(u, (uint16_t)n);
    } else {
        *u++ = 0xc6;
        u = jrpc_be_store32(u, n);
    }
    return u;
}

/* Makes pk append to out (borrowed: out must outlive pk's use). */
static inline void jrpc_mpack_packer_init(msgpack_packer *pk, jrpc_buf_t *out)
{
    msgpack_packer_init(pk, out, jrpc_mpack_buf_write);
}

/* Packs the str p[0..n) (a packer made by jrpc_mpack_packer_init).
 * Returns 0 or -ENOMEM. */
static inline int jrpc_mpack_put_str(msgpack_packer *pk, const char *p, size_t n)
{
    if (msgpack_pack_str(pk, n) < 0 || msgpack_pack_str_body(pk, p, n) < 0)
        return -ENOMEM;
    return 0;
}

#endif
