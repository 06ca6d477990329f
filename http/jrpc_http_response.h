/* jrpc_http_response — the heads of HTTP/1.1 answers, as bytes (no I/O).
 *
 * One status table (reason phrases), the Date header's value cached per
 * second, and a head writer: status line, Date, Content-Type,
 * Content-Length, Connection, and the caller's extra header lines. The RPC
 * front door and the admin listener both write their heads here; what a
 * body says is theirs (the front: a JSON-RPC error object with id null,
 * written by proto's jrpc_batch_write_error; the admin: one line of text).
 * Never allocates, no snprintf on the usual path. */
#ifndef JRPC_HTTP_RESPONSE_H
#define JRPC_HTTP_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* The interim answer to Expect: 100-continue, whole. */
#define JRPC_HTTP_CONTINUE "HTTP/1.1 100 Continue\r\n\r\n"

/* The reason phrase of every status the broker sends ("OK", "Content Too
 * Large", ...); "" for any other (RFC 9112 allows an empty one). */
const char *jrpc_http_reason(unsigned status);

/* An IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"), formatted once per
 * second whatever the locale. Zero-initialised storage is a valid cache. */
#define JRPC_HTTP_DATE_LEN 29
typedef struct jrpc_http_date {
    int64_t sec;                          /* the second text[] shows (0: none yet) */
    char    text[JRPC_HTTP_DATE_LEN + 1]; /* NUL-terminated */
} jrpc_http_date_t;

/* The Date value for now, from d's cache when the second is the same.
 * Borrowed: valid until the next call with another second. */
const char *jrpc_http_date(jrpc_http_date_t *d, time_t now);

enum jrpc_http_conn {
    JRPC_HTTP_CONN_NONE,       /* no Connection header (HTTP/1.1 keep-alive) */
    JRPC_HTTP_CONN_CLOSE,      /* Connection: close */
    JRPC_HTTP_CONN_KEEP_ALIVE, /* Connection: keep-alive (to an HTTP/1.0 client) */
};

typedef struct jrpc_http_resp {
    uint16_t    status;
    const char *date;           /* the Date value (jrpc_http_date), or NULL: none */
    const char *content_type;   /* or NULL: none */
    uint64_t    content_length; /* the body's length (even for HEAD, which sends none) */
    uint8_t     connection;     /* enum jrpc_http_conn */
    const char *extra;          /* more header lines, each ending CRLF, or NULL */
    bool        chunked;        /* Transfer-Encoding: chunked instead of Content-Length
                                   (a streamed body, HTTP/1.1 only) */
} jrpc_http_resp_t;

/* Room enough for a head with a Date, a content type of 64 bytes and 128
 * bytes of extra lines. */
#define JRPC_HTTP_HEAD_MAX 400

/* Writes the head of r — status line, then Date, Content-Type and
 * Content-Length or Transfer-Encoding: chunked (these two not for 1xx, 204
 * and 304), Connection, the
 * extra lines, and the empty line — into dst[0, cap). Returns its length,
 * or -1 when it does not fit (dst is then garbage). */
int jrpc_http_response_head(char *dst, size_t cap, const jrpc_http_resp_t *r);

/* The head of the usual answer, "HTTP/1.1 200 OK", its Date and one
 * Content-Type up to the Content-Length value, kept built per second: the
 * front's answers copy it whole (a fixed size, no strlen) instead of
 * writing it line by line (bench/profile.sh http 1). Zero-initialised
 * storage is a valid cache once content_type is set. */
#define JRPC_HTTP_OK_CTYPE_MAX 48
#define JRPC_HTTP_OK_TEXT 144   /* what is copied: the prefix (134 bytes at most), then padding */
typedef struct jrpc_http_ok {
    const char      *content_type; /* set once by the owner; at most JRPC_HTTP_OK_CTYPE_MAX bytes */
    jrpc_http_date_t date;         /* the second text[] shows */
    uint16_t         len;          /* the prefix's length in text[] (0: none yet) */
    char             text[JRPC_HTTP_OK_TEXT]; /* "HTTP/1.1 200 OK\r\nDate: ...\r\nContent-Type: ...\r\nContent-Length: " */
} jrpc_http_ok_t;

/* Room jrpc_http_ok_head needs at dst. */
#define JRPC_HTTP_OK_MAX (JRPC_HTTP_OK_TEXT + 20 + 2)

/* Writes what jrpc_http_response_head writes for status 200 with the Date
 * of now, c's content type, content_length and no Connection line, up to
 * the extra lines: "HTTP/1.1 200 OK\r\nDate: D\r\nContent-Type: T\r\n
 * Content-Length: N\r\n". The caller adds its lines and the empty line.
 * dst must hold JRPC_HTTP_OK_MAX bytes. Returns the end of what it wrote. */
char *jrpc_http_ok_head(jrpc_http_ok_t *c, time_t now, uint64_t content_length, char *dst);

#endif
