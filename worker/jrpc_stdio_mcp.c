/* jrpc_stdio_mcp — jrpc-stdio --mcp: the MCP method set and handshake (docs/MCP.md).
 *
 * Each child gets initialize from the bridge when it starts and takes calls
 * once it has answered and been told notifications/initialized; its
 * InitializeResult is kept for clients: a client's initialize is answered
 * with it (or waits for the first), a client's notifications/initialized
 * is swallowed.
 *
 * The method set --mcp declares is here too (main registers it).
 *
 * Not here: a call's path (jrpc_stdio_calls.c), a child's life
 * (jrpc_stdio_child.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "jrpc_json.h"
#include "jrpc_stdio_int.h"

#define MCP_INIT_MS      30000   /* --mcp: a child's answer to initialize is due within this */
#define MCP_VERSION      "2025-06-18" /* --mcp: the protocolVersion the bridge asks its children for */

/* --mcp: the methods declared (MCP 2025-06-18, server features and
 * utilities). Those that only read are idempotent: a call a lost child
 * held goes to another one. logging/setLevel reaches a child (its level
 * is that child's state: with --procs above 1 the others keep theirs).
 * Left out: resources/subscribe and resources/unsubscribe (their
 * notifications have no way back to the client here, and the capability
 * is taken out of the InitializeResult: mcp_caps_filter). */
const mcp_method_t mcp_methods[] = {
    { "initialize", true },           { "notifications/initialized", true },
    { "ping", true },                 { "tools/list", true },
    { "tools/call", false },          { "resources/list", true },
    { "resources/templates/list", true }, { "resources/read", true },
    { "prompts/list", true },         { "prompts/get", true },
    { "completion/complete", true },  { "logging/setLevel", true },
};
const size_t mcp_nmethods = sizeof mcp_methods / sizeof *mcp_methods;

/* ---- what the InitializeResult offers ---- */

static bool span_is(jrpc_span_t s, const char *lit)
{
    return s.n == strlen(lit) && memcmp(s.p, lit, s.n) == 0;
}

typedef struct caps_walk {
    jrpc_buf_t *out;
    bool        list_changed; /* listChanged reaches the client: kept */
    int         depth;   /* 0: the result, 1: its capabilities, 2: one capability */
    bool        first;   /* no member written yet at this depth */
    int         rc;      /* the first failure */
} caps_walk_t;

static void caps_member(void *arg, jrpc_span_t name, jrpc_span_t value)
{
    caps_walk_t *w = arg;
    if (w->rc < 0)
        return;
    if (w->depth == 2 && (span_is(name, "subscribe") ||
                          (!w->list_changed && span_is(name, "listChanged"))))
        return;   /* a notification that could never reach the client */
    if (w->depth == 1 && span_is(name, "tasks"))
        return;   /* tasks/get, tasks/list, ... are not declared (mcp_methods) */
    int rc = jrpc_buf_puts(w->out, w->first ? "" : ",");
    w->first = false;
    if (rc == 0 && (rc = jrpc_json_write_string(w->out, name.p, name.n)) == 0)
        rc = jrpc_buf_puts(w->out, ":");
    bool inner = value.n > 0 && value.p[0] == '{' &&
                 ((w->depth == 0 && span_is(name, "capabilities")) || w->depth == 1);
    if (rc == 0 && inner) {
        caps_walk_t sub = { w->out, w->list_changed, w->depth + 1, true, 0 };
        rc = jrpc_buf_puts(w->out, "{");
        if (rc == 0 && (rc = jrpc_json_each_member(value.p, value.n, 64, caps_member, &sub)) == 0 &&
            (rc = sub.rc) == 0)
            rc = jrpc_buf_puts(w->out, "}");
    } else if (rc == 0) {
        rc = jrpc_buf_append(w->out, value.p, value.n);
    }
    if (rc < 0)
        w->rc = rc;
}

/* The InitializeResult p[0, n) as a client gets it: its capabilities
 * without what the bridge cannot deliver (docs/MCP.md "Capabilities"):
 * resources.subscribe (resources/subscribe is not declared), tasks (its
 * methods are not declared), and every listChanged (tools, resources,
 * prompts) unless list_changed: the client's broker passes the server's
 * messages on (jrpc_wcall_messages: an MCP POST's stream, a session's GET
 * stream). The one place the result is filtered. Replaces out's contents;
 * 0, or a negative code (out is then empty). */
int mcp_caps_filter(const char *p, size_t n, bool list_changed, jrpc_buf_t *out)
{
    caps_walk_t w = { out, list_changed, 0, true, 0 };
    jrpc_buf_reset(out);
    int rc = jrpc_buf_puts(out, "{");
    if (rc == 0 && (rc = jrpc_json_each_member(p, n, 64, caps_member, &w)) == 0 &&
        (rc = w.rc) == 0)
        rc = jrpc_buf_puts(out, "}");
    if (rc < 0)
        jrpc_buf_reset(out);
    return rc;
}

/* --mcp: a client's initialize, answered from the cached InitializeResult
 * (filtered when it was kept: with listChanged when the server's messages
 * reach this client). */
static void mcp_answer_init(bridge_t *b, jrpc_wcall_t *wc)
{
    const jrpc_buf_t *r = jrpc_wcall_messages(wc) ? &b->mcp_init_lc : &b->mcp_init;
    pass_json(b, wc, r->p, r->len);   /* answers wc whatever happens */
}

/* The protocolVersion the children agreed to at the handshake (from the
 * kept result); empty before the first one. */
static jrpc_span_t mcp_agreed(const bridge_t *b)
{
    jrpc_span_t v = { NULL, 0 };
    if (b->mcp_init.len == 0 ||
        jrpc_json_member(b->mcp_init.p, b->mcp_init.len, "protocolVersion", &v) < 0)
        v.n = 0;
    return v;
}

/* Whether a client's initialize (params p[0, n)) asks for a version other
 * than the one the children agreed to: then it is asked of a child
 * (mcp_own), which agrees to it or names its own (MCP lifecycle, "Version
 * negotiation"), never answered with the bridge's. */
static bool mcp_other_version(const bridge_t *b, const char *p, size_t n)
{
    jrpc_span_t want, agreed = mcp_agreed(b);
    if (agreed.n == 0 || p == NULL ||
        jrpc_json_member(p, n, "protocolVersion", &want) < 0)
        return false;   /* none asked: the children's */
    return !(want.n == agreed.n && memcmp(want.p, agreed.p, want.n) == 0);
}

/* --mcp: the bridge's side of the handshake. The client's initialize is
 * answered with a child's InitializeResult (or waits for the first one);
 * its notifications/initialized is swallowed (every child had one from
 * the bridge). */
bool mcp_own(bridge_t *b, jrpc_wcall_t *wc, const char *params, size_t n)
{
    const char *m = jrpc_wcall_method(wc);
    if (strcmp(m, "notifications/initialized") == 0) {
        if (b->sessions && sess_initialized(b, wc))
            return true;   /* its session's child had the client's initialize: told */
        msgpack_pack_nil(jrpc_wcall_result(wc));
        jrpc_wcall_finish(wc);
        return true;
    }
    if (strcmp(m, "initialize") != 0)
        return false;
    if (b->sessions && b->mcp_init.len > 0)
        return false;   /* a session begins: the client's initialize goes to its child */
    if (mcp_other_version(b, params, n))
        return false;   /* to a child, as a call: its answer filtered (answer_result) */
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

/* --mcp or --lsp-init: sends the child the bridge's initialize (the
 * handshake's first half: MCP's params, or --lsp-init's); the child takes
 * calls once it answers (mcp_initialized). */
int mcp_start(child_t *c)
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
    int rc = b->lsp_init ? jrpc_buf_puts(&k->params, b->lsp_init)
                         : jrpc_buf_puts(&k->params, "{\"protocolVersion\":\"" MCP_VERSION "\","
                                         "\"capabilities\":{},\"clientInfo\":{\"name\":"
                                         "\"jrpc-stdio\",\"version\":\"" JRPC_VERSION "\"}}");
    for (size_t i = 0; b->framing == JRPC_FRAME_NDJSON && i < k->params.len; i++)
        if (k->params.p[i] == '\n' || k->params.p[i] == '\r')
            k->params.p[i] = ' ';   /* a file's lines: whitespace outside strings */
    if (rc == 0)
        rc = call_send(c, k);
    if (rc < 0)
        call_free(k);
    return rc;
}

/* --mcp or --lsp-init: the child's answer to the bridge's initialize.
 * LSP: the child is told initialized and takes calls. MCP: a result is kept
 * (the latest child's: they run the same command) for clients' initialize,
 * the child is told notifications/initialized and takes calls; anything
 * else loses the child (restarted with backoff). */
void mcp_initialized(child_t *c, const jrpc_child_msg_t *m)
{
    bridge_t *b = c->b;
    static const char note[] = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}";
    static const char lsp_note[] = "{\"jsonrpc\":\"2.0\",\"method\":\"initialized\",\"params\":{}}";
    const char *kind = b->lsp_init ? "lsp" : "mcp";
    if (m->kind == JRPC_CHILD_BAD_ANSWER || m->error.n > 0 || m->result.n == 0 ||
        m->result.p[0] != '{') {
        JRPC_LOG(JRPC_LOG_WARN, "stdio", "event=%s_initialize_failed pid=%d answer=%.*s", kind,
                 c->pid, (int)(m->error.n > 200 ? 200 : m->error.n), m->error.n ? m->error.p : "");
        child_lost(c, b->lsp_init ? "lsp_initialize_failed" : "mcp_initialize_failed");
        return;
    }
    if (b->lsp_init) {   /* LSP: told "initialized"; its result is no client's */
        if (child_write(c, lsp_note, sizeof lsp_note - 1) < 0) {
            child_lost(c, "out_of_memory");
            return;
        }
        c->ready = true;
        JRPC_LOG(JRPC_LOG_INFO, "stdio", "event=lsp_initialized pid=%d slot=%u result_bytes=%zu",
                 c->pid, c->slot, m->result.n);
        pump(b);
        return;
    }
    if (mcp_caps_filter(m->result.p, m->result.n, false, &b->mcp_init) < 0 ||
        mcp_caps_filter(m->result.p, m->result.n, true, &b->mcp_init_lc) < 0 ||
        child_write(c, note, sizeof note - 1) < 0) {
        jrpc_buf_reset(&b->mcp_init);
        jrpc_buf_reset(&b->mcp_init_lc);
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
    /* Its tools, for the discovery document (jrpc_stdio_tools.c): once, by
     * the first child up; another child's handshake while that list is
     * being read changes nothing (the same server: not a list_changed) */
    if (!b->tools_known && !b->tools_pending)
        tools_ask(c);
    pump(b);
}
