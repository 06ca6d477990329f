/* jrpc_dns — dns+tcp:// URLs, getaddrinfo() answers as endpoint sets, and
 * the difference of two sets. Pure: see jrpc_dns.h. */
#include "jrpc_dns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>

bool jrpc_dns_is_name(const char *endpoint)
{
    return strncmp(endpoint, "dns+", 4) == 0;
}

static bool host_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '_';
}

int jrpc_dns_parse(const char *url, jrpc_dns_name_t *out)
{
    size_t skip = strlen(JRPC_DNS_SCHEME);
    if (strncmp(url, JRPC_DNS_SCHEME, skip) != 0)
        return -EINVAL;
    const char *host = url + skip;
    const char *colon = strrchr(host, ':');
    if (colon == NULL)
        return -EINVAL;
    size_t n = (size_t)(colon - host);
    if (n == 0 || n > JRPC_DNS_NAME_MAX)
        return -EINVAL;
    /* Labels of 1..63 name characters separated by single dots; one
     * trailing dot (a fully qualified name) is allowed. */
    size_t label = 0;
    for (size_t i = 0; i < n; i++) {
        if (host[i] == '.') {
            if (label == 0)
                return -EINVAL;
            label = 0;
        } else if (host_char(host[i]) && ++label <= 63) {
            continue;
        } else {
            return -EINVAL;
        }
    }
    const char *p = colon + 1;
    if (*p < '1' || *p > '9')
        return -EINVAL;
    unsigned long port = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9' || (port = port * 10 + (unsigned long)(*p - '0')) > 65535)
            return -EINVAL;
    }
    memcpy(out->host, host, n);
    out->host[n] = '\0';
    out->port = (uint16_t)port;
    return 0;
}

int jrpc_dns_endpoint(const struct addrinfo *ai, uint16_t port, char out[JRPC_DNS_EP_MAX])
{
    char text[INET6_ADDRSTRLEN];
    if (ai->ai_family == AF_INET && ai->ai_addrlen >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)ai->ai_addr;
        inet_ntop(AF_INET, &sin->sin_addr, text, sizeof text);
        snprintf(out, JRPC_DNS_EP_MAX, "tcp://%s:%u", text, port);
        return 0;
    }
    if (ai->ai_family == AF_INET6 && ai->ai_addrlen >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)ai->ai_addr;
        inet_ntop(AF_INET6, &sin6->sin6_addr, text, sizeof text);
        snprintf(out, JRPC_DNS_EP_MAX, "tcp://[%s]:%u", text, port);
        return 0;
    }
    return -EAFNOSUPPORT;
}

size_t jrpc_dns_endpoints(const struct addrinfo *ai, uint16_t port,
                          char (*out)[JRPC_DNS_EP_MAX], size_t max, bool *truncated)
{
    size_t n = 0;
    bool cut = false;
    char ep[JRPC_DNS_EP_MAX];
    for (; ai != NULL; ai = ai->ai_next) {
        if (ai->ai_addr == NULL || jrpc_dns_endpoint(ai, port, ep) < 0)
            continue;
        /* Insertion into the sorted array; past max the largest falls off. */
        size_t at = 0;
        while (at < n && strcmp(out[at], ep) < 0)
            at++;
        if (at < n && strcmp(out[at], ep) == 0)
            continue;
        if (at == max) {
            cut = true;
            continue;
        }
        if (n == max) {
            cut = true;
            n--;
        }
        memmove(out[at + 1], out[at], (n - at) * sizeof out[0]);
        memcpy(out[at], ep, sizeof ep);
        n++;
    }
    if (truncated != NULL)
        *truncated = cut;
    return n;
}

static bool in_set(const char *const *set, size_t n, const char *ep)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(set[i], ep) == 0)
            return true;
    return false;
}

size_t jrpc_dns_diff(const char *const *old, size_t nold, const char *const *cur, size_t ncur,
                     bool *gone, bool *added)
{
    size_t changes = 0;
    for (size_t i = 0; i < nold; i++)
        if ((gone[i] = !in_set(cur, ncur, old[i])))
            changes++;
    /* Quadratic, on sets of at most JRPC_DNS_ADDRS_MAX: a few thousand
     * comparisons every few seconds. */
    for (size_t j = 0; j < ncur; j++)
        if ((added[j] = !in_set(old, nold, cur[j]) && !in_set(cur, j, cur[j])))
            changes++;
    return changes;
}
