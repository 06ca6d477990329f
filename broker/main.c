/* jrpc-broker — flags, signals, and the loop. */
#include <assert.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "jrpc_admin.h"
#include "jrpc_status_page.h"
#include "jrpc_broker.h"
#include "jrpc_front_http.h"
#include "jrpc_front_zmq.h"
#include "jrpc_conf.h"
#include "jrpc_curve.h"
#include "jrpc_log.h"
#include "jrpc_sdnotify.h"
#include "jrpc_logbuf.h"
#include "jrpc_metrics.h"
#include "jrpc_proxy.h"
#include "jrpc_reload.h"

static const char usage_head[] =
    "Usage: jrpc-broker [OPTIONS]\n"
    "\n"
    "A JSON-RPC 2.0 broker: takes requests and batches from clients over ZeroMQ,\n"
    "HTTP (POST / or POST /rpc) and WebSocket (GET / or /rpc with Upgrade), fans\n"
    "the calls out to worker processes, and answers when all are back (or each\n"
    "answer as it is in, when the client streams).\n";

static const char usage_tail[] =
    "Precedence: flags > JRPC_* environment > config file > defaults.\n"
    "SIGINT or SIGTERM: /readyz turns 503, then (after --drain-delay-ms) stop\n"
    "taking requests, answer those in flight, send DISCONNECT to every worker,\n"
    "exit 0; a second one exits 1 at once. SIGHUP re-reads the files named at start (--keys,\n"
    "--client-keys, --worker-keys), all or nothing: a bad one is logged and the old\n"
    "ones stay in force; open connections and calls in flight are kept.\n"
    "Under systemd (Type=notify) it sends READY=1 once every socket is bound and\n"
    "STOPPING=1 when a stop begins.\n"
    "Exit status: 0 after a clean stop (or --help, --version, a good --check-config),\n"
    "1 when a socket cannot be bound, 2 for bad flags, config or key files.\n";

static void die_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "jrpc-broker: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'jrpc-broker --help'.\n");
    exit(2);
}

typedef struct app app_t;

/* A CURVE allowlist's reload: which ZAP domain it replaces. */
typedef struct zap_list {
    app_t      *app;
    const char *domain;   /* "clients" (--client-keys), "workers" (--worker-keys) */
} zap_list_t;

struct app {
    uv_loop_t          loop;
    uv_signal_t        sigint, sigterm, sighup;
    jrpc_broker_t     *broker;
    jrpc_front_zmq_t  *front;
    jrpc_front_http_t *http;   /* NULL with --http none */
    jrpc_curve_zap_t  *zap;    /* NULL without --curve-secret */
    jrpc_admin_t      *admin;  /* NULL with --admin none */
    struct probe      *probe;  /* what the admin's pages read (with admin) */
    jrpc_keys_t       *keys;   /* the key set in force (NULL: open); SIGHUP replaces it */
    jrpc_tls_ctx_t    *tls;    /* the HTTP listener's TLS context (NULL: plaintext); SIGHUP too */
    jrpc_tls_opts_t    tls_o;  /* its files */
    zap_list_t         zap_lists[2];                /* clients, workers */
    jrpc_reloadable_t  reload[JRPC_RELOAD_MAX];     /* what SIGHUP re-reads */
    size_t             nreload;
    int                stopping;
    uint32_t           drain_delay_ms; /* --drain-delay-ms */
    uv_timer_t         drain_delay;    /* SIGTERM: /readyz 503 first, the drain after it */
    bool               leaving;        /* a signal came: /readyz says draining */
};

static void on_drained(void *arg)
{
    app_t *a = arg;
    JRPC_LOG(JRPC_LOG_INFO, "main", "event=drained");
    jrpc_admin_destroy(&a->admin);   /* admin (issue 7): /readyz said "draining" until now */
    jrpc_front_zmq_destroy(&a->front);
    /* Connections still writing their last answers close by themselves;
     * uv_run() returns once they have. */
    jrpc_front_http_destroy(&a->http);
    jrpc_broker_destroy(&a->broker);
    jrpc_curve_zap_destroy(&a->zap);   /* after the CURVE sockets */
    jrpc_logbuf_stop();
    uv_close((uv_handle_t *)&a->sigint, NULL);
    uv_close((uv_handle_t *)&a->sigterm, NULL);
    uv_close((uv_handle_t *)&a->sighup, NULL);
    uv_close((uv_handle_t *)&a->drain_delay, NULL);
}

static void drain_start(app_t *a)
{
    jrpc_front_zmq_pause(a->front);
    if (a->http)
        jrpc_front_http_pause(a->http);
    jrpc_broker_drain(a->broker, on_drained, a);
}

static void on_drain_delay(uv_timer_t *t)
{
    JRPC_LOG(JRPC_LOG_INFO, "main", "event=drain_delay_over");
    drain_start(t->data);
}

/* The first SIGINT/SIGTERM: /readyz turns 503 at once; with
 * --drain-delay-ms the fronts go on serving that long (a load balancer
 * polling /readyz stops sending new clients meanwhile), then stop taking
 * requests and the drain answers every body in flight. */
static void on_signal(uv_signal_t *s, int signum)
{
    app_t *a = s->data;
    if (a->stopping++) {
        JRPC_LOG(JRPC_LOG_WARN, "main", "event=second_signal action=exit");
        exit(1);
    }
    JRPC_LOG(JRPC_LOG_INFO, "main", "event=stopping signal=%d drain_delay_ms=%u", signum,
             a->drain_delay_ms);
    jrpc_sdnotify_log("STOPPING=1\nSTATUS=draining");
    a->leaving = true;
    if (a->drain_delay_ms > 0)
        uv_timer_start(&a->drain_delay, on_drain_delay, a->drain_delay_ms, 0);
    else
        drain_start(a);
}

/* ---- SIGHUP: the reloadables ----
 *
 * Each re-reads one file named at start: prepare (read and check it, into a
 * new object; nothing in force changes), commit (swap it in; cannot fail),
 * discard (another file was bad). jrpc_reload_run does the all-or-nothing.
 * A reload switches no mode on or off: an item exists only when its flag was
 * given at start.
 *
 * Lifetimes: commit frees the old object at once. That is sound because
 * nothing keeps a pointer into it across a loop turn: bodies, connections
 * and WebSocket sessions keep their key's id and the broker looks it up
 * when it needs it (jrpc_broker_set_keys); the ZAP handler reads its lists
 * only while it decides a handshake (jrpc_curve_zap_replace). A new item
 * must keep that rule, or hold its old object until its users are gone.
 *
 * To add one (the TLS certificate, --tls-cert/--tls-key/--tls-client-ca):
 * write its three functions below and append it in reloadables_init(). */

static int keys_prepare(void *arg, const char *path, void **staged, char *err, size_t errlen)
{
    (void)arg;
    jrpc_keys_t *k = NULL;
    int rc = jrpc_keys_load(path, NULL, &k, err, errlen);
    *staged = k;
    return rc;
}

static size_t keys_commit(void *arg, void *staged)
{
    app_t *a = arg;
    jrpc_keys_t *old = a->keys;
    a->keys = staged;
    jrpc_broker_set_keys(a->broker, a->keys);
    jrpc_front_http_keys_changed(a->http);   /* WebSockets of a rotated or removed key: 1008 */
    jrpc_keys_destroy(&old);   /* no pointer into it outlives this turn (above) */
    return jrpc_keys_count(a->keys);
}

static void keys_discard(void *arg, void *staged)
{
    (void)arg;
    jrpc_keys_t *k = staged;
    jrpc_keys_destroy(&k);
}

static int zap_prepare(void *arg, const char *path, void **staged, char *err, size_t errlen)
{
    (void)arg;
    jrpc_curve_allowlist_t *l = NULL;
    int rc = jrpc_curve_allowlist_load(path, &l, err, errlen);
    *staged = l;
    return rc;
}

static size_t zap_commit(void *arg, void *staged)
{
    zap_list_t *zl = arg;
    jrpc_curve_allowlist_t *l = staged;
    size_t n = jrpc_curve_allowlist_size(l);
    int rc = jrpc_curve_zap_replace(zl->app->zap, zl->domain, &l);
    assert(rc == 0);   /* both domains were allowed at start */
    (void)rc;
    return n;
}

static void zap_discard(void *arg, void *staged)
{
    (void)arg;
    jrpc_curve_allowlist_t *l = staged;
    jrpc_curve_allowlist_destroy(&l);
}

/* The TLS certificate, key and client CA, read again into a new context;
 * the front takes it for new connections, open ones finish on the old one
 * (each holds a reference: freeing ours here is safe). */
static int tls_prepare(void *arg, const char *path, void **staged, char *err, size_t errlen)
{
    app_t *a = arg;
    jrpc_tls_ctx_t *c = NULL;
    (void)path;
    int rc = jrpc_tls_ctx_new(&a->tls_o, &c, err, errlen);
    *staged = c;
    return rc;
}

static size_t tls_commit(void *arg, void *staged)
{
    app_t *a = arg;
    jrpc_tls_ctx_t *old = a->tls;
    a->tls = staged;
    if (a->http)
        jrpc_front_http_set_tls(a->http, a->tls);
    jrpc_tls_ctx_free(&old);
    char what[256];
    jrpc_tls_ctx_describe(a->tls, what, sizeof what);
    JRPC_LOG(JRPC_LOG_INFO, "main", "event=tls subject=\"%s\" client_ca=%s reloaded=1", what,
             a->tls_o.client_ca ? "on" : "off");
    return 1;
}

static void tls_discard(void *arg, void *staged)
{
    (void)arg;
    jrpc_tls_ctx_t *c = staged;
    jrpc_tls_ctx_free(&c);
}

/* The list SIGHUP runs, from the files named at start (NULL: not given). */
static void reloadables_init(app_t *a, const char *keys_path, const char *const curve_files[3])
{
    if (keys_path)
        a->reload[a->nreload++] = (jrpc_reloadable_t){ "keys", keys_path, a, keys_prepare,
                                                       keys_commit, keys_discard };
    if (a->zap) {
        a->zap_lists[0] = (zap_list_t){ a, "clients" };
        a->zap_lists[1] = (zap_list_t){ a, "workers" };
        a->reload[a->nreload++] = (jrpc_reloadable_t){ "client-keys", curve_files[1],
            &a->zap_lists[0], zap_prepare, zap_commit, zap_discard };
        a->reload[a->nreload++] = (jrpc_reloadable_t){ "worker-keys", curve_files[2],
            &a->zap_lists[1], zap_prepare, zap_commit, zap_discard };
    }
    if (a->tls)
        a->reload[a->nreload++] = (jrpc_reloadable_t){ "tls-cert", a->tls_o.cert, a, tls_prepare,
                                                       tls_commit, tls_discard };
}

/* SIGHUP: re-read every file of the list, all or nothing (jrpc_reload).
 * Connections and calls in flight are kept. */
static void on_sighup(uv_signal_t *s, int signum)
{
    app_t *a = s->data;
    (void)signum;
    JRPC_LOG(JRPC_LOG_INFO, "main", "event=signal signal=HUP action=reload items=%zu",
             a->nreload);
    jrpc_reload_run(a->reload, a->nreload);
}

/* What the admin listener's pages read: the broker's metrics, and its
 * readiness for --ready-methods (joined "m1,m2"; NULL: any worker). */
typedef struct probe {
    jrpc_broker_t *broker;
    const bool    *leaving;      /* the app's: a stop has begun */
    char          *methods;      /* owned; NULL: any worker at all */
    char           reason[320];  /* the last not-ready reason */
    jrpc_status_page_info_t info;     /* what GET /status says of the process (borrows the options) */
} probe_t;

static int probe_metrics(void *arg, jrpc_buf_t *out)
{
    probe_t *p = arg;
    jrpc_metrics_read_t rd;
    jrpc_broker_metrics(p->broker, &rd);
    return jrpc_metrics_write(out, &rd);
}

/* GET /, /status and the rest of the status page (broker/jrpc_status_page). */
static int probe_page(void *arg, const char *path, size_t plen, jrpc_buf_t *out,
                      const char **ctype, const char **headers)
{
    probe_t *p = arg;
    return jrpc_status_page_serve(p->broker, &p->info, path, plen, out, ctype, headers);
}

/* Why the broker is not ready ("no worker for method add", "redis down",
 * "draining", ...), or NULL when it is. */
static const char *probe_not_ready(void *arg)
{
    probe_t *p = arg;
    jrpc_span_t m = { NULL, 0 };
    if (*p->leaving) /* before the broker drains: --drain-delay-ms */
        return jrpc_broker_strerror(JRPC_BROKER_EDRAINING);
    int rc = jrpc_broker_ready(p->broker, p->methods, &m);
    if (rc == 0)
        return NULL;
    if (rc != JRPC_BROKER_ENOMETHOD)
        return jrpc_broker_strerror(rc);
    snprintf(p->reason, sizeof p->reason, "no worker for method %.*s",
             m.n > 256 ? 256 : (int)m.n, m.p);
    return p->reason;
}

static void probe_free(probe_t **p_p)
{
    if (*p_p) {
        free((*p_p)->methods);
        free(*p_p);
        *p_p = NULL;
    }
}

/* The admin listener, its probe with --ready-methods joined into "m1,m2". */
static jrpc_admin_t *admin_new(uv_loop_t *loop, const char *listen, jrpc_broker_t *b,
                               const bool *leaving, const jrpc_conf_list_t *methods,
                               const jrpc_status_page_info_t *info, probe_t **probe_p)
{
    size_t len = 1;
    for (size_t i = 0; i < methods->n; i++)
        len += strlen(methods->v[i]) + 1;
    probe_t *p = calloc(1, sizeof *p);
    char *joined = calloc(1, len);
    if (p == NULL || joined == NULL) {
        free(p);
        free(joined);
        return NULL;
    }
    for (size_t i = 0; i < methods->n; i++) {
        if (i)
            strcat(joined, ",");
        strcat(joined, methods->v[i]);
    }
    p->broker = b;
    p->leaving = leaving;
    p->info = *info;
    p->methods = joined[0] ? joined : NULL;
    if (p->methods == NULL)
        free(joined);
    jrpc_admin_opts_t ao = JRPC_ADMIN_OPTS_DEFAULT;
    ao.listen = listen;
    ao.metrics = probe_metrics;
    ao.not_ready = probe_not_ready;
    ao.page = probe_page;
    ao.arg = p;
    jrpc_admin_t *a = jrpc_admin_new(loop, &ao);
    if (a == NULL)
        probe_free(&p);
    *probe_p = p;
    return a;
}

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


/* --redis syntax, and the password file when given, as the broker will read
 * them (messages without the URL or a password, and without the option's
 * name: the caller says which option). */
static int redis_check(const char *url, const char *password_file, char *err, size_t errlen)
{
    char msg[512];
    if (jrpc_replay_check_url(url, password_file, msg, sizeof msg) == 0)
        return 0;
    const char *m = strncmp(msg, "--", 2) == 0 && strstr(msg, ": ") ? strstr(msg, ": ") + 2 : msg;
    snprintf(err, errlen, "%s", m);
    return -1;
}

static int redis_url_ok(const char *url, char *err, size_t errlen)
{
    return redis_check(url, NULL, err, errlen);
}

/* --mcp-path: none, or an absolute path of printable bytes without '?'
 * other than / and /rpc (those stay JSON-RPC's own). */
static int mcp_path_ok(const char *v, char *err, size_t errlen)
{
    size_t n = strlen(v);
    bool ok = strcmp(v, "none") == 0 ||
              (v[0] == '/' && n > 1 && n < 128 && strcmp(v, "/rpc") != 0);
    for (size_t i = 0; ok && v[0] == '/' && i < n; i++)
        ok = v[i] > 0x20 && v[i] < 0x7f && v[i] != '?' && v[i] != '#';
    if (!ok)
        snprintf(err, errlen, "'%s' is not none or a path like /mcp (not / or /rpc, no query)", v);
    return ok ? 0 : -1;
}

/* --cors-origin: "*", or an origin "scheme://host[:port]" (no path, no
 * spaces or control bytes: it is written into answer heads as it is). */
static int cors_origin_ok(const char *v, char *err, size_t errlen)
{
    size_t n = strlen(v);
    if (strcmp(v, "*") == 0)
        return 0;
    const char *sep = strstr(v, "://");
    bool ok = n <= JRPC_FRONT_HTTP_ORIGIN_MAX && sep != NULL && sep > v && sep[3] != '\0';
    for (const char *p = v; ok && *p; p++) {
        unsigned char ch = (unsigned char)*p;
        ok = ch > 0x20 && ch < 0x7f && (p < sep + 3 || ch != '/') && ch != ',';
    }
    if (ok)
        return 0;
    snprintf(err, errlen, "'%s' is not an origin: scheme://host[:port] (at most %d bytes, "
             "no path) or *", v, JRPC_FRONT_HTTP_ORIGIN_MAX);
    return -1;
}

/* --trusted-proxy: a CIDR range (jrpc_proxy_cidr_parse). */
static int trusted_proxy_ok(const char *v, char *err, size_t errlen)
{
    jrpc_proxy_cidr_t c;
    if (jrpc_proxy_cidr_parse(v, strlen(v), &c) == 0)
        return 0;
    snprintf(err, errlen, "'%s' is not a CIDR range: A.B.C.D/N or X:X::X/N (or one address)", v);
    return -1;
}

/* The configuration lives as long as the process: the options point into it. */
static jrpc_conf_t *conf;

int main(int argc, char **argv)
{
    const char *config = NULL, *zmq_ep = NULL, *keys_path = NULL, *zmq_engine = NULL;
    const char *workers_engine = NULL;
    bool hedge = false;
    uint32_t hedge_budget = 5;
    const char *admin_listen = NULL;      /* --admin HOST:PORT or "none" */
    jrpc_conf_list_t ready_methods = { 0 };  /* --ready-methods: for the admin /readyz */
    uint32_t drain_delay_ms = 0;             /* --drain-delay-ms */
    jrpc_conf_list_t cors = { 0 };           /* --cors-origin */
    jrpc_conf_list_t proxies = { 0 };        /* --trusted-proxy */
    jrpc_conf_std_t std = { 0 };
    jrpc_front_http_opts_t ho = JRPC_FRONT_HTTP_OPTS_DEFAULT;
    jrpc_broker_opts_t o = {
        .limits = JRPC_LIMITS_DEFAULT,
        .replay = { 0 },
        .workers = { 0 },
    };
    const char *curve_files[3] = { NULL, NULL, NULL };   /* secret, client keys, worker keys */
    jrpc_curve_keypair_t curve_kp;
    jrpc_curve_allowlist_t *curve_lists[2] = { NULL, NULL };
    jrpc_tls_opts_t tls_o = { 0 };
    enum { U = JRPC_CONF_UINT, S = JRPC_CONF_STR, B = JRPC_CONF_ONOFF, L = JRPC_CONF_LIST };
    jrpc_conf_check_fn zmq_ok = jrpc_conf_check_zmq_endpoint, hp_ok = jrpc_conf_check_hostport;
    const jrpc_conf_opt_t opts[] = {
        { "config", S, "FILE", NULL, "read options from this INI file (also JRPC_CONFIG)",
          .dest = &config, .flags = JRPC_CONF_NO_FILE },
        { "zmq", S, "ENDPOINT", "tcp://127.0.0.1:5555", "ROUTER socket for clients", .dest = &zmq_ep,
          .check = zmq_ok },
        { "zmq-engine", S, "NAME", "native", "who speaks ZMTP to clients: native (our own,\n"
          "on the loop thread; tcp:// and ipc://, no CURVE) or libzmq;\n"
          "CURVE and other transports always use libzmq",
          .dest = &zmq_engine, .check = jrpc_conf_check_zmq_engine },
        { "http", S, "HOST:PORT", "127.0.0.1:8080", "HTTP listener, [V6]:PORT too, or none",
          .dest = &ho.listen, .check = hp_ok },
        { "workers", S, "ENDPOINT", "tcp://127.0.0.1:5556", "ROUTER socket workers connect to",
          .dest = &o.workers.endpoint, .check = zmq_ok },
        { "workers-engine", S, "NAME", "native", "who speaks ZMTP to workers: native (our own,\n"
          "on the loop thread; tcp:// and ipc://, no CURVE) or libzmq;\n"
          "CURVE and other transports always use libzmq",
          .dest = &workers_engine, .check = jrpc_conf_check_zmq_engine },
        { "timeout-ms", U, "N", "30000", "deadline of every call; a client may ask for less",
          .dest = &o.timeout_ms, .min = 1, .max = 86400000 },
        { "max-body", U, "N", "1048576", "largest request body in bytes, both fronts",
          .dest = &ho.max_body, .min = 2, .max = 1u << 30 },
        { "max-header-bytes", U, "N", "16384", "HTTP request line and headers in bytes",
          .dest = &ho.max_header_bytes, .min = 256, .max = 1u << 24 },
        { "max-conns", U, "N", "10000", "open HTTP connections, WebSockets included; more\n"
          "are closed at once",
          .dest = &ho.max_conns, .min = 1, .max = 10000000 },
        { "header-timeout-ms", U, "N", "10000", "HTTP: first byte of a request to end of headers",
          .dest = &ho.header_timeout_ms, .min = 1, .max = 86400000 },
        { "body-timeout-ms", U, "N", "30000", "HTTP: end of headers to end of body",
          .dest = &ho.body_timeout_ms, .min = 1, .max = 86400000 },
        { "idle-timeout-ms", U, "N", "60000", "HTTP: idle keep-alive connection; a WebSocket\n"
          "with no message and nothing in flight (close 1001)",
          .dest = &ho.idle_timeout_ms, .min = 1, .max = 86400000 },
        { "stream-ping-ms", U, "N", "15000", "HTTP: a ': ping' comment this often on SSE streams\n"
          "in progress, so that proxies keep them; 0: never", .dest = &ho.stream_ping_ms,
          .min = 0, .max = 86400000 },
        { "write-timeout-ms", U, "N", "30000", "HTTP: an answer's write making no progress (the\n"
          "client does not read): the connection is closed", .dest = &ho.write_timeout_ms,
          .min = 1, .max = 86400000 },
        { "ws-max-inflight", U, "N", "64", "WebSocket: calls in flight per connection, batch\n"
          "items counted; when full the socket is not read (a\n"
          "larger batch starts once nothing else is in flight)",
          .dest = &ho.ws_max_inflight, .min = 1, .max = 1000000 },
        { "ws-max-queued", U, "BYTES", "1048576", "WebSocket: answer bytes a client is behind on\n"
          "reading; past it the connection closes with 1008",
          .dest = &ho.ws_max_queued, .min = 1024, .max = 1u << 30 },
        { "ws-ping-ms", U, "N", "20000", "WebSocket: a ping this often; no pong within the\n"
          "same interval closes with 1001", .dest = &ho.ws_ping_ms, .min = 10, .max = 86400000 },
        { "mcp-path", S, "PATH", "/mcp", "MCP Streamable HTTP endpoint (POST only; for\n"
          "jrpc-stdio --mcp workers, docs/MCP.md), or none",
          .dest = &ho.mcp_path, .check = mcp_path_ok },
        { "cors-origin", L, "LIST", NULL, "browser origins allowed on /rpc (comma list of\n"
          "scheme://host[:port], or *): CORS preflight and\n"
          "headers, and WebSocket upgrades with an Origin;\n"
          "none: no CORS, and an upgrade with an Origin is 403",
          .dest = &cors, .check = cors_origin_ok },
        { "tls-cert", S, "FILE", NULL, "HTTP: serve HTTPS (and wss://) with this PEM\n"
          "certificate, its chain after it (docs/TLS.md)", .dest = &tls_o.cert },
        { "tls-key", S, "FILE", NULL, "HTTP: the PEM private key of --tls-cert",
          .dest = &tls_o.key },
        { "tls-client-ca", S, "FILE", NULL, "HTTP: mutual TLS: clients must present a\n"
          "certificate from these PEM CAs; its commonName, when\n"
          "a key id of --keys, authenticates as that key",
          .dest = &tls_o.client_ca },
        { "tls-handshake-timeout-ms", U, "N", "10000", "HTTP: TLS handshake due this soon after\n"
          "the connection is accepted", .dest = &ho.tls_handshake_timeout_ms, .min = 1,
          .max = 86400000 },
        { "reuseport", B, "on|off", "off", "HTTP: SO_REUSEPORT, so that several brokers share the\n"
          "port (each needs its own --zmq and --workers)", .dest = &ho.reuseport },
        { "trusted-proxy", L, "CIDR", NULL, "HTTP: a reverse proxy (range, repeatable) whose\n"
          "Forwarded / X-Forwarded-For name the client: rate limits and\n"
          "idempotency keys without a key are then per that client\n"
          "(right-most address not itself a trusted proxy); from any\n"
          "other peer those headers are ignored", .dest = &proxies,
          .check = trusted_proxy_ok },
        { "max-batch", U, "N", "1000", "most calls in one batch", .dest = &o.limits.max_batch, .min = 1, .max = 1000000 },
        { "max-depth", U, "N", "64", "deepest JSON nesting in a body", .dest = &o.limits.max_depth, .min = 2, .max = 1024 },
        { "max-method-len", U, "N", "256", "longest method name in bytes",
          .dest = &o.limits.max_method_len, .min = 1, .max = 65535 },
        { "max-queue", U, "N", "100000", "calls waiting for worker credit before -32000",
          .dest = &o.workers.max_queue, .min = 0, .max = 100000000 },
        { "max-open", U, "N", "10000", "bodies waiting for answers before -32000", .dest = &o.max_open, .min = 1, .max = 100000000 },
        { "max-queued-bytes", U, "BYTES", "67108864", "bytes held for bodies answered before their\n"
          "calls ended (notifications), all clients; past it a\n"
          "body with a notification is refused 503 / -32000; 0: none",
          .dest = &o.max_queued_bytes, .min = 0, .max = 1u << 31 },
        { "peer-max-queued-bytes", U, "BYTES", "16777216", "the same, of one client address; past it\n"
          "that address's bodies with a notification are refused\n"
          "503 / -32000; 0: none",
          .dest = &o.peer_max_queued_bytes, .min = 0, .max = 1u << 31 },
        { "conn-max-queued-bytes", U, "BYTES", "8388608", "the same, of one HTTP connection or\n"
          "WebSocket; past it the broker stops reading it until\n"
          "half is let go (TCP pushes back); 0: none",
          .dest = &o.conn_max_queued_bytes, .min = 0, .max = 1u << 31 },
        { "keys", S, "FILE", NULL, "signing keys: '<key id> <secret> [method-glob ...]' per line\n"
          "(or bearer keys: '<key id> bearer-sha256:<hex> [method-glob ...]');\n"
          "every body must then be signed or carry a bearer token\n"
          "(docs/SIGNING.md); unset: open", .dest = &keys_path },
        { "skew", U, "N", "300", "accepted clock difference of a signed body, seconds", .dest = &o.skew_s, .min = 1, .max = 86400 },
        { "redis", S, "URL", "redis://127.0.0.1:6379",
          "nonce store with --keys: redis://[user:password@]host:port[/db],\n"
          "unix:///path/to/redis.sock, or a master found through\n"
          "Sentinel: sentinel://[[user]:password@]host:port[,host:port\n"
          "...]/MASTER_NAME[/db] (that password is the sentinels')",
          .dest = &o.replay.url, .check = redis_url_ok, .flags = JRPC_CONF_SECRET },
        { "redis-password-file", S, "FILE", NULL, "the Redis master's password: the first line of\n"
          "FILE (with sentinel://, or instead of one in the URL)",
          .dest = &o.replay.password_file },
        { "redis-timeout-ms", U, "N", "500", "a Redis answer later than this fails closed (503)",
          .dest = &o.replay.timeout_ms, .min = 10, .max = 600000 },
        { "redis-wait-replicas", U, "N", "0", "a nonce counts as claimed only once WAIT says N\n"
          "replicas have it (within half --redis-timeout-ms);\n"
          "fewer: 503. 0: no WAIT", .dest = &o.replay.wait_replicas, .min = 0, .max = 1000 },
        { "early-dispatch", B, "on|off", "on", "a signed body whose every method its workers declared\n"
          "idempotent runs while its nonce is claimed in Redis; its\n"
          "reply waits for the claim (a replay is refused as before,\n"
          "its answers dropped; a key refused at a claim goes\n"
          "without it for --skew). off: the claim first, always",
          .dest = &o.early_dispatch },
        { "rate-limit", U, "N", "0", "calls per second per key (unsigned bodies: per client\n"
          "address), counted by the calls in a body, shared by every\n"
          "broker on the Redis; over it: 429 / -32007. A key's rate=\n"
          "in the key file replaces it; 0: no limit", .dest = &o.rate.rate,
          .min = 0, .max = 100000000 },
        { "rate-burst", U, "N", "0", "calls admitted at once under --rate-limit (a larger body\n"
          "is refused whole); 0: one second's worth",
          .dest = &o.rate.burst, .min = 0, .max = 100000000 },
        { "idempotency-ttl", U, "S", "86400", "how long a body's reply is kept in Redis under its\n"
          "Idempotency-Key (HTTP) or idempotency_key (ZeroMQ); needs\n"
          "Redis: --keys, --rate-limit or --redis given",
          .dest = &o.idem_ttl_s, .min = 1, .max = 31536000 },
        { "rate-local-share", U, "PCT", "10", "while Redis is unavailable each broker admits this\n"
          "share of every rate limit by itself (never unlimited)",
          .dest = &o.rate_local_pct, .min = 1, .max = 100 },
        { "heartbeat-ms", U, "N", "1000", "heartbeat interval to and from workers",
          .dest = &o.workers.heartbeat_ms, .min = 10, .max = 3600000 },
        { "liveness", U, "N", "3", "missed heartbeats before a worker is dead",
          .dest = &o.workers.liveness, .min = 1, .max = 1000 },
        { "max-redispatch", U, "N", "3", "times a call of an idempotent method is sent to another\n"
          "worker after losing its own; 0: never", .dest = &o.workers.max_redispatch, .min = 0, .max = 255 },
        { "curve-secret", S, "FILE", NULL, "the broker's CURVE keypair (jrpc keygen FILE): turns on\n"
          "CURVE encryption on the client and worker sockets;\n"
          "needs both lists below (no encryption without an\nallowlist)", .dest = &curve_files[0] },
        { "client-keys", S, "FILE", NULL, "public keys of the clients allowed in, one a line",
          .dest = &curve_files[1] },
        { "worker-keys", S, "FILE", NULL, "public keys of the workers allowed in, one a line",
          .dest = &curve_files[2] },
        { "admin", S, "HOST:PORT", "none", "admin listener (/metrics, /healthz, /readyz, the status\n"
          "page / and /status*), or none",
          .dest = &admin_listen, .check = hp_ok },
        { "ready-methods", L, "LIST", NULL, "methods /readyz needs a worker for (comma list);\n"
          "none: any worker", .dest = &ready_methods },
        { "drain-delay-ms", U, "N", "0", "on SIGTERM, keep serving this long with /readyz\n"
          "saying 503 (a load balancer stops sending new\n"
          "clients) before the graceful stop begins",
          .dest = &drain_delay_ms, .max = 600000 },
        { "access-log", B, "on|off", "on", "one log line per request body", .dest = &o.access_log },
        { "server-timing", B, "on|off", "on", "each answer says where its time went: HTTP\n"
          "Server-Timing, SSE end event, NDJSON trailer; ZeroMQ\n"
          "reply header when the client asks (\"timing\")", .dest = &o.server_timing },
        { "metrics-max-methods", U, "N", "256", "methods with their own metrics series (calls,\n"
          "errors, latency per method); the rest are counted\nunder method=\"other\"",
          .dest = &o.metrics_max_methods, .min = 1, .max = 65536 },
        { "max-worker-methods", U, "N", "1024", "method names in one worker READY; more: refused",
          .dest = &o.workers.max_worker_methods, .min = 1, .max = 1000000 },
        { "max-methods", U, "N", "16384", "distinct method names known at once, all workers\n"
          "together; a READY that would pass it: refused", .dest = &o.workers.max_methods,
          .min = 1, .max = 10000000 },
        { "max-worker-credit", U, "N", "1024", "credit honoured per worker, whatever its READY says",
          .dest = &o.workers.max_worker_credit, .min = 1, .max = 4294967295u },
        { "max-worker-bytes", U, "N", "16777216", "REQUEST bytes outstanding at one worker (sent, not\n"
          "answered) before it gets no more calls",
          .dest = &o.workers.max_worker_bytes, .min = 1024, .max = 4294967295u },
        { "eject-after", U, "N", "5", "calls timed out in a row at one worker before it is\n"
          "ejected (no new calls for --eject-ms); 0: never",
          .dest = &o.workers.eject_after, .min = 0, .max = 1000000 },
        { "eject-ms", U, "N", "30000", "how long an ejected worker gets no new calls",
          .dest = &o.workers.eject_ms, .min = 1, .max = 86400000 },
        { "hedge", B, "on|off", "off", "hedged calls: a call of a method its worker declared\n"
          "idempotent, waiting longer than the method's p95, gets a\n"
          "second copy at another worker; the first answer wins", .dest = &hedge },
        { "hedge-budget", U, "PCT", "5", "with --hedge on: hedges sent at most, per 100 calls",
          .dest = &hedge_budget, .min = 1, .max = 100 },
        { "hedge-min-ms", U, "N", "10", "with --hedge on: never hedge a call younger than this",
          .dest = &o.workers.hedge_min_ms, .min = 1, .max = 3600000 },
        { "hedge-max-ms", U, "N", "1000", "with --hedge on: hedge a call this old whatever the p95\n"
          "(and before the p95 of its method is known)",
          .dest = &o.workers.hedge_max_ms, .min = 1, .max = 3600000 },
        JRPC_CONF_STD_OPTS(&std),
    };
    static const jrpc_conf_info_t info = { "jrpc-broker", JRPC_VERSION, usage_head, usage_tail };
    jrpc_log_init("jrpc-broker");
    int done = jrpc_conf_main(&conf, &info, opts, sizeof opts / sizeof *opts, &std, argc, argv);
    if (done >= 0) {
        jrpc_conf_destroy(&conf);
        return done;
    }
    bool curve = load_curve(curve_files, &curve_kp, curve_lists);

    static app_t a;   /* static: see below */
    a.drain_delay_ms = drain_delay_ms;
    jrpc_keys_t *keys = NULL;
    if (keys_path) {
        char err[512];
        if (jrpc_keys_load(keys_path, NULL, &keys, err, sizeof err) < 0) {
            jrpc_conf_error(conf, "keys", err);
            return 2;
        }
        o.keys = keys;
    }
    if (o.replay.password_file) {
        char err[512];
        if (redis_check(o.replay.url, o.replay.password_file, err, sizeof err) < 0) {
            jrpc_conf_error(conf, "redis-password-file", err);
            jrpc_keys_destroy(&keys);
            return 2;
        }
    }
    jrpc_tls_ctx_t *tls = NULL;
    if (tls_o.cert || tls_o.key || tls_o.client_ca) {
        char err[512];
        if (!tls_o.cert || !tls_o.key) {
            jrpc_conf_error(conf, tls_o.cert ? "tls-cert" : "tls-key",
                            "--tls-cert and --tls-key go together (and --tls-client-ca needs them)");
            return 2;
        }
        if (jrpc_tls_ctx_new(&tls_o, &tls, err, sizeof err) < 0) {
            jrpc_conf_error(conf, "tls-cert", err);
            return 2;
        }
        ho.tls = tls;
    }
    if (std.check_config) {
        jrpc_conf_print(conf, stdout);
        jrpc_curve_keypair_wipe(&curve_kp);
        jrpc_curve_allowlist_destroy(&curve_lists[0]);
        jrpc_curve_allowlist_destroy(&curve_lists[1]);
        jrpc_keys_destroy(&keys);
        jrpc_tls_ctx_free(&tls);
        jrpc_conf_destroy(&conf);
        return 0;
    }
    if (*jrpc_conf_ignored_env(conf))
        JRPC_LOG(JRPC_LOG_INFO, "main", "event=env_ignored names=%s detail=\"not options of "
                 "jrpc-broker\"", jrpc_conf_ignored_env(conf));
    o.replay.window_s = o.skew_s;
    ho.cors_origins = cors.v;
    ho.ncors = cors.n;
    ho.server_timing = o.server_timing;
    static jrpc_proxy_cidr_t *trusted;   /* lives as long as the front: the process */
    if (proxies.n && (trusted = calloc(proxies.n, sizeof *trusted)) == NULL)
        return 1;
    for (size_t i = 0; i < proxies.n; i++) {
        int rc = jrpc_proxy_cidr_parse(proxies.v[i], strlen(proxies.v[i]), &trusted[i]);
        assert(rc == 0);   /* trusted_proxy_ok passed it */
        (void)rc;
    }
    ho.trusted_proxies = trusted;
    ho.ntrusted_proxies = proxies.n;
    if (ho.mcp_path && strcmp(ho.mcp_path, "none") == 0)
        ho.mcp_path = NULL;
    o.workers.max_method_len = o.limits.max_method_len;   /* longer READY names: never called */
    o.workers.hedge_budget_pct = hedge ? hedge_budget : 0;
    /* Redis for idempotency keys (and per-address limits) without --keys:
     * when --redis was given at all. */
    o.redis = strcmp(jrpc_conf_source(conf, "redis"), "default") != 0;
    if (hedge && o.workers.hedge_max_ms < o.workers.hedge_min_ms) {
        jrpc_conf_error(conf, "hedge-max-ms", "must be at least --hedge-min-ms");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    /* a is static: the loop and the handles stay reachable when start-up
     * fails and main returns 1 early (no false leak report, nothing
     * half-closed). */
    a.keys = keys;   /* owned by a from here; a reload replaces it */
    uv_loop_init(&a.loop);
    /* A line per body: written once per loop iteration, not once per line. */
    if (o.access_log)
        jrpc_logbuf_start(&a.loop);
    void *zctx = zmq_ctx_new();
    o.workers.zmq_ctx = zctx;
    o.workers.libzmq = strcmp(workers_engine, "libzmq") == 0;
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
    jrpc_metrics.reload_last_success = (double)time(NULL);   /* the files just read */
    a.tls = tls;
    a.tls_o = tls_o;
    reloadables_init(&a, keys_path, curve_files);
    /* The admin listener right after the broker (a bad address fails before
     * the client ports are bound); destroyed in on_drained, so /readyz says
     * "draining" until the drain ends. */
    jrpc_status_page_info_t si = {
        .version = JRPC_VERSION, .started_ns = uv_hrtime(), .started_unix = (int64_t)time(NULL),
        .redis_mode = strncmp(o.replay.url, "sentinel://", 11) == 0 ? "sentinel"
                      : strncmp(o.replay.url, "unix://", 7) == 0 ? "unix" : "redis",
        .listeners = { { "zmq", zmq_ep, false }, { "workers", o.workers.endpoint, false },
                       { "http", ho.listen, tls != NULL }, { "admin", admin_listen, false } },
        .nlisteners = 4 };
    if (strcmp(admin_listen, "none") != 0 &&
        (a.admin = admin_new(&a.loop, admin_listen, a.broker, &a.leaving, &ready_methods,
                               &si, &a.probe)) == NULL)
        return 1;
    jrpc_front_zmq_opts_t zo = { .endpoint = zmq_ep, .max_body = ho.max_body,
                                 .curve = curve ? &curve_kp : NULL,
                                 .engine = strcmp(zmq_engine, "libzmq") == 0
                                           ? JRPC_FRONT_ZMQ_LIBZMQ : JRPC_FRONT_ZMQ_NATIVE };
    a.front = jrpc_front_zmq_new(&a.loop, zctx, a.broker, &zo);
    jrpc_curve_keypair_wipe(&curve_kp);   /* the sockets have their copies */
    if (a.front == NULL)
        return 1;
    if (strcmp(ho.listen, "none") != 0 &&
        (a.http = jrpc_front_http_new(&a.loop, a.broker, &ho)) == NULL)
        return 1;
    if (tls) {
        char what[256];
        jrpc_tls_ctx_describe(tls, what, sizeof what);
        JRPC_LOG(JRPC_LOG_INFO, "main", "event=tls subject=\"%s\" client_ca=%s", what,
                 tls_o.client_ca ? "on" : "off");
        /* The admin listener stays plaintext (docs/TLS.md): say so when it
         * is reachable from elsewhere. */
        if (a.admin && strncmp(admin_listen, "127.", 4) != 0 &&
            strncmp(admin_listen, "[::1]:", 6) != 0 && strncmp(admin_listen, "localhost:", 10) != 0)
            JRPC_LOG(JRPC_LOG_WARN, "main", "event=admin_plaintext admin=%s detail=\"the admin "
                     "listener does not speak TLS: keep it on localhost or a private network\"",
                     admin_listen);
    }
    uv_timer_init(&a.loop, &a.drain_delay);
    a.drain_delay.data = &a;
    uv_signal_init(&a.loop, &a.sigint);
    uv_signal_init(&a.loop, &a.sigterm);
    uv_signal_init(&a.loop, &a.sighup);
    a.sigint.data = a.sigterm.data = a.sighup.data = &a;
    uv_signal_start(&a.sigint, on_signal, SIGINT);
    uv_signal_start(&a.sigterm, on_signal, SIGTERM);
    uv_signal_start(&a.sighup, on_sighup, SIGHUP);
    JRPC_LOG(JRPC_LOG_INFO, "main", "event=started version=%s timeout_ms=%u max_batch=%u",
             JRPC_VERSION, o.timeout_ms, o.limits.max_batch);
    if (a.keys)
        JRPC_LOG(JRPC_LOG_INFO, "main", "event=signing_required keys=%zu skew_s=%u",
                 jrpc_keys_count(a.keys), o.skew_s);
    else
        JRPC_LOG(JRPC_LOG_WARN, "main",
                 "event=open_mode detail=\"no --keys: requests are not authenticated\"");
    jrpc_sdnotify_log("READY=1\nSTATUS=serving");
    uv_run(&a.loop, UV_RUN_DEFAULT);
    uv_loop_close(&a.loop);
    probe_free(&a.probe);   /* the admin, which read it, is gone with the loop */
    zmq_ctx_term(zctx);
    jrpc_keys_destroy(&a.keys);
    jrpc_tls_ctx_free(&a.tls);
    jrpc_conf_destroy(&conf);
    JRPC_LOG(JRPC_LOG_INFO, "main", "event=exit status=0");
    return 0;
}
