// Signing (docs/SIGNING.md) with WebCrypto: the vectors of
// tests/data/sign_vectors.tsv (the same file tests/proto/test_jrpc_sign.c
// reads: same body, key, nonce and time, same signature in C and here),
// and the headers of a live body (a fresh nonce each time).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";

const here = dirname(fileURLToPath(import.meta.url));
const DIST = process.env.JRPC_TS_DIST ?? join(here, "..", "dist");
const { sign, Signer, signingString } = await import(join(DIST, "index.js"));
const VECTORS = join(here, "..", "..", "..", "tests", "data", "sign_vectors.tsv");

function vectors() {
    return readFileSync(VECTORS, "utf8").split("\n")
        .filter((l) => l !== "" && !l.startsWith("#"))
        .map((l) => {
            const [id, secret, ts, nonce, bodyHex, sig] = l.split("\t");
            return { id, secret, ts: BigInt(ts), nonce, body: Uint8Array.from(Buffer.from(bodyHex, "hex")), sig };
        });
}

test("the shared vectors: the same signature as C (and openssl)", async () => {
    const vs = vectors();
    assert.ok(vs.length >= 5, "at least five vectors");
    assert.ok(vs.some((v) => v.sig === "d7f83f1c9d7da66fc460bdc60338d8c70ad1c26638957545aafb8fe8682deac6"),
              "the worked example of docs/SIGNING.md is one of them");
    for (const v of vs)
        assert.equal(await sign({ id: v.id, secret: v.secret }, v.body, v.ts, v.nonce), v.sig, `vector ${v.id} ${v.ts}`);
});

test("the worked example's string S, byte for byte", async () => {
    const body = '{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}';
    assert.equal(await signingString("demo", 1764000000, "AAAAAAAAAAAAAAAAAAAAAA", new TextEncoder().encode(body)),
                 "v1\ndemo\n1764000000\nAAAAAAAAAAAAAAAAAAAAAA\ne5e8ab8ad8226bc0e90cb22b80b5830e1d73a009268a32ff80f2dcd80f5793c3");
});

test("live headers: a fresh 22-character nonce per body, canonical timestamp, lower-case hex", async () => {
    const s = new Signer({ id: "demo", secret: "s3cr3t-s3cr3t-s3cr3t" });
    const body = new TextEncoder().encode("{}");
    const a = await s.headers(body), b = await s.headers(body);
    assert.match(a["X-JRPC-Nonce"], /^[A-Za-z0-9_-]{22}$/);
    assert.notEqual(a["X-JRPC-Nonce"], b["X-JRPC-Nonce"]);
    assert.match(a["X-JRPC-Timestamp"], /^[1-9][0-9]*$/);
    assert.ok(Math.abs(Number(a["X-JRPC-Timestamp"]) - Date.now() / 1000) < 5);
    assert.match(a["X-JRPC-Signature"], /^[0-9a-f]{64}$/);
    assert.equal(a["X-JRPC-Key"], "demo");
});

test("bad keys and nonces are refused before anything is sent", async () => {
    assert.throws(() => new Signer({ id: "bad id", secret: "s3cr3t-s3cr3t-s3cr3t" }), RangeError);
    assert.throws(() => new Signer({ id: "demo", secret: "short" }), RangeError);
    await assert.rejects(sign({ id: "demo", secret: "s3cr3t-s3cr3t-s3cr3t" }, "x", 1, "short"), RangeError);
});
