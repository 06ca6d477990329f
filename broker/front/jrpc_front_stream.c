/* jrpc_front_stream — streamed answers on the HTTP front (docs/STREAMING.md):
 * an answer per call as it completes, as SSE, NDJSON or JSON Lines in
 * chunked coding, or as MCP's SSE (docs/MCP.md); the head, the chunks, the
 * end with its counts, the pings, the flush after each poll; and the
 * Accept header that asks for one.
 *
 * Not here: the writes of whole answers and the FIFO's order
 * (jrpc_front_answer), which answers a body has (the broker). */
#include "jrpc_front_http_int.h"

#include <assert.h>
#include <stdio.h>
#include <time.h>

#include "jrpc_log.h"

/* ---- streamed answers (SSE, NDJSON) -------------------------------------- */

/* A streamed answer at the head of the FIFO: what is queued goes out,
 * uv_try_write first, the rest with uv_write from s_wr (nothing appends to
 * it while it is written: new bytes go to s_out). Returns true when the
 * record is done and popped and flush may go on with the next one. */
bool stream_flush(conn_t *c, req_t *r)
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

static void on_flushq(uv_check_t *h);
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
void mark_dirty(conn_t *c)
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
void on_answer(void *ctx, uint32_t pos, const char *json, size_t len)
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
int stream_end(conn_t *c, req_t *r, jrpc_outcome_t out, const char *summary, size_t len)
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

/* How the answers of a request are to go out, from its Accept header
 * (docs/STREAMING.md): streamed when text/event-stream, application/x-ndjson
 * or application/jsonl is acceptable (q > 0) and preferred to
 * application/json (a higher q, or application/json not acceptable at
 * all); SSE first on a tie. HTTP/1.0 has no chunked coding: never. */
uint8_t stream_mode(const jrpc_http_head_t *h)
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
