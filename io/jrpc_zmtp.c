/* jrpc_zmtp — see jrpc_zmtp.h. Spec: ZMTP 3.1 (rfc.zeromq.org/spec/37),
 * the NULL mechanism and metadata of spec 23, socket types of spec 28. */
#include "jrpc_zmtp.h"

#include <assert.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "jrpc_log.h"

#define COMP "zmtp"

/* ---- the output queue -------------------------------------------------- */

#define OUTQ_MIN   256     /* first capacity */
#define ENDS_MIN   16      /* first message-end slots */
#define WRITE_MAX  (1u << 30)  /* bytes one uv_buf_t may carry */

void jrpc_zmtp_outq_init(jrpc_zmtp_outq_t *q, size_t keep)
{
    memset(q, 0, sizeof *q);
    q->keep = keep;
}

void jrpc_zmtp_outq_dispose(jrpc_zmtp_outq_t *q)
{
    free(q->buf);
    free(q->ends);
    free(q->pinned);
    jrpc_zmtp_outq_init(q, q->keep);
}

/* Room for n more bytes at buf + len. Unwritten bytes move to the start
 * when that makes room and no write reads them; else the buffer grows, and
 * one a write still reads is pinned rather than freed. */
static int outq_room(jrpc_zmtp_outq_t *q, size_t n)
{
    if (q->cap - q->len >= n)
        return 0;
    size_t pending = q->len - q->off;
    if (q->inflight == 0 && q->off > 0 && q->cap - pending >= n && pending <= q->cap / 2) {
        memmove(q->buf, q->buf + q->off, pending);
    } else {
        size_t cap = q->cap * 2 > OUTQ_MIN ? q->cap * 2 : OUTQ_MIN;
        if (cap < pending + n)
            cap = pending + n;
        uint8_t *b = malloc(cap);
        if (b == NULL)
            return -ENOMEM;
        if (pending)
            memcpy(b, q->buf + q->off, pending);
        if (q->inflight && q->pinned == NULL)
            q->pinned = q->buf;   /* the write in flight reads it */
        else
            free(q->buf);         /* an earlier copy: nobody reads it */
        q->buf = b;
        q->cap = cap;
    }
    for (uint32_t i = q->ehead; i < q->en; i++)
        q->ends[i] -= q->off;
    q->len = pending;
    q->off = 0;
    return 0;
}

/* Room for one more message end. */
static int outq_ends_room(jrpc_zmtp_outq_t *q)
{
    if (q->en < q->ecap)
        return 0;
    if (q->ehead > 0) {
        memmove(q->ends, q->ends + q->ehead, (q->en - q->ehead) * sizeof *q->ends);
        q->en -= q->ehead;
        q->ehead = 0;
        return 0;
    }
    uint32_t ecap = q->ecap ? q->ecap * 2 : ENDS_MIN;
    size_t *e = realloc(q->ends, ecap * sizeof *e);
    if (e == NULL)
        return -ENOMEM;
    q->ends = e;
    q->ecap = ecap;
    return 0;
}

int jrpc_zmtp_outq_put(jrpc_zmtp_outq_t *q, const jrpc_span_t *frames, int n, const void *raw,
                       size_t raw_len)
{
    size_t total = raw_len;
    if (raw == NULL)
        for (int i = 0; i < n; i++)
            total += 9 + frames[i].n;
    if (outq_ends_room(q) < 0 || outq_room(q, total) < 0)
        return -ENOMEM;
    uint8_t *o = q->buf + q->len;
    if (raw) {
        memcpy(o, raw, raw_len);
        o += raw_len;
    } else {
        for (int i = 0; i < n; i++) {
            o += jrpc_zmtp_frame_head(o, i + 1 < n ? JRPC_ZMTP_FLAG_MORE : 0, frames[i].n);
            if (frames[i].n)
                memcpy(o, frames[i].p, frames[i].n);
            o += frames[i].n;
        }
    }
    q->len = (size_t)(o - q->buf);
    q->ends[q->en++] = q->len;
    return 0;
}

void jrpc_zmtp_outq_consume(jrpc_zmtp_outq_t *q, size_t bytes)
{
    q->off += bytes;
    while (q->ehead < q->en && q->ends[q->ehead] <= q->off)
        q->ehead++;
    if (q->off < q->len || q->inflight)
        return;
    q->off = q->len = 0;
    q->ehead = q->en = 0;
    if (q->cap > q->keep) {
        free(q->buf);
        q->buf = NULL;
        q->cap = 0;
    }
}

void jrpc_zmtp_outq_writing(jrpc_zmtp_outq_t *q, size_t n)
{
    q->inflight = n;
}

void jrpc_zmtp_outq_written(jrpc_zmtp_outq_t *q)
{
    size_t n = q->inflight;
    q->inflight = 0;
    free(q->pinned);
    q->pinned = NULL;
    jrpc_zmtp_outq_consume(q, n);
}

/* ---- the server -------------------------------------------------------- */

#define READ_MIN    16384   /* free room offered to each read */
#define SHRINK_AT   262144  /* an empty input buffer larger than this is freed */
#define MAX_FRAMES  3       /* delimiter, header, body; more is "excess" */


enum conn_state {
    ST_GREETING,   /* waiting for the peer's 64 bytes */
    ST_HANDSHAKE,  /* waiting for its READY */
    ST_OPEN,
    ST_FLUSHING,   /* not reading: closes once the queue is written */
    ST_CLOSED,     /* handles closing or closed */
};

struct jrpc_zmtp_conn {
    jrpc_zmtp_stream_t io;
    uv_timer_t        timer;      /* the handshake deadline */
    uv_write_t        wreq;
    jrpc_zmtp_t      *z;
    jrpc_zmtp_conn_t *prev, *next;  /* z->conns (while not closed) */
    jrpc_zmtp_conn_t *dirty_next;   /* z->dirty (while dirty) */
    bool              dirty;      /* on z->dirty: has bytes to write */
    bool              writing;    /* wreq in flight */
    enum conn_state   state;
    int               refs;       /* 1 for the socket, 1 per holder */
    int               handles;    /* handles not yet closed */
    uint8_t          *in;         /* input: [base, len) not consumed yet */
    size_t            in_cap, in_len;
    size_t            base;       /* start of the message in progress */
    size_t            pos;        /* next frame to decode */
    size_t            need;       /* bytes from base the next decode needs */
    size_t            off[MAX_FRAMES], size[MAX_FRAMES];  /* kept frames, from base */
    int               nframes;
    bool              excess;     /* the message had more than MAX_FRAMES */
    uint8_t           skipped;    /* bit i: kept frame i was oversized, its bytes dropped */
    bool              skip_more;  /* the frame being skipped has FLAG_MORE */
    uint64_t          skip;       /* its body bytes still to drop as they arrive */
    bool              opened;     /* got past READY: its close is reported */
    jrpc_zmtp_outq_t  out;        /* what is to be written */
    void             *user;       /* jrpc_zmtp_conn_set_data */
    uint32_t          id;         /* jrpc_zmtp_conn_id */
    char              peer[INET6_ADDRSTRLEN];  /* "" on ipc:// */
};

struct jrpc_zmtp {
    uv_loop_t        *loop;
    jrpc_zmtp_stream_t listener;
    uv_prepare_t      prepare;    /* writes the dirty connections before the loop blocks */
    uv_idle_t         idle;       /* started with the first dirty connection: see mark_dirty */
    uv_timer_t        linger;     /* destroy: how long queued replies may take */
    bool              ipc;
    char             *ipc_path;   /* unlinked at the end */
    jrpc_zmtp_msg_cb  cb;
    jrpc_zmtp_close_cb on_close;
    jrpc_zmtp_read_cb on_read;
    void             *data;
    size_t            out_keep;
    uint32_t          next_id;    /* jrpc_zmtp_conn_id of the next connection */
    uint64_t          max_frame;
    bool              skip_oversized; /* opts: skip a larger message frame, do not cut */
    uint32_t          hwm;
    uint32_t          handshake_ms;
    bool              paused;
    bool              destroyed;
    int               handles;    /* own handles not yet closed */
    uint64_t          live;       /* connection structs not yet freed */
    jrpc_zmtp_conn_t *conns;      /* open (not closed) connections */
    jrpc_zmtp_conn_t *dirty;      /* connections with bytes to write */
    jrpc_zmtp_stats_t st;
    uint64_t          paused_dropped; /* messages read while paused */
    uint64_t          delivered;  /* messages given to cb */
};

static void conn_close(jrpc_zmtp_conn_t *c);
static void conn_flush(jrpc_zmtp_conn_t *c);
static void maybe_free(jrpc_zmtp_t *z);
static void close_linger(jrpc_zmtp_t *z);
static void on_idle(uv_idle_t *h);

bool jrpc_zmtp_supports(const char *endpoint)
{
    /* ipc://@NAME is libzmq's Linux abstract namespace: not a path. */
    return strncmp(endpoint, "tcp://", 6) == 0 ||
           (strncmp(endpoint, "ipc://", 6) == 0 && endpoint[6] != '@');
}

/* A reply may be made after our prepare callback has run in this loop turn
 * (by another prepare callback: jrpc_zwatch reads worker replies there), and
 * the loop would then block with it unwritten. So the idle handle is started
 * too: the loop does not block while it is active, and whichever of prepare
 * and idle runs first writes and stops it. Starting it costs no syscall. */
static void mark_dirty(jrpc_zmtp_conn_t *c)
{
    if (c->dirty)
        return;
    c->dirty = true;
    c->dirty_next = c->z->dirty;
    c->z->dirty = c;
    if (!c->z->destroyed)
        uv_idle_start(&c->z->idle, on_idle);
}

/* A command of ours: name, then data. */
static int enqueue_command(jrpc_zmtp_conn_t *c, const char *name, const void *data, size_t n)
{
    uint8_t cmd[9 + 1 + 255 + 255];   /* PONG (16 bytes of context) and ERROR (255) fit */
    assert(1 + strlen(name) + n <= sizeof cmd - 9);
    size_t hl = jrpc_zmtp_command_head(cmd, name, n);
    if (n)
        memcpy(cmd + hl, data, n);
    if (jrpc_zmtp_outq_put(&c->out, NULL, 0, cmd, hl + n) < 0)
        return -ENOMEM;
    mark_dirty(c);
    return 0;
}

int jrpc_zmtp_send(jrpc_zmtp_conn_t *c, const jrpc_span_t *frames, int n)
{
    if (c->state != ST_OPEN)
        return -EHOSTUNREACH;
    if (jrpc_zmtp_outq_count(&c->out) >= c->z->hwm)
        return -EAGAIN;
    if (jrpc_zmtp_outq_put(&c->out, frames, n, NULL, 0) < 0)
        return -ENOMEM;
    mark_dirty(c);
    return 0;
}

void jrpc_zmtp_conn_set_data(jrpc_zmtp_conn_t *c, void *p)
{
    c->user = p;
}

void *jrpc_zmtp_conn_data(const jrpc_zmtp_conn_t *c)
{
    return c->user;
}

uint32_t jrpc_zmtp_conn_id(const jrpc_zmtp_conn_t *c)
{
    return c->id;
}

void jrpc_zmtp_conn_ref(jrpc_zmtp_conn_t *c)
{
    c->refs++;
}

void jrpc_zmtp_conn_unref(jrpc_zmtp_conn_t **conn_p)
{
    jrpc_zmtp_conn_t *c = *conn_p;
    if (c == NULL)
        return;
    *conn_p = NULL;
    if (--c->refs > 0)
        return;
    jrpc_zmtp_t *z = c->z;
    jrpc_zmtp_outq_dispose(&c->out);
    free(c->in);
    free(c);
    z->live--;
    maybe_free(z);
}

static void on_write(uv_write_t *w, int status)
{
    jrpc_zmtp_conn_t *c = w->data;
    c->writing = false;
    jrpc_zmtp_outq_written(&c->out);
    if (c->state == ST_CLOSED)
        return;
    if (status < 0) {
        JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=write_failed peer=%s error=%s",
                 c->peer[0] ? c->peer : "-", uv_err_name(status));
        conn_close(c);
        return;
    }
    conn_flush(c);
}

/* The unwritten bytes as one buffer (at most WRITE_MAX of them). */
static uv_buf_t out_buf(const jrpc_zmtp_conn_t *c)
{
    size_t n = jrpc_zmtp_outq_pending(&c->out);
    return uv_buf_init((char *)c->out.buf + c->out.off, (unsigned)(n > WRITE_MAX ? WRITE_MAX : n));
}

/* Writes what is queued: uv_try_write first (no request), what is left
 * with one uv_write, which it reads in place (jrpc_zmtp_outq_writing). */
static void conn_flush(jrpc_zmtp_conn_t *c)
{
    if (c->writing || c->state == ST_CLOSED)
        return;
    while (jrpc_zmtp_outq_pending(&c->out) > 0) {
        uv_buf_t b = out_buf(c);
        int w = uv_try_write(&c->io.s, &b, 1);
        if (w == UV_EAGAIN || w == 0)
            break;
        if (w < 0) {
            JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=write_failed peer=%s error=%s",
                     c->peer[0] ? c->peer : "-", uv_err_name(w));
            conn_close(c);
            return;
        }
        jrpc_zmtp_outq_consume(&c->out, (size_t)w);
        if ((size_t)w < b.len)
            break;   /* the socket is full */
    }
    if (jrpc_zmtp_outq_pending(&c->out) == 0) {
        if (c->state == ST_FLUSHING)
            conn_close(c);
        return;
    }
    uv_buf_t b = out_buf(c);
    c->wreq.data = c;
    int rc = uv_write(&c->wreq, &c->io.s, &b, 1, on_write);
    if (rc < 0) {
        conn_close(c);
        return;
    }
    c->writing = true;
    jrpc_zmtp_outq_writing(&c->out, b.len);
}

static void flush_dirty(jrpc_zmtp_t *z)
{
    while (z->dirty) {
        jrpc_zmtp_conn_t *c = z->dirty;
        z->dirty = c->dirty_next;
        c->dirty = false;
        c->dirty_next = NULL;
        conn_flush(c);
    }
    uv_idle_stop(&z->idle);
}

static void on_prepare(uv_prepare_t *h)
{
    flush_dirty(h->data);
}

static void on_idle(uv_idle_t *h)
{
    flush_dirty(h->data);
}

static void on_conn_handle_closed(uv_handle_t *h)
{
    jrpc_zmtp_conn_t *c = h->data;
    if (--c->handles == 0)
        jrpc_zmtp_conn_unref(&c);
}

static void conn_close(jrpc_zmtp_conn_t *c)
{
    if (c->state == ST_CLOSED)
        return;
    jrpc_zmtp_t *z = c->z;
    if (c->state != ST_OPEN && c->state != ST_FLUSHING)
        z->st.handshake_failed++;
    c->state = ST_CLOSED;
    if (c->prev)
        c->prev->next = c->next;
    else
        z->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
    z->st.conns--;
    if (c->dirty) {   /* unlink from the dirty list */
        for (jrpc_zmtp_conn_t **pp = &z->dirty; *pp; pp = &(*pp)->dirty_next) {
            if (*pp == c) {
                *pp = c->dirty_next;
                break;
            }
        }
        c->dirty = false;
    }
    c->handles = 2;
    uv_close(&c->io.h, on_conn_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_conn_handle_closed);
    if (z->destroyed && z->conns == NULL)
        close_linger(z);
    else if (c->opened && z->on_close && !z->destroyed)
        z->on_close(z->data, c);
}

/* Refuses the peer: ERROR with the reason, then closed once written. */
static void conn_refuse(jrpc_zmtp_conn_t *c, const char *why)
{
    JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=handshake_refused peer=%s reason=\"%s\"",
             c->peer[0] ? c->peer : "-", why);
    size_t n = strlen(why);
    uint8_t reason[256];
    reason[0] = (uint8_t)(n > 255 ? 255 : n);
    memcpy(reason + 1, why, reason[0]);
    if (enqueue_command(c, "ERROR", reason, 1 + (size_t)reason[0]) < 0) {
        conn_close(c);
        return;
    }
    c->z->st.handshake_failed++;
    c->state = ST_FLUSHING;   /* counted here, not again in conn_close */
    uv_read_stop(&c->io.s);
    conn_flush(c);
}

static void on_handshake_timeout(uv_timer_t *t)
{
    jrpc_zmtp_conn_t *c = t->data;
    if (c->state == ST_OPEN || c->state == ST_CLOSED)
        return;
    c->z->st.handshake_timeouts++;
    JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=handshake_timeout peer=%s ms=%u total=%llu",
             c->peer[0] ? c->peer : "-", c->z->handshake_ms,
             (unsigned long long)c->z->st.handshake_timeouts);
    if (c->state == ST_FLUSHING)   /* an ERROR that could not leave */
        c->state = ST_OPEN;        /* already counted */
    conn_close(c);
}

/* Drops bytes [at, at + n) of the input (a command or an excess frame
 * inside a message whose first frames are kept). */
static void splice_out(jrpc_zmtp_conn_t *c, size_t at, size_t n)
{
    memmove(c->in + at, c->in + at + n, c->in_len - at - n);
    c->in_len -= n;
}

/* Returns 0, or -1 when the connection was closed. */
static int on_command(jrpc_zmtp_conn_t *c, const jrpc_zmtp_frame_t *f)
{
    jrpc_span_t name, data;
    if (jrpc_zmtp_command_split(f->body, f->size, &name, &data) < 0) {
        conn_close(c);
        return -1;
    }
    if (c->state == ST_HANDSHAKE) {
        const char *why = "expected READY";
        if (!jrpc_zmtp_name_is(name, "READY") ||
            jrpc_zmtp_ready_check((const uint8_t *)data.p, data.n, &why) < 0) {
            conn_refuse(c, why);
            return -1;
        }
        c->state = ST_OPEN;
        c->opened = true;
        uv_timer_stop(&c->timer);
        return 0;
    }
    if (jrpc_zmtp_name_is(name, "PING")) {   /* TTL (2 bytes, ignored), context (0..16 bytes) */
        if (data.n < 2 || data.n > 2 + 16) {
            conn_close(c);
            return -1;
        }
        /* A peer that sends PINGs and does not read gets no more PONGs
         * once hwm messages wait for it: the queue stays bounded. */
        if (jrpc_zmtp_outq_count(&c->out) >= c->z->hwm)
            return 0;
        if (enqueue_command(c, "PONG", data.p + 2, data.n - 2) < 0) {
            conn_close(c);
            return -1;
        }
        c->z->st.pings++;
        return 0;
    }
    if (jrpc_zmtp_name_is(name, "PONG"))
        return 0;
    JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=closed reason=command peer=%s command=\"%.*s\"",
             c->peer[0] ? c->peer : "-", (int)(name.n > 32 ? 32 : name.n), name.p);
    conn_close(c);   /* ERROR from the peer, READY twice, anything unknown */
    return -1;
}

static void deliver(jrpc_zmtp_conn_t *c)
{
    jrpc_zmtp_t *z = c->z;
    if (z->paused) {
        z->paused_dropped++;
        JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=message_dropped reason=paused total=%llu",
                 (unsigned long long)z->paused_dropped);
        return;
    }
    jrpc_span_t frames[MAX_FRAMES];
    for (int i = 0; i < c->nframes; i++)
        frames[i] = (c->skipped >> i) & 1u
            ? (jrpc_span_t){ NULL, c->size[i] }
            : (jrpc_span_t){ (const char *)c->in + c->base + c->off[i], c->size[i] };
    z->delivered++;
    z->cb(z->data, c, frames, c->nframes, c->excess, c->peer[0] ? c->peer : NULL);
}

/* The last frame of a message is in: hand it over, start the next. c
 * outlives the callback even if it closes it: the memory goes in a close
 * callback, on a later loop turn. */
static void message_end(jrpc_zmtp_conn_t *c)
{
    deliver(c);
    c->base = c->pos;
    c->nframes = 0;
    c->excess = false;
    c->skipped = 0;
}

/* A message frame above max_frame, its header at c->pos (checked by the
 * decoder): kept as its size alone, its header dropped, its body dropped
 * as it arrives (drop_skipped), so that the bytes are never buffered and
 * the message can still be answered (issue 35: -32600 at any size). */
static void skip_begin(jrpc_zmtp_conn_t *c)
{
    const uint8_t *h = c->in + c->pos;
    size_t hl = (h[0] & JRPC_ZMTP_FLAG_LONG) ? 9 : 2;
    uint64_t size = h[1];
    if (h[0] & JRPC_ZMTP_FLAG_LONG) {
        size = 0;
        for (int i = 1; i < 9; i++)
            size = size << 8 | h[i];
    }
    if (c->nframes < MAX_FRAMES) {
        c->off[c->nframes] = c->pos - c->base;
        c->size[c->nframes] = (size_t)size;
        c->skipped |= (uint8_t)(1u << c->nframes);
        c->nframes++;
    } else {
        c->excess = true;
    }
    c->skip_more = (h[0] & JRPC_ZMTP_FLAG_MORE) != 0;
    c->skip = size;
    splice_out(c, c->pos, hl);
    c->z->st.oversized++;
}

/* Drops what has arrived of the frame being skipped. Returns true when it
 * is all gone (the frame is done), false when more is to come. */
static bool drop_skipped(jrpc_zmtp_conn_t *c)
{
    size_t avail = c->in_len - c->pos;
    size_t k = avail < c->skip ? avail : (size_t)c->skip;
    splice_out(c, c->pos, k);   /* what follows them (the next frames) stays */
    c->skip -= k;
    c->need = 0;
    return c->skip == 0;
}

/* Decodes what is in; closes the connection on anything that is not ZMTP. */
static void conn_process(jrpc_zmtp_conn_t *c)
{
    jrpc_zmtp_t *z = c->z;
    while (c->state == ST_GREETING || c->state == ST_HANDSHAKE || c->state == ST_OPEN) {
        if (c->state == ST_GREETING) {
            const char *why = NULL;
            int rc = jrpc_zmtp_greeting_check(c->in + c->base, c->in_len - c->base, &why);
            if (rc == JRPC_ZMTP_NEED_MORE) {
                c->need = JRPC_ZMTP_GREETING_LEN;
                return;
            }
            if (rc < 0) {
                JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=greeting_refused peer=%s reason=\"%s\"",
                         c->peer[0] ? c->peer : "-", why);
                conn_close(c);
                return;
            }
            c->base += JRPC_ZMTP_GREETING_LEN;
            c->pos = c->base;
            c->state = ST_HANDSHAKE;
            continue;
        }
        if (c->skip) {
            if (!drop_skipped(c))
                return;
            if (!c->skip_more)
                message_end(c);
            continue;
        }
        jrpc_zmtp_frame_t f;
        size_t need = 0;
        ssize_t n = jrpc_zmtp_frame_decode(c->in + c->pos, c->in_len - c->pos, z->max_frame, &f, &need);
        if (n == JRPC_ZMTP_NEED_MORE) {
            c->need = c->pos - c->base + need;
            return;
        }
        if (n == JRPC_ZMTP_TOO_LARGE && z->skip_oversized && c->state == ST_OPEN &&
            !(c->in[c->pos] & JRPC_ZMTP_FLAG_COMMAND)) {
            skip_begin(c);
            continue;
        }
        if (n == JRPC_ZMTP_TOO_LARGE) {   /* as libzmq's ZMQ_MAXMSGSIZE: no word */
            z->st.oversized++;
            JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=closed reason=frame_too_large peer=%s "
                     "max_frame=%llu total=%llu", c->peer[0] ? c->peer : "-",
                     (unsigned long long)z->max_frame, (unsigned long long)z->st.oversized);
            conn_close(c);
            return;
        }
        if (n < 0) {
            JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=closed reason=malformed_frame peer=%s",
                     c->peer[0] ? c->peer : "-");
            conn_close(c);
            return;
        }
        if (f.flags & JRPC_ZMTP_FLAG_COMMAND) {
            if (on_command(c, &f) < 0)
                return;
            if (c->nframes > 0)
                splice_out(c, c->pos, (size_t)n);
            else
                c->base = c->pos += (size_t)n;
            continue;
        }
        if (c->state != ST_OPEN) {   /* a message before READY */
            conn_refuse(c, "expected READY");
            return;
        }
        if (c->nframes < MAX_FRAMES) {
            c->off[c->nframes] = (size_t)(f.body - c->in) - c->base;
            c->size[c->nframes] = f.size;
            c->nframes++;
            c->pos += (size_t)n;
        } else {
            c->excess = true;
            splice_out(c, c->pos, (size_t)n);
        }
        if (!(f.flags & JRPC_ZMTP_FLAG_MORE))
            message_end(c);
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    jrpc_zmtp_conn_t *c = h->data;
    if (c->base > 0 && (c->base == c->in_len || c->in_cap - c->in_len < READ_MIN)) {
        memmove(c->in, c->in + c->base, c->in_len - c->base);
        c->in_len -= c->base;
        c->pos -= c->base;
        c->base = 0;
    }
    if (c->in_len == 0 && c->in_cap > SHRINK_AT) {
        free(c->in);
        c->in = NULL;
        c->in_cap = 0;
    }
    /* Room for what the next frame needs (its header was checked against
     * max_frame before need was set) and one more read. */
    size_t want = c->in_len + READ_MIN;
    if (c->base + c->need > want)
        want = c->base + c->need;
    if (want > c->in_cap) {
        size_t cap = c->in_cap * 2;
        if (cap < want || cap > want + (1u << 20))
            cap = want;
        uint8_t *p = realloc(c->in, cap);
        if (p == NULL) {
            *buf = uv_buf_init(NULL, 0);   /* libuv reports UV_ENOBUFS */
            return;
        }
        c->in = p;
        c->in_cap = cap;
    }
    *buf = uv_buf_init((char *)c->in + c->in_len, (unsigned)(c->in_cap - c->in_len));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    jrpc_zmtp_conn_t *c = s->data;
    if (nread < 0) {
        if (nread != UV_EOF)
            JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=read_failed peer=%s error=%s",
                     c->peer[0] ? c->peer : "-", uv_err_name((int)nread));
        conn_close(c);
        return;
    }
    c->in_len += (size_t)nread;
    if (nread == 0)
        return;
    jrpc_zmtp_t *z = c->z;
    uint64_t before = z->delivered;
    conn_process(c);
    if (z->on_read && !z->destroyed && z->delivered != before)
        z->on_read(z->data);
}

static void peer_name(jrpc_zmtp_conn_t *c)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    c->peer[0] = '\0';
    if (c->z->ipc || uv_tcp_getpeername(&c->io.tcp, (struct sockaddr *)&ss, &len) != 0)
        return;
    if (ss.ss_family == AF_INET)
        uv_ip4_name((struct sockaddr_in *)&ss, c->peer, sizeof c->peer);
    else if (ss.ss_family == AF_INET6)
        uv_ip6_name((struct sockaddr_in6 *)&ss, c->peer, sizeof c->peer);
}

static void on_connection(uv_stream_t *server, int status)
{
    jrpc_zmtp_t *z = server->data;
    if (status < 0 || z->destroyed)
        return;
    jrpc_zmtp_conn_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        return;
    c->z = z;
    c->refs = 1;
    c->id = z->next_id++;
    jrpc_zmtp_outq_init(&c->out, z->out_keep);
    z->live++;
    if (z->ipc)
        uv_pipe_init(z->loop, &c->io.pipe, 0);
    else
        uv_tcp_init(z->loop, &c->io.tcp);
    uv_timer_init(z->loop, &c->timer);
    c->io.h.data = c->timer.data = c;
    c->state = ST_GREETING;
    c->next = z->conns;
    if (z->conns)
        z->conns->prev = c;
    z->conns = c;
    z->st.conns++;
    z->st.accepted++;
    if (uv_accept(server, &c->io.s) < 0) {
        conn_close(c);
        return;
    }
    if (!z->ipc)
        uv_tcp_nodelay(&c->io.tcp, 1);
    peer_name(c);
    /* Our greeting and READY (Socket-Type ROUTER), sent at once. */
    uint8_t hello[JRPC_ZMTP_GREETING_LEN + JRPC_ZMTP_READY_MAX];
    memcpy(hello, jrpc_zmtp_greeting, JRPC_ZMTP_GREETING_LEN);
    size_t hl = JRPC_ZMTP_GREETING_LEN + jrpc_zmtp_ready_put(hello + JRPC_ZMTP_GREETING_LEN, "ROUTER");
    if (jrpc_zmtp_outq_put(&c->out, NULL, 0, hello, hl) < 0) {
        conn_close(c);
        return;
    }
    uv_timer_start(&c->timer, on_handshake_timeout, z->handshake_ms, 0);
    if (uv_read_start(&c->io.s, on_alloc, on_read) < 0) {
        conn_close(c);
        return;
    }
    conn_flush(c);
}

/* libzmq binds tcp://eth0:PORT to the interface's address: its first IPv4
 * one (IPv6 when it has none). Returns 0 with out set, or -1 (not an
 * interface name). */
static int interface_address(const char *name, char *out, size_t outlen)
{
    struct ifaddrs *all = NULL;
    if (getifaddrs(&all) != 0)
        return -1;
    int rc = -1;
    for (int want = AF_INET; rc < 0 && want != 0; want = want == AF_INET ? AF_INET6 : 0) {
        for (struct ifaddrs *i = all; i && rc < 0; i = i->ifa_next) {
            if (i->ifa_addr == NULL || i->ifa_addr->sa_family != want || strcmp(i->ifa_name, name) != 0)
                continue;
            if (want == AF_INET)
                rc = uv_ip4_name((const struct sockaddr_in *)i->ifa_addr, out, outlen);
            else
                rc = uv_ip6_name((const struct sockaddr_in6 *)i->ifa_addr, out, outlen);
        }
    }
    freeifaddrs(all);
    return rc < 0 ? -1 : 0;
}

/* "tcp://HOST:PORT": HOST is *, an IPv4 address, [IPv6], an interface name
 * (as libzmq) or a host name; PORT a number or * (any). */
static int bind_tcp(jrpc_zmtp_t *z, const char *ep)
{
    const char *hp = ep + 6, *colon = strrchr(hp, ':');
    if (colon == NULL || colon == hp)
        return -EINVAL;
    char host[256];
    size_t hl = (size_t)(colon - hp);
    if (hp[0] == '[' && colon[-1] == ']') {
        hp++;
        hl -= 2;
    }
    if (hl == 0 || hl >= sizeof host)
        return -EINVAL;
    memcpy(host, hp, hl);
    host[hl] = '\0';
    const char *port = strcmp(colon + 1, "*") == 0 ? "0" : colon + 1;
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_PASSIVE | AI_NUMERICSERV }, *res = NULL;
    char ifaddr[INET6_ADDRSTRLEN];
    const char *name = strcmp(host, "*") == 0 ? "0.0.0.0"
                       : interface_address(host, ifaddr, sizeof ifaddr) == 0 ? ifaddr : host;
    int rc = getaddrinfo(name, port, &hints, &res);
    if (rc != 0)
        return rc == EAI_SYSTEM ? -errno : -EADDRNOTAVAIL;
    struct addrinfo *pick = res;   /* IPv4 first, as libzmq does without ZMQ_IPV6 */
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        if (ai->ai_family == AF_INET) {
            pick = ai;
            break;
        }
    }
    rc = uv_tcp_init(z->loop, &z->listener.tcp);
    if (rc == 0) {
        z->handles++;
        z->listener.h.data = z;
        rc = uv_tcp_bind(&z->listener.tcp, pick->ai_addr, 0);
    }
    freeaddrinfo(res);
    return rc;
}

static int bind_ipc(jrpc_zmtp_t *z, const char *ep)
{
    const char *path = ep + 6;
    z->ipc = true;
    int rc = uv_pipe_init(z->loop, &z->listener.pipe, 0);
    if (rc < 0)
        return rc;
    z->handles++;
    z->listener.h.data = z;
    unlink(path);   /* as libzmq: a file left by an earlier run */
    if ((rc = uv_pipe_bind(&z->listener.pipe, path)) < 0)
        return rc;
    z->ipc_path = strdup(path);
    return z->ipc_path ? 0 : -ENOMEM;
}

static void on_own_closed(uv_handle_t *h)
{
    jrpc_zmtp_t *z = h->data;
    z->handles--;
    maybe_free(z);
}

static void close_linger(jrpc_zmtp_t *z)
{
    if (!uv_is_closing((uv_handle_t *)&z->linger))
        uv_close((uv_handle_t *)&z->linger, on_own_closed);
}

static void maybe_free(jrpc_zmtp_t *z)
{
    if (z->destroyed && z->handles == 0 && z->live == 0) {
        free(z->ipc_path);
        free(z);
    }
}

int jrpc_zmtp_new(uv_loop_t *loop, const jrpc_zmtp_opts_t *opts, jrpc_zmtp_msg_cb cb, void *data,
                  jrpc_zmtp_t **out)
{
    *out = NULL;
    jrpc_zmtp_t *z = calloc(1, sizeof *z);
    if (z == NULL)
        return -ENOMEM;
    z->loop = loop;
    z->cb = cb;
    z->on_close = opts->on_close;
    z->on_read = opts->on_read;
    z->out_keep = opts->out_keep;
    z->next_id = (uint32_t)uv_hrtime() ^ (uint32_t)uv_os_getpid() << 16;
    z->data = data;
    z->max_frame = opts->max_frame;
    z->skip_oversized = opts->skip_oversized;
    z->hwm = opts->hwm;
    z->handshake_ms = opts->handshake_ms;
    z->listener.h.data = z;
    int rc = strncmp(opts->endpoint, "ipc://", 6) == 0 ? bind_ipc(z, opts->endpoint)
             : strncmp(opts->endpoint, "tcp://", 6) == 0 ? bind_tcp(z, opts->endpoint)
             : -EPROTONOSUPPORT;
    if (rc == 0)
        rc = uv_listen(&z->listener.s, 128, on_connection);
    if (rc < 0) {
        JRPC_LOG(JRPC_LOG_ERROR, COMP, "event=bind_failed endpoint=%s error=\"%s\"",
                 opts->endpoint, uv_strerror(rc));
        z->destroyed = true;
        if (z->handles)
            uv_close(&z->listener.h, on_own_closed);   /* frees z */
        else
            maybe_free(z);
        return rc;
    }
    z->listener.h.data = z;
    uv_prepare_init(loop, &z->prepare);
    uv_idle_init(loop, &z->idle);
    uv_timer_init(loop, &z->linger);
    z->prepare.data = z->idle.data = z->linger.data = z;
    z->handles += 3;
    uv_prepare_start(&z->prepare, on_prepare);
    uv_unref((uv_handle_t *)&z->prepare);
    *out = z;
    return 0;
}

void jrpc_zmtp_pause(jrpc_zmtp_t *z)
{
    z->paused = true;
}

void jrpc_zmtp_stats(const jrpc_zmtp_t *z, jrpc_zmtp_stats_t *out)
{
    *out = z->st;
}

static void on_linger(uv_timer_t *t)
{
    jrpc_zmtp_t *z = t->data;
    while (z->conns)
        conn_close(z->conns);   /* closes the linger timer with the last one */
}

void jrpc_zmtp_destroy(jrpc_zmtp_t **self_p, uint32_t linger_ms)
{
    jrpc_zmtp_t *z = *self_p;
    if (z == NULL)
        return;
    *self_p = NULL;
    flush_dirty(z);   /* what is queued starts leaving now */
    z->destroyed = true;
    uv_close(&z->listener.h, on_own_closed);
    uv_close((uv_handle_t *)&z->prepare, on_own_closed);
    uv_close((uv_handle_t *)&z->idle, on_own_closed);
    if (z->ipc_path)
        unlink(z->ipc_path);
    for (jrpc_zmtp_conn_t *c = z->conns, *next; c; c = next) {
        next = c->next;
        if (c->state == ST_CLOSED)
            continue;
        if (jrpc_zmtp_outq_pending(&c->out) == 0) {
            conn_close(c);
            continue;
        }
        c->state = ST_FLUSHING;
        uv_read_stop(&c->io.s);
    }
    if (z->conns == NULL) {
        close_linger(z);
    } else {
        uv_timer_start(&z->linger, on_linger, linger_ms, 0);
    }
}
