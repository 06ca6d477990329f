/* zmq_probe — a raw ZeroMQ client for the end-to-end tests.
 *
 *   zmq_probe --type req|dealer --connect URL [--timeout-ms N] FRAME... [-- FRAME...]...
 *
 * Each group of FRAME arguments (groups separated by "--") is sent as one
 * multipart message on the same socket, then one reply is awaited (unless
 * --no-reply) and printed, one line per frame: "<index>:<bytes>"; with
 * --hold-ms N the socket stays open N ms after the last send without reading
 * (a client that stopped reading its answers); --repeat N sends the groups
 * N times (with --no-reply), --rcvhwm N sets ZMQ_RCVHWM. A FRAME is
 * literal text, "@empty" for an empty frame, or "@hex:<hex digits>".
 * Exit status: 0, 2 when a reply did not come in time or on bad usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int send_frame(void *s, const char *arg, int more)
{
    static char buf[65536];
    size_t n = 0;
    if (strcmp(arg, "@empty") == 0) {
        n = 0;
    } else if (strncmp(arg, "@hex:", 5) == 0) {
        for (const char *p = arg + 5; p[0] && p[1] && n < sizeof buf; p += 2) {
            int hi = hexval(p[0]), lo = hexval(p[1]);
            if (hi < 0 || lo < 0)
                return -1;
            buf[n++] = (char)(hi << 4 | lo);
        }
    } else {
        n = strlen(arg);
        if (n > sizeof buf)
            return -1;
        memcpy(buf, arg, n);
    }
    return zmq_send(s, buf, n, more ? ZMQ_SNDMORE : 0) < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
    const char *type = "dealer", *url = NULL;
    int timeout = 5000, want_reply = 1, hold_ms = 0, repeat = 1, rcvhwm = -1, i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0 && argv[i][2]; i++) {
        if (strcmp(argv[i], "--type") == 0 && i + 1 < argc)
            type = argv[++i];
        else if (strcmp(argv[i], "--connect") == 0 && i + 1 < argc)
            url = argv[++i];
        else if (strcmp(argv[i], "--timeout-ms") == 0 && i + 1 < argc)
            timeout = atoi(argv[++i]);
        else if (strcmp(argv[i], "--no-reply") == 0)
            want_reply = 0;
        else if (strcmp(argv[i], "--hold-ms") == 0 && i + 1 < argc)
            hold_ms = atoi(argv[++i]);
        else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else if (strcmp(argv[i], "--rcvhwm") == 0 && i + 1 < argc)
            rcvhwm = atoi(argv[++i]);
        else
            break;
    }
    if (url == NULL || i >= argc) {
        fprintf(stderr, "usage: zmq_probe --type req|dealer --connect URL [--timeout-ms N] "
                        "[--no-reply] FRAME... [-- FRAME...]...\n");
        return 2;
    }
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, strcmp(type, "req") == 0 ? ZMQ_REQ : ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &timeout, sizeof timeout);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    if (rcvhwm >= 0)
        zmq_setsockopt(s, ZMQ_RCVHWM, &rcvhwm, sizeof rcvhwm);
    if (zmq_connect(s, url) != 0) {
        fprintf(stderr, "zmq_probe: connect %s: %s\n", url, zmq_strerror(zmq_errno()));
        return 2;
    }
    int status = 0, first = i;
    for (int r = 1; r < repeat && !want_reply; r++) { /* --repeat: the groups again, unread */
        for (int k = first; k < argc; k++) {
            if (strcmp(argv[k], "--") == 0)
                continue;
            if (send_frame(s, argv[k], k + 1 < argc && strcmp(argv[k + 1], "--") != 0) < 0)
                return 2;
        }
    }
    while (i < argc) {
        int end = i;
        while (end < argc && strcmp(argv[end], "--") != 0)
            end++;
        for (int k = i; k < end; k++) {
            if (send_frame(s, argv[k], k + 1 < end) < 0) {
                fprintf(stderr, "zmq_probe: bad frame '%s'\n", argv[k]);
                return 2;
            }
        }
        i = end + 1;
        if (!want_reply)
            continue;
        int more = 1, idx = 0;
        while (more) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            if (zmq_msg_recv(&m, s, 0) < 0) {
                fprintf(stderr, "zmq_probe: no reply within %d ms\n", timeout);
                status = 2;
                goto out;
            }
            printf("%d:%.*s\n", idx++, (int)zmq_msg_size(&m), (const char *)zmq_msg_data(&m));
            more = zmq_msg_more(&m);
            zmq_msg_close(&m);
        }
    }
    if (hold_ms > 0) {
        struct timespec ts = { hold_ms / 1000, (long)(hold_ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
    }
out:
    if (status != 0) /* otherwise let what we sent leave first */
        zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_close(s);
    zmq_ctx_term(ctx);
    return status;
}
