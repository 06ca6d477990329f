// Headless Chromium (Debian's chromium) runs test/browser/page.html,
// served from another origin (a static server on its own 127.0.0.1 port),
// which loads the built client and calls brokers over HTTP and WebSocket.
// The page's results are read over the DevTools protocol
// (--remote-debugging-pipe) and a screenshot of each run is saved in
// $JRPC_ARTEFACTS. Through --cors-origin listing the page's origin every
// step works; a broker without --cors-origin, or listing another origin,
// must fail the page's calls (the browser withholds the answer, the broker
// refuses the upgrade).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { ChromiumPipe } from "../../../tests/e2e/chromium_pipe.cjs";
import { createServer } from "node:http";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, extname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";
import { Broker, DIST, TMP, haveBroker, startRedis, startWorker, stopAll, waitFor, writeKeys } from "./harness.js";

const here = dirname(fileURLToPath(import.meta.url));
const CHROMIUM = process.env.CHROMIUM ?? "chromium";
const ARTEFACTS = process.env.JRPC_ARTEFACTS ?? join(TMP, "artefacts");
const skip = haveBroker() ? false : "needs JRPC_BIN and JRPC_TS_DIST (tests/e2e/ts_browser.sh sets them)";
let site, origin, cors, signed, nocors, other, keys, browser;

/** The page checks every vector of the shared file: "ok N", N its vector lines. */
const VECTORS = `ok ${readFileSync(new URL("../../../tests/data/sign_vectors.tsv", import.meta.url), "utf8")
    .split("\n").filter((l) => l !== "" && !l.startsWith("#")).length}`;

/** The page's origin: page.html, the built client under /dist/, the signing vectors. */
function serveSite() {
    const s = createServer((req, res) => {
        const path = new URL(req.url, "http://x").pathname;
        let file = null;
        if (path === "/page.html")
            file = join(here, "browser", "page.html");
        else if (path === "/vectors.tsv")
            file = join(here, "..", "..", "..", "tests", "data", "sign_vectors.tsv");
        else if (path.startsWith("/dist/") && !normalize(path).includes(".."))
            file = join(DIST, path.slice(6));
        let body;
        try {
            body = file === null ? null : readFileSync(file);
        } catch {
            body = null;
        }
        if (body === null) {
            res.writeHead(404).end();
            return;
        }
        const type = { ".html": "text/html", ".js": "text/javascript", ".tsv": "text/plain" }[extname(file)] ?? "application/octet-stream";
        res.writeHead(200, { "Content-Type": `${type}; charset=utf-8` }).end(body);
    });
    return new Promise((r) => s.listen(0, "127.0.0.1", () => r(s)));
}

/** Chromium driven over the DevTools pipe (tests/e2e/chromium_pipe.cjs), and a page's run. */
class Chromium extends ChromiumPipe {
    constructor() {
        super({ binary: CHROMIUM, userDataDir: join(TMP, "chromium"), windowSize: "1000,700" });
    }

    /** Opens url in a new tab, waits for #result, saves a screenshot; returns the results. */
    async run(url, png) {
        const { targetId } = await this.send("Target.createTarget", { url });
        const { sessionId } = await this.send("Target.attachToTarget", { targetId, flatten: true });
        let text = "";
        try {
            await waitFor(async () => {
                const r = await this.send("Runtime.evaluate", {
                    expression: "document.getElementById('result')?.textContent ?? ''", returnByValue: true }, sessionId);
                text = r.result.value;
                return text !== "";
            }, 40, "the page's results");
        } finally {
            const shot = await this.send("Page.captureScreenshot", { format: "png" }, sessionId);
            mkdirSync(ARTEFACTS, { recursive: true });
            writeFileSync(join(ARTEFACTS, png), Buffer.from(shot.data, "base64"));
            await this.send("Target.closeTarget", { targetId });
        }
        return JSON.parse(text);
    }

}

function pageUrl(b, s) {
    const q = new URLSearchParams({ http: b.http + "/rpc", ws: b.ws });
    if (s)
        q.set("signed", s.http + "/rpc"), q.set("key", keys.key.id), q.set("secret", keys.key.secret);
    return `${origin}/page.html?${q}`;
}

before(async () => {
    if (skip)
        return;
    site = await serveSite();
    origin = `http://127.0.0.1:${site.address().port}`;
    keys = writeKeys();
    const redis = await startRedis();
    cors = await new Broker("cors", ["--cors-origin", origin]).start();
    signed = await new Broker("signed", ["--cors-origin", `https://app.example,${origin}`, "--keys", keys.file,
                                         "--redis", redis.url]).start();
    nocors = await new Broker("nocors", []).start();
    other = await new Broker("other", ["--cors-origin", "http://127.0.0.1:1"]).start();
    startWorker([cors, signed, nocors, other]);
    for (const b of [cors, signed, nocors, other])
        await b.ready();
    browser = new Chromium();
    await browser.send("Browser.getVersion");
});

after(async () => {
    await browser?.close();
    site?.close();
    await stopAll();
});

describe("headless Chromium, a page on another origin", { skip }, () => {
    test("through --cors-origin: HTTP (plain and signed with WebCrypto) and WebSocket work", async () => {
        const r = await browser.run(pageUrl(cors, signed), "ts_browser.png");
        assert.deepEqual(r, {
            vectors: VECTORS,
            http_call: "ok 3",
            http_batch: "ok [300,5,null,-32601]",
            http_stream: "ok [1,0]",
            http_error: 'ok "JsonRpcError -32602"',
            http_signed: "ok [42,42]",
            ws_call: "ok 7",
            ws_batch: "ok [300,5,null,-32601]",
            ws_stream: "ok [1,0]",
        });
    });

    for (const [name, which] of [["without --cors-origin", () => nocors], ["--cors-origin listing another origin", () => other]]) {
        test(`${name}: the page's HTTP and WebSocket calls fail`, async () => {
            const r = await browser.run(pageUrl(which()), `ts_browser_${which().name}.png`);
            assert.equal(r.vectors, VECTORS);
            for (const k of ["http_call", "http_batch", "http_stream", "ws_call", "ws_batch", "ws_stream"])
                assert.match(r[k], /^error /, `${k}: ${r[k]}`);
            assert.match(r.ws_call, /UnreachableError/);
        });
    }
});
