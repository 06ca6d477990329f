/* jrpc_sentinel — where Redis is: the --redis URL, and for sentinel:// the
 * master found through Redis Sentinel.
 *
 * Three forms:
 *     redis://[[user]:password@]host:port[/db]
 *     unix:///path/to/redis.sock
 *     sentinel://[[user]:password@]host:port[,host:port...]/master_name[/db]
 * With sentinel:// the credentials in the URL are the sentinels' (their
 * requirepass or ACL user); the master's password comes from a password
 * file (--redis-password-file), which the two other forms may use too
 * instead of a password in the URL.
 *
 * Pure code: no socket, no loop, no log. The caller (jrpc_replay, and any
 * later user of --redis) does the I/O and feeds the replies in, following
 * the Redis Sentinel client guide:
 *   1. jrpc_sentinel_round_start(), then connect to jrpc_sentinel_asking()
 *      with a short timeout; on a connect error, an error reply or a
 *      timeout call jrpc_sentinel_failed() and ask the next one;
 *   2. send SENTINEL get-master-addr-by-name <name> and hand the reply to
 *      jrpc_sentinel_answer(): an address ends the round (that sentinel
 *      moves to the front of the list, so it is asked first next time); a
 *      nil (this sentinel does not know the master) or anything else moves
 *      on to the next sentinel;
 *   3. connect to jrpc_sentinel_master() and check jrpc_sentinel_role() of
 *      its ROLE reply: not a master means start again from 1 after a pause.
 * Whenever the master connection fails (error, -READONLY, timeout) the
 * caller starts again from 1: every reconnect re-discovers.
 * A round with no sentinel left (asking() is NULL) is a failure: the caller
 * fails closed and retries later. */
#ifndef JRPC_SENTINEL_H
#define JRPC_SENTINEL_H

#include <stdbool.h>
#include <stddef.h>

#include <hiredis/hiredis.h>

#define JRPC_SENTINEL_MAX      16    /* sentinels in one URL */
#define JRPC_SENTINEL_NAME_MAX 128   /* master name bytes */
#define JRPC_REDIS_PASS_MAX    1024  /* password bytes (URL or file) */

/* One address: TCP host and port, or a unix socket path. */
typedef struct jrpc_redis_node {
    char host[256];   /* TCP host without brackets ("" for a unix socket) */
    int  port;        /* TCP port */
    char path[108];   /* unix socket path ("" for TCP) */
    char name[300];   /* "host:port", "[v6]:port" or "unix:/path", for logs */
} jrpc_redis_node_t;

/* AUTH credentials. pass NULL: send no AUTH; user NULL: AUTH <pass>. */
typedef struct jrpc_redis_auth {
    char  *user;      /* ACL user, or NULL */
    size_t user_n;    /* its length (percent-decoding may give any byte) */
    char  *pass;      /* never logged */
    size_t pass_n;
} jrpc_redis_auth_t;

typedef struct jrpc_sentinel jrpc_sentinel_t;

/* Parses url (and reads password_file when not NULL: its first line is the
 * master's password). Returns 0 with *out set, -EINVAL with a message in
 * err ("--redis: ..." or "--redis-password-file: ..."; never the URL nor a
 * password), -ENOMEM. */
int jrpc_sentinel_parse(const char *url, const char *password_file, jrpc_sentinel_t **out,
                        char *err, size_t errlen);

/* Wipes the passwords and frees. NULL-safe; sets *self_p = NULL. */
void jrpc_sentinel_destroy(jrpc_sentinel_t **self_p);

/* True for sentinel://: the master is found by the steps above. */
bool jrpc_sentinel_enabled(const jrpc_sentinel_t *s);

/* The master: the URL's address (redis://, unix://), or the one the last
 * successful round found (sentinel://; NULL before the first). Borrowed:
 * valid until the next jrpc_sentinel_answer(). */
const jrpc_redis_node_t *jrpc_sentinel_master(const jrpc_sentinel_t *s);

/* The master's credentials and database (SELECT when not 0). */
const jrpc_redis_auth_t *jrpc_sentinel_master_auth(const jrpc_sentinel_t *s);
unsigned long jrpc_sentinel_db(const jrpc_sentinel_t *s);

/* The sentinels' credentials and the master's name (sentinel:// only). */
const jrpc_redis_auth_t *jrpc_sentinel_auth(const jrpc_sentinel_t *s);
const char *jrpc_sentinel_name(const jrpc_sentinel_t *s);

/* Sentinels in the URL, and the i-th in the current order (first: the one
 * that answered last). */
size_t jrpc_sentinel_count(const jrpc_sentinel_t *s);
const jrpc_redis_node_t *jrpc_sentinel_node(const jrpc_sentinel_t *s, size_t i);

/* Starts a discovery round at the front of the list. */
void jrpc_sentinel_round_start(jrpc_sentinel_t *s);

/* The sentinel to ask now, or NULL when every one of this round failed. */
const jrpc_redis_node_t *jrpc_sentinel_asking(const jrpc_sentinel_t *s);

/* The sentinel being asked could not be reached, timed out, refused AUTH
 * or broke the protocol: the round moves on to the next one. */
void jrpc_sentinel_failed(jrpc_sentinel_t *s);

/* The reply of the sentinel being asked to SENTINEL get-master-addr-by-name.
 * Returns 1 when it gave an address different from the last one found, 0
 * when the same (the round is over either way; the sentinel is now first
 * in the list), or, the round moving on to the next sentinel: -ENOENT for a
 * nil reply (it does not know the master), -EACCES for an error reply,
 * -EPROTO for anything that is not "host, port". */
int jrpc_sentinel_answer(jrpc_sentinel_t *s, const redisReply *rep);

/* Reads a ROLE reply. Returns 0 when it says master, -EROFS for another
 * role (its word copied into role[0..n), e.g. "slave"), -EPROTO otherwise. */
int jrpc_sentinel_role(const redisReply *rep, char *role, size_t n);

/* True for an error reply that says this instance is not a master
 * (-READONLY; a client must find the master again). */
bool jrpc_sentinel_is_readonly(const redisReply *rep);

#endif
