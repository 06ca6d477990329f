/* jrpc_front_http — see jrpc_front_http.h. */
#include "jrpc_front_http.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "jrpc_errors.h"
#include "jrpc_front_ws.h"
#include "jrpc_http_reader.h"
#include "jrpc_http_response.h"
#include "jrpc_proxy.h"
#include "jrpc_json.h"
#include "jrpc_listen.h"
#include "jrpc_log.h"
#include "jrpc_metrics.h"
#include "jrpc_status_page.h"

#define COMP          "front_http"
#define READ_BUF      65536  /* one shared read buffer for every connection */
#define PIPELINE_MAX  16     /* requests outstanding on a connection before we stop reading */
#define PIPELINE_LOW  8      /* ... and read again once at most this many are left */
#define OUT_MAX       (1u << 20) /* answer bytes a client is behind on before we stop parsing */
#define OUT_LOW       (OUT_MAX / 4) /* ... and parse again once at most this many are left */
#define WRITE_MAX     16     /* answers gathered into one write */
#define INLINE_BODY   256    /* answers this short are copied into the record */
#define LINGER_MS     2000   /* read and drop after our FIN, so our last answer is not reset */
#define FREE_RECS_MAX 1024   /* request records kept for reuse */

enum phase { PH_IDLE, PH_HEADERS, PH_BODY };
/* How a request's answers go out (Accept, docs/STREAMING.md). */
/* S_MCP: MCP's SSE, one "message" event per answer and no end event
 * (docs/MCP.md); the others docs/STREAMING.md. */
enum smode { S_NONE, S_SSE, S_NDJSON, S_JSONL, S_MCP };
enum rstate { R_PARSING, R_SUBMITTED, R_READY };
enum tmode { T_NONE, T_IDLE, T_HEADERS, T_BODY, T_WRITE, T_LINGER, T_HANDSHAKE, T_NMODES };
/* A connection sits in up to two timeout queues at once: one for what the
 * reading side waits for (idle, headers, body, linger), one for a write in
 * flight (the client is not reading), so neither deadline hides the other. */
enum tslot { TS_READ, TS_WRITE, TS_N };

typedef struct conn conn_t;

/* One request on a connection, from the end of its headers to the end of
 * its answer's write. Kept in the connection's FIFO, in request order. */
typedef struct req {
    struct req  *next;        /* FIFO link / free list link */
    conn_t      *conn;
    jrpc_body_t *handle;      /* R_SUBMITTED: what jrpc_broker_cancel() takes */
    uint8_t      state;       /* enum rstate */
    bool         close;       /* close the connection after this answer */
    bool         ka10;        /* HTTP/1.0 keep-alive: say so in the answer */
    bool         cont;        /* owes "100 Continue" when it reaches the head */
    bool         borrowed;    /* body points at the broker's reply (fast path only) */
    bool         hdr_built;   /* hdr/hlen are final */
    bool         head;        /* a HEAD request: the answer has no body */
    bool         preflight;   /* a CORS preflight: the 204 carries Access-Control-Allow-* */
    bool         mcp;         /* on the MCP path: an empty answer is 202 (docs/MCP.md) */
    uint16_t     cors;        /* 1 + index of the listed origin to allow; 0: no CORS headers */
    uint8_t      stream;      /* enum smode: answers sent as they complete (SSE, NDJSON) */
    bool         s_started;   /* streamed: the head is queued (first answer or the end) */
    bool         s_ended;     /* streamed: the last chunk is queued */
    uint16_t     status;      /* HTTP status of the answer */
    uint32_t     retry_after; /* 429: seconds for Retry-After (0: none, never passes) */
    bool         replayed;    /* the kept reply of an idempotency key: say so */
    const char  *body;        /* answer body: inline, heap (owned) or borrowed */
    size_t       blen;
    char        *heap;        /* owned copy of a long body, or NULL */
    size_t       off;         /* bytes of hdr + body already written */
    uint16_t     hlen;
    char         hdr[512];    /* status line and headers (CORS lines included) */
    char         inl[INLINE_BODY]; /* short bodies */
    jrpc_buf_t   s_out;       /* streamed: bytes queued, not yet handed to a write */
    jrpc_buf_t   s_wr;        /* streamed: bytes of the write in flight */
} req_t;

struct conn {
    uv_tcp_t        tcp;       /* first: the handle's address is the connection's */
    struct tlink {
        conn_t     *prev, *next; /* the front's queue for mode, by deadline */
        uint64_t    deadline;  /* uv_now() at which mode expires */
        uint8_t     mode;      /* enum tmode; T_NONE: in no queue */
    }               tl[TS_N];  /* enum tslot */
    size_t          wq_mark;   /* bytes libuv held for our write when TS_WRITE was armed */
    uv_write_t      wreq;
    uv_shutdown_t   sreq;
    jrpc_front_http_t *front;
    conn_t         *prev, *next; /* every open connection, for pause */
    /* the FIFO of requests */
    req_t          *head, *tail;
    uint32_t        nreq;      /* records in the FIFO */
    uint32_t        wrecs;     /* records covered by the write in flight */
    /* connection state */
    bool            reading;   /* uv_read_start is in effect */
    bool            writing;   /* a uv_write is in flight */
    bool            feeding;   /* inside feed(): do not re-enter */
    bool            no_more;   /* parse nothing more (closing after an answer) */
    bool            bp;        /* stopped reading: too many requests outstanding, or
                                  too many bytes queued (hold) */
    jrpc_broker_hold_t *hold;  /* what its answered bodies still hold in the broker */
    bool            closing;   /* front paused: close after the last answer */
    bool            finishing; /* FIN sent, lingering */
    bool            closed;    /* uv_close called */
    uint8_t         phase;     /* enum phase: the reader's, as the timers follow it */
    bool            dirty;     /* streamed bytes queued: on the front's flush list */
    bool            broken;    /* a stream ran out of memory: close at the next flush */
    conn_t         *dnext;     /* the front's flush list */
    uint8_t         stream;    /* enum smode the request being read asked for */
    /* the request being read */
    bool            discard;   /* refused softly: drop the body, answer at its end */
    bool            is_head;   /* the head is in and the method is HEAD */
    bool            mcp;       /* the target is the MCP path (opts.mcp_path) */
    uint32_t        timeout_ms; /* X-JRPC-Timeout-Ms of the request (0: none) */
    uint16_t        cors;      /* the request's listed Origin (req_t.cors), for its record */
    /* WebSocket: the upgrade, then the session */
    bool            upgrading; /* a WebSocket upgrade was accepted: HTTP is over */
    bool            wfailed;   /* a write of the session failed: close, do not linger */
    bool            wprogress; /* a session's write completed since T_WRITE was armed */
    uint32_t        nwrites;   /* the session's uv_writes in flight (each its own block) */
    jrpc_front_ws_hs_t *hs;    /* the handshake, while its authentication runs */
    jrpc_broker_auth_t *auth;  /* ... the broker's handle for it */
    jrpc_front_ws_t *ws;       /* the session once switched (NULL: HTTP) */
    uint8_t         peer_len;
    char            peer[56];  /* "ip:port" / "[ip6]:port" of the client, for the access log;
                                  a WebSocket's: the client a trusted proxy named (client_of) */
    bool            peer_trusted; /* the peer is a --trusted-proxy: its requests name the client */
    const char     *zc;        /* the whole body, still in the read buffer */
    size_t          zc_len;
    jrpc_buf_t      body;      /* the body, when it came in pieces */
    jrpc_buf_t      in;        /* bytes read but not parsed (backpressure) */
    jrpc_http_reader_t rd;     /* the request reader: framing, checks, the head */
    /* TLS (NULL: plaintext): the session under the bytes above */
    jrpc_tls_t     *tls;
    uint8_t         cert_len;  /* the verified client certificate's commonName (mutual TLS) */
    char            cert[64];
};

struct jrpc_front_http {
    uv_loop_t      *loop;
    uv_tcp_t        listener;
    bool            listening;  /* listener open (not yet closed) */
    bool            paused;
    bool            destroying;
    jrpc_broker_t  *broker;
    jrpc_front_http_opts_t opts;
    conn_t         *conns;      /* open connections */
    uint32_t        nconns;
    uint32_t        nalive;     /* connections not yet freed (close callbacks pending) */
    req_t          *free_recs;
    uint32_t        nfree;
    jrpc_buf_t      err;        /* error bodies are written here */
    jrpc_http_date_t date;      /* the Date header, once per second */
    uint64_t        refused;    /* connections past --max-conns */
    uint64_t        last_warn;  /* uv_now of the last accept-failure warning */
    uv_timer_t      tick;       /* fires at the earliest deadline of the queues */
    uint8_t         nhandles;   /* tick, flushq, ping: initialised and not yet closed */
    uint64_t        tick_at;    /* when tick is due; 0: not armed */
    struct { conn_t *head, *tail; } tq[T_NMODES]; /* per timeout kind, oldest first */
    uv_check_t      flushq;     /* after each poll: writes what streamed answers queued */
    conn_t         *dirty;      /* connections with streamed bytes to write */
    uv_timer_t      ping;       /* ": ping" on SSE streams every opts.stream_ping_ms */
    uint32_t        nstreams;   /* streamed answers begun and not ended */
    char            rbuf[READ_BUF];
    char           *pbuf;       /* TLS: plaintext of one read's records (READ_BUF; NULL: no TLS) */
};

static const char continue_line[] = JRPC_HTTP_CONTINUE;

static void conn_close(conn_t *c);
static void conn_finish(conn_t *c);
static void flush(conn_t *c);
static void feed_pending(conn_t *c);
static void on_write(uv_write_t *w, int status);
static void on_flushq(uv_check_t *h);

/* ---- timers ------------------------------------------------------------ */

/* One libuv timer per front, not per connection: each timeout kind has one
 * duration, so a queue per kind, appended at the tail, stays sorted by
 * deadline, and arming is O(1). A timer per connection cost three heap
 * operations per request, and with 10,000 idle connections in the heap
 * those were 14% of an HTTP call (bench/README.md, "Profile"). */
static void on_tick(uv_timer_t *t);
static int io_try_write(conn_t *c, const uv_buf_t *bufs, unsigned nb);
static int io_write(conn_t *c, uv_write_t *w, const uv_buf_t *bufs, unsigned nb, uv_write_cb cb);
static jrpc_span_t cert_key_id(const conn_t *c);

static enum tslot slot_of(enum tmode mode)
{
    return mode == T_WRITE ? TS_WRITE : TS_READ;
}

static void tq_remove(conn_t *c, enum tslot s)
{
    jrpc_front_http_t *f = c->front;
    struct tlink *l = &c->tl[s];
    if (l->mode == T_NONE)
        return;
    if (l->prev)
        l->prev->tl[s].next = l->next;
    else
        f->tq[l->mode].head = l->next;
    if (l->next)
        l->next->tl[s].prev = l->prev;
    else
        f->tq[l->mode].tail = l->prev;
    l->prev = l->next = NULL;
    l->mode = T_NONE;
}

static void tick_arm(jrpc_front_http_t *f, uint64_t at)
{
    uint64_t now = uv_now(f->loop);
    f->tick_at = at;
    uv_timer_start(&f->tick, on_tick, at > now ? at - now : 0, 0);
}

/* Arms mode's deadline in its slot (replacing what that slot held). */
static void arm(conn_t *c, enum tmode mode)
{
    const jrpc_front_http_opts_t *o = &c->front->opts;
    uint64_t ms = 0;
    enum tslot s = slot_of(mode);
    tq_remove(c, s);
    switch (mode) {
    case T_NONE:
    case T_NMODES:
        return;
    case T_IDLE: ms = o->idle_timeout_ms; break;
    case T_WRITE:
        ms = o->write_timeout_ms;
        c->wq_mark = uv_stream_get_write_queue_size((const uv_stream_t *)&c->tcp);
        break;
    case T_HEADERS: ms = o->header_timeout_ms; break;
    case T_BODY: ms = o->body_timeout_ms; break;
    case T_LINGER: ms = LINGER_MS; break;
    case T_HANDSHAKE: ms = o->tls_handshake_timeout_ms; break;
    }
    jrpc_front_http_t *f = c->front;
    if (c->closed)
        return; /* freed soon: in no queue */
    struct tlink *l = &c->tl[s];
    l->mode = (uint8_t)mode;
    l->deadline = uv_now(f->loop) + ms;
    l->prev = f->tq[mode].tail;
    l->next = NULL;
    if (l->prev)
        l->prev->tl[s].next = c;
    else
        f->tq[mode].head = c;
    f->tq[mode].tail = c;
    if (f->tick_at == 0 || l->deadline < f->tick_at)
        tick_arm(f, l->deadline);
}

/* Stops the reading side's deadline (the write deadline is on its own). */
static void disarm_read(conn_t *c)
{
    tq_remove(c, TS_READ);
}

/* ---- request records ---------------------------------------------------- */

static req_t *rec_new(conn_t *c)
{
    jrpc_front_http_t *f = c->front;
    req_t *r = f->free_recs;
    if (r != NULL) {
        f->free_recs = r->next;
        f->nfree--;
    } else if ((r = malloc(sizeof *r)) == NULL) {
        return NULL;
    }
    r->next = NULL;
    r->conn = c;
    r->handle = NULL;
    r->state = R_PARSING;
    r->close = r->ka10 = r->cont = r->borrowed = r->hdr_built = r->preflight = false;
    r->mcp = false;   /* headers_done says */
    r->cors = c->cors;
    r->stream = S_NONE;
    r->s_started = r->s_ended = false;
    jrpc_buf_init(&r->s_out);
    jrpc_buf_init(&r->s_wr);
    r->head = c->is_head;
    r->status = 0;
    r->retry_after = 0;
    r->replayed = false;
    r->body = NULL;
    r->blen = 0;
    r->heap = NULL;
    r->off = 0;
    r->hlen = 0;
    if (c->tail)
        c->tail->next = r;
    else
        c->head = r;
    c->tail = r;
    c->nreq++;
    return r;
}

static void rec_free(jrpc_front_http_t *f, req_t *r)
{
    free(r->heap);
    if (r->s_started && !r->s_ended)
        f->nstreams--;
    jrpc_buf_dispose(&r->s_out);
    jrpc_buf_dispose(&r->s_wr);
    if (f->nfree < FREE_RECS_MAX) {
        r->next = f->free_recs;
        f->free_recs = r;
        f->nfree++;
    } else {
        free(r);
    }
}

static req_t *rec_pop(conn_t *c)
{
    req_t *r = c->head;
    c->head = r->next;
    if (c->head == NULL)
        c->tail = NULL;
    c->nreq--;
    return r;
}

/* Sets the answer body: short ones are copied inline, long ones to the heap. */
static int rec_set_body(req_t *r, const char *p, size_t n)
{
    if (n <= INLINE_BODY) {
        memcpy(r->inl, p, n);
        r->body = r->inl;
    } else {
        if ((r->heap = malloc(n)) == NULL)
            return -ENOMEM;
        memcpy(r->heap, p, n);
        r->body = r->heap;
    }
    r->blen = n;
    r->borrowed = false;
    return 0;
}

/* Answer bytes the client is behind on: those of the ready answers while a
 * write is in flight (without one, flush has handed the socket all it took),
 * and streamed bytes queued. At most PIPELINE_MAX + 1 records: cheap. */
static size_t out_behind(const conn_t *c)
{
    size_t n = 0;
    for (const req_t *x = c->head; x != NULL; x = x->next) {
        n += x->s_out.len + (c->writing ? x->s_wr.len : 0);
        if (c->writing && x->state == R_READY)
            n += x->hlen + x->blen - x->off;
    }
    return n;
}

/* Backpressure: parse no more requests while too many are outstanding or
 * the client is too far behind reading their answers (then the socket is
 * not read either, TCP pushes back on the client, and a client that never
 * reads meets the write-stall deadline). */
static bool pipeline_full(const conn_t *c)
{
    return c->nreq >= PIPELINE_MAX || out_behind(c) > OUT_MAX || jrpc_broker_hold_full(c->hold);
}

static bool pipeline_low(const conn_t *c)
{
    return c->nreq <= PIPELINE_LOW && out_behind(c) <= OUT_LOW && !jrpc_broker_hold_full(c->hold);
}

/* The broker let go of enough of what c's bodies held (jrpc_broker_hold_new). */
static void on_hold_wake(void *ctx)
{
    conn_t *c = ctx;
    if (c->bp && !c->feeding && !c->closed && pipeline_low(c))
        feed_pending(c);
}

/* An HTTP-level answer with a JSON-RPC error body (id null). */
static void rec_error(conn_t *c, req_t *r, int status, int code, const char *data)
{
    jrpc_front_http_t *f = c->front;
    jrpc_metrics_front_refused(JRPC_TRANSPORT_HTTP, code);
    jrpc_status_page_refused(JRPC_TRANSPORT_HTTP, JRPC_BODY_INVALID, code, data);
    jrpc_buf_reset(&f->err);
    r->status = (uint16_t)status;
    if (jrpc_batch_write_error(&f->err, code, data) < 0 ||
        rec_set_body(r, f->err.p, f->err.len) < 0) {
        r->blen = 0; /* out of memory: the status alone */
        r->body = r->inl;
    }
    r->state = R_READY;
}

/* ---- answers ------------------------------------------------------------ */

/* Header lines some statuses carry besides the usual ones. */
static const char *extra_lines(unsigned status)
{
    switch (status) {
    case 405: return "Allow: POST\r\n";
    case 401: return "WWW-Authenticate: JRPC-HMAC-SHA256\r\nWWW-Authenticate: Bearer realm=\"jrpc\"\r\n";
    case 415: return "Accept-Encoding: identity\r\n";
    case 503: return "Retry-After: 1\r\n";
    case 426: return "Sec-WebSocket-Version: 13\r\n";   /* RFC 6455 4.4 */
    default:  return NULL;
    }
}

/* What a preflight's 204 allows: the one method and the request headers
 * the front reads (docs/WEBSOCKET.md, "CORS"). */
#define CORS_PREFLIGHT                                                                     \
    "Access-Control-Allow-Methods: POST\r\n"                                                \
    "Access-Control-Allow-Headers: Content-Type, Accept, X-JRPC-Key, X-JRPC-Timestamp, "    \
    "X-JRPC-Nonce, X-JRPC-Signature, X-JRPC-Timeout-Ms, traceparent, "                      \
    "MCP-Protocol-Version, Authorization, Idempotency-Key\r\n"                               \
    "Access-Control-Max-Age: 7200\r\n"

/* base's lines, then the CORS lines of r's listed origin, in buf. */
static const char *cors_lines(const jrpc_front_http_t *f, const req_t *r, const char *base,
                              char *buf, size_t cap)
{
    const char *o = f->opts.cors_origins[r->cors - 1];
    bool any = strcmp(o, "*") == 0;
    int n = snprintf(buf, cap, "%sAccess-Control-Allow-Origin: %s\r\n%s%s", base ? base : "", o,
                     any ? "" : "Vary: Origin\r\n", r->preflight ? CORS_PREFLIGHT : "");
    return n > 0 && (size_t)n < cap ? buf : base; /* origins are bounded: always fits */
}

static void build_header(conn_t *c, req_t *r)
{
    /* The last answer of a pausing front closes its connection. */
    if (c->closing && r->next == NULL)
        r->close = true;
    char xbuf[448], retry[40];
    const char *extra = extra_lines(r->status);
    if (r->status == 429 && r->retry_after) {
        snprintf(retry, sizeof retry, "Retry-After: %u\r\n", r->retry_after);
        extra = retry;
    } else if (r->replayed) {
        extra = "Idempotent-Replayed: true\r\n";
    }
    if (r->cors)
        extra = cors_lines(c->front, r, extra, xbuf, sizeof xbuf);
    jrpc_http_resp_t h = {
        .status = r->status,
        .date = jrpc_http_date(&c->front->date, time(NULL)),
        .content_type = "application/json",
        .content_length = r->blen, /* a HEAD's too: what a POST would have had */
        .connection = r->close ? JRPC_HTTP_CONN_CLOSE
                      : r->ka10 ? JRPC_HTTP_CONN_KEEP_ALIVE : JRPC_HTTP_CONN_NONE,
        .extra = extra,
    };
    int n = jrpc_http_response_head(r->hdr, sizeof r->hdr, &h);
    assert(n > 0);
    if (r->head)
        r->blen = 0;
    r->hlen = (uint16_t)n;
    r->hdr_built = true;
}

/* Adds what is left of r (from r->off) to bufs. */
static int add_bufs(req_t *r, uv_buf_t *bufs, int nb)
{
    size_t off = r->off;
    if (off < r->hlen)
        bufs[nb++] = uv_buf_init(r->hdr + off, (unsigned)(r->hlen - off));
    off = off > r->hlen ? off - r->hlen : 0;
    if (r->blen > off)
        bufs[nb++] = uv_buf_init((char *)r->body + off, (unsigned)(r->blen - off));
    return nb;
}

/* Pops a fully written record; false when the connection is done with. */
static bool written(conn_t *c)
{
    req_t *r = rec_pop(c);
    bool close = r->close;
    rec_free(c->front, r);
    if (close) {
        conn_finish(c);
        return false;
    }
    return true;
}

static void on_write(uv_write_t *w, int status)
{
    conn_t *c = w->handle->data;
    if (c->closed)
        return; /* cancelled by uv_close; the records are gone */
    c->writing = false;
    tq_remove(c, TS_WRITE);
    if (status < 0) {
        JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=write_failed error=%s", uv_err_name(status));
        conn_close(c);
        return;
    }
    uint32_t n = c->wrecs;
    c->wrecs = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!written(c))
            return;
    flush(c);
}

/* ---- streamed answers (SSE, NDJSON) -------------------------------------- */

/* A streamed answer at the head of the FIFO: what is queued goes out,
 * uv_try_write first, the rest with uv_write from s_wr (nothing appends to
 * it while it is written: new bytes go to s_out). Returns true when the
 * record is done and popped and flush may go on with the next one. */
static bool stream_flush(conn_t *c, req_t *r)
{
    r->s_wr.len = 0;   /* no write in flight: its bytes are out */
    if (r->s_out.len > 0) {
        uv_buf_t b = uv_buf_init(r->s_out.p, (unsigned)r->s_out.len);
        int n = io_try_write(c, &b, 1);
        if (n == UV_EAGAIN || n == UV_ENOSYS)
            n = 0;
        if (n < 0) {
            JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=write_failed error=%s", uv_err_name(n));
            conn_close(c);
            return false;
        }
        if ((size_t)n < r->s_out.len) {
            jrpc_buf_t t = r->s_wr;
            r->s_wr = r->s_out;
            r->s_out = t;
            r->s_out.len = 0;
            uv_buf_t rest = uv_buf_init(r->s_wr.p + n, (unsigned)(r->s_wr.len - (size_t)n));
            c->writing = true;
            c->wrecs = 0;
            if (io_write(c, &c->wreq, &rest, 1, on_write) < 0) {
                conn_close(c);
                return false;
            }
            arm(c, T_WRITE);
            return false;
        }
        r->s_out.len = 0;
    }
    return r->s_ended && written(c);
}

static const char *const stream_type[] = {
    [S_SSE] = "text/event-stream", [S_NDJSON] = "application/x-ndjson",
    [S_JSONL] = "application/jsonl", [S_MCP] = "text/event-stream",
};
#define IS_SSE(m) ((m) == S_SSE || (m) == S_MCP)

/* Appends one chunk of chunked transfer coding: a, p, z one after another. */
static int chunk_put(jrpc_buf_t *b, const char *a, size_t an, const char *p, size_t n,
                     const char *z, size_t zn)
{
    char size[24];
    int sn = snprintf(size, sizeof size, "%zx\r\n", an + n + zn);
    int rc = jrpc_buf_reserve(b, (size_t)sn + an + n + zn + 2);
    if (rc == 0) {
        jrpc_buf_append(b, size, (size_t)sn);
        jrpc_buf_append(b, a, an);
        jrpc_buf_append(b, p, n);
        jrpc_buf_append(b, z, zn);
        jrpc_buf_append(b, "\r\n", 2);
    }
    return rc;
}

static void on_ping(uv_timer_t *t);

/* The head of a streamed answer, when its first bytes are due: 200, the
 * stream's type, chunked. (A body refused whole never gets here: it is
 * answered as JSON with its own status, since the broker refuses before
 * any answer.) */
static int stream_begin(conn_t *c, req_t *r)
{
    jrpc_front_http_t *f = c->front;
    char hdr[512], xbuf[448];   /* (room for the CORS lines) */
    if (c->closing && r->next == NULL)
        r->close = true;
    const char *extra = IS_SSE(r->stream) ? "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n"
                                           : "Trailer: X-JRPC-Answered, X-JRPC-Timed-Out\r\n";
    if (r->cors)
        extra = cors_lines(f, r, extra, xbuf, sizeof xbuf);
    jrpc_http_resp_t h = {
        .status = 200,
        .date = jrpc_http_date(&f->date, time(NULL)),
        .content_type = stream_type[r->stream],
        .connection = r->close ? JRPC_HTTP_CONN_CLOSE : JRPC_HTTP_CONN_NONE,
        .extra = extra,
        .chunked = true,
    };
    int n = jrpc_http_response_head(hdr, sizeof hdr, &h);
    assert(n > 0);
    r->s_started = true;
    f->nstreams++;
    if (IS_SSE(r->stream) && f->opts.stream_ping_ms && !uv_is_active((uv_handle_t *)&f->ping))
        uv_timer_start(&f->ping, on_ping, f->opts.stream_ping_ms, f->opts.stream_ping_ms);
    return jrpc_buf_append(&r->s_out, hdr, (size_t)n);
}

/* Streamed bytes were queued on c: written after this loop turn's poll
 * (not from inside the broker's callback, which must not be re-entered by
 * a failed write closing the connection; and answers that come together
 * leave in one write). */
static void mark_dirty(conn_t *c)
{
    jrpc_front_http_t *f = c->front;
    if (c->dirty)
        return;
    c->dirty = true;
    c->dnext = f->dirty;
    f->dirty = c;
    uv_check_start(&f->flushq, on_flushq);
}

static void on_flushq(uv_check_t *h)
{
    jrpc_front_http_t *f = h->data;
    conn_t *c;
    while ((c = f->dirty) != NULL) {
        f->dirty = c->dnext;
        c->dirty = false;
        c->dnext = NULL;
        if (c->broken)
            conn_close(c);
        else if (!c->closed)
            flush(c);
    }
    uv_check_stop(h);
}

/* One answer of a streamed body, as it is in (jrpc_answer_fn). */
static void on_answer(void *ctx, uint32_t pos, const char *json, size_t len)
{
    req_t *r = ctx;
    conn_t *c = r->conn;
    int rc = r->s_started ? 0 : stream_begin(c, r);
    if (rc == 0 && r->stream == S_SSE) {
        char id[32];
        int n = snprintf(id, sizeof id, "id: %u\ndata: ", pos);
        rc = chunk_put(&r->s_out, id, (size_t)n, json, len, "\n\n", 2);
    } else if (rc == 0 && r->stream == S_MCP) {
        rc = chunk_put(&r->s_out, "event: message\ndata: ", 21, json, len, "\n\n", 2);
    } else if (rc == 0) {
        rc = chunk_put(&r->s_out, "", 0, json, len, "\n", 1);
    }
    if (rc < 0)
        c->broken = true;   /* out of memory: the stream is cut, the client sees it end early */
    mark_dirty(c);
}

/* The end of a streamed body: SSE's end event with the counts, NDJSON's
 * counts in the trailer, MCP's nothing; then the last chunk. */
static int stream_end(conn_t *c, req_t *r, jrpc_outcome_t out, const char *summary, size_t len)
{
    int rc = r->s_started ? 0 : stream_begin(c, r);
    if (rc == 0 && r->stream == S_SSE) {
        rc = chunk_put(&r->s_out, "event: end\ndata: ", 17, summary, len, "\n\n", 2);
        if (rc == 0)
            rc = jrpc_buf_puts(&r->s_out, "0\r\n\r\n");
    } else if (rc == 0 && r->stream == S_MCP) {
        rc = jrpc_buf_puts(&r->s_out, "0\r\n\r\n");
    } else if (rc == 0) {
        char t[96];
        int n = snprintf(t, sizeof t, "0\r\nX-JRPC-Answered: %u\r\nX-JRPC-Timed-Out: %u\r\n\r\n",
                         out.answered, out.timed_out);
        rc = jrpc_buf_append(&r->s_out, t, (size_t)n);
    }
    r->s_ended = true;
    c->front->nstreams--;
    return rc;
}

/* Every stream_ping_ms: a comment on each SSE stream in progress, so that
 * proxies with an idle timeout keep it (the WHATWG parser ignores it). */
static void on_ping(uv_timer_t *t)
{
    jrpc_front_http_t *f = t->data;
    if (f->nstreams == 0) {
        uv_timer_stop(t);
        return;
    }
    for (conn_t *c = f->conns, *next; c != NULL; c = next) {
        next = c->next;
        req_t *r = c->head;
        if (r == NULL || !IS_SSE(r->stream) || !r->s_started || r->s_ended)
            continue;
        if (chunk_put(&r->s_out, ": ping\n\n", 8, "", 0, "", 0) < 0)
            c->broken = true;
        mark_dirty(c);
    }
}

/* Writes every answer that is ready at the head of the FIFO: uv_try_write
 * first (no request, no copy), the rest with uv_write. Answers leave in
 * request order; a later one that is ready waits for the earlier ones. */
static void flush(conn_t *c)
{
    while (!c->writing && !c->closed && !c->finishing && c->head != NULL) {
        req_t *r = c->head;
        if (r->s_started) {
            if (!stream_flush(c, r))
                break;
            continue;
        }
        if (r->state != R_READY) {
            if (r->cont) { /* the body's sender waits for this */
                r->cont = false;
                uv_buf_t b = uv_buf_init((char *)continue_line, sizeof continue_line - 1);
                c->writing = true;
                c->wrecs = 0;
                if (io_write(c, &c->wreq, &b, 1, on_write) < 0) {
                    conn_close(c);
                    return;
                }
                arm(c, T_WRITE);
            }
            break;
        }
        uv_buf_t bufs[2 * WRITE_MAX];
        int nb = 0, nrec = 0;
        for (req_t *x = r; x != NULL && x->state == R_READY && nrec < WRITE_MAX; x = x->next) {
            if (!x->hdr_built)
                build_header(c, x);
            nb = add_bufs(x, bufs, nb);
            nrec++;
            if (x->close)
                break;
        }
        int n = io_try_write(c, bufs, (unsigned)nb);
        if (n == UV_EAGAIN || n == UV_ENOSYS)
            n = 0;
        if (n < 0) {
            JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=write_failed error=%s", uv_err_name(n));
            conn_close(c);
            return;
        }
        size_t left = (size_t)n;
        int done = 0;
        while (done < nrec) {
            req_t *x = c->head;
            size_t rem = x->hlen + x->blen - x->off;
            if (left < rem) {
                x->off += left;
                break;
            }
            left -= rem;
            done++;
            if (!written(c))
                return;
        }
        if (done == nrec)
            continue; /* all out: more may be ready */
        /* The socket is full: hand the rest to libuv, which keeps the
         * bufs until written; borrowed bodies must be copied first. */
        nb = 0;
        int k = 0;
        for (req_t *x = c->head; k < nrec - done; x = x->next, k++) {
            if (x->borrowed && c->tls == NULL) {   /* (TLS encrypts it at once) */
                const char *p = x->body;
                if (rec_set_body(x, p, x->blen) < 0) {
                    conn_close(c);
                    return;
                }
            }
            nb = add_bufs(x, bufs, nb);
        }
        c->writing = true;
        c->wrecs = (uint32_t)(nrec - done);
        if (io_write(c, &c->wreq, bufs, (unsigned)nb, on_write) < 0) {
            conn_close(c);
            return;
        }
        /* A client that does not read: this deadline holds whatever the
         * reading side arms meanwhile (issue 19). */
        arm(c, T_WRITE);
        break;
    }
    if (c->closed || c->finishing || c->writing)
        return;
    if (c->head == NULL) {
        if (c->closing) {
            conn_finish(c);
            return;
        }
        if (c->phase == PH_IDLE && c->tl[TS_READ].mode != T_IDLE)
            arm(c, T_IDLE);
    }
    if (c->bp && !c->feeding && pipeline_low(c))
        feed_pending(c);
}

/* The one table from the broker's outcome to the HTTP status (an empty
 * answer is 204 whatever its class). 401 also carries WWW-Authenticate and
 * 503 Retry-After: 1 (build_header). Busy stays 503: 429 would be the
 * finer word, but clients and tests know 503. */
static const uint16_t status_of[JRPC_BODY_NOUTCOMES] = {
    [JRPC_BODY_OK] = 200,           [JRPC_BODY_INVALID] = 200,
    [JRPC_BODY_BUSY] = 503,         [JRPC_BODY_UNAUTHORIZED] = 401,
    [JRPC_BODY_REPLAYED] = 409,     [JRPC_BODY_UNAVAILABLE] = 503, [JRPC_BODY_LIMITED] = 429,
    [JRPC_BODY_MISMATCH] = 422,     [JRPC_BODY_INPROGRESS] = 409,
    [JRPC_BODY_CANCELLED] = 500,    /* never replied */
};

/* The broker's answer to one body. May run inside jrpc_broker_submit(). */
static void on_reply(void *ctx, jrpc_outcome_t out, const char *reply, size_t len)
{
    req_t *r = ctx;
    conn_t *c = r->conn;
    r->handle = NULL;
    r->state = R_READY;
    if (r->stream == S_MCP && !r->s_started && out.cls == JRPC_BODY_OK)
        len = 0;   /* a notification, no answer: MCP's 202, not an empty stream */
    else if (r->stream && out.cls == JRPC_BODY_OK) {   /* the end of a streamed body */
        if (stream_end(c, r, out, reply, len) < 0)
            c->broken = true;
        mark_dirty(c);
        return;
    }
    r->stream = S_NONE;   /* refused whole (invalid too), before any answer: plain JSON */
    if (out.cls == JRPC_BODY_BUSY)
        JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=refused status=503 reason=\"busy\"");
    r->replayed = out.replayed;
    if (len == 0) {
        r->status = r->mcp ? 202 : 204;   /* MCP: a notification is "202 Accepted" */
    } else {
        r->status = status_of[out.cls];
        r->retry_after = out.retry_after_s;
        if (len > INLINE_BODY && r == c->head && !c->writing) {
            /* Fast path: written from the broker's buffer, copied only if
             * the socket does not take it all (flush does that). */
            r->body = reply;
            r->blen = len;
            r->borrowed = true;
        } else if (rec_set_body(r, reply, len) < 0) {
            rec_error(c, r, 500, JRPC_INTERNAL_ERROR, "out of memory");
        }
    }
    flush(c);
}

/* ---- closing ------------------------------------------------------------ */

static void on_tick_closed(uv_handle_t *h);

static void front_maybe_free(jrpc_front_http_t *f)
{
    if (!f->destroying || f->nalive > 0 || f->listening)
        return;
    if (f->nhandles > 0) {
        if (!uv_is_closing((uv_handle_t *)&f->tick)) {
            uv_close((uv_handle_t *)&f->tick, on_tick_closed);
            uv_close((uv_handle_t *)&f->flushq, on_tick_closed);
            uv_close((uv_handle_t *)&f->ping, on_tick_closed);
        }
        return;
    }
    req_t *r;
    while ((r = f->free_recs) != NULL) {
        f->free_recs = r->next;
        free(r);
    }
    jrpc_buf_dispose(&f->err);
    free(f->pbuf);
    free(f);
}

static void on_tick_closed(uv_handle_t *h)
{
    jrpc_front_http_t *f = h->data;
    f->nhandles--;
    front_maybe_free(f);
}

static void on_tcp_closed(uv_handle_t *h)
{
    conn_t *c = h->data;
    jrpc_front_http_t *f = c->front;
    if (c->dirty)   /* not expected (the list is walked before close callbacks run) */
        for (conn_t **pp = &f->dirty; *pp; pp = &(*pp)->dnext)
            if (*pp == c) {
                *pp = c->dnext;
                break;
            }
    jrpc_buf_dispose(&c->body);
    jrpc_buf_dispose(&c->in);
    jrpc_tls_free(&c->tls);
    free(c->hs);
    free(c);
    f->nalive--;
    front_maybe_free(f);
}

/* Closes at once: requests still with the broker are cancelled, answers not
 * yet written are dropped. */
static void conn_close(conn_t *c)
{
    if (c->closed)
        return;
    tq_remove(c, TS_READ);
    tq_remove(c, TS_WRITE);
    c->closed = true;
    jrpc_front_http_t *f = c->front;
    while (c->head != NULL) {
        req_t *r = rec_pop(c);
        if (r->state == R_SUBMITTED)
            jrpc_broker_cancel(f->broker, r->handle);
        rec_free(f, r);
    }
    jrpc_broker_hold_release(&c->hold);
    /* A WebSocket's bodies in flight are cancelled with its session. */
    jrpc_front_ws_destroy(&c->ws);
    if (c->auth) {
        jrpc_broker_authenticate_cancel(f->broker, c->auth);
        c->auth = NULL;
    }
    if (c->prev)
        c->prev->next = c->next;
    else
        f->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    f->nconns--;
    jrpc_metrics.http_connections--;
    uv_close((uv_handle_t *)&c->tcp, on_tcp_closed);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    conn_t *c = h->data;
    *buf = uv_buf_init(c->front->rbuf, READ_BUF);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void tls_send(conn_t *c);

static void read_start(conn_t *c)
{
    if (!c->reading && !c->closed) {
        if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0) {
            conn_close(c);
            return;
        }
        c->reading = true;
    }
}

static void read_stop(conn_t *c)
{
    if (c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
}

static void on_shutdown(uv_shutdown_t *sr, int status)
{
    conn_t *c = sr->handle->data;
    if (c->closed)
        return;
    if (status < 0) {
        conn_close(c);
        return;
    }
    /* Our FIN is out after the last answer: read and drop what the client
     * still sends until it closes, so the kernel does not answer its bytes
     * with a reset that could destroy our answer in flight. */
    read_start(c);
    arm(c, T_LINGER);
}

/* Closes gracefully after the last answer: FIN after the writes, linger. */
static void conn_finish(conn_t *c)
{
    if (c->finishing || c->closed)
        return;
    c->finishing = true;
    c->no_more = true;
    jrpc_front_http_t *f = c->front;
    while (c->head != NULL) { /* nothing follows an answer that closes */
        req_t *r = rec_pop(c);
        if (r->state == R_SUBMITTED)
            jrpc_broker_cancel(f->broker, r->handle);
        rec_free(f, r);
    }
    if (c->tls) {   /* our close_notify goes before the FIN (nothing after a failure) */
        jrpc_tls_close(c->tls);
        tls_send(c);
    }
    if (uv_shutdown(&c->sreq, (uv_stream_t *)&c->tcp, on_shutdown) < 0) {
        conn_close(c);
        return;
    }
    /* A WebSocket after our close: read and drop at once, not only after
     * the FIN. A client that is still sending (maybe while the session had
     * stopped reading) would otherwise block on its send, never read our
     * close, and hold the connection until the write-stall deadline. */
    if (c->upgrading)
        read_start(c);
}

/* c's deadline has passed in the given mode (already out of its queue). */
static void expire(conn_t *c, enum tmode mode)
{
    switch (mode) {
    case T_HEADERS:
    case T_BODY: {
        JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=refused status=408 reason=\"%s timeout\"",
                 mode == T_HEADERS ? "header" : "body");
        req_t *r = c->tail && c->tail->state == R_PARSING ? c->tail : rec_new(c);
        if (r == NULL) {
            conn_close(c);
            return;
        }
        rec_error(c, r, 408, JRPC_INVALID_REQUEST, "request not received in time");
        r->close = true;
        c->no_more = true;
        c->phase = PH_IDLE;
        read_stop(c);
        flush(c);
        break;
    }
    case T_WRITE: {
        if (!c->writing)
            break; /* done meanwhile (not expected: on_write disarms) */
        /* Stalled means no progress: a slow reader that takes bytes keeps
         * its connection (nginx's send_timeout is the same rule). */
        size_t q = uv_stream_get_write_queue_size((const uv_stream_t *)&c->tcp);
        if (q < c->wq_mark || c->wprogress) { /* (a WebSocket's writes: one done since) */
            c->wprogress = false;
            arm(c, T_WRITE);
            break;
        }
        JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=write_stalled queued=%zu pending=%u", q, c->nreq);
        conn_close(c);
        break;
    }
    case T_HANDSHAKE:
        jrpc_metrics.tls_failed++;
        JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=tls_failed reason=\"handshake timeout\" peer=%.*s",
                 (int)c->peer_len, c->peer);
        conn_close(c);
        break;
    default:
        conn_close(c);
        break;
    }
}

static void on_tick(uv_timer_t *t)
{
    jrpc_front_http_t *f = t->data;
    uint64_t now = uv_now(f->loop);
    f->tick_at = 0;
    for (int m = T_NONE + 1; m < T_NMODES; m++) {
        enum tslot s = slot_of((enum tmode)m);
        conn_t *c;
        /* expire() may close c or arm it again (at a later deadline, at the tail). */
        while ((c = f->tq[m].head) != NULL && c->tl[s].deadline <= now) {
            tq_remove(c, s);
            expire(c, (enum tmode)m);
        }
    }
    uint64_t next = 0;
    for (int m = T_NONE + 1; m < T_NMODES; m++) {
        const conn_t *h = f->tq[m].head;
        uint64_t d = h ? h->tl[slot_of((enum tmode)m)].deadline : 0;
        if (h && (next == 0 || d < next))
            next = d;
    }
    if (next != 0 && (f->tick_at == 0 || next < f->tick_at))
        tick_arm(f, next);
}

/* ---- requests: the reader's verdicts ------------------------------------- */

static bool eq_nocase(const char *p, size_t n, const char *lit)
{
    return strlen(lit) == n && strncasecmp(p, lit, n) == 0;
}

/* application/json or application/json-rpc, parameters allowed; a charset
 * must be utf-8. */
static bool content_type_ok(const char *p, size_t n)
{
    const char *t, *q;
    size_t tn, qn;
    jrpc_http_next_elem(&p, &n, ';', &t, &tn);
    if (!eq_nocase(t, tn, "application/json") && !eq_nocase(t, tn, "application/json-rpc"))
        return false;
    while (jrpc_http_next_elem(&p, &n, ';', &q, &qn)) {
        if (qn >= 8 && strncasecmp(q, "charset=", 8) == 0) {
            const char *v = q + 8;
            size_t vn = qn - 8;
            if (vn >= 2 && v[0] == '"' && v[vn - 1] == '"') {
                v++;
                vn -= 2;
            }
            if (!eq_nocase(v, vn, "utf-8") && !eq_nocase(v, vn, "utf8"))
                return false;
        }
    }
    return true;
}

/* X-JRPC-Timeout-Ms: one, a whole number from 1 to 2^32-1. */
static bool timeout_of(const jrpc_http_head_t *h, uint32_t *ms)
{
    jrpc_http_value_t v = jrpc_http_head_value(h, JRPC_HTTP_F_TIMEOUT_MS);
    *ms = 0;
    if (v.count == 0)
        return true;
    uint64_t t = 0;
    bool ok = v.count == 1 && !v.cut && v.n > 0 && v.n <= 10;
    for (size_t i = 0; ok && i < v.n; i++) {
        ok = v.p[i] >= '0' && v.p[i] <= '9';
        t = t * 10 + (uint64_t)(v.p[i] - '0');
    }
    if (!ok || t == 0 || t > UINT32_MAX)
        return false;
    *ms = (uint32_t)t;
    return true;
}

/* A signing header as the broker gets it: empty when absent; when given
 * twice or too long to keep, a value that fails its check. */
static jrpc_span_t auth_value(const jrpc_http_head_t *h, jrpc_http_field_t f)
{
    static const char invalid[72];
    jrpc_http_value_t v = jrpc_http_head_value(h, f);
    if (v.count == 0)
        return (jrpc_span_t){ "", 0 };
    if (v.count > 1 || v.cut)
        return (jrpc_span_t){ invalid, sizeof invalid };
    return (jrpc_span_t){ v.p, v.n };
}

/* The token of "Authorization: Bearer TOKEN" (RFC 6750: the scheme in any
 * case, then spaces). Empty when there is no Authorization header or it
 * has another scheme (meant for someone else, say a proxy: ignored); when
 * the header is given twice, cut, or Bearer has no token, a value that no
 * key has as its token. */
static jrpc_span_t bearer_value(const jrpc_http_head_t *h)
{
    static const char invalid[JRPC_KEYS_TOKEN_MAX + 1];
    jrpc_http_value_t v = jrpc_http_head_value(h, JRPC_HTTP_F_AUTHORIZATION);
    if (v.count == 0 || v.n < 6 || !eq_nocase(v.p, 6, "bearer") ||
        (v.n > 6 && v.p[6] != ' ' && v.p[6] != '\t'))
        return (jrpc_span_t){ "", 0 };
    const char *p = v.p + 6;
    size_t n = v.n - 6;
    jrpc_http_trim(&p, &n);
    if (v.count > 1 || v.cut || n == 0)
        return (jrpc_span_t){ invalid, sizeof invalid };
    return (jrpc_span_t){ p, n };
}

/* Idempotency-Key (docs/SIGNING.md "Idempotency keys"): its value, the
 * quotes of a structured-field string (the IETF draft's form) removed;
 * twice or cut: a value the broker refuses (a space in it). */
static jrpc_span_t idem_value(const jrpc_http_head_t *h)
{
    jrpc_http_value_t v = jrpc_http_head_value(h, JRPC_HTTP_F_IDEM_KEY);
    if (v.count == 0)
        return (jrpc_span_t){ NULL, 0 };
    if (v.count > 1 || v.cut || v.n == 0)
        return (jrpc_span_t){ " ", 1 };
    if (v.n >= 2 && v.p[0] == '"' && v.p[v.n - 1] == '"')
        return (jrpc_span_t){ v.p + 1, (size_t)v.n - 2 };
    return (jrpc_span_t){ v.p, v.n };
}

/* Who sent the request whose head is h, as text for its admission (rate
 * limits and idempotency keys without a key, the access line): the TCP
 * peer; or, when the peer is a --trusted-proxy, the client its Forwarded /
 * X-Forwarded-For name (docs/SIGNING.md "Behind a proxy"), written into
 * buf (JRPC_PROXY_ADDR_TEXT bytes). A malformed chain from a trusted proxy
 * falls back to the peer, said at debug. */
static jrpc_span_t client_of(const conn_t *c, const jrpc_http_head_t *h, char *buf)
{
    jrpc_span_t peer = { c->peer, c->peer_len };
    if (!c->peer_trusted)
        return peer;
    const jrpc_front_http_opts_t *o = &c->front->opts;
    jrpc_proxy_addr_t a;
    const char *why;
    int rc = jrpc_proxy_client(o->trusted_proxies, o->ntrusted_proxies,
                               jrpc_http_head_value(h, JRPC_HTTP_F_FORWARDED),
                               jrpc_http_head_value(h, JRPC_HTTP_F_XFF), &a, &why);
    int n;
    if (rc == 1 && (n = jrpc_proxy_addr_format(&a, buf, JRPC_PROXY_ADDR_TEXT)) > 0)
        return (jrpc_span_t){ buf, (size_t)n };
    if (rc < 0)
        JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=forwarded_ignored reason=\"%s\" peer=%.*s "
                 "detail=\"the proxy itself is taken as the client\"", why, (int)c->peer_len, c->peer);
    return peer;
}

/* What a request carries to prove who sent it (docs/SIGNING.md). */
static jrpc_auth_req_t auth_req(const jrpc_http_head_t *h)
{
    return (jrpc_auth_req_t){ .key = auth_value(h, JRPC_HTTP_F_KEY),
                              .timestamp_text = auth_value(h, JRPC_HTTP_F_TIMESTAMP),
                              .nonce = auth_value(h, JRPC_HTTP_F_NONCE),
                              .signature = auth_value(h, JRPC_HTTP_F_SIGNATURE),
                              .bearer = bearer_value(h) };
}

/* A refusal that ends the connection: answered in order, then closed. */
static void refuse_close(conn_t *c, int status, int code, const char *why)
{
    JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=refused status=%d reason=\"%s\" close=1", status, why);
    req_t *r = c->tail && c->tail->state == R_PARSING ? c->tail : rec_new(c);
    if (r == NULL) {
        conn_close(c);
        return;
    }
    r->cont = false;
    rec_error(c, r, status, code, why);
    r->close = true;
    c->no_more = true;
    c->phase = PH_IDLE;
    read_stop(c);
    flush(c);
}

/* How the answers of a request are to go out, from its Accept header
 * (docs/STREAMING.md): streamed when text/event-stream, application/x-ndjson
 * or application/jsonl is acceptable (q > 0) and preferred to
 * application/json (a higher q, or application/json not acceptable at
 * all); SSE first on a tie. HTTP/1.0 has no chunked coding: never. */
static uint8_t stream_mode(const jrpc_http_head_t *h)
{
    jrpc_http_value_t a = jrpc_http_head_value(h, JRPC_HTTP_F_ACCEPT);
    if (a.count == 0 || h->version_minor != 1)
        return S_NONE;
    /* What most clients send (curl's default, or JSON asked for by name):
     * no stream type can beat application/json there, so no q is worked
     * out (four parses of the header otherwise, on every request). */
    if (a.count == 1 && !a.cut && ((a.n == 3 && memcmp(a.p, "*/*", 3) == 0) ||
        (a.n == 16 && memcmp(a.p, "application/json", 16) == 0)))
        return S_NONE;
    int best = 0;
    uint8_t mode = S_NONE;
    for (uint8_t m = S_SSE; m <= S_JSONL; m++) {
        int q = jrpc_http_accept_q(a.p, a.n, stream_type[m], false);
        if (q > best) {
            best = q;
            mode = m;
        }
    }
    return mode != S_NONE && best > jrpc_http_accept_q(a.p, a.n, "application/json", true)
           ? mode : S_NONE;
}

/* POST / or POST /rpc (a query is allowed; absolute-form too). */
static bool rpc_target(const jrpc_http_head_t *h)
{
    const char *u;
    size_t n;
    if (!jrpc_http_head_path(h, &u, &n))
        return false;
    return (n == 1 && u[0] == '/') || (n == 4 && memcmp(u, "/rpc", 4) == 0);
}

/* ---- MCP Streamable HTTP (docs/MCP.md) ------------------------------------ */

/* The target is opts.mcp_path (a query is allowed). */
static bool mcp_target(const jrpc_front_http_t *f, const jrpc_http_head_t *h)
{
    const char *u;
    size_t n;
    const char *m = f->opts.mcp_path;
    return m != NULL && jrpc_http_head_path(h, &u, &n) && strlen(m) == n && memcmp(u, m, n) == 0;
}

/* The versions of MCP whose transport this endpoint speaks. */
static const char *const mcp_versions[] = { "2024-11-05", "2025-03-26", "2025-06-18",
                                            "2025-11-25" };

/* MCP-Protocol-Version: absent is 2025-03-26 (the spec: a server assumes
 * it), so fine; one of mcp_versions, once, is fine; anything else is 400. */
static bool mcp_version_ok(const jrpc_http_head_t *h)
{
    jrpc_http_value_t v = jrpc_http_head_value(h, JRPC_HTTP_F_MCP_VERSION);
    if (v.count == 0)
        return true;
    if (v.count > 1 || v.cut)
        return false;
    for (size_t i = 0; i < sizeof mcp_versions / sizeof *mcp_versions; i++)
        if (eq_nocase(v.p, v.n, mcp_versions[i]))
            return true;
    return false;
}

/* How a request on the MCP path is answered: MCP's SSE when the Accept
 * header prefers text/event-stream to application/json (as on /rpc, a tie
 * is JSON: the SDKs send "application/json, text/event-stream"), else JSON. */
static uint8_t mcp_stream_mode(const jrpc_http_head_t *h)
{
    return stream_mode(h) == S_SSE ? S_MCP : S_NONE;
}

/* The answer is application/json or text/event-stream, so an Accept must
 * allow one of them (q > 0; the ranges of any type and of any application
 * type count). The spec has clients list both; one is enough here:
 * refusing a client for a type it will not get helps no one. No Accept at
 * all is anything (RFC 9110 12.5.1). */
static bool mcp_accept_ok(const jrpc_http_head_t *h)
{
    jrpc_http_value_t a = jrpc_http_head_value(h, JRPC_HTTP_F_ACCEPT);
    return a.count == 0 || mcp_stream_mode(h) == S_MCP ||
           (!a.cut && jrpc_http_accept_q(a.p, a.n, "application/json", true) > 0);
}

/* True when p[0..n) is a JSON-RPC response: an object with "result" or
 * "error" and no "method". Parsed only when "result" or "error" appears in
 * the text (requests and notifications mostly cost two memmem). */
static bool mcp_is_response(const char *p, size_t n)
{
    jrpc_span_t v;
    if (memmem(p, n, "\"result\"", 8) == NULL && memmem(p, n, "\"error\"", 7) == NULL)
        return false;
    return jrpc_json_member(p, n, "method", &v) == -ENOENT &&
           (jrpc_json_member(p, n, "result", &v) == 0 || jrpc_json_member(p, n, "error", &v) == 0);
}

/* One message per POST: a batch is -32600 (MCP 2025-06-18 removed them);
 * a response from the client is taken and dropped, 202 (this endpoint
 * sends no requests to clients). Returns false when r is answered here;
 * every other body goes to the broker, which checks it as on /rpc. */
static bool mcp_message(conn_t *c, req_t *r, const char *p, size_t n)
{
    size_t i = 0;
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n'))
        i++;
    if (i < n && p[i] == '[') {
        rec_error(c, r, 400, JRPC_INVALID_REQUEST,
                  "one JSON-RPC message per POST on the MCP path (no batches)");
        return false;
    }
    if (i < n && p[i] == '{' && mcp_is_response(p, n)) {
        JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=mcp_response_dropped bytes=%zu", n);
        r->status = 202;
        r->body = r->inl;
        r->blen = 0;
        r->state = R_READY;
        return false;
    }
    return true;
}

/* ---- CORS ------------------------------------------------------------------ */

/* The request's Origin against --cors-origin: 0 when it sent none; 1 + the
 * index of the listed origin it is (or of "*"); -1 when it is not listed
 * (also with no list, and for a repeated or overlong Origin). Exact bytes:
 * browsers send the serialised origin, lower-case scheme and host. */
static int origin_of(const jrpc_front_http_t *f, const jrpc_http_head_t *h)
{
    jrpc_http_value_t v = jrpc_http_head_value(h, JRPC_HTTP_F_ORIGIN);
    if (v.count == 0)
        return 0;
    if (v.count > 1 || v.cut)
        return -1;
    int star = -1;
    for (size_t i = 0; i < f->opts.ncors; i++) {
        const char *o = f->opts.cors_origins[i];
        if (strcmp(o, "*") == 0) {
            if (star < 0)
                star = (int)i;
        } else if (strlen(o) == v.n && memcmp(o, v.p, v.n) == 0) {
            return (int)i + 1;
        }
    }
    return star >= 0 ? star + 1 : -1;
}

/* ---- WebSocket: the upgrade ------------------------------------------------- */

static int ws_write(void *conn, const char *p, size_t n);
static size_t ws_queued(void *conn);
static void ws_reading(void *conn, bool on);
static void ws_over(void *conn);
static const jrpc_front_ws_io_t ws_io = { ws_write, ws_queued, ws_reading, ws_over };

/* Bytes after the upgrade's head: the session's, or kept until it starts. */
static void ws_rest(conn_t *c, const char *p, size_t n)
{
    if (n == 0 || c->closed || c->finishing || c->no_more)
        return;
    if (c->ws == NULL) {
        if (jrpc_buf_append(&c->in, p, n) < 0)
            conn_close(c);
        return;
    }
    int rc = jrpc_front_ws_feed(c->ws, p, n);
    if (rc < 0)
        conn_close(c);
    else if (rc > 0)
        conn_finish(c);
}

/* The upgrade is accepted, and authenticated as key_id (empty: open broker):
 * the 101, then the session, which gets the bytes that came after the head. */
static void ws_switch(conn_t *c, jrpc_span_t key_id, const uint8_t *key_fp)
{
    jrpc_front_http_t *f = c->front;
    const jrpc_front_ws_hs_t *hs = c->hs;
    char head[256];
    int n = jrpc_front_ws_head101(hs, jrpc_http_date(&f->date, time(NULL)), head, sizeof head);
    jrpc_front_ws_opts_t wo = {
        .max_msg = f->opts.max_body, .max_inflight = f->opts.ws_max_inflight,
        .max_queued = f->opts.ws_max_queued, .ping_ms = f->opts.ws_ping_ms,
        .idle_ms = f->opts.idle_timeout_ms, .stream = hs->stream, .timeout_ms = c->timeout_ms,
        .key_id = key_id, .key_fp = key_fp, .peer = { c->peer, c->peer_len },
    };
    JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=ws_open protocol=%s stream=%d peer=%.*s",
             hs->protocol ? hs->protocol : "-", hs->stream, (int)c->peer_len, c->peer);
    free(c->hs);
    c->hs = NULL;
    if (n < 0 || ws_write(c, head, (size_t)n) < 0 ||
        (c->ws = jrpc_front_ws_new(f->loop, f->broker, &wo, &ws_io, c)) == NULL) {
        conn_close(c);
        return;
    }
    disarm_read(c);   /* the session keeps its own idle and ping deadlines */
    read_start(c);    /* (the session may stop it again while messages wait) */
    if (c->in.len > 0) {
        jrpc_buf_t early = c->in;   /* sent before the 101: the session's first bytes */
        jrpc_buf_init(&c->in);
        ws_rest(c, early.p, early.len);
        jrpc_buf_dispose(&early);
    }
}

/* A refusal with the broker's error object as its body; the connection
 * closes after it. */
static void answer_close(conn_t *c, int status, const char *body, size_t len)
{
    JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=refused status=%d reason=\"upgrade\" close=1", status);
    req_t *r = rec_new(c);
    if (r == NULL) {
        conn_close(c);
        return;
    }
    r->status = (uint16_t)status;
    if (rec_set_body(r, body, len) < 0) {
        r->blen = 0;
        r->body = r->inl;
    }
    r->state = R_READY;
    r->close = true;
    c->no_more = true;
    read_stop(c);
    flush(c);
}

static const uint16_t status_of[JRPC_BODY_NOUTCOMES];

/* The broker's verdict on the upgrade's signature and nonce. */
static void on_upgrade_auth(void *ctx, jrpc_outcome_t out, const char *err, size_t len,
                            jrpc_span_t key_id)
{
    conn_t *c = ctx;
    c->auth = NULL;
    if (out.cls != JRPC_BODY_OK) {
        answer_close(c, status_of[out.cls], err, len);
        return;
    }
    /* The credential it was opened with, to notice its rotation at a reload
     * (a client certificate is none of the key file's: only its id counts). */
    uint8_t fp[JRPC_KEY_FP_LEN];
    bool by_cert = key_id.n > 0 && key_id.n == c->cert_len && !memcmp(key_id.p, c->cert, key_id.n);
    bool has_fp = key_id.n > 0 && !by_cert &&
                  jrpc_broker_key_fingerprint(c->front->broker, key_id, fp);
    ws_switch(c, key_id, has_fp ? fp : NULL);
}

/* A GET / or /rpc asking for a WebSocket (origin_ok: the CORS verdict on
 * its Origin). After this, nothing more of the connection is HTTP. */
static void ws_upgrade(conn_t *c, const jrpc_http_head_t *h, bool origin_ok)
{
    jrpc_front_http_t *f = c->front;
    jrpc_front_ws_hs_t hs;
    jrpc_front_ws_handshake(h, origin_ok, &hs);
    /* Answers leave in request order, and the 101 must be the last HTTP
     * bytes: an upgrade behind requests not yet answered is refused. */
    if (hs.status == 101 && (c->head != NULL || c->in.len > 0)) {
        hs.status = 400;
        hs.reason = "an upgrade must not be pipelined behind other requests";
    }
    if (hs.status == 101 && !timeout_of(h, &c->timeout_ms)) {
        hs.status = 400;
        hs.reason = "X-JRPC-Timeout-Ms must be a whole number from 1 to 4294967295";
    }
    if (hs.status != 101) {
        refuse_close(c, hs.status, JRPC_INVALID_REQUEST, hs.reason);
        return;
    }
    if (jrpc_http_reader_takeover(&c->rd) < 0 || (c->hs = malloc(sizeof hs)) == NULL) {
        refuse_close(c, 500, JRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    *c->hs = hs;
    char client[JRPC_PROXY_ADDR_TEXT];
    jrpc_span_t who = client_of(c, h, client);
    if (who.p == client) {   /* the connection is that client's from now on */
        memcpy(c->peer, client, who.n);
        c->peer_len = (uint8_t)who.n;
    }
    c->upgrading = true;
    c->phase = PH_IDLE;
    disarm_read(c);
    read_stop(c);   /* until the session starts (the nonce claim may wait for Redis) */
    jrpc_admit_t ad = {
        .transport = JRPC_TRANSPORT_WS,
        .auth = auth_req(h),
        .peer = { c->peer, c->peer_len },
        .key_id = cert_key_id(c),
    };
    /* The signed bytes of an upgrade are the empty body (docs/SIGNING.md). */
    if (jrpc_broker_authenticate(f->broker, "", 0, &ad, on_upgrade_auth, c, &c->auth) < 0)
        refuse_close(c, 500, JRPC_INTERNAL_ERROR, "out of memory");
}

/* The head is in (the reader has checked its framing): decide whether the
 * request is ours to serve. */
static void headers_done(conn_t *c)
{
    const jrpc_http_head_t *h = jrpc_http_reader_head(&c->rd);
    const jrpc_front_http_opts_t *o = &c->front->opts;
    bool v11 = h->version_minor == 1;
    int origin = origin_of(c->front, h);
    c->cors = origin > 0 ? (uint16_t)origin : 0;
    c->mcp = mcp_target(c->front, h);
    if (jrpc_front_ws_wanted(h) && rpc_target(h)) {
        ws_upgrade(c, h, origin >= 0);
        return;
    }
    c->is_head = h->method == JRPC_HTTP_M_HEAD;
    c->discard = false;
    c->zc = NULL;
    c->zc_len = 0;
    jrpc_buf_reset(&c->body);
    uint64_t cl = h->content_length;
    jrpc_http_value_t ct = jrpc_http_head_value(h, JRPC_HTTP_F_CONTENT_TYPE);
    /* Soft refusals leave the framing intact: the body can be skipped and
     * the connection kept, unless the client waits to be told to send it. */
    int status = 0;
    const char *why = NULL;
    bool preflight = false;
    if (h->method == JRPC_HTTP_M_OPTIONS && o->ncors > 0 && origin != 0 &&
        (rpc_target(h) || c->mcp)) {
        if (origin < 0) { /* not 405: OPTIONS is served, to the origins listed */
            status = 403;
            why = "this Origin is not allowed (--cors-origin)";
        } else {
            preflight = true;
        }
    } else if (c->mcp && origin < 0) {
        /* MCP: servers must check Origin (DNS rebinding: a page whose name
         * now points at 127.0.0.1 posts same-origin, with no preflight). */
        status = 403;
        why = "this Origin is not allowed on the MCP path (--cors-origin)";
    } else if (c->mcp && h->method != JRPC_HTTP_M_POST) {
        status = 405;   /* GET: no server-sent stream is offered; DELETE: no sessions */
        why = "use POST on the MCP path (no GET stream, no sessions to DELETE)";
    } else if (h->method != JRPC_HTTP_M_POST || (!rpc_target(h) && !c->mcp)) {
        status = 405;
        why = "use POST / or POST /rpc";
    } else if (v11 && h->expect_other) {
        status = 417;
        why = "only Expect: 100-continue is supported";
    } else if (ct.count > 1 || (ct.count == 1 && (ct.cut || !content_type_ok(ct.p, ct.n)))) {
        status = 415;
        why = "Content-Type must be application/json or application/json-rpc";
    } else if (h->content_coded) {
        status = 415;
        why = "Content-Encoding must be identity (none is decoded)";
    } else if (cl > o->max_body) {
        char buf[64];
        snprintf(buf, sizeof buf, "body larger than %u bytes", o->max_body);
        refuse_close(c, 413, JRPC_INVALID_REQUEST, buf);
        return;
    } else if (!timeout_of(h, &c->timeout_ms)) {
        status = 400;
        why = "X-JRPC-Timeout-Ms must be a whole number from 1 to 4294967295";
    } else if (idem_value(h).p != NULL && !jrpc_broker_idem_key_ok(idem_value(h))) {
        status = 400;   /* "" is no "no key": the body would run twice */
        why = "Idempotency-Key must be 1 to 255 characters of printable ASCII without spaces";
    } else if (c->mcp && !mcp_accept_ok(h)) {
        status = 406;
        why = "Accept must allow application/json (the MCP path answers JSON, never a stream)";
    } else if (c->mcp && !mcp_version_ok(h)) {
        status = 400;
        why = "unsupported MCP-Protocol-Version (2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25)";
    }
    bool expecting = v11 && (h->expect_continue || h->expect_other);
    if (status != 0 && (expecting || h->method == JRPC_HTTP_M_CONNECT || cl > o->max_body)) {
        refuse_close(c, status, JRPC_INVALID_REQUEST, why);
        return;
    }
    req_t *r = rec_new(c);
    if (r == NULL) {
        conn_close(c);
        return;
    }
    r->ka10 = !v11 && h->keep_alive;
    r->mcp = c->mcp;
    /* A body with an idempotency key gets one reply (a kept reply is one). */
    r->stream = idem_value(h).n ? S_NONE : c->mcp ? mcp_stream_mode(h) : stream_mode(h);
    if (status != 0) {
        JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=refused status=%d reason=\"%s\" close=0", status, why);
        rec_error(c, r, status, JRPC_INVALID_REQUEST, why);
        r->state = R_PARSING; /* ready once the body is skipped */
        c->discard = true;
    } else if (preflight) {   /* a 204 with the Access-Control-* lines, once the body is skipped */
        r->status = 204;
        r->preflight = true;
        r->body = r->inl;
        r->blen = 0;
        c->discard = true;
    } else if (v11 && h->expect_continue) {
        r->cont = true;
        flush(c);
    }
    c->phase = PH_BODY;
    if (h->chunked || cl > 0)
        arm(c, T_BODY);
}

/* Body bytes: kept where they lie while the body is in one read (zc), else
 * gathered in c->body. */
static void body_bytes(conn_t *c, const char *at, size_t len)
{
    if (c->discard)
        return;
    if (c->zc == NULL && c->body.len == 0) {
        c->zc = at;
        c->zc_len = len;
        return;
    }
    if (c->zc != NULL) {
        if (jrpc_buf_append(&c->body, c->zc, c->zc_len) < 0) {
            conn_close(c);
            return;
        }
        c->zc = NULL;
        c->zc_len = 0;
    }
    if (jrpc_buf_append(&c->body, at, len) < 0)
        conn_close(c);
}

/* The body is in: submit it (or finish a soft refusal). */
static void message_done(conn_t *c)
{
    const jrpc_http_head_t *h = jrpc_http_reader_head(&c->rd);
    req_t *r = c->tail;
    c->phase = PH_IDLE;
    c->is_head = false;
    c->cors = 0;
    disarm_read(c);
    if (!h->keep_alive) {
        c->no_more = true;
        read_stop(c); /* the answer closes: read no more (a FIN from the client is then no cancel) */
    }
    if (r == NULL || r->state != R_PARSING)
        return;
    r->close = !h->keep_alive;
    if (c->discard) {
        r->state = R_READY;
        flush(c);
        return;
    }
    const char *body = c->zc ? c->zc : c->body.p;
    size_t len = c->zc ? c->zc_len : c->body.len;
    if (c->mcp && !mcp_message(c, r, body ? body : "", len)) {
        c->zc = NULL;
        c->zc_len = 0;
        jrpc_buf_dispose(&c->body);
        flush(c);
        return;
    }
    jrpc_http_value_t tp = jrpc_http_head_value(h, JRPC_HTTP_F_TRACEPARENT);
    char client[JRPC_PROXY_ADDR_TEXT];
    r->state = R_SUBMITTED;
    jrpc_admit_t ad = {
        .transport = JRPC_TRANSPORT_HTTP,
        .timeout_ms = c->timeout_ms,
        .auth = auth_req(h),
        /* one, whole: a second one makes both invalid (W3C: no picking) */
        .traceparent = tp.count == 1 && !tp.cut ? (jrpc_span_t){ tp.p, tp.n }
                                                : (jrpc_span_t){ "", 0 },
        .peer = client_of(c, h, client),
        .answer = r->stream ? on_answer : NULL,
        .key_id = cert_key_id(c),
        .idem_key = idem_value(h),
        .hold = c->hold,
        .path = c->mcp ? c->front->opts.mcp_path : "/rpc",
    };
    int rc = jrpc_broker_submit(c->front->broker, body ? body : "", len, &ad, on_reply, r,
                                &r->handle);
    c->zc = NULL;
    c->zc_len = 0;
    /* Not kept for the next body: an idle keep-alive connection holds no
     * buffer (a body that came in pieces used to leave up to 64 KiB per
     * connection behind; bench/idle.sh). Bodies in one read never use it. */
    jrpc_buf_dispose(&c->body);
    if (rc < 0) {   /* -ENOMEM: the broker could not take it */
        JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=refused status=500 reason=\"out of memory\"");
        rec_error(c, r, 500, JRPC_INTERNAL_ERROR, "out of memory");
        flush(c);
    }
}

/* Hands bytes p[0..n) of one read to the reader and acts on its verdicts.
 * Returns how many were consumed: fewer than n when reading stopped
 * (backpressure, or nothing more to read). */
static size_t feed(conn_t *c, const char *p, size_t n)
{
    size_t done = 0;
    c->feeding = true;
    while (!c->no_more && !c->closed && !c->finishing) {
        if (c->bp) {
            if (!pipeline_low(c))
                break;
            c->bp = false;
        }
        jrpc_http_event_t ev;
        done += jrpc_http_reader_feed(&c->rd, p + done, n - done, &ev);
        if (ev.kind == JRPC_HTTP_NEED_MORE) {
            /* A request has begun: its head is due within the header timeout. */
            if (c->phase == PH_IDLE && jrpc_http_reader_phase(&c->rd) == JRPC_HTTP_IN_HEAD) {
                c->phase = PH_HEADERS;
                arm(c, T_HEADERS);
            }
            break;
        }
        switch (ev.kind) {
        case JRPC_HTTP_HEAD:
            headers_done(c);
            if (c->upgrading) { /* the rest is the WebSocket's, never HTTP */
                ws_rest(c, p + done, n - done);
                done = n;
                goto out;
            }
            break;
        case JRPC_HTTP_BODY:
            body_bytes(c, ev.data, ev.len);
            break;
        case JRPC_HTTP_END:
            message_done(c);
            if (pipeline_full(c))
                c->bp = true;
            if (done == n)
                goto out; /* (the next call would say NEED_MORE, idle) */
            break;
        case JRPC_HTTP_REFUSE:
            refuse_close(c, ev.status, JRPC_INVALID_REQUEST, ev.reason);
            break;
        default: /* CLOSED: message_done has stopped reading already */
            c->no_more = true;
            break;
        }
    }
out:
    /* The read buffer is about to be reused: keep a partial body. */
    if (c->zc != NULL && !c->closed) {
        if (jrpc_buf_append(&c->body, c->zc, c->zc_len) < 0)
            conn_close(c);
        c->zc = NULL;
        c->zc_len = 0;
    }
    c->feeding = false;
    if (c->no_more || c->closed || c->finishing)
        return n; /* nothing more will be parsed: drop the rest */
    return done;
}

/* Parses what backpressure left unparsed, then reads again. */
static void feed_pending(conn_t *c)
{
    if (c->in.len > 0) {
        size_t k = feed(c, c->in.p, c->in.len);
        if (c->closed)
            return;
        memmove(c->in.p, c->in.p + k, c->in.len - k);
        c->in.len -= k;
    }
    if (c->bp && pipeline_low(c) && c->in.len == 0)
        c->bp = false;
    if (!c->bp && !c->no_more && !c->finishing) {
        if (c->in.len == 0) /* nothing held while reading again, nor while idle */
            jrpc_buf_dispose(&c->in);
        read_start(c);
    }
}

/* Plaintext bytes of the client (a read, or records TLS decrypted). */
static void plain_in(conn_t *c, const char *p, size_t n)
{
    if (c->finishing || c->no_more)
        return; /* lingering, or past an answer that closes: drop */
    if (c->upgrading) {   /* a WebSocket (or one waiting for its authentication) */
        ws_rest(c, p, n);
        return;
    }
    /* Bytes wait behind bytes already held (TLS hands over every record of
     * one read, also after backpressure stopped reading). */
    if (c->in.len == 0) {
        size_t k = feed(c, p, n);
        if (c->closed || k == n)
            return;
        p += k;
        n -= k;
    }
    /* Backpressure: keep the rest and stop reading until answers flush. */
    if (jrpc_buf_append(&c->in, p, n) < 0) {
        conn_close(c);
        return;
    }
    read_stop(c);
}

static void tls_in(conn_t *c, const char *p, size_t n);

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    conn_t *c = s->data;
    if (nread == 0)
        return;
    if (nread < 0) {
        /* EOF or reset: the client is gone; cancel what it asked for. */
        if (!c->finishing && c->nreq > 0)
            JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=client_gone pending=%u error=%s", c->nreq,
                     uv_err_name((int)nread));
        conn_close(c);
        return;
    }
    if (c->tls)
        tls_in(c, buf->base, (size_t)nread);
    else
        plain_in(c, buf->base, (size_t)nread);
}

/* ---- TLS: the layer under the bytes ----------------------------------------- */

/* A write of our own for ciphertext: the caller's request w (and its
 * callback) complete when the ciphertext made from its bytes is written,
 * as uv_write would for the plaintext. */
typedef struct tblock {
    uv_write_t   req;
    uv_write_t  *user;    /* NULL: our own bytes (handshake, alerts, close_notify) */
    uv_write_cb  cb;
    jrpc_buf_t   data;    /* the ciphertext, taken whole from the session */
} tblock_t;

static void on_tls_written(uv_write_t *w, int status)
{
    tblock_t *b = (tblock_t *)w;   /* req is the first member */
    uv_write_t *user = b->user;
    uv_write_cb cb = b->cb;
    jrpc_buf_dispose(&b->data);
    free(b);
    if (cb)
        cb(user, status);
}

/* Writes the ciphertext the session has pending (all of it, in order),
 * on behalf of user/cb when not NULL. */
static int tls_flush_out(conn_t *c, uv_write_t *user, uv_write_cb cb)
{
    if (jrpc_tls_pending(c->tls) == 0 && cb == NULL)
        return 0;
    tblock_t *b = malloc(sizeof *b);
    if (b == NULL)
        return UV_ENOMEM;
    b->user = user;
    b->cb = cb;
    jrpc_tls_take_buf(c->tls, &b->data);
    if (user)
        user->handle = (uv_stream_t *)&c->tcp;   /* what the callbacks read */
    uv_buf_t ub = uv_buf_init(b->data.p, (unsigned)b->data.len);
    int rc = uv_write(&b->req, (uv_stream_t *)&c->tcp, &ub, 1, on_tls_written);
    if (rc < 0) {
        jrpc_buf_dispose(&b->data);
        free(b);
    }
    return rc;
}

/* The session's own bytes, if any (a failure closes the connection). */
static void tls_send(conn_t *c)
{
    if (tls_flush_out(c, NULL, NULL) < 0 && !c->closed)
        conn_close(c);
}

/* Plaintext sockets write directly; a TLS session takes every write through
 * io_write (ENOSYS here makes the callers do so), where the plaintext is
 * encrypted at once into a block of its own: one copy, which TLS makes
 * anyway, and the caller's buffers are free as soon as it returns. */
static int io_try_write(conn_t *c, const uv_buf_t *bufs, unsigned nb)
{
    if (c->tls)
        return UV_ENOSYS;
    return uv_try_write((uv_stream_t *)&c->tcp, bufs, nb);
}

static int io_write(conn_t *c, uv_write_t *w, const uv_buf_t *bufs, unsigned nb, uv_write_cb cb)
{
    if (c->tls == NULL)
        return uv_write(w, (uv_stream_t *)&c->tcp, bufs, nb, cb);
    for (unsigned i = 0; i < nb; i++)
        if (bufs[i].len > 0 && jrpc_tls_write(c->tls, bufs[i].base, bufs[i].len) < 0)
            return UV_EPROTO;
    return tls_flush_out(c, w, cb);
}

/* The handshake failed (or a record was bad): OpenSSL's alert goes out,
 * then a FIN. A plaintext HTTP request gets a plaintext 400 that says why,
 * which is what a person who typed http:// needs to read. */
static void tls_fail(conn_t *c)
{
    jrpc_front_http_t *f = c->front;
    bool plain = jrpc_tls_plain_http(c->tls) && !jrpc_tls_established(c->tls);
    jrpc_metrics.tls_failed++;
    JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=tls_failed reason=\"%s\" peer=%.*s",
             jrpc_tls_error(c->tls), (int)c->peer_len, c->peer);
    if (plain) {
        jrpc_buf_reset(&f->err);
        jrpc_batch_write_error(&f->err, JRPC_INVALID_REQUEST, "this port speaks HTTPS: use https://");
        char head[JRPC_HTTP_HEAD_MAX];
        jrpc_http_resp_t h = {
            .status = 400, .date = jrpc_http_date(&f->date, time(NULL)),
            .content_type = "application/json", .content_length = f->err.len,
            .connection = JRPC_HTTP_CONN_CLOSE,
        };
        int n = jrpc_http_response_head(head, sizeof head, &h);
        assert(n > 0);
        uv_buf_t b[2] = { uv_buf_init(head, (unsigned)n), uv_buf_init(f->err.p, (unsigned)f->err.len) };
        (void)uv_try_write((uv_stream_t *)&c->tcp, b, 2);   /* a few bytes to an empty socket */
    } else {
        tls_send(c);   /* the alert */
    }
    if (!c->closed)
        conn_finish(c);
}

/* The handshake is done: HTTP begins, under the idle deadline; a verified
 * client certificate's name is kept (cert_key_id looks it up per body). */
static void tls_ready(conn_t *c)
{
    char what[96];
    jrpc_metrics.tls_handshakes++;
    jrpc_tls_describe(c->tls, what, sizeof what);
    c->cert_len = (uint8_t)jrpc_tls_peer_name(c->tls, c->cert, sizeof c->cert);
    JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=tls_established tls=\"%s\" cert=\"%.*s\" peer=%.*s",
             what, (int)c->cert_len, c->cert, (int)c->peer_len, c->peer);
    arm(c, T_IDLE);
}

/* Ciphertext from the socket: every record it completes is decrypted and
 * handed to plain_in (all of one read, so nothing waits inside OpenSSL for
 * a read that will not come), then the session's own bytes go out. */
static void tls_in(conn_t *c, const char *p, size_t n)
{
    jrpc_front_http_t *f = c->front;
    if (c->finishing)
        return;   /* lingering: drop */
    bool was = jrpc_tls_established(c->tls);
    if (jrpc_tls_feed(c->tls, p, n) < 0) {
        conn_close(c);
        return;
    }
    ssize_t k;
    /* (p, in f->rbuf, is read in place until jrpc_tls_read says 0) */
    while ((k = jrpc_tls_read(c->tls, f->pbuf, READ_BUF)) > 0) {
        if (!was) {
            was = true;
            tls_ready(c);
        }
        plain_in(c, f->pbuf, (size_t)k);
        if (c->closed || c->finishing)
            return;
    }
    if (!was && jrpc_tls_established(c->tls))
        tls_ready(c);
    if (k == JRPC_TLS_EPROTO) {
        tls_fail(c);
        return;
    }
    if (k == JRPC_TLS_ECLOSED) {   /* close_notify: as a FIN */
        if (c->nreq > 0)
            JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=client_gone pending=%u error=close_notify",
                     c->nreq);
        conn_close(c);
        return;
    }
    tls_send(c);
}

/* The key a verified client certificate names (mutual TLS): its id when
 * the key file in force has it, asked per body so that a reload's
 * revocation holds for open connections; empty: none, and the body is
 * checked as any other. */
static jrpc_span_t cert_key_id(const conn_t *c)
{
    jrpc_span_t id = { c->cert, c->cert_len };
    if (c->cert_len == 0 || !jrpc_broker_has_key(c->front->broker, id))
        return (jrpc_span_t){ NULL, 0 };
    return id;
}
/* ---- WebSocket: the session's io -------------------------------------------- */

/* One write the socket did not take at once: its own request and copy, so
 * that several can be in flight and a close's FIN queues after them all. */
typedef struct wblock {
    uv_write_t req;
    conn_t    *conn;
    char       data[];
} wblock_t;

static void on_ws_write(uv_write_t *w, int status)
{
    wblock_t *b = (wblock_t *)w;   /* req is the first member */
    conn_t *c = b->conn;
    free(b);
    c->nwrites--;
    if (c->closed)
        return;   /* cancelled by uv_close */
    if (status < 0) {
        JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=write_failed error=%s", uv_err_name(status));
        conn_close(c);
        return;
    }
    c->wprogress = true;   /* the write deadline counts progress, not an empty queue */
    if (c->nwrites == 0) {
        c->writing = false;
        tq_remove(c, TS_WRITE);
    }
}

/* The session's bytes: uv_try_write when nothing is queued, the rest
 * copied into a uv_write of its own, under the write-stall deadline.
 * Never closes the connection itself (it runs inside the session). */
static int ws_write(void *conn, const char *p, size_t n)
{
    conn_t *c = conn;
    if (c->closed || c->finishing || c->wfailed)
        return -EPIPE;
    if (c->nwrites == 0) {
        uv_buf_t b = uv_buf_init((char *)p, (unsigned)n);
        int k = io_try_write(c, &b, 1);
        if (k == UV_EAGAIN || k == UV_ENOSYS)
            k = 0;
        if (k < 0) {
            c->wfailed = true;
            return -EPIPE;
        }
        p += k;
        n -= (size_t)k;
        if (n == 0)
            return 0;
    }
    wblock_t *b = malloc(sizeof *b + n);
    if (b == NULL) {
        c->wfailed = true;
        return -ENOMEM;
    }
    b->conn = c;
    memcpy(b->data, p, n);
    uv_buf_t ub = uv_buf_init(b->data, (unsigned)n);
    if (io_write(c, &b->req, &ub, 1, on_ws_write) < 0) {
        free(b);
        c->wfailed = true;
        return -EPIPE;
    }
    if (c->nwrites++ == 0) {
        c->writing = true;
        c->wprogress = false;
        arm(c, T_WRITE);
    }
    return 0;
}

static size_t ws_queued(void *conn)
{
    conn_t *c = conn;
    return uv_stream_get_write_queue_size((const uv_stream_t *)&c->tcp);
}

static void ws_reading(void *conn, bool on)
{
    conn_t *c = conn;
    if (!on)
        read_stop(c);
    else if (!c->finishing && !c->closing)
        read_start(c);
}

/* Our close is out (FIN after the writes, then a linger), or a write
 * failed (at once). */
static void ws_over(void *conn)
{
    conn_t *c = conn;
    if (c->wfailed)
        conn_close(c);
    else
        conn_finish(c);
}

/* ---- accepting ---------------------------------------------------------- */

/* The client's address as text, once per connection (the access log), and
 * whether it is a --trusted-proxy. */
static void peer_name(conn_t *c)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    char ip[INET6_ADDRSTRLEN];
    c->peer_len = 0;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) < 0)
        return;
    int n;
    if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        if (uv_ip6_name(a, ip, sizeof ip) < 0)
            return;
        n = snprintf(c->peer, sizeof c->peer, "[%s]:%u", ip, ntohs(a->sin6_port));
    } else if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        if (uv_ip4_name(a, ip, sizeof ip) < 0)
            return;
        n = snprintf(c->peer, sizeof c->peer, "%s:%u", ip, ntohs(a->sin_port));
    } else {
        return;
    }
    if (n > 0 && (size_t)n < sizeof c->peer)
        c->peer_len = (uint8_t)n;
    jrpc_proxy_addr_t a;
    c->peer_trusted = c->front->opts.ntrusted_proxies > 0 &&
                      jrpc_proxy_addr_parse(ip, strlen(ip), &a) == 0 &&
                      jrpc_proxy_trusted(c->front->opts.trusted_proxies,
                                         c->front->opts.ntrusted_proxies, &a);
}

static void on_connection(uv_stream_t *server, int status)
{
    jrpc_front_http_t *f = server->data;
    if (status < 0) {
        /* libuv has already made room (its reserved fd, EMFILE) and closed
         * the pending connections; warn at most once a second. */
        uint64_t now = uv_now(f->loop);
        if (now - f->last_warn >= 1000) {
            f->last_warn = now;
            JRPC_LOG(JRPC_LOG_WARN, COMP, "event=accept_failed error=%s", uv_err_name(status));
        }
        return;
    }
    conn_t *c = NULL;
    if (f->nconns >= f->opts.max_conns || f->paused || (c = calloc(1, sizeof *c)) == NULL) {
        /* Past --max-conns: accept and close at once, so the client learns
         * now instead of waiting in the backlog. */
        jrpc_listen_refuse(server);
        if (f->refused++ % 1000 == 0)
            JRPC_LOG(JRPC_LOG_WARN, COMP, "event=conn_refused reason=max_conns max_conns=%u refused=%llu",
                     f->opts.max_conns, (unsigned long long)f->refused);
        return;
    }
    c->front = f;
    f->nalive++;
    uv_tcp_init(f->loop, &c->tcp);
    c->tcp.data = c;
    jrpc_http_reader_init(&c->rd, &(jrpc_http_limits_t){ f->opts.max_header_bytes,
                                                         f->opts.max_body });
    jrpc_buf_init(&c->body);
    jrpc_buf_init(&c->in);
    c->next = f->conns;
    if (f->conns)
        f->conns->prev = c;
    f->conns = c;
    f->nconns++;
    jrpc_metrics.http_connections++;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
        conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    peer_name(c);
    c->hold = jrpc_broker_hold_new(f->broker, on_hold_wake, c);
    if (f->opts.tls && (c->tls = jrpc_tls_new(f->opts.tls)) == NULL) {
        conn_close(c);
        return;
    }
    read_start(c);
    arm(c, c->tls ? T_HANDSHAKE : T_IDLE);
}

static void on_listener_closed(uv_handle_t *h)
{
    jrpc_front_http_t *f = h->data;
    f->listening = false;
    front_maybe_free(f);
}

jrpc_front_http_t *jrpc_front_http_new(uv_loop_t *loop, jrpc_broker_t *broker,
                                       const jrpc_front_http_opts_t *opts)
{
    /* Bound and listening before libuv sees it, so that a failure leaves
     * no handle behind (the broker then exits 1 at once). */
    int rc, fd = jrpc_listen_socket(opts->listen, COMP, "http", opts->reuseport);
    if (fd < 0)
        return NULL;
    jrpc_front_http_t *f = calloc(1, sizeof *f);
    if (f == NULL) {
        close(fd);
        return NULL;
    }
    f->loop = loop;
    f->broker = broker;
    f->opts = *opts;
    if (opts->tls && (f->pbuf = malloc(READ_BUF)) == NULL) {
        close(fd);
        free(f);
        return NULL;
    }
    jrpc_buf_init(&f->err);
    uv_tcp_init(loop, &f->listener);
    f->listener.data = f;
    f->listening = true;
    uv_timer_init(loop, &f->tick);
    f->tick.data = f;
    uv_check_init(loop, &f->flushq);
    f->flushq.data = f;
    uv_timer_init(loop, &f->ping);
    f->ping.data = f;
    f->nhandles = 3;
    if ((rc = uv_tcp_open(&f->listener, fd)) < 0 ||
        (rc = uv_listen((uv_stream_t *)&f->listener, 1024, on_connection)) < 0) {
        JRPC_LOG(JRPC_LOG_ERROR, COMP, "event=listen_failed endpoint=http://%s error=\"%s\"",
                 opts->listen, uv_strerror(rc));
        f->destroying = true;
        f->paused = true;
        uv_close((uv_handle_t *)&f->listener, on_listener_closed);
        return NULL; /* freed by the close callback */
    }
    jrpc_listen_log(&f->listener, COMP, opts->tls ? "https" : "http");
    return f;
}


void jrpc_front_http_set_tls(jrpc_front_http_t *f, jrpc_tls_ctx_t *tls)
{
    if (f->opts.tls && tls)
        f->opts.tls = tls;
}

void jrpc_front_http_keys_changed(jrpc_front_http_t *f)
{
    if (f == NULL)
        return;
    conn_t *next;
    for (conn_t *c = f->conns; c != NULL; c = next) {
        next = c->next;
        if (c->ws)
            jrpc_front_ws_keys_changed(c->ws);
    }
}

void jrpc_front_http_pause(jrpc_front_http_t *f)
{
    if (f == NULL || f->paused)
        return;
    f->paused = true;
    uv_close((uv_handle_t *)&f->listener, on_listener_closed);
    JRPC_LOG(JRPC_LOG_INFO, COMP, "event=pausing conns=%u", f->nconns);
    conn_t *next;
    for (conn_t *c = f->conns; c != NULL; c = next) {
        next = c->next;
        if (c->ws) {   /* 1001 once the answers in flight are written */
            c->closing = true;
            jrpc_front_ws_drain(c->ws);
            continue;
        }
        if (c->upgrading) {   /* still authenticating: not switched now */
            conn_close(c);
            continue;
        }
        /* A request still being received will not be submitted. */
        if (c->tail && c->tail->state == R_PARSING) {
            req_t *last = c->tail, *prev = NULL;
            for (req_t *x = c->head; x != last; x = x->next)
                prev = x;
            if (prev) {
                prev->next = NULL;
                c->tail = prev;
            } else {
                c->head = c->tail = NULL;
            }
            c->nreq--;
            rec_free(f, last);
        }
        c->no_more = true;
        c->closing = true;
        read_stop(c);
        jrpc_buf_reset(&c->in);
        if (c->phase != PH_IDLE)
            disarm_read(c);
        c->phase = PH_IDLE;
        if (c->head == NULL && !c->writing)
            conn_close(c);
        else if (c->finishing) {
            /* already on its way out */
        } else if (!c->writing) {
            flush(c);
        }
    }
}

void jrpc_front_http_destroy(jrpc_front_http_t **self_p)
{
    jrpc_front_http_t *f = *self_p;
    if (f == NULL)
        return;
    *self_p = NULL;
    jrpc_front_http_pause(f);
    f->destroying = true;
    front_maybe_free(f); /* or by the last close callback */
}
