/** HMAC-SHA256 request signing, docs/SIGNING.md, with WebCrypto only
 *  (crypto.subtle: Node >= 20 and browsers in a secure context: https://,
 *  or http:// on localhost / 127.0.0.1). */

export interface SigningKey {
    /** the key id, 1 to 64 characters of [A-Za-z0-9_.-] */
    id: string;
    /** the secret's ASCII bytes are the HMAC key (no hex or base64 decoding) */
    secret: string;
}

const enc = new TextEncoder();

function subtle(): SubtleCrypto {
    const s = globalThis.crypto?.subtle;
    if (!s)
        throw new Error("signing needs WebCrypto (crypto.subtle): Node >= 20, or a browser page in a secure context");
    return s;
}

function hex(buf: ArrayBuffer): string {
    const b = new Uint8Array(buf);
    let s = "";
    for (let i = 0; i < b.length; i++)
        s += b[i].toString(16).padStart(2, "0");
    return s;
}

/** base64url without padding of n random bytes (16 bytes: 22 characters). */
export function randomToken(nbytes = 16): string {
    const b = new Uint8Array(nbytes);
    globalThis.crypto.getRandomValues(b);
    let bin = "";
    for (const x of b)
        bin += String.fromCharCode(x);
    return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** A fresh nonce: 22 characters from a CSPRNG (132 bits). */
export function newNonce(): string {
    return randomToken(16);
}

/** Lower-case hex SHA-256 of the bytes. */
export async function sha256Hex(body: Uint8Array): Promise<string> {
    return hex(await subtle().digest("SHA-256", body as Uint8Array<ArrayBuffer>));
}

/** Unix seconds; a bigint for values past 2^53 (test vectors). */
export type Timestamp = number | bigint;

/** The string S of docs/SIGNING.md: "v1" LF key LF ts LF nonce LF hash. */
export async function signingString(keyId: string, ts: Timestamp, nonce: string, body: Uint8Array): Promise<string> {
    const ok = typeof ts === "bigint" ? ts >= 0n && ts <= 9223372036854775807n : Number.isSafeInteger(ts) && ts >= 0;
    if (!ok)
        throw new RangeError("the timestamp must be a non-negative integer of Unix seconds");
    return `v1\n${keyId}\n${ts}\n${nonce}\n${await sha256Hex(body)}`;
}

/** Signs bodies with one key: the HMAC key is imported once. */
export class Signer {
    readonly keyId: string;
    #key: Promise<CryptoKey>;

    constructor(key: SigningKey) {
        if (!/^[A-Za-z0-9_.-]{1,64}$/.test(key.id))
            throw new RangeError("a key id is 1 to 64 characters of [A-Za-z0-9_.-]");
        if (!/^[!-~]{16,}$/.test(key.secret))
            throw new RangeError("a secret is at least 16 characters of printable ASCII without spaces");
        this.keyId = key.id;
        this.#key = subtle().importKey("raw", enc.encode(key.secret), { name: "HMAC", hash: "SHA-256" },
                                       false, ["sign"]);
    }

    /** The lower-case hex signature of body at ts with nonce. */
    async signature(body: Uint8Array, ts: Timestamp, nonce: string): Promise<string> {
        if (!/^[A-Za-z0-9_-]{16,64}$/.test(nonce))
            throw new RangeError("a nonce is 16 to 64 characters of [A-Za-z0-9_-]");
        const s = await signingString(this.keyId, ts, nonce, body);
        return hex(await subtle().sign("HMAC", await this.#key, enc.encode(s)));
    }

    /** The four X-JRPC-* headers for one body, with the current time and a
     *  fresh nonce unless given (give them only to test vectors). */
    async headers(body: Uint8Array, ts?: Timestamp, nonce?: string): Promise<Record<string, string>> {
        const t = ts ?? Math.floor(Date.now() / 1000);
        const n = nonce ?? newNonce();
        return {
            "X-JRPC-Key": this.keyId,
            "X-JRPC-Timestamp": String(t),
            "X-JRPC-Nonce": n,
            "X-JRPC-Signature": await this.signature(body, t, n),
        };
    }
}

/** One-shot form: the signature of body (docs/SIGNING.md, "The signature"). */
export async function sign(key: SigningKey, body: Uint8Array | string, ts: Timestamp, nonce: string): Promise<string> {
    const b = typeof body === "string" ? enc.encode(body) : body;
    return new Signer(key).signature(b, ts, nonce);
}
