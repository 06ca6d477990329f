/* jrpc_status_cmd — see jrpc_status_cmd.h. One HTTP/1.1 GET per endpoint
 * (Connection: close, the body read to the end), the JSON checked whole,
 * then read member by member and printed. Strings from the broker are
 * printed as they are in the JSON, escapes kept, so a worker's name cannot
 * put control characters on the terminal. */
#include "jrpc_status_cmd.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "jrpc_buf.h"
#include "jrpc_client_sock.h"
#include "jrpc_client_url.h"
#include "jrpc_json.h"

#define BODY_MAX (16u << 20)   /* the longest answer read */

/* GET url's authority + path into body. Returns 0 (body holds the
 * answer's body), or -1 after saying why on stderr. */
static int http_get(const jrpc_client_url_t *u, const char *where, const char *path, int timeout_ms,
                    jrpc_buf_t *body)
{
    int64_t deadline = jrpc_client_now_ms() + timeout_ms;
    int fd = -1, gai = 0, rc, status = 0;
    jrpc_buf_t raw;
    jrpc_buf_init(&raw);
    if ((rc = jrpc_client_tcp_connect(u->host, u->port, deadline, &fd, &gai)) < 0) {
        fprintf(stderr, "jrpc status: cannot reach the admin listener at %s: %s\n", where,
                rc == -ETIMEDOUT ? "timed out" : gai ? "name not found" : strerror(-rc));
        goto fail;
    }
    char req[1024];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: application/json\r\n"
                     "Connection: close\r\n\r\n", path, u->authority);
    if (n < 0 || (size_t)n >= sizeof req) {
        fprintf(stderr, "jrpc status: the URL is too long\n");
        goto fail;
    }
    for (size_t off = 0; off < (size_t)n;) {
        ssize_t w = send(fd, req + off, (size_t)n - off, MSG_NOSIGNAL);
        if (w > 0) {
            off += (size_t)w;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if ((rc = jrpc_client_fd_wait(fd, POLLOUT, deadline)) < 0)
                goto io_fail;
        } else {
            rc = -errno;
            goto io_fail;
        }
    }
    for (;;) {
        if (jrpc_buf_reserve(&raw, 16384) < 0 || raw.len > BODY_MAX) {
            fprintf(stderr, "jrpc status: %s%s: answer too large\n", where, path);
            goto fail;
        }
        ssize_t r = recv(fd, raw.p + raw.len, 16384, 0);
        if (r > 0) {
            raw.len += (size_t)r;
        } else if (r == 0) {
            break;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if ((rc = jrpc_client_fd_wait(fd, POLLIN, deadline)) < 0)
                goto io_fail;
        } else {
            rc = -errno;
            goto io_fail;
        }
    }
    const char *end = raw.len ? memmem(raw.p, raw.len, "\r\n\r\n", 4) : NULL;
    if (raw.len < 12 || memcmp(raw.p, "HTTP/1.", 7) != 0 || end == NULL ||
        sscanf(raw.p + 8, " %3d", &status) != 1) {
        fprintf(stderr, "jrpc status: %s%s: not an HTTP answer\n", where, path);
        goto fail;
    }
    if (status != 200) {
        const char *eol = memchr(raw.p, '\r', raw.len);
        fprintf(stderr, "jrpc status: %s%s answered %.*s\n", where, path,
                (int)(eol - raw.p), raw.p);
        goto fail;
    }
    end += 4;
    jrpc_buf_reset(body);
    if (jrpc_buf_append(body, end, (size_t)(raw.p + raw.len - end)) < 0)
        goto fail;
    close(fd);
    jrpc_buf_dispose(&raw);
    return 0;
io_fail:
    fprintf(stderr, "jrpc status: %s%s: %s\n", where, path,
            rc == -ETIMEDOUT ? "timed out" : strerror(-rc));
fail:
    if (fd >= 0)
        close(fd);
    jrpc_buf_dispose(&raw);
    return -1;
}

/* ---- reading the JSON (checked whole first) ---- */

/* The end of the JSON value starting at p (valid JSON: no checks). */
static const char *value_end(const char *p, const char *end)
{
    int depth = 0;
    bool in_str = false;
    for (; p < end; p++) {
        char c = *p;
        if (in_str) {
            if (c == '\\')
                p++;
            else if (c == '"' && (in_str = false, depth == 0))
                return p + 1;
        } else if (c == '"') {
            in_str = true;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (depth == 0)
                return p;
            if (--depth == 0)
                return p + 1;
        } else if (depth == 0 && (c == ',' || c == ' ' || c == '\n' || c == '\r' || c == '\t')) {
            return p;
        }
    }
    return p;
}

/* The next element of the array arr (a span of "[...]"); *at starts NULL. */
static bool next_elem(jrpc_span_t arr, const char **at, jrpc_span_t *e)
{
    const char *end = arr.p + arr.n - 1, *p = *at ? *at : arr.p + 1;
    while (p < end && (*p == ' ' || *p == ',' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    if (p >= end)
        return false;
    const char *q = value_end(p, end);
    *e = (jrpc_span_t){ p, (size_t)(q - p) };
    *at = q;
    return true;
}

static unsigned count_elems(jrpc_span_t arr)
{
    jrpc_span_t e;
    const char *at = NULL;
    unsigned n = 0;
    while (arr.n && next_elem(arr, &at, &e))
        n++;
    return n;
}

static jrpc_span_t get(jrpc_span_t obj, const char *name)
{
    jrpc_span_t v = { "", 0 };
    if (jrpc_json_member(obj.p, obj.n, name, &v) < 0)
        v = (jrpc_span_t){ "", 0 };
    return v;
}

static double num(jrpc_span_t obj, const char *name)
{
    jrpc_span_t v = get(obj, name);
    char tmp[64];
    if (v.n == 0 || v.n >= sizeof tmp)
        return 0;
    memcpy(tmp, v.p, v.n);
    tmp[v.n] = '\0';
    return strtod(tmp, NULL);
}

static bool is_true(jrpc_span_t obj, const char *name)
{
    jrpc_span_t v = get(obj, name);
    return v.n == 4 && memcmp(v.p, "true", 4) == 0;
}

/* A string member as written in the JSON, without its quotes (escapes
 * kept: nothing the terminal would act on), cut to fit buf. */
static const char *str(jrpc_span_t obj, const char *name, char *buf, size_t cap)
{
    jrpc_span_t v = get(obj, name);
    size_t n = v.n >= 2 && v.p[0] == '"' ? v.n - 2 : 0;
    if (n >= cap)
        n = cap - 1;
    memcpy(buf, v.p + 1, n);
    buf[n] = '\0';
    return buf;
}

static void duration(char *buf, size_t cap, double ms)
{
    uint64_t s = (uint64_t)(ms / 1000);
    if (s < 60)
        snprintf(buf, cap, "%.1fs", ms / 1000);
    else if (s < 3600)
        snprintf(buf, cap, "%um %us", (unsigned)(s / 60), (unsigned)(s % 60));
    else
        snprintf(buf, cap, "%uh %um", (unsigned)(s / 3600), (unsigned)(s / 60 % 60));
}

/* ---- printing ---- */

static void print_status(FILE *out, jrpc_span_t s, const char *where)
{
    char a[256], b[256], d[32];
    jrpc_span_t e, redis = get(s, "redis"), replay = get(s, "replay"), fence = get(replay, "fence");
    duration(d, sizeof d, num(s, "uptime_ms"));
    fprintf(out, "jrpc-broker %s, up %s (admin %s)\n", str(s, "version", a, sizeof a), d, where);
    fprintf(out, "listeners:");
    const char *at = NULL;
    for (jrpc_span_t ls = get(s, "listeners"); ls.n && next_elem(ls, &at, &e);)
        fprintf(out, " %s %s%s", str(e, "name", a, sizeof a), str(e, "endpoint", b, sizeof b),
                is_true(e, "tls") ? " (TLS)" : "");
    fprintf(out, "\n");
    if (!is_true(redis, "in_use"))
        fprintf(out, "redis: not used\n");
    else
        fprintf(out, "redis: %s %s, rtt %.2f ms, %.0f reconnects, %.0f failures\n",
                str(redis, "mode", a, sizeof a), is_true(redis, "up") ? "up" : "DOWN",
                num(redis, "rtt_ms_avg"), num(redis, "reconnects"), num(redis, "failures"));
    if (!is_true(replay, "on"))
        fprintf(out, "replay guard: off\n");
    else if (is_true(fence, "active"))
        fprintf(out, "replay guard: FENCED after a loss of Redis' memory: bodies signed before "
                "%.0f refused, %.0f s left\n", num(fence, "ends_at"), num(fence, "ends_in_s"));
    else
        fprintf(out, "replay guard: %s, %.0f memory losses seen\n",
                is_true(replay, "up") ? "on" : "UNAVAILABLE", num(replay, "memory_losses"));
    fprintf(out, "bodies open %.0f, calls in flight %.0f, calls queued %.0f (%.0f bytes held), "
            "workers %.0f%s\n", num(s, "bodies_open"), num(s, "calls_inflight"),
            num(s, "calls_queued"), num(s, "queued_bytes"), num(s, "workers_connected"),
            is_true(s, "draining") ? ", DRAINING" : "");
    jrpc_span_t lat = get(s, "latency");
    double count = num(lat, "count");
    fprintf(out, "call latency: %.0f calls, mean %.3f ms\n", count,
            count > 0 ? num(lat, "sum_s") * 1000 / count : 0.0);
    fprintf(out, "refusals: %.0f in all\n", num(s, "refused_total"));
    at = NULL;
    for (jrpc_span_t rs = get(s, "refusals"); rs.n && next_elem(rs, &at, &e);) {
        duration(d, sizeof d, num(e, "age_ms"));
        fprintf(out, "  %8s ago  %-4s %-12s %6.0f  %s\n", d, str(e, "transport", a, sizeof a),
                str(e, "outcome", b, sizeof b), num(e, "code"), str(e, "reason", a, sizeof a));
    }
}

static void print_workers(FILE *out, jrpc_span_t w)
{
    char name[160], svc[96], host[96], d[32];
    jrpc_span_t e, list = get(w, "workers");
    unsigned n = count_elems(list);
    const char *at = NULL;
    fprintf(out, "workers: %u\n", n);
    if (n)
        fprintf(out, "  %-24s %-12s %-16s %6s %9s %9s %7s %8s %11s  %s\n", "NAME", "SERVICE",
                "HOST", "CREDIT", "IN-FLIGHT", "ANSWERED", "ERRORS", "TIMEOUTS", "LAST-HEARD",
                "STATE");
    while (list.n && next_elem(list, &at, &e)) {
        duration(d, sizeof d, num(e, "last_heard_ms"));
        fprintf(out, "  %-24s %-12s %-16s %6.0f %9.0f %9.0f %7.0f %8.0f %11s  %s\n",
                str(e, "name", name, sizeof name), str(e, "service", svc, sizeof svc),
                str(e, "host", host, sizeof host), num(e, "credit"), num(e, "in_flight"),
                num(e, "answered"), num(e, "errors"), num(e, "timeouts"), d,
                is_true(e, "ejected") ? "ejected" : is_true(e, "draining") ? "draining" : "ok");
    }
}

static void print_methods(FILE *out, jrpc_span_t m)
{
    char svc[96], name[160];
    jrpc_span_t e, list = get(m, "methods");
    unsigned n = count_elems(list);
    const char *at = NULL;
    fprintf(out, "methods: %u\n", n);
    if (n)
        fprintf(out, "  %-12s %-28s %9s %9s %7s %8s %9s %9s %7s\n", "SERVICE", "METHOD", "CALLS",
                "OK", "ERRORS", "TIMEOUTS", "P50-MS", "P99-MS", "WORKERS");
    while (list.n && next_elem(list, &at, &e))
        fprintf(out, "  %-12s %-28s %9.0f %9.0f %7.0f %8.0f %9.2f %9.2f %7.0f\n",
                str(e, "service", svc, sizeof svc), str(e, "method", name, sizeof name),
                num(e, "calls"), num(e, "ok"), num(e, "errors"), num(e, "timeouts"),
                num(e, "p50_ms"), num(e, "p99_ms"), num(e, "workers"));
}

int jrpc_status_cmd(int argc, char **argv, FILE *out)
{
    const char *url = getenv("JRPC_ADMIN_URL");
    long timeout_ms = 5000;
    static const struct option longopts[] = {
        { "url", required_argument, NULL, 'u' },
        { "timeout", required_argument, NULL, 't' },
        { NULL, 0, NULL, 0 },
    };
    int opt;
    optind = 0;   /* a fresh scan of this command's own arguments */
    /* getopt_long wants argv[0] to be the program: shift by one */
    while ((opt = getopt_long(argc + 1, argv - 1, "+:u:t:", longopts, NULL)) != -1) {
        if (opt == 'u') {
            url = optarg;
        } else if (opt == 't') {
            char *e;
            timeout_ms = strtol(optarg, &e, 10);
            if (*e || timeout_ms < 1 || timeout_ms > 3600000) {
                fprintf(stderr, "jrpc status: --timeout wants milliseconds, 1..3600000\n");
                return 2;
            }
        } else {
            fprintf(stderr, "usage: jrpc status [--url http://ADMIN_HOST:PORT] [--timeout MS]\n");
            return 2;
        }
    }
    if (optind != argc + 1) {
        fprintf(stderr, "usage: jrpc status [--url http://ADMIN_HOST:PORT] [--timeout MS]\n");
        return 2;
    }
    if (url == NULL || *url == '\0')
        url = JRPC_STATUS_DEFAULT_URL;
    jrpc_client_url_t u = { 0 };
    if (jrpc_client_url_parse(url, &u) < 0 || u.tls) {
        fprintf(stderr, "jrpc status: the admin URL must be http://HOST:PORT (the admin listener "
                "speaks plain HTTP): %s\n", url);
        jrpc_client_url_dispose(&u);
        return 2;
    }
    /* The URL's path is a prefix (a proxy in front); "/rpc" is the parser's default. */
    const char *prefix = strcmp(u.path, "/rpc") == 0 || strcmp(u.path, "/") == 0 ? "" : u.path;
    static const char *const paths[3] = { "/status", "/status/workers", "/status/methods" };
    jrpc_buf_t body[3];
    jrpc_span_t v[3];
    int rc = 0;
    char where[600];
    snprintf(where, sizeof where, "http://%s", u.authority);
    for (int i = 0; i < 3; i++)
        jrpc_buf_init(&body[i]);
    for (int i = 0; i < 3 && rc == 0; i++) {
        char path[700];
        snprintf(path, sizeof path, "%s%s", prefix, paths[i]);
        if (http_get(&u, where, path, (int)timeout_ms, &body[i]) < 0) {
            rc = 2;
        } else if (jrpc_json_check(body[i].p, body[i].len, 16, &v[i]) < 0 || v[i].p[0] != '{') {
            fprintf(stderr, "jrpc status: %s%s%s: the answer is not a JSON object\n", where, prefix,
                    paths[i]);
            rc = 2;
        }
    }
    if (rc == 0) {
        print_status(out, v[0], where);
        print_workers(out, v[1]);
        print_methods(out, v[2]);
    }
    for (int i = 0; i < 3; i++)
        jrpc_buf_dispose(&body[i]);
    jrpc_client_url_dispose(&u);
    return rc;
}
