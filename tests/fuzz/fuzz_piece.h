/* fuzz_piece.h — the buffer a harness feeds its pieces from: each piece is
 * copied to the start of one allocation made per run (or once per process:
 * fuzz_piece_room), and every byte after
 * it is poisoned (ASan), so that reading before or after the piece trips
 * ASan exactly as it would in a buffer of the piece's size — without a
 * malloc and a free per piece (under ASan each costs a stack unwind and a
 * quarantine entry, more than feeding a piece of a few bytes).
 * Only for the fuzz build (clang with ASan). */
#ifndef JRPC_FUZZ_PIECE_H
#define JRPC_FUZZ_PIECE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sanitizer/asan_interface.h>

typedef struct fuzz_piece {
    uint8_t *buf;    /* cap bytes; [0, shown) addressable, the rest poisoned */
    size_t   cap;
    size_t   shown;
} fuzz_piece_t;

/* Room for pieces of up to cap bytes. Returns 0, or -1 out of memory. */
static inline int fuzz_piece_init(fuzz_piece_t *f, size_t cap)
{
    f->cap = cap ? cap : 1;
    f->shown = 0;
    f->buf = malloc(f->cap);
    if (f->buf == NULL)
        return -1;
    ASAN_POISON_MEMORY_REGION(f->buf, f->cap);
    return 0;
}

/* p[0, k) (k <= cap) copied in; the result is addressable for exactly k
 * bytes. Borrowed: valid until the next fuzz_piece_put or _dispose. */
static inline const char *fuzz_piece_put(fuzz_piece_t *f, const uint8_t *p, size_t k)
{
    if (k > f->shown)
        ASAN_UNPOISON_MEMORY_REGION(f->buf, k);
    else if (k < f->shown)
        ASAN_POISON_MEMORY_REGION(f->buf + k, f->shown - k);
    f->shown = k;
    if (k > 0)
        memcpy(f->buf, p, k);
    return (const char *)f->buf;
}

/* For a harness that keeps one fuzz_piece_t (zeroed: static) for the whole
 * process: room for pieces of up to cap bytes, the allocation made again
 * only when it is too small (every byte past the piece is poisoned however
 * big it is, so a larger one finds what one of cap bytes would). Returns 0,
 * or -1 out of memory. */
static inline int fuzz_piece_room(fuzz_piece_t *f, size_t cap)
{
    if (f->buf != NULL && f->cap >= cap)
        return 0;
    if (f->buf != NULL) {
        ASAN_UNPOISON_MEMORY_REGION(f->buf, f->cap);
        free(f->buf);
    }
    return fuzz_piece_init(f, cap);
}

static inline void fuzz_piece_dispose(fuzz_piece_t *f)
{
    if (f->buf != NULL)
        ASAN_UNPOISON_MEMORY_REGION(f->buf, f->cap);
    free(f->buf);
    f->buf = NULL;
}

#endif
