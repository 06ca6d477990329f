/* jrpc_header — codec of the client header frame (PROTOCOL.md 9.1). */
#include "jrpc_header.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include "jrpc_mpack.h"

static int get_span(const msgpack_object *v, jrpc_span_t *s)
{
    if (v->type != MSGPACK_OBJECT_STR)
        return JRPC_HEADER_EMALFORMED;
    s->p = v->via.str.ptr;
    s->n = v->via.str.size;
    return 0;
}

/* Unpacks a header frame (buf[0, n)) into root, a map. Returns 0, -ENOMEM
 * or JRPC_HEADER_EMALFORMED. */
static inline int unpack_map(const char *buf, size_t n, msgpack_zone *zone, msgpack_object *root)
{
    int rc = jrpc_mpack_unpack(buf, n, JRPC_HEADER_MAX_DEPTH, zone, root);
    if (rc < 0)
        return rc == -ENOMEM ? rc : JRPC_HEADER_EMALFORMED;
    return root->type == MSGPACK_OBJECT_MAP ? 0 : JRPC_HEADER_EMALFORMED;
}

int jrpc_header_decode(const char *buf, size_t n, msgpack_zone *zone, jrpc_header_t *h)
{
    memset(h, 0, sizeof *h);
    msgpack_object root;
    int rc = unpack_map(buf, n, zone, &root);
    if (rc < 0)
        return rc;
    /* A known key given twice is refused: the header carries signing input,
     * and two readers must never disagree on which value counts. */
    enum { K_KEY = 1, K_TS = 2, K_NONCE = 4, K_SIG = 8, K_TIMEOUT = 16, K_TRACE = 32,
           K_STREAM = 64, K_IDEM = 128, K_TIMING = 256 };
    unsigned seen = 0, bit = 0;
    for (uint32_t i = 0; i < root.via.map.size && rc == 0; i++) {
        const msgpack_object *k = &root.via.map.ptr[i].key;
        const msgpack_object *v = &root.via.map.ptr[i].val;
        if (k->type != MSGPACK_OBJECT_STR) {
            rc = JRPC_HEADER_EMALFORMED;
            break;
        }
        if (jrpc_mpack_str_is(k, "key")) {
            bit = K_KEY;
            rc = get_span(v, &h->key);
        } else if (jrpc_mpack_str_is(k, "timestamp")) {
            bit = K_TS;
            if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER && v->via.u64 <= INT64_MAX)
                h->timestamp = (int64_t)v->via.u64;
            else if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
                h->timestamp = v->via.i64;
            else
                rc = JRPC_HEADER_EMALFORMED;
        } else if (jrpc_mpack_str_is(k, "nonce")) {
            bit = K_NONCE;
            rc = get_span(v, &h->nonce);
        } else if (jrpc_mpack_str_is(k, "signature")) {
            bit = K_SIG;
            rc = get_span(v, &h->signature);
        } else if (jrpc_mpack_str_is(k, "timeout_ms")) {
            uint64_t t = 0;
            bit = K_TIMEOUT;
            if (!jrpc_mpack_get_uint(v, UINT32_MAX, &t))
                rc = JRPC_HEADER_EMALFORMED;
            h->timeout_ms = (uint32_t)t;
        } else if (jrpc_mpack_str_is(k, "traceparent")) {
            bit = K_TRACE;
            rc = get_span(v, &h->traceparent);
        } else if (jrpc_mpack_str_is(k, "idempotency_key")) {
            bit = K_IDEM;
            rc = get_span(v, &h->idem_key);
        } else if (jrpc_mpack_str_is(k, "stream")) {
            bit = K_STREAM;
            if (v->type == MSGPACK_OBJECT_BOOLEAN)
                h->stream = v->via.boolean;
            else
                rc = JRPC_HEADER_EMALFORMED;
        } else if (jrpc_mpack_str_is(k, "timing")) {
            bit = K_TIMING;
            if (v->type == MSGPACK_OBJECT_BOOLEAN)
                h->timing = v->via.boolean;
            else
                rc = JRPC_HEADER_EMALFORMED;
        } else {
            continue; /* unknown keys: later versions */
        }
        if (seen & bit)
            rc = JRPC_HEADER_EMALFORMED;
        seen |= bit;
    }
    if (rc < 0)
        memset(h, 0, sizeof *h);
    return rc;
}

/* Every msgpack_pack_* returns 0 or -1; -1 only comes from the buffer. */
#define PACK(call)              \
    do {                        \
        if ((call) < 0)         \
            goto nomem;         \
    } while (0)

/* A string field and its name, only when it is set (nkeys counts it so). */
static inline int put_span(msgpack_packer *pk, const char *name, jrpc_span_t v)
{
    if (v.n == 0)
        return 0;
    if (jrpc_mpack_put_str(pk, name, strlen(name)) < 0)
        return -1;
    return jrpc_mpack_put_str(pk, v.p, v.n);
}

int jrpc_header_put(jrpc_buf_t *out, const jrpc_header_t *h)
{
    size_t len0 = out->len;
    size_t nkeys = (h->key.n > 0) + (h->timestamp != 0) + (h->nonce.n > 0) +
                   (h->signature.n > 0) + (h->timeout_ms != 0) + (h->traceparent.n > 0) +
                   h->stream + (h->idem_key.n > 0) + h->timing;
    msgpack_packer pk;
    jrpc_mpack_packer_init(&pk, out);
    PACK(msgpack_pack_map(&pk, nkeys));
    PACK(put_span(&pk, "key", h->key));
    if (h->timestamp) {
        PACK(jrpc_mpack_put_str(&pk, "timestamp", 9));
        PACK(msgpack_pack_int64(&pk, h->timestamp));
    }
    PACK(put_span(&pk, "nonce", h->nonce));
    PACK(put_span(&pk, "signature", h->signature));
    if (h->timeout_ms) {
        PACK(jrpc_mpack_put_str(&pk, "timeout_ms", 10));
        PACK(msgpack_pack_uint32(&pk, h->timeout_ms));
    }
    PACK(put_span(&pk, "traceparent", h->traceparent));
    if (h->stream) {
        PACK(jrpc_mpack_put_str(&pk, "stream", 6));
        PACK(msgpack_pack_true(&pk));
    }
    PACK(put_span(&pk, "idempotency_key", h->idem_key));
    if (h->timing) {
        PACK(jrpc_mpack_put_str(&pk, "timing", 6));
        PACK(msgpack_pack_true(&pk));
    }
    return 0;
nomem:
    out->len = len0;
    return -ENOMEM;
}

int jrpc_header_put_reply(jrpc_buf_t *out, const jrpc_reply_head_t *rh)
{
    size_t len0 = out->len;
    msgpack_packer pk;
    jrpc_mpack_packer_init(&pk, out);
    PACK(msgpack_pack_map(&pk, (size_t)!rh->whole + (rh->timing.n > 0)));
    if (rh->whole) {
        /* an unstreamed reply's head: its timing only */
    } else if (rh->end) {
        PACK(jrpc_mpack_put_str(&pk, "end", 3));
        PACK(msgpack_pack_true(&pk));
    } else {
        PACK(jrpc_mpack_put_str(&pk, "pos", 3));
        PACK(msgpack_pack_uint32(&pk, rh->pos));
    }
    PACK(put_span(&pk, "server_timing", rh->timing));
    return 0;
nomem:
    out->len = len0;
    return -ENOMEM;
}

int jrpc_header_decode_reply(const char *buf, size_t n, msgpack_zone *zone,
                             jrpc_reply_head_t *rh)
{
    memset(rh, 0, sizeof *rh);
    msgpack_object root;
    int rc = unpack_map(buf, n, zone, &root);
    if (rc < 0)
        return rc;
    bool has_pos = false, has_end = false;
    for (uint32_t i = 0; i < root.via.map.size; i++) {
        const msgpack_object *k = &root.via.map.ptr[i].key;
        const msgpack_object *v = &root.via.map.ptr[i].val;
        uint64_t pos;
        if (jrpc_mpack_str_is(k, "pos")) {
            if (has_pos || !jrpc_mpack_get_uint(v, UINT32_MAX, &pos))
                return JRPC_HEADER_EMALFORMED;
            rh->pos = (uint32_t)pos;
            has_pos = true;
        } else if (jrpc_mpack_str_is(k, "end")) {
            if (has_end || v->type != MSGPACK_OBJECT_BOOLEAN || !v->via.boolean)
                return JRPC_HEADER_EMALFORMED;
            rh->end = has_end = true;
        } else if (jrpc_mpack_str_is(k, "server_timing")) {
            if (rh->timing.p || v->type != MSGPACK_OBJECT_STR) {
                memset(rh, 0, sizeof *rh);
                return JRPC_HEADER_EMALFORMED;
            }
            rh->timing = (jrpc_span_t){ v->via.str.ptr, v->via.str.size };
            if (rh->timing.p == NULL)
                rh->timing.p = "";
        }
    }
    rh->whole = !has_pos && !has_end && rh->timing.p;
    if ((has_pos && has_end) || (!has_pos && !has_end && !rh->whole)) {
        memset(rh, 0, sizeof *rh);
        return JRPC_HEADER_EMALFORMED;
    }
    return 0;
}
