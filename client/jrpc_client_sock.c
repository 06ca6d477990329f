/* jrpc_client_sock — see jrpc_client_sock.h. */
#include "jrpc_client_sock.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

int jrpc_client_fd_wait(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - jrpc_client_now_ms();
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

int jrpc_client_tcp_connect(const char *host, const char *port, int64_t deadline, int *fd_out,
                            int *gai)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_NUMERICSERV };
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, port, &hints, &res);
    *gai = rc;
    if (rc != 0)
        return rc == EAI_MEMORY ? -ENOMEM : -EHOSTUNREACH;
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
        } else if ((rc = jrpc_client_fd_wait(fd, POLLOUT, deadline)) == 0) {
            int soerr = 0;
            socklen_t sl = sizeof soerr;
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
                soerr = errno;
            rc = -soerr;
        }
        if (rc == 0) {
            /* A request goes out in one sendmsg; do not let Nagle hold
             * back its tail waiting for a delayed ACK. */
            const int one = 1;
            (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            *fd_out = fd;
            break;
        }
        close(fd);
        if (rc == -ETIMEDOUT || rc == -EINTR)
            break;   /* the deadline is shared: no time left for the others */
    }
    freeaddrinfo(res);
    return rc;
}
