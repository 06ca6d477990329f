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
 * deadline — until the child answers late or is killed.
 *
 * This file: the options, --help and main (the bridge wired, run, then
 * stopped). Not here: a call's path (jrpc_stdio_calls.c), a child's life
 * (jrpc_stdio_child.c), --mcp (jrpc_stdio_mcp.c), /metrics and /readyz
 * (jrpc_stdio_metrics.c); jrpc_stdio_int.h lists them. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "jrpc_conf.h"
#include "jrpc_json.h"
#include "jrpc_sdnotify.h"
#include "jrpc_connect_opt.h"
#include "jrpc_stdio_int.h"

#define SWEEP_MS         50      /* deadline and hang checks */

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

/* --lsp-init V: the params of the bridge's LSP initialize, a JSON object
 * given as V itself (it starts with '{') or in the file V names (64 KiB at
 * most), into *out (owned by the caller; NULL without V). Not with --mcp,
 * which has its own handshake. 0, or -1 when reported. */
static int lsp_init_load(const jrpc_conf_t *conf, const char *v, bool mcp, char **out)
{
    char err[512];
    *out = NULL;
    if (v == NULL)
        return 0;
    if (mcp) {
        jrpc_conf_error(conf, "lsp-init", "not with --mcp (it runs the MCP handshake)");
        return -1;
    }
    if (v[0] != '{')
        return jrpc_connect_read_schemas(v, out, err, sizeof err) == 0
                   ? 0 : (jrpc_conf_error(conf, "lsp-init", err), -1);
    if (jrpc_json_validate(v, strlen(v), 32) < 0) {
        jrpc_conf_error(conf, "lsp-init", "not a JSON object");
        return -1;
    }
    if ((*out = strdup(v)) == NULL)
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    jrpc_log_init("jrpc-stdio");
    signal(SIGPIPE, SIG_IGN);  /* a child that dies with writes pending: EPIPE, not death */
    jrpc_worker_opts_t opts;
    jrpc_worker_opts_init(&opts);
    jrpc_conf_list_t endpoints = { 0 }, methods = { 0 };
    const char *config = NULL, *framing = NULL, *admin_listen = NULL, *schemas_file = NULL;
    const char *lsp_init = NULL;
    char *schemas = NULL;
    jrpc_conf_std_t std = { 0 };
    int status = 1;
    bridge_t b = { 0 };
    method_arg_t *margs = NULL;
    msgpack_zone_init(&b.zone, 4096);
    jrpc_buf_init(&b.tmp);
    jrpc_buf_init(&b.mcp_init);
    jrpc_buf_init(&b.mcp_init_lc);
    jrpc_buf_init(&b.tools_acc);
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
        { "sessions", JRPC_CONF_FLAG, NULL, NULL, "with --mcp: initialize begins a session\n"
          "(Mcp-Session-Id) pinned to one child (docs/MCP.md)", .dest = &b.sessions },
        { "max-sessions", U, "N", "1024", "--sessions open at once; past it initialize is\n"
          "answered -32000", .dest = &b.max_sessions, .min = 1, .max = 1000000 },
        { "session-idle-ms", U, "N", "1800000", "a session with no call this long ends (its\n"
          "id is then 404)", .dest = &b.session_idle_ms, .min = 1000, .max = 604800000 },
        { "lsp-init", S, "FILE|JSON", NULL, "the bridge runs the LSP handshake with each\n"
          "child: initialize with these params (a JSON object,\n"
          "or a file holding one), then initialized; a child takes\n"
          "calls after it (docs/STDIO.md)", .dest = &lsp_init },
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
        JRPC_SERVICE_OPTS(&opts.service, &schemas_file),
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
    if (jrpc_connect_load_schemas(conf, schemas_file, &schemas) < 0 ||
        lsp_init_load(conf, lsp_init, b.mcp, &b.lsp_init) < 0) {
        status = 2;
        goto out;
    }
    opts.schemas = schemas;
    if (std.check_config) {
        jrpc_conf_print(conf, stdout);
        status = 0;
        goto out;
    }
    if (b.sessions && !b.mcp) {
        fprintf(stderr, "jrpc-stdio: --sessions needs --mcp\nTry 'jrpc-stdio --help'.\n");
        status = 2;
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
    if (b.mcp && sess_init(&b) < 0) {
        JRPC_LOG(JRPC_LOG_ERROR, "main", "event=start_failed err=\"sessions\"");
        goto out;
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
    free(b.lsp_init);
    jrpc_worker_destroy(&b.w);
    if (b.loop)
        uv_loop_close(b.loop);
    free(b.children);
    free(b.restarts);
    free(margs);
    jrpc_buf_dispose(&b.tmp);
    jrpc_buf_dispose(&b.mcp_init);
    jrpc_buf_dispose(&b.mcp_init_lc);
    jrpc_buf_dispose(&b.tools_acc);
    sess_dispose(&b);
    msgpack_zone_destroy(&b.zone);
    jrpc_conf_destroy(&conf);
    free(schemas);
    return status;
}
