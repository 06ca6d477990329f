#include "jrpc_errors.h"

#include <errno.h>
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
    case JRPC_RATE_LIMITED:      return "Rate limited";
    case JRPC_IDEM_CONFLICT:     return "Idempotency conflict";
    case JRPC_SESSION_UNKNOWN:   return "Session not found";
    default:                     return "Server error";
    }
}

const char *jrpc_body_class_name(int cls)
{
    static const char *const names[JRPC_BODY_NOUTCOMES] = {
        "ok", "invalid", "busy", "unauthorized", "replayed", "unavailable", "limited",
        "mismatch", "inprogress", "cancelled" };
    return cls >= 0 && cls < JRPC_BODY_NOUTCOMES ? names[cls] : "ok";
}

jrpc_outcome_t jrpc_outcome_refused(int rc)
{
    switch (rc) {
    case -EBUSY:  return (jrpc_outcome_t){ .cls = JRPC_BODY_BUSY, .code = JRPC_SERVER_BUSY };
    case -EACCES: return (jrpc_outcome_t){ .cls = JRPC_BODY_UNAUTHORIZED, .code = JRPC_UNAUTHORIZED };
    case -EEXIST: return (jrpc_outcome_t){ .cls = JRPC_BODY_REPLAYED, .code = JRPC_REPLAYED };
    case -EDQUOT: return (jrpc_outcome_t){ .cls = JRPC_BODY_LIMITED, .code = JRPC_RATE_LIMITED };
    case -EILSEQ: return (jrpc_outcome_t){ .cls = JRPC_BODY_MISMATCH, .code = JRPC_IDEM_CONFLICT };
    case -EINPROGRESS:
        return (jrpc_outcome_t){ .cls = JRPC_BODY_INPROGRESS, .code = JRPC_IDEM_CONFLICT };
    case -EINVAL: return (jrpc_outcome_t){ .cls = JRPC_BODY_INVALID, .code = JRPC_INVALID_REQUEST };
    default:      return (jrpc_outcome_t){ .cls = JRPC_BODY_UNAVAILABLE, .code = JRPC_REPLAY_DOWN };
    }
}

int jrpc_error_code(int rc)
{
    switch (rc) {
    case -ENOENT:    return JRPC_METHOD_NOT_FOUND;
    case -EBUSY:     return JRPC_SERVER_BUSY;
    case -ETIMEDOUT: return JRPC_TIMEOUT;
    case -EACCES:    return JRPC_UNAUTHORIZED;
    default:         return JRPC_INTERNAL_ERROR;
    }
}
