/* jrpc_stdio_child — a child's life in jrpc-stdio.
 *
 * Spawned with pipes (no shell) in a process group of its own; its stdout
 * read through the framing reader and its stderr line by line, each a
 * bounded amount per loop turn; the lines about what it wrote limited to
 * --child-log-per-sec; lost (its calls answered -32004 or, idempotent,
 * queued again), its group killed, its four handles closed; restarted with
 * backoff within --restart-max-per-min, the brokers left (DISCONNECT)
 * while no child is up.
 *
 * Not here: what its messages mean for the calls (child_message,
 * jrpc_stdio_calls.c), the hang kill's decision (on_sweep, ibid.), the MCP
 * handshake a child gets when it starts (jrpc_stdio_mcp.c), the kill at
 * --stop-timeout-ms when the bridge stops (stdio_main.c). */
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "jrpc_stdio_int.h"

#define EXIT_GRACE_MS    200     /* after exit, how long stdout may still deliver */
#define BACKOFF_MIN_MS   100
#define BACKOFF_MAX_MS   5000
#define QUICK_DEATH_MS   10000   /* a child dying younger than this backs off more */
#define STDERR_LINE_MAX  4096
#define READ_BUDGET      (256u << 10) /* bytes read from one child's stdout, or stderr, per loop turn */
#define MAX_TRIES        3       /* dispatches of one idempotent call */

static void on_resume(uv_check_t *h);

/* ---- what a child says: the log budget ---- */

/* Lines about what a child wrote (its stderr, what was skipped) are
 * rate-limited per child: at most --child-log-per-sec in a window of
 * LOG_WINDOW_MS; past it they are counted, and the window's count is logged
 * once (child_log_suppressed) when it ends, so that a child that floods
 * cannot flood the bridge's log, nor hold its loop writing it. */
void child_log_flush(child_t *c)
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
bool child_log_ok(child_t *c, size_t bytes)
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

/* ---- reading ---- */

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

void on_child_closed(uv_handle_t *h)
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
void child_kill(child_t *c)
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
void child_lost(child_t *c, const char *why)
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
        if (k->mcp_tools)
            b->tools_pending = false;   /* asked again at the next child's handshake */
        call_fail(k, JRPC_WORKER_FAILED);
        call_free(k);
    }
    JRPC_LOG(b->stopping ? JRPC_LOG_INFO : JRPC_LOG_WARN, "stdio",
             "event=child_lost pid=%d slot=%u reason=%s failed=%u requeued=%u", c->pid, c->slot,
             why, failed, requeued);
    sess_child_lost(b, c);
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
int child_start(child_t *c)
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
    c->ready = !b->mcp && b->lsp_init == NULL;
    uv_read_start((uv_stream_t *)&c->out, on_alloc, on_out);
    uv_read_start((uv_stream_t *)&c->err, on_alloc, on_err);
    JRPC_LOG(JRPC_LOG_INFO, "stdio", "event=child_started pid=%d slot=%u restarts=%llu", c->pid,
             c->slot, (unsigned long long)c->restarts);
    if (b->not_ready) {  /* a child is up: calls can be served again */
        b->not_ready = false;
        JRPC_LOG(JRPC_LOG_INFO, "stdio", "event=ready children_up=%u", children_up(b));
    }
    jrpc_worker_resume(b->w);  /* after a pause: READY again */
    if ((b->mcp || b->lsp_init) && mcp_start(c) < 0) {
        child_lost(c, "out_of_memory");
        return 0;
    }
    pump(b);
    return 0;
}
