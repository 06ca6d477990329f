/* jrpc_ws — one WebSocket session (RFC 6455, server side) over memory.
 *
 * No sockets and no loop: the front feeds the bytes it read after the
 * upgrade (jrpc_ws_feed) and receives whole text messages and the bytes to
 * write through callbacks. Framing, masking, fragmentation, control frames
 * interleaved with fragments, ping → pong and the close handshake are
 * wslay's (Debian's libwslay, its event API driven from memory); what a
 * broker adds on top is here: text only (binary → 1003), UTF-8 checked per
 * message (1007), a message size limit (1009), a ping that must be
 * answered, and one place that says when the session is over.
 *
 * Close codes sent: the peer's own (answering its close, with its reason;
 * none for a close without a code), 1001 going away (jrpc_ws_close by the
 * front: idle, drain), 1002 protocol error (bad framing: wslay's checks,
 * and the frame heads and closes checked here before wslay sees them),
 * 1003 binary message, 1007 invalid UTF-8 (also in a close's reason), 1008
 * policy (the front: send queue over its limit, credential rotated), 1009
 * message too big. */
#ifndef JRPC_WS_H
#define JRPC_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct jrpc_ws jrpc_ws_t;

enum jrpc_ws_code {
    JRPC_WS_NORMAL       = 1000,
    JRPC_WS_GOING_AWAY   = 1001,
    JRPC_WS_PROTOCOL     = 1002,
    JRPC_WS_UNSUPPORTED  = 1003,
    JRPC_WS_INVALID_DATA = 1007,
    JRPC_WS_POLICY       = 1008,
    JRPC_WS_TOO_BIG      = 1009,
};

typedef struct jrpc_ws_cbs {
    /* A whole text message, valid UTF-8, at most max_msg bytes; valid
     * during the call. It may call jrpc_ws_send_text/jrpc_ws_close (not
     * jrpc_ws_destroy). */
    void (*message)(void *arg, const char *p, size_t n);
    /* Bytes for the peer, in order: all the frames of one call into the
     * session in one piece. Returns 0, or < 0 when they cannot be taken:
     * the session is then over (jrpc_ws_feed/send return < 0). */
    int (*write)(void *arg, const char *p, size_t n);
    /* Optional (NULL: write is used): a text frame written outside a feed
     * with nothing before it in the burst, as its header a[0, an) and its
     * payload p[0, n), the caller's (issue 35: no copy into the burst);
     * one piece for the peer as write's, and the same result. */
    int (*write2)(void *arg, const char *a, size_t an, const char *p, size_t n);
} jrpc_ws_cbs_t;

typedef struct jrpc_ws_opts {
    uint64_t max_msg;   /* bytes in one message, all fragments; over: close 1009 */
} jrpc_ws_opts_t;

/* A session; NULL when out of memory. cbs is copied; arg is passed back. */
jrpc_ws_t *jrpc_ws_new(const jrpc_ws_opts_t *opts, const jrpc_ws_cbs_t *cbs, void *arg);

/* Frees the session (NULL-safe, sets *self_p = NULL). Not from a callback. */
void jrpc_ws_destroy(jrpc_ws_t **self_p);

/* Takes n bytes read from the peer: every whole message in them goes to
 * cbs.message, control frames are answered, and what is to be written goes
 * to cbs.write before this returns. Bytes after the peer's close frame are
 * ignored. Returns 0 while the session goes on, 1 once it is over (the
 * close handshake is done, or a close was sent after an error: write what
 * was given, then close the connection), or < 0 when cbs.write failed or
 * memory ran out. Never blocks. */
int jrpc_ws_feed(jrpc_ws_t *ws, const char *p, size_t n);

/* Sends one text message (copied). Returns 0, -EPIPE once a close was
 * sent, or < 0 when cbs.write failed or memory ran out. */
int jrpc_ws_send_text(jrpc_ws_t *ws, const char *p, size_t n);

/* Sends a ping; jrpc_ws_awaiting_pong() is true until a pong comes back.
 * Returns 0, -EPIPE once a close was sent, or < 0 as jrpc_ws_send_text. */
int jrpc_ws_ping(jrpc_ws_t *ws);
bool jrpc_ws_awaiting_pong(const jrpc_ws_t *ws);

/* Starts the close handshake with code (and a short reason, may be NULL):
 * nothing more is read or sent but the close. Returns 0, or < 0 as
 * jrpc_ws_send_text; a second close does nothing. */
int jrpc_ws_close(jrpc_ws_t *ws, uint16_t code, const char *reason);

/* True once the session is over (see jrpc_ws_feed). */
bool jrpc_ws_over(const jrpc_ws_t *ws);

/* The close code this side sent (0: none yet), and the peer's (0: none, or
 * a close frame without a code). */
uint16_t jrpc_ws_code_sent(const jrpc_ws_t *ws);
uint16_t jrpc_ws_code_received(const jrpc_ws_t *ws);

/* Sec-WebSocket-Accept for a client's Sec-WebSocket-Key (RFC 6455 4.2.2:
 * base64(SHA-1(key + GUID))). The key must be the base64 text of 16 bytes
 * (24 characters, trimmed). Writes 28 characters and a NUL into out.
 * Returns 0, or -EINVAL for a key that is not that. */
int jrpc_ws_accept_key(const char *key, size_t n, char out[29]);

#endif
