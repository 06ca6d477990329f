/* jrpc_wire — codec of the broker⇄worker protocol (see PROTOCOL.md).
 *
 * Encoding uses msgpack_packer writing into a jrpc_buf_t. Decoding uses our
 * own msgpack decoder (jrpc_wire_unpack), not msgpack_unpack(): msgpack-c's
 * C unpacker has a stack of MSGPACK_EMBED_STACK_SIZE (32) containers fixed
 * when the library is built, which would cap params at 29 levels while the
 * broker admits JSON bodies nested up to --max-depth (1024 at most). Ours is
 * iterative, so its depth limit (JRPC_WIRE_MAX_DEPTH) costs no C stack, and
 * it builds the same msgpack_object trees msgpack_unpack() would, so every
 * reader of msgpack_object keeps working. It never trusts a declared length:
 * see jrpc_wire_unpack for why a hostile frame cannot make it allocate more
 * than a small multiple of the frame's size. */
#include "jrpc_wire.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- encoding ---- */

static int buf_write(void *data, const char *p, size_t n)
{
    return jrpc_buf_append(data, p, n) < 0 ? -1 : 0;
}

static void packer_init(msgpack_packer *pk, jrpc_buf_t *out)
{
    msgpack_packer_init(pk, out, buf_write);
}

/* Every msgpack_pack_* returns 0 or -1; -1 only comes from buf_write. */
#define PACK(call)              \
    do {                        \
        if ((call) < 0)         \
            goto nomem;         \
    } while (0)

static int put_head(msgpack_packer *pk, size_t n, int type)
{
    if (msgpack_pack_array(pk, n) < 0 || msgpack_pack_uint8(pk, JRPC_WIRE_VERSION) < 0 ||
        msgpack_pack_uint8(pk, (uint8_t)type) < 0)
        return -ENOMEM;
    return 0;
}

static int put_str(msgpack_packer *pk, const char *p, size_t n)
{
    if (msgpack_pack_str(pk, n) < 0 || msgpack_pack_str_body(pk, p, n) < 0)
        return -ENOMEM;
    return 0;
}

int jrpc_wire_put_ready(jrpc_buf_t *out, uint32_t credit, const char *const *methods,
                        size_t nmethods)
{
    return jrpc_wire_put_ready_opts(out, credit, methods, nmethods, NULL);
}

int jrpc_wire_put_ready_opts(jrpc_buf_t *out, uint32_t credit, const char *const *methods,
                             size_t nmethods, const jrpc_wire_ready_opts_t *opts)
{
    assert(credit >= 1 && nmethods >= 1);
    size_t len0 = out->len;
    bool has_name = opts && opts->name != NULL;
    bool has_idem = opts && opts->nidempotent > 0;
    msgpack_packer pk;
    packer_init(&pk, out);
    PACK(put_head(&pk, has_name || has_idem ? 5 : 4, JRPC_WIRE_READY));
    PACK(msgpack_pack_uint32(&pk, credit));
    PACK(msgpack_pack_array(&pk, nmethods));
    for (size_t i = 0; i < nmethods; i++) {
        assert(methods[i] != NULL && methods[i][0] != '\0');
        PACK(put_str(&pk, methods[i], strlen(methods[i])));
    }
    if (!has_name && !has_idem)
        return 0;
    PACK(msgpack_pack_map(&pk, (size_t)has_name + (size_t)has_idem));
    if (has_name) {
        PACK(put_str(&pk, "name", 4));
        PACK(put_str(&pk, opts->name, strlen(opts->name)));
    }
    if (has_idem) {
        PACK(put_str(&pk, "idempotent", 10));
        PACK(msgpack_pack_array(&pk, opts->nidempotent));
        for (size_t i = 0; i < opts->nidempotent; i++) {
            assert(opts->idempotent[i] != NULL && opts->idempotent[i][0] != '\0');
            PACK(put_str(&pk, opts->idempotent[i], strlen(opts->idempotent[i])));
        }
    }
    return 0;
nomem:
    out->len = len0;
    return -ENOMEM;
}

static int put_bare(jrpc_buf_t *out, int type)
{
    const char msg[3] = { (char)0x92, JRPC_WIRE_VERSION, (char)type };
    return jrpc_buf_append(out, msg, sizeof msg);
}

int jrpc_wire_put_heartbeat(jrpc_buf_t *out)
{
    return put_bare(out, JRPC_WIRE_HEARTBEAT);
}

int jrpc_wire_put_heartbeat_settings(jrpc_buf_t *out, uint32_t heartbeat_ms, uint32_t liveness)
{
    assert(heartbeat_ms >= JRPC_WIRE_HEARTBEAT_MIN_MS && heartbeat_ms <= JRPC_WIRE_HEARTBEAT_MAX_MS);
    assert(liveness >= 1 && liveness <= JRPC_WIRE_LIVENESS_MAX);
    size_t len0 = out->len;
    msgpack_packer pk;
    packer_init(&pk, out);
    PACK(put_head(&pk, 4, JRPC_WIRE_HEARTBEAT));
    PACK(msgpack_pack_uint32(&pk, heartbeat_ms));
    PACK(msgpack_pack_uint32(&pk, liveness));
    return 0;
nomem:
    out->len = len0;
    return -ENOMEM;
}

int jrpc_wire_put_disconnect(jrpc_buf_t *out)
{
    return put_bare(out, JRPC_WIRE_DISCONNECT);
}

int jrpc_wire_put_reject(jrpc_buf_t *out, uint64_t request)
{
    assert(request >= 1);
    size_t len0 = out->len;
    msgpack_packer pk;
    packer_init(&pk, out);
    PACK(put_head(&pk, 3, JRPC_WIRE_REJECT));
    PACK(msgpack_pack_uint64(&pk, request));
    return 0;
nomem:
    out->len = len0;
    return -ENOMEM;
}

/* [1, type, array32(0)]: the count is patched by _end. The message must start
 * at out->p[0] (the frame buffer holds this one message). */
#define BATCH_HEAD_LEN 8

static int put_batch_begin(jrpc_buf_t *out, int type)
{
    assert(out->len == 0);
    const char head[BATCH_HEAD_LEN] = { (char)0x93, JRPC_WIRE_VERSION, (char)type,
                                        (char)0xdd, 0, 0, 0, 0 };
    return jrpc_buf_append(out, head, sizeof head);
}

static void put_batch_end(jrpc_buf_t *out, int type, uint32_t n)
{
    assert(out->len >= BATCH_HEAD_LEN && (unsigned char)out->p[0] == 0x93 &&
           out->p[2] == (char)type && (unsigned char)out->p[3] == 0xdd);
    (void)type;
    unsigned char *p = (unsigned char *)out->p + 4;
    p[0] = (unsigned char)(n >> 24);
    p[1] = (unsigned char)(n >> 16);
    p[2] = (unsigned char)(n >> 8);
    p[3] = (unsigned char)n;
}

int jrpc_wire_put_request_begin(jrpc_buf_t *out)
{
    return put_batch_begin(out, JRPC_WIRE_REQUEST);
}

int jrpc_wire_put_request_call(jrpc_buf_t *out, jrpc_seq_t seq, jrpc_span_t method,
                               jrpc_span_t params, uint32_t timeout_ms, jrpc_span_t traceparent)
{
    assert(seq != 0 && method.n > 0);
    assert(traceparent.n == 0 || jrpc_traceparent_valid(traceparent.p, traceparent.n));
    size_t len0 = out->len;
    msgpack_packer pk;
    packer_init(&pk, out);
    PACK(msgpack_pack_array(&pk, traceparent.n ? 5 : 4));
    PACK(msgpack_pack_uint64(&pk, seq));
    PACK(put_str(&pk, method.p, method.n));
    if (params.n == 0)
        PACK(msgpack_pack_nil(&pk));
    else
        PACK(jrpc_buf_append(out, params.p, params.n));
    PACK(msgpack_pack_uint32(&pk, timeout_ms));
    if (traceparent.n)
        PACK(put_str(&pk, traceparent.p, traceparent.n));
    return 0;
nomem:
    out->len = len0;
    return -ENOMEM;
}

void jrpc_wire_put_request_end(jrpc_buf_t *out, uint32_t ncalls)
{
    put_batch_end(out, JRPC_WIRE_REQUEST, ncalls);
}

int jrpc_wire_put_response_begin(jrpc_buf_t *out)
{
    return put_batch_begin(out, JRPC_WIRE_RESPONSE);
}

int jrpc_wire_put_result_head(jrpc_buf_t *out, jrpc_seq_t seq)
{
    assert(seq != 0);
    size_t len0 = out->len;
    msgpack_packer pk;
    packer_init(&pk, out);
    PACK(msgpack_pack_array(&pk, 3));
    PACK(msgpack_pack_uint64(&pk, seq));
    PACK(msgpack_pack_uint8(&pk, 0));
    return 0;
nomem:
    out->len = len0;
    return -ENOMEM;
}

int jrpc_wire_put_error(jrpc_buf_t *out, jrpc_seq_t seq, int code, const char *message,
                        jrpc_span_t data)
{
    assert(seq != 0 && message != NULL);
    size_t len0 = out->len;
    msgpack_packer pk;
    packer_init(&pk, out);
    PACK(msgpack_pack_array(&pk, 3));
    PACK(msgpack_pack_uint64(&pk, seq));
    PACK(msgpack_pack_uint8(&pk, 1));
    PACK(msgpack_pack_map(&pk, data.n ? 3 : 2));
    PACK(put_str(&pk, "code", 4));
    PACK(msgpack_pack_int(&pk, code));
    PACK(put_str(&pk, "message", 7));
    PACK(put_str(&pk, message, strlen(message)));
    if (data.n) {
        PACK(put_str(&pk, "data", 4));
        PACK(jrpc_buf_append(out, data.p, data.n));
    }
    return 0;
nomem:
    out->len = len0;
    return -ENOMEM;
}

void jrpc_wire_put_response_end(jrpc_buf_t *out, uint32_t nanswers)
{
    put_batch_end(out, JRPC_WIRE_RESPONSE, nanswers);
}

/* ---- the msgpack decoder ---- */

static uint64_t be(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

/* A container being filled: its slots are the array's elements, or the
 * map's keys and values alternating (slot 2k is key k, 2k+1 its value). */
typedef struct level {
    msgpack_object *parent;  /* the ARRAY or MAP object, in the zone or *out */
    uint64_t        next;    /* index of the next slot to fill */
} level_t;

/* Levels kept on the C stack; deeper nesting moves the stack to the heap. */
#define INLINE_LEVELS 32
_Static_assert(JRPC_WIRE_MAX_DEPTH >= INLINE_LEVELS, "JRPC_WIRE_MAX_DEPTH too small");

static uint64_t slot_count(const msgpack_object *o)
{
    return o->type == MSGPACK_OBJECT_ARRAY ? o->via.array.size : 2 * (uint64_t)o->via.map.size;
}

static msgpack_object *slot(const level_t *l)
{
    if (l->parent->type == MSGPACK_OBJECT_ARRAY)
        return &l->parent->via.array.ptr[l->next];
    msgpack_object_kv *kv = &l->parent->via.map.ptr[l->next / 2];
    return (l->next & 1) ? &kv->val : &kv->key;
}

/* The header of one value at p[0..avail): sets *o for a scalar, or its type
 * and *count (elements, or entries of a map) for a container, whose slots the
 * caller allocates. Returns the bytes the value's own encoding takes (a
 * container's header only), or JRPC_WIRE_EMALFORMED. */
static int64_t read_head(const unsigned char *p, size_t avail, msgpack_object *o, uint64_t *count)
{
    unsigned char b = p[0];
    uint64_t len = 0;
    size_t head = 1;        /* bytes before the payload */
    int lenbytes = 0;       /* a big-endian length field after b */
    *count = 0;
    if (b <= 0x7f) {
        o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
        o->via.u64 = b;
        return 1;
    }
    if (b >= 0xe0) {
        o->type = MSGPACK_OBJECT_NEGATIVE_INTEGER;
        o->via.i64 = (int8_t)b;
        return 1;
    }
    if (b <= 0x8f) {
        o->type = MSGPACK_OBJECT_MAP;
        *count = b & 0x0f;
        return 1;
    }
    if (b <= 0x9f) {
        o->type = MSGPACK_OBJECT_ARRAY;
        *count = b & 0x0f;
        return 1;
    }
    if (b <= 0xbf) {
        o->type = MSGPACK_OBJECT_STR;
        len = b & 0x1f;
        goto payload;
    }
    switch (b) {
    case 0xc0:
        o->type = MSGPACK_OBJECT_NIL;
        return 1;
    case 0xc2:
    case 0xc3:
        o->type = MSGPACK_OBJECT_BOOLEAN;
        o->via.boolean = b == 0xc3;
        return 1;
    case 0xc4: case 0xc5: case 0xc6:                /* bin8/16/32 */
        o->type = MSGPACK_OBJECT_BIN;
        lenbytes = 1 << (b - 0xc4);
        break;
    case 0xd9: case 0xda: case 0xdb:                /* str8/16/32 */
        o->type = MSGPACK_OBJECT_STR;
        lenbytes = 1 << (b - 0xd9);
        break;
    case 0xc7: case 0xc8: case 0xc9:                /* ext8/16/32: length, type */
        o->type = MSGPACK_OBJECT_EXT;
        lenbytes = 1 << (b - 0xc7);
        break;
    case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8: /* fixext1..16: type */
        o->type = MSGPACK_OBJECT_EXT;
        len = 1u << (b - 0xd4);
        break;
    case 0xdc: case 0xdd:                           /* array16/32 */
        o->type = MSGPACK_OBJECT_ARRAY;
        lenbytes = 2 << (b - 0xdc);
        break;
    case 0xde: case 0xdf:                           /* map16/32 */
        o->type = MSGPACK_OBJECT_MAP;
        lenbytes = 2 << (b - 0xde);
        break;
    case 0xca: case 0xcb: {                         /* float32/64 */
        size_t w = b == 0xca ? 4 : 8;
        if (avail < 1 + w)
            return JRPC_WIRE_EMALFORMED;
        uint64_t bits = be(p + 1, (int)w);
        if (w == 4) {
            uint32_t b32 = (uint32_t)bits;
            float f;
            memcpy(&f, &b32, sizeof f);
            o->type = MSGPACK_OBJECT_FLOAT32;
            o->via.f64 = f;
        } else {
            double d;
            memcpy(&d, &bits, sizeof d);
            o->type = MSGPACK_OBJECT_FLOAT64;
            o->via.f64 = d;
        }
        return (int64_t)(1 + w);
    }
    case 0xcc: case 0xcd: case 0xce: case 0xcf: {   /* uint8..64 */
        int w = 1 << (b - 0xcc);
        if (avail < 1 + (size_t)w)
            return JRPC_WIRE_EMALFORMED;
        o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
        o->via.u64 = be(p + 1, w);
        return 1 + w;
    }
    case 0xd0: case 0xd1: case 0xd2: case 0xd3: {   /* int8..64 */
        int w = 1 << (b - 0xd0);
        if (avail < 1 + (size_t)w)
            return JRPC_WIRE_EMALFORMED;
        uint64_t u = be(p + 1, w);
        int64_t v;
        if (w < 8 && (u >> (8 * w - 1)))
            u |= ~(uint64_t)0 << (8 * w);       /* sign-extend */
        memcpy(&v, &u, sizeof v);
        /* As msgpack-c: a non-negative value is a positive integer
         * whatever its encoding. */
        if (v < 0) {
            o->type = MSGPACK_OBJECT_NEGATIVE_INTEGER;
            o->via.i64 = v;
        } else {
            o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
            o->via.u64 = (uint64_t)v;
        }
        return 1 + w;
    }
    default:                                        /* 0xc1, reserved */
        return JRPC_WIRE_EMALFORMED;
    }
    if (lenbytes) {
        if (avail - head < (size_t)lenbytes)
            return JRPC_WIRE_EMALFORMED;
        len = be(p + head, lenbytes);
        head += (size_t)lenbytes;
    }
    if (o->type == MSGPACK_OBJECT_ARRAY || o->type == MSGPACK_OBJECT_MAP) {
        *count = len;
        return (int64_t)head;
    }
    if (o->type == MSGPACK_OBJECT_EXT) {
        if (avail - head < 1)
            return JRPC_WIRE_EMALFORMED;
        o->via.ext.type = (int8_t)p[head];
        head++;
    }
payload:
    if (len > avail - head)
        return JRPC_WIRE_EMALFORMED;
    /* len < 2^32 here: every length field is at most 32 bits wide. */
    if (o->type == MSGPACK_OBJECT_EXT) {
        o->via.ext.size = (uint32_t)len;
        o->via.ext.ptr = (const char *)p + head;
    } else if (o->type == MSGPACK_OBJECT_STR) {
        o->via.str.size = (uint32_t)len;
        o->via.str.ptr = (const char *)p + head;
    } else {
        o->via.bin.size = (uint32_t)len;
        o->via.bin.ptr = (const char *)p + head;
    }
    return (int64_t)(head + len);
}

/* Gives a container of count elements (entries, for a map) its slots. */
static int alloc_slots(msgpack_object *o, uint64_t count, msgpack_zone *zone)
{
    size_t each = o->type == MSGPACK_OBJECT_ARRAY ? sizeof(msgpack_object)
                                                  : sizeof(msgpack_object_kv);
    if (count > SIZE_MAX / each)
        return -ENOMEM;
    /* As msgpack-c, an empty container gets a valid (zero-size) pointer. */
    void *p = msgpack_zone_malloc(zone, (size_t)count * each);
    if (p == NULL)
        return -ENOMEM;
    if (o->type == MSGPACK_OBJECT_ARRAY) {
        o->via.array.size = (uint32_t)count;
        o->via.array.ptr = p;
    } else {
        o->via.map.size = (uint32_t)count;
        o->via.map.ptr = p;
    }
    return 0;
}

/* Why iterative, with one running count of values still owed: the depth
 * limit is far beyond what recursion on a small thread stack tolerates, and
 * `owed` (every value takes at least one byte) is checked against the bytes
 * left before any container's slots are allocated. So all slots ever
 * allocated for one frame, hostile or not, number at most n: a 5-byte
 * array32 header claiming 2^32-1 elements allocates nothing. */
int jrpc_wire_unpack(const char *buf, size_t n, msgpack_zone *zone, msgpack_object *out)
{
    assert(zone != NULL && out != NULL);
    const unsigned char *p = (const unsigned char *)buf;
    level_t inline_levels[INLINE_LEVELS];
    level_t *levels = inline_levels;
    size_t cap = INLINE_LEVELS, depth = 0, pos = 0;
    uint64_t owed = 1;                 /* values still to read, at every level */
    msgpack_object *dst = out;         /* where the next value goes */
    int rc = JRPC_WIRE_EMALFORMED;
    if (buf == NULL || n == 0)
        goto out;
    for (;;) {
        size_t avail = n - pos;
        if (avail == 0)
            goto out;
        uint64_t count;
        int64_t used = read_head(p + pos, avail, dst, &count);
        if (used < 0)
            goto out;
        pos += (size_t)used;
        avail -= (size_t)used;
        owed--;
        if (dst->type == MSGPACK_OBJECT_ARRAY || dst->type == MSGPACK_OBJECT_MAP) {
            uint64_t slots = dst->type == MSGPACK_OBJECT_MAP ? 2 * count : count;
            if (owed > avail || slots > avail - owed || depth == JRPC_WIRE_MAX_DEPTH)
                goto out;
            if ((rc = alloc_slots(dst, count, zone)) < 0)
                goto out;
            rc = JRPC_WIRE_EMALFORMED;
            if (slots > 0) {
                if (depth == cap) {
                    size_t ncap = cap * 2 > JRPC_WIRE_MAX_DEPTH ? JRPC_WIRE_MAX_DEPTH : cap * 2;
                    level_t *nl = levels == inline_levels ? malloc(ncap * sizeof *nl)
                                                          : realloc(levels, ncap * sizeof *nl);
                    if (nl == NULL) {
                        rc = -ENOMEM;
                        goto out;
                    }
                    if (levels == inline_levels)
                        memcpy(nl, inline_levels, sizeof inline_levels);
                    levels = nl;
                    cap = ncap;
                }
                levels[depth++] = (level_t){ .parent = dst, .next = 0 };
                owed += slots;
            }
        }
        while (depth > 0 && levels[depth - 1].next == slot_count(levels[depth - 1].parent))
            depth--;
        if (depth == 0) {
            rc = pos == n ? 0 : JRPC_WIRE_EMALFORMED;
            goto out;
        }
        dst = slot(&levels[depth - 1]);
        levels[depth - 1].next++;
    }
out:
    if (levels != inline_levels)
        free(levels);
    if (rc < 0)
        memset(out, 0, sizeof *out);
    return rc;
}

/* ---- decoding ---- */

static int get_uint(const msgpack_object *o, uint64_t max, uint64_t *v)
{
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER || o->via.u64 > max)
        return JRPC_WIRE_EMALFORMED;
    *v = o->via.u64;
    return 0;
}

static bool is_nonempty_str(const msgpack_object *o)
{
    return o->type == MSGPACK_OBJECT_STR && o->via.str.size > 0;
}

static bool key_is(const msgpack_object *k, const char *name);

/* The READY options we know are checked like the header frame's: a known
 * key with the wrong type, or given twice, is malformed (the broker must
 * never guess which methods it may run twice); other keys are ignored. */
static int decode_ready_options(const msgpack_object *options, const msgpack_object **idempotent)
{
    bool seen_name = false;
    for (uint32_t i = 0; i < options->via.map.size; i++) {
        const msgpack_object *k = &options->via.map.ptr[i].key;
        const msgpack_object *v = &options->via.map.ptr[i].val;
        if (k->type != MSGPACK_OBJECT_STR)
            return JRPC_WIRE_EMALFORMED;
        if (key_is(k, "name")) {
            if (seen_name || v->type != MSGPACK_OBJECT_STR)
                return JRPC_WIRE_EMALFORMED;
            seen_name = true;
        } else if (key_is(k, "idempotent")) {
            if (*idempotent != NULL || v->type != MSGPACK_OBJECT_ARRAY)
                return JRPC_WIRE_EMALFORMED;
            for (uint32_t j = 0; j < v->via.array.size; j++)
                if (!is_nonempty_str(&v->via.array.ptr[j]))
                    return JRPC_WIRE_EMALFORMED;
            *idempotent = v;
        }
    }
    return 0;
}

static int decode_ready(const msgpack_object_array *a, jrpc_wire_msg_t *m)
{
    if (a->size < 4)
        return JRPC_WIRE_EMALFORMED;
    uint64_t credit;
    if (get_uint(&a->ptr[2], UINT32_MAX, &credit) < 0 || credit == 0)
        return JRPC_WIRE_EMALFORMED;
    const msgpack_object *methods = &a->ptr[3];
    if (methods->type != MSGPACK_OBJECT_ARRAY || methods->via.array.size == 0)
        return JRPC_WIRE_EMALFORMED;
    for (uint32_t i = 0; i < methods->via.array.size; i++)
        if (!is_nonempty_str(&methods->via.array.ptr[i]))
            return JRPC_WIRE_EMALFORMED;
    const msgpack_object *options = NULL, *idempotent = NULL;
    if (a->size >= 5 && a->ptr[4].type != MSGPACK_OBJECT_NIL) {
        if (a->ptr[4].type != MSGPACK_OBJECT_MAP)
            return JRPC_WIRE_EMALFORMED;
        options = &a->ptr[4];
        if (decode_ready_options(options, &idempotent) < 0)
            return JRPC_WIRE_EMALFORMED;
    }
    m->credit = (uint32_t)credit;
    m->methods = methods;
    m->options = options;
    m->idempotent = idempotent;
    return 0;
}

/* [1, 4] or [1, 4, heartbeat_ms, liveness]; nil settings are absent ones. */
static int decode_heartbeat(const msgpack_object_array *a, jrpc_wire_msg_t *m)
{
    if (a->size < 3 || a->ptr[2].type == MSGPACK_OBJECT_NIL)
        return 0;
    uint64_t hb, live;
    if (a->size < 4 || get_uint(&a->ptr[2], JRPC_WIRE_HEARTBEAT_MAX_MS, &hb) < 0 ||
        hb < JRPC_WIRE_HEARTBEAT_MIN_MS || get_uint(&a->ptr[3], JRPC_WIRE_LIVENESS_MAX, &live) < 0 ||
        live == 0)
        return JRPC_WIRE_EMALFORMED;
    m->heartbeat_ms = (uint32_t)hb;
    m->liveness = (uint32_t)live;
    return 0;
}

static int decode_reject(const msgpack_object_array *a, jrpc_wire_msg_t *m)
{
    uint64_t request;
    if (a->size < 3 || get_uint(&a->ptr[2], UINT64_MAX, &request) < 0 || request == 0)
        return JRPC_WIRE_EMALFORMED;
    m->request = request;
    return 0;
}

static int decode_items(const msgpack_object_array *a, jrpc_wire_msg_t *m)
{
    if (a->size < 3)
        return JRPC_WIRE_EMALFORMED;
    const msgpack_object *items = &a->ptr[2];
    if (items->type != MSGPACK_OBJECT_ARRAY || items->via.array.size == 0)
        return JRPC_WIRE_EMALFORMED;
    m->items = items;
    m->nitems = items->via.array.size;
    return 0;
}

int jrpc_wire_decode(const char *buf, size_t n, msgpack_zone *zone, jrpc_wire_msg_t *m)
{
    memset(m, 0, sizeof *m);
    msgpack_object root;
    int rc = jrpc_wire_unpack(buf, n, zone, &root);
    if (rc < 0)
        return rc;
    if (root.type != MSGPACK_OBJECT_ARRAY || root.via.array.size < 1)
        return JRPC_WIRE_EMALFORMED;
    const msgpack_object_array *a = &root.via.array;
    /* The version is checked first: another version may change the rest. */
    if (a->ptr[0].type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        return JRPC_WIRE_EVERSION;
    if (a->ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return JRPC_WIRE_EMALFORMED;
    if (a->ptr[0].via.u64 != JRPC_WIRE_VERSION)
        return JRPC_WIRE_EVERSION;
    uint64_t type;
    if (a->size < 2 || get_uint(&a->ptr[1], JRPC_WIRE_REJECT, &type) < 0)
        return JRPC_WIRE_EMALFORMED;
    switch (type) {
    case JRPC_WIRE_READY:
        rc = decode_ready(a, m);
        break;
    case JRPC_WIRE_REQUEST:
    case JRPC_WIRE_RESPONSE:
        rc = decode_items(a, m);
        break;
    case JRPC_WIRE_HEARTBEAT:
        rc = decode_heartbeat(a, m);
        break;
    case JRPC_WIRE_DISCONNECT:
        rc = 0;
        break;
    case JRPC_WIRE_REJECT:
        rc = decode_reject(a, m);
        break;
    default:
        rc = JRPC_WIRE_EMALFORMED;
        break;
    }
    if (rc < 0) {
        memset(m, 0, sizeof *m);
        return rc;
    }
    m->type = (int)type;
    return 0;
}

int jrpc_wire_peek_type(const char *buf, size_t n)
{
    const unsigned char *p = (const unsigned char *)buf;
    size_t pos = 0;
    msgpack_object o;
    uint64_t count = 0, v[2];
    int64_t used;
    if (buf == NULL || n == 0 || (used = read_head(p, n, &o, &count)) < 0 ||
        o.type != MSGPACK_OBJECT_ARRAY || count < 2)
        return JRPC_WIRE_EMALFORMED;
    pos = (size_t)used;
    for (int k = 0; k < 2; k++) {
        if (pos == n || (used = read_head(p + pos, n - pos, &o, &count)) < 0)
            return JRPC_WIRE_EMALFORMED;
        pos += (size_t)used;
        if (k == 0 && o.type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
            return JRPC_WIRE_EVERSION;
        if (o.type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            return JRPC_WIRE_EMALFORMED;
        v[k] = o.via.u64;
        if (k == 0 && v[0] != JRPC_WIRE_VERSION)
            return JRPC_WIRE_EVERSION;
    }
    return v[1] > INT32_MAX ? INT32_MAX : (int)v[1];
}

static const msgpack_object_array *item_array(const jrpc_wire_msg_t *m, uint32_t i,
                                              uint32_t min_size)
{
    assert(m->items != NULL && i < m->nitems);
    const msgpack_object *it = &m->items->via.array.ptr[i];
    if (it->type != MSGPACK_OBJECT_ARRAY || it->via.array.size < min_size)
        return NULL;
    return &it->via.array;
}

int jrpc_wire_request_item(const jrpc_wire_msg_t *m, uint32_t i, jrpc_wire_call_t *c)
{
    assert(m->type == JRPC_WIRE_REQUEST);
    memset(c, 0, sizeof *c);
    const msgpack_object_array *a = item_array(m, i, 4);
    if (a == NULL)
        return JRPC_WIRE_EMALFORMED;
    uint64_t seq, timeout;
    if (get_uint(&a->ptr[0], UINT64_MAX, &seq) < 0 || seq == 0)
        return JRPC_WIRE_EMALFORMED;
    if (!is_nonempty_str(&a->ptr[1]))
        return JRPC_WIRE_EMALFORMED;
    const msgpack_object *params = &a->ptr[2];
    if (params->type != MSGPACK_OBJECT_NIL && params->type != MSGPACK_OBJECT_ARRAY &&
        params->type != MSGPACK_OBJECT_MAP)
        return JRPC_WIRE_EMALFORMED;
    if (get_uint(&a->ptr[3], UINT32_MAX, &timeout) < 0)
        return JRPC_WIRE_EMALFORMED;
    if (a->size >= 5 && a->ptr[4].type != MSGPACK_OBJECT_NIL) {
        const msgpack_object *tp = &a->ptr[4];
        if (tp->type != MSGPACK_OBJECT_STR ||
            !jrpc_traceparent_valid(tp->via.str.ptr, tp->via.str.size))
            return JRPC_WIRE_EMALFORMED;
        c->traceparent.p = tp->via.str.ptr;
        c->traceparent.n = tp->via.str.size;
    }
    c->seq = seq;
    c->method.p = a->ptr[1].via.str.ptr;
    c->method.n = a->ptr[1].via.str.size;
    c->params = params;
    c->timeout_ms = (uint32_t)timeout;
    return 0;
}

int jrpc_wire_request_item_seq(const jrpc_wire_msg_t *m, uint32_t i, jrpc_seq_t *seq)
{
    assert(m->type == JRPC_WIRE_REQUEST);
    uint64_t v;
    const msgpack_object_array *a = item_array(m, i, 1);
    if (a == NULL || get_uint(&a->ptr[0], UINT64_MAX, &v) < 0 || v == 0)
        return JRPC_WIRE_EMALFORMED;
    *seq = v;
    return 0;
}

int jrpc_wire_response_item(const jrpc_wire_msg_t *m, uint32_t i, jrpc_wire_answer_t *an)
{
    assert(m->type == JRPC_WIRE_RESPONSE);
    memset(an, 0, sizeof *an);
    const msgpack_object_array *a = item_array(m, i, 3);
    if (a == NULL)
        return JRPC_WIRE_EMALFORMED;
    uint64_t seq, flag;
    if (get_uint(&a->ptr[0], UINT64_MAX, &seq) < 0 || seq == 0)
        return JRPC_WIRE_EMALFORMED;
    if (get_uint(&a->ptr[1], 1, &flag) < 0)
        return JRPC_WIRE_EMALFORMED;
    if (flag == 1 && a->ptr[2].type != MSGPACK_OBJECT_MAP)
        return JRPC_WIRE_EMALFORMED;
    an->seq = seq;
    an->is_error = flag == 1;
    an->value = &a->ptr[2];
    return 0;
}

const msgpack_object *jrpc_wire_map_get(const msgpack_object *o, const char *key)
{
    if (o == NULL || o->type != MSGPACK_OBJECT_MAP)
        return NULL;
    size_t klen = strlen(key);
    for (uint32_t i = 0; i < o->via.map.size; i++) {
        const msgpack_object *k = &o->via.map.ptr[i].key;
        if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == klen &&
            memcmp(k->via.str.ptr, key, klen) == 0)
            return &o->via.map.ptr[i].val;
    }
    return NULL;
}

/* ---- the client header frame ---- */

static bool key_is(const msgpack_object *k, const char *name)
{
    size_t n = strlen(name);
    return k->via.str.size == n && memcmp(k->via.str.ptr, name, n) == 0;
}

static int get_span(const msgpack_object *v, jrpc_span_t *s)
{
    if (v->type != MSGPACK_OBJECT_STR)
        return JRPC_WIRE_EMALFORMED;
    s->p = v->via.str.ptr;
    s->n = v->via.str.size;
    return 0;
}

int jrpc_wire_decode_header(const char *buf, size_t n, msgpack_zone *zone,
                            jrpc_wire_header_t *h)
{
    memset(h, 0, sizeof *h);
    msgpack_object root;
    int rc = jrpc_wire_unpack(buf, n, zone, &root);
    if (rc < 0)
        return rc;
    if (root.type != MSGPACK_OBJECT_MAP)
        return JRPC_WIRE_EMALFORMED;
    /* A known key given twice is refused: the header carries signing input,
     * and two readers must never disagree on which value counts. */
    enum { K_KEY = 1, K_TS = 2, K_NONCE = 4, K_SIG = 8, K_TIMEOUT = 16, K_TRACE = 32 };
    unsigned seen = 0, bit = 0;
    for (uint32_t i = 0; i < root.via.map.size && rc == 0; i++) {
        const msgpack_object *k = &root.via.map.ptr[i].key;
        const msgpack_object *v = &root.via.map.ptr[i].val;
        if (k->type != MSGPACK_OBJECT_STR) {
            rc = JRPC_WIRE_EMALFORMED;
            break;
        }
        if (key_is(k, "key")) {
            bit = K_KEY;
            rc = get_span(v, &h->key);
        } else if (key_is(k, "timestamp")) {
            bit = K_TS;
            if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER && v->via.u64 <= INT64_MAX)
                h->timestamp = (int64_t)v->via.u64;
            else if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
                h->timestamp = v->via.i64;
            else
                rc = JRPC_WIRE_EMALFORMED;
        } else if (key_is(k, "nonce")) {
            bit = K_NONCE;
            rc = get_span(v, &h->nonce);
        } else if (key_is(k, "signature")) {
            bit = K_SIG;
            rc = get_span(v, &h->signature);
        } else if (key_is(k, "timeout_ms")) {
            uint64_t t = 0;
            bit = K_TIMEOUT;
            rc = get_uint(v, UINT32_MAX, &t);
            h->timeout_ms = (uint32_t)t;
        } else if (key_is(k, "traceparent")) {
            bit = K_TRACE;
            rc = get_span(v, &h->traceparent);
        } else {
            continue; /* unknown keys: later versions */
        }
        if (seen & bit)
            rc = JRPC_WIRE_EMALFORMED;
        seen |= bit;
    }
    if (rc < 0)
        memset(h, 0, sizeof *h);
    return rc;
}

int jrpc_wire_put_header(jrpc_buf_t *out, const jrpc_wire_header_t *h)
{
    size_t len0 = out->len;
    size_t nkeys = (h->key.n > 0) + (h->timestamp != 0) + (h->nonce.n > 0) +
                   (h->signature.n > 0) + (h->timeout_ms != 0) + (h->traceparent.n > 0);
    msgpack_packer pk;
    packer_init(&pk, out);
    PACK(msgpack_pack_map(&pk, nkeys));
    if (h->key.n) {
        PACK(put_str(&pk, "key", 3));
        PACK(put_str(&pk, h->key.p, h->key.n));
    }
    if (h->timestamp) {
        PACK(put_str(&pk, "timestamp", 9));
        PACK(msgpack_pack_int64(&pk, h->timestamp));
    }
    if (h->nonce.n) {
        PACK(put_str(&pk, "nonce", 5));
        PACK(put_str(&pk, h->nonce.p, h->nonce.n));
    }
    if (h->signature.n) {
        PACK(put_str(&pk, "signature", 9));
        PACK(put_str(&pk, h->signature.p, h->signature.n));
    }
    if (h->timeout_ms) {
        PACK(put_str(&pk, "timeout_ms", 10));
        PACK(msgpack_pack_uint32(&pk, h->timeout_ms));
    }
    if (h->traceparent.n) {
        PACK(put_str(&pk, "traceparent", 11));
        PACK(put_str(&pk, h->traceparent.p, h->traceparent.n));
    }
    return 0;
nomem:
    out->len = len0;
    return -ENOMEM;
}

const char *jrpc_wire_strerror(int rc)
{
    switch (rc) {
    case 0:                    return "success";
    case JRPC_WIRE_EMALFORMED: return "malformed worker-protocol frame";
    case JRPC_WIRE_EVERSION:   return "unsupported worker-protocol version";
    case -ENOMEM:              return "out of memory";
    default:                   return "unknown error";
    }
}
