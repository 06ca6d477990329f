/* jrpc_buf — a growable byte buffer and a chunked arena.
 *
 * Pure memory helpers shared by every proto module. Allocation failure is
 * reported, never hidden: functions return 0 or -ENOMEM. */
#ifndef JRPC_BUF_H
#define JRPC_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* For a function of the per-call path with more than one caller, which the
 * compiler would otherwise keep out of line (bench/profile.sh counts the
 * calls: issue 35's instructions per call). gcc and clang. */
#define JRPC_ALWAYS_INLINE inline __attribute__((always_inline))

/* A borrowed run of bytes. Never NUL-terminated unless said so. */
typedef struct jrpc_span {
    const char *p;  /* first byte (may be NULL when n == 0) */
    size_t      n;  /* length in bytes */
} jrpc_span_t;

/* Copies n bytes from src to dst, which may overlap: memmove, without the
 * call for the short runs of the hot path (names, ids, small params and
 * results: n <= 16 is a few loads, all before any store). */
static inline void jrpc_move(void *dst, const void *src, size_t n)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    if (n > 16) {
        memmove(d, s, n);
    } else if (n >= 8) {
        uint64_t a, b;
        memcpy(&a, s, 8);
        memcpy(&b, s + n - 8, 8);
        memcpy(d, &a, 8);
        memcpy(d + n - 8, &b, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, s, 4);
        memcpy(&b, s + n - 4, 4);
        memcpy(d, &a, 4);
        memcpy(d + n - 4, &b, 4);
    } else if (n >= 2) {
        uint16_t a, b;
        memcpy(&a, s, 2);
        memcpy(&b, s + n - 2, 2);
        memcpy(d, &a, 2);
        memcpy(d + n - 2, &b, 2);
    } else if (n == 1) {
        *d = *s;
    }
}

/* Whether the n bytes at a and b are the same: memcmp, without the call
 * for the short names of the hot path (n <= 16), by two overlapping words
 * as jrpc_move copies them. */
static inline bool jrpc_same(const void *a, const void *b, size_t n)
{
    const unsigned char *x = a, *y = b;
    if (n > 16)
        return memcmp(a, b, n) == 0;
    if (n >= 8) {
        uint64_t p, q, r, t;
        memcpy(&p, x, 8), memcpy(&q, y, 8), memcpy(&r, x + n - 8, 8), memcpy(&t, y + n - 8, 8);
        return ((p ^ q) | (r ^ t)) == 0;
    }
    if (n >= 4) {
        uint32_t p, q, r, t;
        memcpy(&p, x, 4), memcpy(&q, y, 4), memcpy(&r, x + n - 4, 4), memcpy(&t, y + n - 4, 4);
        return ((p ^ q) | (r ^ t)) == 0;
    }
    if (n >= 2) {
        uint16_t p, q, r, t;
        memcpy(&p, x, 2), memcpy(&q, y, 2), memcpy(&r, x + n - 2, 2), memcpy(&t, y + n - 2, 2);
        return ((p ^ q) | (r ^ t)) == 0;
    }
    return n == 0 || x[0] == y[0];
}

/* The decimal digits of v at w (no NUL, at most 20). Returns the end. */
static inline char *jrpc_u64_put(char *w, uint64_t v)
{
    size_t digits = 1;
    for (uint64_t t = v; t >= 10; t /= 10)
        digits++;
    char *e = w + digits;
    do {
        *--e = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return w + digits;
}

/* A growable buffer in caller storage. */
typedef struct jrpc_buf {
    char  *p;    /* bytes; NULL until the first write */
    size_t len;  /* bytes used */
    size_t cap;  /* bytes allocated */
} jrpc_buf_t;

void jrpc_buf_init(jrpc_buf_t *b);
void jrpc_buf_dispose(jrpc_buf_t *b);             /* frees; b may be reused after _init */
static inline void jrpc_buf_reset(jrpc_buf_t *b) { b->len = 0; }

/* Makes room for at least n more bytes. Returns 0 or -ENOMEM. */
int jrpc_buf_reserve(jrpc_buf_t *b, size_t n);
/* Appends n bytes. Returns 0 or -ENOMEM (b unchanged).
 * Inline: the common case, room already there, is a copy the compiler can
 * open-code for literal lengths (the reply writer makes several a call;
 * bench/README.md, "Profile"). */
int jrpc_buf_append_grow(jrpc_buf_t *b, const void *data, size_t n); /* the slow path */
static inline int jrpc_buf_append(jrpc_buf_t *b, const void *data, size_t n)
{
    if (n == 0)
        return 0;
    if (n > b->cap - b->len)
        return jrpc_buf_append_grow(b, data, n);
    memcpy(b->p + b->len, data, n);
    b->len += n;
    return 0;
}
/* Appends a NUL-terminated string (without the NUL). */
int jrpc_buf_puts(jrpc_buf_t *b, const char *s);
/* Appends one byte. */
int jrpc_buf_putc(jrpc_buf_t *b, char c);
/* Appends printf-formatted text (any length: the buffer grows). Returns 0,
 * -ENOMEM, or -EINVAL when the format fails. */
int jrpc_buf_printf(jrpc_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A chunked arena: many small allocations freed at once.
 * Memory from jrpc_arena_alloc() stays valid until _reset or _dispose. */
typedef struct jrpc_arena_chunk jrpc_arena_chunk_t;
struct jrpc_arena_chunk {
    jrpc_arena_chunk_t *next;  /* older chunk */
    size_t              used;  /* bytes handed out from data */
    size_t              size;  /* bytes in data */
    max_align_t         data[]; /* the memory */
};

/* Spare first chunks, kept between the arenas of one owner (one thread:
 * no lock) so that an arena made and disposed of per message does not cost
 * a malloc and a free of its first chunk each time: a chunk of the
 * standard first size goes back here when its arena is disposed of (up to
 * max), and the next arena's first chunk comes from here. */
typedef struct jrpc_arena_pool {
    jrpc_arena_chunk_t *spare;  /* a list through chunk->next */
    uint32_t            n, max;
} jrpc_arena_pool_t;
/* Frees the spare chunks. */
void  jrpc_arena_pool_dispose(jrpc_arena_pool_t *p);

typedef struct jrpc_arena {
    jrpc_arena_chunk_t *head;   /* current chunk (newest first) */
    size_t              first;  /* size of the first chunk to allocate */
    jrpc_arena_pool_t  *pool;   /* where first chunks come from and go back to, or NULL */
} jrpc_arena_t;

/* pool is NULL after init; the owner sets it. */
void  jrpc_arena_init(jrpc_arena_t *a, size_t first_chunk);
void  jrpc_arena_dispose(jrpc_arena_t *a);
/* Frees all but the first chunk and rewinds it, for reuse. */
void  jrpc_arena_reset(jrpc_arena_t *a);
/* Returns n bytes aligned to 8, or NULL on allocation failure. Inline
 * while the current chunk has room (every call's answer is allocated
 * here); a new chunk is the slow path. */
void *jrpc_arena_alloc_grow(jrpc_arena_t *a, size_t n); /* n rounded; the slow path */
static inline void *jrpc_arena_alloc(jrpc_arena_t *a, size_t n)
{
    if (n > SIZE_MAX - 7)
        return NULL;
    n = (n + 7) & ~(size_t)7;
    jrpc_arena_chunk_t *c = a->head;
    if (c == NULL || c->size - c->used < n)
        return jrpc_arena_alloc_grow(a, n);
    void *p = (char *)c->data + c->used;
    c->used += n;
    return p;
}
/* Copies n bytes into the arena. NULL on allocation failure. */
char *jrpc_arena_dup(jrpc_arena_t *a, const void *p, size_t n);

#endif
