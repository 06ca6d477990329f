/* Helpers shared by the msgpack unit tests (test_jrpc_mpack, test_jrpc_wire,
 * test_jrpc_header, test_jrpc_json, test_jrpc_json_write): hand-made
 * frames, spans, exact-size copies, a fixed-seed generator and the wrong
 * values a typed field is tried with. Include after <cmocka.h>. */
#ifndef MPACK_HELPERS_H
#define MPACK_HELPERS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <msgpack.h>
#include "jrpc_buf.h"
#include "jrpc_mpack.h"

#define NOSPAN ((jrpc_span_t){ NULL, 0 })

/* An exact-size heap copy of n bytes (never NUL-terminated): a read past
 * it trips ASan. */
static inline char *exact(const void *p, size_t n)
{
    char *b = malloc(n ? n : 1);
    assert_non_null(b);
    if (n)
        memcpy(b, p, n);
    return b;
}

/* A packer appending to b, for hand-made (possibly invalid) frames. */
static inline void pk_init(msgpack_packer *pk, jrpc_buf_t *b)
{
    jrpc_buf_init(b);
    jrpc_mpack_packer_init(pk, b);
}

static inline void pk_str(msgpack_packer *pk, const char *s)
{
    msgpack_pack_str(pk, strlen(s));
    msgpack_pack_str_body(pk, s, strlen(s));
}

static inline jrpc_span_t span(const char *s)
{
    return (jrpc_span_t){ s, strlen(s) };
}

static inline bool str_eq(const msgpack_object *o, const char *s)
{
    return o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(s) &&
           memcmp(o->via.str.ptr, s, o->via.str.size) == 0;
}

/* xorshift64*: a fixed-seed generator, the same cases on every run. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static inline uint64_t rng(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

/* A field replaced by each wrong value in turn (which < NBAD). */
static inline void pack_bad_value(msgpack_packer *pk, int which)
{
    switch (which) {
    case 0: msgpack_pack_nil(pk); break;
    case 1: msgpack_pack_true(pk); break;
    case 2: msgpack_pack_int(pk, -1); break;
    case 3: msgpack_pack_double(pk, 1.0); break;
    case 4: pk_str(pk, "1"); break;
    case 5: msgpack_pack_bin(pk, 1); msgpack_pack_bin_body(pk, "x", 1); break;
    case 6: msgpack_pack_array(pk, 0); break;
    case 7: msgpack_pack_map(pk, 0); break;
    case 8: msgpack_pack_ext(pk, 1, 1); msgpack_pack_ext_body(pk, "x", 1); break;
    case 9: msgpack_pack_uint64(pk, (uint64_t)UINT32_MAX + 1); break;
    case 10: msgpack_pack_uint8(pk, 0); break;
    case 11: pk_str(pk, ""); break;
    }
}
#define NBAD 12

/* Mutation rounds over a valid frame of n bytes: each round a copy with one
 * to four random bytes changed goes through check, which must not crash
 * (what it returns is not judged). */
static inline void check_mutations(const void *bytes, size_t n, int (*check)(const void *, size_t),
                                   int rounds)
{
    char *copy = malloc(n);
    assert_non_null(copy);
    for (int i = 0; i < rounds; i++) {
        memcpy(copy, bytes, n);
        int nflip = 1 + (int)(rng() % 4);
        for (int j = 0; j < nflip; j++)
            copy[rng() % n] = (char)rng();
        (void)check(copy, n);
    }
    free(copy);
}

/* n bytes of n - 1 nested one-element fixarrays around nil: deeper than any
 * decoder allows. */
static inline void fill_deep_arrays(char *p, size_t n)
{
    memset(p, (char)0x91, n - 1);
    p[n - 1] = (char)0xc0;
}

/* The same as maps ({nil: {nil: ...}}), the innermost one empty. */
static inline void fill_deep_maps(char *p, size_t n)
{
    for (size_t i = 0; i + 1 < n; i += 2) {
        p[i] = (char)0x81;
        p[i + 1] = (char)0xc0;
    }
    p[n - 1] = (char)0x80;
}

/* Declared lengths far beyond the bytes there, as { bytes, n } entries of a
 * case table: what any msgpack decoder must refuse ... */
#define HUGE_LENGTHS_MSGPACK                                                   \
    { "\xdd\xff\xff\xff\xff", 5 },                 /* array32 2^32-1 */        \
    { "\xdf\xff\xff\xff\xff", 5 },                 /* map32 */                 \
    { "\xdc\xff\xff", 3 },                         /* array16 */               \
    { "\xde\xff\xff", 3 },                         /* map16 */                 \
    { "\xdb\xff\xff\xff\xff", 5 },                 /* str32 */                 \
    { "\xc6\xff\xff\xff\xff", 5 },                 /* bin32 */                 \
    { "\xc9\xff\xff\xff\xff\x01", 6 },             /* ext32 */                 \
    { "\x9f\x01\x04", 3 },                         /* fixarray 15 */           \
    { "\x93\x01\x02\xdd\x00\x00\x00\x02\x94", 9 }  /* 2 elements, one half there */

/* ... and what a REQUEST frame's items add. */
#define HUGE_LENGTHS_REQUEST                                                   \
    { "\x93\x01\x02\xdd\xff\xff\xff\xff", 8 },     /* REQUEST, 2^32-1 items */ \
    { "\x93\x01\x02\x91\x94\x01\xdb\xff\xff\xff\xff", 11 }, /* method str32 */ \
    { "\x93\x01\x02\x91\x94\x01\xa1m\xdf\x7f\xff\xff\xff", 13 } /* params map32 */

#endif
