/* jrpc_front_http_int — the state the files of jrpc_front_http share.
 *
 * Internal to broker/front: included only by the files of the module.
 * jrpc_front_http is one module (one public header, jrpc_front_http.h) in
 * eight files, one job each:
 *
 *   jrpc_front_http.c     the connections: the request records (the
 *                         pipelining FIFO), closing, the reader's verdicts
 *                         (what a request may do, submitting its body; GET
 *                         /openrpc.json), accepting, the API
 *   jrpc_front_timer.c    the deadlines: a queue per timeout kind under one
 *                         libuv timer, and what each expiry does
 *   jrpc_front_head.c     what a request's head says: Content-Type, the
 *                         timeout, the signing headers, Idempotency-Key, the
 *                         client behind a trusted proxy, the target
 *   jrpc_front_answer.c   the answers: their heads (CORS lines included),
 *                         their writes in request order, the broker's
 *                         outcome as an HTTP status; the Origin's verdict
 *   jrpc_front_stream.c   streamed answers: SSE, NDJSON, JSON Lines, MCP's
 *                         SSE (docs/STREAMING.md), and the Accept that asks
 *   jrpc_front_mcp.c      MCP Streamable HTTP's rules on its path (docs/MCP.md)
 *   jrpc_front_upgrade.c  the WebSocket upgrade and the session's io over the
 *                         connection (the session itself: jrpc_front_ws)
 *   jrpc_front_tls.c      TLS, the layer under the bytes (io/jrpc_tls)
 *
 * The functions one file lends another are declared at the end, each
 * described where it is defined, under the names they had as static
 * functions of one file: they are seen by the broker only (not installed,
 * and nothing outside this module includes this header). */
#ifndef JRPC_FRONT_HTTP_INT_H
#define JRPC_FRONT_HTTP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <uv.h>

#include "jrpc_front_http.h"
#include "jrpc_front_ws.h"
#include "jrpc_http_reader.h"
#include "jrpc_http_response.h"
#include "jrpc_mcp_sid.h"

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
    jrpc_timing_t timing;     /* where its body's time went (Server-Timing); has 0: none */
    const char  *body;        /* answer body: inline, heap (owned) or borrowed */
    size_t       blen;
    char        *heap;        /* owned copy of a long body, or NULL */
    size_t       off;         /* bytes of hdr + body already written */
    uint16_t     hlen;
    char         hdr[512];    /* status line and headers (CORS lines included) */
    char         inl[INLINE_BODY]; /* short bodies */
    bool         sse_ok;      /* MCP: the client accepts text/event-stream: a server's
                                 message before the answer makes it a stream */
    bool         switched;    /* MCP: made a stream by such a message (not streamed at
                                 submit): the reply is its last event */
    bool         gstream;     /* MCP: a session's GET stream (docs/MCP.md), or a GET or
                                 DELETE waiting for its probe's answer */
    bool         probe_del;   /* ... that probe is a DELETE's */
    struct req  *gnext;       /* ... the front's list of them */
    uint64_t     probe;       /* MCP: the probe it waits for (PROTOCOL.md 2.8); 0: none */
    uint64_t     probe_at;    /* ... until this uv_now() */
    uint8_t      sid_len;     /* MCP: the Mcp-Session-Id its answer carries (0: none), */
    char         sid[JRPC_MCP_SID_LEN + 1]; /* ... or that its GET stream is of */
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
    bool            mcp;       /* the target is the MCP path (opts.mcp_path[/<service>]) */
    bool            openrpc;   /* GET (or HEAD) /openrpc.json: the OpenRPC document */
    uint32_t        timeout_ms; /* X-JRPC-Timeout-Ms of the request (0: none) */
    uint16_t        cors;      /* the request's listed Origin (req_t.cors), for its record */
    /* the previous head's verdicts, for the same head read again (jrpc_http_reader_again) */
    bool            kept;      /* it was a plain POST to /rpc, taken: kept_* and ad hold */
    bool            ad_kept;   /* ad was filled for it (at its body) */
    uint8_t         kept_stream; /* its req_t.stream */
    uint16_t        kept_cors;   /* its cors */
    jrpc_admit_t    ad;        /* the admission of the body submitted last (message_done) */
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
    size_t          in_hand;   /* bytes of the read being fed past the reader's last verdict */
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
    jrpc_http_ok_t  ok;         /* a 200 JSON answer's head to its Content-Length, once per second */
    size_t          mcp_path_len; /* strlen(opts.mcp_path), 0 without one */
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
    req_t          *gstreams;   /* MCP sessions' GET streams open here, and GETs and
                                   DELETEs waiting for a probe's answer */
    uint32_t        nprobes;    /* ... of which these wait */
    char            rbuf[READ_BUF];
    char           *pbuf;       /* TLS: plaintext of one read's records (READ_BUF; NULL: no TLS) */
};

static inline bool eq_nocase(const char *p, size_t n, const char *lit)
{
    return strlen(lit) == n && strncasecmp(p, lit, n) == 0;
}

/* jrpc_front_http.c */
req_t *rec_new(conn_t *c);
void   rec_free(jrpc_front_http_t *f, req_t *r);
req_t *rec_pop(conn_t *c);
int    rec_set_body(req_t *r, const char *p, size_t n);
bool   pipeline_low(const conn_t *c);
void   rec_error(conn_t *c, req_t *r, int status, int code, const char *data);
void   conn_close(conn_t *c);
void   conn_finish(conn_t *c);
void   read_start(conn_t *c);
void   read_stop(conn_t *c);
void   refuse_close(conn_t *c, int status, int code, const char *why);
void   feed_pending(conn_t *c);
void   plain_in(conn_t *c, const char *p, size_t n);

/* jrpc_front_timer.c */
void   tq_remove(conn_t *c, enum tslot s);
void   arm(conn_t *c, enum tmode mode);
void   disarm_read(conn_t *c);
void   tick_by(jrpc_front_http_t *f, uint64_t at);

/* jrpc_front_head.c */
bool   content_type_ok(const char *p, size_t n);
bool   timeout_of(const jrpc_http_head_t *h, uint32_t *ms);
jrpc_span_t idem_value(const jrpc_http_head_t *h);
jrpc_span_t client_of(const conn_t *c, const jrpc_http_head_t *h, char *buf);
jrpc_auth_req_t auth_req(const jrpc_http_head_t *h);
bool   rpc_target(const jrpc_http_head_t *h);
bool   openrpc_target(const jrpc_http_head_t *h);

/* jrpc_front_answer.c */
extern const uint16_t status_of[JRPC_BODY_NOUTCOMES];
const char *cors_lines(const jrpc_front_http_t *f, const req_t *r, const char *base,
                       bool timing, char *buf, size_t cap);
bool   written(conn_t *c);
void   on_write(uv_write_t *w, int status);
void   flush(conn_t *c);
void   on_reply(void *ctx, jrpc_outcome_t out, const char *reply, size_t len);
int    origin_of(const jrpc_front_http_t *f, const jrpc_http_head_t *h);

/* jrpc_front_stream.c */
bool   stream_flush(conn_t *c, req_t *r);
void   mark_dirty(conn_t *c);
void   on_answer(void *ctx, uint32_t pos, const char *json, size_t len);
int    stream_end(conn_t *c, req_t *r, jrpc_outcome_t out, const char *summary, size_t len);
int    stream_begin(conn_t *c, req_t *r);
uint8_t stream_mode(const jrpc_http_head_t *h);

/* jrpc_front_mcp.c */
bool   mcp_target(const jrpc_front_http_t *f, const jrpc_http_head_t *h);
bool   mcp_route(const jrpc_front_http_t *f, const jrpc_http_head_t *h, jrpc_span_t *svc);
bool   mcp_target_alone(const jrpc_front_http_t *f, const jrpc_http_head_t *h);
bool   mcp_one_service(conn_t *c, req_t *r);
bool   mcp_version_ok(const jrpc_http_head_t *h);
uint8_t mcp_stream_mode(const jrpc_http_head_t *h);
bool   mcp_accept_ok(const jrpc_http_head_t *h);
bool   mcp_message(conn_t *c, req_t *r, const char *p, size_t n);
jrpc_span_t mcp_session_of(const jrpc_http_head_t *h);
bool   mcp_sse_ok(const jrpc_http_head_t *h);
void   mcp_on_message(void *ctx, jrpc_span_t session, jrpc_span_t json);
void   mcp_delete(conn_t *c, req_t *r, const jrpc_http_head_t *h);
void   mcp_get(conn_t *c, req_t *r, const jrpc_http_head_t *h);
void   mcp_gstream_drop(jrpc_front_http_t *f, req_t *r);
void   mcp_on_session(void *arg, jrpc_span_t session, jrpc_span_t json);
void   mcp_on_probe(void *ctx, uint64_t probe, jrpc_span_t session, bool live);
uint64_t mcp_probes_expire(jrpc_front_http_t *f, uint64_t now);
const char *mcp_sid_line(const req_t *r, const char *base, char *buf, size_t cap);

/* jrpc_front_upgrade.c */
void   ws_rest(conn_t *c, const char *p, size_t n);
void   ws_upgrade(conn_t *c, const jrpc_http_head_t *h, bool origin_ok);

/* jrpc_front_tls.c */
int    io_try_write(conn_t *c, const uv_buf_t *bufs, unsigned nb);
int    io_write(conn_t *c, uv_write_t *w, const uv_buf_t *bufs, unsigned nb, uv_write_cb cb);
void   tls_send(conn_t *c);
void   tls_in(conn_t *c, const char *p, size_t n);
jrpc_span_t cert_key_id(const conn_t *c);

#endif
