/* jrpc_mcp_sid — the MCP session id: formatted and read (see jrpc_mcp_sid.h). */
#include "jrpc_mcp_sid.h"

#include <errno.h>
#include <string.h>

static const char hexd[] = "0123456789abcdef";

static void put_hex(char *out, uint64_t v, unsigned digits)
{
    for (unsigned i = digits; i-- > 0; v >>= 4)
        out[i] = hexd[v & 15];
}

/* Reads digits lower-case hex digits; -1 on anything else. */
static int get_hex(const char *p, unsigned digits, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned i = 0; i < digits; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return -1;
        x = x << 4 | (uint64_t)d;
    }
    *v = x;
    return 0;
}

void jrpc_mcp_instance_format(uint64_t instance, char out[JRPC_MCP_INSTANCE_LEN + 1])
{
    put_hex(out, instance, JRPC_MCP_INSTANCE_LEN);
    out[JRPC_MCP_INSTANCE_LEN] = '\0';
}

int jrpc_mcp_instance_parse(const char *p, size_t n, uint64_t *instance)
{
    if (n != JRPC_MCP_INSTANCE_LEN || get_hex(p, JRPC_MCP_INSTANCE_LEN, instance) < 0)
        return -EINVAL;
    return 0;
}

void jrpc_mcp_sid_format(const jrpc_mcp_sid_t *s, char out[JRPC_MCP_SID_LEN + 1])
{
    put_hex(out, s->instance, 16);
    out[16] = '-';
    put_hex(out + 17, s->child, 4);
    out[21] = '-';
    for (unsigned i = 0; i < sizeof s->secret; i++)
        put_hex(out + 22 + 2 * i, s->secret[i], 2);
    out[JRPC_MCP_SID_LEN] = '\0';
}

int jrpc_mcp_sid_parse(const char *p, size_t n, jrpc_mcp_sid_t *s)
{
    jrpc_mcp_sid_t t;
    uint64_t v;
    if (n != JRPC_MCP_SID_LEN || p[16] != '-' || p[21] != '-')
        return -EINVAL;
    if (get_hex(p, 16, &t.instance) < 0 || get_hex(p + 17, 4, &v) < 0)
        return -EINVAL;
    t.child = (uint16_t)v;
    for (unsigned i = 0; i < sizeof t.secret; i++) {
        if (get_hex(p + 22 + 2 * i, 2, &v) < 0)
            return -EINVAL;
        t.secret[i] = (uint8_t)v;
    }
    *s = t;
    return 0;
}
