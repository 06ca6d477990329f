/* fuzz_zmtp — libFuzzer target for the ZMTP 3.1 decoder (io/jrpc_zmtp).
 *
 * The first byte picks the frame size limit (1..256, or 2^16); the rest is
 * what a peer sends on a fresh connection: greeting, READY, frames. It runs
 * the server's sequence over it (jrpc_zmtp_greeting_check, then
 * jrpc_zmtp_frame_decode; commands through jrpc_zmtp_command_split and, for
 * READY, jrpc_zmtp_ready_check; every metadata property walked with
 * jrpc_zmtp_prop_next) twice: on the input whole, and fed in pieces whose
 * sizes come from the input (down to one byte at a time), each step given
 * only the bytes received so far in a buffer of exactly that size (an
 * over-read trips ASan). Invariants: the two runs see the same events
 * (a hash of every frame and verdict); a frame never takes more than the
 * input; NEED_MORE asks for more than is there and for at most limit + 9;
 * no body above the limit is accepted; a re-encoded header decodes to the
 * same size. A broken invariant is an abort(). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jrpc_zmtp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct run {
    uint64_t hash;   /* of the events seen */
    int      verdict; /* 0 still reading, else the closing code */
} run_t;

static void mix(run_t *r, uint64_t v)
{
    r->hash = (r->hash ^ v) * 0x100000001b3ULL;
}

static void check(int ok)
{
    if (!ok)
        abort();
}

/* Decodes what is in p[0..len) from *pos on; returns when more is needed
 * or the peer is closed (r->verdict). state: 0 greeting, 1 READY, 2 open. */
static void step(const uint8_t *p, size_t len, size_t *pos, int *state, uint64_t limit, run_t *r)
{
    while (r->verdict == 0) {
        if (*state == 0) {
            const char *why = NULL;
            int rc = jrpc_zmtp_greeting_check(p, len, &why);
            if (rc == JRPC_ZMTP_NEED_MORE) {
                check(len < JRPC_ZMTP_GREETING_LEN);
                return;
            }
            if (rc < 0) {
                check(why != NULL);
                r->verdict = 1;
                mix(r, 1);
                return;
            }
            check(rc == JRPC_ZMTP_GREETING_LEN);
            *pos = JRPC_ZMTP_GREETING_LEN;
            *state = 1;
            mix(r, 2);
            continue;
        }
        jrpc_zmtp_frame_t f;
        size_t need = 0;
        ssize_t n = jrpc_zmtp_frame_decode(p + *pos, len - *pos, limit, &f, &need);
        if (n == JRPC_ZMTP_NEED_MORE) {
            check(need > len - *pos && need <= limit + 9);
            return;
        }
        if (n < 0) {
            check(n == JRPC_ZMTP_MALFORMED || n == JRPC_ZMTP_TOO_LARGE);
            r->verdict = (int)n;
            mix(r, (uint64_t)(3 - n));
            return;
        }
        check((size_t)n <= len - *pos && f.size <= limit);
        check(f.body >= p + *pos && f.body + f.size == p + *pos + (size_t)n);
        uint8_t head[9];
        size_t hl = jrpc_zmtp_frame_head(head, f.flags, f.size);
        jrpc_zmtp_frame_t g;
        size_t need2 = 0;
        uint8_t *copy = malloc(hl + f.size + 1);
        memcpy(copy, head, hl);
        if (f.size)
            memcpy(copy + hl, f.body, f.size);
        check(jrpc_zmtp_frame_decode(copy, hl + f.size, limit, &g, &need2) == (ssize_t)(hl + f.size));
        check(g.size == f.size && (g.flags & ~JRPC_ZMTP_FLAG_LONG) == (f.flags & ~JRPC_ZMTP_FLAG_LONG));
        free(copy);
        mix(r, f.flags);
        mix(r, f.size);
        for (size_t i = 0; i < f.size && i < 16; i++)
            mix(r, f.body[i]);
        *pos += (size_t)n;
        if (f.flags & JRPC_ZMTP_FLAG_COMMAND) {
            jrpc_span_t name, data;
            if (jrpc_zmtp_command_split(f.body, f.size, &name, &data) < 0) {
                r->verdict = 4;
                mix(r, 4);
                return;
            }
            check(name.n >= 1 && name.p + name.n == data.p && data.p + data.n == (const char *)f.body + f.size);
            size_t off = 0;
            jrpc_span_t pn, pv;
            int rc;
            while ((rc = jrpc_zmtp_prop_next((const uint8_t *)data.p, data.n, &off, &pn, &pv)) == 1) {
                check(off <= data.n && pn.n >= 1);
                mix(r, pn.n ^ pv.n << 8);
            }
            check(rc == 0 || rc == JRPC_ZMTP_MALFORMED);
            if (*state == 1) {
                const char *why = NULL;
                bool is_ready = name.n == 5 && memcmp(name.p, "READY", 5) == 0;
                if (!is_ready || jrpc_zmtp_ready_check((const uint8_t *)data.p, data.n, &why) < 0) {
                    check(is_ready ? why != NULL : 1);
                    r->verdict = 5;
                    mix(r, 5);
                    return;
                }
                check(rc == 0);   /* a READY that passed has well-formed metadata */
                *state = 2;
                mix(r, 6);
            }
        } else if (*state == 1) {
            r->verdict = 7;
            mix(r, 7);
            return;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint64_t limit = data[0] == 0xFF ? 65536 : (uint64_t)data[0] + 1;
    uint8_t pieces = data[1];
    data += 2;
    size -= 2;

    run_t whole = { 0xcbf29ce484222325ULL, 0 };
    {
        uint8_t *b = malloc(size ? size : 1);
        memcpy(b, data, size);
        size_t pos = 0;
        int state = 0;
        step(b, size, &pos, &state, limit, &whole);
        free(b);
    }
    run_t split = { 0xcbf29ce484222325ULL, 0 };
    {
        size_t have = 0, pos = 0, k = 0;
        int state = 0;
        while (have < size && split.verdict == 0) {
            size_t add = (size_t)((pieces >> (k++ % 8)) & 7) + 1;   /* 1..8 bytes */
            if (pieces == 0)
                add = 1;
            if (add > size - have)
                add = size - have;
            have += add;
            uint8_t *b = malloc(have);   /* exactly what is in: an over-read trips ASan */
            memcpy(b, data, have);
            step(b, have, &pos, &state, limit, &split);
            free(b);
        }
    }
    check(whole.hash == split.hash && whole.verdict == split.verdict);
    return 0;
}
