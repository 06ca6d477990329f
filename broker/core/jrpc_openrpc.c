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

typedef struct decl_copy {
    jrpc_buf_t *out;
    int         rc;
} decl_copy_t;

static void copy_member(void *arg, jrpc_span_t k, jrpc_span_t v)
{
    decl_copy_t *c = arg;
    if (c->rc < 0 || k.n == 0 || (k.n == 6 && memcmp(k.p, "params", 6) == 0) ||
        (k.n == 6 && memcmp(k.p, "result", 6) == 0))
        return;
    if ((c->rc = jrpc_buf_append(c->out, ",", 1)) < 0 ||
        (c->rc = jrpc_json_write_string(c->out, k.p, k.n)) < 0 ||
        (c->rc = jrpc_buf_append(c->out, ":", 1)) < 0)
        return;
    c->rc = put_span(c->out, v);
}

/* The members of a method's declaration besides params and result
 * (summary, description, paramStructure, x-*: what
 * jrpc_openrpc_decl_check let through), copied. 0 or -ENOMEM. */
static int put_decl_members(jrpc_buf_t *out, jrpc_span_t decl)
{
    decl_copy_t c = { out, 0 };
    if (jrpc_json_each_member(decl.p, decl.n, 128, copy_member, &c) < 0)
        return 0;   /* checked when it was declared: cannot happen */
    return c.rc;
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
    if (rc < 0 || (m->decl.n && (rc = put_decl_members(out, m->decl)) < 0))
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

/* ---- what a worker declares, checked (jrpc_openrpc_decl_check) ---- */

#define DECL_DEPTH 32   /* the deepest schema nesting a declaration may have */

static bool lit_is(jrpc_span_t s, const char *lit)
{
    return s.n == strlen(lit) && memcmp(s.p, lit, s.n) == 0;
}

static bool is_string(jrpc_span_t v)
{
    return v.n >= 2 && v.p[0] == '"';
}

static bool is_bool(jrpc_span_t v)
{
    return lit_is(v, "true") || lit_is(v, "false");
}

static bool is_number(jrpc_span_t v)
{
    return v.n > 0 && (v.p[0] == '-' || (v.p[0] >= '0' && v.p[0] <= '9'));
}

/* The number v is (false: not a number, or too long to read). */
static bool number_of(jrpc_span_t v, double *d)
{
    char buf[64];
    if (!is_number(v) || v.n >= sizeof buf)
        return false;
    memcpy(buf, v.p, v.n);
    buf[v.n] = '\0';
    *d = strtod(buf, NULL);
    return true;
}

/* A non-negative integer (JSON Schema's "integer": 3 and 3.0 alike). */
static bool is_count(jrpc_span_t v)
{
    double d;
    return number_of(v, &d) && d >= 0 && d < 9e15 && d == (double)(long long)d;
}

/* The next element of the JSON array a (valid JSON, checked by the
 * caller): *pos starts at 0; false at the end. */
static bool array_next(jrpc_span_t a, size_t *pos, jrpc_span_t *v)
{
    size_t i = *pos ? *pos : 1;
    while (i < a.n && (a.p[i] == ' ' || a.p[i] == '\t' || a.p[i] == '\n' || a.p[i] == '\r' ||
                       a.p[i] == ','))
        i++;
    if (i >= a.n || a.p[i] == ']')
        return false;
    size_t start = i;
    if (a.p[i] == '"' || a.p[i] == '{' || a.p[i] == '[') {
        int depth = 0;
        bool str = false;
        for (; i < a.n; i++) {
            char ch = a.p[i];
            if (str) {
                if (ch == '\\')
                    i++;
                else if (ch == '"')
                    str = false;
            } else if (ch == '"') {
                str = true;
            } else if (ch == '{' || ch == '[') {
                depth++;
            } else if (ch == '}' || ch == ']') {
                depth--;
            }
            if (!str && depth == 0) {
                i++;
                break;
            }
        }
    } else {
        while (i < a.n && a.p[i] != ',' && a.p[i] != ']' && a.p[i] != ' ' && a.p[i] != '\t' &&
               a.p[i] != '\n' && a.p[i] != '\r')
            i++;
    }
    *v = (jrpc_span_t){ a.p + start, i - start };
    *pos = i;
    return true;
}

/* Whether the array's elements are pairwise different texts (JSON
 * Schema's uniqueItems as far as bytes tell). Quadratic: arrays in a
 * declaration are bounded by its size. */
static bool unique_items(jrpc_span_t a)
{
    size_t i = 0;
    jrpc_span_t x;
    while (array_next(a, &i, &x)) {
        size_t j = i;
        jrpc_span_t y;
        while (array_next(a, &j, &y))
            if (x.n == y.n && memcmp(x.p, y.p, x.n) == 0)
                return false;
    }
    return true;
}

typedef bool (*elem_ok_fn)(jrpc_span_t v, int depth);

/* An array whose elements each pass ok (min: the fewest allowed;
 * unique: uniqueItems). */
static bool array_ok(jrpc_span_t a, elem_ok_fn ok, int depth, size_t min, bool unique)
{
    if (a.n == 0 || a.p[0] != '[')
        return false;
    size_t i = 0, k = 0;
    jrpc_span_t v;
    while (array_next(a, &i, &v)) {
        if (ok && !ok(v, depth))
            return false;
        k++;
    }
    return k >= min && (!unique || unique_items(a));
}

static bool schema_ok(jrpc_span_t v, int depth);

static bool string_ok(jrpc_span_t v, int depth)
{
    (void)depth;
    return is_string(v);
}

static bool simple_type_ok(jrpc_span_t v, int depth)
{
    (void)depth;
    static const char *const types[] = { "\"array\"",  "\"boolean\"", "\"integer\"", "\"null\"",
                                         "\"number\"", "\"object\"",  "\"string\"" };
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (lit_is(v, types[i]))
            return true;
    return false;
}

typedef struct walk {
    int  depth;
    int  kind;   /* what the members' values must be: 0 schemas, 1 schemas or string arrays */
    bool ok;
} walk_t;

static void map_member(void *arg, jrpc_span_t name, jrpc_span_t value)
{
    walk_t *w = arg;
    (void)name;
    if (w->ok && !schema_ok(value, w->depth) &&
        !(w->kind == 1 && array_ok(value, string_ok, 0, 0, true)))
        w->ok = false;
}

/* An object whose every member is a schema (kind 0), or a schema or an
 * array of unique strings (kind 1: "dependencies"). */
static bool map_ok(jrpc_span_t v, int depth, int kind)
{
    walk_t w = { depth, kind, true };
    return v.n > 0 && v.p[0] == '{' &&
           jrpc_json_each_member(v.p, v.n, DECL_DEPTH + 4, map_member, &w) == 0 && w.ok;
}

/* One keyword of a schema object, as @json-schema-tools/meta-schema
 * (draft-07) wants it; keywords it does not name are anything. */
static bool keyword_ok(jrpc_span_t k, jrpc_span_t v, int depth)
{
    static const char *const strings[] = { "$id", "$schema", "$ref", "$comment", "title",
                                           "description", "pattern", "format",
                                           "contentMediaType", "contentEncoding" };
    static const char *const numbers[] = { "maximum", "exclusiveMaximum", "minimum",
                                           "exclusiveMinimum" };
    static const char *const counts[] = { "maxLength", "minLength", "maxItems", "minItems",
                                          "maxProperties", "minProperties" };
    static const char *const schemas[] = { "additionalItems", "contains", "additionalProperties",
                                           "propertyNames", "if", "then", "else", "not" };
    static const char *const arrays[] = { "allOf", "anyOf", "oneOf" };
    static const char *const maps[] = { "definitions", "properties", "patternProperties" };
#define IN(list) for (size_t i = 0; i < sizeof list / sizeof *list; i++) if (lit_is(k, list[i]))
    IN(strings) return is_string(v);
    IN(numbers) return is_number(v);
    IN(counts) return is_count(v);
    IN(schemas) return schema_ok(v, depth);
    IN(arrays) return array_ok(v, schema_ok, depth, 1, false);
    IN(maps) return map_ok(v, depth, 0);
#undef IN
    if (lit_is(k, "readOnly") || lit_is(k, "uniqueItems"))
        return is_bool(v);
    double d;
    if (lit_is(k, "multipleOf"))
        return number_of(v, &d) && d > 0;
    if (lit_is(k, "examples"))
        return v.p[0] == '[';
    if (lit_is(k, "enum"))
        return array_ok(v, NULL, depth, 1, true);
    if (lit_is(k, "required"))
        return array_ok(v, string_ok, depth, 0, true);
    if (lit_is(k, "items"))
        return schema_ok(v, depth) || array_ok(v, schema_ok, depth, 1, false);
    if (lit_is(k, "dependencies"))
        return map_ok(v, depth, 1);
    if (lit_is(k, "type"))
        return simple_type_ok(v, depth) || array_ok(v, simple_type_ok, depth, 1, true);
    return true;
}

typedef struct schema_walk {
    int  depth;
    bool ok;
} schema_walk_t;

static void schema_member(void *arg, jrpc_span_t name, jrpc_span_t value)
{
    schema_walk_t *w = arg;
    if (w->ok && !keyword_ok(name, value, w->depth))
        w->ok = false;
}

/* A JSON Schema (an object of keywords, or a boolean) nested at most
 * DECL_DEPTH deep. */
static bool schema_ok(jrpc_span_t v, int depth)
{
    if (is_bool(v))
        return true;
    if (v.n == 0 || v.p[0] != '{' || depth >= DECL_DEPTH)
        return false;
    schema_walk_t w = { depth + 1, true };
    return jrpc_json_each_member(v.p, v.n, 2 * DECL_DEPTH + 8, schema_member, &w) == 0 && w.ok;
}

/* A content descriptor's members (OpenRPC: name, schema required; the
 * others typed; x-* anything; nothing else). */
typedef struct desc_walk {
    bool ok, name, schema;
} desc_walk_t;

static void desc_member(void *arg, jrpc_span_t k, jrpc_span_t v)
{
    desc_walk_t *w = arg;
    if (!w->ok)
        return;
    if (lit_is(k, "name")) {
        w->name = true;
        w->ok = is_string(v) && v.n > 2;
    } else if (lit_is(k, "schema")) {
        w->schema = true;
        w->ok = schema_ok(v, 0);
    } else if (lit_is(k, "description") || lit_is(k, "summary")) {
        w->ok = is_string(v);
    } else if (lit_is(k, "required") || lit_is(k, "deprecated")) {
        w->ok = is_bool(v);
    } else {
        w->ok = k.n >= 2 && memcmp(k.p, "x-", 2) == 0;
    }
}

static bool descriptor_ok(jrpc_span_t v, int depth)
{
    (void)depth;
    desc_walk_t w = { true, false, false };
    return v.n > 0 && v.p[0] == '{' &&
           jrpc_json_each_member(v.p, v.n, 2 * DECL_DEPTH + 8, desc_member, &w) == 0 && w.ok &&
           w.name && w.schema;
}

typedef struct decl_walk {
    const char *why;   /* NULL: fine so far */
} decl_walk_t;

static void decl_member(void *arg, jrpc_span_t k, jrpc_span_t v)
{
    decl_walk_t *w = arg;
    jrpc_span_t inner;
    if (w->why)
        return;
    if (lit_is(k, "params")) {
        if (!array_ok(v, descriptor_ok, 0, 0, false))
            w->why = "bad_params";
    } else if (lit_is(k, "result")) {
        bool wrapped = v.n > 0 && v.p[0] == '{' &&
                       jrpc_json_member(v.p, v.n, "schema", &inner) == 0;
        if (!(wrapped ? descriptor_ok(v, 0) : schema_ok(v, 0)))
            w->why = "bad_result";
    } else if (lit_is(k, "summary") || lit_is(k, "description")) {
        if (!is_string(v))
            w->why = "bad_member";
    } else if (lit_is(k, "paramStructure")) {
        if (!lit_is(v, "\"by-name\"") && !lit_is(v, "\"by-position\"") && !lit_is(v, "\"either\""))
            w->why = "bad_member";
    } else if (k.n >= 2 && memcmp(k.p, "x-", 2) == 0) {
        if (k.n >= 7 && memcmp(k.p, "x-jrpc-", 7) == 0)
            w->why = "reserved_member";   /* the broker's own facts */
    } else {
        w->why = "unknown_member";
    }
}

int jrpc_openrpc_decl_check(const char *p, size_t n, const char **why)
{
    decl_walk_t w = { NULL };
    if (n == 0 || p[0] != '{')
        w.why = "not_an_object";
    else if (jrpc_json_each_member(p, n, 2 * DECL_DEPTH + 8, decl_member, &w) < 0 && !w.why)
        w.why = "not_json";
    if (why)
        *why = w.why ? w.why : "";
    return w.why ? -EINVAL : 0;
}
