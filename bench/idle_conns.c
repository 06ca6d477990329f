/* jrpc-bench-idle — holds many used, idle HTTP/1.1 keep-alive connections.
 *
 *   jrpc-bench-idle HOST:PORT N HOLD_S [BODY_BYTES]
 *
 * Opens N connections to the broker's HTTP front, sends one small valid
 * request (`add [1,2]`) on each and reads its answer, so that every one is a
 * real keep-alive connection that has been used; prints
 *   opened=N answered=A closed=C failed=F
 * ("closed": the broker closed it without an answer, as it does past
 * --max-conns; "failed": no connection, or an answer that is not the
 * expected 200 with result 3), then "holding" and holds them idle for
 * HOLD_S seconds (SIGTERM or SIGINT ends the hold early and exits 0 at once;
 * SIGUSR1 ends it early as if it were over). After the hold it sends a second request on each connection that was
 * answered and prints
 *   reanswered=R lost=L
 * (lost: closed or not answered the second time). Exit status 0 when every
 * step ran (the counts say what happened), 2 for usage errors, 1 when
 * the run could not be made (no descriptors, ...).
 *
 * BODY_BYTES (default: the bare call, 55 bytes) pads the body with JSON
 * whitespace to that size and sends the first request in two halves (every
 * connection of a window gets its first half before any gets its second),
 * so that the broker receives each body in pieces, as it does from a real
 * network: what an idle connection keeps of its last body then shows.
 *
 * Connections are opened and used in windows of WINDOW: connect each, send
 * each, then read each answer (blocking, with a 10 s receive timeout). */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define WINDOW 64
#define MAX_N  1000000

static volatile sig_atomic_t stop, wake;

static void on_signal(int sig)
{
    if (sig == SIGUSR1)
        wake = 1;
    else
        stop = 1;
}

static const char body[] = "{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"params\":[1,2],\"id\":1}";
static char *request;
static size_t request_len;

/* Reads one HTTP answer. Returns 1 for the expected 200 with result 3,
 * 0 for the connection closed before any byte, -1 for anything else. */
static int read_answer(int fd)
{
    char buf[4096];
    size_t have = 0;
    for (;;) {
        ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return have == 0 && (n == 0 || errno == ECONNRESET) ? 0 : -1;
        have += (size_t)n;
        buf[have] = '\0';
        char *eoh = strstr(buf, "\r\n\r\n");
        if (eoh == NULL) {
            if (have == sizeof buf - 1)
                return -1;
            continue;
        }
        char *cl = strcasestr(buf, "\r\nContent-Length:");
        if (cl == NULL || cl > eoh)
            return -1;
        size_t want = (size_t)(eoh + 4 - buf) + strtoul(cl + 17, NULL, 10);
        if (want >= sizeof buf)
            return -1;
        if (have < want)
            continue;
        if (have > want || strncmp(buf, "HTTP/1.1 200 ", 13) != 0 ||
            strstr(eoh, "\"result\":3") == NULL)
            return -1;
        return 1;
    }
}

static int send_bytes(int fd, const char *p, size_t len)
{
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(fd, p + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        off += (size_t)n;
    }
    return 0;
}

static int send_request(int fd)
{
    return send_bytes(fd, request, request_len);
}

/* Closes with a reset: no TIME_WAIT left behind to eat the port range
 * when the benchmark repeats. */
static void close_hard(int fd)
{
    struct linger lg = { .l_onoff = 1, .l_linger = 0 };
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: jrpc-bench-idle HOST:PORT N HOLD_S [BODY_BYTES]\n");
        return 2;
    }
    char host[64];
    const char *colon = strrchr(argv[1], ':');
    char *end;
    long n = strtol(argv[2], &end, 10);
    long hold = *end == '\0' ? strtol(argv[3], &end, 10) : -1;
    long blen = (long)sizeof body - 1;
    if (argc == 5 && *end == '\0')
        blen = strtol(argv[4], &end, 10);
    struct sockaddr_in sa = { .sin_family = AF_INET };
    if (colon == NULL || (size_t)(colon - argv[1]) >= sizeof host || n < 1 || n > MAX_N ||
        *end != '\0' || hold < 0 || blen < (long)sizeof body - 1 || blen > (1L << 24)) {
        fprintf(stderr, "jrpc-bench-idle: bad arguments (HOST:PORT N HOLD_S; IPv4 host)\n");
        return 2;
    }
    memcpy(host, argv[1], (size_t)(colon - argv[1]));
    host[colon - argv[1]] = '\0';
    sa.sin_port = htons((uint16_t)atoi(colon + 1));
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1 || sa.sin_port == 0) {
        fprintf(stderr, "jrpc-bench-idle: '%s' is not IPV4:PORT\n", argv[1]);
        return 2;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)n + 16) {
        rl.rlim_cur = rl.rlim_max < (rlim_t)n + 16 ? rl.rlim_max : (rlim_t)n + 16;
        setrlimit(RLIMIT_NOFILE, &rl);
        if (rl.rlim_cur < (rlim_t)n + 16) {
            fprintf(stderr, "jrpc-bench-idle: %ld connections need ulimit -n >= %ld\n", n, n + 16);
            return 1;
        }
    }
    if ((request = malloc((size_t)blen + 256)) == NULL)
        return 1;
    request_len = (size_t)sprintf(request,
                                  "POST /rpc HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                                  "Content-Length: %ld\r\n\r\n%s",
                                  argv[1], blen, body);
    memset(request + request_len, ' ', (size_t)blen - (sizeof body - 1));
    request_len += (size_t)blen - (sizeof body - 1);
    size_t first_len = request_len;
    size_t split = argc == 5 ? first_len / 2 : first_len;
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sact = { .sa_handler = on_signal };
    sigaction(SIGTERM, &sact, NULL);
    sigaction(SIGINT, &sact, NULL);
    sigaction(SIGUSR1, &sact, NULL);

    int *fds = malloc((size_t)n * sizeof *fds);
    if (fds == NULL)
        return 1;
    long answered = 0, closed = 0, failed = 0;
    struct timeval tv = { .tv_sec = 10 };
    for (long base = 0; base < n && !stop; base += WINDOW) {
        long top = base + WINDOW < n ? base + WINDOW : n;
        for (long i = base; i < top; i++) {
            int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (fd >= 0) {
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
                int one = 1;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
                    send_bytes(fd, request, split) < 0) {
                    close(fd);
                    fd = -1;
                }
            }
            fds[i] = fd;
        }
        if (split < first_len) {
            usleep(20000); /* the broker reads the first halves on their own */
            for (long i = base; i < top; i++)
                if (fds[i] >= 0 && send_bytes(fds[i], request + split, first_len - split) < 0) {
                    close(fds[i]);
                    fds[i] = -1;
                }
        }
        for (long i = base; i < top; i++) {
            int rc = fds[i] < 0 ? -1 : read_answer(fds[i]);
            if (rc == 1) {
                answered++;
                continue;
            }
            if (rc == 0)
                closed++;
            else
                failed++;
            if (fds[i] >= 0)
                close_hard(fds[i]);
            fds[i] = -1;
        }
    }
    printf("opened=%ld answered=%ld closed=%ld failed=%ld\nholding\n", n, answered, closed, failed);
    fflush(stdout);
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        usleep(50000);
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (!stop && !wake && now.tv_sec - t0.tv_sec < hold);
    if (!stop) {
        long re = 0, lost = 0;
        for (long i = 0; i < n; i++) {
            if (fds[i] < 0)
                continue;
            if (send_request(fds[i]) == 0 && read_answer(fds[i]) == 1)
                re++;
            else
                lost++;
        }
        printf("reanswered=%ld lost=%ld\n", re, lost);
    }
    for (long i = 0; i < n; i++)
        if (fds[i] >= 0)
            close_hard(fds[i]);
    free(fds);
    free(request);
    return 0;
}
