/* jrpc-bench — load and latency for a jrpc broker (issue 6, first version).
 *
 * C connections, each a thread with its own blocking jrpc_client_t. Closed
 * loop (default): each keeps one batch in flight. Open loop (--rate R): a
 * fixed total rate of R batches/s; each thread sends on its own schedule
 * (C/R seconds apart, offset per thread) and latency is measured from the
 * scheduled send time, not the actual one, so a stalled server is charged
 * for the batches it delayed (coordinated omission corrected, as wrk2 does).
 *
 * Every reply is parsed: error objects are counted by code, and every id
 * sent ("<thread>-<seq>-<i>", notifications have none) must come back
 * exactly once. Results of batches sent during the warm-up are discarded.
 *
 * https:// (issue 15) is libjrpc-client's, as every transport here: each
 * thread's client runs OpenSSL on its own non-blocking socket, one TLS
 * connection kept alive per thread. No memory BIOs or TLS code of the
 * bench's own: the threads block in their own client, so the bench
 * measures exactly the TLS a libjrpc-client user gets. --handshakes closes
 * the connection after each batch (jrpc_client_disconnect), so that every
 * batch pays a TCP connect and a TLS handshake: full, or resumed from the
 * last session.
 *
 * Where the time went (issue 33): each connection asks the broker for its
 * timing (libjrpc-client's opts.server_timing: the HTTP Server-Timing
 * header, the ZeroMQ reply head, the SSE end event) and keeps, per phase
 * (parse, auth, redis, queue, worker, gather, total), a histogram and a sum:
 * the report puts their percentiles beside the client's latency, and the
 * means of a run (appended to --plot-series) stack into a bar per run. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hist.h"
#include "loop.h"
#include "jrpc_buf.h"
#include "jrpc_client.h"
#include "jrpc_json.h"
#include "jrpc_keys.h"
#include "jrpc_timing.h"
#include "jrpc_bench_phases.h"

#define MAX_CONNECTIONS 1024
#define MAX_BATCH       100000
#define MAX_CODES       64

typedef struct {
    int code;
    uint64_t n;
} code_count_t;

typedef struct {
    code_count_t v[MAX_CODES];
    int n;
    uint64_t other;  /* codes beyond MAX_CODES distinct ones */
} codes_t;

static void codes_add(codes_t *c, int code, uint64_t n)
{
    for (int i = 0; i < c->n; i++)
        if (c->v[i].code == code) {
            c->v[i].n += n;
            return;
        }
    if (c->n == MAX_CODES) {
        c->other += n;
        return;
    }
    c->v[c->n++] = (code_count_t){ code, n };
}

/* Options. */
static const char *o_url;
static int o_batch = 100;
static const char *o_method = "add";
static const char *o_params = "[1,2]";
static double o_notify, o_invalid, o_sleep;
static int o_sleep_calls;   /* --sleep-calls K: exactly K sleep calls per batch, spread */
static int o_sleep_ms = 10;
static int o_conns = 4;
static double o_duration = 10, o_warmup = 1, o_rate;
static int o_timeout_ms = 10000;
static char *o_key_id, *o_secret;
static int o_json;
static int o_ignore_ids;    /* --ignore-ids: for floor servers answering a fixed body */
static int o_stream;        /* --stream: answers streamed, time to first and last answer */
static const char *o_plot;  /* --plot FILE.png */
static jrpc_client_opts_t o_tls; /* --cacert, --insecure, --cert, --key (https://), --zmq-engine */
static int o_handshakes;    /* --handshakes: 1 full, 2 resumed; 0 keep-alive */
static int o_timing = 1;    /* --server-timing on|off: ask for and collect the broker's */
static const char *o_series; /* --plot-series FILE: this run's means appended, all drawn */
static int o_mcp;           /* --mcp: MCP's Streamable HTTP, a session per connection */

/* Shared. */
static double t_start, t_warm, t_end;      /* monotonic seconds */
static atomic_uint_least64_t g_batches, g_fails;  /* for the progress line */
/* --mcp: the sessions are opened before the clock starts (a gateway may
 * start a server per session): each thread opens its own and counts itself
 * in g_ready (g_setup_failed when it could not), then waits for g_go, after
 * which t_start... are set. */
static atomic_int g_ready, g_setup_failed, g_go = 1;

typedef struct {
    loop_conn_t c;       /* first: index, thread, histograms, counts */
    int create_error;
    uint64_t expected_ids, lost, duplicated, unexpected;
    uint64_t fails, rejected, bad_replies;
    codes_t codes;       /* JSON-RPC error codes */
    codes_t fail_codes;  /* transport failures by -errno */
    char last_fail[256];
    phases_t ph;         /* the broker's timing per phase (jrpc_bench_phases.h) */
} worker_t;

static uint64_t rnd_next(uint64_t *s)  /* xorshift64* */
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 2685821657736338717ull;
}

static double rnd_unit(uint64_t *s)
{
    return (double)(rnd_next(s) >> 11) / 9007199254740992.0;
}

/* ---- reply parsing ----------------------------------------------------- */

static size_t skip_ws(const char *p, size_t i, size_t n)
{
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
        i++;
    return i;
}

/* The end of the JSON string whose opening quote is p[i]. */
static size_t skip_string(const char *p, size_t i, size_t n)
{
    for (i++; i < n;) {
        const char *q = memchr(p + i, '"', n - i);
        if (q == NULL)
            return n;
        size_t e = (size_t)(q - p), bs = 0;
        while (e - bs > i && p[e - bs - 1] == '\\')
            bs++;
        if (bs % 2 == 0)
            return e + 1;
        i = e + 1;   /* an escaped quote */
    }
    return n;
}

/* The end of the JSON value starting at p[i] (the reply has been produced by
 * the broker, but this stays in bounds on anything). */
static size_t skip_value(const char *p, size_t i, size_t n)
{
    int depth = 0;
    while (i < n) {
        char ch = p[i];
        if (ch == '"') {
            i = skip_string(p, i, n);
            if (depth == 0)
                return i;
            continue;
        }
        if (ch == '{' || ch == '[') {
            depth++;
        } else if (ch == '}' || ch == ']') {
            if (depth == 0)
                return i;  /* end of the enclosing container */
            if (--depth == 0)
                return i + 1;
        } else if (depth == 0 && (ch == ',' || ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t')) {
            return i;
        }
        i++;
    }
    return n;
}

/* The members "id" and "error" of the reply object starting at p[i], in one
 * pass over its top level (a span with p == NULL when absent). Returns the
 * end of the object, or i when it is not one. */
static size_t reply_members(const char *p, size_t i, size_t n, jrpc_span_t *id, jrpc_span_t *error)
{
    size_t start = i;
    *id = *error = (jrpc_span_t){ NULL, 0 };
    if (i >= n || p[i] != '{')
        return start;
    for (i = skip_ws(p, i + 1, n); i < n && p[i] == '"';) {
        size_t k = skip_string(p, i, n);   /* the key, quotes included */
        size_t klen = k - i;
        i = skip_ws(p, k, n);
        if (i >= n || p[i] != ':')
            return start;
        i = skip_ws(p, i + 1, n);
        size_t e = skip_value(p, i, n);
        if (e == i)
            return start;
        if (klen == 4 && memcmp(p + k - 4, "\"id\"", 4) == 0)
            *id = (jrpc_span_t){ p + i, e - i };
        else if (klen == 7 && memcmp(p + k - 7, "\"error\"", 7) == 0)
            *error = (jrpc_span_t){ p + i, e - i };
        i = skip_ws(p, e, n);
        if (i < n && p[i] == ',')
            i = skip_ws(p, i + 1, n);
    }
    return i < n && p[i] == '}' ? i + 1 : start;
}

/* One reply object at p[i]: counts its error code and marks its id, which
 * must be "<idprefix><k>" with 0 <= k < nsent (build_batch's ids). Returns
 * the end of the object, or i (and counts a bad reply) when it is not one. */
static size_t take_response(worker_t *w, const char *p, size_t i, size_t n, const char *idprefix,
                            size_t idprefix_len, unsigned char *seen, int nsent)
{
    jrpc_span_t v, err;
    size_t end = reply_members(p, i, n, &v, &err);
    if (end == i) {
        w->bad_replies++;
        return i;
    }
    if (err.p) {
        jrpc_span_t c;
        if (jrpc_json_member(err.p, err.n, "code", &c) == 0) {
            char tmp[32];
            size_t k = c.n < sizeof tmp - 1 ? c.n : sizeof tmp - 1;
            memcpy(tmp, c.p, k);
            tmp[k] = 0;
            codes_add(&w->codes, (int)strtol(tmp, NULL, 10), 1);
        } else {
            w->bad_replies++;
        }
    }
    if (v.p == NULL) {
        w->bad_replies++;
        return end;
    }
    if (v.n == 4 && memcmp(v.p, "null", 4) == 0)
        return end;  /* an error about a request whose id could not be read */
    long x = 0;
    size_t k = idprefix_len;
    if (v.n < idprefix_len + 2 || v.n > idprefix_len + 11 || memcmp(v.p, idprefix, idprefix_len) != 0 ||
        v.p[v.n - 1] != '"' || (v.p[k] == '0' && v.n != k + 2)) {
        w->unexpected++;
        return end;
    }
    for (; k < v.n - 1; k++) {
        if (v.p[k] < '0' || v.p[k] > '9') {
            w->unexpected++;
            return end;
        }
        x = x * 10 + (v.p[k] - '0');
    }
    if (x >= nsent) {
        w->unexpected++;
        return end;
    }
    if (seen[x] < 255)
        seen[x]++;
    return end;
}

/* ---- the connection thread ------------------------------------------- */

/* The text of one call up to its id, made once: {"jsonrpc":"2.0","method":M,"params":P */
static char call_head[512];
static size_t call_head_len;

/* idprefix: the batch's ids all start with it ("<idx>-<seq>-, quote
 * included); the call's index follows, then the closing quote. */
static void build_batch(jrpc_buf_t *b, const char *idprefix, size_t idprefix_len, uint64_t *rng,
                        unsigned char *has_id, int *nid)
{
    char tmp[160];
    jrpc_buf_reset(b);
    if (o_batch > 1)
        jrpc_buf_putc(b, '[');
    *nid = 0;
    /* --sleep-calls: K positions, evenly spaced from a random start */
    int slow_at = o_sleep_calls ? (int)(rnd_next(rng) % (uint64_t)o_batch) : -1;
    int slow_every = o_sleep_calls ? o_batch / o_sleep_calls : 0;
    for (int i = 0; i < o_batch; i++) {
        if (i)
            jrpc_buf_putc(b, ',');
        double r = rnd_unit(rng);
        int notify = 0;
        int d = (i - slow_at + o_batch) % o_batch;
        if (slow_at >= 0 && d % slow_every == 0 && d / slow_every < o_sleep_calls) {
            snprintf(tmp, sizeof tmp, "{\"jsonrpc\":\"2.0\",\"method\":\"sleep\",\"params\":{\"ms\":%d}",
                     o_sleep_ms);
            jrpc_buf_puts(b, tmp);
        } else if (r < o_notify) {
            notify = 1;
            jrpc_buf_append(b, call_head, call_head_len);
        } else if (r < o_notify + o_invalid) {
            /* Invalid Request (-32600): a method that is not a string. */
            jrpc_buf_puts(b, "{\"jsonrpc\":\"2.0\",\"method\":1");
        } else if (r < o_notify + o_invalid + o_sleep) {
            snprintf(tmp, sizeof tmp, "{\"jsonrpc\":\"2.0\",\"method\":\"sleep\",\"params\":{\"ms\":%d}",
                     o_sleep_ms);
            jrpc_buf_puts(b, tmp);
        } else {
            jrpc_buf_append(b, call_head, call_head_len);
        }
        if (notify) {
            jrpc_buf_putc(b, '}');
            has_id[i] = 0;
        } else {
            size_t n = 0;
            memcpy(tmp, ",\"id\":", 6);
            n = 6;
            memcpy(tmp + n, idprefix, idprefix_len);
            n += idprefix_len;
            n = (size_t)(jrpc_u64_put(tmp + n, (uint64_t)i) - tmp);
            tmp[n++] = '"';
            tmp[n++] = '}';
            jrpc_buf_append(b, tmp, n);
            has_id[i] = 1;
            (*nid)++;
        }
    }
    if (o_batch > 1)
        jrpc_buf_putc(b, ']');
}

/* A streamed batch in flight (--stream). */
typedef struct streamed {
    worker_t     *w;
    double        sched;      /* the time the batch counts from */
    int           measured;
    uint64_t      first_us;   /* to the first answer; 0: none yet */
    const char   *idprefix;
    size_t        idprefix_len;
    unsigned char *seen;
} streamed_t;

/* One streamed answer: its own latency, and its id checked as it comes. */
static void on_streamed(void *arg, uint32_t pos, const char *json, size_t len)
{
    (void)pos;
    streamed_t *st = arg;
    uint64_t us = (uint64_t)((loop_now() - st->sched) * 1e6 + 0.5);
    if (st->first_us == 0)
        st->first_us = us ? us : 1;
    if (!st->measured)
        return;
    hist_record(&st->w->c.call_h, us, 1);
    if (!o_ignore_ids)
        take_response(st->w, json, 0, len, st->idprefix, st->idprefix_len, st->seen, o_batch);
}

static void *conn_main(void *arg)
{
    worker_t *w = arg;
    jrpc_client_opts_t opts = o_tls;
    opts.timeout_ms = o_timeout_ms;
    opts.server_timing = o_timing;
    opts.mcp = o_mcp;
    phases_init(&w->ph);
    jrpc_client_t *c = jrpc_client_new(o_url, &opts);
    if (!c) {
        w->create_error = errno ? errno : EINVAL;
        return NULL;
    }
    if (o_key_id && jrpc_client_set_key(c, o_key_id, o_secret) < 0) {
        w->create_error = EINVAL;
        jrpc_client_destroy(&c);
        return NULL;
    }
    jrpc_buf_t body, reply;
    jrpc_buf_init(&body);
    jrpc_buf_init(&reply);
    if (o_mcp) {   /* initialize (by the client) and a ping, then wait for the others */
        static const char ping[] = "{\"jsonrpc\":\"2.0\",\"id\":\"jrpc-bench-setup\",\"method\":\"ping\"}";
        /* a gateway may start a server for the session: up to 60 s */
        int rc = jrpc_client_send(c, ping, sizeof ping - 1, NULL, &reply,
                                  o_timeout_ms > 60000 ? o_timeout_ms : 60000);
        bool ok = rc == 0 && jrpc_client_http_status(c) == 200 &&
                  memmem(reply.p, reply.len, "\"result\"", 8) != NULL;
        if (!ok) {
            snprintf(w->last_fail, sizeof w->last_fail, "%s",
                     rc < 0 ? jrpc_client_last_error(c) : "the setup ping was not answered with a result");
            atomic_fetch_add(&g_setup_failed, 1);
        }
        atomic_fetch_add(&g_ready, 1);
        while (ok && !atomic_load(&g_go))
            usleep(1000);
        if (!ok) {
            jrpc_buf_dispose(&body);
            jrpc_buf_dispose(&reply);
            jrpc_client_destroy(&c);
            return NULL;
        }
    }
    unsigned char *has_id = calloc((size_t)o_batch, 1), *seen = calloc((size_t)o_batch, 1);
    uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(w->c.idx + 1);
    loop_sched_t sch;
    loop_sched_init(&sch, t_start, t_end, o_rate, o_conns, w->c.idx);
    for (uint64_t seq = 0;; seq++) {
        double sched = loop_sched_next(&sch);
        if (sched < 0)
            break;
        int nid;
        char idprefix[64];
        size_t idprefix_len = (size_t)snprintf(idprefix, sizeof idprefix, "\"%d-%" PRIu64 "-",
                                               w->c.idx, seq);
        build_batch(&body, idprefix, idprefix_len, &rng, has_id, &nid);
        int measured = sched >= t_warm;
        streamed_t st = { w, sched, measured, 0, idprefix, idprefix_len, seen };
        if (o_stream)
            memset(seen, 0, (size_t)o_batch);
        int rc = o_stream ? jrpc_client_send_stream(c, body.p, body.len, NULL, on_streamed, &st,
                                                    &reply, -1)
                          : jrpc_client_send(c, body.p, body.len, NULL, &reply, -1);
        double done = loop_now();
        if (o_handshakes)   /* checked against the URL: never -ENOTSUP here */
            (void)jrpc_client_disconnect(c, o_handshakes == 1 ? JRPC_CLIENT_FORGET_SESSION : 0);
        atomic_fetch_add(&g_batches, 1);
        if (rc < 0) {
            atomic_fetch_add(&g_fails, 1);
            snprintf(w->last_fail, sizeof w->last_fail, "%s", jrpc_client_last_error(c));
            if (measured) {
                w->fails++;
                codes_add(&w->fail_codes, rc, 1);
            }
            continue;
        }
        if (!measured)
            continue;
        uint64_t us = (uint64_t)((done - sched) * 1e6 + 0.5);
        if (o_timing)
            phases_take(&w->ph, jrpc_client_server_timing(c), us);
        if (o_stream) {   /* the answers were taken as they came; the end is the summary */
            w->c.batches++;
            w->c.calls += (uint64_t)o_batch;
            hist_record(&w->c.batch_h, us, 1);
            if (st.first_us)
                hist_record(&w->c.first_h, st.first_us, 1);
        } else {
            loop_conn_record(&w->c, us, o_batch);
        }
        if (o_ignore_ids)
            continue;
        w->expected_ids += (uint64_t)nid;
        if (!o_stream)
            memset(seen, 0, (size_t)o_batch);
        const char *p = reply.p;
        size_t n = reply.len, i = skip_ws(p, 0, n);
        if (o_stream && n >= 12 && memcmp(p, "{\"answered\":", 12) == 0) {
            /* the end message: the summary, nothing to take */
        } else if (i < n && p[i] == '[') {
            for (i = skip_ws(p, i + 1, n); i < n && p[i] != ']';) {
                size_t e = take_response(w, p, i, n, idprefix, idprefix_len, seen, o_batch);
                if (e == i)
                    break;   /* counted as a bad reply */
                i = skip_ws(p, e, n);
                if (i < n && p[i] == ',')
                    i = skip_ws(p, i + 1, n);
            }
        } else if (i < n && p[i] == '{') {
            jrpc_span_t idv, errv;
            reply_members(p, i, n, &idv, &errv);
            if (o_batch > 1 && idv.n == 4 && memcmp(idv.p, "null", 4) == 0) {
                /* The whole batch refused (too large, overload, bad signature...). */
                w->rejected++;
                w->expected_ids -= (uint64_t)nid;
                take_response(w, p, i, n, idprefix, idprefix_len, seen, o_batch);
                continue;
            }
            take_response(w, p, i, n, idprefix, idprefix_len, seen, o_batch);
        } else if (n > 0) {
            w->bad_replies++;
        }
        for (int k = 0; k < o_batch; k++) {
            if (!has_id[k])
                continue;
            if (seen[k] == 0)
                w->lost++;
            else if (seen[k] > 1)
                w->duplicated += seen[k] - 1u;
        }
    }
    w->c.finished = loop_now();
    free(has_id);
    free(seen);
    jrpc_buf_dispose(&body);
    jrpc_buf_dispose(&reply);
    jrpc_client_destroy(&c);
    return NULL;
}

/* ---- options ----------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
"usage: jrpc-bench --url URL [options]\n"
"Load and latency for a jrpc broker over tcp://, ipc://, http:// or https://.\n"
"  --url URL            the broker (required)\n"
"  --batch N            calls per batch (default 100; 1 = single requests)\n"
"  --method M           the method called (default add)\n"
"  --params JSON        its params (default [1,2])\n"
"  --notify-share P     share (0..1) of calls sent as notifications\n"
"  --invalid-share P    share of invalid requests (answered -32600)\n"
"  --sleep-share P      share of `sleep` calls, of --sleep-ms N ms (default 10)\n"
"  --sleep-calls K      exactly K `sleep` calls in each batch (evenly spaced from\n"
"                       a random position), the other calls as above\n"
"  --connections C      connections, one thread each (default 4)\n"
"  --duration S         seconds measured (default 10)\n"
"  --warmup S           seconds before, whose results are discarded (default 1)\n"
"  --rate R             open loop at R batches/s in total; latency from the\n"
"                       scheduled send time (coordinated omission corrected).\n"
"                       Absent: closed loop, one batch in flight per connection\n"
"  --timeout-ms N       per call (default 10000)\n"
"  --cacert FILE        https://: trust the CAs of FILE (PEM) instead of the\n"
"                       system store\n"
"  --insecure           https://: do not verify the server's certificate (tests)\n"
"  --cert FILE [--key FILE]  https://: client certificate (mutual TLS)\n"
"  --handshakes MODE    http(s):// only: close the connection after every batch,\n"
"                       so each batch is a new TCP connection + TLS handshake\n"
"                       + the batch; MODE full (no session resumed) or resumed\n"
"                       (the last TLS session resumed). Reports handshakes/s\n"
"                       (use --batch 1 for the handshake rate itself)\n"
"  --key-id ID --secret S | --key-file F [--key-id ID]   sign every batch\n"
"  --json               one JSON object on stdout instead of the table\n"
"  --plot FILE.png      also draw into FILE.png the latency percentile curve up\n"
"                       to the maximum (per batch, the broker's total beside it,\n"
"                       per call when streamed) and, below it, where the batch\n"
"                       latency went: the mean of each phase stacked, one bar\n"
"                       per run of --plot-series; needs gnuplot (gnuplot-nox)\n"
"  --plot-series FILE   append this run's means (label: batch, connections,\n"
"                       rate) to FILE, a TSV; --plot draws every run in it, so\n"
"                       runs with growing batch sizes and loads line up\n"
"  --server-timing on|off  ask the broker where each batch's time went (default\n"
"                       on: over ZeroMQ the header frame's \"timing\"; over HTTP\n"
"                       its Server-Timing header) and report each phase's\n"
"                       percentiles beside the client's latency\n"
"  --stream             ask for the answers streamed as they complete (ZeroMQ\n"
"                       header flag, HTTP text/event-stream); reports the time\n"
"                       to the first answer per batch (row 'first') besides the\n"
"                       last (row 'batch'), and per call each answer's own time\n"
"  --mcp                http(s):// only: speak MCP's Streamable HTTP (an MCP\n"
"                       server, or the broker's /mcp) with --batch 1: each\n"
"                       connection opens a session (initialize) and pings before\n"
"                       the clock starts (allowing 60 s or --timeout-ms for it),\n"
"                       and says on stderr when the measured\n"
"                       window begins and ends (Unix ms), e.g. --method\n"
"                       tools/call --params '{\"name\":\"echo\",\"arguments\":{...}}'\n"
"  --zmq-engine E       tcp:// and ipc://: native (default: libjrpc-client's own\n"
"                       ZMTP on each thread) or libzmq (a context per connection)\n"
"  --ignore-ids         do not read the replies at all: only for floor servers\n"
"                       that answer a fixed body (bench/peers, nginx); the\n"
"                       report then says \"ids_checked\":false\n"
"A batch's calls answered together have no latency of their own: the 'call'\n"
"row is reported with --stream only (each answer's own arrival).\n"
"Exit status: 0; 1 if an id came back lost, twice, or unknown; 2 usage error\n"
"(or gnuplot missing for --plot); 3 the run was done but the plot failed;\n"
"4 no batch was answered at all (every send failed: is the broker there?).\n");
}

static void usage_error(const char *msg, const char *arg)
{
    fprintf(stderr, "jrpc-bench: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    usage(stderr);
    exit(2);
}

static double num_arg(const char *s, const char *what, double lo, double hi)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        usage_error(what, s);
    return v;
}

/* Key `want` (NULL: the first) of a key file, read as the broker and the
 * jrpc CLI read it (proto/jrpc_keys; any secret length). */
static int key_from_file(const char *path, const char *want)
{
    static const jrpc_keys_opts_t opts = { .secret_min = 1, .allow_empty = true };
    jrpc_keys_t *keys = NULL;
    char err[512];
    int rc = jrpc_keys_load(path, &opts, &keys, err, sizeof err);
    if (rc == -EINVAL || rc == -ENOMEM) {
        fprintf(stderr, "jrpc-bench: %s\n", err);
        return -1;
    }
    if (rc < 0) {
        fprintf(stderr, "jrpc-bench: cannot read key file %s: %s\n", path, strerror(-rc));
        return -1;
    }
    const jrpc_key_t *key = want ? jrpc_keys_find(keys, (jrpc_span_t){ want, strlen(want) })
                                 : jrpc_keys_first(keys);
    if (key) {
        jrpc_span_t id = jrpc_key_id(key), secret = jrpc_key_secret(key);
        o_key_id = strndup(id.p, id.n);
        o_secret = strndup(secret.p, secret.n);
    } else {
        fprintf(stderr, "jrpc-bench: no key %s in %s\n", want ? want : "at all", path);
    }
    jrpc_keys_destroy(&keys);
    return key ? 0 : -1;
}

static void parse_args(int argc, char **argv)
{
    enum { O_URL = 256, O_BATCH, O_METHOD, O_PARAMS, O_NOTIFY, O_INVALID, O_SLEEP, O_SLEEPCALLS, O_SLEEPMS,
           O_CONNS, O_DURATION, O_WARMUP, O_RATE, O_TIMEOUT, O_KEYID, O_SECRET, O_KEYFILE, O_JSON, O_STREAM,
           O_PLOT, O_IGNORE_IDS, O_HELP, O_CACERT, O_INSECURE, O_CERT, O_TLSKEY, O_HANDSHAKES,
           O_ZMQ_ENGINE, O_TIMING, O_SERIES, O_MCP };
    static const struct option lo[] = {
        { "url", required_argument, NULL, O_URL },
        { "batch", required_argument, NULL, O_BATCH },
        { "method", required_argument, NULL, O_METHOD },
        { "params", required_argument, NULL, O_PARAMS },
        { "notify-share", required_argument, NULL, O_NOTIFY },
        { "invalid-share", required_argument, NULL, O_INVALID },
        { "sleep-share", required_argument, NULL, O_SLEEP },
        { "sleep-calls", required_argument, NULL, O_SLEEPCALLS },
        { "sleep-ms", required_argument, NULL, O_SLEEPMS },
        { "connections", required_argument, NULL, O_CONNS },
        { "duration", required_argument, NULL, O_DURATION },
        { "warmup", required_argument, NULL, O_WARMUP },
        { "rate", required_argument, NULL, O_RATE },
        { "timeout-ms", required_argument, NULL, O_TIMEOUT },
        { "key-id", required_argument, NULL, O_KEYID },
        { "secret", required_argument, NULL, O_SECRET },
        { "key-file", required_argument, NULL, O_KEYFILE },
        { "json", no_argument, NULL, O_JSON },
        { "plot", required_argument, NULL, O_PLOT },
        { "ignore-ids", no_argument, NULL, O_IGNORE_IDS },
        { "cacert", required_argument, NULL, O_CACERT },
        { "insecure", no_argument, NULL, O_INSECURE },
        { "cert", required_argument, NULL, O_CERT },
        { "key", required_argument, NULL, O_TLSKEY },
        { "handshakes", required_argument, NULL, O_HANDSHAKES },
        { "stream", no_argument, NULL, O_STREAM },
        { "zmq-engine", required_argument, NULL, O_ZMQ_ENGINE },
        { "server-timing", required_argument, NULL, O_TIMING },
        { "plot-series", required_argument, NULL, O_SERIES },
        { "mcp", no_argument, NULL, O_MCP },
        { "help", no_argument, NULL, O_HELP },
        { NULL, 0, NULL, 0 },
    };
    const char *key_id = NULL, *secret = NULL, *key_file = NULL;
    int o;
    opterr = 0;
    while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (o) {
        case O_URL: o_url = optarg; break;
        case O_BATCH: o_batch = (int)num_arg(optarg, "--batch must be 1..100000", 1, MAX_BATCH); break;
        case O_METHOD:
            if (!*optarg || strpbrk(optarg, "\"\\") || strlen(optarg) > 200)
                usage_error("--method: a plain name", optarg);
            o_method = optarg;
            break;
        case O_PARAMS: o_params = optarg; break;
        case O_NOTIFY: o_notify = num_arg(optarg, "--notify-share must be 0..1", 0, 1); break;
        case O_INVALID: o_invalid = num_arg(optarg, "--invalid-share must be 0..1", 0, 1); break;
        case O_SLEEP: o_sleep = num_arg(optarg, "--sleep-share must be 0..1", 0, 1); break;
        case O_SLEEPCALLS:
            o_sleep_calls = (int)num_arg(optarg, "--sleep-calls must be 0..100000", 0, 100000);
            break;
        case O_SLEEPMS: o_sleep_ms = (int)num_arg(optarg, "--sleep-ms must be 0..600000", 0, 600000); break;
        case O_CONNS: o_conns = (int)num_arg(optarg, "--connections must be 1..1024", 1, MAX_CONNECTIONS); break;
        case O_DURATION: o_duration = num_arg(optarg, "--duration must be > 0", 0.001, 1e6); break;
        case O_WARMUP: o_warmup = num_arg(optarg, "--warmup must be >= 0", 0, 1e6); break;
        case O_RATE: o_rate = num_arg(optarg, "--rate must be > 0", 1e-3, 1e9); break;
        case O_TIMEOUT: o_timeout_ms = (int)num_arg(optarg, "--timeout-ms must be 1..3600000", 1, 3600000); break;
        case O_KEYID: key_id = optarg; break;
        case O_SECRET: secret = optarg; break;
        case O_KEYFILE: key_file = optarg; break;
        case O_JSON: o_json = 1; break;
        case O_STREAM: o_stream = 1; break;
        case O_PLOT:
            /* The name goes into a gnuplot string in single quotes. */
            if (!*optarg || strpbrk(optarg, "'\n\r"))
                usage_error("--plot: a file name without quotes or newlines", optarg);
            o_plot = optarg;
            break;
        case O_IGNORE_IDS: o_ignore_ids = 1; break;
        case O_MCP: o_mcp = 1; break;
        case O_TIMING:
            if (strcmp(optarg, "on") != 0 && strcmp(optarg, "off") != 0)
                usage_error("--server-timing: on or off", optarg);
            o_timing = strcmp(optarg, "on") == 0;
            break;
        case O_SERIES:
            /* The name goes into a gnuplot string in single quotes too. */
            if (!*optarg || strpbrk(optarg, "'\n\r"))
                usage_error("--plot-series: a file name without quotes or newlines", optarg);
            o_series = optarg;
            break;
        case O_CACERT: o_tls.cacert = optarg; break;
        case O_ZMQ_ENGINE:
            if (strcmp(optarg, "native") != 0 && strcmp(optarg, "libzmq") != 0)
                usage_error("--zmq-engine: native or libzmq", optarg);
            o_tls.zmq_engine = optarg;
            break;
        case O_INSECURE: o_tls.insecure = 1; break;
        case O_CERT: o_tls.cert = optarg; break;
        case O_TLSKEY: o_tls.key = optarg; break;
        case O_HANDSHAKES:
            if (strcmp(optarg, "full") == 0)
                o_handshakes = 1;
            else if (strcmp(optarg, "resumed") == 0)
                o_handshakes = 2;
            else
                usage_error("--handshakes: full or resumed", optarg);
            break;
        case O_HELP: usage(stdout); exit(0);
        default: usage_error("unknown or incomplete option", argv[optind - 1]);
        }
    }
    if (optind < argc)
        usage_error("unexpected argument", argv[optind]);
    if (!o_url)
        usage_error("--url is required", NULL);
    bool https = strncmp(o_url, "https://", 8) == 0;
    if ((o_tls.cacert || o_tls.insecure || o_tls.cert || o_tls.key) && !https)
        usage_error("--cacert, --insecure, --cert and --key are for https:// URLs", o_url);
    if (o_tls.key && !o_tls.cert)
        usage_error("--key is the private key of --cert: give --cert too", NULL);
    if (o_handshakes && !https && strncmp(o_url, "http://", 7) != 0)
        usage_error("--handshakes is for http:// and https:// URLs (ZeroMQ keeps its own "
                    "connections)", o_url);
    if (o_mcp && !https && strncmp(o_url, "http://", 7) != 0)
        usage_error("--mcp is for http:// and https:// URLs", o_url);
    if (o_mcp && (o_batch != 1 || o_stream || o_handshakes))
        usage_error("--mcp takes --batch 1, and neither --stream nor --handshakes", NULL);
    if (o_sleep_calls > o_batch)
        usage_error("--sleep-calls cannot be more than --batch", NULL);
    if (o_notify + o_invalid + o_sleep > 1.0 + 1e-9)
        usage_error("the shares add up to more than 1", NULL);
    if (jrpc_json_validate(o_params, strlen(o_params), JRPC_JSON_MAX_DEPTH) != 0 ||
        (o_params[strspn(o_params, " \t\r\n")] != '[' && o_params[strspn(o_params, " \t\r\n")] != '{'))
        usage_error("--params must be a JSON array or object", o_params);
    if (o_plot && !phases_find_gnuplot()) {
        fprintf(stderr, "jrpc-bench: --plot needs gnuplot on the PATH "
                        "(Debian: apt-get install gnuplot-nox)\n");
        exit(2);
    }
    if (key_file) {
        if (secret)
            usage_error("--secret and --key-file are exclusive", NULL);
        if (key_from_file(key_file, key_id) < 0)
            exit(2);
    } else if (key_id || secret) {
        if (!key_id || !secret)
            usage_error("signing needs both --key-id and --secret (or --key-file)", NULL);
        o_key_id = strdup(key_id);
        o_secret = strdup(secret);
    }
}

/* ---- report ------------------------------------------------------------ */

static void json_codes(const char *name, const codes_t *c)
{
    printf("\"%s\":{", name);
    for (int i = 0; i < c->n; i++)
        printf("%s\"%d\":%" PRIu64, i ? "," : "", c->v[i].code, c->v[i].n);
    if (c->other)
        printf("%s\"other\":%" PRIu64, c->n ? "," : "", c->other);
    printf("}");
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    int hl = snprintf(call_head, sizeof call_head, "{\"jsonrpc\":\"2.0\",\"method\":\"%s\",\"params\":%s",
                      o_method, o_params);
    if (hl < 0 || (size_t)hl >= sizeof call_head)
        usage_error("--method and --params together are too long (480 bytes at most)", NULL);
    call_head_len = (size_t)hl;
    static worker_t ws[MAX_CONNECTIONS];
    if (o_mcp) {   /* sessions first: each thread's setup is bounded by --timeout-ms */
        atomic_store(&g_go, 0);
        if (loop_start(ws, sizeof *ws, o_conns, conn_main, "jrpc-bench") < 0)
            return 2;
        while (atomic_load(&g_ready) < o_conns)
            usleep(2000);
        if (atomic_load(&g_setup_failed)) {
            for (int k = 0; k < o_conns; k++)
                if (ws[k].last_fail[0]) {
                    fprintf(stderr, "jrpc-bench: %d of %d MCP sessions could not be set up: %s\n",
                            atomic_load(&g_setup_failed), o_conns, ws[k].last_fail);
                    break;
                }
            return 2;
        }
    }
    t_start = loop_now() + 0.05;  /* let every thread reach its first send */
    t_warm = t_start + o_warmup;
    t_end = t_warm + o_duration;
    if (o_mcp) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        double epoch_ms = (double)now.tv_sec * 1e3 + (double)now.tv_nsec / 1e6, mono = loop_now();
        fprintf(stderr, "jrpc-bench: %d MCP sessions open; window %.0f %.0f (Unix ms)\n", o_conns,
                epoch_ms + (t_warm - mono) * 1e3, epoch_ms + (t_end - mono) * 1e3);
        atomic_store(&g_go, 1);
    } else if (loop_start(ws, sizeof *ws, o_conns, conn_main, "jrpc-bench") < 0) {
        return 2;
    }
    int tty = isatty(2);
    uint64_t prev = 0;
    for (double t = t_start + 1; t < t_end + 0.5; t += 1) {
        loop_sleep_until(t < t_end ? t : t_end);
        if (tty) {
            uint64_t b = atomic_load(&g_batches), f = atomic_load(&g_fails);
            double el = loop_now() - t_start;
            fprintf(stderr, "\r[%5.1fs%s] %8.0f batches/s  %10.0f calls/s  failures %" PRIu64 "   ",
                    el, loop_now() < t_warm ? " warm-up" : "", (double)(b - prev),
                    (double)(b - prev) * o_batch, f);
            prev = b;
        }
        if (t >= t_end)
            break;
    }
    if (tty)
        fprintf(stderr, "\n");
    worker_t tot;
    memset(&tot, 0, sizeof tot);
    phases_init(&tot.ph);
    double last = loop_join(ws, sizeof *ws, o_conns, &tot.c, t_warm);
    const char *last_fail = "";
    int create_error = 0;
    for (int k = 0; k < o_conns; k++) {
        worker_t *w = &ws[k];
        if (w->create_error)
            create_error = w->create_error;
        tot.expected_ids += w->expected_ids;
        tot.lost += w->lost;
        tot.duplicated += w->duplicated;
        tot.unexpected += w->unexpected;
        tot.fails += w->fails;
        tot.rejected += w->rejected;
        tot.bad_replies += w->bad_replies;
        for (int i = 0; i < w->codes.n; i++)
            codes_add(&tot.codes, w->codes.v[i].code, w->codes.v[i].n);
        tot.codes.other += w->codes.other;
        for (int i = 0; i < w->fail_codes.n; i++)
            codes_add(&tot.fail_codes, w->fail_codes.v[i].code, w->fail_codes.v[i].n);
        if (w->last_fail[0])
            last_fail = w->last_fail;
        phases_merge(&tot.ph, &w->ph);
    }
    if (create_error) {
        fprintf(stderr, "jrpc-bench: %s: %s\n", o_url, jrpc_client_strerror(-create_error));
        return 2;
    }
    double secs = last - t_warm;
    if (secs <= 0)
        secs = o_duration;
    double cps = (double)tot.c.calls / secs;
    loop_report_t rep = { "jrpc-bench", o_url, o_rate, o_batch, o_conns, secs, o_warmup,
                          tot.c.batches, tot.c.calls, &tot.c.batch_h,
                          o_stream ? &tot.c.call_h : NULL, o_stream ? &tot.c.first_h : NULL };
    loop_print_report(&rep, o_json);
    char label[64];
    int ln = snprintf(label, sizeof label, "b%d c%d", o_batch, o_conns);
    if (o_rate > 0)
        snprintf(label + ln, sizeof label - (size_t)ln, " r%g", o_rate);
    if (o_timing)
        phases_print(&tot.ph, o_json);
    if (o_series && tot.ph.timed) {
        FILE *f = fopen(o_series, "a");
        if (f == NULL || (phases_series_row(f, label, &tot.ph), fclose(f)) != 0)
            fprintf(stderr, "jrpc-bench: cannot append to %s: %s\n", o_series, strerror(errno));
    }
    if (o_handshakes && o_json)
        printf("\"handshakes\":\"%s\",\"handshakes_per_s\":%.1f,",
               o_handshakes == 1 ? "full" : "resumed", (double)tot.c.batches / secs);
    else if (o_handshakes)
        printf("  handshakes %" PRIu64 " (%.1f/s): each batch on a new connection, %s\n",
               tot.c.batches, (double)tot.c.batches / secs,
               strncmp(o_url, "https://", 8) != 0 ? "TCP only (http://)"
               : o_handshakes == 1 ? "full TLS handshake" : "TLS session resumed");
    if (o_json) {
        printf("\"ids_checked\":%s,", o_ignore_ids ? "false" : "true");
        json_codes("errors", &tot.codes);
        printf(",\"transport_failures\":%" PRIu64 ",", tot.fails);
        json_codes("transport_failures_by_errno", &tot.fail_codes);
        printf(",\"rejected_batches\":%" PRIu64 ",\"ids_expected\":%" PRIu64 ",\"lost\":%" PRIu64
               ",\"duplicated\":%" PRIu64 ",\"unexpected\":%" PRIu64 ",\"bad_replies\":%" PRIu64 "}\n",
               tot.rejected, tot.expected_ids, tot.lost, tot.duplicated, tot.unexpected,
               tot.bad_replies);
    } else {
        if (o_stream || o_rate > 0)
            printf("  (%s%s)\n",
                   o_stream ? "per call: each answer's own arrival; first: a batch's first answer"
                            : "",
                   o_rate > 0 ? (o_stream ? "; from the scheduled send time"
                                          : "latency from the scheduled send time") : "");
        printf("  errors by code:");
        if (!tot.codes.n && !tot.codes.other)
            printf(" none");
        for (int i = 0; i < tot.codes.n; i++)
            printf(" %d=%" PRIu64, tot.codes.v[i].code, tot.codes.v[i].n);
        if (tot.codes.other)
            printf(" other=%" PRIu64, tot.codes.other);
        printf("\n  transport failures: %" PRIu64, tot.fails);
        for (int i = 0; i < tot.fail_codes.n; i++)
            printf(" [%s: %" PRIu64 "]", jrpc_client_strerror(tot.fail_codes.v[i].code),
                   tot.fail_codes.v[i].n);
        if (last_fail[0])
            printf(" (last: %s)", last_fail);
        printf("\n  rejected batches: %" PRIu64 ", bad replies: %" PRIu64 "\n", tot.rejected,
               tot.bad_replies);
        if (o_ignore_ids)
            printf("  ids: not checked (--ignore-ids)\n");
        else
            printf("  ids: %" PRIu64 " expected, %" PRIu64 " lost, %" PRIu64 " duplicated, %" PRIu64
                   " unknown\n", tot.expected_ids, tot.lost, tot.duplicated, tot.unexpected);
    }
    phases_plot_t po = { o_url, label, o_series, o_rate, o_batch, o_conns, o_stream, cps };
    int plot_failed = o_plot && phases_plot(o_plot, &tot.c.batch_h, &tot.c.call_h, &tot.ph, &po) < 0;
    if (o_secret) {
        explicit_bzero(o_secret, strlen(o_secret));
        free(o_secret);
    }
    free(o_key_id);
    uint64_t failed = atomic_load(&g_fails);
    if (tot.c.batches == 0 && failed > 0) {
        fprintf(stderr, "jrpc-bench: no batch was answered: %" PRIu64 " failed (last: %s)\n",
                failed, last_fail[0] ? last_fail : "?");
        return 4;
    }
    if (tot.lost || tot.duplicated || tot.unexpected)
        return 1;
    return plot_failed ? 3 : 0;
}
