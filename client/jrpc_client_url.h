/* jrpc_client_url — the parts of an http:// or https:// URL that
 * libjrpc-client's HTTP transport needs (internal, not installed).
 *
 * Pure code: no socket, no name resolution. */
#ifndef JRPC_CLIENT_URL_H
#define JRPC_CLIENT_URL_H

#include <stdbool.h>

typedef struct jrpc_client_url {
    bool  tls;        /* https:// */
    char *host;       /* without the [] of an IPv6 literal */
    char *port;       /* digits; "80" (http) or "443" (https) when the URL has none */
    char *authority;  /* HOST[:PORT] as written in the URL: the Host header */
    char *path;       /* request target, "/rpc" when the URL has none */
    char *where;      /* SCHEME://AUTHORITY/PATH, for messages */
    char *peer;       /* HOST:PORT, the port always said ([HOST]:PORT for IPv6): TLS messages */
} jrpc_client_url_t;

/* Parses http://HOST[:PORT][/PATH] or https://HOST[:PORT][/PATH], HOST a
 * name, an IPv4 address or [IPV6]; PORT 1..65535; no user info, no
 * fragment, no spaces or control characters anywhere.
 *
 * Returns 0 with every field of *u set (malloc'd: jrpc_client_url_dispose),
 * -EINVAL for anything else (nothing to dispose then, but disposing is
 * harmless), or -ENOMEM. */
int jrpc_client_url_parse(const char *url, jrpc_client_url_t *u);

/* Frees the fields of u and zeroes it. NULL-safe, idempotent. */
void jrpc_client_url_dispose(jrpc_client_url_t *u);

#endif
