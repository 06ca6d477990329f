/* jrpc-stdio — a pool of stdio JSON-RPC 2.0 servers as one jrpc worker.
 *
 * One libuv loop (the worker library's): the broker sessions, N children
 * spawned with pipes (no shell), their stdout read through the framing
 * reader (jrpc_stdio_frame), their stderr logged line by line (both read
 * a bounded amount per loop turn, the lines about them rate-limited per
 * child), each child in a process group of its own. A call from
 * the broker gets a bridge id of its own and goes to the child with the
 * most free window (--inflight), or waits in a FIFO until one is free; the
 * credit announced to each broker is procs × inflight. Children are
 * untrusted input: whatever they write is logged and skipped, never fatal.
 *
 * Lifetimes: a child's four handles (process, stdin, stdout, stderr) are
 * freed only from their close callbacks; the slot is restarted once all
 * four are closed. A call (call_t) lives from the handler until its child
 * answers, the child is lost, or — once the broker's answer is given at the
 * deadline — until the child answers late or is killed. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "jrpc_admin.h"
#include "jrpc_conf.h"
#include "jrpc_errors.h"
#include "jrpc_json.h"
#include "jrpc_log.h"
#include "jrpc_mpack.h"
#include "jrpc_sdnotify.h"
#include "jrpc_stdio_frame.h"
#include "jrpc_connect_opt.h"
#include "jrpc_stop.h"
#include "jrpc_worker.h"

#define SWEEP_MS         50      /* deadline and hang checks */
#define EXIT_GRACE_MS    200     /* after exit, how long stdout may still deliver */
#define BACKOFF_MIN_MS   100
#define BACKOFF_MAX_MS   5000
#define QUICK_DEATH_MS   10000   /* a child dying younger than this backs off more */
#define STDERR_LINE_MAX  4096
#define READ_BUDGET      (256u << 10) /* bytes read from one child's stdout, or stderr, per loop turn */
#define LOG_WINDOW_MS    1000    /* --child-log-per-sec counts lines over this window */
#define MAX_TRIES        3       /* dispatches of one idempotent call */
#define REPLY_QUEUE_MAX  (1u << 20) /* bytes unwritten to a child past which its requests go unanswered */
#define MCP_INIT_MS      30000   /* --mcp: a child's answer to initialize is due within this */
#define MCP_VERSION      "2025-06-18" /* --mcp: the protocolVersion the bridge asks its children for */

/* Answer latency buckets of /metrics, seconds (le). */
static const double lat_le[] = { 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10 };
#define NLAT (sizeof lat_le / sizeof *lat_le)

static const char usage_head[] =
    "Usage: jrpc-stdio [OPTIONS] --method NAME[:idempotent]... -- COMMAND [ARG...]\n"
    "       jrpc-stdio [OPTIONS] --mcp -- COMMAND [ARG...]\n"
    "\n"
    "Runs --procs copies of COMMAND (no shell) and serves the --method names to\n"
    "one or more jrpc brokers by passing each call, as JSON-RPC 2.0 on the\n"
    "child's stdin/stdout, to the child with the most free window.\n";

static const char usage_tail[] =
    "The child sees its own ids (1, 2, ...), never the client's. Its result or\n"
    "error object reaches the client as it wrote it. Lines that are not JSON,\n"
    "answers with unknown ids, messages over --max-line and requests from the\n"
    "child (answered -32601) are logged with the child's pid and skipped; its\n"
    "notifications are logged at debug, its stderr at info, line by line; at\n"
    "most --child-log-per-sec such lines a second per child, the rest counted\n"
    "in one child_log_suppressed line a second.\n"
    "A child that exits or closes stdout: its calls are answered -32004 at once\n"
    "(idempotent ones are sent to another child), and it is restarted with\n"
    "backoff; past --restart-max-per-min restarts in a minute it is left down,\n"
    "and with no child left the bridge sends DISCONNECT (calls held or queued\n"
    "get -32004) and comes back (READY) when a child is up again. A child still\n"
    "holding a call --hang-kill-ms after the call's deadline is killed. Each\n"
    "child leads its own process group, and every kill is SIGKILL to the group.\n"
    "SIGINT/SIGTERM: DISCONNECT, the calls held are finished (at most\n"
    "--drain-timeout-ms), the children's stdin is closed, they get\n"
    "--stop-timeout-ms to exit, then SIGKILL; all are reaped; exit 0.\n"
    "SIGHUP is logged and ignored (nothing to reload).\n"
    "With --mcp (an MCP server over stdio, docs/MCP.md): each child gets the MCP\n"
    "handshake (initialize, notifications/initialized) from the bridge when it\n"
    "starts and takes calls only after it; the bridge declares the MCP method set\n"
    "(initialize, notifications/initialized, ping, tools/list, tools/call,\n"
    "resources/list, resources/templates/list, resources/read, prompts/list,\n"
    "prompts/get, completion/complete; --method adds more), answers a client's\n"
    "initialize with a child's InitializeResult and swallows its\n"
    "notifications/initialized. Stateless servers only: any child takes any call.\n"
    "Exit status: 0 on a clean stop, 1 on a runtime failure, 2 on bad usage or a\n"
    "command that cannot be run (not found, not executable).\n";

typedef struct child child_t;
typedef struct bridge bridge_t;

typedef struct call {
    jrpc_wcall_t *wc;        /* NULL once the broker's answer was given (late) */
    child_t      *child;     /* holding it; NULL while queued */
    uint64_t      id;        /* the bridge's id on the child side */
    bool          idem;      /* the method is idempotent */
    uint32_t      tries;     /* dispatches so far */
    uint64_t      deadline;  /* uv_now() ms; UINT64_MAX: none */
    uint64_t      t_sent;    /* uv_hrtime() at the write */
    bool          mcp_init;  /* --mcp: the bridge's own initialize (wc is NULL) */
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
    jrpc_buf_t     mcp_init;  /* --mcp: the latest child's InitializeResult (JSON); empty: none yet */
    call_list_t    init_wait; /* --mcp: clients' initialize calls waiting for the first one */
    uv_timer_t     sweep;
    uv_check_t     resume;    /* after the poll of a turn: reading again what READ_BUDGET stopped */
    uv_timer_t     stop_timer;
    jrpc_stop_t    stop;      /* SIGINT/SIGTERM: drain, then at once; SIGHUP ignored */
    jrpc_admin_t  *admin;     /* NULL without --admin */
    uint32_t       drain_timeout_ms;
    jrpc_buf_t     tmp;       /* scratch: requests, conversions */
    msgpack_zone   zone;
};

static int child_start(child_t *c);
static void pump(bridge_t *b);
static void on_resume(uv_check_t *h);

/* ---- lists ---- */

static void list_push(call_list_t *l, call_t *k)
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

static void list_unshift(call_list_t *l, call_t *k)
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

static void list_remove(call_list_t *l, call_t *k)
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

/* ---- calls ---- */

static void call_free(call_t *k)
{
    free(k->method);
    jrpc_buf_dispose(&k->params);
    free(k);
}

/* Answers the broker with an error of ours (not the child's). */
static void call_fail(call_t *k, int code)
{
    if (k->wc)
        jrpc_wcall_error(k->wc, code, jrpc_error_message(code));
    k->wc = NULL;
}

typedef struct wreq {
    uv_write_t req;
    child_t   *c;
    size_t     n;
    char       data[];
} wreq_t;

static void child_lost(child_t *c, const char *why);

static void on_written(uv_write_t *req, int status)
{
    wreq_t *r = (wreq_t *)req;
    child_t *c = r->c;
    free(r);
    if (status < 0 && status != UV_ECANCELED && c->state == CHILD_UP) {
        JRPC_LOG(JRPC_LOG_WARN, "stdio", "event=child_write_failed pid=%d err=\"%s\"", c->pid,
                 uv_strerror(status));
        child_lost(c, "write_failed");
    }
}

/* Writes the framed message p[0..n) to the child's stdin (copied). */
static int child_write(child_t *c, const char *p, size_t n)
{
    jrpc_buf_t *t = &c->b->tmp;
    jrpc_buf_reset(t);
    if (jrpc_frame_put(t, c->b->framing, p, n) < 0)
        return -ENOMEM;
    wreq_t *r = malloc(sizeof *r + t->len);
    if (r == NULL)
        return -ENOMEM;
    r->c = c;
    r->n = t->len;
    memcpy(r->data, t->p, t->len);
    uv_buf_t buf = uv_buf_init(r->data, (unsigned)r->n);
    int rc = uv_write(&r->req, (uv_stream_t *)&c->in, &buf, 1, on_written);
    if (rc < 0)
        free(r);
    return rc;
}

/* Sends call k to child c under a fresh id. */
static int call_send(child_t *c, call_t *k)
{
    bridge_t *b = c->b;
    jrpc_buf_t msg;
    jrpc_buf_init(&msg);
    char head[64];
    k->id = ++b->next_id;
    int n = snprintf(head, sizeof head, "{\"jsonrpc\":\"2.0\",\"id\":%llu,\"method\":",
                     (unsigned long long)k->id);
    int rc = -ENOMEM;
    if (jrpc_buf_append(&msg, head, (size_t)n) < 0 ||
        jrpc_json_write_string(&msg, k->method, strlen(k->method)) < 0)
        goto out;
    if (k->params.len > 0 && (jrpc_buf_puts(&msg, ",\"params\":") < 0 ||
                              jrpc_buf_append(&msg, k->params.p, k->params.len) < 0))
        goto out;
    if (jrpc_buf_putc(&msg, '}') < 0)
        goto out;
    rc = child_write(c, msg.p, msg.len);
    if (rc < 0)
        goto out;
    k->child = c;
    k->tries++;
    k->t_sent = uv_hrtime();
    list_push(&c->held, k);
out:
    jrpc_buf_dispose(&msg);
    return rc;
}

/* The live child with the most free window (ties: the lowest slot after
 * the last one chosen, so that equal children take turns). */
static child_t *pick_child(bridge_t *b)
{
    static unsigned rr;
    child_t *best = NULL;
    uint32_t best_free = 0;
    for (unsigned i = 0; i < b->procs; i++) {
        child_t *c = &b->children[(rr + i) % b->procs];
        if (c->state != CHILD_UP || !c->ready || c->held.n >= b->inflight)
            continue;
        uint32_t free_w = b->inflight - c->held.n;
        if (free_w > best_free) {
            best = c;
            best_free = free_w;
        }
    }
    if (best)
        rr = best->slot + 1;
    return best;
}

static unsigned children_up(const bridge_t *b)
{
    unsigned n = 0;
    for (unsigned i = 0; i < b->procs; i++)
        n += b->children[i].state == CHILD_UP;
    return n;
}

/* Moves queued calls to free windows; with no child left and none coming
 * back soon (the restart budget is spent), answers them -32004 at once. */
static void pump(bridge_t *b)
{
    while (b->queue.head) {
        call_t *k = b->queue.head;
        child_t *c = pick_child(b);
        if (c == NULL) {
            if (b->not_ready && children_up(b) == 0) {
                list_remove(&b->queue, k);
                call_fail(k, JRPC_WORKER_FAILED);
                call_free(k);
                continue;
            }
            return;
        }
        list_remove(&b->queue, k);
        if (call_send(c, k) < 0) {
            call_fail(k, JRPC_INTERNAL_ERROR);
            call_free(k);
        }
    }
}

/* The handler of every --method: copies what the call needs (params as
 * JSON), queues it and pumps. */
typedef struct method_arg {
    bridge_t *b;
    bool      idem;   /* declared NAME:idempotent */
} method_arg_t;

static int pass_json(bridge_t *b, jrpc_wcall_t *wc, const char *p, size_t n);

/* --mcp: a client's initialize, answered from the cached InitializeResult. */
static void mcp_answer_init(bridge_t *b, jrpc_wcall_t *wc)
{
    pass_json(b, wc, b->mcp_init.p, b->mcp_init.len);   /* answers wc whatever happens */
}

/* --mcp: the bridge's side of the handshake. The client's initialize is
 * answered with a child's InitializeResult (or waits for the first one);
 * its notifications/initialized is swallowed (every child had one from
 * the bridge). */
static bool mcp_own(bridge_t *b, jrpc_wcall_t *wc)
{
    const char *m = jrpc_wcall_method(wc);
    if (strcmp(m, "notifications/initialized") == 0) {
        msgpack_pack_nil(jrpc_wcall_result(wc));
        jrpc_wcall_finish(wc);
        return true;
    }
    if (strcmp(m, "initialize") != 0)
        return false;
    if (b->mcp_init.len > 0) {
        mcp_answer_init(b, wc);
        return true;
    }
    call_t *k = calloc(1, sizeof *k);
    if (k == NULL) {
        jrpc_wcall_error(wc, JRPC_INTERNAL_ERROR, jrpc_error_message(JRPC_INTERNAL_ERROR));
        return true;
    }
    jrpc_buf_init(&k->params);
    k->wc = wc;
    k->deadline = jrpc_wcall_deadline(wc);
    list_push(&b->init_wait, k);
    return true;
}

static void on_call(jrpc_wcall_t *wc, const char *params, size_t n, void *arg)
{
    const method_arg_t *ma = arg;
    bridge_t *br = ma->b;
    if (br->mcp && mcp_own(br, wc))
        return;
    call_t *k = calloc(1, sizeof *k);
    if (k == NULL || (k->method = strdup(jrpc_wcall_method(wc))) == NULL) {
        free(k);
        jrpc_wcall_error(wc, JRPC_INTERNAL_ERROR, jrpc_error_message(JRPC_INTERNAL_ERROR));
        return;
    }
    jrpc_buf_init(&k->params);
    k->wc = wc;
    k->idem = ma->idem;
    k->deadline = jrpc_wcall_deadline(wc);
    /* The client's params text as the broker passed it on (declared
     * "json"): copied as it is, but for NDJSON a raw CR or LF — whitespace
     * in valid JSON, never inside a string — becomes a space, so that the
     * message stays one line. */
    if (n > 0 && jrpc_buf_append(&k->params, params, n) < 0) {
        call_fail(k, JRPC_INTERNAL_ERROR);
        call_free(k);
        return;
    }
    for (size_t i = 0; br->framing == JRPC_FRAME_NDJSON && i < k->params.len; i++)
        if (k->params.p[i] == '\n' || k->params.p[i] == '\r')
            k->params.p[i] = ' ';
    list_push(&br->queue, k);
    pump(br);
}

/* ---- what a child says ---- */

/* Lines about what a child wrote (its stderr, what was skipped) are
 * rate-limited per child: at most --child-log-per-sec in a window of
 * LOG_WINDOW_MS; past it they are counted, and the window's count is logged
 * once (child_log_suppressed) when it ends, so that a child that floods
 * cannot flood the bridge's log, nor hold its loop writing it. */
static void child_log_flush(child_t *c)
{
    if (c->log_dropped > 0)
        JRPC_LOG(JRPC_LOG_WARN, "stdio", "event=child_log_suppressed pid=%d slot=%u lines=%llu "
                 "bytes=%llu window_ms=%llu max_per_sec=%u", c->pid, c->slot,
                 (unsigned long long)c->log_dropped, (unsigned long long)c->log_dropped_bytes,
                 (unsigned long long)(uv_now(c->b->loop) - c->log_window), c->b->log_per_sec);
    c->log_dropped = c->log_dropped_bytes = 0;
}

/* Whether one more line about child c may be logged now; if not, it is
 * counted with the bytes of the child's it was about. */
static bool child_log_ok(child_t *c, size_t bytes)
{
    uint64_t now = uv_now(c->b->loop);
    if (now - c->log_window >= LOG_WINDOW_MS) {
        child_log_flush(c);
        c->log_window = now;
        c->log_lines = 0;
    }
    if (c->log_lines < c->b->log_per_sec) {
        c->log_lines++;
        return true;
    }
    c->log_dropped++;
    c->log_dropped_bytes += bytes;
    return false;
}

/* JRPC_LOG for a line about what child c wrote (bytes of it): the level
 * first, then the child's budget. */
#define CHILD_LOG(c, bytes, level, ...)                                          \
    do {                                                                         \
        if ((level) >= jrpc_log_level && child_log_ok((c), (bytes)))             \
            jrpc_log_write((level), "stdio", __VA_ARGS__);                       \
    } while (0)

static call_t *held_find(child_t *c, uint64_t id)
{
    for (call_t *k = c->held.head; k; k = k->next)
        if (k->id == id)
            return k;
    return NULL;
}

/* Passes the child's error object on as it is: code, message and data.
 * An object without an integer code or a string message is the child's
 * fault: -32603, logged. */
static void answer_error(child_t *c, call_t *k, jrpc_span_t err)
{
    bridge_t *b = c->b;
    msgpack_object o, *code = NULL, *msg = NULL;
    const msgpack_object *data = NULL;
    jrpc_buf_reset(&b->tmp);
    msgpack_zone_clear(&b->zone);
    if (jrpc_json_to_msgpack(err.p, err.n, JRPC_JSON_MAX_DEPTH, &b->tmp) == 0 &&
        jrpc_mpack_unpack(b->tmp.p, b->tmp.len, JRPC_JSON_MAX_DEPTH + 1, &b->zone, &o) == 0) {
        code = (msgpack_object *)jrpc_mpack_map_get(&o, "code");
        msg = (msgpack_object *)jrpc_mpack_map_get(&o, "message");
        data = jrpc_mpack_map_get(&o, "data");
    }
    bool code_ok = code && ((code->type == MSGPACK_OBJECT_NEGATIVE_INTEGER &&
                             code->via.i64 >= INT32_MIN) ||
                            (code->type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
                             code->via.u64 <= INT32_MAX));
    if (!code_ok || msg == NULL || msg->type != MSGPACK_OBJECT_STR) {
        JRPC_LOG(JRPC_LOG_WARN, "stdio", "event=child_bad_error pid=%d id=%llu", c->pid,
                 (unsigned long long)k->id);
        call_fail(k, JRPC_INTERNAL_ERROR);
        return;
    }
    char *text = strndup(msg->via.str.ptr, msg->via.str.size);
    if (text == NULL) {
        call_fail(k, JRPC_INTERNAL_ERROR);
        return;
    }
    /* data: the child's own text, passed on as JSON (no transcoding) */
    jrpc_span_t data_text = { NULL, 0 };
    if (data && jrpc_json_member(err.p, err.n, "data", &data_text) < 0)
        data_text = (jrpc_span_t){ NULL, 0 };
    int icode = code->type == MSGPACK_OBJECT_NEGATIVE_INTEGER ? (int)code->via.i64
                                                              : (int)code->via.u64;
    jrpc_wcall_error_json(k->wc, icode, text, data_text.p, data_text.n);
    k->wc = NULL;
    free(text);
}

/* Answers wc with the JSON result p[0..n), the child's text as it is
 * (every method is declared "json": the broker checks it and copies it
 * into the reply; an older broker gets it transcoded by the library).
 * p[0..n) is part of a message jrpc_stdio_frame validated, so it is JSON:
 * wc is answered and freed whatever happens; 0, or -ENOMEM when the
 * answer could not be queued. */
static int pass_json(bridge_t *b, jrpc_wcall_t *wc, const char *p, size_t n)
{
    (void)b;
    return jrpc_wcall_finish_json(wc, p, n);
}

/* Passes the child's result on. */
static void answer_result(child_t *c, call_t *k, jrpc_span_t res)
{
    if (pass_json(c->b, k->wc, res.p, res.n) < 0)
        JRPC_LOG(JRPC_LOG_WARN, "stdio", "event=answer_lost pid=%d id=%llu err=nomem", c->pid,
                 (unsigned long long)k->id);
    k->wc = NULL;
}

/* --mcp: sends the child the bridge's initialize (the handshake's first
 * half); the child takes calls once it answers (mcp_initialized). */
static int mcp_start(child_t *c)
{
    bridge_t *b = c->b;
    call_t *k = calloc(1, sizeof *k);
    if (k == NULL || (k->method = strdup("initialize")) == NULL) {
        free(k);
        return -ENOMEM;
    }
    jrpc_buf_init(&k->params);
    k->mcp_init = true;
    k->deadline = uv_now(b->loop) + MCP_INIT_MS;  /* then --hang-kill-ms, and it is replaced */
    int rc = jrpc_buf_puts(&k->params, "{\"protocolVersion\":\"" MCP_VERSION "\","
                           "\"capabilities\":{},\"clientInfo\":{\"name\":\"jrpc-stdio\","
                           "\"version\":\"" JRPC_VERSION "\"}}");
    if (rc == 0)
        rc = call_send(c, k);
    if (rc < 0)
        call_free(k);
    return rc;
}

/* --mcp: the child's answer to the bridge's initialize. A result is kept
 * (the latest child's: they run the same command) for clients' initialize,
 * the child is told notifications/initialized and takes calls; anything
 * else loses the child (restarted with backoff). */
static void mcp_initialized(child_t *c, const jrpc_child_msg_t *m)
{
    bridge_t *b = c->b;
    static const char note[] = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}";
    if (m->kind == JRPC_CHILD_BAD_ANSWER || m->error.n > 0 || m->result.n == 0 ||
        m->result.p[0] != '{') {
        JRPC_LOG(JRPC_LOG_WARN, "stdio", "event=mcp_initialize_failed pid=%d answer=%.*s", c->pid,
                 (int)(m->error.n > 200 ? 200 : m->error.n), m->error.n ? m->error.p : "");
        child_lost(c, "mcp_initialize_failed");
        return;
    }
    jrpc_buf_reset(&b->mcp_init);
    if (jrpc_buf_append(&b->mcp_init, m->result.p, m->result.n) < 0 ||
        child_write(c, note, sizeof note - 1) < 0) {
        jrpc_buf_reset(&b->mcp_init);
        child_lost(c, "out_of_memory");
        return;
    }
    c->ready = true;
    JRPC_LOG(JRPC_LOG_INFO, "stdio", "event=mcp_initialized pid=%d slot=%u result_bytes=%zu",
             c->pid, c->slot, m->result.n);
    while (b->init_wait.head) {
        call_t *k = b->init_wait.head;
        list_remove(&b->init_wait, k);
        mcp_answer_init(b, k->wc);
        call_free(k);
    }
    pump(b);
}

static void child_message(child_t *c, const char *p, size_t n)
{
    jrpc_child_msg_t m;
    switch (jrpc_child_msg_parse(p, n, &m)) {
    case JRPC_CHILD_GARBAGE:
        c->hostile++;
        CHILD_LOG(c, n, JRPC_LOG_WARN, "event=child_garbage pid=%d bytes=%zu", c->pid, n);
        return;
    case JRPC_CHILD_NOTIFICATION:
        CHILD_LOG(c, n, JRPC_LOG_DEBUG, "event=child_notification pid=%d method=%.*s", c->pid,
                  (int)(m.method.n > 80 ? 80 : m.method.n), m.method.p);
        return;
    case JRPC_CHILD_REQUEST: {
        c->hostile++;
        CHILD_LOG(c, n, JRPC_LOG_WARN, "event=child_request pid=%d method=%.*s answer=-32601",
                  c->pid, (int)(m.method.n > 80 ? 80 : m.method.n), m.method.p);
        /* A child that asks without reading our answers must not make
         * them pile up in memory: past a bound they are not sent. */
        if (uv_stream_get_write_queue_size((uv_stream_t *)&c->in) > REPLY_QUEUE_MAX)
            return;
        jrpc_buf_t r;
        jrpc_buf_init(&r);
        if (jrpc_buf_puts(&r, "{\"jsonrpc\":\"2.0\",\"id\":") == 0 &&
            jrpc_buf_append(&r, m.id_raw.p, m.id_raw.n) == 0 &&
            jrpc_buf_puts(&r, ",\"error\":{\"code\":-32601,\"message\":\"Method not found\"}}") == 0)
            child_write(c, r.p, r.len);
        jrpc_buf_dispose(&r);
        return;
    }
    case JRPC_CHILD_BAD_ID:
        c->hostile++;
        CHILD_LOG(c, n, JRPC_LOG_WARN, "event=child_unknown_id pid=%d id=%.*s", c->pid,
                  (int)(m.id_raw.n > 40 ? 40 : m.id_raw.n), m.id_raw.p ? m.id_raw.p : "");
        return;
    default:
        break;
    }
    call_t *k = held_find(c, m.id);
    if (k == NULL) {
        c->hostile++;
        CHILD_LOG(c, n, JRPC_LOG_WARN, "event=child_unknown_id pid=%d id=%llu", c->pid,
                  (unsigned long long)m.id);
        return;
    }
    list_remove(&c->held, k);
    c->calls++;
    uint64_t us = (uv_hrtime() - k->t_sent) / 1000;
    size_t bi = 0;
    while (bi < NLAT && (double)us > lat_le[bi] * 1e6)
        bi++;
    c->lat[bi]++;
    c->lat_sum_us += us;
    if (m.error.n > 0 && k->wc)
        c->errors++;
    CHILD_LOG(c, n, JRPC_LOG_DEBUG, "event=child_answer pid=%d id=%llu time_us=%llu late=%d",
              c->pid, (unsigned long long)k->id, (unsigned long long)us, k->wc == NULL);
    if (k->mcp_init) {
        call_free(k);
        mcp_initialized(c, &m);
        return;
    }
    if (k->wc == NULL) {
        /* late: the broker was answered at the deadline */
    } else if (m.kind == JRPC_CHILD_BAD_ANSWER) {
        CHILD_LOG(c, n, JRPC_LOG_WARN, "event=child_bad_answer pid=%d id=%llu", c->pid,
                  (unsigned long long)k->id);
        call_fail(k, JRPC_INTERNAL_ERROR);
    } else if (m.error.n > 0) {
        answer_error(c, k, m.error);
    } else {
        answer_result(c, k, m.result);
    }
    call_free(k);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    static char slab[65536];
    (void)h;
    (void)suggested;
    *buf = uv_buf_init(slab, sizeof slab);
}

/* Counts n bytes read from child c's stream s since its reading last
 * resumed; past READ_BUDGET, stops reading it until the check phase of
 * this loop turn (on_resume). libuv reads a readable pipe up to 32 times
 * in one go: a child that writes as fast as it can would otherwise keep
 * the loop there, and the timers (heartbeats to the brokers, deadlines)
 * would wait. */
static void read_budget(child_t *c, uv_stream_t *s, size_t *turn, bool *paused, size_t n)
{
    *turn += n;
    if (*turn < READ_BUDGET || !uv_is_active((uv_handle_t *)s))
        return;
    uv_read_stop(s);
    *paused = true;
    uv_check_start(&c->b->resume, on_resume);
}

static void on_out(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    child_t *c = s->data;
    if (nread < 0) {
        c->out_eof = true;
        uv_read_stop(s);
        child_lost(c, nread == UV_EOF ? "stdout_closed" : "stdout_failed");
        return;
    }
    if (nread == 0 || c->state != CHILD_UP)
        return;
    if (jrpc_frame_feed(&c->rd, buf->base, (size_t)nread) < 0) {
        child_lost(c, "nomem");
        return;
    }
    jrpc_span_t m;
    int rc;
    while (c->state == CHILD_UP && (rc = jrpc_frame_next(&c->rd, &m)) != 0) {
        if (rc < 0)
            c->hostile++;
        if (rc == JRPC_FRAME_ETOOBIG)
            CHILD_LOG(c, 0, JRPC_LOG_WARN, "event=child_message_too_big pid=%d max=%u", c->pid,
                      c->b->max_line);
        else if (rc < 0)
            CHILD_LOG(c, 0, JRPC_LOG_WARN, "event=child_bad_header pid=%d", c->pid);
        else
            child_message(c, m.p, m.n);
    }
    pump(c->b);
    read_budget(c, s, &c->out_turn, &c->out_paused, (size_t)nread);
}

static void stderr_line(child_t *c, const char *p, size_t n, size_t full)
{
    if (jrpc_log_level > JRPC_LOG_INFO || !child_log_ok(c, full))
        return;
    char line[STDERR_LINE_MAX];
    size_t k = 0;
    for (size_t i = 0; i < n && k < sizeof line - 1; i++)
        line[k++] = (p[i] == '"' || p[i] == '\\' || (unsigned char)p[i] < 0x20) ? '?' : p[i];
    line[k] = '\0';
    JRPC_LOG(JRPC_LOG_INFO, "stdio", "event=child_stderr pid=%d line=\"%s\"", c->pid, line);
}

static void on_err(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    child_t *c = s->data;
    if (nread < 0) {
        if (c->errline_n)
            stderr_line(c, c->errline.p, c->errline.len, c->errline_n);
        jrpc_buf_reset(&c->errline);
        c->errline_n = 0;
        uv_read_stop(s);
        return;
    }
    const char *p = buf->base, *end = buf->base + nread;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t k = (size_t)((nl ? nl : end) - p), room = STDERR_LINE_MAX - c->errline.len;
        (void)jrpc_buf_append(&c->errline, p, k < room ? k : room); /* no memory: logged shorter */
        c->errline_n += k;
        if (nl == NULL)
            break;
        stderr_line(c, c->errline.p, c->errline.len, c->errline_n + 1);
        jrpc_buf_reset(&c->errline);
        c->errline_n = 0;
        p = nl + 1;
    }
    read_budget(c, s, &c->err_turn, &c->err_paused, (size_t)nread);
}

/* The check phase of a turn in which a child's reading was stopped by
 * READ_BUDGET: reading starts again (the next turn's timers run first). */
static void on_resume(uv_check_t *h)
{
    bridge_t *b = h->data;
    for (unsigned i = 0; i < b->procs; i++) {
        child_t *c = &b->children[i];
        if (c->out_paused && !c->out_eof && !uv_is_closing((uv_handle_t *)&c->out))
            uv_read_start((uv_stream_t *)&c->out, on_alloc, on_out);
        if (c->err_paused && !uv_is_closing((uv_handle_t *)&c->err))
            uv_read_start((uv_stream_t *)&c->err, on_alloc, on_err);
        c->out_paused = c->err_paused = false;
        c->out_turn = c->err_turn = 0;
    }
    uv_check_stop(h);
}

/* ---- children's lives ---- */

/* The earliest time the restart budget allows the next restart (now when
 * fewer than restart_max happened in the last minute). */
static uint64_t restart_allowed_at(bridge_t *b)
{
    if (b->nrestarts < b->restart_max)
        return 0;
    return b->restarts[b->nrestarts % b->restart_max] + 60000;
}

static void on_restart_timer(uv_timer_t *t)
{
    child_t *c = t->data;
    bridge_t *b = c->b;
    if (b->stopping || c->state != CHILD_DOWN)
        return;
    uint64_t now = uv_now(b->loop), at = restart_allowed_at(b);
    if (at > now) {
        if (!b->not_ready)
            JRPC_LOG(JRPC_LOG_ERROR, "stdio", "event=not_ready reason=restart_budget "
                     "restart_max_per_min=%u children_up=%u", b->restart_max, children_up(b));
        b->not_ready = true;
        pump(b);  /* with no child left, the queue is answered -32004 */
        if (children_up(b) == 0)
            jrpc_worker_pause(b->w);  /* leave the brokers (DISCONNECT) until a child is back */
        uv_timer_start(&c->timer, on_restart_timer, at - now, 0);
        return;
    }
    b->restarts[b->nrestarts % b->restart_max] = now;
    b->nrestarts++;
    c->restarts++;
    child_start(c);
}

static void on_child_closed(uv_handle_t *h)
{
    child_t *c = h->data;
    if (--c->open > 0)
        return;
    bridge_t *b = c->b;
    child_log_flush(c);
    c->state = CHILD_DOWN;
    jrpc_frame_reader_dispose(&c->rd);
    jrpc_buf_dispose(&c->errline);
    if (b->stopping)
        return;
    uint64_t age = uv_now(b->loop) - c->started;
    c->quick_deaths = age < QUICK_DEATH_MS ? c->quick_deaths + 1 : 0;
    uint64_t delay = 0;
    if (c->quick_deaths > 1) {
        unsigned sh = c->quick_deaths - 2 > 6 ? 6 : c->quick_deaths - 2;
        delay = (uint64_t)BACKOFF_MIN_MS << sh;
        if (delay > BACKOFF_MAX_MS)
            delay = BACKOFF_MAX_MS;
    }
    uv_timer_start(&c->timer, on_restart_timer, delay, 0);
}

static void child_close_all(child_t *c)
{
    uv_handle_t *hs[] = { (uv_handle_t *)&c->in, (uv_handle_t *)&c->out, (uv_handle_t *)&c->err };
    for (size_t i = 0; i < 3; i++)
        if (!uv_is_closing(hs[i]))
            uv_close(hs[i], on_child_closed);
    if (c->exited && !uv_is_closing((uv_handle_t *)&c->proc))
        uv_close((uv_handle_t *)&c->proc, on_child_closed);
}

/* SIGKILL to the child's process group: the child and whatever it started
 * (a wrapper that does not exec, `sh -c 'server; true'` or npx, leaves the
 * server as its child). Each child leads a group of its own (setsid at the
 * spawn, UV_PROCESS_DETACHED), so nothing of the bridge's is in it. Also
 * after the child has exited and been reaped: the group's id stays taken
 * while any member lives, and when none does the kill finds no one
 * (ESRCH) — unless that id has since been handed to a new process that
 * made itself a group leader, which the pid counter going round in the
 * moment between an exit and this call would take. */
static void child_kill(child_t *c)
{
    if (c->pid <= 0)
        return;
    if (kill(-c->pid, SIGKILL) < 0 && errno != ESRCH)
        JRPC_LOG(JRPC_LOG_WARN, "stdio", "event=child_kill_failed pid=%d err=\"%s\"", c->pid,
                 strerror(errno));
    if (!c->exited)
        uv_process_kill(&c->proc, SIGKILL);  /* the group failing, still the child */
}

/* The child is gone for us (exited, stdout closed, unwritable, hung): every
 * call it held is answered now (-32004) or, when idempotent, queued again;
 * the child's process group is killed (the child, if it still runs, and
 * what it left behind); its handles are closed. */
static void child_lost(child_t *c, const char *why)
{
    bridge_t *b = c->b;
    if (c->state != CHILD_UP)
        return;
    c->state = CHILD_DYING;
    uv_timer_stop(&c->timer);
    unsigned failed = 0, requeued = 0;
    while (c->held.head) {
        call_t *k = c->held.head;
        list_remove(&c->held, k);
        k->child = NULL;
        if (k->wc && k->idem && k->tries < MAX_TRIES && !b->stopping) {
            list_unshift(&b->queue, k);
            requeued++;
            continue;
        }
        if (k->wc) {
            failed++;
            c->lost++;
        }
        call_fail(k, JRPC_WORKER_FAILED);
        call_free(k);
    }
    JRPC_LOG(b->stopping ? JRPC_LOG_INFO : JRPC_LOG_WARN, "stdio",
             "event=child_lost pid=%d slot=%u reason=%s failed=%u requeued=%u", c->pid, c->slot,
             why, failed, requeued);
    child_kill(c);  /* exited too: what it started may still run */
    child_close_all(c);
    pump(b);
}

static void on_exit_grace(uv_timer_t *t)
{
    child_lost(t->data, "exited");
}

static void on_child_exit(uv_process_t *p, int64_t status, int term_signal)
{
    child_t *c = p->data;
    c->exited = true;
    JRPC_LOG(c->b->stopping ? JRPC_LOG_INFO : JRPC_LOG_WARN, "stdio",
             "event=child_exited pid=%d slot=%u status=%lld signal=%d", c->pid, c->slot,
             (long long)status, term_signal);
    if (c->state == CHILD_UP && !c->out_eof) {
        /* What it wrote last may still be in the pipe: read it first. */
        uv_timer_start(&c->timer, on_exit_grace, EXIT_GRACE_MS, 0);
        return;
    }
    child_lost(c, "exited");
    if (!uv_is_closing((uv_handle_t *)&c->proc))
        uv_close((uv_handle_t *)&c->proc, on_child_closed);
}

/* Spawns the slot's child. Returns 0, or the negative libuv code of a
 * failed spawn (logged; the slot is restarted as after a death). */
static int child_start(child_t *c)
{
    bridge_t *b = c->b;
    uv_pipe_init(b->loop, &c->in, 0);
    uv_pipe_init(b->loop, &c->out, 0);
    uv_pipe_init(b->loop, &c->err, 0);
    c->in.data = c->out.data = c->err.data = c->proc.data = c;
    c->open = 4;
    c->exited = c->out_eof = false;
    c->started = uv_now(b->loop);
    jrpc_frame_reader_init(&c->rd, b->framing, b->max_line);
    jrpc_buf_init(&c->errline);
    c->errline_n = c->out_turn = c->err_turn = 0;
    c->out_paused = c->err_paused = false;
    c->log_window = c->started;
    c->log_lines = 0;
    uv_stdio_container_t stdio[3] = {
        { .flags = UV_CREATE_PIPE | UV_READABLE_PIPE, .data.stream = (uv_stream_t *)&c->in },
        { .flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&c->out },
        { .flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&c->err },
    };
    /* UV_PROCESS_DETACHED: setsid() in the child before exec, so that it
     * leads a process group (and session) of its own and child_kill() can
     * reach all it starts. libuv has no hook to call setpgid() in the
     * child, and setpgid() from here would race the child's own forks;
     * setsid() also keeps a terminal's ^C off the children: the bridge
     * stops them itself, in order. */
    uv_process_options_t o = {
        .exit_cb = on_child_exit, .file = b->argv[0], .args = b->argv,
        .stdio_count = 3, .stdio = stdio, .flags = UV_PROCESS_DETACHED,
    };
    int rc = uv_spawn(b->loop, &c->proc, &o);
    if (rc < 0) {
        JRPC_LOG(JRPC_LOG_ERROR, "stdio", "event=spawn_failed slot=%u command=%s err=\"%s\"",
                 c->slot, b->argv[0], uv_strerror(rc));
        c->state = CHILD_DYING;
        c->exited = true;  /* nothing to wait for */
        child_close_all(c);
        return rc;
    }
    c->pid = c->proc.pid;
    c->state = CHILD_UP;
    c->ready = !b->mcp;
    uv_read_start((uv_stream_t *)&c->out, on_alloc, on_out);
    uv_read_start((uv_stream_t *)&c->err, on_alloc, on_err);
    JRPC_LOG(JRPC_LOG_INFO, "stdio", "event=child_started pid=%d slot=%u restarts=%llu", c->pid,
             c->slot, (unsigned long long)c->restarts);
    if (b->not_ready) {  /* a child is up: calls can be served again */
        b->not_ready = false;
        JRPC_LOG(JRPC_LOG_INFO, "stdio", "event=ready children_up=%u", children_up(b));
    }
    jrpc_worker_resume(b->w);  /* after a pause: READY again */
    if (b->mcp && mcp_start(c) < 0) {
        child_lost(c, "out_of_memory");
        return 0;
    }
    pump(b);
    return 0;
}

/* ---- deadlines and hangs ---- */

static void on_sweep(uv_timer_t *t)
{
    bridge_t *b = t->data;
    uint64_t now = uv_now(b->loop);
    for (call_t *k = b->queue.head, *next; k; k = next) {
        next = k->next;
        if (k->deadline <= now) {
            list_remove(&b->queue, k);
            call_fail(k, JRPC_TIMEOUT);
            call_free(k);
        }
    }
    for (call_t *k = b->init_wait.head, *next; k; k = next) {
        next = k->next;
        if (k->deadline <= now) {
            list_remove(&b->init_wait, k);
            call_fail(k, JRPC_TIMEOUT);
            call_free(k);
        }
    }
    for (unsigned i = 0; i < b->procs; i++) {
        child_t *c = &b->children[i];
        if (c->log_dropped > 0 && now - c->log_window >= LOG_WINDOW_MS) {
            child_log_flush(c);  /* the window is over and the child quiet since */
            c->log_window = now;
            c->log_lines = 0;
        }
        if (c->state != CHILD_UP)
            continue;
        for (call_t *k = c->held.head; k; k = k->next) {
            if (k->deadline > now)
                continue;
            if (k->wc) {
                /* The broker answers the client -32003 now anyway; give its
                 * credit back. The child's window stays taken until it
                 * answers or is killed. */
                JRPC_LOG(JRPC_LOG_WARN, "stdio", "event=call_late pid=%d id=%llu method=%s",
                         c->pid, (unsigned long long)k->id, k->method);
                call_fail(k, JRPC_TIMEOUT);
                c->late++;
            }
            if (now - k->deadline >= b->hang_kill_ms) {
                JRPC_LOG(JRPC_LOG_WARN, "stdio", "event=child_hung pid=%d id=%llu "
                         "hang_kill_ms=%u action=kill", c->pid, (unsigned long long)k->id,
                         b->hang_kill_ms);
                child_lost(c, "hung");
                break;
            }
        }
    }
}

/* ---- /metrics and /readyz (--admin) ---- */

static int put(jrpc_buf_t *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int put(jrpc_buf_t *out, const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    return jrpc_buf_append(out, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

#define COUNTER(name, help, field)                                                          \
    do {                                                                                    \
        rc |= put(out, "# HELP " name " " help "\n# TYPE " name " counter\n");               \
        for (unsigned i = 0; i < b->procs; i++)                                             \
            rc |= put(out, name "{slot=\"%u\"} %llu\n", i,                                  \
                      (unsigned long long)b->children[i].field);                            \
    } while (0)

/* Prometheus text 0.0.4 (docs/STDIO.md, "Metrics"). */
static int write_metrics(void *arg, jrpc_buf_t *out)
{
    bridge_t *b = arg;
    int rc = 0;
    rc |= put(out, "# HELP jrpc_stdio_children Children the bridge runs (--procs).\n"
                   "# TYPE jrpc_stdio_children gauge\njrpc_stdio_children %u\n", b->procs);
    rc |= put(out, "# HELP jrpc_stdio_children_alive Children up and taking calls.\n"
                   "# TYPE jrpc_stdio_children_alive gauge\njrpc_stdio_children_alive %u\n",
              children_up(b));
    rc |= put(out, "# HELP jrpc_stdio_not_ready 1 while the restart budget is spent.\n"
                   "# TYPE jrpc_stdio_not_ready gauge\njrpc_stdio_not_ready %d\n", b->not_ready);
    rc |= put(out, "# HELP jrpc_stdio_queued Calls waiting for a child's window.\n"
                   "# TYPE jrpc_stdio_queued gauge\njrpc_stdio_queued %u\n", b->queue.n);
    rc |= put(out, "# HELP jrpc_stdio_child_up The slot's child (pid) is up.\n"
                   "# TYPE jrpc_stdio_child_up gauge\n");
    for (unsigned i = 0; i < b->procs; i++)
        rc |= put(out, "jrpc_stdio_child_up{slot=\"%u\",pid=\"%d\"} %d\n", i,
                  b->children[i].pid, b->children[i].state == CHILD_UP);
    rc |= put(out, "# HELP jrpc_stdio_inflight Calls a slot's child holds.\n"
                   "# TYPE jrpc_stdio_inflight gauge\n");
    for (unsigned i = 0; i < b->procs; i++)
        rc |= put(out, "jrpc_stdio_inflight{slot=\"%u\"} %u\n", i, b->children[i].held.n);
    COUNTER("jrpc_stdio_restarts_total", "Restarts of the slot's child.", restarts);
    COUNTER("jrpc_stdio_calls_total", "Answers the slot's children gave (late ones too).", calls);
    COUNTER("jrpc_stdio_call_errors_total", "Answers that were error objects.", errors);
    COUNTER("jrpc_stdio_calls_lost_total", "Calls answered -32004 when a child was lost.", lost);
    COUNTER("jrpc_stdio_calls_late_total", "Calls answered -32003 at their deadline.", late);
    COUNTER("jrpc_stdio_child_skipped_total", "Messages of a child logged and skipped "
            "(not JSON, unknown id, too big, requests).", hostile);
    rc |= put(out, "# HELP jrpc_stdio_answer_seconds A child's answer time, from the write of "
                   "the call to the read of the answer.\n"
                   "# TYPE jrpc_stdio_answer_seconds histogram\n");
    for (unsigned i = 0; i < b->procs; i++) {
        const child_t *c = &b->children[i];
        uint64_t cum = 0;
        for (size_t k = 0; k < NLAT; k++) {
            cum += c->lat[k];
            rc |= put(out, "jrpc_stdio_answer_seconds_bucket{slot=\"%u\",le=\"%g\"} %llu\n", i,
                      lat_le[k], (unsigned long long)cum);
        }
        cum += c->lat[NLAT];
        rc |= put(out, "jrpc_stdio_answer_seconds_bucket{slot=\"%u\",le=\"+Inf\"} %llu\n"
                       "jrpc_stdio_answer_seconds_sum{slot=\"%u\"} %.6f\n"
                       "jrpc_stdio_answer_seconds_count{slot=\"%u\"} %llu\n",
                  i, (unsigned long long)cum, i, (double)c->lat_sum_us / 1e6, i,
                  (unsigned long long)cum);
    }
    return rc < 0 ? -ENOMEM : 0;
}

static const char *bridge_not_ready(void *arg)
{
    bridge_t *b = arg;
    if (b->stop.signals > 0)
        return "draining";
    if (b->not_ready)
        return "restart budget spent";
    if (children_up(b) == 0)
        return "no child up";
    bool ready = false;
    for (unsigned i = 0; i < b->procs; i++)
        ready = ready || (b->children[i].state == CHILD_UP && b->children[i].ready);
    if (!ready)
        return "no child initialized (--mcp)";
    return NULL;
}

/* ---- stopping ---- */

static void on_stop_timer(uv_timer_t *t)
{
    bridge_t *b = t->data;
    for (unsigned i = 0; i < b->procs; i++) {
        child_t *c = &b->children[i];
        if (c->state != CHILD_DOWN && !c->exited) {
            JRPC_LOG(JRPC_LOG_WARN, "stdio", "event=child_kill pid=%d reason=stop_timeout", c->pid);
            child_kill(c);
        }
    }
}


/* After the worker stopped: nothing more comes from the brokers. Answers
 * still owed are dropped by the library; the children get EOF on stdin,
 * --stop-timeout-ms to exit, then SIGKILL; the loop runs until every one
 * is reaped and every handle closed. */
static void bridge_shutdown(bridge_t *b)
{
    b->stopping = true;
    while (b->queue.head) {
        call_t *k = b->queue.head;
        list_remove(&b->queue, k);
        call_fail(k, JRPC_WORKER_FAILED);
        call_free(k);
    }
    while (b->init_wait.head) {
        call_t *k = b->init_wait.head;
        list_remove(&b->init_wait, k);
        call_fail(k, JRPC_WORKER_FAILED);
        call_free(k);
    }
    for (unsigned i = 0; i < b->procs; i++) {
        child_t *c = &b->children[i];
        uv_timer_stop(&c->timer);
        for (call_t *k = c->held.head; k; k = k->next)
            call_fail(k, JRPC_WORKER_FAILED);  /* dropped: the worker has stopped */
        if (c->state == CHILD_UP && !uv_is_closing((uv_handle_t *)&c->in))
            uv_close((uv_handle_t *)&c->in, on_child_closed);
    }
    uv_timer_start(&b->stop_timer, on_stop_timer, b->stop_timeout_ms, 0);
    for (;;) {
        bool busy = false;
        for (unsigned i = 0; i < b->procs; i++)
            busy = busy || b->children[i].state != CHILD_DOWN;
        if (!busy)
            break;
        uv_run(b->loop, UV_RUN_ONCE);
    }
    for (unsigned i = 0; i < b->procs; i++) {
        child_t *c = &b->children[i];
        while (c->held.head) {
            call_t *k = c->held.head;
            list_remove(&c->held, k);
            call_free(k);
        }
        uv_close((uv_handle_t *)&c->timer, NULL);
    }
    jrpc_admin_destroy(&b->admin);
    uv_close((uv_handle_t *)&b->stop_timer, NULL);
    uv_close((uv_handle_t *)&b->sweep, NULL);
    uv_close((uv_handle_t *)&b->resume, NULL);
    jrpc_stop_close(&b->stop);
    for (int i = 0; i < 100 && uv_loop_alive(b->loop); i++)  /* the close callbacks */
        uv_run(b->loop, UV_RUN_NOWAIT);
}

/* ---- flags ---- */

/* NAME or NAME:idempotent, NAME non-empty. */
static int method_ok(const char *v, char *err, size_t errlen)
{
    const char *colon = strchr(v, ':');
    if (v[0] == '\0' || colon == v || (colon && strcmp(colon, ":idempotent") != 0)) {
        snprintf(err, errlen, "'%s' is not NAME or NAME:idempotent", v);
        return -1;
    }
    return 0;
}

static const char *const framings[] = { "ndjson", "lsp", NULL };

/* --mcp: the methods declared (MCP 2025-06-18, server features and
 * utilities). Those that only read are idempotent: a call a lost child
 * held goes to another one. Left out: resources/subscribe and
 * logging/setLevel (state of one child, and their notifications have no
 * way back to the client here). */
static const struct { const char *name; bool idem; } mcp_methods[] = {
    { "initialize", true },           { "notifications/initialized", true },
    { "ping", true },                 { "tools/list", true },
    { "tools/call", false },          { "resources/list", true },
    { "resources/templates/list", true }, { "resources/read", true },
    { "prompts/list", true },         { "prompts/get", true },
    { "completion/complete", true },
};
#define MCP_NMETHODS (sizeof mcp_methods / sizeof *mcp_methods)

int main(int argc, char **argv)
{
    jrpc_log_init("jrpc-stdio");
    signal(SIGPIPE, SIG_IGN);  /* a child that dies with writes pending: EPIPE, not death */
    jrpc_worker_opts_t opts;
    jrpc_worker_opts_init(&opts);
    jrpc_conf_list_t endpoints = { 0 }, methods = { 0 };
    const char *config = NULL, *framing = NULL, *admin_listen = NULL;
    jrpc_conf_std_t std = { 0 };
    int status = 1;
    bridge_t b = { 0 };
    method_arg_t *margs = NULL;
    msgpack_zone_init(&b.zone, 4096);
    jrpc_buf_init(&b.tmp);
    jrpc_buf_init(&b.mcp_init);
    /* The command starts after "--": the options parser never sees it. */
    int optc = argc;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--") == 0) {
            optc = i;
            break;
        }
    enum { U = JRPC_CONF_UINT, S = JRPC_CONF_STR, L = JRPC_CONF_LIST, C = JRPC_CONF_CHOICE };
    const jrpc_conf_opt_t table[] = {
        { "config", S, "FILE", NULL, "read options from this INI file (also JRPC_CONFIG)",
          .dest = &config, .flags = JRPC_CONF_NO_FILE },
        JRPC_CONNECT_OPTS(&endpoints, &opts.resolve_ms, &opts.zmq_engine),
        { "method", L, "NAME[:idempotent]", NULL, "a method the children serve (repeat); with\n"
          ":idempotent, a call a lost child held is sent to another\n"
          "child instead of being answered -32004", .dest = &methods, .check = method_ok },
        { "mcp", JRPC_CONF_FLAG, NULL, NULL, "the children are MCP servers: the bridge runs\n"
          "the MCP handshake and declares the MCP method set\n"
          "(docs/MCP.md)", .dest = &b.mcp },
        { "procs", U, "N", "1", "children to run", .dest = &b.procs, .min = 1, .max = 1024 },
        { "inflight", U, "K", "1", "calls one child holds at once (1: for servers that\n"
          "are not concurrent); the credit is procs x inflight", .dest = &b.inflight,
          .min = 1, .max = 1024 },
        { "framing", C, "FRAMING", "ndjson", "ndjson (one message a line) or lsp\n"
          "(Content-Length headers)", .dest = &framing, .choices = framings },
        { "max-line", U, "BYTES", "16777216", "largest message a child may write; a larger one\n"
          "is logged and skipped", .dest = &b.max_line, .min = 64, .max = 1073741824 },
        { "restart-max-per-min", U, "N", "30", "restarts allowed in any minute; past it the\n"
          "slot stays down until the minute allows", .dest = &b.restart_max, .min = 1,
          .max = 100000 },
        { "hang-kill-ms", U, "N", "5000", "a child still holding a call this long after the\n"
          "call's deadline is killed and replaced", .dest = &b.hang_kill_ms, .min = 0,
          .max = 86400000 },
        { "drain-timeout-ms", U, "N", "30000", "on SIGTERM, how long the calls held may take",
          .dest = &b.drain_timeout_ms, .min = 0, .max = 86400000 },
        { "stop-timeout-ms", U, "N", "5000", "on SIGTERM, after stdin is closed, how long the\n"
          "children may take to exit before SIGKILL", .dest = &b.stop_timeout_ms, .min = 0,
          .max = 600000 },
        { "child-log-per-sec", U, "N", "100", "lines about one child's output (its stderr,\n"
          "messages skipped) logged per second at most; the rest\n"
          "are counted in one child_log_suppressed line a second",
          .dest = &b.log_per_sec, .min = 1, .max = 1000000 },
        { "admin", S, "HOST:PORT", "none", "admin listener (/metrics, /healthz, /readyz), or none",
          .dest = &admin_listen, .check = jrpc_conf_check_hostport },
        { "name", S, "NAME", NULL, "this worker's name in the broker's logs and metrics",
          .dest = &opts.name, .check = jrpc_connect_name_check },
        { "heartbeat-ms", U, "N", "1000", "heartbeat interval in ms", .dest = &opts.heartbeat_ms,
          .min = 10, .max = 60000 },
        { "liveness", U, "N", "3", "silent intervals before a broker counts as dead",
          .dest = &opts.liveness, .min = 1, .max = 100 },
        JRPC_CONF_STD_OPTS(&std),
    };
    static const jrpc_conf_info_t info = { "jrpc-stdio", JRPC_VERSION, usage_head, usage_tail };
    jrpc_conf_t *conf = NULL;
    int done = jrpc_conf_main(&conf, &info, table, sizeof table / sizeof *table, &std, optc, argv);
    if (done >= 0) {
        status = done;
        goto out;
    }
    if ((methods.n == 0 && !b.mcp) || optc >= argc - 1) {
        fprintf(stderr, "jrpc-stdio: %s\nTry 'jrpc-stdio --help'.\n",
                methods.n == 0 && !b.mcp ? "at least one --method (or --mcp) is needed"
                               : "the command to run goes after '--'");
        status = 2;
        goto out;
    }
    if (std.check_config) {
        jrpc_conf_print(conf, stdout);
        status = 0;
        goto out;
    }
    b.argv = argv + optc + 1;
    b.framing = strcmp(framing, "lsp") == 0 ? JRPC_FRAME_LSP : JRPC_FRAME_NDJSON;
    b.loop = uv_default_loop();
    opts.loop = b.loop;
    opts.credit = b.procs * b.inflight;
    b.children = calloc(b.procs, sizeof *b.children);
    b.restarts = calloc(b.restart_max, sizeof *b.restarts);
    margs = calloc(methods.n + MCP_NMETHODS, sizeof *margs);
    if (b.children == NULL || b.restarts == NULL || margs == NULL)
        goto out;
    if ((b.w = jrpc_worker_new(&opts)) == NULL) {
        JRPC_LOG(JRPC_LOG_ERROR, "main", "event=start_failed err=\"%s\"", strerror(errno));
        goto out;
    }
    for (size_t i = 0; i < methods.n; i++) {
        char name[256];
        snprintf(name, sizeof name, "%s", methods.v[i]);
        char *colon = strchr(name, ':');
        margs[i] = (method_arg_t){ .b = &b, .idem = colon != NULL };
        if (colon)
            *colon = '\0';
        int rc = jrpc_worker_handle_json(b.w, name, on_call, &margs[i],
                                         colon ? JRPC_WORKER_IDEMPOTENT : 0);
        if (rc < 0) {
            fprintf(stderr, "jrpc-stdio: --method %s: %s\n", name, strerror(-rc));
            status = 2;
            goto out;
        }
    }
    for (size_t i = 0; b.mcp && i < MCP_NMETHODS; i++) {
        margs[methods.n + i] = (method_arg_t){ .b = &b, .idem = mcp_methods[i].idem };
        int rc = jrpc_worker_handle_json(b.w, mcp_methods[i].name, on_call, &margs[methods.n + i],
                                         mcp_methods[i].idem ? JRPC_WORKER_IDEMPOTENT : 0);
        if (rc < 0) {
            fprintf(stderr, "jrpc-stdio: --mcp %s: %s\n", mcp_methods[i].name, strerror(-rc));
            status = 2;
            goto out;
        }
    }
    if (strcmp(admin_listen, "none") != 0) {
        jrpc_admin_opts_t ao = JRPC_ADMIN_OPTS_DEFAULT;
        ao.listen = admin_listen;
        ao.metrics = write_metrics;
        ao.not_ready = bridge_not_ready;
        ao.arg = &b;
        if ((b.admin = jrpc_admin_new(b.loop, &ao)) == NULL)
            goto out;   /* logged; status 1 */
    }
    uv_timer_init(b.loop, &b.sweep);
    uv_check_init(b.loop, &b.resume);
    b.resume.data = &b;
    uv_timer_init(b.loop, &b.stop_timer);
    b.sweep.data = b.stop_timer.data = &b;
    uv_timer_start(&b.sweep, on_sweep, SWEEP_MS, SWEEP_MS);
    jrpc_stop_start(&b.stop, b.loop, b.w, b.drain_timeout_ms);
    int spawn_rc = 0;
    for (unsigned i = 0; i < b.procs; i++) {
        child_t *c = &b.children[i];
        c->b = &b;
        c->slot = i;
        uv_timer_init(b.loop, &c->timer);
        c->timer.data = c;
        spawn_rc = child_start(c);
    }
    if (spawn_rc == UV_ENOENT || spawn_rc == UV_EACCES) {
        /* The command cannot run at all: a usage error, not a service to
         * keep restarting. */
        fprintf(stderr, "jrpc-stdio: cannot run '%s': %s\n", b.argv[0], uv_strerror(spawn_rc));
        status = 2;
        goto out;
    }
    for (size_t i = 0; i < endpoints.n; i++) {
        int rc = jrpc_worker_connect(b.w, endpoints.v[i]);
        if (rc < 0) {
            JRPC_LOG(JRPC_LOG_ERROR, "main", "event=connect_failed endpoint=%s err=\"%s\"",
                     endpoints.v[i], zmq_strerror(-rc));
            jrpc_worker_stop(b.w);
            status = 2;
            break;
        }
    }
    JRPC_LOG(JRPC_LOG_INFO, "main", "event=serving procs=%u inflight=%u credit=%u framing=%s "
             "command=%s", b.procs, b.inflight, opts.credit, framing, b.argv[0]);
    jrpc_sdnotify_log("READY=1\nSTATUS=serving");
    int rc = jrpc_worker_run(b.w);
    bridge_shutdown(&b);
    if (status != 2)
        status = rc < 0 ? 1 : 0;
    uint64_t calls = 0, restarts = 0;
    for (unsigned i = 0; i < b.procs; i++) {
        calls += b.children[i].calls;
        restarts += b.children[i].restarts;
    }
    JRPC_LOG(JRPC_LOG_INFO, "main", "event=stopped status=%d calls=%llu restarts=%llu", status,
             (unsigned long long)calls, (unsigned long long)restarts);
out:
    jrpc_worker_destroy(&b.w);
    if (b.loop)
        uv_loop_close(b.loop);
    free(b.children);
    free(b.restarts);
    free(margs);
    jrpc_buf_dispose(&b.tmp);
    jrpc_buf_dispose(&b.mcp_init);
    msgpack_zone_destroy(&b.zone);
    jrpc_conf_destroy(&conf);
    return status;
}
