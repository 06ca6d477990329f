/* jrpc_listen — a TCP listener from "HOST:PORT", shared by the HTTP front
 * and the admin listener. */
#ifndef JRPC_LISTEN_H
#define JRPC_LISTEN_H

#include <stdbool.h>
#include <uv.h>

/* Resolves listen ("HOST:PORT" or "[V6]:PORT"; port 0 picks one, once, with
 * getaddrinfo: may block on a host name), binds and listens on a new
 * non-blocking socket. Bound before libuv sees it, so a failure leaves no
 * handle behind. With reuseport, SO_REUSEPORT is set: other processes that
 * set it too may bind the same address, and the kernel spreads new
 * connections among them. Returns the socket, or a negative errno after
 * logging event=bind_failed endpoint=SCHEME://LISTEN under comp. */
int jrpc_listen_socket(const char *listen, const char *comp, const char *scheme, bool reuseport);

/* Logs event=listening endpoint=SCHEME://ADDR:PORT with the bound address
 * (what port 0 became) under comp. */
void jrpc_listen_log(const uv_tcp_t *h, const char *comp, const char *scheme);

/* Accepts the pending connection on server and closes it at once (past a
 * connection limit: the client learns now instead of waiting in the
 * backlog). */
void jrpc_listen_refuse(uv_stream_t *server);

#endif
