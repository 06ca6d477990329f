/** HTTP(S): POST a body to one of the brokers, with the retry rule of the
 *  README ("Retries"): a body goes to the next broker only when nothing was
 *  sent (the connection was refused), or when it carries an Idempotency-Key
 *  or was marked retryable. */
import { JsonRpcError, MaybeRanError, ProtocolError, UnreachableError } from "./errors.js";
import { Signer, randomToken } from "./sign.js";
import type { Answer, CallOptions, StreamAnswer, StreamEnd } from "./types.js";
import { type Body, asTheyCome, countEnd, indexOf, toAnswer, wholeError } from "./wire.js";

export interface HttpConfig {
    urls: string[];
    signer: Signer | null;
    bearer: string | null;
    retrySafe: boolean;
    timeoutMs: number | undefined;
    graceMs: number;
    headers: Record<string, string>;
    fetch: typeof fetch;
}

/** Node's fetch says why a connection failed in err.cause.code; browsers say nothing (then: may have been sent). */
function notSent(err: unknown): boolean {
    const c = (err as { cause?: { code?: unknown } })?.cause?.code;
    return c === "ECONNREFUSED" || c === "ENOTFOUND" || c === "EAI_AGAIN";
}

function describe(err: unknown): string {
    const e = err as { message?: string; cause?: { code?: string; message?: string } };
    const why = e?.cause?.code ?? e?.cause?.message;
    return why ? `${e?.message ?? String(err)} (${why})` : (e?.message ?? String(err));
}

interface Exchange {
    res: Response;
    text: string | null;           /* the whole answer, when not streamed */
    done: () => void;              /* clears the deadline timer */
    abort: () => void;             /* stops reading (a stream left early) */
}

export class HttpTransport {
    #c: HttpConfig;
    #cur = 0;                      /* the broker that answered last */

    constructor(c: HttpConfig) {
        this.#c = c;
    }

    /** Sends the body; reads the whole answer unless stream. */
    async #exchange(body: Body, opts: CallOptions, accept: string, stream: boolean): Promise<Exchange> {
        const c = this.#c;
        const timeoutMs = opts.timeoutMs ?? c.timeoutMs ?? (c.retrySafe ? 30000 : undefined);
        const start = Date.now();
        const idemKey = opts.idempotencyKey ?? (c.retrySafe && !stream ? randomToken(18) : undefined);
        const mayRetry = idemKey !== undefined || opts.retryable === true;
        let sent = false;
        let attempts = 0;
        let lastErr: unknown = null;
        for (let n = 0; n < c.urls.length; n++) {
            const i = (this.#cur + n) % c.urls.length;
            const url = c.urls[i];
            let remaining: number | undefined;
            if (timeoutMs !== undefined) {
                remaining = timeoutMs - (Date.now() - start);
                if (remaining < 1)
                    break;
            }
            const h: Record<string, string> = {
                ...c.headers,
                "Content-Type": "application/json",
                Accept: accept,
                ...(opts.headers ?? {}),
            };
            if (remaining !== undefined)
                h["X-JRPC-Timeout-Ms"] = String(Math.ceil(remaining));
            if (idemKey !== undefined)
                h["Idempotency-Key"] = `"${idemKey}"`;
            if (opts.traceparent)
                h["traceparent"] = opts.traceparent;
            if (c.bearer !== null)
                h["Authorization"] = `Bearer ${c.bearer}`;
            if (c.signer !== null)   /* a new nonce and timestamp for every copy sent */
                Object.assign(h, await c.signer.headers(body.bytes));

            const ac = new AbortController();
            let timedOut = false;
            const onAbort = () => ac.abort(opts.signal?.reason);
            opts.signal?.addEventListener("abort", onAbort, { once: true });
            if (opts.signal?.aborted)
                ac.abort(opts.signal.reason);
            const timer = remaining === undefined ? null : setTimeout(() => {
                timedOut = true;
                ac.abort(new Error("deadline"));
            }, remaining + c.graceMs);
            const done = () => {
                if (timer !== null)
                    clearTimeout(timer);
                opts.signal?.removeEventListener("abort", onAbort);
            };
            attempts++;
            try {
                const res = await c.fetch(url, { method: "POST", body: body.bytes as Uint8Array<ArrayBuffer>, headers: h, signal: ac.signal });
                sent = true;
                const text = stream ? null : await res.text();
                if (!stream)
                    done();
                /* A retry that finds the first copy's key still held (its broker died with it):
                 * what that copy did is not known. */
                if (attempts > 1 && res.status === 409 && text !== null && /"code":\s*-32008/.test(text)) {
                    throw new MaybeRanError(`the call may or may not have run: a copy sent before holds its idempotency key (${url} answered 409, -32008)`,
                                            { cause: JsonRpcError.from(JSON.parse(text).error, 409), attempts });
                }
                this.#cur = i;
                return { res, text, done, abort: () => ac.abort() };
            } catch (err) {
                done();
                if (err instanceof MaybeRanError)
                    throw err;
                if (opts.signal?.aborted)
                    throw opts.signal.reason;
                if (timedOut)
                    throw new MaybeRanError(`no answer within the deadline (${timeoutMs} ms) from ${url}: the call may or may not have run`,
                                            { cause: err, sent: true, attempts });
                lastErr = err;
                if (notSent(err))
                    continue;        /* nothing left the client: any broker may take it */
                sent = true;
                if (!mayRetry) {
                    const known = (err as { cause?: unknown })?.cause !== undefined;
                    const what = known ? `the connection to ${url} failed after the body was sent`
                                       : `the request to ${url} failed and this platform does not say whether the body left (a browser: refused, CORS, or the connection lost)`;
                    throw new MaybeRanError(`${what}: the call may or may not have run (${describe(err)}); retry: "safe" would have sent it again under an Idempotency-Key`,
                                            { cause: err, sent: true, attempts });
                }
            }
        }
        if (!sent)
            throw new UnreachableError(`no broker could be reached (${c.urls.join(", ")}): ${describe(lastErr)}`, { cause: lastErr });
        throw new MaybeRanError(`no broker answered (${attempts} attempts, the deadline or the list of brokers ran out): the call may or may not have run`,
                                { cause: lastErr, sent: true, attempts });
    }

    /** The whole answer: null for a body of notifications, else the answers by id. */
    async send(body: Body, opts: CallOptions): Promise<Map<unknown, Answer> | null> {
        const { res, text } = await this.#exchange(body, opts, "application/json", false);
        if (res.status === 204 || text === "")
            return null;
        const parsed = parseJson(text ?? "", res.status);
        const list = Array.isArray(parsed) ? parsed : [parsed];
        const out = new Map<unknown, Answer>();
        for (const o of list) {
            const a = toAnswer(o, res.status);
            if (a === null)
                throw wholeError(o, res.status);
            out.set(a.id, a);
        }
        return out;
    }

    /** Streamed answers in order of arrival (SSE or NDJSON). */
    async *stream(body: Body, opts: CallOptions & { format?: "sse" | "ndjson" }, endOut: { end: StreamEnd | null }): AsyncGenerator<StreamAnswer> {
        const accept = opts.format === "ndjson" ? "application/x-ndjson" : "text/event-stream";
        const { res, done, abort } = await this.#exchange(body, opts, accept, true);
        const index = indexOf(body);
        const seen: Answer[] = [];
        let finished = false;
        try {
            const type = res.headers.get("content-type") ?? "";
            if (!type.startsWith("text/event-stream") && !type.startsWith("application/x-ndjson") &&
                !type.startsWith("application/jsonl")) {
                /* answered whole: a body refused whole, or a broker that does not stream */
                const text = await res.text();
                if (res.status === 204 || text === "") {
                    endOut.end = { answered: 0, timed_out: 0 };
                    return;
                }
                const parsed = parseJson(text, res.status);
                for (const o of Array.isArray(parsed) ? parsed : [parsed]) {
                    const a = toAnswer(o, res.status);
                    if (a === null)
                        throw wholeError(o, res.status);
                    seen.push(a);
                    yield { ...a, index: index.get(a.id) ?? -1 };
                }
                endOut.end = countEnd(seen);
                finished = true;
                return;
            }
            const sse = type.startsWith("text/event-stream");
            yield* asTheyCome(body, seen, (on) => readLines(res, sse, on, (end) => (endOut.end = end)));
            if (endOut.end === null) {
                if (sse)
                    throw new MaybeRanError("the stream ended without its end event: the calls not answered may or may not have run", { sent: true });
                endOut.end = countEnd(seen);
            }
            finished = true;
        } catch (err) {
            if (opts.signal?.aborted)
                throw opts.signal.reason;
            if (err instanceof JsonRpcError || err instanceof MaybeRanError || err instanceof ProtocolError)
                throw err;
            throw new MaybeRanError(`the stream broke after ${seen.length} answers: the calls not answered may or may not have run (${describe(err)})`,
                                    { cause: err, sent: true });
        } finally {
            done();
            if (!finished)
                abort();    /* left early or failed: the broker sees the client leave and cancels */
        }
    }
}

function parseJson(text: string, status: number): unknown {
    try {
        return JSON.parse(text);
    } catch {
        throw new ProtocolError(`HTTP ${status} with an answer that is not JSON: ${text.slice(0, 200)}`, status);
    }
}

/** Reads SSE events or NDJSON lines from the response body as they come. */
async function readLines(res: Response, sse: boolean, onAnswer: (a: Answer) => void, onEnd: (e: StreamEnd) => void): Promise<void> {
    if (res.body === null)
        throw new ProtocolError("a streamed answer without a body", res.status);
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    let event = "";
    let data: string[] = [];
    const line = (l: string) => {
        if (!sse) {
            if (l.trim() === "")
                return;
            const a = toAnswer(parseJson(l, res.status), res.status);
            if (a === null)
                throw wholeError(JSON.parse(l), res.status);
            onAnswer(a);
            return;
        }
        if (l === "") {                           /* dispatch the event */
            if (data.length > 0) {
                const d = data.join("\n");
                if (event === "end") {
                    onEnd(parseJson(d, res.status) as StreamEnd);
                } else {
                    const o = parseJson(d, res.status);
                    const a = toAnswer(o, res.status);
                    if (a === null)
                        throw wholeError(o, res.status);
                    onAnswer(a);
                }
            }
            event = "";
            data = [];
            return;
        }
        if (l.startsWith(":"))
            return;                               /* a comment: ": ping" */
        const k = l.indexOf(":");
        const field = k < 0 ? l : l.slice(0, k);
        let value = k < 0 ? "" : l.slice(k + 1);
        if (value.startsWith(" "))
            value = value.slice(1);
        if (field === "data")
            data.push(value);
        else if (field === "event")
            event = value;
    };
    for (;;) {
        const { value, done } = await reader.read();
        buf += done ? dec.decode() : dec.decode(value, { stream: true });
        let nl: number;
        while ((nl = buf.indexOf("\n")) >= 0) {
            let l = buf.slice(0, nl);
            buf = buf.slice(nl + 1);
            if (l.endsWith("\r"))
                l = l.slice(0, -1);
            line(l);
        }
        if (done)
            break;
    }
    if (buf !== "")
        line(buf);
    if (sse)
        line("");
}
