#include "jrpc_logbuf.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jrpc_log.h"

/* One write is at most PIPE_BUF bytes: atomic on a pipe (POSIX). */
#define CHUNK PIPE_BUF
#define BUF_BYTES (16 * CHUNK)

static struct {
    bool       started;
    bool       closing;     /* the handle is closing: not started, not reusable yet */
    bool       atexit_set;
    uv_prepare_t prepare;
    size_t     len;         /* bytes in buf, whole lines */
    char       buf[BUF_BYTES];
} lb;

static void write_all(const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* stderr is gone or full: nothing better to do with a log line */
        p += w;
        n -= (size_t)w;
    }
}

void jrpc_logbuf_flush(void)
{
    size_t off = 0;
    while (off < lb.len) {
        /* Up to CHUNK bytes, cut after the last whole line that fits (a
         * line longer than CHUNK goes alone, whole). */
        size_t n = lb.len - off;
        if (n > CHUNK) {
            size_t cut = CHUNK;
            while (cut > 0 && lb.buf[off + cut - 1] != '\n')
                cut--;
            if (cut == 0) { /* one line longer than CHUNK: it goes alone, whole */
                const char *nl = memchr(lb.buf + off, '\n', lb.len - off);
                cut = nl ? (size_t)(nl - (lb.buf + off)) + 1 : lb.len - off;
            }
            n = cut;
        }
        write_all(lb.buf + off, n);
        off += n;
    }
    lb.len = 0;
}

static void sink(int level, const char *line, size_t len)
{
    if (lb.len + len > sizeof lb.buf)
        jrpc_logbuf_flush();
    if (level >= JRPC_LOG_WARN || len > sizeof lb.buf) {
        jrpc_logbuf_flush();
        write_all(line, len);
        return;
    }
    memcpy(lb.buf + lb.len, line, len);
    lb.len += len;
}

static void on_prepare(uv_prepare_t *h)
{
    (void)h;
    if (lb.len)
        jrpc_logbuf_flush();
}

static void at_exit(void)
{
    jrpc_logbuf_flush();
}

int jrpc_logbuf_start(uv_loop_t *loop)
{
    if (lb.started || lb.closing)
        return UV_EBUSY;
    int rc = uv_prepare_init(loop, &lb.prepare);
    if (rc < 0)
        return rc;
    uv_prepare_start(&lb.prepare, on_prepare);
    uv_unref((uv_handle_t *)&lb.prepare);
    if (!lb.atexit_set)
        lb.atexit_set = atexit(at_exit) == 0;
    lb.started = true;
    jrpc_log_set_sink(sink);
    return 0;
}

static void on_closed(uv_handle_t *h)
{
    (void)h;
    lb.closing = false;
}

void jrpc_logbuf_stop(void)
{
    if (!lb.started)
        return;
    jrpc_log_set_sink(NULL);
    jrpc_logbuf_flush();
    lb.started = false;
    lb.closing = true;
    uv_close((uv_handle_t *)&lb.prepare, on_closed);
}
