/* jrpc_http_response — see jrpc_http_response.h. */
#include "jrpc_http_response.h"

#include <assert.h>
#include <string.h>

#include "jrpc_timing.h"

const char *jrpc_http_reason(unsigned status)
{
    switch (status) {
    case 100: return "Continue";
    case 101: return "Switching Protocols";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 426: return "Upgrade Required";
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

/* The status line of a status, and its length. */
static const char *status_line(unsigned s, size_t *n, char *tmp)
{
    if (s == 200) {
        *n = sizeof "HTTP/1.1 200 OK\r\n" - 1;
        return "HTTP/1.1 200 OK\r\n";
    }
    const char *reason = jrpc_http_reason(s);
    size_t rl = strlen(reason);
    memcpy(tmp, "HTTP/1.1 000 ", 13);
    tmp[9] = (char)('0' + s / 100 % 10);
    tmp[10] = (char)('0' + s / 10 % 10);
    tmp[11] = (char)('0' + s % 10);
    memcpy(tmp + 13, reason, rl); /* the longest reason is 31 bytes */
    memcpy(tmp + 13 + rl, "\r\n", 2);
    *n = 13 + rl + 2;
    return tmp;
}

int jrpc_http_response_head(char *dst, size_t cap, const jrpc_http_resp_t *r)
{
    /* Lengths first, one bound check, then plain copies. */
    char line[64], digits[24];
    unsigned s = r->status;
    size_t ln, dl = r->date ? strlen(r->date) : 0, tl = 0, nd = 0;
    const char *sl = status_line(s, &ln, line);
    bool framed = s >= 200 && s != 204 && s != 304;
    char *d = digits + sizeof digits;
    if (framed) {
        tl = r->content_type ? strlen(r->content_type) : 0;
        uint64_t v = r->content_length;
        do {
            *--d = (char)('0' + v % 10);
            v /= 10;
        } while (v != 0);
        nd = (size_t)(digits + sizeof digits - d);
    }
    static const char conn_close[] = "Connection: close\r\n";
    static const char conn_ka[] = "Connection: keep-alive\r\n";
    const char *conn = NULL;
    size_t cl = 0;
    if (r->connection == JRPC_HTTP_CONN_CLOSE) {
        conn = conn_close;
        cl = sizeof conn_close - 1;
    } else if (r->connection == JRPC_HTTP_CONN_KEEP_ALIVE) {
        conn = conn_ka;
        cl = sizeof conn_ka - 1;
    }
    size_t xl = r->extra ? strlen(r->extra) : 0;
    static const char te_chunked[] = "Transfer-Encoding: chunked\r\n";
    size_t total = ln + (r->date ? 8 + dl : 0) +
                   (framed ? (r->content_type ? 16 + tl : 0) +
                             (r->chunked ? sizeof te_chunked - 1 : 18 + nd) : 0) +
                   cl + xl + 2;
    if (total > cap)
        return -1;
    char *w = dst;
#define PUT(p, n) (memcpy(w, (p), (n)), w += (n))
#define LIT(s) PUT(s, sizeof(s) - 1)
    PUT(sl, ln);
    if (r->date) {
        LIT("Date: ");
        PUT(r->date, dl);
        LIT("\r\n");
    }
    if (framed) {
        if (r->content_type) {
            LIT("Content-Type: ");
            PUT(r->content_type, tl);
            LIT("\r\n");
        }
        if (r->chunked) {
            PUT(te_chunked, sizeof te_chunked - 1);
        } else {
            LIT("Content-Length: ");
            PUT(d, nd);
            LIT("\r\n");
        }
    }
    if (cl)
        PUT(conn, cl);
    if (xl)
        PUT(r->extra, xl);
    LIT("\r\n");
#undef LIT
#undef PUT
    return (int)(w - dst);
}

_Static_assert(sizeof "HTTP/1.1 200 OK\r\nDate: \r\nContent-Type: \r\nContent-Length: " - 1 +
                   JRPC_HTTP_DATE_LEN + JRPC_HTTP_OK_CTYPE_MAX <= JRPC_HTTP_OK_TEXT,
               "the 200 head's prefix fits the copy");

char *jrpc_http_ok_head(jrpc_http_ok_t *c, time_t now, uint64_t content_length, char *dst)
{
    if (c->date.sec != (int64_t)now || c->len == 0) {
        const char *date = jrpc_http_date(&c->date, now);
        size_t tl = strlen(c->content_type);
        assert(tl <= JRPC_HTTP_OK_CTYPE_MAX);
        char *w = c->text;
#define LIT(s) (memcpy(w, (s), sizeof(s) - 1), w += sizeof(s) - 1)
        LIT("HTTP/1.1 200 OK\r\nDate: ");
        memcpy(w, date, JRPC_HTTP_DATE_LEN);
        w += JRPC_HTTP_DATE_LEN;
        LIT("\r\nContent-Type: ");
        memcpy(w, c->content_type, tl);
        w += tl;
        LIT("\r\nContent-Length: ");
#undef LIT
        c->len = (uint16_t)(w - c->text);
    }
    memcpy(dst, c->text, JRPC_HTTP_OK_TEXT);   /* the padding is overwritten next */
    char *w = dst + c->len;
    uint64_t v = content_length;
    if (v < 100) {
        if (v < 10) {
            *w++ = (char)('0' + v);
        } else {
            memcpy(w, jrpc_timing_pairs + 2 * v, 2);
            w += 2;
        }
    } else if (v < 10000) {
        uint32_t hi = (uint32_t)v / 100, lo = (uint32_t)v - hi * 100;
        if (hi >= 10) {
            memcpy(w, jrpc_timing_pairs + 2 * hi, 2);
            w += 2;
        } else {
            *w++ = (char)('0' + hi);
        }
        memcpy(w, jrpc_timing_pairs + 2 * lo, 2);
        w += 2;
    } else {
        char digits[20], *d = digits + sizeof digits;
        do {
            *--d = (char)('0' + v % 10);
            v /= 10;
        } while (v != 0);
        size_t nd = (size_t)(digits + sizeof digits - d);
        memcpy(w, d, nd);
        w += nd;
    }
    memcpy(w, "\r\n", 2);
    return w + 2;
}
