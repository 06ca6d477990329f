/* jrpc_metrics — see jrpc_metrics.h. */
#include "jrpc_metrics.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jrpc_batch.h"
#include "jrpc_errors.h"

jrpc_metrics_t jrpc_metrics;
const char *const jrpc_metrics_transport_names[JRPC_METRICS_TRANSPORTS] = { "zmq", "http", "ws" };
static const unsigned ws_codes[JRPC_METRICS_WS_CODES] = { 1000, 1001, 1002, 1003, 1007, 1008, 1009 };
static const char *const ws_code_names[JRPC_METRICS_WS_CODES] = {
    "1000", "1001", "1002", "1003", "1007", "1008", "1009" };

static const uint64_t batch_bounds[] = { 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000 };
static const char *const batch_le[] = { "1", "2", "5", "10", "20", "50", "100", "200", "500",
                                        "1000" };
static const uint64_t sec_bounds[] = {
    100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000, 25000000, 50000000,
    100000000, 250000000, 500000000, 1000000000, 2500000000, 5000000000, 10000000000,
    30000000000 };
static const char *const sec_le[] = { "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005",
                                      "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5",
                                      "5", "10", "30" };
_Static_assert(sizeof sec_bounds / sizeof sec_bounds[0] == JRPC_HIST_MAX, "seconds buckets");

void jrpc_hist_init_batch(jrpc_hist_t *h)
{
    *h = (jrpc_hist_t){ .bounds = batch_bounds, .le = batch_le,
                        .nb = sizeof batch_bounds / sizeof batch_bounds[0], .scale = 1 };
}

void jrpc_hist_init_seconds(jrpc_hist_t *h)
{
    *h = (jrpc_hist_t){ .bounds = sec_bounds, .le = sec_le, .nb = JRPC_HIST_MAX, .scale = 1e-9 };
}

/* Record 0 ("other") before any allocation: the hot path never checks. */
static jrpc_metrics_method_t meth_other;

static void method_rec_init(jrpc_metrics_method_t *r, const char *service, const char *method)
{
    memset(r, 0, sizeof *r);
    r->service = service;
    r->method = method;
    jrpc_hist_init_seconds(&r->worker);
    jrpc_hist_init_seconds(&r->total);
}

void jrpc_metrics_init(void)
{
    if (jrpc_metrics.batch.bounds != NULL)
        return;
    memset(&jrpc_metrics, 0, sizeof jrpc_metrics);
    method_rec_init(&meth_other, "", "other");
    jrpc_metrics.meth = &meth_other;
    jrpc_metrics.nmeth = jrpc_metrics.cap_meth = 1;
    jrpc_metrics.max_meth = JRPC_METRICS_MAX_METHODS;
    jrpc_hist_init_batch(&jrpc_metrics.batch);
    jrpc_hist_init_seconds(&jrpc_metrics.queue);
    jrpc_hist_init_seconds(&jrpc_metrics.worker);
    jrpc_hist_init_seconds(&jrpc_metrics.total);
    jrpc_hist_init_seconds(&jrpc_metrics.redis_rtt);
}

/* ---- hooks ---- */

void jrpc_metrics_error(int code)
{
    jrpc_metrics_t *m = &jrpc_metrics;
    for (uint32_t i = 0; i < m->ncodes; i++) {
        if (m->codes[i] == code) {
            m->code_n[i]++;
            return;
        }
    }
    if (m->ncodes == JRPC_METRICS_CODES) { /* workers may invent any number of codes */
        m->code_other++;
        return;
    }
    m->codes[m->ncodes] = code;
    m->code_n[m->ncodes++] = 1;
}

void jrpc_metrics_ws_close(unsigned code)
{
    for (unsigned i = 0; i < JRPC_METRICS_WS_CODES; i++)
        if (ws_codes[i] == code)
            jrpc_metrics.ws_closes[i]++;
}

void jrpc_metrics_body_refused(int transport, int outcome, int code, uint64_t t0)
{
    jrpc_metrics_body(transport, outcome);
    jrpc_metrics.calls[jrpc_metrics_transport(transport)][1]++;
    jrpc_metrics_error(code);
    jrpc_hist_observe(&jrpc_metrics.total, jrpc_metrics_since(t0));
}

void jrpc_metrics_front_refused(int transport, int code)
{
    jrpc_metrics_body_refused(transport, JRPC_BODY_INVALID, code, jrpc_metrics_tick());
}

/* A run of n answers of record id, errs of them errors (counted already),
 * all with total latency took. */
static void method_run(uint32_t id, uint64_t n, uint64_t errs, uint64_t took)
{
    jrpc_metrics_method_t *r = &jrpc_metrics.meth[id];
    r->calls[JRPC_CALL_OK] += n - errs;
    jrpc_hist_observe_n(&r->total, took, n);
}

void jrpc_metrics_reply(int transport, const jrpc_batch_t *req, const uint32_t *mstat,
                        uint64_t t0)
{
    jrpc_metrics_t *m = &jrpc_metrics;
    uint64_t answers = 0, errors = 0, took = jrpc_metrics_since(t0);
    uint64_t run_n = 0, run_errs = 0;
    /* The record of the run being counted; NONE's id (NONE without the
     * worker-error bit) stands for calls not counted per method, so that a
     * call costs one compare whatever its tag. */
    const uint32_t none = JRPC_METRICS_NONE & ~JRPC_METRICS_WORKER_ERROR;
    uint32_t run = none;
    for (uint32_t i = 0; i < req->ncalls; i++) {
        const jrpc_call_t *c = &req->calls[i];
        if (c->notification)
            continue;
        answers++;
        uint32_t tag = mstat ? mstat[i] : JRPC_METRICS_NONE;
        uint32_t id = tag & ~JRPC_METRICS_WORKER_ERROR;
        if (id != run) {
            if (run != none)
                method_run(run, run_n, run_errs, took);
            run = id;
            run_n = run_errs = 0;
        }
        run_n++;
        if (!c->error)
            continue;
        errors++;
        jrpc_metrics_error(c->code);
        if (id == none)
            continue;
        jrpc_metrics_method_t *r = &m->meth[id];
        r->calls[tag & JRPC_METRICS_WORKER_ERROR ? JRPC_CALL_ERROR
                                                 : jrpc_metrics_outcome_of(c->code)]++;
        jrpc_metrics_method_error(r, c->code);
        run_errs++;
    }
    if (run != none)
        method_run(run, run_n, run_errs, took);
    unsigned t = jrpc_metrics_transport(transport);
    m->calls[t][0] += answers - errors;
    m->calls[t][1] += errors;
    if (answers > 0)
        jrpc_hist_observe_n(&m->total, took, answers);
    jrpc_metrics_body(transport, req->body_code ? JRPC_BODY_INVALID : JRPC_BODY_OK);
}

/* ---- per method ---- */

const char *const jrpc_call_outcome_names[JRPC_CALL_NOUTCOMES] = {
    "ok", "error", "timeout", "lost", "busy", "not_found", "denied", "failed" };

void jrpc_metrics_set_max_methods(uint32_t max)
{
    if (jrpc_metrics.meth_hash == NULL)
        jrpc_metrics.max_meth = max ? max : JRPC_METRICS_MAX_METHODS;
}

static uint32_t meth_hash(const char *service, const char *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (; *service; service++)
        h = (h ^ (uint8_t)*service) * 16777619u;
    h = (h ^ 0xffu) * 16777619u;   /* between the two: ("a", "bc") is not ("ab", "c") */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)p[i]) * 16777619u;
    return h;
}

uint32_t jrpc_metrics_method_id(const char *service, const char *method, size_t len)
{
    jrpc_metrics_t *m = &jrpc_metrics;
    if (service == NULL)
        service = "";
    if (m->meth == NULL)
        jrpc_metrics_init();
    if (m->meth_hash == NULL) {
        uint32_t size = 16;
        while (size <= 2 * (uint64_t)m->max_meth)
            size *= 2;
        if ((m->meth_hash = calloc(size, sizeof *m->meth_hash)) == NULL)
            return JRPC_METRICS_OTHER;
        m->meth_hash_size = size;
    }
    uint32_t mask = m->meth_hash_size - 1, i = meth_hash(service, method, len) & mask;
    for (; m->meth_hash[i]; i = (i + 1) & mask) {
        const jrpc_metrics_method_t *r = &m->meth[m->meth_hash[i] - 1];
        if (strcmp(r->service, service) == 0 && strlen(r->method) == len &&
            memcmp(r->method, method, len) == 0)
            return m->meth_hash[i] - 1;
    }
    if (m->nmeth - 1 >= m->max_meth)
        return JRPC_METRICS_OTHER;
    if (m->nmeth == m->cap_meth) {   /* grow: indices stay, the hot path holds no pointer */
        uint32_t cap = m->cap_meth < 16 ? 16 : m->cap_meth * 2;
        jrpc_metrics_method_t *t = malloc((size_t)cap * sizeof *t);
        if (t == NULL)
            return JRPC_METRICS_OTHER;
        memcpy(t, m->meth, (size_t)m->nmeth * sizeof *t);
        if (m->meth != &meth_other)
            free(m->meth);
        m->meth = t;
        m->cap_meth = cap;
    }
    size_t sl = strlen(service);
    char *block = malloc(sl + 1 + len + 1);   /* service, then method */
    if (block == NULL)
        return JRPC_METRICS_OTHER;
    memcpy(block, service, sl + 1);
    memcpy(block + sl + 1, method, len);
    block[sl + 1 + len] = '\0';
    uint32_t id = m->nmeth++;
    method_rec_init(&m->meth[id], block, block + sl + 1);
    m->meth_hash[i] = id + 1;
    return id;
}

void jrpc_metrics_method_error(jrpc_metrics_method_t *r, int code)
{
    for (uint32_t i = 0; i < r->ncodes; i++) {
        if (r->codes[i] == code) {
            r->code_n[i]++;
            return;
        }
    }
    if (r->ncodes == JRPC_METRICS_METHOD_CODES) {
        r->code_other++;
        return;
    }
    r->codes[r->ncodes] = code;
    r->code_n[r->ncodes++] = 1;
}

int jrpc_metrics_outcome_of(int code)
{
    switch (code) {
    case 0:                       return JRPC_CALL_OK;
    case JRPC_TIMEOUT:            return JRPC_CALL_TIMEOUT;
    case JRPC_WORKER_FAILED:      return JRPC_CALL_LOST;
    case JRPC_SERVER_BUSY:        return JRPC_CALL_BUSY;
    case JRPC_METHOD_NOT_FOUND:   return JRPC_CALL_NOT_FOUND;
    case JRPC_UNAUTHORIZED:       return JRPC_CALL_DENIED;
    default:                      return JRPC_CALL_FAILED;
    }
}

double jrpc_hist_quantile(const jrpc_hist_t *h, double q)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i <= h->nb; i++)
        n += h->counts[i];
    if (n == 0 || h->nb == 0)
        return 0;
    double rank = q * (double)n, cum = 0;
    for (uint32_t i = 0; i < h->nb; i++) {
        double c = (double)h->counts[i];
        if (c > 0 && cum + c >= rank) {
            double lo = i ? (double)h->bounds[i - 1] : 0, hi = (double)h->bounds[i];
            return (lo + (hi - lo) * (rank - cum) / c) * h->scale;
        }
        cum += c;
    }
    return (double)h->bounds[h->nb - 1] * h->scale;
}

/* ---- exposition ---- */

int jrpc_expo_family(jrpc_buf_t *out, const char *name, const char *type, const char *help)
{
    char line[512];
    int n = snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    if (n < 0 || (size_t)n >= sizeof line)
        return -EINVAL;
    return jrpc_buf_append(out, line, (size_t)n);
}

static int put_value(jrpc_buf_t *out, double v)
{
    char num[40];
    int n;
    if (v == (double)(int64_t)v && v < 9.0e15 && v > -9.0e15)
        n = snprintf(num, sizeof num, " %lld\n", (long long)v);
    else if (v > -1e15 && v < 1e15) {   /* sums of ns: 9 decimals are exact */
        n = snprintf(num, sizeof num, " %.9f", v);
        while (num[n - 1] == '0')
            n--;
        if (num[n - 1] == '.')
            n--;
        num[n++] = '\n';
    } else {
        n = snprintf(num, sizeof num, " %.17g\n", v);
    }
    return jrpc_buf_append(out, num, (size_t)n);
}

int jrpc_expo_sample(jrpc_buf_t *out, const char *name, const char *const *labels,
                     unsigned nlabels, double value)
{
    int rc = jrpc_buf_puts(out, name);
    for (unsigned i = 0; rc == 0 && i < nlabels; i++) {
        rc = jrpc_buf_puts(out, i == 0 ? "{" : ",");
        if (rc == 0)
            rc = jrpc_buf_puts(out, labels[2 * i]);
        if (rc == 0)
            rc = jrpc_buf_puts(out, "=\"");
        for (const char *p = labels[2 * i + 1]; rc == 0 && *p; p++) {
            if (*p == '\\')
                rc = jrpc_buf_puts(out, "\\\\");
            else if (*p == '"')
                rc = jrpc_buf_puts(out, "\\\"");
            else if (*p == '\n')
                rc = jrpc_buf_puts(out, "\\n");
            else
                rc = jrpc_buf_putc(out, *p);
        }
        if (rc == 0)
            rc = jrpc_buf_putc(out, '"');
    }
    if (rc == 0 && nlabels > 0)
        rc = jrpc_buf_putc(out, '}');
    if (rc == 0)
        rc = put_value(out, value);
    return rc;
}

int jrpc_expo_hist(jrpc_buf_t *out, const char *name, const char *help, const jrpc_hist_t *h)
{
    char sname[128];
    int rc = jrpc_expo_family(out, name, "histogram", help);
    uint64_t cum = 0;
    snprintf(sname, sizeof sname, "%s_bucket", name);
    for (uint32_t i = 0; rc == 0 && i <= h->nb; i++) {
        cum += h->counts[i];
        const char *lab[2] = { "le", i < h->nb ? h->le[i] : "+Inf" };
        rc = jrpc_expo_sample(out, sname, lab, 1, (double)cum);
    }
    snprintf(sname, sizeof sname, "%s_sum", name);
    if (rc == 0)
        rc = jrpc_expo_sample(out, sname, NULL, 0, (double)h->sum * h->scale);
    snprintf(sname, sizeof sname, "%s_count", name);
    if (rc == 0)
        rc = jrpc_expo_sample(out, sname, NULL, 0, (double)cum);
    return rc;
}

/* A family of one unlabelled sample. */
typedef struct scalar {
    const char *name, *type, *help;
    double      value;
} scalar_t;

static int scalars(jrpc_buf_t *out, const scalar_t *v, size_t n)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = jrpc_expo_family(out, v[i].name, v[i].type, v[i].help);
        if (rc == 0)
            rc = jrpc_expo_sample(out, v[i].name, NULL, 0, v[i].value);
    }
    return rc;
}


/* Samples of one family with one label, emitted by another module. */
typedef struct credit_ctx {
    jrpc_buf_t *out;
    int         rc;
    const char *family, *label;
} credit_ctx_t;

static void put_labelled(credit_ctx_t *cx, const char *value, double v)
{
    const char *lab[2] = { cx->label, value };
    if (cx->rc == 0)
        cx->rc = jrpc_expo_sample(cx->out, cx->family, lab, 1, v);
}

static void put_credit(void *arg, const char *worker, uint32_t credit_left)
{
    put_labelled(arg, worker, credit_left);
}

static void put_count(void *arg, const char *label, uint64_t n)
{
    put_labelled(arg, label, (double)n);
}

/* The _bucket, _sum and _count samples of h under the labels lab (nlab
 * pairs; room for one more: "le" goes last). */
static int hist_samples(jrpc_buf_t *out, const char *name, const char **lab, unsigned nlab,
                        const jrpc_hist_t *h)
{
    char sname[128];
    uint64_t cum = 0;
    int rc = 0;
    snprintf(sname, sizeof sname, "%s_bucket", name);
    lab[2 * nlab] = "le";
    for (uint32_t i = 0; rc == 0 && i <= h->nb; i++) {
        cum += h->counts[i];
        lab[2 * nlab + 1] = i < h->nb ? h->le[i] : "+Inf";
        rc = jrpc_expo_sample(out, sname, lab, nlab + 1, (double)cum);
    }
    snprintf(sname, sizeof sname, "%s_sum", name);
    if (rc == 0)
        rc = jrpc_expo_sample(out, sname, lab, nlab, (double)h->sum * h->scale);
    snprintf(sname, sizeof sname, "%s_count", name);
    if (rc == 0)
        rc = jrpc_expo_sample(out, sname, lab, nlab, (double)cum);
    return rc;
}

/* The per-method families: every record, "other" first. */
static int write_methods(jrpc_buf_t *out)
{
    const jrpc_metrics_t *m = &jrpc_metrics;
    char code[32];
    int rc = jrpc_expo_family(out, "jrpc_method_calls_total", "counter",
                              "Calls answered, by service, method and outcome.");
    for (uint32_t i = 0; i < m->nmeth; i++)
        for (int o = 0; rc == 0 && o < JRPC_CALL_NOUTCOMES; o++) {
            const char *lab[6] = { "service", m->meth[i].service, "method", m->meth[i].method,
                                   "outcome", jrpc_call_outcome_names[o] };
            rc = jrpc_expo_sample(out, "jrpc_method_calls_total", lab, 3,
                                  (double)m->meth[i].calls[o]);
        }
    if (rc == 0)
        rc = jrpc_expo_family(out, "jrpc_method_errors_total", "counter",
                              "Error answers by service, method and JSON-RPC code.");
    for (uint32_t i = 0; rc == 0 && i < m->nmeth; i++) {
        const jrpc_metrics_method_t *r = &m->meth[i];
        for (uint32_t k = 0; rc == 0 && k <= r->ncodes; k++) {
            if (k == r->ncodes && r->code_other == 0)
                break;
            if (k < r->ncodes)
                snprintf(code, sizeof code, "%d", r->codes[k]);
            const char *lab[6] = { "service", r->service, "method", r->method, "code",
                                   k < r->ncodes ? code : "other" };
            rc = jrpc_expo_sample(out, "jrpc_method_errors_total", lab, 3,
                                  (double)(k < r->ncodes ? r->code_n[k] : r->code_other));
        }
    }
    static const char *const hname[2] = { "jrpc_method_worker_seconds", "jrpc_method_call_seconds" };
    static const char *const hhelp[2] = {
        "Per method: REQUEST sent to the answer received.",
        "Per method: body in to its answer placed in the reply." };
    for (int k = 0; k < 2; k++) {
        if (rc == 0)
            rc = jrpc_expo_family(out, hname[k], "histogram", hhelp[k]);
        for (uint32_t i = 0; rc == 0 && i < m->nmeth; i++) {
            const char *lab[6] = { "service", m->meth[i].service, "method", m->meth[i].method };
            rc = hist_samples(out, hname[k], lab, 2, k ? &m->meth[i].total : &m->meth[i].worker);
        }
    }
    return rc;
}

/* The per-worker families: one pass over the workers each. */
typedef struct worker_ctx {
    jrpc_buf_t *out;
    int         rc;
    const char *family;
    int         field;
} worker_ctx_t;

static void put_worker(void *arg, const jrpc_metrics_worker_t *wk)
{
    worker_ctx_t *cx = arg;
    double v[] = { wk->inflight, (double)wk->answered, (double)wk->errors, (double)wk->timeouts,
                   (double)wk->ejections, wk->last_heard };
    const char *lab[2] = { "worker", wk->label };
    if (cx->rc == 0)
        cx->rc = jrpc_expo_sample(cx->out, cx->family, lab, 1, v[cx->field]);
}

static int write_workers(jrpc_buf_t *out, const jrpc_metrics_read_t *rd)
{
    static const scalar_t fam[] = {
        { "jrpc_worker_inflight", "gauge", "Calls at this worker (sent, not answered).", 0 },
        { "jrpc_worker_answered_total", "counter", "Answers this worker sent in time.", 0 },
        { "jrpc_worker_errors_total", "counter", "Of them, error objects.", 0 },
        { "jrpc_worker_timeouts_total", "counter", "Calls that passed their deadline at this "
          "worker.", 0 },
        { "jrpc_worker_ejected_total", "counter", "Times this worker was ejected.", 0 },
        { "jrpc_worker_last_heard_timestamp_seconds", "gauge",
          "Unix time of this worker's last message.", 0 },
    };
    int rc = 0;
    for (int f = 0; rc == 0 && f < (int)(sizeof fam / sizeof fam[0]); f++) {
        rc = jrpc_expo_family(out, fam[f].name, fam[f].type, fam[f].help);
        if (rc == 0 && rd->each_worker) {
            worker_ctx_t cx = { out, 0, fam[f].name, f };
            rd->each_worker(rd->src, put_worker, &cx);
            rc = cx.rc;
        }
    }
    return rc;
}

int jrpc_metrics_write(jrpc_buf_t *out, const jrpc_metrics_read_t *rd)
{
    const jrpc_metrics_t *m = &jrpc_metrics;
    char buf[32];
    int rc = jrpc_expo_family(out, "jrpc_build_info", "gauge", "The broker's version; always 1.");
    const char *ver[2] = { "version", JRPC_VERSION };
    if (rc == 0)
        rc = jrpc_expo_sample(out, "jrpc_build_info", ver, 1, 1);

    if (rc == 0)
        rc = jrpc_expo_family(out, "jrpc_bodies_total", "counter",
                              "Request bodies by transport and how they ended.");
    for (int t = 0; t < JRPC_METRICS_TRANSPORTS; t++)
        for (int o = 0; rc == 0 && o < JRPC_BODY_NOUTCOMES; o++) {
            const char *lab[4] = { "transport", jrpc_metrics_transport_names[t], "outcome",
                                   jrpc_body_class_name(o) };
            rc = jrpc_expo_sample(out, "jrpc_bodies_total", lab, 2, (double)m->bodies[t][o]);
        }

    if (rc == 0)
        rc = jrpc_expo_family(out, "jrpc_calls_total", "counter",
                              "Calls answered, by transport and outcome (error includes "
                              "broker-made errors).");
    for (int t = 0; t < JRPC_METRICS_TRANSPORTS; t++)
        for (int o = 0; rc == 0 && o < 2; o++) {
            const char *lab[4] = { "transport", jrpc_metrics_transport_names[t], "outcome",
                                   o ? "error" : "result" };
            rc = jrpc_expo_sample(out, "jrpc_calls_total", lab, 2, (double)m->calls[t][o]);
        }

    if (rc == 0)
        rc = jrpc_expo_family(out, "jrpc_errors_total", "counter",
                              "Error answers by JSON-RPC code, whoever made them.");
    for (uint32_t i = 0; rc == 0 && i < m->ncodes; i++) {
        snprintf(buf, sizeof buf, "%d", m->codes[i]);
        const char *lab[2] = { "code", buf };
        rc = jrpc_expo_sample(out, "jrpc_errors_total", lab, 1, (double)m->code_n[i]);
    }
    if (rc == 0 && m->code_other) {
        const char *lab[2] = { "code", "other" };
        rc = jrpc_expo_sample(out, "jrpc_errors_total", lab, 1, (double)m->code_other);
    }

    if (rc == 0)
        rc = jrpc_expo_hist(out, "jrpc_batch_size", "Calls per request body.", &m->batch);
    if (rc == 0)
        rc = jrpc_expo_hist(out, "jrpc_call_queue_seconds",
                            "Call submitted to REQUEST sent to a worker.", &m->queue);
    if (rc == 0)
        rc = jrpc_expo_hist(out, "jrpc_call_worker_seconds",
                            "REQUEST sent to the answer received.", &m->worker);
    if (rc == 0)
        rc = jrpc_expo_hist(out, "jrpc_call_seconds",
                            "Call submitted to its answer placed in the reply.", &m->total);

    const scalar_t gauges[] = {
        { "jrpc_bodies_open", "gauge", "Bodies waiting for answers.", rd->bodies_open },
        { "jrpc_calls_inflight", "gauge", "Calls at workers.", rd->calls_inflight },
        { "jrpc_calls_queued", "gauge", "Calls waiting for worker credit.", rd->calls_queued },
        { "jrpc_workers_connected", "gauge", "Workers connected.", rd->workers_connected },
    };
    const scalar_t redis_up = { "jrpc_redis_up", "gauge",
        "1 when the nonce store is connected (only with --keys).", rd->redis_up };
    const scalar_t counters[] = {
        { "jrpc_redis_failures_total", "counter",
          "Nonce claims that failed (timeout, disconnect, error reply).", rd->redis_failures },
        { "jrpc_replays_total", "counter", "Bodies refused as replays (-32005).", rd->replays },
        { "jrpc_signature_failures_total", "counter", "Bodies refused 401 (-32002).",
          rd->signature_failures },
        { "jrpc_acl_denied_total", "counter", "Calls refused by a key's ACL.", rd->acl_denied },
        { "jrpc_late_answers_total", "counter",
          "Answers after their call was cancelled or timed out.", rd->late_answers },
        { "jrpc_redispatched_total", "counter", "Calls sent again after losing their worker.",
          rd->redispatched },
        { "jrpc_calls_lost_total", "counter", "Calls answered -32004.", rd->calls_lost },
        { "jrpc_hedges_total", "counter",
          "Second copies of slow idempotent calls sent to another worker (--hedge-budget).",
          (double)rd->hedges },
        { "jrpc_hedges_won_total", "counter",
          "Hedges answered before the first copy (the first copy's answer dropped).",
          (double)rd->hedges_won },
        { "jrpc_worker_frames_malformed_total", "counter", "Worker frames dropped as malformed.",
          rd->frames_malformed },
        { "jrpc_http_connections", "gauge", "Open HTTP connections (WebSockets included).",
          (double)m->http_connections },
        { "jrpc_ws_connections", "gauge", "Open HTTP connections switched to WebSocket.",
          (double)m->ws_connections },
        { "jrpc_queued_bytes", "gauge",
          "Bytes held for bodies answered before their calls ended (notifications).",
          (double)m->queued_bytes },
        { "jrpc_queue_pushbacks_total", "counter",
          "Times a connection stopped being read: --conn-max-queued-bytes held.",
          (double)m->queue_pushbacks },
        { "jrpc_queue_refused_total", "counter",
          "Bodies refused busy: --max-queued-bytes or --peer-max-queued-bytes held.",
          (double)m->queue_refused },
        { "jrpc_tls_handshakes_total", "counter", "TLS handshakes completed (HTTP listener).",
          (double)m->tls_handshakes },
        { "jrpc_tls_failures_total", "counter",
          "TLS sessions failed: handshake refused, bad record, plaintext to the TLS port.",
          (double)m->tls_failed },
        { "jrpc_methods", "gauge",
          "Method names known to the worker side (served, or awaited at start-up).",
          rd->methods },
        { "jrpc_worker_ready_refused_total", "counter",
          "Worker READYs refused (too many methods, a bad service name).",
          (double)rd->ready_refused },
        { "jrpc_methods_refused_total", "counter",
          "Bare method names refused at READY: another service owns them "
          "(the worker still serves service.method).", (double)rd->methods_refused },
        { "jrpc_worker_ejections_total", "counter",
          "Workers ejected after --eject-after calls timed out in a row.",
          (double)rd->ejections },
    };
    if (rc == 0)
        rc = scalars(out, gauges, sizeof gauges / sizeof gauges[0]);
    if (rc == 0)
        rc = jrpc_expo_family(out, "jrpc_worker_credit", "gauge",
                              "Credit left per worker (its READY name, else its routing id "
                              "in hex).");
    if (rc == 0 && rd->each_credit) {
        credit_ctx_t cx = { out, 0, "jrpc_worker_credit", "worker" };
        rd->each_credit(rd->src, put_credit, &cx);
        rc = cx.rc;
    }
    if (rc == 0)
        rc = jrpc_expo_family(out, "jrpc_rate_limited_calls_total", "counter",
                              "Calls of bodies refused by a rate limit (-32007), by key id "
                              "(\"-\": bodies without a key; \"other\": past 1024 ids).");
    if (rc == 0 && rd->each_limited) {
        credit_ctx_t cx = { out, 0, "jrpc_rate_limited_calls_total", "key" };
        rd->each_limited(rd->limited_src, put_count, &cx);
        rc = cx.rc;
    }
    if (rc == 0)
        rc = scalars(out, &redis_up, 1);
    if (rc == 0)
        rc = jrpc_expo_hist(out, "jrpc_redis_rtt_seconds", "Nonce claim round trip.",
                            &m->redis_rtt);
    if (rc == 0)
        rc = scalars(out, counters, sizeof counters / sizeof counters[0]);
    if (rc == 0)
        rc = jrpc_expo_family(out, "jrpc_ws_closes_total", "counter",
                              "WebSocket close frames the broker sent, by close code.");
    for (int i = 0; rc == 0 && i < JRPC_METRICS_WS_CODES; i++) {
        const char *lab[2] = { "code", ws_code_names[i] };
        rc = jrpc_expo_sample(out, "jrpc_ws_closes_total", lab, 1, (double)m->ws_closes[i]);
    }
    if (rc == 0)
        rc = jrpc_expo_family(out, "jrpc_reloads_total", "counter",
                              "Reloads (SIGHUP) of the key file and CURVE allowlists, by result "
                              "(failed: nothing changed).");
    for (int i = 0; rc == 0 && i < 2; i++) {
        const char *lab[2] = { "result", i ? "failed" : "ok" };
        rc = jrpc_expo_sample(out, "jrpc_reloads_total", lab, 1, (double)m->reloads[i]);
    }
    const scalar_t reload_ts = { "jrpc_reload_last_success_timestamp_seconds", "gauge",
        "Unix time the files in force were read (start-up, then each reload that succeeded).",
        m->reload_last_success };
    if (rc == 0)
        rc = scalars(out, &reload_ts, 1);
    if (rc == 0)
        rc = write_methods(out);
    if (rc == 0)
        rc = write_workers(out, rd);
    return rc;
}
