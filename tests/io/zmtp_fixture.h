/* What both test_jrpc_zmtp*.c programs share: the includes, a client's
 * greeting as libzmq 4.x sends it and a READY property's bytes (the
 * decoder's tests and the raw TCP peers write them). Include it once from
 * one .c per program. */
#ifndef JRPC_TEST_ZMTP_FIXTURE_H
#define JRPC_TEST_ZMTP_FIXTURE_H

#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <cmocka.h>
#include <uv.h>
#include <zmq.h>

#include "jrpc_zmtp.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"

/* A client's greeting as libzmq 4.x sends it. */
static void client_greeting(uint8_t g[64])
{
    memset(g, 0, 64);
    g[0] = 0xFF;
    g[8] = 1;
    g[9] = 0x7F;
    g[10] = 3;
    g[11] = 1;
    memcpy(g + 12, "NULL", 4);
}

/* READY's data: name length, name, 4-byte BE value length, value. */
static size_t prop(uint8_t *p, const char *name, const char *value)
{
    size_t nl = strlen(name), vl = strlen(value);
    p[0] = (uint8_t)nl;
    memcpy(p + 1, name, nl);
    p[1 + nl] = 0;
    p[2 + nl] = 0;
    p[3 + nl] = (uint8_t)(vl >> 8);
    p[4 + nl] = (uint8_t)vl;
    memcpy(p + 5 + nl, value, vl);
    return 5 + nl + vl;
}

#pragma GCC diagnostic pop

#endif
