/* jrpc_proxy — who the client is behind a trusted reverse proxy
 * (docs/SIGNING.md "Behind a proxy", --trusted-proxy).
 *
 * Addresses and CIDR ranges (IPv4 and IPv6; an IPv4-mapped IPv6 address is
 * its IPv4 address), and the client picked from a request's Forwarded
 * (RFC 7239, its for= parameters) and X-Forwarded-For values: the
 * right-most address of the chain that is not itself a trusted proxy (the
 * entries to its left were written by the client, and may be anything).
 * The caller asks only for a request whose TCP peer is trusted: from any
 * other peer these headers mean nothing.
 *
 * Pure code: bytes in, addresses out; no allocation, no I/O. */
#ifndef JRPC_PROXY_H
#define JRPC_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "jrpc_http_reader.h"

typedef struct jrpc_proxy_addr {
    uint8_t family;   /* 4 or 6 */
    uint8_t a[16];    /* network order; IPv4 in a[0..4), the rest 0 */
} jrpc_proxy_addr_t;

typedef struct jrpc_proxy_cidr {
    jrpc_proxy_addr_t net;   /* host bits cleared */
    uint8_t           bits;  /* prefix length: 0..32 (IPv4) or 0..128 (IPv6) */
} jrpc_proxy_cidr_t;

/* Longest text of an address (jrpc_proxy_addr_format), with its NUL. */
#define JRPC_PROXY_ADDR_TEXT 46

/* Parses a bare address s[0, n): "192.0.2.1", "2001:db8::1",
 * "::ffff:192.0.2.1" (taken as 192.0.2.1). No port, no brackets, no zone.
 * Returns 0, or -EINVAL. */
int jrpc_proxy_addr_parse(const char *s, size_t n, jrpc_proxy_addr_t *out);

/* Writes a's text ("192.0.2.1", "2001:db8::1") NUL-terminated into out.
 * Returns its length, or -ENOSPC (size < JRPC_PROXY_ADDR_TEXT may not do). */
int jrpc_proxy_addr_format(const jrpc_proxy_addr_t *a, char *out, size_t size);

/* Parses a CIDR range s[0, n): ADDRESS/BITS (BITS decimal, at most 32 for
 * IPv4, 128 for IPv6, no leading zeros), or an address alone (one host).
 * Host bits set below the prefix are cleared (10.1.2.3/8 is 10.0.0.0/8).
 * Returns 0, or -EINVAL. */
int jrpc_proxy_cidr_parse(const char *s, size_t n, jrpc_proxy_cidr_t *out);

/* Whether a is in any of the n ranges of list (an IPv4 address never
 * matches an IPv6 range, nor the reverse; ::ffff:a.b.c.d is IPv4). */
bool jrpc_proxy_trusted(const jrpc_proxy_cidr_t *list, size_t n, const jrpc_proxy_addr_t *a);

/* The client of a request whose TCP peer is a trusted proxy (one of the
 * ntrusted ranges of trusted), from its Forwarded and X-Forwarded-For
 * values as the reader kept them (p NULL: absent; several lines joined
 * with ", "). Each chain is read from the right: trusted proxies are
 * skipped, the first address that is not one is the client; a chain of
 * trusted proxies only gives its left-most address. With both headers,
 * both must name the same client (else one of them came from the client).
 *
 * Returns 1 with *out set; 0 when neither header is there (the peer is
 * the client); -EINVAL when a header is malformed or cut, or the entry
 * picked is no address ("unknown", an obfuscated node), or the two
 * disagree — then *why says which (a constant, for the log) and the
 * caller takes the peer itself. */
int jrpc_proxy_client(const jrpc_proxy_cidr_t *trusted, size_t ntrusted,
                      jrpc_http_value_t forwarded, jrpc_http_value_t xff,
                      jrpc_proxy_addr_t *out, const char **why);

#endif
