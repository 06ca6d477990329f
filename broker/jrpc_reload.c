/* jrpc_reload — see jrpc_reload.h. */
#include "jrpc_reload.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "jrpc_log.h"
#include "jrpc_metrics.h"

/* A loader's message as a log value inside "...": quotes become ', control
 * bytes ?, so that the line stays one key=value line (and one JSON field). */
static void log_safe(char *dst, size_t cap, const char *src)
{
    size_t k = 0;
    for (; *src && k + 1 < cap; src++) {
        unsigned char c = (unsigned char)*src;
        dst[k++] = c == '"' ? '\'' : c < 0x20 || c == 0x7f || c == '\\' ? '?' : (char)c;
    }
    dst[k] = '\0';
}

/* Appends s to buf[*len, cap), '-' as '_' when underscore (a log key). */
static void put(char *buf, size_t cap, size_t *len, const char *s, int underscore)
{
    for (; *s && *len + 1 < cap; s++)
        buf[(*len)++] = underscore && *s == '-' ? '_' : *s;
    buf[*len] = '\0';
}

int jrpc_reload_run(const jrpc_reloadable_t *items, size_t n)
{
    assert(n <= JRPC_RELOAD_MAX);
    void *staged[JRPC_RELOAD_MAX] = { NULL };
    int prepared[JRPC_RELOAD_MAX] = { 0 };
    int first = 0;
    /* Every item is prepared, even after a failure: each bad file is named. */
    for (size_t i = 0; i < n; i++) {
        char err[512] = "", safe[512];
        int rc = items[i].prepare(items[i].arg, items[i].path, &staged[i], err, sizeof err);
        if (rc == 0) {
            prepared[i] = 1;
            continue;
        }
        if (first == 0)
            first = rc;
        log_safe(safe, sizeof safe, err[0] ? err : "refused");
        JRPC_LOG(JRPC_LOG_ERROR, "reload",
                 "event=reload_failed what=%s file=%s error=\"%s\" "
                 "detail=\"nothing reloaded: the files in force stay\"",
                 items[i].what, items[i].path, safe);
    }
    if (first < 0) {
        for (size_t i = 0; i < n; i++)
            if (prepared[i])
                items[i].discard(items[i].arg, staged[i]);
        jrpc_metrics.reloads[1]++;
        return first;
    }
    char what[256] = "", counts[512] = "";
    size_t wl = 0, cl = 0;
    for (size_t i = 0; i < n; i++) {
        size_t count = items[i].commit(items[i].arg, staged[i]);
        char num[32];
        snprintf(num, sizeof num, "=%zu", count);
        put(what, sizeof what, &wl, i ? "," : "", 0);
        put(what, sizeof what, &wl, items[i].what, 0);
        put(counts, sizeof counts, &cl, " ", 0);
        put(counts, sizeof counts, &cl, items[i].what, 1);
        put(counts, sizeof counts, &cl, num, 0);
    }
    jrpc_metrics.reloads[0]++;
    jrpc_metrics.reload_last_success = (double)time(NULL);
    JRPC_LOG(JRPC_LOG_INFO, "reload", "event=reloaded what=%s%s", n ? what : "-",
             n ? counts : " detail=\"nothing to reload\"");
    return 0;
}
