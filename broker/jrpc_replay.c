/* jrpc_replay — nonces claimed in Redis with one SET NX EX per body.
 *
 * One hiredis async connection at a time, driven by the hiredis libuv
 * adapter. Every command we send is mirrored in our own FIFO (`pending`),
 * oldest first: Redis answers in order, so each reply belongs to the head.
 * The FIFO gives us what hiredis 0.14 lacks: a command timeout (a watchdog
 * timer looks at the age of the head) and control over when the caller's
 * callback runs. Whenever a connection is given up, the FIFO is detached
 * first and `ac->data` is cleared, so the NULL replies hiredis delivers
 * while it tears the context down are recognised as already answered:
 * every claim's callback runs exactly once, from the loop.
 *
 * States: down (ac == NULL, retry timer armed), connecting (ac set, the
 * handshake AUTH/SELECT/PING in the FIFO), up (PING answered). Claims are
 * accepted only when up; otherwise they fail at once with -EAGAIN. */
#include "jrpc_replay.h"
#include "jrpc_errors.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <hiredis/adapters/libuv.h>
#pragma GCC diagnostic pop

#include "jrpc_log.h"
#include "jrpc_metrics.h"

#define COMP "replay"
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 2000
#define UNIX_PATH_MAX 108   /* sizeof(struct sockaddr_un.sun_path) on Linux */

enum cmd_kind { CMD_CLAIM, CMD_AUTH, CMD_SELECT, CMD_PING };

/* One command written to the current connection and not yet answered. */
typedef struct pending {
    struct pending *next;     /* younger command */
    uint64_t        sent_ns;  /* uv_hrtime() when queued (connect start for the handshake) */
    jrpc_replay_cb  cb;       /* caller's callback (claims only) */
    void           *arg;      /* its argument */
    enum cmd_kind   kind;     /* what the reply answers */
} pending_t;

struct jrpc_replay {
    uv_loop_t         *loop;        /* borrowed */
    uv_timer_t         watchdog;    /* fails the FIFO when its head is too old */
    uv_timer_t         retry;       /* (re)connects after the backoff */
    redisAsyncContext *ac;          /* current connection, NULL while down */
    pending_t         *head;        /* oldest unanswered command on ac */
    pending_t         *tail;        /* youngest */
    size_t             npending;    /* length of the FIFO */
    bool               up;          /* handshake answered, claims accepted */
    bool               closing;     /* destroy called; freed when nclosing hits 0 */
    bool               warned_reply;/* an unexpected claim reply was logged on this connection */
    int                nclosing;    /* our handles still closing */
    uint64_t           backoff_ms;  /* delay before the next reconnect */
    uint64_t           attempts;    /* connection attempts started */
    uint64_t           timeout_ns;  /* opts->timeout_ms in ns */
    char               ttl[24];     /* 2 × window_s, decimal */
    char               dbs[24];     /* database index, decimal */
    /* Where to connect, parsed from the URL. */
    char              *host;        /* TCP host (NULL for a unix socket) */
    int                port;        /* TCP port */
    char              *path;        /* unix socket path (NULL for TCP) */
    char              *user;        /* AUTH user (NULL: password only) */
    size_t             user_n;      /* its length (percent-decoding may give any byte) */
    char              *pass;        /* AUTH password (NULL: no AUTH); never logged */
    size_t             pass_n;      /* its length */
    unsigned long      db;          /* SELECT when not 0 */
    char               target[300]; /* host:port or the socket path, for logs */
    jrpc_replay_stats_t st;         /* counters for jrpc_replay_stats() */
};

static void conn_start(jrpc_replay_t *r);

static void on_retry(uv_timer_t *t)
{
    conn_start(t->data);
}

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

static bool host_ok(const char *h, size_t n, bool bracketed)
{
    if (n == 0 || n > 253)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = h[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '-' || c == '_' || (bracketed && (c == ':' || c == '%'));
        if (!ok)
            return false;
    }
    return true;
}

/* redis://[user:password@]host:port[/db] — fills r->host/port/user/pass/db.
 * Messages never quote the URL: it may hold a password. */
static int parse_redis_url(jrpc_replay_t *r, const char *s, char *err, size_t errlen)
{
    const char *aend = strchr(s, '/');
    if (aend == NULL)
        aend = s + strlen(s);
    const char *at = NULL;
    for (const char *p = s; p < aend; p++)
        if (*p == '@')
            at = p;
    const char *hp = s;
    if (at != NULL) {
        const char *colon = memchr(s, ':', (size_t)(at - s));
        if (colon == NULL || colon + 1 == at) {
            jrpc_errf(err, errlen, "--redis: credentials must be user:password@ or :password@");
            return -EINVAL;
        }
        int rc = 0;
        if (colon > s)
            rc = pct_decode(s, (size_t)(colon - s), &r->user, &r->user_n);
        if (rc == 0)
            rc = pct_decode(colon + 1, (size_t)(at - colon - 1), &r->pass, &r->pass_n);
        if (rc == -ENOMEM) {
            jrpc_errf(err, errlen, "--redis: out of memory");
            return rc;
        }
        if (rc < 0) {
            jrpc_errf(err, errlen, "--redis: bad %%-escape in the credentials");
            return rc;
        }
        hp = at + 1;
    }

    const char *host = hp, *colon;
    size_t host_n;
    bool bracketed = false;
    if (*hp == '[') {
        const char *rb = memchr(hp, ']', (size_t)(aend - hp));
        if (rb == NULL) {
            jrpc_errf(err, errlen, "--redis: unterminated [IPv6] host");
            return -EINVAL;
        }
        host = hp + 1;
        host_n = (size_t)(rb - host);
        colon = rb + 1 < aend && rb[1] == ':' ? rb + 1 : NULL;
        if (colon == NULL && rb + 1 != aend) {
            jrpc_errf(err, errlen, "--redis: expected :port after the [IPv6] host");
            return -EINVAL;
        }
        bracketed = true;
    } else {
        colon = memchr(hp, ':', (size_t)(aend - hp));
        host_n = (size_t)((colon ? colon : aend) - hp);
        if (colon != NULL && memchr(colon + 1, ':', (size_t)(aend - colon - 1)) != NULL) {
            jrpc_errf(err, errlen, "--redis: IPv6 hosts need [brackets]");
            return -EINVAL;
        }
    }
    if (!host_ok(host, host_n, bracketed)) {
        jrpc_errf(err, errlen, "--redis: missing or invalid host");
        return -EINVAL;
    }
    if (colon == NULL) {
        jrpc_errf(err, errlen, "--redis: missing :port (expected redis://[user:password@]host:port[/db])");
        return -EINVAL;
    }
    unsigned long port;
    if (parse_num(colon + 1, (size_t)(aend - colon - 1), 65535, &port) < 0 || port == 0) {
        jrpc_errf(err, errlen, "--redis: port must be a number in 1..65535");
        return -EINVAL;
    }
    r->port = (int)port;
    if ((r->host = strndup(host, host_n)) == NULL) {
        jrpc_errf(err, errlen, "--redis: out of memory");
        return -ENOMEM;
    }
    snprintf(r->target, sizeof r->target, bracketed ? "[%s]:%d" : "%s:%d", r->host, r->port);

    r->db = 0;
    if (*aend == '/' && aend[1] != '\0' &&
        parse_num(aend + 1, strlen(aend + 1), 2147483647UL, &r->db) < 0) {
        jrpc_errf(err, errlen, "--redis: database must be a number (redis://host:port/<db>)");
        return -EINVAL;
    }
    return 0;
}

static int parse_url(jrpc_replay_t *r, const char *url, char *err, size_t errlen)
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
    if (strncmp(url, "redis://", 8) == 0)
        return parse_redis_url(r, url + 8, err, errlen);
    if (strncmp(url, "unix://", 7) == 0) {
        const char *path = url + 7;
        size_t n = strlen(path);
        if (path[0] != '/' || n < 2 || n >= UNIX_PATH_MAX) {
            jrpc_errf(err, errlen, "--redis: expected unix:///absolute/path.sock (under %d bytes)",
                    UNIX_PATH_MAX);
            return -EINVAL;
        }
        if ((r->path = strdup(path)) == NULL) {
            jrpc_errf(err, errlen, "--redis: out of memory");
            return -ENOMEM;
        }
        snprintf(r->target, sizeof r->target, "unix:%s", r->path);
        return 0;
    }
    if (strncmp(url, "rediss://", 9) == 0) {
        jrpc_errf(err, errlen, "--redis: TLS (rediss://) is not supported");
        return -EINVAL;
    }
    jrpc_errf(err, errlen, "--redis: expected redis://[user:password@]host:port[/db] or unix:///path");
    return -EINVAL;
}

/* ---- the FIFO ------------------------------------------------------------ */

static void fifo_push(jrpc_replay_t *r, pending_t *p)
{
    p->next = NULL;
    if (r->tail != NULL)
        r->tail->next = p;
    else
        r->head = p;
    r->tail = p;
    r->npending++;
}

static pending_t *fifo_pop(jrpc_replay_t *r)
{
    pending_t *p = r->head;
    if (p == NULL)
        return NULL;
    r->head = p->next;
    if (r->head == NULL)
        r->tail = NULL;
    r->npending--;
    return p;
}

/* Answers and frees a detached list. A callback may destroy r: r stays
 * allocated until its close callbacks, and nothing here touches the loop. */
static void fail_list(jrpc_replay_t *r, pending_t *list, int rc)
{
    while (list != NULL) {
        pending_t *p = list;
        list = p->next;
        if (p->kind == CMD_CLAIM) {
            if (rc == -EAGAIN)
                r->st.failures++;
            p->cb(p->arg, rc);
        }
        free(p);
    }
}

/* ---- connection ---------------------------------------------------------- */

static void schedule_retry(jrpc_replay_t *r)
{
    if (r->closing)
        return;
    uint64_t delay = r->backoff_ms;
    r->backoff_ms = delay * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : delay * 2;
    uv_timer_start(&r->retry, on_retry, delay, 0);
}

/* Gives up the current connection: detaches it and the FIFO, fails every
 * pending claim with -EAGAIN, arms the reconnect. free_ac is false when
 * hiredis is already tearing the context down itself (disconnect callbacks,
 * NULL replies); redisAsyncFree() called from inside a hiredis reply
 * callback is deferred by hiredis until that callback returns. */
static void conn_drop(jrpc_replay_t *r, bool free_ac, const char *event, const char *error)
{
    redisAsyncContext *ac = r->ac;
    pending_t *list = r->head;
    size_t n = r->npending;
    bool was_up = r->up;

    r->ac = NULL;
    r->head = r->tail = NULL;
    r->npending = 0;
    r->up = false;
    uv_timer_stop(&r->watchdog);
    if (ac != NULL) {
        ac->data = NULL;
        if (free_ac)
            redisAsyncFree(ac);
    }
    JRPC_LOG(JRPC_LOG_WARN, COMP, "event=%s target=%s was_up=%d pending=%zu retry_ms=%llu error=\"%s\"",
             event, r->target, was_up, n, (unsigned long long)r->backoff_ms,
             error ? error : "-");
    schedule_retry(r);
    fail_list(r, list, -EAGAIN);
}

static void on_watchdog(uv_timer_t *t)
{
    jrpc_replay_t *r = t->data;
    if (r->head == NULL || uv_hrtime() - r->head->sent_ns < r->timeout_ns)
        return;
    conn_drop(r, true, r->up ? "timeout" : "connect_timeout", "no answer in time");
}

static bool reply_is(const redisReply *rep, const char *status)
{
    return rep->type == REDIS_REPLY_STATUS && strcmp(rep->str, status) == 0;
}

static int claim_result(jrpc_replay_t *r, const redisReply *rep)
{
    if (reply_is(rep, "OK"))
        return 0;
    if (rep->type == REDIS_REPLY_NIL)
        return -EEXIST;
    int level = r->warned_reply ? JRPC_LOG_DEBUG : JRPC_LOG_WARN;
    r->warned_reply = true;
    JRPC_LOG(level, COMP, "event=unexpected_reply target=%s type=%d error=\"%.200s\"", r->target,
             rep->type, rep->type == REDIS_REPLY_ERROR ? rep->str : "-");
    return -EAGAIN;
}

/* The one reply callback for everything we send (privdata unused: the
 * owner is ac->data, NULL once we have detached the connection). */
static void on_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
    jrpc_replay_t *r = ac->data;
    if (r == NULL)
        return;
    redisReply *rep = reply;
    if (rep == NULL) {
        conn_drop(r, false, "disconnected", ac->errstr);
        return;
    }
    pending_t *p = fifo_pop(r);
    assert(p != NULL);  /* one FIFO entry per command hiredis accepted */
    if (p == NULL)
        return;
    if (p->kind == CMD_CLAIM) {
        int rc = claim_result(r, rep);
        uint64_t rtt_ns = jrpc_metrics_tick() - p->sent_ns;
        uint64_t rtt_us = rtt_ns / 1000;
        jrpc_hist_observe(&jrpc_metrics.redis_rtt, rtt_ns);
        r->st.rtt_us_sum += rtt_us;
        r->st.rtt_count++;
        if (rc == 0)
            r->st.claims++;
        else if (rc == -EEXIST)
            r->st.replays++;
        else
            r->st.failures++;
        jrpc_replay_cb cb = p->cb;
        void *arg = p->arg;
        free(p);
        cb(arg, rc);   /* may claim again or destroy r */
        return;
    }

    enum cmd_kind kind = p->kind;
    free(p);
    if (kind == CMD_PING && reply_is(rep, "PONG")) {
        r->up = true;
        r->backoff_ms = BACKOFF_MIN_MS;
        JRPC_LOG(JRPC_LOG_INFO, COMP, "event=up target=%s db=%lu attempts=%llu", r->target, r->db,
                 (unsigned long long)r->attempts);
        return;
    }
    if ((kind == CMD_AUTH || kind == CMD_SELECT) && reply_is(rep, "OK"))
        return;
    /* Redis' own error text, which never contains the password. */
    const char *why = rep->type == REDIS_REPLY_ERROR || rep->type == REDIS_REPLY_STATUS
                      ? rep->str : "unexpected reply type";
    const char *event = kind == CMD_AUTH ? "auth_failed" : kind == CMD_SELECT ? "select_failed"
                                                                              : "ping_failed";
    JRPC_LOG(JRPC_LOG_ERROR, COMP, "event=%s target=%s db=%lu reason=\"%.200s\"", event,
             r->target, r->db, why);
    conn_drop(r, true, "handshake_failed", event);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    jrpc_replay_t *r = ac->data;
    if (r == NULL)
        return;
    if (status == REDIS_OK) {
        JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=connected target=%s", r->target);
        return;
    }
    /* hiredis frees the context right after this callback returns. */
    conn_drop(r, false, "connect_failed", ac->errstr);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    jrpc_replay_t *r = ac->data;
    if (r == NULL)
        return;
    conn_drop(r, false, "disconnected", ac->errstr[0] ? ac->errstr : "closed");
}

/* Queues one command on the current connection. Returns 0 or a negative errno. */
static int send_cmd(jrpc_replay_t *r, pending_t *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = redisvAsyncCommand(r->ac, on_reply, NULL, fmt, ap);
    va_end(ap);
    if (rc != REDIS_OK)
        return -EAGAIN;
    fifo_push(r, p);
    return 0;
}

static int send_handshake(jrpc_replay_t *r, enum cmd_kind kind, uint64_t now)
{
    pending_t *p = calloc(1, sizeof *p);
    if (p == NULL)
        return -ENOMEM;
    p->kind = kind;
    p->sent_ns = now;
    int rc;
    if (kind == CMD_AUTH && r->user != NULL)
        rc = send_cmd(r, p, "AUTH %b %b", r->user, r->user_n, r->pass, r->pass_n);
    else if (kind == CMD_AUTH)
        rc = send_cmd(r, p, "AUTH %b", r->pass, r->pass_n);
    else if (kind == CMD_SELECT)
        rc = send_cmd(r, p, "SELECT %s", r->dbs);
    else
        rc = send_cmd(r, p, "PING");
    if (rc < 0)
        free(p);
    return rc;
}

/* Starts a connection and pipelines the handshake (AUTH, SELECT, PING)
 * before anything else. Runs from the retry timer, never from hiredis. */
static void conn_start(jrpc_replay_t *r)
{
    assert(r->ac == NULL && r->head == NULL);
    if (r->attempts++ > 0)
        r->st.reconnects++;
    JRPC_LOG(r->attempts > 1 ? JRPC_LOG_DEBUG : JRPC_LOG_INFO, COMP,
             "event=connecting target=%s attempt=%llu", r->target,
             (unsigned long long)r->attempts);
    redisAsyncContext *ac = r->path ? redisAsyncConnectUnix(r->path)
                                    : redisAsyncConnect(r->host, r->port);
    if (ac == NULL || ac->err) {
        JRPC_LOG(JRPC_LOG_WARN, COMP, "event=connect_failed target=%s retry_ms=%llu error=\"%s\"",
                 r->target, (unsigned long long)r->backoff_ms, ac ? ac->errstr : "out of memory");
        if (ac != NULL)
            redisAsyncFree(ac);
        schedule_retry(r);
        return;
    }
    if (redisLibuvAttach(ac, r->loop) != REDIS_OK) {
        JRPC_LOG(JRPC_LOG_WARN, COMP, "event=connect_failed target=%s error=\"libuv attach\"",
                 r->target);
        redisAsyncFree(ac);
        schedule_retry(r);
        return;
    }
    ac->data = r;
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    r->ac = ac;
    r->warned_reply = false;

    /* The handshake's age is measured from now, so a connect that never
     * completes (the libuv adapter ignores poll errors such as a refused
     * connect) times out through the watchdog like any command. */
    uint64_t now = uv_hrtime();
    int rc = 0;
    if (r->pass != NULL)
        rc = send_handshake(r, CMD_AUTH, now);
    if (rc == 0 && r->db != 0)
        rc = send_handshake(r, CMD_SELECT, now);
    if (rc == 0)
        rc = send_handshake(r, CMD_PING, now);
    uint64_t tick = r->timeout_ns / 4000000;
    tick = tick < 5 ? 5 : tick > 250 ? 250 : tick;
    uv_timer_start(&r->watchdog, on_watchdog, tick, tick);
    if (rc < 0)
        conn_drop(r, true, "connect_failed", "cannot queue the handshake");
}

/* ---- API ----------------------------------------------------------------- */

static void free_self(jrpc_replay_t *r)
{
    free(r->host);
    free(r->path);
    free(r->user);
    if (r->pass != NULL)
        explicit_bzero(r->pass, r->pass_n);
    free(r->pass);
    free(r);
}

int jrpc_replay_check_url(const char *url, char *err, size_t errlen)
{
    jrpc_replay_t *r = calloc(1, sizeof *r);
    if (r == NULL) {
        jrpc_errf(err, errlen, "--redis: out of memory");
        return -ENOMEM;
    }
    int rc = parse_url(r, url, err, errlen);
    free_self(r);
    return rc;
}

static void on_timer_closed(uv_handle_t *h)
{
    jrpc_replay_t *r = h->data;
    if (--r->nclosing == 0)
        free_self(r);
}

jrpc_replay_t *jrpc_replay_new(uv_loop_t *loop, const jrpc_replay_opts_t *opts,
                               char *err, size_t errlen)
{
    assert(loop != NULL && opts != NULL);
    jrpc_errf(err, errlen, "no error");
    if (opts->window_s == 0 || opts->timeout_ms == 0) {
        jrpc_errf(err, errlen, "replay: window_s and timeout_ms must be > 0");
        return NULL;
    }
    jrpc_replay_t *r = calloc(1, sizeof *r);
    if (r == NULL) {
        jrpc_errf(err, errlen, "replay: out of memory");
        return NULL;
    }
    if (parse_url(r, opts->url, err, errlen) < 0) {
        free_self(r);
        return NULL;
    }
    r->loop = loop;
    r->timeout_ns = (uint64_t)opts->timeout_ms * 1000000;
    r->backoff_ms = BACKOFF_MIN_MS;
    snprintf(r->ttl, sizeof r->ttl, "%llu", 2ULL * opts->window_s);
    snprintf(r->dbs, sizeof r->dbs, "%lu", r->db);
    uv_timer_init(loop, &r->watchdog);
    uv_timer_init(loop, &r->retry);
    r->watchdog.data = r->retry.data = r;
    /* Background work: the module alone must not keep the loop alive. */
    uv_unref((uv_handle_t *)&r->watchdog);
    uv_unref((uv_handle_t *)&r->retry);
    uv_timer_start(&r->retry, on_retry, 0, 0);
    return r;
}

void jrpc_replay_destroy(jrpc_replay_t **self_p)
{
    if (self_p == NULL || *self_p == NULL)
        return;
    jrpc_replay_t *r = *self_p;
    *self_p = NULL;
    assert(!r->closing);
    r->closing = true;
    redisAsyncContext *ac = r->ac;
    pending_t *list = r->head;
    r->ac = NULL;
    r->head = r->tail = NULL;
    r->npending = 0;
    r->up = false;
    if (ac != NULL) {
        ac->data = NULL;
        redisAsyncFree(ac);   /* deferred by hiredis when inside one of its callbacks */
    }
    r->nclosing = 2;
    uv_close((uv_handle_t *)&r->watchdog, on_timer_closed);
    uv_close((uv_handle_t *)&r->retry, on_timer_closed);
    JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=closed target=%s", r->target);
    fail_list(r, list, -ECANCELED);
}

int jrpc_replay_claim(jrpc_replay_t *r, jrpc_span_t key, jrpc_span_t nonce,
                      jrpc_replay_cb cb, void *arg)
{
    assert(r != NULL && cb != NULL && !r->closing);
    if (!r->up || r->ac == NULL) {
        r->st.failures++;
        return -EAGAIN;
    }
    pending_t *p = calloc(1, sizeof *p);
    if (p == NULL)
        return -ENOMEM;
    p->kind = CMD_CLAIM;
    p->cb = cb;
    p->arg = arg;
    p->sent_ns = uv_hrtime();
    /* %b: binary-safe, the spans need no NUL. */
    int rc = send_cmd(r, p, "SET jrpc:nonce:%b:%b 1 NX EX %s",
                      key.n ? key.p : "", key.n, nonce.n ? nonce.p : "", nonce.n, r->ttl);
    if (rc < 0) {
        free(p);
        r->st.failures++;
        return rc;
    }
    return 0;
}

bool jrpc_replay_up(const jrpc_replay_t *r)
{
    return r->up;
}

void jrpc_replay_stats(const jrpc_replay_t *r, jrpc_replay_stats_t *st)
{
    *st = r->st;
}
