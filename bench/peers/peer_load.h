/* peer_load — the load side shared by our peer harnesses (bench/peers/).
 *
 * The same shape as jrpc-bench: C connections, one thread each; closed loop
 * (one "batch" in flight per connection) or open loop at a fixed total rate
 * with latency from the scheduled send time; a warm-up whose results are
 * discarded; the same --json fields (calls_per_s, latency_us.batch.p50...).
 *
 * A peer without batches gets a "batch of N" as N requests issued at once on
 * one connection and waited for together: the batch's latency is the time
 * until the last of the N answers is in. */
#ifndef JRPC_PEER_LOAD_H
#define JRPC_PEER_LOAD_H

#include <stdint.h>

/* Each id in base .. base+n-1 once: tracks the answers of one batch. */
typedef struct peer_seen {
    unsigned char *v;
    int n;
    int good;       /* distinct expected ids seen */
} peer_seen_t;

typedef struct peer_ops {
    const char *name;   /* for messages: "nats", "rabbitmq"... */
    const char *where;  /* what serve and --url take, for the usage line */
    /* The server side: serves `where` until killed. Returns the exit status. */
    int (*serve)(const char *where);
    /* One connection to url, used by one thread only. NULL on failure, with
     * the reason on stderr. */
    void *(*open)(const char *url);
    /* Sends n requests with ids base .. base+n-1 at once, then waits for the
     * n answers and marks each in `seen` (reset by the caller). Returns 0,
     * or -1 when the connection failed or an answer did not come within
     * timeout_ms. Blocks. */
    int (*call)(void *conn, uint64_t base, int n, int timeout_ms, struct peer_seen *seen);
    void (*close)(void *conn);
} peer_ops_t;

/* Parses the load options (argv[0] is the program, see peer_load_usage),
 * runs the load and prints the table or the JSON object. Returns the exit
 * status: 0, 1 when an answer was missing or wrong, 2 on a usage error. */
int peer_load_main(int argc, char **argv, const peer_ops_t *ops);

/* main() of a harness: `serve WHERE`, `load ...` (peer_load_main) or --help.
 * Returns the exit status. */
int peer_main(int argc, char **argv, const peer_ops_t *ops);

/* The request every peer sends, a JSON-RPC 2.0 `add` call, written into
 * buf (at least 96 bytes). Returns its length. */
int peer_request(char *buf, uint64_t id);

/* The responder's side: reads the two params and the id of a request made by
 * peer_request (a minimal scan, not a JSON parser: it favours the peer) and
 * writes the answer into out (at least 96 bytes). Returns its length, or -1
 * when the request is not one of ours. */
int peer_answer(const char *req, int len, char *out);

/* The load side: the id of an answer, or -1 when it is not `result 3`. */
int64_t peer_answer_id(const char *ans, int len);
/* The id of a request made by peer_request, or -1. */
int64_t peer_request_id(const char *req, int len);

void peer_seen_reset(peer_seen_t *s, int n);
/* Marks the id of an answer (peer_answer's) or of an echoed request. */
void peer_seen_mark(peer_seen_t *s, uint64_t base, const char *ans, int len);
void peer_seen_mark_echo(peer_seen_t *s, uint64_t base, const char *req, int len);
/* Marks one id, known answered some other way (a whole batch echoed whole). */
void peer_seen_mark_id(peer_seen_t *s, uint64_t base, uint64_t id);
void peer_seen_dispose(peer_seen_t *s);

#endif
