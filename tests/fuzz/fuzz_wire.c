/* fuzz_wire — libFuzzer target for the worker-frame decoder (proto/jrpc_wire).
 *
 * Each input is one ZeroMQ frame as a worker (or the broker) would send it:
 *  - jrpc_wire_decode(), then every item with jrpc_wire_request_item() or
 *    jrpc_wire_response_item(); READY's methods and options are walked;
 *    HEARTBEAT settings and REJECT are checked against their bounds; the
 *    frame's head (jrpc_wire_peek_type) agrees with what decoded, and a
 *    valid item's seq reads the same by jrpc_wire_request_item_seq();
 *  - a decoded REQUEST call is re-encoded with the encoder and decoded again:
 *    seq, method, timeout and the params' bytes must survive the round trip;
 *    params given as JSON text (a bin) go back as the same bin, and, when
 *    jrpc_json_check() accepts them as an array or object, also transcoded
 *    as the broker does for a msgpack worker
 *    (jrpc_wire_put_request_call_json): they must decode to an array or map
 *    that writes back as valid JSON;
 *  - RESPONSE answers are fed, as the broker does, to a small parsed batch
 *    (call seq % ncalls, first answer wins) with jrpc_batch_answer_result()
 *    or jrpc_batch_answer_error_obj(); the reply must be valid JSON (results
 *    and error data given as JSON text, a bin, included);
 *  - params and results that jrpc_json_write_msgpack() accepts must come out
 *    as valid JSON;
 *  - the in-place RESPONSE reader the broker uses (jrpc_wire_response_open,
 *    _next) against the tree: the same verdict on the frame and on each
 *    item, the same seq and flag, and each value answering a call with the
 *    same text (jrpc_batch_answer_result_raw / _error_raw against
 *    jrpc_batch_answer_result / _error_obj);
 *  - the same bytes go through jrpc_header_decode() (client header frame,
 *    proto/jrpc_header).
 * A broken invariant is an abort(), which libFuzzer reports as a crash. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <msgpack.h>

#include "jrpc_batch.h"
#include "jrpc_header.h"
#include "jrpc_json.h"
#include "jrpc_mpack.h"
#include "jrpc_wire.h"

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "fuzz_wire: invariant failed: %s (%s:%d)\n", #cond,      \
                    __FILE__, __LINE__);                                             \
            abort();                                                                 \
        }                                                                            \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char batch_body[] =
    "[{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"params\":[1],\"id\":1},"
    "{\"jsonrpc\":\"2.0\",\"method\":\"b\",\"id\":\"x\"},"
    "{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{}},"
    "{\"jsonrpc\":\"2.0\",\"method\":\"c\",\"id\":null}]";

static int buf_write(void *d, const char *p, size_t n)
{
    return jrpc_buf_append(d, p, n) < 0 ? -1 : 0;
}

/* A value jrpc_json_write_msgpack() accepts must be valid JSON. */
static void check_json_form(const msgpack_object *o)
{
    jrpc_buf_t j;
    jrpc_buf_init(&j);
    int rc = jrpc_json_write_msgpack(&j, o, JRPC_WIRE_MAX_DEPTH);
    CHECK(rc == 0 || rc == JRPC_JSON_EUNREPR || rc == JRPC_JSON_EDEPTH);
    if (rc == 0)
        CHECK(jrpc_json_validate(j.p, j.len, JRPC_WIRE_MAX_DEPTH) == 0);
    else
        CHECK(j.len == 0);
    jrpc_buf_dispose(&j);
}

/* Params as JSON text: the same bin again; transcoded when they check. */
static void request_json_round_trip(const jrpc_wire_call_t *c)
{
    jrpc_buf_t fb;
    jrpc_buf_init(&fb);
    msgpack_zone z;
    CHECK(msgpack_zone_init(&z, 256));
    jrpc_wire_msg_t m;
    jrpc_wire_call_t c2;
    CHECK(jrpc_wire_put_request_begin(&fb) == 0);
    CHECK(jrpc_wire_put_request_call_json(&fb, c->seq, c->method, c->params_json, true,
                                          c->timeout_ms, c->traceparent) == 0);
    jrpc_wire_put_request_end(&fb, 1);
    CHECK(jrpc_wire_decode(fb.p, fb.len, &z, &m) == 0);
    CHECK(jrpc_wire_request_item(&m, 0, &c2) == 0);
    CHECK(c2.json && c2.seq == c->seq && c2.params_json.n == c->params_json.n &&
          (c->params_json.n == 0 ||
           memcmp(c2.params_json.p, c->params_json.p, c->params_json.n) == 0));
    jrpc_span_t v;
    if (c->params_json.n > 0 &&
        jrpc_json_check(c->params_json.p, c->params_json.n, 1024, &v) == 0 &&
        (v.p[0] == '[' || v.p[0] == '{')) {
        jrpc_buf_reset(&fb);
        msgpack_zone_clear(&z);
        CHECK(jrpc_wire_put_request_begin(&fb) == 0);
        CHECK(jrpc_wire_put_request_call_json(&fb, c->seq, c->method, c->params_json, false,
                                              c->timeout_ms, c->traceparent) == 0);
        jrpc_wire_put_request_end(&fb, 1);
        CHECK(jrpc_wire_decode(fb.p, fb.len, &z, &m) == 0);
        CHECK(jrpc_wire_request_item(&m, 0, &c2) == 0);
        CHECK(!c2.json && (c2.params->type == MSGPACK_OBJECT_ARRAY ||
                           c2.params->type == MSGPACK_OBJECT_MAP));
        jrpc_buf_t j;
        jrpc_buf_init(&j);
        CHECK(jrpc_json_write_msgpack(&j, c2.params, JRPC_WIRE_MAX_DEPTH) == 0);
        CHECK(jrpc_json_validate(j.p, j.len, JRPC_WIRE_MAX_DEPTH) == 0);
        jrpc_buf_dispose(&j);
    }
    msgpack_zone_destroy(&z);
    jrpc_buf_dispose(&fb);
}

/* Re-encodes one REQUEST call and decodes it again. */
static void request_round_trip(const jrpc_wire_call_t *c)
{
    if (c->json) {
        request_json_round_trip(c);
        return;
    }
    jrpc_buf_t pb, fb;
    jrpc_buf_init(&pb);
    jrpc_buf_init(&fb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &pb, buf_write);
    if (c->params->type != MSGPACK_OBJECT_NIL)
        CHECK(msgpack_pack_object(&pk, *c->params) == 0);
    jrpc_span_t params = { pb.p, pb.len };
    CHECK(jrpc_wire_put_request_begin(&fb) == 0);
    CHECK(jrpc_wire_put_request_call(&fb, c->seq, c->method, params, c->timeout_ms,
                                     c->traceparent) == 0);
    jrpc_wire_put_request_end(&fb, 1);

    msgpack_zone z;
    CHECK(msgpack_zone_init(&z, 256));
    jrpc_wire_msg_t m;
    jrpc_wire_call_t c2;
    CHECK(jrpc_wire_decode(fb.p, fb.len, &z, &m) == 0);
    CHECK(m.type == JRPC_WIRE_REQUEST && m.nitems == 1);
    CHECK(jrpc_wire_request_item(&m, 0, &c2) == 0);
    CHECK(c2.seq == c->seq && c2.timeout_ms == c->timeout_ms);
    CHECK(c2.traceparent.n == c->traceparent.n &&
          (c->traceparent.n == 0 || memcmp(c2.traceparent.p, c->traceparent.p, c->traceparent.n) == 0));
    CHECK(c2.method.n == c->method.n && memcmp(c2.method.p, c->method.p, c->method.n) == 0);
    CHECK(c2.params->type == c->params->type);
    if (c->params->type != MSGPACK_OBJECT_NIL) { /* the same bytes once packed again */
        jrpc_buf_t pb2;
        jrpc_buf_init(&pb2);
        msgpack_packer pk2;
        msgpack_packer_init(&pk2, &pb2, buf_write);
        CHECK(msgpack_pack_object(&pk2, *c2.params) == 0);
        CHECK(pb2.len == pb.len && memcmp(pb2.p, pb.p, pb.len) == 0);
        jrpc_buf_dispose(&pb2);
    }
    msgpack_zone_destroy(&z);
    jrpc_buf_dispose(&fb);
    jrpc_buf_dispose(&pb);
}

static void feed_response(const jrpc_wire_msg_t *m)
{
    jrpc_limits_t lim = JRPC_LIMITS_DEFAULT;
    jrpc_batch_t b;
    jrpc_batch_init(&b);
    CHECK(jrpc_batch_parse(&b, batch_body, sizeof batch_body - 1, &lim) == 0);
    CHECK(b.ncalls == 4 && b.is_array);
    bool done[4] = { false };
    for (uint32_t i = 0; i < m->nitems; i++) {
        jrpc_wire_answer_t a;
        int rc = jrpc_wire_response_item(m, i, &a);
        CHECK(rc == 0 || rc == JRPC_WIRE_EMALFORMED);
        if (rc < 0)
            continue;
        CHECK(a.seq != 0 && a.value != NULL);
        CHECK(!a.is_error || a.value->type == MSGPACK_OBJECT_MAP);
        if (!a.is_error)
            check_json_form(a.value);
        uint32_t k = (uint32_t)(a.seq % b.ncalls);
        if (done[k])
            continue;
        done[k] = true;
        if (a.is_error)
            CHECK(jrpc_batch_answer_error_obj(&b, k, a.value) == 0);
        else
            CHECK(jrpc_batch_answer_result(&b, k, a.value) == 0);
    }
    for (uint32_t k = 0; k < b.ncalls; k++)
        if (!done[k])
            CHECK(jrpc_batch_answer_error(&b, k, -32603, "no answer") == 0);
    jrpc_buf_t out;
    jrpc_buf_init(&out);
    CHECK(jrpc_batch_write_reply(&b, &out) == 0);
    int rc = jrpc_json_validate(out.p, out.len, JRPC_WIRE_MAX_DEPTH);
    if (rc != 0) {
        fprintf(stderr, "fuzz_wire: reply is not JSON (%d): %.*s\n", rc,
                (int)(out.len > 2000 ? 2000 : out.len), out.p);
        abort();
    }
    jrpc_buf_dispose(&out);
    jrpc_batch_dispose(&b);
}

/* The in-place reader agrees with the tree (rc and m from jrpc_wire_decode). */
static void check_in_place(const char *buf, size_t size, int rc, const jrpc_wire_msg_t *m)
{
    jrpc_wire_rsp_t r;
    int ro = jrpc_wire_response_open(buf, size, &r);
    if (ro == 1) {
        CHECK(rc != 0 || m->type != JRPC_WIRE_RESPONSE);
        return;
    }
    CHECK(ro == rc);
    if (ro != 0)
        return;
    CHECK(m->type == JRPC_WIRE_RESPONSE && r.nitems == m->nitems);
    jrpc_limits_t lim = JRPC_LIMITS_DEFAULT;
    for (uint32_t i = 0; i < m->nitems; i++) {
        jrpc_wire_answer_t a;
        jrpc_wire_answer_raw_t ar;
        int it = jrpc_wire_response_item(m, i, &a);
        CHECK(r.next == i);
        int ir = jrpc_wire_response_next(&r, &ar);
        CHECK(it == ir);
        if (it < 0)
            continue;
        CHECK(a.seq == ar.seq && a.is_error == ar.is_error);
        jrpc_batch_t bt, br;
        jrpc_batch_init(&bt);
        jrpc_batch_init(&br);
        CHECK(jrpc_batch_parse(&bt, batch_body, sizeof batch_body - 1, &lim) == 0);
        CHECK(jrpc_batch_parse(&br, batch_body, sizeof batch_body - 1, &lim) == 0);
        if (a.is_error) {
            CHECK(jrpc_batch_answer_error_obj(&bt, 0, a.value) == 0);
            CHECK(jrpc_batch_answer_error_raw(&br, 0, ar.value) == 0);
        } else {
            CHECK(jrpc_batch_answer_result(&bt, 0, a.value) == 0);
            CHECK(jrpc_batch_answer_result_raw(&br, 0, ar.value) == 0);
        }
        const jrpc_call_t *ct = &bt.calls[0], *cr = &br.calls[0];
        CHECK(ct->error == cr->error && ct->code == cr->code && ct->answer.n == cr->answer.n &&
              memcmp(ct->answer.p, cr->answer.p, ct->answer.n) == 0);
        jrpc_batch_dispose(&bt);
        jrpc_batch_dispose(&br);
    }
    CHECK(r.next == r.nitems);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exact-size copy: an over-read past the frame trips ASan. */
    char *buf = malloc(size ? size : 1);
    CHECK(buf != NULL);
    memcpy(buf, data, size);
    msgpack_zone zone;
    CHECK(msgpack_zone_init(&zone, 1024));

    jrpc_wire_msg_t m;
    int rc = jrpc_wire_decode(buf, size, &zone, &m);
    CHECK(rc == 0 || rc == JRPC_WIRE_EMALFORMED || rc == JRPC_WIRE_EVERSION);
    check_in_place(buf, size, rc, &m);
    int head = jrpc_wire_peek_type(buf, size);  /* reads any input without over-reading */
    CHECK(head >= 0 || head == JRPC_WIRE_EMALFORMED || head == JRPC_WIRE_EVERSION);
    if (rc == 0) {
        CHECK(jrpc_wire_peek_type(buf, size) == m.type);
        switch (m.type) {
        case JRPC_WIRE_READY:
            CHECK(m.credit >= 1 && m.methods != NULL && m.methods->type == MSGPACK_OBJECT_ARRAY);
            for (uint32_t i = 0; i < m.methods->via.array.size; i++)
                CHECK(m.methods->via.array.ptr[i].type == MSGPACK_OBJECT_STR &&
                      m.methods->via.array.ptr[i].via.str.size > 0);
            CHECK(m.options == NULL || m.options->type == MSGPACK_OBJECT_MAP);
            for (uint32_t i = 0; m.json && i < m.json->via.array.size; i++)
                CHECK(m.json->via.array.ptr[i].type == MSGPACK_OBJECT_STR &&
                      m.json->via.array.ptr[i].via.str.size > 0);
            (void)jrpc_mpack_map_get(m.options, "max_params");
            break;
        case JRPC_WIRE_REQUEST:
            CHECK(m.nitems >= 1 && m.items != NULL);
            for (uint32_t i = 0; i < m.nitems; i++) {
                jrpc_wire_call_t c;
                jrpc_seq_t seq = 0;
                int seq_rc = jrpc_wire_request_item_seq(&m, i, &seq);
                rc = jrpc_wire_request_item(&m, i, &c);
                CHECK(rc == 0 || rc == JRPC_WIRE_EMALFORMED);
                CHECK(seq_rc == 0 || rc < 0);
                if (rc < 0)
                    continue;
                CHECK(c.seq != 0 && c.method.n > 0 && c.params != NULL && seq == c.seq);
                check_json_form(c.params);
                request_round_trip(&c);
            }
            break;
        case JRPC_WIRE_RESPONSE:
            CHECK(m.nitems >= 1 && m.items != NULL);
            feed_response(&m);
            break;
        case JRPC_WIRE_HEARTBEAT:
            CHECK((m.heartbeat_ms == 0 && m.liveness == 0) ||
                  (m.heartbeat_ms >= JRPC_WIRE_HEARTBEAT_MIN_MS &&
                   m.heartbeat_ms <= JRPC_WIRE_HEARTBEAT_MAX_MS && m.liveness >= 1 &&
                   m.liveness <= JRPC_WIRE_LIVENESS_MAX));
            break;
        case JRPC_WIRE_DISCONNECT:
            break;
        case JRPC_WIRE_REJECT:
            CHECK(m.request >= 1);
            break;
        case JRPC_WIRE_MESSAGE:   /* PROTOCOL.md 2.6: its fields are checked by the broker */
            break;
        case JRPC_WIRE_SCHEMAS:   /* PROTOCOL.md 2.7: a str, the JSON text not checked here */
            CHECK(m.schemas != NULL && m.schemas->type == MSGPACK_OBJECT_STR);
            break;
        case JRPC_WIRE_PROBE: {   /* PROTOCOL.md 2.8: written again, the same fields */
            CHECK(m.probe >= 1 && m.session.n >= 1 && m.session.n <= JRPC_WIRE_SESSION_MAX &&
                  m.live >= -1 && m.live <= 1);
            jrpc_buf_t pb;
            jrpc_buf_init(&pb);
            CHECK(jrpc_wire_put_probe(&pb, m.probe, m.session, m.live) == 0);
            msgpack_zone pz;
            msgpack_zone_init(&pz, 256);
            jrpc_wire_msg_t m2;
            CHECK(jrpc_wire_decode(pb.p, pb.len, &pz, &m2) == 0 && m2.type == JRPC_WIRE_PROBE &&
                  m2.probe == m.probe && m2.live == m.live && m2.session.n == m.session.n &&
                  memcmp(m2.session.p, m.session.p, m.session.n) == 0);
            msgpack_zone_destroy(&pz);
            jrpc_buf_dispose(&pb);
            break;
        }
        default:
            CHECK(!"unknown message type decoded");
        }
    }

    msgpack_zone_clear(&zone);
    jrpc_header_t h;
    rc = jrpc_header_decode(buf, size, &zone, &h);
    CHECK(rc == 0 || rc == JRPC_HEADER_EMALFORMED);
    if (rc == 0) { /* what decoded must encode and decode to the same fields */
        jrpc_buf_t hb;
        jrpc_buf_init(&hb);
        CHECK(jrpc_header_put(&hb, &h) == 0);
        msgpack_zone z2;
        CHECK(msgpack_zone_init(&z2, 256));
        jrpc_header_t h2;
        CHECK(jrpc_header_decode(hb.p, hb.len, &z2, &h2) == 0);
        CHECK(h2.timestamp == h.timestamp && h2.timeout_ms == h.timeout_ms);
        CHECK(h2.key.n == h.key.n && h2.nonce.n == h.nonce.n &&
              h2.signature.n == h.signature.n && h2.traceparent.n == h.traceparent.n);
        msgpack_zone_destroy(&z2);
        jrpc_buf_dispose(&hb);
    }

    msgpack_zone_destroy(&zone);
    free(buf);
    return 0;
}
