/** jrpc-client: a JSON-RPC 2.0 client of the jrpc broker (README.md). */
export { Client } from "./client.js";
export type { AnswerStream } from "./client.js";
export { JsonRpcError, MaybeRanError, ProtocolError, UnreachableError } from "./errors.js";
export { Signer, sign, signingString, sha256Hex, newNonce } from "./sign.js";
export type { SigningKey, Timestamp } from "./sign.js";
export type {
    Answer, BatchItem, CallOptions, ClientOptions, Id, Params, StreamAnswer, StreamEnd,
    StreamOptions, WebSocketFactory, WebSocketLike,
} from "./types.js";
