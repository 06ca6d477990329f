/* jrpc_client_sock — the socket layer under every client transport: a wait
 * bounded by a call's deadline, a non-blocking TCP connect, and the clock
 * those deadlines are read on.
 *
 * Internal to the client library (not installed). It sits below the
 * transports (jrpc_client_http, jrpc_client_tls, jrpc_client_zmtp) and knows
 * none of them, so no transport reaches into another for a poll() (issue 31:
 * http and tls called each other through jrpc_client_fd_wait). */
#ifndef JRPC_CLIENT_SOCK_H
#define JRPC_CLIENT_SOCK_H

#include <stdint.h>
#include <time.h>

/* Waits until fd has `events` or deadline (jrpc_client_now_ms) passes.
 * POLLERR/POLLHUP count as ready: the following send/recv reports them.
 * Returns 0, -ETIMEDOUT or -errno (-EINTR when a signal interrupted the
 * wait). */
int jrpc_client_fd_wait(int fd, short events, int64_t deadline);

/* Connects a non-blocking TCP socket to host:port (a name, an IPv4 or an
 * IPv6 address; port digits), trying every address in turn within the
 * deadline, with TCP_NODELAY. Returns 0 with *fd set, -ETIMEDOUT, -EINTR,
 * -EHOSTUNREACH with *gai set (non-zero: getaddrinfo's code) when the name
 * does not resolve, -ENOMEM or the last address's -errno. */
int jrpc_client_tcp_connect(const char *host, const char *port, int64_t deadline, int *fd,
                            int *gai);

/* Monotonic milliseconds, for the deadlines of a call. */
static inline int64_t jrpc_client_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
