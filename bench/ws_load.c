/* jrpc-bench-ws-load — WebSocket batch throughput against HTTP keep-alive,
 * in one run (issue 14, point 5; bench/README.md, "WebSocket").
 *
 * Two phases of the same length against one broker's HTTP port: C threads,
 * each with one connection and one batch of B `add` calls in flight (closed
 * loop): first POST /rpc on a kept-alive HTTP/1.1 connection, then the same
 * body as a text message on a WebSocket (GET /rpc, subprotocol jrpc: one
 * array message per batch). Each answer is checked: an array of B elements
 * with no error object. Prints batches/s and calls/s of each phase and the
 * ratio. Blocking sockets, no library of ours beyond jrpc_batch_count: the
 * HTTP answer is read by Content-Length, the WebSocket frames by hand (client
 * frames masked, RFC 6455 5.3, with a per-thread xorshift key: a load tool,
 * not a client to trust). */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "jrpc_batch.h"

static const char *o_host = "127.0.0.1", *o_port = "8080";
static int o_conns = 4, o_batch = 100;
static double o_duration = 5;
static const char *o_phase = "both";   /* http, ws or both */

static char *g_body;         /* the batch */
static size_t g_len;
static atomic_int g_stop;
static atomic_uint_least64_t g_batches, g_bad;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int dial(void)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai;
    if (getaddrinfo(o_host, o_port, &hints, &ai) != 0)
        return -1;
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    int one = 1;
    if (fd >= 0)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* A connection's read buffer: bytes read, not yet used. */
typedef struct rbuf {
    int    fd;
    char  *p;
    size_t len, cap;
} rbuf_t;

/* Makes sure at least n bytes are buffered. */
static int need(rbuf_t *b, size_t n)
{
    if (n > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        while (cap < n)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (p == NULL)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    while (b->len < n) {
        ssize_t k = recv(b->fd, b->p + b->len, b->cap - b->len, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        b->len += (size_t)k;
    }
    return 0;
}

static void consume(rbuf_t *b, size_t n)
{
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
}

/* The answer: an array of o_batch elements (one object for a batch of 1),
 * no error object. */
static void check(const char *p, size_t n)
{
    if (n < 2 || p[0] != (o_batch > 1 ? '[' : '{') || jrpc_batch_count(p, n) != (uint32_t)o_batch ||
        memmem(p, n, "\"error\"", 7) != NULL)
        atomic_fetch_add(&g_bad, 1);
}

/* Reads one HTTP answer (head, then Content-Length bytes) and checks it. */
static int http_answer(rbuf_t *b)
{
    for (;;) {
        char *end = b->len ? memmem(b->p, b->len, "\r\n\r\n", 4) : NULL;
        if (end != NULL) {
            size_t hl = (size_t)(end - b->p) + 4;
            char *cl = memmem(b->p, hl, "Content-Length: ", 16);
            if (cl == NULL || strncmp(b->p, "HTTP/1.1 200", 12) != 0)
                return -1;
            size_t n = strtoul(cl + 16, NULL, 10);
            if (need(b, hl + n) < 0)
                return -1;
            check(b->p + hl, n);
            consume(b, hl + n);
            return 0;
        }
        if (need(b, b->len + 1) < 0)
            return -1;
    }
}

static void *http_thread(void *arg)
{
    (void)arg;
    rbuf_t b = { .fd = dial() };
    if (b.fd < 0)
        return NULL;
    char head[256];
    int hn = snprintf(head, sizeof head, "POST /rpc HTTP/1.1\r\nHost: %s\r\n"
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                      o_host, g_len);
    while (!atomic_load(&g_stop)) {
        if (send_all(b.fd, head, (size_t)hn) < 0 || send_all(b.fd, g_body, g_len) < 0 ||
            http_answer(&b) < 0) {
            atomic_fetch_add(&g_bad, 1);
            break;
        }
        atomic_fetch_add(&g_batches, 1);
    }
    close(b.fd);
    free(b.p);
    return NULL;
}

static uint32_t xorshift(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* One masked text frame of the body, in out (the mask changes per frame). */
static size_t ws_frame(char *out, uint32_t *rng)
{
    size_t off = 2, n = g_len;
    out[0] = (char)0x81;
    if (n < 126) {
        out[1] = (char)(0x80 | n);
    } else if (n < 65536) {
        out[1] = (char)(0x80 | 126);
        out[2] = (char)(n >> 8);
        out[3] = (char)n;
        off = 4;
    } else {
        out[1] = (char)(0x80 | 127);
        for (int i = 0; i < 8; i++)
            out[2 + i] = (char)((uint64_t)n >> (56 - 8 * i));
        off = 10;
    }
    uint32_t m = xorshift(rng);
    unsigned char key[4] = { (unsigned char)m, (unsigned char)(m >> 8), (unsigned char)(m >> 16),
                             (unsigned char)(m >> 24) };
    memcpy(out + off, key, 4);
    /* Eight bytes at a time (the key repeats every four): this tool runs on
     * the same cores as the broker, and a byte loop made its WebSocket side
     * cost more than its HTTP side (bench/README.md, "WebSocket"). */
    uint64_t k8;
    unsigned char kk[8] = { key[0], key[1], key[2], key[3], key[0], key[1], key[2], key[3] };
    memcpy(&k8, kk, 8);
    char *dst = out + off + 4;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, g_body + i, 8);
        w ^= k8;
        memcpy(dst + i, &w, 8);
    }
    for (; i < n; i++)
        dst[i] = (char)(g_body[i] ^ key[i & 3]);
    return off + 4 + n;
}

/* Reads frames until a whole text message; answers pings. */
static int ws_answer(rbuf_t *b, uint32_t *rng)
{
    for (;;) {
        if (need(b, 2) < 0)
            return -1;
        unsigned op = (unsigned char)b->p[0] & 0x0f;
        bool fin = (unsigned char)b->p[0] & 0x80;
        uint64_t n = (unsigned char)b->p[1] & 0x7f;
        size_t off = 2;
        if (n == 126) {
            if (need(b, 4) < 0)
                return -1;
            n = ((uint64_t)(unsigned char)b->p[2] << 8) | (unsigned char)b->p[3];
            off = 4;
        } else if (n == 127) {
            if (need(b, 10) < 0)
                return -1;
            n = 0;
            for (int i = 0; i < 8; i++)
                n = n << 8 | (unsigned char)b->p[2 + i];
            off = 10;
        }
        if (need(b, off + n) < 0)
            return -1;
        if (op == 9) {   /* ping: a masked pong with its payload */
            char pong[6 + 125];
            uint32_t m = xorshift(rng);
            pong[0] = (char)0x8a;
            pong[1] = (char)(0x80 | n);
            memcpy(pong + 2, &m, 4);
            for (size_t i = 0; i < n; i++)
                pong[6 + i] = (char)(b->p[off + i] ^ pong[2 + (i & 3)]);
            if (send_all(b->fd, pong, 6 + n) < 0)
                return -1;
        } else if (op == 1 && fin) {
            check(b->p + off, n);
            consume(b, off + n);
            return 0;
        } else if (op == 8 || op != 10) {
            return -1;   /* a close, or fragments (the broker sends none) */
        }
        consume(b, off + n);
    }
}

static void *ws_thread(void *arg)
{
    uint32_t rng = 2463534242u ^ (uint32_t)(uintptr_t)arg;
    rbuf_t b = { .fd = dial() };
    if (b.fd < 0)
        return NULL;
    char head[256];
    int hn = snprintf(head, sizeof head, "GET /rpc HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
                      "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                      "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: jrpc\r\n\r\n", o_host);
    char *frame = malloc(g_len + 14);
    if (frame == NULL || send_all(b.fd, head, (size_t)hn) < 0)
        goto out;
    for (;;) {   /* the 101's head */
        char *end = b.len ? memmem(b.p, b.len, "\r\n\r\n", 4) : NULL;
        if (end != NULL) {
            if (strncmp(b.p, "HTTP/1.1 101", 12) != 0)
                goto out;
            consume(&b, (size_t)(end - b.p) + 4);
            break;
        }
        if (need(&b, b.len + 1) < 0)
            goto out;
    }
    while (!atomic_load(&g_stop)) {
        size_t n = ws_frame(frame, &rng);
        if (send_all(b.fd, frame, n) < 0 || ws_answer(&b, &rng) < 0) {
            atomic_fetch_add(&g_bad, 1);
            break;
        }
        atomic_fetch_add(&g_batches, 1);
    }
out:
    free(frame);
    close(b.fd);
    free(b.p);
    return NULL;
}

/* One phase: batches per second. */
static double phase(const char *name, void *(*fn)(void *))
{
    pthread_t th[256];
    atomic_store(&g_stop, 0);
    atomic_store(&g_batches, 0);
    atomic_store(&g_bad, 0);
    double t0 = now_s();
    for (int i = 0; i < o_conns; i++)
        pthread_create(&th[i], NULL, fn, (void *)(uintptr_t)(i + 1));
    usleep((useconds_t)(o_duration * 1e6));
    uint64_t n = atomic_load(&g_batches);
    double el = now_s() - t0;
    atomic_store(&g_stop, 1);
    for (int i = 0; i < o_conns; i++)
        pthread_join(th[i], NULL);
    double rate = n / el;
    printf("%-5s %d conns, batch %d: %8.0f batches/s  %10.0f calls/s  bad=%llu calls_total=%llu\n",
           name, o_conns, o_batch, rate, rate * o_batch, (unsigned long long)atomic_load(&g_bad),
           (unsigned long long)n * (unsigned long long)o_batch);
    return atomic_load(&g_bad) ? -1 : rate;
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        { "host", 1, NULL, 'H' }, { "port", 1, NULL, 'p' }, { "connections", 1, NULL, 'c' },
        { "batch", 1, NULL, 'b' }, { "duration", 1, NULL, 'd' }, { "phase", 1, NULL, 'P' },
        { "help", 0, NULL, 'h' },
        { NULL, 0, NULL, 0 } };
    int ch;
    while ((ch = getopt_long(argc, argv, "H:p:c:b:d:P:h", lo, NULL)) != -1) {
        switch (ch) {
        case 'H': o_host = optarg; break;
        case 'p': o_port = optarg; break;
        case 'c': o_conns = atoi(optarg); break;
        case 'b': o_batch = atoi(optarg); break;
        case 'd': o_duration = atof(optarg); break;
        case 'P': o_phase = optarg; break;
        default:
            printf("Usage: jrpc-bench-ws-load [--host H] [--port P] [--connections C]\n"
                   "         [--batch B] [--duration SECONDS] [--phase http|ws|both]\n"
                   "WebSocket batch throughput against HTTP keep-alive on one broker's\n"
                   "HTTP port: SECONDS of each, C connections, one batch of B add calls\n"
                   "in flight on each (--phase: one of the two only, no ratio; for\n"
                   "bench/profile.sh ws). Exit 1 when an answer was wrong.\n");
            return ch == 'h' ? 0 : 2;
        }
    }
    bool do_http = strcmp(o_phase, "ws") != 0, do_ws = strcmp(o_phase, "http") != 0;
    if (o_conns < 1 || o_conns > 256 || o_batch < 1 || o_batch > 100000 || o_duration <= 0 ||
        (!do_http && !do_ws) || (strcmp(o_phase, "both") != 0 && do_http && do_ws)) {
        fprintf(stderr, "jrpc-bench-ws-load: bad options\n");
        return 2;
    }
    size_t cap = (size_t)o_batch * 80 + 2;
    g_body = malloc(cap);
    if (g_body == NULL)
        return 1;
    /* The body jrpc-bench sends (bench/profile.sh compares the two): string
     * ids "<conn>-<seq>-<i>", no array around a batch of 1. */
    g_len = 0;
    if (o_batch > 1)
        g_body[g_len++] = '[';
    for (int i = 0; i < o_batch; i++)
        g_len += (size_t)snprintf(g_body + g_len, cap - g_len,
                                  "%s{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"params\":[1,2],"
                                  "\"id\":\"0-10000-%d\"}", i ? "," : "", i);
    if (o_batch > 1)
        g_body[g_len++] = ']';
    double http = do_http ? phase("http", http_thread) : 1;
    double ws = do_ws ? phase("ws", ws_thread) : 1;
    free(g_body);
    if (http <= 0 || ws <= 0) {
        fprintf(stderr, "jrpc-bench-ws-load: wrong or missing answers\n");
        return 1;
    }
    if (!do_http || !do_ws)
        return 0;
    printf("ratio ws/http: %.2f\n", ws / http);
    return 0;
}
