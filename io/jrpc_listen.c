/* jrpc_listen — see jrpc_listen.h. */
#include "jrpc_listen.h"

#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "jrpc_log.h"

/* Splits "HOST:PORT" or "[V6]:PORT" and resolves it. */
static int resolve(const char *listen, struct sockaddr_storage *ss)
{
    char host[256];
    const char *port;
    if (listen[0] == '[') {
        const char *end = strchr(listen, ']');
        if (end == NULL || end[1] != ':' || (size_t)(end - listen - 1) >= sizeof host)
            return -EINVAL;
        memcpy(host, listen + 1, (size_t)(end - listen - 1));
        host[end - listen - 1] = '\0';
        port = end + 2;
    } else {
        const char *colon = strrchr(listen, ':');
        if (colon == NULL || colon == listen || (size_t)(colon - listen) >= sizeof host ||
            memchr(listen, ':', (size_t)(colon - listen)) != NULL)
            return -EINVAL;
        memcpy(host, listen, (size_t)(colon - listen));
        host[colon - listen] = '\0';
        port = colon + 1;
    }
    char *end;
    unsigned long pn = strtoul(port, &end, 10);
    if (*port == '\0' || *end != '\0' || pn > 65535)
        return -EINVAL;
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
    struct addrinfo *ai = NULL;
    if (getaddrinfo(host, port, &hints, &ai) != 0 || ai == NULL)
        return -ENOENT;
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    return 0;
}

int jrpc_listen_socket(const char *addr, const char *comp, const char *scheme, bool reuseport)
{
    struct sockaddr_storage ss;
    int rc = resolve(addr, &ss);
    if (rc < 0) {
        JRPC_LOG(JRPC_LOG_ERROR, comp, "event=bind_failed endpoint=%s error=\"%s\"", addr,
                 rc == -EINVAL ? "not HOST:PORT" : "cannot resolve host");
        return rc;
    }
    int one = 1;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0) ||
        bind(fd, (struct sockaddr *)&ss,
             ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in)) < 0 ||
        listen(fd, 1024) < 0) {
        rc = -errno;
        JRPC_LOG(JRPC_LOG_ERROR, comp, "event=bind_failed endpoint=%s://%s error=\"%s\"", scheme,
                 addr, strerror(errno));
        if (fd >= 0)
            close(fd);
        return rc;
    }
    return fd;
}

static void on_refused_closed(uv_handle_t *h)
{
    free(h);
}

void jrpc_listen_refuse(uv_stream_t *server)
{
    uv_tcp_t *t = malloc(sizeof *t);
    if (t == NULL || uv_tcp_init(server->loop, t) < 0) {
        free(t);
        return;
    }
    uv_accept(server, (uv_stream_t *)t);
    uv_close((uv_handle_t *)t, on_refused_closed);
}

void jrpc_listen_log(const uv_tcp_t *h, const char *comp, const char *scheme)
{
    struct sockaddr_storage bound;
    int blen = sizeof bound;
    char ip[INET6_ADDRSTRLEN] = "?";
    memset(&bound, 0, sizeof bound);
    uv_tcp_getsockname(h, (struct sockaddr *)&bound, &blen);
    if (bound.ss_family == AF_INET6) {
        uv_ip6_name((struct sockaddr_in6 *)&bound, ip, sizeof ip);
        JRPC_LOG(JRPC_LOG_INFO, comp, "event=listening endpoint=%s://[%s]:%d", scheme, ip,
                 ntohs(((struct sockaddr_in6 *)&bound)->sin6_port));
    } else {
        uv_ip4_name((struct sockaddr_in *)&bound, ip, sizeof ip);
        JRPC_LOG(JRPC_LOG_INFO, comp, "event=listening endpoint=%s://%s:%d", scheme, ip,
                 ntohs(((struct sockaddr_in *)&bound)->sin_port));
    }
}
