/* A TCP port free on 127.0.0.1 right now (bound, read, closed): for the
 * redis-server a unit test starts. Needs <arpa/inet.h>, <netinet/in.h>,
 * <sys/socket.h>, <unistd.h> and cmocka. */
#ifndef TEST_FREE_PORT_H
#define TEST_FREE_PORT_H

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

#endif
