/* Tests of jrpc_replay against real redis-server processes started here on
 * 127.0.0.1 (random free ports) or on a unix socket: fresh/replay/TTL,
 * Redis killed and restarted, Redis frozen (SIGSTOP), 1000 claims in
 * flight, AUTH, SELECT, bad URLs; with sentinel:// against fake sentinels
 * (threads speaking RESP, below) in front of a real master and replica:
 * a sentinel down, hung, answering nil or an error, all of them down (fail
 * closed) and back, ROLE saying slave, -READONLY after a switch, the
 * passwords; --redis-wait-replicas with a replica frozen. Every wait runs
 * the loop under a deadline, so no test can hang. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "jrpc_log.h"
/* The module itself, so its pure helpers (multi_flags) are reachable. */
#include "../../../broker/guard/jrpc_replay.c"
#include "../../../broker/guard/jrpc_replay_group.c"
#include "../../../broker/guard/jrpc_redis.c"

extern char **environ;

#define WINDOW_S 30

/* ---- redis-server processes --------------------------------------------- */

typedef struct redis_srv {
    pid_t pid;          /* 0 when not running */
    int   port;         /* TCP port (0 with a unix socket only) */
    char  sock[108];    /* unix socket path, or "" */
    char  pass[32];     /* --requirepass, or "" */
    int   replicaof;    /* --replicaof 127.0.0.1 <this port> when not 0 */
} redis_srv_t;

#include "../free_port.h"
#include "../../scripted_server.h"

static bool have_redis_server(void)
{
    const char *path = getenv("PATH");
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path ? path : "/usr/bin:/bin");
    for (char *save = NULL, *dir = strtok_r(buf, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        char exe[4200];
        snprintf(exe, sizeof exe, "%s/redis-server", dir);
        if (access(exe, X_OK) == 0)
            return true;
    }
    return false;
}

static redisContext *srv_connect(const redis_srv_t *s)
{
    struct timeval tv = { 0, 200000 };
    redisContext *c = s->sock[0] ? redisConnectUnixWithTimeout(s->sock, tv)
                                 : redisConnectWithTimeout("127.0.0.1", s->port, tv);
    if (c != NULL && c->err) {
        redisFree(c);
        return NULL;
    }
    return c;
}

/* Starts redis-server with s->port (0: picks one unless s->sock is set)
 * and waits until it answers. */
static void srv_start(redis_srv_t *s)
{
    if (!have_redis_server())
        fail_msg("redis-server is not installed (apt-get install redis-server): "
                 "these tests need a real Redis");
    if (s->port == 0 && s->sock[0] == '\0')
        s->port = free_port();
    char port[16], master[16];
    snprintf(port, sizeof port, "%d", s->port);
    snprintf(master, sizeof master, "%d", s->replicaof);
    const char *argv[32];
    int n = 0;
    argv[n++] = "redis-server";
    argv[n++] = "--port";        argv[n++] = port;
    argv[n++] = "--bind";        argv[n++] = "127.0.0.1";
    argv[n++] = "--save";        argv[n++] = "";
    argv[n++] = "--appendonly";  argv[n++] = "no";
    argv[n++] = "--daemonize";   argv[n++] = "no";
    if (s->pass[0]) {
        argv[n++] = "--requirepass"; argv[n++] = s->pass;
        argv[n++] = "--masterauth";  argv[n++] = s->pass;
    }
    if (s->replicaof) {
        argv[n++] = "--replicaof"; argv[n++] = "127.0.0.1"; argv[n++] = master;
    }
    /* Full syncs over the socket, none through a dump.rdb in the cwd. */
    argv[n++] = "--repl-diskless-sync-delay"; argv[n++] = "0";
    argv[n++] = "--repl-diskless-load";       argv[n++] = "swapdb";
    if (s->sock[0]) {
        argv[n++] = "--unixsocket";     argv[n++] = s->sock;
        argv[n++] = "--unixsocketperm"; argv[n++] = "700";
    }
    argv[n] = NULL;

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    int rc = posix_spawnp(&s->pid, "redis-server", &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        fail_msg("cannot start redis-server: %s", strerror(rc));

    for (int i = 0; i < 500; i++) {
        int status;
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            s->pid = 0;
            fail_msg("redis-server exited at start (port %d or socket %s busy?)", s->port, s->sock);
        }
        redisContext *c = srv_connect(s);
        if (c != NULL) {
            redisReply *rep = redisCommand(c, "PING");
            bool ok = rep != NULL && (rep->type == REDIS_REPLY_STATUS ||
                                      rep->type == REDIS_REPLY_ERROR);  /* NOAUTH: it answers */
            freeReplyObject(rep);
            redisFree(c);
            if (ok)
                return;
        }
        usleep(10000);
    }
    fail_msg("redis-server did not answer within 5 s");
}

static void srv_stop(redis_srv_t *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
    if (s->sock[0])
        unlink(s->sock);
}

/* A blocking client for checks; NULL-safe reply. */
static redisReply *srv_cmd(const redis_srv_t *s, const char *fmt, ...)
{
    redisContext *c = srv_connect(s);
    assert_non_null(c);
    if (s->pass[0]) {
        redisReply *a = redisCommand(c, "AUTH %s", s->pass);
        freeReplyObject(a);
    }
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(c, fmt, ap);
    va_end(ap);
    redisFree(c);
    assert_non_null(rep);
    return rep;
}

/* ---- the loop ------------------------------------------------------------ */

typedef bool (*pred_fn)(void *ctx);

typedef struct waiter {
    pred_fn  done;
    void    *ctx;
    uint64_t deadline;  /* uv_now() */
    bool     ok;
} waiter_t;

static void on_tick(uv_timer_t *t)
{
    waiter_t *w = t->data;
    if (w->done(w->ctx)) {
        w->ok = true;
        uv_stop(t->loop);
    } else if (uv_now(t->loop) >= w->deadline) {
        uv_stop(t->loop);
    }
}

/* Runs the loop until done(ctx) or ms have passed. Returns done(ctx). */
static bool run_until(uv_loop_t *loop, pred_fn done, void *ctx, unsigned ms)
{
    uv_update_time(loop);
    waiter_t w = { done, ctx, uv_now(loop) + ms, false };
    if (done(ctx))
        return true;
    uv_timer_t t;
    uv_timer_init(loop, &t);
    t.data = &w;
    uv_timer_start(&t, on_tick, 1, 1);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    return w.ok || done(ctx);
}

static bool never(void *ctx)
{
    (void)ctx;
    return false;
}

static void run_for(uv_loop_t *loop, unsigned ms)
{
    run_until(loop, never, NULL, ms);
}

/* ---- claims -------------------------------------------------------------- */

typedef struct res {
    int rc;      /* last rc given to the callback */
    int calls;   /* callback runs */
    uint64_t at; /* uv_hrtime() of the first run */
} res_t;

static bool in_claim;   /* set around jrpc_replay_claim: the cb must never run inside */

static void on_claim(void *arg, int rc)
{
    assert_false(in_claim);
    res_t *res = arg;
    res->rc = rc;
    if (res->calls++ == 0)
        res->at = uv_hrtime();
}

static int64_t now_s(void)
{
    return (int64_t)time(NULL);
}

/* Claims for a body signed at ts. */
static int claim_ts(jrpc_replay_t *r, const char *key, const char *nonce, int64_t ts, res_t *res)
{
    memset(res, 0, sizeof *res);
    res->rc = 1;
    in_claim = true;
    int rc = jrpc_replay_claim(r, (jrpc_span_t){ key, strlen(key) },
                               (jrpc_span_t){ nonce, strlen(nonce) }, ts, on_claim, res);
    in_claim = false;
    return rc;
}

/* Claims for a body signed now. */
static int claim_now(jrpc_replay_t *r, const char *key, const char *nonce, res_t *res)
{
    return claim_ts(r, key, nonce, now_s(), res);
}

static bool res_done(void *ctx)
{
    return ((res_t *)ctx)->calls > 0;
}

static bool is_up(void *ctx)
{
    return jrpc_replay_up(ctx);
}

/* Claims and waits for the answer: the callback's rc, or the immediate rc. */
static int claim_wait_ts(uv_loop_t *loop, jrpc_replay_t *r, const char *key, const char *nonce,
                         int64_t ts)
{
    res_t res;
    int rc = claim_ts(r, key, nonce, ts, &res);
    if (rc < 0) {
        assert_int_equal(res.calls, 0);
        return rc;
    }
    assert_true(run_until(loop, res_done, &res, 5000));
    run_for(loop, 5);
    assert_int_equal(res.calls, 1);
    return res.rc;
}

static int claim_wait(uv_loop_t *loop, jrpc_replay_t *r, const char *key, const char *nonce)
{
    return claim_wait_ts(loop, r, key, nonce, now_s());
}

struct fakes;
static void fakes_stop(struct fakes **fk_p);

typedef struct fx {
    uv_loop_t      loop;
    jrpc_replay_t *r;
    redis_srv_t    srv;
    redis_srv_t    srv2;    /* a replica, for the Sentinel and WAIT tests */
    struct fakes  *fk;      /* fake sentinels, stopped by teardown */
} fx_t;

static redis_srv_t shared;   /* for the tests that do not hurt their Redis */

static int group_setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN);   /* hiredis writes with write(2), as the broker does */
    srv_start(&shared);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    srv_stop(&shared);
    return 0;
}

static int setup(void **state)
{
    fx_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    *state = f;
    return 0;
}

/* Destroys the module and proves every handle was closed and freed. */
static int teardown(void **state)
{
    fx_t *f = *state;
    jrpc_replay_destroy(&f->r);
    assert_null(f->r);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    srv_stop(&f->srv);
    srv_stop(&f->srv2);
    fakes_stop(&f->fk);
    free(f);
    return 0;
}

static jrpc_replay_t *make_opts(fx_t *f, const jrpc_replay_opts_t *o)
{
    char err[256] = "";
    jrpc_replay_t *r = jrpc_replay_new(&f->loop, o, err, sizeof err);
    if (r == NULL)
        fail_msg("jrpc_replay_new(%s): %s", o->url, err);
    return r;
}

static jrpc_replay_t *make(fx_t *f, const char *url, uint32_t timeout_ms)
{
    jrpc_replay_opts_t o = { .url = url, .window_s = WINDOW_S, .timeout_ms = timeout_ms };
    return make_opts(f, &o);
}

static void make_up(fx_t *f, const char *url, uint32_t timeout_ms)
{
    f->r = make(f, url, timeout_ms);
    assert_true(run_until(&f->loop, is_up, f->r, 5000));
}

static void url_of(char *buf, size_t n, const redis_srv_t *s, const char *cred, const char *db)
{
    snprintf(buf, n, "redis://%s127.0.0.1:%d%s", cred, s->port, db);
}

/* make_up on the shared Redis, no password, database 0. */
static void make_up_shared(fx_t *f, uint32_t timeout_ms)
{
    char url[128];
    url_of(url, sizeof url, &shared, "", "");
    make_up(f, url, timeout_ms);
}

/* Captures stderr (the log) into a temporary file. */
typedef struct capture {
    int  saved;
    int  fd;
    char path[64];
} capture_t;

static void capture_start(capture_t *c)
{
    snprintf(c->path, sizeof c->path, "/tmp/jrpc-replay-log-XXXXXX");
    c->fd = mkstemp(c->path);
    assert_true(c->fd >= 0);
    fflush(stderr);
    c->saved = dup(2);
    dup2(c->fd, 2);
}

/* Restores stderr; returns the captured text (caller frees). */
static char *capture_end(capture_t *c)
{
    fflush(stderr);
    dup2(c->saved, 2);
    close(c->saved);
    off_t n = lseek(c->fd, 0, SEEK_END);
    char *buf = calloc(1, (size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(pread(c->fd, buf, (size_t)n, 0), n);
    close(c->fd);
    unlink(c->path);
    fputs(buf, stderr);   /* keep it visible */
    return buf;
}

/* ---- tests --------------------------------------------------------------- */

/* resp_format (the claims' command, written without hiredis' formatter)
 * gives the very bytes of hiredis' redisFormatCommandArgv: random argument
 * vectors of binary bytes, empty strings and lengths across digit counts,
 * and the longest claim script (MULTI_MAX nonce keys of the longest key
 * id and nonce, the longest epoch and proposal), which must fit
 * BATCH_CMD_MAX. A buffer one byte short is refused. */
static void test_resp_format_as_hiredis(void **state)
{
    (void)state;
    static char pool[20000], out[BATCH_CMD_MAX];
    const char *argv[4 + MULTI_MAX + 5];
    size_t lens[4 + MULTI_MAX + 5];
    unsigned seed = 12345;
    for (size_t i = 0; i < sizeof pool; i++)
        pool[i] = (char)(rand_r(&seed) & 0xff);
    for (int round = 0; round < 500; round++) {
        int argc = 1 + rand_r(&seed) % 12;
        for (int i = 0; i < argc; i++) {
            static const size_t sizes[] = { 0, 1, 9, 10, 99, 100, 999, 1000, 1400 };
            lens[i] = rand_r(&seed) % 3 ? (size_t)(rand_r(&seed) % 200)
                                        : sizes[rand_r(&seed) % 9];
            argv[i] = pool + rand_r(&seed) % (sizeof pool - lens[i]);
        }
        char *want = NULL;
        long long wn = redisFormatCommandArgv(&want, argc, argv, lens);
        assert_true(wn > 0);
        size_t n = resp_format(out, sizeof out, argc, argv, lens);
        assert_int_equal(n, (size_t)wn);
        assert_memory_equal(out, want, n);
        redisFreeCommand(want);
    }
    /* The longest claim script. */
    static char nkey[NKEY_MAX], epoch[EPOCH_MAX], sha[40];
    memset(nkey, 'k', sizeof nkey);
    memset(epoch, 'e', sizeof epoch);
    memset(sha, 'f', sizeof sha);
    int argc = 0;
    argv[argc] = "EVALSHA", lens[argc++] = 7;
    argv[argc] = sha, lens[argc++] = sizeof sha;
    argv[argc] = "65", lens[argc++] = 2;
    argv[argc] = EPOCH_KEY, lens[argc++] = sizeof EPOCH_KEY - 1;
    for (int i = 0; i < MULTI_MAX; i++)
        argv[argc] = nkey, lens[argc++] = sizeof nkey;
    argv[argc] = epoch, lens[argc++] = sizeof epoch;
    argv[argc] = epoch, lens[argc++] = sizeof epoch;
    argv[argc] = "18446744073709551615", lens[argc++] = 20;
    argv[argc] = "18446744073709551615", lens[argc++] = 20;
    argv[argc] = "m", lens[argc++] = 1;
    char *want = NULL;
    long long wn = redisFormatCommandArgv(&want, argc, argv, lens);
    size_t n = resp_format(out, sizeof out, argc, argv, lens);
    assert_int_equal(n, (size_t)wn);
    assert_memory_equal(out, want, n);
    redisFreeCommand(want);
    /* Refused, not overrun, when the buffer is short of resp_format's bound. */
    assert_int_equal(resp_format(out, 10, 1, argv, lens), 0);
    char u[24];
    size_t un = put_u64(u, UINT64_MAX);
    assert_int_equal(un, 20);
    assert_memory_equal(u, "18446744073709551615", 20);
    assert_int_equal(put_u64(u, 0), 1);
    assert_int_equal(u[0], '0');
}

static void test_bad_urls(void **state)
{
    fx_t *f = *state;
    static const char *const bad[] = {
        "http://x", "redis://host:0", "redis://host:99999", "redis://host:6379/x",
        "redis://host", "redis://:6379", "redis://host:", "redis://host:6a", "redis://host:-1",
        "redis://user@host:6379", "redis://user:@host:6379", "redis://host:6379/1x",
        "redis://::1:6379", "redis://[::1:6379", "redis://:pw%zz@host:1", "unix://", "unix://rel.sock",
        "rediss://host:6379", "redis://host:6379?db=1", "", "redis://ho st:1",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[256] = "";
        jrpc_replay_opts_t o = { .url = bad[i], .window_s = 30, .timeout_ms = 200 };
        jrpc_replay_t *r = jrpc_replay_new(&f->loop, &o, err, sizeof err);
        if (r != NULL)
            fail_msg("accepted bad URL '%s'", bad[i]);
        assert_true(strlen(err) > 10);
        assert_non_null(strstr(err, "--redis"));
    }
    /* The message never repeats a password. */
    char err[256] = "";
    jrpc_replay_opts_t o = { .url = "redis://:topsecret@host:0", .window_s = 30, .timeout_ms = 200 };
    assert_null(jrpc_replay_new(&f->loop, &o, err, sizeof err));
    assert_null(strstr(err, "topsecret"));
    /* Zero window or timeout. */
    o.url = "redis://127.0.0.1:6379";
    o.window_s = 0;
    assert_null(jrpc_replay_new(&f->loop, &o, err, sizeof err));
    o.window_s = 30;
    o.timeout_ms = 0;
    assert_null(jrpc_replay_new(&f->loop, &o, err, sizeof err));

    static const char *const good[] = {
        "redis://127.0.0.1:6379", "redis://localhost:1/", "redis://u:p@h:65535/15",
        "redis://:p%40ss@h:1/0", "redis://[::1]:6379/2", "unix:///tmp/redis.sock",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        o = (jrpc_replay_opts_t){ .url = good[i], .window_s = 30, .timeout_ms = 200 };
        jrpc_replay_t *r = jrpc_replay_new(&f->loop, &o, err, sizeof err);
        if (r == NULL)
            fail_msg("rejected good URL '%s': %s", good[i], err);
        assert_false(jrpc_replay_up(r));
        jrpc_replay_destroy(&r);
    }
}

static void test_fresh_replay_ttl(void **state)
{
    fx_t *f = *state;
    make_up_shared(f, 1000);

    assert_int_equal(claim_wait(&f->loop, f->r, "k1", "n-fresh"), 0);
    assert_int_equal(claim_wait(&f->loop, f->r, "k1", "n-fresh"), -EEXIST);
    assert_int_equal(claim_wait(&f->loop, f->r, "k2", "n-fresh"), 0);

    redisReply *rep = srv_cmd(&shared, "TTL jrpc:nonce:k1:n-fresh");
    assert_int_equal(rep->type, REDIS_REPLY_INTEGER);
    /* TTL rounds to the second: 2 × window unless the host stalled. */
    assert_true(rep->integer == 2 * WINDOW_S || rep->integer == 2 * WINDOW_S - 1);
    freeReplyObject(rep);

    /* Spans are binary-safe and need no NUL: "key\0 x" / "no nce:1" inside larger buffers. */
    static const char kb[] = "key\0 xTRAILING", nb[] = "no nce:1TRAILING";
    res_t res = { 0 };
    in_claim = true;
    assert_int_equal(jrpc_replay_claim(f->r, (jrpc_span_t){ kb, 6 }, (jrpc_span_t){ nb, 8 },
                                       now_s(), on_claim, &res), 0);
    in_claim = false;
    assert_true(run_until(&f->loop, res_done, &res, 5000));
    assert_int_equal(res.rc, 0);
    rep = srv_cmd(&shared, "EXISTS %b", "jrpc:nonce:key\0 x:no nce:1", (size_t)26);
    assert_int_equal(rep->integer, 1);
    freeReplyObject(rep);

    jrpc_replay_stats_t st;
    jrpc_replay_stats(f->r, &st);
    assert_int_equal(st.claims, 3);
    assert_int_equal(st.replays, 1);
    assert_int_equal(st.failures, 0);
    assert_int_equal(st.rtt_count, 4);
    assert_true(st.rtt_us_sum > 0);
}

#define MANY 1000

static bool all_done(void *ctx)
{
    res_t *res = ctx;
    for (int i = 0; i < MANY; i++)
        if (res[i].calls == 0)
            return false;
    return true;
}

static void test_many_in_flight(void **state)
{
    fx_t *f = *state;
    make_up_shared(f, 2000);

    static res_t res[MANY];
    char nonce[32];
    for (int i = 0; i < MANY; i++) {
        snprintf(nonce, sizeof nonce, "many-%d", i);
        assert_int_equal(claim_now(f->r, "kmany", nonce, &res[i]), 0);
    }
    assert_true(run_until(&f->loop, all_done, res, 10000));
    run_for(&f->loop, 20);
    for (int i = 0; i < MANY; i++) {
        assert_int_equal(res[i].calls, 1);
        assert_int_equal(res[i].rc, 0);
    }
    jrpc_replay_stats_t st;
    jrpc_replay_stats(f->r, &st);
    assert_int_equal(st.claims, MANY);
}

static void test_killed_and_restarted(void **state)
{
    fx_t *f = *state;
    srv_start(&f->srv);
    char url[128];
    url_of(url, sizeof url, &f->srv, "", "");
    make_up(f, url, 500);
    assert_int_equal(claim_wait(&f->loop, f->r, "kk", "before"), 0);

    /* A claim in flight when Redis dies. */
    res_t res;
    assert_int_equal(claim_now(f->r, "kk", "inflight", &res), 0);
    kill(f->srv.pid, SIGKILL);
    waitpid(f->srv.pid, NULL, 0);
    f->srv.pid = 0;
    assert_true(run_until(&f->loop, res_done, &res, 3000));
    assert_int_equal(res.rc, -EAGAIN);
    run_for(&f->loop, 50);
    assert_int_equal(res.calls, 1);

    /* While down: never 0, at once or via the callback. */
    int rc = claim_wait(&f->loop, f->r, "kk", "while-down");
    assert_int_equal(rc, -EAGAIN);
    assert_false(jrpc_replay_up(f->r));
    run_for(&f->loop, 500);
    assert_int_equal(claim_wait(&f->loop, f->r, "kk", "while-down-2"), -EAGAIN);

    /* Back on the same port, empty (no persistence): the same module
     * recovers by itself, notices the lost epoch, and refuses the body
     * claimed before the restart and anything else signed before the loss
     * plus the window; a body signed after that passes, once. */
    srv_start(&f->srv);
    assert_true(run_until(&f->loop, is_up, f->r, 6000));
    int64_t t = now_s();
    assert_int_equal(claim_wait_ts(&f->loop, f->r, "kk", "before", t), -ESTALE);
    assert_int_equal(claim_wait(&f->loop, f->r, "kk", "after"), -ESTALE);
    assert_true(jrpc_replay_refuse_to(f->r) >= t + WINDOW_S - 2);
    assert_true(jrpc_replay_refuse_to(f->r) <= now_s() + WINDOW_S);
    int64_t later = jrpc_replay_refuse_to(f->r) + 1;
    assert_int_equal(claim_wait_ts(&f->loop, f->r, "kk", "after", later), 0);
    assert_int_equal(claim_wait_ts(&f->loop, f->r, "kk", "after", later), -EEXIST);
    redisReply *rep = srv_cmd(&f->srv, "EXISTS jrpc:nonce:kk:before");
    assert_int_equal(rep->integer, 0);   /* refused before Redis */
    freeReplyObject(rep);

    jrpc_replay_stats_t st;
    jrpc_replay_stats(f->r, &st);
    assert_true(st.reconnects >= 1);
    assert_true(st.failures >= 3);
    assert_int_equal(st.epoch_changes, 1);
    assert_int_equal(st.stale, 2);
}

static void test_frozen_redis_times_out(void **state)
{
    fx_t *f = *state;
    srv_start(&f->srv);
    char url[128];
    url_of(url, sizeof url, &f->srv, "", "");
    make_up(f, url, 200);
    assert_int_equal(claim_wait(&f->loop, f->r, "kf", "before"), 0);

    kill(f->srv.pid, SIGSTOP);
    res_t res[3];
    uint64_t t0 = uv_hrtime();
    for (int i = 0; i < 3; i++) {
        char nonce[16];
        snprintf(nonce, sizeof nonce, "frozen-%d", i);
        assert_int_equal(claim_now(f->r, "kf", nonce, &res[i]), 0);
    }
    assert_true(run_until(&f->loop, res_done, &res[2], 3000));
    for (int i = 0; i < 3; i++) {
        assert_int_equal(res[i].calls, 1);
        assert_int_equal(res[i].rc, -EAGAIN);
    }
    uint64_t ms = (res[0].at - t0) / 1000000;
    if (ms < 190 || ms > 1000)
        fail_msg("timed out after %llu ms, expected about 200", (unsigned long long)ms);
    assert_false(jrpc_replay_up(f->r));
    /* Fail closed while frozen: reconnects connect (the kernel accepts)
     * but the handshake is never answered. */
    run_for(&f->loop, 400);
    assert_false(jrpc_replay_up(f->r));
    assert_int_equal(claim_wait(&f->loop, f->r, "kf", "frozen-x"), -EAGAIN);

    kill(f->srv.pid, SIGCONT);
    assert_true(run_until(&f->loop, is_up, f->r, 6000));
    assert_int_equal(claim_wait(&f->loop, f->r, "kf", "thawed"), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(res[i].calls, 1);
}

static void test_auth(void **state)
{
    fx_t *f = *state;
    snprintf(f->srv.pass, sizeof f->srv.pass, "secretpw");
    srv_start(&f->srv);
    char url[128];

    url_of(url, sizeof url, &f->srv, ":secretpw@", "");
    make_up(f, url, 1000);
    assert_int_equal(claim_wait(&f->loop, f->r, "ka", "pw-only"), 0);
    jrpc_replay_destroy(&f->r);

    url_of(url, sizeof url, &f->srv, "default:secret%70w@", "");   /* %70 = 'p' */
    make_up(f, url, 1000);
    assert_int_equal(claim_wait(&f->loop, f->r, "ka", "user-pw"), 0);
    assert_int_equal(claim_wait(&f->loop, f->r, "ka", "pw-only"), -EEXIST);
    jrpc_replay_destroy(&f->r);

    capture_t cap;
    capture_start(&cap);
    url_of(url, sizeof url, &f->srv, ":wrongpw@", "");
    f->r = make(f, url, 1000);
    run_for(&f->loop, 600);
    int rc = claim_wait(&f->loop, f->r, "ka", "wrong");
    bool up = jrpc_replay_up(f->r);
    char *log = capture_end(&cap);
    assert_int_equal(rc, -EAGAIN);
    assert_false(up);
    assert_non_null(strstr(log, "event=auth_failed"));
    assert_non_null(strstr(log, "comp=replay"));
    assert_null(strstr(log, "wrongpw"));
    assert_null(strstr(log, "secretpw"));
    free(log);
}

static void test_select_db(void **state)
{
    fx_t *f = *state;
    char url[128];
    url_of(url, sizeof url, &shared, "", "/3");
    make_up(f, url, 1000);
    assert_int_equal(claim_wait(&f->loop, f->r, "kdb", "n1"), 0);
    redisReply *rep = srv_cmd(&shared, "EXISTS jrpc:nonce:kdb:n1");
    assert_int_equal(rep->integer, 0);   /* not in db 0 */
    freeReplyObject(rep);
    redisContext *c = srv_connect(&shared);
    assert_non_null(c);
    freeReplyObject(redisCommand(c, "SELECT 3"));
    rep = redisCommand(c, "TTL jrpc:nonce:kdb:n1");
    assert_true(rep->integer == 2 * WINDOW_S || rep->integer == 2 * WINDOW_S - 1);
    freeReplyObject(rep);
    redisFree(c);
}

static void test_unix_socket(void **state)
{
    fx_t *f = *state;
    snprintf(f->srv.sock, sizeof f->srv.sock, "/tmp/jrpc-replay-%d.sock", (int)getpid());
    srv_start(&f->srv);
    char url[160];
    snprintf(url, sizeof url, "unix://%s", f->srv.sock);
    make_up(f, url, 1000);
    assert_int_equal(claim_wait(&f->loop, f->r, "ku", "n1"), 0);
    assert_int_equal(claim_wait(&f->loop, f->r, "ku", "n1"), -EEXIST);
}

static void test_nothing_listening(void **state)
{
    fx_t *f = *state;
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", free_port());
    f->r = make(f, url, 200);
    assert_int_equal(claim_wait(&f->loop, f->r, "kn", "n1"), -EAGAIN);
    run_for(&f->loop, 1000);
    assert_false(jrpc_replay_up(f->r));
    jrpc_replay_stats_t st;
    jrpc_replay_stats(f->r, &st);
    assert_true(st.reconnects >= 2);   /* 100 ms, 200 ms, 400 ms ... */
    assert_true(st.failures >= 1);
}

static void test_destroy_cancels(void **state)
{
    fx_t *f = *state;
    make_up_shared(f, 1000);
    res_t res[10];
    for (int i = 0; i < 10; i++) {
        char nonce[16];
        snprintf(nonce, sizeof nonce, "cancel-%d", i);
        assert_int_equal(claim_now(f->r, "kc", nonce, &res[i]), 0);
    }
    jrpc_replay_destroy(&f->r);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(res[i].calls, 1);
        assert_int_equal(res[i].rc, -ECANCELED);
    }
    run_for(&f->loop, 20);
    for (int i = 0; i < 10; i++)
        assert_int_equal(res[i].calls, 1);
}

/* A callback that destroys the module from inside a hiredis reply callback. */
typedef struct reentry {
    jrpc_replay_t **rp;
    res_t           res[3];
    int             calls;
} reentry_t;

static void on_claim_destroy(void *arg, int rc)
{
    reentry_t *re = arg;
    re->res[re->calls++].rc = rc;
    if (*re->rp != NULL)
        jrpc_replay_destroy(re->rp);
}

static bool reentry_done(void *ctx)
{
    return ((reentry_t *)ctx)->calls >= 3;
}

static void test_destroy_from_callback(void **state)
{
    fx_t *f = *state;
    make_up_shared(f, 1000);
    reentry_t re = { .rp = &f->r };
    for (int i = 0; i < 3; i++) {
        char nonce[16];
        snprintf(nonce, sizeof nonce, "reent-%d", i);
        assert_int_equal(jrpc_replay_claim(f->r, (jrpc_span_t){ "kr", 2 },
                                           (jrpc_span_t){ nonce, strlen(nonce) },
                                           now_s(), on_claim_destroy, &re), 0);
    }
    assert_true(run_until(&f->loop, reentry_done, &re, 3000));
    assert_null(f->r);
    assert_int_equal(re.res[0].rc, 0);
    assert_int_equal(re.res[1].rc, -ECANCELED);
    assert_int_equal(re.res[2].rc, -ECANCELED);
    run_for(&f->loop, 20);
    assert_int_equal(re.calls, 3);
}

/* A callback that claims again, from inside a hiredis reply callback. */
typedef struct chain {
    jrpc_replay_t *r;
    int            left;   /* claims still to make */
    int            calls;
    int            bad;    /* callbacks with rc != 0 */
} chain_t;

static void on_chain(void *arg, int rc)
{
    assert_false(in_claim);
    chain_t *c = arg;
    c->calls++;
    c->bad += rc != 0;
    if (c->left-- > 0) {
        char nonce[24];
        snprintf(nonce, sizeof nonce, "chain-%d", c->left);
        in_claim = true;
        int crc = jrpc_replay_claim(c->r, (jrpc_span_t){ "kch", 3 },
                                    (jrpc_span_t){ nonce, strlen(nonce) }, now_s(), on_chain, c);
        in_claim = false;
        assert_int_equal(crc, 0);
    }
}

static bool chain_done(void *ctx)
{
    return ((chain_t *)ctx)->calls == 51;
}

static void test_claim_from_callback(void **state)
{
    fx_t *f = *state;
    make_up_shared(f, 1000);
    chain_t c = { .r = f->r, .left = 50 };
    assert_int_equal(jrpc_replay_claim(f->r, (jrpc_span_t){ "kch", 3 }, (jrpc_span_t){ "first", 5 },
                                       now_s(), on_chain, &c), 0);
    assert_true(run_until(&f->loop, chain_done, &c, 5000));
    run_for(&f->loop, 20);
    assert_int_equal(c.calls, 51);
    assert_int_equal(c.bad, 0);
}

static void test_select_fails(void **state)
{
    fx_t *f = *state;
    char url[128];
    url_of(url, sizeof url, &shared, "", "/999");   /* Redis has 16 databases by default */
    capture_t cap;
    capture_start(&cap);
    f->r = make(f, url, 1000);
    run_for(&f->loop, 300);
    int rc = claim_wait(&f->loop, f->r, "ks", "n1");
    bool up = jrpc_replay_up(f->r);
    char *log = capture_end(&cap);
    assert_int_equal(rc, -EAGAIN);
    assert_false(up);
    assert_non_null(strstr(log, "event=select_failed"));
    free(log);
}

/* ---- Redis losing its memory ---------------------------------------------- */

static char *epoch_value(const redis_srv_t *s)
{
    redisReply *rep = srv_cmd(s, "GET jrpc:epoch");
    char *v = rep->type == REDIS_REPLY_STRING ? strdup(rep->str) : NULL;
    freeReplyObject(rep);
    return v;
}

/* FLUSHALL: the captured body (claimed before) and anything signed up to
 * loss + window is refused, by this broker and by one started later; a
 * body signed after passes once; two brokers converge on one epoch. */
static void test_flushall(void **state)
{
    fx_t *f = *state;
    srv_start(&f->srv);
    char url[128];
    url_of(url, sizeof url, &f->srv, "", "");
    make_up(f, url, 1000);
    /* A Redis with no epoch at the first connect counts as new. */
    assert_true(jrpc_replay_refuse_to(f->r) == INT64_MIN);
    char *e0 = epoch_value(&f->srv);
    assert_non_null(e0);
    assert_non_null(strstr(e0, ":0"));
    int64_t t0 = now_s();
    assert_int_equal(claim_wait_ts(&f->loop, f->r, "kf", "captured", t0), 0);
    assert_int_equal(claim_wait_ts(&f->loop, f->r, "kf", "captured", t0), -EEXIST);

    /* A second broker, up before the loss. */
    char err[256];
    jrpc_replay_opts_t o = { .url = url, .window_s = WINDOW_S, .timeout_ms = 1000 };
    jrpc_replay_t *r2 = jrpc_replay_new(&f->loop, &o, err, sizeof err);
    assert_non_null(r2);
    assert_true(run_until(&f->loop, is_up, r2, 5000));

    freeReplyObject(srv_cmd(&f->srv, "FLUSHALL"));
    int64_t t_flush = now_s();
    /* The replay of the captured body: refused, and never claimed. */
    assert_int_equal(claim_wait_ts(&f->loop, f->r, "kf", "captured", t0), -ESTALE);
    redisReply *rep = srv_cmd(&f->srv, "EXISTS jrpc:nonce:kf:captured");
    assert_int_equal(rep->integer, 0);
    freeReplyObject(rep);
    /* Now known: refused at once, no round trip. */
    res_t res;
    assert_int_equal(claim_now(f->r, "kf", "fresh-now", &res), -ESTALE);
    assert_int_equal(res.calls, 0);
    int64_t until = jrpc_replay_refuse_to(f->r);
    assert_true(until >= t_flush + WINDOW_S && until <= now_s() + WINDOW_S);
    assert_true(jrpc_replay_lost_at(f->r) >= t_flush);
    char *e1 = epoch_value(&f->srv);
    assert_non_null(e1);
    assert_string_not_equal(e0, e1);

    /* The second broker notices on its next claim, and takes the same epoch. */
    assert_int_equal(claim_wait_ts(&f->loop, r2, "kf", "captured", t0), -ESTALE);
    assert_int_equal(jrpc_replay_refuse_to(r2), until);
    char *e2 = epoch_value(&f->srv);
    assert_string_equal(e1, e2);

    /* A broker started after the loss learns it from the epoch's time. */
    jrpc_replay_t *r3 = jrpc_replay_new(&f->loop, &o, err, sizeof err);
    assert_non_null(r3);
    assert_true(run_until(&f->loop, is_up, r3, 5000));
    assert_int_equal(jrpc_replay_refuse_to(r3), until);
    assert_int_equal(claim_wait_ts(&f->loop, r3, "kf", "captured", t0), -ESTALE);

    /* Signed after loss + window: accepted once, by any of them. */
    assert_int_equal(claim_wait_ts(&f->loop, f->r, "kf", "later", until + 1), 0);
    assert_int_equal(claim_wait_ts(&f->loop, r2, "kf", "later", until + 1), -EEXIST);
    assert_int_equal(claim_wait_ts(&f->loop, r3, "kf", "later", until + 1), -EEXIST);

    jrpc_replay_stats_t st;
    jrpc_replay_stats(f->r, &st);
    assert_int_equal(st.epoch_changes, 1);
    assert_int_equal(st.stale, 2);
    jrpc_replay_destroy(&r2);
    jrpc_replay_destroy(&r3);
    free(e0);
    free(e1);
    free(e2);
}

/* An epoch value that is not ours to trust (bad time, far future) cannot
 * make a broker refuse for more than one window from now. */
static void test_epoch_from_the_future(void **state)
{
    fx_t *f = *state;
    srv_start(&f->srv);
    freeReplyObject(srv_cmd(&f->srv, "SET jrpc:epoch x:999999999999999999"));
    char url[128];
    url_of(url, sizeof url, &f->srv, "", "");
    make_up(f, url, 1000);
    int64_t until = jrpc_replay_refuse_to(f->r);
    assert_true(until <= now_s() + WINDOW_S);
    assert_int_equal(claim_wait_ts(&f->loop, f->r, "kx", "n1", until + 1), 0);
    /* Junk longer than an epoch can be: fails closed, never up. */
    jrpc_replay_destroy(&f->r);
    char junk[200];
    memset(junk, 'j', sizeof junk - 1);
    junk[sizeof junk - 1] = '\0';
    freeReplyObject(srv_cmd(&f->srv, "SET jrpc:epoch %s", junk));
    f->r = make(f, url, 1000);
    run_for(&f->loop, 300);
    assert_false(jrpc_replay_up(f->r));
    assert_int_equal(claim_wait(&f->loop, f->r, "kx", "n2"), -EAGAIN);
}

/* SCRIPT FLUSH under our feet: the claim fails closed, the reconnect loads
 * the script again. */
static void test_script_flushed(void **state)
{
    fx_t *f = *state;
    srv_start(&f->srv);
    char url[128];
    url_of(url, sizeof url, &f->srv, "", "");
    make_up(f, url, 1000);
    assert_int_equal(claim_wait(&f->loop, f->r, "ks", "n1"), 0);
    freeReplyObject(srv_cmd(&f->srv, "SCRIPT FLUSH"));
    assert_int_equal(claim_wait(&f->loop, f->r, "ks", "n2"), -EAGAIN);
    assert_true(run_until(&f->loop, is_up, f->r, 5000));
    assert_int_equal(claim_wait(&f->loop, f->r, "ks", "n2"), 0);
    assert_int_equal(claim_wait(&f->loop, f->r, "ks", "n1"), -EEXIST);
}

/* An idempotency claim's answer (rc, and the stored reply when rc is 1). */
typedef struct idem_res {
    int  rc;
    int  calls;
    char reply[64];
} idem_res_t;

static void on_idem_res(void *arg, int rc, const char *reply, size_t n)
{
    idem_res_t *res = arg;
    res->rc = rc;
    res->calls++;
    snprintf(res->reply, sizeof res->reply, "%.*s", (int)n, reply ? reply : "");
}

static bool idem_done(void *ctx)
{
    return ((idem_res_t *)ctx)->calls > 0;
}

/* Claims idempotency key `key` for a body of fingerprint fp and waits for
 * the answer (the callback's rc, or the immediate rc). */
static int idem_wait(fx_t *f, const char *key, const char fp[64], idem_res_t *res)
{
    memset(res, 0, sizeof *res);
    int rc = jrpc_replay_idem_claim(f->r, (jrpc_span_t){ "who", 3 },
                                    (jrpc_span_t){ key, strlen(key) }, fp, 5000, on_idem_res, res);
    if (rc < 0)
        return rc;
    assert_true(run_until(&f->loop, idem_done, res, 5000));
    return res->rc;
}

/* Idempotency keys go as EVALSHA of the script loaded at connect: after
 * SCRIPT FLUSH the claim fails closed (NOSCRIPT drops the connection, as
 * for nonces), the reconnect loads the scripts again, and the keys are as
 * they were: the kept reply, a new key claimed once. */
static void test_idem_script_flushed(void **state)
{
    fx_t *f = *state;
    char fp[64];
    memset(fp, 'a', sizeof fp);
    idem_res_t res;
    srv_start(&f->srv);
    char url[128];
    url_of(url, sizeof url, &f->srv, "", "");
    make_up(f, url, 1000);
    assert_int_equal(idem_wait(f, "i1", fp, &res), 0);
    assert_int_equal(jrpc_replay_idem_store(f->r, (jrpc_span_t){ "who", 3 }, (jrpc_span_t){ "i1", 2 },
                                            fp, "kept", 4, 60), 0);
    assert_int_equal(idem_wait(f, "i1", fp, &res), 1);   /* after the store: one connection */
    assert_string_equal(res.reply, "kept");
    freeReplyObject(srv_cmd(&f->srv, "SCRIPT FLUSH"));
    assert_int_equal(idem_wait(f, "i2", fp, &res), -EAGAIN);
    assert_true(run_until(&f->loop, is_up, f->r, 5000));
    assert_int_equal(idem_wait(f, "i1", fp, &res), 1);
    assert_string_equal(res.reply, "kept");
    assert_int_equal(idem_wait(f, "i2", fp, &res), 0);
    assert_int_equal(idem_wait(f, "i2", fp, &res), -EBUSY);
    memset(fp, 'b', sizeof fp);
    assert_int_equal(idem_wait(f, "i2", fp, &res), -EILSEQ);
}

/* ---- a fault proxy: one unsolicited reply ---------------------------------- */

typedef struct proxy {
    acceptor_t   acc;        /* each connection proxied in a thread of its own */
    int          port;       /* its port */
    int          upstream;   /* Redis port */
    atomic_int   inject;     /* 1: put "+OK\r\n" before the next bytes from Redis;
                                2: send it now, unasked */
} proxy_t;

static void proxy_serve(void *owner, int c)
{
    proxy_t *px = owner;
    int u = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)px->upstream),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (connect(u, (struct sockaddr *)&a, sizeof a) < 0) {
        close(c);
        close(u);
        return;
    }
    for (;;) {
        if (atomic_load(&px->acc.stop))
            break;
        /* Taken in one step: another connection's thread may see it too. */
        int unasked = 2;
        if (atomic_compare_exchange_strong(&px->inject, &unasked, 0) && write(c, "+OK\r\n", 5) != 5)
            break;
        struct pollfd p[2] = { { c, POLLIN, 0 }, { u, POLLIN, 0 } };
        if (poll(p, 2, 20) < 0)
            break;
        char buf[65536];
        if (p[0].revents) {
            ssize_t n = read(c, buf, sizeof buf);
            if (n <= 0 || write(u, buf, (size_t)n) != n)
                break;
        }
        if (p[1].revents) {
            ssize_t n = read(u, buf, sizeof buf);
            if (n <= 0)
                break;
            if (atomic_exchange(&px->inject, 0) == 1 && write(c, "+OK\r\n", 5) != 5)
                break;
            if (write(c, buf, (size_t)n) != n)
                break;
        }
    }
    close(c);
    close(u);
}

static void proxy_start(proxy_t *px, int upstream)
{
    memset(px, 0, sizeof *px);
    px->upstream = upstream;
    acceptor_start(&px->acc, bind_loopback(0, &px->port), ACCEPTOR_MAX_CONNS, proxy_serve, px);
}

static void proxy_stop(proxy_t *px)
{
    acceptor_stop(&px->acc);
}

static bool res3_done(void *ctx)
{
    res_t *res = ctx;
    return res[0].calls && res[1].calls && res[2].calls;
}

/* One extra "+OK" before a real reply, then one with nothing asked: the
 * module (hiredis' async API used to assert and abort here) drops the
 * connection, fails the claims in flight closed, reconnects, and serves
 * again; a nonce never reads as fresh because of the extra reply. */
static void test_unsolicited_reply(void **state)
{
    fx_t *f = *state;
    srv_start(&f->srv);
    proxy_t px;
    proxy_start(&px, f->srv.port);
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", px.port);
    make_up(f, url, 1000);
    assert_int_equal(claim_wait(&f->loop, f->r, "kp", "seen"), 0);

    capture_t cap;
    capture_start(&cap);
    atomic_store(&px.inject, 1);
    res_t res[3];
    /* a replay: must never read OK */
    assert_int_equal(claim_now(f->r, "kp", "seen", &res[0]), 0);
    assert_int_equal(claim_now(f->r, "kp", "d1", &res[1]), 0);
    assert_int_equal(claim_now(f->r, "kp", "d2", &res[2]), 0);
    assert_true(run_until(&f->loop, res3_done, res, 5000));
    run_for(&f->loop, 20);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(res[i].calls, 1);
        assert_int_equal(res[i].rc, -EAGAIN);
    }
    assert_true(run_until(&f->loop, is_up, f->r, 5000));
    assert_int_equal(claim_wait(&f->loop, f->r, "kp", "seen"), -EEXIST);
    assert_int_equal(claim_wait(&f->loop, f->r, "kp", "after-1"), 0);

    /* Unasked, while idle. */
    atomic_store(&px.inject, 2);
    run_for(&f->loop, 300);
    assert_true(run_until(&f->loop, is_up, f->r, 5000));
    assert_int_equal(claim_wait(&f->loop, f->r, "kp", "after-2"), 0);
    char *log = capture_end(&cap);
    assert_non_null(strstr(log, "event=desync"));
    assert_true(atomic_load(&px.acc.accepts) >= 3);
    free(log);
    jrpc_replay_destroy(&f->r);
    uv_run(&f->loop, UV_RUN_NOWAIT);
    proxy_stop(&px);
}


/* ---- fake sentinels ------------------------------------------------------ */

/* What a fake sentinel does with SENTINEL get-master-addr-by-name. */
enum { FS_ANSWER, FS_NIL, FS_ERROR, FS_HANG, FS_CLOSE /* accepts and closes at once */ };

#define NFAKE 3
#define FAKE_CONNS 32

typedef struct fake_sentinel {
    int        lfd;         /* listening socket */
    int        port;
    atomic_int mode;        /* FS_* */
    atomic_int master;      /* the port FS_ANSWER names, on 127.0.0.1 */
    atomic_int asked;       /* questions read */
    atomic_int conns;       /* connections accepted */
} fake_sentinel_t;

typedef struct fakes {
    fake_sentinel_t s[NFAKE];
    char            pass[32];   /* AUTH required first when not "" */
    atomic_int      stop;
    pthread_t       th;
} fakes_t;

typedef struct fake_conn {
    int          fd;        /* -1: free */
    fake_sentinel_t *fs;
    redisReader *rd;        /* parses the requests (arrays of bulk strings) */
    bool         authed;
} fake_conn_t;

static bool arg_is(const redisReply *a, const char *s)
{
    return a->type == REDIS_REPLY_STRING && a->len == strlen(s) && strncasecmp(a->str, s, a->len) == 0;
}

/* Answers one request; false when the connection must close. */
static bool fake_answer(fakes_t *fk, fake_conn_t *c, const redisReply *req)
{
    char out[128];
    const char *msg = "-ERR unknown command\r\n";
    if (req->type != REDIS_REPLY_ARRAY || req->elements == 0)
        return false;
    if (arg_is(req->element[0], "AUTH")) {
        const redisReply *pw = req->element[req->elements - 1];
        c->authed = fk->pass[0] && pw->len == strlen(fk->pass) && memcmp(pw->str, fk->pass, pw->len) == 0;
        msg = c->authed ? "+OK\r\n" : "-WRONGPASS invalid username-password pair\r\n";
    } else if (req->elements == 3 && arg_is(req->element[0], "SENTINEL") &&
               arg_is(req->element[1], "get-master-addr-by-name")) {
        atomic_fetch_add(&c->fs->asked, 1);
        int mode = atomic_load(&c->fs->mode);
        if (fk->pass[0] && !c->authed)
            msg = "-NOAUTH Authentication required.\r\n";
        else if (mode == FS_HANG)
            return true;
        else if (mode == FS_NIL)
            msg = "*-1\r\n";
        else if (mode == FS_ERROR)
            msg = "-ERR not now\r\n";
        else {
            char port[16];
            int n = snprintf(port, sizeof port, "%d", atomic_load(&c->fs->master));
            snprintf(out, sizeof out, "*2\r\n$9\r\n127.0.0.1\r\n$%d\r\n%s\r\n", n, port);
            msg = out;
        }
    }
    return write(c->fd, msg, strlen(msg)) == (ssize_t)strlen(msg);
}

static void fake_close(fake_conn_t *c)
{
    close(c->fd);
    redisReaderFree(c->rd);
    c->fd = -1;
    c->rd = NULL;
}

static void *fakes_main(void *arg)
{
    fakes_t *fk = arg;
    fake_conn_t conns[FAKE_CONNS];
    for (int i = 0; i < FAKE_CONNS; i++)
        conns[i].fd = -1;
    while (!atomic_load(&fk->stop)) {
        struct pollfd p[NFAKE + FAKE_CONNS];
        for (int i = 0; i < NFAKE; i++)
            p[i] = (struct pollfd){ fk->s[i].lfd, POLLIN, 0 };
        for (int i = 0; i < FAKE_CONNS; i++)
            p[NFAKE + i] = (struct pollfd){ conns[i].fd, POLLIN, 0 };
        if (poll(p, NFAKE + FAKE_CONNS, 20) <= 0)
            continue;
        for (int i = 0; i < NFAKE; i++) {
            if (!p[i].revents)
                continue;
            int fd = accept(fk->s[i].lfd, NULL, NULL);
            if (fd < 0)
                continue;
            atomic_fetch_add(&fk->s[i].conns, 1);
            int k = 0;
            while (k < FAKE_CONNS && conns[k].fd >= 0)
                k++;
            if (atomic_load(&fk->s[i].mode) == FS_CLOSE || k == FAKE_CONNS) {
                close(fd);
                continue;
            }
            conns[k] = (fake_conn_t){ fd, &fk->s[i], redisReaderCreate(), false };
        }
        for (int i = 0; i < FAKE_CONNS; i++) {
            fake_conn_t *c = &conns[i];
            if (c->fd < 0 || !p[NFAKE + i].revents)
                continue;
            char buf[4096];
            ssize_t n = read(c->fd, buf, sizeof buf);
            if (n <= 0) {
                fake_close(c);
                continue;
            }
            redisReaderFeed(c->rd, buf, (size_t)n);
            void *req;
            while (c->fd >= 0 && redisReaderGetReply(c->rd, &req) == REDIS_OK && req != NULL) {
                bool keep = fake_answer(fk, c, req);
                freeReplyObject(req);
                if (!keep)
                    fake_close(c);
            }
        }
    }
    for (int i = 0; i < FAKE_CONNS; i++)
        if (conns[i].fd >= 0)
            fake_close(&conns[i]);
    return NULL;
}

/* Three fake sentinels, each answering `master` (FS_ANSWER) until told
 * otherwise; pass: the AUTH password they require ("" none). */
static fakes_t *fakes_start(int master, const char *pass)
{
    fakes_t *fk = calloc(1, sizeof *fk);
    assert_non_null(fk);
    snprintf(fk->pass, sizeof fk->pass, "%s", pass);
    for (int i = 0; i < NFAKE; i++) {
        fake_sentinel_t *fs = &fk->s[i];
        fs->lfd = socket(AF_INET, SOCK_STREAM, 0);
        assert_true(fs->lfd >= 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        assert_int_equal(bind(fs->lfd, (struct sockaddr *)&a, sizeof a), 0);
        socklen_t len = sizeof a;
        assert_int_equal(getsockname(fs->lfd, (struct sockaddr *)&a, &len), 0);
        fs->port = ntohs(a.sin_port);
        assert_int_equal(listen(fs->lfd, 8), 0);
        atomic_store(&fs->master, master);
    }
    assert_int_equal(pthread_create(&fk->th, NULL, fakes_main, fk), 0);
    return fk;
}

static void fakes_stop(fakes_t **fk_p)
{
    fakes_t *fk = *fk_p;
    if (fk == NULL)
        return;
    atomic_store(&fk->stop, 1);
    pthread_join(fk->th, NULL);
    for (int i = 0; i < NFAKE; i++)
        close(fk->s[i].lfd);
    free(fk);
    *fk_p = NULL;
}

/* sentinel://[cred@]127.0.0.1:<first>,<the fakes' ports...>/mymaster;
 * first: a port put in front of the fakes (0: none). */
static void sentinel_url(char *buf, size_t n, const fakes_t *fk, const char *cred, int first)
{
    int k = snprintf(buf, n, "sentinel://%s", cred);
    if (first)
        k += snprintf(buf + k, n - (size_t)k, "127.0.0.1:%d,", first);
    for (int i = 0; i < NFAKE; i++)
        k += snprintf(buf + k, n - (size_t)k, "127.0.0.1:%d%s", fk->s[i].port, i + 1 < NFAKE ? "," : "");
    snprintf(buf + k, n - (size_t)k, "/mymaster");
}

static bool key_exists(const redis_srv_t *s, const char *key)
{
    redisReply *rep = srv_cmd(s, "EXISTS %s", key);
    bool yes = rep->type == REDIS_REPLY_INTEGER && rep->integer == 1;
    freeReplyObject(rep);
    return yes;
}

/* The master counts a replica online and has its first acknowledged offset:
 * what WAIT counts. Right after a full sync the offset stays 0 (and WAIT
 * counts no replica) until the replica's first ACK, up to a second later. */
static bool replica_online(const redis_srv_t *master)
{
    redisReply *rep = srv_cmd(master, "INFO replication");
    const char *p = rep->type == REDIS_REPLY_STRING ? strstr(rep->str, "state=online,offset=") : NULL;
    bool up = p != NULL && p[20] >= '1' && p[20] <= '9';
    freeReplyObject(rep);
    return up;
}

/* f->srv a master, f->srv2 its replica, in sync. */
static void start_pair(fx_t *f)
{
    srv_start(&f->srv);
    f->srv2.replicaof = f->srv.port;
    snprintf(f->srv2.pass, sizeof f->srv2.pass, "%s", f->srv.pass);
    srv_start(&f->srv2);
    redisReply *rep = srv_cmd(&f->srv, "SET warm 1");   /* an offset to acknowledge */
    freeReplyObject(rep);
    /* Up to 20 s: the replica acknowledges once a second, and a loaded
     * machine (the suite runs 2 tests at a time) has been seen to need
     * more than 5 s for the first sync. */
    for (int i = 0; i < 2000 && !replica_online(&f->srv); i++)
        usleep(10000);
    assert_true(replica_online(&f->srv));
}

/* ---- Sentinel ------------------------------------------------------------ */

/* Nothing listening, then a sentinel that hangs up: the next one is used,
 * and it moves to the front (asked first at the next reconnect). */
static void test_sentinel_first_down(void **state)
{
    fx_t *f = *state;
    srv_start(&f->srv);
    f->fk = fakes_start(f->srv.port, "");
    atomic_store(&f->fk->s[0].mode, FS_CLOSE);
    char url[256];
    sentinel_url(url, sizeof url, f->fk, "", free_port());
    make_up(f, url, 500);
    assert_int_equal(claim_wait(&f->loop, f->r, "ks", "first-1"), 0);
    assert_int_equal(claim_wait(&f->loop, f->r, "ks", "first-1"), -EEXIST);
    assert_true(key_exists(&f->srv, "jrpc:nonce:ks:first-1"));
    assert_int_equal(atomic_load(&f->fk->s[0].conns), 1);
    assert_int_equal(atomic_load(&f->fk->s[1].asked), 1);

    /* Every reconnect finds the master again, asking the last one first. */
    redisReply *rep = srv_cmd(&f->srv, "CLIENT KILL TYPE normal");
    freeReplyObject(rep);
    run_for(&f->loop, 50);
    assert_true(run_until(&f->loop, is_up, f->r, 5000));
    assert_int_equal(atomic_load(&f->fk->s[1].asked), 2);
    assert_int_equal(atomic_load(&f->fk->s[0].conns), 1);
    assert_int_equal(claim_wait(&f->loop, f->r, "ks", "first-2"), 0);
    jrpc_replay_stats_t st;
    jrpc_replay_stats(f->r, &st);
    assert_int_equal(st.masters_found, 2);
}

/* A sentinel that does not know the master (nil), one that errs, one that
 * never answers (timeout): each time the next one is asked. */
static void test_sentinel_nil_error_hang(void **state)
{
    fx_t *f = *state;
    srv_start(&f->srv);
    f->fk = fakes_start(f->srv.port, "");
    atomic_store(&f->fk->s[0].mode, FS_NIL);
    atomic_store(&f->fk->s[1].mode, FS_ERROR);
    char url[256];
    sentinel_url(url, sizeof url, f->fk, "", 0);
    capture_t cap;
    capture_start(&cap);
    make_up(f, url, 500);
    assert_int_equal(claim_wait(&f->loop, f->r, "ks", "nil-1"), 0);
    for (int i = 0; i < NFAKE; i++)
        assert_int_equal(atomic_load(&f->fk->s[i].asked), 1);

    /* s[2] answered, so the order is s2, s0, s1: s2 says nil now, s0
     * answers, s1 (which would hang) is not reached. */
    atomic_store(&f->fk->s[0].mode, FS_ANSWER);
    atomic_store(&f->fk->s[1].mode, FS_HANG);
    atomic_store(&f->fk->s[2].mode, FS_NIL);
    redisReply *rep = srv_cmd(&f->srv, "CLIENT KILL TYPE normal");
    freeReplyObject(rep);
    run_for(&f->loop, 50);
    assert_true(run_until(&f->loop, is_up, f->r, 5000));
    assert_int_equal(atomic_load(&f->fk->s[2].asked), 2);
    assert_int_equal(atomic_load(&f->fk->s[0].asked), 2);
    assert_int_equal(atomic_load(&f->fk->s[1].asked), 1);

    /* s0 is first now; make it hang: the watchdog moves on to s2, then s1. */
    atomic_store(&f->fk->s[0].mode, FS_HANG);
    atomic_store(&f->fk->s[2].mode, FS_ANSWER);
    rep = srv_cmd(&f->srv, "CLIENT KILL TYPE normal");
    freeReplyObject(rep);
    run_for(&f->loop, 50);
    assert_true(run_until(&f->loop, is_up, f->r, 5000));
    assert_int_equal(atomic_load(&f->fk->s[0].asked), 3);
    assert_int_equal(atomic_load(&f->fk->s[2].asked), 3);
    assert_int_equal(claim_wait(&f->loop, f->r, "ks", "nil-2"), 0);
    char *log = capture_end(&cap);
    assert_non_null(strstr(log, "event=sentinel_no_master"));
    assert_non_null(strstr(log, "this sentinel does not know the master"));
    assert_non_null(strstr(log, "connect_timeout"));
    free(log);
}

/* No sentinel answers: claims fail closed at once (the broker's 503);
 * when one comes back, the module recovers by itself. */
static void test_sentinel_all_down(void **state)
{
    fx_t *f = *state;
    srv_start(&f->srv);
    f->fk = fakes_start(f->srv.port, "");
    atomic_store(&f->fk->s[0].mode, FS_NIL);
    atomic_store(&f->fk->s[1].mode, FS_ERROR);
    atomic_store(&f->fk->s[2].mode, FS_CLOSE);
    char url[256];
    sentinel_url(url, sizeof url, f->fk, "", 0);
    capture_t cap;
    capture_start(&cap);
    f->r = make(f, url, 300);
    run_for(&f->loop, 700);
    assert_false(jrpc_replay_up(f->r));
    res_t res;
    assert_int_equal(claim_now(f->r, "ks", "down-1", &res), -EAGAIN);
    assert_int_equal(res.calls, 0);
    char *log = capture_end(&cap);
    assert_non_null(strstr(log, "event=no_sentinel"));
    free(log);
    assert_true(atomic_load(&f->fk->s[0].asked) >= 2);   /* rounds go on */

    atomic_store(&f->fk->s[1].mode, FS_ANSWER);
    assert_true(run_until(&f->loop, is_up, f->r, 3000));
    assert_int_equal(claim_wait(&f->loop, f->r, "ks", "down-1"), 0);
}

/* Sentinel names a replica (ROLE says slave): not up, claims refused, found
 * again; when it names the master, claims land there. */
static void test_sentinel_role_slave(void **state)
{
    fx_t *f = *state;
    start_pair(f);
    f->fk = fakes_start(f->srv2.port, "");
    char url[256];
    sentinel_url(url, sizeof url, f->fk, "", 0);
    capture_t cap;
    capture_start(&cap);
    f->r = make(f, url, 500);
    run_for(&f->loop, 500);
    assert_false(jrpc_replay_up(f->r));
    res_t res;
    assert_int_equal(claim_now(f->r, "ks", "role-1", &res), -EAGAIN);
    assert_true(atomic_load(&f->fk->s[0].asked) >= 2);   /* asked again after the pause */
    char *log = capture_end(&cap);
    assert_non_null(strstr(log, "event=not_master"));
    assert_non_null(strstr(log, "role=slave"));
    free(log);
    assert_false(key_exists(&f->srv2, "jrpc:epoch"));   /* nothing written to a replica */

    for (int i = 0; i < NFAKE; i++)
        atomic_store(&f->fk->s[i].master, f->srv.port);
    assert_true(run_until(&f->loop, is_up, f->r, 3000));
    assert_int_equal(claim_wait(&f->loop, f->r, "ks", "role-1"), 0);
    assert_true(key_exists(&f->srv, "jrpc:nonce:ks:role-1"));
}

/* A switch under the broker: the master becomes a replica (-READONLY to the
 * next claim, refused), the replica becomes the master and Sentinel says
 * so: found again, and a nonce claimed before the switch is a replay. */
static void test_sentinel_readonly(void **state)
{
    fx_t *f = *state;
    start_pair(f);
    f->fk = fakes_start(f->srv.port, "");
    char url[256];
    sentinel_url(url, sizeof url, f->fk, "", 0);
    make_up(f, url, 500);
    assert_int_equal(claim_wait(&f->loop, f->r, "ks", "ro-1"), 0);
    for (int i = 0; i < 200 && !key_exists(&f->srv2, "jrpc:nonce:ks:ro-1"); i++)
        usleep(10000);
    assert_true(key_exists(&f->srv2, "jrpc:nonce:ks:ro-1"));

    redisReply *rep = srv_cmd(&f->srv2, "REPLICAOF NO ONE");
    freeReplyObject(rep);
    rep = srv_cmd(&f->srv, "REPLICAOF 127.0.0.1 %d", f->srv2.port);
    freeReplyObject(rep);
    for (int i = 0; i < NFAKE; i++)
        atomic_store(&f->fk->s[i].master, f->srv2.port);
    capture_t cap;
    capture_start(&cap);
    assert_int_equal(claim_wait(&f->loop, f->r, "ks", "ro-2"), -EAGAIN);
    assert_true(run_until(&f->loop, is_up, f->r, 3000));
    char *log = capture_end(&cap);
    assert_non_null(strstr(log, "READONLY"));
    assert_non_null(strstr(log, "event=not_master"));
    free(log);
    assert_int_equal(claim_wait(&f->loop, f->r, "ks", "ro-1"), -EEXIST);
    assert_int_equal(claim_wait(&f->loop, f->r, "ks", "ro-2"), 0);
    assert_true(key_exists(&f->srv2, "jrpc:nonce:ks:ro-2"));
}

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

/* The sentinels' password from the URL, the master's from the file; a
 * wrong one is refused by the sentinel and the next is asked; no password
 * is ever logged. */
static void test_sentinel_passwords(void **state)
{
    fx_t *f = *state;
    snprintf(f->srv.pass, sizeof f->srv.pass, "m4sterpw");
    srv_start(&f->srv);
    f->fk = fakes_start(f->srv.port, "s3ntpw");
    char path[] = "/tmp/jrpc-replay-pw-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_file(path, "m4sterpw\r\nsecond line ignored\n");

    char url[256];
    sentinel_url(url, sizeof url, f->fk, ":wr0ngpw@", 0);
    capture_t cap;
    capture_start(&cap);
    jrpc_replay_opts_t o = { .url = url, .password_file = path, .window_s = WINDOW_S,
                             .timeout_ms = 500 };
    f->r = make_opts(f, &o);
    run_for(&f->loop, 400);
    assert_false(jrpc_replay_up(f->r));
    jrpc_replay_destroy(&f->r);
    uv_run(&f->loop, UV_RUN_NOWAIT);

    sentinel_url(url, sizeof url, f->fk, ":s3ntpw@", 0);
    f->r = make_opts(f, &o);
    assert_true(run_until(&f->loop, is_up, f->r, 5000));
    assert_int_equal(claim_wait(&f->loop, f->r, "ks", "pw-1"), 0);
    char *log = capture_end(&cap);
    assert_non_null(strstr(log, "event=auth_failed"));
    assert_null(strstr(log, "s3ntpw"));
    assert_null(strstr(log, "wr0ngpw"));
    assert_null(strstr(log, "m4sterpw"));
    free(log);

    /* A master password in the file and one in a redis:// URL: refused. */
    char err[256];
    char rurl[128];
    snprintf(rurl, sizeof rurl, "redis://:m4sterpw@127.0.0.1:%d", f->srv.port);
    assert_int_equal(jrpc_replay_check_url(rurl, path, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "once"));
    assert_null(strstr(err, "m4sterpw"));
    unlink(path);
    assert_int_equal(jrpc_replay_check_url(url, path, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, path));   /* names the file it cannot read */
}

/* ---- --redis-wait-replicas ------------------------------------------------ */

static long long commandstat(const redis_srv_t *s, const char *cmd)
{
    redisReply *rep = srv_cmd(s, "INFO commandstats");
    char key[64];
    snprintf(key, sizeof key, "cmdstat_%s:calls=", cmd);
    const char *p = rep->type == REDIS_REPLY_STRING ? strstr(rep->str, key) : NULL;
    long long n = p ? atoll(p + strlen(key)) : 0;
    freeReplyObject(rep);
    return n;
}

static void test_wait_replicas(void **state)
{
    fx_t *f = *state;
    start_pair(f);
    char url[128];
    url_of(url, sizeof url, &f->srv, "", "");
    jrpc_replay_opts_t o = { .url = url, .window_s = WINDOW_S, .timeout_ms = 600,
                             .wait_replicas = 1 };
    f->r = make_opts(f, &o);
    assert_true(run_until(&f->loop, is_up, f->r, 5000));
    assert_int_equal(claim_wait(&f->loop, f->r, "kw", "w-1"), 0);
    assert_int_equal(claim_wait(&f->loop, f->r, "kw", "w-1"), -EEXIST);
    assert_true(key_exists(&f->srv2, "jrpc:nonce:kw:w-1"));   /* WAIT said so */

    /* Claims written together share one WAIT. */
    long long waits = commandstat(&f->srv, "wait");
    static res_t res[50];
    char nonce[32];
    for (int i = 0; i < 50; i++) {
        snprintf(nonce, sizeof nonce, "w-many-%d", i);
        assert_int_equal(claim_now(f->r, "kw", nonce, &res[i]), 0);
    }
    for (int i = 0; i < 50; i++) {
        assert_true(run_until(&f->loop, res_done, &res[i], 5000));
        assert_int_equal(res[i].rc, 0);
    }
    assert_true(commandstat(&f->srv, "wait") - waits < 5);

    /* The replica frozen: a fresh nonce fails closed, a replay is still one. */
    kill(f->srv2.pid, SIGSTOP);
    assert_int_equal(claim_wait(&f->loop, f->r, "kw", "w-2"), -EAGAIN);
    assert_int_equal(claim_wait(&f->loop, f->r, "kw", "w-1"), -EEXIST);
    jrpc_replay_stats_t st;
    jrpc_replay_stats(f->r, &st);
    assert_int_equal(st.wait_short, 1);
    assert_true(jrpc_replay_up(f->r));   /* WAIT ended before the command timeout */
    kill(f->srv2.pid, SIGCONT);
    assert_int_equal(claim_wait(&f->loop, f->r, "kw", "w-3"), 0);
    jrpc_replay_destroy(&f->r);
    uv_run(&f->loop, UV_RUN_NOWAIT);

    /* More replicas asked for than there are: never fresh. */
    o.wait_replicas = 2;
    f->r = make_opts(f, &o);
    assert_true(run_until(&f->loop, is_up, f->r, 5000));
    assert_int_equal(claim_wait(&f->loop, f->r, "kw", "w-4"), -EAGAIN);
}

/* Host names are looked up off the loop (uv_getaddrinfo), for the master
 * and for the sentinels alike; one that does not resolve is skipped like
 * a sentinel that is down; destroying the module while a lookup is out
 * waits for it (the teardown's uv_loop_close proves nothing is left). */
static void test_host_names(void **state)
{
    fx_t *f = *state;
    srv_start(&f->srv);
    char url[256];
    snprintf(url, sizeof url, "redis://localhost:%d", f->srv.port);
    make_up(f, url, 1000);
    assert_int_equal(claim_wait(&f->loop, f->r, "kh", "host-1"), 0);
    jrpc_replay_destroy(&f->r);
    uv_run(&f->loop, UV_RUN_NOWAIT);

    f->fk = fakes_start(f->srv.port, "");
    snprintf(url, sizeof url, "sentinel://nonexistent.invalid:1,localhost:%d/mymaster",
             f->fk->s[0].port);
    capture_t cap;
    capture_start(&cap);
    make_up(f, url, 1000);
    assert_int_equal(claim_wait(&f->loop, f->r, "kh", "host-2"), 0);
    char *log = capture_end(&cap);
    assert_true(strstr(log, "event=resolve_failed target=nonexistent.invalid:1") != NULL ||
                strstr(log, "event=resolve_timeout target=nonexistent.invalid:1") != NULL);
    free(log);
    jrpc_replay_destroy(&f->r);

    f->r = make(f, url, 1000);   /* destroyed with its first lookup still out */
    run_for(&f->loop, 0);
}

/* ---- several claims, one script ---------------------------------------- */

/* One reply parsed from RESP bytes by a reader with our object functions. */
static redisReply *reply_of(const char *resp, size_t n)
{
    assert_int_equal(init_reply_fns(), 0);
    redisReader *rd = redisReaderCreate();
    assert_non_null(rd);
    rd->fn = &reply_fns;
    assert_int_equal(redisReaderFeed(rd, resp, n), REDIS_OK);
    void *rep = NULL;
    assert_int_equal(redisReaderGetReply(rd, &rep), REDIS_OK);
    redisReaderFree(rd);
    assert_non_null(rep);
    return rep;
}

#define REPLY(lit) reply_of(lit, sizeof lit - 1)

/* multi_flags: exactly one '0' or '1' per claim, in a bulk string. */
static void test_multi_flags(void **state)
{
    (void)state;
    bool fresh[MULTI_MAX];
    redisReply *v = REPLY("$4\r\n1011\r\n");
    assert_int_equal(multi_flags(v, 4, fresh), 0);
    assert_true(fresh[0]);
    assert_false(fresh[1]);
    assert_true(fresh[2]);
    assert_true(fresh[3]);
    assert_int_equal(multi_flags(v, 3, fresh), -1);   /* answers 4 claims, not 3 or 5 */
    assert_int_equal(multi_flags(v, 5, fresh), -1);
    freeReplyObject(v);
    redisReply *bad[] = { REPLY("$4\r\n10x1\r\n"), REPLY("$4\r\n10\0001\r\n"), REPLY("+1011\r\n"),
                          REPLY(":1011\r\n"), REPLY("$-1\r\n"), REPLY("*1\r\n$4\r\n1011\r\n"),
                          REPLY("$4\r\n1 11\r\n") };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(multi_flags(bad[i], 4, fresh), -1);
        freeReplyObject(bad[i]);
    }
    v = REPLY("$0\r\n\r\n");
    assert_int_equal(multi_flags(v, 0, fresh), 0);
    freeReplyObject(v);
}

/* The long MULTI answer (claims with rate limits in the group): each claim
 * its verdict, and every answer that cannot be to these claims refused
 * (a flag the claim cannot have, a wait too many or too few, an epoch
 * without an 'E' or the other way round, a malformed wait). Pure. */
static void test_multi_verdicts(void **state)
{
    (void)state;
    pending_t c[3] = { { .nonce = true, .rate = true }, { .nonce = true }, { .rate = true } };
    c[0].next = &c[1];
    c[1].next = &c[2];
    int rc[3];
    static const struct { const char *bytes; int ok, rc0, rc1, rc2; uint64_t w0, w2; } cases[] = {
        { "$3\r\nL01\r\n$0\r\n\r\n$3\r\n250\r\n", 1, -EDQUOT, -EEXIST, 0, 250, 0 },
        { "$3\r\nEE1\r\n$3\r\nx:1\r\n$0\r\n\r\n", 1, -EAGAIN, -EAGAIN, 0, 0, 0 },
        { "$3\r\nL1L\r\n$0\r\n\r\n$5\r\n0 777\r\n", 1, -EDQUOT, 0, -EDQUOT, 1, 777 },
        { "$3\r\n110\r\n$0\r\n\r\n$0\r\n\r\n", 0, 0, 0, 0, 0, 0 },     /* '0': no nonce */
        { "$3\r\n1L1\r\n$0\r\n\r\n$1\r\n5\r\n", 0, 0, 0, 0, 0, 0 },    /* 'L': no rate */
        { "$3\r\nE11\r\n$0\r\n\r\n$0\r\n\r\n", 0, 0, 0, 0, 0, 0 },     /* 'E', no epoch */
        { "$3\r\n111\r\n$3\r\nx:1\r\n$0\r\n\r\n", 0, 0, 0, 0, 0, 0 },  /* an epoch, no 'E' */
        { "$3\r\nL01\r\n$0\r\n\r\n$0\r\n\r\n", 0, 0, 0, 0, 0, 0 },     /* a wait too few */
        { "$3\r\nL01\r\n$0\r\n\r\n$3\r\n1 2\r\n", 0, 0, 0, 0, 0, 0 },  /* a wait too many */
        { "$3\r\nL01\r\n$0\r\n\r\n$2\r\n 5\r\n", 0, 0, 0, 0, 0, 0 },
        { "$3\r\nL01\r\n$0\r\n\r\n$2\r\n5a\r\n", 0, 0, 0, 0, 0, 0 },
        { "$3\r\nL01\r\n$0\r\n\r\n$20\r\n12345678901234567890\r\n", 0, 0, 0, 0, 0, 0 },
        { "$2\r\n11\r\n$0\r\n\r\n$0\r\n\r\n", 0, 0, 0, 0, 0, 0 },
        { "$4\r\n1111\r\n$0\r\n\r\n$0\r\n\r\n", 0, 0, 0, 0, 0, 0 },
        { "$3\r\n1x1\r\n$0\r\n\r\n$0\r\n\r\n", 0, 0, 0, 0, 0, 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char bytes[200];
        snprintf(bytes, sizeof bytes, "*5\r\n$1\r\n1\r\n$5\r\nMULTI\r\n%s", cases[i].bytes);
        redisReply *rep = reply_of(bytes, strlen(bytes));
        assert_non_null(rep);
        c[0].wait_us = c[2].wait_us = 0;
        int got = multi_verdicts(rep, c, 3, rc);
        if (got != (cases[i].ok ? 0 : -1))
            fail_msg("case %zu: %d", i, got);
        if (cases[i].ok) {
            assert_int_equal(rc[0], cases[i].rc0);
            assert_int_equal(rc[1], cases[i].rc1);
            assert_int_equal(rc[2], cases[i].rc2);
            assert_int_equal(c[0].wait_us, cases[i].w0);
            assert_int_equal(c[2].wait_us, cases[i].w2);
        }
        freeReplyObject(rep);
    }
    /* Rate limits alone never read the epoch: any value passes with them. */
    pending_t r2[2] = { { .rate = true }, { .rate = true } };
    r2[0].next = &r2[1];
    redisReply *rep = REPLY("*5\r\n$1\r\n1\r\n$5\r\nMULTI\r\n$2\r\n1L\r\n$3\r\nx:1\r\n$1\r\n9\r\n");
    assert_int_equal(multi_verdicts(rep, r2, 2, rc), 0);
    assert_int_equal(rc[0], 0);
    assert_int_equal(rc[1], -EDQUOT);
    assert_int_equal(r2[1].wait_us, 9);
    freeReplyObject(rep);
}

/* handle_multi through the reply loop, on a module with a fake connection
 * (as the fuzz target builds it): every claim of a script gets one answer;
 * a reply that is not the script's answer (another tag, a flag count that
 * does not match, MULTI to a lone claim) drops the connection and fails
 * every claim closed, never a guess. */
typedef struct fake_mod {
    uv_loop_t      loop;
    jrpc_replay_t *r;
    conn_t        *conn;
    res_t          res[4];
} fake_mod_t;

static void fake_mod_start(fake_mod_t *m, size_t nclaims, bool multi)
{
    assert_int_equal(uv_loop_init(&m->loop), 0);
    char err[128];
    jrpc_replay_opts_t o = { .url = "redis://127.0.0.1:1", .window_s = WINDOW_S,
                             .timeout_ms = 1000 };
    m->r = jrpc_replay_new(&m->loop, &o, err, sizeof err);
    assert_non_null(m->r);
    m->conn = calloc(1, sizeof *m->conn);
    assert_non_null(m->conn);
    m->conn->rd = redisReaderCreate();
    m->conn->rd->fn = &reply_fns;
    m->r->conn = m->conn;
    m->r->up = m->r->had_epoch = true;
    snprintf(m->r->epoch, sizeof m->r->epoch, "00112233445566778899aabbccddeeff:0");
    m->r->next_tag = 7;
    pending_t *mp = multi ? pending_new(m->r, CMD_MULTI, NULL) : NULL;   /* tag 7 */
    pending_t **end = mp ? &mp->claims : NULL;
    for (size_t i = 0; i < nclaims; i++) {
        memset(&m->res[i], 0, sizeof m->res[i]);
        pending_t *p = pending_new(m->r, CMD_CLAIM, &m->res[i]);
        assert_non_null(p);
        p->cb = on_claim;
        p->nonce = true;
        p->ts = now_s();
        if (mp) {
            *end = p;
            end = &p->next;
            mp->nclaims++;
        } else {
            fifo_push(m->r, p);
        }
    }
    if (mp)
        fifo_push(m->r, mp);
}

static void fake_mod_feed(fake_mod_t *m, const char *resp, size_t n)
{
    redisReaderFeed(m->conn->rd, resp, n);
    process_replies(m->r, m->conn);   /* may drop (and free) conn */
}

static void fake_mod_stop(fake_mod_t *m)
{
    jrpc_replay_destroy(&m->r);
    uv_run(&m->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&m->loop), 0);
}

#define FEED(m, lit) fake_mod_feed(m, lit, sizeof lit - 1)

static void test_multi_answers(void **state)
{
    (void)state;
    fake_mod_t m;
    /* Three claims, the second a replay. */
    fake_mod_start(&m, 3, true);
    FEED(&m, "*3\r\n$1\r\n7\r\n$5\r\nMULTI\r\n$3\r\n101\r\n");
    assert_true(m.r->conn == m.conn);   /* still connected */
    int want[] = { 0, -EEXIST, 0 };
    for (int i = 0; i < 3; i++) {
        assert_int_equal(m.res[i].calls, 1);
        assert_int_equal(m.res[i].rc, want[i]);
    }
    jrpc_replay_stats_t st;
    jrpc_replay_stats(m.r, &st);
    assert_int_equal(st.claims, 2);
    assert_int_equal(st.replays, 1);
    fake_mod_stop(&m);

    /* The same reply one byte at a time: nobody is answered before its end. */
    static const char one[] = "*3\r\n$1\r\n7\r\n$5\r\nMULTI\r\n$3\r\n011\r\n";
    fake_mod_start(&m, 3, true);
    for (size_t i = 0; i + 1 < sizeof one - 1; i++) {
        fake_mod_feed(&m, one + i, 1);
        assert_int_equal(m.res[0].calls + m.res[1].calls + m.res[2].calls, 0);
    }
    fake_mod_feed(&m, one + sizeof one - 2, 1);
    assert_true(m.r->conn == m.conn);
    assert_int_equal(m.res[0].rc, -EEXIST);
    assert_int_equal(m.res[1].rc, 0);
    assert_int_equal(m.res[2].rc, 0);
    fake_mod_stop(&m);

    /* Not the answer: another tag, one flag too few, a bad flag, MULTI to
     * a lone claim, the lone claim's OK to a script of two. */
    static const struct { const char *resp; size_t nclaims; bool multi; } cases[] = {
        { "*3\r\n$1\r\n8\r\n$5\r\nMULTI\r\n$2\r\n11\r\n", 2, true },
        { "*3\r\n$1\r\n7\r\n$5\r\nMULTI\r\n$1\r\n1\r\n", 2, true },
        { "*3\r\n$1\r\n7\r\n$5\r\nMULTI\r\n$2\r\n1?\r\n", 2, true },
        { "*3\r\n$1\r\n7\r\n$5\r\nMULTI\r\n$1\r\n1\r\n", 1, false },
        { "*2\r\n$1\r\n7\r\n$2\r\nOK\r\n", 2, true },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        fake_mod_start(&m, cases[c].nclaims, cases[c].multi);
        fake_mod_feed(&m, cases[c].resp, strlen(cases[c].resp));
        assert_null(m.r->conn);   /* dropped: out of step */
        for (size_t i = 0; i < cases[c].nclaims; i++) {
            assert_int_equal(m.res[i].calls, 1);
            assert_int_equal(m.res[i].rc, -EAGAIN);
        }
        fake_mod_stop(&m);
    }

    /* An error reply: each claim fails closed, the connection stays (as for
     * one claim); NOSCRIPT drops it (the next connection loads the script). */
    fake_mod_start(&m, 2, true);
    FEED(&m, "-OOM command not allowed\r\n");
    assert_true(m.r->conn == m.conn);
    assert_int_equal(m.res[0].rc, -EAGAIN);
    assert_int_equal(m.res[1].rc, -EAGAIN);
    fake_mod_stop(&m);
    fake_mod_start(&m, 2, true);
    FEED(&m, "-NOSCRIPT No matching script\r\n");
    assert_null(m.r->conn);
    assert_int_equal(m.res[0].calls + m.res[1].calls, 2);
    assert_int_equal(m.res[1].rc, -EAGAIN);
    fake_mod_stop(&m);
}

/* Claims queued in one loop turn leave as one script; one replayed nonce
 * among fresh ones is refused alone, as is a nonce twice in the same
 * script; the same nonce under another key id is fresh. */
static void test_batch_replay_among_fresh(void **state)
{
    fx_t *f = *state;
    make_up_shared(f, 2000);
    assert_int_equal(claim_wait(&f->loop, f->r, "kb", "batch-used-before"), 0);

    static const struct { const char *key, *nonce; int rc; } claims[] = {
        { "kb", "batch-fresh-00", 0 },      { "kb", "batch-fresh-01", 0 },
        { "kb", "batch-used-before", -EEXIST }, { "kb", "batch-fresh-02", 0 },
        { "kb", "batch-fresh-00", -EEXIST }, { "kb2", "batch-used-before", 0 },
    };
    enum { N = sizeof claims / sizeof claims[0] };
    res_t res[N];
    long long scripts = commandstat(&shared, "evalsha");
    for (int i = 0; i < N; i++)
        assert_int_equal(claim_ts(f->r, claims[i].key, claims[i].nonce, now_s(), &res[i]), 0);
    for (int i = 0; i < N; i++)
        assert_true(run_until(&f->loop, res_done, &res[i], 5000));
    run_for(&f->loop, 5);
    for (int i = 0; i < N; i++) {
        assert_int_equal(res[i].calls, 1);
        assert_int_equal(res[i].rc, claims[i].rc);
    }
    assert_int_equal(commandstat(&shared, "evalsha") - scripts, 1);
    redisReply *rep = srv_cmd(&shared, "TTL jrpc:nonce:kb:batch-fresh-02");
    assert_true(rep->integer == 2 * WINDOW_S || rep->integer == 2 * WINDOW_S - 1);
    freeReplyObject(rep);
    assert_true(key_exists(&shared, "jrpc:nonce:kb2:batch-used-before"));
    jrpc_replay_stats_t st;
    jrpc_replay_stats(f->r, &st);
    assert_int_equal(st.claims, 5);
    assert_int_equal(st.replays, 2);

    /* More than a script takes: 150 claims in three scripts (64, 64, 22). */
    static res_t many[150];
    char nonce[32];
    scripts = commandstat(&shared, "evalsha");
    for (int i = 0; i < 150; i++) {
        snprintf(nonce, sizeof nonce, "batch-many-%03d", i);
        assert_int_equal(claim_ts(f->r, "kb", nonce, now_s(), &many[i]), 0);
    }
    for (int i = 0; i < 150; i++) {
        assert_true(run_until(&f->loop, res_done, &many[i], 5000));
        assert_int_equal(many[i].rc, 0);
    }
    assert_int_equal(commandstat(&shared, "evalsha") - scripts, 3);
}

/* Redis lost its memory: the script's one epoch check answers every claim
 * of it, as it would each alone (-ESTALE signed too early, -EAGAIN later),
 * and claims none. */
static void test_batch_epoch_lost(void **state)
{
    fx_t *f = *state;
    srv_start(&f->srv);
    char url[128];
    url_of(url, sizeof url, &f->srv, "", "");
    make_up(f, url, 1000);
    freeReplyObject(srv_cmd(&f->srv, "FLUSHALL"));
    int64_t now = now_s();
    res_t res[3];
    assert_int_equal(claim_ts(f->r, "ke", "epoch-a-0000000", now, &res[0]), 0);
    assert_int_equal(claim_ts(f->r, "ke", "epoch-b-0000000", now + 3 * WINDOW_S, &res[1]), 0);
    assert_int_equal(claim_ts(f->r, "ke", "epoch-c-0000000", now - 1, &res[2]), 0);
    for (int i = 0; i < 3; i++)
        assert_true(run_until(&f->loop, res_done, &res[i], 5000));
    assert_int_equal(res[0].rc, -ESTALE);
    assert_int_equal(res[1].rc, -EAGAIN);
    assert_int_equal(res[2].rc, -ESTALE);
    assert_int_equal(commandstat(&f->srv, "evalsha"), 1);
    assert_false(key_exists(&f->srv, "jrpc:nonce:ke:epoch-a-0000000"));
    assert_false(key_exists(&f->srv, "jrpc:nonce:ke:epoch-b-0000000"));
    assert_true(jrpc_replay_up(f->r));
}

/* ---- claims with a rate limit, grouped (issue 35) ------------------------ */

typedef struct ares {
    int      rc;
    int      calls;
    uint64_t wait_us;
} ares_t;

static void on_admit(void *arg, int rc, uint64_t wait_us)
{
    assert_false(in_claim);
    ares_t *a = arg;
    a->rc = rc;
    a->wait_us = wait_us;
    a->calls++;
}

static bool ares_done(void *ctx)
{
    return ((ares_t *)ctx)->calls > 0;
}

/* One claim through jrpc_replay_admit: nonce "" for none, who NULL for no
 * rate limit; 10 calls/s, a burst of 2, each claim costing one call. */
static int admit_one(jrpc_replay_t *r, const char *key, const char *nonce, const char *who,
                     int64_t ts, ares_t *a)
{
    jrpc_replay_rate_t rr = { .who = { who, who ? strlen(who) : 0 },
                              .cost_us = 100000, .burst_us = 200000 };
    memset(a, 0, sizeof *a);
    a->rc = 1;
    in_claim = true;
    int rc = jrpc_replay_admit(r, (jrpc_span_t){ key, strlen(key) },
                               (jrpc_span_t){ nonce, strlen(nonce) }, ts, who ? &rr : NULL,
                               on_admit, a);
    in_claim = false;
    return rc;
}

/* The claims of one loop turn with rate limits among them leave as ONE
 * script, each answered as it would be alone: passed, over its rate (its
 * nonce released, the wait given), a replay (the rate not charged), a
 * nonce twice in the group refused the second time only, a rate limit
 * alone, a nonce alone. */
static void test_batch_rates(void **state)
{
    fx_t *f = *state;
    make_up_shared(f, 2000);
    assert_int_equal(claim_wait(&f->loop, f->r, "kr", "rate-used-before"), 0);
    static const struct { const char *nonce, *who; int rc; } claims[] = {
        { "rate-a", "kr", 0 },          { "rate-b", "kr", 0 },
        { "rate-c", "kr", -EDQUOT },    /* the third within the burst of 2 */
        { "rate-used-before", "kr", -EEXIST }, { "rate-a", "kr2", -EEXIST },
        { "", "addr:192.0.2.7", 0 },    { "rate-d", NULL, 0 },
        { "rate-e", "kr3", 0 },
    };
    enum { N = sizeof claims / sizeof claims[0] };
    ares_t res[N];
    long long scripts = commandstat(&shared, "evalsha"), gets = commandstat(&shared, "get");
    for (int i = 0; i < N; i++)
        assert_int_equal(admit_one(f->r, "kr", claims[i].nonce, claims[i].who, now_s(), &res[i]), 0);
    for (int i = 0; i < N; i++)
        assert_true(run_until(&f->loop, ares_done, &res[i], 5000));
    run_for(&f->loop, 5);
    for (int i = 0; i < N; i++) {
        assert_int_equal(res[i].calls, 1);
        if (res[i].rc != claims[i].rc)
            fail_msg("claim %d: rc %d, expected %d", i, res[i].rc, claims[i].rc);
    }
    assert_int_equal(commandstat(&shared, "evalsha") - scripts, 1);
    /* GETs: the epoch, and each rate key once however many claims share it
     * (kr: three; kr2 is never read, its claim a replay) */
    assert_int_equal(commandstat(&shared, "get") - gets, 4);
    assert_true(res[2].wait_us > 0 && res[2].wait_us <= 100000);
    assert_false(key_exists(&shared, "jrpc:nonce:kr:rate-c"));   /* released: it ran nowhere */
    assert_true(key_exists(&shared, "jrpc:nonce:kr:rate-e"));
    assert_true(key_exists(&shared, "jrpc:rate:addr:192.0.2.7"));
    assert_true(key_exists(&shared, "jrpc:rate:kr3"));
    assert_false(key_exists(&shared, "jrpc:rate:kr2"));          /* a replay costs its key nothing */
    jrpc_replay_stats_t st;
    jrpc_replay_stats(f->r, &st);
    assert_int_equal(st.limited, 1);
    /* the shared key's TAT written once, after its last claim: both of the
     * burst are spent, so the next claim waits as the third did */
    ares_t more;
    assert_int_equal(admit_one(f->r, "kr", "rate-f", "kr", now_s(), &more), 0);
    assert_true(run_until(&f->loop, ares_done, &more, 5000));
    assert_int_equal(more.rc, -EDQUOT);
}

/* A group with rate limits that Redis answers with an error, or not at all
 * (frozen: --redis-timeout-ms), fails every body of it with -EAGAIN, once
 * each, and claims nothing. */
static void test_batch_rates_fail(void **state)
{
    fx_t *f = *state;
    srv_start(&f->srv);
    char url[128];
    url_of(url, sizeof url, &f->srv, "", "");
    make_up(f, url, 300);
    ares_t res[4];
    char nonce[32];

    freeReplyObject(srv_cmd(&f->srv, "CONFIG SET maxmemory 1"));   /* every write: -OOM */
    long long scripts = commandstat(&f->srv, "evalsha");
    for (int i = 0; i < 4; i++) {
        snprintf(nonce, sizeof nonce, "oom-%d", i);
        assert_int_equal(admit_one(f->r, "ko", i == 3 ? "" : nonce, i == 0 ? NULL : "ko",
                                   now_s(), &res[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        assert_true(run_until(&f->loop, ares_done, &res[i], 5000));
    run_for(&f->loop, 5);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(res[i].calls, 1);
        assert_int_equal(res[i].rc, -EAGAIN);
    }
    assert_int_equal(commandstat(&f->srv, "evalsha") - scripts, 1);
    freeReplyObject(srv_cmd(&f->srv, "CONFIG SET maxmemory 0"));
    assert_false(key_exists(&f->srv, "jrpc:nonce:ko:oom-1"));
    assert_false(key_exists(&f->srv, "jrpc:rate:ko"));
    assert_true(jrpc_replay_up(f->r));

    kill(f->srv.pid, SIGSTOP);
    for (int i = 0; i < 4; i++) {
        snprintf(nonce, sizeof nonce, "frozen-rate-%d", i);
        assert_int_equal(admit_one(f->r, "ko", i == 3 ? "" : nonce, i == 0 ? NULL : "ko",
                                   now_s(), &res[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        assert_true(run_until(&f->loop, ares_done, &res[i], 5000));
    run_for(&f->loop, 5);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(res[i].calls, 1);
        assert_int_equal(res[i].rc, -EAGAIN);
    }
    kill(f->srv.pid, SIGCONT);
    assert_true(run_until(&f->loop, is_up, f->r, 6000));
}

int main(void)
{
    jrpc_log_init("test_jrpc_replay");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_bad_urls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fresh_replay_ttl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_in_flight, setup, teardown),
        cmocka_unit_test(test_multi_flags),
        cmocka_unit_test(test_multi_answers),
        cmocka_unit_test(test_multi_verdicts),
        cmocka_unit_test_setup_teardown(test_batch_replay_among_fresh, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_epoch_lost, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_rates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_rates_fail, setup, teardown),
        cmocka_unit_test_setup_teardown(test_killed_and_restarted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_frozen_redis_times_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_auth, setup, teardown),
        cmocka_unit_test_setup_teardown(test_select_db, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unix_socket, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nothing_listening, setup, teardown),
        cmocka_unit_test_setup_teardown(test_destroy_cancels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_destroy_from_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_claim_from_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_select_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flushall, setup, teardown),
        cmocka_unit_test_setup_teardown(test_epoch_from_the_future, setup, teardown),
        cmocka_unit_test_setup_teardown(test_script_flushed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idem_script_flushed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unsolicited_reply, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sentinel_first_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sentinel_nil_error_hang, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sentinel_all_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sentinel_role_slave, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sentinel_readonly, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sentinel_passwords, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wait_replicas, setup, teardown),
        cmocka_unit_test_setup_teardown(test_host_names, setup, teardown),
        cmocka_unit_test(test_resp_format_as_hiredis),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
