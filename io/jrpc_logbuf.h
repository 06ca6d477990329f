/* jrpc_logbuf — buffered log output for a process that logs a line per
 * request (the broker's access log).
 *
 * jrpc_log_write() formats each line as usual; with the buffer started the
 * line is appended to a process-wide buffer instead of being written at
 * once, and the buffer goes out with one write(2) per loop iteration (from a
 * uv_prepare handle: before the loop waits for I/O, so no line waits while
 * the process is idle), or as soon as it is full. Each write carries whole
 * lines only and at most PIPE_BUF bytes, so lines of several processes
 * sharing one pipe never mix. A warn or error line flushes the buffer and
 * itself at once (what a crash would lose is info and debug only). The
 * buffer is flushed at jrpc_logbuf_stop() and at exit().
 *
 * One loop thread: do not log from another thread while it is started. */
#ifndef JRPC_LOGBUF_H
#define JRPC_LOGBUF_H

#include <uv.h>

/* Starts buffering on loop (the handle is unreferenced: it does not keep
 * uv_run() going). Returns 0, or a negative libuv code (nothing changed). */
int jrpc_logbuf_start(uv_loop_t *loop);

/* Writes what is buffered. */
void jrpc_logbuf_flush(void);

/* Flushes, goes back to one write per line, and closes the handle (the
 * loop must run once more to finish closing it, as for any handle).
 * A no-op when not started. */
void jrpc_logbuf_stop(void);

#endif
