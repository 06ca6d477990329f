/* jrpc_client — a blocking client for the jrpc broker (libjrpc-client).
 *
 *   jrpc_client_t *c = jrpc_client_new("tcp://127.0.0.1:5555", NULL);
 *   jrpc_buf_t reply;
 *   jrpc_buf_init(&reply);
 *   int rc = jrpc_client_send(c, body, len, NULL, &reply, -1);
 *   if (rc < 0)
 *       fprintf(stderr, "%s\n", jrpc_client_last_error(c));
 *   jrpc_buf_dispose(&reply);
 *   jrpc_client_destroy(&c);
 *
 * One request is outstanding at a time; a client is not thread-safe (use one
 * per thread). The client carries bytes: it never parses the JSON it sends or
 * receives — that is the caller's (and the broker's) business.
 *
 * Transports, chosen by the URL scheme:
 *   tcp://HOST:PORT, ipc://PATH   ZeroMQ DEALER to the broker's ROUTER, REQ
 *                                 framing: [empty][header?][json] out,
 *                                 [empty][json] back ([empty][reply header][json]
 *                                 when opts.server_timing asks).
 *   http://HOST[:PORT][/PATH]     HTTP/1.1 POST of the body to PATH (default
 *                                 /rpc, port 80), Content-Type
 *                                 application/json. One kept-alive connection
 *                                 per client, reused by the next call.
 *   https://HOST[:PORT][/PATH]    the same over TLS (default port 443); see
 *                                 "HTTPS" below.
 *
 * HTTP specifics. An answer with status 200 carries its body; 204 means
 * nothing to answer (reply->len == 0). An answer with any other status whose
 * body is application/json is a JSON-RPC error from the broker (413, 503,
 * ...): it is returned like any answer (0) and the status is available from
 * jrpc_client_http_status(). Any other non-2xx answer is JRPC_CLIENT_EHTTP.
 * A connection the server closed while idle is replaced before sending. A
 * request is sent a second time only when writing it on a reused connection
 * failed before any answer came (the server cannot have had all of it);
 * once it is fully written it is never resent, so a call fails with
 * -ECONNRESET rather than risk running a request twice.
 *
 * HTTPS. The server's certificate is verified against opts->cacert, or
 * else the system's CA store, and must match the URL's host: a DNS name
 * (also sent as SNI) or an IP address (an IP literal in the URL). TLS 1.2
 * or later; ALPN offers http/1.1. opts->insecure skips all verification
 * (curl -k: for tests only). opts->cert (and opts->key) give a client
 * certificate for servers that ask for one (mutual TLS). The connection
 * and its TLS session are kept alive as over http:// (the resend rule
 * holds as is), and a new connection resumes the last TLS session. The
 * files are read at the first connection: a missing or malformed one, a
 * certificate that does not verify, a name that does not match, or an
 * alert from the server (e.g. it wants a client certificate) fail the
 * call with JRPC_CLIENT_ETLS, and jrpc_client_last_error says which, e.g.
 * "TLS handshake with 127.0.0.1:8443 failed: certificate verify failed
 * (self-signed certificate in certificate chain)". Over TLS 1.3 a server
 * refuses a client certificate only after the handshake: that error then
 * comes while waiting for the answer (the request was sent).
 *
 * Signing (docs/SIGNING.md). A client given a key with jrpc_client_set_key
 * signs every body it sends (one request or a whole batch) with a timestamp
 * (time(NULL) plus opts->clock_offset_s), a fresh 22-character nonce and
 * jrpc_sign_compute. Over ZeroMQ the four fields go into the header frame
 * (keys "key", "timestamp", "nonce", "signature"), merged with the caller's
 * header; over http:// they are the X-JRPC-Key, X-JRPC-Timestamp,
 * X-JRPC-Nonce and X-JRPC-Signature headers. The safe resend above sends the
 * very same bytes, nonce included: the server never had the first copy, so
 * it has not seen that nonce either. A broker that refuses the signature
 * answers with a JSON-RPC error (-32002, -32005 for a replayed nonce, -32006
 * when it cannot check nonces; over http:// with status 401, 409 or 503):
 * that is an answer like any other (0). The secret is never logged, never
 * put in an error message, and wiped when the client is destroyed.
 *
 * MCP (opts.mcp, http:// and https://). Every request says Accept:
 * application/json, text/event-stream. Before the first call the client
 * opens a session: an `initialize` (protocol 2025-06-18 offered, the
 * server's choice kept) and then `notifications/initialized`; the
 * Mcp-Session-Id the server gave (if any) and MCP-Protocol-Version go with
 * every later request. An answer sent as an event stream gives its last
 * event's data as the reply (the response ends the stream; messages before
 * it, such as progress notifications, are passed over). A 404 to a request
 * of a session means the server ended it: a new session is opened and the
 * call sent once more (the server did not run it). The session outlives the
 * connection (a reconnect keeps it); jrpc_client_destroy ends it with the
 * spec's DELETE (best effort, 1 s at most: a gateway may keep a server
 * process per session). initialize and the notification are
 * not signed (use a bearer token with a server that wants a credential);
 * streamed answers (jrpc_client_send_stream) are not offered (-ENOTSUP).
 * An initialize the server refuses fails the call: JRPC_CLIENT_EHTTP for
 * a non-2xx status, -EPROTO for an answer with no result, with
 * jrpc_client_last_error quoting it.
 *
 * Several brokers (issue 34). A client made with several URLs (or a
 * dns+tcp:// name with several addresses) sends each body to one broker:
 * the next in turn, those that failed in the last 2 s tried last. When a
 * broker fails:
 *   - the body never reached it (connection refused, no handshake, the
 *     write failed): it goes to the next broker, always (it cannot have
 *     run). A ZeroMQ connection is then tried once, not every 100 ms until
 *     the deadline. (libzmq's engine, which CURVE uses, cannot tell: it
 *     queues the body for a broker that is down, so that broker costs the
 *     call's whole timeout and counts as one that took the body.)
 *   - it reached it and the connection died, or no answer came in time:
 *     it is sent to the next broker only when that is safe. That is when
 *     it carries an idempotency key (hdr->idem_key, or the one the client
 *     adds to every body when opts->retry is JRPC_CLIENT_RETRY_SAFE: 32
 *     random characters, over ZeroMQ the header frame's "idempotency_key",
 *     over http:// Idempotency-Key): a broker sharing the first one's Redis
 *     answers the first run's kept reply instead of running it again. The
 *     resend is signed anew (a fresh nonce, the same key) and its deadline
 *     (X-JRPC-Timeout-Ms) ends within 4.8 s of the first send, before the
 *     lost run's claim on the key could end; later, it is not sent. A
 *     broker that finds the key still held by the lost run (-32008 "still
 *     running") means the lost run may have reached a worker: never run
 *     again. Or when the caller marked it hdr->retryable (a read: it may
 *     run twice; sent again without a key).
 *   Otherwise the call fails with JRPC_CLIENT_EMAYHAVERUN: the call may or
 *   may not have run (jrpc_client_last_error says which broker and why).
 *   A body without a key whose broker died may have run there: no client
 *   can know; only a key makes the resend safe.
 * A streamed body (jrpc_client_send_stream) gets no key of the client's
 * and is never sent again once an answer of it was handed to fn. With one
 * URL and JRPC_CLIENT_RETRY_NONE a client behaves as before: no failover,
 * the transport's own codes (-ECONNRESET, -ETIMEDOUT, ...).
 *
 * Return values: 0, or a negative errno (see each function). */
#ifndef JRPC_CLIENT_H
#define JRPC_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include "jrpc_buf.h"

#define JRPC_CLIENT_DEFAULT_URL        "tcp://127.0.0.1:5555"
#define JRPC_CLIENT_DEFAULT_TIMEOUT_MS 10000

enum {
    JRPC_CLIENT_EHTTP = -3001,  /* http: a non-2xx status without a JSON-RPC answer */
    JRPC_CLIENT_ETLS  = -3002,  /* https: TLS failed (certificate, name, handshake, files) */
    JRPC_CLIENT_EMAYHAVERUN = -3003, /* several brokers or a retry policy: the broker took
                                        the body and was lost before answering, and it was
                                        not safe to send it again: it may or may not have
                                        run (see "Several brokers") */
    JRPC_CLIENT_ENONAME = -3004, /* jrpc_client_new: a dns+tcp:// name resolves to nothing */
};

/* jrpc_client_opts_t.retry: what a body lost with its broker may do. */
enum {
    JRPC_CLIENT_RETRY_NONE = 0,  /* sent again only where it cannot have run */
    JRPC_CLIENT_RETRY_SAFE = 1,  /* every body gets an Idempotency-Key (unless it has one
                                    or is marked retryable): sent again to the next broker */
};

/* jrpc_client_disconnect's flags. */
#define JRPC_CLIENT_FORGET_SESSION 1u  /* https: the next connection resumes nothing */

typedef struct jrpc_client jrpc_client_t;

/* What the broker reads besides the body (README, "Request headers"): over
 * ZeroMQ the msgpack header frame (proto/PROTOCOL.md), over http:// the
 * headers named below. Every field is optional: an empty span or 0 is left
 * out. Spans are borrowed for the call only. */
typedef struct jrpc_client_header {
    jrpc_span_t key;          /* key id (X-JRPC-Key); with nonce, signature, timestamp */
    int64_t     timestamp;    /* Unix seconds (X-JRPC-Timestamp); 0: absent */
    jrpc_span_t nonce;        /* X-JRPC-Nonce */
    jrpc_span_t signature;    /* 64 lower-case hex digits (X-JRPC-Signature) */
    uint32_t    timeout_ms;   /* the body's deadline (X-JRPC-Timeout-Ms); 0: the broker's */
    jrpc_span_t traceparent;  /* W3C trace context (traceparent) */
    jrpc_span_t idem_key;     /* idempotency key (Idempotency-Key; docs/SIGNING.md) */
    int         retryable;    /* not sent: non-zero marks a body the caller knows
                                 may run twice (reads only): with several brokers it
                                 is sent again after its broker was lost (see
                                 "Several brokers") */
} jrpc_client_header_t;

/* A zeroed struct (or NULL) gives every default. Fields are only ever added
 * at the end, so a zeroed struct stays the way to ask for the defaults. */
typedef struct jrpc_client_opts {
    int timeout_ms;          /* used when jrpc_client_send gets timeout_ms < 0;
                                <= 0 here means JRPC_CLIENT_DEFAULT_TIMEOUT_MS */
    int64_t clock_offset_s;  /* added to time(NULL) for the signing timestamp:
                                for a clock known to be off (a 401's
                                error.data.server_time tells by how much), and
                                for tests that need a stale timestamp */
    /* https:// only (ignored by the other transports); strings are copied. */
    const char *cacert;      /* PEM file of the CAs to trust instead of the
                                system store; NULL: the system store */
    const char *cert;        /* PEM client certificate (a chain may follow
                                it) for mutual TLS; NULL: none */
    const char *key;         /* PEM private key of cert; NULL: in cert's file */
    int insecure;            /* non-zero: no verification of the server's
                                certificate nor of its name (curl -k) */
    /* http:// and https:// only: a bearer key's token, sent as
       "Authorization: Bearer TOKEN" with every request (docs/SIGNING.md);
       NULL: none. Copied. */
    const char *bearer;
    /* tcp:// and ipc:// only: who speaks ZMTP. NULL or "native": our own
       engine on the calling thread (no libzmq context, no I/O thread), for
       every URL but CURVE and libzmq's source-address form
       (tcp://SRC;HOST:PORT), which go to libzmq; "libzmq": libzmq always.
       Anything else: jrpc_client_new fails with EINVAL. */
    const char *zmq_engine;
    /* JRPC_CLIENT_RETRY_NONE (0) or JRPC_CLIENT_RETRY_SAFE; anything else:
       jrpc_client_new fails with EINVAL. See "Several brokers". */
    int retry;
    /* non-zero: ask the broker where each body's time went (its phases as a
       W3C Server-Timing value: jrpc_client_server_timing). Over tcp:// and
       ipc:// the header frame then carries "timing" (proto/PROTOCOL.md 9.3;
       a header frame is sent with every call); over http:// the broker sends
       its Server-Timing header unasked (--server-timing on), and it is kept
       whether this is set or not. */
    int server_timing;
    /* http:// and https:// only (ignored by the other transports): non-zero
       speaks MCP's Streamable HTTP transport to an MCP server (the broker's
       /mcp, or any other; docs/MCP.md): see "MCP" below. */
    int mcp;
} jrpc_client_opts_t;

/* Creates a client for url: one URL, or several separated by commas
 * ("tcp://b1:5555,tcp://b2:5555"; up to 64 brokers in all, any schemes
 * mixed), each a URL of "Transports" or dns+tcp://NAME:PORT (every IPv4
 * and IPv6 address NAME resolves to, as tcp://ADDR:PORT, as workers do).
 * It connects on the first jrpc_client_send (over ZeroMQ's libzmq engine
 * it starts connecting in the background). Never blocks, but for resolving
 * a dns+tcp:// name (once, here: getaddrinfo). A broker that is down is
 * only noticed by jrpc_client_send.
 *
 * Returns the client, or NULL with errno set to EINVAL (malformed URL,
 * unknown scheme, an empty item of the list, more than 64 brokers, a bad
 * opts->retry), JRPC_CLIENT_ENONAME as a positive value (a dns+tcp:// name
 * with no address) or ENOMEM. jrpc_client_strerror(-errno) describes it.
 * url and the strings of opts are copied; no file of opts is read yet
 * (see "HTTPS"). */
jrpc_client_t *jrpc_client_new(const char *url, const jrpc_client_opts_t *opts);

/* Closes the connection, dropping anything unsent, and frees the client.
 * NULL-safe; sets *self_p to NULL. */
void jrpc_client_destroy(jrpc_client_t **self_p);

/* Makes c sign every later jrpc_client_send with this key (see "Signing"
 * above); key_id == NULL and secret == NULL turn signing off again. Both
 * strings are copied (the previous secret is wiped). key_id must be non-empty
 * and free of control characters and spaces (it travels in an HTTP header);
 * secret must be non-empty. Any key id and secret of a key file are valid.
 *
 * Returns 0, -EINVAL (one NULL and not the other, or a value as above: c
 * keeps its previous key) or -ENOMEM (c is left unsigned). Never blocks. */
int jrpc_client_set_key(jrpc_client_t *c, const char *key_id, const char *secret);

/* Makes c's ZeroMQ connection a CURVE client (encrypted, and authenticated
 * by the broker's --client-keys allowlist): public_z85/secret_z85 are this
 * client's keypair, server_public_z85 the broker's public key, all 40
 * Z85 characters (copied; the secret is wiped when replaced or at destroy).
 * All three NULL turns CURVE off again. The connection is replaced at once,
 * so call it before the first jrpc_client_send. A broker that refuses the key
 * (or expects another server key, or no CURVE) gives no error: calls time
 * out, and jrpc_client_last_error says CURVE may be why.
 *
 * Returns 0, -EINVAL (only some of the three NULL, or a malformed key),
 * -ENOTSUP (not a tcp:// or ipc:// client: said before the keys are looked
 * at), or another -errno from ZeroMQ (then the next send tries again).
 * Never blocks. */
int jrpc_client_set_curve(jrpc_client_t *c, const char *public_z85, const char *secret_z85,
                          const char *server_public_z85);

/* Sends one request body (a JSON-RPC request, notification or batch; sent
 * as is) and blocks until the reply or the timeout. hdr, if not NULL, is
 * sent as a header frame before the body (signing, deadlines); NULL sends
 * no header frame. Over http://,
 * hdr->timeout_ms (when not 0) becomes an X-JRPC-Timeout-Ms header,
 * hdr->traceparent a traceparent header, and the signing fields that are
 * set the X-JRPC-* headers named above (for a caller that signs itself).
 * When c has a key (jrpc_client_set_key), the body is signed and the
 * signing fields of hdr are replaced by the client's; hdr is not modified.
 *
 * timeout_ms bounds the whole call (connecting, sending, waiting); < 0 uses
 * the client's default. On success reply holds the reply bytes (reply->len is
 * reset first; reply->len == 0 means the broker had nothing to answer, as for
 * a body of notifications only).
 *
 * Returns 0, or:
 *   -ETIMEDOUT  no reply in time. A broker that is down or unreachable looks
 *               exactly like this over ZeroMQ (the native engine tries to
 *               connect every 100 ms until then, as libzmq does). The
 *               connection is then dropped
 *               and a fresh one made for the next call, so a late reply can
 *               never be taken for the answer to a later request.
 *   -EPROTO     the reply was not framed as [empty][body] (connection reset
 *               as for a timeout).
 *   -EINTR      a signal interrupted the wait (connection reset).
 *   tcp:// and ipc:// with the native engine also:
 *   -ECONNREFUSED the peer is not a ZMTP 3 ROUTER with the NULL mechanism
 *               (a broker with CURVE, a non-ZeroMQ server).
 *   -ECONNRESET the broker closed the connection while the call waited.
 *   -EPIPE      the connection was lost while the request was written.
 *   http:// also:
 *   -ECONNREFUSED, -EHOSTUNREACH, ... the connection could not be made.
 *   -ECONNRESET the server closed or reset the connection after the request
 *               was sent and before the whole answer came (not resent).
 *   -EPROTO     the answer is not well-formed HTTP/1.x.
 *   -EMSGSIZE   the answer is larger than 256 MiB.
 *   JRPC_CLIENT_EHTTP a non-2xx status with no JSON body (e.g. a proxy's
 *               502 page); jrpc_client_http_status() has the status.
 *   https:// also:
 *   JRPC_CLIENT_ETLS  TLS failed: see "HTTPS" above (never resent).
 *   A failure once sending began closes the connection; the next call
 *   makes a new one.
 *   -EINVAL     a header value that cannot be sent over http:// (control
 *               characters), or a signing timestamp below 0 (clock_offset_s).
 *   -EIO        no random bytes for a nonce (nothing was sent).
 *   -ENOMEM, or another -errno from the transport.
 *   JRPC_CLIENT_EMAYHAVERUN (several brokers or a retry policy only) the
 *               body reached a broker that was lost before answering, and
 *               it was not safe to send it again (see "Several brokers").
 *   With several brokers, a body that reached none fails with the last
 *   broker's code (e.g. -ECONNREFUSED).
 * jrpc_client_last_error(c) then says what happened, in words. */
int jrpc_client_send(jrpc_client_t *c, const char *body, size_t len,
                     const jrpc_client_header_t *hdr, jrpc_buf_t *reply, int timeout_ms);

/* Receives one streamed answer (jrpc_client_send_stream): pos is its
 * request's position in the body (0-based, notifications counted), json
 * the response object, valid during the call. */
typedef void (*jrpc_client_answer_fn)(void *arg, uint32_t pos, const char *json, size_t len);

/* As jrpc_client_send, but the broker is asked to stream the answers as
 * they complete (over ZeroMQ the header frame's "stream", proto/PROTOCOL.md
 * 9.2; over http:// Accept: text/event-stream, docs/STREAMING.md): fn(arg,
 * pos, json, len) is called for each answer as it arrives, in the order of
 * arrival, and then end receives the last message: {"answered":N,
 * "timed_out":M}, or the one error object of a body refused whole (no fn
 * call before it). A broker that does not stream answers with one whole
 * reply: end then holds it and fn is never called. timeout_ms bounds the
 * whole stream. Returns as jrpc_client_send; after a failure, fn may have
 * been called for some answers. */
int jrpc_client_send_stream(jrpc_client_t *c, const char *body, size_t len,
                            const jrpc_client_header_t *hdr, jrpc_client_answer_fn fn,
                            void *arg, jrpc_buf_t *end, int timeout_ms);

/* Closes c's connection now (http://, https://), so that the next call
 * makes a new one, with a new TLS handshake: resumed, unless flags has
 * JRPC_CLIENT_FORGET_SESSION (a full one). For measuring connection and
 * handshake costs (jrpc-bench --handshakes), and for a caller that knows
 * the server is going away. Returns 0, or -ENOTSUP for tcp:// and ipc://
 * (ZeroMQ manages its own connections). Never blocks. */
int jrpc_client_disconnect(jrpc_client_t *c, unsigned flags);

/* The URL the client was made with, the list as given (borrowed: lives as
 * long as c). */
const char *jrpc_client_url(const jrpc_client_t *c);

/* How many brokers c has (1..64): the URLs of its list, each dns+tcp://
 * name counted once per address. */
size_t jrpc_client_brokers(const jrpc_client_t *c);

/* The URL of c's broker i (0-based, in the order of the list, a name's
 * addresses sorted: "tcp://127.0.0.1:5555"), or NULL past the last.
 * Borrowed: lives as long as c. */
const char *jrpc_client_broker_url(const jrpc_client_t *c, size_t i);

/* The HTTP status of the answer to the last jrpc_client_send on c (200,
 * 204, 413, 503, ...), or 0 when the last call got no HTTP answer or c is
 * not an http:// client. */
int jrpc_client_http_status(const jrpc_client_t *c);

/* The Server-Timing value that came with the answer to the last call on c
 * (e.g. "parse;dur=0.012, queue;dur=0.004, worker;dur=0.210, gather;dur=0.003,
 * total;dur=0.236": the HTTP header, several joined with ", "; the ZeroMQ
 * reply header's "server_timing" when opts.server_timing asked for it; the
 * SSE end event's "server-timing" field; the NDJSON trailer), or "" when
 * it had none. proto/jrpc_timing.h reads it.
 * Borrowed: valid until the next call on c. */
const char *jrpc_client_server_timing(const jrpc_client_t *c);

/* A one-line description of the last failure of c, with its context, e.g.
 * "timed out after 500 ms waiting for the broker at tcp://127.0.0.1:5555:
 * no answer (is it running and reachable?)". "" when the last call succeeded. Borrowed: valid until the
 * next call on c. */
const char *jrpc_client_last_error(const jrpc_client_t *c);

/* A short English description of a code returned by this module (context
 * free; prefer jrpc_client_last_error when a client exists). Never NULL. */
const char *jrpc_client_strerror(int rc);

#endif
