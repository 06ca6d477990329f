/* jrpc_http_response — see jrpc_http_response.h. */
#include "jrpc_http_response.h"

#include <string.h>

const char *jrpc_http_reason(unsigned status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default:  return "";
    }
}

static char *two(char *w, int v)
{
    w[0] = (char)('0' + v / 10 % 10);
    w[1] = (char)('0' + v % 10);
    return w + 2;
}

const char *jrpc_http_date(jrpc_http_date_t *d, time_t now)
{
    if (d->sec == (int64_t)now && d->text[0] != '\0')
        return d->text;
    static const char days[] = "SunMonTueWedThuFriSat";
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    struct tm tm;
    if (gmtime_r(&now, &tm) == NULL || tm.tm_year + 1900 > 9999 || tm.tm_year + 1900 < 0)
        return "Thu, 01 Jan 1970 00:00:00 GMT"; /* not expected */
    char *w = d->text;
    memcpy(w, days + 3 * tm.tm_wday, 3);
    memcpy(w + 3, ", ", 2);
    w = two(w + 5, tm.tm_mday);
    *w++ = ' ';
    memcpy(w, months + 3 * tm.tm_mon, 3);
    w += 3;
    *w++ = ' ';
    w = two(w, (tm.tm_year + 1900) / 100);
    w = two(w, (tm.tm_year + 1900) % 100);
    *w++ = ' ';
    w = two(w, tm.tm_hour);
    *w++ = ':';
    w = two(w, tm.tm_min);
    *w++ = ':';
    w = two(w, tm.tm_sec);
    memcpy(w, " GMT", 5);
    d->sec = (int64_t)now;
    return d->text;
}

int jrpc_http_response_head(char *dst, size_t cap, const jrpc_http_resp_t *r)
{
    char *w = dst, *end = dst + cap;
#define PUT(s, n)                                                                  \
    do {                                                                           \
        size_t n_ = (n);                                                           \
        if ((size_t)(end - w) < n_)                                                \
            return -1;                                                             \
        memcpy(w, (s), n_);                                                        \
        w += n_;                                                                   \
    } while (0)
#define LIT(s) PUT(s, sizeof(s) - 1)
    unsigned s = r->status;
    if (s == 200) {
        LIT("HTTP/1.1 200 OK\r\n");
    } else {
        const char *reason = jrpc_http_reason(s);
        char line[16] = "HTTP/1.1 000 ";
        line[9] = (char)('0' + s / 100 % 10);
        line[10] = (char)('0' + s / 10 % 10);
        line[11] = (char)('0' + s % 10);
        PUT(line, 13);
        PUT(reason, strlen(reason));
        LIT("\r\n");
    }
    if (r->date != NULL) {
        LIT("Date: ");
        PUT(r->date, strlen(r->date));
        LIT("\r\n");
    }
    if (s >= 200 && s != 204 && s != 304) {
        if (r->content_type != NULL) {
            LIT("Content-Type: ");
            PUT(r->content_type, strlen(r->content_type));
            LIT("\r\n");
        }
        char digits[24], *d = digits + sizeof digits;
        uint64_t v = r->content_length;
        do {
            *--d = (char)('0' + v % 10);
            v /= 10;
        } while (v != 0);
        LIT("Content-Length: ");
        PUT(d, (size_t)(digits + sizeof digits - d));
        LIT("\r\n");
    }
    if (r->connection == JRPC_HTTP_CONN_CLOSE)
        LIT("Connection: close\r\n");
    else if (r->connection == JRPC_HTTP_CONN_KEEP_ALIVE)
        LIT("Connection: keep-alive\r\n");
    if (r->extra != NULL)
        PUT(r->extra, strlen(r->extra));
    LIT("\r\n");
#undef LIT
#undef PUT
    return (int)(w - dst);
}
