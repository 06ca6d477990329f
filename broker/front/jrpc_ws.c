/* jrpc_ws — see jrpc_ws.h.
 *
 * wslay's event API pulls bytes through a recv callback and pushes frames
 * through a send callback. Here recv hands out the bytes of the current
 * jrpc_ws_feed() call and then says "would block", and send gathers what
 * wslay emits in one burst (it gives a frame's header and its payload in
 * two calls) and hands it to the front's write callback in one piece at
 * the end of the burst: one write per burst, not two per frame (two
 * writes per answer made a WebSocket batch cost about twice an HTTP one,
 * bench/README.md, "WebSocket"). After every call into wslay nothing
 * waits inside the session.
 *
 * A whole text frame in one feed, with FIN, while wslay stands between
 * frames and no fragmented message is open, is read here, not by wslay
 * (issue 35): unmasked 64 or 128 (AVX2) bytes at a time into one buffer the session
 * keeps, its UTF-8 checked only when a byte is not ASCII, and handed on as
 * wslay would have. wslay copied each frame into its own buffer and
 * unmasked it byte by byte, which made a message cost the broker more
 * than an HTTP request (bench/README.md, "WebSocket"). Every other frame
 * (control frames, fragments, a frame split across reads, one over the
 * limit, RSV bits, unmasked) and everything after it in the feed still
 * goes to wslay, whose answers to them stand. */
#include "jrpc_ws.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <wslay/wslay.h>

#include "jrpc_buf.h"
#include "jrpc_json.h"

#define OUT_KEEP 16384   /* output buffer capacity kept between bursts */
#define MSG_KEEP 65536   /* unmasked-message buffer capacity kept between feeds */

/* Frame headers, read ahead of wslay: wslay's frame reader fails hard on a
 * control frame over 125 bytes or fragmented, a 64-bit length with its top
 * bit set, and a length not in its shortest form (wslay_event_recv returns
 * an error, and the front would reset the connection). The front's contract
 * (docs/WEBSOCKET.md) is a close 1002 for each: a frame whose header is one
 * of these is not given to wslay, and the session closes 1002 instead.
 *
 * The peer's close frame is not given to wslay either, but held here whole
 * (at most 131 bytes) and answered by jrpc_ws_feed: wslay answers a close of
 * one byte with a close without a status, and checks a close's reason for
 * UTF-8 skipping the first two bytes of every piece it reads, so that a
 * good reason split across reads got 1007 and a bad one could pass (found
 * by fuzz_ws). Resumable across feeds: a header may come a byte at a time. */
typedef struct hdr_scan {
    uint8_t  h[10];   /* the current header's bytes so far, up to its extended length */
    uint8_t  hn;      /* ... how many */
    uint8_t  need;    /* bytes of header to read (2, then 2 + the extended length's) */
    uint8_t  mask;    /* mask key bytes still to pass */
    uint64_t skip;    /* payload bytes of the current frame still to pass */
    bool     bad;     /* a malformed header was seen: nothing from its frame on is read */
    bool     closing; /* inside the peer's close frame: held here, not given to wslay */
    bool     closed;  /* ... and all of it is in: cl[0, cl_n) is its payload, unmasked */
    bool     frag;    /* a data message is open: its first frame had no FIN */
    uint8_t  key[4];  /* the close frame's mask key */
    uint8_t  cl[125]; /* its payload */
    uint8_t  cl_n;    /* ... bytes so far */
} hdr_scan_t;

struct jrpc_ws {
    wslay_event_context_ptr ctx;
    jrpc_ws_cbs_t cbs;
    void         *arg;
    const char   *in;          /* bytes of the current feed not yet given to wslay */
    size_t        in_n;
    bool          awaiting_pong;
    bool          failed;      /* cbs.write refused, or out of memory */
    bool          feeding;     /* inside jrpc_ws_feed: sends are queued, written at its end */
    jrpc_buf_t    out;         /* frames of the current burst, written at its end */
    uint16_t      close_code;  /* a close asked for while feeding: queued at its end */
    char          close_why[124]; /* ... its reason (a close frame holds 123 bytes) */
    hdr_scan_t    scan;        /* frame headers, checked before wslay reads them */
    bool          between;     /* wslay has read whole frames only, no message open */
    uint64_t      max_msg;     /* opts.max_msg */
    jrpc_buf_t    msg;         /* a frame read here: its payload, unmasked */
    bool          peer_closed; /* the peer's close came, and was good */
    uint16_t      peer_code;   /* ... its code (0: none) */
};

/* True when the header in s->h (its first two bytes, and its extended
 * length once all in) is one wslay must not be given. */
static bool header_bad(const hdr_scan_t *s)
{
    bool fin = s->h[0] & 0x80, control = s->h[0] & 0x08;
    uint8_t len7 = s->h[1] & 0x7f;
    if (control && (!fin || len7 > 125))
        return true;
    if (s->hn < s->need)
        return false;   /* the extended length is not all in yet */
    if (s->need == 4)
        return ((uint16_t)s->h[2] << 8 | s->h[3]) < 126;
    if (s->need == 10)
        return (s->h[2] & 0x80) || (s->h[2] | s->h[3] | s->h[4] | s->h[5] | s->h[6] | s->h[7]) == 0;
    return false;
}

/* Reads the frames in p[0, n) ahead of wslay. Returns how many of the bytes
 * wslay is to read: n, or the offset in p of the first byte of a malformed
 * frame (s->bad) or of the peer's close frame (s->closing; s->closed once
 * it is all in), 0 when that began in an earlier feed. Nothing after either
 * is read, ever. */
static size_t scan_headers(hdr_scan_t *s, const uint8_t *p, size_t n)
{
    size_t i = 0, keep = s->closing ? 0 : n;
    while (i < n && !s->bad && !s->closed) {
        if (s->closing && (s->mask > 0 || s->skip > 0)) {   /* the close's key, payload */
            if (s->mask > 0)
                s->key[4 - s->mask--] = p[i++];
            else
                s->skip--, s->cl[s->cl_n] = p[i++] ^ s->key[s->cl_n % 4], s->cl_n++;
            s->closed = s->mask == 0 && s->skip == 0;
            continue;
        }
        if (s->skip > 0 || s->mask > 0) {   /* inside a frame: its mask key, its payload */
            size_t k = s->mask;
            if (k > n - i)
                k = n - i;
            s->mask -= (uint8_t)k;
            i += k;
            uint64_t left = n - i;
            uint64_t m = s->skip < left ? s->skip : left;
            s->skip -= m;
            i += (size_t)m;
            continue;
        }
        if (s->hn == 0) {
            s->need = 2;
            if ((p[i] & 0x0f) == 0x8) {   /* a close: from here on, held */
                s->closing = true;
                keep = i;
            }
        }
        size_t at = i;
        s->h[s->hn++] = p[i++];
        if (s->hn < s->need)
            continue;
        if (s->hn == 2) {
            uint8_t len7 = s->h[1] & 0x7f;
            s->need = len7 == 126 ? 4 : len7 == 127 ? 10 : 2;
        }
        if (header_bad(s)) {
            s->bad = true;
            size_t start = at + 1 >= s->hn ? at + 1 - s->hn : 0;   /* its first byte */
            return start < keep ? start : keep;
        }
        if (s->hn < s->need)
            continue;
        uint8_t len7 = s->h[1] & 0x7f;
        if (len7 < 126) {
            s->skip = len7;
        } else {
            s->skip = 0;
            for (uint8_t k = 2; k < s->need; k++)
                s->skip = s->skip << 8 | s->h[k];
        }
        s->mask = (s->h[1] & 0x80) ? 4 : 0;
        s->hn = 0;
        uint8_t op = s->h[0] & 0x0f;
        if (op == 0 && (s->h[0] & 0x80))
            s->frag = false;   /* the last fragment */
        else if (op == 1 || op == 2)
            s->frag = !(s->h[0] & 0x80);
        s->closed = s->closing && s->mask == 0 && s->skip == 0;
    }
    return keep;
}

/* The close code wslay's reader accepts from a peer (RFC 6455 7.4). */
static bool code_valid(uint16_t c)
{
    return (c >= 1000 && c <= 1011 && c != 1004 && c != 1005 && c != 1006) ||
           (c >= 3000 && c <= 4999);
}

/* The peer's close frame is all in (the scanner's): the close to answer it
 * with, queued as any close asked for while feeding. A close masked, without
 * RSV bits, not of one byte, with a valid code is echoed (its code and
 * reason; no status for none) unless its reason is not UTF-8 (1007); any
 * other gets 1002. */
static void peer_close(jrpc_ws_t *ws)
{
    const hdr_scan_t *s = &ws->scan;
    uint16_t code = s->cl_n >= 2 ? (uint16_t)(s->cl[0] << 8 | s->cl[1]) : 0;
    ws->close_why[0] = '\0';
    if ((s->h[0] & 0x70) || !(s->h[1] & 0x80) || s->cl_n == 1 ||
        (s->cl_n >= 2 && !code_valid(code))) {
        ws->close_code = JRPC_WS_PROTOCOL;
    } else if (s->cl_n > 2 && !jrpc_json_utf8_valid((const char *)s->cl + 2, s->cl_n - 2u)) {
        ws->close_code = JRPC_WS_INVALID_DATA;
    } else {
        ws->peer_closed = true;
        ws->peer_code = code;
        ws->close_code = code ? code : WSLAY_CODE_NO_STATUS_RCVD;   /* no status: none back */
        if (s->cl_n > 2) {
            memcpy(ws->close_why, s->cl + 2, s->cl_n - 2u);
            ws->close_why[s->cl_n - 2] = '\0';
        }
    }
}

static ssize_t on_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags,
                       void *user)
{
    (void)flags;
    jrpc_ws_t *ws = user;
    if (ws->in_n == 0) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    size_t n = len < ws->in_n ? len : ws->in_n;
    memcpy(buf, ws->in, n);
    ws->in += n;
    ws->in_n -= n;
    return (ssize_t)n;
}

static ssize_t on_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *user)
{
    (void)flags;
    jrpc_ws_t *ws = user;
    if (ws->failed || jrpc_buf_append(&ws->out, data, len) < 0) {
        ws->failed = true;
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
    }
    return (ssize_t)len;
}

/* UTF-8, the ASCII words skipped: the first byte with its top bit set
 * begins a character, where the full check starts. */
static bool utf8_ok(const char *p, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        if (w & 0x8080808080808080ull)
            break;
    }
    return jrpc_json_utf8_valid(p + i, n - i);
}

/* A whole text message in, from wslay or read here; ascii: all its bytes
 * are known to be below 0x80 (valid UTF-8, no check). */
static void text_message(jrpc_ws_t *ws, const char *p, size_t n, bool ascii)
{
    /* wslay gives an empty message as NULL (pointer arithmetic on
     * which is undefined: found by fuzz_ws); it is "" here. */
    if (n == 0) {
        if (!wslay_event_get_close_sent(ws->ctx) && !ws->close_code)
            ws->cbs.message(ws->arg, "", 0);
        return;
    }
    if (!ascii && !utf8_ok(p, n)) {
        jrpc_ws_close(ws, JRPC_WS_INVALID_DATA, "invalid UTF-8");
        return;
    }
    if (wslay_event_get_close_sent(ws->ctx) || ws->close_code)
        return;   /* closing: no new work */
    ws->cbs.message(ws->arg, p, n);
}

static void on_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *m,
                   void *user)
{
    (void)ctx;
    jrpc_ws_t *ws = user;
    switch (m->opcode) {
    case WSLAY_TEXT_FRAME:
        text_message(ws, (const char *)m->msg, m->msg_length, false);
        return;
    case WSLAY_BINARY_FRAME:
        jrpc_ws_close(ws, JRPC_WS_UNSUPPORTED, "text messages only");
        return;
    case WSLAY_PONG:
        ws->awaiting_pong = false;
        return;
    default:   /* ping (wslay answers it); a close never reaches wslay (scan_headers) */
        return;
    }
}

jrpc_ws_t *jrpc_ws_new(const jrpc_ws_opts_t *opts, const jrpc_ws_cbs_t *cbs, void *arg)
{
    static const struct wslay_event_callbacks callbacks = {
        .recv_callback = on_recv, .send_callback = on_send, .on_msg_recv_callback = on_msg,
    };
    jrpc_ws_t *ws = calloc(1, sizeof *ws);
    if (ws == NULL)
        return NULL;
    ws->cbs = *cbs;
    ws->arg = arg;
    ws->between = true;
    ws->max_msg = opts->max_msg;
    jrpc_buf_init(&ws->out);
    jrpc_buf_init(&ws->msg);
    if (wslay_event_context_server_init(&ws->ctx, &callbacks, ws) != 0) {
        free(ws);
        return NULL;
    }
    wslay_event_config_set_max_recv_msg_length(ws->ctx, opts->max_msg);
    return ws;
}

void jrpc_ws_destroy(jrpc_ws_t **self_p)
{
    jrpc_ws_t *ws = *self_p;
    if (ws == NULL)
        return;
    *self_p = NULL;
    wslay_event_context_free(ws->ctx);
    jrpc_buf_dispose(&ws->out);
    jrpc_buf_dispose(&ws->msg);
    free(ws);
}

/* Writes what wslay has queued (not from inside wslay_event_recv: a
 * message callback's sends go out when the feed ends); the result every
 * entry point returns. */
static int flush(jrpc_ws_t *ws)
{
    if (ws->feeding)
        return ws->failed ? -EPIPE : 0;
    if (!ws->failed && wslay_event_want_write(ws->ctx) && wslay_event_send(ws->ctx) != 0)
        ws->failed = true;
    if (!ws->failed && ws->out.len > 0 && ws->cbs.write(ws->arg, ws->out.p, ws->out.len) < 0)
        ws->failed = true;
    if (ws->out.cap > OUT_KEEP)
        jrpc_buf_dispose(&ws->out);   /* an idle session holds little */
    else
        jrpc_buf_reset(&ws->out);
    if (ws->failed)
        return -EPIPE;
    return jrpc_ws_over(ws);
}

static int queue_close(jrpc_ws_t *ws, uint16_t code, const char *reason)
{
    if (code == WSLAY_CODE_NO_STATUS_RCVD)
        code = 0;   /* a close without a status */
    int rc = wslay_event_queue_close(ws->ctx, code, (const uint8_t *)reason,
                                     reason ? strlen(reason) : 0);
    if (rc == WSLAY_ERR_NOMEM)
        return -ENOMEM;
    rc = flush(ws);
    return rc < 0 ? rc : 0;
}

/* Sixteen bytes as one value (GCC and Clang vector extension: SSE2 on
 * x86-64, plain words elsewhere); loaded and stored through memcpy, so
 * alignment does not matter. */
typedef uint8_t v16_t __attribute__((vector_size(16)));

/* The bytes after the vector loops: 16 at a time, then one by one; acc
 * gathers every unmasked byte's bits. */
static uint8_t unmask_tail(uint8_t *dst, const uint8_t *src, size_t i, size_t n,
                           const uint8_t key[4], v16_t k, v16_t *acc)
{
    for (; i + 16 <= n; i += 16) {
        v16_t a;
        memcpy(&a, src + i, 16);
        a ^= k;
        memcpy(dst + i, &a, 16);
        *acc |= a;
    }
    uint8_t hi = 0;
    for (; i < n; i++) {
        dst[i] = src[i] ^ key[i & 3];
        hi |= dst[i];
    }
    return hi;
}

static bool all_ascii(v16_t acc, uint8_t hi)
{
    uint64_t w[2];
    memcpy(w, &acc, 16);
    return !((w[0] | w[1]) & 0x8080808080808080ull) && !(hi & 0x80);
}

/* The unmasking loop of both widths: four vectors of type V a turn, XORed
 * with k (the key spread over a vector), their bits OR-ed into acc (a byte
 * above 0x7f shows there); i is left at the first byte of the tail. */
#define UNMASK_TURNS(V, dst, src, n, i, k, acc)                  \
    for (; (i) + 4 * sizeof(V) <= (n); (i) += 4 * sizeof(V)) {   \
        V v_[4];                                                 \
        memcpy(v_, (src) + (i), sizeof v_);                      \
        v_[0] ^= (k);                                            \
        v_[1] ^= (k);                                            \
        v_[2] ^= (k);                                            \
        v_[3] ^= (k);                                            \
        memcpy((dst) + (i), v_, sizeof v_);                      \
        (acc) |= (v_[0] | v_[1]) | (v_[2] | v_[3]);              \
    }

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_AVX2_PATH 1
typedef uint8_t v32_t __attribute__((vector_size(32)));

/* unmask() with AVX2, 128 bytes a turn: half the instructions per byte. */
__attribute__((target("avx2"))) static bool unmask_avx2(uint8_t *dst, const uint8_t *src, size_t n,
                                                        const uint8_t key[4])
{
    v32_t k, acc = { 0 };
    for (size_t j = 0; j < 32; j++)
        k[j] = key[j & 3];
    size_t i = 0;
    UNMASK_TURNS(v32_t, dst, src, n, i, k, acc);
    uint8_t w[32];
    memcpy(w, &acc, 32);
    v16_t k16, acc16;
    memcpy(&k16, &k, 16);
    memcpy(&acc16, w, 16);
    v16_t hi16;
    memcpy(&hi16, w + 16, 16);
    acc16 |= hi16;
    uint8_t hi = unmask_tail(dst, src, i, n, key, k16, &acc16);
    return all_ascii(acc16, hi);
}
#endif

/* dst[i] = src[i] ^ key[i % 4] for i < n; returns whether every byte of
 * dst is below 0x80 (then it is UTF-8 without a further look). One pass,
 * 64 bytes a turn (128 with AVX2, when the CPU has it). */
static bool unmask(uint8_t *dst, const uint8_t *src, size_t n, const uint8_t key[4])
{
#ifdef HAVE_AVX2_PATH
    static int avx2 = -1;
    if (avx2 < 0)
        avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
    if (avx2)
        return unmask_avx2(dst, src, n, key);
#endif
    v16_t k, acc = { 0 };
    for (size_t j = 0; j < 16; j++)
        k[j] = key[j & 3];
    size_t i = 0;
    UNMASK_TURNS(v16_t, dst, src, n, i, k, acc);
    uint8_t hi = unmask_tail(dst, src, i, n, key, k, &acc);
    return all_ascii(acc, hi);
}

/* The whole text frames at the start of f[0, n) that wslay need not read
 * (the file's comment), each handed on as a message; returns the bytes
 * they took. frag: whether a data message is open at f. */
static size_t read_frames(jrpc_ws_t *ws, const uint8_t *f, size_t n, bool frag)
{
    size_t pos = 0;
    while (n - pos >= 6 && !frag && !ws->failed && !ws->close_code &&
           wslay_event_want_read(ws->ctx)) {
        const uint8_t *h = f + pos;
        size_t hl = 2, avail = n - pos;
        uint64_t len = h[1] & 0x7f;
        if (h[0] != 0x81 || !(h[1] & 0x80))
            break;   /* not a text frame with FIN, masked, without RSV bits */
        if (len == 126) {
            hl = 4;
            len = (uint64_t)h[2] << 8 | h[3];
        } else if (len == 127) {
            if (avail < 10)
                break;
            hl = 10;
            len = 0;
            for (size_t k = 2; k < 10; k++)
                len = len << 8 | h[k];
        }
        if (avail < hl + 4 || len > avail - hl - 4 || len > ws->max_msg)
            break;   /* split across feeds, or over the limit (wslay's close 1009) */
        const uint8_t *key = h + hl, *src = key + 4;
        jrpc_buf_reset(&ws->msg);
        if (jrpc_buf_reserve(&ws->msg, (size_t)len + 1) < 0) {
            ws->failed = true;
            break;
        }
        uint8_t *dst = (uint8_t *)ws->msg.p;
        bool ascii = unmask(dst, src, (size_t)len, key);
        pos += hl + 4 + (size_t)len;
        text_message(ws, (const char *)dst, (size_t)len, ascii);
    }
    if (ws->msg.cap > MSG_KEEP)
        jrpc_buf_dispose(&ws->msg);
    return pos;
}

int jrpc_ws_feed(jrpc_ws_t *ws, const char *p, size_t n)
{
    if (ws->failed)
        return -EPIPE;
    bool was_done = ws->scan.bad || ws->scan.closed, frag = ws->scan.frag;
    size_t good = was_done ? 0 : scan_headers(&ws->scan, (const uint8_t *)p, n);
    ws->feeding = true;
    size_t mine = ws->between ? read_frames(ws, (const uint8_t *)p, good, frag) : 0;
    ws->in = p + mine;
    ws->in_n = good - mine;
    /* wslay is between frames after this feed when the scanner is. */
    ws->between = ws->scan.hn == 0 && ws->scan.mask == 0 && ws->scan.skip == 0 && !ws->scan.frag;
    /* wslay stops reading after a close it received or sent, and after a
     * protocol error (for which it queues a close 1002, or 1009 for a
     * message over the limit): what is left of the bytes is not read. */
    while (ws->in_n && wslay_event_want_read(ws->ctx)) {
        size_t before = ws->in_n;
        if (wslay_event_recv(ws->ctx) != 0) {
            ws->failed = true;
            break;
        }
        if (ws->in_n == before)
            break;   /* wslay took nothing: it wants no more */
    }
    /* A malformed header ends the session here, as wslay's own protocol
     * errors do, and the peer's close is answered (unless a close is on its
     * way already: wslay's, or one a message asked for). */
    if ((ws->scan.bad || ws->scan.closed) && !was_done && !ws->failed &&
        wslay_event_want_read(ws->ctx) && !ws->close_code) {
        wslay_event_shutdown_read(ws->ctx);
        if (ws->scan.bad) {
            ws->close_code = JRPC_WS_PROTOCOL;
            ws->close_why[0] = '\0';
        } else {
            peer_close(ws);
        }
    }
    ws->in = NULL;
    ws->in_n = 0;
    ws->feeding = false;
    int rc = flush(ws);
    /* A close asked for during the feed follows the messages the feed
     * queued: wslay sends control frames first and drops data queued after
     * its close, which would lose answers already given. */
    if (rc >= 0 && ws->close_code) {
        uint16_t code = ws->close_code;
        ws->close_code = 0;
        if ((rc = queue_close(ws, code, ws->close_why[0] ? ws->close_why : NULL)) >= 0)
            rc = jrpc_ws_over(ws);
    }
    return rc;
}

int jrpc_ws_send_text(jrpc_ws_t *ws, const char *p, size_t n)
{
    int rc;
    if (ws->failed)
        return -EPIPE;
    if (wslay_event_get_close_sent(ws->ctx) || ws->close_code)
        return -EPIPE;
    if (!wslay_event_want_write(ws->ctx)) {
        /* Nothing of wslay's waits: the frame goes straight into the burst,
         * one copy (wslay's queue took a copy, and its sender another). */
        uint8_t h[10];
        size_t hl = 2;
        h[0] = 0x81;   /* FIN, text; a server's frames are not masked */
        if (n < 126) {
            h[1] = (uint8_t)n;
        } else if (n < 65536) {
            h[1] = 126;
            h[2] = (uint8_t)(n >> 8);
            h[3] = (uint8_t)n;
            hl = 4;
        } else {
            h[1] = 127;
            for (size_t k = 0; k < 8; k++)
                h[2 + k] = (uint8_t)((uint64_t)n >> (56 - 8 * k));
            hl = 10;
        }
        if (ws->cbs.write2 && !ws->feeding && ws->out.len == 0) {
            if (ws->cbs.write2(ws->arg, (const char *)h, hl, p, n) < 0) {
                ws->failed = true;
                return -EPIPE;
            }
            return 0;
        }
        if (jrpc_buf_reserve(&ws->out, hl + n) < 0)
            return -ENOMEM;
        jrpc_buf_append(&ws->out, h, hl);
        jrpc_buf_append(&ws->out, p, n);
        rc = flush(ws);
        return rc < 0 ? rc : 0;
    }
    struct wslay_event_msg m = { WSLAY_TEXT_FRAME, (const uint8_t *)p, n };
    rc = wslay_event_queue_msg(ws->ctx, &m);
    if (rc == WSLAY_ERR_NOMEM)
        return -ENOMEM;
    if (rc != 0)
        return -EPIPE;
    rc = flush(ws);
    return rc < 0 ? rc : 0;
}

int jrpc_ws_ping(jrpc_ws_t *ws)
{
    if (ws->failed || wslay_event_get_close_sent(ws->ctx) || ws->close_code)
        return -EPIPE;
    struct wslay_event_msg m = { WSLAY_PING, (const uint8_t *)"jrpc", 4 };
    if (wslay_event_queue_msg(ws->ctx, &m) != 0)
        return -ENOMEM;
    ws->awaiting_pong = true;
    int rc = flush(ws);
    return rc < 0 ? rc : 0;
}

bool jrpc_ws_awaiting_pong(const jrpc_ws_t *ws)
{
    return ws->awaiting_pong;
}

int jrpc_ws_close(jrpc_ws_t *ws, uint16_t code, const char *reason)
{
    if (ws->failed)
        return -EPIPE;
    if (wslay_event_get_close_sent(ws->ctx) || ws->close_code)
        return 0;
    /* After a close, nothing more is taken from the peer (RFC 6455 7.1.1:
     * the server may close the TCP connection once its close is out). */
    wslay_event_shutdown_read(ws->ctx);
    if (ws->feeding) {   /* queued when the feed ends, after its messages */
        ws->close_code = code;
        snprintf(ws->close_why, sizeof ws->close_why, "%s", reason ? reason : "");
        return 0;
    }
    return queue_close(ws, code, reason);
}

bool jrpc_ws_over(const jrpc_ws_t *ws)
{
    if (ws->failed)
        return true;
    /* Our close is written (wslay wants no more writes once it is out). */
    return wslay_event_get_close_sent(ws->ctx) && !wslay_event_want_write(ws->ctx);
}

uint16_t jrpc_ws_code_sent(const jrpc_ws_t *ws)
{
    return wslay_event_get_close_sent(ws->ctx) ? wslay_event_get_status_code_sent(ws->ctx) : 0;
}

uint16_t jrpc_ws_code_received(const jrpc_ws_t *ws)
{
    return ws->peer_closed ? ws->peer_code : 0;
}

int jrpc_ws_accept_key(const char *key, size_t n, char out[29])
{
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    unsigned char raw[18];
    /* 24 base64 characters ending in "==" decode to exactly 16 bytes. */
    if (n != 24 || key[22] != '=' || key[23] != '=' ||
        EVP_DecodeBlock(raw, (const unsigned char *)key, 24) != 18)
        return -EINVAL;
    for (size_t i = 0; i < 22; i++) {
        char c = key[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '+' || c == '/'))
            return -EINVAL;
    }
    unsigned char cat[24 + sizeof guid - 1], md[SHA_DIGEST_LENGTH];
    memcpy(cat, key, 24);
    memcpy(cat + 24, guid, sizeof guid - 1);
    SHA1(cat, sizeof cat, md);
    EVP_EncodeBlock((unsigned char *)out, md, SHA_DIGEST_LENGTH);   /* 28 chars and a NUL */
    return 0;
}
