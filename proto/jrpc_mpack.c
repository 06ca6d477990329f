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

/* Bytes of a value whose size its first byte tells: every fixed-size scalar
 * (nil, bool, ints, floats, fixext) and fixstr; 0 for the rest (containers,
 * str8/16/32, bin, ext8/16/32, the reserved 0xc1). */
const uint8_t jrpc_mpack_scalar_size[256] = {
     1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  /* 00 */
     1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  /* 10 */
     1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  /* 20 */
     1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  /* 30 */
     1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  /* 40 */
     1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  /* 50 */
     1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  /* 60 */
     1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  /* 70 */
     0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  /* 80 */
     0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  /* 90 */
     1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16,  /* A0 */
    17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32,  /* B0 */
     1,  0,  1,  1,  0,  0,  0,  0,  0,  0,  5,  9,  2,  3,  5,  9,  /* C0 */
     2,  3,  5,  9,  3,  4,  6, 10, 18,  0,  0,  0,  0,  0,  0,  0,  /* D0 */
     1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  /* E0 */
     1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  /* F0 */
};

/* Levels kept on the C stack; deeper nesting moves the stack to the heap. */
#define INLINE_LEVELS 32

int64_t jrpc_mpack_head(const char *p, size_t avail, msgpack_object *o, uint64_t *count)
{
    if (p == NULL || avail == 0)
        return JRPC_MPACK_EMALFORMED;
    return jrpc_mpack_read_head(p, avail, o, count);
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

/* Doubles a walker's stack of open containers (at most max entries),
 * moving it off the caller's inline array (inl, INLINE_LEVELS entries of
 * size bytes) the first time. Returns the stack, or NULL when out of memory,
 * having freed a heap stack (the caller's free of a non-inline stack then
 * frees nothing). */
static void *levels_grow(void *levels, void *inl, size_t size, size_t *cap, size_t max)
{
    size_t ncap = *cap * 2 > max ? max : *cap * 2;
    void *nl = levels == inl ? malloc(ncap * size) : realloc(levels, ncap * size);
    if (nl == NULL) {
        if (levels != inl)
            free(levels);
        return NULL;
    }
    if (levels == inl)
        memcpy(nl, inl, INLINE_LEVELS * size);
    *cap = ncap;
    return nl;
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
        int64_t used = jrpc_mpack_read_head((const char *)p + pos, avail, dst, &count);
        if (used < 0)
            goto out;
        pos += (size_t)used;
        avail -= (size_t)used;
        owed--;
        if (dst->type == MSGPACK_OBJECT_ARRAY || dst->type == MSGPACK_OBJECT_MAP) {
            uint64_t slots = jrpc_mpack_slots(dst, count);
            if (owed > avail || slots > avail - owed || depth == max_depth)
                goto out;
            if ((rc = alloc_slots(dst, count, zone)) < 0)
                goto out;
            rc = JRPC_MPACK_EMALFORMED;
            if (slots > 0) {
                if (depth == cap && (levels = levels_grow(levels, inline_levels, sizeof *levels,
                                                          &cap, max_depth)) == NULL) {
                    rc = -ENOMEM;
                    goto out;
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

/* The same walk as jrpc_mpack_unpack, with a count per level instead of
 * slots: it accepts exactly the same bytes (the unpacker's early "owed"
 * refusals are truncations found before reaching them), so bytes checked
 * here can be read in place as if they had been decoded. */
int64_t jrpc_mpack_check_values(const char *p, size_t avail, uint64_t count, size_t max_depth)
{
    assert(max_depth >= 1);
    uint64_t inline_levels[INLINE_LEVELS];
    uint64_t *levels = inline_levels;  /* values left in each container around the open one */
    size_t cap = INLINE_LEVELS, depth = 0, pos = 0;
    uint64_t left = count;             /* values left in the open container (at first: the run) */
    int64_t rc = JRPC_MPACK_EMALFORMED;
    if (count == 0)
        return 0;
    if (p == NULL)
        goto out;
    for (;;) {
        if (pos == avail)
            goto out;
        size_t size = jrpc_mpack_scalar_size[(unsigned char)p[pos]];
        if (size) {   /* most values: the first byte says it all */
            if (size > avail - pos)
                goto out;
            pos += size;
            left--;
            goto filled;
        }
        msgpack_object o;
        uint64_t n;
        int64_t used = jrpc_mpack_read_head(p + pos, avail - pos, &o, &n);
        if (used < 0)
            goto out;
        pos += (size_t)used;
        left--;
        if (o.type == MSGPACK_OBJECT_ARRAY || o.type == MSGPACK_OBJECT_MAP) {
            uint64_t slots = jrpc_mpack_slots(&o, n);
            if (depth == max_depth || slots > avail - pos)
                goto out;
            if (slots > 0) {
                if (depth == cap && (levels = levels_grow(levels, inline_levels, sizeof *levels,
                                                          &cap, max_depth)) == NULL) {
                    rc = -ENOMEM;
                    goto out;
                }
                levels[depth++] = left;
                left = slots;
            }
        }
    filled:
        while (left == 0) {   /* the open container is full: back to its parent */
            if (depth == 0) {
                rc = (int64_t)pos;
                goto out;
            }
            left = levels[--depth];
        }
    }
out:
    if (levels != inline_levels)
        free(levels);
    return rc;
}

int jrpc_mpack_check(const char *buf, size_t n, size_t max_depth)
{
    int64_t used = jrpc_mpack_check_values(buf, n, 1, max_depth);
    if (used < 0)
        return (int)used;
    return (size_t)used == n ? 0 : JRPC_MPACK_EMALFORMED;
}

/* One running count of values owed is enough to find the end: no stack. */
int64_t jrpc_mpack_skip(const char *p, size_t avail, uint64_t count)
{
    size_t pos = 0;
    while (count > 0) {
        if (pos == avail)
            return JRPC_MPACK_EMALFORMED;
        size_t size = jrpc_mpack_scalar_size[(unsigned char)p[pos]];
        if (size) {
            if (size > avail - pos)
                return JRPC_MPACK_EMALFORMED;
            pos += size;
            count--;
            continue;
        }
        msgpack_object o;
        uint64_t n;
        int64_t used = jrpc_mpack_read_head(p + pos, avail - pos, &o, &n);
        if (used < 0)
            return JRPC_MPACK_EMALFORMED;
        pos += (size_t)used;
        count += jrpc_mpack_slots(&o, n) - 1;
        if (count > avail - pos)   /* each value owed takes a byte at least */
            return JRPC_MPACK_EMALFORMED;
    }
    return (int64_t)pos;
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
