/* jrpc_broker_int — the state the files of jrpc_broker share.
 *
 * Internal to broker/core: not installed, and included only by the six
 * files of the module and their tests. jrpc_broker is one module (one
 * public header, jrpc_broker.h) in six files, one job each:
 *
 *   jrpc_broker.c     a body's life: submit, run (dispatch), settle, expire,
 *                     cancel; the broker's own life, readiness, stats
 *   jrpc_gather.c     answers gathered, replies and refusals written, the
 *                     access line
 *   jrpc_admit.c      admission: signature, nonce and rate-limit claims, the
 *                     local budget, early dispatch
 *   jrpc_idem.c       idempotency keys: the claim, the kept reply, the waits
 *   jrpc_queued.c     queued bytes: per connection, per address, in total
 *   jrpc_conn_auth.c  a connection authenticated once (WebSocket upgrade)
 *   jrpc_mcp.c        MCP: the servers' messages to their clients, the
 *                     clients' to the worker a session names
 *
 * The functions one file lends another are declared at the end, each
 * described where it is defined, under the names they had as static
 * functions of one file (the unit tests compile the files in and call them
 * by these names): they are seen by the broker only, as nothing outside
 * broker/core includes this. */
#ifndef JRPC_BROKER_INT_H
#define JRPC_BROKER_INT_H

#include "jrpc_broker.h"
#include "jrpc_sign.h"

#include <assert.h>
#include <sanitizer/asan_interface.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jrpc_errors.h"
#include "jrpc_log.h"
#include "jrpc_trace.h"
#include "jrpc_metrics.h"

#define NO_HANDLE UINT32_MAX
#define PEER_BUCKETS 256   /* the client addresses holding bytes: chained */

typedef struct bbatch bbatch_t;

/* A connection's account (jrpc_broker.h, "what a connection has queued"). */
struct jrpc_broker_hold {
    size_t    bytes;          /* held by its bodies */
    uint32_t  refs;           /* the connection (until released), and each body */
    uint32_t  max;            /* --conn-max-queued-bytes; 0: no bound */
    bool      waiting;        /* found full: wake once at half */
    void    (*wake)(void *);  /* NULL once released */
    void     *ctx;
};

/* One client address's account: exists while a body refers to it. */
typedef struct peerq {
    struct peerq *next;       /* its bucket's chain */
    size_t        bytes;      /* held by its bodies */
    uint32_t      refs;       /* bodies referring to it */
    uint8_t       n;
    char          addr[64];   /* jrpc_rate_who_addr of its peer text */
} peerq_t;

struct bbatch {
    jrpc_batch_t   req;          /* the parsed body and its answers */
    jrpc_broker_t *broker;
    jrpc_reply_fn  fn;           /* the front end's reply function */
    jrpc_answer_fn answer;       /* streamed mode: each answer as it is in; else NULL */
    void          *ctx;
    uint32_t      *handles;      /* per call: jrpc_workers handle, or NO_HANDLE */
    uint32_t      *mstat;        /* per call: its jrpc_metrics_reply tag, the record (set
                                    when it starts), or JRPC_METRICS_NONE: not counted per
                                    method (the parser's) */
    const char    *path;         /* the access line's path=, or NULL (the transport) */
    uint32_t       unanswered;   /* calls still owing an answer to the client */
    uint32_t       outstanding;  /* calls still at (or queued for) workers */
    uint32_t       streamed;     /* streamed mode: answers sent */
    uint32_t       timed_out;    /* calls answered -32003 at the deadline */
    size_t         bytes_out;    /* streamed mode: bytes of the answers sent */
    uint64_t       deadline;     /* loop ms */
    bool           replied;
    bool           listed;       /* on the deadline list */
    bool           busy;         /* being submitted: not to be freed yet */
    bool           claiming;     /* waiting for Redis: the nonce and/or the rate limit */
    bool           signed_body;  /* claiming a nonce (Redis down: 503, not the local budget) */
    bool           early;        /* its calls went out while its nonce was claimed (all
                                    idempotent): nothing answers before the claim does */
    uint32_t       early_cell;   /* ... its nonce's cell in the broker's early_nonces */
    bool           idem_run;     /* its idempotency key is claimed: store the reply */
    bool           detached;     /* idem_run, and the client left: run on, store, tell no one */
    bool           waiting;      /* on the idempotency wait list (another run holds the key) */
    bbatch_t      *wnext;        /* ... its link */
    jrpc_span_t    idem;         /* the idempotency key (in body[] after peer), or empty */
    /* fp, rwho, key_id and service past its first byte are not cleared at
     * submit: each is read only up to a length set with it */
    char           fp[64];       /* ... and the body's fingerprint: SHA-256, hex */
    uint8_t        rwho_n;       /* rate limits: rwho's length; 0: no limit applies */
    char           rwho[JRPC_KEYS_ID_MAX + 8]; /* ... who: a key id, or "addr:<ip>" */
    jrpc_rate_limit_t rlim;      /* ... its limit */
    uint64_t       rcost;        /* ... and what this body costs */
    bool           cancelled;    /* the client left while claiming */
    char           service[JRPC_WORKERS_SERVICE_MAX + 1]; /* the first call's service
                                    that has one (the access line), "" none */
    uint8_t        key_id_n;     /* key_id's length; 0 when open */
    char           key_id[JRPC_KEYS_ID_MAX]; /* the signing key's id: looked up (ACL) when
                                    the calls start, never kept as a pointer (a reload
                                    frees the set: jrpc_broker_set_keys) */
    bbatch_t      *prev, *next;  /* the deadline list */
    uint64_t       t0;           /* uv_hrtime() at submit (metrics, access log) */
    uint64_t       t_in;         /* Server-Timing: metrics clock before the parse; 0: not
                                    timed (--server-timing off, or jrpc_admit_t.untimed) */
    uint64_t       t_disp;       /* ... when its calls were dispatched (start) */
    uint64_t       t_claim;      /* ... when its Redis claim went out */
    uint64_t       t_last;       /* ... when the last worker answer was read */
    uint64_t       auth_ns;      /* ... the signature check */
    uint64_t       redis_ns;     /* ... its Redis claims, together */
    uint64_t       slow_q, slow_w; /* ... the call a worker answered last (the slowest):
                                    queued (from t0) and at its worker, ns */
    uint8_t        phases;       /* ... 1u << JRPC_TIMING_AUTH, _REDIS: seen */
    int            transport;    /* a jrpc_transport */
    jrpc_span_t    trace;        /* valid W3C traceparent (in body[] after the body), or empty */
    jrpc_span_t    peer;         /* client address (in body[] after trace), or empty */
    jrpc_broker_hold_t *hold;    /* its connection's account (a reference), or NULL */
    peerq_t       *pq;           /* its address's account (a reference), or NULL */
    size_t         held;         /* bytes charged to them and the total; 0: none */
    jrpc_mcp_msg_fn mcp;         /* an MCP client's body: its messages (docs/MCP.md) */
    jrpc_span_t    session;      /* ... its Mcp-Session-Id (in body[] after idem), or empty */
    uint32_t       mcp_msgs;     /* ... the servers' messages given to its client */
    bool           pooled;       /* a BB_SMALL block: freed to the broker's bb_free (here,
                                    not by busy: busy and claiming are tested together) */
    size_t         len;          /* body bytes */
    char           body[];       /* our copy of the body, then trace, then peer */
};

#define EARLY_COOL_CELLS  1024   /* keys refused at a claim lately, by hash (early dispatch) */
#define EARLY_NONCE_CELLS 4096   /* nonces of early bodies in flight, by hash */
/* A body's record, its copy of the body and the texts after it, when they
 * fit BB_SMALL bytes, come from a block kept for the next body (a single
 * call paid ~130 Ir of malloc and free for it; issue 35): at most BB_KEEP
 * blocks (64 KiB). Under ASan a kept block is poisoned but for its link
 * (bb_keep), so a use after batch_free is still caught, as free's would be. */
#define BB_SMALL 1024
#define BB_KEEP  64

struct jrpc_broker {
    uv_loop_t        *loop;
    jrpc_broker_opts_t opts;
    jrpc_workers_t   *workers;
    uv_timer_t        timer;       /* fires at the head's deadline (or before: arm_timer) */
    uint64_t          timer_due;   /* loop ms it is armed for; 0: not armed */
    bbatch_t         *head, *tail; /* open bodies by deadline */
    uint32_t          open;
    jrpc_buf_t        out;         /* the reply being written */
    jrpc_arena_pool_t arenas;      /* the bodies' first arena chunks, kept for the next */
    bbatch_t         *bb_free;     /* BB_SMALL blocks kept for the next body (linked by next) */
    uint32_t          bb_nfree;    /* ... how many (at most BB_KEEP) */
    jrpc_buf_t        one;         /* streamed mode: the answer being sent */
    jrpc_timing_t     timing;      /* the reply being handed out: its out.timing */
    void            (*on_empty)(void *);
    void             *on_empty_arg;
    jrpc_replay_t    *replay;      /* nonces in Redis; NULL when open */
    jrpc_signer_t    *signer;      /* SHA-256 fetched once, its context reused (jrpc_sign.h) */
    bool              draining;    /* jrpc_broker_drain was called */
    jrpc_rate_local_t rate_local;  /* the local budget (tat NULL until first used) */
    bbatch_t         *waiters;     /* bodies whose idempotency key another run holds */
    uv_timer_t        idem_timer;  /* asks again for them, while there are any */
    jrpc_rate_counts_t rate_counts; /* calls refused per identity (metrics) */
    uint64_t          early_cool[EARLY_COOL_CELLS];    /* per key hash: loop ms until which
                                                          none of its bodies goes early */
    uint32_t          early_nonces[EARLY_NONCE_CELLS]; /* per nonce hash: early bodies
                                                          whose claim is in flight */
    size_t            held;        /* bytes of bodies answered before their calls ended */
    peerq_t          *peers[PEER_BUCKETS]; /* the addresses among them */
    jrpc_mcp_msg_fn   on_session;  /* a session's messages that belong to no call */
    void             *on_session_arg;
    jrpc_mcp_probe_fn on_probe;    /* the workers' answers to jrpc_broker_mcp_probe */
    void             *on_probe_arg;
    uint64_t          probes;      /* the last probe number given */
};

/* A small body's block kept for the next one (batch_free): poisoned under
 * ASan but for its link. */
static inline void bb_keep(jrpc_broker_t *b, bbatch_t *x)
{
    x->next = b->bb_free;
    b->bb_free = x;
    b->bb_nfree++;
    ASAN_POISON_MEMORY_REGION(x, offsetof(bbatch_t, next));
    ASAN_POISON_MEMORY_REGION(&x->next + 1, BB_SMALL - offsetof(bbatch_t, next) - sizeof x->next);
}

/* A kept block for a body that needs no more than BB_SMALL bytes, or NULL. */
static inline bbatch_t *bb_take(jrpc_broker_t *b)
{
    bbatch_t *x = b->bb_free;
    if (x == NULL)
        return NULL;
    ASAN_UNPOISON_MEMORY_REGION(x, BB_SMALL);
    b->bb_free = x->next;
    b->bb_nfree--;
    return x;
}

/* The namespace of an idempotency key: idem_who (jrpc_idem.c). */
#define IDEM_WHO_MAX (JRPC_KEYS_ID_MAX + 8 + 1 + 64)

/* jrpc_broker.c */
void keep_key_id(char dst[JRPC_KEYS_ID_MAX], uint8_t *n, jrpc_span_t id);
void settle(jrpc_broker_t *b, bbatch_t *x);
void withdraw(jrpc_broker_t *b, bbatch_t *x, int code);
void start(jrpc_broker_t *b, bbatch_t *x);

/* jrpc_gather.c */
void access_log(jrpc_broker_t *b, const bbatch_t *x, const jrpc_admit_t *ad, int cls,
                size_t bytes_out);
void reply(jrpc_broker_t *b, bbatch_t *x);
void refuse_out(jrpc_broker_t *b, bbatch_t *x, const jrpc_admit_t *ad, jrpc_reply_fn fn,
                void *ctx, jrpc_outcome_t out, const char *data_json);
void refuse(jrpc_broker_t *b, bbatch_t *x, const jrpc_admit_t *ad, jrpc_reply_fn fn,
            void *ctx, int rc, const char *data_json);
void stream_answer(jrpc_broker_t *b, bbatch_t *x, uint32_t i);
void answer_discover(jrpc_broker_t *b, bbatch_t *x, uint32_t i, const jrpc_key_t *key);
void answer_code(bbatch_t *x, uint32_t i, int code, const char *data);
void on_done(void *owner, uint32_t i, int kind, int code, jrpc_span_t value, void *arg);
const jrpc_timing_t *timing_of(jrpc_broker_t *b, const bbatch_t *x);

/* Server-Timing: Redis answered x's claim (the clock was just read). */
static inline void timing_redis(bbatch_t *x)
{
    if (x->t_in == 0)
        return;
    x->redis_ns += jrpc_metrics.now - x->t_claim;
    x->phases |= 1u << JRPC_TIMING_REDIS;
}

/* jrpc_admit.c */
const char *unavailable_data(jrpc_broker_t *b, int rc, char *data, size_t size);
int64_t signed_at(const jrpc_auth_req_t *req);
void refuse_auth(jrpc_broker_t *b, bbatch_t *x, int rc, int64_t now);
bool admit(jrpc_broker_t *b, bbatch_t *x, const jrpc_admit_t *ad);

/* jrpc_idem.c */
jrpc_span_t idem_who(const bbatch_t *x, char *buf);
void go(jrpc_broker_t *b, bbatch_t *x);
void wait_del(jrpc_broker_t *b, bbatch_t *x);

/* jrpc_mcp.c */
void on_worker_msg(void *owner, uint32_t i, jrpc_span_t session, jrpc_span_t body, void *arg);
void on_worker_probe(uint64_t probe, jrpc_span_t session, bool live, void *arg);

/* jrpc_queued.c */
peerq_t *peer_ref(jrpc_broker_t *b, jrpc_span_t peer);
void hold_charge(jrpc_broker_t *b, bbatch_t *x);
void batch_free(bbatch_t *x);
bool queue_full(const jrpc_broker_t *b, const bbatch_t *x);

#endif
