// tests/e2e/mcp.sh's client: the official MCP TypeScript SDK (a client no
// one here wrote) over Streamable HTTP. Connects (the SDK's initialize and
// notifications/initialized), lists the tools, calls "echo" and
// "get-sum", pings, and prints one line per step for the script to check.
//
//   NODE_PATH=tests/mcp/node_modules node mcp_client.cjs http://127.0.0.1:PORT/mcp \
//       [--bearer TOKEN] [--prefer-sse]
// --bearer sends "Authorization: Bearer TOKEN" (a bearer key); --prefer-sse
// rewrites the SDK's Accept so that the server should answer with
// text/event-stream, and counts the answers that came so ("sse n=N").
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } =
    require("@modelcontextprotocol/sdk/client/streamableHttp.js");

async function main() {
    const url = new URL(process.argv[2]);
    const args = process.argv.slice(3);
    const bearer = args.includes("--bearer") ? args[args.indexOf("--bearer") + 1] : null;
    const preferSse = args.includes("--prefer-sse");
    let sse = 0;
    const opts = {};
    if (bearer)
        opts.requestInit = { headers: { Authorization: `Bearer ${bearer}` } };
    if (preferSse) {
        opts.fetch = async (input, init) => {
            const h = new Headers(init && init.headers);
            if ((init && init.method) === "POST")
                h.set("accept", "text/event-stream, application/json;q=0.5");
            const res = await fetch(input, { ...init, headers: h });
            if ((res.headers.get("content-type") || "").startsWith("text/event-stream"))
                sse++;
            return res;
        };
    }
    const client = new Client({ name: "jrpc-e2e", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(url, opts);
    await client.connect(transport);
    const sv = client.getServerVersion();
    console.log(`connected server=${sv && sv.name} session=${transport.sessionId || "none"}`);
    const tools = await client.listTools();
    const names = tools.tools.map((t) => t.name).sort();
    console.log(`tools n=${names.length} echo=${names.includes("echo")} ` +
                `get-sum=${names.includes("get-sum")}`);
    const r = await client.callTool({ name: "echo", arguments: { message: "hello jrpc" } });
    console.log(`echo text=${JSON.stringify(r.content[0].text)}`);
    const s = await client.callTool({ name: "get-sum", arguments: { a: 2, b: 40 } });
    console.log(`sum text=${JSON.stringify(s.content[0].text)}`);
    // Several at once: the broker spreads them over the children.
    const many = await Promise.all([...Array(8).keys()].map((i) =>
        client.callTool({ name: "echo", arguments: { message: `m${i}` } })));
    console.log(`parallel ok=${many.every((x, i) => x.content[0].text.includes(`m${i}`))}`);
    await client.ping();
    console.log("ping ok");
    await client.close();
    console.log("closed");
    if (preferSse)
        console.log(`sse n=${sse}`);
}

main().catch((e) => {
    console.log(`error ${e && e.stack ? e.stack : e}`);
    process.exit(1);
});
