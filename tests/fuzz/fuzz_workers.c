/* fuzz_workers — libFuzzer target for the broker's worker sessions
 * (broker/core/jrpc_workers.c and the files beside it: READY, RESPONSE,
 * HEARTBEAT, DISCONNECT handling, routing, credit, queues, liveness, ejection,
 * the method table).
 *
 * The module is compiled in (as the unit tests do) so that its message
 * handler, on_message(), is driven directly: no socket in between, one
 * input is a script. Each input gets a fresh jrpc_workers_t, set up as
 * jrpc_workers_new() does but on one inproc ROUTER made once (what it sends
 * goes to three DEALERs "A", "B", "C", drained after each input; "D" is
 * never connected, so sends to it fail), with no loop handles started (the
 * harness calls the timer callback itself), and a method table of 4 buckets
 * so that it grows. Each input is a sequence of
 * records, the first byte choosing:
 *   0 frame    from worker id (next byte & 3), the bytes (2-byte length)
 *   1 dispatch a call of method "m" + (next byte % 8) ("zz" unknown)
 *   2 cancel   call (next byte), as a timeout or not (next byte & 1)
 *   3 tick     the heartbeat timer (liveness, ejection end, grace end)
 *   4 age      every worker's last message to long ago (expires at a tick)
 *   5 unject   every ejection ends at the next tick
 *   6 flush    jrpc_workers_flush() (REQUESTs leave) and reap
 *   7 answer   the next call sent to worker (next byte & 3), a valid
 *              RESPONSE built here (the seqs are not guessable)
 * Limits are small (8 names per READY, 24 overall, credit 4, 4 KiB per
 * worker, eject after 2) so that every cap is reached.
 * After each record the module's books must balance (abort() otherwise):
 * calls in flight and bytes per worker equal what the slots say, queued
 * calls counted, every method entry's refs equal the workers listing it
 * plus the slots pointing at it, ejected workers counted per method, the
 * table within --max-methods, and every call ends at most once, never after
 * its cancel. ASan and LeakSanitizer see the rest. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../broker/core/jrpc_workers.c"
#include "../../broker/core/jrpc_methods.c"
#include "../../broker/core/jrpc_hedge.c"
#include "../../broker/core/jrpc_sessions.c"

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "fuzz_workers: invariant failed: %s (%s:%d)\n", #cond,   \
                    __FILE__, __LINE__);                                             \
            abort();                                                                 \
        }                                                                            \
    } while (0)

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NCALLS 64
enum { CALL_IDLE, CALL_OUT };

static struct {
    uv_loop_t loop;
    void     *zctx;
    void     *router;
    void     *dealers[3];
    int       calls[NCALLS];      /* CALL_* */
    uint32_t  handles[NCALLS];
} G;

static const char params[] = { '[', '1', ']' };   /* the client's JSON text */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    uv_loop_init(&G.loop);
    G.zctx = zmq_ctx_new();
    G.router = zmq_socket(G.zctx, ZMQ_ROUTER);
    int one = 1, zero = 0, hwm = WORKER_HWM;
    zmq_setsockopt(G.router, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    zmq_setsockopt(G.router, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(G.router, ZMQ_SNDHWM, &hwm, sizeof hwm);
    CHECK(zmq_bind(G.router, "inproc://fuzz-workers") == 0);
    for (int i = 0; i < 3; i++) {
        char id = (char)('A' + i);
        G.dealers[i] = zmq_socket(G.zctx, ZMQ_DEALER);
        zmq_setsockopt(G.dealers[i], ZMQ_LINGER, &zero, sizeof zero);
        zmq_setsockopt(G.dealers[i], ZMQ_ROUTING_ID, &id, 1);
        CHECK(zmq_connect(G.dealers[i], "inproc://fuzz-workers") == 0);
    }
    int events;
    size_t len = sizeof events;
    zmq_getsockopt(G.router, ZMQ_EVENTS, &events, &len);   /* the ROUTER learns their ids */
    jrpc_metrics_init();
    jrpc_log_init("fuzz-workers");
    jrpc_log_set_level(getenv("JRPC_FUZZ_LOG") ? getenv("JRPC_FUZZ_LOG") : "error");
    return 0;
}

static void on_done(void *owner, uint32_t index, int kind, int code, jrpc_span_t value,
                    void *arg)
{
    (void)owner;
    (void)kind;
    (void)code;
    (void)value;
    (void)arg;
    CHECK(index < NCALLS && G.calls[index] == CALL_OUT);
    G.calls[index] = CALL_IDLE;
}

/* Not instrumented for coverage: the checker's own branches are no feedback
 * about the module, and tracing its loops took a third of the run time. */
__attribute__((no_sanitize("coverage")))
static void check_books(jrpc_workers_t *w)
{
    uint32_t inflight = 0, nworkers = 0, queued = 0, nmethods = 0;
    for (worker_t *wk = w->workers; wk; wk = wk->next) {
        uint32_t held = 0;
        uint64_t bytes = 0;
        for (uint32_t i = 0; i < w->nslots; i++) {
            slot_t *s = &w->slots[i];
            if (s->state == SLOT_SENT && s->worker == wk) {
                held++;
                bytes += s->bytes;
            }
        }
        if (wk->dead) {
            CHECK(held == 0);
            continue;
        }
        nworkers++;
        CHECK(held == wk->inflight && bytes == wk->bytes);
        CHECK(wk->credit >= 1 && wk->credit <= w->opts.max_worker_credit);
        inflight += wk->inflight;
    }
    CHECK(inflight == w->inflight && nworkers == w->nworkers);
    for (uint32_t i = 0; i < w->nslots; i++)
        if (w->slots[i].state == SLOT_QUEUED && w->slots[i].owner)
            queued++;
    CHECK(queued == w->queued);
    for (uint32_t b = 0; b < w->mtab_size; b++) {
        for (method_t *m = w->mtab[b]; m; m = m->next) {
            nmethods++;
            CHECK((m->hash & (w->mtab_size - 1)) == b);
            uint32_t refs = 0, nej = 0;
            for (worker_t *wk = w->workers; wk; wk = wk->next)
                for (uint32_t k = 0; k < wk->nmethods; k++)
                    refs += wk->methods[k] == m;
            for (uint32_t i = 0; i < w->nslots; i++)
                refs += w->slots[i].state != SLOT_FREE && w->slots[i].method == m;
            CHECK(refs == m->refs);
            for (uint32_t k = 0; k < m->nworkers; k++) {
                CHECK(!m->workers[k]->dead && m->workers[k]->routed);
                nej += m->workers[k]->ejected_until != 0;
            }
            CHECK(nej == m->nejected);
        }
    }
    CHECK(nmethods == w->nmethods && nmethods <= w->opts.max_methods);
}

/* The RESPONSE [1, 3, [[seq, 0, true]]] for the next call sent to wk. */
static void answer_one(jrpc_workers_t *w, worker_t *wk, uint8_t pick)
{
    uint32_t sent[NCALLS * 4], n = 0;
    for (uint32_t i = 0; i < w->nslots && n < sizeof sent / sizeof *sent; i++)
        if (w->slots[i].state == SLOT_SENT && w->slots[i].worker == wk)
            sent[n++] = i;
    if (n == 0)
        return;
    uint64_t seq = w->slots[sent[pick % n]].seq;
    char f[32];
    size_t k = 0;
    f[k++] = (char)0x93;
    f[k++] = 1;
    f[k++] = 3;
    f[k++] = (char)0x91;
    f[k++] = (char)0x93;
    f[k++] = (char)0xcf;
    for (int i = 7; i >= 0; i--)
        f[k++] = (char)(seq >> (8 * i));
    f[k++] = 0;
    f[k++] = (char)0xc3;
    on_message(w, &(peer_t){ .id = wk->id, .idlen = wk->idlen }, f, k);
}

/* What jrpc_workers_new() makes, on the shared ROUTER, no handle started. */
static jrpc_workers_t *workers_make(void)
{
    jrpc_workers_t *w = calloc(1, sizeof *w);
    CHECK(w != NULL);
    w->loop = &G.loop;
    w->opts = (jrpc_workers_opts_t){
        .endpoint = "inproc://fuzz-workers", .zmq_ctx = G.zctx, .max_queue = 16,
        .heartbeat_ms = 1000, .liveness = 3, .max_redispatch = 2, .max_worker_methods = 8,
        .max_methods = 24, .max_method_len = 16, .max_worker_credit = 4,
        .max_worker_bytes = 4096, .eject_after = 2, .eject_ms = 1000,
    };
    w->done = on_done;
    w->free_head = NIL;
    w->generation = 1;
    w->mtab_size = 4;
    w->mtab = calloc(w->mtab_size, sizeof *w->mtab);
    CHECK(w->mtab != NULL);
    jrpc_buf_init(&w->scratch);
    msgpack_zone_init(&w->zone, 4096);
    w->sock = G.router;
    w->heartbeat.data = w;
    w->watch.data = w;
    w->grace_until = uv_now(&G.loop) + 3000;
    return w;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    jrpc_workers_t *w = workers_make();
    memset(G.calls, 0, sizeof G.calls);

    size_t p = 0;
    while (p < size) {
        uint8_t op = data[p++] & 7;
        uint8_t a = p < size ? data[p] : 0;
        uint8_t b = p + 1 < size ? data[p + 1] : 0;
        jrpc_metrics_tick();
        switch (op) {
        case 0: {   /* a frame from a worker */
            size_t n = p + 3 <= size ? (size_t)(data[p + 1] | data[p + 2] << 8) : 0;
            p += 3;
            if (n > size - (p < size ? p : size))
                n = size - (p < size ? p : size);
            char id = (char)('A' + (a & 3));
            char *frame = malloc(n ? n : 1);   /* exact size: an over-read trips ASan */
            CHECK(frame != NULL);
            if (n)
                memcpy(frame, data + p, n);
            p += n;
            on_message(w, &(peer_t){ .id = &id, .idlen = 1 }, frame, n);
            free(frame);
            break;
        }
        case 1: {   /* dispatch */
            p += 2;
            uint32_t j = b % NCALLS;
            if (G.calls[j] == CALL_OUT)
                break;
            char m[3] = { 'm', (char)('0' + a % 8), 0 };
            jrpc_span_t method = a % 9 == 8 ? (jrpc_span_t){ "zz", 2 } : (jrpc_span_t){ m, 2 };
            int rc = jrpc_workers_dispatch(w, method, (jrpc_span_t){ params, sizeof params }, (jrpc_span_t){ NULL, 0 },
                                           (jrpc_span_t){ NULL, 0 }, uv_now(&G.loop) + 1000, 0,
                                           &G, j, &G.handles[j]);
            CHECK(rc == 0 || rc == -ENOENT || rc == -EBUSY);
            if (rc == 0)
                G.calls[j] = CALL_OUT;
            break;
        }
        case 2: {   /* cancel */
            p += 2;
            uint32_t j = a % NCALLS;
            if (G.calls[j] != CALL_OUT)
                break;
            jrpc_workers_cancel(w, G.handles[j], b & 1 ? JRPC_CANCEL_TIMEOUT : JRPC_CANCEL_GONE);
            G.calls[j] = CALL_IDLE;   /* on_done must not come for it any more */
            break;
        }
        case 3:
            on_heartbeat(&w->heartbeat);
            break;
        case 4:
            for (worker_t *wk = w->workers; wk; wk = wk->next) {
                wk->last_seen = 0;
                wk->seen = false;
            }
            break;
        case 5:
            for (worker_t *wk = w->workers; wk; wk = wk->next)
                if (wk->ejected_until)
                    wk->ejected_until = 1;
            break;
        case 6:
            jrpc_workers_flush(w);
            reap(w);
            break;
        case 7: {
            p += 2;
            char id = (char)('A' + (a & 3));
            worker_t *wk = worker_find(w, &(peer_t){ .id = &id, .idlen = 1 });
            if (wk)
                answer_one(w, wk, b);
            break;
        }
        }
        check_books(w);
    }
    jrpc_workers_flush(w);
    reap(w);
    check_books(w);

    free_workers(w);   /* what on_closed_handle() frees, but the shared ROUTER */
    free_rest(w);
    char buf[256];
    for (int i = 0; i < 3; i++)   /* what was sent to them, so the pipes never fill */
        while (zmq_recv(G.dealers[i], buf, sizeof buf, ZMQ_DONTWAIT) >= 0)
            ;
    return 0;
}
