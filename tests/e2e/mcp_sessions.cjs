// tests/e2e/mcp_sessions.sh's client: the official MCP TypeScript SDK (a
// client no one here wrote) over Streamable HTTP, printing one line per
// step for the script to check.
//
//   NODE_PATH=tests/mcp/node_modules node mcp_sessions.cjs memory URL TAG
//     connects (server-memory), creates 10 entities TAG-0..TAG-9 at once,
//     reads the graph back: "session=yes|none", "kept n=K"; then, with a
//     session, ends it (DELETE) and posts with its id again: "after_delete
//     status=S".
//   NODE_PATH=... node mcp_sessions.cjs logging URL
//     connects (server-everything), turns its simulated logging on (a tool:
//     the state lives in the session's child), waits for 2 logging
//     notifications (the first comes during the call, the next ones 5 s
//     apart on the session's GET stream): "logging n=K", then turns it off.
//   NODE_PATH=... node mcp_sessions.cjs sampling URL
//     connects (server-everything) offering sampling, calls its
//     trigger-sampling-request tool (offered only to clients that can
//     sample): the server's sampling/createMessage reaches the client, whose
//     answer goes back to the child: "sampling asked=N text=ok|..."
//   NODE_PATH=... node mcp_sessions.cjs progress URL
//     connects (server-everything), calls trigger-long-running-operation
//     with a progressToken: "progress n=K last=P/T", "result ok=true|false".
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } =
    require("@modelcontextprotocol/sdk/client/streamableHttp.js");

async function memory(url, tag) {
    const client = new Client({ name: "jrpc-e2e-sessions", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(url);
    await client.connect(transport);
    const sid = transport.sessionId;
    console.log(`session=${sid ? "yes" : "none"}`);
    await Promise.all([...Array(10).keys()].map((i) => client.callTool({
        name: "create_entities",
        arguments: { entities: [{ name: `${tag}-${i}`, entityType: "e2e", observations: ["x"] }] },
    })));
    const g = await client.callTool({ name: "read_graph", arguments: {} });
    const graph = g.structuredContent || JSON.parse(g.content[0].text);
    const kept = graph.entities.filter((e) => e.name.startsWith(`${tag}-`)).length;
    console.log(`kept n=${kept}`);
    if (sid) {
        await transport.terminateSession();
        const res = await fetch(url, {
            method: "POST",
            headers: { "content-type": "application/json", accept: "application/json, text/event-stream",
                       "mcp-session-id": sid, "mcp-protocol-version": "2025-06-18" },
            body: JSON.stringify({ jsonrpc: "2.0", id: 99, method: "tools/list" }),
        });
        console.log(`after_delete status=${res.status}`);
    }
    await client.close();
}

async function progress(url) {
    const client = new Client({ name: "jrpc-e2e-progress", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(url);
    await client.connect(transport);
    let n = 0, last = "";
    const r = await client.callTool(
        { name: "trigger-long-running-operation", arguments: { duration: 1, steps: 3 } },
        undefined,
        { onprogress: (p) => { n++; last = `${p.progress}/${p.total}`; }, timeout: 30000 });
    console.log(`progress n=${n} last=${last}`);
    console.log(`result ok=${r.content[0].text.startsWith("Long running operation completed")}`);
    await client.close();
}

async function logging(url) {
    const { LoggingMessageNotificationSchema } = require("@modelcontextprotocol/sdk/types.js");
    const client = new Client({ name: "jrpc-e2e-logging", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(url);
    let n = 0, wake = null;
    client.setNotificationHandler(LoggingMessageNotificationSchema, () => { n++; if (wake) wake(); });
    await client.connect(transport);
    await client.callTool({ name: "toggle-simulated-logging", arguments: {} });
    const until = Date.now() + 20000;
    while (n < 2 && Date.now() < until)
        await new Promise((res) => { wake = res; setTimeout(res, 1000); });
    console.log(`logging n=${n >= 2 ? "2+" : n}`);
    await client.callTool({ name: "toggle-simulated-logging", arguments: {} });
    await transport.terminateSession();
    await client.close();
}

async function sampling(url) {
    const { CreateMessageRequestSchema } = require("@modelcontextprotocol/sdk/types.js");
    const client = new Client({ name: "jrpc-e2e-sampling", version: "1.0.0" },
                              { capabilities: { sampling: {} } });
    let asked = 0;
    client.setRequestHandler(CreateMessageRequestSchema, async () => {
        asked++;
        return { role: "assistant", model: "jrpc-e2e-model",
                 content: { type: "text", text: "sampled by the client" } };
    });
    const transport = new StreamableHTTPClientTransport(url);
    await client.connect(transport);
    const r = await client.callTool({ name: "trigger-sampling-request",
                                      arguments: { prompt: "hi", maxTokens: 5 } });
    const text = r.content[0].text;
    console.log(`sampling asked=${asked} text=${text.includes("sampled by the client") ? "ok" : text}`);
    await transport.terminateSession();
    await client.close();
}

const [mode, url, tag] = process.argv.slice(2);
(mode === "memory" ? memory(new URL(url), tag) : mode === "logging" ? logging(new URL(url))
 : mode === "sampling" ? sampling(new URL(url)) : progress(new URL(url))).catch((e) => {
    console.log(`error ${e && e.message}`);
    process.exit(1);
});
