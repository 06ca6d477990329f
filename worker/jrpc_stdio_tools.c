/* jrpc_stdio_tools — jrpc-stdio --mcp: the child's tools declared for the
 * broker's discovery document (docs/MCP.md "Tools in the discovery
 * document").
 *
 * The bridge asks a child tools/list once the first child is initialized,
 * and again whenever a child says notifications/tools/list_changed; the
 * answer becomes the declaration of tools/call (READY "schemas", sent as a
 * SCHEMAS frame: PROTOCOL.md 2.7), cut to JRPC_WIRE_SCHEMAS_MAX bytes.
 *
 * Not here: the handshake (jrpc_stdio_mcp.c), a call's path
 * (jrpc_stdio_calls.c). */
#include <errno.h>
#include <string.h>

#include "jrpc_json.h"
#include "jrpc_mpack.h"
#include "jrpc_stdio_int.h"
#include "jrpc_wire.h"

#define TOOLS_MS    30000   /* a child's answer to the bridge's tools/list is due within this */
#define TOOLS_DEPTH 64      /* the deepest nesting of a tools/list result read */

/* Sends child c the bridge's own tools/list (none when one is out: then
 * asked again once it is answered). */
void tools_ask(child_t *c)
{
    bridge_t *b = c->b;
    if (b->tools_pending) {
        b->tools_again = true;
        return;
    }
    call_t *k = calloc(1, sizeof *k);
    if (k == NULL || (k->method = strdup("tools/list")) == NULL) {
        free(k);
        return;
    }
    jrpc_buf_init(&k->params);
    k->mcp_tools = true;
    k->deadline = uv_now(b->loop) + TOOLS_MS;
    if (jrpc_buf_puts(&k->params, "{}") < 0 || call_send(c, k) < 0) {
        call_free(k);
        return;
    }
    b->tools_pending = true;
    b->tools_again = false;
}

/* Whether tool t (an entry of result.tools) can be declared: a map with a
 * non-empty string name and a map inputSchema. */
static bool tool_ok(const msgpack_object *t)
{
    const msgpack_object *name = jrpc_mpack_map_get(t, "name");
    const msgpack_object *in = jrpc_mpack_map_get(t, "inputSchema");
    return name && name->type == MSGPACK_OBJECT_STR && name->via.str.size > 0 && in &&
           in->type == MSGPACK_OBJECT_MAP;
}

#define PUT(s) (rc = rc < 0 ? rc : jrpc_buf_puts(out, (s)))
#define OBJ(o) (rc = rc < 0 ? rc : jrpc_json_write_msgpack(out, (o), TOOLS_DEPTH))

/* The declaration of tools/call for the first ntools declarable tools of
 * tools[0, n): name's enum, arguments' anyOf (one inputSchema per tool,
 * in order) and x-mcp-tools (name, description, inputSchema). Replaces
 * out's contents; 0 or a negative code. */
static int tools_write(jrpc_buf_t *out, const msgpack_object *tools, uint32_t n, uint32_t ntools)
{
    int rc = 0;
    jrpc_buf_reset(out);
    PUT("{\"tools/call\":{\"paramStructure\":\"by-name\",\"params\":[{\"name\":\"name\","
        "\"required\":true,\"schema\":{\"type\":\"string\"");
    for (int part = 0; part < 3; part++) {
        static const char *const open[] = {
            ",\"enum\":[",
            ("{\"name\":\"arguments\",\"schema\":" "{\"type\":\"object\",\"anyOf\":["),
            "\"x-mcp-tools\":[",
        };
        static const char *const close[] = { "]", "]", "]" };
        if (ntools == 0) {   /* enum and anyOf take one item at least */
            PUT(part == 0 ? "}}," : part == 1 ? "{\"name\":\"arguments\",\"schema\":"
                                                "{\"type\":\"object\"}}],"
                                              : "\"x-mcp-tools\":[]");
            continue;
        }
        PUT(open[part]);
        for (uint32_t i = 0, k = 0; i < n && k < ntools; i++) {
            const msgpack_object *t = &tools[i];
            if (!tool_ok(t))
                continue;
            PUT(k++ ? "," : "");
            if (part == 0) {
                OBJ(jrpc_mpack_map_get(t, "name"));
            } else if (part == 1) {
                OBJ(jrpc_mpack_map_get(t, "inputSchema"));
            } else {
                const msgpack_object *d = jrpc_mpack_map_get(t, "description");
                PUT("{\"name\":");
                OBJ(jrpc_mpack_map_get(t, "name"));
                if (d && d->type == MSGPACK_OBJECT_STR) {
                    PUT(",\"description\":");
                    OBJ(d);
                }
                PUT(",\"inputSchema\":");
                OBJ(jrpc_mpack_map_get(t, "inputSchema"));
                PUT("}");
            }
        }
        PUT(close[part]);
        PUT(part == 0 ? "}}," : part == 1 ? "}}]," : "");
    }
    PUT(",\"result\":{\"name\":\"result\",\"schema\":{\"type\":\"object\"}}}}");
    return rc;
}

/* The child's answer to the bridge's tools/list: its tools declared (cut
 * to what JRPC_WIRE_SCHEMAS_MAX holds, logged), or nothing changed when
 * the answer is an error or has no tools array. */
void tools_listed(child_t *c, const jrpc_child_msg_t *m)
{
    bridge_t *b = c->b;
    b->tools_pending = false;
    b->tools_known = true;
    jrpc_buf_t mp, out;
    jrpc_buf_init(&mp);
    jrpc_buf_init(&out);
    msgpack_zone z;
    msgpack_zone_init(&z, 4096);
    msgpack_object root;
    const msgpack_object *tools = NULL;
    if (m->error.n == 0 && m->result.n > 0 &&
        jrpc_json_to_msgpack(m->result.p, m->result.n, TOOLS_DEPTH, &mp) == 0 &&
        jrpc_mpack_unpack(mp.p, mp.len, TOOLS_DEPTH, &z, &root) == 0)
        tools = jrpc_mpack_map_get(&root, "tools");
    if (tools == NULL || tools->type != MSGPACK_OBJECT_ARRAY) {
        JRPC_LOG(JRPC_LOG_WARN, "stdio", "event=mcp_tools_unread pid=%d reason=%s", c->pid,
                 m->error.n ? "error" : "no_tools_array");
        goto out;
    }
    uint32_t n = tools->via.array.size, all = 0;
    for (uint32_t i = 0; i < n; i++)
        all += tool_ok(&tools->via.array.ptr[i]);
    uint32_t k = all;
    int rc = tools_write(&out, tools->via.array.ptr, n, k);
    while (rc == 0 && out.len > JRPC_WIRE_SCHEMAS_MAX && k > 0) {
        /* about as many as fit, then one less at a time */
        uint32_t fit = (uint32_t)((uint64_t)k * JRPC_WIRE_SCHEMAS_MAX / out.len);
        k = fit < k ? fit : k - 1;
        rc = tools_write(&out, tools->via.array.ptr, n, k);
    }
    if (rc < 0 || out.len > JRPC_WIRE_SCHEMAS_MAX || jrpc_buf_putc(&out, '\0') < 0) {
        JRPC_LOG(JRPC_LOG_WARN, "stdio", "event=mcp_tools_unread pid=%d reason=unwritable",
                 c->pid);
        goto out;
    }
    if (k < all)
        JRPC_LOG(JRPC_LOG_WARN, "stdio", "event=mcp_tools_cut pid=%d tools=%u declared=%u "
                 "bytes=%zu limit=%d", c->pid, all, k, out.len - 1, JRPC_WIRE_SCHEMAS_MAX);
    int sent = jrpc_worker_set_schemas(b->w, out.p);
    JRPC_LOG(JRPC_LOG_INFO, "stdio", "event=mcp_tools_declared pid=%d tools=%u declared=%u "
             "skipped=%u bytes=%zu brokers=%d", c->pid, n, k, n - all, out.len - 1, sent);
out:
    msgpack_zone_destroy(&z);
    jrpc_buf_dispose(&mp);
    jrpc_buf_dispose(&out);
    if (b->tools_again)
        tools_ask(c);
}
