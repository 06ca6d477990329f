/* jrpc_front_http — the HTTP/1.1 front door: POST / or POST /rpc.
 *
 * Each request body goes through jrpc_broker_submit(), exactly as a ZeroMQ
 * message does; the reply is 200 application/json (JSON-RPC errors
 * included), or 204 when the body held only notifications. Transport
 * refusals get an HTTP status and a JSON-RPC error body with id null.
 *
 * A GET / or /rpc asking for a WebSocket is decided here (jrpc_front_ws's
 * handshake; with keys, the upgrade's signature and nonce first), answered
 * 101, and from then on the connection's bytes go to a jrpc_front_ws
 * session and its bytes out through the connection's write path (with the
 * write-stall deadline); the connection still counts for --max-conns.
 * CORS: with an origin list, an OPTIONS preflight from a listed Origin is
 * answered 204 with the Access-Control-* headers (403 from another), and
 * answers to a listed Origin carry Access-Control-Allow-Origin and Vary.
 *
 * Requests are read by http/jrpc_http_reader (http-parser under it, and the
 * RFC 9112 checks the lenient library does not make: docs/ARCHITECTURE.md,
 * "HTTP: the reader, the heads, the front"); this module keeps the
 * connections, timers, the request FIFO and the writes, and decides what a
 * request may do (POST / or /rpc, media types, Expect). Keep-alive and pipelining:
 * answers leave strictly in request order; past PIPELINE_MAX outstanding
 * requests, or OUT_MAX bytes of answers the client has not read, a
 * connection is not read until answers flush, and a write that makes no
 * progress for write_timeout_ms closes the connection.
 * (The module's files, one job each, are listed in jrpc_front_http_int.h.)
 *
 * TLS (opts.tls): a layer under all of this, not code in the HTTP path
 * (io/jrpc_tls, memory BIOs): the socket's bytes are decrypted before the
 * reader sees them and every write is encrypted into a write of its own.
 * The handshake is due within tls_handshake_timeout_ms; a plaintext HTTP
 * request to the TLS port gets a plaintext 400 and a close. With a client
 * CA, a verified client certificate whose commonName is a key id of the
 * keys file authenticates the connection as that key (docs/TLS.md). */
#ifndef JRPC_FRONT_HTTP_H
#define JRPC_FRONT_HTTP_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>
#include "jrpc_broker.h"
#include "jrpc_tls.h"

typedef struct jrpc_front_http jrpc_front_http_t;

typedef struct jrpc_front_http_opts {
    const char *listen;             /* "HOST:PORT" or "[V6]:PORT"; port 0 picks one */
    uint32_t    max_body;           /* largest request body in bytes (413 past it) */
    uint32_t    max_header_bytes;   /* request line + headers (431 past it) */
    uint32_t    max_conns;          /* open connections; more are accepted and closed */
    uint32_t    header_timeout_ms;  /* first byte of a request to end of headers (408) */
    uint32_t    body_timeout_ms;    /* end of headers to end of body (408) */
    uint32_t    idle_timeout_ms;    /* idle keep-alive connection */
    uint32_t    write_timeout_ms;   /* an answer's write making no progress (client not reading) */
    bool        reuseport;          /* SO_REUSEPORT: several brokers share the port */
    uint32_t    stream_ping_ms;     /* ": ping" on SSE streams this often; 0: never */
    /* WebSocket (GET / or /rpc with Upgrade: websocket; jrpc_front_ws) */
    uint32_t    ws_max_inflight;    /* calls in flight per WebSocket; reading pauses when full */
    uint32_t    ws_max_queued;      /* bytes a WebSocket client is behind on: close 1008 past it */
    uint32_t    ws_ping_ms;         /* ping interval; no pong within it: close 1001 */
    /* CORS (browsers): the origins allowed (exact "scheme://host[:port]", or "*"),
     * each at most JRPC_FRONT_HTTP_ORIGIN_MAX bytes of printable ASCII; borrowed */
    const char *const *cors_origins;
    size_t      ncors;
    /* TLS: NULL for plaintext HTTP. Borrowed (sessions hold their own
     * reference, so it may be freed after jrpc_front_http_set_tls). */
    jrpc_tls_ctx_t *tls;
    uint32_t    tls_handshake_timeout_ms; /* accept to handshake done; then the idle timeout */
    /* MCP Streamable HTTP (docs/MCP.md): the path served ("/mcp"); NULL:
     * none. Borrowed. */
    const char *mcp_path;
    /* Reverse proxies (--trusted-proxy) whose Forwarded / X-Forwarded-For
     * name the client of their requests (docs/SIGNING.md "Behind a proxy");
     * from any other peer those headers are ignored. Borrowed. */
    const struct jrpc_proxy_cidr *trusted_proxies;
    size_t      ntrusted_proxies;
} jrpc_front_http_opts_t;

#define JRPC_FRONT_HTTP_ORIGIN_MAX 128

#define JRPC_FRONT_HTTP_OPTS_DEFAULT ((jrpc_front_http_opts_t){ \
    .listen = "127.0.0.1:8080", .max_body = 1u << 20, .max_header_bytes = 16384,  \
    .max_conns = 10000, .header_timeout_ms = 10000, .body_timeout_ms = 30000,     \
    .idle_timeout_ms = 60000, .write_timeout_ms = 30000, .stream_ping_ms = 15000,       \
    .ws_max_inflight = 64, .ws_max_queued = 1u << 20, .ws_ping_ms = 20000, \
    .tls_handshake_timeout_ms = 10000 })

/* Binds opts->listen and starts accepting; logs event=listening with the
 * bound address. With opts->reuseport, other processes that also set it may
 * bind the same address and the kernel spreads new connections among them
 * (docs/ARCHITECTURE.md, "Several brokers on one HTTP port"). NULL on failure (logged). Never blocks (the address is
 * resolved once, here, with getaddrinfo). */
jrpc_front_http_t *jrpc_front_http_new(uv_loop_t *loop, jrpc_broker_t *broker,
                                       const jrpc_front_http_opts_t *opts);

/* A new TLS context for the connections accepted from now on (a reload:
 * new certificate or client CA); those open keep theirs. Borrowed, like
 * opts.tls. No effect on a plaintext front. */
void jrpc_front_http_set_tls(jrpc_front_http_t *f, jrpc_tls_ctx_t *tls);

/* The key file was reloaded (after jrpc_broker_set_keys): each WebSocket
 * whose key is gone or whose credential was replaced closes 1008
 * (jrpc_front_ws_keys_changed). NULL-safe; never blocks. */
void jrpc_front_http_keys_changed(jrpc_front_http_t *f);

/* Graceful stop, first half: closes the listener, closes idle connections
 * and those in the middle of sending a request, stops reading the others;
 * their answers still go out, the last one with "Connection: close", and
 * each connection closes once its writes are flushed. After this the front
 * never calls the broker again, except jrpc_broker_cancel() for clients
 * that disconnect before their answer. */
void jrpc_front_http_pause(jrpc_front_http_t *f);

/* Second half: frees the front once every connection has closed (the loop
 * keeps running until then, so uv_run() returns only after the last write
 * has been flushed). Call it after jrpc_front_http_pause() and after the
 * broker has drained. NULL-safe; sets *self_p = NULL. */
void jrpc_front_http_destroy(jrpc_front_http_t **self_p);

#endif
