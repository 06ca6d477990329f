/* Unit tests of the reload list (broker/jrpc_reload.c): all or nothing per
 * run, every bad item named, discards for what was prepared, the counters. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "jrpc_log.h"
#include "jrpc_metrics.h"
#include "jrpc_reload.h"

/* A fake reloadable: its "file" is good or bad; states are heap ints, so
 * the sanitizer sees a staged state leaked or freed twice. */
typedef struct fake {
    int  good;        /* prepare succeeds */
    int *in_force;    /* the committed state */
    int  prepares, commits, discards;
    int  order;       /* when it was committed (global counter) */
} fake_t;

static int commit_clock;

static int fake_prepare(void *arg, const char *path, void **staged, char *err, size_t errlen)
{
    fake_t *f = arg;
    f->prepares++;
    if (!f->good) {
        snprintf(err, errlen, "%s:2: duplicate key id \"a\" (first on line 1)", path);
        return -EINVAL;
    }
    int *v = malloc(sizeof *v);
    assert_non_null(v);
    *v = 100 + f->prepares;
    *staged = v;
    return 0;
}

static size_t fake_commit(void *arg, void *staged)
{
    fake_t *f = arg;
    f->commits++;
    f->order = ++commit_clock;
    free(f->in_force);
    f->in_force = staged;
    return (size_t)*f->in_force;
}

static void fake_discard(void *arg, void *staged)
{
    fake_t *f = arg;
    f->discards++;
    free(staged);
}

static fake_t F[3];
static jrpc_reloadable_t items[3];

static int setup(void **state)
{
    (void)state;
    static const char *const what[] = { "keys", "client-keys", "worker-keys" };
    static const char *const path[] = { "/k", "/c", "/w" };
    memset(F, 0, sizeof F);
    memset(&jrpc_metrics, 0, sizeof jrpc_metrics);
    commit_clock = 0;
    for (int i = 0; i < 3; i++) {
        F[i].good = 1;
        items[i] = (jrpc_reloadable_t){ what[i], path[i], &F[i], fake_prepare, fake_commit,
                                        fake_discard };
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++)
        free(F[i].in_force);
    return 0;
}

static void test_all_good(void **state)
{
    (void)state;
    time_t t0 = time(NULL);
    assert_int_equal(jrpc_reload_run(items, 3), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(F[i].prepares, 1);
        assert_int_equal(F[i].commits, 1);
        assert_int_equal(F[i].discards, 0);
        assert_int_equal(F[i].order, i + 1);   /* in list order */
        assert_int_equal(*F[i].in_force, 101);
    }
    assert_int_equal(jrpc_metrics.reloads[0], 1);
    assert_int_equal(jrpc_metrics.reloads[1], 0);
    assert_true(jrpc_metrics.reload_last_success >= (double)t0);
}

/* One bad file in the middle: nothing changes, the others are discarded,
 * the bad one never committed; a later good run commits everything. */
static void test_one_bad_changes_nothing(void **state)
{
    (void)state;
    assert_int_equal(jrpc_reload_run(items, 3), 0);
    double ok_at = jrpc_metrics.reload_last_success;
    F[1].good = 0;
    assert_int_equal(jrpc_reload_run(items, 3), -EINVAL);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(F[i].prepares, 2);   /* every item tried: each bad file named */
        assert_int_equal(F[i].commits, 1);
        assert_int_equal(*F[i].in_force, 101);   /* the old state stays */
    }
    assert_int_equal(F[0].discards, 1);
    assert_int_equal(F[1].discards, 0);   /* nothing prepared, nothing to discard */
    assert_int_equal(F[2].discards, 1);
    assert_int_equal(jrpc_metrics.reloads[0], 1);
    assert_int_equal(jrpc_metrics.reloads[1], 1);
    assert_true(jrpc_metrics.reload_last_success == ok_at);

    F[1].good = 1;
    assert_int_equal(jrpc_reload_run(items, 3), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(*F[i].in_force, 103);
    assert_int_equal(jrpc_metrics.reloads[0], 2);
}

/* Every file bad: each is named, nothing prepared is left over. */
static void test_all_bad(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++)
        F[i].good = 0;
    assert_int_equal(jrpc_reload_run(items, 3), -EINVAL);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(F[i].prepares, 1);
        assert_int_equal(F[i].commits + F[i].discards, 0);
        assert_null(F[i].in_force);
    }
    assert_int_equal(jrpc_metrics.reloads[1], 1);
}

/* No file named at start: a reload of nothing succeeds. */
static void test_nothing(void **state)
{
    (void)state;
    assert_int_equal(jrpc_reload_run(items, 0), 0);
    assert_int_equal(jrpc_metrics.reloads[0], 1);
}

/* The metrics page shows both families. */
static void test_page(void **state)
{
    (void)state;
    jrpc_metrics_init();
    jrpc_metrics.reloads[0] = 2;
    jrpc_metrics.reloads[1] = 1;
    jrpc_metrics.reload_last_success = 1700000000;
    jrpc_metrics_read_t rd = { 0 };
    jrpc_buf_t out;
    jrpc_buf_init(&out);
    assert_int_equal(jrpc_metrics_write(&out, &rd), 0);
    assert_int_equal(jrpc_buf_putc(&out, '\0'), 0);
    assert_non_null(strstr(out.p, "\n# TYPE jrpc_reloads_total counter\n"));
    assert_non_null(strstr(out.p, "\njrpc_reloads_total{result=\"ok\"} 2\n"));
    assert_non_null(strstr(out.p, "\njrpc_reloads_total{result=\"failed\"} 1\n"));
    assert_non_null(strstr(out.p, "\n# TYPE jrpc_reload_last_success_timestamp_seconds gauge\n"));
    assert_non_null(strstr(out.p, "\njrpc_reload_last_success_timestamp_seconds 1700000000\n"));
    jrpc_buf_dispose(&out);
}

int main(void)
{
    jrpc_log_set_level(getenv("TEST_LOG") ? getenv("TEST_LOG") : "error");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_all_good, setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_bad_changes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_all_bad, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_page, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
