#include "jrpc_buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void jrpc_buf_init(jrpc_buf_t *b)
{
    b->p = NULL;
    b->len = 0;
    b->cap = 0;
}

void jrpc_buf_dispose(jrpc_buf_t *b)
{
    free(b->p);
    jrpc_buf_init(b);
}

int jrpc_buf_reserve(jrpc_buf_t *b, size_t n)
{
    if (n <= b->cap - b->len)
        return 0;
    if (n > SIZE_MAX / 2 - b->len)
        return -ENOMEM;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL)
        return -ENOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

int jrpc_buf_append_grow(jrpc_buf_t *b, const void *data, size_t n)
{
    if (n == 0)
        return 0;
    if (jrpc_buf_reserve(b, n) < 0)
        return -ENOMEM;
    memcpy(b->p + b->len, data, n);
    b->len += n;
    return 0;
}

int jrpc_buf_puts(jrpc_buf_t *b, const char *s)
{
    return jrpc_buf_append(b, s, strlen(s));
}

int jrpc_buf_printf(jrpc_buf_t *b, const char *fmt, ...)
{
    char line[256];   /* most lines: one format, one copy */
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -EINVAL;
    if ((size_t)n < sizeof line)
        return jrpc_buf_append(b, line, (size_t)n);
    if (jrpc_buf_reserve(b, (size_t)n + 1) < 0)
        return -ENOMEM;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

int jrpc_buf_putc(jrpc_buf_t *b, char c)
{
    if (b->len == b->cap && jrpc_buf_reserve(b, 1) < 0)
        return -ENOMEM;
    b->p[b->len++] = c;
    return 0;
}

/* ---- arena ---- */

void jrpc_arena_init(jrpc_arena_t *a, size_t first_chunk)
{
    a->head = NULL;
    a->first = first_chunk ? first_chunk : 4096;
    a->pool = NULL;
}

void jrpc_arena_pool_dispose(jrpc_arena_pool_t *p)
{
    while (p->spare) {
        jrpc_arena_chunk_t *next = p->spare->next;
        free(p->spare);
        p->spare = next;
    }
    p->n = 0;
}

void jrpc_arena_dispose(jrpc_arena_t *a)
{
    jrpc_arena_chunk_t *c = a->head;
    jrpc_arena_pool_t *pool = a->pool;
    while (c) {
        jrpc_arena_chunk_t *next = c->next;
        if (pool && c->size == a->first && pool->n < pool->max) {
            c->next = pool->spare;
            pool->spare = c;
            pool->n++;
        } else {
            free(c);
        }
        c = next;
    }
    a->head = NULL;
}

void jrpc_arena_reset(jrpc_arena_t *a)
{
    jrpc_arena_chunk_t *c = a->head;
    if (c == NULL)
        return;
    /* Keep the oldest (first, smallest) chunk; free the rest. */
    while (c->next) {
        jrpc_arena_chunk_t *next = c->next;
        free(c);
        c = next;
    }
    c->used = 0;
    a->head = c;
}

void *jrpc_arena_alloc_grow(jrpc_arena_t *a, size_t n)
{
    jrpc_arena_chunk_t *c = a->head;
    size_t size = c ? c->size * 2 : a->first;
    if (size < n)
        size = n;
    if (size > SIZE_MAX - sizeof *c)
        return NULL;
    jrpc_arena_pool_t *pool = a->pool;
    if (pool && pool->spare && size == a->first && pool->spare->size == size) {
        c = pool->spare;
        pool->spare = c->next;
        pool->n--;
    } else if ((c = malloc(sizeof *c + size)) == NULL) {
        return NULL;
    }
    c->next = a->head;
    c->used = n;
    c->size = size;
    a->head = c;
    return c->data;
}

char *jrpc_arena_dup(jrpc_arena_t *a, const void *p, size_t n)
{
    char *d = jrpc_arena_alloc(a, n ? n : 1);
    if (d && n)
        memcpy(d, p, n);
    return d;
}
