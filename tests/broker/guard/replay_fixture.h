/* The fixture every test_jrpc_replay*.c program shares: real redis-server
 * processes started on 127.0.0.1 (random free ports) or a unix socket, the
 * loop run under a deadline (so no test can hang), claims and their
 * callbacks, the module made against a URL, stderr captured. It includes
 * jrpc_replay.c, jrpc_replay_group.c and jrpc_redis.c, so each program
 * reaches their statics; include it once, first, from one .c per program.
 * Not every program uses every helper, hence -Wunused-function is off here. */
#ifndef JRPC_TEST_REPLAY_FIXTURE_H
#define JRPC_TEST_REPLAY_FIXTURE_H

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"

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
/* Set by the file that starts fake sentinels (test_jrpc_replay_sentinel.c)
 * before its tests run: teardown stops them through it. */
static void (*fakes_stop_fn)(struct fakes **fk_p);

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
    if (fakes_stop_fn != NULL)
        fakes_stop_fn(&f->fk);
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


#pragma GCC diagnostic pop

#endif
