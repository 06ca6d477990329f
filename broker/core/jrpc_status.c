/* jrpc_status — the workers and the methods as JSON, for the status page
 * (/status/workers, /status/methods on the admin listener; issue 33). Part
 * of jrpc_workers (the state is in jrpc_workers_int.h); knows no HTTP.
 *
 * Built only when asked, from what the hot path counts anyway (the
 * jrpc_metrics per-method records, the workers' own counters): nothing here
 * runs per call. Every string a worker or a client chose (worker names,
 * method names) is JSON-escaped, '<', '>' and '&' included, and bytes that
 * are not UTF-8 become U+FFFD: the page may put them in HTML. */
#include "jrpc_workers_int.h"

#include <stdio.h>

#include "jrpc_json.h"

/* Appends s[0..n) as a JSON string (see above). */
static int put_str(jrpc_buf_t *out, const char *s, size_t n)
{
    bool utf8 = jrpc_json_utf8_valid(s, n);
    int rc = jrpc_buf_putc(out, '"');
    for (size_t i = 0; rc == 0 && i < n; i++) {
        uint8_t c = (uint8_t)s[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            rc = jrpc_buf_append(out, esc, 2);
        } else if (c < 0x20 || c == '<' || c == '>' || c == '&' || c == 0x7f) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            rc = jrpc_buf_append(out, esc, 6);
        } else if (c >= 0x80 && !utf8) {
            rc = jrpc_buf_puts(out, "\\ufffd");
        } else {
            rc = jrpc_buf_putc(out, (char)c);
        }
    }
    return rc == 0 ? jrpc_buf_putc(out, '"') : rc;
}

/* Appends key (JSON text: the comma, the name, the colon) and s as a JSON
 * string, when rc is still 0. */
static int put_kv(jrpc_buf_t *out, int rc, const char *key, const char *s)
{
    if (rc == 0)
        rc = jrpc_buf_puts(out, key);
    return rc == 0 ? put_str(out, s, strlen(s)) : rc;
}

static int put_worker(jrpc_buf_t *out, const worker_t *wk, bool first)
{
    char id[2 * MAX_ROUTING_ID + 1];
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < wk->idlen; i++) {
        id[2 * i] = hex[(uint8_t)wk->id[i] >> 4];
        id[2 * i + 1] = hex[(uint8_t)wk->id[i] & 15];
    }
    uint64_t now = uv_hrtime(), age = now > wk->last_seen ? now - wk->last_seen : 0;
    id[2 * wk->idlen] = '\0';
    int rc = jrpc_buf_printf(out, "%s{\"id\":\"%s\"", first ? "" : ",", id);
    rc = put_kv(out, rc, ",\"name\":", wk->name);
    rc = put_kv(out, rc, ",\"service\":", "");
    rc = put_kv(out, rc, ",\"host\":", wk->host);
    if (rc == 0)
        rc = jrpc_buf_printf(out, ",\"credit\":%u,\"in_flight\":%u,\"answered\":%llu,\"errors\":%llu,"
                     "\"timeouts\":%llu,\"ejections\":%u,\"last_heard_ms\":%llu,"
                     "\"ejected\":%s,\"draining\":%s,\"methods\":%u}",
                     wk->credit, wk->inflight, (unsigned long long)wk->answered,
                     (unsigned long long)wk->errors, (unsigned long long)wk->timeouts_all,
                     wk->ejections, (unsigned long long)(age / NS_PER_MS),
                     wk->ejected_until ? "true" : "false", wk->draining ? "true" : "false",
                     wk->nmethods);
    return rc;
}

int jrpc_workers_status(jrpc_workers_t *w, jrpc_buf_t *out)
{
    int rc = jrpc_buf_puts(out, "{\"workers\":[");
    bool first = true;
    for (const worker_t *wk = w->workers; rc == 0 && wk; wk = wk->next) {
        if (wk->dead)
            continue;
        rc = put_worker(out, wk, first);
        first = false;
    }
    return rc == 0 ? jrpc_buf_puts(out, "]}") : rc;
}

/* Seconds to ms with 3 decimals (the histograms' bounds are 0.1 ms apart
 * at best: more digits would be noise). */
static double to_ms(double s)
{
    return (double)(int64_t)(s * 1e6 + 0.5) / 1e3;
}

int jrpc_workers_status_methods(jrpc_workers_t *w, jrpc_buf_t *out)
{
    const jrpc_metrics_t *m = &jrpc_metrics;
    /* Live workers per record: one walk of the method table (a method
     * entry without a record counts under "other"). */
    uint32_t *nw = calloc(m->nmeth ? m->nmeth : 1, sizeof *nw);
    if (nw == NULL)
        return -ENOMEM;
    for (uint32_t b = 0; b < w->mtab_size; b++)
        for (const method_t *mt = w->mtab[b]; mt; mt = mt->next)
            if (mt->stat < m->nmeth)
                nw[mt->stat] += mt->nworkers;
    int rc = jrpc_buf_puts(out, "{\"methods\":[");
    for (uint32_t i = 0; rc == 0 && i < m->nmeth; i++) {
        const jrpc_metrics_method_t *r = &m->meth[i];
        uint64_t calls = 0;
        for (int o = 0; o < JRPC_CALL_NOUTCOMES; o++)
            calls += r->calls[o];
        rc = put_kv(out, 0, i ? ",{\"service\":" : "{\"service\":", r->service);
        rc = put_kv(out, rc, ",\"method\":", r->method);
        if (rc == 0)
            rc = jrpc_buf_printf(out, ",\"calls\":%llu,\"ok\":%llu,\"errors\":%llu,"
                                 "\"timeouts\":%llu,\"p50_ms\":%.3f,\"p99_ms\":%.3f,"
                                 "\"workers\":%u,\"other\":%s}",
                         (unsigned long long)calls, (unsigned long long)r->calls[JRPC_CALL_OK],
                         (unsigned long long)(calls - r->calls[JRPC_CALL_OK]),
                         (unsigned long long)r->calls[JRPC_CALL_TIMEOUT],
                         to_ms(jrpc_hist_quantile(&r->total, 0.50)),
                         to_ms(jrpc_hist_quantile(&r->total, 0.99)), nw[i],
                         i == JRPC_METRICS_OTHER ? "true" : "false");
    }
    if (rc == 0)
        rc = jrpc_buf_printf(out, "],\"max_methods\":%u}", m->max_meth);
    free(nw);
    return rc;
}
