/* jrpc-test-chaos — the load client of the chaos test (tests/chaos/chaos.sh).
 *
 * T threads, each with its own signed jrpc_client_t (ZeroMQ or HTTP), send
 * mixed bodies of 1..20 calls for D seconds while the orchestrator kills
 * workers, Redis and the broker. Every call carries a globally unique id
 * "t<thread>-<n>" and an expected answer; each reply is matched by id:
 *
 *   ok          the expected result (or the expected -32600/-32601)
 *   failed      an error in the call's slot, a whole-body error (-32006, a
 *               401/409/503, ...) or a transport failure (timeout, refused,
 *               reset): the broker said no, or could not be reached
 *   lost        an id the reply should hold and does not
 *   duplicated  an id answered twice
 *   unexpected  an id never sent (in this body), a wrong result, a result
 *               where an error was due, or a reply that is not JSON-RPC
 *
 * Notifications are counted apart: they expect nothing. The last line of
 * stdout is the tally; the exit status is 1 when lost + duplicated +
 * unexpected > 0, 2 on bad usage. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <msgpack.h>

#include "jrpc_buf.h"
#include "jrpc_client.h"
#include "jrpc_json.h"
#include "jrpc_mpack.h"

#define MAX_BATCH      20
#define MAX_CODES      32
#define CODE_TRANSPORT 1      /* not a JSON-RPC code: the tally's "transport" */
#define EXPECT_MAX     160
#define MAX_REPORTS    10     /* problem samples printed to stderr, in all */

static const char usage[] =
    "Usage: jrpc-test-chaos --zmq URL --http URL --key-id ID --secret S\n"
    "                       [--zmq-threads N] [--http-threads N] [--duration S]\n"
    "                       [--timeout-ms N] [--call-timeout-ms N] [--seed N]\n"
    "\n"
    "Sends mixed signed batches over both transports for --duration seconds\n"
    "(default 60) and prints, as the last line:\n"
    "  attempted=N ok=N failed=N (transport=N -32004=N ...) lost=N duplicated=N unexpected=N\n"
    "Exit status 1 when lost + duplicated + unexpected > 0.\n";

typedef enum { K_ADD, K_ECHO, K_SLEEP, K_INVALID, K_UNKNOWN } kind_t;

/* One call of the body in flight. */
typedef struct call {
    uint64_t n;                 /* the id is "t<thread>-<n>" */
    kind_t   kind;
    bool     notification;      /* no id: nothing expected back */
    bool     seen;              /* answered once already in this reply */
    int      expect_code;       /* K_INVALID, K_UNKNOWN: the error due */
    char     expect[EXPECT_MAX]; /* otherwise: the result as compact JSON */
} call_t;

typedef struct code_count {
    int      code;   /* a JSON-RPC code, or CODE_TRANSPORT */
    uint64_t n;
} code_count_t;

typedef struct tally {
    uint64_t     attempted;   /* calls with an id that were sent (or tried) */
    uint64_t     ok;
    uint64_t     failed;
    uint64_t     lost;
    uint64_t     duplicated;
    uint64_t     unexpected;
    uint64_t     notifications;  /* sent without an id; not in attempted */
    uint64_t     bodies;
    code_count_t codes[MAX_CODES];
    unsigned     ncodes;
} tally_t;

typedef struct worker_thread {
    pthread_t    tid;
    unsigned     index;       /* the <thread> of the ids */
    const char  *url;
    tally_t      t;           /* written by this thread only; read after join */
    _Atomic uint64_t live_ok; /* for the progress lines */
    _Atomic uint64_t live_failed;
    _Atomic uint64_t live_transport;
    _Atomic uint64_t live_bad;  /* lost + duplicated + unexpected */
} worker_thread_t;

static const char *g_key_id;
static const char *g_secret;
static int g_timeout_ms = 4000;       /* client side: the whole call */
static int g_call_timeout_ms = 2500;  /* header timeout_ms: the broker's deadline */
static double g_deadline;             /* monotonic seconds when to stop */
static unsigned g_seed;
static atomic_int g_reports;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* xorshift64*: per-thread, reproducible from --seed. */
static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

static void count_code(tally_t *t, int code, uint64_t n)
{
    for (unsigned i = 0; i < t->ncodes; i++)
        if (t->codes[i].code == code) {
            t->codes[i].n += n;
            return;
        }
    if (t->ncodes < MAX_CODES)
        t->codes[t->ncodes++] = (code_count_t){ code, n };
}

/* Prints the first few problems with the body and reply, for evidence. */
static void report(const char *what, unsigned thread, const jrpc_buf_t *body,
                   const jrpc_buf_t *reply)
{
    if (atomic_fetch_add(&g_reports, 1) >= MAX_REPORTS)
        return;
    fprintf(stderr, "chaos: problem=%s thread=%u\n  body:  %.*s\n  reply: %.*s\n", what, thread,
            (int)(body->len > 2000 ? 2000 : body->len), body->p ? body->p : "",
            (int)(reply->len > 2000 ? 2000 : reply->len), reply->p ? reply->p : "");
}

/* Appends one call to body and fills c with what it expects. */
static void make_call(uint64_t *rs, unsigned thread, uint64_t n, call_t *c, jrpc_buf_t *body)
{
    char id[48], buf[512];
    snprintf(id, sizeof id, "\"t%u-%" PRIu64 "\"", thread, n);
    unsigned r = (unsigned)(rnd(rs) % 100);
    *c = (call_t){ .n = n };
    c->notification = r >= 75 && r < 85;
    if (c->notification)
        r = (unsigned)(rnd(rs) % 75);  /* a notification of add, echo or sleep */
    const char *idm = c->notification ? "" : ",\"id\":";
    const char *idv = c->notification ? "" : id;

    if (r < 35) {
        int64_t a = (int64_t)(rnd(rs) % 2000001) - 1000000;
        int64_t b = (rnd(rs) % 4 == 0) ? (int64_t)(rnd(rs) % (1ULL << 40)) : (int64_t)(rnd(rs) % 1000);
        c->kind = K_ADD;
        snprintf(c->expect, sizeof c->expect, "%" PRId64, a + b);
        snprintf(buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"params\":[%" PRId64
                 ",%" PRId64 "]%s%s}", a, b, idm, idv);
    } else if (r < 60) {
        uint64_t k = rnd(rs) % 100000;
        c->kind = K_ECHO;
        if (k % 2)
            snprintf(c->expect, sizeof c->expect, "[\"t%u-%" PRIu64 "\",%" PRIu64 ",true,null]",
                     thread, n, k);
        else
            snprintf(c->expect, sizeof c->expect, "{\"who\":\"t%u-%" PRIu64 "\",\"k\":[%" PRIu64
                     ",%" PRIu64 "],\"s\":\"caf\xc3\xa9\"}", thread, n, k, k + 1);
        snprintf(buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":%s%s%s}",
                 c->expect, idm, idv);
    } else if (r < 75) {
        unsigned ms = (unsigned)(rnd(rs) % 51);
        c->kind = K_SLEEP;
        snprintf(c->expect, sizeof c->expect, "%u", ms);
        snprintf(buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"method\":\"sleep\",\"params\":{\"ms\":%u}%s%s}",
                 ms, idm, idv);
    } else if (r < 93) {
        c->kind = K_INVALID;
        c->expect_code = -32600;
        snprintf(buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"method\":1,\"params\":[1],\"id\":%s}", id);
    } else {
        c->kind = K_UNKNOWN;
        c->expect_code = -32601;
        snprintf(buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"method\":\"no_such_method\",\"id\":%s}", id);
    }
    jrpc_buf_puts(body, buf);
}

/* Every call of the body that expects an answer fails with code. */
static void fail_all(tally_t *t, const call_t *calls, unsigned n, int code)
{
    uint64_t k = 0;
    for (unsigned i = 0; i < n; i++)
        k += !calls[i].notification;
    t->failed += k;
    if (k)
        count_code(t, code, k);
}

/* Finds the call a reply id names: NULL when it is not one of this body. */
static call_t *find_call(call_t *calls, unsigned n, unsigned thread, const msgpack_object *id)
{
    if (id == NULL || id->type != MSGPACK_OBJECT_STR || id->via.str.size >= 48)
        return NULL;
    char s[48];
    memcpy(s, id->via.str.ptr, id->via.str.size);
    s[id->via.str.size] = '\0';
    unsigned th;
    uint64_t k;
    char tail;
    if (sscanf(s, "t%u-%" SCNu64 "%c", &th, &k, &tail) != 2 || th != thread)
        return NULL;
    for (unsigned i = 0; i < n; i++)
        if (!calls[i].notification && calls[i].n == k)
            return &calls[i];
    return NULL;
}

/* Judges one response object of the reply against the calls of its body. */
static void judge(worker_thread_t *w, call_t *calls, unsigned n, const msgpack_object *o,
                  const jrpc_buf_t *body, const jrpc_buf_t *reply)
{
    tally_t *t = &w->t;
    call_t *c = find_call(calls, n, w->index, jrpc_mpack_map_get(o, "id"));
    if (c == NULL) {
        t->unexpected++;
        report("unexpected-id", w->index, body, reply);
        return;
    }
    if (c->seen) {
        t->duplicated++;
        report("duplicated", w->index, body, reply);
        return;
    }
    c->seen = true;
    const msgpack_object *err = jrpc_mpack_map_get(o, "error");
    const msgpack_object *res = jrpc_mpack_map_get(o, "result");
    if (err != NULL && res == NULL) {
        const msgpack_object *code = jrpc_mpack_map_get(err, "code");
        if (code == NULL || (code->type != MSGPACK_OBJECT_NEGATIVE_INTEGER &&
                             code->type != MSGPACK_OBJECT_POSITIVE_INTEGER)) {
            t->unexpected++;
            report("malformed-error", w->index, body, reply);
            return;
        }
        int ec = (int)code->via.i64;
        if (c->expect_code != 0 && ec == c->expect_code) {
            t->ok++;
        } else {
            t->failed++;
            count_code(t, ec, 1);
        }
        return;
    }
    if (res == NULL || err != NULL || c->expect_code != 0) {
        t->unexpected++;
        report("result-where-error-due", w->index, body, reply);
        return;
    }
    jrpc_buf_t js;
    jrpc_buf_init(&js);
    bool same = jrpc_json_write_msgpack(&js, res, JRPC_JSON_MAX_DEPTH) == 0 &&
                js.len == strlen(c->expect) && memcmp(js.p, c->expect, js.len) == 0;
    jrpc_buf_dispose(&js);
    if (same) {
        t->ok++;
    } else {
        t->unexpected++;
        report("wrong-result", w->index, body, reply);
    }
}

/* Tallies one body's outcome. */
static void judge_reply(worker_thread_t *w, call_t *calls, unsigned n, bool is_array,
                        const jrpc_buf_t *body, const jrpc_buf_t *reply)
{
    tally_t *t = &w->t;
    unsigned expected = 0;
    for (unsigned i = 0; i < n; i++)
        expected += !calls[i].notification;
    if (reply->len == 0) {
        if (expected) {
            t->lost += expected;
            report("empty-reply", w->index, body, reply);
        }
        return;
    }
    jrpc_buf_t mp;
    jrpc_buf_init(&mp);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    if (jrpc_json_to_msgpack(reply->p, reply->len, JRPC_JSON_MAX_DEPTH, &mp) < 0 ||
        msgpack_unpack_next(&u, mp.p, mp.len, NULL) != MSGPACK_UNPACK_SUCCESS) {
        t->unexpected += expected ? expected : 1;
        report("not-json", w->index, body, reply);
        goto out;
    }
    const msgpack_object *top = &u.data;
    if (top->type == MSGPACK_OBJECT_MAP) {
        /* A whole-body refusal: one error with id null, for a batch or a
         * single call alike (our ids are never null). */
        const msgpack_object *id = jrpc_mpack_map_get(top, "id");
        const msgpack_object *err = jrpc_mpack_map_get(top, "error");
        const msgpack_object *code = err ? jrpc_mpack_map_get(err, "code") : NULL;
        if (id != NULL && id->type == MSGPACK_OBJECT_NIL && code != NULL &&
            (code->type == MSGPACK_OBJECT_NEGATIVE_INTEGER ||
             code->type == MSGPACK_OBJECT_POSITIVE_INTEGER)) {
            fail_all(t, calls, n, (int)code->via.i64);
            goto out;
        }
        if (is_array) {
            t->unexpected += expected ? expected : 1;
            report("object-for-a-batch", w->index, body, reply);
            goto out;
        }
        judge(w, calls, n, top, body, reply);
    } else if (top->type == MSGPACK_OBJECT_ARRAY && is_array) {
        for (uint32_t i = 0; i < top->via.array.size; i++)
            judge(w, calls, n, &top->via.array.ptr[i], body, reply);
    } else {
        t->unexpected += expected ? expected : 1;
        report("not-a-response", w->index, body, reply);
        goto out;
    }
    for (unsigned i = 0; i < n; i++)
        if (!calls[i].notification && !calls[i].seen) {
            t->lost++;
            report("lost", w->index, body, reply);
        }
out:
    msgpack_unpacked_destroy(&u);
    jrpc_buf_dispose(&mp);
}

static void *run(void *arg)
{
    worker_thread_t *w = arg;
    tally_t *t = &w->t;
    uint64_t rs = (g_seed + 1) * 0x9E3779B97F4A7C15ULL ^ (w->index + 1) * 0xD1B54A32D192ED03ULL;
    if (rs == 0)
        rs = 1;
    jrpc_client_t *c = jrpc_client_new(w->url, NULL);
    if (c == NULL || jrpc_client_set_key(c, g_key_id, g_secret) < 0) {
        fprintf(stderr, "chaos: thread=%u url=%s cannot make a client\n", w->index, w->url);
        exit(2);
    }
    jrpc_buf_t body, reply;
    jrpc_buf_init(&body);
    jrpc_buf_init(&reply);
    call_t calls[MAX_BATCH];
    uint64_t next_n = 0;
    const jrpc_client_header_t hdr = { .timeout_ms = (uint32_t)g_call_timeout_ms };

    while (now_s() < g_deadline) {
        unsigned n = 1 + (unsigned)(rnd(&rs) % MAX_BATCH);
        bool is_array = n > 1 || rnd(&rs) % 2;
        jrpc_buf_reset(&body);
        if (is_array)
            jrpc_buf_putc(&body, '[');
        for (unsigned i = 0; i < n; i++) {
            if (i)
                jrpc_buf_putc(&body, ',');
            make_call(&rs, w->index, next_n++, &calls[i], &body);
            if (calls[i].notification)
                t->notifications++;
            else
                t->attempted++;
        }
        if (is_array)
            jrpc_buf_putc(&body, ']');
        t->bodies++;

        int rc = jrpc_client_send(c, body.p, body.len, &hdr, &reply, g_timeout_ms);
        if (rc < 0) {
            /* Timeout, refused, reset, a proxy's non-JSON error page: the
             * broker could not be reached or did not answer in time. */
            fail_all(t, calls, n, CODE_TRANSPORT);
            for (unsigned i = 0; i < n; i++)
                if (!calls[i].notification)
                    atomic_fetch_add(&w->live_transport, 1);
            usleep(100 * 1000);  /* a broker that is down refuses at once */
        } else {
            uint64_t ok_before = t->ok, failed_before = t->failed;
            judge_reply(w, calls, n, is_array, &body, &reply);
            /* Refused outright (-32006 while Redis is down, -32601 before
             * the workers are back): pause like a polite client, or the
             * fast refusals would drown the figures. */
            if (t->ok == ok_before && t->failed > failed_before)
                usleep(50 * 1000);
        }
        atomic_store(&w->live_ok, t->ok);
        atomic_store(&w->live_failed, t->failed);
        uint64_t bad = t->lost + t->duplicated + t->unexpected;
        atomic_store(&w->live_bad, bad);
    }
    jrpc_buf_dispose(&body);
    jrpc_buf_dispose(&reply);
    jrpc_client_destroy(&c);
    return NULL;
}

static int cmp_code(const void *a, const void *b)
{
    const code_count_t *x = a, *y = b;
    if (x->code == CODE_TRANSPORT || y->code == CODE_TRANSPORT)
        return (y->code == CODE_TRANSPORT) - (x->code == CODE_TRANSPORT);
    return (x->code < y->code) - (x->code > y->code);  /* -32000 before -32601 */
}

static unsigned parse_num(const char *flag, const char *s, unsigned max)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || v > max) {
        fprintf(stderr, "jrpc-test-chaos: %s: '%s' is not a number up to %u\n%s", flag, s, max,
                usage);
        exit(2);
    }
    return (unsigned)v;
}

int main(int argc, char **argv)
{
    const char *zmq_url = NULL, *http_url = NULL;
    unsigned nzmq = 4, nhttp = 4, duration = 60;
    static const struct option opts[] = {
        { "zmq", required_argument, NULL, 'z' },
        { "http", required_argument, NULL, 'h' },
        { "key-id", required_argument, NULL, 'k' },
        { "secret", required_argument, NULL, 's' },
        { "zmq-threads", required_argument, NULL, 'Z' },
        { "http-threads", required_argument, NULL, 'H' },
        { "duration", required_argument, NULL, 'd' },
        { "timeout-ms", required_argument, NULL, 't' },
        { "call-timeout-ms", required_argument, NULL, 'c' },
        { "seed", required_argument, NULL, 'r' },
        { "help", no_argument, NULL, 'u' },
        { 0, 0, 0, 0 },
    };
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'z': zmq_url = optarg; break;
        case 'h': http_url = optarg; break;
        case 'k': g_key_id = optarg; break;
        case 's': g_secret = optarg; break;
        case 'Z': nzmq = parse_num("--zmq-threads", optarg, 64); break;
        case 'H': nhttp = parse_num("--http-threads", optarg, 64); break;
        case 'd': duration = parse_num("--duration", optarg, 3600); break;
        case 't': g_timeout_ms = (int)parse_num("--timeout-ms", optarg, 600000); break;
        case 'c': g_call_timeout_ms = (int)parse_num("--call-timeout-ms", optarg, 600000); break;
        case 'r': g_seed = parse_num("--seed", optarg, 0xFFFFFFFFu); break;
        case 'u': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 2;
        }
    }
    if ((nzmq && !zmq_url) || (nhttp && !http_url) || !g_key_id || !g_secret || nzmq + nhttp == 0) {
        fputs(usage, stderr);
        return 2;
    }
    if (g_seed == 0)
        g_seed = (unsigned)time(NULL);
    fprintf(stderr, "chaos: event=start zmq_threads=%u http_threads=%u duration_s=%u seed=%u\n",
            nzmq, nhttp, duration, g_seed);

    unsigned nt = nzmq + nhttp;
    worker_thread_t *ws = calloc(nt, sizeof *ws);
    if (ws == NULL)
        return 1;
    double start = now_s();
    g_deadline = start + duration;
    for (unsigned i = 0; i < nt; i++) {
        ws[i].index = i;
        ws[i].url = i < nzmq ? zmq_url : http_url;
        if (pthread_create(&ws[i].tid, NULL, run, &ws[i]) != 0) {
            fprintf(stderr, "chaos: cannot start thread %u\n", i);
            return 1;
        }
    }
    /* A progress line every 5 s, so the log lines up with the schedule. */
    while (now_s() < g_deadline) {
        sleep(1);
        unsigned el = (unsigned)(now_s() - start);
        if (el % 5 != 0)
            continue;
        uint64_t ok = 0, fl = 0, tr = 0, bad = 0;
        for (unsigned i = 0; i < nt; i++) {
            ok += atomic_load(&ws[i].live_ok);
            fl += atomic_load(&ws[i].live_failed);
            tr += atomic_load(&ws[i].live_transport);
            bad += atomic_load(&ws[i].live_bad);
        }
        fprintf(stderr, "chaos: event=progress t=%us ok=%" PRIu64 " failed=%" PRIu64
                " transport=%" PRIu64 " bad=%" PRIu64 "\n", el, ok, fl, tr, bad);
    }

    tally_t all = { 0 };
    for (unsigned i = 0; i < nt; i++) {
        pthread_join(ws[i].tid, NULL);
        tally_t *t = &ws[i].t;
        all.attempted += t->attempted;
        all.ok += t->ok;
        all.failed += t->failed;
        all.lost += t->lost;
        all.duplicated += t->duplicated;
        all.unexpected += t->unexpected;
        all.notifications += t->notifications;
        all.bodies += t->bodies;
        for (unsigned k = 0; k < t->ncodes; k++)
            count_code(&all, t->codes[k].code, t->codes[k].n);
    }
    free(ws);
    qsort(all.codes, all.ncodes, sizeof *all.codes, cmp_code);

    printf("bodies=%" PRIu64 " notifications=%" PRIu64 " elapsed_s=%.1f\n", all.bodies,
           all.notifications, now_s() - start);
    printf("attempted=%" PRIu64 " ok=%" PRIu64 " failed=%" PRIu64 " (", all.attempted, all.ok,
           all.failed);
    if (all.ncodes == 0)
        printf("none");
    for (unsigned k = 0; k < all.ncodes; k++) {
        if (all.codes[k].code == CODE_TRANSPORT)
            printf("%stransport=%" PRIu64, k ? " " : "", all.codes[k].n);
        else
            printf("%s%d=%" PRIu64, k ? " " : "", all.codes[k].code, all.codes[k].n);
    }
    printf(") lost=%" PRIu64 " duplicated=%" PRIu64 " unexpected=%" PRIu64 "\n", all.lost,
           all.duplicated, all.unexpected);
    bool sums = all.attempted == all.ok + all.failed + all.lost + all.unexpected;
    if (!sums)
        fprintf(stderr, "chaos: note: attempted != ok + failed + lost + unexpected "
                "(duplicates and stray ids are counted on top)\n");
    return all.lost + all.duplicated + all.unexpected > 0 ? 1 : 0;
}
