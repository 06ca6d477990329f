// tests/e2e/mcp_services.sh's client: the official MCP TypeScript SDK
// (Client + StreamableHTTPClientTransport) on one MCP service's endpoint,
// /mcp/<service>. Prints one line per step for the script to check:
//
//   NODE_PATH=tests/mcp/node_modules node mcp_services_client.cjs URL MODE [ARG]
//     MODE lists  N     N concurrent tools/list: "lists n=N same=BOOL tools=a,b,c"
//     MODE read   FILE  read_text_file of FILE (server-filesystem): "read text=..."
//     MODE load   N     N calls (tools/list, 8 at a time) on one client:
//                       "load ok=N warnings=W" (W: MaxListenersExceededWarning seen)
//     MODE caps         "caps CAPS version=V" (the InitializeResult the SDK got, keys sorted)
// Every mode first prints "connected server=NAME".
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } =
    require("@modelcontextprotocol/sdk/client/streamableHttp.js");

let warnings = 0;
process.on("warning", (w) => {
    if (w.name === "MaxListenersExceededWarning")
        warnings++;
    console.log(`warning ${w.name}: ${w.message}`);
});

async function main() {
    const [url, mode, arg] = process.argv.slice(2);
    const client = new Client({ name: "jrpc-e2e-services", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(url));
    await client.connect(transport);
    const sv = client.getServerVersion();
    console.log(`connected server=${sv && sv.name}`);
    if (mode === "lists") {
        const n = Number(arg);
        const lists = await Promise.all([...Array(n).keys()].map(() => client.listTools()));
        const names = lists.map((l) => l.tools.map((t) => t.name).sort().join(","));
        console.log(`lists n=${lists.length} same=${names.every((x) => x === names[0])} tools=${names[0]}`);
    } else if (mode === "read") {
        const r = await client.callTool({ name: "read_text_file", arguments: { path: arg } });
        console.log(`read text=${JSON.stringify(r.content[0].text)} error=${!!r.isError}`);
    } else if (mode === "load") {
        const n = Number(arg);
        let ok = 0;
        for (let i = 0; i < n; i += 8) {
            const rs = await Promise.all([...Array(Math.min(8, n - i)).keys()].map(() =>
                client.listTools()));
            ok += rs.filter((r) => r.tools.length > 0).length;
        }
        console.log(`load ok=${ok} warnings=${warnings}`);
    } else if (mode === "caps") {   // keys sorted at every level (servers differ in order)
        const sorted = (v) => v && typeof v === "object" && !Array.isArray(v)
            ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted(v[k])])) : v;
        console.log(`caps ${JSON.stringify(sorted(client.getServerCapabilities()))} ` +
                    `version=${transport.protocolVersion}`);
    }
    await client.close();
}

main().catch((e) => {
    console.log(`error ${e && e.message ? e.message : e}`);
    process.exit(1);
});
