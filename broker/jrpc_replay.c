/* jrpc_replay — nonces claimed in Redis, one script call per body, and an
 * epoch that tells when Redis lost its memory.
 *
 * The client is our own, on libuv: a non-blocking hiredis redisContext
 * gives the connect (TCP or unix socket), the output buffer and the reply
 * reader; a uv_poll_t on its socket drives reads and writes; every reply is
 * matched against our FIFO of sent commands (`pending`), oldest first. We do
 * not use hiredis' async API: in 0.14 a reply that arrives when no callback
 * is queued trips an assert() in redisProcessCallbacks, so one unsolicited
 * "+OK" (a broken proxy, an on-path attacker) aborted the broker. Here a
 * reply with no command waiting, or one that does not answer the command at
 * the head (the script echoes a per-connection tag), is a desynchronised
 * connection: it is dropped, every pending claim fails closed (-EAGAIN), and
 * the retry timer reconnects. The FIFO also gives the command timeout (a
 * watchdog looks at the age of the head).
 *
 * Every claim is one EVALSHA of CLAIM_LUA: it reads the epoch key, creates
 * it if missing (SET only when absent, inside the script, so several
 * brokers converge on one value), and claims the nonce only when the epoch
 * is the one this broker knows. The epoch value is "<32 hex>:<unix s>", the
 * seconds being when the broker that wrote it noticed the loss (0 when a
 * broker found a Redis with no epoch at its first connect: a new Redis, as
 * far as anyone can tell). When the epoch differs from ours, Redis lost
 * what we had written (restart without persistence, FLUSHALL, failover to
 * an empty replica): we adopt the new value and refuse every body whose
 * signed timestamp is <= loss + window, since such a body may have been
 * claimed before the loss and still be inside its window. Times are the
 * brokers' wall clocks (the clock that checks the timestamps), never
 * Redis' TIME.
 *
 * States: down (conn == NULL, retry timer armed), connecting (conn set, the
 * handshake AUTH/SELECT/SCRIPT LOAD/hello in the FIFO), up (hello answered).
 * Claims are accepted only when up; otherwise they fail at once with -EAGAIN. */
#include "jrpc_replay.h"
#include "jrpc_errors.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "jrpc_log.h"
#include "jrpc_metrics.h"

#define COMP "replay"
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 2000
#define UNIX_PATH_MAX 108     /* sizeof(struct sockaddr_un.sun_path) on Linux */
#define EPOCH_KEY "jrpc:epoch"
#define EPOCH_MAX 64          /* longest epoch value we accept from Redis */
#define MAX_ELEMENTS 8        /* our replies have at most 3; bigger arrays are refused unbuilt */
#define MAX_BUFFERED (1u << 20) /* unparsed reply bytes before the connection is dropped */

/* KEYS[1] the epoch key, KEYS[2] the nonce key (absent: hello, which only
 * reads or creates the epoch). ARGV: known epoch ("" before the first),
 * proposal (written when the epoch is missing), TTL seconds, tag (echoed so
 * a reply is matched to its command). Replies: {tag,'OK'}, {tag,'DUP'},
 * {tag,'EPOCH',value}. */
static const char CLAIM_LUA[] =
    "local e = redis.call('GET', KEYS[1]) "
    "if not e then redis.call('SET', KEYS[1], ARGV[2]) e = ARGV[2] end "
    "if e ~= ARGV[1] or #KEYS < 2 then return {ARGV[4], 'EPOCH', e} end "
    "if redis.call('SET', KEYS[2], '1', 'NX', 'EX', ARGV[3]) then return {ARGV[4], 'OK'} end "
    "return {ARGV[4], 'DUP'}";

enum cmd_kind { CMD_CLAIM, CMD_AUTH, CMD_SELECT, CMD_LOAD, CMD_HELLO };

/* One command written to the current connection and not yet answered. */
typedef struct pending {
    struct pending *next;     /* younger command */
    uint64_t        sent_ns;  /* uv_hrtime() when queued (connect start for the handshake) */
    uint64_t        tag;      /* echoed by the script (claims and hello) */
    int64_t         ts;       /* the body's signed timestamp (claims) */
    jrpc_replay_cb  cb;       /* caller's callback (claims only) */
    void           *arg;      /* its argument */
    enum cmd_kind   kind;     /* what the reply answers */
} pending_t;

/* One connection. Registered with the loop, so freed from its close callback. */
typedef struct conn {
    uv_poll_t      poll;      /* on c->fd; first, so the close callback finds the conn; data = r */
    redisContext  *c;         /* non-blocking context: fd, output buffer, reader */
    redisReader   *rd;        /* where replies are parsed: c->reader (the fuzz target: its own) */
    bool           polled;    /* poll initialised: closed through uv_close() */
    bool           connected; /* the socket's connect completed */
    bool           writing;   /* UV_WRITABLE requested */
} conn_t;

struct jrpc_replay {
    uv_loop_t         *loop;        /* borrowed */
    uv_timer_t         watchdog;    /* fails the FIFO when its head is too old */
    uv_timer_t         retry;       /* (re)connects after the backoff */
    conn_t            *conn;        /* current connection, NULL while down */
    pending_t         *head;        /* oldest unanswered command on conn */
    pending_t         *tail;        /* youngest */
    size_t             npending;    /* length of the FIFO */
    bool               up;          /* handshake answered, claims accepted */
    bool               closing;     /* destroy called; freed when nclosing hits 0 */
    bool               warned_reply;/* an error reply to a claim was logged on this connection */
    bool               had_epoch;   /* epoch holds a value read from Redis */
    int                nclosing;    /* our handles still closing */
    uint64_t           backoff_ms;  /* delay before the next reconnect */
    uint64_t           attempts;    /* connection attempts started */
    uint64_t           timeout_ns;  /* opts->timeout_ms in ns */
    uint64_t           next_tag;    /* tag of the next script call on this connection */
    uint32_t           window_s;    /* opts->window_s */
    int64_t            refuse_to;   /* bodies signed at or before this are refused (INT64_MIN: none) */
    int64_t            lost_at;     /* when Redis last lost its memory, as far as we know (0: never) */
    char               epoch[EPOCH_MAX + 1]; /* the epoch value we know, "" before the first */
    char               id[33];      /* random, this process: the first half of our proposals */
    char               sha[41];     /* SCRIPT LOAD's answer on this connection */
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

/* ---- reply objects ------------------------------------------------------- */

/* hiredis' own reply functions, except that arrays longer than ours can be
 * are refused before they are allocated (a "*2000000000" header would
 * otherwise ask calloc for 16 GB): the reader then reports an error. */
static redisReplyObjectFunctions reply_fns;          /* what our readers use */
static const redisReplyObjectFunctions *default_fns; /* hiredis' own, copied once */

static void *create_array(const redisReadTask *task, int elements)
{
    if (elements > MAX_ELEMENTS)
        return NULL;
    return default_fns->createArray(task, elements);
}

static int init_reply_fns(void)
{
    static redisReplyObjectFunctions defaults;
    if (default_fns != NULL)
        return 0;
    redisReader *rd = redisReaderCreate();
    if (rd == NULL)
        return -ENOMEM;
    defaults = *rd->fn;
    redisReaderFree(rd);
    default_fns = &defaults;
    reply_fns = defaults;
    reply_fns.createArray = create_array;
    return 0;
}

/* ---- connection ---------------------------------------------------------- */

static void on_conn_closed(uv_handle_t *h)
{
    conn_t *conn = (conn_t *)h;   /* poll is the first member */
    redisFree(conn->c);   /* closes the socket, after libuv let go of it */
    free(conn);
}

static void conn_close(conn_t *conn)
{
    if (conn->polled) {
        uv_close((uv_handle_t *)&conn->poll, on_conn_closed);
        return;
    }
    if (conn->c != NULL)
        redisFree(conn->c);
    else
        redisReaderFree(conn->rd);
    free(conn);
}

static void schedule_retry(jrpc_replay_t *r)
{
    if (r->closing)
        return;
    uint64_t delay = r->backoff_ms;
    r->backoff_ms = delay * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : delay * 2;
    uv_timer_start(&r->retry, on_retry, delay, 0);
}

/* Gives up the current connection: detaches it and the FIFO, closes it,
 * fails every pending claim with -EAGAIN, arms the reconnect. Safe from
 * inside the reply loop: the loop stops when r->conn changes. */
static void conn_drop(jrpc_replay_t *r, const char *event, const char *error)
{
    conn_t *conn = r->conn;
    pending_t *list = r->head;
    size_t n = r->npending;
    bool was_up = r->up;

    r->conn = NULL;
    r->head = r->tail = NULL;
    r->npending = 0;
    r->up = false;
    uv_timer_stop(&r->watchdog);
    if (conn != NULL)
        conn_close(conn);
    JRPC_LOG(JRPC_LOG_WARN, COMP, "event=%s target=%s was_up=%d pending=%zu retry_ms=%llu error=\"%.200s\"",
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
    conn_drop(r, r->up ? "timeout" : "connect_timeout", "no answer in time");
}

/* ---- replies ------------------------------------------------------------- */

static bool reply_is(const redisReply *rep, const char *status)
{
    return rep->type == REDIS_REPLY_STATUS && strcmp(rep->str, status) == 0;
}

static bool str_is(const redisReply *rep, const char *s)
{
    return (rep->type == REDIS_REPLY_STRING || rep->type == REDIS_REPLY_STATUS) &&
           rep->len == strlen(s) && memcmp(rep->str, s, rep->len) == 0;
}

/* Checks a script reply {tag, word[, value]} for pending p. Returns the
 * word's element (OK, DUP, EPOCH) or NULL when the reply is not an answer to
 * p: a desynchronised connection. */
static const redisReply *script_word(const redisReply *rep, const pending_t *p)
{
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 2 || rep->elements > 3)
        return NULL;
    const redisReply *tag = rep->element[0], *word = rep->element[1];
    char want[24];
    snprintf(want, sizeof want, "%llu", (unsigned long long)p->tag);
    if (tag->type != REDIS_REPLY_STRING || !str_is(tag, want) || word->type != REDIS_REPLY_STRING)
        return NULL;
    if (rep->elements == 2 && (str_is(word, "OK") || str_is(word, "DUP")))
        return word;
    if (rep->elements == 3 && str_is(word, "EPOCH") &&
        rep->element[2]->type == REDIS_REPLY_STRING)
        return word;
    return NULL;
}

/* The seconds after the last ':' of an epoch value, or -1 when malformed. */
static int64_t epoch_time(const char *v, size_t n)
{
    const char *colon = NULL;
    for (size_t i = 0; i < n; i++)
        if (v[i] == ':')
            colon = v + i;
    if (colon == NULL || colon + 1 == v + n || v + n - colon - 1 > 18)
        return -1;
    int64_t t = 0;
    for (const char *p = colon + 1; p < v + n; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        t = t * 10 + (*p - '0');
    }
    return t;
}

/* Takes the epoch value Redis holds now. Returns 0, or -EPROTO when the
 * value cannot be ours to send back (empty or too long). */
static int adopt_epoch(jrpc_replay_t *r, const char *v, size_t n)
{
    if (n == 0 || n > EPOCH_MAX || memchr(v, '\0', n) != NULL)
        return -EPROTO;
    if (r->had_epoch && strlen(r->epoch) == n && memcmp(r->epoch, v, n) == 0)
        return 0;
    int64_t now = (int64_t)time(NULL);
    int64_t t = epoch_time(v, n);
    /* The loss happened before we read this, so never later than now: a
     * writer whose clock runs ahead (or a bogus value) cannot make us
     * refuse for longer than one window from now. On our first connect a
     * time of 0 means "never lost" (a new Redis, as far as anyone knows);
     * once we knew an epoch, a different one means lost by now at the latest. */
    int64_t lost;
    if (t < 0 || t > now)
        lost = now;
    else if (t == 0)
        lost = r->had_epoch ? now : 0;
    else
        lost = t;
    memcpy(r->epoch, v, n);
    r->epoch[n] = '\0';
    bool changed = r->had_epoch;
    r->had_epoch = true;
    if (lost > 0) {
        int64_t until = lost + (int64_t)r->window_s;
        if (until > r->refuse_to)
            r->refuse_to = until;
        if (lost > r->lost_at)
            r->lost_at = lost;
        r->st.epoch_changes += changed;
    }
    bool recent = lost > 0 && r->refuse_to >= now - (int64_t)r->window_s;
    JRPC_LOG(changed || recent ? JRPC_LOG_WARN : JRPC_LOG_INFO, COMP,
             "event=%s target=%s lost_at=%lld refuse_signed_until=%lld",
             changed ? "memory_lost" : "epoch", r->target, (long long)(lost > 0 ? lost : 0),
             (long long)(lost > 0 ? r->refuse_to : 0));
    return 0;
}

/* The claim's answer: 0, -EEXIST, -EAGAIN, -ESTALE; or 1 when the reply
 * does not answer this claim (the connection must go). */
static int claim_result(jrpc_replay_t *r, const redisReply *rep, const pending_t *p)
{
    if (rep->type == REDIS_REPLY_ERROR) {
        int level = r->warned_reply ? JRPC_LOG_DEBUG : JRPC_LOG_WARN;
        r->warned_reply = true;
        JRPC_LOG(level, COMP, "event=error_reply target=%s error=\"%.200s\"", r->target, rep->str);
        /* NOSCRIPT (SCRIPT FLUSH): the next connection loads it again. */
        return strncmp(rep->str, "NOSCRIPT", 8) == 0 ? 1 : -EAGAIN;
    }
    const redisReply *word = script_word(rep, p);
    if (word == NULL)
        return 1;
    if (str_is(word, "OK"))
        return 0;
    if (str_is(word, "DUP"))
        return -EEXIST;
    const redisReply *v = rep->element[2];
    if (adopt_epoch(r, v->str, v->len) < 0)
        return 1;
    return p->ts <= r->refuse_to ? -ESTALE : -EAGAIN;
}

static void handle_claim(jrpc_replay_t *r, pending_t *p, const redisReply *rep)
{
    int rc = claim_result(r, rep, p);
    uint64_t rtt_ns = jrpc_metrics_tick() - p->sent_ns;
    jrpc_hist_observe(&jrpc_metrics.redis_rtt, rtt_ns);
    r->st.rtt_us_sum += rtt_ns / 1000;
    r->st.rtt_count++;
    if (rc == 0)
        r->st.claims++;
    else if (rc == -EEXIST)
        r->st.replays++;
    else if (rc == -ESTALE)
        r->st.stale++;
    else
        r->st.failures++;
    jrpc_replay_cb cb = p->cb;
    void *arg = p->arg;
    free(p);
    if (rc == 1) {
        /* Unanswered for sure: fail it closed with the rest of the FIFO. */
        conn_drop(r, "desync", "a reply that does not answer the command sent");
        cb(arg, -EAGAIN);
        return;
    }
    cb(arg, rc);   /* may claim again or destroy r */
}

static void handle_handshake(jrpc_replay_t *r, pending_t *p, const redisReply *rep)
{
    enum cmd_kind kind = p->kind;
    const redisReply *word = kind == CMD_HELLO ? script_word(rep, p) : NULL;
    free(p);
    if (kind == CMD_HELLO && word != NULL && str_is(word, "EPOCH") &&
        adopt_epoch(r, rep->element[2]->str, rep->element[2]->len) == 0) {
        r->up = true;
        r->backoff_ms = BACKOFF_MIN_MS;
        JRPC_LOG(JRPC_LOG_INFO, COMP, "event=up target=%s db=%lu attempts=%llu", r->target, r->db,
                 (unsigned long long)r->attempts);
        return;
    }
    if (kind == CMD_LOAD && rep->type == REDIS_REPLY_STRING && rep->len == 40) {
        memcpy(r->sha, rep->str, 40);
        r->sha[40] = '\0';
        return;
    }
    if ((kind == CMD_AUTH || kind == CMD_SELECT) && reply_is(rep, "OK"))
        return;
    /* Redis' own error text, which never contains the password. */
    const char *why = rep->type == REDIS_REPLY_ERROR || rep->type == REDIS_REPLY_STATUS
                      ? rep->str : "unexpected reply";
    const char *event = kind == CMD_AUTH ? "auth_failed" : kind == CMD_SELECT ? "select_failed"
                      : kind == CMD_LOAD ? "script_load_failed" : "epoch_failed";
    JRPC_LOG(JRPC_LOG_ERROR, COMP, "event=%s target=%s db=%lu reason=\"%.200s\"", event,
             r->target, r->db, why);
    conn_drop(r, "handshake_failed", event);
}

/* Matches every complete reply in conn's reader with the head of the FIFO.
 * Stops when the connection is dropped (a callback may even destroy r,
 * which stays allocated until its close callbacks). */
static void process_replies(jrpc_replay_t *r, conn_t *conn)
{
    while (r->conn == conn) {
        void *reply = NULL;
        if (redisReaderGetReply(conn->rd, &reply) != REDIS_OK) {
            char why[sizeof conn->rd->errstr];
            snprintf(why, sizeof why, "%s", conn->rd->errstr);
            conn_drop(r, "protocol_error", why);
            return;
        }
        if (reply == NULL)
            break;
        pending_t *p = fifo_pop(r);
        if (p == NULL) {
            freeReplyObject(reply);
            conn_drop(r, "desync", "a reply with no command waiting");
            return;
        }
        if (p->kind == CMD_CLAIM)
            handle_claim(r, p, reply);
        else
            handle_handshake(r, p, reply);
        freeReplyObject(reply);
    }
    if (r->conn == conn && conn->rd->len - conn->rd->pos > MAX_BUFFERED)
        conn_drop(r, "protocol_error", "reply too large");
}

static void set_writing(conn_t *conn, bool on);

static void on_poll(uv_poll_t *h, int status, int events)
{
    jrpc_replay_t *r = h->data;
    conn_t *conn = r->conn;
    assert(conn != NULL && &conn->poll == h);
    if (status < 0) {
        conn_drop(r, conn->connected ? "disconnected" : "connect_failed", uv_strerror(status));
        return;
    }
    if (!conn->connected) {
        if (!(events & UV_WRITABLE))
            return;
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(conn->c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
            err = errno;
        if (err != 0) {
            conn_drop(r, "connect_failed", strerror(err));
            return;
        }
        conn->connected = true;
        JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=connected target=%s", r->target);
    }
    if (events & UV_WRITABLE) {
        int done = 0;
        if (redisBufferWrite(conn->c, &done) != REDIS_OK) {
            conn_drop(r, "disconnected", conn->c->errstr);
            return;
        }
        if (done)
            set_writing(conn, false);
    }
    if (events & UV_READABLE) {
        if (redisBufferRead(conn->c) != REDIS_OK) {
            /* Replies read before the error still answer their commands. */
            process_replies(r, conn);
            if (r->conn == conn)
                conn_drop(r, "disconnected", conn->c->errstr);
            return;
        }
        process_replies(r, conn);
    }
}

static void set_writing(conn_t *conn, bool on)
{
    if (!conn->polled || conn->writing == on)
        return;
    conn->writing = on;
    uv_poll_start(&conn->poll, UV_READABLE | (on ? UV_WRITABLE : 0), on_poll);
}

/* Queues one command on the current connection. Returns 0 or a negative errno. */
static int send_cmd(jrpc_replay_t *r, pending_t *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = redisvAppendCommand(r->conn->c, fmt, ap);
    va_end(ap);
    if (rc != REDIS_OK)
        return -ENOMEM;
    fifo_push(r, p);
    set_writing(r->conn, true);
    return 0;
}

/* "<id>:<seconds>", what we write when the epoch key is missing: the time
 * Redis lost its memory at the latest (0 before we ever saw an epoch). */
static void proposal(const jrpc_replay_t *r, char *buf, size_t n)
{
    snprintf(buf, n, "%s:%lld", r->id, r->had_epoch ? (long long)time(NULL) : 0LL);
}

static int send_handshake(jrpc_replay_t *r, enum cmd_kind kind, uint64_t now)
{
    pending_t *p = calloc(1, sizeof *p);
    if (p == NULL)
        return -ENOMEM;
    p->kind = kind;
    p->sent_ns = now;
    int rc;
    if (kind == CMD_AUTH && r->user != NULL) {
        rc = send_cmd(r, p, "AUTH %b %b", r->user, r->user_n, r->pass, r->pass_n);
    } else if (kind == CMD_AUTH) {
        rc = send_cmd(r, p, "AUTH %b", r->pass, r->pass_n);
    } else if (kind == CMD_SELECT) {
        rc = send_cmd(r, p, "SELECT %s", r->dbs);
    } else if (kind == CMD_LOAD) {
        rc = send_cmd(r, p, "SCRIPT LOAD %s", CLAIM_LUA);
    } else {
        char prop[EPOCH_MAX + 1], tag[24];
        proposal(r, prop, sizeof prop);
        p->tag = r->next_tag++;
        snprintf(tag, sizeof tag, "%llu", (unsigned long long)p->tag);
        rc = send_cmd(r, p, "EVAL %s 1 " EPOCH_KEY " %s %s %s %s", CLAIM_LUA, r->epoch, prop,
                      r->ttl, tag);
    }
    if (rc < 0)
        free(p);
    return rc;
}

/* Starts a connection and pipelines the handshake (AUTH, SELECT, SCRIPT
 * LOAD, the epoch) before anything else. Runs from the retry timer. */
static void conn_start(jrpc_replay_t *r)
{
    assert(r->conn == NULL && r->head == NULL);
    if (r->attempts++ > 0)
        r->st.reconnects++;
    JRPC_LOG(r->attempts > 1 ? JRPC_LOG_DEBUG : JRPC_LOG_INFO, COMP,
             "event=connecting target=%s attempt=%llu", r->target,
             (unsigned long long)r->attempts);
    redisContext *c = r->path ? redisConnectUnixNonBlock(r->path)
                              : redisConnectNonBlock(r->host, r->port);
    conn_t *conn = c != NULL && !c->err ? calloc(1, sizeof *conn) : NULL;
    if (conn == NULL) {
        JRPC_LOG(JRPC_LOG_WARN, COMP, "event=connect_failed target=%s retry_ms=%llu error=\"%s\"",
                 r->target, (unsigned long long)r->backoff_ms,
                 c && c->err ? c->errstr : "out of memory");
        redisFree(c);
        schedule_retry(r);
        return;
    }
    conn->c = c;
    conn->rd = c->reader;
    conn->rd->fn = &reply_fns;
    if (uv_poll_init_socket(r->loop, &conn->poll, c->fd) < 0) {
        JRPC_LOG(JRPC_LOG_WARN, COMP, "event=connect_failed target=%s error=\"uv_poll_init\"",
                 r->target);
        redisFree(c);
        free(conn);
        schedule_retry(r);
        return;
    }
    conn->polled = true;
    conn->poll.data = r;
    r->conn = conn;
    r->warned_reply = false;
    r->next_tag = 1;
    r->sha[0] = '\0';

    /* The handshake's age is measured from now, so a connect that never
     * completes times out through the watchdog like any command. */
    uint64_t now = uv_hrtime();
    int rc = 0;
    if (r->pass != NULL)
        rc = send_handshake(r, CMD_AUTH, now);
    if (rc == 0 && r->db != 0)
        rc = send_handshake(r, CMD_SELECT, now);
    if (rc == 0)
        rc = send_handshake(r, CMD_LOAD, now);
    if (rc == 0)
        rc = send_handshake(r, CMD_HELLO, now);
    uint64_t tick = r->timeout_ns / 4000000;
    tick = tick < 5 ? 5 : tick > 250 ? 250 : tick;
    uv_timer_start(&r->watchdog, on_watchdog, tick, tick);
    if (rc < 0)
        conn_drop(r, "connect_failed", "cannot queue the handshake");
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
    unsigned char rnd[16];
    jrpc_replay_t *r = calloc(1, sizeof *r);
    if (r == NULL || init_reply_fns() < 0) {
        free(r);
        jrpc_errf(err, errlen, "replay: out of memory");
        return NULL;
    }
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        free(r);
        jrpc_errf(err, errlen, "replay: getrandom: %s", strerror(errno));
        return NULL;
    }
    if (parse_url(r, opts->url, err, errlen) < 0) {
        free_self(r);
        return NULL;
    }
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(r->id + 2 * i, 3, "%02x", rnd[i]);
    r->loop = loop;
    r->timeout_ns = (uint64_t)opts->timeout_ms * 1000000;
    r->window_s = opts->window_s;
    r->refuse_to = INT64_MIN;
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
    conn_t *conn = r->conn;
    pending_t *list = r->head;
    r->conn = NULL;
    r->head = r->tail = NULL;
    r->npending = 0;
    r->up = false;
    if (conn != NULL)
        conn_close(conn);
    r->nclosing = 2;
    uv_close((uv_handle_t *)&r->watchdog, on_timer_closed);
    uv_close((uv_handle_t *)&r->retry, on_timer_closed);
    JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=closed target=%s", r->target);
    fail_list(r, list, -ECANCELED);
}

int jrpc_replay_claim(jrpc_replay_t *r, jrpc_span_t key, jrpc_span_t nonce, int64_t ts,
                      jrpc_replay_cb cb, void *arg)
{
    assert(r != NULL && cb != NULL && !r->closing);
    if (!r->up || r->conn == NULL) {
        r->st.failures++;
        return -EAGAIN;
    }
    if (ts <= r->refuse_to) {
        r->st.stale++;
        return -ESTALE;
    }
    pending_t *p = calloc(1, sizeof *p);
    if (p == NULL)
        return -ENOMEM;
    p->kind = CMD_CLAIM;
    p->cb = cb;
    p->arg = arg;
    p->ts = ts;
    p->sent_ns = uv_hrtime();
    p->tag = r->next_tag++;
    char prop[EPOCH_MAX + 1], tag[24];
    proposal(r, prop, sizeof prop);
    snprintf(tag, sizeof tag, "%llu", (unsigned long long)p->tag);
    /* %b: binary-safe, the spans need no NUL. */
    int rc = send_cmd(r, p, "EVALSHA %s 2 " EPOCH_KEY " jrpc:nonce:%b:%b %s %s %s %s", r->sha,
                      key.n ? key.p : "", key.n, nonce.n ? nonce.p : "", nonce.n, r->epoch, prop,
                      r->ttl, tag);
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

int64_t jrpc_replay_lost_at(const jrpc_replay_t *r)
{
    return r->lost_at;
}

int64_t jrpc_replay_refuse_to(const jrpc_replay_t *r)
{
    return r->refuse_to;
}

void jrpc_replay_stats(const jrpc_replay_t *r, jrpc_replay_stats_t *st)
{
    *st = r->st;
}
