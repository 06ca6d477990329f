/* The helpers every test_jrpc_wire*.c program shares: a frame decoded from
 * a malloc'd copy of exactly its size (so an over-read trips ASan), the
 * checks of a frame's verdict at every prefix, the packers of hand-made
 * frames, the three demo frames (READY, REQUEST, RESPONSE) and the table of
 * byte cases that must be malformed. Include it once from one .c per
 * program; not every program uses every helper, hence -Wunused-function is
 * off here. */
#ifndef JRPC_TEST_WIRE_FIXTURE_H
#define JRPC_TEST_WIRE_FIXTURE_H

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>
#include <msgpack.h>
#include "jrpc_json.h"
#include "jrpc_mpack.h"
#include "jrpc_wire.h"
#include "jrpc_batch.h"
#include "mpack_helpers.h"
#include "mpack_gen.h"

#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

/* ---- helpers ---- */

/* A decoded frame: owns its exact-size copy of the bytes and the zone. */
typedef struct frame {
    char           *buf;
    msgpack_zone    zone;
    jrpc_wire_msg_t m;
    int             rc;
} frame_t;

static void frame_decode(frame_t *f, const void *bytes, size_t n)
{
    f->buf = malloc(n ? n : 1);
    assert_non_null(f->buf);
    if (n)
        memcpy(f->buf, bytes, n);
    assert_true(msgpack_zone_init(&f->zone, 256));
    f->rc = jrpc_wire_decode(f->buf, n, &f->zone, &f->m);
}

static void frame_dispose(frame_t *f)
{
    msgpack_zone_destroy(&f->zone);
    free(f->buf);
}

/* Decodes, then every item of a REQUEST/RESPONSE: returns the first error,
 * or 0 when the whole frame is valid. */
static int check_bytes(const void *bytes, size_t n)
{
    frame_t f;
    frame_decode(&f, bytes, n);
    int rc = f.rc;
    if (rc == 0) {
        assert_true(f.m.type >= JRPC_WIRE_READY && f.m.type <= JRPC_WIRE_MESSAGE);
        /* Whatever decodes, its head reads the same way. */
        assert_int_equal(jrpc_wire_peek_type(f.buf, n), f.m.type);
        for (uint32_t i = 0; i < f.m.nitems && rc == 0; i++) {
            if (f.m.type == JRPC_WIRE_REQUEST) {
                jrpc_wire_call_t c;
                rc = jrpc_wire_request_item(&f.m, i, &c);
            } else {
                jrpc_wire_answer_t a;
                rc = jrpc_wire_response_item(&f.m, i, &a);
            }
        }
    } else {
        assert_true(rc == JRPC_WIRE_EMALFORMED || rc == JRPC_WIRE_EVERSION);
    }
    frame_dispose(&f);
    return rc;
}

static int check_buf(jrpc_buf_t *b)
{
    int rc = check_bytes(b->p, b->len);
    jrpc_buf_dispose(b);
    return rc;
}

/* Decodes bytes into f, which must succeed. */
static void decode_ok(frame_t *f, const void *bytes, size_t n)
{
    frame_decode(f, bytes, n);
    assert_int_equal(f->rc, 0);
}

/* Every proper prefix of the n bytes is malformed. */
static void expect_prefixes_malformed(const void *bytes, size_t n)
{
    for (size_t k = 0; k < n; k++)
        assert_int_equal(check_bytes(bytes, k), JRPC_WIRE_EMALFORMED);
}

/* b holds exactly the n bytes of ex. */
static void expect_buf(const jrpc_buf_t *b, const void *ex, size_t n)
{
    assert_int_equal(b->len, n);
    assert_memory_equal(b->p, ex, n);
}

/* A packer on a fresh b, the frame's head written: [1, type, ... of nelems. */
static void pk_head(msgpack_packer *pk, jrpc_buf_t *b, uint32_t nelems, int type)
{
    pk_init(pk, b);
    msgpack_pack_array(pk, nelems);
    msgpack_pack_int(pk, 1);
    msgpack_pack_int(pk, type);
}

/* [1, type, [[ then an item of item_len elements, for the caller to write. */
static void pk_one_item(msgpack_packer *pk, jrpc_buf_t *b, int type, uint32_t item_len)
{
    pk_head(pk, b, 3, type);
    msgpack_pack_array(pk, 1);
    msgpack_pack_array(pk, item_len);
}

/* Valid frames used by the truncation and mutation tests. */
static const char *const demo_methods[] = { "subtract", "sum", "echo" };

static void build_ready(jrpc_buf_t *b)
{
    jrpc_buf_init(b);
    assert_int_equal(jrpc_wire_put_ready(b, 64, demo_methods, 3), 0);
}

static void build_request(jrpc_buf_t *b)
{
    /* params: [42, 23] and {"a": [1.5, "x"]} as msgpack */
    static const char p1[] = { (char)0x92, 42, 23 };
    static const char p2[] = { (char)0x81, (char)0xa1, 'a', (char)0x92, (char)0xcb, 0x3f,
                               (char)0xf8, 0, 0, 0, 0, 0, 0, (char)0xa1, 'x' };
    jrpc_buf_init(b);
    assert_int_equal(jrpc_wire_put_request_begin(b), 0);
    assert_int_equal(jrpc_wire_put_request_call(b, 1, span("subtract"),
                                                (jrpc_span_t){ p1, sizeof p1 }, 5000, NOSPAN), 0);
    assert_int_equal(jrpc_wire_put_request_call(b, UINT64_MAX, span("echo"),
                                                (jrpc_span_t){ p2, sizeof p2 }, 0, NOSPAN), 0);
    assert_int_equal(jrpc_wire_put_request_call(b, 7, span("get_data"),
                                                (jrpc_span_t){ NULL, 0 }, UINT32_MAX, NOSPAN), 0);
    jrpc_wire_put_request_end(b, 3);
}

static void build_response(jrpc_buf_t *b)
{
    static const char data[] = { (char)0xa3, 'b', 'a', 'd' };
    jrpc_buf_init(b);
    assert_int_equal(jrpc_wire_put_response_begin(b), 0);
    assert_int_equal(jrpc_wire_put_result_head(b, 1), 0);
    assert_int_equal(jrpc_buf_putc(b, 19), 0);
    assert_int_equal(jrpc_wire_put_error(b, 2, -32602, "Invalid params",
                                         (jrpc_span_t){ NULL, 0 }), 0);
    assert_int_equal(jrpc_wire_put_error(b, 3, -32000, "Server busy",
                                         (jrpc_span_t){ data, sizeof data }), 0);
    jrpc_wire_put_response_end(b, 3);
}

/* Decodes a hand-made frame into *m (a copy of exactly n bytes); returns rc.
 * Only m's scalars may be read afterwards. */
static int decode_msg(const void *bytes, size_t n, jrpc_wire_msg_t *m)
{
    frame_t f;
    frame_decode(&f, bytes, n);
    *m = f.m;
    int rc = f.rc;
    frame_dispose(&f);
    return rc;
}

typedef struct bytes_case {
    const char *b;
    size_t      n;
} bytes_case_t;

#define CASE(lit) { lit, sizeof lit - 1 }

/* Each of the n frames is malformed; a failure names `what` and the case. */
static void expect_malformed(const bytes_case_t *cases, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (check_bytes(cases[i].b, cases[i].n) != JRPC_WIRE_EMALFORMED)
            fail_msg("%s %zu decoded", what, i);
}

/* Writes one of the demo frames into a buffer. */
typedef void (*builder_fn)(jrpc_buf_t *);

#pragma GCC diagnostic pop

#endif
