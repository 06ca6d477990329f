/* jrpc_sdnotify — systemd's readiness protocol (sd_notify(3)) without
 * libsystemd: one datagram "READY=1", "STOPPING=1", "STATUS=..." to the
 * AF_UNIX socket named by $NOTIFY_SOCKET (a path, or an abstract name when
 * it starts with '@'). Without $NOTIFY_SOCKET it does nothing, so the
 * programs behave the same outside systemd (Type=notify units). */
#ifndef JRPC_SDNOTIFY_H
#define JRPC_SDNOTIFY_H

/* Sends state (newline-separated assignments, e.g. "READY=1\nSTATUS=up").
 * Returns 1 when sent, 0 when $NOTIFY_SOCKET is unset, or a negative errno
 * (-EINVAL for a malformed $NOTIFY_SOCKET). Never blocks (a datagram to a
 * local socket; a full receiver is -EAGAIN). Logs nothing: callers log. */
int jrpc_sdnotify(const char *state);

/* jrpc_sdnotify() and a log line: debug "event=sd_notify state=READY=1"
 * when sent, warn when it failed; nothing without $NOTIFY_SOCKET. */
void jrpc_sdnotify_log(const char *state);

#endif
