/** WebSocket (docs/WEBSOCKET.md): one connection in stream mode
 *  (subprotocol jrpc.stream), so each answer is a message of its own, as
 *  soon as it is in; calls, batches and streams all share it, their answers
 *  matched by id. */
import { MaybeRanError, ProtocolError, UnreachableError } from "./errors.js";
import { Signer } from "./sign.js";
import type { Answer, CallOptions, Id, WebSocketFactory, WebSocketLike } from "./types.js";
import { type Body, toAnswer, wholeError } from "./wire.js";

export interface WsConfig {
    urls: string[];
    signer: Signer | null;
    bearer: string | null;
    timeoutMs: number | undefined;
    graceMs: number;
    factory: WebSocketFactory | null;
}

/** A body in flight: its calls not answered yet. */
interface Pending {
    ids: Set<Id>;
    answered: number;
    onAnswer: (a: Answer) => void;
    onDone: (err?: unknown) => void;     /* every call answered (no error), or failed */
}

const OPEN = 1;

/** Node's global WebSocket (undici) takes { protocols, headers }; browsers cannot send headers. */
function defaultFactory(url: string, protocols: string[], headers: Record<string, string>): WebSocketLike {
    const WS = (globalThis as { WebSocket?: any }).WebSocket;
    if (typeof WS !== "function")
        throw new Error("no WebSocket here: Node 20 needs --experimental-websocket (Node 22 has it), or give the webSocket option");
    if (typeof window !== "undefined") {
        /* A browser sends no headers with an upgrade: the deadline stays the client's own
         * timer (the broker applies its --timeout-ms); a key cannot be presented at all. */
        const { "X-JRPC-Timeout-Ms": _deadline, ...rest } = headers;
        if (Object.keys(rest).length > 0)
            throw new Error("a browser cannot send headers with a WebSocket upgrade: use HTTP with a key or bearer token, or a broker without --keys for the page");
        return new WS(url, protocols);
    }
    if (Object.keys(headers).length === 0)
        return new WS(url, protocols);
    return new WS(url, { protocols, headers });
}

export class WsTransport {
    #c: WsConfig;
    #ws: WebSocketLike | null = null;
    #opening: Promise<WebSocketLike> | null = null;
    #pending: Pending[] = [];            /* in the order sent */
    #byId = new Map<Id, Pending>();
    #cur = 0;

    constructor(c: WsConfig) {
        this.#c = c;
    }

    async #headers(): Promise<Record<string, string>> {
        const h: Record<string, string> = {};
        if (this.#c.timeoutMs !== undefined)
            h["X-JRPC-Timeout-Ms"] = String(this.#c.timeoutMs);
        if (this.#c.bearer !== null)
            h["Authorization"] = `Bearer ${this.#c.bearer}`;
        if (this.#c.signer !== null)   /* the upgrade is signed over the empty body */
            Object.assign(h, await this.#c.signer.headers(new Uint8Array(0)));
        return h;
    }

    #open(): Promise<WebSocketLike> {
        if (this.#ws !== null && this.#ws.readyState === OPEN)
            return Promise.resolve(this.#ws);
        if (this.#opening !== null)
            return this.#opening;
        this.#opening = (async () => {
            let last: unknown = null;
            for (let n = 0; n < this.#c.urls.length; n++) {
                const i = (this.#cur + n) % this.#c.urls.length;
                const url = this.#c.urls[i];
                try {
                    const ws = await this.#connect(url);
                    this.#cur = i;
                    this.#ws = ws;
                    return ws;
                } catch (err) {
                    last = err;
                }
            }
            throw new UnreachableError(`no WebSocket could be opened (${this.#c.urls.join(", ")}): refused, unreachable, not signed right, or an Origin the broker does not list (${(last as Error)?.message ?? last})`,
                                       { cause: last });
        })().finally(() => (this.#opening = null));
        return this.#opening;
    }

    async #connect(url: string): Promise<WebSocketLike> {
        const headers = await this.#headers();
        const ws = (this.#c.factory ?? defaultFactory)(url, ["jrpc.stream"], headers);
        await new Promise<void>((resolve, reject) => {
            ws.onopen = () => resolve();
            ws.onerror = (ev) => reject(new Error(`WebSocket ${url}: ${(ev as { message?: string })?.message ?? "failed"}`));
            ws.onclose = (ev) => reject(new Error(`WebSocket ${url} closed before it opened (${ev.code})`));
        });
        if (ws.protocol !== "jrpc.stream") {
            ws.close(1000);
            throw new ProtocolError(`${url} did not take the jrpc.stream subprotocol`);
        }
        ws.onmessage = (ev) => this.#message(ev.data);
        ws.onerror = () => {};
        ws.onclose = (ev) => this.#lost(ws, `the WebSocket closed (${ev.code}${ev.reason ? " " + ev.reason : ""})`);
        return ws;
    }

    #lost(ws: WebSocketLike, why: string): void {
        if (this.#ws === ws)
            this.#ws = null;
        const all = this.#pending;
        this.#pending = [];
        this.#byId.clear();
        for (const p of all)
            p.onDone(new MaybeRanError(`${why} before every answer came: the calls not answered may or may not have run`, { sent: true }));
    }

    #message(data: unknown): void {
        let o: unknown;
        try {
            o = JSON.parse(String(data));
        } catch {
            return;
        }
        for (const x of Array.isArray(o) ? o : [o]) {
            let a: Answer | null;
            try {
                a = toAnswer(x, 0);
            } catch {
                continue;
            }
            if (a === null) {
                /* a body refused whole (id null): the oldest body with no answer yet */
                const p = this.#pending.find((q) => q.answered === 0);
                if (p !== undefined) {
                    this.#forget(p);
                    p.onDone(wholeError(x, 0));
                }
                continue;
            }
            const p = this.#byId.get(a.id);
            if (p === undefined)
                continue;                  /* late (its caller gave up) or unknown */
            this.#byId.delete(a.id);
            p.ids.delete(a.id);
            p.answered++;
            p.onAnswer(a);
            if (p.ids.size === 0) {
                this.#forget(p);
                p.onDone();
            }
        }
    }

    #forget(p: Pending): void {
        const i = this.#pending.indexOf(p);
        if (i >= 0)
            this.#pending.splice(i, 1);
        for (const id of p.ids)
            this.#byId.delete(id);
    }

    /** Sends the body; onAnswer for each answer as it comes; resolves when all are in. */
    async send(body: Body, opts: CallOptions, onAnswer: (a: Answer) => void): Promise<void> {
        if (opts.signal?.aborted)
            throw opts.signal.reason;
        const ws = await this.#open();
        const ids = new Set<Id>(body.ids.filter((x): x is Id => x !== null));
        ws.send(new TextDecoder().decode(body.bytes));
        if (ids.size === 0)
            return;                        /* notifications: nothing comes back */
        const timeoutMs = opts.timeoutMs ?? this.#c.timeoutMs;
        await new Promise<void>((resolve, reject) => {
            let timer: ReturnType<typeof setTimeout> | null = null;
            const p: Pending = {
                ids,
                answered: 0,
                onAnswer,
                onDone: (err) => {
                    if (timer !== null)
                        clearTimeout(timer);
                    opts.signal?.removeEventListener("abort", onAbort);
                    if (err === undefined)
                        resolve();
                    else
                        reject(err);
                },
            };
            const onAbort = () => {
                this.#forget(p);
                p.onDone(opts.signal?.reason);
            };
            opts.signal?.addEventListener("abort", onAbort, { once: true });
            if (timeoutMs !== undefined) {
                timer = setTimeout(() => {
                    this.#forget(p);
                    p.onDone(new MaybeRanError(`no answer within the deadline (${timeoutMs} ms): the calls not answered may or may not have run`, { sent: true }));
                }, timeoutMs + this.#c.graceMs);
            }
            this.#pending.push(p);
            for (const id of ids)
                this.#byId.set(id, p);
        });
    }

    close(): void {
        const ws = this.#ws;
        this.#ws = null;
        if (ws !== null) {
            this.#lost(ws, "the client closed");
            ws.close(1000);
        }
    }
}
