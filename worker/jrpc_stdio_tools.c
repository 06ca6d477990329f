/* jrpc_stdio_tools — jrpc-stdio --mcp: the child's tools declared for the
 * broker's discovery document (docs/MCP.md "Tools in the discovery
 * document").
 *
 * The bridge asks a child tools/list once the first child is initialized,
 * and again whenever a child says notifications/tools/list_changed; the
 * answer becomes the declaration of tools/call (READY "schemas", sent as a
 * SCHEMAS frame: PROTOCOL.md 2.7), cut to JRPC_WIRE_SCHEMAS_MAX bytes. A
 * paginated list (nextCursor) is read to its last page first, up to
 * TOOLS_PAGES pages and TOOLS_READ_MAX bytes of tools (beyond: what was
 * read is declared, logged as cut).
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
#define TOOLS_PAGES 64      /* pages of a paginated tools/list read at most */
#define TOOLS_READ_MAX (16u * JRPC_WIRE_SCHEMAS_MAX) /* bytes of tools gathered at most */

/* Sends child c the bridge's tools/list, for the page after cursor (a
 * msgpack string; NULL: the first). 0, or -1 when it could not be sent. */
static int ask_page(child_t *c, const msgpack_object *cursor)
{
    bridge_t *b = c->b;
    call_t *k = calloc(1, sizeof *k);
    if (k == NULL || (k->method = strdup("tools/list")) == NULL) {
        free(k);
        return -1;
    }
    jrpc_buf_init(&k->params);
    k->mcp_tools = true;
    k->deadline = uv_now(b->loop) + TOOLS_MS;
    int rc = cursor ? jrpc_buf_puts(&k->params, "{\"cursor\":") : jrpc_buf_puts(&k->params, "{");
    if (rc == 0 && cursor)
        rc = jrpc_json_write_msgpack(&k->params, cursor, 1);
    if (rc < 0 || jrpc_buf_putc(&k->params, '}') < 0 || call_send(c, k) < 0) {
        call_free(k);
        return -1;
    }
    b->tools_pending = true;
    return 0;
}

/* Sends child c the bridge's own tools/list (none when one is out: then
 * asked again once it is answered). */
void tools_ask(child_t *c)
{
    bridge_t *b = c->b;
    if (b->tools_pending) {
        b->tools_again = true;
        return;
    }
    jrpc_buf_reset(&b->tools_acc);
    b->tools_pages = 0;
    if (ask_page(c, NULL) == 0)
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
    jrpc_buf_t mp, out;
    jrpc_buf_init(&mp);
    jrpc_buf_init(&out);
    msgpack_zone z;
    msgpack_zone_init(&z, 4096);
    msgpack_object root, whole;
    const msgpack_object *tools = NULL, *next = NULL;
    if (m->error.n == 0 && m->result.n > 0 &&
        jrpc_json_to_msgpack(m->result.p, m->result.n, TOOLS_DEPTH, &mp) == 0 &&
        jrpc_mpack_unpack(mp.p, mp.len, TOOLS_DEPTH, &z, &root) == 0) {
        tools = jrpc_mpack_map_get(&root, "tools");
        next = jrpc_mpack_map_get(&root, "nextCursor");
    }
    if (tools == NULL || tools->type != MSGPACK_OBJECT_ARRAY) {
        JRPC_LOG(JRPC_LOG_WARN, "stdio", "event=mcp_tools_unread pid=%d page=%u reason=%s",
                 c->pid, b->tools_pages + 1, m->error.n ? "error" : "no_tools_array");
        goto out;
    }
    if (b->tools_again) {   /* the list changed while its pages were read: again from the first */
        b->tools_again = false;
        jrpc_buf_reset(&b->tools_acc);
        b->tools_pages = 0;
        ask_page(c, NULL);
        goto out_asked;
    }
    /* This page's tools after the earlier pages' (as JSON: one parse at the end) */
    int rc = 0;
    for (uint32_t i = 0; i < tools->via.array.size && rc == 0; i++) {
        if (b->tools_acc.len)
            rc = jrpc_buf_putc(&b->tools_acc, ',');
        if (rc == 0)
            rc = jrpc_json_write_msgpack(&b->tools_acc, &tools->via.array.ptr[i], TOOLS_DEPTH);
    }
    b->tools_pages++;
    bool more = rc == 0 && next && next->type == MSGPACK_OBJECT_STR && next->via.str.size > 0;
    if (more && b->tools_pages < TOOLS_PAGES && b->tools_acc.len <= TOOLS_READ_MAX) {
        if (ask_page(c, next) == 0)
            goto out_asked;
        rc = -1;
    }
    if (more)
        JRPC_LOG(JRPC_LOG_WARN, "stdio", "event=mcp_tools_cut pid=%d pages=%u bytes=%zu "
                 "reason=%s", c->pid, b->tools_pages, b->tools_acc.len,
                 rc < 0 ? "unsent" : b->tools_pages >= TOOLS_PAGES ? "pages" : "bytes");
    /* Every page read: the whole list as one array (its JSON in out, its
     * msgpack in mp, which whole points into; out is reused below) */
    if (rc == 0) {
        jrpc_buf_reset(&out);
        jrpc_buf_reset(&mp);
    }
    if (rc < 0 || jrpc_buf_putc(&out, '[') < 0 ||
        jrpc_buf_append(&out, b->tools_acc.p, b->tools_acc.len) < 0 ||
        jrpc_buf_putc(&out, ']') < 0 || jrpc_json_to_msgpack(out.p, out.len, TOOLS_DEPTH, &mp) < 0 ||
        jrpc_mpack_unpack(mp.p, mp.len, TOOLS_DEPTH, &z, &whole) < 0) {
        JRPC_LOG(JRPC_LOG_WARN, "stdio", "event=mcp_tools_unread pid=%d reason=unwritable",
                 c->pid);
        goto out;
    }
    tools = &whole;
    jrpc_buf_reset(&b->tools_acc);
    uint32_t n = tools->via.array.size, all = 0;
    for (uint32_t i = 0; i < n; i++)
        all += tool_ok(&tools->via.array.ptr[i]);
    uint32_t k = all;
    rc = tools_write(&out, tools->via.array.ptr, n, k);
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
             "skipped=%u bytes=%zu pages=%u brokers=%d", c->pid, n, k, n - all, out.len - 1,
             b->tools_pages, sent);
out:
    b->tools_known = true;   /* the list read to its end (or unreadable): not asked again
                                but for list_changed (a lost child mid-list: asked again) */
    jrpc_buf_reset(&b->tools_acc);
    msgpack_zone_destroy(&z);
    jrpc_buf_dispose(&mp);
    jrpc_buf_dispose(&out);
    if (b->tools_again)
        tools_ask(c);
    return;
out_asked:
    msgpack_zone_destroy(&z);
    jrpc_buf_dispose(&mp);
    jrpc_buf_dispose(&out);
}
