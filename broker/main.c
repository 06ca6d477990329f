/* jrpc-broker — flags, signals, and the loop. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "jrpc_broker.h"
#include "jrpc_front_http.h"
#include "jrpc_front_zmq.h"
#include "jrpc_curve.h"
#include "jrpc_log.h"

static const char usage[] =
    "Usage: jrpc-broker [OPTIONS]\n"
    "\n"
    "A JSON-RPC 2.0 broker: takes requests and batches from clients over ZeroMQ\n"
    "and HTTP (POST / or POST /rpc), fans the calls out to worker processes, and\n"
    "answers when all are back.\n"
    "\n"
    "Options (defaults in brackets):\n"
    "  --zmq ENDPOINT        ROUTER socket for clients [tcp://127.0.0.1:5555]\n"
    "  --http HOST:PORT      HTTP listener, [V6]:PORT too, or none [127.0.0.1:8080]\n"
    "  --workers ENDPOINT    ROUTER socket workers connect to [tcp://127.0.0.1:5556]\n"
    "  --timeout-ms N        deadline of every call; a client may ask for less [30000]\n"
    "  --max-body N          largest request body in bytes, both fronts [1048576]\n"
    "  --max-header-bytes N  HTTP request line and headers in bytes [16384]\n"
    "  --max-conns N         open HTTP connections; more are closed at once [10000]\n"
    "  --header-timeout-ms N HTTP: first byte of a request to end of headers [10000]\n"
    "  --body-timeout-ms N   HTTP: end of headers to end of body [30000]\n"
    "  --idle-timeout-ms N   HTTP: idle keep-alive connection, stalled write [60000]\n"
    "  --reuseport           HTTP: SO_REUSEPORT, so that several brokers share the port\n"
    "                        (each needs its own --zmq and --workers) [off]\n"
    "  --max-batch N         most calls in one batch [1000]\n"
    "  --max-depth N         deepest JSON nesting in a body [64]\n"
    "  --max-method-len N    longest method name in bytes [256]\n"
    "  --max-queue N         calls waiting for worker credit before -32000 [100000]\n"
    "  --max-open N          bodies waiting for answers before -32000 [10000]\n"
    "  --keys FILE           signing keys: '<key id> <secret> [method-glob ...]' per line;\n"
    "                        every body must then be signed (docs/SIGNING.md) [none: open]\n"
    "  --skew N              accepted clock difference of a signed body, seconds [300]\n"
    "  --redis URL           nonce store with --keys: redis://[user:password@]host:port[/db]\n"
    "                        or unix:///path/to/redis.sock [redis://127.0.0.1:6379]\n"
    "  --redis-timeout-ms N  a Redis answer later than this fails closed (503) [500]\n"
    "  --heartbeat-ms N      heartbeat interval to and from workers [1000]\n"
    "  --liveness N          missed heartbeats before a worker is dead [3]\n"
    "  --max-redispatch N    times a call of an idempotent method is sent to another\n"
    "                        worker after losing its own; 0: never [3]\n"
    "  --curve-secret FILE   the broker's CURVE keypair (jrpc keygen FILE): turns on\n"
    "                        CURVE encryption on the client and worker sockets;\n"
    "                        needs both lists below (no encryption without an\n"
    "                        allowlist)\n"
    "  --client-keys FILE    public keys of the clients allowed in, one a line\n"
    "  --worker-keys FILE    public keys of the workers allowed in, one a line\n"
    "  --log-level LEVEL     debug, info, warn or error [info]\n"
    "  --help                print this and exit\n"
    "  --version             print the version and exit\n"
    "\n"
    "SIGINT or SIGTERM: stop taking requests, answer those in flight, exit 0.\n"
    "Exit status: 0 after a clean stop, 1 when a socket cannot be bound, 2 for bad flags\n"
    "or key files.\n";

static void die_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "jrpc-broker: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'jrpc-broker --help'.\n");
    exit(2);
}

static uint32_t parse_uint(const char *flag, const char *s, uint32_t min, uint32_t max)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end != '\0' || s[0] == '-' || v < min || v > max) {
        fprintf(stderr, "jrpc-broker: %s: '%s' is not a whole number from %u to %u\n", flag, s,
                min, max);
        exit(2);
    }
    return (uint32_t)v;
}

typedef struct app {
    uv_loop_t          loop;
    uv_signal_t        sigint, sigterm;
    jrpc_broker_t     *broker;
    jrpc_front_zmq_t  *front;
    jrpc_front_http_t *http;   /* NULL with --http none */
    jrpc_curve_zap_t  *zap;    /* NULL without --curve-secret */
    int                stopping;
} app_t;

static void on_drained(void *arg)
{
    app_t *a = arg;
    JRPC_LOG(JRPC_LOG_INFO, "main", "event=drained");
    jrpc_front_zmq_destroy(&a->front);
    /* Connections still writing their last answers close by themselves;
     * uv_run() returns once they have. */
    jrpc_front_http_destroy(&a->http);
    jrpc_broker_destroy(&a->broker);
    jrpc_curve_zap_destroy(&a->zap);   /* after the CURVE sockets */
    uv_close((uv_handle_t *)&a->sigint, NULL);
    uv_close((uv_handle_t *)&a->sigterm, NULL);
}

static void on_signal(uv_signal_t *s, int signum)
{
    app_t *a = s->data;
    if (a->stopping++) {
        JRPC_LOG(JRPC_LOG_WARN, "main", "event=second_signal action=exit");
        exit(1);
    }
    JRPC_LOG(JRPC_LOG_INFO, "main", "event=stopping signal=%d", signum);
    jrpc_front_zmq_pause(a->front);
    if (a->http)
        jrpc_front_http_pause(a->http);
    jrpc_broker_drain(a->broker, on_drained, a);
}

enum { OPT_CURVE_SECRET = 0x100, OPT_CLIENT_KEYS, OPT_WORKER_KEYS, OPT_MAX_REDISPATCH };

/* files: --curve-secret, --client-keys, --worker-keys. All three or none
 * (CURVE without an allowlist would let in anyone who knows the broker's
 * public key). Loads them, exiting 2 with the file named on a bad one.
 * Returns whether CURVE is on. */
static bool load_curve(const char *const files[3], jrpc_curve_keypair_t *kp,
                       jrpc_curve_allowlist_t *lists[2])
{
    char err[512];
    memset(kp, 0, sizeof *kp);
    if (!files[0] && !files[1] && !files[2])
        return false;
    if (!files[0])
        die_usage("%s without --curve-secret: an allowlist needs CURVE on",
                  files[1] ? "--client-keys" : "--worker-keys");
    if (!files[1] || !files[2])
        die_usage("--curve-secret needs %s: CURVE without an allowlist would admit anyone "
                  "who knows the broker's public key", !files[1] && !files[2]
                  ? "--client-keys and --worker-keys" : !files[1] ? "--client-keys" : "--worker-keys");
    if (jrpc_curve_load_keypair(files[0], kp, err, sizeof err) < 0 ||
        jrpc_curve_allowlist_load(files[1], &lists[0], err, sizeof err) < 0 ||
        jrpc_curve_allowlist_load(files[2], &lists[1], err, sizeof err) < 0) {
        jrpc_curve_keypair_wipe(kp);
        fprintf(stderr, "jrpc-broker: %s\n", err);
        exit(2);
    }
    JRPC_LOG(JRPC_LOG_INFO, "main", "event=curve_on public_key=%s", kp->public_z85);
    return true;
}

int main(int argc, char **argv)
{
    const char *zmq_ep = "tcp://127.0.0.1:5555";
    const char *keys_path = NULL;
    jrpc_front_http_opts_t ho = JRPC_FRONT_HTTP_OPTS_DEFAULT;
    jrpc_broker_opts_t o = {
        .limits = JRPC_LIMITS_DEFAULT,
        .timeout_ms = 30000,
        .max_open = 10000,
        .skew_s = 300,
        .replay = { .url = "redis://127.0.0.1:6379", .timeout_ms = 500 },
        .workers = { .endpoint = "tcp://127.0.0.1:5556", .max_queue = 100000,
                     .heartbeat_ms = 1000, .liveness = 3, .max_redispatch = 3 },
    };
    uint32_t max_body = 1 << 20;
    const char *curve_files[3] = { NULL, NULL, NULL };   /* secret, client keys, worker keys */
    jrpc_curve_keypair_t curve_kp;
    jrpc_curve_allowlist_t *curve_lists[2] = { NULL, NULL };
    static const struct option longopts[] = {
        { "zmq", required_argument, 0, 'z' },
        { "http", required_argument, 0, 'P' },
        { "workers", required_argument, 0, 'w' },
        { "timeout-ms", required_argument, 0, 't' },
        { "max-body", required_argument, 0, 'B' },
        { "max-header-bytes", required_argument, 0, 'X' },
        { "max-conns", required_argument, 0, 'C' },
        { "header-timeout-ms", required_argument, 0, 'T' },
        { "body-timeout-ms", required_argument, 0, 'Y' },
        { "idle-timeout-ms", required_argument, 0, 'I' },
        { "reuseport", no_argument, 0, 'U' },   /* issue 6: see case 'U' */
        { "max-batch", required_argument, 0, 'b' },
        { "max-depth", required_argument, 0, 'd' },
        { "max-method-len", required_argument, 0, 'm' },
        { "max-queue", required_argument, 0, 'q' },
        { "max-open", required_argument, 0, 'O' },
        { "keys", required_argument, 0, 'k' },
        { "skew", required_argument, 0, 'S' },
        { "redis", required_argument, 0, 'R' },
        { "redis-timeout-ms", required_argument, 0, 'r' },
        { "heartbeat-ms", required_argument, 0, 'H' },
        { "liveness", required_argument, 0, 'L' },
        { "max-redispatch", required_argument, 0, OPT_MAX_REDISPATCH },
        { "log-level", required_argument, 0, 'l' },
        { "curve-secret", required_argument, 0, OPT_CURVE_SECRET },
        { "client-keys", required_argument, 0, OPT_CLIENT_KEYS },
        { "worker-keys", required_argument, 0, OPT_WORKER_KEYS },
        { "help", no_argument, 0, 'h' },
        { "version", no_argument, 0, 'V' },
        { 0, 0, 0, 0 },
    };
    jrpc_log_init("jrpc-broker");
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'z': zmq_ep = optarg; break;
        case 'P': ho.listen = optarg; break;
        case 'X': ho.max_header_bytes = parse_uint("--max-header-bytes", optarg, 256, 1u << 24); break;
        case 'C': ho.max_conns = parse_uint("--max-conns", optarg, 1, 10000000); break;
        case 'T': ho.header_timeout_ms = parse_uint("--header-timeout-ms", optarg, 1, 86400000); break;
        case 'Y': ho.body_timeout_ms = parse_uint("--body-timeout-ms", optarg, 1, 86400000); break;
        case 'I': ho.idle_timeout_ms = parse_uint("--idle-timeout-ms", optarg, 1, 86400000); break;
        /* --reuseport (issue 6): a plain switch into jrpc_front_http_opts_t.reuseport;
         * its only other traces are the usage line and the longopts entry. */
        case 'U': ho.reuseport = true; break;
        case 'w': o.workers.endpoint = optarg; break;
        case 't': o.timeout_ms = parse_uint("--timeout-ms", optarg, 1, 86400000); break;
        case 'B': max_body = parse_uint("--max-body", optarg, 2, 1u << 30); break;
        case 'b': o.limits.max_batch = parse_uint("--max-batch", optarg, 1, 1000000); break;
        case 'd': o.limits.max_depth = parse_uint("--max-depth", optarg, 2, 1024); break;
        case 'm': o.limits.max_method_len = parse_uint("--max-method-len", optarg, 1, 65535); break;
        case 'O': o.max_open = parse_uint("--max-open", optarg, 1, 100000000); break;
        case 'q': o.workers.max_queue = parse_uint("--max-queue", optarg, 0, 100000000); break;
        case 'k': keys_path = optarg; break;
        case 'S': o.skew_s = parse_uint("--skew", optarg, 1, 86400); break;
        case 'R': o.replay.url = optarg; break;
        case 'r': o.replay.timeout_ms = parse_uint("--redis-timeout-ms", optarg, 10, 600000); break;
        case 'H': o.workers.heartbeat_ms = parse_uint("--heartbeat-ms", optarg, 10, 3600000); break;
        case 'L': o.workers.liveness = parse_uint("--liveness", optarg, 1, 1000); break;
        case OPT_MAX_REDISPATCH:
            o.workers.max_redispatch = parse_uint("--max-redispatch", optarg, 0, 255);
            break;
        case OPT_CURVE_SECRET: curve_files[0] = optarg; break;
        case OPT_CLIENT_KEYS: curve_files[1] = optarg; break;
        case OPT_WORKER_KEYS: curve_files[2] = optarg; break;
        case 'l':
            if (jrpc_log_set_level(optarg) < 0)
                die_usage("--log-level: '%s' is not one of debug, info, warn, error", optarg);
            break;
        case 'h': fputs(usage, stdout); return 0;
        case 'V': printf("jrpc-broker %s\n", JRPC_VERSION); return 0;
        default:
            die_usage("unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        die_usage("unexpected argument '%s'", argv[optind]);
    bool curve = load_curve(curve_files, &curve_kp, curve_lists);

    ho.max_body = max_body;
    jrpc_keys_t *keys = NULL;
    if (keys_path) {
        char err[512];
        if ((keys = jrpc_keys_load(keys_path, err, sizeof err)) == NULL) {
            fprintf(stderr, "jrpc-broker: --keys: %s\n", err);
            return 2;
        }
        o.keys = keys;
    }
    o.replay.window_s = o.skew_s;
    signal(SIGPIPE, SIG_IGN);
    app_t a = { 0 };
    uv_loop_init(&a.loop);
    void *zctx = zmq_ctx_new();
    o.workers.zmq_ctx = zctx;
    if (curve) {   /* the ZAP handler is bound before any CURVE socket */
        if ((a.zap = jrpc_curve_zap_new(&a.loop, zctx)) == NULL ||
            jrpc_curve_zap_allow(a.zap, "clients", &curve_lists[0]) < 0 ||
            jrpc_curve_zap_allow(a.zap, "workers", &curve_lists[1]) < 0)
            return 1;
        o.workers.curve = &curve_kp;
    }
    a.broker = jrpc_broker_new(&a.loop, &o);
    if (a.broker == NULL)
        return 1;
    a.front = jrpc_front_zmq_new(&a.loop, zctx, zmq_ep, a.broker, max_body,
                                 curve ? &curve_kp : NULL);
    jrpc_curve_keypair_wipe(&curve_kp);   /* the sockets have their copies */
    if (a.front == NULL)
        return 1;
    if (strcmp(ho.listen, "none") != 0 &&
        (a.http = jrpc_front_http_new(&a.loop, a.broker, &ho)) == NULL)
        return 1;
    uv_signal_init(&a.loop, &a.sigint);
    uv_signal_init(&a.loop, &a.sigterm);
    a.sigint.data = a.sigterm.data = &a;
    uv_signal_start(&a.sigint, on_signal, SIGINT);
    uv_signal_start(&a.sigterm, on_signal, SIGTERM);
    JRPC_LOG(JRPC_LOG_INFO, "main", "event=started version=%s timeout_ms=%u max_batch=%u",
             JRPC_VERSION, o.timeout_ms, o.limits.max_batch);
    if (keys)
        JRPC_LOG(JRPC_LOG_INFO, "main", "event=signing_required keys=%zu skew_s=%u",
                 jrpc_keys_count(keys), o.skew_s);
    else
        JRPC_LOG(JRPC_LOG_WARN, "main",
                 "event=open_mode detail=\"no --keys: requests are not authenticated\"");
    uv_run(&a.loop, UV_RUN_DEFAULT);
    uv_loop_close(&a.loop);
    zmq_ctx_term(zctx);
    jrpc_keys_destroy(&keys);
    JRPC_LOG(JRPC_LOG_INFO, "main", "event=exit status=0");
    return 0;
}
