/* Tests of jrpc_wire's RESPONSE frames read in place (wire_fixture.h):
 * jrpc_wire_response_open + _next against the tree path (jrpc_wire_decode +
 * jrpc_wire_response_item) as the oracle, on generated frames. */
#include "wire_fixture.h"

/* ---- RESPONSE frames read in place, against the tree path ----
 *
 * jrpc_wire_decode + jrpc_wire_response_item are the oracle for
 * jrpc_wire_response_open + _next: the same verdict on every frame
 * (malformed anywhere: refused before any item is read), the same verdict
 * on every item, the same seq and flag, and values that answer a call with
 * the same text. */

static const char rsp_body[] = "[{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":1}]";

static struct {
    unsigned frames, responses, items, answers;
} R;

static void rsp_batch(jrpc_batch_t *b)
{
    jrpc_limits_t lim = JRPC_LIMITS_DEFAULT;
    jrpc_batch_init(b);
    assert_int_equal(jrpc_batch_parse(b, rsp_body, sizeof rsp_body - 1, &lim), 0);
}

static void diff_response(const void *bytes, size_t n)
{
    frame_t f;
    frame_decode(&f, bytes, n);   /* its own exact-size copy: an over-read trips ASan */
    jrpc_wire_rsp_t r;
    int rc = jrpc_wire_response_open(f.buf, n, &r);
    R.frames++;
    if (rc == 1) {   /* not a RESPONSE: the tree decoder says what it is */
        assert_false(f.rc == 0 && f.m.type == JRPC_WIRE_RESPONSE);
        assert_true(jrpc_wire_peek_type(f.buf, n) != JRPC_WIRE_RESPONSE);
        frame_dispose(&f);
        return;
    }
    assert_int_equal(jrpc_wire_peek_type(f.buf, n), JRPC_WIRE_RESPONSE);
    assert_int_equal(rc, f.rc);
    if (rc == 0) {
        R.responses++;
        assert_int_equal(f.m.type, JRPC_WIRE_RESPONSE);
        assert_int_equal(r.nitems, f.m.nitems);
        for (uint32_t k = 0; k < f.m.nitems; k++) {
            jrpc_wire_answer_t a;
            jrpc_wire_answer_raw_t ar;
            assert_int_equal(r.next, k);
            int it = jrpc_wire_response_item(&f.m, k, &a);
            int ir = jrpc_wire_response_next(&r, &ar);
            assert_int_equal(it, ir);
            R.items++;
            if (it < 0)
                continue;
            assert_true(ar.seq == a.seq);
            assert_int_equal(ar.is_error, a.is_error);
            /* The span is exactly the value: it unpacks to the same tree. */
            msgpack_zone z;
            msgpack_object o;
            assert_true(msgpack_zone_init(&z, 256));
            assert_int_equal(jrpc_mpack_unpack(ar.value.p, ar.value.n, JRPC_WIRE_MAX_DEPTH, &z, &o), 0);
            jrpc_buf_t pt, pr;
            msgpack_packer kt, kr;
            pk_init(&kt, &pt);
            pk_init(&kr, &pr);
            assert_int_equal(msgpack_pack_object(&kt, *a.value), 0);
            assert_int_equal(msgpack_pack_object(&kr, o), 0);
            assert_int_equal(pt.len, pr.len);
            assert_memory_equal(pt.p, pr.p, pt.len);
            jrpc_buf_dispose(&pt);
            jrpc_buf_dispose(&pr);
            msgpack_zone_destroy(&z);
            /* And it answers a call as the tree does. */
            jrpc_batch_t bt, br;
            rsp_batch(&bt);
            rsp_batch(&br);
            if (a.is_error) {
                assert_int_equal(jrpc_batch_answer_error_obj(&bt, 0, a.value), 0);
                assert_int_equal(jrpc_batch_answer_error_raw(&br, 0, ar.value), 0);
            } else {
                assert_int_equal(jrpc_batch_answer_result(&bt, 0, a.value), 0);
                assert_int_equal(jrpc_batch_answer_result_raw(&br, 0, ar.value), 0);
            }
            const jrpc_call_t *ct = &bt.calls[0], *cr = &br.calls[0];
            assert_int_equal(ct->error, cr->error);
            assert_int_equal(ct->code, cr->code);
            assert_int_equal(ct->answer.n, cr->answer.n);
            assert_memory_equal(ct->answer.p, cr->answer.p, ct->answer.n);
            R.answers++;
            jrpc_batch_dispose(&bt);
            jrpc_batch_dispose(&br);
        }
        assert_int_equal(r.next, r.nitems);
        assert_true(r.p == r.end || r.p < r.end);   /* extra elements may follow the items */
    }
    frame_dispose(&f);
}

/* An array head of n in a random encoding. */
static void gen_array(jrpc_buf_t *b, uint32_t n)
{
    gen_len_head(b, n, 0x90, 15, 0, 0xdc, 0xdd);
}

static void gen_error_map(jrpc_buf_t *b)
{
    uint32_t n = (uint32_t)(rng() % 4);
    gen_len_head(b, n, 0x80, 15, 0, 0xde, 0xdf);
    static const char *const keys[] = { "code", "message", "data", "x" };
    for (uint32_t i = 0; i < n; i++) {
        const char *k = keys[rng() % 4];
        gen_len_head(b, (uint32_t)strlen(k), 0xa0, 31, 0xd9, 0xda, 0xdb);
        assert_int_equal(jrpc_buf_append(b, k, strlen(k)), 0);
        switch (rng() % 4) {
        case 0: gen_neg(b, -32000 - (int64_t)(rng() % 100)); break;
        case 1: gen_uint(b, rng() % 3 ? rng() % 100 : (uint64_t)1 << 31); break;
        case 2: gen_str(b, rng() % 4 != 0); break;
        default: gen_value(b, 3, false); break;
        }
    }
}

/* One item: mostly well-formed [seq, 0|1, value], sometimes not. */
static void gen_item(jrpc_buf_t *b)
{
    unsigned kind = (unsigned)(rng() % 12);
    if (kind == 0) {   /* not an array */
        gen_value(b, 2, false);
        return;
    }
    uint32_t n = kind == 1 ? (uint32_t)(rng() % 3) : kind == 2 ? 4 + (uint32_t)(rng() % 2) : 3;
    gen_array(b, n);
    for (uint32_t e = 0; e < n; e++) {
        if (e == 0) {   /* seq: 0 and non-integers now and then */
            if (kind == 3)
                pack_bad_value(&(msgpack_packer){ b, jrpc_mpack_buf_write }, (int)(rng() % NBAD));
            else
                gen_uint(b, kind == 4 ? 0 : rng() % 2 ? (rng() | 1) : 1 + rng() % 1000);
        } else if (e == 1) {
            gen_uint(b, kind == 5 ? 2 + rng() % 3 : rng() % 4 == 0);
        } else if (e == 2 && b->len > 0 && kind != 6 && rng() % 3 == 0) {
            gen_error_map(b);   /* with flag 0 too: a map result */
        } else {
            gen_value(b, 4, rng() % 2);
        }
    }
}

/* [1, 3, [items], extra...] with every head in a random encoding. */
static void gen_response(jrpc_buf_t *b, uint32_t nitems, uint32_t extra)
{
    gen_array(b, 3 + extra);
    gen_uint(b, 1);
    gen_uint(b, 3);
    gen_array(b, nitems);
    for (uint32_t k = 0; k < nitems; k++)
        gen_item(b);
    for (uint32_t k = 0; k < extra; k++)
        gen_value(b, 2, false);
}

static void test_response_in_place(void **state)
{
    (void)state;
    jrpc_buf_t b;
    jrpc_buf_init(&b);
    for (int i = 0; i < 4000; i++) {
        jrpc_buf_reset(&b);
        gen_response(&b, (uint32_t)(rng() % 6), rng() % 4 == 0 ? 1 + (uint32_t)(rng() % 2) : 0);
        diff_response(b.p, b.len);
        /* Cut short, a byte changed (the head too), a byte more. */
        if (b.len < 64) {
            for (size_t k = 0; k < b.len; k++)
                diff_response(b.p, k);
        } else {
            diff_response(b.p, (size_t)(rng() % b.len));
        }
        for (int m = 0; m < 3; m++) {
            size_t at = (size_t)(rng() % b.len);
            char keep = b.p[at];
            b.p[at] = (char)(rng() & 0xff);
            diff_response(b.p, b.len);
            b.p[at] = keep;
        }
        gen_byte(&b, rng() % 2 ? 0xc1 : (unsigned)(rng() & 0xff));
        diff_response(b.p, b.len);
    }
    /* Every other message type goes to the tree decoder. */
    void (*const builds[])(jrpc_buf_t *) = { build_ready, build_request, build_response };
    for (int k = 0; k < 3; k++) {
        jrpc_buf_t m;
        builds[k](&m);
        diff_response(m.p, m.len);
        jrpc_buf_dispose(&m);
    }
    /* The frame's depth limit, 1100 levels: the items hold three of them. */
    for (int levels = JRPC_WIRE_MAX_DEPTH - 4; levels <= JRPC_WIRE_MAX_DEPTH - 2; levels++) {
        for (int where = 0; where < 2; where++) {
            jrpc_buf_reset(&b);
            gen_byte(&b, where ? 0x94 : 0x93), gen_byte(&b, 1), gen_byte(&b, 3);
            gen_byte(&b, 0x91), gen_byte(&b, 0x93), gen_byte(&b, 0x01), gen_byte(&b, 0x00);
            gen_nested(&b, where ? 1 : levels, false);
            if (where)   /* or in an extra element after the items */
                gen_nested(&b, levels + 1, false);
            diff_response(b.p, b.len);
        }
    }
    jrpc_buf_dispose(&b);
    print_message("in place: %u frames, %u responses, %u items, %u answers\n", R.frames,
                  R.responses, R.items, R.answers);
    assert_true(R.responses > 3000 && R.answers > 5000 && R.items > R.answers);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_response_in_place),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
