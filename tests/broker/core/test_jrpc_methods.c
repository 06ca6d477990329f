/* Unit tests of the method table with services (broker/core/jrpc_methods.c,
 * compiled in with the files beside it) and of the OpenRPC document built
 * from it (jrpc_openrpc.c): who owns a bare name, its release, qualified
 * lookups, the canonical names ACLs match, a bad service refused, schemas
 * kept per method. Workers "A".."C" are DEALERs nobody reads on an inproc
 * ROUTER (workers_harness.h); READYs are handed to on_message() directly. */
#include "workers_harness.h"
#include "../../../broker/core/jrpc_openrpc.c"

/* READY from id serving the NULL-terminated methods (the first idem of
 * them declared idempotent), with service and schemas when not NULL. */
static void ready(jrpc_workers_t *w, char id, const char *service, const char *schemas,
                  uint32_t idem, const char *const *methods)
{
    size_t n = 0;
    while (methods[n])
        n++;
    jrpc_wire_ready_opts_t ro = { .service = service, .schemas = schemas,
                                  .idempotent = methods, .nidempotent = idem };
    jrpc_buf_t b;
    jrpc_buf_init(&b);
    assert_int_equal(jrpc_wire_put_ready_opts(&b, 1000, methods, n, &ro), 0);
    jrpc_metrics_tick();
    on_message(w, &(peer_t){ .id = &id, .idlen = 1 }, b.p, b.len);
    jrpc_buf_dispose(&b);
}

static jrpc_span_t S(const char *s)
{
    return (jrpc_span_t){ s, strlen(s) };
}

/* The worker a call of name goes to now (dispatched, then cancelled), or
 * NULL when the dispatch fails. */
static worker_t *route(jrpc_workers_t *w, const char *name)
{
    uint32_t h;
    jrpc_span_t none = { NULL, 0 };
    if (jrpc_workers_dispatch(w, S(name), none, none, none, 60000, 0, w, 0, &h) < 0)
        return NULL;
    worker_t *wk = w->slots[h].worker;
    jrpc_workers_cancel(w, h, JRPC_CANCEL_GONE);
    return wk;
}

static bool canonical_is(jrpc_workers_t *w, const char *name, const char *want,
                         const char *want_service)
{
    jrpc_span_t svc;
    jrpc_span_t c = jrpc_workers_canonical(w, S(name), &svc);
    return c.n == strlen(want) && memcmp(c.p, want, c.n) == 0 &&
           svc.n == strlen(want_service) && (svc.n == 0 || memcmp(svc.p, want_service, svc.n) == 0);
}

static const char *const AB[] = { "add", "count", NULL };

/* The first service to declare a bare name owns it; a second service's
 * worker is refused it (counted) but serves service.method; the owner
 * gets every bare call; canonical names follow. */
static void test_bare_name_ownership(void **state)
{
    (void)state;
    jrpc_workers_t *w = make(0);
    ready(w, 'A', "billing", NULL, 0, AB);
    ready(w, 'B', "shipping", NULL, 0, AB);
    worker_t *a = find(w, 'A'), *b = find(w, 'B');
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(w->methods_refused, 2);
    assert_int_equal(w->ready_refused, 0);
    assert_string_equal(a->service, "billing");
    for (int i = 0; i < 20; i++)
        assert_ptr_equal(route(w, "count"), a);
    assert_ptr_equal(route(w, "billing.count"), a);
    assert_ptr_equal(route(w, "shipping.count"), b);
    assert_ptr_equal(route(w, "shipping.add"), b);
    assert_null(route(w, "nosuch.add"));
    assert_null(route(w, "billing."));
    assert_null(route(w, ".add"));
    assert_true(canonical_is(w, "add", "billing.add", "billing"));
    assert_true(canonical_is(w, "billing.add", "billing.add", "billing"));
    assert_true(canonical_is(w, "shipping.add", "shipping.add", "shipping"));
    assert_true(canonical_is(w, "other", "other", ""));
    assert_true(jrpc_workers_serves(w, "count", 5));
    assert_true(jrpc_workers_serves(w, "shipping.count", 14));
    assert_false(jrpc_workers_serves(w, "shipping.nope", 13));
    /* the method name sent to the worker is the bare one */
    method_t *m = method_target(method_lookup(w, "shipping.add", 12));
    jrpc_span_t wire = method_wire_name(m);
    assert_int_equal(wire.n, 3);
    assert_memory_equal(wire.p, "add", 3);
    /* a second billing worker shares the bare name */
    ready(w, 'C', "billing", NULL, 0, AB);
    assert_int_equal(w->methods_refused, 2);
    worker_t *c = find(w, 'C');
    bool seen_c = false;   /* it has the most credit free: it gets calls now */
    for (int i = 0; i < 10; i++) {
        worker_t *to = route(w, "add");
        seen_c |= to == c;
        assert_true(to == a || to == c);
    }
    assert_true(seen_c);
    reap(w);
    destroy(w);
}

/* When the owner's last worker leaves, the bare name is free: the next
 * READY declaring it takes it (not the worker refused before). */
static void test_bare_name_release(void **state)
{
    (void)state;
    jrpc_workers_t *w = make(0);
    ready(w, 'A', "billing", NULL, 0, AB);
    ready(w, 'B', "shipping", NULL, 0, AB);
    worker_kill(w, find(w, 'A'), "test");
    reap(w);
    assert_null(route(w, "add"));   /* free, and B was refused it */
    assert_null(route(w, "billing.add"));
    assert_true(canonical_is(w, "add", "add", ""));
    ready(w, 'C', "shipping", NULL, 0, AB);   /* takes it */
    worker_t *b = find(w, 'B'), *c = find(w, 'C');
    for (int i = 0; i < 6; i++) {
        worker_t *to = route(w, "add");
        assert_true(to == b || to == c);
    }
    assert_true(canonical_is(w, "add", "shipping.add", "shipping"));
    worker_kill(w, b, "test");
    worker_kill(w, c, "test");
    reap(w);
    assert_int_equal(w->nmethods, 0);   /* aliases untied: all swept */
    assert_int_equal(w->nsvc_methods, 0);
    /* a no-service worker now takes the bare name, and keeps it */
    ready(w, 'A', NULL, NULL, 0, AB);
    ready(w, 'B', "late", NULL, 0, AB);
    assert_int_equal(w->methods_refused, 4);
    assert_ptr_equal(route(w, "add"), find(w, 'A'));
    assert_ptr_equal(route(w, "late.add"), find(w, 'B'));
    /* and a no-service worker is refused a bare name a service owns */
    worker_kill(w, find(w, 'A'), "test");
    reap(w);
    ready(w, 'C', "svc", NULL, 0, AB);
    ready(w, 'A', NULL, NULL, 0, AB);
    assert_int_equal(find(w, 'A')->nmethods, 0);
    assert_ptr_equal(route(w, "add"), find(w, 'C'));
    reap(w);
    destroy(w);
}

/* An exact no-service name with a dot wins over service.method; with no
 * service anywhere nothing is split. */
static void test_qualified_lookup(void **state)
{
    (void)state;
    jrpc_workers_t *w = make(0);
    static const char *const dotted[] = { "a.add", NULL };
    ready(w, 'A', NULL, NULL, 0, dotted);
    assert_int_equal(w->nsvc_methods, 0);
    assert_ptr_equal(route(w, "a.add"), find(w, 'A'));
    assert_null(route(w, "add"));
    ready(w, 'B', "a", NULL, 0, AB);
    assert_ptr_equal(route(w, "a.add"), find(w, 'A'));   /* the exact name wins */
    assert_ptr_equal(route(w, "add"), find(w, 'B'));     /* its bare name is free */
    assert_ptr_equal(route(w, "a.count"), find(w, 'B'));
    reap(w);
    destroy(w);
}

/* Service names: [a-z0-9][a-z0-9_-]{0,62}; a READY with another is refused
 * whole (counted, nothing added). */
static void test_bad_service_refused(void **state)
{
    (void)state;
    assert_true(jrpc_workers_service_ok("a", 1));
    assert_true(jrpc_workers_service_ok("billing-v2_x", 12));
    char long63[64];
    memset(long63, 'a', 63);
    assert_true(jrpc_workers_service_ok(long63, 63));
    assert_false(jrpc_workers_service_ok(long63, 64));
    assert_false(jrpc_workers_service_ok("", 0));
    assert_false(jrpc_workers_service_ok("-a", 2));
    assert_false(jrpc_workers_service_ok("_a", 2));
    assert_false(jrpc_workers_service_ok("Billing", 7));
    assert_false(jrpc_workers_service_ok("a.b", 3));
    assert_false(jrpc_workers_service_ok("a b", 3));
    jrpc_workers_t *w = make(0);
    ready(w, 'A', "Bad Name!", NULL, 0, AB);
    assert_null(find(w, 'A'));
    assert_int_equal(w->ready_refused, 1);
    assert_int_equal(w->nmethods, 0);
    ready(w, 'A', "", NULL, 0, AB);
    assert_int_equal(w->ready_refused, 2);
    reap(w);
    destroy(w);
}

/* A call waiting (start-up grace) for a bare name or for service.method
 * goes to the service's worker when it comes. */
static void test_grace_queue_adopted(void **state)
{
    (void)state;
    jrpc_workers_t *w = make(0);
    w->grace_until = UINT64_MAX;
    uint32_t h1, h2;
    jrpc_span_t none = { NULL, 0 };
    assert_int_equal(jrpc_workers_dispatch(w, S("add"), none, none, none, 60000, 0, w, 1, &h1), 0);
    assert_int_equal(jrpc_workers_dispatch(w, S("billing.count"), none, none, none, 60000, 0, w, 2,
                                           &h2), 0);
    assert_int_equal(w->queued, 2);
    ready(w, 'A', "billing", NULL, 0, AB);
    assert_int_equal(w->queued, 0);
    assert_ptr_equal(w->slots[h1].worker, find(w, 'A'));
    assert_ptr_equal(w->slots[h2].worker, find(w, 'A'));
    jrpc_workers_cancel(w, h1, JRPC_CANCEL_GONE);
    jrpc_workers_cancel(w, h2, JRPC_CANCEL_GONE);
    w->grace_until = 0;
    reap(w);
    destroy(w);
}

typedef struct seen {
    char     names[8][64];
    jrpc_method_info_t mi[8];
    int      n;
} seen_t;

static void on_method_seen(void *arg, const jrpc_method_info_t *m)
{
    seen_t *s = arg;
    assert_true(s->n < 8);
    snprintf(s->names[s->n], 64, "%.*s", (int)m->canonical.n, m->canonical.p);
    s->mi[s->n++] = *m;
}

static bool allow_billing(void *arg, jrpc_span_t canonical)
{
    (void)arg;
    return canonical.n > 8 && memcmp(canonical.p, "billing.", 8) == 0;
}

/* Schemas kept per method from READY; each_method and the document. */
static void test_schemas_and_document(void **state)
{
    (void)state;
    jrpc_workers_t *w = make(0);
    ready(w, 'A', "billing",
          "{\"add\": {\"params\": [{\"name\":\"a\",\"schema\":{\"type\":\"integer\"}}],"
          " \"result\": {\"type\":\"integer\"}}, \"nope\": {}, \"count\": 5}", 1, AB);
    ready(w, 'B', "shipping", "[not json", 0, AB);
    assert_non_null(find(w, 'A')->schemas);
    assert_null(find(w, 'B')->schemas);   /* ignored, the worker served all the same */
    seen_t s = { 0 };
    jrpc_workers_each_method(w, on_method_seen, &s);
    assert_int_equal(s.n, 4);
    bool found = false;
    for (int i = 0; i < s.n; i++) {
        if (strcmp(s.names[i], "billing.add") != 0)
            continue;
        found = true;
        assert_true(s.mi[i].owns_bare);
        assert_true(s.mi[i].idempotent);
        assert_int_equal(s.mi[i].params.p[0], '[');
        assert_int_equal(s.mi[i].result.p[0], '{');
    }
    assert_true(found);
    jrpc_buf_t out;
    jrpc_buf_init(&out);
    assert_int_equal(jrpc_openrpc_write(&out, w, "9.9", NULL, NULL), 0);
    assert_int_equal(jrpc_json_validate(out.p, out.len, 64), 0);
    const char *want_add =
        "{\"name\":\"billing.add\",\"params\":[{\"name\":\"a\",\"schema\":{\"type\":\"integer\"}}],"
        "\"result\":{\"name\":\"result\",\"schema\":{\"type\":\"integer\"}},"
        "\"x-jrpc-service\":\"billing\",\"x-jrpc-method\":\"add\",\"x-jrpc-bare\":true,"
        "\"x-jrpc-idempotent\":true,\"x-jrpc-json\":false,\"x-jrpc-workers\":1}";
    char *doc = strndup(out.p, out.len);
    assert_non_null(strstr(doc, want_add));
    assert_non_null(strstr(doc, "\"name\":\"shipping.add\",\"params\":[],\"result\":{\"name\":"
                                "\"result\",\"schema\":{}},\"x-jrpc-service\":\"shipping\","
                                "\"x-jrpc-method\":\"add\",\"x-jrpc-bare\":false"));
    /* sorted: billing.add, billing.count, shipping.add, shipping.count */
    assert_true(strstr(doc, "billing.count") < strstr(doc, "shipping.add"));
    free(doc);
    jrpc_buf_reset(&out);
    assert_int_equal(jrpc_openrpc_write(&out, w, "9.9", allow_billing, NULL), 0);
    doc = strndup(out.p, out.len);
    assert_non_null(strstr(doc, "billing.count"));
    assert_null(strstr(doc, "shipping"));
    free(doc);
    jrpc_buf_dispose(&out);
    reap(w);
    destroy(w);
}

/* The builder alone: the envelope, a method without schemas, a result
 * given as a content descriptor kept as it is, a name that is not UTF-8
 * left out. */
static void test_builder(void **state)
{
    (void)state;
    jrpc_method_info_t ms[3] = {
        { .method = S("echo"), .canonical = S("echo"), .owns_bare = true, .json = true,
          .workers = 2 },
        { .method = S("\xff"), .canonical = S("\xff"), .workers = 1 },
        { .service = S("s"), .method = S("m"), .canonical = S("s.m"), .workers = 1,
          .params = S("[]"), .result = S("{\"name\":\"r\",\"schema\":{\"type\":\"string\"}}") },
    };
    jrpc_buf_t out;
    jrpc_buf_init(&out);
    assert_int_equal(jrpc_openrpc_write_methods(&out, ms, 3, "1.2.3"), 0);
    const char *want =
        "{\"openrpc\":\"1.3.2\",\"info\":{\"title\":\"jrpc-broker\",\"description\":\"Methods "
        "served now, by service: call a service's method as service.method, or by its bare "
        "name where x-jrpc-bare is true.\",\"version\":\"1.2.3\"},\"methods\":["
        "{\"name\":\"echo\",\"params\":[],\"result\":{\"name\":\"result\",\"schema\":{}},"
        "\"x-jrpc-bare\":true,\"x-jrpc-idempotent\":false,\"x-jrpc-json\":true,"
        "\"x-jrpc-workers\":2},"
        "{\"name\":\"s.m\",\"params\":[],\"result\":{\"name\":\"r\",\"schema\":{\"type\":"
        "\"string\"}},\"x-jrpc-service\":\"s\",\"x-jrpc-method\":\"m\",\"x-jrpc-bare\":false,"
        "\"x-jrpc-idempotent\":false,\"x-jrpc-json\":false,\"x-jrpc-workers\":1}]}";
    assert_int_equal(out.len, strlen(want));
    assert_memory_equal(out.p, want, out.len);
    jrpc_buf_reset(&out);
    assert_int_equal(jrpc_openrpc_write_methods(&out, NULL, 0, "x"), 0);
    assert_int_equal(jrpc_json_validate(out.p, out.len, 8), 0);
    jrpc_buf_dispose(&out);
}

/* A declaration checked as the OpenRPC meta-schema will judge it: each
 * case at the end of a buffer of its own size (an over-read trips ASan). */
static void check_decl(const char *text, int want, const char *want_why)
{
    size_t n = strlen(text);
    char *p = malloc(n ? n : 1);
    assert_non_null(p);
    memcpy(p, text, n);
    const char *why = NULL;
    int rc = jrpc_openrpc_decl_check(p, n, &why);
    if (rc != want || strcmp(why, want_why) != 0)
        fail_msg("%s: rc=%d why=%s", text, rc, why);
    free(p);
}

static void test_decl_check(void **state)
{
    (void)state;
    check_decl("{}", 0, "");
    check_decl("{\"params\":[],\"result\":{\"type\":\"integer\"}}", 0, "");
    check_decl("{\"params\":[{\"name\":\"a\",\"schema\":{\"type\":[\"integer\",\"null\"],"
               "\"minimum\":0,\"enum\":[1,2]},\"required\":true,\"x-k\":[1]}],"
               "\"result\":{\"name\":\"r\",\"schema\":true},\"paramStructure\":\"by-name\","
               "\"summary\":\"s\",\"x-mcp-tools\":[{\"any\":1}]}", 0, "");
    check_decl("{\"params\":[{\"name\":\"a\",\"schema\":{\"properties\":{\"b\":{\"items\":"
               "[{\"type\":\"string\"},true],\"required\":[\"x\",\"y\"]}},"
               "\"anyOf\":[{},{\"not\":false}],\"maxLength\":3.0}}]}", 0, "");
    check_decl("[]", -EINVAL, "not_an_object");
    check_decl("{\"params\":{}}", -EINVAL, "bad_params");
    check_decl("{\"params\":[{\"name\":1,\"schema\":{}}]}", -EINVAL, "bad_params");
    check_decl("{\"params\":[{\"name\":\"\",\"schema\":{}}]}", -EINVAL, "bad_params");
    check_decl("{\"params\":[{\"name\":\"a\"}]}", -EINVAL, "bad_params");
    check_decl("{\"params\":[{\"name\":\"a\",\"schema\":{},\"other\":1}]}", -EINVAL,
               "bad_params");
    check_decl("{\"params\":[{\"$ref\":\"#/x\"}]}", -EINVAL, "bad_params");
    check_decl("{\"params\":[{\"name\":\"a\",\"schema\":{\"type\":5}}]}", -EINVAL,
               "bad_params");
    check_decl("{\"params\":[{\"name\":\"a\",\"schema\":{\"type\":\"int\"}}]}", -EINVAL,
               "bad_params");
    check_decl("{\"params\":[{\"name\":\"a\",\"schema\":{\"enum\":[]}}]}", -EINVAL,
               "bad_params");
    check_decl("{\"params\":[{\"name\":\"a\",\"schema\":{\"enum\":[1,1]}}]}", -EINVAL,
               "bad_params");
    check_decl("{\"params\":[{\"name\":\"a\",\"schema\":{\"minLength\":-1}}]}", -EINVAL,
               "bad_params");
    check_decl("{\"params\":[{\"name\":\"a\",\"schema\":{\"properties\":{\"b\":"
               "{\"required\":true}}}}]}", -EINVAL, "bad_params");
    check_decl("{\"params\":[{\"name\":\"a\",\"schema\":{\"anyOf\":[]}}]}", -EINVAL,
               "bad_params");
    check_decl("{\"result\":{\"name\":\"r\",\"schema\":{\"multipleOf\":0}}}", -EINVAL,
               "bad_result");
    check_decl("{\"result\":5}", -EINVAL, "bad_result");
    check_decl("{\"result\":{\"name\":\"r\",\"schema\":{}, \"x\":1}}", -EINVAL, "bad_result");
    check_decl("{\"paramStructure\":\"any\"}", -EINVAL, "bad_member");
    check_decl("{\"x-jrpc-bare\":true}", -EINVAL, "reserved_member");
    check_decl("{\"servers\":[]}", -EINVAL, "unknown_member");
    /* deeper than 32 schema levels */
    char deep[600] = "{\"result\":";
    for (int i = 0; i < 40; i++)
        strcat(deep, "{\"not\":");
    strcat(deep, "true");
    for (int i = 0; i < 40; i++)
        strcat(deep, "}");
    strcat(deep, "}");
    check_decl(deep, -EINVAL, "bad_result");
}

/* What a declaration adds besides params and result is copied into the
 * method object. */
static void test_builder_decl_members(void **state)
{
    (void)state;
    jrpc_method_info_t m = { .method = S("m"), .canonical = S("m"), .owns_bare = true,
                             .workers = 1, .params = S("[]"), .result = S("{}"),
                             .decl = S("{\"params\":[],\"x-mcp-tools\":[{\"name\":\"t\"}],"
                                       "\"result\":{},\"summary\":\"s\"}") };
    jrpc_buf_t out;
    jrpc_buf_init(&out);
    assert_int_equal(jrpc_openrpc_write_methods(&out, &m, 1, "1"), 0);
    char *doc = strndup(out.p, out.len);
    assert_non_null(strstr(doc, "\"result\":{\"name\":\"result\",\"schema\":{}},"
                                "\"x-mcp-tools\":[{\"name\":\"t\"}],\"summary\":\"s\","
                                "\"x-jrpc-bare\":true"));
    free(doc);
    jrpc_buf_dispose(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bare_name_ownership),
        cmocka_unit_test(test_bare_name_release),
        cmocka_unit_test(test_qualified_lookup),
        cmocka_unit_test(test_bad_service_refused),
        cmocka_unit_test(test_grace_queue_adopted),
        cmocka_unit_test(test_schemas_and_document),
        cmocka_unit_test(test_decl_check),
        cmocka_unit_test(test_builder_decl_members),
        cmocka_unit_test(test_builder),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
