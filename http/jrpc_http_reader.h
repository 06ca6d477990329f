/* jrpc_http_reader — an HTTP/1.1 request reader without sockets (RFC 9112).
 *
 * Feed it the bytes of one connection as they arrive, split anywhere; each
 * call consumes some of them and returns one event: a request's head is
 * ready, body bytes, the request is complete, a refusal, or "need more".
 * Pipelined requests follow one another on the same reader. It never
 * allocates, never blocks and never looks at a byte past the ones it is
 * given; everything it keeps between calls lives in the struct (bounded:
 * the head's values have fixed room, body bytes are never copied).
 *
 * Framing is our own RFC 9112 parser (docs/ARCHITECTURE.md, "HTTP: the
 * reader, the heads, the front"): a resumable state machine that keeps no
 * bytes of the input, only what it has learnt from them. Every line ends in
 * CRLF, no obs-fold or control bytes, header names are tokens, the request
 * line is method SP target SP HTTP-version, exactly one Host in HTTP/1.1,
 * Transfer-Encoding exactly "chunked" and never with Content-Length, one
 * Content-Length, HTTP/1.0 or 1.1 only, chunk data followed by CRLF,
 * trailers read by nobody. Limits are exact to the byte, so the verdict on a
 * stream never depends on how it was split.
 *
 * What a request may do is not decided here (methods, paths, media types,
 * Expect): the reader reports the head; the caller decides and may stop
 * feeding. A refusal from the reader always ends the connection: its
 * framing cannot be trusted, or its body will not be read.
 *
 *     jrpc_http_reader_t rd;
 *     jrpc_http_reader_init(&rd, &(jrpc_http_limits_t){ 16384, 1 << 20 });
 *     size_t off = 0;
 *     for (;;) {
 *         jrpc_http_event_t ev;
 *         off += jrpc_http_reader_feed(&rd, buf + off, len - off, &ev);
 *         if (ev.kind == JRPC_HTTP_NEED_MORE) break;      // all of buf consumed
 *         ...                                             // HEAD, BODY, END, REFUSE, CLOSED
 *     }
 *
 * Bytes not consumed must be fed again, first, in the next call (an event
 * may consume none: END after a body, a final REFUSE or CLOSED). */
#ifndef JRPC_HTTP_READER_H
#define JRPC_HTTP_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct jrpc_http_limits {
    uint32_t max_header_bytes; /* request line + headers, leading empty lines excluded,
                                  the final CRLF included (431 past it); also bounds
                                  each chunk-size line and the trailer section */
    uint64_t max_body;         /* body bytes (413 past it; a Content-Length or a chunk
                                  size that passes it is refused before its data) */
} jrpc_http_limits_t;

typedef enum jrpc_http_ev {
    JRPC_HTTP_NEED_MORE, /* every byte given was consumed; nothing to report */
    JRPC_HTTP_HEAD,      /* a request's head is in: jrpc_http_reader_head() */
    JRPC_HTTP_BODY,      /* ev.data, ev.len: the next body bytes, decoded from
                            chunked framing, inside the bytes this call consumed */
    JRPC_HTTP_END,       /* the request is complete, body included */
    JRPC_HTTP_REFUSE,    /* refused: ev.status, ev.reason. Final: later calls return
                            it again and consume nothing */
    JRPC_HTTP_CLOSED,    /* the last request ends the connection (Connection: close,
                            HTTP/1.0 without keep-alive, CONNECT): nothing more is
                            read. Final, like REFUSE */
} jrpc_http_ev_t;

typedef struct jrpc_http_event {
    jrpc_http_ev_t kind;
    const char    *data;   /* BODY: first byte (a pointer into the caller's input) */
    size_t         len;    /* BODY: bytes at data */
    uint16_t       status; /* REFUSE: 400, 413, 431 or 505 */
    bool           close;  /* REFUSE: the connection must close after the answer
                              (always, for a refusal of the reader) */
    const char    *reason; /* REFUSE: for the client and the log; valid while the
                              reader lives */
    bool           end;    /* BODY, after jrpc_http_reader_fuse_end: the request ends
                              with these bytes; this is its END too (none follows) */
} jrpc_http_event_t;

typedef enum jrpc_http_method {
    JRPC_HTTP_M_OTHER, JRPC_HTTP_M_GET, JRPC_HTTP_M_HEAD, JRPC_HTTP_M_POST,
    JRPC_HTTP_M_OPTIONS, JRPC_HTTP_M_CONNECT, JRPC_HTTP_M_DELETE,
} jrpc_http_method_t;

/* The header values the reader keeps, each with its own room. A value is
 * kept trimmed of spaces and tabs at both ends; one longer than its room is
 * kept cut (and says so). */
typedef enum jrpc_http_field {
    JRPC_HTTP_F_CONTENT_TYPE,  /* Content-Type (room 256) */
    JRPC_HTTP_F_ACCEPT,        /* Accept (256), repeated headers joined with ", " */
    JRPC_HTTP_F_UPGRADE,       /* Upgrade (64): the protocols offered, for conn_upgrade */
    JRPC_HTTP_F_TIMEOUT_MS,    /* X-JRPC-Timeout-Ms (16) */
    JRPC_HTTP_F_TRACEPARENT,   /* traceparent (128, the W3C bound) */
    JRPC_HTTP_F_KEY,           /* X-JRPC-Key (72) */
    JRPC_HTTP_F_TIMESTAMP,     /* X-JRPC-Timestamp (72) */
    JRPC_HTTP_F_NONCE,         /* X-JRPC-Nonce (72) */
    JRPC_HTTP_F_SIGNATURE,     /* X-JRPC-Signature (72) */
    JRPC_HTTP_F_WS_KEY,        /* Sec-WebSocket-Key (32: 24 base64 characters are due) */
    JRPC_HTTP_F_WS_VERSION,    /* Sec-WebSocket-Version (16) */
    JRPC_HTTP_F_WS_PROTOCOL,   /* Sec-WebSocket-Protocol (128), repeated headers joined
                                  with ", " */
    JRPC_HTTP_F_ORIGIN,        /* Origin (256) */
    JRPC_HTTP_F_MCP_VERSION,   /* MCP-Protocol-Version (32; docs/MCP.md) */
    JRPC_HTTP_F_AUTHORIZATION, /* Authorization (256: "Bearer " and a token; docs/SIGNING.md) */
    JRPC_HTTP_F_IDEM_KEY,      /* Idempotency-Key (264: 255 bytes, quoted; docs/SIGNING.md) */
    JRPC_HTTP_F_FORWARDED,     /* Forwarded (256), repeated headers joined with ", "
                                  (read only from a --trusted-proxy: docs/SIGNING.md) */
    JRPC_HTTP_F_XFF,           /* X-Forwarded-For (256), joined the same way */
    JRPC_HTTP_F_MCP_SESSION,   /* Mcp-Session-Id (128; docs/MCP.md) */
    JRPC_HTTP_NFIELDS
} jrpc_http_field_t;

#define JRPC_HTTP_TARGET_MAX 256 /* request-target bytes kept */
#define JRPC_HTTP_STORE      2632 /* the rooms above, together */
#define JRPC_HTTP_SAME_MAX   256  /* a head kept to compare the next one with (keep-alive
                                     clients send the same head, its Content-Length aside) */
#define JRPC_HTTP_SAME_TRIES 4    /* a connection whose heads differ stops keeping them */

typedef struct jrpc_http_value {
    const char *p;      /* the value (not NUL-terminated); NULL when absent */
    uint16_t    n;      /* its length */
    uint8_t     count;  /* how many such headers (255 for 255 or more) */
    bool        cut;    /* longer than its room: p holds its start */
} jrpc_http_value_t;

/* A request's head: valid from the HEAD event until the call that starts
 * the next request (so through END). */
typedef struct jrpc_http_head {
    uint8_t  method;          /* jrpc_http_method_t */
    uint8_t  version_minor;   /* HTTP/1.x: 0 or 1 (others are refused) */
    bool     keep_alive;      /* another request may follow on the connection */
    bool     chunked;         /* Transfer-Encoding: chunked */
    bool     has_length;      /* a Content-Length was given */
    uint64_t content_length;  /* its value; 0 when none */
    bool     expect_continue; /* Expect: 100-continue */
    bool     expect_other;    /* an Expect with any other value (or longer than 128 bytes) */
    bool     content_coded;   /* a Content-Encoding naming a coding other than identity
                                 (or longer than 128 bytes) */
    bool     conn_upgrade;    /* Connection names "upgrade" */
    bool     target_cut;      /* the target is longer than JRPC_HTTP_TARGET_MAX */
    uint16_t target_len;
    char     target[JRPC_HTTP_TARGET_MAX]; /* the request-target as sent (cut) */
    bool     path_ok;         /* jrpc_http_head_path's answer, found once at the head's end */
    uint16_t path_at, path_len; /* its path: target[path_at, path_at + path_len) */
    struct { uint16_t n; uint8_t count; bool cut; } f[JRPC_HTTP_NFIELDS]; /* see _value */
    char     store[JRPC_HTTP_STORE];       /* the kept values, each in its room */
} jrpc_http_head_t;

/* The reader: caller's storage, nothing to free; may be moved (memcpy)
 * between calls. The fields are private. */
typedef struct jrpc_http_reader {
    jrpc_http_limits_t lim;
    jrpc_http_head_t   head;
    uint8_t     phase;       /* jrpc_http_phase_t */
    uint8_t     body;        /* how the body is framed (reader.c: enum body) */
    uint8_t     st;          /* where in the head or the chunked framing (reader.c: enum st) */
    uint8_t     sub;         /* a state's own step: the version's byte, a chunk-size
                                line's part, the Connection matcher's */
    uint8_t     mname;       /* the method (reader.c: the methods table), 0 while read */
    uint8_t     mlen;        /* bytes of the method so far */
    char        mbuf[12];    /* the method so far (the longest is 11 bytes) */
    uint8_t     major, minor; /* the version as read (0.9 when there was none) */
    uint8_t     hid;         /* what the header being read is (reader.c: enum hid) */
    uint8_t     hname_len;   /* 255: longer than hname */
    bool        name_sp;     /* a space in this name (the tokens after it make it no name of ours) */
    bool        name_bad;    /* a header name with a space in it: 400 at the end of the head */
    bool        idle_cr;     /* between requests: the last byte was a CR */
    bool        trailer;     /* the header lines are a chunked body's trailer section */
    bool        cl_seen;     /* a Content-Length value has started (its first digit) */
    bool        cl_empty;    /* the Content-Length just read had no digit: 400 at the next byte */
    uint8_t     cl_state;    /* the Content-Length value: before, in digits, after them */
    uint8_t     n_cl, n_te, n_host;
    uint8_t     conn;        /* the Connection tokens seen: close, keep-alive, upgrade */
    uint8_t     cidx;        /* the Connection matcher: bytes of its word matched */
    bool        te_ok;       /* the Transfer-Encoding value is exactly "chunked" */
    bool        hval_cut;    /* the value being read is longer than hval */
    bool        keeping;     /* the value being read goes to its field's room */
    uint16_t    hval_len;
    uint16_t    val_start;   /* where in the room it started */
    uint16_t    val_prev;    /* a list field: the room's length before ", " */
    uint32_t    head_bytes;  /* bytes of this head so far */
    uint32_t    frame_bytes; /* chunked: framing bytes since the last chunk-size line */
    uint64_t    cl_val;      /* the Content-Length (or chunk size) being read */
    uint64_t    body_left;   /* identity: body bytes due; chunked: data left in the chunk */
    uint64_t    body_seen;   /* body bytes so far */
    uint16_t    final_status; /* REFUSE: the refusal, repeated by later calls */
    const char *final_reason;
    char        why[48];     /* a reason with a number in it */
    char        hname[24];   /* the name being read (if short enough to matter) */
    char        hval[128];   /* the value being read, of a header whose tokens we check
                                (Transfer-Encoding, Content-Encoding, Expect) */
    bool        fused_end;   /* jrpc_http_reader_fuse_end was called */
    const char *scan_buf;    /* head_scan: the bytes of this call (valid during it) */
    uint32_t    cl_at;       /* this head: where its Content-Length's first digit is */
    uint8_t     cl_n;        /* and how many digits it has */
    uint8_t     same_cl_n;   /* the kept head's Content-Length digits */
    uint16_t    same_cl_at;  /* where they start in same[] (0: no Content-Length) */
    uint16_t    same_len;    /* the last head's bytes in same[]; 0: none kept */
    uint8_t     same_misses; /* heads in a row that were not the kept one (at
                                JRPC_HTTP_SAME_TRIES none is kept any more) */
    bool        again;       /* the head last returned was the one before it read again
                                (jrpc_http_reader_again) */
    char        same[JRPC_HTTP_SAME_MAX]; /* the last head, when it may be read again as is:
                                read whole in one call, not chunked (reader.c: same_head) */
} jrpc_http_reader_t;

typedef enum jrpc_http_phase {
    JRPC_HTTP_IDLE,    /* between requests (empty lines may have been read) */
    JRPC_HTTP_IN_HEAD, /* inside a request line or headers */
    JRPC_HTTP_IN_BODY, /* the head was returned; its body (maybe empty) or END is due */
    JRPC_HTTP_DONE,    /* refused or closed: final */
} jrpc_http_phase_t;

/* Initialises r to read a connection from its first byte. The limits are
 * copied. */
void jrpc_http_reader_init(jrpc_http_reader_t *r, const jrpc_http_limits_t *lim);

/* From now on the BODY event that ends a Content-Length body says so (its
 * .end) and no END event follows it: one call less per request for a
 * caller that handles .end (the HTTP front); others get END as before. */
void jrpc_http_reader_fuse_end(jrpc_http_reader_t *r);

/* Reads from buf[0, len) (len may be 0) and fills *ev. Returns the bytes
 * consumed: for NEED_MORE, all of len; for the other events, the bytes up to
 * and including what the event covers (BODY: the data given, and framing
 * before and after it). Never blocks; never reads buf[len] or beyond. */
size_t jrpc_http_reader_feed(jrpc_http_reader_t *r, const char *buf, size_t len,
                             jrpc_http_event_t *ev);

/* A protocol switch (a WebSocket upgrade): call at HEAD, for a request
 * with no body (no Content-Length above 0, not chunked). The caller takes
 * the connection over from the byte after the head, which HEAD did not
 * consume: the reader ends (phase DONE) and every later call returns CLOSED
 * and consumes nothing, so no byte after the head is read as HTTP. Returns
 * 0, or -1 (nothing changed) when not at HEAD or the request has a body. */
int jrpc_http_reader_takeover(jrpc_http_reader_t *r);

/* Where the reader is (for the caller's timers: a head started, a body due). */
jrpc_http_phase_t jrpc_http_reader_phase(const jrpc_http_reader_t *r);

/* true when the head of the last HEAD event is the connection's previous
 * head read again: the same bytes, its Content-Length's digits aside (the
 * reader's kept copy, reader.c same_head). Then every field of
 * jrpc_http_reader_head() but content_length is as the previous HEAD left
 * it, so a caller may keep what it derived from that head (not from its
 * length) and skip deriving it again. false for any head read afresh. */
bool jrpc_http_reader_again(const jrpc_http_reader_t *r);

/* The current request's head (see jrpc_http_head_t for how long it is valid). */
const jrpc_http_head_t *jrpc_http_reader_head(const jrpc_http_reader_t *r);

/* Where each field's room starts in jrpc_http_head_t.store (private). */
extern const uint16_t jrpc_http_room_at[JRPC_HTTP_NFIELDS];

/* One kept header value of h (see jrpc_http_field_t). */
static inline jrpc_http_value_t jrpc_http_head_value(const jrpc_http_head_t *h,
                                                     jrpc_http_field_t f)
{
    jrpc_http_value_t v = { NULL, h->f[f].n, h->f[f].count, h->f[f].cut };
    if (v.count > 0)
        v.p = h->store + jrpc_http_room_at[f];
    return v;
}

/* The path of h's target, without a query and, for an absolute-form target
 * (http://host/path), without scheme and authority. false when the path was
 * cut (a cut query does not matter), or an absolute-form target has none.
 * Found once when the head is read (the front asks several times). */
static inline bool jrpc_http_head_path(const jrpc_http_head_t *h, const char **path, size_t *len)
{
    *path = h->target + h->path_at;
    *len = h->path_len;
    return h->path_ok;
}

/* The method's name ("POST", "M-SEARCH", ...); "" before the request line is read. */
const char *jrpc_http_head_method_name(const jrpc_http_reader_t *r);

/* Strips spaces and tabs at both ends of p[0, *n): a header value's
 * optional white space (RFC 9110 5.6.3), for the callers that split a value
 * into its elements (media types, parameters). */
void jrpc_http_trim(const char **p, size_t *n);

/* The elements of a list in a header value (RFC 9110 5.6.1) or of a query:
 * takes the element of *p[0, *n) up to the first sep (or the end) into *e,
 * *en, trimmed (empty elements come back with *en == 0), and moves *p, *n
 * past it and its separator. Returns false when nothing is left:
 *
 *     const char *e; size_t en;
 *     while (jrpc_http_next_elem(&p, &n, ',', &e, &en)) ...
 */
bool jrpc_http_next_elem(const char **p, size_t *n, char sep, const char **e, size_t *en);

/* The weight an Accept value gives media type `type` (exact, any case), in
 * thousandths (RFC 9110 12.5.1: q=0.5 is 500, no q is 1000): the highest of
 * the ranges that name it, or -1 when none does. With any_json, the ranges
 * of any type and of any application type count too (for application/json:
 * a client's default, never a request for a stream). */
int jrpc_http_accept_q(const char *p, size_t n, const char *type, bool any_json);

#endif
