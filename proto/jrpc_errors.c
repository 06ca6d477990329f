#include "jrpc_errors.h"

#include <stdarg.h>
#include <stdio.h>

void jrpc_errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

const char *jrpc_error_message(int code)
{
    switch (code) {
    case JRPC_PARSE_ERROR:       return "Parse error";
    case JRPC_INVALID_REQUEST:   return "Invalid Request";
    case JRPC_METHOD_NOT_FOUND:  return "Method not found";
    case JRPC_INVALID_PARAMS:    return "Invalid params";
    case JRPC_INTERNAL_ERROR:    return "Internal error";
    case JRPC_SERVER_BUSY:       return "Server busy";
    case JRPC_VALIDATION_FAILED: return "Validation failed";
    case JRPC_UNAUTHORIZED:      return "Unauthorized";
    case JRPC_TIMEOUT:           return "Request timeout";
    case JRPC_WORKER_FAILED:     return "Worker failed";
    case JRPC_REPLAYED:          return "Replay detected";
    case JRPC_REPLAY_DOWN:       return "Replay protection unavailable";
    default:                     return "Server error";
    }
}
