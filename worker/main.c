/* jrpc-worker — the demo worker: serves the methods of the JSON-RPC 2.0
 * specification's examples, plus echo, sleep, slow_update and spin, on
 * libjrpc-worker. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "jrpc_conf.h"
#include "jrpc_errors.h"
#include "jrpc_json.h"
#include "jrpc_log.h"
#include "jrpc_wire.h"
#include "jrpc_sdnotify.h"
#include "jrpc_mpack.h"
#include "jrpc_connect_opt.h"
#include "jrpc_stop.h"
#include "jrpc_worker.h"

#define SLEEP_MAX_MS     600000
#define SPIN_MAX_MS      60000

static const char usage_head[] =
    "Usage: jrpc-worker [OPTIONS]\n"
    "\n"
    "Serves the demo methods to one or more jrpc brokers over ZeroMQ.\n";

static const char usage_tail[] =
    "Methods (wrong params answer -32602 \"Invalid params\"):\n"
    "  subtract     [minuend, subtrahend] or {\"minuend\": x, \"subtrahend\": y};\n"
    "               numbers; integers give an exact integer while it fits 64 bits\n"
    "  sum          [x, ...]: the sum of the numbers (0 for [])\n"
    "  add          [a, b]: a + b\n"
    "  get_data     returns [\"hello\", 5]\n"
    "  update, notify_hello, notify_sum\n"
    "               accept any params, return null\n"
    "  echo         returns its params unchanged (null when absent); with --json on\n"
    "               (the default) the client's very bytes: pass-through, no msgpack\n"
    "  sleep        {\"ms\": N}, 0 <= N <= 600000: answers N after N ms, without\n"
    "               holding up other calls\n"
    "  slow_update  {\"ms\": N}: like update, answers null after N ms\n"
    "  count        any params: how many count calls this process has run,\n"
    "               this one included (a call with an effect: not idempotent)\n"
    "  spin         {\"ms\": N}, 0 <= N <= 60000: burns N ms of CPU on libuv's\n"
    "               thread pool (up to 4 at once per worker; heartbeats go on),\n"
    "               answers {\"ms\": N, \"pid\": the worker's pid}\n"
    "\n"
    "Idempotent (the broker may re-run them on another worker when this one is\n"
    "lost mid-call): subtract, sum, add, get_data, echo, sleep, spin. Not idempotent:\n"
    "update, slow_update, count, notify_hello, notify_sum (they stand for calls with\n"
    "effects; a lost call of theirs is answered -32004, never run twice).\n"
    "\n"
    "Params are never logged, at any --log-level.\n"
    "Precedence: flags > JRPC_* environment > config file > defaults.\n"
    "SIGINT/SIGTERM: sends DISCONNECT to every broker (no new calls come), lets\n"
    "the calls held finish and be answered (at most --drain-timeout-ms, or until\n"
    "their deadlines pass), then exits 0. A second signal exits at once.\n"
    "SIGHUP is logged and ignored.\n"
    "Under systemd (Type=notify) it sends READY=1 once its connections are set up\n"
    "(ZeroMQ connects in the background) and STOPPING=1 when a stop begins.\n"
    "Exit status: 0 on a clean stop (or --help, --version, a good --check-config),\n"
    "1 on a runtime failure, 2 on bad usage, config or key files.\n";

/* ---- numbers ---- */

/* A JSON number as msgpack: an integer (exact, in i) or a float (in f). */
typedef struct num {
    bool     is_int;
    __int128 i;
    double   f;
} num_t;

static bool get_num(const msgpack_object *o, num_t *n)
{
    switch (o->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        *n = (num_t){ .is_int = true, .i = o->via.u64, .f = (double)o->via.u64 };
        return true;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        *n = (num_t){ .is_int = true, .i = o->via.i64, .f = (double)o->via.i64 };
        return true;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        *n = (num_t){ .is_int = false, .f = o->via.f64 };
        return isfinite(o->via.f64);
    default:
        return false;
    }
}

/* Packs an exact integer when it fits int64/uint64, else its float value. */
static void pack_int128(msgpack_packer *pk, __int128 v)
{
    if (v >= 0 && v <= (__int128)UINT64_MAX)
        msgpack_pack_uint64(pk, (uint64_t)v);
    else if (v < 0 && v >= (__int128)INT64_MIN)
        msgpack_pack_int64(pk, (int64_t)v);
    else
        msgpack_pack_double(pk, (double)v);
}

/* Sums n numbers; sign[i] is +1 or -1. Integers stay exact (|n| < 2^62
 * terms of < 2^64 each cannot overflow __int128); any float makes it a
 * float sum. Returns false when an element is not a number. */
static bool pack_sum(msgpack_packer *pk, const msgpack_object *v, const int *sign, uint32_t n)
{
    bool all_int = true;
    __int128 isum = 0;
    double fsum = 0;
    for (uint32_t i = 0; i < n; i++) {
        num_t x;
        if (!get_num(&v[i], &x))
            return false;
        int s = sign ? sign[i] : 1;
        all_int = all_int && x.is_int;
        if (x.is_int)
            isum += s * x.i;
        fsum += s * x.f;
    }
    if (all_int) {
        pack_int128(pk, isum);
    } else {
        if (!isfinite(fsum))
            return false;
        msgpack_pack_double(pk, fsum);
    }
    return true;
}

static void invalid_params(jrpc_wcall_t *call)
{
    jrpc_wcall_error(call, JRPC_INVALID_PARAMS, jrpc_error_message(JRPC_INVALID_PARAMS));
}

/* ---- methods ---- */

/* --slow-percent, --slow-ms: a demo of a worker with a slow tail (bench/
 * hedge.sh): that share of the quick methods' answers is held back. */
static uint32_t slow_percent, slow_ms;
static bool json_echo = true;   /* --json */
static void answer(jrpc_wcall_t *call, void *arg);

static void m_subtract(jrpc_wcall_t *call, const msgpack_object *params, void *arg)
{
    msgpack_object pair[2];
    static const int sign[2] = { 1, -1 };
    if (params->type == MSGPACK_OBJECT_ARRAY && params->via.array.size == 2) {
        pair[0] = params->via.array.ptr[0];
        pair[1] = params->via.array.ptr[1];
    } else if (params->type == MSGPACK_OBJECT_MAP) {
        const msgpack_object *a = jrpc_mpack_map_get(params, "minuend");
        const msgpack_object *b = jrpc_mpack_map_get(params, "subtrahend");
        if (a == NULL || b == NULL)
            { invalid_params(call); return; }
        pair[0] = *a;
        pair[1] = *b;
    } else {
        { invalid_params(call); return; }
    }
    if (!pack_sum(jrpc_wcall_result(call), pair, sign, 2))
        { invalid_params(call); return; }
    answer(call, arg);
}

static void m_sum(jrpc_wcall_t *call, const msgpack_object *params, void *arg)
{
    if (params->type != MSGPACK_OBJECT_ARRAY)
        { invalid_params(call); return; }
    if (!pack_sum(jrpc_wcall_result(call), params->via.array.ptr, NULL, params->via.array.size))
        { invalid_params(call); return; }
    answer(call, arg);
}

static void m_add(jrpc_wcall_t *call, const msgpack_object *params, void *arg)
{
    if (params->type != MSGPACK_OBJECT_ARRAY || params->via.array.size != 2)
        { invalid_params(call); return; }
    m_sum(call, params, arg);
}

static void m_get_data(jrpc_wcall_t *call, const msgpack_object *params, void *arg)
{
    msgpack_packer *pk = jrpc_wcall_result(call);
    msgpack_pack_array(pk, 2);
    msgpack_pack_str(pk, 5);
    msgpack_pack_str_body(pk, "hello", 5);
    msgpack_pack_int(pk, 5);
    answer(call, arg);
}

static void m_null(jrpc_wcall_t *call, const msgpack_object *params, void *arg)
{
    answer(call, arg); /* nothing packed: null */
}

static void m_count(jrpc_wcall_t *call, const msgpack_object *params, void *arg)
{
    static uint64_t runs;
    (void)params;
    msgpack_pack_uint64(jrpc_wcall_result(call), ++runs);
    answer(call, arg);
}

/* --json off: echo takes msgpack params and packs them back, as every
 * method did before JSON pass-through (for comparison: bench/profile.sh). */
static void m_echo(jrpc_wcall_t *call, const msgpack_object *params, void *arg)
{
    msgpack_pack_object(jrpc_wcall_result(call), *params);
    answer(call, arg);
}

/* echo, pass-through: declared "json" at READY, it gets the client's params
 * text and answers it as it is (the broker copies it into the reply). */
static void m_echo_json(jrpc_wcall_t *call, const char *params, size_t n, void *arg)
{
    if (slow_percent == 0) {
        jrpc_wcall_finish_json(call, params, n);   /* n == 0: null */
        return;
    }
    /* The slow-tail demo holds packed results back: pack this one. */
    if (n > 0) {
        jrpc_buf_t b;
        jrpc_buf_init(&b);
        msgpack_packer *pk = jrpc_wcall_result(call);
        if (jrpc_json_to_msgpack(params, n, JRPC_WIRE_MAX_DEPTH, &b) == 0)
            pk->callback(pk->data, b.p, b.len);
        jrpc_buf_dispose(&b);
    }
    answer(call, arg);
}

/* sleep: one timer per call, in a list so that a stop can cancel them. */
typedef struct sleeper {
    uv_timer_t      timer;
    jrpc_wcall_t   *call;
    uint64_t        ms;    /* the answer */
    bool            null;  /* slow_update: answer null instead; --slow-ms: packed already */
    struct sleeper *prev;  /* pending list */
    struct sleeper *next;
} sleeper_t;

static sleeper_t *sleepers;

static void sleeper_unlink(sleeper_t *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        sleepers = s->next;
    if (s->next)
        s->next->prev = s->prev;
}

static void on_sleeper_closed(uv_handle_t *h)
{
    free(h->data);
}

static void on_sleep_done(uv_timer_t *t)
{
    sleeper_t *s = t->data;
    sleeper_unlink(s);
    if (!s->null)
        msgpack_pack_uint64(jrpc_wcall_result(s->call), s->ms);
    jrpc_wcall_finish(s->call);
    uv_close((uv_handle_t *)&s->timer, on_sleeper_closed);
}

/* Finishes call ms from now (answering ms, or with what is packed when
 * null). Returns 0 or -ENOMEM. */
static int finish_later(jrpc_wcall_t *call, jrpc_worker_t *w, uint64_t ms, bool null)
{
    sleeper_t *s = calloc(1, sizeof *s);
    if (s == NULL)
        return -ENOMEM;
    s->call = call;
    s->ms = ms;
    s->null = null;
    uv_timer_init(jrpc_worker_loop(w), &s->timer);
    s->timer.data = s;
    s->next = sleepers;
    if (sleepers)
        sleepers->prev = s;
    sleepers = s;
    uv_timer_start(&s->timer, on_sleep_done, ms, 0);
    return 0;
}

static void start_sleep(jrpc_wcall_t *call, const msgpack_object *params, jrpc_worker_t *w,
                        bool null)
{
    const msgpack_object *ms = jrpc_mpack_map_get(params, "ms");
    if (ms == NULL || ms->type != MSGPACK_OBJECT_POSITIVE_INTEGER || ms->via.u64 > SLEEP_MAX_MS)
        { invalid_params(call); return; }
    if (finish_later(call, w, ms->via.u64, null) < 0)
        jrpc_wcall_error(call, JRPC_INTERNAL_ERROR, jrpc_error_message(JRPC_INTERNAL_ERROR));
}

/* Finishes a quick method's call: at once, or --slow-ms later for
 * --slow-percent of them (the result is packed already). */
static void answer(jrpc_wcall_t *call, void *arg)
{
    static uint64_t x;   /* xorshift64: a fair share, no libc state */
    if (slow_percent == 0) {
        jrpc_wcall_finish(call);
        return;
    }
    if (x == 0)
        x = (uint64_t)uv_hrtime() | 1;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    if (x % 100 >= slow_percent || finish_later(call, arg, slow_ms, true) < 0)
        jrpc_wcall_finish(call);
}

static void m_sleep(jrpc_wcall_t *call, const msgpack_object *params, void *arg)
{
    start_sleep(call, params, arg, false);
}

static void m_slow_update(jrpc_wcall_t *call, const msgpack_object *params, void *arg)
{
    start_sleep(call, params, arg, true);
}

/* Completes (the worker drops the answers once stopped) and closes every
 * sleep still pending when the worker has stopped (a drain that timed out). */
static void cancel_sleepers(void)
{
    while (sleepers) {
        sleeper_t *s = sleepers;
        sleeper_unlink(s);
        uv_timer_stop(&s->timer);
        jrpc_wcall_error(s->call, JRPC_WORKER_FAILED, jrpc_error_message(JRPC_WORKER_FAILED));
        uv_close((uv_handle_t *)&s->timer, on_sleeper_closed);
    }
}

/* spin: CPU work off the loop thread (uv_queue_work), so that a long spin
 * does not hold up heartbeats or other calls. spin_abort ends the spins
 * still running when the worker has stopped (a drain that timed out). */
typedef struct spinner {
    uv_work_t     work;
    jrpc_wcall_t *call;
    uint64_t      ms;
    bool          done;   /* ran to the end (not aborted) */
} spinner_t;

static atomic_bool spin_abort;
static unsigned    spins_pending;

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void on_spin_work(uv_work_t *wk)
{
    spinner_t *s = wk->data;
    uint64_t end = thread_cpu_ns() + s->ms * 1000000u;
    volatile uint64_t x = 0;
    while (!atomic_load_explicit(&spin_abort, memory_order_relaxed)) {
        for (int i = 0; i < 100000; i++)
            x = x * 6364136223846793005u + 1442695040888963407u;
        if (thread_cpu_ns() >= end) {
            s->done = true;
            break;
        }
    }
}

static void on_spin_done(uv_work_t *wk, int status)
{
    spinner_t *s = wk->data;
    spins_pending--;
    if (s->done) {
        msgpack_packer *pk = jrpc_wcall_result(s->call);
        msgpack_pack_map(pk, 2);
        msgpack_pack_str(pk, 2);
        msgpack_pack_str_body(pk, "ms", 2);
        msgpack_pack_uint64(pk, s->ms);
        msgpack_pack_str(pk, 3);
        msgpack_pack_str_body(pk, "pid", 3);
        msgpack_pack_int64(pk, (int64_t)getpid());
        jrpc_wcall_finish(s->call);
    } else {
        jrpc_wcall_error(s->call, JRPC_WORKER_FAILED, jrpc_error_message(JRPC_WORKER_FAILED));
    }
    free(s);
}

static void m_spin(jrpc_wcall_t *call, const msgpack_object *params, void *arg)
{
    jrpc_worker_t *w = arg;
    const msgpack_object *ms = jrpc_mpack_map_get(params, "ms");
    if (ms == NULL || ms->type != MSGPACK_OBJECT_POSITIVE_INTEGER || ms->via.u64 > SPIN_MAX_MS)
        { invalid_params(call); return; }
    spinner_t *s = calloc(1, sizeof *s);
    if (s == NULL) {
        jrpc_wcall_error(call, JRPC_INTERNAL_ERROR, jrpc_error_message(JRPC_INTERNAL_ERROR));
        return;
    }
    s->call = call;
    s->ms = ms->via.u64;
    s->work.data = s;
    if (uv_queue_work(jrpc_worker_loop(w), &s->work, on_spin_work, on_spin_done) < 0) {
        jrpc_wcall_error(call, JRPC_INTERNAL_ERROR, jrpc_error_message(JRPC_INTERNAL_ERROR));
        free(s);
        return;
    }
    spins_pending++;
}

/* Ends the spins still running once the worker has stopped and waits for
 * their (dropped) answers, so that no work refers to the worker after. */
static void abort_spins(jrpc_worker_t *w)
{
    atomic_store(&spin_abort, true);
    while (spins_pending > 0)
        uv_run(jrpc_worker_loop(w), UV_RUN_ONCE);
}

int main(int argc, char **argv)
{
    jrpc_log_init("jrpc-worker");
    jrpc_worker_opts_t opts;
    jrpc_worker_opts_init(&opts);
    jrpc_conf_list_t endpoints = { 0 };
    const char *config = NULL, *curve_secret = NULL, *broker_key = NULL;
    jrpc_conf_std_t std = { 0 };
    jrpc_curve_keypair_t curve_kp = { { 0 }, { 0 } };
    char broker_public[JRPC_CURVE_Z85_LEN + 1];
    int status = 1;
    uint32_t drain_timeout_ms = 30000;
    jrpc_worker_t *w = NULL;
    const char *schemas_file = NULL;
    char *schemas = NULL;
    enum { U = JRPC_CONF_UINT, S = JRPC_CONF_STR, B = JRPC_CONF_ONOFF, L = JRPC_CONF_LIST };
    const jrpc_conf_opt_t table[] = {
        { "config", S, "FILE", NULL, "read options from this INI file (also JRPC_CONFIG)",
          .dest = &config, .flags = JRPC_CONF_NO_FILE },
        JRPC_CONNECT_OPTS(&endpoints, &opts.resolve_ms, &opts.zmq_engine),
        { "name", S, "NAME", NULL, "this worker's name in the broker's logs and metrics\n"
          "(1..63 printable bytes, no spaces); unset: its routing id", .dest = &opts.name,
          .check = jrpc_connect_name_check },
        JRPC_SERVICE_OPTS(&opts.service, &schemas_file),
        { "credit", U, "N", "64", "calls held at once per broker", .dest = &opts.credit,
          .min = 1, .max = 1000000 },
        { "heartbeat-ms", U, "N", "1000", "heartbeat interval in ms", .dest = &opts.heartbeat_ms,
          .min = 10, .max = 60000 },
        { "liveness", U, "N", "3", "silent intervals before a broker counts as dead and the\n"
          "worker reconnects", .dest = &opts.liveness, .min = 1, .max = 100 },
        { "drain-timeout-ms", U, "N", "30000", "on SIGTERM, how long to wait at most for the\n"
          "calls held to finish", .dest = &drain_timeout_ms, .min = 0, .max = 86400000 },
        { "slow-percent", U, "P", "0", "demo of a slow tail: hold back this share of the answers\n"
          "of the quick methods (all but sleep, slow_update, spin)\n"
          "by --slow-ms (bench/hedge.sh)", .dest = &slow_percent, .min = 0, .max = 100 },
        { "slow-ms", U, "N", "100", "how long --slow-percent answers are held back",
          .dest = &slow_ms, .min = 0, .max = SLEEP_MAX_MS },
        { "json", B, "on|off", "on", "echo takes the client's params as JSON text and\n"
          "answers them as they are (declared \"json\" at READY: no\n"
          "transcoding in broker or worker); off: msgpack, like the\n"
          "other methods (for comparison)", .dest = &json_echo },
        { "curve-secret", S, "FILE", NULL, "this worker's CURVE keypair (jrpc keygen FILE); its\n"
          "public key must be in the broker's --worker-keys", .dest = &curve_secret },
        { "broker-key", S, "FILE", NULL, "the broker's public key (the .pub of its keypair);\n"
          "both CURVE options or neither. A worker the broker does\n"
          "not admit gets no error: it just never gets a call", .dest = &broker_key },
        JRPC_CONF_STD_OPTS(&std),
    };
    static const jrpc_conf_info_t info = { "jrpc-worker", JRPC_VERSION, usage_head, usage_tail };
    jrpc_conf_t *conf = NULL;
    int done = jrpc_conf_main(&conf, &info, table, sizeof table / sizeof *table, &std, argc, argv);
    if (done >= 0) {
        status = done;
        goto out;
    }
    if ((curve_secret == NULL) != (broker_key == NULL)) {
        fprintf(stderr, "jrpc-worker: --curve-secret and --broker-key go together\n"
                "Try 'jrpc-worker --help'.\n");
        status = 2;
        goto out;
    }
    if (curve_secret) {
        char err[512];
        if (jrpc_curve_load_keypair(curve_secret, &curve_kp, err, sizeof err) < 0) {
            jrpc_conf_error(conf, "curve-secret", err);
            status = 2;
            goto out;
        }
        if (jrpc_curve_load_public(broker_key, broker_public, err, sizeof err) < 0) {
            jrpc_conf_error(conf, "broker-key", err);
            status = 2;
            goto out;
        }
        opts.curve_keypair = &curve_kp;
        opts.broker_public = broker_public;
    }
    if (jrpc_connect_load_schemas(conf, schemas_file, &schemas) < 0) {
        status = 2;
        goto out;
    }
    opts.schemas = schemas;
    if (std.check_config) {
        jrpc_conf_print(conf, stdout);
        status = 0;
        goto out;
    }

    if (*jrpc_conf_ignored_env(conf))
        JRPC_LOG(JRPC_LOG_INFO, "main", "event=env_ignored names=%s detail=\"not options of "
                 "jrpc-worker\"", jrpc_conf_ignored_env(conf));
    if ((w = jrpc_worker_new(&opts)) == NULL) {
        JRPC_LOG(JRPC_LOG_ERROR, "main", "event=start_failed err=\"%s\"", strerror(errno));
        goto out;
    }
    /* Idempotent: running one twice gives the same answer and no extra
     * effect. update and notify_* stand for calls with effects. */
    enum { IDEM = JRPC_WORKER_IDEMPOTENT };
    static const struct { const char *name; jrpc_handler_fn fn; unsigned flags; } methods[] = {
        { "subtract", m_subtract, IDEM }, { "sum", m_sum, IDEM },
        { "add", m_add, IDEM },           { "get_data", m_get_data, IDEM },
        { "echo", m_echo, IDEM },         { "sleep", m_sleep, IDEM },
        { "update", m_null, 0 },          { "slow_update", m_slow_update, 0 },
        { "notify_hello", m_null, 0 },    { "notify_sum", m_null, 0 },
        { "spin", m_spin, IDEM },         { "count", m_count, 0 },
    };
    for (size_t i = 0; i < sizeof methods / sizeof *methods; i++) {
        int hrc = json_echo && methods[i].fn == m_echo
                      ? jrpc_worker_handle_json(w, methods[i].name, m_echo_json, w, methods[i].flags)
                      : jrpc_worker_handle_ex(w, methods[i].name, methods[i].fn, w, methods[i].flags);
        if (hrc < 0)
            goto out;
    }
    for (size_t i = 0; i < endpoints.n; i++) {
        int rc = jrpc_worker_connect(w, endpoints.v[i]);
        if (rc < 0) {
            JRPC_LOG(JRPC_LOG_ERROR, "main", "event=connect_failed endpoint=%s err=\"%s\"",
                     endpoints.v[i], zmq_strerror(-rc));
            bool bad_endpoint = rc == -EINVAL || rc == -EPROTONOSUPPORT || rc == -ENOCOMPATPROTO;
            if (bad_endpoint)
                fprintf(stderr, "jrpc-worker: %s: bad endpoint '%s'\n",
                        jrpc_conf_source(conf, "connect"), endpoints.v[i]);
            status = bad_endpoint ? 2 : 1;
            goto out;
        }
    }
    jrpc_stop_t stop;   /* first INT/TERM: drain (the run returns when the calls held are answered); second: at once */
    jrpc_stop_start(&stop, jrpc_worker_loop(w), w, drain_timeout_ms);
    jrpc_sdnotify_log("READY=1\nSTATUS=serving");
    int rc = jrpc_worker_run(w);
    /* Sleeps a drain gave up on; then run the close callbacks of the signal
     * watchers and sleepers. */
    cancel_sleepers();
    abort_spins(w);
    jrpc_stop_close(&stop);
    uv_run(jrpc_worker_loop(w), UV_RUN_NOWAIT);
    status = rc < 0 ? 1 : 0;
    JRPC_LOG(JRPC_LOG_INFO, "main", "event=stopped status=%d calls=%llu", status,
             (unsigned long long)jrpc_worker_answered(w));
out:
    jrpc_curve_keypair_wipe(&curve_kp);
    jrpc_worker_destroy(&w);
    jrpc_conf_destroy(&conf);
    free(schemas);
    return status;
}
