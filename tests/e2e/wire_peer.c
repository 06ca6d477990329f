/* wire_peer — a scripted peer of the worker protocol, for the end-to-end
 * tests: a rogue broker facing a real worker, or a rogue worker facing a
 * real broker. It speaks proto/PROTOCOL.md through proto/jrpc_wire.
 *
 *   wire_peer --broker ENDPOINT [--timeout-ms N] STEP...   binds a ROUTER
 *   wire_peer --worker ENDPOINT [--timeout-ms N] STEP...   connects a DEALER
 *
 * --bound-file FILE (a broker): once bound, the endpoint bound is written to
 * FILE (whole, by a rename): bind "tcp://127.0.0.1:*" for a port no other
 * test holds, and start the worker on what FILE says.
 *
 * Steps run in order; each step that waits gives up after --timeout-ms
 * (default 5000; exit status 2). HEARTBEATs received are answered with one (so that the
 * other side keeps the session) and otherwise skipped.
 *
 * As a broker (the first step must be "ready"):
 *   ready            waits for READY; prints "ready credit=N"
 *   call:SEQ         sends a REQUEST of one call [SEQ, "echo", [SEQ], 5000]
 *   deep:SEQ:N       the same with params nested N arrays deep
 *   send:HEX         sends the bytes given in hex as one message
 *   recv:N           waits for N more lines of output: one per answer of a
 *                    RESPONSE ("response seq=S result=R" or "response seq=S
 *                    error=CODE"), "reject request=N", "disconnect"
 * As a worker:
 *   ready:CREDIT:M1,M2,...[:INSTANCE[:probes]]   sends READY (with "instance",
 *                    and "probes": true, when given); REQUESTs are counted
 *                    from 1 again
 *   probe:ANSWER     waits for a PROBE (PROTOCOL.md 2.8); prints "probe
 *                    session=S"; answers live (true), gone (false) or none
 *   message          waits for a MESSAGE; prints "message seq=N session=S
 *                    body=nil" (or body=BYTES)
 *   idle:MS          answers HEARTBEATs for MS ms; anything else is an error
 *   request          waits for a REQUEST; prints "request N calls=K"
 *   reject           sends REJECT for the last REQUEST
 *   answer           answers each call of the last REQUEST with its params
 *   send:HEX         as above
 * Exit status: 0, 2 on a timeout, bad usage or a failed send. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "jrpc_mpack.h"
#include "jrpc_wire.h"

#define MAX_FRAME (1 << 20)

static void *sock;
static int timeout_ms = 5000;
static int is_broker;
static char peer_id[256];      /* broker: the worker's routing id */
static size_t peer_idlen;
static char last[MAX_FRAME];   /* worker: the last REQUEST received */
static size_t last_len;
static uint64_t requests;      /* worker: REQUESTs received since READY */
static jrpc_buf_t out;
static int64_t deadline;       /* ms (CLOCK_MONOTONIC) when the current step gives up */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int buf_write(void *d, const char *p, size_t n)
{
    return jrpc_buf_append(d, p, n) < 0 ? -1 : 0;
}

static int fail(const char *what)
{
    fprintf(stderr, "wire_peer: %s\n", what);
    exit(2);
}

static void send_bytes(const char *p, size_t n)
{
    if (is_broker && zmq_send(sock, peer_id, peer_idlen, ZMQ_SNDMORE) < 0)
        fail("send");
    if (zmq_send(sock, p, n, 0) < 0)
        fail("send");
}

static void send_out(void)
{
    send_bytes(out.p, out.len);
    jrpc_buf_reset(&out);
}

/* Receives one message (the routing id aside) into buf; returns its size. */
static size_t recv_msg(char *buf)
{
    zmq_pollitem_t pi = { .socket = sock, .events = ZMQ_POLLIN };
    int64_t left = deadline - now_ms();
    if (left <= 0 || zmq_poll(&pi, 1, (long)left) <= 0)
        fail("timed out waiting for a message");
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (is_broker) {
        if (zmq_msg_recv(&m, sock, 0) < 0)
            fail("timed out waiting for a message");
        if (zmq_msg_size(&m) > sizeof peer_id)
            fail("routing id too long");
        peer_idlen = zmq_msg_size(&m);
        memcpy(peer_id, zmq_msg_data(&m), peer_idlen);
    }
    if (zmq_msg_recv(&m, sock, 0) < 0)
        fail("timed out waiting for a message");
    size_t n = zmq_msg_size(&m);
    if (n > MAX_FRAME)
        fail("message too large");
    memcpy(buf, zmq_msg_data(&m), n);
    zmq_msg_close(&m);
    return n;
}

/* The next message that is not a HEARTBEAT, decoded into *m (zone and buf
 * hold it). */
static size_t recv_decoded(char *buf, msgpack_zone *zone, jrpc_wire_msg_t *m)
{
    for (;;) {
        size_t n = recv_msg(buf);
        msgpack_zone_clear(zone);
        if (jrpc_wire_decode(buf, n, zone, m) < 0)
            fail("received a malformed message");
        if (m->type != JRPC_WIRE_HEARTBEAT)
            return n;
        jrpc_wire_put_heartbeat(&out);
        send_out();
    }
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static void send_hex(const char *hex)
{
    jrpc_buf_reset(&out);
    for (; hex[0] && hex[1]; hex += 2) {
        int hi = hexval(hex[0]), lo = hexval(hex[1]);
        if (hi < 0 || lo < 0)
            fail("bad hex");
        jrpc_buf_putc(&out, (char)(hi << 4 | lo));
    }
    send_out();
}

/* A REQUEST of one call to "echo" whose params are [seq] inside depth - 1
 * more arrays. */
static void send_call(uint64_t seq, unsigned depth)
{
    jrpc_buf_t params;
    jrpc_buf_init(&params);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &params, buf_write);
    for (unsigned i = 1; i < depth; i++)
        msgpack_pack_array(&pk, 1);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_uint64(&pk, seq);
    jrpc_buf_reset(&out);
    jrpc_wire_put_request_begin(&out);
    jrpc_wire_put_request_call(&out, seq, (jrpc_span_t){ "echo", 4 },
                               (jrpc_span_t){ params.p, params.len }, 5000,
                               (jrpc_span_t){ NULL, 0 });
    jrpc_wire_put_request_end(&out, 1);
    send_out();
    jrpc_buf_dispose(&params);
}

/* Broker side: prints what a message says; returns the lines printed. */
static int print_msg(const jrpc_wire_msg_t *m)
{
    char text[256];
    switch (m->type) {
    case JRPC_WIRE_RESPONSE:
        for (uint32_t i = 0; i < m->nitems; i++) {
            jrpc_wire_answer_t a;
            if (jrpc_wire_response_item(m, i, &a) < 0)
                fail("malformed answer");
            if (a.is_error) {
                const msgpack_object *code = jrpc_mpack_map_get(a.value, "code");
                printf("response seq=%llu error=%lld\n", (unsigned long long)a.seq,
                       code ? (long long)code->via.i64 : 0LL);
            } else {
                msgpack_object_print_buffer(text, sizeof text, *a.value);
                printf("response seq=%llu result=%s\n", (unsigned long long)a.seq, text);
            }
        }
        return (int)m->nitems;
    case JRPC_WIRE_REJECT:
        printf("reject request=%llu\n", (unsigned long long)m->request);
        return 1;
    case JRPC_WIRE_DISCONNECT:
        printf("disconnect\n");
        return 1;
    default:
        printf("type=%d\n", m->type);
        return 1;
    }
}

/* Worker side: answers each call of the last REQUEST with its params. */
static void answer_last(msgpack_zone *zone)
{
    jrpc_wire_msg_t m;
    msgpack_zone_clear(zone);
    if (last_len == 0 || jrpc_wire_decode(last, last_len, zone, &m) < 0)
        fail("no REQUEST to answer");
    jrpc_buf_reset(&out);
    jrpc_wire_put_response_begin(&out);
    for (uint32_t i = 0; i < m.nitems; i++) {
        jrpc_wire_call_t c;
        if (jrpc_wire_request_item(&m, i, &c) < 0)
            fail("malformed call");
        jrpc_wire_put_result_head(&out, c.seq);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &out, buf_write);
        msgpack_pack_object(&pk, *c.params);
    }
    jrpc_wire_put_response_end(&out, m.nitems);
    send_out();
}

/* Writes the endpoint the ROUTER bound to PATH, whole: PATH.tmp, renamed. */
static void write_bound(const char *path)
{
    char bound[256], tmp[4096];
    size_t n = sizeof bound;
    if (zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, bound, &n) != 0)
        fail(zmq_strerror(zmq_errno()));
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL || fprintf(f, "%s\n", bound) < 0 || fclose(f) != 0 || rename(tmp, path) != 0)
        fail("cannot write the --bound-file");
}

int main(int argc, char **argv)
{
    const char *ep = NULL, *bound_file = NULL;
    int i = 1;
    for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
        if (strcmp(argv[i], "--broker") == 0 || strcmp(argv[i], "--worker") == 0) {
            is_broker = argv[i][2] == 'b';
            ep = argv[i + 1];
        } else if (strcmp(argv[i], "--timeout-ms") == 0) {
            timeout_ms = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--bound-file") == 0) {
            bound_file = argv[i + 1];
        } else {
            break;
        }
    }
    if (ep == NULL || i >= argc)
        return fail("usage: wire_peer --broker|--worker ENDPOINT [--timeout-ms N] [--bound-file FILE] STEP...");
    setvbuf(stdout, NULL, _IOLBF, 0);
    void *ctx = zmq_ctx_new();
    sock = zmq_socket(ctx, is_broker ? ZMQ_ROUTER : ZMQ_DEALER);
    int linger = 1000;
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(sock, ZMQ_RCVTIMEO, &timeout_ms, sizeof timeout_ms);
    if ((is_broker ? zmq_bind(sock, ep) : zmq_connect(sock, ep)) != 0)
        return fail(zmq_strerror(zmq_errno()));
    if (bound_file != NULL)
        write_bound(bound_file);
    static char buf[MAX_FRAME];
    msgpack_zone zone;
    msgpack_zone_init(&zone, 4096);
    jrpc_buf_init(&out);
    jrpc_wire_msg_t m;
    for (; i < argc; i++) {
        const char *st = argv[i];
        unsigned long long a = 0, b = 0;
        deadline = now_ms() + timeout_ms;
        if (is_broker && strcmp(st, "ready") == 0) {
            recv_decoded(buf, &zone, &m);
            if (m.type != JRPC_WIRE_READY)
                fail("expected READY");
            printf("ready credit=%u\n", m.credit);
        } else if (is_broker && sscanf(st, "call:%llu", &a) == 1) {
            send_call(a, 1);
        } else if (is_broker && sscanf(st, "deep:%llu:%llu", &a, &b) == 2) {
            send_call(a, (unsigned)b);
        } else if (is_broker && sscanf(st, "recv:%llu", &a) == 1) {
            for (long long left = (long long)a; left > 0;) {
                recv_decoded(buf, &zone, &m);
                left -= print_msg(&m);
            }
        } else if (!is_broker && strncmp(st, "ready:", 6) == 0) {
            char methods[1024];
            const char *names[64];
            size_t n = 0;
            if (sscanf(st, "ready:%llu:%1023s", &a, methods) != 2)
                fail("bad ready step");
            jrpc_wire_ready_opts_t ro = { 0 };
            char *inst = strchr(methods, ':');
            if (inst != NULL) {
                *inst++ = '\0';
                char *pr = strchr(inst, ':');
                if (pr != NULL) {
                    *pr++ = '\0';
                    ro.probes = strcmp(pr, "probes") == 0;
                }
                ro.instance = inst;
            }
            for (char *tok = strtok(methods, ","); tok && n < 64; tok = strtok(NULL, ","))
                names[n++] = tok;
            jrpc_buf_reset(&out);
            jrpc_wire_put_ready_opts(&out, (uint32_t)a, names, n, &ro);
            send_out();
            requests = 0;
        } else if (!is_broker && strncmp(st, "probe:", 6) == 0) {
            recv_decoded(buf, &zone, &m);
            if (m.type != JRPC_WIRE_PROBE || m.live >= 0)
                fail("expected a PROBE question");
            printf("probe session=%.*s\n", (int)m.session.n, m.session.p);
            if (strcmp(st + 6, "none") != 0) {
                jrpc_buf_reset(&out);
                jrpc_wire_put_probe(&out, m.probe, m.session, strcmp(st + 6, "live") == 0);
                send_out();
            }
        } else if (!is_broker && strcmp(st, "message") == 0) {
            recv_decoded(buf, &zone, &m);
            if (m.type != JRPC_WIRE_MESSAGE)
                fail("expected a MESSAGE");
            printf("message seq=%llu session=%.*s body=", (unsigned long long)m.seq,
                   (int)m.session.n, m.session.p ? m.session.p : "");
            if (m.body.p == NULL)
                printf("nil\n");
            else
                printf("%zu\n", m.body.n);
        } else if (!is_broker && sscanf(st, "idle:%llu", &a) == 1) {
            int64_t until = now_ms() + (int64_t)a;
            zmq_pollitem_t pi = { .socket = sock, .events = ZMQ_POLLIN };
            while (now_ms() < until) {
                if (zmq_poll(&pi, 1, (long)(until - now_ms())) <= 0)
                    continue;
                deadline = now_ms() + timeout_ms;
                size_t n = recv_msg(buf);
                msgpack_zone_clear(&zone);
                if (jrpc_wire_decode(buf, n, &zone, &m) < 0 || m.type != JRPC_WIRE_HEARTBEAT)
                    fail("expected nothing but HEARTBEATs");
                jrpc_wire_put_heartbeat(&out);
                send_out();
            }
        } else if (!is_broker && strcmp(st, "request") == 0) {
            size_t n = recv_decoded(buf, &zone, &m);
            if (m.type != JRPC_WIRE_REQUEST)
                fail("expected REQUEST");
            memcpy(last, buf, n);
            last_len = n;
            printf("request %llu calls=%u\n", (unsigned long long)++requests, m.nitems);
        } else if (!is_broker && strcmp(st, "reject") == 0) {
            jrpc_buf_reset(&out);
            jrpc_wire_put_reject(&out, requests);
            send_out();
        } else if (!is_broker && strcmp(st, "answer") == 0) {
            answer_last(&zone);
        } else if (strncmp(st, "send:", 5) == 0) {
            send_hex(st + 5);
        } else {
            fprintf(stderr, "wire_peer: unknown step '%s'\n", st);
            return 2;
        }
    }
    msgpack_zone_destroy(&zone);
    jrpc_buf_dispose(&out);
    zmq_close(sock);
    zmq_ctx_term(ctx);
    return 0;
}
