/* jrpc_stdio_calls — a call's path through jrpc-stdio.
 *
 * From the broker's handler (on_call) to the FIFO, to the live child with
 * the most free window (pump, pick_child), written to its stdin framed
 * under a bridge id of its own (call_send, child_write); the child's
 * messages matched to the calls it holds and its result or error object
 * passed on as it wrote it (child_message); deadlines, and the hang kill of
 * a child still holding a call --hang-kill-ms past it (on_sweep).
 *
 * Not here: a child's pipes, reading, logs and life (jrpc_stdio_child.c),
 * the MCP handshake and a client's initialize (jrpc_stdio_mcp.c), the
 * framing itself (jrpc_stdio_frame.c, pure). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jrpc_json.h"
#include "jrpc_mpack.h"
#include "jrpc_stdio_int.h"

#define REPLY_QUEUE_MAX  (1u << 20) /* bytes unwritten to a child past which its requests go unanswered */

typedef struct wreq {
    uv_write_t req;
    child_t   *c;
    size_t     n;
    char       data[];
} wreq_t;

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
int child_write(child_t *c, const char *p, size_t n)
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
int call_send(child_t *c, call_t *k)
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

/* The child a pinned call must go to when it has a free window; NULL
 * otherwise. *gone: the session's child was replaced (another pid). */
static child_t *pinned_child(bridge_t *b, const call_t *k, bool *gone)
{
    child_t *c = &b->children[k->pin - 1];
    *gone = c->pid != k->pin_pid;
    if (*gone || c->state != CHILD_UP || !c->ready || c->held.n >= b->inflight)
        return NULL;
    return c;
}

/* Moves queued calls to free windows, in order (a call pinned to a busy
 * child, --sessions, lets the others pass); with no child left and none
 * coming back soon (the restart budget is spent), answers them -32004 at
 * once. */
void pump(bridge_t *b)
{
    bool any_full = false;   /* an unpinned call found no window: the rest wait too */
    for (call_t *k = b->queue.head, *next; k; k = next) {
        next = k->next;
        bool gone = false;
        child_t *c = NULL;
        if (k->pin)
            c = pinned_child(b, k, &gone);
        else if (!any_full)
            c = pick_child(b);
        if (gone) {
            list_remove(&b->queue, k);
            call_fail(k, JRPC_SESSION_UNKNOWN);
            call_free(k);
            continue;
        }
        if (c == NULL) {
            if (b->not_ready && children_up(b) == 0) {
                list_remove(&b->queue, k);
                call_fail(k, JRPC_WORKER_FAILED);
                call_free(k);
                continue;
            }
            any_full |= k->pin == 0;
            continue;
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
void on_call(jrpc_wcall_t *wc, const char *params, size_t n, void *arg)
{
    const method_arg_t *ma = arg;
    bridge_t *br = ma->b;
    if (br->mcp && mcp_own(br, wc, params, n))
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
    if (br->sessions && sess_pin(br, wc, k) < 0) {   /* wc answered */
        k->wc = NULL;
        call_free(k);
        return;
    }
    list_push(&br->queue, k);
    pump(br);
}

/* ---- what a child says ---- */

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
int pass_json(bridge_t *b, jrpc_wcall_t *wc, const char *p, size_t n)
{
    (void)b;
    return jrpc_wcall_finish_json(wc, p, n);
}

/* Passes the child's result on (--mcp: a client's initialize that a child
 * answered, the other version asked, with its capabilities filtered). */
static void answer_result(child_t *c, call_t *k, jrpc_span_t res)
{
    jrpc_buf_t f;
    jrpc_buf_init(&f);
    if (c->b->mcp && strcmp(k->method, "initialize") == 0 &&
        mcp_caps_filter(res.p, res.n, jrpc_wcall_messages(k->wc), &f) == 0)
        res = (jrpc_span_t){ f.p, f.len };
    int rc = pass_json(c->b, k->wc, res.p, res.n);
    jrpc_buf_dispose(&f);
    if (rc < 0)
        JRPC_LOG(JRPC_LOG_WARN, "stdio", "event=answer_lost pid=%d id=%llu err=nomem", c->pid,
                 (unsigned long long)k->id);
    k->wc = NULL;
}

void child_message(child_t *c, const char *p, size_t n)
{
    static const char tools_changed[] = "\"notifications/tools/list_changed\"";
    jrpc_child_msg_t m;
    switch (jrpc_child_msg_parse(p, n, &m)) {
    case JRPC_CHILD_GARBAGE:
        c->hostile++;
        CHILD_LOG(c, n, JRPC_LOG_WARN, "event=child_garbage pid=%d bytes=%zu", c->pid, n);
        return;
    case JRPC_CHILD_NOTIFICATION:
        if (c->b->mcp && c->ready && m.method.n == sizeof tools_changed - 1 &&
            memcmp(m.method.p, tools_changed, m.method.n) == 0)
            tools_ask(c);   /* and passed on to clients as well */
        if (c->b->mcp && sess_child_message(c, &m, p, n))
            return;
        CHILD_LOG(c, n, JRPC_LOG_DEBUG, "event=child_notification pid=%d method=%.*s", c->pid,
                  (int)(m.method.n > 80 ? 80 : m.method.n), m.method.p);
        return;
    case JRPC_CHILD_REQUEST: {
        if (c->b->mcp && sess_child_message(c, &m, p, n))
            return;
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
    if (k->mcp_tools) {
        call_free(k);
        tools_listed(c, &m);
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

/* ---- deadlines and hangs ---- */

void on_sweep(uv_timer_t *t)
{
    bridge_t *b = t->data;
    uint64_t now = uv_now(b->loop);
    sess_sweep(b, now);
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
