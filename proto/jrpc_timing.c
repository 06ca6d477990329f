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

/* ", name;dur=" of each phase, padded: copied 16 bytes at a time (the tail
 * is overwritten by what follows; the first phase skips the ", "), its
 * length in n. */
static const struct {
    char    s[16];
    uint8_t n;
} prefix[JRPC_TIMING_PHASES] = {
    { ", parse;dur=", 12 },  { ", auth;dur=", 11 },    { ", redis;dur=", 12 },
    { ", queue;dur=", 12 },  { ", worker;dur=", 13 },  { ", gather;dur=", 13 },
    { ", total;dur=", 12 },
};

#define MAX_US 1000000000000000ull   /* 10^9 ms: 13 digits before the point */

/* Two digits at a time (the fraction's last two; http/'s heads use it too). */
const char jrpc_timing_pairs[201] = "0001020304050607080910111213141516171819"
                                    "2021222324252627282930313233343536373839"
                                    "4041424344454647484950515253545556575859"
                                    "6061626364656667686970717273747576777879"
                                    "8081828384858687888990919293949596979899";

/* us (10 ms and more) as milliseconds with three decimals at p ("200.417"),
 * written backwards once its length is known: no copy. Returns the end. */
static __attribute__((noinline)) char *put_ms_long(char *p, uint64_t us)
{
    uint64_t ms = us / 1000;
    uint32_t f = (uint32_t)(us - ms * 1000), h = f / 100;
    size_t n = 1;
    for (uint64_t v = ms; v >= 10; v /= 10)
        n++;
    char *e = p + n + 4;
    e[-4] = '.';
    e[-3] = (char)('0' + h);
    memcpy(e - 2, jrpc_timing_pairs + 2 * (f - h * 100), 2);
    char *q = p + n;
    do {
        *--q = (char)('0' + ms % 10);
        ms /= 10;
    } while (ms);
    return e;
}

/* ns as milliseconds with three decimals at p, rounded to the µs ("0.012",
 * "200.417"); returns the end. It is on every answer's path, a few times:
 * under 9.9995 ms (nearly every phase of a fast call) the µs fit 32 bits
 * and are written as two pairs of digits, "m" "h" then "tu" (one division
 * by 100 besides the one to µs, both multiplications); beyond, put_ms_long. */
static inline char *put_ms(char *p, uint64_t ns)
{
    if (ns < 9999500) {
        uint32_t us = ((uint32_t)ns + 500) / 1000, hi = us / 100, lo = us - hi * 100;
        p[0] = jrpc_timing_pairs[2 * hi];
        p[1] = '.';
        p[2] = jrpc_timing_pairs[2 * hi + 1];
        memcpy(p + 3, jrpc_timing_pairs + 2 * lo, 2);
        return p + 5;
    }
    return put_ms_long(p, ns >= MAX_US * 1000 ? MAX_US : (ns + 500) / 1000);
}

size_t jrpc_timing_format(const jrpc_timing_t *t, char *out)
{
    /* 7 phases x (13 prefix + 13 digits + "." + 3) = 210 < 256, the
     * padding of a prefix (3 bytes at most) overwritten by its digits */
    char *p = out;
    uint32_t has = t->has & ((1u << JRPC_TIMING_PHASES) - 1);
    for (size_t skip = 2; has; skip = 0) {
        int i = __builtin_ctz(has);
        has &= has - 1;
        memcpy(p, prefix[i].s + skip, 14);
        p = put_ms(p + prefix[i].n - skip, t->ns[i]);
    }
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
