/* jrpc_dns — the pure part of finding brokers by name (issue 16).
 *
 * A worker given `dns+tcp://NAME:PORT` resolves NAME (A and AAAA), opens
 * one session per address, and later re-resolves and compares: this module
 * parses the URL, turns a getaddrinfo() answer into a sorted set of ZeroMQ
 * endpoints, and computes the difference between the set in force and a
 * fresh one. No socket, no loop, no resolver call: jrpc_worker.c resolves
 * (uv_getaddrinfo, off the loop thread) and acts on what this says; the
 * client (client/jrpc_client.c) resolves once, when it is made, and takes
 * every address as a broker of its list. */
#ifndef JRPC_DNS_H
#define JRPC_DNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct addrinfo;

#define JRPC_DNS_SCHEME    "dns+tcp://"
#define JRPC_DNS_NAME_MAX  253  /* a DNS name's longest text form (RFC 1035) */
#define JRPC_DNS_EP_MAX    64   /* "tcp://[IPv6]:PORT" and its NUL fit */
#define JRPC_DNS_ADDRS_MAX 64   /* addresses of one name we connect to; more are ignored */

typedef struct jrpc_dns_name {
    char     host[JRPC_DNS_NAME_MAX + 1]; /* NUL-terminated */
    uint16_t port;                        /* 1..65535 */
} jrpc_dns_name_t;

/* Whether endpoint asks for resolution by name (starts with "dns+"), so
 * that the caller sends it to jrpc_dns_parse() and not to ZeroMQ. */
bool jrpc_dns_is_name(const char *endpoint);

/* Parses "dns+tcp://NAME:PORT": NAME is 1..253 bytes of letters, digits,
 * '-', '_' and '.' in labels of 1..63 bytes (a trailing '.' is allowed),
 * PORT is decimal 1..65535 without a sign or leading zero. Returns 0 and
 * fills out, or -EINVAL (out is then unspecified). Never reads past the
 * terminating NUL. */
int jrpc_dns_parse(const char *url, jrpc_dns_name_t *out);

/* Writes the ZeroMQ endpoint of one address of a getaddrinfo() answer:
 * "tcp://A.B.C.D:PORT" or "tcp://[IPv6]:PORT". Returns 0, or -EAFNOSUPPORT
 * for another family. out has JRPC_DNS_EP_MAX bytes. */
int jrpc_dns_endpoint(const struct addrinfo *ai, uint16_t port, char out[JRPC_DNS_EP_MAX]);

/* The endpoints of every IPv4 and IPv6 address in the list ai, sorted and
 * without duplicates, at most max of them (the smallest ones, so that a
 * truncated answer still gives the same set every time). Returns how many
 * were written; *truncated (may be NULL) says whether some were left out. */
size_t jrpc_dns_endpoints(const struct addrinfo *ai, uint16_t port,
                          char (*out)[JRPC_DNS_EP_MAX], size_t max, bool *truncated);

/* The difference between the set in force (old, nold endpoints) and a fresh
 * answer (cur, ncur): gone[i] is set when old[i] is not in cur, added[j]
 * when cur[j] is not in old (a duplicate in cur is added once). Either set
 * may be empty; neither needs to be sorted. Returns the number of changes
 * (gone + added). */
size_t jrpc_dns_diff(const char *const *old, size_t nold, const char *const *cur, size_t ncur,
                     bool *gone, bool *added);

#endif
