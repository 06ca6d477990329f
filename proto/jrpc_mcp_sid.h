/* jrpc_mcp_sid — the MCP session id (`Mcp-Session-Id`) jrpc-stdio --sessions issues.
 *
 *   <instance: 16 hex> "-" <child: 4 hex> "-" <secret: 32 hex>      54 bytes
 *   3f9a0c41d2e87b65-0001-5b1e...(32 lower-case hex digits)
 *
 * The id names where the session lives, so that any broker can route it
 * without shared state (no Redis): the instance is the bridge's random
 * 64-bit id, sent to every broker in READY ("instance", PROTOCOL.md 2.1),
 * the child is the bridge's slot that holds the session; the secret (128
 * random bits) is what makes the id unguessable, as the MCP spec asks.
 * Only visible ASCII, as the spec requires. Pure: no allocation, no I/O;
 * the random bytes come from the caller. */
#ifndef JRPC_MCP_SID_H
#define JRPC_MCP_SID_H

#include <stddef.h>
#include <stdint.h>

#define JRPC_MCP_SID_LEN      54   /* an id's length, without a NUL */
#define JRPC_MCP_INSTANCE_LEN 16   /* the instance's length in hex, without a NUL */

typedef struct jrpc_mcp_sid {
    uint64_t instance;    /* the bridge (one process, every broker it serves) */
    uint16_t child;       /* the bridge's child slot holding the session */
    uint8_t  secret[16];  /* random */
} jrpc_mcp_sid_t;

/* Writes s as its id into out, NUL-terminated. Never fails. */
void jrpc_mcp_sid_format(const jrpc_mcp_sid_t *s, char out[JRPC_MCP_SID_LEN + 1]);

/* Reads an id from p[0..n) (need not be NUL-terminated). Returns 0 with *s
 * set, or -EINVAL when p is not exactly an id of the form above (length,
 * lower-case hex, the two '-'); *s is then unset. */
int jrpc_mcp_sid_parse(const char *p, size_t n, jrpc_mcp_sid_t *s);

/* Writes an instance as 16 lower-case hex digits into out, NUL-terminated. */
void jrpc_mcp_instance_format(uint64_t instance, char out[JRPC_MCP_INSTANCE_LEN + 1]);

/* Reads an instance (exactly 16 lower-case hex digits). Returns 0 or -EINVAL. */
int jrpc_mcp_instance_parse(const char *p, size_t n, uint64_t *instance);

#endif
