/* jrpc_client_url — see jrpc_client_url.h. */
#include "jrpc_client_url.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define URL_DEFAULT_PATH "/rpc"

int jrpc_client_url_parse(const char *url, jrpc_client_url_t *u)
{
    memset(u, 0, sizeof *u);
    if (strncmp(url, "http://", 7) == 0)
        u->tls = false;
    else if (strncmp(url, "https://", 8) == 0)
        u->tls = true;
    else
        return -EINVAL;
    const char *auth = url + (u->tls ? 8 : 7);
    size_t alen = strcspn(auth, "/");
    const char *aend = auth + alen, *path = aend;
    const char *host = auth, *hend, *port = NULL;

    for (const char *p = auth; *p; p++)
        if ((unsigned char)*p <= 0x20 || *p == 0x7f || *p == '#')
            return -EINVAL;
    if (alen == 0 || memchr(auth, '@', alen))
        return -EINVAL;   /* no user info: there is no authentication to send it to */
    if (auth[0] == '[') {
        host = auth + 1;
        if ((hend = memchr(auth, ']', alen)) == NULL)
            return -EINVAL;
        if (hend + 1 < aend) {
            if (hend[1] != ':')
                return -EINVAL;
            port = hend + 2;
        }
    } else {
        hend = memchr(auth, ':', alen);
        if (hend == NULL)
            hend = aend;
        else
            port = hend + 1;
    }
    if (hend == host)
        return -EINVAL;
    if (port) {
        long v = 0;
        if (port == aend)
            return -EINVAL;
        for (const char *p = port; p < aend; p++) {
            if (*p < '0' || *p > '9' || (v = v * 10 + (*p - '0')) > 65535)
                return -EINVAL;
        }
        if (v == 0)
            return -EINVAL;
    }
    if (*path == '\0')
        path = URL_DEFAULT_PATH;
    bool v6 = auth[0] == '[';
    u->host = strndup(host, (size_t)(hend - host));
    u->port = port ? strndup(port, (size_t)(aend - port)) : strdup(u->tls ? "443" : "80");
    u->authority = strndup(auth, alen);
    u->path = strdup(path);
    if (u->host == NULL || u->port == NULL || u->authority == NULL || u->path == NULL
        || asprintf(&u->where, "%s://%s%s", u->tls ? "https" : "http", u->authority,
                    u->path) < 0) {
        u->where = NULL;
        jrpc_client_url_dispose(u);
        return -ENOMEM;
    }
    if (asprintf(&u->peer, v6 ? "[%s]:%s" : "%s:%s", u->host, u->port) < 0) {
        u->peer = NULL;
        jrpc_client_url_dispose(u);
        return -ENOMEM;
    }
    return 0;
}

void jrpc_client_url_dispose(jrpc_client_url_t *u)
{
    if (u == NULL)
        return;
    free(u->host);
    free(u->port);
    free(u->authority);
    free(u->path);
    free(u->where);
    free(u->peer);
    memset(u, 0, sizeof *u);
}
