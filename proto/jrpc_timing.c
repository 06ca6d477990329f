/* jrpc_timing — see jrpc_timing.h. */
#include "jrpc_timing.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

static const char *const names[JRPC_TIMING_PHASES] = {
    "parse", "auth", "redis", "queue", "worker", "gather", "total",
};

const char *jrpc_timing_name(int phase)
{
    return phase >= 0 && phase < JRPC_TIMING_PHASES ? names[phase] : "";
}

/* Writes v's decimal digits at p; returns the end. */
static char *put_u64(char *p, uint64_t v)
{
    char tmp[24];
    int k = 0;
    do {
        tmp[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (k)
        *p++ = tmp[--k];
    return p;
}

size_t jrpc_timing_format(const jrpc_timing_t *t, char *out)
{
    char *p = out;
    for (int i = 0; i < JRPC_TIMING_PHASES; i++) {
        if (!(t->has & (1u << i)))
            continue;
        uint64_t us = (t->ns[i] + 500) / 1000;
        if (t->ns[i] > UINT64_MAX - 500 || us > 1000000000000000ull)
            us = 1000000000000000ull;   /* 10^9 ms: 16 digits at most */
        if (p != out) {
            *p++ = ',';
            *p++ = ' ';
        }
        size_t nl = strlen(names[i]);
        memcpy(p, names[i], nl);
        p += nl;
        memcpy(p, ";dur=", 5);
        p += 5;
        p = put_u64(p, us / 1000);
        *p++ = '.';
        unsigned frac = (unsigned)(us % 1000);
        *p++ = (char)('0' + frac / 100);
        *p++ = (char)('0' + frac / 10 % 10);
        *p++ = (char)('0' + frac % 10);
    }
    /* 7 phases x (", " + 6 name + ";dur=" + 13 digits + "." + 3) < 256 */
    *p = '\0';
    return (size_t)(p - out);
}

/* RFC 9110 tchar. */
static bool is_tchar(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

static size_t skip_ows(const char *s, size_t i, size_t n)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    return i;
}

/* A token from s[i]; returns its end (i when none). */
static size_t token_end(const char *s, size_t i, size_t n)
{
    while (i < n && is_tchar(s[i]))
        i++;
    return i;
}

/* A quoted-string starting at s[i] == '"'; returns its end past the closing
 * quote, or 0 when it is not closed. */
static size_t quoted_end(const char *s, size_t i, size_t n)
{
    for (i++; i < n; i++) {
        if (s[i] == '\\') {
            if (++i >= n)
                return 0;
        } else if (s[i] == '"') {
            return i + 1;
        }
    }
    return 0;
}

/* A duration in ms, "12", "12.345", "0.5": ns, or -1 when it is not one. */
static int64_t dur_ns(const char *s, size_t n)
{
    uint64_t ms = 0, frac = 0, scale = 1000000;   /* ns per unit of the next digit */
    size_t i = 0;
    if (n == 0)
        return -1;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
        if (ms > 1000000000000ull)   /* > 10^12 ms: 31 years is enough */
            return -1;
        ms = ms * 10 + (uint64_t)(s[i] - '0');
    }
    if (i == 0)
        return -1;
    if (i < n && s[i] == '.') {
        if (++i == n)
            return -1;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
            scale /= 10;
            frac += (uint64_t)(s[i] - '0') * scale;
        }
    }
    return i == n ? (int64_t)(ms * 1000000 + frac) : -1;
}

int jrpc_timing_parse(const char *s, size_t n, jrpc_timing_t *t)
{
    int found = 0;
    size_t i = skip_ows(s, 0, n);
    memset(t, 0, sizeof *t);
    while (i < n) {
        if (s[i] == ',') {   /* an empty list element */
            i = skip_ows(s, i + 1, n);
            continue;
        }
        size_t ne = token_end(s, i, n);
        if (ne == i)
            return -EINVAL;
        int phase = -1;
        for (int k = 0; k < JRPC_TIMING_PHASES; k++)
            if (strlen(names[k]) == ne - i && memcmp(names[k], s + i, ne - i) == 0)
                phase = k;
        i = skip_ows(s, ne, n);
        while (i < n && s[i] == ';') {
            i = skip_ows(s, i + 1, n);
            size_t pe = token_end(s, i, n);
            if (pe == i)
                return -EINVAL;
            bool is_dur = pe - i == 3 && strncmp(s + i, "dur", 3) == 0;
            i = skip_ows(s, pe, n);
            if (i >= n || s[i] != '=') {   /* a parameter without a value */
                continue;
            }
            i = skip_ows(s, i + 1, n);
            size_t ve;
            const char *v = s + i;
            size_t vn;
            if (i < n && s[i] == '"') {
                ve = quoted_end(s, i, n);
                if (ve == 0)
                    return -EINVAL;
                v = s + i + 1;
                vn = ve - i - 2;
            } else {
                ve = token_end(s, i, n);
                if (ve == i)
                    return -EINVAL;
                vn = ve - i;
            }
            if (is_dur && phase >= 0 && !(t->has & (1u << phase))) {
                int64_t ns = dur_ns(v, vn);
                if (ns >= 0) {
                    t->ns[phase] = (uint64_t)ns;
                    t->has |= 1u << phase;
                    found++;
                }
            }
            i = skip_ows(s, ve, n);
        }
        if (i < n && s[i] != ',')
            return -EINVAL;
        if (i < n)
            i = skip_ows(s, i + 1, n);
    }
    return found;
}
