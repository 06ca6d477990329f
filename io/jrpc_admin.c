/* jrpc_admin — see jrpc_admin.h. */
#include "jrpc_admin.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jrpc_http_reader.h"
#include "jrpc_http_response.h"
#include "jrpc_listen.h"
#include "jrpc_log.h"

#define COMP    "admin"
#define REQ_MAX 4096   /* request line and headers; bytes held while an answer is written */

typedef struct aconn aconn_t;

struct aconn {
    uv_tcp_t      tcp;        /* first: the handle's address is the connection's */
    uv_timer_t    timer;      /* the request deadline */
    uv_write_t    wreq;
    jrpc_admin_t *admin;
    aconn_t      *prev, *next; /* open connections */
    jrpc_buf_t    out;        /* the answer being written */
    size_t        len;        /* bytes in buf the reader has not taken yet */
    bool          writing;    /* wreq in flight */
    bool          closing;    /* uv_close called */
    bool          close_after; /* close once the answer is written */
    bool          ka10;       /* an HTTP/1.0 client asked for keep-alive: say so */
    int           nclosing;   /* handles still closing */
    jrpc_http_reader_t rd;    /* the same request reader as the RPC front's */
    char          buf[REQ_MAX];
};

struct jrpc_admin {
    uv_loop_t     *loop;
    uv_tcp_t       listener;
    bool           destroyed; /* the hooks are no longer called */
    jrpc_admin_opts_t opts;
    aconn_t       *conns;
    uint32_t       nconns;
    uint32_t       alive;     /* listener + connections not yet freed */
    jrpc_http_date_t date;    /* the Date header, once per second */
};

static void admin_release(jrpc_admin_t *a)
{
    if (--a->alive > 0)
        return;
    free(a);
}

/* ---- connections ---- */

static void on_handle_closed(uv_handle_t *h)
{
    aconn_t *c = h->data;
    if (--c->nclosing > 0)
        return;
    jrpc_admin_t *a = c->admin;
    jrpc_buf_dispose(&c->out);
    free(c);
    admin_release(a);
}

static void conn_close(aconn_t *c)
{
    if (c->closing)
        return;
    c->closing = true;
    jrpc_admin_t *a = c->admin;
    if (c->prev)
        c->prev->next = c->next;
    else
        a->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    a->nconns--;
    c->nclosing = 2;
    uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
}

static void on_timeout(uv_timer_t *t)
{
    conn_close(t->data);
}

static void process(aconn_t *c);
static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* Reads while the connection can take a request: not writing an answer
 * (answers go one at a time), not closing, room in buf. */
static void resume(aconn_t *c)
{
    if (c->closing)
        return;
    if (c->writing || c->close_after || c->len == REQ_MAX)
        uv_read_stop((uv_stream_t *)&c->tcp);
    else
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void on_write(uv_write_t *w, int status)
{
    aconn_t *c = w->data;
    c->writing = false;
    if (c->closing)
        return;
    if (status < 0 || c->close_after) {
        conn_close(c);
        return;
    }
    process(c);   /* a pipelined request may be waiting */
    resume(c);
}

/* Sends one answer. body == NULL: the page already in c->out (metrics, the
 * owner's pages). more: header lines of the owner's page, or NULL. */
static void respond_more(aconn_t *c, int status, const char *ctype, const char *more,
                         const char *body, bool head)
{
    char hdr[JRPC_HTTP_HEAD_MAX + 320], extra[320];
    size_t blen = body ? strlen(body) : c->out.len;
    jrpc_http_resp_t h = {
        .status = (uint16_t)status,
        .date = jrpc_http_date(&c->admin->date, time(NULL)),
        .content_type = ctype,
        .content_length = blen,
        .connection = c->close_after ? JRPC_HTTP_CONN_CLOSE
                      : c->ka10 ? JRPC_HTTP_CONN_KEEP_ALIVE : JRPC_HTTP_CONN_NONE,
        .extra = extra,
    };
    if (snprintf(extra, sizeof extra, "Cache-Control: no-store\r\n%s%s",
                 status == 405 ? "Allow: GET, HEAD\r\n" : "", more ? more : "") >= (int)sizeof extra) {
        conn_close(c);   /* the owner's lines are over the contract's 256 bytes */
        return;
    }
    int n = jrpc_http_response_head(hdr, sizeof hdr, &h);
    if (n < 0) { /* not expected: the longest content type is 41 bytes */
        conn_close(c);
        return;
    }
    uv_buf_t bufs[2] = { uv_buf_init(hdr, (unsigned)n),
                         uv_buf_init(body ? (char *)body : c->out.p, head ? 0 : (unsigned)blen) };
    /* uv_try_write first: the header lives on this stack. What it leaves
     * goes to the connection's buffer and an ordinary write. */
    int nbufs = bufs[1].len ? 2 : 1;
    int done = uv_try_write((uv_stream_t *)&c->tcp, bufs, nbufs);
    size_t total = (size_t)n + bufs[1].len, skip = done > 0 ? (size_t)done : 0;
    if (skip == total) {
        if (c->close_after)
            conn_close(c);
        return;
    }
    jrpc_buf_t rest;
    jrpc_buf_init(&rest);
    for (int i = 0; i < nbufs; i++) {
        size_t s = skip < bufs[i].len ? skip : bufs[i].len;
        if (jrpc_buf_append(&rest, bufs[i].base + s, bufs[i].len - s) < 0) {
            jrpc_buf_dispose(&rest);
            conn_close(c);
            return;
        }
        skip -= s;
    }
    jrpc_buf_dispose(&c->out);
    c->out = rest;
    uv_buf_t wb = uv_buf_init(c->out.p, (unsigned)c->out.len);
    c->wreq.data = c;
    c->writing = true;
    if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &wb, 1, on_write) < 0) {
        c->writing = false;
        conn_close(c);
    }
}

static void respond(aconn_t *c, int status, const char *ctype, const char *body, bool head)
{
    respond_more(c, status, ctype, NULL, body, head);
}

#define TEXT "text/plain; charset=utf-8"

/* GET or HEAD of a path that is not the admin's own: the owner's page hook. */
static void serve_page(aconn_t *c, const char *path, size_t plen, bool head)
{
    jrpc_admin_t *a = c->admin;
    const char *ctype = NULL, *more = NULL;
    jrpc_buf_reset(&c->out);
    int rc = a->opts.page(a->opts.arg, path, plen, &c->out, &ctype, &more);
    if (rc == -ENOENT) {
        respond(c, 404, TEXT, "not found\n", head);
    } else if (rc < 0 || ctype == NULL) {
        c->close_after = true;
        respond(c, 503, TEXT, "out of memory\n", false);
    } else {
        respond_more(c, 200, ctype, more, NULL, head);
    }
}

/* Answers one request (its head: the reader has checked the framing). */
static void serve(aconn_t *c, const jrpc_http_head_t *h)
{
    c->close_after = !h->keep_alive;
    c->ka10 = h->keep_alive && h->version_minor == 0;
    bool head = h->method == JRPC_HTTP_M_HEAD;
    bool get = h->method == JRPC_HTTP_M_GET;
    const char *path = NULL;
    size_t plen = 0;
    int which = 0;
    bool have_path = jrpc_http_head_path(h, &path, &plen);
    if (have_path) {
#define IS(lit) (plen == sizeof(lit) - 1 && memcmp(path, lit, plen) == 0)
        which = IS("/metrics") ? 1 : IS("/healthz") ? 2 : IS("/readyz") ? 3 : 0;
#undef IS
    }
    if (which == 0 && (get || head) && c->admin->opts.page && have_path) {
        serve_page(c, path, plen, head);
    } else if (which == 0 && c->admin->opts.page && have_path) {
        /* another method on a path of the owner's: 405 where GET would answer */
        const char *ct = NULL, *more = NULL;
        jrpc_buf_reset(&c->out);
        bool known = c->admin->opts.page(c->admin->opts.arg, path, plen, &c->out, &ct, &more) != -ENOENT;
        jrpc_buf_reset(&c->out);
        if (known)
            respond(c, 405, TEXT, "method not allowed\n", false);
        else
            respond(c, 404, TEXT, "not found\n", head);
    } else if (which == 0) {
        respond(c, 404, TEXT, "not found\n", head);
    } else if (!get && !head) {
        respond(c, 405, TEXT, "method not allowed\n", false);
    } else if (which == 2) {
        respond(c, 200, TEXT, "ok\n", head);
    } else if (which == 3) {
        const char *why = c->admin->opts.not_ready(c->admin->opts.arg);
        char line[400];
        snprintf(line, sizeof line, "not ready: %s\n", why ? why : "");
        respond(c, why ? 503 : 200, TEXT, why ? line : "ready\n", head);
    } else {
        jrpc_buf_reset(&c->out);
        if (c->admin->opts.metrics(c->admin->opts.arg, &c->out) < 0) {
            c->close_after = true;
            respond(c, 503, TEXT, "out of memory\n", false);
            return;
        }
        respond(c, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, head);
    }
}

/* Hands what buf holds to the reader and serves complete requests, one at
 * a time (the next waits for the previous answer's write: its bytes stay
 * in buf). */
static void process(aconn_t *c)
{
    size_t off = 0;
    while (!c->closing && !c->writing && !c->close_after) {
        jrpc_http_event_t ev;
        off += jrpc_http_reader_feed(&c->rd, c->buf + off, c->len - off, &ev);
        const jrpc_http_head_t *h = jrpc_http_reader_head(&c->rd);
        if (ev.kind == JRPC_HTTP_NEED_MORE) {
            break;
        } else if (ev.kind == JRPC_HTTP_HEAD) {
            if (h->chunked || h->content_length > 0) {
                c->close_after = true; /* we read no bodies: nothing after it can be framed */
                respond(c, 400, TEXT, "request bodies are not accepted\n", false);
            }
        } else if (ev.kind == JRPC_HTTP_END) {
            serve(c, h);
            if (!c->closing) /* a new request: a new deadline */
                uv_timer_start(&c->timer, on_timeout, c->admin->opts.timeout_ms, 0);
        } else if (ev.kind == JRPC_HTTP_REFUSE) {
            char line[128];
            snprintf(line, sizeof line, "%s\n", ev.reason);
            c->close_after = true;
            respond(c, ev.status, TEXT, line, false);
        } else { /* CLOSED: the answer that closes is on its way */
            break;
        }
    }
    memmove(c->buf, c->buf + off, c->len - off);
    c->len -= off;
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    aconn_t *c = h->data;
    *buf = uv_buf_init(c->buf + c->len, (unsigned)(REQ_MAX - c->len));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    aconn_t *c = s->data;
    if (nread < 0) {
        conn_close(c);
        return;
    }
    c->len += (size_t)nread;
    if (c->close_after)   /* closing after an answer: ignore what follows */
        c->len = 0;
    process(c);
    resume(c);
}

static void on_connection(uv_stream_t *server, int status)
{
    jrpc_admin_t *a = server->data;
    if (status < 0 || a->destroyed)
        return;
    aconn_t *c = NULL;
    if (a->nconns >= a->opts.max_conns || (c = calloc(1, sizeof *c)) == NULL) {
        jrpc_listen_refuse(server);
        return;
    }
    c->admin = a;
    a->alive++;
    jrpc_buf_init(&c->out);
    jrpc_http_reader_init(&c->rd, &(jrpc_http_limits_t){ REQ_MAX, 0 });
    uv_tcp_init(a->loop, &c->tcp);
    uv_timer_init(a->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->next = a->conns;
    if (a->conns)
        a->conns->prev = c;
    a->conns = c;
    a->nconns++;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
        conn_close(c);
        return;
    }
    uv_timer_start(&c->timer, on_timeout, a->opts.timeout_ms, 0);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void on_listener_closed(uv_handle_t *h)
{
    admin_release(h->data);
}

jrpc_admin_t *jrpc_admin_new(uv_loop_t *loop, const jrpc_admin_opts_t *opts)
{
    assert(opts->metrics != NULL && opts->not_ready != NULL);
    const char *listen = opts->listen;
    int fd = jrpc_listen_socket(listen, COMP, "admin", false);
    if (fd < 0)
        return NULL;
    jrpc_admin_t *a = calloc(1, sizeof *a);
    if (a == NULL) {
        close(fd);
        return NULL;
    }
    a->loop = loop;
    a->opts = *opts;
    a->opts.listen = NULL;          /* used here only */
    a->alive = 1;
    uv_tcp_init(loop, &a->listener);
    a->listener.data = a;
    int rc;
    if ((rc = uv_tcp_open(&a->listener, fd)) < 0 ||
        (rc = uv_listen((uv_stream_t *)&a->listener, 128, on_connection)) < 0) {
        JRPC_LOG(JRPC_LOG_ERROR, COMP, "event=listen_failed endpoint=admin://%s error=\"%s\"",
                 listen, uv_strerror(rc));
        a->destroyed = true;
        uv_close((uv_handle_t *)&a->listener, on_listener_closed);
        return NULL;   /* freed by the close callback */
    }
    jrpc_listen_log(&a->listener, COMP, "admin");
    return a;
}

void jrpc_admin_destroy(jrpc_admin_t **self_p)
{
    jrpc_admin_t *a = *self_p;
    if (a == NULL)
        return;
    *self_p = NULL;
    a->destroyed = true;
    while (a->conns)
        conn_close(a->conns);
    uv_close((uv_handle_t *)&a->listener, on_listener_closed);
}
