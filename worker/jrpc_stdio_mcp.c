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

#include "jrpc_stdio_int.h"

#define MCP_INIT_MS      30000   /* --mcp: a child's answer to initialize is due within this */
#define MCP_VERSION      "2025-06-18" /* --mcp: the protocolVersion the bridge asks its children for */

/* --mcp: the methods declared (MCP 2025-06-18, server features and
 * utilities). Those that only read are idempotent: a call a lost child
 * held goes to another one. Left out: resources/subscribe and
 * logging/setLevel (state of one child, and their notifications have no
 * way back to the client here). */
const mcp_method_t mcp_methods[] = {
    { "initialize", true },           { "notifications/initialized", true },
    { "ping", true },                 { "tools/list", true },
    { "tools/call", false },          { "resources/list", true },
    { "resources/templates/list", true }, { "resources/read", true },
    { "prompts/list", true },         { "prompts/get", true },
    { "completion/complete", true },
};
const size_t mcp_nmethods = sizeof mcp_methods / sizeof *mcp_methods;

/* --mcp: a client's initialize, answered from the cached InitializeResult. */
static void mcp_answer_init(bridge_t *b, jrpc_wcall_t *wc)
{
    pass_json(b, wc, b->mcp_init.p, b->mcp_init.len);   /* answers wc whatever happens */
}

/* --mcp: the bridge's side of the handshake. The client's initialize is
 * answered with a child's InitializeResult (or waits for the first one);
 * its notifications/initialized is swallowed (every child had one from
 * the bridge). */
bool mcp_own(bridge_t *b, jrpc_wcall_t *wc)
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

/* --mcp: sends the child the bridge's initialize (the handshake's first
 * half); the child takes calls once it answers (mcp_initialized). */
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
void mcp_initialized(child_t *c, const jrpc_child_msg_t *m)
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
