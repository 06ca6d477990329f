/* jrpc_redis — the replay guard's link to Redis (see jrpc_replay.h; the
 * state is in jrpc_replay_int.h, what is asked and what the answers mean in
 * jrpc_replay.c): connecting to a fixed address or to the master found
 * through Sentinel, host names looked up off the loop, the handshake,
 * reconnects with backoff, the watchdog, the reply objects, and the writes.
 *
 * The client is our own, on libuv: a non-blocking hiredis redisContext
 * gives the connect (TCP or unix socket), the output buffer and the reply
 * reader; a uv_poll_t on its socket drives reads and writes; every reply is
 * matched against our FIFO of sent commands (`pending`), oldest first. We do
 * not use hiredis' async API: in 0.14 a reply that arrives when no callback
 * is queued trips an assert() in redisProcessCallbacks, so one unsolicited
 * "+OK" (a broken proxy, an on-path attacker) aborted the broker. Here a
 * reply with no command waiting, or one that does not answer the command at
 * the head (the script echoes a per-connection tag), is a desynchronised
 * connection: it is dropped, every pending claim fails closed (-EAGAIN), and
 * the retry timer reconnects. The FIFO also gives the command timeout (a
 * watchdog looks at the age of the head).
 *
 * States: down (conn == NULL, retry timer armed), asking (sentinel://
 * only: conn is to a sentinel, AUTH and SENTINEL get-master-addr-by-name in
 * the FIFO; a failure moves on to the next sentinel at once, and a round
 * where none answered waits for the retry timer), connecting (conn to the
 * master, the handshake AUTH/SELECT[/ROLE]/SCRIPT LOAD/hello in the FIFO;
 * with sentinel:// the script is loaded only once ROLE said master), up
 * (hello answered). Claims are accepted only when up; otherwise they fail
 * at once with -EAGAIN. With sentinel://, every drop of the master
 * connection (error, -READONLY, timeout) re-discovers on the next attempt.
 *
 * Writes: the commands queued during one turn of the loop (the claims of
 * every body read in it) leave in one write, from a check handle that
 * runs right after the loop's I/O callbacks; only a write the socket could
 * not take whole waits for UV_WRITABLE. Polling for UV_WRITABLE on every
 * claim instead cost two epoll_ctl and one more loop turn per write. A
 * claim queued after this turn's check phase could have begun (a ZeroMQ
 * socket is serviced from prepare and idle handles too: jrpc_zwatch) must
 * not wait for the next I/O to be written: an idle handle, active until the
 * write, keeps the loop from blocking in between (and writes if it runs
 * first). */
#include "jrpc_replay_int.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "jrpc_log.h"

#define MAX_ELEMENTS 8        /* our replies have at most 3; bigger arrays are refused unbuilt */
#define MAX_ROLE_ELEMENTS 1024/* ROLE lists a master's replicas: allowed for its reply only */

static void conn_start(jrpc_replay_t *r);

void on_retry(uv_timer_t *t)
{
    conn_start(t->data);
}

/* ---- the FIFO ------------------------------------------------------------ */

/* Answers and frees a detached list. A callback may destroy r: r stays
 * allocated until its close callbacks, and nothing here touches the loop. */
void fail_list(jrpc_replay_t *r, pending_t *list, int rc)
{
    while (list != NULL) {
        pending_t *p = list;
        list = p->next;
        if (p->kind == CMD_MULTI) {
            pending_t *claims = p->claims;
            free(p);
            fail_list(r, claims, rc);
            continue;
        }
        if (p->kind == CMD_IDEM) {
            p->icb(p->arg, rc, NULL, 0);
        } else if (p->kind == CMD_CLAIM) {
            if (rc == -EAGAIN)
                r->st.failures++;
            if (p->acb)
                p->acb(p->arg, rc, 0);
            else
                p->cb(p->arg, rc);
        }
        free(p);
    }
}

/* ---- reply objects ------------------------------------------------------- */

/* hiredis' own reply functions, except that arrays longer than ours can be
 * are refused before they are allocated (a "*2000000000" header would
 * otherwise ask calloc for 16 GB): the reader then reports an error. ROLE's
 * reply lists a master's replicas, so while ROLE heads the FIFO (the reply
 * being parsed answers the head: replies are taken one at a time) its
 * arrays may be longer. The reader's privdata is the jrpc_replay_t (NULL in
 * the fuzz target's readers). */
static redisReplyObjectFunctions reply_fns;          /* what our readers use */
static const redisReplyObjectFunctions *default_fns; /* hiredis' own, copied once */

static void *create_array(const redisReadTask *task, int elements)
{
    const jrpc_replay_t *r = task->privdata;
    bool role = r != NULL && r->head != NULL && r->head->kind == CMD_ROLE;
    if (elements > (role ? MAX_ROLE_ELEMENTS : MAX_ELEMENTS))
        return NULL;
    return default_fns->createArray(task, elements);
}

int init_reply_fns(void)
{
    static redisReplyObjectFunctions defaults;
    if (default_fns != NULL)
        return 0;
    redisReader *rd = redisReaderCreate();
    if (rd == NULL)
        return -ENOMEM;
    defaults = *rd->fn;
    redisReaderFree(rd);
    default_fns = &defaults;
    reply_fns = defaults;
    reply_fns.createArray = create_array;
    return 0;
}

/* ---- connection ---------------------------------------------------------- */

static void on_conn_closed(uv_handle_t *h)
{
    conn_t *conn = (conn_t *)h;   /* poll is the first member */
    redisFree(conn->c);   /* closes the socket, after libuv let go of it */
    free(conn);
}

static void conn_close(conn_t *conn)
{
    if (conn->polled) {
        uv_close((uv_handle_t *)&conn->poll, on_conn_closed);
        return;
    }
    if (conn->c != NULL)
        redisFree(conn->c);
    else
        redisReaderFree(conn->rd);
    free(conn);
}

static void schedule_retry(jrpc_replay_t *r)
{
    if (r->closing)
        return;
    uint64_t delay = r->backoff_ms;
    r->backoff_ms = delay * 2 > r->backoff_max ? r->backoff_max : delay * 2;
    uv_timer_start(&r->retry, on_retry, delay, 0);
}

/* Detaches the current connection, closes it, and returns what was waiting
 * on it (the FIFO, then the held claims) for fail_list(). */
pending_t *conn_detach(jrpc_replay_t *r)
{
    conn_t *conn = r->conn;
    pending_t *list = r->head;
    if (r->tail != NULL)
        r->tail->next = r->held;
    else
        list = r->held;
    if (r->batch != NULL) {   /* after the held ones: the list's end */
        pending_t **end = &list;
        while (*end != NULL)
            end = &(*end)->next;
        *end = r->batch;
    }
    r->conn = NULL;
    r->head = r->tail = r->held = r->held_tail = NULL;
    r->batch = r->batch_tail = NULL;
    r->nbatch = 0;
    r->npending = 0;
    r->unwaited = 0;
    r->up = false;
    uv_timer_stop(&r->watchdog);
    if (r->lookup != NULL) {   /* given up: its callback sees it is no longer ours */
        uv_cancel((uv_req_t *)r->lookup);
        r->lookup = NULL;
    }
    if (conn != NULL)
        conn_close(conn);
    return list;
}

static void sentinel_ask(jrpc_replay_t *r);

/* Gives up the current connection: detaches it and the FIFO, closes it,
 * fails every pending claim with -EAGAIN, and either asks the next
 * sentinel (while finding the master) or arms the reconnect. Safe from
 * inside the reply loop: the loop stops when r->conn changes. */
void conn_drop(jrpc_replay_t *r, const char *event, const char *error)
{
    size_t n = r->npending;
    bool was_up = r->up, asking = r->asking;
    pending_t *list = conn_detach(r);
    JRPC_LOG(JRPC_LOG_WARN, COMP, "event=%s target=%s%s was_up=%d pending=%zu retry_ms=%llu "
             "error=\"%.200s\"", event, r->target, asking ? " role=sentinel" : "", was_up, n,
             asking ? 0ULL : (unsigned long long)r->backoff_ms, error ? error : "-");
    if (asking) {
        jrpc_sentinel_failed(r->where);
        sentinel_ask(r);
    } else {
        schedule_retry(r);
    }
    fail_list(r, list, -EAGAIN);
}

static void on_watchdog(uv_timer_t *t)
{
    jrpc_replay_t *r = t->data;
    if (r->lookup != NULL && uv_hrtime() - r->open_ns >= r->timeout_ns) {
        conn_drop(r, "resolve_timeout", "no address in time");
        return;
    }
    if (r->head == NULL || uv_hrtime() - r->head->sent_ns < r->timeout_ns)
        return;
    conn_drop(r, r->up ? "timeout" : "connect_timeout", "no answer in time");
}

/* ---- replies ------------------------------------------------------------- */

static bool reply_is(const redisReply *rep, const char *status)
{
    return rep->type == REDIS_REPLY_STATUS && strcmp(rep->str, status) == 0;
}

static int send_handshake(jrpc_replay_t *r, enum cmd_kind kind, uint64_t now);
static void master_connect(jrpc_replay_t *r);

/* A sentinel's answer to get-master-addr-by-name: connect to the master it
 * names, or ask the next sentinel. */
static void handle_ask(jrpc_replay_t *r, const redisReply *rep)
{
    char sentinel[sizeof r->target];
    snprintf(sentinel, sizeof sentinel, "%s", r->target);
    int rc = jrpc_sentinel_answer(r->where, rep);
    fail_list(r, conn_detach(r), -EAGAIN);   /* the question was the last in the FIFO */
    if (rc < 0) {
        JRPC_LOG(JRPC_LOG_WARN, COMP, "event=sentinel_no_master sentinel=%s master_name=%s "
                 "reason=\"%.200s\"", sentinel, jrpc_sentinel_name(r->where),
                 rc == -ENOENT ? "this sentinel does not know the master"
                 : rc == -EACCES ? rep->str : "not a host and port");
        sentinel_ask(r);
        return;
    }
    r->st.masters_found++;
    JRPC_LOG(rc == 1 ? JRPC_LOG_INFO : JRPC_LOG_DEBUG, COMP,
             "event=master_found sentinel=%s master_name=%s master=%s changed=%d", sentinel,
             jrpc_sentinel_name(r->where), jrpc_sentinel_master(r->where)->name, rc);
    master_connect(r);
}

void handle_handshake(jrpc_replay_t *r, pending_t *p, const redisReply *rep)
{
    enum cmd_kind kind = p->kind;
    const redisReply *word = kind == CMD_HELLO ? script_word(rep, p) : NULL;
    uint64_t sent_ns = p->sent_ns;
    free(p);
    if (kind == CMD_ASK) {
        handle_ask(r, rep);
        return;
    }
    if (kind == CMD_HELLO && word != NULL && str_is(word, "EPOCH") &&
        adopt_epoch(r, rep->element[2]->str, rep->element[2]->len) == 0) {
        r->up = true;
        r->backoff_ms = BACKOFF_MIN_MS;
        JRPC_LOG(JRPC_LOG_INFO, COMP, "event=up target=%s db=%lu attempts=%llu", r->target,
                 jrpc_sentinel_db(r->where), (unsigned long long)r->attempts);
        return;
    }
    if ((kind == CMD_LOAD || kind == CMD_LOAD_IDEM) && rep->type == REDIS_REPLY_STRING &&
        rep->len == 40) {
        char *sha = kind == CMD_LOAD ? r->sha : r->idem_sha;
        memcpy(sha, rep->str, 40);
        sha[40] = '\0';
        return;
    }
    if ((kind == CMD_AUTH || kind == CMD_SELECT) && reply_is(rep, "OK"))
        return;
    char role[40] = "";
    if (kind == CMD_ROLE && jrpc_sentinel_role(rep, role, sizeof role) == 0) {
        /* A master: now the script and the epoch (never written to a replica). */
        int rc = send_handshake(r, CMD_LOAD, sent_ns);
        if (rc == 0)
            rc = send_handshake(r, CMD_LOAD_IDEM, sent_ns);
        if (rc == 0)
            rc = send_handshake(r, CMD_HELLO, sent_ns);
        if (rc < 0)
            conn_drop(r, "connect_failed", "cannot queue the handshake");
        return;
    }
    if (kind == CMD_ROLE && role[0] != '\0') {
        /* The guide: not the master (yet, or any more): pause, find it again. */
        JRPC_LOG(JRPC_LOG_WARN, COMP, "event=not_master target=%s role=%s", r->target, role);
        conn_drop(r, "not_master", role);
        return;
    }
    /* Redis' own error text, which never contains the password. */
    const char *why = rep->type == REDIS_REPLY_ERROR || rep->type == REDIS_REPLY_STATUS
                      ? rep->str : "unexpected reply";
    const char *event = kind == CMD_AUTH ? "auth_failed" : kind == CMD_SELECT ? "select_failed"
                      : kind == CMD_ROLE ? "role_failed"
                      : kind == CMD_LOAD || kind == CMD_LOAD_IDEM ? "script_load_failed"
                      : "epoch_failed";
    JRPC_LOG(JRPC_LOG_ERROR, COMP, "event=%s target=%s%s db=%lu reason=\"%.200s\"", event,
             r->target, r->asking ? " role=sentinel" : "", jrpc_sentinel_db(r->where), why);
    conn_drop(r, "handshake_failed", event);
}

/* ---- writes -------------------------------------------------------------- */

/* Writes what conn's output buffer holds (the WAIT owed to the claims in
 * it first); what the socket does not take waits for UV_WRITABLE. Returns
 * 0, or -1 when conn was dropped. */
static int write_out(jrpc_replay_t *r, conn_t *conn)
{
    int done = 0;
    if (r->batch != NULL && batch_write(r) < 0) {
        conn_drop(r, "disconnected", "cannot queue the claims");
        return -1;
    }
    if (r->unwaited > 0 && send_wait(r) < 0) {
        conn_drop(r, "disconnected", "cannot queue WAIT");
        return -1;
    }
    if (redisBufferWrite(conn->c, &done) != REDIS_OK) {
        conn_drop(r, "disconnected", conn->c->errstr);
        return -1;
    }
    set_writing(conn, !done);
    return 0;
}

/* One write for every command queued since the last one. */
static void flush(jrpc_replay_t *r)
{
    uv_check_stop(&r->flush);
    uv_idle_stop(&r->unblock);
    conn_t *conn = r->conn;
    if (conn != NULL && conn->connected && !conn->writing)
        write_out(r, conn);
}

void on_flush(uv_check_t *h)
{
    flush(h->data);
}

void on_unblock(uv_idle_t *h)
{
    flush(h->data);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    jrpc_replay_t *r = h->data;
    conn_t *conn = r->conn;
    assert(conn != NULL && &conn->poll == h);
    if (status < 0) {
        /* libuv says EBADF for POLLERR: the socket knows the real reason. */
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(conn->c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
        conn_drop(r, conn->connected ? "disconnected" : "connect_failed",
                  err != 0 ? strerror(err) : uv_strerror(status));
        return;
    }
    if (!conn->connected) {
        if (!(events & UV_WRITABLE))
            return;
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(conn->c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
            err = errno;
        if (err != 0) {
            conn_drop(r, "connect_failed", strerror(err));
            return;
        }
        conn->connected = true;
        JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=connected target=%s", r->target);
    }
    if ((events & UV_WRITABLE) && write_out(r, conn) < 0)
        return;
    if (events & UV_READABLE) {
        if (redisBufferRead(conn->c) != REDIS_OK) {
            /* Replies read before the error still answer their commands. */
            process_replies(r, conn);
            if (r->conn == conn)
                conn_drop(r, "disconnected", conn->c->errstr);
            return;
        }
        process_replies(r, conn);
    }
}

void set_writing(conn_t *conn, bool on)
{
    if (!conn->polled || conn->writing == on)
        return;
    conn->writing = on;
    uv_poll_start(&conn->poll, UV_READABLE | (on ? UV_WRITABLE : 0), on_poll);
}

/* p's command is in the output buffer: it waits for its reply, and leaves
 * at the end of this loop turn (while connecting: once the socket is
 * writable). */
static void queued(jrpc_replay_t *r, pending_t *p)
{
    fifo_push(r, p);
    if (!r->conn->connected)
        set_writing(r->conn, true);
    else if (!r->conn->writing) {
        uv_check_start(&r->flush, on_flush);
        uv_idle_start(&r->unblock, on_unblock);
    }
}

/* Queues one command built from argc strings (each argv[i] of lens[i]
 * bytes, binary-safe) on the current connection: hiredis' printf-like
 * formatter costs about 25 000 instructions for a claim, mostly in
 * appending the format's literal bytes one by one. Returns 0 or -ENOMEM. */
int send_argv(jrpc_replay_t *r, pending_t *p, int argc, const char **argv,
                     const size_t *lens)
{
    if (redisAppendCommandArgv(r->conn->c, argc, argv, lens) != REDIS_OK)
        return -ENOMEM;
    queued(r, p);
    return 0;
}

/* Queues one command on the current connection. Returns 0 or a negative errno. */
int send_cmd(jrpc_replay_t *r, pending_t *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = redisvAppendCommand(r->conn->c, fmt, ap);
    va_end(ap);
    if (rc != REDIS_OK)
        return -ENOMEM;
    queued(r, p);
    return 0;
}

/* ---- opening a connection ------------------------------------------------ */

static int send_handshake(jrpc_replay_t *r, enum cmd_kind kind, uint64_t now)
{
    pending_t *p = calloc(1, sizeof *p);
    if (p == NULL)
        return -ENOMEM;
    p->kind = kind;
    p->sent_ns = now;
    const jrpc_redis_auth_t *a = r->asking ? jrpc_sentinel_auth(r->where)
                                           : jrpc_sentinel_master_auth(r->where);
    int rc;
    if (kind == CMD_AUTH && a->user != NULL) {
        rc = send_cmd(r, p, "AUTH %b %b", a->user, a->user_n, a->pass, a->pass_n);
    } else if (kind == CMD_AUTH) {
        rc = send_cmd(r, p, "AUTH %b", a->pass, a->pass_n);
    } else if (kind == CMD_ASK) {
        rc = send_cmd(r, p, "SENTINEL get-master-addr-by-name %s", jrpc_sentinel_name(r->where));
    } else if (kind == CMD_SELECT) {
        rc = send_cmd(r, p, "SELECT %s", r->dbs);
    } else if (kind == CMD_ROLE) {
        rc = send_cmd(r, p, "ROLE");
    } else if (kind == CMD_LOAD || kind == CMD_LOAD_IDEM) {
        rc = send_cmd(r, p, "SCRIPT LOAD %s", kind == CMD_LOAD ? CLAIM_LUA : IDEM_LUA);
    } else {
        char prop[EPOCH_MAX + 1], tag[24];
        proposal(r, prop, sizeof prop);
        p->tag = r->next_tag++;
        snprintf(tag, sizeof tag, "%llu", (unsigned long long)p->tag);
        rc = send_cmd(r, p, "EVAL %s 1 " EPOCH_KEY " %s %s %s %s", CLAIM_LUA, r->epoch, prop,
                      r->ttl, tag);
    }
    if (rc < 0)
        free(p);
    return rc;
}

/* Queues what a new connection sends first: to a sentinel AUTH and the
 * question; to the master AUTH, SELECT, then SCRIPT LOAD (the claim script,
 * then the idempotency keys') and the epoch, or
 * with Sentinel ROLE first (the rest follows once it says master). Its age
 * runs from the start of the connection, so a connect that never completes
 * times out through the watchdog like any command. */
static int send_opening(jrpc_replay_t *r)
{
    const jrpc_redis_auth_t *a = r->asking ? jrpc_sentinel_auth(r->where)
                                           : jrpc_sentinel_master_auth(r->where);
    int rc = a->pass != NULL ? send_handshake(r, CMD_AUTH, r->open_ns) : 0;
    if (r->asking)
        return rc == 0 ? send_handshake(r, CMD_ASK, r->open_ns) : rc;
    if (rc == 0 && jrpc_sentinel_db(r->where) != 0)
        rc = send_handshake(r, CMD_SELECT, r->open_ns);
    if (jrpc_sentinel_enabled(r->where))
        return rc == 0 ? send_handshake(r, CMD_ROLE, r->open_ns) : rc;
    if (rc == 0)
        rc = send_handshake(r, CMD_LOAD, r->open_ns);
    if (rc == 0)
        rc = send_handshake(r, CMD_LOAD_IDEM, r->open_ns);
    return rc == 0 ? send_handshake(r, CMD_HELLO, r->open_ns) : rc;
}

/* Connects to r->dest (ip: its numeric address; NULL for a unix socket)
 * and queues the opening. */
static void conn_connect(jrpc_replay_t *r, const char *ip)
{
    redisContext *c = ip ? redisConnectNonBlock(ip, r->dest.port)
                         : redisConnectUnixNonBlock(r->dest.path);
    conn_t *conn = c != NULL && !c->err ? calloc(1, sizeof *conn) : NULL;
    if (conn != NULL && uv_poll_init_socket(r->loop, &conn->poll, c->fd) < 0) {
        free(conn);
        conn = NULL;
    }
    if (conn == NULL) {
        char why[128];
        snprintf(why, sizeof why, "%s", c && c->err ? c->errstr : "out of memory or uv_poll_init");
        redisFree(c);
        conn_drop(r, "connect_failed", why);
        return;
    }
    conn->c = c;
    conn->rd = c->reader;
    conn->rd->fn = &reply_fns;
    conn->rd->privdata = r;   /* create_array() looks at the FIFO's head */
    conn->polled = true;
    conn->poll.data = r;
    r->conn = conn;
    r->warned_reply = false;
    r->next_tag = 1;
    r->sha[0] = '\0';
    r->idem_sha[0] = '\0';
    if (send_opening(r) < 0)
        conn_drop(r, "connect_failed", "cannot queue the handshake");
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    jrpc_replay_t *r = req->data;
    bool ours = r->lookup == req;
    free(req);
    r->nlookups--;
    char ip[INET6_ADDRSTRLEN + 16] = "";
    if (ours && status == 0 && res != NULL &&
        getnameinfo(res->ai_addr, res->ai_addrlen, ip, sizeof ip, NULL, 0, NI_NUMERICHOST) != 0)
        ip[0] = '\0';
    uv_freeaddrinfo(res);
    if (r->closing) {
        if (--r->nclosing == 0)
            free_self(r);
        return;
    }
    if (!ours)   /* given up (timed out, or the connection dropped) */
        return;
    r->lookup = NULL;
    if (ip[0] == '\0') {
        conn_drop(r, "resolve_failed", status < 0 ? uv_strerror(status) : "no address");
        return;
    }
    conn_connect(r, ip);
}

/* Begins a connection to nd (a sentinel while r->asking, else the master):
 * a host name is looked up off the loop first (hiredis would call
 * getaddrinfo() itself, and block the loop on DNS). Every failure goes
 * through conn_drop(): the next sentinel, or the retry timer. */
static void conn_open(jrpc_replay_t *r, const jrpc_redis_node_t *nd)
{
    assert(r->conn == NULL && r->head == NULL && r->held == NULL && r->lookup == NULL);
    r->dest = *nd;
    r->open_ns = uv_hrtime();
    snprintf(r->target, sizeof r->target, "%s", nd->name);
    JRPC_LOG(r->attempts > 1 ? JRPC_LOG_DEBUG : JRPC_LOG_INFO, COMP,
             "event=connecting target=%s%s attempt=%llu", r->target,
             r->asking ? " role=sentinel" : "", (unsigned long long)r->attempts);
    uint64_t tick = r->timeout_ns / 4000000;
    tick = tick < 5 ? 5 : tick > 250 ? 250 : tick;
    uv_timer_start(&r->watchdog, on_watchdog, tick, tick);
    unsigned char addr[sizeof(struct in6_addr)];
    if (nd->path[0] != '\0') {
        conn_connect(r, NULL);
        return;
    }
    if (inet_pton(AF_INET, nd->host, addr) == 1 || inet_pton(AF_INET6, nd->host, addr) == 1) {
        conn_connect(r, nd->host);
        return;
    }
    uv_getaddrinfo_t *req = malloc(sizeof *req);
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
    int rc = UV_ENOMEM;
    if (req != NULL) {
        req->data = r;
        rc = uv_getaddrinfo(r->loop, req, on_resolved, nd->host, NULL, &hints);
    }
    if (rc < 0) {
        free(req);
        conn_drop(r, "resolve_failed", uv_strerror(rc));
        return;
    }
    r->lookup = req;
    r->nlookups++;
}

static void master_connect(jrpc_replay_t *r)
{
    r->asking = false;
    conn_open(r, jrpc_sentinel_master(r->where));
}

/* Finding the master: asks the sentinel the round is at; a failure asks
 * the next one (conn_drop), so this recurses at most once per sentinel. A
 * round where none is left fails closed until the retry. */
static void sentinel_ask(jrpc_replay_t *r)
{
    if (r->closing)
        return;
    const jrpc_redis_node_t *nd = jrpc_sentinel_asking(r->where);
    if (nd != NULL) {
        r->asking = true;
        conn_open(r, nd);
        return;
    }
    r->asking = false;
    JRPC_LOG(JRPC_LOG_ERROR, COMP, "event=no_sentinel master_name=%s sentinels=%zu retry_ms=%llu "
             "detail=\"no sentinel named the master: signed bodies are refused (503)\"",
             jrpc_sentinel_name(r->where), jrpc_sentinel_count(r->where),
             (unsigned long long)r->backoff_ms);
    schedule_retry(r);
}

/* Runs from the retry timer: a new connection, through Sentinel when the
 * URL says so (every reconnect finds the master again). */
static void conn_start(jrpc_replay_t *r)
{
    assert(r->conn == NULL && r->head == NULL);
    if (r->attempts++ > 0)
        r->st.reconnects++;
    if (jrpc_sentinel_enabled(r->where)) {
        jrpc_sentinel_round_start(r->where);
        sentinel_ask(r);
    } else {
        master_connect(r);
    }
}
