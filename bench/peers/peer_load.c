/* peer_load — see peer_load.h. */
#include "peer_load.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hist.h"
#include "loop.h"

#define MAX_CONNECTIONS 1024
#define MAX_BATCH       10000

static const char *o_url;
static int o_batch = 100, o_conns = 4, o_timeout_ms = 10000, o_json;
static double o_duration = 10, o_warmup = 1, o_rate;
static const peer_ops_t *g_ops;
static double t_start, t_warm, t_end;

typedef struct {
    loop_conn_t c;   /* first: index, thread, histograms, counts */
    int open_failed;
    uint64_t lost, fails;
} conn_t;

int peer_request(char *buf, uint64_t id)
{
    return sprintf(buf, "{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"params\":[1,2],\"id\":%" PRIu64 "}",
                   id);
}

/* Scans a request made by peer_request: 0, or -1 when it is not one. */
static int scan_request(const char *req, int len, long *a, long *b, unsigned long long *id)
{
    char tmp[256];
    if (len <= 0 || len >= (int)sizeof tmp)
        return -1;
    memcpy(tmp, req, (size_t)len);
    tmp[len] = 0;
    const char *p = strstr(tmp, "\"params\":["), *q = strstr(tmp, "\"id\":");
    if (!p || !q || sscanf(p + 10, "%ld,%ld", a, b) != 2 || sscanf(q + 5, "%llu", id) != 1)
        return -1;
    return 0;
}

int peer_answer(const char *req, int len, char *out)
{
    long a, b;
    unsigned long long id;
    if (scan_request(req, len, &a, &b, &id) < 0)
        return -1;
    return sprintf(out, "{\"jsonrpc\":\"2.0\",\"result\":%ld,\"id\":%llu}", a + b, id);
}

int64_t peer_request_id(const char *req, int len)
{
    long a, b;
    unsigned long long id;
    return scan_request(req, len, &a, &b, &id) < 0 || id > INT64_MAX ? -1 : (int64_t)id;
}

static void seen_id(peer_seen_t *s, uint64_t base, int64_t id)
{
    if (id < 0 || (uint64_t)id < base || (uint64_t)id - base >= (uint64_t)s->n)
        return;
    if (!s->v[id - (int64_t)base]++)
        s->good++;
}

int64_t peer_answer_id(const char *ans, int len)
{
    static const char head[] = "{\"jsonrpc\":\"2.0\",\"result\":3,\"id\":";
    size_t hl = sizeof head - 1;
    if (len <= (int)hl || len > 64 || memcmp(ans, head, hl) != 0 || ans[len - 1] != '}')
        return -1;
    int64_t id = 0;
    for (int i = (int)hl; i < len - 1; i++) {
        if (ans[i] < '0' || ans[i] > '9')
            return -1;
        id = id * 10 + (ans[i] - '0');
    }
    return id;
}

void peer_seen_reset(peer_seen_t *s, int n)
{
    if (s->n < n) {
        free(s->v);
        s->v = malloc((size_t)n);
        if (!s->v) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        s->n = n;
    }
    memset(s->v, 0, (size_t)n);
    s->good = 0;
}

void peer_seen_mark(peer_seen_t *s, uint64_t base, const char *ans, int len)
{
    seen_id(s, base, peer_answer_id(ans, len));
}

void peer_seen_mark_echo(peer_seen_t *s, uint64_t base, const char *req, int len)
{
    seen_id(s, base, peer_request_id(req, len));
}

void peer_seen_mark_id(peer_seen_t *s, uint64_t base, uint64_t id)
{
    seen_id(s, base, id > INT64_MAX ? -1 : (int64_t)id);
}

void peer_seen_dispose(peer_seen_t *s)
{
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

static void *conn_main(void *arg)
{
    conn_t *w = arg;
    void *c = g_ops->open(o_url);
    if (!c) {
        w->open_failed = 1;
        return NULL;
    }
    peer_seen_t seen = { NULL, 0, 0 };
    loop_sched_t sch;
    loop_sched_init(&sch, t_start, t_end, o_rate, o_conns, w->c.idx);
    /* Ids: the connection in the top bits, so each thread has its own range. */
    uint64_t base = (uint64_t)w->c.idx << 40;
    for (;;) {
        double sched = loop_sched_next(&sch);
        if (sched < 0)
            break;
        peer_seen_reset(&seen, o_batch);
        int rc = g_ops->call(c, base, o_batch, o_timeout_ms, &seen);
        base += (uint64_t)o_batch;
        double done = loop_now();
        if (sched < t_warm)
            continue;
        if (rc < 0) {
            w->fails++;
            break;  /* the connection is in an unknown state: stop this thread */
        }
        uint64_t us = (uint64_t)((done - sched) * 1e6 + 0.5);
        loop_conn_record(&w->c, us, o_batch);
        w->lost += (uint64_t)(o_batch - seen.good);
    }
    w->c.finished = loop_now();
    peer_seen_dispose(&seen);
    g_ops->close(c);
    return NULL;
}

static void usage(FILE *f)
{
    fprintf(f,
"usage: jrpc-peer-%s serve %s          the peer's server side\n"
"       jrpc-peer-%s load --url %s [options]\n"
"Load for the %s peer, the same shape and --json fields as jrpc-bench.\n"
"  --url URL            the peer (required)\n"
"  --batch N            requests issued at once and waited for together (default 100)\n"
"  --connections C      connections, one thread each (default 4)\n"
"  --duration S         seconds measured (default 10)\n"
"  --warmup S           seconds before, whose results are discarded (default 1)\n"
"  --rate R             open loop at R batches/s in total (latency from the\n"
"                       scheduled send time); absent: closed loop\n"
"  --timeout-ms N       for the answers of one batch (default 10000)\n"
"  --json               one JSON object on stdout instead of the table\n"
"Exit status: 0; 1 if an answer was missing or wrong; 2 usage error.\n",
            g_ops->name, g_ops->where, g_ops->name, g_ops->where, g_ops->name);
}

static int num_arg(const char *s, double lo, double hi, double *v)
{
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return errno || end == s || *end || !(*v >= lo && *v <= hi) ? -1 : 0;
}

static int parse_args(int argc, char **argv)
{
    static const struct option lo[] = {
        { "url", required_argument, NULL, 'u' },
        { "batch", required_argument, NULL, 'b' },
        { "connections", required_argument, NULL, 'c' },
        { "duration", required_argument, NULL, 'd' },
        { "warmup", required_argument, NULL, 'w' },
        { "rate", required_argument, NULL, 'r' },
        { "timeout-ms", required_argument, NULL, 't' },
        { "json", no_argument, NULL, 'j' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int o;
    double v;
    opterr = 0;
    optind = 1;
    while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        int bad = 0;
        switch (o) {
        case 'u': o_url = optarg; break;
        case 'b': bad = num_arg(optarg, 1, MAX_BATCH, &v); o_batch = (int)v; break;
        case 'c': bad = num_arg(optarg, 1, MAX_CONNECTIONS, &v); o_conns = (int)v; break;
        case 'd': bad = num_arg(optarg, 0.001, 1e6, &o_duration); break;
        case 'w': bad = num_arg(optarg, 0, 1e6, &o_warmup); break;
        case 'r': bad = num_arg(optarg, 1e-3, 1e9, &o_rate); break;
        case 't': bad = num_arg(optarg, 1, 3600000, &v); o_timeout_ms = (int)v; break;
        case 'j': o_json = 1; break;
        case 'h': usage(stdout); exit(0);
        default: bad = 1;
        }
        if (bad) {
            fprintf(stderr, "jrpc-peer-%s: bad or unknown option: %s\n", g_ops->name,
                    argv[optind - 1]);
            usage(stderr);
            return -1;
        }
    }
    if (optind < argc || !o_url) {
        fprintf(stderr, "jrpc-peer-%s: %s\n", g_ops->name,
                !o_url ? "--url is required" : "unexpected argument");
        usage(stderr);
        return -1;
    }
    return 0;
}

int peer_load_main(int argc, char **argv, const peer_ops_t *ops)
{
    g_ops = ops;
    if (parse_args(argc, argv) < 0)
        return 2;
    static conn_t ws[MAX_CONNECTIONS];
    t_start = loop_now() + 0.05;
    t_warm = t_start + o_warmup;
    t_end = t_warm + o_duration;
    if (loop_start(ws, sizeof *ws, o_conns, conn_main, ops->name) < 0)
        return 2;
    conn_t tot;
    memset(&tot, 0, sizeof tot);
    double last = loop_join(ws, sizeof *ws, o_conns, &tot.c, t_warm);
    for (int k = 0; k < o_conns; k++) {
        tot.open_failed |= ws[k].open_failed;
        tot.lost += ws[k].lost;
        tot.fails += ws[k].fails;
    }
    if (tot.open_failed) {
        fprintf(stderr, "jrpc-peer-%s: cannot connect to %s\n", ops->name, o_url);
        return 2;
    }
    double secs = last - t_warm;
    if (secs <= 0)
        secs = o_duration;
    loop_report_t rep = { ops->name, o_url, o_rate, o_batch, o_conns, secs, o_warmup,
                          tot.c.batches, tot.c.calls, &tot.c.batch_h, NULL, NULL };
    loop_print_report(&rep, o_json);
    if (o_json) {
        printf("\"peer\":\"%s\",\"ids_checked\":true,\"errors\":{},\"transport_failures\":%" PRIu64
               ",\"rejected_batches\":0,\"ids_expected\":%" PRIu64 ",\"lost\":%" PRIu64
               ",\"duplicated\":0,\"unexpected\":0,\"bad_replies\":0}\n",
               ops->name, tot.fails, tot.c.calls, tot.lost);
    } else {
        printf("  failures %" PRIu64 ", answers missing or wrong %" PRIu64 "\n", tot.fails,
               tot.lost);
    }
    return tot.lost || tot.fails ? 1 : 0;
}

int peer_main(int argc, char **argv, const peer_ops_t *ops)
{
    if (argc == 3 && strcmp(argv[1], "serve") == 0)
        return ops->serve(argv[2]);
    if (argc >= 2 && strcmp(argv[1], "load") == 0)
        return peer_load_main(argc - 1, argv + 1, ops);
    if (argc == 2 && strcmp(argv[1], "--help") == 0) {
        g_ops = ops;
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "usage: jrpc-peer-%s serve %s | load --url %s [options] | --help\n",
            ops->name, ops->where, ops->where);
    return 2;
}
