/* jrpc_errors — the one table of JSON-RPC error codes and their messages.
 *
 * JSON-RPC error objects are data; C functions return 0 or a negative errno.
 * Conversion between the two happens here and in jrpc_batch only. */
#ifndef JRPC_ERRORS_H
#define JRPC_ERRORS_H

enum jrpc_code {
    JRPC_PARSE_ERROR      = -32700, /* invalid JSON */
    JRPC_INVALID_REQUEST  = -32600, /* not a valid Request object */
    JRPC_METHOD_NOT_FOUND = -32601, /* no connected worker serves it */
    JRPC_INVALID_PARAMS   = -32602, /* the worker refused the params */
    JRPC_INTERNAL_ERROR   = -32603, /* broker or worker fault */
    JRPC_SERVER_BUSY      = -32000, /* queue full: try again later */
    JRPC_VALIDATION_FAILED= -32001, /* admission check failed */
    JRPC_UNAUTHORIZED     = -32002, /* signature, key or ACL */
    JRPC_TIMEOUT          = -32003, /* deadline passed before an answer */
    JRPC_WORKER_FAILED    = -32004, /* the worker was lost or failed */
    JRPC_REPLAYED         = -32005, /* the nonce of a signed body was seen before */
    JRPC_REPLAY_DOWN      = -32006, /* replay protection (Redis) unavailable: fail closed */
};

/* The standard message for a code ("Parse error", ...). Never NULL:
 * unknown codes give "Server error". */
const char *jrpc_error_message(int code);

#include <stddef.h>

/* Formats a message into err[0..errlen) (nothing when err is NULL or
 * errlen is 0): how functions that fail at start-up say why. */
void jrpc_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
