/* Unit tests of the WebSocket session (broker/front/jrpc_ws.c): client frames
 * are built here by hand (masked, as RFC 6455 requires of clients) and fed
 * whole, byte by byte and in pieces; every byte the session writes is
 * checked. Inputs sit at the end of a malloc'd block so an over-read trips
 * AddressSanitizer. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "jrpc_buf.h"
#include "jrpc_ws.h"

static struct {
    jrpc_buf_t out;          /* what the session wrote */
    char       msgs[8][512]; /* the messages it delivered */
    size_t     lens[8];
    unsigned   nmsgs;
    bool       fail_write;
    bool       echo;         /* answer each message from inside the callback */
    unsigned   nwrite2;      /* calls of write2 */
    jrpc_ws_t *ws;
} T;

static void on_message(void *arg, const char *p, size_t n)
{
    (void)arg;
    assert_true(T.nmsgs < 8);
    memcpy(T.msgs[T.nmsgs], p, n < sizeof T.msgs[0] ? n : sizeof T.msgs[0]);
    T.lens[T.nmsgs++] = n;
    if (T.echo)
        assert_int_equal(jrpc_ws_send_text(T.ws, p, n), 0);
}

static int on_write(void *arg, const char *p, size_t n)
{
    (void)arg;
    if (T.fail_write)
        return -1;
    return jrpc_buf_append(&T.out, p, n);
}

static int on_write2(void *arg, const char *a, size_t an, const char *p, size_t n)
{
    (void)arg;
    T.nwrite2++;
    if (T.fail_write)
        return -1;
    return jrpc_buf_append(&T.out, a, an) < 0 ? -1 : jrpc_buf_append(&T.out, p, n);
}

static jrpc_ws_t *make(uint64_t max_msg)
{
    jrpc_buf_dispose(&T.out);
    memset(&T, 0, sizeof T);
    jrpc_ws_opts_t o = { .max_msg = max_msg };
    jrpc_ws_cbs_t cbs = { .message = on_message, .write = on_write };
    T.ws = jrpc_ws_new(&o, &cbs, NULL);
    assert_non_null(T.ws);
    return T.ws;
}

/* Appends one client frame: fin, opcode, masked payload. */
static void frame(jrpc_buf_t *b, bool fin, int op, const char *p, size_t n, bool masked)
{
    static const uint8_t key[4] = { 0x37, 0xfa, 0x21, 0x3d };
    uint8_t h[14];
    size_t hn = 0;
    h[hn++] = (uint8_t)((fin ? 0x80 : 0) | op);
    uint8_t m = masked ? 0x80 : 0;
    if (n < 126) {
        h[hn++] = (uint8_t)(m | n);
    } else if (n < 65536) {
        h[hn++] = m | 126;
        h[hn++] = (uint8_t)(n >> 8);
        h[hn++] = (uint8_t)n;
    } else {
        h[hn++] = m | 127;
        for (int i = 7; i >= 0; i--)
            h[hn++] = (uint8_t)((uint64_t)n >> (8 * i));
    }
    if (masked)
        for (int i = 0; i < 4; i++)
            h[hn++] = key[i];
    jrpc_buf_append(b, (const char *)h, hn);
    for (size_t i = 0; i < n; i++) {
        char c = (char)(p[i] ^ (masked ? key[i % 4] : 0));
        jrpc_buf_append(b, &c, 1);
    }
}

static void text(jrpc_buf_t *b, const char *s)
{
    frame(b, true, 1, s, strlen(s), true);
}

static void close_frame(jrpc_buf_t *b, uint16_t code)
{
    char p[2] = { (char)(code >> 8), (char)code };
    frame(b, true, 8, p, 2, true);
}

/* Feeds b whole (step 0) or in pieces of step bytes, each piece copied to
 * the end of its own block. Returns the last result. */
static int feed(jrpc_buf_t *b, size_t step)
{
    int rc = 0;
    size_t off = 0;
    if (step == 0)
        step = b->len;
    while (off < b->len) {
        size_t n = b->len - off < step ? b->len - off : step;
        char *blk = malloc(n);
        memcpy(blk, b->p + off, n);
        rc = jrpc_ws_feed(T.ws, blk, n);
        free(blk);
        off += n;
        if (rc != 0)
            break;
    }
    return rc;
}

/* The server's close frame with code, as written: 0x88, length, code. */
static bool wrote_close(uint16_t code)
{
    for (size_t i = 0; i + 4 <= T.out.len; i++)
        if ((uint8_t)T.out.p[i] == 0x88 && (uint8_t)T.out.p[i + 2] == code >> 8 &&
            (uint8_t)T.out.p[i + 3] == (code & 0xff))
            return true;
    return false;
}

static void done(void)
{
    jrpc_ws_destroy(&T.ws);
    assert_null(T.ws);
    jrpc_buf_dispose(&T.out);
}

/* RFC 6455 1.3's example, and keys that are not 16 bytes of base64. */
static void test_accept_key(void **state)
{
    (void)state;
    char out[29];
    assert_int_equal(jrpc_ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", 24, out), 0);
    assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    assert_int_equal(jrpc_ws_accept_key("dGhlIHNhbXBsZSBub25jZQ=", 23, out), -EINVAL);
    assert_int_equal(jrpc_ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==x", 25, out), -EINVAL);
    assert_int_equal(jrpc_ws_accept_key("dGhlIHNhbXBsZSBub25jZ===", 24, out), -EINVAL);
    assert_int_equal(jrpc_ws_accept_key("dGhlIHNhbXBsZSBub25j*Q==", 24, out), -EINVAL);
    assert_int_equal(jrpc_ws_accept_key("", 0, out), -EINVAL);
}

/* Two messages, one of them in fragments with a ping between them, fed
 * whole, byte by byte and in 3-byte pieces: the same two messages and one
 * pong each time. */
static void test_messages_any_split(void **state)
{
    (void)state;
    static const size_t steps[] = { 0, 1, 3, 7 };
    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
        make(1 << 20);
        jrpc_buf_t in;
        jrpc_buf_init(&in);
        text(&in, "{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"id\":1}");
        frame(&in, false, 1, "[{\"jsonrpc\":", 12, true);
        frame(&in, true, 9, "hi", 2, true);              /* ping between fragments */
        frame(&in, false, 0, "\"2.0\",\"method\"", 14, true);
        frame(&in, true, 0, ":\"b\"}]", 6, true);
        assert_int_equal(feed(&in, steps[s]), 0);
        assert_int_equal(T.nmsgs, 2);
        assert_memory_equal(T.msgs[0], "{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"id\":1}", T.lens[0]);
        assert_int_equal(T.lens[1], 32);
        assert_memory_equal(T.msgs[1], "[{\"jsonrpc\":\"2.0\",\"method\":\"b\"}]", 32);
        assert_int_equal(T.out.len, 4);
        assert_memory_equal(T.out.p, "\x8a\x02hi", 4);   /* the pong, unmasked */
        assert_false(jrpc_ws_over(T.ws));
        jrpc_buf_dispose(&in);
        done();
    }
}

/* What the server sends: unmasked text frames with the right length forms;
 * a send from inside the message callback goes out after the feed. */
static void test_send(void **state)
{
    (void)state;
    make(1 << 20);
    assert_int_equal(jrpc_ws_send_text(T.ws, "ok", 2), 0);
    assert_int_equal(T.out.len, 4);
    assert_memory_equal(T.out.p, "\x81\x02ok", 4);
    char big[300];
    memset(big, 'x', sizeof big);
    T.out.len = 0;
    assert_int_equal(jrpc_ws_send_text(T.ws, big, sizeof big), 0);
    assert_int_equal(T.out.len, 4 + sizeof big);
    assert_memory_equal(T.out.p, "\x81\x7e\x01\x2c", 4);
    T.out.len = 0;
    T.echo = true;
    jrpc_buf_t in;
    jrpc_buf_init(&in);
    text(&in, "[1]");
    text(&in, "[2]");
    assert_int_equal(feed(&in, 0), 0);
    assert_int_equal(T.out.len, 10);
    assert_memory_equal(T.out.p, "\x81\x03[1]\x81\x03[2]", 10);
    jrpc_buf_dispose(&in);
    done();
}

/* With write2: a text frame sent outside a feed goes out as its header and
 * the caller's payload (the same bytes, one call); inside a feed it joins
 * the burst, written once at its end; a failed write2 ends the session. */
static void test_send_write2(void **state)
{
    (void)state;
    make(1 << 20);
    jrpc_ws_destroy(&T.ws);
    jrpc_ws_opts_t o = { .max_msg = 1 << 20 };
    jrpc_ws_cbs_t cbs = { .message = on_message, .write = on_write, .write2 = on_write2 };
    T.ws = jrpc_ws_new(&o, &cbs, NULL);
    assert_non_null(T.ws);
    char big[300];
    memset(big, 'x', sizeof big);
    assert_int_equal(jrpc_ws_send_text(T.ws, big, sizeof big), 0);
    assert_int_equal(T.nwrite2, 1);
    assert_int_equal(T.out.len, 4 + sizeof big);
    assert_memory_equal(T.out.p, "\x81\x7e\x01\x2c", 4);
    assert_memory_equal(T.out.p + 4, big, sizeof big);
    T.out.len = 0;
    T.echo = true;
    jrpc_buf_t in;
    jrpc_buf_init(&in);
    text(&in, "[1]");
    text(&in, "[2]");
    assert_int_equal(feed(&in, 0), 0);
    assert_int_equal(T.nwrite2, 1);
    assert_int_equal(T.out.len, 10);
    assert_memory_equal(T.out.p, "\x81\x03[1]\x81\x03[2]", 10);
    T.fail_write = true;
    assert_int_equal(jrpc_ws_send_text(T.ws, "ok", 2), -EPIPE);
    assert_true(jrpc_ws_over(T.ws));
    jrpc_buf_dispose(&in);
    done();
}

/* The peer closes: the close is echoed with its code, the session is over,
 * nothing after it is read, and nothing more can be sent. */
static void test_peer_close(void **state)
{
    (void)state;
    make(1 << 20);
    jrpc_buf_t in;
    jrpc_buf_init(&in);
    close_frame(&in, 1000);
    text(&in, "[1]");
    assert_int_equal(feed(&in, 0), 1);
    assert_true(jrpc_ws_over(T.ws));
    assert_int_equal(T.nmsgs, 0);
    assert_int_equal(jrpc_ws_code_received(T.ws), 1000);
    assert_int_equal(jrpc_ws_code_sent(T.ws), 1000);
    assert_true(wrote_close(1000));
    assert_int_equal(jrpc_ws_send_text(T.ws, "x", 1), -EPIPE);
    jrpc_buf_dispose(&in);
    done();
}

/* Each limit and protocol fault closes with its code; what follows the
 * bad message is not delivered. */
static void test_close_codes(void **state)
{
    (void)state;
    struct { const char *name; int code; } cases[] = {
        { "utf8", 1007 }, { "binary", 1003 }, { "big", 1009 }, { "bigfrag", 1009 },
        { "unmasked", 1002 }, { "rsv", 1002 }, { "badop", 1002 }, { "cont", 1002 },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        for (size_t step = 0; step <= 1; step++) {
            make(64);
            jrpc_buf_t in;
            jrpc_buf_init(&in);
            const char *n = cases[k].name;
            char big[65];
            memset(big, 'a', sizeof big);
            if (!strcmp(n, "utf8"))
                frame(&in, true, 1, "[\"\xed\xa0\x80\"]", 7, true);   /* a surrogate */
            else if (!strcmp(n, "binary"))
                frame(&in, true, 2, "[1]", 3, true);
            else if (!strcmp(n, "big"))
                frame(&in, true, 1, big, 65, true);
            else if (!strcmp(n, "bigfrag")) {
                frame(&in, false, 1, big, 40, true);
                frame(&in, true, 0, big, 25, true);
            } else if (!strcmp(n, "unmasked"))
                frame(&in, true, 1, "[1]", 3, false);
            else if (!strcmp(n, "rsv")) {
                frame(&in, true, 1, "[1]", 3, true);
                in.p[0] |= 0x40;
            } else if (!strcmp(n, "badop"))
                frame(&in, true, 3, "[1]", 3, true);
            else if (!strcmp(n, "cont"))
                frame(&in, true, 0, "[1]", 3, true);   /* a continuation with nothing to continue */
            text(&in, "[2]");
            int rc = feed(&in, step);
            if (rc != 1)
                print_message("case %s step %zu: rc %d\n", n, step, rc);
            assert_int_equal(rc, 1);
            assert_true(jrpc_ws_over(T.ws));
            assert_int_equal(jrpc_ws_code_sent(T.ws), cases[k].code);
            assert_true(wrote_close((uint16_t)cases[k].code));
            assert_int_equal(T.nmsgs, 0);
            jrpc_buf_dispose(&in);
            done();
        }
    }
    /* exactly the limit passes */
    make(64);
    jrpc_buf_t in;
    jrpc_buf_init(&in);
    char lim[64];
    memset(lim, 'a', sizeof lim);
    frame(&in, true, 1, lim, 64, true);
    assert_int_equal(feed(&in, 0), 0);
    assert_int_equal(T.nmsgs, 1);
    jrpc_buf_dispose(&in);
    done();
}

/* Our own close (1001, 1008): written once, then over; a ping is answered
 * by a pong that clears awaiting_pong; a write that fails ends it all. */
static void test_close_ping_write_failure(void **state)
{
    (void)state;
    make(1024);
    assert_int_equal(jrpc_ws_ping(T.ws), 0);
    assert_true(jrpc_ws_awaiting_pong(T.ws));
    assert_int_equal(T.out.len, 6);
    assert_memory_equal(T.out.p, "\x89\x04jrpc", 6);
    jrpc_buf_t in;
    jrpc_buf_init(&in);
    frame(&in, true, 10, "jrpc", 4, true);
    assert_int_equal(feed(&in, 1), 0);
    assert_false(jrpc_ws_awaiting_pong(T.ws));
    T.out.len = 0;
    assert_int_equal(jrpc_ws_close(T.ws, 1008, "send queue full"), 0);
    assert_true(jrpc_ws_over(T.ws));
    assert_true(wrote_close(1008));
    size_t len = T.out.len;
    assert_int_equal(jrpc_ws_close(T.ws, 1001, NULL), 0);   /* a second close: nothing */
    assert_int_equal(T.out.len, len);
    assert_int_equal(jrpc_ws_ping(T.ws), -EPIPE);
    jrpc_buf_dispose(&in);
    done();

    make(1024);
    T.fail_write = true;
    assert_true(jrpc_ws_send_text(T.ws, "x", 1) < 0);
    assert_true(jrpc_ws_over(T.ws));
    jrpc_buf_init(&in);
    text(&in, "[1]");
    assert_true(feed(&in, 0) < 0);
    jrpc_buf_dispose(&in);
    done();
}

/* Appends a frame's header bytes as given (h, hn), a mask key, and n
 * payload bytes: for the headers no client library would write. */
static void raw(jrpc_buf_t *b, const char *h, size_t hn, size_t n)
{
    jrpc_buf_append(b, h, hn);
    jrpc_buf_append(b, "\x37\xfa\x21\x3d", 4);
    for (size_t i = 0; i < n; i++)
        jrpc_buf_append(b, "x", 1);
}

/* Headers wslay's frame reader fails hard on (issue 36, item 7), and a
 * close of one byte: each is answered with exactly one close 1002 (no
 * reason) and the session is over; the message before it is delivered,
 * the one after it is not; fed whole, byte by byte and in pieces. */
static void test_malformed_headers(void **state)
{
    (void)state;
    static const struct { const char *name, *h; size_t hn, n; } cases[] = {
        { "ping of 126 bytes", "\x89\xfe\x00\x7e", 4, 126 },
        { "ping without FIN", "\x09\x82", 2, 2 },
        { "pong of 126 bytes", "\x8a\xfe\x00\x7e", 4, 126 },
        { "close without FIN", "\x08\x82", 2, 2 },
        { "reserved control of 127", "\x8b\xff\x00\x00\x00\x00\x00\x01\x00\x00", 10, 0 },
        { "length 2^63", "\x81\xff\x80\x00\x00\x00\x00\x00\x00\x00", 10, 0 },
        { "length 2^64-1", "\x81\xff\xff\xff\xff\xff\xff\xff\xff\xff", 10, 0 },
        { "16-bit length 3", "\x81\xfe\x00\x03", 4, 3 },
        { "16-bit length 125", "\x81\xfe\x00\x7d", 4, 125 },
        { "64-bit length 3", "\x81\xff\x00\x00\x00\x00\x00\x00\x00\x03", 10, 3 },
        { "64-bit length 65535", "\x81\xff\x00\x00\x00\x00\x00\x00\xff\xff", 10, 0 },
        { "close of one byte", "\x88\x81", 2, 1 },
    };
    static const size_t steps[] = { 0, 1, 3 };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        for (size_t st = 0; st < sizeof steps / sizeof steps[0]; st++) {
            make(1 << 20);
            jrpc_buf_t in;
            jrpc_buf_init(&in);
            text(&in, "[1]");
            raw(&in, cases[k].h, cases[k].hn, cases[k].n);
            text(&in, "[2]");
            int rc = feed(&in, steps[st]);
            if (rc != 1 || T.out.len != 4)
                print_message("case %s step %zu: rc %d, %zu bytes out\n", cases[k].name,
                              steps[st], rc, T.out.len);
            assert_int_equal(rc, 1);
            assert_int_equal(T.out.len, 4);
            assert_memory_equal(T.out.p, "\x88\x02\x03\xea", 4);
            assert_true(jrpc_ws_over(T.ws));
            assert_int_equal(jrpc_ws_code_sent(T.ws), 1002);
            assert_int_equal(T.nmsgs, 1);
            assert_memory_equal(T.msgs[0], "[1]", 3);
            /* nothing more is read or written */
            assert_int_equal(jrpc_ws_feed(T.ws, in.p, in.len), 1);
            assert_int_equal(T.out.len, 4);
            jrpc_buf_dispose(&in);
            done();
        }
    }
    /* The shortest forms at their edges are fine: 16-bit 126, 64-bit 65536,
     * a ping of 125, a close of 0 bytes (answered without a status). */
    make(1 << 20);
    jrpc_buf_t in;
    jrpc_buf_init(&in);
    char big[65536];
    memset(big, 'a', sizeof big);
    frame(&in, true, 1, big, 126, true);
    frame(&in, true, 1, big, 65536, true);
    frame(&in, true, 9, big, 125, true);
    assert_int_equal(feed(&in, 0), 0);
    assert_int_equal(T.nmsgs, 2);
    assert_int_equal(T.out.len, 2 + 125);
    in.len = 0;
    T.out.len = 0;
    frame(&in, true, 8, "", 0, true);
    assert_int_equal(feed(&in, 1), 1);
    assert_int_equal(T.out.len, 2);
    assert_memory_equal(T.out.p, "\x88\x00", 2);
    jrpc_buf_dispose(&in);
    done();
}

/* The peer's close, held by the session and answered by it (wslay read a
 * close's reason for UTF-8 skipping two bytes of every piece): whatever
 * the reads, a good close is echoed with its code and reason, a bad reason
 * gets 1007, a bad code, an unmasked close or one with RSV bits 1002. An
 * answer given in the feed that brings the close goes out before it. */
static void test_peer_close_forms(void **state)
{
    (void)state;
    static const size_t steps[] = { 0, 1, 2, 3 };
    static const struct { const char *payload; size_t n; bool masked; int rsv; int code; } cases[] = {
        { "\x03\xe8\xc3\xa9t\xc3\xa9", 7, true, 0, 1000 },   /* 1000 "été" */
        { "\x0f\xa0ok", 4, true, 0, 4000 },
        { "\x03\xe8\xed\xa0\x80", 5, true, 0, 1007 },    /* a surrogate in the reason */
        { "\x03\xe8\xc3", 3, true, 0, 1007 },              /* a cut sequence */
        { "\x03\xed", 2, true, 0, 1002 },                   /* 1005 may not be sent */
        { "\x03\xe7", 2, true, 0, 1002 },                   /* 999 */
        { "\x03\xe8", 2, false, 0, 1002 },                  /* unmasked */
        { "\x03\xe8", 2, true, 0x40, 1002 },                /* RSV1 */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        for (size_t st = 0; st < sizeof steps / sizeof steps[0]; st++) {
            make(1 << 20);
            T.echo = true;
            jrpc_buf_t in;
            jrpc_buf_init(&in);
            text(&in, "[1]");
            size_t at = in.len;
            frame(&in, true, 8, cases[k].payload, cases[k].n, cases[k].masked);
            in.p[at] |= (char)cases[k].rsv;
            text(&in, "[2]");
            assert_int_equal(feed(&in, steps[st]), 1);
            assert_int_equal(T.nmsgs, 1);
            uint16_t code = (uint16_t)cases[k].code;
            assert_int_equal(jrpc_ws_code_sent(T.ws), code);
            /* the echo of [1] (unless it went out in an earlier read: it is
             * first either way), then exactly one close */
            assert_memory_equal(T.out.p, "\x81\x03[1]", 5);
            char want[16] = { (char)0x88, 2, (char)(code >> 8), (char)code };
            size_t wn = 4;
            if (code == 1000 || code == 4000) {   /* echoed with its reason */
                want[1] = (char)cases[k].n;
                memcpy(want + 2, cases[k].payload, cases[k].n);
                wn = 2 + cases[k].n;
                assert_int_equal(jrpc_ws_code_received(T.ws), code);
            } else {
                assert_int_equal(jrpc_ws_code_received(T.ws), 0);
            }
            assert_int_equal(T.out.len, 5 + wn);
            assert_memory_equal(T.out.p + 5, want, wn);
            jrpc_buf_dispose(&in);
            done();
        }
    }
}

/* Whole text frames are read by jrpc_ws itself (issue 35), the rest by
 * wslay: in one feed, messages of each length form, a ping, a message
 * whose frame ends in the next feed, and messages after it, come out in
 * order, echoed in order around the pong; UTF-8 is checked past the ASCII
 * words (a bad byte after 8 good ones: 1007, nothing after it read). */
static void test_frames_read_here(void **state)
{
    (void)state;
    make(1 << 20);
    T.echo = true;
    static char mid[300], huge[70000];
    memset(mid, 'm', sizeof mid);
    memset(huge, 'h', sizeof huge);
    const char *utf = "[\"abcdefgh\u00e9\xc3\xa9\xe2\x82\xac\"]";   /* ASCII, then 2- and 3-byte */
    jrpc_buf_t in;
    jrpc_buf_init(&in);
    text(&in, utf);
    frame(&in, true, 1, mid, sizeof mid, true);
    frame(&in, true, 9, "p", 1, true);
    frame(&in, true, 1, huge, sizeof huge, true);
    size_t cut = in.len + 3;   /* the next frame's header and a byte of its key */
    text(&in, "[\"split\"]");
    text(&in, "[3]");
    char *a = malloc(cut), *b = malloc(in.len - cut);
    memcpy(a, in.p, cut);
    memcpy(b, in.p + cut, in.len - cut);
    assert_int_equal(jrpc_ws_feed(T.ws, a, cut), 0);
    assert_int_equal(T.nmsgs, 3);
    assert_int_equal(jrpc_ws_feed(T.ws, b, in.len - cut), 0);
    free(a);
    free(b);
    assert_int_equal(T.nmsgs, 5);
    assert_int_equal(T.lens[0], strlen(utf));
    assert_memory_equal(T.msgs[0], utf, strlen(utf));
    assert_int_equal(T.lens[1], sizeof mid);
    assert_memory_equal(T.msgs[1], mid, sizeof mid);
    assert_int_equal(T.lens[2], sizeof huge);
    assert_memory_equal(T.msgs[2], huge, sizeof T.msgs[2]);
    assert_memory_equal(T.msgs[3], "[\"split\"]", T.lens[3]);
    assert_memory_equal(T.msgs[4], "[3]", T.lens[4]);
    /* echoes and the pong, in the order they were asked for */
    size_t o = 0, ul = strlen(utf);
    assert_true(T.out.len > 2 + ul);
    assert_memory_equal(T.out.p, "\x81", 1);
    assert_int_equal((uint8_t)T.out.p[1], ul);
    assert_memory_equal(T.out.p + 2, utf, ul);
    o = 2 + ul;
    assert_memory_equal(T.out.p + o, "\x81\x7e\x01\x2c", 4);
    o += 4 + sizeof mid;
    assert_memory_equal(T.out.p + o, "\x8a\x01p", 3);
    o += 3;
    assert_memory_equal(T.out.p + o, "\x81\x7f\0\0\0\0\0\x01\x11\x70", 10);   /* 70000 */
    o += 10 + sizeof huge;
    assert_memory_equal(T.out.p + o, "\x81\x09[\"split\"]\x81\x03[3]", 16);
    assert_int_equal(T.out.len, o + 16);
    jrpc_buf_dispose(&in);
    done();

    make(1 << 20);
    jrpc_buf_init(&in);
    text(&in, "[1]");
    text(&in, "[\"abcdefghijklmnopq\xc3\xa9rstuvwxyz0123456789\"]");   /* é among the first 32 */
    text(&in, "[\"abcdefghijklmnopq\xc3rstuvwxyz0123456789\"]");       /* a lone lead byte */
    text(&in, "[2]");
    assert_int_equal(feed(&in, 0), 1);
    assert_int_equal(T.nmsgs, 2);
    assert_int_equal(jrpc_ws_code_sent(T.ws), 1007);
    jrpc_buf_dispose(&in);
    done();

    /* the same past the first 128 bytes (the widest vector turn) */
    make(1 << 20);
    jrpc_buf_init(&in);
    char wide[300];
    memset(wide, 'w', sizeof wide);
    wide[0] = '"';
    wide[sizeof wide - 1] = '"';
    memcpy(wide + 140, "\xc3\xa9", 2);
    frame(&in, true, 1, wide, sizeof wide, true);
    wide[141] = 'x';   /* a lead byte without its continuation */
    frame(&in, true, 1, wide, sizeof wide, true);
    text(&in, "[2]");
    assert_int_equal(feed(&in, 0), 1);
    assert_int_equal(T.nmsgs, 1);
    assert_int_equal(T.lens[0], sizeof wide);
    assert_int_equal(jrpc_ws_code_sent(T.ws), 1007);
    assert_true(wrote_close(1007));
    jrpc_buf_dispose(&in);
    done();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accept_key),
        cmocka_unit_test(test_messages_any_split),
        cmocka_unit_test(test_send),
        cmocka_unit_test(test_send_write2),
        cmocka_unit_test(test_peer_close),
        cmocka_unit_test(test_close_codes),
        cmocka_unit_test(test_close_ping_write_failure),
        cmocka_unit_test(test_malformed_headers),
        cmocka_unit_test(test_peer_close_forms),
        cmocka_unit_test(test_frames_read_here),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
