/* jrpc_log — one line per event on stderr, key=value (or JSON).
 *
 *   JRPC_LOG(JRPC_LOG_WARN, "worker", "event=malformed_frame worker=%s rc=%d", id, rc);
 *
 * prints
 *   ts=2026-11-22T03:06:21.123Z level=warn proc=jrpc-broker comp=worker event=...
 * The level is checked before the arguments are evaluated. */
#ifndef JRPC_LOG_H
#define JRPC_LOG_H

#include <stddef.h>

enum jrpc_log_level { JRPC_LOG_DEBUG, JRPC_LOG_INFO, JRPC_LOG_WARN, JRPC_LOG_ERROR };

extern int jrpc_log_level;   /* events below it are not printed (default INFO) */

/* Sets the process name printed in every line (borrowed, keep it alive). */
void jrpc_log_init(const char *proc);
/* Parses "debug", "info", "warn", "error". Returns 0 or -EINVAL. */
int  jrpc_log_set_level(const char *name);
/* "kv" (the default) or "json": each line one JSON object with ts, level,
 * proc, comp and every key=value of the message, all values strings
 * (docs/CONFIG.md). Returns 0 or -EINVAL. */
int  jrpc_log_set_format(const char *name);

/* Where finished lines go: line[0..len) is one whole line ending in '\n'.
 * NULL (the default): one fwrite + fflush to stderr per line. The buffered
 * mode (jrpc_logbuf.h) installs its own. */
typedef void (*jrpc_log_sink_fn)(int level, const char *line, size_t len);
void jrpc_log_set_sink(jrpc_log_sink_fn fn);

void jrpc_log_write(int level, const char *comp, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define JRPC_LOG(level, comp, ...)                          \
    do {                                                    \
        if ((level) >= jrpc_log_level)                      \
            jrpc_log_write((level), (comp), __VA_ARGS__);   \
    } while (0)

#endif
