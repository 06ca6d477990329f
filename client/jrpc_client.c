#include "jrpc_client.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

/* A transport is picked once, from the URL scheme, in jrpc_client_new.
 * Adding http:// means adding one entry to `transports` and its three
 * functions; the public API does not change. */
typedef struct transport {
    const char *scheme;  /* with "://" */
    int  (*open)(jrpc_client_t *c);   /* NULL: scheme known but not implemented */
    int  (*call)(jrpc_client_t *c, const jrpc_buf_t *hdr, const char *body, size_t len,
                 jrpc_buf_t *reply, int timeout_ms);
    void (*close)(jrpc_client_t *c);
} transport_t;

struct jrpc_client {
    const transport_t *t;    /* chosen by the URL scheme */
    char      *url;          /* as given */
    int        timeout_ms;   /* default for jrpc_client_send */
    void      *zctx;         /* ZeroMQ context (zmq transports) */
    void      *zsock;        /* DEALER; NULL after a failed reset, reopened on next call */
    bool       ipv6;         /* tcp://[addr]:port needs ZMQ_IPV6 */
    jrpc_buf_t hdr;          /* encoded header frame, reused across calls */
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

static int zmq_transport_call(jrpc_client_t *c, const jrpc_buf_t *hdr, const char *body,
                              size_t len, jrpc_buf_t *reply, int timeout_ms)
{
    int rc;
    int64_t deadline = now_ms() + timeout_ms;

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
    if (rc == -ETIMEDOUT)
        set_err(c, "no answer from %s within %d ms (is the broker running?)",
                c->url, timeout_ms);
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

static const transport_t transports[] = {
    { "tcp://",   zmq_transport_open, zmq_transport_call, zmq_transport_close },
    { "ipc://",   zmq_transport_open, zmq_transport_call, zmq_transport_close },
    { "http://",  NULL, NULL, NULL },
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
    c->t = t;
    c->ipv6 = ipv6;
    c->timeout_ms = opts && opts->timeout_ms > 0 ? opts->timeout_ms
                                                 : JRPC_CLIENT_DEFAULT_TIMEOUT_MS;
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
    jrpc_buf_dispose(&c->hdr);
    free(c->url);
    free(c);
    *self_p = NULL;
}

int jrpc_client_send(jrpc_client_t *c, const char *body, size_t len,
                     const jrpc_wire_header_t *hdr, jrpc_buf_t *reply, int timeout_ms)
{
    int rc;
    assert(c != NULL && reply != NULL && (body != NULL || len == 0));
    c->err[0] = '\0';
    reply->len = 0;
    if (timeout_ms < 0)
        timeout_ms = c->timeout_ms;
    if (hdr) {
        jrpc_buf_reset(&c->hdr);
        if ((rc = jrpc_wire_put_header(&c->hdr, hdr)) < 0) {
            set_err(c, "cannot encode the header frame: out of memory");
            return rc;
        }
    }
    rc = c->t->call(c, hdr ? &c->hdr : NULL, body, len, reply, timeout_ms);
    if (rc < 0)
        reply->len = 0;   /* never a partial reply */
    return rc;
}

const char *jrpc_client_url(const jrpc_client_t *c)
{
    return c->url;
}

const char *jrpc_client_last_error(const jrpc_client_t *c)
{
    return c->err;
}

const char *jrpc_client_strerror(int rc)
{
    switch (rc) {
    case 0:                return "success";
    case -EINVAL:          return "invalid URL (expected tcp://HOST:PORT or ipc://PATH)";
    case -EPROTONOSUPPORT: return "http:// and https:// are not supported yet "
                                  "(use tcp://HOST:PORT or ipc://PATH)";
    case -ETIMEDOUT:       return "no answer in time (is the broker running?)";
    case -EPROTO:          return "malformed reply from the broker";
    case -EINTR:           return "interrupted";
    case -ENOMEM:          return "out of memory";
    default:               return rc < 0 ? strerror(-rc) : "unknown error";
    }
}
