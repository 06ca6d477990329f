/* jrpc_zdealer — see jrpc_zdealer.h. Spec: ZMTP 3.1 (rfc.zeromq.org/spec/37),
 * the NULL mechanism (spec 23), DEALER to ROUTER (spec 28). */
#include "jrpc_zdealer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "jrpc_buf.h"
#include "jrpc_log.h"
#include "jrpc_zmtp.h"
#include "jrpc_zmtp_codec.h"

#define COMP          "zdealer"
#define READ_ROOM     65536    /* free room offered to each read */
#define SHRINK_AT     262144   /* an empty input buffer larger than this is freed */
#define HANDSHAKE_MS  30000    /* libzmq's ZMQ_HANDSHAKE_IVL */

enum state {
    ST_RESOLVING,   /* uv_getaddrinfo running */
    ST_CONNECTING,  /* uv_connect running */
    ST_HANDSHAKE,   /* connected, waiting for the broker's greeting and READY */
    ST_UP,
    ST_RETRY,       /* the attempt failed: its handle closing, or the retry timer running */
    ST_DOWN,        /* was up, lost: waiting for jrpc_zdealer_close */
    ST_LINGER,      /* closing: the queue may still be written */
    ST_CLOSING,     /* handles closing; freed with the last */
};

struct jrpc_zdealer {
    uv_loop_t          *loop;
    jrpc_zdealer_cbs_t  cbs;
    jrpc_zdealer_opts_t opts;
    void               *data;
    char               *endpoint;     /* as given, for the logs */
    bool                ipc;
    char               *host, *port;  /* tcp:// */
    enum state          state;
    jrpc_zmtp_stream_t  io;
    bool                io_open;      /* io initialised and not closed yet */
    uv_connect_t        creq;
    uv_getaddrinfo_t    gai;
    bool                gai_busy;
    uv_timer_t          timer;        /* retry, handshake deadline, linger */
    bool                timer_open;
    uv_write_t          wreq;
    bool                writing;
    uint32_t            ivl;          /* the next retry's wait */
    jrpc_buf_t          out;          /* framed bytes not handed to libuv yet */
    jrpc_buf_t          wbuf;         /* the bytes of wreq */
    jrpc_buf_t          in;           /* read: [off, len) not decoded */
    size_t              off;
    bool                greeted;      /* the broker's greeting is in */
    uint8_t             hello[JRPC_ZMTP_GREETING_LEN + JRPC_ZMTP_READY_MAX]; /* ours */
    int                 parts;        /* frames of a multipart message being dropped */
};

bool jrpc_zdealer_supports(const char *endpoint)
{
    /* An abstract name (ipc://@NAME) needs uv_pipe_connect2, libuv 1.46:
     * Debian 12 has 1.44, so those stay libzmq's. */
    if (strncmp(endpoint, "ipc://", 6) == 0)
        return endpoint[6] != '\0' && endpoint[6] != '@' &&
               strlen(endpoint + 6) < sizeof ((struct sockaddr_un *)0)->sun_path;
    if (strncmp(endpoint, "tcp://", 6) != 0 || strchr(endpoint, ';') != NULL)
        return false;
    const char *colon = strrchr(endpoint + 6, ':');
    return colon != NULL && colon > endpoint + 6 && colon[1] != '\0';
}

void *jrpc_zdealer_data(const jrpc_zdealer_t *d)
{
    return d->data;
}

static void attempt(jrpc_zdealer_t *d);
static void maybe_free(jrpc_zdealer_t *d);
static void flush(jrpc_zdealer_t *d);

/* ---- closing and retrying ---- */

static void on_timer_closed(uv_handle_t *h)
{
    jrpc_zdealer_t *d = h->data;
    d->timer_open = false;
    maybe_free(d);
}

static void on_retry_timer(uv_timer_t *t)
{
    attempt(t->data);
}

static void on_io_closed(uv_handle_t *h)
{
    jrpc_zdealer_t *d = h->data;
    d->io_open = false;
    if (d->state == ST_RETRY)
        uv_timer_start(&d->timer, on_retry_timer, d->ivl, 0);
    else
        maybe_free(d);
}

static void io_close(jrpc_zdealer_t *d)
{
    if (d->io_open && !uv_is_closing(&d->io.h))
        uv_close(&d->io.h, on_io_closed);
}

static void maybe_free(jrpc_zdealer_t *d)
{
    if (d->state != ST_CLOSING || d->io_open || d->timer_open || d->gai_busy || d->writing)
        return;
    void (*closed)(jrpc_zdealer_t *) = d->cbs.on_closed;
    jrpc_buf_dispose(&d->out);
    jrpc_buf_dispose(&d->wbuf);
    jrpc_buf_dispose(&d->in);
    free(d->endpoint);
    free(d->host);
    free(d->port);
    if (closed)
        closed(d);
    free(d);
}

/* The attempt failed (before the connection was up): try again later. */
static void retry(jrpc_zdealer_t *d, const char *why)
{
    JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=connect_failed endpoint=%s reason=\"%s\" retry_ms=%u",
             d->endpoint, why, d->ivl);
    d->state = ST_RETRY;
    uv_timer_stop(&d->timer);
    d->in.len = d->off = 0;
    d->greeted = false;
    if (d->io_open) {
        io_close(d);   /* the timer starts once the handle is closed */
    } else {
        uv_timer_start(&d->timer, on_retry_timer, d->ivl, 0);
    }
    uint32_t next = d->ivl * 2;
    d->ivl = next > d->opts.ivl_max_ms ? d->opts.ivl_max_ms : next;
}

/* The connection was up and is lost: the session is over. */
static void down(jrpc_zdealer_t *d, const char *why)
{
    d->state = ST_DOWN;
    uv_timer_stop(&d->timer);
    io_close(d);
    d->out.len = 0;
    JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=connection_lost endpoint=%s reason=\"%s\"", d->endpoint,
             why);
    if (d->cbs.on_down)
        d->cbs.on_down(d, why);
}

/* Up: the session is lost. Before (nothing of the owner's was written:
 * messages wait for the broker's READY): tried again later. */
static void fail(jrpc_zdealer_t *d, const char *why)
{
    if (d->state == ST_UP)
        down(d, why);
    else if (d->state == ST_HANDSHAKE || d->state == ST_CONNECTING || d->state == ST_RESOLVING)
        retry(d, why);
}

/* ---- writing ---- */

static void on_write(uv_write_t *req, int status)
{
    jrpc_zdealer_t *d = req->data;
    d->writing = false;
    d->wbuf.len = 0;
    if (d->state == ST_RETRY)
        return;   /* the hello of a failed attempt */
    if (d->state == ST_CLOSING) {
        maybe_free(d);
        return;
    }
    if (status < 0) {
        fail(d, uv_strerror(status));
        return;
    }
    flush(d);
}

static void finish_close(jrpc_zdealer_t *d);

/* Hands out to libuv: what the socket takes now, the rest in one uv_write. */
static void flush(jrpc_zdealer_t *d)
{
    bool can = d->state == ST_UP || d->state == ST_LINGER;
    if (!can || d->writing || d->out.len == 0) {
        if (d->state == ST_LINGER && !d->writing && d->out.len == 0)
            finish_close(d);
        return;
    }
    uv_buf_t b = uv_buf_init(d->out.p, (unsigned)d->out.len);
    int n = uv_try_write(&d->io.s, &b, 1);
    if (n < 0 && n != UV_EAGAIN) {
        fail(d, uv_strerror(n));
        if (d->state == ST_LINGER)
            finish_close(d);
        return;
    }
    size_t took = n > 0 ? (size_t)n : 0;
    if (took == d->out.len) {
        d->out.len = 0;
        if (d->state == ST_LINGER)
            finish_close(d);
        return;
    }
    /* The rest goes in one uv_write from wbuf; out starts empty again. */
    jrpc_buf_t t = d->wbuf;
    d->wbuf = d->out;
    d->out = t;
    d->out.len = 0;
    memmove(d->wbuf.p, d->wbuf.p + took, d->wbuf.len - took);
    d->wbuf.len -= took;
    b = uv_buf_init(d->wbuf.p, (unsigned)d->wbuf.len);
    d->wreq.data = d;
    int rc = uv_write(&d->wreq, &d->io.s, &b, 1, on_write);
    if (rc < 0) {
        d->wbuf.len = 0;
        fail(d, uv_strerror(rc));
        return;
    }
    d->writing = true;
}

int jrpc_zdealer_send(jrpc_zdealer_t *d, const void *p, size_t n)
{
    if (d->state == ST_DOWN || d->state == ST_LINGER || d->state == ST_CLOSING)
        return -ENOTCONN;
    uint8_t h[9];
    size_t hl = jrpc_zmtp_frame_head(h, 0, n);
    if (jrpc_buf_append(&d->out, h, hl) < 0 || jrpc_buf_append(&d->out, p, n) < 0)
        return -ENOMEM;
    flush(d);
    return 0;
}

/* ---- reading ---- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    jrpc_zdealer_t *d = h->data;
    if (d->off == d->in.len) {
        d->off = d->in.len = 0;
        if (d->in.cap > SHRINK_AT) {
            jrpc_buf_dispose(&d->in);
            jrpc_buf_init(&d->in);
        }
    } else if (d->off > 0 && d->in.cap - d->in.len < READ_ROOM) {
        memmove(d->in.p, d->in.p + d->off, d->in.len - d->off);
        d->in.len -= d->off;
        d->off = 0;
    }
    if (jrpc_buf_reserve(&d->in, READ_ROOM) < 0) {
        *buf = uv_buf_init(NULL, 0);   /* libuv reports UV_ENOBUFS */
        return;
    }
    *buf = uv_buf_init(d->in.p + d->in.len, (unsigned)(d->in.cap - d->in.len));
}

/* A command once up: PING gets its PONG; PONG is nothing; anything else
 * (ERROR, READY again, unknown) ends the connection. Returns 0 or -1. */
static int on_command(jrpc_zdealer_t *d, const jrpc_zmtp_frame_t *f)
{
    jrpc_span_t name, data;
    if (jrpc_zmtp_command_split(f->body, f->size, &name, &data) < 0) {
        fail(d, "malformed command");
        return -1;
    }
    if (jrpc_zmtp_name_is(name, "PONG"))
        return 0;
    if (!jrpc_zmtp_name_is(name, "PING") || data.n < 2 || data.n > 2 + 16) {
        fail(d, jrpc_zmtp_name_is(name, "ERROR") ? "ERROR from the broker" : "unexpected command");
        return -1;
    }
    uint8_t pong[16 + 16];
    size_t hl = jrpc_zmtp_command_head(pong, "PONG", data.n - 2);
    memcpy(pong + hl, data.p + 2, data.n - 2);
    if (jrpc_buf_append(&d->out, pong, hl + data.n - 2) < 0) {
        fail(d, "out of memory");
        return -1;
    }
    flush(d);
    return 0;
}

/* The broker's READY: a ROUTER with the NULL mechanism. Returns 0 or -1. */
static int on_ready(jrpc_zdealer_t *d, const jrpc_zmtp_frame_t *f)
{
    jrpc_span_t name, data, type;
    const char *why = "expected READY";
    if (!(f->flags & JRPC_ZMTP_FLAG_COMMAND) ||
        jrpc_zmtp_command_split(f->body, f->size, &name, &data) < 0 ||
        !jrpc_zmtp_name_is(name, "READY") ||
        jrpc_zmtp_ready_type((const uint8_t *)data.p, data.n, &type, &why) < 0 ||
        !jrpc_zmtp_name_is(type, "ROUTER")) {
        retry(d, why);
        return -1;
    }
    d->state = ST_UP;
    d->ivl = d->opts.ivl_ms;
    uv_timer_stop(&d->timer);
    JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=connected endpoint=%s", d->endpoint);
    flush(d);   /* what waited for the connection */
    return 0;
}

/* Decodes what is in, until it needs more or the dealer stops reading. */
static void process(jrpc_zdealer_t *d)
{
    while (d->state == ST_HANDSHAKE || d->state == ST_UP) {
        const uint8_t *p = (const uint8_t *)d->in.p + d->off;
        size_t len = d->in.len - d->off;
        if (!d->greeted) {
            const char *why = NULL;
            int rc = jrpc_zmtp_greeting_check(p, len, &why);
            if (rc == JRPC_ZMTP_NEED_MORE)
                return;
            if (rc < 0) {
                retry(d, why);
                return;
            }
            d->off += JRPC_ZMTP_GREETING_LEN;
            d->greeted = true;
            continue;
        }
        jrpc_zmtp_frame_t f;
        size_t need;
        ssize_t n = jrpc_zmtp_frame_decode(p, len, d->opts.max_frame, &f, &need);
        if (n == JRPC_ZMTP_NEED_MORE)
            return;
        if (n < 0) {
            fail(d, n == JRPC_ZMTP_TOO_LARGE ? "frame above the limit" : "malformed frame");
            return;
        }
        d->off += (size_t)n;
        if (d->state == ST_HANDSHAKE) {
            if (on_ready(d, &f) < 0)
                return;
            continue;
        }
        if (f.flags & JRPC_ZMTP_FLAG_COMMAND) {
            if (on_command(d, &f) < 0)
                return;
            continue;
        }
        if (d->parts > 0 || (f.flags & JRPC_ZMTP_FLAG_MORE)) {   /* not ours: dropped */
            d->parts++;
            if (!(f.flags & JRPC_ZMTP_FLAG_MORE)) {
                int parts = d->parts;
                d->parts = 0;
                if (d->cbs.on_multipart)
                    d->cbs.on_multipart(d, parts);
            }
            continue;
        }
        d->cbs.on_message(d, (const char *)f.body, f.size);
    }
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    jrpc_zdealer_t *d = s->data;
    if (nread == 0)
        return;
    if (nread < 0) {
        fail(d, nread == UV_EOF ? "closed by the broker" : uv_strerror((int)nread));
        return;
    }
    d->in.len += (size_t)nread;
    process(d);
}

/* ---- connecting ---- */

static void on_handshake_timeout(uv_timer_t *t)
{
    jrpc_zdealer_t *d = t->data;
    retry(d, "no handshake in time");
}

static void on_connect(uv_connect_t *req, int status)
{
    jrpc_zdealer_t *d = req->data;
    if (d->state != ST_CONNECTING)
        return;   /* closed meanwhile */
    if (status < 0) {
        retry(d, uv_strerror(status));
        return;
    }
    if (!d->ipc)
        uv_tcp_nodelay(&d->io.tcp, 1);
    /* Our greeting and READY; what the owner queued waits for the
     * broker's READY (as libzmq's pipe does), so that a failed handshake
     * loses none of it. */
    memcpy(d->hello, jrpc_zmtp_greeting_client, JRPC_ZMTP_GREETING_LEN);
    size_t hl = JRPC_ZMTP_GREETING_LEN + jrpc_zmtp_ready_put(d->hello + JRPC_ZMTP_GREETING_LEN,
                                                            "DEALER");
    d->state = ST_HANDSHAKE;
    uv_timer_start(&d->timer, on_handshake_timeout, HANDSHAKE_MS, 0);
    int rc = uv_read_start(&d->io.s, on_alloc, on_read);
    if (rc < 0) {
        retry(d, uv_strerror(rc));
        return;
    }
    uv_buf_t b = uv_buf_init((char *)d->hello, (unsigned)hl);
    d->wreq.data = d;
    if ((rc = uv_write(&d->wreq, &d->io.s, &b, 1, on_write)) < 0) {
        retry(d, uv_strerror(rc));
        return;
    }
    d->writing = true;
}

/* The handle was initialised with rc (uv_tcp_init, uv_pipe_init): owns it
 * and says "connecting", or retries. Returns whether to connect now. */
static bool begin_connect(jrpc_zdealer_t *d, int rc)
{
    if (rc < 0) {
        retry(d, uv_strerror(rc));
        return false;
    }
    d->io.h.data = d;
    d->io_open = true;
    d->state = ST_CONNECTING;
    d->creq.data = d;
    return true;
}

static void connect_to(jrpc_zdealer_t *d, const struct sockaddr *sa)
{
    int rc;
    if (begin_connect(d, uv_tcp_init(d->loop, &d->io.tcp)) &&
        (rc = uv_tcp_connect(&d->creq, &d->io.tcp, sa, on_connect)) < 0)
        retry(d, uv_strerror(rc));
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *ai)
{
    jrpc_zdealer_t *d = req->data;
    d->gai_busy = false;
    if (d->state != ST_RESOLVING) {   /* closed meanwhile (cancelled) */
        uv_freeaddrinfo(ai);
        maybe_free(d);
        return;
    }
    if (status < 0 || ai == NULL) {
        uv_freeaddrinfo(ai);
        retry(d, status < 0 ? uv_strerror(status) : "no address");
        return;
    }
    connect_to(d, ai->ai_addr);
    uv_freeaddrinfo(ai);
}

/* One attempt: resolve (a name) or connect (an address, a path). */
static void attempt(jrpc_zdealer_t *d)
{
    if (d->state != ST_RETRY && d->state != ST_RESOLVING)
        return;
    if (d->ipc) {
        if (begin_connect(d, uv_pipe_init(d->loop, &d->io.pipe, 0)))
            uv_pipe_connect(&d->creq, &d->io.pipe, d->endpoint + 6, on_connect);
        return;
    }
    struct sockaddr_storage ss;
    if (uv_ip4_addr(d->host, atoi(d->port), (struct sockaddr_in *)&ss) == 0 ||
        uv_ip6_addr(d->host, atoi(d->port), (struct sockaddr_in6 *)&ss) == 0) {
        connect_to(d, (struct sockaddr *)&ss);
        return;
    }
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_NUMERICSERV };
    d->state = ST_RESOLVING;
    d->gai.data = d;
    int rc = uv_getaddrinfo(d->loop, &d->gai, on_resolved, d->host, d->port, &hints);
    if (rc < 0) {
        retry(d, uv_strerror(rc));
        return;
    }
    d->gai_busy = true;
}

int jrpc_zdealer_new(uv_loop_t *loop, const char *endpoint, const jrpc_zdealer_opts_t *opts,
                     const jrpc_zdealer_cbs_t *cbs, void *data, jrpc_zdealer_t **out)
{
    if (!jrpc_zdealer_supports(endpoint))
        return -EINVAL;
    jrpc_zdealer_t *d = calloc(1, sizeof *d);
    if (d == NULL || (d->endpoint = strdup(endpoint)) == NULL) {
        free(d);
        return -ENOMEM;
    }
    d->loop = loop;
    d->cbs = *cbs;
    d->opts = *opts;
    d->data = data;
    d->ivl = opts->ivl_ms;
    d->ipc = strncmp(endpoint, "ipc://", 6) == 0;
    jrpc_buf_init(&d->out);
    jrpc_buf_init(&d->wbuf);
    jrpc_buf_init(&d->in);
    if (!d->ipc) {
        const char *h = endpoint + 6, *colon = strrchr(h, ':');
        size_t hl = (size_t)(colon - h);
        if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']')
            h++, hl -= 2;
        d->host = strndup(h, hl);
        d->port = strdup(colon + 1);
        if (d->host == NULL || d->port == NULL) {
            free(d->host);
            free(d->port);
            free(d->endpoint);
            free(d);
            return -ENOMEM;
        }
    }
    uv_timer_init(loop, &d->timer);
    d->timer.data = d;
    d->timer_open = true;
    d->state = ST_RETRY;
    attempt(d);
    *out = d;
    return 0;
}

/* ---- closing ---- */

static void finish_close(jrpc_zdealer_t *d)
{
    d->state = ST_CLOSING;
    io_close(d);
    if (d->timer_open && !uv_is_closing((uv_handle_t *)&d->timer))
        uv_close((uv_handle_t *)&d->timer, on_timer_closed);
    if (d->gai_busy)
        uv_cancel((uv_req_t *)&d->gai);   /* on_resolved still comes */
    maybe_free(d);
}

static void on_linger(uv_timer_t *t)
{
    finish_close(t->data);
}

void jrpc_zdealer_close(jrpc_zdealer_t *d, uint32_t linger_ms)
{
    if (d->state == ST_LINGER || d->state == ST_CLOSING)
        return;
    bool pending = d->writing || d->out.len > 0;
    if (d->state == ST_UP && pending && linger_ms > 0) {
        d->state = ST_LINGER;
        uv_read_stop(&d->io.s);
        uv_timer_stop(&d->timer);
        uv_timer_start(&d->timer, on_linger, linger_ms, 0);
        flush(d);
        return;
    }
    finish_close(d);
}
