/* jrpc_client_zmtp — see jrpc_client_zmtp.h. Spec: ZMTP 3.1
 * (rfc.zeromq.org/spec/37), the NULL mechanism (spec 23), DEALER to ROUTER
 * (spec 28); the bytes are proto/jrpc_zmtp_codec's. */
#include "jrpc_client_zmtp.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "jrpc_client_transport.h"
#include "jrpc_zmtp_codec.h"

#define RECONNECT_MS 100            /* libzmq's ZMQ_RECONNECT_IVL */
#define READ_ROOM    65536          /* free room offered to each recv */
#define MAX_FRAME    (1ull << 30)   /* a larger frame from the broker: -EPROTO */
#define MAX_HOST     256

bool jrpc_client_zmtp_supports(const char *url)
{
    if (strncmp(url, "tcp://", 6) == 0)
        return strchr(url, ';') == NULL && strlen(url + 6) < MAX_HOST + 8;
    if (strncmp(url, "ipc://", 6) == 0)
        return url[6] != '\0' && strlen(url + 6) < sizeof ((struct sockaddr_un *)0)->sun_path;
    return false;
}

void jrpc_client_zmtp_init(jrpc_client_zmtp_t *z, const char *url)
{
    memset(z, 0, sizeof *z);
    z->url = url;
    z->fd = -1;
    jrpc_buf_init(&z->in);
}

void jrpc_client_zmtp_disconnect(jrpc_client_zmtp_t *z)
{
    if (z->fd >= 0) {
        close(z->fd);
        z->fd = -1;
    }
    z->in.len = z->off = 0;
}

void jrpc_client_zmtp_dispose(jrpc_client_zmtp_t *z)
{
    jrpc_client_zmtp_disconnect(z);
    jrpc_buf_dispose(&z->in);
}

/* ---- bytes in and out ---- */

/* Writes iov[0..n) whole (MSG_NOSIGNAL: a closed peer is -EPIPE, not a
 * signal). Returns 0, -ETIMEDOUT, -EINTR or -EPIPE. */
static int send_all(int fd, struct iovec *iov, int n, int64_t deadline)
{
    while (n > 0) {
        struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)n };
        ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                return -EPIPE;
            int rc = jrpc_client_fd_wait(fd, POLLOUT, deadline);
            if (rc < 0)
                return rc;
            continue;
        }
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++, n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

/* Reads what the connection has into z->in, waiting until the deadline
 * (wait false: not at all) for something, with room for at least `need`
 * undecoded bytes. Returns the bytes read (> 0), 0 when wait is false and
 * nothing is there, -ETIMEDOUT, -EINTR, -ECONNRESET (closed or reset),
 * -ENOMEM. */
static ssize_t recv_some(jrpc_client_zmtp_t *z, size_t need, bool wait, int64_t deadline)
{
    if (z->off == z->in.len) {
        z->off = z->in.len = 0;
    } else if (z->off > 0 && z->in.cap - z->in.len < READ_ROOM) {
        memmove(z->in.p, z->in.p + z->off, z->in.len - z->off);
        z->in.len -= z->off;
        z->off = 0;
    }
    size_t room = need > z->in.len - z->off ? need - (z->in.len - z->off) : 0;
    if (jrpc_buf_reserve(&z->in, room > READ_ROOM ? room : READ_ROOM) < 0)
        return -ENOMEM;
    for (;;) {
        ssize_t r = recv(z->fd, z->in.p + z->in.len, z->in.cap - z->in.len, MSG_DONTWAIT);
        if (r > 0) {
            z->in.len += (size_t)r;
            return r;
        }
        if (r == 0)
            return -ECONNRESET;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -ECONNRESET;
        if (!wait)
            return 0;
        int rc = jrpc_client_fd_wait(z->fd, POLLIN, deadline);
        if (rc < 0)
            return rc;
    }
}

/* A command from the broker, on an open connection: PING gets its PONG
 * (with the PING's context), PONG is nothing. Returns 0, or -ECONNRESET for
 * ERROR and anything else (READY again, unknown: the connection is not one
 * to trust). */
static int on_command(jrpc_client_zmtp_t *z, const jrpc_zmtp_frame_t *f, int64_t deadline)
{
    jrpc_span_t name, data;
    if (jrpc_zmtp_command_split(f->body, f->size, &name, &data) < 0)
        return -ECONNRESET;
    if (jrpc_zmtp_name_is(name, "PONG"))
        return 0;
    if (!jrpc_zmtp_name_is(name, "PING") || data.n < 2 || data.n > 2 + 16)
        return -ECONNRESET;
    uint8_t pong[2 + 1 + 4 + 16];
    size_t ctx = data.n - 2;
    size_t hl = jrpc_zmtp_command_head(pong, "PONG", ctx);
    memcpy(pong + hl, data.p + 2, ctx);
    struct iovec iov = { pong, hl + ctx };
    return send_all(z->fd, &iov, 1, deadline) < 0 ? -ECONNRESET : 0;
}

/* ---- connecting ---- */

/* One attempt at a socket to the URL. Returns 0 with *fd set, or -errno. */
static int open_fd(jrpc_client_zmtp_t *z, int64_t deadline, int *fd)
{
    const char *rest = z->url + 6;
    if (strncmp(z->url, "ipc://", 6) == 0) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        size_t n = strlen(rest);
        memcpy(sa.sun_path, rest, n);   /* fits: jrpc_client_zmtp_supports */
        if (rest[0] == '@')             /* abstract, as libzmq writes it */
            sa.sun_path[0] = '\0';
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (s < 0)
            return -errno;
        /* A Unix socket connects at once or not at all (EAGAIN: its
         * backlog is full; retried as a refusal). */
        if (connect(s, (struct sockaddr *)&sa,
                    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) < 0) {
            int rc = -errno;
            close(s);
            return rc;
        }
        *fd = s;
        return 0;
    }
    char host[MAX_HOST + 8];
    const char *colon = strrchr(rest, ':');   /* checked by the transport's open */
    size_t hl = (size_t)(colon - rest);
    if (hl >= 2 && rest[0] == '[' && rest[hl - 1] == ']')
        rest++, hl -= 2;
    memcpy(host, rest, hl);
    host[hl] = '\0';
    int gai = 0;
    return jrpc_client_tcp_connect(host, colon + 1, deadline, fd, &gai);
}

/* Our greeting and READY (DEALER) out, the broker's greeting and READY
 * (ROUTER) in. Returns 0, -ECONNREFUSED with z->why set (not a ZMTP 3
 * ROUTER with the NULL mechanism), or what the bytes' way returned. */
static int handshake(jrpc_client_zmtp_t *z, int64_t deadline)
{
    uint8_t hello[JRPC_ZMTP_GREETING_LEN + JRPC_ZMTP_READY_MAX];
    memcpy(hello, jrpc_zmtp_greeting_client, JRPC_ZMTP_GREETING_LEN);
    size_t n = JRPC_ZMTP_GREETING_LEN + jrpc_zmtp_ready_put(hello + JRPC_ZMTP_GREETING_LEN,
                                                            "DEALER");
    struct iovec iov = { hello, n };
    int rc = send_all(z->fd, &iov, 1, deadline);
    if (rc < 0)
        return rc == -EPIPE ? -ECONNRESET : rc;
    bool greeted = false;
    for (;;) {
        const uint8_t *p = z->off ? (const uint8_t *)z->in.p + z->off : (const uint8_t *)z->in.p;
        size_t len = z->in.len - z->off, need = JRPC_ZMTP_GREETING_LEN;
        if (!greeted) {
            rc = jrpc_zmtp_greeting_check(p, len, &z->why);
            if (rc == JRPC_ZMTP_MALFORMED)
                return -ECONNREFUSED;
            if (rc > 0) {
                z->off += JRPC_ZMTP_GREETING_LEN;
                greeted = true;
                continue;
            }
        } else {
            jrpc_zmtp_frame_t f;
            ssize_t fl = jrpc_zmtp_frame_decode(p, len, 1 << 16, &f, &need);
            if (fl >= 0) {
                jrpc_span_t name, data, type;
                z->off += (size_t)fl;
                z->why = "expected READY";
                if (!(f.flags & JRPC_ZMTP_FLAG_COMMAND) ||
                    jrpc_zmtp_command_split(f.body, f.size, &name, &data) < 0 ||
                    !jrpc_zmtp_name_is(name, "READY") ||
                    jrpc_zmtp_ready_type((const uint8_t *)data.p, data.n, &type, &z->why) < 0)
                    return -ECONNREFUSED;
                if (!jrpc_zmtp_name_is(type, "ROUTER")) {
                    z->why = "the peer is not a ROUTER";
                    return -ECONNREFUSED;
                }
                return 0;
            }
            if (fl != JRPC_ZMTP_NEED_MORE) {
                z->why = "malformed handshake";
                return -ECONNREFUSED;
            }
        }
        ssize_t r = recv_some(z, need, true, deadline);
        if (r < 0)
            return (int)r;
    }
}

/* Connects, retrying every RECONNECT_MS while the broker refuses or is not
 * there, until the deadline. */
static int zmtp_connect(jrpc_client_zmtp_t *z, int64_t deadline)
{
    for (;;) {
        z->in.len = z->off = 0;
        int rc = open_fd(z, deadline, &z->fd);
        if (rc == 0 && (rc = handshake(z, deadline)) < 0)
            jrpc_client_zmtp_disconnect(z);
        if (rc == 0 || rc == -ETIMEDOUT || rc == -EINTR || rc == -ENOMEM ||
            (rc == -ECONNREFUSED && z->why != NULL) || z->once)
            return rc;
        int64_t left = deadline - jrpc_client_now_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        if (poll(NULL, 0, left < RECONNECT_MS ? (int)left : RECONNECT_MS) < 0)
            return -EINTR;
    }
}

/* Whether the idle connection can carry a call: nothing but commands came
 * since the last answer, and the broker did not close it. */
static bool idle_ok(jrpc_client_zmtp_t *z, int64_t deadline)
{
    ssize_t r = recv_some(z, 0, false, deadline);
    if (r < 0)
        return false;
    while (z->off < z->in.len) {
        jrpc_zmtp_frame_t f;
        size_t need;
        ssize_t n = jrpc_zmtp_frame_decode((const uint8_t *)z->in.p + z->off,
                                           z->in.len - z->off, MAX_FRAME, &f, &need);
        if (n == JRPC_ZMTP_NEED_MORE)
            return true;   /* a command's start: read with the answer */
        if (n < 0 || !(f.flags & JRPC_ZMTP_FLAG_COMMAND) || on_command(z, &f, deadline) < 0)
            return false;  /* a message nobody asked for: not a connection to trust */
        z->off += (size_t)n;
    }
    return true;
}

/* ---- calls ---- */

int jrpc_client_zmtp_send(jrpc_client_zmtp_t *z, const jrpc_span_t *frames, int n,
                          int64_t deadline)
{
    z->why = NULL;
    if (z->fd >= 0 && !idle_ok(z, deadline))
        jrpc_client_zmtp_disconnect(z);
    int rc;
    if (z->fd < 0 && (rc = zmtp_connect(z, deadline)) < 0)
        return rc;
    uint8_t heads[3][9];
    struct iovec iov[6];
    int k = 0;
    for (int i = 0; i < n; i++) {
        uint8_t flags = i + 1 < n ? JRPC_ZMTP_FLAG_MORE : 0;
        iov[k++] = (struct iovec){ heads[i], jrpc_zmtp_frame_head(heads[i], flags, frames[i].n) };
        if (frames[i].n)
            iov[k++] = (struct iovec){ (void *)frames[i].p, frames[i].n };
    }
    if ((rc = send_all(z->fd, iov, k, deadline)) < 0)
        jrpc_client_zmtp_disconnect(z);
    return rc;
}

int jrpc_client_zmtp_take_frame(int k, const char *p, size_t n, jrpc_buf_t *head,
                                jrpc_buf_t *body)
{
    if (k == 1)
        return n == 0 ? 0 : -EPROTO;          /* the delimiter */
    if (k == 2)
        return jrpc_buf_append(body, p, n);
    if (k == 3) {                             /* that was the head: this is the body */
        int rc = jrpc_buf_append(head, body->p, body->len);
        body->len = 0;
        return rc < 0 ? rc : jrpc_buf_append(body, p, n);
    }
    return -EPROTO;
}

int jrpc_client_zmtp_read(jrpc_client_zmtp_t *z, jrpc_buf_t *head, jrpc_buf_t *body,
                          int64_t deadline)
{
    int rc = 0, nframes = 0;
    for (;;) {
        jrpc_zmtp_frame_t f;
        size_t need = 0;
        ssize_t n = jrpc_zmtp_frame_decode((const uint8_t *)z->in.p + z->off, z->in.len - z->off,
                                           MAX_FRAME, &f, &need);
        if (n == JRPC_ZMTP_NEED_MORE) {
            ssize_t r = recv_some(z, need, true, deadline);
            if (r < 0) {
                jrpc_client_zmtp_disconnect(z);
                return (int)r;
            }
            continue;
        }
        if (n < 0) {   /* malformed, or a frame above MAX_FRAME: the stream is lost */
            jrpc_client_zmtp_disconnect(z);
            return -EPROTO;
        }
        z->off += (size_t)n;
        if (f.flags & JRPC_ZMTP_FLAG_COMMAND) {
            int crc = on_command(z, &f, deadline);
            if (crc < 0) {
                jrpc_client_zmtp_disconnect(z);
                return crc;
            }
            continue;
        }
        nframes++;
        if (rc == 0)
            rc = jrpc_client_zmtp_take_frame(nframes, (const char *)f.body, f.size, head, body);
        if (!(f.flags & JRPC_ZMTP_FLAG_MORE))
            break;
    }
    return rc == 0 && nframes < 2 ? -EPROTO : rc;
}
