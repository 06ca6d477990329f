#include "jrpc_zwatch.h"

#include <errno.h>
#include <zmq.h>

static void on_idle(uv_idle_t *h);

/* Runs the callback, which reads until EAGAIN; arms the idle handle when
 * the callback asked to be called again, so the loop polls without blocking.
 * No ZMQ_EVENTS first: a recv with ZMQ_DONTWAIT processes the socket's
 * commands as ZMQ_EVENTS does (one poll() and one getpid() in libzmq), so
 * asking first cost one more of each on every wake that had input, and saved
 * nothing on the others (an EAGAIN recv costs what ZMQ_EVENTS costs). */
static void service(jrpc_zwatch_t *w)
{
    if (w->closing)
        return;
    w->kicked = 0;
    int more = w->on_readable(w, w->sock);
    if (more)
        uv_idle_start(&w->idle, on_idle);
    else
        uv_idle_stop(&w->idle);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    service(h->data);
}

/* Before the loop blocks: only a socket used since it was last looked at
 * can have input the fd will not announce. */
static void on_prepare(uv_prepare_t *h)
{
    jrpc_zwatch_t *w = h->data;
    if (w->kicked)
        service(w);
}

static void on_idle(uv_idle_t *h)
{
    service(h->data);
}

int jrpc_zwatch_start(uv_loop_t *loop, jrpc_zwatch_t *w, void *sock, jrpc_zwatch_cb cb, void *data)
{
    int fd;
    size_t len = sizeof fd;
    if (zmq_getsockopt(sock, ZMQ_FD, &fd, &len) != 0)
        return -errno;
    w->sock = sock;
    w->on_readable = cb;
    w->on_closed = NULL;
    w->data = data;
    w->closing = 0;
    w->kicked = 1; /* look once before the first block */
    int rc = uv_poll_init(loop, &w->poll, fd);
    if (rc < 0)
        return rc;
    uv_prepare_init(loop, &w->prepare);
    uv_idle_init(loop, &w->idle);
    w->poll.data = w->prepare.data = w->idle.data = w;
    uv_poll_start(&w->poll, UV_READABLE, on_poll);
    uv_prepare_start(&w->prepare, on_prepare);
    return 0;
}

void jrpc_zwatch_kick(jrpc_zwatch_t *w)
{
    w->kicked = 1;
}

static void on_handle_closed(uv_handle_t *h)
{
    jrpc_zwatch_t *w = h->data;
    if (--w->closing == 0 && w->on_closed)
        w->on_closed(w);
}

void jrpc_zwatch_stop(jrpc_zwatch_t *w, jrpc_zwatch_closed_cb on_closed)
{
    if (w->closing)
        return;
    w->on_closed = on_closed;
    w->closing = 3;
    uv_close((uv_handle_t *)&w->poll, on_handle_closed);
    uv_close((uv_handle_t *)&w->prepare, on_handle_closed);
    uv_close((uv_handle_t *)&w->idle, on_handle_closed);
}
