/* jrpc_zmtp_codec — see jrpc_zmtp_codec.h. */
#include "jrpc_zmtp_codec.h"

#include <assert.h>
#include <string.h>
#include <strings.h>

const uint8_t jrpc_zmtp_greeting[JRPC_ZMTP_GREETING_LEN] = {
    0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0x7F,   /* signature (padding as libzmq sends it) */
    3, 1,                                 /* version 3.1 */
    'N', 'U', 'L', 'L',                   /* mechanism, zero-padded to 20 bytes */
    [32] = 1,                             /* as-server; 31 bytes of filler follow */
};

static const uint8_t null_mechanism[20] = { 'N', 'U', 'L', 'L' };

int jrpc_zmtp_greeting_check(const uint8_t *p, size_t len, const char **why)
{
    if (len >= 1 && p[0] != 0xFF) {
        *why = "not a ZMTP 2.0+ signature (ZMTP 1.0 peer?)";
        return JRPC_ZMTP_MALFORMED;
    }
    if (len >= 10 && p[9] != 0x7F) {
        *why = "not a ZMTP 2.0+ signature (ZMTP 1.0 peer?)";
        return JRPC_ZMTP_MALFORMED;
    }
    if (len >= 11 && p[10] != 3) {
        *why = "ZMTP major version is not 3 (libzmq before 4.0?)";
        return JRPC_ZMTP_MALFORMED;
    }
    for (size_t i = 12; i < 32 && i < len; i++) {
        if (p[i] != null_mechanism[i - 12]) {
            *why = "security mechanism is not NULL";
            return JRPC_ZMTP_MALFORMED;
        }
    }
    return len >= JRPC_ZMTP_GREETING_LEN ? JRPC_ZMTP_GREETING_LEN : JRPC_ZMTP_NEED_MORE;
}

ssize_t jrpc_zmtp_frame_decode(const uint8_t *p, size_t len, uint64_t max_size,
                               jrpc_zmtp_frame_t *f, size_t *need)
{
    if (len < 1) {
        *need = 2;
        return JRPC_ZMTP_NEED_MORE;
    }
    uint8_t flags = p[0];
    if (flags & ~(JRPC_ZMTP_FLAG_MORE | JRPC_ZMTP_FLAG_LONG | JRPC_ZMTP_FLAG_COMMAND))
        return JRPC_ZMTP_MALFORMED;
    if ((flags & JRPC_ZMTP_FLAG_COMMAND) && (flags & JRPC_ZMTP_FLAG_MORE))
        return JRPC_ZMTP_MALFORMED;
    size_t hl = (flags & JRPC_ZMTP_FLAG_LONG) ? 9 : 2;
    if (len < hl) {
        *need = hl;
        return JRPC_ZMTP_NEED_MORE;
    }
    uint64_t size = p[1];
    if (flags & JRPC_ZMTP_FLAG_LONG) {
        size = 0;
        for (int i = 1; i < 9; i++)
            size = size << 8 | p[i];
        if (size >> 63)
            return JRPC_ZMTP_MALFORMED;
    }
    if (size > max_size)
        return JRPC_ZMTP_TOO_LARGE;
    if (len - hl < size) {
        *need = hl + (size_t)size;
        return JRPC_ZMTP_NEED_MORE;
    }
    f->flags = flags;
    f->body = p + hl;
    f->size = (size_t)size;
    return (ssize_t)(hl + (size_t)size);
}

int jrpc_zmtp_command_split(const uint8_t *body, size_t size, jrpc_span_t *name, jrpc_span_t *data)
{
    if (size < 1 || body[0] == 0 || (size_t)body[0] > size - 1)
        return JRPC_ZMTP_MALFORMED;
    *name = (jrpc_span_t){ (const char *)body + 1, body[0] };
    *data = (jrpc_span_t){ (const char *)body + 1 + body[0], size - 1 - body[0] };
    return 0;
}

int jrpc_zmtp_prop_next(const uint8_t *p, size_t len, size_t *off, jrpc_span_t *name,
                        jrpc_span_t *value)
{
    size_t o = *off;
    if (o >= len)
        return 0;
    size_t nl = p[o];
    if (nl == 0 || nl > len - o - 1)
        return JRPC_ZMTP_MALFORMED;
    size_t vo = o + 1 + nl;
    if (len - vo < 4)
        return JRPC_ZMTP_MALFORMED;
    uint64_t vl = (uint64_t)p[vo] << 24 | (uint64_t)p[vo + 1] << 16 | (uint64_t)p[vo + 2] << 8 |
                  p[vo + 3];
    if (vl > len - vo - 4)
        return JRPC_ZMTP_MALFORMED;
    *name = (jrpc_span_t){ (const char *)p + o + 1, nl };
    *value = (jrpc_span_t){ (const char *)p + vo + 4, (size_t)vl };
    *off = vo + 4 + (size_t)vl;
    return 1;
}

int jrpc_zmtp_ready_type(const uint8_t *data, size_t len, jrpc_span_t *type, const char **why)
{
    size_t off = 0;
    jrpc_span_t name, value;
    bool have_type = false;
    int rc;
    while ((rc = jrpc_zmtp_prop_next(data, len, &off, &name, &value)) == 1) {
        if (name.n == 11 && strncasecmp(name.p, "Socket-Type", 11) == 0) {
            *type = value;
            have_type = true;
        }
    }
    if (rc < 0) {
        *why = "malformed metadata";
        return JRPC_ZMTP_MALFORMED;
    }
    if (!have_type) {
        *why = "no Socket-Type";
        return JRPC_ZMTP_MALFORMED;
    }
    return 0;
}

int jrpc_zmtp_ready_check(const uint8_t *data, size_t len, const char **why)
{
    jrpc_span_t type;
    if (jrpc_zmtp_ready_type(data, len, &type, why) < 0)
        return JRPC_ZMTP_MALFORMED;
    if (!jrpc_zmtp_name_is(type, "DEALER") && !jrpc_zmtp_name_is(type, "REQ") &&
        !jrpc_zmtp_name_is(type, "ROUTER")) {
        *why = "socket type not compatible with ROUTER";
        return JRPC_ZMTP_MALFORMED;
    }
    return 0;
}

size_t jrpc_zmtp_frame_head(uint8_t *out, uint8_t flags, uint64_t size)
{
    if (size <= 255) {
        out[0] = flags & (uint8_t)~JRPC_ZMTP_FLAG_LONG;
        out[1] = (uint8_t)size;
        return 2;
    }
    out[0] = flags | JRPC_ZMTP_FLAG_LONG;
    for (int i = 8; i >= 1; i--, size >>= 8)
        out[i] = (uint8_t)size;
    return 9;
}

const uint8_t jrpc_zmtp_greeting_client[JRPC_ZMTP_GREETING_LEN] = {
    0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0x7F, 3, 1, 'N', 'U', 'L', 'L',
};

size_t jrpc_zmtp_ready_put(uint8_t *out, const char *type)
{
    static const char prop[] = "Socket-Type";
    size_t tl = strlen(type);
    assert(tl <= 16);
    size_t n = 0;
    out[n++] = JRPC_ZMTP_FLAG_COMMAND;
    out[n++] = (uint8_t)(1 + 5 + 1 + (sizeof prop - 1) + 4 + tl);
    out[n++] = 5;
    memcpy(out + n, "READY", 5), n += 5;
    out[n++] = sizeof prop - 1;
    memcpy(out + n, prop, sizeof prop - 1), n += sizeof prop - 1;
    out[n++] = 0, out[n++] = 0, out[n++] = 0, out[n++] = (uint8_t)tl;
    memcpy(out + n, type, tl), n += tl;
    return n;
}

size_t jrpc_zmtp_command_head(uint8_t *out, const char *name, size_t data_len)
{
    size_t nl = strlen(name);
    assert(nl >= 1 && nl <= 255);
    size_t n = jrpc_zmtp_frame_head(out, JRPC_ZMTP_FLAG_COMMAND, 1 + nl + data_len);
    out[n++] = (uint8_t)nl;
    memcpy(out + n, name, nl);
    return n + nl;
}
