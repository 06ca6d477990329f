/* Msgpack values as raw bytes for the differential tests of the in-place
 * readers (test_jrpc_json: results as JSON; test_jrpc_wire: RESPONSE frames):
 * every type in every encoding, hand-picked edge cases and random trees
 * from a fixed seed, valid or not. Include after <cmocka.h> and
 * mpack_helpers.h (its rng()). */
#ifndef MPACK_GEN_H
#define MPACK_GEN_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "jrpc_be.h"
#include "jrpc_buf.h"

static inline void gen_byte(jrpc_buf_t *b, unsigned v)
{
    char c = (char)(unsigned char)v;
    assert_int_equal(jrpc_buf_append(b, &c, 1), 0);
}

/* v big-endian in w bytes. */
static inline void gen_be(jrpc_buf_t *b, uint64_t v, int w)
{
    for (int i = w - 1; i >= 0; i--)
        gen_byte(b, (unsigned)(v >> (8 * i)) & 0xff);
}

/* A length-prefixed head: fix form when it fits and fix_max allows
 * (fix_base | n), else the 8/16/32-bit form picked at random among those
 * that fit (op8 0 when there is no 8-bit form). */
static inline void gen_len_head(jrpc_buf_t *b, uint32_t n, unsigned fix_base, uint32_t fix_max,
                                unsigned op8, unsigned op16, unsigned op32)
{
    unsigned r = (unsigned)(rng() % 4);
    if (n <= fix_max && r == 0) {
        gen_byte(b, fix_base | n);
    } else if (op8 && n < 256 && r == 1) {
        gen_byte(b, op8);
        gen_be(b, n, 1);
    } else if (n < 65536 && r != 3) {
        gen_byte(b, op16);
        gen_be(b, n, 2);
    } else {
        gen_byte(b, op32);
        gen_be(b, n, 4);
    }
}

/* An unsigned integer in a random encoding that holds it (positive fixint,
 * uint8..64, or int8..64 when it fits: msgpack-c reads those as positive). */
static inline void gen_uint(jrpc_buf_t *b, uint64_t v)
{
    for (;;) {
        switch (rng() % 9) {
        case 0: if (v < 128) { gen_byte(b, (unsigned)v); return; } break;
        case 1: if (v < 256) { gen_byte(b, 0xcc); gen_be(b, v, 1); return; } break;
        case 2: if (v < 65536) { gen_byte(b, 0xcd); gen_be(b, v, 2); return; } break;
        case 3: if (v <= UINT32_MAX) { gen_byte(b, 0xce); gen_be(b, v, 4); return; } break;
        case 4: gen_byte(b, 0xcf); gen_be(b, v, 8); return;
        case 5: if (v < 128) { gen_byte(b, 0xd0); gen_be(b, v, 1); return; } break;
        case 6: if (v < 32768) { gen_byte(b, 0xd1); gen_be(b, v, 2); return; } break;
        case 7: if (v < 2147483648u) { gen_byte(b, 0xd2); gen_be(b, v, 4); return; } break;
        case 8: if (v < ((uint64_t)1 << 63)) { gen_byte(b, 0xd3); gen_be(b, v, 8); return; } break;
        }
    }
}

static inline void gen_neg(jrpc_buf_t *b, int64_t v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    for (;;) {
        switch (rng() % 5) {
        case 0: if (v >= -32) { gen_byte(b, (unsigned)(u & 0xff)); return; } break;
        case 1: if (v >= -128) { gen_byte(b, 0xd0); gen_be(b, u, 1); return; } break;
        case 2: if (v >= -32768) { gen_byte(b, 0xd1); gen_be(b, u, 2); return; } break;
        case 3: if (v >= INT32_MIN) { gen_byte(b, 0xd2); gen_be(b, u, 4); return; } break;
        case 4: gen_byte(b, 0xd3); gen_be(b, u, 8); return;
        }
    }
}

/* Bytes for a str or bin payload: text, escapes and control characters,
 * multi-byte UTF-8, or now and then bytes that are not UTF-8. */
static inline uint32_t gen_payload(char *p, uint32_t max)
{
    static const char *const bits[] = { "a", "Z", "\"", "\\", "\n", "\x01", "\x1f", "\x7f",
                                        "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "/" };
    static const char *const bad[] = { "\xff", "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                                       "\xc3", "\x80" };
    uint32_t n = 0;
    uint32_t parts = (uint32_t)(rng() % 8);
    bool broken = rng() % 8 == 0;
    for (uint32_t i = 0; i < parts; i++) {
        const char *s = broken && rng() % 3 == 0 ? bad[rng() % 6] : bits[rng() % 12];
        size_t l = strlen(s);
        if (n + l > max)
            break;
        memcpy(p + n, s, l);
        n += (uint32_t)l;
    }
    return n;
}

static inline void gen_str(jrpc_buf_t *b, bool must_be_valid)
{
    char p[64];
    uint32_t n;
    do
        n = gen_payload(p, sizeof p);
    while (must_be_valid && !jrpc_json_utf8_valid(p, n));
    gen_len_head(b, n, 0xa0, 31, 0xd9, 0xda, 0xdb);
    assert_int_equal(jrpc_buf_append(b, p, n), 0);
}

static inline void gen_float(jrpc_buf_t *b)
{
    static const double specials[] = { 0.0, -0.0, 1.0, -1.5, 0.1, 1e300, -2.5e-308, 5e-324,
                                       123456789.0, 9007199254740993.0, 1e16, 3.4e38 };
    double d;
    switch (rng() % 5) {
    case 0: d = NAN; break;
    case 1: d = rng() % 2 ? INFINITY : -INFINITY; break;
    case 2: d = (double)(int64_t)rng() / (double)(rng() | 1); break;
    default: d = specials[rng() % 12]; break;
    }
    if (rng() % 2) {
        float f = (float)d;
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        gen_byte(b, 0xca);
        gen_be(b, u, 4);
    } else {
        uint64_t u;
        memcpy(&u, &d, sizeof u);
        gen_byte(b, 0xcb);
        gen_be(b, u, 8);
    }
}

static inline void gen_ext(jrpc_buf_t *b)
{
    static const unsigned fixext[] = { 0xd4, 0xd5, 0xd6, 0xd7, 0xd8 };
    unsigned k = (unsigned)(rng() % 6);
    uint32_t n;
    if (k < 5) {
        gen_byte(b, fixext[k]);
        n = 1u << k;
    } else {
        n = (uint32_t)(rng() % 20);
        unsigned w = (unsigned)(rng() % 3);
        gen_byte(b, 0xc7 + w);
        gen_be(b, n, 1 << w);
    }
    gen_byte(b, (unsigned)(rng() & 0xff));   /* ext type */
    for (uint32_t i = 0; i < n; i++)
        gen_byte(b, (unsigned)(rng() & 0xff));
}

/* One random value nested at most depth levels more; json_only leaves out
 * what has no JSON form (then mostly valid, for the positive cases). */
static inline void gen_value(jrpc_buf_t *b, int depth, bool json_only)
{
    unsigned k = (unsigned)(rng() % (depth > 0 ? 14 : 10));
    if (json_only && (k == 6 || k == 7))
        k = 5;
    switch (k) {
    case 0: gen_byte(b, 0xc0); break;
    case 1: gen_byte(b, rng() % 2 ? 0xc3 : 0xc2); break;
    case 2: gen_uint(b, rng() >> (rng() % 64)); break;
    case 3: gen_neg(b, -(int64_t)(rng() >> (1 + rng() % 63)) - 1); break;
    case 4: if (!json_only) { gen_float(b); break; } /* fall through */
    case 5: gen_str(b, json_only); break;
    case 6: {
        char p[40];
        uint32_t n = gen_payload(p, sizeof p);
        gen_len_head(b, n, 0, 0, 0xc4, 0xc5, 0xc6);
        assert_int_equal(jrpc_buf_append(b, p, n), 0);
        break;
    }
    case 7: gen_ext(b); break;
    case 8: gen_uint(b, rng() % 200); break;
    case 9: gen_str(b, true); break;
    case 10: case 11: {
        uint32_t n = (uint32_t)(rng() % 5);
        gen_len_head(b, n, 0x90, 15, 0, 0xdc, 0xdd);
        for (uint32_t i = 0; i < n; i++)
            gen_value(b, depth - 1, json_only);
        break;
    }
    default: {
        uint32_t n = (uint32_t)(rng() % 4);
        gen_len_head(b, n, 0x80, 15, 0, 0xde, 0xdf);
        for (uint32_t i = 0; i < n; i++) {
            if (json_only || rng() % 10)
                gen_str(b, json_only);
            else
                gen_value(b, 0, false);   /* a key that is no str, or a str that is no UTF-8 */
            gen_value(b, depth - 1, json_only);
        }
        break;
    }
    }
}

/* levels arrays (or maps {"k": ...}) around a scalar. */
static inline void gen_nested(jrpc_buf_t *b, int levels, bool maps)
{
    for (int i = 0; i < levels; i++) {
        if (maps) {
            gen_byte(b, 0x81);
            gen_byte(b, 0xa1);
            gen_byte(b, 'k');
        } else {
            gen_byte(b, 0x91);
        }
    }
    gen_byte(b, 0x07);
}

#endif
