/** Bodies out, answers in: what HTTP and WebSocket share. */
import { JsonRpcError, ProtocolError } from "./errors.js";
import type { Answer, BatchItem, Id, StreamAnswer, StreamEnd } from "./types.js";

export const enc = new TextEncoder();

/** A body as sent: its bytes, the ids of its calls in order (null for a notification). */
export interface Body {
    bytes: Uint8Array;
    ids: (Id | null)[];
    batch: boolean;
}

export function makeBody(items: BatchItem[], batch: boolean, nextId: () => number): Body {
    const ids: (Id | null)[] = [];
    const objs = items.map((it) => {
        if (typeof it.method !== "string" || it.method === "")
            throw new TypeError("a call needs a method name");
        const o: Record<string, unknown> = { jsonrpc: "2.0", method: it.method };
        if (it.params !== undefined) {
            if (it.params === null || typeof it.params !== "object")
                throw new TypeError("params must be an array or an object");
            o.params = it.params;
        }
        if (it.notify) {
            ids.push(null);
        } else {
            const id = nextId();
            o.id = id;
            ids.push(id);
        }
        return o;
    });
    if (batch && objs.length === 0)
        throw new TypeError("a batch needs at least one call");
    return { bytes: enc.encode(JSON.stringify(batch ? objs : objs[0])), ids, batch };
}

/** A response object as an Answer, or null when it is not one (id null: a body refused whole). */
export function toAnswer(o: unknown, status = 200): Answer | null {
    if (o === null || typeof o !== "object" || Array.isArray(o))
        throw new ProtocolError("an answer that is not a JSON-RPC response object", status);
    const r = o as { id?: unknown; result?: unknown; error?: unknown };
    if (r.id === null || r.id === undefined)
        return null;
    const id = r.id as Id;
    if ("error" in r && r.error !== undefined)
        return { ok: false, id, error: JsonRpcError.from(r.error, status) };
    return { ok: true, id, result: r.result };
}

/** The error of a response object that answers no call (id null). */
export function wholeError(o: unknown, status: number): JsonRpcError {
    const r = (o ?? {}) as { error?: unknown };
    return JsonRpcError.from(r.error, status);
}

/** Counts the ends of a stream that carries no summary (NDJSON read without trailers, WebSocket). */
export function countEnd(answers: Answer[]): StreamEnd {
    return {
        answered: answers.length,
        timed_out: answers.filter((a) => !a.ok && a.error.code === -32003).length,
    };
}

/** A queue read with for await: pushed answers, then an end or an error. */
export class AsyncQueue<T> implements AsyncIterator<T> {
    #items: T[] = [];
    #done = false;
    #error: unknown = null;
    #wake: (() => void) | null = null;

    push(x: T): void {
        this.#items.push(x);
        this.#poke();
    }

    end(err?: unknown): void {
        if (this.#done)
            return;
        this.#done = true;
        this.#error = err ?? null;
        this.#poke();
    }

    get ended(): boolean {
        return this.#done;
    }

    #poke(): void {
        const w = this.#wake;
        this.#wake = null;
        w?.();
    }

    async next(): Promise<IteratorResult<T>> {
        for (;;) {
            if (this.#items.length > 0)
                return { value: this.#items.shift() as T, done: false };
            if (this.#done) {
                if (this.#error !== null) {
                    const e = this.#error;
                    this.#error = null;
                    throw e;
                }
                return { value: undefined, done: true };
            }
            await new Promise<void>((r) => (this.#wake = r));
        }
    }
}

/** The position of each call in its body, by id. */
export function indexOf(body: Body): Map<unknown, number> {
    const m = new Map<unknown, number>();
    body.ids.forEach((id, i) => {
        if (id !== null)
            m.set(id, i);
    });
    return m;
}

/** Runs produce, which calls its argument for each answer as it comes, and yields the
 *  answers with their position as they come, until produce ends (or throws: then that). */
export async function* asTheyCome(body: Body, seen: Answer[],
                                  produce: (onAnswer: (a: Answer) => void) => Promise<void>): AsyncGenerator<StreamAnswer> {
    const index = indexOf(body);
    const q = new AsyncQueue<StreamAnswer>();
    const done = produce((a) => {
        seen.push(a);
        q.push({ ...a, index: index.get(a.id) ?? -1 });
    }).then(() => q.end(), (e) => q.end(e));
    for (;;) {
        const r = await q.next();
        if (r.done)
            break;
        yield r.value;
    }
    await done;
}
