/* jrpc_replay_int — the state the files of jrpc_replay share.
 *
 * Internal to broker/guard: not installed, and included only by the three
 * files of the module and their tests. jrpc_replay is one module (one
 * public header, jrpc_replay.h) in three files, one job each:
 *
 *   jrpc_redis.c   the link to Redis: connecting (a fixed address, or the
 *                  master found through Sentinel), the handshake, reconnects
 *                  and the watchdog, the reply objects, and the writes
 *   jrpc_replay.c  what is asked of Redis and what its answers mean (each
 *                  reply matched with the FIFO's head): the claim scripts
 *                  (nonces, rate limits, idempotency keys), the epoch that
 *                  fences off a memory loss, WAIT, the API
 *   jrpc_replay_group.c  several claims in one script: the claims of a loop
 *                  turn batched, written as one EVALSHA (its RESP bytes),
 *                  and its answer split into one verdict per claim
 *
 * The hot paths stay within the module's two claim files: a claim queued
 * (claim, then batch_push), the batch written (batch_write, resp_format),
 * the replies read (process_replies, handle_multi); the link
 * calls into them once per write and once per read (a claim whose keys do
 * not fit the batch's buffers is queued through the link's send_argv). The FIFO
 * of commands sent (one pending_t each) is here, as static inline: every
 * file queues on it, every command once.
 *
 * The functions one file lends the others are declared at the end, each
 * described where it is defined, under the names they had as static
 * functions of one file (the unit test and the fuzz target compile the
 * files in and call them by these names): they are seen by the broker only,
 * as nothing outside broker/guard includes this. */
#ifndef JRPC_REPLAY_INT_H
#define JRPC_REPLAY_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "jrpc_replay.h"
#include "jrpc_sentinel.h"

#define COMP "replay"
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 2000
/* With Sentinel a failover is expected and asking a sentinel is cheap: a
 * lower ceiling shortens the 503s after the new master is announced. */
#define BACKOFF_MAX_SENTINEL_MS 1000
#define EPOCH_KEY "jrpc:epoch"
#define EPOCH_MAX 64          /* longest epoch value we accept from Redis */
#define NKEY_MAX (sizeof "jrpc:nonce::" + 64 + 64) /* id and nonce: 64 bytes at most */
#define RKEY_MAX (sizeof "jrpc:rate:" + 72)       /* who: a key id or "addr:<ip>" (jrpc_rate.h) */
#define MULTI_MAX 64          /* claims in one script at most (its run time is bounded) */

enum cmd_kind { CMD_CLAIM, CMD_MULTI, CMD_AUTH, CMD_SELECT, CMD_ROLE, CMD_LOAD, CMD_HELLO,
                CMD_WAIT, CMD_ASK, CMD_IDEM, CMD_STORE, CMD_LOAD_IDEM };

/* One command written to the current connection and not yet answered. */
typedef struct pending {
    struct pending *next;     /* younger command */
    uint64_t        sent_ns;  /* uv_hrtime() when queued (connect start for the handshake) */
    uint64_t        tag;      /* echoed by the script (claims and hello) */
    int64_t         ts;       /* the body's signed timestamp (claims) */
    jrpc_replay_cb  cb;       /* caller's callback (claims only) ... */
    jrpc_replay_admit_cb acb; /* ... or this one (jrpc_replay_admit) */
    void           *arg;      /* its argument */
    uint64_t        wait_us;  /* LIMITED: microseconds until the body would pass */
    jrpc_replay_idem_cb icb;  /* CMD_IDEM's callback */
    bool            nonce;    /* a nonce is claimed (WAIT counts it) */
    bool            rate;     /* a rate limit is checked (LIMITED is an answer) */
    enum cmd_kind   kind;     /* what the reply answers */
    struct pending *claims;   /* CMD_MULTI: its claims, in KEYS order (linked by next) */
    size_t          nclaims;  /* ... how many */
    uint8_t         nkey_n;   /* a claim not written yet: the length of ... */
    char            nkey[NKEY_MAX]; /* ... its key jrpc:nonce:<key id>:<nonce> */
    uint8_t         rkey_n;   /* ... with a rate limit (rate): the length of ... */
    char            rkey[RKEY_MAX]; /* ... its key jrpc:rate:<who> */
    uint64_t        cost_us;  /* ... the body's cost (jrpc_replay_rate_t) */
    uint64_t        burst_us; /* ... and the burst */
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
    uv_check_t         flush;       /* writes the commands queued in this loop turn, once */
    uv_idle_t          unblock;     /* ... and keeps the loop from blocking before it did */
    conn_t            *conn;        /* current connection, NULL while down */
    pending_t         *head;        /* oldest unanswered command on conn */
    pending_t         *tail;        /* youngest */
    size_t             npending;    /* length of the FIFO */
    pending_t         *batch;       /* this turn's claims: one script at the write */
    pending_t         *batch_tail;  /* youngest of them */
    size_t             nbatch;      /* how many */
    pending_t         *held;        /* claims answered OK, waiting for their WAIT's count */
    pending_t         *held_tail;   /* youngest of them */
    size_t             unwaited;    /* claims written since the last WAIT was queued */
    bool               up;          /* handshake answered, claims accepted */
    bool               asking;      /* conn is to a sentinel (finding the master) */
    bool               closing;     /* destroy called; freed when nclosing hits 0 */
    bool               warned_reply;/* an error reply to a claim was logged on this connection */
    bool               had_epoch;   /* epoch holds a value read from Redis */
    int                nclosing;    /* our handles still closing */
    uint64_t           backoff_ms;  /* delay before the next reconnect */
    uint64_t           backoff_max; /* its ceiling */
    uint64_t           attempts;    /* connection attempts started */
    uint64_t           timeout_ns;  /* opts->timeout_ms in ns */
    uint64_t           next_tag;    /* tag of the next script call on this connection */
    uint32_t           window_s;    /* opts->window_s */
    uint32_t           wait_n;      /* opts->wait_replicas (0: no WAIT) */
    uint32_t           wait_ms;     /* WAIT's own timeout: half the command timeout */
    int64_t            refuse_to;   /* bodies signed at or before this are refused (INT64_MIN: none) */
    int64_t            lost_at;     /* when Redis last lost its memory, as far as we know (0: never) */
    char               epoch[EPOCH_MAX + 1]; /* the epoch value we know, "" before the first */
    char               id[33];      /* random, this process: the first half of our proposals */
    char               sha[41];     /* SCRIPT LOAD's answer on this connection: CLAIM_LUA */
    char               idem_sha[41];/* ... and IDEM_LUA (CMD_LOAD_IDEM) */
    char               ttl[24];     /* 2 × window_s, decimal */
    char               dbs[24];     /* database index, decimal */
    jrpc_sentinel_t   *where;       /* the URL: a fixed address, or the master through Sentinel */
    jrpc_redis_node_t  dest;        /* where conn goes (a copy: Sentinel reorders its list) */
    uv_getaddrinfo_t  *lookup;      /* dest's host name being looked up, NULL: none */
    int                nlookups;    /* lookups not called back yet (given-up ones too) */
    uint64_t           open_ns;     /* uv_hrtime() when the connection was begun */
    char               target[300]; /* the address conn is to, for logs */
    jrpc_replay_stats_t st;         /* counters for jrpc_replay_stats() */
};

/* ---- the FIFO ------------------------------------------------------------ */

/* Appends p to the list from *head to *tail (linked by next): the FIFO,
 * the batch, the held claims. */
static inline void pending_append(pending_t **head, pending_t **tail, pending_t *p)
{
    p->next = NULL;
    if (*tail != NULL)
        (*tail)->next = p;
    else
        *head = p;
    *tail = p;
}

static inline void fifo_push(jrpc_replay_t *r, pending_t *p)
{
    pending_append(&r->head, &r->tail, p);
    r->npending++;
}

static inline pending_t *fifo_pop(jrpc_replay_t *r)
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

/* Decimal digits of v at out (no NUL). Returns their count. */
static inline size_t put_u64(char *out, uint64_t v)
{
    return (size_t)(jrpc_u64_put(out, v) - out);
}

static inline bool str_is(const redisReply *rep, const char *s)
{
    return (rep->type == REDIS_REPLY_STRING || rep->type == REDIS_REPLY_STATUS) &&
           rep->len == strlen(s) && memcmp(rep->str, s, rep->len) == 0;
}

/* ---- lent across the files (described where they are defined) ---- */

/* jrpc_redis.c */
void fail_list(jrpc_replay_t *r, pending_t *list, int rc);
int  init_reply_fns(void);
pending_t *conn_detach(jrpc_replay_t *r);
void conn_drop(jrpc_replay_t *r, const char *event, const char *error);
void on_retry(uv_timer_t *t);
void handle_handshake(jrpc_replay_t *r, pending_t *p, const redisReply *rep);
void set_writing(conn_t *conn, bool on);
void on_flush(uv_check_t *h);
void on_unblock(uv_idle_t *h);
int  send_argv(jrpc_replay_t *r, pending_t *p, int argc, const char **argv, const size_t *lens);
int  send_cmd(jrpc_replay_t *r, pending_t *p, const char *fmt, ...);

/* jrpc_replay.c */
/* claim_result's answers that drop the connection (it returns them > 0). */
enum { DROP_DESYNC = 1, DROP_READONLY = 2 };
extern const char CLAIM_LUA[];
extern const char IDEM_LUA[];
int  script_error(jrpc_replay_t *r, const redisReply *rep);
void drop_for(jrpc_replay_t *r, int why);
int  claim_result(jrpc_replay_t *r, const redisReply *rep, pending_t *p);
void claim_done(jrpc_replay_t *r, pending_t *p, int rc);
pending_t *pending_new(jrpc_replay_t *r, enum cmd_kind kind, void *arg);
const redisReply *script_word(const redisReply *rep, const pending_t *p);
int  adopt_epoch(jrpc_replay_t *r, const char *v, size_t n);
void process_replies(jrpc_replay_t *r, conn_t *conn);
int  send_wait(jrpc_replay_t *r);
void proposal(const jrpc_replay_t *r, char *buf, size_t n);
void free_self(jrpc_replay_t *r);

/* jrpc_replay_group.c */
void batch_push(jrpc_replay_t *r, pending_t *p);
int  batch_write(jrpc_replay_t *r);
void handle_multi(jrpc_replay_t *r, conn_t *conn, pending_t *p, const redisReply *rep);

#endif
