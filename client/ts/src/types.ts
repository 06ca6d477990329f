import type { JsonRpcError } from "./errors.js";
import type { SigningKey } from "./sign.js";

/** by-position or by-name parameters; undefined: none sent */
export type Params = unknown[] | Record<string, unknown> | undefined;
export type Id = number | string;

/** One member of a batch. `notify: true` makes it a notification (no id, no answer). */
export interface BatchItem {
    method: string;
    params?: Params;
    notify?: boolean;
}

/** The answer to one call: its result, or its error object. */
export type Answer =
    | { ok: true; id: Id; result: unknown }
    | { ok: false; id: Id; error: JsonRpcError };

/** A streamed answer: `index` is the position of its call in the items given. */
export type StreamAnswer = Answer & { index: number };

/** The end of a stream: how many answers came, how many were the deadline's -32003. */
export interface StreamEnd {
    answered: number;
    timed_out: number;
}

export interface CallOptions {
    /** the deadline in ms, sent as X-JRPC-Timeout-Ms (the broker answers -32003 at it) */
    timeoutMs?: number;
    /** cancels the wait (the broker may still run what it received) */
    signal?: AbortSignal;
    /** Idempotency-Key for this body (docs/SIGNING.md); the client makes one itself with retry: "safe" */
    idempotencyKey?: string;
    /** running this body twice is harmless: it may be sent again to another broker without a key */
    retryable?: boolean;
    /** W3C trace context passed through */
    traceparent?: string;
    /** more HTTP headers for this body */
    headers?: Record<string, string>;
}

export interface StreamOptions extends CallOptions {
    /** HTTP: Server-Sent Events (default) or NDJSON */
    format?: "sse" | "ndjson";
}

/** What a WebSocket constructor must provide (the browser's, Node's global one, or `ws`). */
export interface WebSocketLike {
    readonly readyState: number;
    readonly protocol: string;
    send(data: string): void;
    close(code?: number, reason?: string): void;
    onopen: ((ev: any) => void) | null;
    onmessage: ((ev: { data: any }) => void) | null;
    onerror: ((ev: any) => void) | null;
    onclose: ((ev: { code: number; reason: string }) => void) | null;
}

/** Opens a WebSocket. `headers` is empty unless the upgrade must be signed or carry a bearer key. */
export type WebSocketFactory = (url: string, protocols: string[], headers: Record<string, string>) => WebSocketLike;

export interface ClientOptions {
    /** HMAC signing key (docs/SIGNING.md): every HTTP body is signed, and a WebSocket's upgrade */
    key?: SigningKey;
    /** a bearer token: Authorization: Bearer TOKEN */
    bearer?: string;
    /** "safe": add an Idempotency-Key to every HTTP body and send it again to the next
     *  broker when the connection dies before the answer. Default "none". */
    retry?: "safe" | "none";
    /** the default deadline in ms (X-JRPC-Timeout-Ms); with retry "safe" 30000 when unset */
    timeoutMs?: number;
    /** how long past the deadline the client waits for the broker's -32003 before it gives up (2000) */
    graceMs?: number;
    /** headers added to every HTTP request */
    headers?: Record<string, string>;
    /** the fetch to use (default globalThis.fetch) */
    fetch?: typeof fetch;
    /** the WebSocket to use (default globalThis.WebSocket, given the headers in Node's form) */
    webSocket?: WebSocketFactory;
}
