/* jrpc_be — big-endian loads and stores, the byte order of msgpack.
 *
 * Shared by the msgpack writer in jrpc_json, the decoder in jrpc_mpack and
 * the frame patching in jrpc_wire. Byte by byte, so alignment and the host's
 * order never matter; inline, so they cost what the open-coded shifts did. */
#ifndef JRPC_BE_H
#define JRPC_BE_H

#include <stdint.h>
#include <string.h>

/* The n-byte (1..8) big-endian unsigned integer at p. */
static inline uint64_t jrpc_be_load(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

/* The 8-byte big-endian unsigned integer at p, in one load. */
static inline uint64_t jrpc_be_load64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

/* Each stores v at u, most significant byte first, and returns u past it. */
static inline unsigned char *jrpc_be_store16(unsigned char *u, uint16_t v)
{
    u[0] = (unsigned char)(v >> 8);
    u[1] = (unsigned char)v;
    return u + 2;
}

static inline unsigned char *jrpc_be_store32(unsigned char *u, uint32_t v)
{
    u[0] = (unsigned char)(v >> 24);
    u[1] = (unsigned char)(v >> 16);
    u[2] = (unsigned char)(v >> 8);
    u[3] = (unsigned char)v;
    return u + 4;
}

static inline unsigned char *jrpc_be_store64(unsigned char *u, uint64_t v)
{
    jrpc_be_store32(u, (uint32_t)(v >> 32));
    return jrpc_be_store32(u + 4, (uint32_t)v);
}

#endif
