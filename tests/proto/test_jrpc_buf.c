/* Tests of jrpc_buf: the growable buffer and the chunked arena. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>
#include "jrpc_buf.h"

static void test_buf_append(void **state)
{
    (void)state;
    jrpc_buf_t b;
    jrpc_buf_init(&b);
    assert_null(b.p);
    assert_int_equal(jrpc_buf_append(&b, "", 0), 0);
    assert_int_equal(b.len, 0);
    assert_int_equal(jrpc_buf_puts(&b, "hello"), 0);
    assert_int_equal(jrpc_buf_putc(&b, ' '), 0);
    assert_int_equal(jrpc_buf_append(&b, "world!", 5), 0);
    assert_int_equal(b.len, 11);
    assert_memory_equal(b.p, "hello world", 11);
    /* Growth keeps the bytes. */
    for (int i = 0; i < 10000; i++)
        assert_int_equal(jrpc_buf_putc(&b, (char)('a' + i % 26)), 0);
    assert_int_equal(b.len, 10011);
    assert_true(b.cap >= b.len);
    assert_memory_equal(b.p, "hello world", 11);
    assert_int_equal(b.p[11 + 27], 'b');
    jrpc_buf_reset(&b);
    assert_int_equal(b.len, 0);
    assert_int_equal(jrpc_buf_reserve(&b, 100000), 0);
    assert_true(b.cap - b.len >= 100000);
    assert_int_equal(jrpc_buf_reserve(&b, SIZE_MAX), -ENOMEM);
    jrpc_buf_dispose(&b);
    assert_null(b.p);
    assert_int_equal(b.cap, 0);
}

static void test_arena(void **state)
{
    (void)state;
    jrpc_arena_t a;
    jrpc_arena_init(&a, 64);
    char *first = jrpc_arena_alloc(&a, 1);
    assert_non_null(first);
    assert_int_equal((uintptr_t)first % 8, 0);
    char *p[100];
    for (int i = 0; i < 100; i++) {
        p[i] = jrpc_arena_alloc(&a, (size_t)i + 1);
        assert_non_null(p[i]);
        assert_int_equal((uintptr_t)p[i] % 8, 0);
        memset(p[i], i, (size_t)i + 1);
    }
    for (int i = 0; i < 100; i++)  /* no overlap */
        for (int k = 0; k <= i; k++)
            assert_int_equal((unsigned char)p[i][k], i);
    char *big = jrpc_arena_alloc(&a, 100000);  /* bigger than any chunk so far */
    assert_non_null(big);
    memset(big, 0xff, 100000);
    char *d = jrpc_arena_dup(&a, "abc", 3);
    assert_memory_equal(d, "abc", 3);
    assert_non_null(jrpc_arena_dup(&a, "", 0));
    jrpc_arena_reset(&a);
    char *again = jrpc_arena_alloc(&a, 1);
    assert_ptr_equal(again, first);  /* the first chunk is rewound and kept */
    jrpc_arena_dispose(&a);
    assert_null(a.head);
    jrpc_arena_dispose(&a);  /* idempotent */
}

/* jrpc_move is memmove: every length across its inline cases, with the
 * ranges apart and overlapping either way, against a byte-by-byte model. */
static void test_move(void **state)
{
    (void)state;
    for (size_t n = 0; n <= 40; n++) {
        for (int shift = -9; shift <= 9; shift++) {
            unsigned char buf[128], want[128];
            for (size_t i = 0; i < sizeof buf; i++)
                buf[i] = want[i] = (unsigned char)(i * 7 + 1);
            size_t src = 40, dst = (size_t)((int)src + shift);
            unsigned char tmp[64];
            for (size_t i = 0; i < n; i++)
                tmp[i] = want[src + i];
            for (size_t i = 0; i < n; i++)
                want[dst + i] = tmp[i];
            jrpc_move(buf + dst, buf + src, n);
            assert_memory_equal(buf, want, sizeof buf);
        }
    }
}

/* jrpc_same is memcmp() == 0: every length across its inline cases, equal,
 * and with one byte differing at each position in turn (each must be seen,
 * whichever of its words or bytes covers it), at an unaligned start. */
static void test_same(void **state)
{
    (void)state;
    unsigned char x[48], y[48];
    for (size_t i = 0; i < sizeof x; i++)
        x[i] = y[i] = (unsigned char)(i * 13 + 5);
    for (size_t n = 0; n <= 40; n++) {
        assert_true(jrpc_same(x + 3, y + 3, n));
        for (size_t k = 0; k < n; k++) {
            y[3 + k] ^= 0x20;
            assert_false(jrpc_same(x + 3, y + 3, n));
            assert_int_equal(jrpc_same(x + 3, y + 3, n), memcmp(x + 3, y + 3, n) == 0);
            y[3 + k] ^= 0x20;
        }
        if (n < sizeof x - 3) {   /* a byte just past the end does not count */
            y[3 + n] ^= 0x20;
            assert_true(jrpc_same(x + 3, y + 3, n));
            y[3 + n] ^= 0x20;
        }
    }
}

/* The arena pool: a disposed arena's first chunk goes back to it (its
 * bigger chunks do not), the next arena's first allocation reuses it, no
 * more than max are kept, and pool_dispose frees the rest (the ASan build
 * finds a leak or a double free). */
static void test_arena_pool(void **state)
{
    (void)state;
    jrpc_arena_pool_t pool = { .max = 2 };
    jrpc_arena_t a, b, c;
    jrpc_arena_init(&a, 256);
    a.pool = &pool;
    char *pa = jrpc_arena_alloc(&a, 100);
    assert_non_null(pa);
    assert_non_null(jrpc_arena_alloc(&a, 1000));   /* a second, bigger chunk */
    jrpc_arena_dispose(&a);
    assert_int_equal(pool.n, 1);                    /* only the first */
    jrpc_arena_init(&b, 256);
    b.pool = &pool;
    assert_ptr_equal(jrpc_arena_alloc(&b, 8), pa);  /* the same chunk, from its start */
    assert_int_equal(pool.n, 0);
    jrpc_arena_init(&c, 256);
    c.pool = &pool;
    assert_non_null(jrpc_arena_alloc(&c, 300));     /* larger than first: not pooled */
    jrpc_arena_dispose(&c);
    assert_int_equal(pool.n, 0);
    jrpc_arena_t more[3];
    for (int i = 0; i < 3; i++) {
        jrpc_arena_init(&more[i], 256);
        more[i].pool = &pool;
        assert_non_null(jrpc_arena_alloc(&more[i], 8));
    }
    for (int i = 0; i < 3; i++)
        jrpc_arena_dispose(&more[i]);
    assert_int_equal(pool.n, 2);                    /* max */
    jrpc_arena_dispose(&b);
    assert_int_equal(pool.n, 2);
    jrpc_arena_pool_dispose(&pool);
    assert_int_equal(pool.n, 0);
    assert_null(pool.spare);
}

/* jrpc_buf_printf: a short line, and one longer than its stack line (the
 * buffer grows and the text is formatted in place). */
static void test_buf_printf(void **state)
{
    (void)state;
    jrpc_buf_t b;
    jrpc_buf_init(&b);
    assert_int_equal(jrpc_buf_printf(&b, "a=%d,", 7), 0);
    char big[1000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(jrpc_buf_printf(&b, "%s|%u", big, 42u), 0);
    assert_int_equal(b.len, 4 + 999 + 3);
    assert_memory_equal(b.p, "a=7,x", 5);
    assert_memory_equal(b.p + b.len - 4, "x|42", 4);
    jrpc_buf_dispose(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buf_append),
        cmocka_unit_test(test_arena),
        cmocka_unit_test(test_move),
        cmocka_unit_test(test_same),
        cmocka_unit_test(test_arena_pool),
        cmocka_unit_test(test_buf_printf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
