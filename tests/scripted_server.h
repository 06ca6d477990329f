/* The accepting half of the tests' scripted servers (client/: HTTP/1.1 and
 * ZMTP 3.1 servers; io/test_jrpc_zdealer: raw ZMTP peers; broker/
 * test_jrpc_replay: a fault proxy in front of Redis): a thread accepts on a
 * listening socket and serves each connection in a thread of its own, up
 * to the script's number of connections; stopping joins them all. What a
 * connection is served stays the test's. Include after <cmocka.h>. */
#ifndef SCRIPTED_SERVER_H
#define SCRIPTED_SERVER_H

#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ACCEPTOR_MAX_CONNS 16

typedef struct acceptor {
    int         lfd;                /* listening socket, closed at stop */
    int         max_conns;          /* the most the script uses (<= ACCEPTOR_MAX_CONNS) */
    void      (*serve)(void *owner, int fd);   /* one connection; closes fd */
    void       *owner;
    atomic_int  accepts;            /* connections accepted */
    atomic_bool stop;
    pthread_t   thr;
    pthread_t   conns[ACCEPTOR_MAX_CONNS];   /* one thread per connection */
    atomic_int  nconns;
} acceptor_t;

typedef struct acceptor_conn {
    acceptor_t *a;
    int         fd;
} acceptor_conn_t;

static inline int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void *acceptor_conn_main(void *arg)
{
    acceptor_conn_t c = *(acceptor_conn_t *)arg;
    free(arg);
    c.a->serve(c.a->owner, c.fd);
    return NULL;
}

static inline void *acceptor_main(void *arg)
{
    acceptor_t *a = arg;
    while (!atomic_load(&a->stop)) {
        struct pollfd pfd = { .fd = a->lfd, .events = POLLIN };
        if (poll(&pfd, 1, 50) <= 0)
            continue;
        int fd = accept(a->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        atomic_fetch_add(&a->accepts, 1);
        int i = atomic_fetch_add(&a->nconns, 1);
        acceptor_conn_t *c = malloc(sizeof *c);
        /* Off the test's thread a cmocka assert cannot fail the test: a
         * script with more connections than it says ends the run. */
        if (i >= a->max_conns || c == NULL) {
            fprintf(stderr, "scripted server: connection %d of at most %d\n", i + 1, a->max_conns);
            abort();
        }
        *c = (acceptor_conn_t){ a, fd };
        pthread_create(&a->conns[i], NULL, acceptor_conn_main, c);
    }
    return NULL;
}

/* A TCP socket bound on 127.0.0.1:port (0: any port), not listening yet;
 * the port it has in *bound. */
static inline int bind_loopback(int port, int *bound)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t sl = sizeof sa;
    const int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    *bound = ntohs(sa.sin_port);
    return fd;
}

/* Listens on lfd (bound) and accepts in a thread: each connection goes to
 * serve(owner, fd) in its own thread, at most max_conns of them. */
static inline void acceptor_start(acceptor_t *a, int lfd, int max_conns,
                                  void (*serve)(void *owner, int fd), void *owner)
{
    assert_true(max_conns > 0 && max_conns <= ACCEPTOR_MAX_CONNS);
    a->lfd = lfd;
    a->max_conns = max_conns;
    a->serve = serve;
    a->owner = owner;
    assert_int_equal(listen(lfd, 16), 0);
    assert_int_equal(pthread_create(&a->thr, NULL, acceptor_main, a), 0);
}

/* Reads exactly n bytes from a connection of a's, or returns -1 (EOF,
 * error, stop): a connection's thread never outlives acceptor_stop(). */
static inline int acceptor_read_n(acceptor_t *a, int fd, void *buf, size_t n)
{
    size_t have = 0;
    while (have < n) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        if (atomic_load(&a->stop))
            return -1;
        if (poll(&pfd, 1, 50) <= 0)
            continue;
        ssize_t r = recv(fd, (char *)buf + have, n - have, 0);
        if (r <= 0)
            return -1;
        have += (size_t)r;
    }
    return 0;
}

/* Stops accepting, joins every connection's thread (each ends on stop),
 * closes the listening socket. */
static inline void acceptor_stop(acceptor_t *a)
{
    atomic_store(&a->stop, true);
    pthread_join(a->thr, NULL);
    for (int i = 0; i < atomic_load(&a->nconns); i++)
        pthread_join(a->conns[i], NULL);
    close(a->lfd);
}

#endif
