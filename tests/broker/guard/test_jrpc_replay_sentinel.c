/* Tests of jrpc_replay with sentinel:// against fake sentinels (threads
 * speaking RESP, below) in front of a real master and replica
 * (replay_fixture.h): a sentinel down, hung, answering nil or an error, all
 * of them down (fail closed) and back, ROLE saying slave, -READONLY after a
 * switch, the passwords; --redis-wait-replicas with a replica frozen; host
 * names looked up off the loop. */
#include "replay_fixture.h"

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

int main(void)
{
    jrpc_log_init("test_jrpc_replay_sentinel");
    fakes_stop_fn = fakes_stop;   /* teardown stops the fakes a test started */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sentinel_first_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sentinel_nil_error_hang, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sentinel_all_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sentinel_role_slave, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sentinel_readonly, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sentinel_passwords, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wait_replicas, setup, teardown),
        cmocka_unit_test_setup_teardown(test_host_names, setup, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
