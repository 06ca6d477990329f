/* jrpc_trace — the W3C Trace Context `traceparent` value (level 1).
 *
 *   version "-" trace-id "-" parent-id "-" trace-flags
 *   00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
 *
 * Pure: no allocation, no I/O. A value that fails the check is treated as
 * absent by every caller (never an error to the client). */
#ifndef JRPC_TRACE_H
#define JRPC_TRACE_H

#include <stdbool.h>
#include <stddef.h>

/* Length of a version-00 traceparent. */
#define JRPC_TRACEPARENT_LEN 55
/* Longest value we carry (a later version may append fields); longer ones
 * are refused as invalid. A bound of our own: the spec sets none. */
#define JRPC_TRACEPARENT_MAX 128

/* True when s[0..n) is a traceparent we accept:
 *  - version: 2 lower-case hex digits, not "ff";
 *  - trace-id: 32 lower-case hex digits, not all zero;
 *  - parent-id: 16 lower-case hex digits, not all zero;
 *  - trace-flags: 2 lower-case hex digits;
 *  - separated by single '-';
 *  - version 00: exactly 55 characters;
 *  - a later version (01..fe): at least 55 characters, the 55 above, then
 *    either the end or '-' followed by whatever that version defines
 *    (W3C trace-context, "Versioning of traceparent"); at most
 *    JRPC_TRACEPARENT_MAX characters, all printable ASCII.
 * s need not be NUL-terminated; n == 0 is false. */
bool jrpc_traceparent_valid(const char *s, size_t n);

/* True when the sampled bit (trace-flags & 01) of a valid traceparent is set. */
bool jrpc_traceparent_sampled(const char *s, size_t n);

#endif
