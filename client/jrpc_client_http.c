/* jrpc_client_http — libjrpc-client's HTTP/1.1 transport (http://, and
 * https:// through jrpc_client_tls): a POST of the body per call over one
 * kept-alive connection. See jrpc_client_transport.h for the contract of
 * each function, jrpc_client.h for what a caller sees (statuses,
 * resending). */
#include "jrpc_client_transport.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <http_parser.h>
#include "jrpc_client_tls.h"
#include "jrpc_client_url.h"

#define MCP_SESSION_MAX 256       /* a longer Mcp-Session-Id is refused */
#define MCP_VERSION_MAX 15
#define MCP_OFFERED     "2025-06-18"

typedef struct hconn {
    jrpc_client_t *client;     /* where failures are described */
    jrpc_client_url_t url;     /* host, port, Host header, path, where (for messages) */
    jrpc_client_tls_t *tls;    /* https://: the TLS state; NULL for http:// */
    int            fd;         /* kept-alive connection, -1 when none */
    jrpc_buf_t     head;       /* the request head, reused */
    jrpc_buf_t     out;        /* https://: head and a small body in one TLS write */
    jrpc_buf_t     sse_line;   /* streamed answers: the event-stream line being read */
    jrpc_buf_t     sse_data;   /* ... and the event's data */
    char          *bearer;     /* opts->bearer's copy; NULL: none */
    /* MCP (opts->mcp; jrpc_client.h, "MCP"): */
    bool           mcp;
    bool           mcp_open;   /* initialize answered: the two below go with every request */
    char           mcp_session[MCP_SESSION_MAX + 1]; /* its Mcp-Session-Id; "" none given */
    char           mcp_version[MCP_VERSION_MAX + 1]; /* the protocol version it chose */
    char           mcp_given[MCP_SESSION_MAX + 2];   /* the last answer's Mcp-Session-Id */
    size_t         mcp_given_len; /* its length (MCP_SESSION_MAX + 1: longer than allowed) */
} hconn_t;

#define set_err(c, ...) jrpc_client_errf((c)->client, __VA_ARGS__)

/* One connection, one request at a time, kept alive across calls. The
 * socket is non-blocking and every wait is a poll() bounded by the call's
 * deadline, so connect, send and receive all obey timeout_ms (name
 * resolution does not: getaddrinfo cannot be bounded; use an address).
 *
 * Reuse and retry. A kept-alive connection may have been closed by the
 * server while idle. Before reusing one we check it: if it is readable (EOF,
 * a reset, or stray bytes nobody asked for) it is dropped and a fresh one
 * made; nothing was sent on it, so this is always safe. Beyond that, a
 * request is sent again (once, on a fresh connection) only when writing it
 * on a reused connection failed (EPIPE, ECONNRESET...) and no byte of an
 * answer has arrived: the server cannot have read the whole request then.
 * Once the request is fully written we never resend it, whatever happens
 * (EOF, reset, timeout), since the server may have received and run it.
 *
 * https:// is the same over TLS (jrpc_client_tls): the SSL lives as long as
 * its socket, so keep-alive and the rules above hold unchanged; "readable
 * while idle" means a close_notify, an alert or stray data (a session
 * ticket is taken and the connection kept); and the TLS session outlives
 * the connection, so a reconnect resumes it. */

#define HTTP_MAX_REPLY    (256u << 20)  /* answers larger than this are refused */
#define HTTP_READ_CHUNK   16384
#define TLS_ONE_WRITE_MAX 16384         /* up to this, head and body go in one TLS record */

/* True when fd has something to read right now (bytes, EOF or an error). */
static bool fd_readable(int fd)
{
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    return poll(&pfd, 1, 0) > 0;
}

static void http_close_conn(hconn_t *c)
{
    if (c->fd >= 0) {
        if (c->tls)
            jrpc_client_tls_close(c->tls, false);   /* the session stays for the next one */
        close(c->fd);
        c->fd = -1;
    }
}

/* Whether the kept-alive connection can carry the next request (see
 * "Reuse and retry" above). */
static bool http_idle_ok(hconn_t *c)
{
    return c->tls ? jrpc_client_tls_idle_ok(c->tls) : !fd_readable(c->fd);
}

/* The TLS handshake on the fresh connection c->fd. Returns 0, or closes it,
 * sets the message and returns the code. */
static int http_handshake(hconn_t *c, int64_t deadline, int timeout_ms)
{
    int rc = jrpc_client_tls_connect(c->tls, c->fd, deadline);
    if (rc == 0)
        return 0;
    if (rc == -ETIMEDOUT)
        set_err(c, "TLS handshake with %s timed out after %d ms", c->url.peer, timeout_ms);
    else if (rc == -EINTR)
        set_err(c, "interrupted during the TLS handshake with %s", c->url.peer);
    else if (rc == JRPC_CLIENT_ETLS)
        set_err(c, "TLS handshake with %s failed: %s", c->url.peer,
                jrpc_client_tls_error(c->tls));
    else
        set_err(c, "TLS handshake with %s failed: %s", c->url.peer, strerror(-rc));
    http_close_conn(c);
    return rc;
}

/* Connects to the URL's host and port, trying every address, and over
 * https:// runs the TLS handshake. Sets c->fd and returns 0, or sets the
 * error message and returns -errno (-ETIMEDOUT, -EINTR, -EHOSTUNREACH when
 * the name does not resolve) or JRPC_CLIENT_ETLS. */
static int http_connect(hconn_t *c, int64_t deadline, int timeout_ms)
{
    int rc;
    if (c->tls && (rc = jrpc_client_tls_setup(c->tls)) < 0) {   /* files first: no connection wasted */
        set_err(c, "cannot set up TLS for %s: %s", c->url.where, jrpc_client_tls_error(c->tls));
        return rc;
    }
    int gai = 0;
    rc = jrpc_client_tcp_connect(c->url.host, c->url.port, deadline, &c->fd, &gai);
    if (gai != 0) {
        set_err(c, "cannot connect to %s: cannot resolve %s: %s", c->url.where, c->url.host,
                gai == EAI_SYSTEM ? strerror(errno) : gai_strerror(gai));
        return rc;
    }
    if (rc == -ETIMEDOUT)
        set_err(c, "cannot connect to %s within %d ms", c->url.where, timeout_ms);
    else if (rc == -EINTR)
        set_err(c, "interrupted while connecting to %s", c->url.where);
    else if (rc < 0)
        set_err(c, "cannot connect to %s: %s", c->url.where, strerror(-rc));
    if (rc == 0 && c->tls)
        rc = http_handshake(c, deadline, timeout_ms);
    return rc;
}

/* A value we put in a header line must not be able to end it. */
static bool header_value_ok(jrpc_span_t v)
{
    for (size_t i = 0; i < v.n; i++)
        if ((unsigned char)v.p[i] < 0x20 || v.p[i] == 0x7f)
            return false;
    return true;
}

/* Appends "name: value\r\n" when value is set. Returns 0 or -ENOMEM. */
static int put_header_line(jrpc_buf_t *b, const char *name, jrpc_span_t value)
{
    int rc;
    if (value.n == 0)
        return 0;
    if ((rc = jrpc_buf_puts(b, name)) < 0 || (rc = jrpc_buf_puts(b, ": ")) < 0
        || (rc = jrpc_buf_append(b, value.p, value.n)) < 0)
        return rc;
    return jrpc_buf_puts(b, "\r\n");
}

/* Writes the request head into c->head: every field of hdr that is set has
 * an HTTP form (the signing fields are the X-JRPC-* headers of the wire
 * contract). Returns 0, -EINVAL or -ENOMEM with the message set. */
static int http_build_head(hconn_t *c, const char *method, const jrpc_header_t *hdr, size_t len,
                           bool stream)
{
    static const jrpc_header_t none;
    char line[64];
    jrpc_buf_t *b = &c->head;
    int rc;

    if (hdr == NULL)
        hdr = &none;
    if (!header_value_ok(hdr->traceparent) || !header_value_ok(hdr->key)
        || !header_value_ok(hdr->nonce) || !header_value_ok(hdr->signature)
        || !header_value_ok(hdr->idem_key)) {
        set_err(c, "a header value holds control characters (traceparent, signing fields or "
                "idempotency key)");
        return -EINVAL;
    }
    jrpc_buf_reset(b);
    snprintf(line, sizeof line, "Content-Length: %zu\r\n", len);
    if ((rc = jrpc_buf_puts(b, method)) < 0 || (rc = jrpc_buf_putc(b, ' ')) < 0
        || (rc = jrpc_buf_puts(b, c->url.path)) < 0
        || (rc = jrpc_buf_puts(b, " HTTP/1.1\r\nHost: ")) < 0
        || (rc = jrpc_buf_puts(b, c->url.authority)) < 0
        || (rc = jrpc_buf_puts(b, c->mcp ? "\r\nContent-Type: application/json\r\n"
                                           "Accept: application/json, text/event-stream\r\n"
                                 : stream ? "\r\nContent-Type: application/json\r\n"
                                           "Accept: text/event-stream\r\n"
                                         : "\r\nContent-Type: application/json\r\n"
                                           "Accept: application/json\r\n")) < 0
        || (rc = jrpc_buf_puts(b, line)) < 0)
        goto out;
    if (hdr->timeout_ms) {
        snprintf(line, sizeof line, "X-JRPC-Timeout-Ms: %u\r\n", (unsigned)hdr->timeout_ms);
        if ((rc = jrpc_buf_puts(b, line)) < 0)
            goto out;
    }
    if ((rc = put_header_line(b, "traceparent", hdr->traceparent)) < 0
        || (rc = put_header_line(b, "X-JRPC-Key", hdr->key)) < 0)
        goto out;
    if (hdr->timestamp) {
        /* canonical decimal, as the signature covers it */
        snprintf(line, sizeof line, "X-JRPC-Timestamp: %lld\r\n", (long long)hdr->timestamp);
        if ((rc = jrpc_buf_puts(b, line)) < 0)
            goto out;
    }
    if ((rc = put_header_line(b, "X-JRPC-Nonce", hdr->nonce)) < 0
        || (rc = put_header_line(b, "X-JRPC-Signature", hdr->signature)) < 0
        || (rc = put_header_line(b, "Idempotency-Key", hdr->idem_key)) < 0)
        goto out;
    if (c->mcp_open &&
        ((rc = put_header_line(b, "Mcp-Session-Id",
                                 (jrpc_span_t){ c->mcp_session, strlen(c->mcp_session) })) < 0
         || (rc = put_header_line(b, "MCP-Protocol-Version",
                                    (jrpc_span_t){ c->mcp_version, strlen(c->mcp_version) })) < 0))
        goto out;
    if (c->bearer && ((rc = jrpc_buf_puts(b, "Authorization: Bearer ")) < 0
                      || (rc = jrpc_buf_puts(b, c->bearer)) < 0
                      || (rc = jrpc_buf_puts(b, "\r\n")) < 0))
        goto out;
    rc = jrpc_buf_puts(b, "\r\n");
out:
    if (rc < 0)
        set_err(c, "cannot build the HTTP request: out of memory");
    return rc;
}

/* https://: head + body through TLS, in one record when the body is small
 * (two records would be two packets, as the socket does not delay). */
static int tls_send_request(hconn_t *c, const char *body, size_t len, int64_t deadline)
{
    int rc;
    if (c->head.len + len <= TLS_ONE_WRITE_MAX) {
        jrpc_buf_reset(&c->out);
        if ((rc = jrpc_buf_append(&c->out, c->head.p, c->head.len)) < 0
            || (rc = jrpc_buf_append(&c->out, body, len)) < 0)
            return rc;
        return jrpc_client_tls_write(c->tls, c->out.p, c->out.len, deadline);
    }
    if ((rc = jrpc_client_tls_write(c->tls, c->head.p, c->head.len, deadline)) < 0)
        return rc;
    return jrpc_client_tls_write(c->tls, body, len, deadline);
}

/* Writes head + body. Returns 0, -ETIMEDOUT, -EINTR, the -errno of the
 * failed write or JRPC_CLIENT_ETLS (the message is left to the caller, who
 * may retry). */
static int http_send_request(hconn_t *c, const char *body, size_t len, int64_t deadline)
{
    if (c->tls)
        return tls_send_request(c, body, len, deadline);

    struct iovec iov[2] = {
        { .iov_base = c->head.p, .iov_len = c->head.len },
        { .iov_base = (void *)body, .iov_len = len },
    };
    struct msghdr msg = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };

    while (msg.msg_iovlen > 0) {
        ssize_t n = sendmsg(c->fd, &msg, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                return -errno;
            int rc = jrpc_client_fd_wait(c->fd, POLLOUT, deadline);
            if (rc < 0)
                return rc;
            continue;
        }
        while (msg.msg_iovlen > 0 && (size_t)n >= msg.msg_iov->iov_len) {
            n -= (ssize_t)msg.msg_iov->iov_len;
            msg.msg_iov++;
            msg.msg_iovlen--;
        }
        if (msg.msg_iovlen > 0) {
            msg.msg_iov->iov_base = (char *)msg.msg_iov->iov_base + n;
            msg.msg_iov->iov_len -= (size_t)n;
        }
    }
    return 0;
}

/* What the response parser callbacks gather. */
typedef struct http_answer {
    jrpc_buf_t *reply;        /* the body goes here */
    int   rc;                 /* first callback failure (-ENOMEM, -EMSGSIZE) */
    bool  done;               /* a final (non-1xx) response is complete */
    bool  keep_alive;         /* the connection may carry the next request */
    bool  in_value;           /* the last callback was a header value */
    bool  field_is_ctype;     /* the current header is Content-Type */
    bool  field_is_timing;    /* ... is Server-Timing (a header or a trailer) */
    char  timing[JRPC_CLIENT_TIMING_MAX]; /* the Server-Timing values, joined by ", " */
    size_t timing_len;        /* bytes kept in timing (cut at its size) */
    char  field[16];          /* current header name, truncated */
    size_t field_len;         /* its full length (may exceed the array) */
    char  ctype[64];          /* Content-Type value, truncated, NUL-terminated */
    size_t ctype_len;         /* bytes kept in ctype */
    /* Streamed answers (jrpc_client_send_stream), when the server chose SSE: */
    jrpc_client_answer_fn on_answer;  /* NULL: not asked for */
    void *arg;
    int   sse;                /* -1 not known yet (headers not done), 0 no, 1 yes */
    jrpc_buf_t *line;         /* the SSE line being read */
    jrpc_buf_t *data;         /* the event's data */
    uint32_t id;              /* the event's id: its position */
    bool  end_event;          /* "event: end" */
    /* MCP: an event stream's last event is the reply; Mcp-Session-Id kept */
    bool  mcp;
    bool  field_is_session;   /* the current header is Mcp-Session-Id */
    char *session;            /* where its value goes (MCP_SESSION_MAX + 2 bytes) */
    size_t *session_len;
    bool  after_cr;           /* the last byte fed was a \r */
} http_answer_t;

/* One SSE line (without its end), as the WHATWG event-stream rules read it:
 * a blank line dispatches the event; ":..." is a comment (": ping"); the
 * fields used are data (lines joined by \n), id and event. */
static int sse_line(http_answer_t *a, const char *p, size_t n)
{
    if (n == 0) {   /* dispatch */
        int rc = 0;
        if (a->mcp) {   /* the last event with data is the reply */
            if (a->data->len) {
                a->reply->len = 0;
                rc = jrpc_buf_append(a->reply, a->data->p, a->data->len);
            }
        } else if (a->end_event) {
            rc = jrpc_buf_append(a->reply, a->data->p, a->data->len);
        } else if (a->data->len) {
            if (a->reply->len + a->data->len > HTTP_MAX_REPLY)
                return -EMSGSIZE;
            a->on_answer(a->arg, a->id, a->data->p, a->data->len);
        }
        a->data->len = 0;
        a->end_event = false;
        return rc;
    }
    if (p[0] == ':')
        return 0;
    const char *colon = memchr(p, ':', n);
    size_t fn = colon ? (size_t)(colon - p) : n;
    const char *v = colon ? colon + 1 : p + n;
    size_t vn = (size_t)(p + n - v);
    if (vn && v[0] == ' ')
        v++, vn--;
    if (fn == 4 && memcmp(p, "data", 4) == 0) {
        if (a->data->len && jrpc_buf_putc(a->data, '\n') < 0)
            return -ENOMEM;
        return jrpc_buf_append(a->data, v, vn);
    }
    if (fn == 2 && memcmp(p, "id", 2) == 0) {
        uint64_t id = 0;
        for (size_t i = 0; i < vn && id <= UINT32_MAX; i++)
            id = v[i] >= '0' && v[i] <= '9' ? id * 10 + (uint64_t)(v[i] - '0') : UINT64_MAX;
        a->id = id <= UINT32_MAX ? (uint32_t)id : 0;
        return 0;
    }
    if (fn == 5 && memcmp(p, "event", 5) == 0)
        a->end_event = vn == 3 && memcmp(v, "end", 3) == 0;
    if (fn == 13 && memcmp(p, "server-timing", 13) == 0 && vn) {   /* the end's timing */
        if (a->timing_len && a->timing_len + 2 < sizeof a->timing) {
            memcpy(a->timing + a->timing_len, ", ", 2);
            a->timing_len += 2;
        }
        size_t room = sizeof a->timing - a->timing_len;
        size_t k = vn < room ? vn : room;
        memcpy(a->timing + a->timing_len, v, k);
        a->timing_len += k;
    }
    return 0;
}

/* Body bytes of an event stream: whole lines go to sse_line. */
static int sse_feed(http_answer_t *a, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        bool after_cr = a->after_cr;
        a->after_cr = ch == '\r';
        if (ch == '\n' || ch == '\r') {
            /* \r\n is one line end: a \n right after a \r (in this
             * chunk or the last) ends nothing */
            if (ch == '\n' && after_cr)
                continue;
            int rc = sse_line(a, a->line->p, a->line->len);
            a->line->len = 0;
            if (rc < 0)
                return rc;
            continue;
        }
        if (a->line->len >= HTTP_MAX_REPLY)
            return -EMSGSIZE;
        if (jrpc_buf_putc(a->line, ch) < 0)
            return -ENOMEM;
    }
    return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t n)
{
    http_answer_t *a = p->data;
    if (a->in_value) {   /* a new header starts */
        a->in_value = false;
        a->field_len = 0;
    }
    for (size_t i = 0; i < n; i++, a->field_len++)
        if (a->field_len < sizeof a->field)
            a->field[a->field_len] = at[i];
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
    http_answer_t *a = p->data;
    if (!a->in_value) {
        a->in_value = true;
        a->field_is_ctype = a->field_len == 12 && strncasecmp(a->field, "content-type", 12) == 0;
        a->field_is_timing = a->field_len == 13 && strncasecmp(a->field, "server-timing", 13) == 0;
        a->field_is_session = a->mcp && a->field_len == 14 &&
                              strncasecmp(a->field, "mcp-session-id", 14) == 0;
        if (a->field_is_session)
            *a->session_len = 0;
        if (a->field_is_ctype)
            a->ctype_len = 0;
        if (a->field_is_timing && a->timing_len && a->timing_len + 2 < sizeof a->timing) {
            memcpy(a->timing + a->timing_len, ", ", 2);   /* the next of several */
            a->timing_len += 2;
        }
    }
    if (a->field_is_timing) {   /* a value may come in several pieces */
        size_t room = sizeof a->timing - a->timing_len;
        size_t k = n < room ? n : room;
        memcpy(a->timing + a->timing_len, at, k);
        a->timing_len += k;
    }
    if (a->field_is_session) {   /* past MCP_SESSION_MAX: marked too long */
        size_t room = MCP_SESSION_MAX + 1 - *a->session_len;
        size_t k = n < room ? n : room;
        memcpy(a->session + *a->session_len, at, k);
        *a->session_len += k;
    }
    if (a->field_is_ctype) {
        size_t room = sizeof a->ctype - 1 - a->ctype_len;
        size_t k = n < room ? n : room;
        memcpy(a->ctype + a->ctype_len, at, k);
        a->ctype_len += k;
        a->ctype[a->ctype_len] = '\0';
    }
    return 0;
}

/* text/event-stream, with or without parameters, any case. */
static bool is_sse_type(const char *ct)
{
    ct += strspn(ct, " \t");
    return strncasecmp(ct, "text/event-stream", 17) == 0
        && (ct[17] == '\0' || ct[17] == ';' || ct[17] == ' ' || ct[17] == '\t');
}

static int on_body(http_parser *p, const char *at, size_t n)
{
    http_answer_t *a = p->data;
    if ((a->on_answer || a->mcp) && a->sse < 0)
        a->sse = p->status_code == 200 && is_sse_type(a->ctype);
    if (a->sse == 1) {
        a->rc = sse_feed(a, at, n);
        return a->rc < 0;
    }
    if (a->reply->len + n > HTTP_MAX_REPLY)
        a->rc = -EMSGSIZE;
    else
        a->rc = jrpc_buf_append(a->reply, at, n);
    return a->rc < 0;   /* non-zero stops the parser */
}

static int on_message_complete(http_parser *p)
{
    http_answer_t *a = p->data;
    if (p->status_code / 100 == 1) {
        /* An interim answer (100 Continue, 103 Early Hints): the real one
         * follows on the same connection. */
        a->reply->len = 0;
        a->ctype_len = 0;
        a->ctype[0] = '\0';
        a->timing_len = 0;
        a->sse = -1;
        if (a->mcp)
            *a->session_len = 0;
        return 0;
    }
    if (a->sse == 1 && a->line->len)   /* a last line without its end */
        a->rc = sse_line(a, a->line->p, a->line->len);
    a->done = true;
    a->keep_alive = http_should_keep_alive(p);
    /* Stop here: bytes after this answer are none of this call's business. */
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings http_settings = {
    .on_header_field     = on_header_field,
    .on_header_value     = on_header_value,
    .on_body             = on_body,
    .on_message_complete = on_message_complete,
};

/* application/json, with or without parameters, any case. */
static bool is_json_type(const char *ct)
{
    ct += strspn(ct, " \t");
    return strncasecmp(ct, "application/json", 16) == 0
        && (ct[16] == '\0' || ct[16] == ';' || ct[16] == ' ' || ct[16] == '\t');
}

/* Reads what the connection has, waiting until deadline for something.
 * Returns the count, 0 at the end, or a negative code (JRPC_CLIENT_ETLS,
 * -ETIMEDOUT, -EINTR, -errno). */
static ssize_t http_recv(hconn_t *c, char *buf, size_t size, int64_t deadline)
{
    if (c->tls)
        return jrpc_client_tls_read(c->tls, buf, size, deadline);
    for (;;) {
        ssize_t n = recv(c->fd, buf, size, 0);
        if (n >= 0)
            return n;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return -errno;
        int rc = jrpc_client_fd_wait(c->fd, POLLIN, deadline);
        if (rc < 0)
            return rc;
    }
}

/* Reads one answer into reply and sets *http_status. Returns 0 (keeping
 * or closing the connection as the server asked), or an error with the
 * message set. */
static int http_read_answer(hconn_t *c, jrpc_buf_t *reply, int64_t deadline,
                            int timeout_ms, int *http_status,
                            jrpc_client_answer_fn on_answer, void *arg)
{
    char buf[HTTP_READ_CHUNK];
    jrpc_buf_reset(&c->sse_line);
    jrpc_buf_reset(&c->sse_data);
    http_answer_t a = { .reply = reply, .on_answer = on_answer, .arg = arg, .sse = -1,
                        .line = &c->sse_line, .data = &c->sse_data, .mcp = c->mcp,
                        .session = c->mcp_given, .session_len = &c->mcp_given_len };
    c->mcp_given_len = 0;
    http_parser p;
    bool got_bytes = false, leftover = false;
    int rc;

    http_parser_init(&p, HTTP_RESPONSE);
    p.data = &a;
    while (!a.done) {
        ssize_t n = http_recv(c, buf, sizeof buf, deadline);
        if (n < 0) {
            rc = (int)n;
            goto fail;
        }
        size_t parsed = http_parser_execute(&p, &http_settings, buf, (size_t)n);
        if (n == 0 && !a.done) {   /* EOF, and it did not end the body */
            rc = -ECONNRESET;
            goto fail;
        }
        got_bytes = true;
        if (a.rc < 0) {
            rc = a.rc;
            goto fail;
        }
        if (p.upgrade || (HTTP_PARSER_ERRNO(&p) != HPE_OK && HTTP_PARSER_ERRNO(&p) != HPE_PAUSED)) {
            rc = -EPROTO;
            set_err(c, "malformed HTTP answer from %s: %s", c->url.where,
                    p.upgrade ? "unexpected protocol upgrade"
                              : http_errno_description(HTTP_PARSER_ERRNO(&p)));
            goto close;
        }
        leftover = a.done && parsed < (size_t)n;
    }
    *http_status = (int)p.status_code;
    if (a.timing_len)
        jrpc_client_add_timing(c->client, a.timing, a.timing_len);
    if (!a.keep_alive || leftover)
        http_close_conn(c);
    if (p.status_code / 100 != 2 && !(reply->len && is_json_type(a.ctype))) {
        /* Not a JSON-RPC answer: a proxy's or another server's error page. */
        set_err(c, "HTTP %u %s from %s (not a JSON-RPC answer)", p.status_code,
                http_status_str((enum http_status)p.status_code), c->url.where);
        return JRPC_CLIENT_EHTTP;
    }
    if (p.status_code == 204)
        reply->len = 0;
    return 0;

fail:
    if (rc == -ETIMEDOUT)
        set_err(c, "timed out after %d ms waiting for the broker at %s: connected, no "
                "answer", timeout_ms, c->url.where);
    else if (rc == -EINTR)
        set_err(c, "interrupted while waiting for %s", c->url.where);
    else if (rc == -EMSGSIZE)
        set_err(c, "the answer from %s is larger than %u bytes", c->url.where, HTTP_MAX_REPLY);
    else if (rc == -ENOMEM)
        set_err(c, "%s: out of memory", c->url.where);
    else if (rc == JRPC_CLIENT_ETLS)
        set_err(c, "TLS error from %s while waiting for the answer: %s", c->url.peer,
                jrpc_client_tls_error(c->tls));
    else if (rc == -ECONNRESET && !got_bytes)
        set_err(c, "%s closed the connection without answering", c->url.where);
    else if (rc == -ECONNRESET)
        set_err(c, "%s closed the connection in the middle of the answer", c->url.where);
    else
        set_err(c, "connection to %s lost while waiting for the answer: %s", c->url.where,
                strerror(-rc));
close:
    /* The answer may still come: never let it be read as the next one's. */
    http_close_conn(c);
    return rc;
}

static bool is_conn_lost(int rc)
{
    return rc == -EPIPE || rc == -ECONNRESET || rc == -ECONNABORTED || rc == -ENOTCONN;
}

/* One request and its answer: head built from hdr, the body sent (again,
 * once, under the rule of "Reuse and retry"), the answer read. */
static int exchange(hconn_t *c, const jrpc_header_t *hdr, const char *body, size_t len,
                    jrpc_buf_t *reply, int64_t deadline, int timeout_ms, int *http_status,
                    jrpc_client_answer_fn on_answer, void *arg, bool *sent)
{
    int rc;
    /* Built once: a resend below carries the same bytes, and so the same
     * signature and nonce. That is right, since the server never had the
     * whole first copy and so cannot have recorded its nonce. */
    if ((rc = http_build_head(c, "POST", hdr, len, on_answer != NULL)) < 0)
        return rc;
    for (int attempt = 0;; attempt++) {
        bool reused = c->fd >= 0;
        if (reused && !http_idle_ok(c)) {   /* closed while idle (see above) */
            http_close_conn(c);
            reused = false;
        }
        if (c->fd < 0 && (rc = http_connect(c, deadline, timeout_ms)) < 0)
            return rc;
        rc = http_send_request(c, body, len, deadline);
        if (rc == 0 || (is_conn_lost(rc) && fd_readable(c->fd)))
            break;   /* sent, or refused early with an answer to read (e.g. 413) */
        http_close_conn(c);
        if (is_conn_lost(rc) && reused && attempt == 0)
            continue;   /* the server never had the whole request: safe to resend */
        if (rc == -ETIMEDOUT)
            set_err(c, "timed out after %d ms sending the request to %s", timeout_ms,
                    c->url.where);
        else if (rc == -EINTR)
            set_err(c, "interrupted while sending to %s", c->url.where);
        else if (rc == JRPC_CLIENT_ETLS)
            set_err(c, "TLS error from %s while sending the request: %s", c->url.peer,
                    jrpc_client_tls_error(c->tls));
        else if (rc == -ENOMEM)
            set_err(c, "%s: out of memory", c->url.where);
        else
            set_err(c, "connection to %s lost while sending the request: %s", c->url.where,
                    strerror(-rc));
        return rc;
    }
    *sent = true;   /* written whole (or answered early): it may run */
    return http_read_answer(c, reply, deadline, timeout_ms, http_status, on_answer, arg);
}

static const char MCP_INITIALIZE[] =
    "{\"jsonrpc\":\"2.0\",\"id\":\"jrpc-client-initialize\",\"method\":\"initialize\","
    "\"params\":{\"protocolVersion\":\"" MCP_OFFERED "\",\"capabilities\":{},"
    "\"clientInfo\":{\"name\":\"libjrpc-client\",\"version\":\"1\"}}}";
static const char MCP_INITIALIZED[] =
    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}";

/* The protocol version an initialize answer names ("protocolVersion":"V"),
 * into out; false when it names none that fits. A scan, not a parse: the
 * name occurs once in an initialize result. */
static bool mcp_answer_version(const jrpc_buf_t *r, char *out, size_t size)
{
    static const char key[] = "\"protocolVersion\"";
    const char *p = r->len ? memmem(r->p, r->len, key, sizeof key - 1) : NULL;
    if (p == NULL)
        return false;
    const char *end = r->p + r->len;
    p += sizeof key - 1;
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n' || *p == ':'))
        p++;
    if (p == end || *p++ != '"')
        return false;
    size_t n = 0;
    while (p + n < end && p[n] != '"' && n < size - 1 &&
           ((p[n] >= '0' && p[n] <= '9') || (p[n] >= 'A' && p[n] <= 'Z') ||
            (p[n] >= 'a' && p[n] <= 'z') || p[n] == '-' || p[n] == '.'))
        n++;
    if (n == 0 || p + n == end || p[n] != '"')
        return false;
    memcpy(out, p, n);
    out[n] = '\0';
    return true;
}

/* The last answer's Mcp-Session-Id as the session's: 0, or -EPROTO with the
 * message set (longer than MCP_SESSION_MAX, or not visible ASCII). */
static int mcp_take_session(hconn_t *c)
{
    if (c->mcp_given_len > MCP_SESSION_MAX) {
        set_err(c, "MCP: the Mcp-Session-Id from %s is longer than %d bytes", c->url.where,
                MCP_SESSION_MAX);
        return -EPROTO;
    }
    for (size_t i = 0; i < c->mcp_given_len; i++)
        if ((unsigned char)c->mcp_given[i] < 0x21 || (unsigned char)c->mcp_given[i] > 0x7e) {
            set_err(c, "MCP: the Mcp-Session-Id from %s holds a byte that is not visible "
                    "ASCII", c->url.where);
            return -EPROTO;
        }
    memcpy(c->mcp_session, c->mcp_given, c->mcp_given_len);
    c->mcp_session[c->mcp_given_len] = '\0';
    return 0;
}

/* Opens an MCP session (jrpc_client.h, "MCP"): initialize, then
 * notifications/initialized. Returns 0 with c->mcp_open set, or an error
 * with the message set. */
static int mcp_open_session(hconn_t *c, int64_t deadline, int timeout_ms, int *http_status)
{
    jrpc_buf_t r;
    bool sent = false;
    int rc;
    jrpc_buf_init(&r);
    c->mcp_open = false;
    rc = exchange(c, NULL, MCP_INITIALIZE, sizeof MCP_INITIALIZE - 1, &r, deadline, timeout_ms,
                  http_status, NULL, NULL, &sent);
    if (rc == 0 && *http_status / 100 != 2) {
        set_err(c, "MCP: %s refused initialize: HTTP %d: %.*s", c->url.where, *http_status,
                (int)(r.len < 200 ? r.len : 200), r.p ? r.p : "");
        rc = JRPC_CLIENT_EHTTP;
    } else if (rc == 0 && (r.len == 0 || memmem(r.p, r.len, "\"result\"", 8) == NULL)) {
        set_err(c, "MCP: %s answered initialize without a result: %.*s", c->url.where,
                (int)(r.len < 200 ? r.len : 200), r.p ? r.p : "");
        rc = -EPROTO;
    } else if (rc == JRPC_CLIENT_EHTTP) {
        set_err(c, "MCP: %s refused initialize: HTTP %d", c->url.where, *http_status);
    }
    if (rc == 0 && (rc = mcp_take_session(c)) == 0) {
        if (!mcp_answer_version(&r, c->mcp_version, sizeof c->mcp_version))
            memcpy(c->mcp_version, MCP_OFFERED, sizeof MCP_OFFERED);
        c->mcp_open = true;   /* the notification carries the session already */
        rc = exchange(c, NULL, MCP_INITIALIZED, sizeof MCP_INITIALIZED - 1, &r, deadline,
                      timeout_ms, http_status, NULL, NULL, &sent);
        if ((rc == 0 && *http_status / 100 != 2) || rc == JRPC_CLIENT_EHTTP) {
            set_err(c, "MCP: %s refused notifications/initialized: HTTP %d", c->url.where,
                    *http_status);
            rc = JRPC_CLIENT_EHTTP;
        }
        if (rc < 0)
            c->mcp_open = false;
    }
    jrpc_buf_dispose(&r);
    return rc;
}

static int transport_call(void *state, const jrpc_header_t *hdr, const char *body, size_t len,
                          jrpc_buf_t *reply, int timeout_ms, int *http_status,
                          jrpc_client_answer_fn on_answer, void *arg, bool once, bool *sent)
{
    (void)once;   /* a refused connection fails at once anyway */
    hconn_t *c = state;
    int64_t deadline = jrpc_client_now_ms() + timeout_ms;
    int rc;

    if (!c->mcp)
        return exchange(c, hdr, body, len, reply, deadline, timeout_ms, http_status, on_answer,
                        arg, sent);
    if (on_answer) {
        set_err(c, "MCP: streamed answers are not offered (%s)", c->url.where);
        return -ENOTSUP;
    }
    for (int again = 0;; again++) {
        if (!c->mcp_open && (rc = mcp_open_session(c, deadline, timeout_ms, http_status)) < 0)
            return rc;
        bool had_session = c->mcp_session[0] != '\0';
        rc = exchange(c, hdr, body, len, reply, deadline, timeout_ms, http_status, NULL, NULL,
                      sent);
        /* 404 to a session's request: the server ended the session and did
         * not run the call; a new one, and the call once more. */
        if ((rc == 0 || rc == JRPC_CLIENT_EHTTP) && *http_status == 404 && had_session &&
            again == 0) {
            c->mcp_open = false;
            c->mcp_session[0] = '\0';
            reply->len = 0;
            continue;
        }
        return rc;
    }
}

#define MCP_DELETE_MS 1000   /* the session's DELETE at close waits this long at most */

/* Ends c's MCP session at its server (the spec's DELETE with
 * Mcp-Session-Id), best effort: a server may keep a process per session
 * (supergateway --stateful), or count them against a limit (jrpc-stdio
 * --max-sessions). Whatever the answer (204, 404, 405), or none within
 * MCP_DELETE_MS, the session is forgotten. */
static void mcp_end_session(hconn_t *c)
{
    if (!c->mcp_open || c->mcp_session[0] == '\0')
        return;
    int64_t deadline = jrpc_client_now_ms() + MCP_DELETE_MS;
    jrpc_buf_t r;
    jrpc_buf_init(&r);
    int status = 0;
    if (http_build_head(c, "DELETE", NULL, 0, false) < 0)   /* the session's headers with it */
        goto out;
    if (c->fd >= 0 && !http_idle_ok(c))
        http_close_conn(c);
    if (c->fd < 0 && http_connect(c, deadline, MCP_DELETE_MS) < 0)
        goto out;
    if (http_send_request(c, NULL, 0, deadline) == 0)
        (void)http_read_answer(c, &r, deadline, MCP_DELETE_MS, &status, NULL, NULL);
out:
    c->mcp_open = false;
    c->mcp_session[0] = '\0';
    jrpc_buf_dispose(&r);
}

static void transport_close(void *state)
{
    hconn_t *c = state;
    if (c == NULL)
        return;
    mcp_end_session(c);
    http_close_conn(c);
    jrpc_client_tls_destroy(&c->tls);
    jrpc_client_url_dispose(&c->url);
    jrpc_buf_dispose(&c->head);
    jrpc_buf_dispose(&c->out);
    jrpc_buf_dispose(&c->sse_line);
    jrpc_buf_dispose(&c->sse_data);
    if (c->bearer) {
        explicit_bzero(c->bearer, strlen(c->bearer));
        free(c->bearer);
    }
    free(c);
}

static int transport_open(jrpc_client_t *client, const char *url,
                          const jrpc_client_opts_t *opts, void **state)
{
    hconn_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        return -ENOMEM;
    c->client = client;
    c->fd = -1;
    c->mcp = opts && opts->mcp;
    jrpc_buf_init(&c->head);
    jrpc_buf_init(&c->out);
    jrpc_buf_init(&c->sse_line);
    jrpc_buf_init(&c->sse_data);
    int rc = jrpc_client_url_parse(url, &c->url);
    if (rc == 0 && c->url.tls && (c->tls = jrpc_client_tls_new(opts, c->url.host)) == NULL)
        rc = -ENOMEM;
    if (rc == 0 && opts && opts->bearer) {
        for (const char *t = opts->bearer; *t && rc == 0; t++)
            if ((unsigned char)*t <= 0x20 || *t == 0x7f)   /* no header injection */
                rc = -EINVAL;
        if (rc == 0 && opts->bearer[0] == '\0')
            rc = -EINVAL;
        if (rc == 0 && (c->bearer = strdup(opts->bearer)) == NULL)
            rc = -ENOMEM;
    }
    if (rc < 0) {
        transport_close(c);
        return rc;
    }
    *state = c;
    return 0;
}

static void transport_disconnect(void *state, bool forget_session)
{
    hconn_t *c = state;
    http_close_conn(c);
    if (c->tls && forget_session)
        jrpc_client_tls_close(c->tls, true);
}

const jrpc_client_transport_t jrpc_client_http = {
    .open      = transport_open,
    .call      = transport_call,
    .set_curve = NULL,   /* no CURVE over HTTP */
    .disconnect = transport_disconnect,
    .close     = transport_close,
};
