/* jrpc_sentinel — the --redis URL and the Sentinel discovery steps (see the
 * header for the protocol). No I/O but the password file, read once. */
#include "jrpc_sentinel.h"
#include "jrpc_errors.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UNIX_PATH_MAX 108     /* sizeof(struct sockaddr_un.sun_path) on Linux */

struct jrpc_sentinel {
    bool              sentinel;      /* sentinel:// */
    jrpc_redis_node_t nodes[JRPC_SENTINEL_MAX]; /* the sentinels, last to answer first */
    size_t            nnodes;
    size_t            asking;        /* index being asked; nnodes: the round failed */
    jrpc_redis_auth_t sentinel_auth; /* the URL's credentials with sentinel:// */
    jrpc_redis_auth_t master_auth;   /* the URL's with redis://, or the password file */
    unsigned long     db;            /* SELECT when not 0 */
    char              name[JRPC_SENTINEL_NAME_MAX + 1]; /* master name */
    jrpc_redis_node_t master;        /* fixed, or the last found (host "" before) */
};

/* ---- URL parsing --------------------------------------------------------- */

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decodes s[0..n) into a new NUL-terminated string (*out_n bytes
 * before the NUL). Returns 0, -EINVAL on a bad escape, -ENOMEM. */
static int pct_decode(const char *s, size_t n, char **out, size_t *out_n)
{
    char *d = malloc(n + 1);
    if (d == NULL)
        return -ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            d[k++] = s[i];
            continue;
        }
        int hi = i + 2 < n ? hexval(s[i + 1]) : -1;
        int lo = i + 2 < n ? hexval(s[i + 2]) : -1;
        if (hi < 0 || lo < 0) {
            free(d);
            return -EINVAL;
        }
        d[k++] = (char)(hi << 4 | lo);
        i += 2;
    }
    d[k] = '\0';
    *out = d;
    *out_n = k;
    return 0;
}

/* Parses decimal digits s[0..n) into *v, at most max. Returns 0 or -EINVAL. */
static int parse_num(const char *s, size_t n, unsigned long max, unsigned long *v)
{
    if (n == 0 || n > 10)
        return -EINVAL;
    unsigned long x = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -EINVAL;
        x = x * 10 + (unsigned long)(s[i] - '0');
    }
    if (x > max)
        return -EINVAL;
    *v = x;
    return 0;
}

/* A host name or address: letters, digits, . - _ (and : % for IPv6). */
static bool host_ok(const char *h, size_t n, bool v6)
{
    if (n == 0 || n > 253)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = h[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '-' || c == '_' || (v6 && (c == ':' || c == '%'));
        if (!ok)
            return false;
    }
    return true;
}

static void node_set(jrpc_redis_node_t *nd, const char *host, size_t host_n, int port)
{
    memcpy(nd->host, host, host_n);
    nd->host[host_n] = '\0';
    nd->port = port;
    nd->path[0] = '\0';
    /* Through a local: GCC's -Wrestrict (Release) cannot tell nd->host from nd->name. */
    char name[sizeof nd->name];
    snprintf(name, sizeof name, memchr(host, ':', host_n) ? "[%.*s]:%d" : "%.*s:%d",
             (int)host_n, host, port);
    memcpy(nd->name, name, sizeof name);
}

/* "host:port" or "[v6]:port" in s[0..n) into nd. what names it in errors
 * ("" or "sentinel 2: "). Messages never quote the text: it sits next to a
 * password in the URL. */
static int parse_hostport(const char *s, size_t n, jrpc_redis_node_t *nd, const char *what,
                          char *err, size_t errlen)
{
    const char *end = s + n, *host = s, *colon;
    size_t host_n;
    bool bracketed = false;
    if (n > 0 && *s == '[') {
        const char *rb = memchr(s, ']', n);
        if (rb == NULL) {
            jrpc_errf(err, errlen, "--redis: %sunterminated [IPv6] host", what);
            return -EINVAL;
        }
        host = s + 1;
        host_n = (size_t)(rb - host);
        colon = rb + 1 < end && rb[1] == ':' ? rb + 1 : NULL;
        if (colon == NULL && rb + 1 != end) {
            jrpc_errf(err, errlen, "--redis: %sexpected :port after the [IPv6] host", what);
            return -EINVAL;
        }
        bracketed = true;
    } else {
        colon = memchr(s, ':', n);
        host_n = (size_t)((colon ? colon : end) - s);
        if (colon != NULL && memchr(colon + 1, ':', (size_t)(end - colon - 1)) != NULL) {
            jrpc_errf(err, errlen, "--redis: %sIPv6 hosts need [brackets]", what);
            return -EINVAL;
        }
    }
    if (!host_ok(host, host_n, bracketed)) {
        jrpc_errf(err, errlen, "--redis: %smissing or invalid host", what);
        return -EINVAL;
    }
    if (colon == NULL) {
        jrpc_errf(err, errlen, "--redis: %smissing :port", what);
        return -EINVAL;
    }
    unsigned long port;
    if (parse_num(colon + 1, (size_t)(end - colon - 1), 65535, &port) < 0 || port == 0) {
        jrpc_errf(err, errlen, "--redis: %sport must be a number in 1..65535", what);
        return -EINVAL;
    }
    node_set(nd, host, host_n, (int)port);
    return 0;
}

/* "[user]:password@" in s[0..n) into a. */
static int parse_cred(const char *s, size_t n, jrpc_redis_auth_t *a, char *err, size_t errlen)
{
    const char *colon = memchr(s, ':', n);
    if (colon == NULL || colon + 1 == s + n) {
        jrpc_errf(err, errlen, "--redis: credentials must be user:password@ or :password@");
        return -EINVAL;
    }
    int rc = 0;
    if (colon > s)
        rc = pct_decode(s, (size_t)(colon - s), &a->user, &a->user_n);
    if (rc == 0)
        rc = pct_decode(colon + 1, (size_t)(s + n - colon - 1), &a->pass, &a->pass_n);
    if (rc == -ENOMEM) {
        jrpc_errf(err, errlen, "--redis: out of memory");
        return rc;
    }
    if (rc < 0) {
        jrpc_errf(err, errlen, "--redis: bad %%-escape in the credentials");
        return rc;
    }
    if (a->pass_n > JRPC_REDIS_PASS_MAX) {
        jrpc_errf(err, errlen, "--redis: password longer than %d bytes", JRPC_REDIS_PASS_MAX);
        return -EINVAL;
    }
    return 0;
}

/* "/<db>" or "" or "/" at s: the database index. */
static int parse_db(jrpc_sentinel_t *s, const char *p, const char *form, char *err, size_t errlen)
{
    s->db = 0;
    if (*p == '/' && p[1] != '\0' && parse_num(p + 1, strlen(p + 1), 2147483647UL, &s->db) < 0) {
        jrpc_errf(err, errlen, "--redis: database must be a number (%s)", form);
        return -EINVAL;
    }
    return 0;
}

/* What follows the scheme of redis:// and sentinel://:
 * [cred@]hostport[,hostport...][/rest]. Credentials go to a, the
 * addresses to nodes (at most max). Sets *rest to the '/' or the end. */
static int parse_authority(jrpc_sentinel_t *s, const char *u, jrpc_redis_auth_t *a, size_t max,
                           const char **rest, char *err, size_t errlen)
{
    const char *aend = strchr(u, '/');
    if (aend == NULL)
        aend = u + strlen(u);
    const char *at = NULL;
    for (const char *p = u; p < aend; p++)
        if (*p == '@')
            at = p;
    const char *hp = u;
    if (at != NULL) {
        int rc = parse_cred(u, (size_t)(at - u), a, err, errlen);
        if (rc < 0)
            return rc;
        hp = at + 1;
    }
    s->nnodes = 0;
    for (const char *p = hp;;) {
        const char *comma = memchr(p, ',', (size_t)(aend - p));
        const char *e = comma ? comma : aend;
        if (s->nnodes == max) {
            if (max == 1)
                jrpc_errf(err, errlen, "--redis: one host:port in redis:// (sentinel:// takes a list)");
            else
                jrpc_errf(err, errlen, "--redis: more than %zu sentinels", max);
            return -EINVAL;
        }
        char what[32] = "";
        if (max > 1)
            snprintf(what, sizeof what, "sentinel %zu: ", s->nnodes + 1);
        int rc = parse_hostport(p, (size_t)(e - p), &s->nodes[s->nnodes], what, err, errlen);
        if (rc < 0)
            return rc;
        s->nnodes++;
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    *rest = aend;
    return 0;
}

static bool name_ok(const char *n, size_t len)
{
    if (len == 0 || len > JRPC_SENTINEL_NAME_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = n[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_'))
            return false;
    }
    return true;
}

/* sentinel://[cred@]h:p[,h:p...]/name[/db] */
static int parse_sentinel_url(jrpc_sentinel_t *s, const char *u, char *err, size_t errlen)
{
    const char *rest;
    s->sentinel = true;
    int rc = parse_authority(s, u, &s->sentinel_auth, JRPC_SENTINEL_MAX, &rest, err, errlen);
    if (rc < 0)
        return rc;
    if (*rest != '/' || rest[1] == '\0' || rest[1] == '/') {
        jrpc_errf(err, errlen, "--redis: missing /MASTER_NAME "
                  "(expected sentinel://[[user]:password@]host:port[,host:port...]/MASTER_NAME[/db])");
        return -EINVAL;
    }
    const char *name = rest + 1, *slash = strchr(name, '/');
    size_t n = slash ? (size_t)(slash - name) : strlen(name);
    if (!name_ok(name, n)) {
        jrpc_errf(err, errlen, "--redis: the master name must be 1 to %d characters of "
                  "[A-Za-z0-9_.-]", JRPC_SENTINEL_NAME_MAX);
        return -EINVAL;
    }
    memcpy(s->name, name, n);
    s->name[n] = '\0';
    return parse_db(s, name + n, "sentinel://.../MASTER_NAME/<db>", err, errlen);
}

static int parse_url(jrpc_sentinel_t *s, const char *url, char *err, size_t errlen)
{
    if (url == NULL || *url == '\0') {
        jrpc_errf(err, errlen, "--redis: empty URL");
        return -EINVAL;
    }
    if (strpbrk(url, "?# \t\r\n") != NULL) {
        jrpc_errf(err, errlen, "--redis: query, fragment or blanks in the URL are not supported "
                             "(percent-encode them in a password)");
        return -EINVAL;
    }
    if (strncmp(url, "redis://", 8) == 0) {
        const char *rest;
        int rc = parse_authority(s, url + 8, &s->master_auth, 1, &rest, err, errlen);
        if (rc == 0)
            rc = parse_db(s, rest, "redis://host:port/<db>", err, errlen);
        s->master = s->nodes[0];
        s->nnodes = 0;
        return rc;
    }
    if (strncmp(url, "sentinel://", 11) == 0)
        return parse_sentinel_url(s, url + 11, err, errlen);
    if (strncmp(url, "unix://", 7) == 0) {
        const char *path = url + 7;
        size_t n = strlen(path);
        if (path[0] != '/' || n < 2 || n >= UNIX_PATH_MAX) {
            jrpc_errf(err, errlen, "--redis: expected unix:///absolute/path.sock (under %d bytes)",
                    UNIX_PATH_MAX);
            return -EINVAL;
        }
        memcpy(s->master.path, path, n + 1);
        snprintf(s->master.name, sizeof s->master.name, "unix:%s", path);
        return 0;
    }
    if (strncmp(url, "rediss://", 9) == 0) {
        jrpc_errf(err, errlen, "--redis: TLS (rediss://) is not supported");
        return -EINVAL;
    }
    jrpc_errf(err, errlen, "--redis: expected redis://[user:password@]host:port[/db], "
              "unix:///path or sentinel://host:port[,host:port...]/MASTER_NAME");
    return -EINVAL;
}

/* The first line of path is the master's password. */
static int read_password_file(jrpc_sentinel_t *s, const char *path, char *err, size_t errlen)
{
    if (s->master_auth.pass != NULL) {
        jrpc_errf(err, errlen, "--redis-password-file: the URL has a password for the master "
                  "already: give it once");
        return -EINVAL;
    }
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        jrpc_errf(err, errlen, "--redis-password-file: cannot read %s: %s", path, strerror(errno));
        return -EINVAL;
    }
    char buf[JRPC_REDIS_PASS_MAX + 3];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    size_t len = 0;   /* the first line's (strcspn would stop at a NUL) */
    while (len < n && buf[len] != '\r' && buf[len] != '\n')
        len++;
    int rc = 0;
    if (memchr(buf, '\0', len) != NULL || len == 0)
        rc = -EINVAL, jrpc_errf(err, errlen, "--redis-password-file: %s: the first line must be "
                                "the password (not empty, no NUL byte)", path);
    else if (len > JRPC_REDIS_PASS_MAX)
        rc = -EINVAL, jrpc_errf(err, errlen, "--redis-password-file: %s: password longer than "
                                "%d bytes", path, JRPC_REDIS_PASS_MAX);
    else if ((s->master_auth.pass = strndup(buf, len)) == NULL)
        rc = -ENOMEM, jrpc_errf(err, errlen, "--redis-password-file: out of memory");
    else
        s->master_auth.pass_n = len;
    explicit_bzero(buf, sizeof buf);
    return rc;
}

static void auth_wipe(jrpc_redis_auth_t *a)
{
    if (a->pass != NULL)
        explicit_bzero(a->pass, a->pass_n);
    free(a->pass);
    free(a->user);
    a->pass = a->user = NULL;
}

int jrpc_sentinel_parse(const char *url, const char *password_file, jrpc_sentinel_t **out,
                        char *err, size_t errlen)
{
    *out = NULL;
    jrpc_sentinel_t *s = calloc(1, sizeof *s);
    if (s == NULL) {
        jrpc_errf(err, errlen, "--redis: out of memory");
        return -ENOMEM;
    }
    int rc = parse_url(s, url, err, errlen);
    if (rc == 0 && password_file != NULL)
        rc = read_password_file(s, password_file, err, errlen);
    if (rc < 0) {
        jrpc_sentinel_destroy(&s);
        return rc;
    }
    *out = s;
    return 0;
}

void jrpc_sentinel_destroy(jrpc_sentinel_t **self_p)
{
    if (self_p == NULL || *self_p == NULL)
        return;
    jrpc_sentinel_t *s = *self_p;
    *self_p = NULL;
    auth_wipe(&s->sentinel_auth);
    auth_wipe(&s->master_auth);
    free(s);
}

/* ---- accessors ----------------------------------------------------------- */

bool jrpc_sentinel_enabled(const jrpc_sentinel_t *s)
{
    return s->sentinel;
}

const jrpc_redis_node_t *jrpc_sentinel_master(const jrpc_sentinel_t *s)
{
    return s->master.host[0] || s->master.path[0] ? &s->master : NULL;
}

const jrpc_redis_auth_t *jrpc_sentinel_master_auth(const jrpc_sentinel_t *s)
{
    return &s->master_auth;
}

unsigned long jrpc_sentinel_db(const jrpc_sentinel_t *s)
{
    return s->db;
}

const jrpc_redis_auth_t *jrpc_sentinel_auth(const jrpc_sentinel_t *s)
{
    return &s->sentinel_auth;
}

const char *jrpc_sentinel_name(const jrpc_sentinel_t *s)
{
    return s->name;
}

size_t jrpc_sentinel_count(const jrpc_sentinel_t *s)
{
    return s->nnodes;
}

const jrpc_redis_node_t *jrpc_sentinel_node(const jrpc_sentinel_t *s, size_t i)
{
    return i < s->nnodes ? &s->nodes[i] : NULL;
}

/* ---- discovery ----------------------------------------------------------- */

void jrpc_sentinel_round_start(jrpc_sentinel_t *s)
{
    s->asking = 0;
}

const jrpc_redis_node_t *jrpc_sentinel_asking(const jrpc_sentinel_t *s)
{
    return s->asking < s->nnodes ? &s->nodes[s->asking] : NULL;
}

void jrpc_sentinel_failed(jrpc_sentinel_t *s)
{
    if (s->asking < s->nnodes)
        s->asking++;
}

static bool is_str(const redisReply *r)
{
    return r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS;
}

int jrpc_sentinel_answer(jrpc_sentinel_t *s, const redisReply *rep)
{
    if (s->asking >= s->nnodes)
        return -EPROTO;
    int rc = -EPROTO;
    unsigned long port = 0;
    if (rep->type == REDIS_REPLY_NIL)
        rc = -ENOENT;
    else if (rep->type == REDIS_REPLY_ERROR)
        rc = -EACCES;
    else if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 && is_str(rep->element[0]) &&
             is_str(rep->element[1]) &&
             host_ok(rep->element[0]->str, rep->element[0]->len, true) &&
             parse_num(rep->element[1]->str, rep->element[1]->len, 65535, &port) == 0 && port > 0)
        rc = 0;
    if (rc < 0) {
        s->asking++;
        return rc;
    }
    const redisReply *h = rep->element[0];
    bool same = strlen(s->master.host) == h->len && memcmp(s->master.host, h->str, h->len) == 0 &&
                s->master.port == (int)port;
    if (!same)
        node_set(&s->master, h->str, h->len, (int)port);
    /* The guide's rule: the sentinel that answered is asked first next time. */
    jrpc_redis_node_t first = s->nodes[s->asking];
    memmove(&s->nodes[1], &s->nodes[0], s->asking * sizeof s->nodes[0]);
    s->nodes[0] = first;
    s->asking = s->nnodes;
    return same ? 0 : 1;
}

int jrpc_sentinel_role(const redisReply *rep, char *role, size_t n)
{
    if (n > 0)
        role[0] = '\0';
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 || !is_str(rep->element[0]))
        return -EPROTO;
    const redisReply *w = rep->element[0];
    if (w->len == 6 && memcmp(w->str, "master", 6) == 0)
        return 0;
    if (n > 0)
        snprintf(role, n, "%.*s", w->len > 32 ? 32 : (int)w->len, w->str);
    for (size_t i = 0; n > 0 && role[i]; i++)   /* it reaches a log: printable only */
        if (role[i] < 0x21 || role[i] > 0x7e)
            role[i] = '?';
    return -EROFS;
}

bool jrpc_sentinel_is_readonly(const redisReply *rep)
{
    return rep->type == REDIS_REPLY_ERROR && rep->len >= 8 && strncmp(rep->str, "READONLY", 8) == 0;
}
