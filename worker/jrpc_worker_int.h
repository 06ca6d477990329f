/* jrpc_worker_int — the state the files of libjrpc-worker's jrpc_worker share.
 *
 * Internal: not installed (the library's header is jrpc_worker.h), and
 * included only by the four files of the module and their test.
 * jrpc_worker is one module in four files, one job each:
 *
 *   jrpc_worker.c        a conn's protocol: its socket, the calls read from
 *                        it, their answers (the hot path, whole)
 *   jrpc_worker_tick.c   heartbeats and liveness: the tick, the broker's
 *                        settings adopted
 *   jrpc_worker_names.c  brokers found by name (dns+tcp://)
 *   jrpc_worker_life.c   the worker's life: made, given handlers, connected,
 *                        run, drained, paused, stopped, destroyed
 *
 * The library is installed: what one file lends another is declared at the
 * end under the jrpc_worker_ prefix (described where it is defined), so that
 * no short name of ours reaches a program that links it. */
#ifndef JRPC_WORKER_INT_H
#define JRPC_WORKER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jrpc_dns.h"
#include "jrpc_mcp_sid.h"
#include "jrpc_wire.h"
#include "jrpc_worker.h"
#include "jrpc_zwatch.h"

typedef struct handler {
    char           *name;  /* method (owned, NUL-terminated) */
    size_t          len;   /* strlen(name) */
    jrpc_handler_fn fn;    /* msgpack params; NULL for a json handler */
    jrpc_json_handler_fn jfn; /* JSON params ("json" in READY); NULL for a msgpack one */
    void           *arg;   /* the caller's */
    unsigned        flags; /* JRPC_WORKER_* */
} handler_t;

typedef struct resolver resolver_t;

typedef struct conn {
    jrpc_worker_t *w;
    char          *endpoint;   /* owned */
    resolver_t    *rs;         /* the dns+tcp:// name it came from; NULL: given as is */
    bool           retiring;   /* its address left the name: DISCONNECT sent, never reopened */
    uint32_t       refs;       /* call objects pointing here (any generation) */
    uint32_t       zclosing;   /* its sockets whose watcher is still closing */
    void          *sock;       /* the current DEALER; NULL when none: a libzmq socket,
                                  or with `native` a jrpc_zdealer_t (our own ZMTP) */
    bool           native;     /* sock is a jrpc_zdealer_t */
    jrpc_zwatch_t *zw;         /* its watcher (heap; freed in on_sock_closed) */
    uint64_t       gen;        /* bumped per socket; calls of older ones are stale */
    uint64_t       last_recv;  /* uv_now() of the last frame from the broker */
    uint64_t       last_send;  /* uv_now() of the last frame to it */
    uint64_t       last_reset; /* uv_now() of the last socket (re)open */
    uint32_t       inflight;   /* calls of this generation not yet answered */
    bool           alive;      /* heard from the broker on this socket */
    bool           reset_due;  /* DISCONNECT came too soon after a reset: reset on tick */
    uint32_t       hb_ms;      /* this session's heartbeat interval: ours, or the broker's */
    uint32_t       liveness;   /* this session's silent intervals before the broker is dead */
    uint64_t       requests;   /* REQUEST frames received on this socket (REJECT names them) */
    jrpc_buf_t     out;        /* RESPONSE being gathered */
    uint32_t       nout;       /* answers in out */
} conn_t;

/* One dns+tcp:// name and the lookups of it. Freed at destroy, once no
 * lookup is running (its request is part of the struct). */
struct resolver {
    jrpc_worker_t    *w;
    char             *url;      /* as given (owned), for the logs */
    jrpc_dns_name_t   name;
    uv_timer_t        timer;    /* every opts.resolve_ms */
    uv_getaddrinfo_t  req;
    bool              busy;     /* req is running */
    bool              again;    /* asked for while busy: resolve once more after it */
    uint32_t          failures; /* lookups in a row with no address (warn at the first) */
};

struct jrpc_wcall {
    jrpc_worker_t  *w;
    conn_t         *conn;      /* where the answer goes */
    uint64_t        gen;       /* conn->gen when the call came */
    jrpc_seq_t      seq;       /* the broker's sequence number */
    uint64_t        deadline;  /* uv_now() ms, UINT64_MAX: none */
    const char     *method;    /* the handler's name, or "" */
    uint64_t        t0;        /* uv_hrtime() at dispatch, when the call's line is logged */
    int8_t          log_level; /* level of the call's line: info when traced and sampled */
    uint8_t         tp_len;    /* 0: no traceparent */
    char            tp[JRPC_TRACEPARENT_MAX + 1]; /* the call's W3C traceparent, NUL-terminated */
    bool            messages;  /* the broker takes MESSAGE frames for it */
    char            session[JRPC_WIRE_SESSION_MAX + 1]; /* its MCP session, "" when none */
    jrpc_buf_t      result;    /* packed result (or error data, when error_data);
                                  JSON text instead when result_json */
    bool            error_data; /* jrpc_wcall_error_data(): result holds the error's data */
    bool            json;      /* its params came as JSON text: the broker reads JSON answers */
    bool            result_json; /* result holds JSON text (to send as a bin) */
    msgpack_packer  pk;        /* writes into result */
    jrpc_wcall_t   *prev;      /* outstanding list / free list (next only) */
    jrpc_wcall_t   *next;
};

struct jrpc_worker {
    jrpc_worker_opts_t opts;
    uv_loop_t   *loop;         /* the loop we run on */
    uv_loop_t    own_loop;     /* storage when we own it */
    bool         owns_loop;
    void        *zctx;         /* ZeroMQ context (owned) */
    handler_t   *handlers;
    size_t       nhandlers;
    conn_t     **conns;
    size_t       nconns;
    resolver_t **resolvers;    /* dns+tcp:// names */
    size_t       nresolvers;
    int          nresolving;   /* lookups running (stop and destroy wait for them) */
    uv_timer_t   tick;         /* heartbeats and liveness, every heartbeat_ms */
    uv_idle_t    flush_idle;   /* flushes gathered answers at the end of a turn */
    uv_timer_t   drain_timer;  /* draining: the timeout, or the latest deadline */
    bool         tick_started;
    uint32_t     tick_ms;      /* the tick's period: the shortest interval of any conn */
    msgpack_zone zone;         /* decoded frames; cleared after each */
    jrpc_wcall_t *calls;       /* outstanding calls (doubly linked) */
    jrpc_wcall_t *free_calls;  /* finished calls for reuse (singly linked) */
    size_t       nfree;
    int          nclosing;     /* handles/watchers still closing */
    bool         stopping;     /* jrpc_worker_stop() was called */
    bool         draining;     /* jrpc_worker_drain(): DISCONNECT sent, finishing calls */
    bool         paused;       /* jrpc_worker_pause(): no session until jrpc_worker_resume() */
    uint64_t     drain_until;  /* uv_now() ms when a drain gives up */
    jrpc_buf_t   tmp;          /* scratch for READY / HEARTBEAT / DISCONNECT */
    jrpc_buf_t   jparams;      /* msgpack params as JSON text, for a json handler
                                  (a broker that sent msgpack) */
    bool         curve;        /* sockets are CURVE clients */
    bool         native;       /* our own ZMTP (jrpc_zdealer) where it serves the endpoint */
    jrpc_curve_keypair_t curve_kp;   /* our keypair (secret wiped at destroy) */
    char         broker_public[JRPC_CURVE_Z85_LEN + 1]; /* the broker's public key */
    char         name[64];           /* READY "name"; empty: not sent */
    char         service[64];        /* READY "service"; empty: not sent */
    char        *schemas;            /* READY "schemas" (owned); NULL: not sent */
    uint64_t     answered;     /* answers sent (notifications included) */
    char         instance[JRPC_MCP_INSTANCE_LEN + 1]; /* READY "instance"; empty: not sent */
    jrpc_message_fn on_message; /* MESSAGE frames from brokers; NULL: dropped */
    void        *on_message_arg;
    jrpc_probe_answer_fn on_probe; /* PROBE frames from brokers; NULL: READY says
                                      nothing of them, and they are dropped */
    void        *on_probe_arg;
};

static inline const handler_t *find_handler(const jrpc_worker_t *w, jrpc_span_t method)
{
    for (size_t i = 0; i < w->nhandlers; i++) {
        const handler_t *h = &w->handlers[i];
        if (h->len == method.n && memcmp(h->name, method.p, method.n) == 0)
            return h;
    }
    return NULL;
}

static inline void conn_free(conn_t *c)
{
    jrpc_buf_dispose(&c->out);
    free(c->endpoint);
    free(c);
}

/* ---- lent across the files (described where they are defined) ---- */

/* jrpc_worker.c */
int  jrpc_worker_conn_send_bare(conn_t *c, int type);
void jrpc_worker_conn_close(conn_t *c, int linger);
int  jrpc_worker_conn_open(conn_t *c);
void jrpc_worker_conn_reset(conn_t *c, const char *why);
void jrpc_worker_conn_flush(conn_t *c);
void jrpc_worker_drain_check(jrpc_worker_t *w);

/* jrpc_worker_tick.c */
void jrpc_worker_tick_update(jrpc_worker_t *w);
void jrpc_worker_conn_adopt(conn_t *c, uint32_t hb_ms, uint32_t liveness);
void jrpc_worker_tick_start(jrpc_worker_t *w);

/* jrpc_worker_names.c */
void jrpc_worker_resolver_start(resolver_t *rs);
int  jrpc_worker_resolver_add(jrpc_worker_t *w, const char *url);

/* jrpc_worker_life.c */
int  jrpc_worker_conn_add(jrpc_worker_t *w, const char *endpoint, resolver_t *rs);

#endif
