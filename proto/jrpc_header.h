/* jrpc_header — the client header frame: what a ZeroMQ client may send
 * before its JSON frame (proto/PROTOCOL.md 9.1; README, "Request headers").
 *
 * A protocol between clients and the broker's ZeroMQ front, apart from the
 * worker protocol (jrpc_wire): the client library encodes it, the broker's
 * front decodes it. The frame is optional; when sent it is one msgpack map
 * with string keys. Unknown keys are ignored, so later versions can add
 * fields; a known key with the wrong type, or given twice, makes the frame
 * malformed. Decoding never trusts the bytes. */
#ifndef JRPC_HEADER_H
#define JRPC_HEADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <msgpack.h>
#include "jrpc_buf.h"

/* The nesting a header frame may have, its own map included (unknown keys
 * may hold any value). Decoding is iterative: the bound costs no stack. */
#define JRPC_HEADER_MAX_DEPTH 1100

enum {
    JRPC_HEADER_EMALFORMED = -5001,  /* not a header frame */
};

/* Known keys and their types. */
typedef struct jrpc_header {
    jrpc_span_t key;          /* "key": str, key id (signing) */
    int64_t     timestamp;    /* "timestamp": int, Unix seconds (signing); 0 if absent */
    jrpc_span_t nonce;        /* "nonce": str (signing) */
    jrpc_span_t signature;    /* "signature": str, lower-case hex (signing) */
    uint32_t    timeout_ms;   /* "timeout_ms": uint, 0 if absent */
    jrpc_span_t traceparent;  /* "traceparent": str (W3C trace context) */
    bool        stream;       /* "stream": bool, answers streamed as they complete (9.2) */
    jrpc_span_t idem_key;     /* "idempotency_key": str (docs/SIGNING.md "Idempotency keys") */
    bool        timing;       /* "timing": bool, the reply header carries "server_timing" (9.3) */
} jrpc_header_t;

/* Decodes the header frame buf[0..n) into *h. Spans borrow from zone and
 * buf (both must outlive h). Returns 0, JRPC_HEADER_EMALFORMED (not one
 * msgpack map with string keys, a known key with the wrong type or given
 * twice, "timestamp" beyond int64) or -ENOMEM; on error *h is zeroed.
 * Never blocks. */
int jrpc_header_decode(const char *buf, size_t n, msgpack_zone *zone, jrpc_header_t *h);

/* Appends the frame of the fields of h that are set (non-empty span,
 * non-zero number), an empty map when none is. Returns 0 or -ENOMEM (out
 * unchanged). */
int jrpc_header_put(jrpc_buf_t *out, const jrpc_header_t *h);

/* The reply header frame of a streamed body (PROTOCOL.md 9.2): before each
 * answer {"pos": N}, its request's position in the body; before the last
 * message {"end": true}. Asked for timing (9.3), the end's and an
 * unstreamed reply's head carry "server_timing" (the unstreamed one then
 * has neither "pos" nor "end": whole). Unknown keys are ignored. */
typedef struct jrpc_reply_head {
    uint32_t    pos;     /* "pos": uint, when !end and !whole */
    bool        end;     /* "end": true: the last message of the body */
    bool        whole;   /* neither: the head of a one-message (unstreamed) reply */
    jrpc_span_t timing;  /* "server_timing": str, a Server-Timing value; empty: none */
} jrpc_reply_head_t;

/* Appends the reply header frame of rh: {"end": true} or {"pos": N}, or
 * with whole neither of them, and "server_timing" when rh->timing is not
 * empty. Returns 0 or -ENOMEM (out unchanged). */
int jrpc_header_put_reply(jrpc_buf_t *out, const jrpc_reply_head_t *rh);

/* Decodes a reply header frame (zone as jrpc_header_decode). Returns 0, or
 * JRPC_HEADER_EMALFORMED (not a map, "pos" not a uint32, "end" not a bool,
 * "server_timing" not a str, a key twice, "pos" and "end" both, or neither
 * and no "server_timing"), or -ENOMEM. */
int jrpc_header_decode_reply(const char *buf, size_t n, msgpack_zone *zone,
                             jrpc_reply_head_t *rh);

#endif
