/* jrpc_stdio_int — the state the files of jrpc-stdio share.
 *
 * Internal to the jrpc-stdio program (not a library: nothing else links
 * these files). jrpc-stdio is one program in five files, one job each:
 *
 *   stdio_main.c         options, --help, main: the bridge wired and run,
 *                        then stopped (drain, the children's stdin closed,
 *                        their kill at --stop-timeout-ms, all reaped)
 *   jrpc_stdio_calls.c   a call's path: the broker's handler, the queue,
 *                        the child with the most free window, the framed
 *                        write to its stdin, its answer matched and passed
 *                        on, deadlines and the hang kill (the sweep)
 *   jrpc_stdio_child.c   a child's life: spawned in a process group of its
 *                        own, its stdout and stderr read within a budget per
 *                        loop turn, the lines about it rate-limited, lost,
 *                        killed, restarted with backoff and a budget
 *   jrpc_stdio_mcp.c     --mcp: the method set declared, the handshake with
 *                        each child, a client's initialize answered from
 *                        it, its notifications/initialized swallowed
 *   jrpc_stdio_tools.c   --mcp: the child's tools/list declared for the
 *                        broker's discovery document
 *   jrpc_stdio_sess.c    --mcp: sessions (--sessions: ids, the pinning, the
 *                        end, expiry) and the children's messages to
 *                        clients (notifications, requests and their answers)
 *   jrpc_stdio_metrics.c --admin: /metrics and /readyz's answer
 *
 * The bodies kept their form when the one file was split (issue 31): the
 * functions one file lends another are declared at the end, each described
 * where it is defined, under the names they had as static functions (no
 * jrpc_ prefix: no program other than jrpc-stdio sees them); the small ones
 * every file uses (the call lists, a call's end, children_up) are static
 * inline here. */
#ifndef JRPC_STDIO_INT_H
#define JRPC_STDIO_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <uv.h>

#include "jrpc_admin.h"
#include "jrpc_errors.h"
#include "jrpc_log.h"
#include "jrpc_mcp_sid.h"
#include "jrpc_stdio_frame.h"
#include "jrpc_stop.h"
#include "jrpc_worker.h"

#define LOG_WINDOW_MS    1000    /* --child-log-per-sec counts lines over this window */

/* Answer latency buckets of /metrics, seconds (le). */
static const double lat_le[] = { 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10 };
#define NLAT (sizeof lat_le / sizeof *lat_le)

typedef struct child child_t;
typedef struct bridge bridge_t;

#define MSG_PER_CALL 64     /* messages a child may send one call's client */
#define PEND_MAX     256    /* the child's requests to clients awaiting an answer */
#define PEND_TTL_MS  600000 /* ... forgotten after this long (or when their child is gone) */

/* --sessions: one MCP session (jrpc_stdio_sess.c). */
typedef struct sess {
    char     id[JRPC_MCP_SID_LEN + 1]; /* "" when the entry is free */
    unsigned slot;          /* the child it is pinned to */
    int      pid;           /* that child's pid when it began: another pid, the session is gone */
    uint64_t last;          /* uv_now() of its last call */
} sess_t;

/* A child's request to a client (sampling, elicitation, ...), sent on
 * under an id of the bridge's ("<instance>-<slot>-<n>"). */
typedef struct pend {
    uint64_t n;             /* 0: free */
    unsigned slot;
    int      pid;
    char    *id_raw;        /* the child's own id, JSON text (owned) */
    uint64_t at;            /* uv_now() when sent: unanswered after PEND_TTL_MS, forgotten */
} pend_t;

typedef struct call {
    jrpc_wcall_t *wc;        /* NULL once the broker's answer was given (late) */
    child_t      *child;     /* holding it; NULL while queued */
    uint64_t      id;        /* the bridge's id on the child side */
    bool          idem;      /* the method is idempotent */
    uint32_t      tries;     /* dispatches so far */
    uint64_t      deadline;  /* uv_now() ms; UINT64_MAX: none */
    uint64_t      t_sent;    /* uv_hrtime() at the write */
    bool          mcp_init;  /* --mcp: the bridge's own initialize (wc is NULL) */
    bool          mcp_tools; /* --mcp: the bridge's own tools/list (wc is NULL) */
    unsigned      pin;       /* --sessions: the child slot + 1 its session lives on; 0: any */
    int           pin_pid;   /* that child's pid when the session began */
    uint32_t      nmsg;      /* messages passed to its client (MSG_PER_CALL at most) */
    char         *method;    /* owned copy */
    jrpc_buf_t    params;    /* JSON text, empty: none */
    struct call  *prev, *next;
} call_t;

typedef struct call_list {
    call_t  *head, *tail;
    uint32_t n;
} call_list_t;

enum child_state { CHILD_DOWN, CHILD_UP, CHILD_DYING };

struct child {
    bridge_t    *b;
    unsigned     slot;
    int          state;       /* enum child_state */
    int          pid;
    uv_process_t proc;
    uv_pipe_t    in, out, err;
    int          open;        /* of the four handles, those not yet closed */
    bool         exited;      /* exit_cb ran */
    bool         out_eof;     /* stdout ended or failed */
    uv_timer_t   timer;       /* restart backoff, or the exit grace */
    uint64_t     started;     /* uv_now() at spawn */
    uint32_t     quick_deaths; /* consecutive deaths younger than QUICK_DEATH_MS */
    jrpc_frame_reader_t rd;   /* stdout */
    jrpc_buf_t   errline;     /* stderr line being gathered (its first STDERR_LINE_MAX bytes) */
    size_t       errline_n;   /* its length so far, cut bytes too */
    size_t       out_turn, err_turn; /* bytes read from stdout, stderr since reading last resumed */
    bool         out_paused, err_paused; /* reading stopped for the rest of this loop turn */
    uint64_t     log_window;  /* uv_now() at the start of this window of the child's log lines */
    uint32_t     log_lines;   /* lines about the child logged in it */
    uint64_t     log_dropped, log_dropped_bytes; /* lines (and the child's bytes) not logged in it */
    bool         ready;       /* takes calls: up and, with --mcp, initialized */
    call_list_t  held;
    uint64_t     calls;       /* answers received */
    uint64_t     restarts;
    /* /metrics, per slot (over the children it has had): */
    uint64_t     errors;      /* answers that were error objects */
    uint64_t     lost;        /* calls answered -32004 when a child was lost */
    uint64_t     late;        /* calls answered -32003 at their deadline */
    uint64_t     hostile;     /* messages skipped (garbage, unknown ids, too big, ...) */
    uint64_t     lat[NLAT + 1]; /* answer latency histogram (not cumulative; last: +Inf) */
    uint64_t     lat_sum_us;
};

struct bridge {
    jrpc_worker_t *w;
    uv_loop_t     *loop;
    char         **argv;      /* the command (borrowed from main's argv) */
    uint32_t       procs, inflight, max_line, restart_max, hang_kill_ms, stop_timeout_ms;
    uint32_t       log_per_sec; /* --child-log-per-sec */
    int            framing;   /* enum jrpc_frame_mode */
    child_t       *children;
    call_list_t    queue;     /* calls waiting for a window */
    uint64_t       next_id;
    uint64_t      *restarts;  /* ring of the last restart_max restart times (uv_now) */
    uint32_t       nrestarts; /* total, index into the ring mod restart_max */
    bool           not_ready; /* restart budget spent: not restarting for now */
    bool           stopping;  /* no restarts, no new calls */
    bool           mcp;       /* --mcp */
    jrpc_buf_t     mcp_init;  /* --mcp: the latest child's InitializeResult (JSON, its
                                 capabilities filtered: mcp_caps_filter); empty: none yet */
    jrpc_buf_t     mcp_init_lc; /* --mcp: the same with listChanged kept (a client whose
                                   broker passes the server's messages on) */
    call_list_t    init_wait; /* --mcp: clients' initialize calls waiting for the first one */
    bool           tools_pending; /* --mcp: the bridge's tools/list is out to a child */
    bool           tools_again;   /* --mcp: ... and the list changed since it was sent */
    bool           tools_known;   /* --mcp: a child answered one (its tools declared) */
    jrpc_buf_t     tools_acc;     /* --mcp: the pages read so far of a paginated
                                     tools/list: their tools as JSON, comma-separated */
    uint32_t       tools_pages;   /* --mcp: how many pages in tools_acc */
    char          *lsp_init;  /* --lsp-init: the params of the bridge's LSP initialize (a JSON
                                 object, owned); NULL: no LSP handshake */
    uv_timer_t     sweep;
    uv_check_t     resume;    /* after the poll of a turn: reading again what READ_BUDGET stopped */
    uv_timer_t     stop_timer;
    jrpc_stop_t    stop;      /* SIGINT/SIGTERM: drain, then at once; SIGHUP ignored */
    jrpc_admin_t  *admin;     /* NULL without --admin */
    bool           sessions;  /* --sessions */
    uint32_t       max_sessions, session_idle_ms;
    char           instance[JRPC_MCP_INSTANCE_LEN + 1]; /* --mcp: READY "instance", random */
    uint64_t       instance_v;
    sess_t        *sess;      /* max_sessions entries */
    pend_t         pend[PEND_MAX];
    uint64_t       next_pend;
    uint64_t       msgs_sent, msgs_dropped; /* messages passed to clients, and dropped */
    uint32_t       drain_timeout_ms;
    jrpc_buf_t     tmp;       /* scratch: requests, conversions */
    msgpack_zone   zone;
};

/* What main gives on_call with each method it registers. */
typedef struct method_arg {
    bridge_t *b;
    bool      idem;   /* declared NAME:idempotent */
} method_arg_t;

/* ---- lists ---- */

static inline void list_push(call_list_t *l, call_t *k)
{
    k->next = NULL;
    k->prev = l->tail;
    if (l->tail)
        l->tail->next = k;
    else
        l->head = k;
    l->tail = k;
    l->n++;
}

static inline void list_unshift(call_list_t *l, call_t *k)
{
    k->prev = NULL;
    k->next = l->head;
    if (l->head)
        l->head->prev = k;
    else
        l->tail = k;
    l->head = k;
    l->n++;
}

static inline void list_remove(call_list_t *l, call_t *k)
{
    if (k->prev)
        k->prev->next = k->next;
    else
        l->head = k->next;
    if (k->next)
        k->next->prev = k->prev;
    else
        l->tail = k->prev;
    k->prev = k->next = NULL;
    l->n--;
}

/* ---- a call's end ---- */

static inline void call_free(call_t *k)
{
    free(k->method);
    jrpc_buf_dispose(&k->params);
    free(k);
}

/* Answers the broker with an error of ours (not the child's). */
static inline void call_fail(call_t *k, int code)
{
    if (k->wc)
        jrpc_wcall_error(k->wc, code, jrpc_error_message(code));
    k->wc = NULL;
}

static inline unsigned children_up(const bridge_t *b)
{
    unsigned n = 0;
    for (unsigned i = 0; i < b->procs; i++)
        n += b->children[i].state == CHILD_UP;
    return n;
}

/* JRPC_LOG for a line about what child c wrote (bytes of it): the level
 * first, then the child's budget. */
#define CHILD_LOG(c, bytes, level, ...)                                          \
    do {                                                                         \
        if ((level) >= jrpc_log_level && child_log_ok((c), (bytes)))             \
            jrpc_log_write((level), "stdio", __VA_ARGS__);                       \
    } while (0)

/* ---- lent across the files (described where they are defined) ---- */

/* jrpc_stdio_calls.c */
int  child_write(child_t *c, const char *p, size_t n);
int  call_send(child_t *c, call_t *k);
void pump(bridge_t *b);
void on_call(jrpc_wcall_t *wc, const char *params, size_t n, void *arg);
int  pass_json(bridge_t *b, jrpc_wcall_t *wc, const char *p, size_t n);
void child_message(child_t *c, const char *p, size_t n);
void on_sweep(uv_timer_t *t);

/* jrpc_stdio_child.c */
void child_log_flush(child_t *c);
bool child_log_ok(child_t *c, size_t bytes);
void on_child_closed(uv_handle_t *h);
void child_kill(child_t *c);
void child_lost(child_t *c, const char *why);
int  child_start(child_t *c);

/* jrpc_stdio_mcp.c */
typedef struct mcp_method {
    const char *name;
    bool        idem;   /* registered JRPC_WORKER_IDEMPOTENT */
} mcp_method_t;
extern const mcp_method_t mcp_methods[];
extern const size_t mcp_nmethods;
#define MCP_NMETHODS mcp_nmethods
bool mcp_own(bridge_t *b, jrpc_wcall_t *wc, const char *params, size_t n);
int  mcp_caps_filter(const char *p, size_t n, bool list_changed, jrpc_buf_t *out);
int  mcp_start(child_t *c);
void mcp_initialized(child_t *c, const jrpc_child_msg_t *m);

/* jrpc_stdio_tools.c */
void tools_ask(child_t *c);
void tools_listed(child_t *c, const jrpc_child_msg_t *m);

/* jrpc_stdio_sess.c */
int  sess_init(bridge_t *b);
void sess_dispose(bridge_t *b);
int  sess_pin(bridge_t *b, jrpc_wcall_t *wc, call_t *k);
bool sess_initialized(bridge_t *b, jrpc_wcall_t *wc);
bool sess_child_message(child_t *c, const jrpc_child_msg_t *m, const char *p, size_t n);
void sess_sweep(bridge_t *b, uint64_t now);
void sess_child_lost(bridge_t *b, const child_t *c);

/* jrpc_stdio_metrics.c */
int  write_metrics(void *arg, jrpc_buf_t *out);
const char *bridge_not_ready(void *arg);

#endif
