import { ProtocolError } from "./errors.js";
import { HttpTransport } from "./http.js";
import { Signer } from "./sign.js";
import type { Answer, BatchItem, CallOptions, ClientOptions, Params, StreamAnswer, StreamEnd, StreamOptions } from "./types.js";
import { asTheyCome, countEnd, makeBody, type Body } from "./wire.js";
import { WsTransport } from "./ws.js";

/** Refuses a URL of a ZeroMQ broker (dns+tcp://, tcp://, ipc://, as workers and
 *  the C and Python clients take them): this client has no ZeroMQ. */
function notZmq(url: string): void {
    const scheme = url.slice(0, url.indexOf("://") + 3).toLowerCase();
    if (scheme !== "dns+tcp://" && scheme !== "tcp://" && scheme !== "ipc://")
        return;
    const what = scheme === "dns+tcp://" ? "dns+tcp://NAME:PORT names ZeroMQ brokers (one per address of NAME)" : `${scheme} is a ZeroMQ broker's address`;
    throw new TypeError(`${url}: ${what}; this client speaks HTTP(S) and WebSocket only: give the brokers' http(s):// or ws(s):// URLs (their --http port)`);
}

function noKeyOverWs(opts: CallOptions): void {
    if (opts.idempotencyKey !== undefined)
        throw new TypeError("an Idempotency-Key is an HTTP header: a WebSocket message cannot carry one");
}

/** A stream of answers in order of arrival; `end` is set once it is read to its end. */
export interface AnswerStream extends AsyncIterable<StreamAnswer> {
    readonly end: StreamEnd | null;
}

/** A JSON-RPC client of one or more jrpc brokers, all http(s):// or all ws(s)://. */
export class Client {
    readonly urls: readonly string[];
    #http: HttpTransport | null = null;
    #ws: WsTransport | null = null;
    #id = 0;

    constructor(urlOrUrls: string | string[], opts: ClientOptions = {}) {
        const urls = typeof urlOrUrls === "string" ? [urlOrUrls] : [...urlOrUrls];
        if (urls.length === 0)
            throw new TypeError("give at least one broker URL");
        urls.forEach(notZmq);
        const schemes = new Set(urls.map((u) => new URL(u).protocol));
        const http = [...schemes].every((s) => s === "http:" || s === "https:");
        const ws = [...schemes].every((s) => s === "ws:" || s === "wss:");
        if (!http && !ws)
            throw new TypeError("broker URLs are all http(s):// or all ws(s)://");
        if (ws && opts.retry === "safe")
            throw new TypeError('retry: "safe" needs http(s):// brokers: a WebSocket message carries no Idempotency-Key');
        if (opts.key !== undefined && opts.bearer !== undefined)
            throw new TypeError("a key signs or a bearer token stands for it: give one of key and bearer");
        if (opts.timeoutMs !== undefined && !(Number.isInteger(opts.timeoutMs) && opts.timeoutMs > 0))
            throw new RangeError("timeoutMs is a positive integer");
        this.urls = urls;
        const signer = opts.key !== undefined ? new Signer(opts.key) : null;
        const bearer = opts.bearer ?? null;
        const graceMs = opts.graceMs ?? 2000;
        if (http) {
            const f = opts.fetch ?? globalThis.fetch;
            if (typeof f !== "function")
                throw new Error("no fetch here: give the fetch option");
            this.#http = new HttpTransport({
                urls, signer, bearer, graceMs,
                retrySafe: opts.retry === "safe",
                timeoutMs: opts.timeoutMs,
                headers: opts.headers ?? {},
                fetch: f.bind(globalThis),
            });
        } else {
            this.#ws = new WsTransport({ urls, signer, bearer, graceMs, timeoutMs: opts.timeoutMs, factory: opts.webSocket ?? null });
        }
    }

    #body(items: BatchItem[], batch: boolean): Body {
        return makeBody(items, batch, () => ++this.#id);
    }

    /** Answers by id for a body, over either transport. */
    async #answers(body: Body, opts: CallOptions): Promise<Map<unknown, Answer> | null> {
        if (this.#http !== null)
            return this.#http.send(body, opts);
        noKeyOverWs(opts);
        const out = new Map<unknown, Answer>();
        await this.#ws!.send(body, opts, (a) => out.set(a.id, a));
        return out;
    }

    /** Calls method; resolves to its result, rejects with JsonRpcError (an error answer),
     *  MaybeRanError (no answer: it may or may not have run) or UnreachableError. */
    async call(method: string, params?: Params, opts: CallOptions = {}): Promise<unknown> {
        const body = this.#body([{ method, params }], false);
        const m = await this.#answers(body, opts);
        const a = m?.get(body.ids[0]);
        if (a === undefined)
            throw new ProtocolError("the answer does not carry the call's id");
        if (!a.ok)
            throw a.error;
        return a.result;
    }

    /** Sends a notification: no answer, no id. Over HTTP it resolves once the broker took it (204). */
    async notify(method: string, params?: Params, opts: CallOptions = {}): Promise<void> {
        await this.#answers(this.#body([{ method, params, notify: true }], false), opts);
    }

    /** Sends items as one batch (one body, signed once). Resolves to an array in the order of
     *  items: each call's Answer (matched by id, whatever order they came in), undefined for
     *  a notification. A body refused whole rejects with its JsonRpcError. */
    async batch(items: BatchItem[], opts: CallOptions = {}): Promise<(Answer | undefined)[]> {
        const body = this.#body(items, true);
        const m = await this.#answers(body, opts);
        return body.ids.map((id) => {
            if (id === null)
                return undefined;
            const a = m?.get(id);
            if (a === undefined)
                throw new ProtocolError(`the answer has nothing for the call with id ${id}`);
            return a;
        });
    }

    /** Sends items (one call: give one item) and yields each answer as it arrives
     *  (HTTP: SSE or NDJSON; WebSocket: stream mode). Not retried. */
    stream(items: BatchItem[] | BatchItem, opts: StreamOptions = {}): AnswerStream {
        const body = this.#body(Array.isArray(items) ? items : [items], Array.isArray(items));
        const state: { end: StreamEnd | null } = { end: null };
        const http = this.#http;
        const ws = this.#ws;
        async function* run(): AsyncGenerator<StreamAnswer> {
            if (http !== null) {
                yield* http.stream(body, opts, state);
                return;
            }
            noKeyOverWs(opts);
            const seen: Answer[] = [];
            yield* asTheyCome(body, seen, (on) => ws!.send(body, opts, on));
            state.end = countEnd(seen);
        }
        return {
            [Symbol.asyncIterator]: () => run(),
            get end() {
                return state.end;
            },
        };
    }

    /** Closes the WebSocket, if any (calls in flight reject with MaybeRanError). */
    close(): void {
        this.#ws?.close();
    }
}


