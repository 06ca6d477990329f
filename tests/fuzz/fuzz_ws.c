/* fuzz_ws — libFuzzer target for the WebSocket session (broker/front/jrpc_ws.c
 * over wslay): what a client sends after the upgrade, frames in, messages
 * and closes out.
 *
 * Input: byte 0 picks the message size limit (1..250 bytes, or 2^k up to
 * 2^15), byte 1 seeds the piece sizes of the second and third runs; the
 * rest is the client's bytes (the seeds are masked frames, many with a
 * zero mask key so that the fuzzer edits their payload as it is). Three
 * runs over them, each a fresh session:
 *   A. the bytes fed whole;
 *   B. fed in pieces (1 to 64 bytes, from byte 1), each piece addressable
 *      for exactly its size (fuzz_piece.h: a read outside it trips ASan):
 *      the same messages, the same close code and the same verdict (over
 *      or not) as A;
 *   C. in pieces too, with the server's side acting between them (a text
 *      sent, a ping, a close of its own, chosen by the piece's first
 *      byte) and every message answered from inside the callback.
 * Invariants (a broken one is an abort()): every message delivered is
 * valid UTF-8 (checked here, not with the code under test) and within the
 * limit, and none comes after the session is over or after our own close;
 * every byte written parses as whole server frames: FIN set, RSV clear,
 * unmasked, opcode text, close, ping or pong, the length in its shortest
 * form, a control frame at most 125 bytes, a text frame valid UTF-8, a
 * close 0 or >= 2 bytes with a valid code and a UTF-8 reason; at most one
 * close and nothing after it; once a feed said over (1) or failed (< 0),
 * every later feed says so too and nothing more is written. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_piece.h"
#include "jrpc_buf.h"
#include "jrpc_ws.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The harness's own loops (hashes, UTF-8, the output's frames) carry no
 * coverage callbacks, and are not inlined into code that does: they find
 * nothing new and took a sixth of the time. */
#define HARNESS __attribute__((no_sanitize("coverage"), noinline))

#define MAX_TRACK 64   /* messages remembered for the A/B comparison */

typedef struct run {
    jrpc_ws_t *ws;
    uint64_t   max_msg;
    bool       echo;       /* answer each message from inside the callback */
    bool       closed_us;  /* jrpc_ws_close was called from outside */
    unsigned   nmsgs;
    uint64_t   hash[MAX_TRACK]; /* of each message */
    jrpc_buf_t out;        /* everything written */
} run_t;

#define check(ok)                                                                       \
    do {                                                                                \
        if (!(ok)) {                                                                    \
            fprintf(stderr, "invariant failed: %s (fuzz_ws.c:%d)\n", #ok, __LINE__);    \
            abort();                                                                    \
        }                                                                               \
    } while (0)

HARNESS static uint64_t fnv(const char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)p[i]) * 0x100000001b3ULL;
    return h ^ n;
}

/* RFC 3629 UTF-8: no overlongs, no surrogates, nothing above U+10FFFF. */
HARNESS static bool utf8_ok(const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = p[i];
        size_t k;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            k = 1, cp = c & 0x1f, min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            k = 2, cp = c & 0x0f, min = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
            k = 3, cp = c & 0x07, min = 0x10000;
        } else {
            return false;
        }
        if (n - i - 1 < k)
            return false;
        for (size_t j = 1; j <= k; j++) {
            if ((p[i + j] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (p[i + j] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += k + 1;
    }
    return true;
}

static void on_message(void *arg, const char *p, size_t n)
{
    run_t *r = arg;
    check(!r->closed_us);
    check(!jrpc_ws_over(r->ws));
    check(n <= r->max_msg);
    check(utf8_ok((const uint8_t *)p, n));
    if (r->nmsgs < MAX_TRACK)
        r->hash[r->nmsgs] = fnv(p, n);
    r->nmsgs++;
    if (r->echo) {
        int rc = jrpc_ws_send_text(r->ws, p, n);
        check(rc == 0 || rc == -EPIPE);
    }
}

static int on_write(void *arg, const char *p, size_t n)
{
    run_t *r = arg;
    check(n > 0);
    return jrpc_buf_append(&r->out, p, n) < 0 ? -1 : 0;
}

HARNESS static bool close_code_ok(uint16_t c)
{
    return (c >= 1000 && c <= 1003) || (c >= 1007 && c <= 1011) || (c >= 3000 && c <= 4999);
}

/* Every byte written is whole, well-formed server frames; at most one
 * close, and it is the last frame. */
HARNESS static void check_output(const run_t *r)
{
    const uint8_t *p = (const uint8_t *)r->out.p;
    size_t n = r->out.len, i = 0;
    bool closed = false;
    while (i < n) {
        check(!closed);
        check(n - i >= 2);
        uint8_t b0 = p[i], b1 = p[i + 1];
        check(b0 & 0x80);            /* FIN: we never fragment */
        check((b0 & 0x70) == 0);     /* no RSV bit */
        check((b1 & 0x80) == 0);     /* a server never masks */
        uint8_t op = b0 & 0x0f;
        check(op == 1 || op == 8 || op == 9 || op == 10);
        uint64_t len = b1 & 0x7f;
        i += 2;
        if (len == 126) {
            check(n - i >= 2);
            len = (uint64_t)p[i] << 8 | p[i + 1];
            check(len >= 126);
            i += 2;
        } else if (len == 127) {
            check(n - i >= 8);
            len = 0;
            for (int k = 0; k < 8; k++)
                len = len << 8 | p[i + k];
            check(len >= 65536 && !(len >> 63));
            i += 8;
        }
        check(n - i >= len);
        const uint8_t *pl = p + i;
        if (op >= 8)
            check(len <= 125);
        if (op == 1)
            check(utf8_ok(pl, (size_t)len));
        if (op == 8) {
            check(len == 0 || len >= 2);
            if (len >= 2) {
                check(close_code_ok((uint16_t)(pl[0] << 8 | pl[1])));
                check(utf8_ok(pl + 2, (size_t)len - 2));
            }
            closed = true;
        }
        i += (size_t)len;
    }
}

static const char *const server_texts[] = {
    "{\"jsonrpc\":\"2.0\",\"result\":1,\"id\":1}", "", "\xc3\xa9\xf0\x9f\x98\x80",
};

/* One run over p[0, n): whole (seed 0) or in pieces from seed; act: the
 * server's side between pieces. Returns the last feed's result. */
static int one_run(run_t *r, const uint8_t *p, size_t n, uint8_t seed, bool act)
{
    static fuzz_piece_t piece;   /* one allocation for the process (fuzz_piece.h) */
    check(fuzz_piece_room(&piece, n) == 0);
    jrpc_ws_opts_t o = { .max_msg = r->max_msg };
    jrpc_ws_cbs_t cbs = { .message = on_message, .write = on_write };
    r->ws = jrpc_ws_new(&o, &cbs, r);
    check(r->ws != NULL);
    uint32_t rng = seed * 2654435761u + 1;
    size_t off = 0;
    int rc = 0, ended = 0;
    while (off < n) {
        size_t k = n - off;
        if (seed != 0) {
            rng = rng * 1103515245u + 12345u;
            size_t want = 1 + (rng >> 16) % 64;
            if (want < k)
                k = want;
        }
        if (act && !ended) {
            uint8_t a = p[off];
            size_t before = r->out.len;
            int arc = 0;
            switch (a & 0x1f) {
            case 0:
                arc = jrpc_ws_send_text(r->ws, server_texts[a >> 5 & 1],
                                        strlen(server_texts[a >> 5 & 1]));
                break;
            case 1:
                arc = jrpc_ws_ping(r->ws);
                break;
            case 2:
                arc = jrpc_ws_close(r->ws, (a & 0x20) ? JRPC_WS_POLICY : JRPC_WS_GOING_AWAY,
                                    (a & 0x40) ? "fuzz" : NULL);
                r->closed_us = true;
                break;
            default:
                break;
            }
            check(arc == 0 || arc == -EPIPE);
            if (arc == -EPIPE)
                check(r->out.len == before);
        }
        const char *blk = fuzz_piece_put(&piece, p + off, k);
        size_t before = r->out.len;
        int frc = jrpc_ws_feed(r->ws, blk, k);
        if (ended) {   /* over already: it stays over, and silent */
            check(frc != 0);
            check(r->out.len == before);
        }
        if (frc != 0)
            ended = 1;
        check(frc == 0 || frc == 1 || frc < 0);
        check(frc != 1 || jrpc_ws_over(r->ws));
        rc = frc;
        off += k;
    }
    check_output(r);
    uint16_t sent = jrpc_ws_code_sent(r->ws);
    check(sent == 0 || close_code_ok(sent) || sent == 1005);   /* 1005: a close without a code */
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint64_t max_msg = data[0] < 250 ? data[0] + 1u : 1ull << (data[0] - 240);
    uint8_t seed = data[1] | 1;   /* 0 is "whole" */
    const uint8_t *p = data + 2;
    size_t n = size - 2;

    /* Kept between inputs (all but the output emptied here): their output
     * buffers grow once, not in every run of every input. */
    static run_t a, b, c;
    run_t *const runs[] = { &a, &b, &c };
    for (size_t i = 0; i < 3; i++) {
        jrpc_buf_t out = runs[i]->out;
        *runs[i] = (run_t){ .max_msg = max_msg, .out = out };
        jrpc_buf_reset(&runs[i]->out);
    }
    int ra = one_run(&a, p, n, 0, false);
    int rb = one_run(&b, p, n, seed, false);
    /* The pieces change nothing a client relies on: the same messages, the
     * same close. (Not the same bytes: wslay drops a pong still queued when
     * a close is queued behind it, so a ping just before a fault is
     * answered only when the two came in different reads.) */
    check(a.nmsgs == b.nmsgs);
    for (unsigned i = 0; i < a.nmsgs && i < MAX_TRACK; i++)
        check(a.hash[i] == b.hash[i]);
    check(jrpc_ws_code_sent(a.ws) == jrpc_ws_code_sent(b.ws));
    check((ra != 0) == (rb != 0));
    c.echo = true;
    one_run(&c, p, n, seed, true);
    jrpc_ws_destroy(&a.ws);
    jrpc_ws_destroy(&b.ws);
    jrpc_ws_destroy(&c.ws);
    return 0;
}
