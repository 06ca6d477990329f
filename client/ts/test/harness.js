// The real programs for the tests: redis-server, jrpc-broker and
// jrpc-worker from $JRPC_BIN, on 127.0.0.1 ports picked at random (below
// Linux's ephemeral range; a start that finds its ports taken tries others).
// Everything started is killed when the test file ends (stopAll).
import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const BIN = process.env.JRPC_BIN;
export const DIST = process.env.JRPC_TS_DIST;
export const TMP = mkdtempSync(join(tmpdir(), "jrpc-ts-"));
const procs = new Set();

export function haveBroker() {
    return Boolean(BIN && DIST);
}

function pickPort() {
    return 10000 + Math.floor(Math.random() * 22000);
}

/** Polls cond (async) every 50 ms until it is true, at most secs seconds. */
export async function waitFor(cond, secs = 15, what = "a condition") {
    const end = Date.now() + secs * 1000;
    for (;;) {
        try {
            if (await cond())
                return;
        } catch { /* not yet */ }
        if (Date.now() > end)
            throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 50));
    }
}

function launch(cmd, args, log) {
    const fd = openSync(log, "a");
    const p = spawn(cmd, args, { stdio: ["ignore", fd, fd] });
    procs.add(p);
    p.exited = new Promise((r) => p.on("exit", () => { procs.delete(p); r(); }));
    return p;
}

export async function startRedis() {
    for (let t = 0; t < 8; t++) {
        const port = pickPort();
        const p = launch("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "",
                                          "--appendonly", "no"], join(TMP, `redis-${port}.log`));
        try {
            await waitFor(async () => {
                if (p.exitCode !== null)
                    throw new Error("exited");
                const r = spawn("redis-cli", ["-p", String(port), "ping"]);
                let out = "";
                r.stdout.on("data", (d) => (out += d));
                await new Promise((res) => r.on("exit", res));
                return out.includes("PONG");
            }, 10, "redis");
            return { port, url: `redis://127.0.0.1:${port}`, proc: p };
        } catch {
            p.kill("SIGKILL");
            await p.exited;
        }
    }
    throw new Error("could not start redis-server");
}

/** A broker with --http and --admin; args are more options. */
export class Broker {
    constructor(name, args) {
        this.name = name;
        this.args = args;
        this.proc = null;
    }

    get http() { return `http://127.0.0.1:${this.port + 2}`; }
    get ws() { return `ws://127.0.0.1:${this.port + 2}/rpc`; }
    get workers() { return `tcp://127.0.0.1:${this.port + 1}`; }
    get admin() { return `http://127.0.0.1:${this.port + 3}`; }
    get log() { return join(TMP, `${this.name}.log`); }

    #launch() {
        this.proc = launch(join(BIN, "jrpc-broker"), [
            "--zmq", `tcp://127.0.0.1:${this.port}`, "--workers", this.workers,
            "--http", `127.0.0.1:${this.port + 2}`, "--admin", `127.0.0.1:${this.port + 3}`,
            ...this.args], this.log);
    }

    async #up() {
        const p = this.proc;
        await waitFor(async () => {
            if (p.exitCode !== null)
                throw new Error("exited");
            const n = (readFileSync(this.log, "utf8").match(/event=listening/g) ?? []).length;
            return n >= 4;   // zmq, workers, http, admin
        }, 10, `${this.name} to listen`);
    }

    /** Launches until it listens: on new ports each try (start), or the same ones (restart). */
    async #tries(n, newPorts, pauseMs) {
        for (let t = 0; t < n; t++) {
            if (newPorts)
                this.port = pickPort();
            writeFileSync(this.log, "");
            this.#launch();
            try {
                await this.#up();
                return this;
            } catch {
                this.proc.kill("SIGKILL");
                await this.proc.exited;
                await new Promise((r) => setTimeout(r, pauseMs));
            }
        }
        throw new Error(`could not start ${this.name}: ${readFileSync(this.log, "utf8").slice(-2000)}`);
    }

    start() {
        return this.#tries(8, true, 0);
    }

    /** The same ports again, a new process. */
    restart() {
        return this.#tries(20, false, 200);
    }

    async kill9() {
        this.proc.kill("SIGKILL");
        await this.proc.exited;
    }

    /** Until /readyz says a worker is there. */
    async ready() {
        await waitFor(async () => (await fetch(`${this.admin}/readyz`)).status === 200, 20, `${this.name} ready`);
    }

    async metric(name) {
        const text = await (await fetch(`${this.admin}/metrics`)).text();
        const m = text.match(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m"));
        return m ? Number(m[1]) : NaN;
    }
}

export function startWorker(brokers, args = []) {
    const conn = brokers.flatMap((b) => ["--connect", b.workers]);
    return launch(join(BIN, "jrpc-worker"), [...conn, "--heartbeat-ms", "200", ...args],
                  join(TMP, `worker-${procs.size}.log`));
}

/** A keys file with a signing key and a bearer key; returns the secrets. */
export function writeKeys() {
    const secret = "s3cr3t-" + randomBytes(12).toString("hex");
    const token = randomBytes(32).toString("base64url");
    const hash = createHash("sha256").update(token).digest("hex");
    const file = join(TMP, "keys");
    writeFileSync(file, `demo ${secret}\nagent bearer-sha256:${hash}\nlimited ${secret}x add\n`, { mode: 0o600 });
    return { file, key: { id: "demo", secret }, token, limited: { id: "limited", secret: secret + "x" } };
}

export async function stopAll() {
    for (const p of [...procs]) {
        p.kill("SIGKILL");
        await p.exited;
    }
    if (!process.env.E2E_KEEP)
        rmSync(TMP, { recursive: true, force: true });
}

export async function load() {
    return import(join(DIST, "index.js"));
}
