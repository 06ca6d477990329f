// bench/peers/mcp_load.cjs — one load process of the MCP rows (issue 35):
// K clients of the official MCP TypeScript SDK (Client over
// StreamableHTTPClientTransport, each its own session where the server
// gives one), each calling tools/call "echo" in a closed loop, one call in
// flight at a time. Driven by mcp_drive.py, which starts several of these
// so that no single Node event loop is the limit.
//
//   NODE_PATH=bench/peers/node_modules node mcp_load.cjs URL K [TIMEOUT_MS]
//
// Protocol with the driver: prints "ready" on stdout once its K clients
// are connected and have each made one call (warm-up calls go on after it);
// reads "go T0 T1" (epoch ms) on stdin: calls that finish inside [T0, T1]
// are counted; at T1 it stops calling, and once stdin closes (the driver's
// last CPU reading is done) it ends its sessions (DELETE) and prints one
// JSON object: calls, errors by kind, the latencies (µs) of the window's
// calls, and per client what it saw after T0 (first and last error, the
// last success, the first success after the last error, reconnects), then
// exits.
//
// A client that fails keeps trying, as a user's client would: after an
// HTTP 404 (its session is gone), a closed transport or 3 failures in a
// row it makes a new Client and connects again (a new session: counted in
// "reconnects"); between failed attempts it waits 50 ms.
"use strict";
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport, StreamableHTTPError } =
    require("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { McpError } = require("@modelcontextprotocol/sdk/types.js");

const url = new URL(process.argv[2]);
const k = parseInt(process.argv[3] || "1", 10);
const timeoutMs = parseInt(process.argv[4] || "5000", 10);
let t0 = Infinity, t1 = Infinity, stopping = false;

function kind(e) {  // an error's kind, the key it is counted under
    if (e instanceof StreamableHTTPError)
        return `http:${e.code}`;
    if (e instanceof McpError)
        return `mcp:${e.code}`;
    if (e && e.message === "tool_error")
        return "tool_error";
    if (e && /Not connected|closed/i.test(e.message || ""))
        return "closed";
    const why = e && e.cause && (e.cause.code || e.cause.message);
    return `other:${(e && (e.code || e.name)) || "?"}${why ? ":" + why : ""}`;
}

// Setting up, before anyone is measured, a gateway may be starting a server
// child per session for 32 sessions at once: its calls may take this long.
const SETUP_TIMEOUT_MS = 60000;

async function connect(c, timeout = timeoutMs) {  // a new Client (a new session) for client c
    if (c.client)
        c.client.close().catch(() => {});
    const client = new Client({ name: `jrpc-bench-mcp-${c.i}`, version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(url);
    await client.connect(transport, { timeout });
    c.client = client;
    c.transport = transport;
    c.closed = false;
    transport.onclose = () => { c.closed = true; };
}

async function call(c, timeout = timeoutMs) {  // one tools/call; throws on any failure
    const t = process.hrtime.bigint();
    const r = await c.client.callTool({ name: "echo", arguments: { message: "hello" } },
                                      undefined, { timeout });
    if (r.isError || !r.content || !String(r.content[0] && r.content[0].text).includes("hello"))
        throw new Error("tool_error");
    return Number((process.hrtime.bigint() - t) / 1000n);
}

function sleep(ms) { return new Promise((res) => setTimeout(res, ms)); }

async function run(c) {  // the closed loop of client c until T1
    let failedInRow = 0;
    while (!stopping) {
        try {
            if (c.needConnect) {
                if (Date.now() >= t0)
                    c.stats.reconnects++;
                await connect(c);
                c.needConnect = false;
            }
            const us = await call(c);
            const now = Date.now();
            failedInRow = 0;
            if (now >= t0 && now <= t1) {
                c.stats.calls++;
                c.lat.push(us);
                c.stats.last_ok_ms = now;
                if (c.stats.last_error_ms !== null && c.stats.ok_after_error_ms === null)
                    c.stats.ok_after_error_ms = now;
            }
        } catch (e) {
            const now = Date.now();
            if (stopping || now > t1)
                break;
            failedInRow++;
            if (now >= t0) {
                const key = kind(e);
                c.stats.errors[key] = (c.stats.errors[key] || 0) + 1;
                if (c.stats.first_error_ms === null)
                    c.stats.first_error_ms = now;
                c.stats.last_error_ms = now;
                c.stats.ok_after_error_ms = null;
            }
            if ((e instanceof StreamableHTTPError && e.code === 404) || c.closed || failedInRow >= 3 ||
                !c.client)
                c.needConnect = true;
            await sleep(50);
        }
    }
}

async function main() {
    const clients = [...Array(k).keys()].map((i) => ({
        i, client: null, transport: null, closed: false, needConnect: false, lat: [],
        stats: { calls: 0, errors: {}, reconnects: 0, first_error_ms: null, last_error_ms: null,
                 ok_after_error_ms: null, last_ok_ms: null },
    }));
    // Set up with 3 tries each (a gateway starting many children at once
    // may drop a connection): only a client that never got through counts.
    let setupErrors = 0;
    await Promise.all(clients.map(async (c) => {
        for (let attempt = 1; ; attempt++) {
            try {
                await connect(c, SETUP_TIMEOUT_MS);
                await call(c, SETUP_TIMEOUT_MS);
                return;
            } catch (e) {
                process.stderr.write(`mcp_load: pid ${process.pid} client ${c.i} setup try ${attempt}: ` +
                                     `${e.message} (${kind(e)})\n`);
                if (attempt === 3) {
                    setupErrors++;
                    c.needConnect = true;
                    return;
                }
                await sleep(500);
            }
        }
    }));
    process.stdout.write("ready\n");
    let buf = "";
    let gone, closed;
    const go = new Promise((res) => { gone = res; });
    const stdinEnd = new Promise((res) => { closed = res; });
    process.stdin.on("data", (d) => {
        buf += d;
        const m = /go (\d+) (\d+)/.exec(buf);
        if (m) {
            t0 = Number(m[1]);
            t1 = Number(m[2]);
            gone();
        }
    });
    process.stdin.on("end", () => { stopping = true; gone(); closed(); });
    const loops = clients.map(run);
    await go;
    await sleep(Math.max(0, t1 - Date.now()));
    stopping = true;
    // A call still in flight at T1 is not waited for longer than its timeout.
    await Promise.race([Promise.all(loops), sleep(timeoutMs + 1000)]);
    await stdinEnd;
    await Promise.race([Promise.all(clients.map(async (c) => {
        if (c.transport && c.transport.sessionId)
            await c.transport.terminateSession().catch(() => {});
        if (c.client)
            await c.client.close().catch(() => {});
    })), sleep(3000)]);
    const out = { clients: k, setup_errors: setupErrors, calls: 0, errors: {}, latencies_us: [],
                  per_client: [] };
    for (const c of clients) {
        out.calls += c.stats.calls;
        for (const [key, n] of Object.entries(c.stats.errors))
            out.errors[key] = (out.errors[key] || 0) + n;
        for (const us of c.lat)
            out.latencies_us.push(us);
        out.per_client.push(c.stats);
    }
    process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(0));
}

main().catch((e) => {
    process.stderr.write(`mcp_load: ${e.stack || e}\n`);
    process.exit(1);
});
