// Several brokers (issue 34, section 3): brokers A and B share Redis (the
// idempotency store) and one demo worker serves both; its `count` method
// answers how many times it ran in that worker, so the worker is where
// "ran once" is counted. The rule under test (README.md, "Retries"): a body
// goes to the next broker when nothing was sent (connection refused), or
// with retry: "safe" (an Idempotency-Key the client adds), never otherwise;
// a body that may have run and cannot be sent again safely rejects with
// MaybeRanError.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { Broker, haveBroker, load, startRedis, startWorker, stopAll, waitFor } from "./harness.js";

const skip = haveBroker() ? false : "needs JRPC_BIN and JRPC_TS_DIST (tests/e2e/ts_client.sh sets them)";
let C, A, B;

before(async () => {
    if (skip)
        return;
    C = await load();
    const redis = await startRedis();
    A = await new Broker("A", ["--redis", redis.url, "--timeout-ms", "10000"]).start();
    B = await new Broker("B", ["--redis", redis.url, "--timeout-ms", "10000"]).start();
    startWorker([A, B], ["--liveness", "2"]);
    await A.ready();
    await B.ready();
});
after(stopAll);

/** How many times count ran at the worker, this probe included. */
const count = () => new C.Client(B.http).call("count");

async function killAWithCallInFlight(p) {
    await waitFor(async () => (await A.metric("jrpc_calls_inflight")) >= 1, 10, "a call at the worker through A");
    await A.kill9();
    return p;
}

async function reviveA() {
    await A.restart();
    await A.ready();
}

/** A server that takes a request and closes the connection without an answer: a broker
 *  that died after the body was sent and before it ran anything. */
async function dropper() {
    const s = createServer((sock) => {
        let got = "";
        sock.on("data", (d) => {
            got += d;
            const head = got.indexOf("\r\n\r\n");
            const len = Number((/content-length: *(\d+)/i.exec(got) ?? [])[1] ?? 0);
            if (head >= 0 && got.length >= head + 4 + len) {
                s.hits = (s.hits ?? 0) + 1;
                sock.destroy();
            }
        });
    });
    await new Promise((r) => s.listen(0, "127.0.0.1", r));
    s.url = `http://127.0.0.1:${s.address().port}/rpc`;
    return s;
}

describe("several brokers", { skip }, () => {
    test("a broker that is down: the body goes to the next (nothing was sent), and runs once", async () => {
        await A.kill9();
        const c = new C.Client([A.http, B.http]);
        const n0 = await count();
        assert.equal(await c.call("count"), n0 + 1);
        assert.equal(await c.call("count"), n0 + 2, "the next body goes to B at once");
        assert.equal(await count(), n0 + 3);
        await reviveA();
    });

    test("no retry: the connection dies after the body was sent -> MaybeRanError; never sent again", async () => {
        const c = new C.Client([A.http, B.http]);
        const n0 = await count();
        const p = c.batch([{ method: "count" }, { method: "sleep", params: { ms: 3000 } }]).catch((x) => x);
        const e = await killAWithCallInFlight(p);
        assert.ok(e instanceof C.MaybeRanError, String(e));
        assert.equal(e.sent, true);
        assert.equal(e.attempts, 1);
        assert.match(e.message, /may or may not have run/);
        assert.equal(await count(), n0 + 2, "count ran once (on A), not again on B");
        await reviveA();
    });

    test("retry safe: a broker that closed before answering -> sent again with its Idempotency-Key, runs once", async () => {
        const d = await dropper();
        try {
            const n0 = await count();
            const safe = new C.Client([d.url, B.http], { retry: "safe" });
            assert.equal(await safe.call("count"), n0 + 1, "answered by B");
            assert.equal(d.hits, 1, "the first copy went to the broker that closed");
            assert.equal(await count(), n0 + 2, "ran once");
            const plain = new C.Client([d.url, B.http]);
            const e = await plain.call("count").catch((x) => x);
            assert.ok(e instanceof C.MaybeRanError, String(e));
            assert.match(e.message, /retry: "safe" would have sent it again/);
            assert.equal(await count(), n0 + 3, "not sent to B");
            const marked = await plain.call("count", undefined, { retryable: true });
            assert.equal(marked, n0 + 4, "a body marked retryable is sent again without a key");
        } finally {
            d.close();
        }
    });

    test("retry safe: the first copy ran at the worker, its broker died -> the retry finds the key held: MaybeRanError, ran once", async () => {
        const c = new C.Client([A.http, B.http], { retry: "safe", timeoutMs: 2000 });
        const n0 = await count();
        const p = c.batch([{ method: "count" }, { method: "sleep", params: { ms: 1500 } }]).catch((x) => x);
        const e = await killAWithCallInFlight(p);
        assert.ok(e instanceof C.MaybeRanError, String(e));
        assert.equal(e.attempts, 2, "sent again to B");
        assert.equal(e.cause.code, -32008, "B: the key is held by the first run");
        assert.equal(await count(), n0 + 2, "count ran once");
        await reviveA();
    });

    test("under load, kill -9 one broker: each call settles once, none ran twice (counted at the worker)", async () => {
        const n0 = await count();
        const LOOPS = 4, PER = 25;
        const values = [], maybe = [], other = [];
        let okAfterKill = 0, killed = false, answered = 0;
        const loop = async () => {
            const c = new C.Client([A.http, B.http], { retry: "safe", timeoutMs: 3000 });
            for (let i = 0; i < PER; i++) {
                const startedAfterKill = killed;
                try {
                    const out = await c.batch([{ method: "count" }, { method: "sleep", params: { ms: 150 } }]);
                    values.push(out[0].result);
                    answered++;
                    if (startedAfterKill)
                        okAfterKill++;
                } catch (e) {
                    (e instanceof C.MaybeRanError ? maybe : other).push(e);
                }
            }
        };
        const loops = Array.from({ length: LOOPS }, loop);
        // kill A while calls are at the worker through it (their counts ran)
        await waitFor(async () => answered >= 8 && (await A.metric("jrpc_calls_inflight")) >= 2, 30,
                      "8 answers, then calls at the worker through A");
        await A.kill9();
        killed = true;
        await Promise.all(loops);
        const runs = (await count()) - n0 - 1;
        assert.deepEqual(other.map(String), [], "no other errors");
        assert.equal(values.length + maybe.length, LOOPS * PER, "every call settled");
        assert.equal(new Set(values).size, values.length, "no answer twice");
        assert.ok(maybe.length <= LOOPS, `only calls in flight at the kill may be unknown (${maybe.length})`);
        assert.ok(runs >= values.length && runs <= values.length + maybe.length,
                  `runs at the worker ${runs}: the ${values.length} answered, plus at most the ${maybe.length} unknown, none twice`);
        assert.ok(okAfterKill > 0, "calls after the kill are answered by B");
        console.log(`load: ${values.length} answered, ${maybe.length} may or may not have run, ${runs} runs at the worker`);
        await reviveA();
    });
});
