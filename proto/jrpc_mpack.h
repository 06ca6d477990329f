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
