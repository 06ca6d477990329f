/* jrpc_zwatch — a ZeroMQ socket in a libuv loop.
 *
 * ZMQ_FD is edge-triggered and only says "look at the socket": a send or a
 * recv on the socket can consume the edge. So the watcher calls on_readable
 * from the fd's poll callback, and again in a prepare callback right before
 * the loop blocks if the socket was used (jrpc_zwatch_kick) since; the
 * callback reads with ZMQ_DONTWAIT until EAGAIN. An EAGAIN recv processes
 * the socket's pending commands (re-arming the fd) exactly as ZMQ_EVENTS
 * would, so ZMQ_EVENTS is never asked: each look costs libzmq a poll() and a
 * getpid(), and looking only when the edge may have been eaten, with the
 * recv itself, keeps that to one per wake. A callback that stops before
 * EAGAIN (to be fair to other sockets) returns 1, and the loop is kept from
 * blocking until it is done.
 *
 * Handles are caller-owned; after jrpc_zwatch_stop() the memory may be freed
 * only from on_closed (libuv's rule). */
#ifndef JRPC_ZWATCH_H
#define JRPC_ZWATCH_H

#include <uv.h>

typedef struct jrpc_zwatch jrpc_zwatch_t;

/* Reads from sock with ZMQ_DONTWAIT. Returns 0 when it saw EAGAIN, 1 when it
 * stopped early and wants to be called again soon. */
typedef int (*jrpc_zwatch_cb)(jrpc_zwatch_t *w, void *sock);
typedef void (*jrpc_zwatch_closed_cb)(jrpc_zwatch_t *w);

struct jrpc_zwatch {
    uv_poll_t      poll;      /* on ZMQ_FD */
    uv_prepare_t   prepare;   /* looks again before the loop blocks, if kicked */
    uv_idle_t      idle;      /* keeps the loop from blocking while work remains */
    void          *sock;      /* the ZeroMQ socket (borrowed) */
    jrpc_zwatch_cb on_readable;
    jrpc_zwatch_closed_cb on_closed;
    void          *data;      /* the caller's */
    int            closing;   /* handles still to close */
    int            kicked;    /* sent on since the last look: the prepare looks */
};

/* Starts watching sock. Returns 0 or a negative libuv/errno code. */
int  jrpc_zwatch_start(uv_loop_t *loop, jrpc_zwatch_t *w, void *sock, jrpc_zwatch_cb cb, void *data);
/* Closes the handles; on_closed (may be NULL) runs once all are closed. */
void jrpc_zwatch_stop(jrpc_zwatch_t *w, jrpc_zwatch_closed_cb on_closed);
/* Call after sending on the socket from outside on_readable: the send may
 * have eaten the edge, so this makes sure pending input is looked at before
 * the loop blocks next (once, however many kicks came before). */
void jrpc_zwatch_kick(jrpc_zwatch_t *w);

#endif
