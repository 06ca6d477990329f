// tests/e2e/mcp_openrpc.sh's client: the official MCP TypeScript SDK over
// Streamable HTTP against tests/e2e/mcp_tools_server.cjs behind the bridge.
//   NODE_PATH=tests/mcp/node_modules node mcp_list_changed.cjs URL [BEARER]
// prints "caps tools.listChanged=true|false", then calls add_tool and waits
// (at most 20 s) for notifications/tools/list_changed: "list_changed n=K
// tool=NAME", then lists the tools again: "tools has_added=true|false".
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } =
    require("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { ToolListChangedNotificationSchema } = require("@modelcontextprotocol/sdk/types.js");

async function main(url, bearer) {
    const client = new Client({ name: "jrpc-e2e-list-changed", version: "1.0.0" });
    let n = 0, wake = null;
    client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
        n++;
        if (wake) wake();
    });
    const opts = bearer ? { requestInit: { headers: { Authorization: `Bearer ${bearer}` } } } : {};
    await client.connect(new StreamableHTTPClientTransport(new URL(url), opts));
    const caps = client.getServerCapabilities() || {};
    console.log(`caps tools.listChanged=${!!(caps.tools && caps.tools.listChanged)}`);
    const got = new Promise((resolve) => { wake = resolve; });
    const r = await client.callTool({ name: "add_tool", arguments: {} });
    const added = r.content[0].text;
    await Promise.race([got, new Promise((resolve) => setTimeout(resolve, 20000))]);
    console.log(`list_changed n=${n} tool=${added}`);
    const list = await client.listTools();
    console.log(`tools has_added=${list.tools.some((t) => t.name === added)}`);
    await client.close();
}
main(process.argv[2], process.argv[3]).catch((e) => { console.log(`error ${e.message}`); process.exit(1); });
