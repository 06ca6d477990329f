/* io/jrpc_zmtp: the decoder as pure code (every split, every prefix, inputs
 * at the end of their buffer so an over-read trips ASan), then the server on
 * a libuv loop in this thread against real libzmq DEALER and REQ sockets and
 * raw TCP peers. Ports 43100-43199. */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <cmocka.h>
#include <uv.h>
#include <zmq.h>

#include "jrpc_zmtp.h"

/* ---- the decoder ------------------------------------------------------- */

/* A copy of p[0..n) at the very end of a heap block. */
static uint8_t *at_end(const void *p, size_t n)
{
    uint8_t *b = malloc(n ? n : 1);
    assert_non_null(b);
    memcpy(b, p, n);
    return b;
}

/* A client's greeting as libzmq 4.x sends it. */
static void client_greeting(uint8_t g[64])
{
    memset(g, 0, 64);
    g[0] = 0xFF;
    g[8] = 1;
    g[9] = 0x7F;
    g[10] = 3;
    g[11] = 1;
    memcpy(g + 12, "NULL", 4);
}

static void test_greeting_prefixes(void **state)
{
    (void)state;
    uint8_t g[64];
    client_greeting(g);
    const char *why = NULL;
    for (size_t n = 0; n <= 64; n++) {
        uint8_t *b = at_end(g, n);
        int rc = jrpc_zmtp_greeting_check(b, n, &why);
        assert_int_equal(rc, n < 64 ? JRPC_ZMTP_NEED_MORE : 64);
        free(b);
    }
    /* Ours is a valid greeting too (as-server differs, ignored); 3.0 passes. */
    assert_int_equal(jrpc_zmtp_greeting_check(jrpc_zmtp_greeting, 64, &why), 64);
    g[11] = 0;
    assert_int_equal(jrpc_zmtp_greeting_check(g, 64, &why), 64);
}

static void bad_greeting(size_t at, uint8_t value)
{
    uint8_t g[64];
    client_greeting(g);
    g[at] = value;
    const char *why = NULL;
    for (size_t n = 0; n <= 64; n++) {
        uint8_t *b = at_end(g, n);
        int rc = jrpc_zmtp_greeting_check(b, n, &why);
        /* refused as soon as the bad byte is in, not before */
        assert_int_equal(rc, n <= at ? JRPC_ZMTP_NEED_MORE : JRPC_ZMTP_MALFORMED);
        free(b);
    }
    assert_non_null(why);
}

static void test_greeting_bad(void **state)
{
    (void)state;
    bad_greeting(0, 0x01);   /* ZMTP 1.0: a short identity frame */
    bad_greeting(9, 0x00);   /* ZMTP 1.0 with a long identity */
    bad_greeting(10, 1);     /* ZMTP 2.0 (libzmq 3.x) */
    bad_greeting(10, 4);     /* a future major version */
    bad_greeting(12, 'C');   /* CURVE */
    bad_greeting(13, 'L');   /* PLAIN-ish */
    bad_greeting(20, 'x');   /* NULL with junk padding */
}

/* Decodes the frame whole and at every prefix. */
static void frame_splits(const uint8_t *p, size_t n, uint64_t max, jrpc_zmtp_frame_t *out)
{
    for (size_t k = 0; k < n; k++) {
        uint8_t *b = at_end(p, k);
        jrpc_zmtp_frame_t f;
        size_t need = 0;
        ssize_t rc = jrpc_zmtp_frame_decode(b, k, max, &f, &need);
        assert_int_equal(rc, JRPC_ZMTP_NEED_MORE);
        assert_true(need > k && need <= n);
        free(b);
    }
    uint8_t *b = at_end(p, n);
    size_t need = 0;
    assert_int_equal(jrpc_zmtp_frame_decode(b, n, max, out, &need), (ssize_t)n);
    /* the body points into the input: compare while it lives */
    assert_true(out->body >= b && out->body + out->size == b + n);
    free(b);
}

static void test_frame_short_long(void **state)
{
    (void)state;
    uint8_t buf[9 + 300];
    jrpc_zmtp_frame_t f;
    /* short, MORE */
    buf[0] = JRPC_ZMTP_FLAG_MORE;
    buf[1] = 3;
    memcpy(buf + 2, "abc", 3);
    frame_splits(buf, 5, 1000, &f);
    assert_int_equal(f.flags, JRPC_ZMTP_FLAG_MORE);
    assert_int_equal(f.size, 3);
    /* empty */
    buf[0] = 0;
    buf[1] = 0;
    frame_splits(buf, 2, 1000, &f);
    assert_int_equal(f.size, 0);
    /* long */
    size_t hl = jrpc_zmtp_frame_head(buf, 0, 300);
    assert_int_equal(hl, 9);
    assert_int_equal(buf[0], JRPC_ZMTP_FLAG_LONG);
    memset(buf + 9, 'x', 300);
    frame_splits(buf, 309, 300, &f);
    assert_int_equal(f.size, 300);
    /* the boundaries of the short form */
    assert_int_equal(jrpc_zmtp_frame_head(buf, JRPC_ZMTP_FLAG_MORE, 255), 2);
    assert_int_equal(buf[0], JRPC_ZMTP_FLAG_MORE);
    assert_int_equal(buf[1], 255);
    assert_int_equal(jrpc_zmtp_frame_head(buf, 0, 256), 9);
    assert_int_equal(buf[7], 1);
    assert_int_equal(buf[8], 0);
    /* a long form for a small body is accepted (libzmq may send it) */
    memset(buf, 0, 9);
    buf[0] = JRPC_ZMTP_FLAG_LONG;
    buf[8] = 1;
    buf[9] = 'z';
    frame_splits(buf, 10, 10, &f);
    assert_int_equal(f.size, 1);
}

static void test_frame_oversized(void **state)
{
    (void)state;
    jrpc_zmtp_frame_t f;
    size_t need = 0;
    uint8_t s[2] = { 0, 11 };   /* only the header: refused before the body */
    uint8_t *b = at_end(s, 2);
    assert_int_equal(jrpc_zmtp_frame_decode(b, 2, 10, &f, &need), JRPC_ZMTP_TOO_LARGE);
    assert_int_equal(jrpc_zmtp_frame_decode(b, 2, 11, &f, &need), JRPC_ZMTP_NEED_MORE);
    assert_int_equal(need, 13);
    free(b);
    uint8_t l[9] = { JRPC_ZMTP_FLAG_LONG, 0x40, 0, 0, 0, 0, 0, 0, 0 };   /* 2^62 */
    b = at_end(l, 9);
    assert_int_equal(jrpc_zmtp_frame_decode(b, 9, 1u << 20, &f, &need), JRPC_ZMTP_TOO_LARGE);
    free(b);
    l[1] = 0x80;   /* top bit set: malformed, whatever the limit */
    b = at_end(l, 9);
    assert_int_equal(jrpc_zmtp_frame_decode(b, 9, UINT64_MAX, &f, &need), JRPC_ZMTP_MALFORMED);
    free(b);
    l[1] = 0xFF;
    b = at_end(l, 9);
    assert_int_equal(jrpc_zmtp_frame_decode(b, 9, UINT64_MAX, &f, &need), JRPC_ZMTP_MALFORMED);
    free(b);
}

static void test_frame_bad_flags(void **state)
{
    (void)state;
    jrpc_zmtp_frame_t f;
    size_t need = 0;
    for (int fl = 0; fl < 256; fl++) {
        uint8_t p[1] = { (uint8_t)fl };
        uint8_t *b = at_end(p, 1);
        ssize_t rc = jrpc_zmtp_frame_decode(b, 1, 100, &f, &need);
        bool bad = (fl & 0xF8) || ((fl & JRPC_ZMTP_FLAG_COMMAND) && (fl & JRPC_ZMTP_FLAG_MORE));
        assert_int_equal(rc, bad ? JRPC_ZMTP_MALFORMED : JRPC_ZMTP_NEED_MORE);
        free(b);
    }
}

/* A stream of frames fed in pieces of every size from 1 up: the same frames. */
static void test_frame_stream_pieces(void **state)
{
    (void)state;
    uint8_t s[2000];
    size_t n = 0, sizes[] = { 0, 1, 255, 256, 700, 3 };
    for (size_t i = 0; i < 6; i++) {
        n += jrpc_zmtp_frame_head(s + n, i < 5 ? JRPC_ZMTP_FLAG_MORE : 0, sizes[i]);
        memset(s + n, (int)('a' + i), sizes[i]);
        n += sizes[i];
    }
    for (size_t piece = 1; piece <= n; piece++) {
        uint8_t *acc = malloc(n);
        size_t have = 0, at = 0, got = 0;
        while (at < n || have > 0) {
            size_t add = piece < n - at ? piece : n - at;
            memcpy(acc + have, s + at, add);
            have += add;
            at += add;
            for (;;) {
                jrpc_zmtp_frame_t f;
                size_t need = 0;
                uint8_t *b = at_end(acc, have);
                ssize_t rc = jrpc_zmtp_frame_decode(b, have, 1000, &f, &need);
                if (rc == JRPC_ZMTP_NEED_MORE) {
                    free(b);
                    assert_true(at < n);
                    break;
                }
                assert_true(rc > 0);
                assert_int_equal(f.size, sizes[got]);
                for (size_t j = 0; j < f.size; j++)
                    assert_int_equal(f.body[j], 'a' + got);
                assert_int_equal(f.flags & JRPC_ZMTP_FLAG_MORE, got < 5);
                got++;
                free(b);
                memmove(acc, acc + rc, have - (size_t)rc);
                have -= (size_t)rc;
                if (have == 0)
                    break;
            }
            if (at == n && have == 0)
                break;
        }
        assert_int_equal(got, 6);
        free(acc);
    }
}

static void test_command_split(void **state)
{
    (void)state;
    jrpc_span_t name, data;
    const uint8_t ping[] = { 4, 'P', 'I', 'N', 'G', 0, 10, 'c', 't' };
    uint8_t *b = at_end(ping, sizeof ping);
    assert_int_equal(jrpc_zmtp_command_split(b, sizeof ping, &name, &data), 0);
    assert_int_equal(name.n, 4);
    assert_memory_equal(name.p, "PING", 4);
    assert_int_equal(data.n, 4);
    for (size_t k = 0; k < 5; k++)   /* the name cut short */
        assert_int_equal(jrpc_zmtp_command_split(b, k, &name, &data), JRPC_ZMTP_MALFORMED);
    free(b);
    const uint8_t empty[] = { 0, 'x' };
    assert_int_equal(jrpc_zmtp_command_split(empty, 2, &name, &data), JRPC_ZMTP_MALFORMED);
}

/* READY's data: name length, name, 4-byte BE value length, value. */
static size_t prop(uint8_t *p, const char *name, const char *value)
{
    size_t nl = strlen(name), vl = strlen(value);
    p[0] = (uint8_t)nl;
    memcpy(p + 1, name, nl);
    p[1 + nl] = 0;
    p[2 + nl] = 0;
    p[3 + nl] = (uint8_t)(vl >> 8);
    p[4 + nl] = (uint8_t)vl;
    memcpy(p + 5 + nl, value, vl);
    return 5 + nl + vl;
}

static int ready(const char *name, const char *type, bool with_identity)
{
    uint8_t p[256];
    size_t n = 0;
    if (with_identity)
        n += prop(p + n, "Identity", "");
    n += prop(p + n, name, type);
    n += prop(p + n, "X-Other", "whatever");
    uint8_t *b = at_end(p, n);
    const char *why = NULL;
    int rc = jrpc_zmtp_ready_check(b, n, &why);
    /* every strict prefix that cuts a property is malformed or lacks the type */
    for (size_t k = 0; k < n; k++) {
        uint8_t *c = at_end(p, k);
        int r2 = jrpc_zmtp_ready_check(c, k, &why);
        (void)r2;   /* no crash, no over-read; the verdict depends on the cut */
        free(c);
    }
    free(b);
    return rc;
}

static void test_ready(void **state)
{
    (void)state;
    assert_int_equal(ready("Socket-Type", "DEALER", true), 0);
    assert_int_equal(ready("Socket-Type", "REQ", true), 0);
    assert_int_equal(ready("Socket-Type", "ROUTER", false), 0);
    assert_int_equal(ready("socket-type", "DEALER", false), 0);   /* names: any case */
    assert_int_equal(ready("Socket-Type", "PUB", false), JRPC_ZMTP_MALFORMED);
    assert_int_equal(ready("Socket-Type", "SUB", false), JRPC_ZMTP_MALFORMED);
    assert_int_equal(ready("Socket-Type", "PAIR", false), JRPC_ZMTP_MALFORMED);
    assert_int_equal(ready("Socket-Type", "dealer", false), JRPC_ZMTP_MALFORMED);
    assert_int_equal(ready("Socket-Typ", "DEALER", false), JRPC_ZMTP_MALFORMED);
    const char *why = NULL;
    assert_int_equal(jrpc_zmtp_ready_check(NULL, 0, &why), JRPC_ZMTP_MALFORMED);
    /* a value length past the input */
    uint8_t p[64];
    size_t n = prop(p, "Socket-Type", "DEALER");
    p[12 + 3] = 7;
    uint8_t *b = at_end(p, n);
    assert_int_equal(jrpc_zmtp_ready_check(b, n, &why), JRPC_ZMTP_MALFORMED);
    free(b);
    p[12] = 0x80;   /* 2 GB */
    b = at_end(p, n);
    assert_int_equal(jrpc_zmtp_ready_check(b, n, &why), JRPC_ZMTP_MALFORMED);
    free(b);
}

/* What the engine binds, and what it leaves to libzmq. */
static void test_supports(void **state)
{
    (void)state;
    assert_true(jrpc_zmtp_supports("tcp://127.0.0.1:5556"));
    assert_true(jrpc_zmtp_supports("tcp://*:*"));
    assert_true(jrpc_zmtp_supports("ipc:///tmp/x.sock"));
    assert_false(jrpc_zmtp_supports("ipc://@abstract"));   /* Linux abstract namespace */
    assert_false(jrpc_zmtp_supports("inproc://x"));
    assert_false(jrpc_zmtp_supports("tipc://<1,2>"));
}

/* ---- the output queue -------------------------------------------------- */

/* The bytes of a message of frames, as a peer must read them. */
static size_t wire_bytes(uint8_t *out, const jrpc_span_t *fr, int n)
{
    size_t o = 0;
    for (int i = 0; i < n; i++) {
        o += jrpc_zmtp_frame_head(out + o, i + 1 < n ? JRPC_ZMTP_FLAG_MORE : 0, fr[i].n);
        memcpy(out + o, fr[i].p, fr[i].n);
        o += fr[i].n;
    }
    return o;
}

/* Messages of 1..3 frames and sizes around the long-size edge go in as
 * frames, come out as the peer must read them; the count drops by one
 * exactly when a message's last byte is consumed, written one byte at a
 * time or in odd steps; an empty queue starts over and frees its buffer
 * above keep. */
static void test_outq_count_consume(void **state)
{
    (void)state;
    static uint8_t body[600], want[1 << 14];
    for (size_t i = 0; i < sizeof body; i++)
        body[i] = (uint8_t)(i * 7 + 1);
    static const size_t sizes[] = { 0, 1, 255, 256, 300, 599 };
    for (size_t keep = 0; keep <= 1 << 20; keep += 1 << 20) {
        for (size_t step = 1; step <= 97; step += 48) {
            jrpc_zmtp_outq_t q;
            jrpc_zmtp_outq_init(&q, keep);
            size_t total = 0, ends[32];
            int nmsg = 0;
            for (int k = 0; k < 12; k++) {
                jrpc_span_t fr[3];
                int n = 1 + k % 3;
                for (int i = 0; i < n; i++)
                    fr[i] = (jrpc_span_t){ (const char *)body, sizes[(k + i) % 6] };
                total += wire_bytes(want + total, fr, n);
                ends[nmsg++] = total;
                assert_int_equal(jrpc_zmtp_outq_put(&q, fr, n, NULL, 0), 0);
                assert_int_equal(jrpc_zmtp_outq_count(&q), (uint32_t)nmsg);
            }
            assert_int_equal(jrpc_zmtp_outq_put(&q, NULL, 0, "raw", 3), 0);   /* a command */
            memcpy(want + total, "raw", 3);
            total += 3;
            ends[nmsg++] = total;
            assert_int_equal(jrpc_zmtp_outq_pending(&q), total);
            assert_memory_equal(q.buf + q.off, want, total);
            size_t done = 0;
            while (done < total) {
                size_t n = total - done < step ? total - done : step;
                jrpc_zmtp_outq_consume(&q, n);
                done += n;
                uint32_t left = 0;
                for (int i = 0; i < nmsg; i++)
                    left += ends[i] > done;
                assert_int_equal(jrpc_zmtp_outq_count(&q), left);
                assert_int_equal(jrpc_zmtp_outq_pending(&q), total - done);
                if (done < total)
                    assert_memory_equal(q.buf + q.off, want + done, total - done);
            }
            assert_int_equal(q.off, 0);
            assert_int_equal(q.len, 0);
            if (keep)
                assert_non_null(q.buf);   /* kept for the next messages */
            else
                assert_null(q.buf);
            jrpc_zmtp_outq_dispose(&q);
        }
    }
}

/* A write in flight reads its bytes where they were: a queue that grows
 * meanwhile copies, and the old buffer stays (pinned) until the write
 * ends; then what follows is in order. Also many messages (the ends array
 * grows and compacts) and a partly written queue that compacts. */
static void test_outq_pinned(void **state)
{
    (void)state;
    jrpc_zmtp_outq_t q;
    jrpc_zmtp_outq_init(&q, 1 << 16);
    char a[100];
    memset(a, 'a', sizeof a);
    jrpc_span_t fa = { a, sizeof a };
    assert_int_equal(jrpc_zmtp_outq_put(&q, &fa, 1, NULL, 0), 0);
    const uint8_t *inflight = q.buf + q.off;
    size_t n = jrpc_zmtp_outq_pending(&q);
    uint8_t copy[128];
    memcpy(copy, inflight, n);
    jrpc_zmtp_outq_writing(&q, n);
    /* enough to grow the buffer several times */
    static char big[5000];
    memset(big, 'b', sizeof big);
    jrpc_span_t fb = { big, sizeof big };
    for (int i = 0; i < 40; i++)
        assert_int_equal(jrpc_zmtp_outq_put(&q, &fb, 1, NULL, 0), 0);
    assert_non_null(q.pinned);
    assert_memory_equal(inflight, copy, n);   /* untouched (ASan: not freed) */
    assert_int_equal(jrpc_zmtp_outq_count(&q), 41);
    jrpc_zmtp_outq_written(&q);
    assert_null(q.pinned);
    assert_int_equal(jrpc_zmtp_outq_count(&q), 40);
    assert_int_equal(jrpc_zmtp_outq_pending(&q), 40 * (9 + sizeof big));
    assert_int_equal(q.buf[q.off], JRPC_ZMTP_FLAG_LONG);
    /* partly written, then more: compacts or grows, order kept */
    jrpc_zmtp_outq_consume(&q, 39 * (9 + sizeof big) + 4);
    assert_int_equal(jrpc_zmtp_outq_count(&q), 1);
    for (int i = 0; i < 3000; i++)
        assert_int_equal(jrpc_zmtp_outq_put(&q, &fa, 1, NULL, 0), 0);
    assert_int_equal(jrpc_zmtp_outq_count(&q), 3001);
    assert_int_equal(jrpc_zmtp_outq_pending(&q), 9 + sizeof big - 4 + 3000 * 102);
    assert_int_equal(q.buf[q.off + 9 + sizeof big - 4], 0);   /* a short frame's flags */
    assert_int_equal(q.buf[q.off + 9 + sizeof big - 4 + 1], 100);
    jrpc_zmtp_outq_consume(&q, jrpc_zmtp_outq_pending(&q));
    assert_int_equal(jrpc_zmtp_outq_count(&q), 0);
    jrpc_zmtp_outq_dispose(&q);
}

/* ---- the server against real peers ------------------------------------- */

typedef struct srv {
    int      msgs;
    int      last_n;
    bool     last_excess;
    int      excess_seen;   /* messages delivered with excess set */
    char     peer[64];
    bool     peer_null;
    size_t   reply_size;   /* 0: echo; else one frame of this many bytes after the others */
    int      sent, drops;
    bool     record;       /* keep what each message was, do not answer */
    uint64_t seen[512];    /* per message: a hash of n, excess and the frames */
    bool     tag;          /* set each connection's data to its first message's byte */
    int      reads;        /* on_read calls */
    int      closes;       /* on_close calls */
    void    *closed_data;  /* the last closed connection's data */
    uint32_t closed_id;    /* ... and its id */
    jrpc_zmtp_conn_t *held; /* the first connection tagged (a reference) */
} srv_t;

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

static uint64_t msg_hash(const jrpc_span_t *fr, int n, bool excess)
{
    uint64_t h = fnv(0xcbf29ce484222325ULL, &n, sizeof n);
    h = fnv(h, &excess, sizeof excess);
    for (int i = 0; i < n; i++) {
        h = fnv(h, &fr[i].n, sizeof fr[i].n);
        h = fr[i].p ? fnv(h, fr[i].p, fr[i].n) : fnv(h, "skipped", 7);
    }
    return h;
}

static uv_loop_t loop;
static srv_t srv;
static void *zctx;
static jrpc_zmtp_t *server;
static char endpoint[128];
static int port_used;   /* the port server_up bound */
static bool srv_skip;   /* server_up: skip_oversized, max_frame 30000 */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void pump(int ms)
{
    uint64_t end = now_ms() + (uint64_t)ms;
    do {
        uv_run(&loop, UV_RUN_NOWAIT);
        usleep(300);
    } while (now_ms() < end);
}

static void on_msg(void *data, jrpc_zmtp_conn_t *c, const jrpc_span_t *fr, int n, bool excess,
                   const char *peer)
{
    srv_t *s = data;
    s->msgs++;
    if (s->tag && jrpc_zmtp_conn_data(c) == NULL && n >= 1 && fr[n - 1].n >= 1) {
        jrpc_zmtp_conn_set_data(c, (void *)(uintptr_t)(uint8_t)fr[n - 1].p[0]);
        if (s->held == NULL) {
            jrpc_zmtp_conn_ref(c);
            s->held = c;
        }
    }
    s->last_n = n;
    s->last_excess = excess;
    s->excess_seen += excess;
    s->peer_null = peer == NULL;
    snprintf(s->peer, sizeof s->peer, "%s", peer ? peer : "");
    if (s->record) {
        if (s->msgs <= 512)
            s->seen[s->msgs - 1] = msg_hash(fr, n, excess);
        return;
    }
    int rc;
    if (s->reply_size) {
        static char big[1 << 18];
        jrpc_span_t out[4];
        int k = 0;
        for (int i = 0; i < n - 1; i++)
            out[k++] = fr[i];
        out[k++] = (jrpc_span_t){ big, s->reply_size };
        rc = jrpc_zmtp_send(c, out, k);
    } else {
        rc = jrpc_zmtp_send(c, fr, n);
    }
    if (rc == 0)
        s->sent++;
    else if (rc == -EAGAIN)
        s->drops++;
}

static void on_srv_read(void *data)
{
    ((srv_t *)data)->reads++;
}

static void on_srv_close(void *data, jrpc_zmtp_conn_t *c)
{
    srv_t *s = data;
    s->closes++;
    s->closed_data = jrpc_zmtp_conn_data(c);
    s->closed_id = jrpc_zmtp_conn_id(c);
    assert_int_equal(jrpc_zmtp_send(c, &(jrpc_span_t){ "x", 1 }, 1), -EHOSTUNREACH);
}

static int server_up(void **state, int port, uint32_t hwm, uint32_t handshake_ms)
{
    (void)state;
    memset(&srv, 0, sizeof srv);
    uv_loop_init(&loop);
    zctx = zmq_ctx_new();
    jrpc_zmtp_opts_t o = { .endpoint = endpoint, .max_frame = srv_skip ? 30000 : 100000,
                           .skip_oversized = srv_skip, .hwm = hwm,
                           .handshake_ms = handshake_ms, .on_read = on_srv_read,
                           .on_close = on_srv_close };
    if (port == 0)
        return jrpc_zmtp_new(&loop, &o, on_msg, &srv, &server);
    /* 431xx is inside the ephemeral range: a client's port (or its
     * TIME_WAIT) may hold ours; then the next of 43100..43199 ending alike. */
    int rc = -EADDRINUSE;
    for (port_used = port; rc == -EADDRINUSE && port_used < 43200; port_used += 10) {
        snprintf(endpoint, sizeof endpoint, "tcp://127.0.0.1:%d", port_used);
        rc = jrpc_zmtp_new(&loop, &o, on_msg, &srv, &server);
        if (rc == -EADDRINUSE)
            uv_run(&loop, UV_RUN_NOWAIT);   /* the failed listener's close */
    }
    port_used -= 10;
    return rc;
}

static void server_down(void)
{
    jrpc_zmtp_destroy(&server, 2000);
    /* the loop ends once every handle is closed: nothing leaks */
    uint64_t end = now_ms() + 5000;
    while (uv_run(&loop, UV_RUN_NOWAIT) != 0 && now_ms() < end)
        usleep(300);
    assert_int_equal(uv_loop_close(&loop), 0);
    zmq_ctx_term(zctx);
}

/* zmq_recv that turns our loop while it waits. */
static int zrecv(void *s, void *buf, size_t n, int ms)
{
    uint64_t end = now_ms() + (uint64_t)ms;
    for (;;) {
        int rc = zmq_recv(s, buf, n, ZMQ_DONTWAIT);
        if (rc >= 0 || errno != EAGAIN || now_ms() > end)
            return rc;
        uv_run(&loop, UV_RUN_NOWAIT);
        usleep(200);
    }
}

static bool more(void *s)
{
    int m = 0;
    size_t l = sizeof m;
    zmq_getsockopt(s, ZMQ_RCVMORE, &m, &l);
    return m != 0;
}

static void *client(int type)
{
    void *s = zmq_socket(zctx, type);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(zmq_connect(s, endpoint), 0);
    return s;
}

static void test_dealer_req(void **state)
{
    assert_int_equal(server_up(state, 43101, 1000, 2000), 0);
    void *d = client(ZMQ_DEALER);
    char buf[512];
    zmq_send(d, "", 0, ZMQ_SNDMORE);
    zmq_send(d, "hello", 5, 0);
    assert_int_equal(zrecv(d, buf, sizeof buf, 3000), 0);
    assert_true(more(d));
    assert_int_equal(zrecv(d, buf, sizeof buf, 3000), 5);
    assert_memory_equal(buf, "hello", 5);
    assert_false(more(d));
    assert_int_equal(srv.last_n, 2);
    assert_string_equal(srv.peer, "127.0.0.1");
    /* REQ: libzmq adds the delimiter, and takes it off the reply */
    void *r = client(ZMQ_REQ);
    for (int i = 0; i < 3; i++) {
        zmq_send(r, "hi", 2, 0);
        assert_int_equal(zrecv(r, buf, sizeof buf, 3000), 2);
        assert_int_equal(srv.last_n, 2);
    }
    /* a frame above 255 bytes (long size) both ways */
    char big[70000];
    memset(big, 'q', sizeof big);
    zmq_send(d, big, sizeof big, 0);
    static char back[80000];
    assert_int_equal(zrecv(d, back, sizeof back, 3000), (int)sizeof big);
    assert_memory_equal(back, big, sizeof big);
    jrpc_zmtp_stats_t st;
    jrpc_zmtp_stats(server, &st);
    assert_int_equal(st.conns, 2);
    zmq_close(d);
    zmq_close(r);
    pump(100);
    jrpc_zmtp_stats(server, &st);
    assert_int_equal(st.conns, 0);
    assert_int_equal(st.handshake_failed, 0);
    server_down();
}

/* ROUTING_ID set (ignored: our own handle) and heartbeats on: PINGs come,
 * PONGs go, the client's heartbeat timeout never fires. */
static void test_routing_id_heartbeat(void **state)
{
    assert_int_equal(server_up(state, 43102, 1000, 2000), 0);
    void *d = zmq_socket(zctx, ZMQ_DEALER);
    int ivl = 50, tmo = 200, zero = 0;
    zmq_setsockopt(d, ZMQ_ROUTING_ID, "client-7", 8);
    zmq_setsockopt(d, ZMQ_HEARTBEAT_IVL, &ivl, sizeof ivl);
    zmq_setsockopt(d, ZMQ_HEARTBEAT_TIMEOUT, &tmo, sizeof tmo);
    zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(zmq_connect(d, endpoint), 0);
    /* a second client with the same routing id is served too */
    void *d2 = zmq_socket(zctx, ZMQ_DEALER);
    zmq_setsockopt(d2, ZMQ_ROUTING_ID, "client-7", 8);
    zmq_setsockopt(d2, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(zmq_connect(d2, endpoint), 0);
    char buf[64];
    zmq_send(d, "a", 1, 0);
    assert_int_equal(zrecv(d, buf, sizeof buf, 3000), 1);
    pump(800);
    jrpc_zmtp_stats_t st;
    jrpc_zmtp_stats(server, &st);
    assert_true(st.pings >= 5);
    assert_int_equal(st.conns, 2);
    zmq_send(d, "b", 1, 0);
    assert_int_equal(zrecv(d, buf, sizeof buf, 3000), 1);
    assert_int_equal(buf[0], 'b');
    zmq_send(d2, "c", 1, 0);
    assert_int_equal(zrecv(d2, buf, sizeof buf, 3000), 1);
    assert_int_equal(buf[0], 'c');
    jrpc_zmtp_stats(server, &st);
    assert_int_equal(st.accepted, 2);   /* no reconnect happened */
    zmq_close(d);
    zmq_close(d2);
    server_down();
}

static void test_multi_frame_excess(void **state)
{
    assert_int_equal(server_up(state, 43103, 1000, 2000), 0);
    void *d = client(ZMQ_DEALER);
    char buf[64];
    zmq_send(d, "", 0, ZMQ_SNDMORE);
    zmq_send(d, "h", 1, ZMQ_SNDMORE);
    zmq_send(d, "j", 1, 0);
    assert_int_equal(zrecv(d, buf, sizeof buf, 3000), 0);
    assert_int_equal(zrecv(d, buf, sizeof buf, 3000), 1);
    assert_int_equal(zrecv(d, buf, sizeof buf, 3000), 1);
    assert_false(more(d));
    assert_int_equal(srv.last_n, 3);
    assert_false(srv.last_excess);
    for (int i = 0; i < 6; i++)
        zmq_send(d, "x", 1, i < 5 ? ZMQ_SNDMORE : 0);
    zmq_send(d, "y", 1, 0);   /* the next message is whole */
    pump(300);
    assert_int_equal(srv.msgs, 3);
    assert_int_equal(srv.excess_seen, 1);
    assert_int_equal(srv.last_n, 1);
    assert_false(srv.last_excess);
    zmq_close(d);
    server_down();
}

static void test_many_connections(void **state)
{
    assert_int_equal(server_up(state, 43104, 1000, 2000), 0);
    enum { N = 60 };
    void *c[N];
    for (int i = 0; i < N; i++) {
        c[i] = client(i % 2 ? ZMQ_REQ : ZMQ_DEALER);
        char m[16];
        int n = snprintf(m, sizeof m, "%d", i);
        zmq_send(c[i], m, (size_t)n, 0);
    }
    for (int i = 0; i < N; i++) {
        char m[16], want[16];
        int n = snprintf(want, sizeof want, "%d", i);
        assert_int_equal(zrecv(c[i], m, sizeof m, 5000), n);
        assert_memory_equal(m, want, (size_t)n);
    }
    jrpc_zmtp_stats_t st;
    jrpc_zmtp_stats(server, &st);
    assert_int_equal(st.conns, N);
    for (int i = 0; i < N; i++)
        zmq_close(c[i]);
    pump(200);
    jrpc_zmtp_stats(server, &st);
    assert_int_equal(st.conns, 0);
    server_down();
}

/* A raw TCP peer: connected, non-blocking. */
static int raw_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

static void raw_send(int fd, const void *p, size_t n)
{
    assert_int_equal(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

static void raw_hello(int fd, const char *type)
{
    uint8_t g[64];
    client_greeting(g);
    raw_send(fd, g, 64);
    uint8_t r[64];
    size_t n = prop(r + 8, "Socket-Type", type);
    r[0] = JRPC_ZMTP_FLAG_COMMAND;
    r[1] = (uint8_t)(n + 6);
    r[2] = 5;
    memcpy(r + 3, "READY", 5);
    raw_send(fd, r, n + 8);
}

/* Reads until EOF while turning the loop; returns the bytes seen. */
static size_t raw_drain(int fd, uint8_t *buf, size_t cap, int ms)
{
    size_t have = 0;
    uint64_t end = now_ms() + (uint64_t)ms;
    while (now_ms() < end) {
        uv_run(&loop, UV_RUN_NOWAIT);
        ssize_t r = recv(fd, buf + have, cap - have, MSG_DONTWAIT);
        if (r == 0)
            return have;
        if (r > 0)
            have += (size_t)r;
        else
            usleep(300);
    }
    fail_msg("the server did not close the connection");
    return have;
}

static void test_raw_peers(void **state)
{
    assert_int_equal(server_up(state, 43105, 1000, 300), 0);
    static uint8_t buf[1 << 16];
    jrpc_zmtp_stats_t st;
    /* a ZMTP 2.0 peer: our greeting, then closed */
    int fd = raw_connect(port_used);
    uint8_t g[64];
    client_greeting(g);
    g[10] = 1;
    raw_send(fd, g, 11);
    assert_int_equal(raw_drain(fd, buf, sizeof buf, 3000), 64 + 30);
    assert_memory_equal(buf, jrpc_zmtp_greeting, 64);
    close(fd);
    /* a PUB peer: refused with ERROR */
    fd = raw_connect(port_used);
    raw_hello(fd, "PUB");
    size_t n = raw_drain(fd, buf, sizeof buf, 3000);
    assert_true(n > 94 + 8);
    assert_int_equal(buf[94], JRPC_ZMTP_FLAG_COMMAND);
    assert_memory_equal(buf + 97, "ERROR", 5);
    close(fd);
    /* silent after connecting: closed at the handshake deadline */
    fd = raw_connect(port_used);
    assert_int_equal(raw_drain(fd, buf, sizeof buf, 3000), 94);
    close(fd);
    jrpc_zmtp_stats(server, &st);
    assert_int_equal(st.handshake_timeouts, 1);
    assert_int_equal(st.handshake_failed, 3);
    /* a frame above max_frame: cut without a word */
    fd = raw_connect(port_used);
    raw_hello(fd, "DEALER");
    uint8_t big[9];
    jrpc_zmtp_frame_head(big, 0, 100001);
    raw_send(fd, big, 9);
    assert_int_equal(raw_drain(fd, buf, sizeof buf, 3000), 94);
    close(fd);
    jrpc_zmtp_stats(server, &st);
    assert_int_equal(st.oversized, 1);
    /* gone in the middle of a message: nothing delivered, nothing kept */
    fd = raw_connect(port_used);
    raw_hello(fd, "DEALER");
    uint8_t part[] = { JRPC_ZMTP_FLAG_MORE, 0, 0, 10, 'a', 'b' };
    raw_send(fd, part, sizeof part);
    pump(100);
    close(fd);
    /* a message before READY, a PING, a bad command, bad flags */
    fd = raw_connect(port_used);
    client_greeting(g);
    raw_send(fd, g, 64);
    uint8_t msg[] = { 0, 1, 'x' };
    raw_send(fd, msg, sizeof msg);
    assert_true(raw_drain(fd, buf, sizeof buf, 3000) > 94);   /* ERROR "expected READY" */
    close(fd);
    fd = raw_connect(port_used);
    raw_hello(fd, "REQ");
    uint8_t ping[] = { JRPC_ZMTP_FLAG_COMMAND, 9, 4, 'P', 'I', 'N', 'G', 0, 1, 'c', 'x' };
    raw_send(fd, ping, sizeof ping);
    uint8_t bad[] = { 0x08, 0 };
    pump(100);
    raw_send(fd, bad, sizeof bad);
    n = raw_drain(fd, buf, sizeof buf, 3000);
    assert_int_equal(n, 94 + 9);   /* the PONG, then closed */
    assert_memory_equal(buf + 94, "\x04\x07\x04PONGcx", 9);
    close(fd);
    pump(100);
    jrpc_zmtp_stats(server, &st);
    assert_int_equal(st.conns, 0);
    assert_int_equal(srv.msgs, 0);
    server_down();
}

/* Many messages of 1..6 frames (0 bytes to 40 000), PINGs between frames,
 * sent in pieces of random size: every message arrives whole and in order,
 * its first three frames intact, the rest reported as excess. This is the
 * input buffer's bookkeeping (growth, compaction, frames cut out). With
 * skip, the 40 000-byte frames are above max_frame: each arrives as
 * { NULL, 40000 } in its place, and the connection carries on. */
static void raw_stream(void **state, int port, bool skip)
{
    srv_skip = skip;
    assert_int_equal(server_up(state, port, 1000, 2000), 0);
    srv_skip = false;
    srv.record = true;
    int fd = raw_connect(port_used);
    raw_hello(fd, "DEALER");
    enum { N = 300 };
    static const size_t sizes[] = { 0, 1, 200, 255, 256, 5000, 40000 };
    static uint8_t stream[N * 6 * (40000 + 9 + 12)];
    static uint8_t body[40000];
    uint64_t want[N];
    size_t len = 0;
    srand(7);
    for (int m = 0; m < N; m++) {
        int nf = 1 + rand() % 6;
        jrpc_span_t kept[3];
        uint8_t *starts[3];
        for (int i = 0; i < nf; i++) {
            size_t sz = sizes[rand() % 7];
            for (size_t j = 0; j < sz; j++)
                body[j] = (uint8_t)(m * 7 + i * 13 + (int)j);
            len += jrpc_zmtp_frame_head(stream + len, i + 1 < nf ? JRPC_ZMTP_FLAG_MORE : 0, sz);
            if (i < 3) {
                starts[i] = stream + len;
                kept[i].n = sz;
            }
            memcpy(stream + len, body, sz);
            len += sz;
            if (rand() % 4 == 0) {   /* a PING in the middle of the message */
                static const uint8_t ping[] = { JRPC_ZMTP_FLAG_COMMAND, 7, 4, 'P', 'I', 'N', 'G', 0, 0 };
                memcpy(stream + len, ping, sizeof ping);
                len += sizeof ping;
            }
        }
        for (int i = 0; i < nf && i < 3; i++)
            kept[i].p = skip && kept[i].n > 30000 ? NULL : (const char *)starts[i];
        want[m] = msg_hash(kept, nf < 3 ? nf : 3, nf > 3);
    }
    uint8_t sink[65536];
    for (size_t at = 0; at < len;) {
        size_t piece = 1 + (size_t)rand() % (rand() % 2 ? 16 : 70000);
        if (piece > len - at)
            piece = len - at;
        raw_send(fd, stream + at, piece);
        at += piece;
        uv_run(&loop, UV_RUN_NOWAIT);
        while (recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0)   /* the PONGs */
            ;
    }
    uint64_t end = now_ms() + 5000;
    while (srv.msgs < N && now_ms() < end) {
        pump(5);
        while (recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0)
            ;
    }
    assert_int_equal(srv.msgs, N);
    for (int m = 0; m < N; m++)
        assert_true(srv.seen[m] == want[m]);
    jrpc_zmtp_stats_t st;
    jrpc_zmtp_stats(server, &st);
    assert_int_equal(st.conns, 1);
    assert_true(st.pings > 0);
    close(fd);
    server_down();
}

static void test_raw_stream(void **state)
{
    raw_stream(state, 43109, false);
}

static void test_raw_stream_skip(void **state)
{
    raw_stream(state, 43100, true);
}

/* A client that stops reading: its replies queue up to the HWM, then are
 * dropped; the server and other clients carry on. */
static void test_hwm_drop(void **state)
{
    assert_int_equal(server_up(state, 43106, 10, 2000), 0);
    srv.reply_size = 1 << 18;
    void *d = zmq_socket(zctx, ZMQ_DEALER);
    int one = 1, zero = 0, small = 4096;
    zmq_setsockopt(d, ZMQ_RCVHWM, &one, sizeof one);
    zmq_setsockopt(d, ZMQ_RCVBUF, &small, sizeof small);
    zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(zmq_connect(d, endpoint), 0);
    enum { N = 200 };
    for (int i = 0; i < N; i++)
        zmq_send(d, "x", 1, 0);
    uint64_t end = now_ms() + 5000;
    while (srv.msgs < N && now_ms() < end)
        pump(10);
    assert_int_equal(srv.msgs, N);
    assert_int_equal(srv.sent + srv.drops, N);
    assert_true(srv.drops > 0);
    /* another client is served meanwhile */
    srv.reply_size = 0;
    void *e = client(ZMQ_DEALER);
    char buf[8];
    zmq_send(e, "ok", 2, 0);
    assert_int_equal(zrecv(e, buf, sizeof buf, 3000), 2);
    zmq_close(d);
    zmq_close(e);
    server_down();
}

/* ipc://: no Peer-Address; the socket file is removed at the end. */
static void test_ipc(void **state)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/jrpc-zmtp-test-%d.sock", (int)getpid());
    snprintf(endpoint, sizeof endpoint, "ipc://%s", path);
    assert_int_equal(server_up(state, 0, 1000, 2000), 0);
    void *d = client(ZMQ_DEALER);
    char buf[8];
    zmq_send(d, "i", 1, 0);
    assert_int_equal(zrecv(d, buf, sizeof buf, 3000), 1);
    assert_true(srv.peer_null);
    zmq_close(d);
    server_down();
    assert_int_equal(access(path, F_OK), -1);
}

/* Destroy with a reply queued: it still leaves (linger). */
static void test_destroy_flushes(void **state)
{
    assert_int_equal(server_up(state, 43107, 1000, 2000), 0);
    void *d = client(ZMQ_DEALER);
    zmq_send(d, "z", 1, 0);
    uint64_t end = now_ms() + 3000;
    while (srv.msgs == 0 && now_ms() < end) {   /* one step at a time: the reply is queued */
        uv_run(&loop, UV_RUN_ONCE);
    }
    assert_int_equal(srv.msgs, 1);
    jrpc_zmtp_destroy(&server, 2000);
    char buf[8];
    assert_int_equal(zrecv(d, buf, sizeof buf, 3000), 1);
    zmq_close(d);
    end = now_ms() + 5000;
    while (uv_run(&loop, UV_RUN_NOWAIT) != 0 && now_ms() < end)
        usleep(300);
    assert_int_equal(uv_loop_close(&loop), 0);
    zmq_ctx_term(zctx);
}

/* The hooks a worker side uses: each connection carries the caller's
 * pointer and a distinct id; the messages of a read are followed by one
 * on_read; a connection that was open reports its close once (sends to it
 * fail as a closed libzmq ROUTER_MANDATORY peer: -EHOSTUNREACH), one that
 * never finished its handshake does not, and none after destroy. */
static void test_conn_hooks(void **state)
{
    assert_int_equal(server_up(state, 43108, 1000, 2000), 0);
    srv.tag = true;
    void *d1 = client(ZMQ_DEALER), *d2 = client(ZMQ_DEALER);
    char buf[8];
    zmq_send(d1, "1", 1, 0);
    assert_int_equal(zrecv(d1, buf, sizeof buf, 3000), 1);
    zmq_send(d2, "2", 1, 0);
    assert_int_equal(zrecv(d2, buf, sizeof buf, 3000), 1);
    assert_int_equal(srv.msgs, 2);
    assert_true(srv.reads >= 2 && srv.reads <= srv.msgs);
    assert_non_null(srv.held);
    assert_ptr_equal(jrpc_zmtp_conn_data(srv.held), (void *)(uintptr_t)'1');
    uint32_t id1 = jrpc_zmtp_conn_id(srv.held);
    /* a peer that leaves before its greeting: no report */
    int fd = raw_connect(port_used);
    close(fd);
    pump(100);
    assert_int_equal(srv.closes, 0);
    zmq_close(d1);
    uint64_t end = now_ms() + 3000;
    while (srv.closes == 0 && now_ms() < end)
        pump(10);
    assert_int_equal(srv.closes, 1);
    assert_ptr_equal(srv.closed_data, (void *)(uintptr_t)'1');
    assert_int_equal(srv.closed_id, id1);
    assert_int_equal(jrpc_zmtp_send(srv.held, &(jrpc_span_t){ "x", 1 }, 1), -EHOSTUNREACH);
    jrpc_zmtp_conn_unref(&srv.held);
    assert_null(srv.held);
    /* d2 leaves while the loop is not turning: destroy comes first, and
     * closes it without a report */
    zmq_close(d2);
    server_down();
    assert_int_equal(srv.closes, 1);
}

/* Paused (drain): messages are read and dropped, PINGs still answered. */
static void test_pause(void **state)
{
    assert_int_equal(server_up(state, 43108, 1000, 2000), 0);
    int fd = raw_connect(port_used);
    raw_hello(fd, "DEALER");
    pump(50);
    jrpc_zmtp_pause(server);
    uint8_t msg[] = { 0, 1, 'x' };
    uint8_t ping[] = { JRPC_ZMTP_FLAG_COMMAND, 7, 4, 'P', 'I', 'N', 'G', 0, 1 };
    raw_send(fd, msg, sizeof msg);
    raw_send(fd, ping, sizeof ping);
    pump(100);
    assert_int_equal(srv.msgs, 0);
    uint8_t buf[256];
    ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    assert_int_equal(n, 94 + 7);
    close(fd);
    server_down();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greeting_prefixes),
        cmocka_unit_test(test_greeting_bad),
        cmocka_unit_test(test_frame_short_long),
        cmocka_unit_test(test_frame_oversized),
        cmocka_unit_test(test_frame_bad_flags),
        cmocka_unit_test(test_frame_stream_pieces),
        cmocka_unit_test(test_command_split),
        cmocka_unit_test(test_ready),
        cmocka_unit_test(test_supports),
        cmocka_unit_test(test_outq_count_consume),
        cmocka_unit_test(test_outq_pinned),
        cmocka_unit_test(test_dealer_req),
        cmocka_unit_test(test_routing_id_heartbeat),
        cmocka_unit_test(test_multi_frame_excess),
        cmocka_unit_test(test_many_connections),
        cmocka_unit_test(test_raw_peers),
        cmocka_unit_test(test_raw_stream),
        cmocka_unit_test(test_raw_stream_skip),
        cmocka_unit_test(test_hwm_drop),
        cmocka_unit_test(test_ipc),
        cmocka_unit_test(test_destroy_flushes),
        cmocka_unit_test(test_pause),
        cmocka_unit_test(test_conn_hooks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
