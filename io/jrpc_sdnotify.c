#include "jrpc_sdnotify.h"
#include "jrpc_log.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int jrpc_sdnotify(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (path == NULL || *path == '\0')
        return 0;
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    size_t n = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || n >= sizeof sa.sun_path)
        return -EINVAL;
    memcpy(sa.sun_path, path, n);
    if (path[0] == '@')
        sa.sun_path[0] = '\0';   /* abstract namespace: no terminating NUL counted */
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (path[0] == '/'));
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    int rc = 1;
    if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, len) < 0)
        rc = -errno;
    close(fd);
    return rc;
}

void jrpc_sdnotify_log(const char *state)
{
    int rc = jrpc_sdnotify(state);
    if (rc < 0)
        JRPC_LOG(JRPC_LOG_WARN, "main", "event=sd_notify_failed error=\"%s\"", strerror(-rc));
    else if (rc > 0)
        JRPC_LOG(JRPC_LOG_DEBUG, "main", "event=sd_notify state=%.*s", (int)strcspn(state, "\n"),
                 state);
}
