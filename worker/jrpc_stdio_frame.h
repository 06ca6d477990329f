/* jrpc_stdio_frame — the pure parts of jrpc-stdio: reading messages out of
 * a child's stdout (NDJSON or LSP framing), writing them to its stdin, and
 * telling what a child's message is.
 *
 * No loop, no pipe, no process here: bytes in, messages out, so that the
 * readers can be fed in random pieces by the unit tests. Children are
 * untrusted: nothing a child writes makes these functions fail other than
 * by a return code, and a reader always resynchronises (at the next line
 * for NDJSON; after the announced body, or the next header block, for LSP).
 * What comes out (messages and errors, in order) does not depend on how the
 * bytes were cut into feeds (tests/fuzz/fuzz_stdio_frame.c checks it).
 *
 *   jrpc_frame_reader_t r;
 *   jrpc_frame_reader_init(&r, JRPC_FRAME_NDJSON, 16 << 20);
 *   jrpc_frame_feed(&r, p, n);               // what the pipe gave
 *   jrpc_span_t m;
 *   while ((rc = jrpc_frame_next(&r, &m)) != 0)
 *       if (rc > 0) ...use m (borrowed until the next feed)...
 *       else ...log rc (too big, bad header) and go on...
 *   jrpc_frame_reader_dispose(&r); */
#ifndef JRPC_STDIO_FRAME_H
#define JRPC_STDIO_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "jrpc_buf.h"

enum jrpc_frame_mode {
    JRPC_FRAME_NDJSON,  /* one message per line ('\n'; a '\r' before it is dropped) */
    JRPC_FRAME_LSP,     /* "Content-Length: N\r\n" (other headers ignored) "\r\n" then N bytes */
};

enum {
    JRPC_FRAME_ETOOBIG    = -5001,  /* a message over max bytes: skipped whole */
    JRPC_FRAME_EMALFORMED = -5002,  /* LSP: a header block without a valid Content-Length
                                       (skipped), or JRPC_FRAME_HEADER_MAX bytes without the
                                       end of one (all but their last 3 skipped) */
};

#define JRPC_FRAME_HEADER_MAX 8192  /* LSP header block, bytes */

typedef struct jrpc_frame_reader {
    int        mode;     /* enum jrpc_frame_mode */
    size_t     max;      /* largest message accepted, bytes */
    jrpc_buf_t buf;      /* bytes fed and not yet consumed, from off */
    size_t     off;      /* start of the unconsumed bytes in buf */
    size_t     scan;     /* bytes from off known to hold no '\n' (NDJSON), no header
                            block's end (LSP) */
    uint64_t   skip;     /* bytes still to drop (an oversized LSP body) */
    bool       skip_line; /* NDJSON: dropping an oversized line up to its '\n' */
} jrpc_frame_reader_t;

/* Prepares r (caller's storage) for mode with a message limit of max
 * bytes (>= 1). Pairs with jrpc_frame_reader_dispose(). */
void jrpc_frame_reader_init(jrpc_frame_reader_t *r, int mode, size_t max);

/* Frees r's buffer. */
void jrpc_frame_reader_dispose(jrpc_frame_reader_t *r);

/* Appends p[0..n) to what r holds. Messages returned by jrpc_frame_next()
 * before are invalid afterwards. Returns 0 or -ENOMEM. The reader never
 * holds more than about max + JRPC_FRAME_HEADER_MAX + n bytes. */
int jrpc_frame_feed(jrpc_frame_reader_t *r, const char *p, size_t n);

/* Takes the next complete message: returns 1 with *msg set (borrowed from
 * r, valid until the next jrpc_frame_feed(); NDJSON: the line without its
 * end of line; empty lines are skipped), 0 when more bytes are needed, or
 * JRPC_FRAME_ETOOBIG / JRPC_FRAME_EMALFORMED once per bad message (it is
 * skipped; call again). */
int jrpc_frame_next(jrpc_frame_reader_t *r, jrpc_span_t *msg);

/* Appends msg framed for mode to out: the line and '\n' (msg must hold no
 * '\n': compact JSON does not), or the Content-Length header and msg.
 * Returns 0 or -ENOMEM. */
int jrpc_frame_put(jrpc_buf_t *out, int mode, const char *msg, size_t n);

/* ---- what a child said ---- */

enum jrpc_child_msg_kind {
    JRPC_CHILD_GARBAGE,       /* not one JSON object */
    JRPC_CHILD_ANSWER,        /* a response whose id is one of ours (a uint64): id, result or error */
    JRPC_CHILD_BAD_ID,        /* a response whose id is not one we could have sent (raw: id_raw) */
    JRPC_CHILD_BAD_ANSWER,    /* a response with our id but neither result nor error (or both) */
    JRPC_CHILD_REQUEST,       /* a server→client request (method and id: id_raw) */
    JRPC_CHILD_NOTIFICATION,  /* method without id */
};

typedef struct jrpc_child_msg {
    int         kind;    /* enum jrpc_child_msg_kind */
    uint64_t    id;      /* ANSWER, BAD_ANSWER: the bridge's id */
    jrpc_span_t id_raw;  /* the "id" member's raw JSON text (n == 0: none) */
    jrpc_span_t method;  /* REQUEST, NOTIFICATION: raw JSON string of "method" */
    jrpc_span_t result;  /* ANSWER: the raw JSON of "result" (n == 0: an error answer) */
    jrpc_span_t error;   /* ANSWER: the raw JSON of "error" (n == 0: a result answer) */
} jrpc_child_msg_t;

/* Classifies the message p[0..n) a child wrote (spans borrowed from p).
 * Ids the bridge sends are decimal integers 1..2^63; anything else in
 * "id" (a string, a float, a negative number, null) is BAD_ID. Returns
 * m->kind. */
int jrpc_child_msg_parse(const char *p, size_t n, jrpc_child_msg_t *m);

/* Reads a JSON integer id 1..INT64_MAX written in plain decimal (what the
 * bridge sends) from raw; false for any other text. */
bool jrpc_child_id_parse(jrpc_span_t raw, uint64_t *id);

#endif
