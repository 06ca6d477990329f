/* jrpc_mpack — our msgpack decoder and the small pieces of msgpack-c glue
 * every protocol module shares. See jrpc_mpack.h.
 *
 * Why our own decoder: msgpack-c's C unpacker has a stack of
 * MSGPACK_EMBED_STACK_SIZE (32) containers fixed when the library is built,
 * which would cap params at 29 levels inside a worker frame while the broker
 * admits JSON bodies nested up to --max-depth (1024 at most). Ours is
 * iterative, so its depth limit costs no C stack, and it builds the same
 * msgpack_object trees msgpack_unpack() would, so every reader of
 * msgpack_object keeps working. It never trusts a declared length: see
 * jrpc_mpack_unpack for why a hostile frame cannot make it allocate more
 * than a small multiple of the frame's size. */
#include "jrpc_mpack.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "jrpc_be.h"

/* ---- the msgpack decoder ---- */

/* A container being filled. A map's entries (msgpack_object_kv: key, then
 * value) lie in memory exactly as twice as many msgpack_objects, so both
 * kinds are filled as one flat run of slots: no branch on the kind per value. */
typedef struct level {
    msgpack_object *next;    /* the next slot to fill */
    uint64_t        left;    /* slots still to fill */
} level_t;

_Static_assert(sizeof(msgpack_object_kv) == 2 * sizeof(msgpack_object) &&
               offsetof(msgpack_object_kv, val) == sizeof(msgpack_object),
               "a map's entries are filled as a flat run of objects");

/* Levels kept on the C stack; deeper nesting moves the stack to the heap. */
#define INLINE_LEVELS 32

/* The header of one value at p[0..avail): sets *o for a scalar, or its type
 * and *count (elements, or entries of a map) for a container, whose slots the
 * caller allocates. Returns the bytes the value's own encoding takes (a
 * container's header only), or JRPC_MPACK_EMALFORMED. */
static int64_t read_head(const unsigned char *p, size_t avail, msgpack_object *o, uint64_t *count)
{
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

int64_t jrpc_mpack_head(const char *p, size_t avail, msgpack_object *o, uint64_t *count)
{
    if (p == NULL || avail == 0)
        return JRPC_MPACK_EMALFORMED;
    return read_head((const unsigned char *)p, avail, o, count);
}

/* Gives a container of count elements (entries, for a map) its slots. */
static int alloc_slots(msgpack_object *o, uint64_t count, msgpack_zone *zone)
{
    size_t each = o->type == MSGPACK_OBJECT_ARRAY ? sizeof(msgpack_object)
                                                  : sizeof(msgpack_object_kv);
    if (count > SIZE_MAX / each)
        return -ENOMEM;
    /* As msgpack-c, an empty container gets a valid (zero-size) pointer. */
    void *p = msgpack_zone_malloc(zone, (size_t)count * each);
    if (p == NULL)
        return -ENOMEM;
    if (o->type == MSGPACK_OBJECT_ARRAY) {
        o->via.array.size = (uint32_t)count;
        o->via.array.ptr = p;
    } else {
        o->via.map.size = (uint32_t)count;
        o->via.map.ptr = p;
    }
    return 0;
}

/* Why iterative, with one running count of values still owed: the depth
 * limit is far beyond what recursion on a small thread stack tolerates, and
 * `owed` (every value takes at least one byte) is checked against the bytes
 * left before any container's slots are allocated. So all slots ever
 * allocated for one frame, hostile or not, number at most n: a 5-byte
 * array32 header claiming 2^32-1 elements allocates nothing. */
int jrpc_mpack_unpack(const char *buf, size_t n, size_t max_depth, msgpack_zone *zone,
                      msgpack_object *out)
{
    assert(zone != NULL && out != NULL && max_depth >= 1);
    const unsigned char *p = (const unsigned char *)buf;
    level_t inline_levels[INLINE_LEVELS];
    level_t *levels = inline_levels;   /* the containers around the open one */
    size_t cap = INLINE_LEVELS, depth = 0, pos = 0;
    uint64_t owed = 1;                 /* values still to read, at every level */
    level_t cur = { NULL, 0 };         /* the open container (kept in registers) */
    msgpack_object *dst = out;         /* where the next value goes */
    int rc = JRPC_MPACK_EMALFORMED;
    if (buf == NULL || n == 0)
        goto out;
    for (;;) {
        size_t avail = n - pos;
        if (avail == 0)
            goto out;
        uint64_t count;
        int64_t used = read_head(p + pos, avail, dst, &count);
        if (used < 0)
            goto out;
        pos += (size_t)used;
        avail -= (size_t)used;
        owed--;
        if (dst->type == MSGPACK_OBJECT_ARRAY || dst->type == MSGPACK_OBJECT_MAP) {
            uint64_t slots = dst->type == MSGPACK_OBJECT_MAP ? 2 * count : count;
            if (owed > avail || slots > avail - owed || depth == max_depth)
                goto out;
            if ((rc = alloc_slots(dst, count, zone)) < 0)
                goto out;
            rc = JRPC_MPACK_EMALFORMED;
            if (slots > 0) {
                if (depth == cap) {
                    size_t ncap = cap * 2 > max_depth ? max_depth : cap * 2;
                    level_t *nl = levels == inline_levels ? malloc(ncap * sizeof *nl)
                                                          : realloc(levels, ncap * sizeof *nl);
                    if (nl == NULL) {
                        rc = -ENOMEM;
                        goto out;
                    }
                    if (levels == inline_levels)
                        memcpy(nl, inline_levels, sizeof inline_levels);
                    levels = nl;
                    cap = ncap;
                }
                levels[depth++] = cur;
                cur = (level_t){ .next = dst->via.array.ptr, .left = slots };
                owed += slots;
            }
        }
        while (cur.left == 0) {   /* the open container is full: back to its parent */
            if (depth == 0) {
                rc = pos == n ? 0 : JRPC_MPACK_EMALFORMED;
                goto out;
            }
            cur = levels[--depth];
        }
        dst = cur.next++;
        cur.left--;
    }
out:
    if (levels != inline_levels)
        free(levels);
    if (rc < 0)
        memset(out, 0, sizeof *out);
    return rc;
}

const msgpack_object *jrpc_mpack_map_get(const msgpack_object *o, const char *key)
{
    if (o == NULL || o->type != MSGPACK_OBJECT_MAP)
        return NULL;
    for (uint32_t i = 0; i < o->via.map.size; i++)
        if (jrpc_mpack_str_is(&o->via.map.ptr[i].key, key))
            return &o->via.map.ptr[i].val;
    return NULL;
}
