/* jrpc_reload — what SIGHUP reloads in jrpc-broker, as a list of
 * "reloadables", each re-reading one file named at start (--keys,
 * --client-keys, --worker-keys; the TLS certificate next).
 *
 * All or nothing per signal: every item is prepared first (its file read
 * and checked, nothing in force touched); only when every one succeeded is
 * each committed (swapped in, which cannot fail). A bad file is logged with
 * its name and reason, the items already prepared are discarded, and every
 * old state stays in force. So a reload never leaves the broker with the
 * new keys and the old allowlists, or half a key file.
 *
 * Logs (one line per event, comp=reload):
 *   event=reloaded what=keys,client-keys,worker-keys keys=3 client_keys=2 worker_keys=1
 *   event=reload_failed what=keys file=/etc/jrpc/keys error="...:3: secret missing ..."
 *       detail="nothing reloaded: the files in force stay"
 * and counts each run in jrpc_metrics (jrpc_reloads_total{result},
 * jrpc_reload_last_success_timestamp_seconds). Runs on the loop's thread;
 * blocks on the file system only (prepare). */
#ifndef JRPC_RELOAD_H
#define JRPC_RELOAD_H

#include <stddef.h>

#define JRPC_RELOAD_MAX 16   /* items in one list */

typedef struct jrpc_reloadable {
    const char *what;  /* its name in the log lines ("keys"; '-' becomes '_' in counts) */
    const char *path;  /* the file it re-reads: the one named at start */
    void       *arg;   /* given to the three functions */
    /* Reads and checks path into a new state, *staged (owned by the caller
     * of jrpc_reload_run until commit or discard). Must change nothing in
     * force. Returns 0, or < 0 with a one-line reason in err naming the file
     * (the loaders' messages do). */
    int    (*prepare)(void *arg, const char *path, void **staged, char *err, size_t errlen);
    /* Puts staged in force, taking it (frees the state it replaces, or
     * arranges for it to be freed). Cannot fail. Returns the entries now in
     * force, for the log line (keys=N). */
    size_t (*commit)(void *arg, void *staged);
    /* Frees a prepared state that will not be committed. */
    void   (*discard)(void *arg, void *staged);
} jrpc_reloadable_t;

/* Runs one reload of items[0, n) (n <= JRPC_RELOAD_MAX; n == 0 is a
 * successful reload of nothing). Returns 0 when every item was committed;
 * otherwise nothing was, and it returns the first failing prepare's code. */
int jrpc_reload_run(const jrpc_reloadable_t *items, size_t n);

#endif
