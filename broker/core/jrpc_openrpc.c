/* jrpc_openrpc — see jrpc_openrpc.h. */
#include "jrpc_openrpc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "jrpc_json.h"

#define PUT(s) jrpc_buf_append(out, (s), strlen(s))

static int put_span(jrpc_buf_t *out, jrpc_span_t s)
{
    return jrpc_buf_append(out, s.p, s.n);
}

/* One method object. 0, -ENOMEM, or JRPC_JSON_EUNREPR (a name that is
 * not UTF-8: the caller drops the object). */
static int put_method(jrpc_buf_t *out, const jrpc_method_info_t *m)
{
    int rc;
    if ((rc = PUT("{\"name\":")) < 0 || (rc = jrpc_json_write_string(out, m->canonical.p,
                                                                      m->canonical.n)) < 0)
        return rc;
    if ((rc = PUT(",\"params\":")) < 0 ||
        (rc = m->params.n ? put_span(out, m->params) : PUT("[]")) < 0)
        return rc;
    jrpc_span_t schema;
    if (m->result.n == 0)
        rc = PUT(",\"result\":{\"name\":\"result\",\"schema\":{}}");
    else if (jrpc_json_member(m->result.p, m->result.n, "schema", &schema) == 0)
        rc = PUT(",\"result\":") < 0 ? -ENOMEM : put_span(out, m->result);
    else if ((rc = PUT(",\"result\":{\"name\":\"result\",\"schema\":")) == 0 &&
             (rc = put_span(out, m->result)) == 0)
        rc = PUT("}");
    if (rc < 0)
        return rc;
    if (m->service.n) {
        if ((rc = PUT(",\"x-jrpc-service\":")) < 0 ||
            (rc = jrpc_json_write_string(out, m->service.p, m->service.n)) < 0 ||
            (rc = PUT(",\"x-jrpc-method\":")) < 0 ||
            (rc = jrpc_json_write_string(out, m->method.p, m->method.n)) < 0)
            return rc;
    }
    if ((rc = PUT(m->owns_bare ? ",\"x-jrpc-bare\":true" : ",\"x-jrpc-bare\":false")) < 0 ||
        (rc = PUT(m->idempotent ? ",\"x-jrpc-idempotent\":true" : ",\"x-jrpc-idempotent\":false")) <
            0 ||
        (rc = PUT(m->json ? ",\"x-jrpc-json\":true" : ",\"x-jrpc-json\":false")) < 0)
        return rc;
    char num[48];
    int k = snprintf(num, sizeof num, ",\"x-jrpc-workers\":%u}", m->workers);
    return jrpc_buf_append(out, num, (size_t)k);
}

int jrpc_openrpc_write_methods(jrpc_buf_t *out, const jrpc_method_info_t *ms, size_t n,
                               const char *version)
{
    size_t len0 = out->len;
    int rc;
    if ((rc = PUT("{\"openrpc\":\"" JRPC_OPENRPC_VERSION "\",\"info\":{\"title\":\"jrpc-broker\","
                  "\"description\":\"Methods served now, by service: call a service's method "
                  "as service.method, or by its bare name where x-jrpc-bare is true.\","
                  "\"version\":")) < 0 ||
        (rc = jrpc_json_write_string(out, version, strlen(version))) < 0 ||
        (rc = PUT("},\"methods\":[")) < 0)
        goto fail;
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        size_t mark = out->len;
        if (!first && (rc = PUT(",")) < 0)
            goto fail;
        if ((rc = put_method(out, &ms[i])) == -ENOMEM)
            goto fail;
        if (rc < 0) {   /* not UTF-8: left out */
            out->len = mark;
            continue;
        }
        first = false;
    }
    if ((rc = PUT("]}")) < 0)
        goto fail;
    return 0;
fail:
    out->len = len0;
    return -ENOMEM;
}

typedef struct collect {
    jrpc_method_info_t   *v;
    size_t                n, cap;
    bool                  nomem;
    jrpc_openrpc_allow_fn allow;
    void                 *arg;
} collect_t;

static void on_method(void *arg, const jrpc_method_info_t *m)
{
    collect_t *c = arg;
    if (c->nomem || (c->allow && !c->allow(c->arg, m->canonical)))
        return;
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        jrpc_method_info_t *v = realloc(c->v, cap * sizeof *v);
        if (v == NULL) {
            c->nomem = true;
            return;
        }
        c->v = v;
        c->cap = cap;
    }
    c->v[c->n++] = *m;
}

static int by_name(const void *a, const void *b)
{
    const jrpc_span_t *x = &((const jrpc_method_info_t *)a)->canonical;
    const jrpc_span_t *y = &((const jrpc_method_info_t *)b)->canonical;
    int c = memcmp(x->p, y->p, x->n < y->n ? x->n : y->n);
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

int jrpc_openrpc_write(jrpc_buf_t *out, jrpc_workers_t *w, const char *version,
                       jrpc_openrpc_allow_fn allow, void *arg)
{
    collect_t c = { .allow = allow, .arg = arg };
    jrpc_workers_each_method(w, on_method, &c);
    int rc = -ENOMEM;
    if (!c.nomem) {
        if (c.n > 1)
            qsort(c.v, c.n, sizeof *c.v, by_name);
        rc = jrpc_openrpc_write_methods(out, c.v, c.n, version);
    }
    free(c.v);
    return rc;
}
