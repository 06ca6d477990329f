/* jrpc_zmtp_codec — ZMTP 3.1 bytes (rfc.zeromq.org/spec/37, the NULL
 * mechanism and metadata of spec 23, socket types of spec 28), pure code.
 *
 * Shared by both ends we speak: the broker's own ZMTP server (io/jrpc_zmtp)
 * and libjrpc-client's native ZeroMQ transport (client/jrpc_client_zmtp.c).
 * picohttpparser-style: it never allocates, never reads past the input, and
 * says "need more" or "malformed", never guesses. */
#ifndef JRPC_ZMTP_CODEC_H
#define JRPC_ZMTP_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <string.h>

#include "jrpc_buf.h"

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

/* Whether a command or property name s is exactly lit. */
static inline bool jrpc_zmtp_name_is(jrpc_span_t s, const char *lit)
{
    return s.n == strlen(lit) && memcmp(s.p, lit, s.n) == 0;
}

/* The Socket-Type of a peer's READY data (the properties), names compared
 * case-insensitively: returns 0 with *type set (borrowed from data), or
 * MALFORMED with *why (static text) set when the metadata is malformed or
 * has no Socket-Type. */
int jrpc_zmtp_ready_type(const uint8_t *data, size_t len, jrpc_span_t *type, const char **why);

/* Checks a peer's READY data (the properties): Socket-Type must be present
 * (names compare case-insensitively) and one a ROUTER talks to: DEALER, REQ
 * or ROUTER. Returns 0, or MALFORMED with *why (static text) set. */
int jrpc_zmtp_ready_check(const uint8_t *data, size_t len, const char **why);

/* Writes a frame header for a body of size bytes into out (9 bytes room).
 * Returns its length (2 or 9). */
size_t jrpc_zmtp_frame_head(uint8_t *out, uint8_t flags, uint64_t size);

/* A command frame's header and name (1..255 bytes: asserted) for data_len
 * bytes of data that follow, into out (9 + 1 + 255 bytes room at most;
 * 10 + strlen(name) is enough for a short frame). Returns its length. */
size_t jrpc_zmtp_command_head(uint8_t *out, const char *name, size_t data_len);

/* The 64 bytes a client (as-server 0) sends first: otherwise the same as
 * jrpc_zmtp_greeting. */
extern const uint8_t jrpc_zmtp_greeting_client[JRPC_ZMTP_GREETING_LEN];

/* A READY command frame (header included) with the one property
 * Socket-Type = type (a name of spec 28, at most 16 bytes: asserted), into
 * out (JRPC_ZMTP_READY_MAX bytes room). Returns its length. */
#define JRPC_ZMTP_READY_MAX 48
size_t jrpc_zmtp_ready_put(uint8_t *out, const char *type);

#endif
