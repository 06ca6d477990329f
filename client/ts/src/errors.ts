/** The errors the client throws. Two kinds a caller tells apart:
 *  - JsonRpcError: the broker (or a worker) answered, with a JSON-RPC error
 *    object; the call did what the code says (for -32003 see docs/STREAMING.md).
 *  - MaybeRanError: no answer came and the call may or may not have run
 *    (the connection died after the body was sent and no safe retry was
 *    possible, the deadline passed without an answer, or a retry found the
 *    first run's idempotency key still held by a broker that died). */

/** A JSON-RPC error object: code, message and data as the broker sent them.
 *  `status` is the HTTP status of a body refused whole (401, 409, 413, 429,
 *  503, ...), 200 for an error in a call's own slot, 0 over WebSocket. */
export class JsonRpcError extends Error {
    readonly code: number;
    readonly data: unknown;
    readonly status: number;

    constructor(code: number, message: string, data?: unknown, status = 0) {
        super(message);
        this.name = "JsonRpcError";
        this.code = code;
        this.data = data;
        this.status = status;
    }

    /** From an error object as it came on the wire. */
    static from(obj: unknown, status = 0): JsonRpcError {
        const o = (obj ?? {}) as { code?: unknown; message?: unknown; data?: unknown };
        const code = typeof o.code === "number" ? o.code : -32603;
        const message = typeof o.message === "string" ? o.message : "Internal error";
        return new JsonRpcError(code, message, o.data, status);
    }
}

/** The call may or may not have run: the client cannot tell. `sent` says
 *  whether any copy of the body left the client; `cause` is the last
 *  transport error (or the -32008 conflict of a retry). */
export class MaybeRanError extends Error {
    readonly sent: boolean;
    readonly attempts: number;

    constructor(message: string, opts: { cause?: unknown; sent?: boolean; attempts?: number } = {}) {
        super(message, { cause: opts.cause });
        this.name = "MaybeRanError";
        this.sent = opts.sent ?? true;
        this.attempts = opts.attempts ?? 1;
    }
}

/** No broker could be reached at all: nothing was sent, nothing ran. */
export class UnreachableError extends Error {
    constructor(message: string, opts: { cause?: unknown } = {}) {
        super(message, { cause: opts.cause });
        this.name = "UnreachableError";
    }
}

/** An answer that is not JSON-RPC (a proxy's HTML page, a truncated body). */
export class ProtocolError extends Error {
    readonly status: number;

    constructor(message: string, status = 0) {
        super(message);
        this.name = "ProtocolError";
        this.status = status;
    }
}
