#include "jrpc_log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

int jrpc_log_level = JRPC_LOG_INFO;
static bool log_json;   /* --log-format json */
static const char *log_proc = "jrpc";
static const char *const level_names[] = { "debug", "info", "warn", "error" };
static jrpc_log_sink_fn log_sink;

void jrpc_log_set_sink(jrpc_log_sink_fn fn)
{
    log_sink = fn;
}

enum { KV_LINE_MAX = 1024, JSON_LINE_MAX = 4096 };

void jrpc_log_init(const char *proc)
{
    log_proc = proc;
}

int jrpc_log_set_level(const char *name)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, level_names[i]) == 0) {
            jrpc_log_level = i;
            return 0;
        }
    }
    return -EINVAL;
}

int jrpc_log_set_format(const char *name)
{
    if (strcmp(name, "kv") != 0 && strcmp(name, "json") != 0)
        return -EINVAL;
    log_json = strcmp(name, "json") == 0;
    return 0;
}

/* ---- key=value to JSON ---- */

/* A bounded output buffer; a write that does not fit fails whole. */
typedef struct jout {
    char  *p;
    size_t cap;   /* bytes usable */
    size_t len;
} jout_t;

static bool put(jout_t *o, const char *s, size_t n)
{
    if (o->len + n > o->cap)
        return false;
    memcpy(o->p + o->len, s, n);
    o->len += n;
    return true;
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t need;
    unsigned min;
    unsigned cp;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        need = 2, min = 0x80, cp = s[0] & 0x1f;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        need = 3, min = 0x800, cp = s[0] & 0x0f;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        need = 4, min = 0x10000, cp = s[0] & 0x07;
    else
        return 0;
    if (need > n)
        return 0;
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return need;
}

/* Appends s[0..n) as a JSON string (quotes included). Invalid UTF-8 bytes
 * become U+FFFD, control characters \uXXXX escapes. */
static bool put_str(jout_t *o, const char *s, size_t n)
{
    if (!put(o, "\"", 1))
        return false;
    for (size_t i = 0; i < n;) {
        unsigned char ch = (unsigned char)s[i];
        char esc[8];
        bool ok;
        if (ch == '"' || ch == '\\') {
            esc[0] = '\\', esc[1] = (char)ch;
            ok = put(o, esc, 2);
        } else if (ch == '\n' || ch == '\r' || ch == '\t') {
            esc[0] = '\\', esc[1] = ch == '\n' ? 'n' : ch == '\r' ? 'r' : 't';
            ok = put(o, esc, 2);
        } else if (ch < 0x20 || ch == 0x7f) {
            snprintf(esc, sizeof esc, "\\u%04x", ch);
            ok = put(o, esc, 6);
        } else if (ch < 0x80) {
            ok = put(o, s + i, 1);
        } else {
            size_t k = utf8_len((const unsigned char *)s + i, n - i);
            if (k == 0) {
                ok = put(o, "\\ufffd", 6);
                k = 1;
            } else {
                ok = put(o, s + i, k);
            }
            i += k;
            if (!ok)
                return false;
            continue;
        }
        if (!ok)
            return false;
        i++;
    }
    return put(o, "\"", 1);
}

/* Appends ,"key":"value" whole, or nothing (returns false) when it does not fit. */
static bool put_field(jout_t *o, const char *k, size_t kn, const char *v, size_t vn)
{
    size_t mark = o->len;
    if (put(o, ",", 1) && put_str(o, k, kn) && put(o, ":", 1) && put_str(o, v, vn))
        return true;
    o->len = mark;
    return false;
}

/* Turns one message "k1=v1 k2=\"v 2\" word ..." into a JSON object line:
 * {"ts":..,"level":..,"proc":..,"comp":..,"k1":"v1","k2":"v 2",...,"msg":"word ..."}
 * Every value is a string. A quoted value ends at a '"' followed by a blank
 * or the end; inside it \" and \\ stand for " and \. Words without '=' are
 * joined into "msg". When not everything fits in cap bytes (or the message
 * was already cut, truncated), whole fields are dropped from the end and
 * "truncated":true is added. Always a complete object and '\n'; returns its
 * length. cap must be at least 256. */
static size_t kv_to_json(char *out, size_t cap, const char *ts, const char *level,
                         const char *comp, const char *msg, bool truncated)
{
    static const char tail[] = ",\"truncated\":true}\n";
    jout_t o = { .p = out, .cap = cap - (sizeof tail - 1), .len = 0 };
    char val[KV_LINE_MAX], words[KV_LINE_MAX];
    size_t nwords = 0;
    put(&o, "{\"ts\":", 6);
    put_str(&o, ts, strlen(ts));
    put_field(&o, "level", 5, level, strlen(level));
    put_field(&o, "proc", 4, log_proc, strlen(log_proc));
    truncated |= !put_field(&o, "comp", 4, comp, strlen(comp));
    const char *p = msg;
    while (*p) {
        while (*p == ' ')
            p++;
        if (*p == '\0')
            break;
        const char *key = p;
        while (*p && *p != ' ' && *p != '=')
            p++;
        if (*p != '=' || p == key) {   /* a word: up to the next blank */
            while (*p && *p != ' ')
                p++;
            size_t n = (size_t)(p - key);
            if (nwords + n + 1 < sizeof words) {
                if (nwords)
                    words[nwords++] = ' ';
                memcpy(words + nwords, key, n);
                nwords += n;
            }
            continue;
        }
        size_t kn = (size_t)(p - key), vn = 0;
        p++;
        if (*p == '"') {
            p++;
            while (*p && !(*p == '"' && (p[1] == ' ' || p[1] == '\0')) && vn < sizeof val) {
                if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
                    p++;
                val[vn++] = *p++;
            }
            if (*p == '"')
                p++;
            else
                truncated = true;   /* no closing quote: the line was cut */
        } else {
            while (*p && *p != ' ' && vn < sizeof val)
                val[vn++] = *p++;
        }
        if (!put_field(&o, key, kn, val, vn)) {
            truncated = true;
            break;
        }
    }
    if (nwords && !put_field(&o, "msg", 3, words, nwords))
        truncated = true;
    o.cap = cap;
    if (truncated)
        put(&o, tail, sizeof tail - 1);
    else
        put(&o, "}\n", 2);
    return o.len;
}

void jrpc_log_write(int level, const char *comp, const char *fmt, ...)
{
    char line[KV_LINE_MAX];
    char ts[64];
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             (int)(tv.tv_usec / 1000));
    const char *lname = level_names[level < 0 ? 0 : level > 3 ? 3 : level];
    int n = log_json ? 0 : snprintf(line, sizeof line, "ts=%s level=%s proc=%s comp=%s ", ts,
                                    lname, log_proc, comp);
    if (n < 0 || (size_t)n >= sizeof line)
        return;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        return;
    bool cut = (size_t)m >= sizeof line - (size_t)n - 1;
    size_t len = (size_t)n + (cut ? sizeof line - (size_t)n - 2 : (size_t)m);
    char json[JSON_LINE_MAX];
    const char *out = line;
    if (log_json) {
        line[len] = '\0';
        len = kv_to_json(json, sizeof json, ts, lname, comp, line, cut);
        out = json;
    } else {
        line[len++] = '\n';
    }
    if (log_sink) {   /* jrpc_logbuf: buffered, whole lines per write */
        log_sink(level, out, len);
        return;
    }
    /* One write per line so that lines of concurrent processes do not mix. */
    fwrite(out, 1, len, stderr);
    fflush(stderr);
}
