/* Tests of jrpc_mpack, our msgpack decoder and its helpers: every format
 * byte by hand, thousands of random values checked against msgpack-c's own
 * decoder, truncations, trailing bytes, huge declared lengths, hostile
 * nesting and what a hostile frame can make it allocate (this suite runs
 * under ASan+UBSan too); the map lookup, the head reader and the small
 * readers. Inputs sit in malloc'd buffers of exactly their size, so an
 * over-read trips ASan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>
#include <msgpack.h>
#include "jrpc_mpack.h"
#include "mpack_helpers.h"

/* The nesting worker frames may have (JRPC_WIRE_MAX_DEPTH): what the suite
 * decodes with unless a test is about the limit itself. */
#define DEPTH 1100

static int unpack(const char *buf, size_t n, msgpack_zone *z, msgpack_object *o)
{
    return jrpc_mpack_unpack(buf, n, DEPTH, z, o);
}

/* Decodes bytes from an exact-size copy with the given limit. */
static int unpack_copy(const void *bytes, size_t n, size_t max_depth)
{
    char *buf = malloc(n ? n : 1);
    assert_non_null(buf);
    if (n)
        memcpy(buf, bytes, n);
    msgpack_zone z;
    assert_true(msgpack_zone_init(&z, 256));
    msgpack_object o;
    int rc = jrpc_mpack_unpack(buf, n, max_depth, &z, &o);
    if (rc != 0) {
        assert_int_equal(rc, JRPC_MPACK_EMALFORMED);
        assert_int_equal(o.type, MSGPACK_OBJECT_NIL);
    }
    msgpack_zone_destroy(&z);
    free(buf);
    return rc;
}

/* ---- against msgpack_unpack ---- */

static void sb_raw(msgpack_sbuffer *sb, const void *p, size_t n)
{
    assert_int_equal(msgpack_sbuffer_write(sb, p, n), 0);
}

/* A big-endian header byte followed by v in w bytes. */
static void sb_head(msgpack_sbuffer *sb, unsigned char b, uint64_t v, int w)
{
    unsigned char h[9] = { b };
    for (int i = 0; i < w; i++)
        h[1 + i] = (unsigned char)(v >> (8 * (w - 1 - i)));
    sb_raw(sb, h, 1 + (size_t)w);
}

static size_t rnd_len(void)
{
    switch (rng() % 64) {
    case 0:  return 256 + rng() % 1000;         /* 16-bit length */
    case 1:  return rng() % 50 == 0 ? 65536 + rng() % 1000 : 32 + rng() % 224; /* 32 */
    default: return rng() % 32;
    }
}

static void rnd_bytes(msgpack_sbuffer *sb, size_t n)
{
    char chunk[64];
    while (n > 0) {
        size_t k = n < sizeof chunk ? n : sizeof chunk;
        for (size_t i = 0; i < k; i++)
            chunk[i] = (char)rng();
        sb_raw(sb, chunk, k);
        n -= k;
    }
}

/* Appends one random value: a scalar of any msgpack format, or (depth > 0)
 * an array or map of random values. On the spine, the value is a container
 * and one of its children continues the spine, so the tree is exactly
 * `depth` levels deep. Mostly through msgpack_pack_* (canonical encodings);
 * with wide, also non-minimal ones (uint64 1, str32 "abc", array32 of 2...)
 * that msgpack_pack_object would not write back the same (*canonical). */
static void rnd_value(msgpack_packer *pk, msgpack_sbuffer *sb, int depth, bool spine, bool wide,
                      bool *canonical, int *budget)
{
    --*budget;
    if (depth > 0 && (spine || (*budget > 0 && rng() % 3 == 0))) {
        int kind = (int)(rng() % 3);        /* array, array, map */
        bool wide_head = wide && rng() % 4 == 0;
        size_t n = rng() % 16 == 0 ? 16 + rng() % 4 : rng() % 4;
        if (spine && n == 0)
            n = 1;
        size_t nslots = kind == 2 ? 2 * n : n;
        size_t next = spine ? rng() % nslots : SIZE_MAX;
        if (wide_head) {
            *canonical = false;
            sb_head(sb, kind == 2 ? 0xdf : 0xdd, n, 4);     /* map32 / array32 */
        } else if (kind == 2) {
            msgpack_pack_map(pk, n);
        } else {
            msgpack_pack_array(pk, n);
        }
        for (size_t i = 0; i < nslots; i++) {
            if (i == next)
                rnd_value(pk, sb, depth - 1, true, wide, canonical, budget);
            else
                rnd_value(pk, sb, (int)(rng() % (unsigned)depth), false, wide, canonical,
                          budget);
        }
        return;
    }
    switch (rng() % (wide ? 12 : 11)) {
    case 0:
        msgpack_pack_nil(pk);
        break;
    case 1:
        (rng() & 1) ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
        break;
    case 2:
        msgpack_pack_uint64(pk, rng() >> (rng() % 64));
        break;
    case 3:
        msgpack_pack_int64(pk, -(int64_t)(rng() >> (1 + rng() % 63)) - 1);
        break;
    case 4:
        msgpack_pack_int64(pk, (int64_t)(rng() >> (1 + rng() % 63)));
        break;
    case 5: {
        uint32_t bits;
        float f;
        do {
            bits = (uint32_t)rng();
            memcpy(&f, &bits, sizeof f);
        } while (f != f);           /* msgpack_object_equal: NaN != NaN */
        msgpack_pack_float(pk, f);
        break;
    }
    case 6: {
        uint64_t bits;
        double d;
        do {
            bits = rng();
            memcpy(&d, &bits, sizeof d);
        } while (d != d);
        msgpack_pack_double(pk, rng() % 4 ? d : (double)(int64_t)rng() / 7.0);
        break;
    }
    case 7: {
        size_t n = rnd_len();
        msgpack_pack_str(pk, n);
        rnd_bytes(sb, n);
        break;
    }
    case 8: {
        size_t n = rnd_len();
        msgpack_pack_bin(pk, n);
        rnd_bytes(sb, n);
        break;
    }
    case 9: {
        static const size_t fixed[] = { 1, 2, 4, 8, 16 };
        size_t n = rng() % 2 ? fixed[rng() % 5] : rnd_len();
        msgpack_pack_ext(pk, n, (int8_t)rng());
        rnd_bytes(sb, n);
        break;
    }
    case 10:
        msgpack_pack_uint8(pk, (uint8_t)rng());
        break;
    default: {                      /* a non-minimal encoding */
        uint64_t small = rng() % 100;
        *canonical = false;
        switch (rng() % 9) {
        case 0: sb_head(sb, 0xcf, small, 8); break;                 /* uint64 */
        case 1: sb_head(sb, 0xce, small, 4); break;                 /* uint32 */
        case 2: sb_head(sb, 0xd3, small, 8); break;                 /* int64 >= 0 */
        case 3: sb_head(sb, 0xd1, (uint64_t)-(int64_t)small - 1, 2); break; /* int16 < 0 */
        case 4: sb_head(sb, 0xd0, small, 1); break;                 /* int8 >= 0 */
        case 5: sb_head(sb, 0xdb, 3, 4); sb_raw(sb, "abc", 3); break; /* str32 */
        case 6: sb_head(sb, 0xd9, 0, 1); break;                     /* str8 "" */
        case 7: sb_head(sb, 0xc6, 2, 4); sb_raw(sb, "\0\1", 2); break; /* bin32 */
        default: sb_head(sb, 0xc9, 1, 4); sb_raw(sb, "\x85x", 2); break; /* ext32 */
        }
        break;
    }
    }
}

/* Both trees equal, and their non-empty str/bin/ext payloads at the same
 * addresses (zero-copy into the input, as msgpack_unpack). An empty one's
 * pointer differs: msgpack-c gives NULL or the header's last byte, we give
 * the (non-NULL) end of its header. */
static void assert_same_tree(const msgpack_object *a, const msgpack_object *b)
{
    assert_int_equal(a->type, b->type);
    switch (a->type) {
    case MSGPACK_OBJECT_STR:
    case MSGPACK_OBJECT_BIN:
        assert_int_equal(a->via.str.size, b->via.str.size);
        if (a->via.str.size > 0)
            assert_ptr_equal(a->via.str.ptr, b->via.str.ptr);
        assert_non_null(b->via.str.ptr);
        break;
    case MSGPACK_OBJECT_EXT:
        assert_int_equal(a->via.ext.type, b->via.ext.type);
        assert_int_equal(a->via.ext.size, b->via.ext.size);
        if (a->via.ext.size > 0)
            assert_ptr_equal(a->via.ext.ptr, b->via.ext.ptr);
        assert_non_null(b->via.ext.ptr);
        break;
    case MSGPACK_OBJECT_ARRAY:
        assert_int_equal(a->via.array.size, b->via.array.size);
        for (uint32_t i = 0; i < a->via.array.size; i++)
            assert_same_tree(&a->via.array.ptr[i], &b->via.array.ptr[i]);
        break;
    case MSGPACK_OBJECT_MAP:
        assert_int_equal(a->via.map.size, b->via.map.size);
        for (uint32_t i = 0; i < a->via.map.size; i++) {
            assert_same_tree(&a->via.map.ptr[i].key, &b->via.map.ptr[i].key);
            assert_same_tree(&a->via.map.ptr[i].val, &b->via.map.ptr[i].val);
        }
        break;
    default:
        assert_true(msgpack_object_equal(*a, *b));
        break;
    }
}

/* Containers nesting in o; counts its values of each type into seen. */
static int tree_depth(const msgpack_object *o, int seen[16])
{
    int d = 0;
    seen[o->type & 15]++;
    if (o->type == MSGPACK_OBJECT_ARRAY)
        for (uint32_t i = 0; i < o->via.array.size; i++) {
            int c = tree_depth(&o->via.array.ptr[i], seen);
            d = c > d ? c : d;
        }
    else if (o->type == MSGPACK_OBJECT_MAP)
        for (uint32_t i = 0; i < 2 * o->via.map.size; i++) {
            const msgpack_object_kv *kv = &o->via.map.ptr[i / 2];
            int c = tree_depth(i % 2 ? &kv->val : &kv->key, seen);
            d = c > d ? c : d;
        }
    else
        return 0;
    return d + 1;
}

static void pack_to(msgpack_sbuffer *sb, const msgpack_object *o)
{
    msgpack_packer pk;
    msgpack_sbuffer_init(sb);
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    assert_int_equal(msgpack_pack_object(&pk, *o), 0);
}

/* Thousands of random values (fixed seed) decode to what msgpack_unpack
 * gives; packed again they are the input bytes; every strict prefix and an
 * extra trailing byte are malformed. */
/* Thousands of random values (fixed seed) decode to what msgpack_unpack
 * gives; packed again they are the input bytes; every strict prefix and an
 * extra trailing byte are malformed. */
static void test_unpack_differential(void **state)
{
    int kinds_seen[16] = { 0 };
    int deep_trees = 0;         /* 15 levels or more */
    size_t bytes = 0, biggest = 0;
    for (int iter = 0; iter < 4000; iter++) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        bool canonical = true;
        int budget = 400;
        int depth = (int)(rng() % 21);
        rnd_value(&pk, &sb, depth, true, iter % 4 == 3, &canonical, &budget);
        size_t n = sb.size;
        char *buf = malloc(n + 1);  /* exact size for the decoders; +1 below */
        assert_non_null(buf);
        memcpy(buf, sb.data, n);

        msgpack_zone zr, zo;
        msgpack_zone_init(&zr, 1024);
        msgpack_zone_init(&zo, 1024);
        msgpack_object ref, ours;
        size_t off = 0;
        char *exact = malloc(n);
        assert_non_null(exact);
        memcpy(exact, buf, n);
        assert_int_equal(msgpack_unpack(exact, n, &off, &zr, &ref), MSGPACK_UNPACK_SUCCESS);
        assert_int_equal(off, n);
        assert_int_equal(unpack(exact, n, &zo, &ours), 0);
        assert_true(msgpack_object_equal(ref, ours));
        assert_same_tree(&ref, &ours);
        assert_int_equal(tree_depth(&ours, kinds_seen), depth);
        deep_trees += depth >= 15;
        bytes += n;
        biggest = n > biggest ? n : biggest;

        msgpack_sbuffer back, refback;
        pack_to(&back, &ours);
        pack_to(&refback, &ref);
        assert_int_equal(back.size, refback.size);
        assert_memory_equal(back.data, refback.data, back.size);
        if (canonical) {
            assert_int_equal(back.size, n);
            assert_memory_equal(back.data, exact, n);
        }
        msgpack_sbuffer_destroy(&back);
        msgpack_sbuffer_destroy(&refback);

        if (n < 300) {
            for (size_t k = 0; k < n; k++) {
                char *pre = malloc(k ? k : 1);
                memcpy(pre, exact, k);
                msgpack_object o;
                assert_int_equal(unpack(pre, k, &zo, &o), JRPC_MPACK_EMALFORMED);
                free(pre);
            }
            buf[n] = (char)(rng() & 0x7f);
            msgpack_object o;
            assert_int_equal(unpack(buf, n + 1, &zo, &o), JRPC_MPACK_EMALFORMED);
        }
        msgpack_zone_destroy(&zr);
        msgpack_zone_destroy(&zo);
        free(exact);
        free(buf);
        msgpack_sbuffer_destroy(&sb);
    }
    for (int t = MSGPACK_OBJECT_NIL; t <= MSGPACK_OBJECT_FLOAT32; t++)
        if (kinds_seen[t] < 100)
            fail_msg("only %d values of type %d", kinds_seen[t], t);
    print_message("differential: %zu bytes, biggest %zu, %d trees 15+ deep\n", bytes, biggest,
                  deep_trees);
    assert_true(deep_trees > 50 && biggest > 65536);
}

/* Every format byte, one value each, by hand: the types and values
 * msgpack-c gives, then garbage after a header. */
static void test_unpack_formats(void **state)
{
    static const struct { const char *b; size_t n; } cases[] = {
        { "\xc0", 1 }, { "\xc2", 1 }, { "\xc3", 1 },
        { "\x00", 1 }, { "\x7f", 1 }, { "\xe0", 1 }, { "\xff", 1 },
        { "\xcc\xff", 2 }, { "\xcd\xff\xfe", 3 }, { "\xce\xff\xff\xff\xfe", 5 },
        { "\xcf\xff\xff\xff\xff\xff\xff\xff\xfe", 9 },
        { "\xd0\x80", 2 }, { "\xd0\x7f", 2 }, { "\xd1\x80\x00", 3 }, { "\xd1\x00\x01", 3 },
        { "\xd2\x80\x00\x00\x00", 5 }, { "\xd2\x7f\xff\xff\xff", 5 },
        { "\xd3\x80\x00\x00\x00\x00\x00\x00\x00", 9 },
        { "\xd3\x7f\xff\xff\xff\xff\xff\xff\xff", 9 },
        { "\xd3\xff\xff\xff\xff\xff\xff\xff\xff", 9 },
        { "\xca\x3f\xc0\x00\x00", 5 }, { "\xca\xff\x80\x00\x00", 5 },
        { "\xcb\x40\x09\x21\xfb\x54\x44\x2d\x18", 9 },
        { "\xa0", 1 }, { "\xa3" "abc", 4 }, { "\xbf" "0123456789012345678901234567890", 32 },
        { "\xd9\x02hi", 4 }, { "\xda\x00\x02hi", 5 }, { "\xdb\x00\x00\x00\x02hi", 7 },
        { "\xc4\x00", 2 }, { "\xc5\x00\x01\x00", 4 }, { "\xc6\x00\x00\x00\x01\xff", 6 },
        { "\xd4\x01" "a", 3 }, { "\xd5\xff" "ab", 4 }, { "\xd6\x80" "abcd", 6 },
        { "\xd7\x7f" "abcdefgh", 10 }, { "\xd8\x05" "abcdefghijklmnop", 18 },
        { "\xc7\x00\x03", 3 }, { "\xc7\x02\xfe" "ab", 5 }, { "\xc8\x00\x01\x01" "z", 5 },
        { "\xc9\x00\x00\x00\x01\xff" "z", 7 },
        { "\x90", 1 }, { "\x92\x01\xc0", 3 }, { "\xdc\x00\x01\x01", 4 },
        { "\xdd\x00\x00\x00\x02\xc2\xc3", 7 },
        { "\x80", 1 }, { "\x81\x01\x02", 3 }, { "\xde\x00\x01\xa1k\x90", 6 },
        { "\xdf\x00\x00\x00\x01\x80\x80", 7 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *buf = malloc(cases[i].n);
        memcpy(buf, cases[i].b, cases[i].n);
        msgpack_zone zr, zo;
        msgpack_zone_init(&zr, 256);
        msgpack_zone_init(&zo, 256);
        msgpack_object ref, ours;
        size_t off = 0;
        if (msgpack_unpack(buf, cases[i].n, &off, &zr, &ref) != MSGPACK_UNPACK_SUCCESS)
            fail_msg("case %zu: msgpack_unpack refused it", i);
        if (unpack(buf, cases[i].n, &zo, &ours) != 0)
            fail_msg("case %zu: refused", i);
        if (!msgpack_object_equal(ref, ours))
            fail_msg("case %zu: different objects", i);
        assert_same_tree(&ref, &ours);
        for (size_t k = 0; k < cases[i].n; k++) {
            msgpack_object o;
            if (unpack(buf, k, &zo, &o) != JRPC_MPACK_EMALFORMED)
                fail_msg("case %zu: prefix %zu decoded", i, k);
        }
        msgpack_zone_destroy(&zr);
        msgpack_zone_destroy(&zo);
        free(buf);
    }
    /* Reserved byte, anywhere; a NULL or empty buffer. */
    msgpack_zone z;
    msgpack_zone_init(&z, 256);
    msgpack_object o;
    assert_int_equal(unpack("\x92\x01\xc1", 3, &z, &o), JRPC_MPACK_EMALFORMED);
    assert_int_equal(unpack("\x81\xc1\x01", 3, &z, &o), JRPC_MPACK_EMALFORMED);
    assert_int_equal(unpack(NULL, 0, &z, &o), JRPC_MPACK_EMALFORMED);
    assert_int_equal(unpack("", 0, &z, &o), JRPC_MPACK_EMALFORMED);
    msgpack_zone_destroy(&z);
}

/* Heap bytes in use, to bound what one decode allocates; 0 when unknown.
 * (clang says ASan by __has_feature, gcc by __SANITIZE_ADDRESS__.) */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HEAP_BY_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(HEAP_BY_ASAN)
size_t __sanitizer_get_current_allocated_bytes(void);
static size_t heap_in_use(void)
{
    return __sanitizer_get_current_allocated_bytes();
}
#elif defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
#include <malloc.h>
static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}
#else
static size_t heap_in_use(void)
{
    return 0;
}
#endif

/* Nested array16s each claiming every byte left pass a per-container check
 * but not the running count of values owed: refused after two headers,
 * where checking each container alone would allocate ~60000 slots at each
 * of the 200 levels (300 MB) before finding the frame short. */
static void test_unpack_claims(void **state)
{
    size_t levels = 200, n = 3 * levels + 60000;
    unsigned char *buf = malloc(n);
    assert_non_null(buf);
    memset(buf, 0xc0, n);
    for (size_t i = 0; i < levels; i++) {
        size_t left = n - 3 * (i + 1);
        buf[3 * i] = 0xdc;
        buf[3 * i + 1] = (unsigned char)(left >> 8);
        buf[3 * i + 2] = (unsigned char)left;
    }
    msgpack_zone z;
    msgpack_zone_init(&z, 256);
    msgpack_object o;
    size_t before = heap_in_use();
    assert_int_equal(unpack((char *)buf, n, &z, &o), JRPC_MPACK_EMALFORMED);
    size_t grew = heap_in_use() - before;
    if (grew > 64 * n)
        fail_msg("a %zu-byte frame made the decoder allocate %zu bytes", n, grew);
    msgpack_zone_destroy(&z);
    /* A claim of exactly the bytes left, all there, is fine. */
    msgpack_zone_init(&z, 256);
    buf[0] = 0xdc;
    buf[1] = (unsigned char)((n - 3) >> 8);
    buf[2] = (unsigned char)(n - 3);
    memset(buf + 3, 0xc0, n - 3);
    before = heap_in_use();
    assert_int_equal(unpack((char *)buf, n, &z, &o), 0);
    assert_int_equal(o.via.array.size, n - 3);
    grew = heap_in_use() - before;
    if (grew > 64 * n)
        fail_msg("a %zu-byte frame made the decoder allocate %zu bytes", n, grew);
    msgpack_zone_destroy(&z);
    free(buf);
}

/* Declared lengths far beyond the bytes there: refused before anything is
 * allocated for them. */
static void test_huge_lengths(void **state)
{
    static const struct { const char *b; size_t n; } cases[] = { HUGE_LENGTHS_MSGPACK };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (unpack_copy(cases[i].b, cases[i].n, DEPTH) != JRPC_MPACK_EMALFORMED)
            fail_msg("case %zu decoded", i);
}

/* Nesting: max_depth containers (the innermost empty one counts) decode,
 * one more does not, whatever the limit (on the C stack's levels, at their
 * edge, grown on the heap); 100000 levels neither recurse nor crash. */
static void test_depth(void **state)
{
    static const size_t limits[] = { 1, 2, 31, 32, 33, 64, 65, 1100, 3000 };
    char *deep = malloc(100000);
    assert_non_null(deep);
    for (size_t k = 0; k < sizeof limits / sizeof *limits; k++) {
        size_t d = limits[k];
        memset(deep, (char)0x91, d);
        deep[d - 1] = (char)0x90;
        if (unpack_copy(deep, d, d) != 0)
            fail_msg("%zu arrays with limit %zu refused", d, d);
        memset(deep, (char)0x91, d + 1);
        deep[d] = (char)0x90;
        if (unpack_copy(deep, d + 1, d) != JRPC_MPACK_EMALFORMED)
            fail_msg("%zu arrays with limit %zu decoded", d + 1, d);
        /* The same as maps {nil: {nil: ... {}}}. */
        for (size_t i = 0; i < d - 1; i++) {
            deep[2 * i] = (char)0x81;
            deep[2 * i + 1] = (char)0xc0;
        }
        deep[2 * (d - 1)] = (char)0x80;
        if (unpack_copy(deep, 2 * d - 1, d) != 0)
            fail_msg("%zu maps with limit %zu refused", d, d);
        if (unpack_copy(deep, 2 * d - 1, d - 1 ? d - 1 : 1) != (d > 1 ? JRPC_MPACK_EMALFORMED : 0))
            fail_msg("%zu maps with limit %zu decoded", d, d - 1);
    }
    /* Scalars need no level at all. */
    assert_int_equal(unpack_copy("\xc0", 1, 1), 0);
    size_t n = 100000;
    fill_deep_arrays(deep, n);
    assert_int_equal(unpack_copy(deep, n, DEPTH), JRPC_MPACK_EMALFORMED);
    assert_int_equal(unpack_copy(deep, n, n), 0);
    free(deep);
}

static void test_map_get(void **state)
{
    /* {"a": 1, 2: "x", "ab": nil, "a": 3} */
    static const char m[] = "\x84\xa1" "a\x01\x02\xa1x\xa2" "ab\xc0\xa1" "a\x03";
    char *buf = malloc(sizeof m - 1);
    memcpy(buf, m, sizeof m - 1);
    msgpack_zone z;
    msgpack_zone_init(&z, 256);
    msgpack_object o;
    assert_int_equal(unpack(buf, sizeof m - 1, &z, &o), 0);
    const msgpack_object *v = jrpc_mpack_map_get(&o, "a");
    assert_non_null(v);
    assert_true(v->type == MSGPACK_OBJECT_POSITIVE_INTEGER && v->via.u64 == 1); /* the first */
    v = jrpc_mpack_map_get(&o, "ab");
    assert_true(v != NULL && v->type == MSGPACK_OBJECT_NIL);
    assert_null(jrpc_mpack_map_get(&o, ""));
    assert_null(jrpc_mpack_map_get(&o, "x"));      /* a value, not a key */
    assert_null(jrpc_mpack_map_get(&o, "abc"));
    assert_null(jrpc_mpack_map_get(NULL, "a"));
    assert_null(jrpc_mpack_map_get(&o.via.map.ptr[0].key, "a"));   /* not a map */
    msgpack_zone_destroy(&z);
    free(buf);
}

/* The head of a value, with nothing allocated: scalars whole, containers'
 * type and count only, the bytes it took. */
static void test_head(void **state)
{
    msgpack_object o;
    uint64_t count = 99;
    assert_int_equal(jrpc_mpack_head("\x93\x01\x02\x03", 4, &o, &count), 1);
    assert_int_equal(o.type, MSGPACK_OBJECT_ARRAY);
    assert_int_equal(count, 3);
    assert_int_equal(jrpc_mpack_head("\xde\x01\x00", 3, &o, &count), 3);
    assert_int_equal(o.type, MSGPACK_OBJECT_MAP);
    assert_int_equal(count, 256);
    assert_int_equal(jrpc_mpack_head("\xa2hi\xc0", 4, &o, &count), 3);
    assert_true(o.type == MSGPACK_OBJECT_STR && o.via.str.size == 2 && count == 0);
    assert_int_equal(jrpc_mpack_head("\xcd\x01\x02", 3, &o, &count), 3);
    assert_true(o.type == MSGPACK_OBJECT_POSITIVE_INTEGER && o.via.u64 == 258);
    assert_int_equal(jrpc_mpack_head("\xd0\xff", 2, &o, &count), 2);
    assert_true(o.type == MSGPACK_OBJECT_NEGATIVE_INTEGER && o.via.i64 == -1);
    assert_int_equal(jrpc_mpack_head("\xcd\x01", 2, &o, &count), JRPC_MPACK_EMALFORMED);
    assert_int_equal(jrpc_mpack_head("\xa2h", 2, &o, &count), JRPC_MPACK_EMALFORMED);
    assert_int_equal(jrpc_mpack_head("\xdc\x00", 2, &o, &count), JRPC_MPACK_EMALFORMED);
    assert_int_equal(jrpc_mpack_head("\xc1", 1, &o, &count), JRPC_MPACK_EMALFORMED);
    assert_int_equal(jrpc_mpack_head("\xc0", 0, &o, &count), JRPC_MPACK_EMALFORMED);
    assert_int_equal(jrpc_mpack_head(NULL, 0, &o, &count), JRPC_MPACK_EMALFORMED);
}

static void test_readers(void **state)
{
    msgpack_object s = { .type = MSGPACK_OBJECT_STR, .via.str = { 3, "abc" } };
    assert_true(jrpc_mpack_str_is(&s, "abc"));
    assert_false(jrpc_mpack_str_is(&s, "ab"));
    assert_false(jrpc_mpack_str_is(&s, "abcd"));
    msgpack_object b = { .type = MSGPACK_OBJECT_BIN, .via.bin = { 3, "abc" } };
    assert_false(jrpc_mpack_str_is(&b, "abc"));

    uint64_t v = 7;
    msgpack_object u = { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = UINT32_MAX };
    assert_true(jrpc_mpack_get_uint(&u, UINT32_MAX, &v) && v == UINT32_MAX);
    v = 7;
    assert_false(jrpc_mpack_get_uint(&u, UINT32_MAX - 1, &v));
    assert_true(v == 7);
    msgpack_object neg = { .type = MSGPACK_OBJECT_NEGATIVE_INTEGER, .via.i64 = -1 };
    assert_false(jrpc_mpack_get_uint(&neg, UINT64_MAX, &v));
    assert_false(jrpc_mpack_get_uint(&s, UINT64_MAX, &v));
}

/* The packer helpers write what msgpack-c's own packer writes. */
static void test_packer(void **state)
{
    jrpc_buf_t b;
    msgpack_packer pk;
    pk_init(&pk, &b);
    assert_int_equal(jrpc_mpack_put_str(&pk, "hi", 2), 0);
    assert_int_equal(msgpack_pack_uint16(&pk, 300), 0);
    assert_int_equal(b.len, 6);
    assert_memory_equal(b.p, "\xa2hi\xcd\x01\x2c", 6);
    jrpc_buf_dispose(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unpack_differential),
        cmocka_unit_test(test_unpack_formats),
        cmocka_unit_test(test_unpack_claims),
        cmocka_unit_test(test_huge_lengths),
        cmocka_unit_test(test_depth),
        cmocka_unit_test(test_map_get),
        cmocka_unit_test(test_head),
        cmocka_unit_test(test_readers),
        cmocka_unit_test(test_packer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
