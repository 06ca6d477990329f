/* jrpc_zmtp — a ZMTP 3.1 server ("ROUTER") on the libuv loop, no threads.
 *
 * The client front's own ZeroMQ wire (docs/ARCHITECTURE.md, "Our own ZMTP
 * on the client front"): tcp:// (IPv4, IPv6) and ipc:// listeners, the NULL
 * security mechanism only, peers of type DEALER, REQ or ROUTER (the ZMTP
 * socket-type rules for a ROUTER), ZMTP 3.0 and 3.1 (a 1.0 or 2.0 peer, that
 * is libzmq before 4.0, is closed after the greeting). Bytes are read and
 * written on the loop thread, like the HTTP front: no I/O thread, no mailbox.
 * CURVE is not here: the front keeps libzmq for it.
 *
 * Two layers. The decoder (jrpc_zmtp_greeting_check .. jrpc_zmtp_prop_next)
 * is pure code over bytes, picohttpparser-style: it never allocates, never
 * reads past the input, and says "need more" or "malformed", never guesses.
 * The server (jrpc_zmtp_new ..) owns the sockets, one outbound queue per
 * connection bounded like libzmq's SNDHWM, and batches writes per loop turn.
 *
 * A routing id is our per-connection handle: the server generates one for
 * every connection and ignores the peer's Identity property (libzmq's ROUTER
 * uses a non-empty Identity, and refuses a second connection with the same
 * one; here both are served). */
#ifndef JRPC_ZMTP_H
#define JRPC_ZMTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "jrpc_buf.h"

/* ---- the decoder (pure) ------------------------------------------------ */

#define JRPC_ZMTP_GREETING_LEN 64
#define JRPC_ZMTP_FLAG_MORE    0x01
#define JRPC_ZMTP_FLAG_LONG    0x02
#define JRPC_ZMTP_FLAG_COMMAND 0x04

#define JRPC_ZMTP_NEED_MORE  (-2)  /* a prefix of something valid: read on */
#define JRPC_ZMTP_MALFORMED  (-1)  /* not ZMTP 3 NULL: close */
#define JRPC_ZMTP_TOO_LARGE  (-3)  /* a frame above the limit: close without a word */

/* The 64 bytes a server sends first: signature, version 3.1, "NULL",
 * as-server 1, filler. */
extern const uint8_t jrpc_zmtp_greeting[JRPC_ZMTP_GREETING_LEN];

/* Checks the peer's greeting in p[0..len). Returns 64 when all 64 bytes are
 * in and acceptable (signature, major version 3, mechanism NULL), NEED_MORE
 * while what is in could still be, MALFORMED as soon as a byte rules it out
 * (a ZMTP 1.0/2.0 peer is known by byte 0, 9 or 10), with *why (static
 * text) set. */
int jrpc_zmtp_greeting_check(const uint8_t *p, size_t len, const char **why);

typedef struct jrpc_zmtp_frame {
    uint8_t        flags;   /* JRPC_ZMTP_FLAG_* */
    const uint8_t *body;    /* borrowed from the input */
    size_t         size;    /* body bytes */
} jrpc_zmtp_frame_t;

/* Decodes one frame at p[0..len): flags byte, size (1 byte, or 8 bytes
 * big-endian with FLAG_LONG), body. Returns the bytes it takes (header and
 * body) with *f set; NEED_MORE with *need set to the whole frame's length
 * once its header is in (else to the header length needed), which is at most
 * max_size + 9; MALFORMED for reserved flag bits, a command with MORE, or an
 * 8-byte size with its top bit set; TOO_LARGE for a body above max_size
 * (decided from the header alone, before the body is read). */
ssize_t jrpc_zmtp_frame_decode(const uint8_t *p, size_t len, uint64_t max_size,
                               jrpc_zmtp_frame_t *f, size_t *need);

/* Splits a command frame's body: name length byte, name (1..255 bytes), data.
 * Returns 0 or MALFORMED. */
int jrpc_zmtp_command_split(const uint8_t *body, size_t size, jrpc_span_t *name,
                            jrpc_span_t *data);

/* One metadata property (READY): name length byte, name, 4-byte big-endian
 * value length, value. Starting at *off in p[0..len): returns 1 with name,
 * value set and *off advanced, 0 at the end, MALFORMED when a length runs
 * past the input or a name is empty. */
int jrpc_zmtp_prop_next(const uint8_t *p, size_t len, size_t *off, jrpc_span_t *name,
                        jrpc_span_t *value);

/* Checks a peer's READY data (the properties): Socket-Type must be present
 * (names compare case-insensitively) and one a ROUTER talks to: DEALER, REQ
 * or ROUTER. Returns 0, or MALFORMED with *why (static text) set. */
int jrpc_zmtp_ready_check(const uint8_t *data, size_t len, const char **why);

/* Writes a frame header for a body of size bytes into out (9 bytes room).
 * Returns its length (2 or 9). */
size_t jrpc_zmtp_frame_head(uint8_t *out, uint8_t flags, uint64_t size);

/* ---- the server -------------------------------------------------------- */

typedef struct jrpc_zmtp      jrpc_zmtp_t;
typedef struct jrpc_zmtp_conn jrpc_zmtp_conn_t;

/* One client message: frames[0..n) (at most 3; excess set when the message
 * had more, which were read and dropped), borrowed until the callback
 * returns. peer is the IP (no port) of a tcp:// peer, NULL on ipc://. conn
 * stays valid for the callback; jrpc_zmtp_conn_ref() keeps it longer. */
typedef void (*jrpc_zmtp_msg_cb)(void *data, jrpc_zmtp_conn_t *conn, const jrpc_span_t *frames,
                                 int n, bool excess, const char *peer);

typedef struct jrpc_zmtp_opts {
    const char *endpoint;      /* tcp://HOST:PORT (HOST: *, IPv4, [IPv6], an interface or
                                  host name), ipc://PATH */
    uint64_t    max_frame;     /* a larger frame cuts the connection without a word */
    uint32_t    hwm;           /* replies queued per connection, at most (SNDHWM) */
    uint32_t    handshake_ms;  /* greeting and READY within this, or closed */
} jrpc_zmtp_opts_t;

typedef struct jrpc_zmtp_stats {
    uint64_t conns;            /* open now */
    uint64_t accepted;         /* since start */
    uint64_t handshake_failed; /* closed before READY: bad greeting, type, timeout */
    uint64_t handshake_timeouts; /* of those, for the clock */
    uint64_t oversized;        /* connections cut for a frame above max_frame */
    uint64_t pings;            /* PINGs answered */
} jrpc_zmtp_stats_t;

/* True when the native engine can bind endpoint (tcp:// or ipc://). */
bool jrpc_zmtp_supports(const char *endpoint);

/* Binds and listens (getaddrinfo for a host name: may block, at start-up).
 * cb is called for each message with data. Returns 0 with *out set, or a
 * negative errno/libuv code after logging event=bind_failed. */
int jrpc_zmtp_new(uv_loop_t *loop, const jrpc_zmtp_opts_t *opts, jrpc_zmtp_msg_cb cb, void *data,
                  jrpc_zmtp_t **out);

/* Queues one message of n frames (copied) for conn; it leaves in a batch
 * before the loop next blocks. Returns 0, -EAGAIN when hwm messages are
 * already queued for conn (the client does not read: dropped),
 * -EHOSTUNREACH when conn is closed or closing, -ENOMEM. Never blocks. */
int jrpc_zmtp_send(jrpc_zmtp_conn_t *conn, const jrpc_span_t *frames, int n);

/* A connection outlives its socket while referenced (a reply on its way).
 * unref is NULL-safe and sets *conn_p to NULL. */
void jrpc_zmtp_conn_ref(jrpc_zmtp_conn_t *conn);
void jrpc_zmtp_conn_unref(jrpc_zmtp_conn_t **conn_p);

/* Stops delivering messages (drain): what arrives is read and dropped,
 * unanswered (as libzmq's unread queue was); PINGs still get PONGs. */
void jrpc_zmtp_pause(jrpc_zmtp_t *z);

void jrpc_zmtp_stats(const jrpc_zmtp_t *z, jrpc_zmtp_stats_t *out);

/* Stops listening and reading, lets queued replies leave for up to
 * linger_ms, then closes every connection; the memory goes with the last
 * handle (and the last reference). Sets *self_p to NULL; NULL-safe. */
void jrpc_zmtp_destroy(jrpc_zmtp_t **self_p, uint32_t linger_ms);

#endif
