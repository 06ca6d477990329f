#include "jrpc_client.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <http_parser.h>
#include <zmq.h>
#include "jrpc_sign.h"
#include "jrpc_header.h"

/* A transport is picked once, from the URL scheme, in jrpc_client_new.
 * Adding a scheme (https://) means adding one entry to `transports` and its
 * three functions; the public API does not change. */
typedef struct transport {
    const char *scheme;  /* with "://" */
    int  (*open)(jrpc_client_t *c);   /* NULL: scheme known but not implemented */
    int  (*call)(jrpc_client_t *c, const jrpc_header_t *hdr, const char *body,
                 size_t len, jrpc_buf_t *reply, int timeout_ms);
    void (*close)(jrpc_client_t *c);
} transport_t;

struct jrpc_client {
    const transport_t *t;    /* chosen by the URL scheme */
    char      *url;          /* as given */
    int        timeout_ms;   /* default for jrpc_client_send */
    char      *key_id;       /* signing key id, NULL: requests go unsigned */
    char      *secret;       /* its secret (NUL-terminated, wiped on change) */
    size_t     secret_len;   /* strlen(secret) */
    int64_t    clock_offset_s; /* added to time(NULL) for the signing timestamp */
    void      *zctx;         /* ZeroMQ context (zmq transports) */
    void      *zsock;        /* DEALER; NULL after a failed reset, reopened on next call */
    bool       ipv6;         /* tcp://[addr]:port needs ZMQ_IPV6 */
    bool       curve;        /* zmq: CURVE client with the three keys below */
    char       curve_public[41];  /* our public key, Z85 */
    char       curve_secret[41];  /* our secret key, Z85 (wiped on change) */
    char       curve_server[41];  /* the broker's public key, Z85 */
    jrpc_buf_t hdr;          /* encoded header frame (zmq) or request head (http), reused */
    /* http:// */
    char      *host;         /* without the [] of an IPv6 literal */
    char      *port;         /* digits; "80" when the URL has none */
    char      *authority;    /* HOST:PORT as written in the URL: the Host header */
    char      *path;         /* request target, "/rpc" when the URL has none */
    char      *where;        /* http://AUTHORITY/PATH, for messages */
    int        fd;           /* kept-alive connection, -1 when none */
    int        http_status;  /* status of the last answer, 0 if none */
    char       err[512];     /* jrpc_client_last_error */
};

static void set_err(jrpc_client_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void set_err(jrpc_client_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- ZeroMQ transport (tcp://, ipc://) ---- */

/* Not ZMQ_IMMEDIATE: with it, libzmq drops the unread messages of a
 * connection the moment it closes, so a reply sent just before the broker
 * exits (a graceful stop) would be lost. Without it, a request to a broker
 * that is down waits in the queue until our deadline, and then the socket is
 * thrown away (ZMQ_LINGER=0), so nobody gets it later.
 * ZMQ_LINGER=0: closing drops anything unsent at once. */
static int zmq_open_socket(jrpc_client_t *c)
{
    int rc;
    const int zero = 0, one = 1;
    void *s = zmq_socket(c->zctx, ZMQ_DEALER);
    if (s == NULL)
        return -errno;
    if (zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero) < 0
        || (c->ipv6 && zmq_setsockopt(s, ZMQ_IPV6, &one, sizeof one) < 0)
        || (c->curve && (zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, c->curve_server, 41) < 0
                         || zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, c->curve_public, 41) < 0
                         || zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, c->curve_secret, 41) < 0))
        || zmq_connect(s, c->url) < 0) {
        rc = -errno;
        zmq_close(s);
        return rc;
    }
    c->zsock = s;
    return 0;
}

static void zmq_close_socket(jrpc_client_t *c)
{
    if (c->zsock) {
        zmq_close(c->zsock);
        c->zsock = NULL;
    }
}

static int zmq_transport_open(jrpc_client_t *c)
{
    c->zctx = zmq_ctx_new();
    if (c->zctx == NULL)
        return -errno;
    return zmq_open_socket(c);
}

static void zmq_transport_close(jrpc_client_t *c)
{
    zmq_close_socket(c);
    if (c->zctx) {
        zmq_ctx_term(c->zctx);
        c->zctx = NULL;
    }
}

/* Waits until sock has `events` or deadline passes.
 * Returns 0, -ETIMEDOUT, -EINTR or another -errno. */
static int zmq_wait(void *sock, short events, int64_t deadline)
{
    zmq_pollitem_t item = { .socket = sock, .events = events };
    int64_t left = deadline - now_ms();
    int rc = zmq_poll(&item, 1, left > 0 ? (long)left : 0);
    if (rc < 0)
        return -errno;
    return rc == 0 ? -ETIMEDOUT : 0;
}

/* Reads one whole reply: [empty][body]. Returns 0, -EPROTO, -ENOMEM or
 * -errno. Always consumes every frame of the message. */
static int zmq_read_reply(void *sock, jrpc_buf_t *reply)
{
    int rc = 0, more = 1, nframes = 0;
    size_t more_len = sizeof more;
    zmq_msg_t m;

    while (more) {
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, sock, ZMQ_DONTWAIT) < 0) {
            /* the parts of a message arrive together: no EAGAIN mid-way */
            rc = -errno;
            zmq_msg_close(&m);
            return rc;
        }
        nframes++;
        if (rc == 0) {
            if (nframes == 1 && zmq_msg_size(&m) != 0)
                rc = -EPROTO;                 /* no delimiter */
            else if (nframes == 2)
                rc = jrpc_buf_append(reply, zmq_msg_data(&m), zmq_msg_size(&m));
            else if (nframes > 2)
                rc = -EPROTO;                 /* one body frame only */
        }
        zmq_msg_close(&m);
        if (zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &more_len) < 0)
            return -errno;
    }
    if (rc == 0 && nframes < 2)
        rc = -EPROTO;
    return rc;
}

static int zmq_send_frame(void *sock, const char *p, size_t n, bool last)
{
    int flags = ZMQ_DONTWAIT | (last ? 0 : ZMQ_SNDMORE);
    return zmq_send(sock, n ? p : "", n, flags) < 0 ? -errno : 0;
}

static int zmq_transport_call(jrpc_client_t *c, const jrpc_header_t *wh, const char *body,
                              size_t len, jrpc_buf_t *reply, int timeout_ms)
{
    int rc;
    int64_t deadline = now_ms() + timeout_ms;
    const jrpc_buf_t *hdr = NULL;

    if (wh) {
        jrpc_buf_reset(&c->hdr);
        if ((rc = jrpc_header_put(&c->hdr, wh)) < 0) {
            set_err(c, "cannot encode the header frame: out of memory");
            return rc;
        }
        hdr = &c->hdr;
    }

    if (c->zsock == NULL && (rc = zmq_open_socket(c)) < 0) {
        set_err(c, "cannot open a connection to %s: %s", c->url, zmq_strerror(-rc));
        return rc;
    }
    if ((rc = zmq_wait(c->zsock, ZMQ_POLLOUT, deadline)) < 0)
        goto out;
    /* Once the first frame is accepted the rest of the message is too
     * (the high-water mark counts whole messages). */
    if ((rc = zmq_send_frame(c->zsock, "", 0, false)) < 0)
        goto out;
    if (hdr && (rc = zmq_send_frame(c->zsock, hdr->p, hdr->len, false)) < 0)
        goto out;
    if ((rc = zmq_send_frame(c->zsock, body, len, true)) < 0)
        goto out;
    if ((rc = zmq_wait(c->zsock, ZMQ_POLLIN, deadline)) < 0)
        goto out;
    rc = zmq_read_reply(c->zsock, reply);
out:
    if (rc == -EAGAIN)
        rc = -ETIMEDOUT;
    if (rc == -ETIMEDOUT && c->curve)
        set_err(c, "timed out after %d ms waiting for the broker at %s: no answer (is it "
                "running and reachable? With CURVE, a broker that refuses this client's "
                "key, or has another server key, gives no error: check --server-key and "
                "the broker's --client-keys)", timeout_ms, c->url);
    else if (rc == -ETIMEDOUT)
        set_err(c, "timed out after %d ms waiting for the broker at %s: no answer (is it "
                "running and reachable?)", timeout_ms, c->url);
    else if (rc == -EPROTO)
        set_err(c, "malformed reply from %s (expected [empty][body] frames)", c->url);
    else if (rc == -EINTR)
        set_err(c, "interrupted while waiting for %s", c->url);
    else if (rc < 0)
        set_err(c, "%s: %s", c->url, rc == -ENOMEM ? "out of memory" : zmq_strerror(-rc));

    /* After any failure the socket may still hold our request, or later get
     * its reply: replace it so the next call starts clean. */
    if (rc < 0) {
        zmq_close_socket(c);
        int rc2 = zmq_open_socket(c);   /* on failure, retried by the next call */
        (void)rc2;
    }
    return rc;
}

/* ---- HTTP/1.1 transport (http://) ----
 *
 * One connection, one request at a time, kept alive across calls. The
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
 * (EOF, reset, timeout), since the server may have received and run it. */

#define HTTP_DEFAULT_PATH "/rpc"
#define HTTP_MAX_REPLY    (256u << 20)  /* answers larger than this are refused */
#define HTTP_READ_CHUNK   16384

/* Waits until fd has `events` or deadline passes. POLLERR/POLLHUP count as
 * ready: the following send/recv reports them. Returns 0, -ETIMEDOUT or
 * -errno (-EINTR when a signal interrupted the wait). */
static int fd_wait(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd pfd = { .fd = fd, .events = events };
        int rc = poll(&pfd, 1, left > INT_MAX ? INT_MAX : (int)left);
        if (rc < 0)
            return -errno;
        if (rc > 0)
            return 0;
    }
}

/* True when fd has something to read right now (bytes, EOF or an error). */
static bool fd_readable(int fd)
{
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    return poll(&pfd, 1, 0) > 0;
}

static void http_close_conn(jrpc_client_t *c)
{
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
}

/* Connects to c->host:c->port, trying every address. Sets c->fd and returns
 * 0, or sets the error message and returns -errno (-ETIMEDOUT, -EINTR,
 * -EHOSTUNREACH when the name does not resolve). */
static int http_connect(jrpc_client_t *c, int64_t deadline, int timeout_ms)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_NUMERICSERV };
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(c->host, c->port, &hints, &res);
    if (rc != 0) {
        set_err(c, "cannot connect to %s: cannot resolve %s: %s", c->where, c->host,
                rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
        return rc == EAI_MEMORY ? -ENOMEM : -EHOSTUNREACH;
    }
    rc = -EHOSTUNREACH;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                        ai->ai_protocol);
        if (fd < 0) {
            rc = -errno;
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            rc = 0;
        } else if (errno != EINPROGRESS) {
            rc = -errno;
        } else if ((rc = fd_wait(fd, POLLOUT, deadline)) == 0) {
            int soerr = 0;
            socklen_t sl = sizeof soerr;
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
                soerr = errno;
            rc = -soerr;
        }
        if (rc == 0) {
            /* The request goes out in one sendmsg; do not let Nagle hold
             * back its tail waiting for a delayed ACK. */
            const int one = 1;
            (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            c->fd = fd;
            break;
        }
        close(fd);
        if (rc == -ETIMEDOUT || rc == -EINTR)
            break;   /* the deadline is shared: no time left for the others */
    }
    freeaddrinfo(res);
    if (rc == -ETIMEDOUT)
        set_err(c, "cannot connect to %s within %d ms", c->where, timeout_ms);
    else if (rc == -EINTR)
        set_err(c, "interrupted while connecting to %s", c->where);
    else if (rc < 0)
        set_err(c, "cannot connect to %s: %s", c->where, strerror(-rc));
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

/* Writes the request head into c->hdr: every field of hdr that is set has
 * an HTTP form (the signing fields are the X-JRPC-* headers of the wire
 * contract). Returns 0, -EINVAL or -ENOMEM with the message set. */
static int http_build_head(jrpc_client_t *c, const jrpc_header_t *hdr, size_t len)
{
    static const jrpc_header_t none;
    char line[64];
    jrpc_buf_t *b = &c->hdr;
    int rc;

    if (hdr == NULL)
        hdr = &none;
    if (!header_value_ok(hdr->traceparent) || !header_value_ok(hdr->key)
        || !header_value_ok(hdr->nonce) || !header_value_ok(hdr->signature)) {
        set_err(c, "a header value holds control characters (traceparent or signing fields)");
        return -EINVAL;
    }
    jrpc_buf_reset(b);
    snprintf(line, sizeof line, "Content-Length: %zu\r\n", len);
    if ((rc = jrpc_buf_puts(b, "POST ")) < 0
        || (rc = jrpc_buf_puts(b, c->path)) < 0
        || (rc = jrpc_buf_puts(b, " HTTP/1.1\r\nHost: ")) < 0
        || (rc = jrpc_buf_puts(b, c->authority)) < 0
        || (rc = jrpc_buf_puts(b, "\r\nContent-Type: application/json\r\n"
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
        || (rc = put_header_line(b, "X-JRPC-Signature", hdr->signature)) < 0)
        goto out;
    rc = jrpc_buf_puts(b, "\r\n");
out:
    if (rc < 0)
        set_err(c, "cannot build the HTTP request: out of memory");
    return rc;
}

/* Writes head + body. Returns 0, -ETIMEDOUT, -EINTR or the -errno of the
 * failed write (the message is left to the caller, who may retry). */
static int http_send_request(jrpc_client_t *c, const char *body, size_t len, int64_t deadline)
{
    struct iovec iov[2] = {
        { .iov_base = c->hdr.p, .iov_len = c->hdr.len },
        { .iov_base = (void *)body, .iov_len = len },
    };
    struct msghdr msg = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };

    while (msg.msg_iovlen > 0) {
        ssize_t n = sendmsg(c->fd, &msg, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                return -errno;
            int rc = fd_wait(c->fd, POLLOUT, deadline);
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
    char  field[16];          /* current header name, truncated */
    size_t field_len;         /* its full length (may exceed the array) */
    char  ctype[64];          /* Content-Type value, truncated, NUL-terminated */
    size_t ctype_len;         /* bytes kept in ctype */
} http_answer_t;

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
        if (a->field_is_ctype)
            a->ctype_len = 0;
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

static int on_body(http_parser *p, const char *at, size_t n)
{
    http_answer_t *a = p->data;
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
        return 0;
    }
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

/* Reads one answer into reply and sets c->http_status. Returns 0 (keeping
 * or closing the connection as the server asked), or an error with the
 * message set. */
static int http_read_answer(jrpc_client_t *c, jrpc_buf_t *reply, int64_t deadline,
                            int timeout_ms)
{
    char buf[HTTP_READ_CHUNK];
    http_answer_t a = { .reply = reply };
    http_parser p;
    bool got_bytes = false, leftover = false;
    int rc;

    http_parser_init(&p, HTTP_RESPONSE);
    p.data = &a;
    while (!a.done) {
        ssize_t n = recv(c->fd, buf, sizeof buf, 0);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
                if ((rc = fd_wait(c->fd, POLLIN, deadline)) < 0)
                    goto fail;
                continue;
            }
            rc = -errno;
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
            set_err(c, "malformed HTTP answer from %s: %s", c->where,
                    p.upgrade ? "unexpected protocol upgrade"
                              : http_errno_description(HTTP_PARSER_ERRNO(&p)));
            goto close;
        }
        leftover = a.done && parsed < (size_t)n;
    }
    c->http_status = (int)p.status_code;
    if (!a.keep_alive || leftover)
        http_close_conn(c);
    if (p.status_code / 100 != 2 && !(reply->len && is_json_type(a.ctype))) {
        /* Not a JSON-RPC answer: a proxy's or another server's error page. */
        set_err(c, "HTTP %u %s from %s (not a JSON-RPC answer)", p.status_code,
                http_status_str((enum http_status)p.status_code), c->where);
        return JRPC_CLIENT_EHTTP;
    }
    if (p.status_code == 204)
        reply->len = 0;
    return 0;

fail:
    if (rc == -ETIMEDOUT)
        set_err(c, "timed out after %d ms waiting for the broker at %s: connected, no "
                "answer", timeout_ms, c->where);
    else if (rc == -EINTR)
        set_err(c, "interrupted while waiting for %s", c->where);
    else if (rc == -EMSGSIZE)
        set_err(c, "the answer from %s is larger than %u bytes", c->where, HTTP_MAX_REPLY);
    else if (rc == -ENOMEM)
        set_err(c, "%s: out of memory", c->where);
    else if (rc == -ECONNRESET && !got_bytes)
        set_err(c, "%s closed the connection without answering", c->where);
    else if (rc == -ECONNRESET)
        set_err(c, "%s closed the connection in the middle of the answer", c->where);
    else
        set_err(c, "connection to %s lost while waiting for the answer: %s", c->where,
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

static int http_transport_call(jrpc_client_t *c, const jrpc_header_t *hdr, const char *body,
                               size_t len, jrpc_buf_t *reply, int timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;
    int rc;

    /* Built once: a resend below carries the same bytes, and so the same
     * signature and nonce. That is right, since the server never had the
     * whole first copy and so cannot have recorded its nonce. */
    if ((rc = http_build_head(c, hdr, len)) < 0)
        return rc;
    for (int attempt = 0;; attempt++) {
        bool reused = c->fd >= 0;
        if (reused && fd_readable(c->fd)) {   /* closed while idle (see above) */
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
                    c->where);
        else if (rc == -EINTR)
            set_err(c, "interrupted while sending to %s", c->where);
        else
            set_err(c, "connection to %s lost while sending the request: %s", c->where,
                    strerror(-rc));
        return rc;
    }
    return http_read_answer(c, reply, deadline, timeout_ms);
}

/* http://HOST[:PORT][/PATH], HOST a name, an IPv4 address or [IPV6];
 * PORT 1..65535 (default 80); PATH (default /rpc) sent as the request
 * target. Fills the http fields of c. Returns 0, -EINVAL or -ENOMEM. */
static int http_parse_url(jrpc_client_t *c)
{
    const char *auth = c->url + strlen("http://");
    size_t alen = strcspn(auth, "/");
    const char *aend = auth + alen, *path = aend;
    const char *host = auth, *hend, *port = NULL;

    for (const char *p = auth; *p; p++)
        if ((unsigned char)*p <= 0x20 || *p == 0x7f || *p == '#')
            return -EINVAL;
    if (alen == 0 || memchr(auth, '@', alen))
        return -EINVAL;   /* no user info: there is no authentication to send it to */
    if (auth[0] == '[') {
        host = auth + 1;
        if ((hend = memchr(auth, ']', alen)) == NULL)
            return -EINVAL;
        if (hend + 1 < aend) {
            if (hend[1] != ':')
                return -EINVAL;
            port = hend + 2;
        }
    } else {
        hend = memchr(auth, ':', alen);
        if (hend == NULL)
            hend = aend;
        else
            port = hend + 1;
    }
    if (hend == host)
        return -EINVAL;
    if (port) {
        long v = 0;
        if (port == aend)
            return -EINVAL;
        for (const char *p = port; p < aend; p++) {
            if (*p < '0' || *p > '9' || (v = v * 10 + (*p - '0')) > 65535)
                return -EINVAL;
        }
        if (v == 0)
            return -EINVAL;
    }
    if (*path == '\0')
        path = HTTP_DEFAULT_PATH;
    c->host = strndup(host, (size_t)(hend - host));
    c->port = port ? strndup(port, (size_t)(aend - port)) : strdup("80");
    c->authority = strndup(auth, alen);
    c->path = strdup(path);
    if (c->host == NULL || c->port == NULL || c->authority == NULL || c->path == NULL
        || asprintf(&c->where, "http://%s%s", c->authority, c->path) < 0) {
        c->where = NULL;
        return -ENOMEM;
    }
    return 0;
}

static int http_transport_open(jrpc_client_t *c)
{
    c->fd = -1;
    return http_parse_url(c);
}

static void http_transport_close(jrpc_client_t *c)
{
    http_close_conn(c);
    free(c->host);
    free(c->port);
    free(c->authority);
    free(c->path);
    free(c->where);
}

static const transport_t transports[] = {
    { "tcp://",   zmq_transport_open, zmq_transport_call, zmq_transport_close },
    { "ipc://",   zmq_transport_open, zmq_transport_call, zmq_transport_close },
    { "http://",  http_transport_open, http_transport_call, http_transport_close },
    { "https://", NULL, NULL, NULL },
};

/* ---- URL checks ---- */

/* tcp://HOST:PORT or tcp://[IPV6]:PORT, PORT in 1..65535. ZeroMQ checks the
 * syntax again in zmq_connect; we check first to say what is wrong. */
static int check_tcp(const char *rest, bool *ipv6)
{
    const char *colon = strrchr(rest, ':');
    if (colon == NULL || colon == rest || colon[1] == '\0')
        return -EINVAL;
    long port = 0;
    for (const char *p = colon + 1; *p; p++) {
        if (*p < '0' || *p > '9')
            return -EINVAL;
        port = port * 10 + (*p - '0');
        if (port > 65535)
            return -EINVAL;
    }
    if (port == 0)
        return -EINVAL;
    *ipv6 = rest[0] == '[';
    if (*ipv6 && colon[-1] != ']')
        return -EINVAL;
    return 0;
}

/* ---- signing ---- */

#define NONCE_LEN 22   /* 132 random bits */

static void forget_key(jrpc_client_t *c)
{
    if (c->secret) {
        explicit_bzero(c->secret, c->secret_len);
        free(c->secret);
    }
    free(c->key_id);
    c->key_id = c->secret = NULL;
    c->secret_len = 0;
}

/* Non-empty, printable ASCII without spaces: fits a header line and the
 * newline-separated string that is signed. */
static bool key_id_ok(const char *s)
{
    if (*s == '\0')
        return false;
    for (; *s; s++)
        if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
            return false;
    return true;
}

/* Copies hdr (or nothing) into out and sets its four signing fields for
 * body; the spans point into nonce[] and sig[]. Returns 0 or -EINVAL / -EIO
 * with the message set. */
static int sign_body(jrpc_client_t *c, const jrpc_header_t *hdr, const char *body,
                     size_t len, jrpc_header_t *out, char nonce[NONCE_LEN + 1],
                     char sig[JRPC_SIGN_HEX_LEN + 1])
{
    int rc;
    *out = hdr ? *hdr : (jrpc_header_t){ 0 };
    out->key = (jrpc_span_t){ c->key_id, strlen(c->key_id) };
    out->timestamp = (int64_t)time(NULL) + c->clock_offset_s;
    if ((rc = jrpc_sign_new_nonce(nonce, NONCE_LEN)) < 0) {
        set_err(c, "cannot sign the request: no random bytes for a nonce");
        return rc;
    }
    out->nonce = (jrpc_span_t){ nonce, NONCE_LEN };
    rc = jrpc_sign_compute(sig, (jrpc_span_t){ c->secret, c->secret_len }, out->key,
                           out->timestamp, out->nonce, body, len);
    if (rc < 0) {
        set_err(c, "cannot sign the request: %s", rc == -ENOMEM ? "out of memory"
                : "bad timestamp (is the clock offset sensible?)");
        return rc;
    }
    out->signature = (jrpc_span_t){ sig, JRPC_SIGN_HEX_LEN };
    return 0;
}

/* ---- public API ---- */

jrpc_client_t *jrpc_client_new(const char *url, const jrpc_client_opts_t *opts)
{
    int rc = -EINVAL;
    jrpc_client_t *c = NULL;
    const transport_t *t = NULL;
    bool ipv6 = false;

    if (url == NULL)
        goto out;
    for (size_t i = 0; i < sizeof transports / sizeof transports[0]; i++)
        if (strncmp(url, transports[i].scheme, strlen(transports[i].scheme)) == 0)
            t = &transports[i];
    if (t == NULL)
        goto out;
    if (t->open == NULL) {
        rc = -EPROTONOSUPPORT;
        goto out;
    }
    const char *rest = url + strlen(t->scheme);
    if (*rest == '\0')
        goto out;
    if (strcmp(t->scheme, "tcp://") == 0 && (rc = check_tcp(rest, &ipv6)) < 0)
        goto out;

    rc = -ENOMEM;
    if ((c = calloc(1, sizeof *c)) == NULL)
        goto out;
    if ((c->url = strdup(url)) == NULL)
        goto out;
    c->fd = -1;
    c->t = t;
    c->ipv6 = ipv6;
    c->timeout_ms = opts && opts->timeout_ms > 0 ? opts->timeout_ms
                                                 : JRPC_CLIENT_DEFAULT_TIMEOUT_MS;
    c->clock_offset_s = opts ? opts->clock_offset_s : 0;
    jrpc_buf_init(&c->hdr);
    if ((rc = t->open(c)) < 0)
        goto out;
    rc = 0;
out:
    if (rc < 0) {
        if (c && c->t)
            c->t->close(c);
        if (c)
            free(c->url);
        free(c);
        errno = -rc;
        return NULL;
    }
    return c;
}

void jrpc_client_destroy(jrpc_client_t **self_p)
{
    jrpc_client_t *c = *self_p;
    if (c == NULL)
        return;
    c->t->close(c);
    forget_key(c);
    explicit_bzero(c->curve_secret, sizeof c->curve_secret);
    jrpc_buf_dispose(&c->hdr);
    free(c->url);
    free(c);
    *self_p = NULL;
}

int jrpc_client_set_key(jrpc_client_t *c, const char *key_id, const char *secret)
{
    assert(c != NULL);
    if (key_id == NULL && secret == NULL) {
        forget_key(c);
        return 0;
    }
    if (key_id == NULL || secret == NULL || !key_id_ok(key_id) || secret[0] == '\0')
        return -EINVAL;
    forget_key(c);
    c->key_id = strdup(key_id);
    c->secret = strdup(secret);
    if (c->key_id == NULL || c->secret == NULL) {
        forget_key(c);
        return -ENOMEM;
    }
    c->secret_len = strlen(secret);
    return 0;
}

static bool z85_key_ok(const char *s)
{
    uint8_t raw[32];
    return s != NULL && strlen(s) == 40 && zmq_z85_decode(raw, s) != NULL;
}

int jrpc_client_set_curve(jrpc_client_t *c, const char *public_z85, const char *secret_z85,
                          const char *server_public_z85)
{
    assert(c != NULL);
    bool off = !public_z85 && !secret_z85 && !server_public_z85;
    if (!off && (!z85_key_ok(public_z85) || !z85_key_ok(secret_z85)
                 || !z85_key_ok(server_public_z85)))
        return -EINVAL;
    if (c->t->call != zmq_transport_call)
        return -ENOTSUP;
    explicit_bzero(c->curve_secret, sizeof c->curve_secret);
    c->curve = !off;
    if (!off) {
        memcpy(c->curve_public, public_z85, 41);
        memcpy(c->curve_secret, secret_z85, 41);
        memcpy(c->curve_server, server_public_z85, 41);
    }
    /* The options apply to the next connect: replace the socket. */
    zmq_close_socket(c);
    return zmq_open_socket(c);
}

int jrpc_client_send(jrpc_client_t *c, const char *body, size_t len,
                     const jrpc_client_header_t *ch, jrpc_buf_t *reply, int timeout_ms)
{
    int rc;
    assert(c != NULL && reply != NULL && (body != NULL || len == 0));
    /* The public header struct is the wire codec's, field for field: the
     * codec stays out of the installed API (jrpc_client.h). */
    jrpc_header_t wh, *hdr = NULL;
    if (ch) {
        wh = (jrpc_header_t){ .key = ch->key, .timestamp = ch->timestamp,
                                   .nonce = ch->nonce, .signature = ch->signature,
                                   .timeout_ms = ch->timeout_ms,
                                   .traceparent = ch->traceparent };
        hdr = &wh;
    }
    c->err[0] = '\0';
    c->http_status = 0;
    reply->len = 0;
    if (timeout_ms < 0)
        timeout_ms = c->timeout_ms;
    if (c->key_id) {
        jrpc_header_t signed_hdr;
        char nonce[NONCE_LEN + 1], sig[JRPC_SIGN_HEX_LEN + 1];
        rc = sign_body(c, hdr, body, len, &signed_hdr, nonce, sig);
        if (rc == 0)
            rc = c->t->call(c, &signed_hdr, body, len, reply, timeout_ms);
    } else {
        rc = c->t->call(c, hdr, body, len, reply, timeout_ms);
    }
    if (rc < 0)
        reply->len = 0;   /* never a partial reply */
    return rc;
}

const char *jrpc_client_url(const jrpc_client_t *c)
{
    return c->url;
}

int jrpc_client_http_status(const jrpc_client_t *c)
{
    return c->http_status;
}

const char *jrpc_client_last_error(const jrpc_client_t *c)
{
    return c->err;
}

const char *jrpc_client_strerror(int rc)
{
    switch (rc) {
    case 0:                return "success";
    case -EINVAL:          return "invalid URL (expected tcp://HOST:PORT, ipc://PATH "
                                  "or http://HOST:PORT[/PATH])";
    case -EPROTONOSUPPORT: return "https:// is not supported yet "
                                  "(use http://, tcp:// or ipc://)";
    case JRPC_CLIENT_EHTTP: return "the server answered with an HTTP error status "
                                   "and no JSON-RPC answer";
    case -EMSGSIZE:        return "answer too large";
    case -ETIMEDOUT:       return "no answer in time (is the broker running?)";
    case -EPROTO:          return "malformed reply from the broker";
    case -ECONNRESET:      return "the connection was closed before the whole answer came";
    case -EINTR:           return "interrupted";
    case -ENOMEM:          return "out of memory";
    default:               return rc < 0 ? strerror(-rc) : "unknown error";
    }
}
