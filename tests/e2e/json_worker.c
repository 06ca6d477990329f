/* json_worker — a worker for the end-to-end tests of JSON pass-through
 * (PROTOCOL.md 2.1 "json"): every method is a libjrpc-worker json handler
 * that answers fixed JSON text, good or bad, so that the broker's checks of
 * a worker's JSON answers can be seen from a client.
 *
 *   json_worker --connect EP
 *
 *   spaced     result ` {"a" : [1, 2.50]} ` (copied without the outer spaces)
 *   deep64     result 64 nested arrays (the deepest a result may be)
 *   deep65     result 65 nested arrays (too deep: -32603)
 *   bad        result `{"a":` (not JSON: -32603)
 *   huge       result `1e400` (no double: -32603)
 *   err_data   error code 7, "seven", data `{"k" : [true]}` (copied)
 *   bad_data   error code 7, "seven", data `nope` (-32603)
 *   params     result the params as received (null when absent)
 * Runs until SIGTERM (drains like jrpc-worker). Exit status 0, 2 on bad
 * usage. */
#include <stdio.h>
#include <string.h>

#include "jrpc_worker.h"

static void m_fixed(jrpc_wcall_t *call, const char *params, size_t n, void *arg)
{
    (void)params, (void)n;
    const char *text = arg;
    jrpc_wcall_finish_json(call, text, strlen(text));
}

static void m_error(jrpc_wcall_t *call, const char *params, size_t n, void *arg)
{
    (void)params, (void)n;
    const char *data = arg;
    jrpc_wcall_error_json(call, 7, "seven", data, strlen(data));
}

static void m_params(jrpc_wcall_t *call, const char *params, size_t n, void *arg)
{
    (void)arg;
    jrpc_wcall_finish_json(call, params, n);
}

static void on_signal(uv_signal_t *s, int signum)
{
    (void)signum;
    jrpc_worker_drain(s->data, 5000);
}

int main(int argc, char **argv)
{
    if (argc != 3 || strcmp(argv[1], "--connect") != 0) {
        fprintf(stderr, "usage: json_worker --connect EP\n");
        return 2;
    }
    static char deep64[129], deep65[131];
    for (int k = 0; k < 64; k++)
        deep64[k] = '[', deep64[64 + k] = ']';
    for (int k = 0; k < 65; k++)
        deep65[k] = '[', deep65[65 + k] = ']';
    jrpc_worker_t *w = jrpc_worker_new(NULL);
    if (w == NULL)
        return 1;
    static const char spaced[] = " {\"a\" : [1, 2.50]} ";
    if (jrpc_worker_handle_json(w, "spaced", m_fixed, (void *)spaced, 0) < 0 ||
        jrpc_worker_handle_json(w, "deep64", m_fixed, deep64, 0) < 0 ||
        jrpc_worker_handle_json(w, "deep65", m_fixed, deep65, 0) < 0 ||
        jrpc_worker_handle_json(w, "bad", m_fixed, "{\"a\":", 0) < 0 ||
        jrpc_worker_handle_json(w, "huge", m_fixed, "1e400", 0) < 0 ||
        jrpc_worker_handle_json(w, "err_data", m_error, "{\"k\" : [true]}", 0) < 0 ||
        jrpc_worker_handle_json(w, "bad_data", m_error, "nope", 0) < 0 ||
        jrpc_worker_handle_json(w, "params", m_params, NULL, 0) < 0 ||
        jrpc_worker_connect(w, argv[2]) < 0) {
        jrpc_worker_destroy(&w);
        return 1;
    }
    uv_signal_t sig;
    uv_signal_init(jrpc_worker_loop(w), &sig);
    sig.data = w;
    uv_signal_start(&sig, on_signal, SIGTERM);
    uv_unref((uv_handle_t *)&sig);
    int rc = jrpc_worker_run(w);
    uv_close((uv_handle_t *)&sig, NULL);
    uv_run(jrpc_worker_loop(w), UV_RUN_NOWAIT);
    jrpc_worker_destroy(&w);
    return rc < 0 ? 1 : 0;
}
