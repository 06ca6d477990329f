// What the client refuses before sending anything, and the bytes it sends
// (a fetch stand-in records them): no broker needed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const { Client, MaybeRanError, UnreachableError } = await import(join(process.env.JRPC_TS_DIST ?? join(here, "..", "dist"), "index.js"));

test("options refused at construction", () => {
    assert.throws(() => new Client([]), TypeError);
    assert.throws(() => new Client(["http://a/rpc", "ws://b/rpc"]), /all http\(s\):\/\/ or all ws\(s\):\/\//);
    assert.throws(() => new Client("ftp://a/"), TypeError);
    assert.throws(() => new Client("ws://a/rpc", { retry: "safe" }), /WebSocket message carries no Idempotency-Key/);
    assert.throws(() => new Client("http://a/rpc", { key: { id: "k", secret: "s3cr3t-s3cr3t-s3cr3t" }, bearer: "t" }), TypeError);
    assert.throws(() => new Client("http://a/rpc", { timeoutMs: 0 }), RangeError);
});

test("ZeroMQ URLs (dns+tcp://, tcp://, ipc://) are refused, saying this client speaks HTTP(S) and WebSocket only", () => {
    for (const u of ["dns+tcp://brokers:5555", "tcp://127.0.0.1:5555", "ipc:///run/jrpc.sock"]) {
        assert.throws(() => new Client(u), (e) => e instanceof TypeError &&
            e.message.includes(u) && /ZeroMQ/.test(e.message) && /HTTP\(S\) and WebSocket only/.test(e.message), u);
        assert.throws(() => new Client(["http://a/rpc", u]), new RegExp(u.replace(/[+.]/g, "\\$&") + ".*ZeroMQ"));
    }
    assert.throws(() => new Client("dns+tcp://brokers:5555"), /dns\+tcp:\/\/NAME:PORT names ZeroMQ brokers/);
});

test("the bytes sent: one body, ids the client chose, the headers asked for", async () => {
    const sent = [];
    const fetch = async (url, init) => {
        sent.push({ url, body: new TextDecoder().decode(init.body), headers: init.headers });
        const reqs = JSON.parse(new TextDecoder().decode(init.body));
        const ans = [reqs].flat().filter((r) => "id" in r).reverse()   // any order: matched by id
            .map((r) => ({ jsonrpc: "2.0", result: r.method, id: r.id }));
        return new Response(JSON.stringify(Array.isArray(reqs) ? ans : ans[0]), { headers: { "Content-Type": "application/json" } });
    };
    const c = new Client("http://b/rpc", { fetch, retry: "safe", timeoutMs: 1234 });
    assert.equal(await c.call("m", [1]), "m");
    assert.equal(sent[0].body, '{"jsonrpc":"2.0","method":"m","params":[1],"id":1}');
    assert.match(sent[0].headers["Idempotency-Key"], /^"[A-Za-z0-9_-]{24}"$/);
    assert.ok(Number(sent[0].headers["X-JRPC-Timeout-Ms"]) <= 1234);
    const out = await c.batch([{ method: "a" }, { method: "n", notify: true }, { method: "b" }], { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" });
    assert.equal(sent[1].body, '[{"jsonrpc":"2.0","method":"a","id":2},{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","method":"b","id":3}]');
    assert.deepEqual(out.map((a) => a?.result), ["a", undefined, "b"]);
    assert.equal(sent[1].headers.traceparent, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    assert.notEqual(sent[0].headers["Idempotency-Key"], sent[1].headers["Idempotency-Key"], "a key per body");
});

test("no broker reachable: UnreachableError (nothing sent); a connection lost after: MaybeRanError", async () => {
    const refused = async () => { throw new TypeError("fetch failed", { cause: { code: "ECONNREFUSED" } }); };
    const e1 = await new Client(["http://a/rpc", "http://b/rpc"], { fetch: refused }).call("m").catch((x) => x);
    assert.ok(e1 instanceof UnreachableError, String(e1));
    const reset = async () => { throw new TypeError("fetch failed", { cause: { code: "UND_ERR_SOCKET" } }); };
    const e2 = await new Client(["http://a/rpc", "http://b/rpc"], { fetch: reset }).call("m").catch((x) => x);
    assert.ok(e2 instanceof MaybeRanError, String(e2));
    assert.equal(e2.attempts, 1, "not sent again without a key");
    const e3 = await new Client(["http://a/rpc", "http://b/rpc"], { fetch: reset, retry: "safe" }).call("m").catch((x) => x);
    assert.ok(e3 instanceof MaybeRanError, String(e3));
    assert.equal(e3.attempts, 2, "sent to each broker once");
});
