/* jrpc_stop — see jrpc_stop.h. */
#include "jrpc_stop.h"

#include <signal.h>

#include "jrpc_log.h"
#include "jrpc_sdnotify.h"

static void on_signal(uv_signal_t *h, int signum)
{
    jrpc_stop_t *s = h->data;
    if (signum == SIGHUP) {
        JRPC_LOG(JRPC_LOG_WARN, "main", "event=signal signal=HUP action=ignored");
        return;
    }
    const char *name = signum == SIGINT ? "INT" : "TERM";
    if (s->signals++ == 0) {
        jrpc_sdnotify_log("STOPPING=1\nSTATUS=draining");
        JRPC_LOG(JRPC_LOG_INFO, "main", "event=draining signal=%s timeout_ms=%u", name,
                 s->drain_timeout_ms);
        jrpc_worker_drain(s->w, s->drain_timeout_ms);
    } else {
        JRPC_LOG(JRPC_LOG_WARN, "main", "event=stopping signal=%s", name);
        jrpc_worker_stop(s->w);
    }
}

void jrpc_stop_start(jrpc_stop_t *s, uv_loop_t *loop, jrpc_worker_t *w, uint32_t drain_timeout_ms)
{
    static const int signums[3] = { SIGINT, SIGTERM, SIGHUP };
    s->w = w;
    s->drain_timeout_ms = drain_timeout_ms;
    s->signals = 0;
    for (int i = 0; i < 3; i++) {
        uv_signal_init(loop, &s->sig[i]);
        s->sig[i].data = s;
        uv_signal_start(&s->sig[i], on_signal, signums[i]);
    }
}

void jrpc_stop_close(jrpc_stop_t *s)
{
    for (int i = 0; i < 3; i++)
        uv_close((uv_handle_t *)&s->sig[i], NULL);
}
