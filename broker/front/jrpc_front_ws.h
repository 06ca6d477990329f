/* jrpc_front_ws — JSON-RPC over WebSocket on the HTTP port (issue 14,
 * point 5; the contract is docs/WEBSOCKET.md).
 *
 * Two parts, both without sockets of their own:
 *
 * - the handshake: jrpc_front_ws_handshake() decides an upgrade from the
 *   request's head (RFC 6455 4.2.1: 101, or 400 / 403 / 426 and why) and
 *   chooses the mode (subprotocol jrpc.stream or jrpc, or ?stream=1);
 *   jrpc_front_ws_head101() writes the 101's head;
 * - the session: one per upgraded connection, over jrpc_ws (wslay). The
 *   connection under it stays jrpc_front_http's (the socket, its write path
 *   and write-stall deadline, --max-conns): it feeds the bytes it reads
 *   here and gives this module a small io interface to write, to stop and
 *   start reading, and to end. Each text message is a body submitted to the
 *   broker (transport ws); its answers go back as messages: one per body
 *   (mode jrpc), or one per answer as each is in (mode jrpc.stream).
 *
 * Limits, each with its close code: a message over max_msg (1009, wslay),
 * invalid UTF-8 (1007), a binary message (1003), bad framing (1002), the
 * send queue over max_queued (1008), the key's credential replaced or
 * removed by a reload (1008), no pong within ping_ms of a ping, idle
 * for idle_ms, or the broker draining (1001). Calls in flight on the
 * connection are counted across batch items: a message whose calls would
 * take the count past max_inflight waits (and the socket is not read) until
 * answers make room, or, for a batch larger than max_inflight on its own,
 * until nothing else is in flight.
 *
 * Single-threaded, on the broker's loop; nothing here blocks. */
#ifndef JRPC_FRONT_WS_H
#define JRPC_FRONT_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "jrpc_broker.h"
#include "jrpc_http_reader.h"

/* ---- the handshake ------------------------------------------------------- */

typedef struct jrpc_front_ws_hs {
    uint16_t    status;     /* 101, or the refusal: 400, 403 or 426 */
    const char *reason;     /* a refusal's words, for the client and the log */
    bool        stream;     /* one message per answer (jrpc.stream or ?stream=1) */
    const char *protocol;   /* the subprotocol to echo ("jrpc.stream", "jrpc"), or NULL */
    char        accept[29]; /* 101: Sec-WebSocket-Accept */
} jrpc_front_ws_hs_t;

/* True when h asks for a WebSocket: a GET with Upgrade naming websocket,
 * or with a Sec-WebSocket-Key (a broken handshake, refused 400 by the
 * decision below rather than taken for a plain GET). */
bool jrpc_front_ws_wanted(const jrpc_http_head_t *h);

/* Decides the upgrade h asks for (RFC 6455 4.2.1), in this order: HTTP/1.1,
 * Upgrade: websocket, Connection: upgrade, no body, one Sec-WebSocket-Key of
 * 16 bytes in base64 (400 for each); Sec-WebSocket-Version: 13 (missing or
 * repeated: 400; another value: 426, and the answer carries
 * Sec-WebSocket-Version: 13); origin_ok false: 403 (the front's CORS
 * verdict on Origin). Then the mode: the first subprotocol the client
 * offers that we speak (jrpc.stream, jrpc) is echoed; none offered (or none
 * we speak: nothing is echoed) means jrpc, or jrpc.stream with the query
 * flag ?stream=1 (or stream=true). Pure: fills *hs, never fails. */
void jrpc_front_ws_handshake(const jrpc_http_head_t *h, bool origin_ok, jrpc_front_ws_hs_t *hs);

/* Writes the head of the 101 for hs (date: the Date value, or NULL) into
 * dst[0, cap). Returns its length, or -1 when it does not fit (256 bytes
 * always do). */
int jrpc_front_ws_head101(const jrpc_front_ws_hs_t *hs, const char *date, char *dst, size_t cap);

/* ---- the session ------------------------------------------------------- */

typedef struct jrpc_front_ws jrpc_front_ws_t;

typedef struct jrpc_front_ws_opts {
    uint64_t          max_msg;      /* bytes in one message (--max-body): 1009 past it */
    uint32_t          max_inflight; /* calls in flight on the connection (--ws-max-inflight) */
    uint64_t          max_queued;   /* bytes written, not yet taken by the socket
                                       (--ws-max-queued): 1008 past it */
    uint32_t          ping_ms;      /* a ping this often; no pong within it: 1001 */
    uint32_t          idle_ms;      /* no message and nothing in flight this long: 1001 */
    bool              stream;       /* mode jrpc.stream (else jrpc) */
    uint32_t          timeout_ms;   /* X-JRPC-Timeout-Ms of the upgrade, for every body; 0: none */
    jrpc_span_t       key_id;       /* the id of the key the upgrade was signed with (copied;
                                       looked up per message: jrpc_admit_t.key_id), or empty */
    const uint8_t    *key_fp;       /* that key's credential when the upgrade was authenticated
                                       (jrpc_broker_key_fingerprint, JRPC_KEY_FP_LEN bytes,
                                       copied), or NULL: only the id is checked at a reload
                                       (a client certificate's name) */
    jrpc_span_t       peer;         /* the client's address, for the access line (copied) */
    /* Optional, beside io's write (NULL: write only): a[0, an) then p[0, n),
     * as one write() of both would take them (a frame's header and its
     * payload, uncopied; issue 35). Gets the conn pointer. */
    int             (*write2)(void *conn, const char *a, size_t an, const char *p, size_t n);
} jrpc_front_ws_opts_t;

/* What the session needs from the connection under it. Every function gets
 * the conn pointer given to jrpc_front_ws_new(). None of them may call back
 * into the session, and none frees the session. */
typedef struct jrpc_front_ws_io {
    /* Bytes for the socket, in order after those before (copied: the
     * connection queues what the socket does not take at once). 0, or < 0
     * when the connection cannot take them any more. */
    int    (*write)(void *conn, const char *p, size_t n);
    /* Bytes given to write() that the socket has not taken yet. */
    size_t (*queued)(void *conn);
    /* Stop (false) or start (true) reading the socket. */
    void   (*reading)(void *conn, bool on);
    /* The session is over: our close frame is out (or the connection
     * failed): close the connection after what was written. Called once,
     * never from inside jrpc_front_ws_feed(). */
    void   (*over)(void *conn);
} jrpc_front_ws_io_t;

/* A session for a connection that has just been switched (the 101 written
 * already). opts and io are copied. NULL when out of memory. */
jrpc_front_ws_t *jrpc_front_ws_new(uv_loop_t *loop, jrpc_broker_t *broker,
                                   const jrpc_front_ws_opts_t *opts,
                                   const jrpc_front_ws_io_t *io, void *conn);

/* Takes n bytes read from the socket (all of them: messages that must wait
 * for room are kept, and the session stops the reading meanwhile). Returns
 * 0 while the session goes on, 1 when it is over (close the connection
 * after the writes: io->over is not called for this), < 0 when a write
 * failed (close at once). */
int jrpc_front_ws_feed(jrpc_front_ws_t *s, const char *p, size_t n);

/* The broker is draining: no message is read or started any more (those
 * waiting for room are dropped); once the bodies in flight have their
 * answers written, the session closes with 1001. */
void jrpc_front_ws_drain(jrpc_front_ws_t *s);

/* The key file was reloaded (call it after jrpc_broker_set_keys, on the
 * loop's thread, outside any callback of the session): a session opened
 * with a key that is gone, or whose credential (secret, bearer token) was
 * replaced under the same id, closes with 1008 and a reason saying so, and
 * logs event=ws_closed reason=credential_rotated (or key_removed) key=ID;
 * no message it sends afterwards is read. Bodies already in flight are
 * cancelled as at any close. Others carry on. Never blocks. */
void jrpc_front_ws_keys_changed(jrpc_front_ws_t *s);

/* The connection is gone (or closing): bodies in flight are cancelled at
 * the broker, io is never used again, and the session is freed (later, in
 * its timer's close callback). NULL-safe; sets *self_p = NULL. Not from
 * inside an io callback. */
void jrpc_front_ws_destroy(jrpc_front_ws_t **self_p);

#endif
