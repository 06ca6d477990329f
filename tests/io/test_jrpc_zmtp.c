/* io/jrpc_zmtp as pure code (zmtp_fixture.h): the decoder (every split,
 * every prefix, inputs at the end of their buffer so an over-read trips
 * ASan: greetings, frames, commands, READY) and the output queue. The server
 * against real peers: test_jrpc_zmtp_server. */
#include "zmtp_fixture.h"

/* ---- the decoder ------------------------------------------------------- */

/* A copy of p[0..n) at the very end of a heap block. */
static uint8_t *at_end(const void *p, size_t n)
{
    uint8_t *b = malloc(n ? n : 1);
    assert_non_null(b);
    memcpy(b, p, n);
    return b;
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
