// The client against the real broker and demo worker ($JRPC_BIN), over
// HTTP and WebSocket: an open broker, and a broker with --keys (a signing
// key, a bearer key, a key limited to `add`) and Redis for the nonces.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Broker, haveBroker, waitFor, load, startRedis, startWorker, stopAll, writeKeys } from "./harness.js";

const skip = haveBroker() ? false : "needs JRPC_BIN and JRPC_TS_DIST (tests/e2e/ts_client.sh sets them)";
let C, open, signed, keys;

before(async () => {
    if (skip)
        return;
    C = await load();
    keys = writeKeys();
    const redis = await startRedis();
    open = await new Broker("open", ["--redis", redis.url, "--timeout-ms", "10000"]).start();
    signed = await new Broker("signed", ["--redis", redis.url, "--keys", keys.file, "--timeout-ms", "10000"]).start();
    startWorker([open, signed]);
    await open.ready();
    await signed.ready();
});
after(stopAll);

const batchItems = [
    { method: "sleep", params: { ms: 600 } },
    { method: "add", params: [2, 3] },
    { method: "update", params: [1], notify: true },
    { method: "sleep", params: { ms: 50 } },
    { method: "nope" },
];

function checkBatch(out) {
    assert.equal(out.length, 5);
    assert.deepEqual(out[0], { ok: true, id: out[0].id, result: 600 });
    assert.deepEqual(out[1], { ok: true, id: out[1].id, result: 5 });
    assert.equal(out[2], undefined, "a notification has no answer");
    assert.deepEqual(out[3], { ok: true, id: out[3].id, result: 50 });
    assert.equal(out[4].ok, false);
    assert.equal(out[4].error.code, -32601);
    assert.ok(out[4].error instanceof C.JsonRpcError);
}

async function collect(stream) {
    const got = [];
    for await (const a of stream)
        got.push(a);
    return got;
}

describe("HTTP, open broker", { skip }, () => {
    test("call: the result; by-name params", async () => {
        const c = new C.Client(open.http);
        assert.equal(await c.call("add", [1, 2]), 3);
        assert.equal(await c.call("subtract", { minuend: 42, subtrahend: 23 }), 19);
        assert.deepEqual(await c.call("get_data"), ["hello", 5]);
    });

    test("errors: JsonRpcError with code, message, data", async () => {
        const c = new C.Client(open.http);
        const e = await c.call("no_such_method").catch((x) => x);
        assert.ok(e instanceof C.JsonRpcError);
        assert.equal(e.code, -32601);
        assert.equal(e.message, "Method not found");
        assert.equal(e.status, 200);
        const p = await c.call("add", ["x"]).catch((x) => x);
        assert.equal(p.code, -32602);
    });

    test("batch: answers in the order of the items, matched by id", async () => {
        checkBatch(await new C.Client(open.http).batch(batchItems));
    });

    test("notifications: resolve with nothing, alone or as a whole batch", async () => {
        const c = new C.Client(open.http);
        assert.equal(await c.notify("update", [1]), undefined);
        assert.deepEqual(await c.batch([{ method: "update", notify: true }, { method: "notify_hello", notify: true }]),
                         [undefined, undefined]);
    });

    for (const format of ["sse", "ndjson"]) {
        test(`stream (${format}): answers in order of arrival, then the end`, async () => {
            const c = new C.Client(open.http);
            const s = c.stream([
                { method: "sleep", params: { ms: 900 } },
                { method: "sleep", params: { ms: 20 } },
                { method: "sleep", params: { ms: 400 } },
                { method: "update", notify: true },
            ], { format });
            const got = await collect(s);
            assert.deepEqual(got.map((a) => [a.index, a.result]), [[1, 20], [2, 400], [0, 900]]);
            assert.deepEqual(s.end, { answered: 3, timed_out: 0 });
        });
    }

    test("stream: the deadline's -32003s are counted in the end", async () => {
        const s = new C.Client(open.http).stream([
            { method: "sleep", params: { ms: 5000 } },
            { method: "add", params: [1, 1] },
        ], { timeoutMs: 400 });
        const got = await collect(s);
        assert.deepEqual(got.map((a) => a.index), [1, 0]);
        assert.equal(got[1].error.code, -32003);
        assert.deepEqual(s.end, { answered: 2, timed_out: 1 });
    });

    test("deadline: X-JRPC-Timeout-Ms; the broker's -32003 at it", async () => {
        const c = new C.Client(open.http, { timeoutMs: 300 });
        const e = await c.call("sleep", { ms: 3000 }).catch((x) => x);
        assert.ok(e instanceof C.JsonRpcError, String(e));
        assert.equal(e.code, -32003);
        assert.equal(await c.call("sleep", { ms: 500 }, { timeoutMs: 5000 }), 500, "a call's own deadline wins");
    });

    test("AbortSignal: the wait ends with the signal's reason", async () => {
        const c = new C.Client(open.http);
        const ac = new AbortController();
        setTimeout(() => ac.abort(), 100);
        const e = await c.call("sleep", { ms: 3000 }, { signal: ac.signal }).catch((x) => x);
        assert.equal(e.name, "AbortError");
    });

    test("idempotency key: the same body twice runs once", async () => {
        const c = new C.Client(open.http);
        const key = "ts-" + Date.now();
        const first = await c.call("count", undefined, { idempotencyKey: key });
        // A retry is the same bytes: a fresh client numbers its first call 1 too.
        const again = await new C.Client(open.http).call("count", undefined, { idempotencyKey: key });
        assert.equal(again, first, "the kept reply");
        assert.equal(await c.call("count"), first + 1, "count ran once for the two");
    });
});

describe("HTTP, signed and bearer", { skip }, () => {
    test("signed call and batch; a fresh nonce per body (the same call twice is no replay)", async () => {
        const c = new C.Client(signed.http, { key: keys.key });
        assert.equal(await c.call("add", [1, 2]), 3);
        assert.equal(await c.call("add", [1, 2]), 3);
        checkBatch(await c.batch(batchItems));
    });

    test("signed stream (SSE)", async () => {
        const c = new C.Client(signed.http, { key: keys.key });
        const got = await collect(c.stream([{ method: "sleep", params: { ms: 300 } }, { method: "add", params: [1, 1] }]));
        assert.deepEqual(got.map((a) => a.index), [1, 0]);
    });

    test("refusals: 401 / -32002 with the broker's reason", async () => {
        const unsigned = await new C.Client(signed.http).call("add", [1, 2]).catch((x) => x);
        assert.equal(unsigned.code, -32002);
        assert.equal(unsigned.status, 401);
        assert.match(unsigned.data.reason, /not signed/);
        const wrong = await new C.Client(signed.http, { key: { id: "demo", secret: "wrong-secret-0123456789" } })
            .call("add", [1, 2]).catch((x) => x);
        assert.equal(wrong.code, -32002);
        assert.equal(wrong.data.reason, "signature does not match");
        const bad = await new C.Client(signed.http, { bearer: "not-the-token" }).call("add", [1, 2]).catch((x) => x);
        assert.equal(bad.status, 401);
        assert.equal(bad.data.reason, "unknown bearer token");
    });

    test("a stream refused whole: its JsonRpcError, before any answer", async () => {
        const s = new C.Client(signed.http).stream([{ method: "add", params: [1, 1] }]);
        const e = await collect(s).catch((x) => x);
        assert.ok(e instanceof C.JsonRpcError, String(e));
        assert.equal(e.code, -32002);
        assert.equal(e.status, 401);
    });

    test("a key's method ACL: -32002 in the call's own slot", async () => {
        const c = new C.Client(signed.http, { key: keys.limited });
        const out = await c.batch([{ method: "add", params: [1, 1] }, { method: "get_data" }]);
        assert.equal(out[0].result, 2);
        assert.equal(out[1].error.code, -32002);
        assert.equal(out[1].error.status, 200);
    });

    test("bearer key: Authorization: Bearer", async () => {
        const c = new C.Client(signed.http, { bearer: keys.token });
        assert.equal(await c.call("add", [40, 2]), 42);
    });
});

describe("WebSocket", { skip }, () => {
    test("open: call, batch (answers arrive out of order, matched by id), notification", async () => {
        const c = new C.Client(open.ws);
        try {
            assert.equal(await c.call("add", [1, 2]), 3);
            checkBatch(await c.batch(batchItems));
            await c.notify("update", [1]);
            // several bodies in flight at once on the one connection
            const r = await Promise.all([c.call("sleep", { ms: 300 }), c.call("sleep", { ms: 10 }), c.call("add", [5, 5])]);
            assert.deepEqual(r, [300, 10, 10]);
        } finally {
            c.close();
        }
    });

    test("stream mode: answers as they come", async () => {
        const c = new C.Client(open.ws);
        try {
            const s = c.stream([{ method: "sleep", params: { ms: 500 } }, { method: "sleep", params: { ms: 10 } },
                                { method: "nope" }]);
            const got = await collect(s);
            assert.deepEqual(got.map((a) => a.index), [2, 1, 0]);
            assert.deepEqual(s.end, { answered: 3, timed_out: 0 });
        } finally {
            c.close();
        }
    });

    test("deadline: X-JRPC-Timeout-Ms on the upgrade, -32003 from the broker", async () => {
        const c = new C.Client(open.ws, { timeoutMs: 300 });
        try {
            const e = await c.call("sleep", { ms: 3000 }).catch((x) => x);
            assert.ok(e instanceof C.JsonRpcError, String(e));
            assert.equal(e.code, -32003);
        } finally {
            c.close();
        }
    });

    test("signed upgrade; bearer upgrade; a wrong key is refused", async () => {
        const s = new C.Client(signed.ws, { key: keys.key });
        const b = new C.Client(signed.ws, { bearer: keys.token });
        try {
            assert.equal(await s.call("add", [1, 2]), 3);
            checkBatch(await s.batch(batchItems));
            assert.equal(await b.call("add", [2, 2]), 4);
        } finally {
            s.close();
            b.close();
        }
        const w = new C.Client(signed.ws, { key: { id: "demo", secret: "wrong-secret-0123456789" } });
        const e = await w.call("add", [1, 2]).catch((x) => x);
        assert.ok(e instanceof C.UnreachableError, String(e));
        const u = await new C.Client(signed.ws).call("add", [1, 2]).catch((x) => x);
        assert.ok(u instanceof C.UnreachableError, String(u));
    });

    test("the broker goes away: calls in flight reject with MaybeRanError", async () => {
        const b = await new Broker("short", ["--timeout-ms", "10000"]).start();
        startWorker([b]);
        await b.ready();
        const c = new C.Client(b.ws);
        assert.equal(await c.call("add", [1, 2]), 3);
        const p = c.call("sleep", { ms: 5000 }).catch((x) => x);
        await waitFor(async () => (await b.metric("jrpc_calls_inflight")) === 1, 10, "the call at the worker");
        await b.kill9();
        const e = await p;
        assert.ok(e instanceof C.MaybeRanError, String(e));
        c.close();
    });
});
