/* jrpc_front_answer — the HTTP front's answers: each one's head (status,
 * Date, the lines some statuses carry, CORS), the writes of those ready at
 * the head of the FIFO in request order, the broker's outcome as an HTTP
 * status; and the Origin's verdict against --cors-origin.
 *
 * Not here: the request records themselves (jrpc_front_http), a streamed
 * answer's bytes (jrpc_front_stream), the TLS layer a write goes through
 * (jrpc_front_tls), the status table's words (http/jrpc_http_response). */
#include "jrpc_front_http_int.h"

#include <assert.h>
#include <stdio.h>
#include <time.h>

#include "jrpc_errors.h"
#include "jrpc_log.h"

static const char continue_line[] = JRPC_HTTP_CONTINUE;

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
    "MCP-Protocol-Version, Mcp-Session-Id, Authorization, Idempotency-Key\r\n"                               \
    "Access-Control-Max-Age: 7200\r\n"

/* base's lines, then the CORS lines of r's listed origin, in buf. With
 * timing, a page of that origin may read Server-Timing too: from fetch()
 * (Access-Control-Expose-Headers) and from the Resource Timing API
 * (Timing-Allow-Origin). */
const char *cors_lines(const jrpc_front_http_t *f, const req_t *r, const char *base,
                       bool timing, char *buf, size_t cap)
{
    const char *o = f->opts.cors_origins[r->cors - 1];
    bool any = strcmp(o, "*") == 0;
    timing = timing && !r->preflight;
    /* one Expose-Headers line: the session id (MCP sessions), Server-Timing */
    const char *expose = r->sid_len
        ? (timing ? "Access-Control-Expose-Headers: Mcp-Session-Id, Server-Timing\r\n"
                  : "Access-Control-Expose-Headers: Mcp-Session-Id\r\n")
        : (timing ? "Access-Control-Expose-Headers: Server-Timing\r\n" : "");
    int n = snprintf(buf, cap, "%sAccess-Control-Allow-Origin: %s\r\n%s%s%s%s%s%s", base ? base : "",
                     o, any ? "" : "Vary: Origin\r\n", r->preflight ? CORS_PREFLIGHT : "", expose,
                     timing ? "Timing-Allow-Origin: " : "", timing ? o : "", timing ? "\r\n" : "");
    return n > 0 && (size_t)n < cap ? buf : base; /* origins are bounded: always fits */
}

/* The Server-Timing line of t after base's lines, in buf (base when t has
 * nothing). No printf: it is on every answer's path. */
static const char *timing_lines(const jrpc_timing_t *t, const char *base, char *buf, size_t cap)
{
    size_t bn = base ? strlen(base) : 0;
    if (t->has == 0 || bn + 15 + JRPC_TIMING_MAX + 2 > cap)
        return base;
    memcpy(buf, base ? base : "", bn);
    memcpy(buf + bn, "Server-Timing: ", 15);
    size_t n = jrpc_timing_format(t, buf + bn + 15);
    memcpy(buf + bn + 15 + n, "\r\n", 3);
    return buf;
}

/* The head of a 200 answer with no lines but Server-Timing's: the cached
 * prefix, the length, the timing value formatted in place. The same bytes
 * as jrpc_http_response_head with timing_lines' extra (e2e_server_timing). */
static void ok_head(conn_t *c, req_t *r, bool timing)
{
    _Static_assert(JRPC_HTTP_OK_MAX + 15 + JRPC_TIMING_MAX + 4 <= sizeof r->hdr,
                   "a 200 head with its timing fits the record");
    char *w = jrpc_http_ok_head(&c->front->ok, time(NULL), r->blen, r->hdr);
    if (timing) {
        memcpy(w, "Server-Timing: ", 15);
        w += 15;
        w += jrpc_timing_format(&r->timing, w);
        memcpy(w, "\r\n", 2);
        w += 2;
    }
    memcpy(w, "\r\n", 2);
    w += 2;
    if (r->head)
        r->blen = 0;
    r->hlen = (uint16_t)(w - r->hdr);
    r->hdr_built = true;
}

static void build_header(conn_t *c, req_t *r)
{
    /* The last answer of a pausing front closes its connection. */
    if (c->closing && r->next == NULL)
        r->close = true;
    char xbuf[448 + 96 + JRPC_FRONT_HTTP_ORIGIN_MAX], tbuf[160 + JRPC_TIMING_MAX], retry[40];
    const char *extra = extra_lines(r->status);
    if (r->status == 429 && r->retry_after) {
        snprintf(retry, sizeof retry, "Retry-After: %u\r\n", r->retry_after);
        extra = retry;
    } else if (r->replayed) {
        extra = "Idempotent-Replayed: true\r\n";
    }
    char sbuf[256];
    if (r->sid_len)
        extra = mcp_sid_line(r, extra, sbuf, sizeof sbuf);
    const char *base = extra;
    bool timing = r->timing.has != 0;
    if (r->status == 200 && extra == NULL && !r->cors && !r->close && !r->ka10) {
        ok_head(c, r, timing);   /* the usual answer */
        return;
    }
    if (timing)
        extra = timing_lines(&r->timing, base, tbuf, sizeof tbuf);
    if (r->cors)
        extra = cors_lines(c->front, r, extra, timing, xbuf, sizeof xbuf);
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
    if (n < 0 && timing) {   /* too long with the timing (a long origin): without it */
        h.extra = r->cors ? cors_lines(c->front, r, base, false, xbuf, sizeof xbuf) : base;
        n = jrpc_http_response_head(r->hdr, sizeof r->hdr, &h);
    }
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
bool written(conn_t *c)
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

void on_write(uv_write_t *w, int status)
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


/* Writes every answer that is ready at the head of the FIFO: uv_try_write
 * first (no request, no copy), the rest with uv_write. Answers leave in
 * request order; a later one that is ready waits for the earlier ones. */
void flush(conn_t *c)
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
const uint16_t status_of[JRPC_BODY_NOUTCOMES] = {
    [JRPC_BODY_OK] = 200,           [JRPC_BODY_INVALID] = 200,
    [JRPC_BODY_BUSY] = 503,         [JRPC_BODY_UNAUTHORIZED] = 401,
    [JRPC_BODY_REPLAYED] = 409,     [JRPC_BODY_UNAVAILABLE] = 503, [JRPC_BODY_LIMITED] = 429,
    [JRPC_BODY_MISMATCH] = 422,     [JRPC_BODY_INPROGRESS] = 409,
    [JRPC_BODY_CANCELLED] = 500,    /* never replied */
};

/* The broker's answer to one body. May run inside jrpc_broker_submit(). */
void on_reply(void *ctx, jrpc_outcome_t out, const char *reply, size_t len)
{
    req_t *r = ctx;
    conn_t *c = r->conn;
    r->handle = NULL;
    r->state = R_READY;
    if (r->switched && out.cls == JRPC_BODY_OK) {   /* MCP: the answer after the messages */
        if (len > 0)
            on_answer(r, 0, reply, len);
        if (stream_end(c, r, out, NULL, 0) < 0)
            c->broken = true;
        mark_dirty(c);
        return;
    }
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
    if (out.timing)
        r->timing = *out.timing;
    if (len == 0) {
        r->status = r->mcp ? 202 : 204;   /* MCP: a notification is "202 Accepted" */
    } else {
        r->status = status_of[out.cls];
        if (r->mcp && out.code == JRPC_SESSION_UNKNOWN)
            r->status = 404;   /* MCP: an unknown session is 404, as the spec says */
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

/* ---- CORS ------------------------------------------------------------------ */

/* The request's Origin against --cors-origin: 0 when it sent none; 1 + the
 * index of the listed origin it is (or of "*"); -1 when it is not listed
 * (also with no list, and for a repeated or overlong Origin). Exact bytes:
 * browsers send the serialised origin, lower-case scheme and host. */
int origin_of(const jrpc_front_http_t *f, const jrpc_http_head_t *h)
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
