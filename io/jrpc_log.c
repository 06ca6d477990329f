#include "jrpc_log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

int jrpc_log_level = JRPC_LOG_INFO;
static const char *log_proc = "jrpc";
static const char *const level_names[] = { "debug", "info", "warn", "error" };
static jrpc_log_sink_fn log_sink;

void jrpc_log_set_sink(jrpc_log_sink_fn fn)
{
    log_sink = fn;
}

void jrpc_log_init(const char *proc)
{
    log_proc = proc;
}

int jrpc_log_set_level(const char *name)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, level_names[i]) == 0) {
            jrpc_log_level = i;
            return 0;
        }
    }
    return -EINVAL;
}

void jrpc_log_write(int level, const char *comp, const char *fmt, ...)
{
    char line[1024];
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    int n = snprintf(line, sizeof line,
                     "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03dZ level=%s proc=%s comp=%s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, (int)(tv.tv_usec / 1000),
                     level_names[level < 0 ? 0 : level > 3 ? 3 : level], log_proc, comp);
    if (n < 0 || (size_t)n >= sizeof line)
        return;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        return;
    size_t len = (size_t)n + ((size_t)m < sizeof line - (size_t)n - 1 ? (size_t)m
                                                                      : sizeof line - (size_t)n - 2);
    line[len++] = '\n';
    if (log_sink) {
        log_sink(level, line, len);
        return;
    }
    /* One write per line so that lines of concurrent processes do not mix. */
    fwrite(line, 1, len, stderr);
    fflush(stderr);
}
