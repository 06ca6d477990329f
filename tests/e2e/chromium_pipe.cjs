// chromium_pipe.cjs — headless chromium (Debian's) driven over the DevTools
// protocol on a pipe (--remote-debugging-pipe: fd 3 to it, fd 4 from it,
// NUL-separated JSON), node built-ins only. Shared by the browser tests:
// client/ts/test/browser.test.js (the TypeScript client in a page) and
// tests/e2e/status_page.cjs (the broker's status page).
"use strict";
const { spawn } = require("node:child_process");

class ChromiumPipe {
    /** opts: { binary ("chromium"), userDataDir (required), windowSize ("1000,700") } */
    constructor(opts) {
        this.proc = spawn(opts.binary ?? "chromium", [
            "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
            "--disable-dev-shm-usage", "--remote-debugging-pipe", `--user-data-dir=${opts.userDataDir}`,
            `--window-size=${opts.windowSize ?? "1000,700"}`, "about:blank"],
            { stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"] });
        this.exited = new Promise((r) => this.proc.on("exit", r));
        this.stderr = "";
        this.proc.stderr.on("data", (d) => (this.stderr = (this.stderr + d).slice(-4000)));
        this.next = 1;
        this.waiting = new Map();
        let buf = Buffer.alloc(0);
        this.proc.stdio[4].on("data", (d) => {
            buf = Buffer.concat([buf, d]);
            let z;
            while ((z = buf.indexOf(0)) >= 0) {
                const msg = JSON.parse(buf.subarray(0, z).toString());
                buf = buf.subarray(z + 1);
                const w = this.waiting.get(msg.id);
                if (w) {
                    this.waiting.delete(msg.id);
                    msg.error ? w.reject(new Error(JSON.stringify(msg.error))) : w.resolve(msg.result);
                }
            }
        });
    }

    /** One DevTools command (to a page's session when sessionId is given); 30 s at most. */
    send(method, params = {}, sessionId) {
        const id = this.next++;
        this.proc.stdio[3].write(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }) + "\0");
        return new Promise((resolve, reject) => {
            this.waiting.set(id, { resolve, reject });
            setTimeout(() => reject(new Error(`DevTools ${method}: no answer (${this.stderr.slice(-500)})`)), 30000).unref();
        });
    }

    /** The value of a JavaScript expression in the page (returned by value). */
    async eval(sessionId, expression) {
        const r = await this.send("Runtime.evaluate", { expression, returnByValue: true }, sessionId);
        if (r.exceptionDetails)
            throw new Error(JSON.stringify(r.exceptionDetails));
        return r.result.value;
    }

    async close() {
        this.proc.kill("SIGKILL");
        await this.exited;
    }
}

module.exports = { ChromiumPipe };
