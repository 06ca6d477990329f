/* jrpc_status_page — see jrpc_status_page.h. The JSON of GET /status, the ring of the
 * last refusals, and the admin page hook serving the built-in status page. */
#include "jrpc_status_page.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "jrpc_broker.h"
#include "jrpc_errors.h"
#include "jrpc_json.h"
#include "jrpc_metrics.h"
#include "jrpc_status_assets.h"   /* generated from broker/status/ (broker/CMakeLists.txt) */

/* ---- the refusal ring ---- */

typedef struct refusal {
    uint64_t at_ns;                             /* jrpc_metrics.now when refused */
    int      code;                              /* JSON-RPC code */
    uint8_t  transport;                         /* jrpc_transport */
    uint8_t  cls;                               /* jrpc_body_class */
    char     reason[JRPC_STATUS_REASON_MAX + 1]; /* NUL-terminated, valid UTF-8 */
} refusal_t;

static struct {
    refusal_t slot[JRPC_STATUS_REFUSALS];
    uint64_t  n;                                /* refusals ever recorded; next slot n % SIZE */
} ring;

void jrpc_status_page_refused(int transport, int cls, int code, const char *reason)
{
    refusal_t *r = &ring.slot[ring.n++ % JRPC_STATUS_REFUSALS];
    r->at_ns = jrpc_metrics.now;
    r->code = code;
    r->transport = (uint8_t)jrpc_metrics_transport(transport);
    r->cls = (uint8_t)(cls >= 0 && cls < JRPC_BODY_NOUTCOMES ? cls : JRPC_BODY_INVALID);
    size_t n = reason ? strnlen(reason, JRPC_STATUS_REASON_MAX + 1) : 0;
    if (n > JRPC_STATUS_REASON_MAX) {   /* cut before a UTF-8 continuation byte's run */
        n = JRPC_STATUS_REASON_MAX;
        while (n > 0 && ((unsigned char)reason[n] & 0xC0) == 0x80)
            n--;
    }
    if (n)
        memcpy(r->reason, reason, n);
    r->reason[n] = '\0';
}

void jrpc_status_page_refused_clear(void)
{
    memset(&ring, 0, sizeof ring);
}

/* ---- GET /status ---- */

/* A string that may not be valid UTF-8 (an endpoint from the command
 * line): as a JSON string, or "" when it is not. */
static int put_str(jrpc_buf_t *out, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (!jrpc_json_utf8_valid(s ? s : "", n))
        n = 0;
    return jrpc_json_write_string(out, s ? s : "", n);
}

/* A refusal's reason: the "reason" string of the error's data object when
 * it is one ({"reason":"..."}, as the broker writes it), else the text. */
static int put_reason(jrpc_buf_t *out, const char *reason)
{
    jrpc_span_t v;
    size_t n = strlen(reason);
    if (n && reason[0] == '{' && jrpc_json_member(reason, n, "reason", &v) == 0 && v.n >= 2 &&
        v.p[0] == '"')
        return jrpc_buf_append(out, v.p, v.n);
    return put_str(out, reason);
}

static int write_refusals(jrpc_buf_t *out)
{
    int rc = jrpc_buf_printf(out, "\"refused_total\":%" PRIu64 ",\"refusals\":[", ring.n);
    uint64_t kept = ring.n < JRPC_STATUS_REFUSALS ? ring.n : JRPC_STATUS_REFUSALS;
    for (uint64_t i = 0; rc == 0 && i < kept; i++) {
        const refusal_t *r = &ring.slot[(ring.n - 1 - i) % JRPC_STATUS_REFUSALS];
        uint64_t age = jrpc_metrics.now > r->at_ns ? (jrpc_metrics.now - r->at_ns) / 1000000 : 0;
        rc = jrpc_buf_printf(out, "%s{\"age_ms\":%" PRIu64 ",\"transport\":\"%s\",\"outcome\":\"%s\","
                  "\"code\":%d,\"message\":", i ? "," : "", age,
                  jrpc_metrics_transport_names[r->transport], jrpc_body_class_name(r->cls), r->code);
        if (rc == 0)
            rc = put_str(out, jrpc_error_message(r->code));
        if (rc == 0)
            rc = jrpc_buf_puts(out, ",\"reason\":");
        if (rc == 0)
            rc = put_reason(out, r->reason);
        if (rc == 0)
            rc = jrpc_buf_putc(out, '}');
    }
    return rc ? rc : jrpc_buf_putc(out, ']');
}

/* The broker-wide call latency (jrpc_call_seconds): bucket bounds in
 * seconds and counts per bucket (not cumulative), the last +Inf. */
static int write_hist(jrpc_buf_t *out, const char *name, const jrpc_hist_t *h)
{
    uint64_t count = 0;
    for (uint32_t i = 0; i <= h->nb; i++)
        count += h->counts[i];
    int rc = jrpc_buf_printf(out, "\"%s\":{\"count\":%" PRIu64 ",\"sum_s\":%.6f,\"le\":[", name, count,
                  (double)h->sum * h->scale);
    for (uint32_t i = 0; rc == 0 && i < h->nb; i++)
        rc = jrpc_buf_printf(out, "%s%s", i ? "," : "", h->le[i]);
    if (rc == 0)
        rc = jrpc_buf_puts(out, "],\"counts\":[");
    for (uint32_t i = 0; rc == 0 && i <= h->nb; i++)
        rc = jrpc_buf_printf(out, "%s%" PRIu64, i ? "," : "", h->counts[i]);
    return rc ? rc : jrpc_buf_puts(out, "]}");
}

static int write_listeners(jrpc_buf_t *out, const jrpc_status_page_info_t *info)
{
    int rc = jrpc_buf_puts(out, "\"listeners\":[");
    for (unsigned i = 0; rc == 0 && info && i < info->nlisteners; i++) {
        const jrpc_status_page_listener_t *l = &info->listeners[i];
        rc = jrpc_buf_printf(out, "%s{\"name\":", i ? "," : "");
        if (rc == 0)
            rc = put_str(out, l->name);
        if (rc == 0)
            rc = jrpc_buf_puts(out, ",\"endpoint\":");
        if (rc == 0)
            rc = put_str(out, l->endpoint);
        if (rc == 0)
            rc = jrpc_buf_printf(out, ",\"tls\":%s}", l->tls ? "true" : "false");
    }
    return rc ? rc : jrpc_buf_putc(out, ']');
}

static int write_guard(jrpc_buf_t *out, struct jrpc_broker *b, const jrpc_status_page_info_t *info)
{
    jrpc_broker_guard_t g = { .refuse_to = INT64_MIN };
    if (b)
        jrpc_broker_guard(b, &g);
    int64_t now = (int64_t)time(NULL);
    bool fenced = g.refuse_to != INT64_MIN && now <= g.refuse_to;
    int rc = jrpc_buf_printf(out, "\"redis\":{\"mode\":");
    if (rc == 0)
        rc = put_str(out, g.on && info && info->redis_mode ? info->redis_mode : "none");
    if (rc == 0)
        rc = jrpc_buf_printf(out, ",\"in_use\":%s,\"up\":%s,\"reconnects\":%" PRIu64 ",\"failures\":%" PRIu64
                  ",\"masters_found\":%" PRIu64 ",\"rtt_ms_avg\":%.3f},",
                  g.on ? "true" : "false", g.up ? "true" : "false", g.reconnects, g.failures,
                  g.masters_found, g.rtt_count ? (double)g.rtt_us_sum / (double)g.rtt_count / 1000.0 : 0.0);
    /* The fence: after Redis lost its memory, bodies signed at or before
     * refuse_to are refused; it ends (no longer refuses fresh bodies) at
     * refuse_to + 1. */
    if (rc == 0)
        rc = jrpc_buf_printf(out, "\"replay\":{\"on\":%s,\"up\":%s,\"memory_losses\":%" PRIu64
                  ",\"lost_at\":%" PRId64 ",\"fence\":{\"active\":%s,\"refuse_signed_to\":%" PRId64
                  ",\"ends_at\":%" PRId64 ",\"ends_in_s\":%" PRId64 "}}",
                  g.on ? "true" : "false", g.up ? "true" : "false", g.epoch_changes, g.lost_at,
                  fenced ? "true" : "false", g.refuse_to == INT64_MIN ? 0 : g.refuse_to,
                  g.refuse_to == INT64_MIN ? 0 : g.refuse_to + 1,
                  fenced ? g.refuse_to + 1 - now : 0);
    if (rc == 0)
        rc = jrpc_buf_printf(out, ",\"draining\":%s", g.draining ? "true" : "false");
    return rc;
}

int jrpc_status_page_write(jrpc_buf_t *out, struct jrpc_broker *b, const jrpc_status_page_info_t *info)
{
    jrpc_metrics_read_t rd = { 0 };
    if (b)
        jrpc_broker_metrics(b, &rd);
    uint64_t now = jrpc_metrics_tick();
    uint64_t up_ms = info && now > info->started_ns ? (now - info->started_ns) / 1000000 : 0;
    int rc = jrpc_buf_puts(out, "{\"version\":");
    if (rc == 0)
        rc = put_str(out, info && info->version ? info->version : "");
    if (rc == 0)
        rc = jrpc_buf_printf(out, ",\"started\":%" PRId64 ",\"uptime_ms\":%" PRIu64 ",\"now\":%" PRId64 ",",
                  info ? info->started_unix : 0, up_ms, (int64_t)time(NULL));
    if (rc == 0)
        rc = write_listeners(out, info);
    if (rc == 0)
        rc = jrpc_buf_putc(out, ',');
    if (rc == 0)
        rc = write_guard(out, b, info);
    if (rc == 0)
        rc = jrpc_buf_printf(out, ",\"bodies_open\":%u,\"bodies_in\":%" PRIu64 ",\"calls_inflight\":%u"
                  ",\"calls_queued\":%u,\"queued_bytes\":%" PRIu64 ",\"workers_connected\":%u"
                  ",\"methods\":%u,\"http_connections\":%" PRId64 ",",
                  rd.bodies_open, jrpc_metrics.bodies_in, rd.calls_inflight, rd.calls_queued,
                  jrpc_metrics.queued_bytes, rd.workers_connected, rd.methods,
                  jrpc_metrics.http_connections);
    if (rc == 0)
        rc = write_refusals(out);
    if (rc == 0)
        rc = jrpc_buf_putc(out, ',');
    if (rc == 0)
        rc = write_hist(out, "latency", &jrpc_metrics.total);
    return rc ? rc : jrpc_buf_putc(out, '}');
}

/* ---- the admin's page hook ---- */

#define CSP "Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; " \
            "connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; " \
            "frame-ancestors 'none'\r\nX-Content-Type-Options: nosniff\r\n"
#define JSON_TYPE "application/json; charset=utf-8"

int jrpc_status_page_serve(struct jrpc_broker *b, const jrpc_status_page_info_t *info, const char *path,
                     size_t plen, jrpc_buf_t *out, const char **ctype, const char **headers)
{
#define IS(lit) (plen == sizeof(lit) - 1 && memcmp(path, lit, plen) == 0)
    const unsigned char *body = NULL;
    size_t blen = 0;
    *headers = CSP;
    if (IS("/")) {
        body = jrpc_status_asset_html, blen = jrpc_status_asset_html_len;
        *ctype = "text/html; charset=utf-8";
    } else if (IS("/status.js")) {
        body = jrpc_status_asset_js, blen = jrpc_status_asset_js_len;
        *ctype = "text/javascript; charset=utf-8";
    } else if (IS("/status.css")) {
        body = jrpc_status_asset_css, blen = jrpc_status_asset_css_len;
        *ctype = "text/css; charset=utf-8";
    } else if (IS("/status")) {
        *ctype = JSON_TYPE;
        return jrpc_status_page_write(out, b, info);
    } else if (IS("/status/workers") && b) {
        *ctype = JSON_TYPE;
        return jrpc_broker_status_workers(b, out);
    } else if (IS("/status/methods") && b) {
        *ctype = JSON_TYPE;
        return jrpc_broker_status_methods(b, out);
    } else {
        return -ENOENT;
    }
#undef IS
    return jrpc_buf_append(out, body, blen);
}
