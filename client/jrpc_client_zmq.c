/* jrpc_client_zmq — libjrpc-client's ZeroMQ transport (tcp://, ipc://):
 * a DEALER to the broker's ROUTER with REQ framing, [empty][header?][json]
 * out and [empty][json] back, and optionally CURVE. Two engines behind it:
 * our own ZMTP on the calling thread (jrpc_client_zmtp.c, the default for
 * tcp:// and ipc:// without CURVE) and libzmq (CURVE, or chosen with
 * jrpc_client_opts_t.zmq_engine = "libzmq"). See jrpc_client_transport.h
 * for the contract of each function. */
#include "jrpc_client_transport.h"
#include "jrpc_client_zmtp.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

typedef struct zconn {
    jrpc_client_t *client;     /* where failures are described */
    const char    *url;        /* borrowed from the client */
    void          *ctx;        /* ZeroMQ context; NULL until libzmq is used */
    void          *sock;       /* DEALER; NULL after a failed reset, reopened on next call */
    bool           native_ok;  /* the native engine may serve this URL (not with CURVE) */
    jrpc_client_zmtp_t zn;     /* the native engine's connection */
    bool           ipv6;       /* tcp://[addr]:port needs ZMQ_IPV6 */
    bool           curve;      /* CURVE client with the three keys below */
    char           curve_public[41];  /* our public key, Z85 */
    char           curve_secret[41];  /* our secret key, Z85 (wiped on change) */
    char           curve_server[41];  /* the broker's public key, Z85 */
    jrpc_buf_t     frame;      /* encoded header frame, reused */
    jrpc_buf_t     head;       /* a streamed message's reply header frame */
    msgpack_zone   zone;       /* its decoding */
} zconn_t;

#define set_err(c, ...) jrpc_client_errf((c)->client, __VA_ARGS__)

/* Not ZMQ_IMMEDIATE: with it, libzmq drops the unread messages of a
 * connection the moment it closes, so a reply sent just before the broker
 * exits (a graceful stop) would be lost. Without it, a request to a broker
 * that is down waits in the queue until our deadline, and then the socket is
 * thrown away (ZMQ_LINGER=0), so nobody gets it later.
 * ZMQ_LINGER=0: closing drops anything unsent at once. */
static int open_socket(zconn_t *c)
{
    int rc;
    const int zero = 0, one = 1;
    if (c->ctx == NULL && (c->ctx = zmq_ctx_new()) == NULL)
        return -errno;
    void *s = zmq_socket(c->ctx, ZMQ_DEALER);
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
    c->sock = s;
    return 0;
}

static void close_socket(zconn_t *c)
{
    if (c->sock) {
        zmq_close(c->sock);
        c->sock = NULL;
    }
}

/* Waits until sock has `events` or deadline passes.
 * Returns 0, -ETIMEDOUT, -EINTR or another -errno. */
static int wait_for(void *sock, short events, int64_t deadline)
{
    zmq_pollitem_t item = { .socket = sock, .events = events };
    int64_t left = deadline - jrpc_client_now_ms();
    int rc = zmq_poll(&item, 1, left > 0 ? (long)left : 0);
    if (rc < 0)
        return -errno;
    return rc == 0 ? -ETIMEDOUT : 0;
}

/* Reads one whole message: [empty][frame][frame?]. The frames after the
 * delimiter go to body (the last) and head (the one before it, streamed
 * answers; head->len stays 0 for a one-frame reply). Returns 0, -EPROTO
 * (no delimiter, or more than two frames after it), -ENOMEM or -errno.
 * Always consumes every frame of the message. */
static int read_msg(void *sock, jrpc_buf_t *head, jrpc_buf_t *body)
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
        if (rc == 0)
            rc = jrpc_client_zmtp_take_frame(nframes, zmq_msg_data(&m), zmq_msg_size(&m), head,
                                             body);
        zmq_msg_close(&m);
        if (zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &more_len) < 0)
            return -errno;
    }
    if (rc == 0 && nframes < 2)
        rc = -EPROTO;
    return rc;
}

static bool use_native(const zconn_t *c)
{
    return c->native_ok && !c->curve;
}

/* The next message, by either engine. */
static int next_msg(zconn_t *c, jrpc_buf_t *head, jrpc_buf_t *body, int64_t deadline)
{
    if (use_native(c))
        return jrpc_client_zmtp_read(&c->zn, head, body, deadline);
    int rc = wait_for(c->sock, ZMQ_POLLIN, deadline);
    return rc < 0 ? rc : read_msg(c->sock, head, body);
}

/* Reads the reply: one message, or, streamed, each answer to on_answer
 * until the message marked end, whose JSON goes to reply. A broker that
 * does not stream sends one one-frame message: that is the reply. */
static int read_reply(zconn_t *c, jrpc_buf_t *reply, int64_t deadline,
                      jrpc_client_answer_fn on_answer, void *arg)
{
    for (;;) {
        jrpc_buf_reset(&c->head);
        reply->len = 0;
        int rc = next_msg(c, &c->head, reply, deadline);
        if (rc < 0 || c->head.len == 0)
            return rc;   /* an error, or a one-frame (unstreamed) reply */
        jrpc_reply_head_t rh;
        msgpack_zone_clear(&c->zone);
        if (jrpc_header_decode_reply(c->head.p, c->head.len, &c->zone, &rh) < 0 ||
            (on_answer == NULL && !rh.whole))
            return -EPROTO;
        if (rh.timing.n)
            jrpc_client_add_timing(c->client, rh.timing.p, rh.timing.n);
        if (rh.end || rh.whole)   /* whole: one reply with its timing (PROTOCOL.md 9.3) */
            return 0;
        on_answer(arg, rh.pos, reply->p, reply->len);
    }
}

static int send_frame(void *sock, const char *p, size_t n, bool last)
{
    int flags = ZMQ_DONTWAIT | (last ? 0 : ZMQ_SNDMORE);
    return zmq_send(sock, n ? p : "", n, flags) < 0 ? -errno : 0;
}

static int transport_call(void *state, const jrpc_header_t *wh, const char *body, size_t len,
                          jrpc_buf_t *reply, int timeout_ms, int *http_status,
                          jrpc_client_answer_fn on_answer, void *arg, bool once, bool *sent)
{
    zconn_t *c = state;
    int rc;
    int64_t deadline = jrpc_client_now_ms() + timeout_ms;
    const jrpc_buf_t *hdr = NULL;
    jrpc_header_t streamed;

    (void)http_status;   /* ZeroMQ answers have none */
    if (on_answer) {   /* the flag travels in the header frame */
        streamed = wh ? *wh : (jrpc_header_t){ 0 };
        streamed.stream = true;
        wh = &streamed;
    }
    if (wh) {
        jrpc_buf_reset(&c->frame);
        if ((rc = jrpc_header_put(&c->frame, wh)) < 0) {
            set_err(c, "cannot encode the header frame: out of memory");
            return rc;
        }
        hdr = &c->frame;
    }

    if (use_native(c)) {
        jrpc_span_t frames[3] = { { "", 0 } };
        int n = 1;
        if (hdr)
            frames[n++] = (jrpc_span_t){ hdr->p, hdr->len };
        frames[n++] = (jrpc_span_t){ body, len };
        c->zn.once = once;
        if ((rc = jrpc_client_zmtp_send(&c->zn, frames, n, deadline)) < 0)
            goto out;
        *sent = true;   /* the whole message is with the kernel */
    } else {
        if (c->sock == NULL && (rc = open_socket(c)) < 0) {
            set_err(c, "cannot open a connection to %s: %s", c->url, zmq_strerror(-rc));
            return rc;
        }
        if ((rc = wait_for(c->sock, ZMQ_POLLOUT, deadline)) < 0)
            goto out;
        /* Once the first frame is accepted the rest of the message is too
         * (the high-water mark counts whole messages). */
        if ((rc = send_frame(c->sock, "", 0, false)) < 0)
            goto out;
        if (hdr && (rc = send_frame(c->sock, hdr->p, hdr->len, false)) < 0)
            goto out;
        if ((rc = send_frame(c->sock, body, len, true)) < 0)
            goto out;
        *sent = true;   /* queued: libzmq may deliver it at any time now */
    }
    rc = read_reply(c, reply, deadline, on_answer, arg);
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
        set_err(c, "malformed reply from %s (expected [empty][body] frames, or [empty][reply "
                "header][body] when streamed or asked for timing)", c->url);
    else if (rc == -EINTR)
        set_err(c, "interrupted while waiting for %s", c->url);
    else if (rc == -ECONNREFUSED && c->zn.why)
        set_err(c, "%s is not a ZeroMQ 3 ROUTER with the NULL mechanism (%s)%s", c->url,
                c->zn.why, strstr(c->zn.why, "mechanism")
                               ? ": a broker with CURVE needs --server-key and this client's keys"
                               : "");
    else if (!*sent && c->zn.once && rc < 0 && rc != -ENOMEM)
        set_err(c, "cannot connect to %s: %s", c->url, strerror(-rc));
    else if (rc == -ECONNRESET)
        set_err(c, "connection to %s lost while waiting for the answer (the broker closed it)",
                c->url);
    else if (rc == -EPIPE)
        set_err(c, "connection to %s lost while sending the request", c->url);
    else if (rc < 0)
        set_err(c, "%s: %s", c->url, rc == -ENOMEM ? "out of memory" : zmq_strerror(-rc));

    /* After any failure the socket may still hold our request, or later get
     * its reply: replace it so the next call starts clean. */
    if (rc < 0 && use_native(c)) {
        jrpc_client_zmtp_disconnect(&c->zn);
    } else if (rc < 0) {
        close_socket(c);
        int rc2 = open_socket(c);   /* on failure, retried by the next call */
        (void)rc2;
    }
    return rc;
}

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

static void transport_close(void *state)
{
    zconn_t *c = state;
    if (c == NULL)
        return;
    close_socket(c);
    jrpc_client_zmtp_dispose(&c->zn);
    if (c->ctx)
        zmq_ctx_term(c->ctx);
    explicit_bzero(c->curve_secret, sizeof c->curve_secret);
    jrpc_buf_dispose(&c->frame);
    jrpc_buf_dispose(&c->head);
    msgpack_zone_destroy(&c->zone);
    free(c);
}

static int transport_open(jrpc_client_t *client, const char *url,
                          const jrpc_client_opts_t *opts, void **state)
{
    bool ipv6 = false, native = true;
    int rc;
    if (opts->zmq_engine && strcmp(opts->zmq_engine, "libzmq") == 0)
        native = false;
    else if (opts->zmq_engine && strcmp(opts->zmq_engine, "native") != 0)
        return -EINVAL;
    if (strncmp(url, "tcp://", 6) == 0) {
        if ((rc = check_tcp(url + 6, &ipv6)) < 0)
            return rc;
    } else if (strncmp(url, "ipc://", 6) != 0 || url[6] == '\0') {
        return -EINVAL;
    }
    zconn_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        return -ENOMEM;
    c->client = client;
    c->url = url;
    c->ipv6 = ipv6;
    jrpc_buf_init(&c->frame);
    jrpc_buf_init(&c->head);
    msgpack_zone_init(&c->zone, 256);
    jrpc_client_zmtp_init(&c->zn, url);
    c->native_ok = native && jrpc_client_zmtp_supports(url);
    /* libzmq starts connecting now, in the background; the native engine
     * connects at the first call. */
    if (!c->native_ok && (rc = open_socket(c)) < 0) {
        transport_close(c);
        return rc;
    }
    *state = c;
    return 0;
}

static bool z85_key_ok(const char *s)
{
    uint8_t raw[32];
    return s != NULL && strlen(s) == 40 && zmq_z85_decode(raw, s) != NULL;
}

static int transport_set_curve(void *state, const char *public_z85, const char *secret_z85,
                               const char *server_public_z85)
{
    zconn_t *c = state;
    bool off = !public_z85 && !secret_z85 && !server_public_z85;
    if (!off && (!z85_key_ok(public_z85) || !z85_key_ok(secret_z85)
                 || !z85_key_ok(server_public_z85)))
        return -EINVAL;
    explicit_bzero(c->curve_secret, sizeof c->curve_secret);
    c->curve = !off;
    if (!off) {
        memcpy(c->curve_public, public_z85, 41);
        memcpy(c->curve_secret, secret_z85, 41);
        memcpy(c->curve_server, server_public_z85, 41);
    }
    /* The options apply to the next connect: replace the connection. */
    close_socket(c);
    jrpc_client_zmtp_disconnect(&c->zn);
    return use_native(c) ? 0 : open_socket(c);
}

const jrpc_client_transport_t jrpc_client_zmq = {
    .open      = transport_open,
    .call      = transport_call,
    .set_curve = transport_set_curve,
    .disconnect = NULL,   /* ZeroMQ reconnects by itself; a timeout resets the socket */
    .close     = transport_close,
};
