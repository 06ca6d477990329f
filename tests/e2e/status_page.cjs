// status_page.cjs — drives Debian's headless chromium over the DevTools
// pipe (the approach of client/ts/test/browser.test.js; node built-ins only)
// against a running broker's admin listener, for tests/e2e/status_page.sh.
//
// Env: ADMIN (http://127.0.0.1:PORT), JRPC_BIN, WORKERS_EP, ARTEFACTS, TMPDIR_E2E.
// Prints one line per check, "CHECK<TAB>name<TAB>expected<TAB>actual", that
// the shell script counts; exit status 0 unless the browser could not be
// driven at all (then the script fails too).
"use strict";
const { spawn } = require("node:child_process");
const { mkdirSync, writeFileSync, openSync } = require("node:fs");
const { join } = require("node:path");
const { ChromiumPipe } = require("./chromium_pipe.cjs");

const ADMIN = process.env.ADMIN;
const BIN = process.env.JRPC_BIN;
const WORKERS_EP = process.env.WORKERS_EP;
const ARTEFACTS = process.env.ARTEFACTS;
const TMP = process.env.TMPDIR_E2E;
const HOSTILE_METHOD = `<img src=x onerror="window.__pwned=1">'q"&amp;`;
const HOSTILE_NAME = `<img/src=x/onerror=window.__pwned=2>"q'`;

function check(name, expected, actual) {
    const clean = (v) => String(v).replace(/[\t\n]/g, " ");
    console.log(`CHECK\t${clean(name)}\t${clean(expected)}\t${clean(actual)}`);
}

async function waitFor(cond, secs, what) {
    const end = Date.now() + secs * 1000;
    let last;
    for (;;) {
        try {
            last = await cond();
            if (last)
                return last;
        } catch (e) {
            last = e.message;
        }
        if (Date.now() > end)
            throw new Error(`timed out (${secs} s) waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 100));
    }
}

// What the page shows, read in one evaluation.
const SNAPSHOT = `(() => {
    const t = (id) => document.getElementById(id)?.textContent ?? null;
    const rows = (id) => [...document.querySelectorAll('#' + id + ' tr')].map(
        (tr) => [...tr.children].map((td) => td.textContent));
    return JSON.stringify({
        version: t('version'), uptime: t('uptime'), polls: Number(t('polls')), live: t('live'),
        workersCount: t('workers-count'), bodiesOpen: t('bodies-open'), callsQueued: t('calls-queued'),
        listeners: rows('listeners'), workers: rows('workers'), methods: rows('methods'),
        refusals: rows('refusals'), bars: document.querySelectorAll('#hist rect').length,
        imgs: document.querySelectorAll('img').length, pwned: window.__pwned ?? null,
        redis: t('redis'), replay: t('replay'),
    });
})()`;

async function getJson(path) {
    const r = await fetch(ADMIN + path, { cache: "no-store" });
    return r.json();
}

function startWorker(args, log) {
    const fd = openSync(join(TMP, log), "a");
    return spawn(args[0], args.slice(1), { stdio: ["ignore", fd, fd] });
}

async function main() {
    const browser = new ChromiumPipe({ userDataDir: join(TMP, "chromium"), windowSize: "1200,1400" });
    const kids = [];
    let sessionId, targetId;
    try {
        ({ targetId } = await browser.send("Target.createTarget", { url: ADMIN + "/" }));
        ({ sessionId } = await browser.send("Target.attachToTarget", { targetId, flatten: true }));
        const snap = async () => JSON.parse(await browser.eval(sessionId, SNAPSHOT));

        // 1. The page renders the two workers the script started.
        let a = await waitFor(async () => {
            const s = await snap();
            return s.polls >= 1 && s.workers.length === 2 ? s : null;
        }, 40, "the page to show 2 workers");
        // The numbers shown match /status, read right after (stable fields).
        const st = await getJson("/status");
        const sw = await getJson("/status/workers");
        check("page: version = /status version", st.version, a.version);
        check("page: workers card = /status workers_connected", String(st.workers_connected), a.workersCount);
        check("page: listener rows = /status listeners", st.listeners.map((l) => `${l.name} ${l.endpoint} ${l.tls ? "on" : "off"}`).join(","),
              a.listeners.map((r) => r.join(" ")).join(","));
        check("page: worker names = /status/workers names", sw.workers.map((w) => w.name).sort().join(","),
              a.workers.map((r) => r[0]).sort().join(","));
        check("page: Redis shown as not used", "not used", a.redis);
        check("page: replay guard shown off", "off", a.replay);

        // 2. It updates: the poll counter and the uptime change between two reads.
        const b = await waitFor(async () => {
            const s = await snap();
            return s.polls > a.polls + 1 && s.uptime !== a.uptime ? s : null;
        }, 30, "the page to update");
        check("page: updates (polls grow, uptime changes)", "true", String(b.polls > a.polls && b.uptime !== a.uptime));
        // Methods: echo under load gets a rate (two polls apart) and calls.
        const m = await waitFor(async () => {
            const s = await snap();
            const row = s.methods.find((r) => r[1] === "echo");
            return row && /^[0-9.]+$/.test(row[2]) && Number(row[3]) > 0 ? row : null;
        }, 30, "a rate for echo");
        check("page: echo has a rate and calls", "true", String(Number(m[3]) > 0));
        const hist = await snap();
        check("page: the latency histogram has bars", "true", String(hist.bars >= 10));

        // 3. A worker that joins appears; one killed with -9 disappears (or shows lost).
        const gamma = startWorker([join(BIN, "jrpc-worker"), "--connect", WORKERS_EP, "--name", "gamma",
                                   "--heartbeat-ms", "200"], "gamma.log");
        kids.push(gamma);
        await waitFor(async () => (await snap()).workers.some((r) => r[0] === "gamma"), 30, "gamma to appear");
        check("page: a worker that joins appears", "gamma", "gamma");
        gamma.kill("SIGKILL");
        const gone = await waitFor(async () => {
            const row = (await snap()).workers.find((r) => r[0] === "gamma");
            return !row ? "gone" : /ejected|lost/.test(row[row.length - 1]) ? "lost" : null;
        }, 30, "gamma to disappear");
        check("page: a worker killed -9 disappears or is shown lost", "true", String(gone === "gone" || gone === "lost"));

        // 4. Hostile strings: a name (the broker keeps only safe names: its
        // id is shown then) and a method name full of HTML, shown as text.
        const hex = Buffer.from(HOSTILE_NAME).toString("hex");
        const rogue = startWorker([join(BIN, "jrpc-test-rogue-worker"), "--connect", WORKERS_EP,
                                   "--name-hex", hex, "--method", HOSTILE_METHOD, "--methods", "0",
                                   "--credit", "4"], "rogue.log");
        kids.push(rogue);
        const h = await waitFor(async () => {
            const s = await snap();
            return s.methods.some((r) => r[1] === HOSTILE_METHOD) && s.workers.length === 3 ? s : null;
        }, 30, "the hostile method on the page");
        const swh = await getJson("/status/workers");
        check("page: hostile method name shown as text, exactly", HOSTILE_METHOD,
              h.methods.find((r) => r[1] === HOSTILE_METHOD)[1]);
        check("page: the worker names = /status/workers names (hostile one included)",
              swh.workers.map((w) => w.name).sort().join(","), h.workers.map((r) => r[0]).sort().join(","));
        check("page: no element injected (no <img>, no script ran)", "0 null", `${h.imgs} ${h.pwned}`);
        const html = await browser.eval(sessionId, "document.getElementById('methods').innerHTML");
        check("page: the hostile name is escaped in the DOM's HTML", "true", String(html.includes("&lt;img src=x")));

        // 5. Refusals reach the page (the script sent a body with a wrong Content-Type).
        const r = await waitFor(async () => ((await snap()).refusals.length > 0 ? (await snap()).refusals : null), 20, "a refusal");
        check("page: the refused body is listed with its code and reason", "true",
              String(r.some((row) => row[3] === "-32600" && row[4].includes("Content-Type must be"))));
    } catch (e) {
        check("page: driven to the end", "ok", e.message);
    } finally {
        try {
            if (sessionId) {
                const shot = await browser.send("Page.captureScreenshot", { format: "png", captureBeyondViewport: true }, sessionId);
                mkdirSync(ARTEFACTS, { recursive: true });
                writeFileSync(join(ARTEFACTS, "status_page.png"), Buffer.from(shot.data, "base64"));
            }
        } catch (e) {
            check("page: screenshot", "ok", e.message);
        }
        for (const k of kids)
            k.kill("SIGKILL");
        await browser.close();
    }
}

main().then(() => process.exit(0), (e) => { console.error(e); process.exit(1); });
