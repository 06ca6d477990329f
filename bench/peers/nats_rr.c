/* jrpc-peer-nats — NATS request-reply doing jrpc's job: an `add` responder
 * and the load side, with libnats (send-asap on for both).
 *
 *   jrpc-peer-nats serve nats://127.0.0.1:PORT   one responder on subject "add"
 *   jrpc-peer-nats load --url nats://127.0.0.1:PORT [options]   (peer_load.h)
 *
 * The responder reads the JSON-RPC request (peer_answer) and publishes the
 * answer to the request's reply subject. A "batch" of N is N requests
 * published at once with the connection's inbox as reply subject, and the N
 * answers taken from it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nats/nats.h>

#include "peer_load.h"

static natsConnection *connect_to(const char *url)
{
    natsOptions *opts = NULL;
    natsConnection *nc = NULL;
    natsStatus s = natsOptions_Create(&opts);
    if (s == NATS_OK)
        s = natsOptions_SetURL(opts, url);
    if (s == NATS_OK)
        s = natsOptions_SetSendAsap(opts, true);
    if (s == NATS_OK)
        s = natsConnection_Connect(&nc, opts);
    natsOptions_Destroy(opts);
    if (s != NATS_OK) {
        fprintf(stderr, "jrpc-peer-nats: cannot connect to %s: %s\n", url, natsStatus_GetText(s));
        return NULL;
    }
    return nc;
}

static int serve(const char *url)
{
    natsConnection *nc = connect_to(url);
    natsSubscription *sub = NULL;
    if (!nc || natsConnection_SubscribeSync(&sub, nc, "add") != NATS_OK)
        return 1;
    natsSubscription_SetPendingLimits(sub, -1, -1);
    fprintf(stderr, "jrpc-peer-nats: serving \"add\" at %s\n", url);
    char out[128];
    for (;;) {
        natsMsg *m = NULL;
        natsStatus s = natsSubscription_NextMsg(&m, sub, 1000);
        if (s == NATS_TIMEOUT)
            continue;
        if (s != NATS_OK) {
            fprintf(stderr, "jrpc-peer-nats: %s\n", natsStatus_GetText(s));
            return 1;
        }
        int n = peer_answer(natsMsg_GetData(m), natsMsg_GetDataLength(m), out);
        if (n > 0 && natsMsg_GetReply(m))
            natsConnection_Publish(nc, natsMsg_GetReply(m), out, n);
        natsMsg_Destroy(m);
    }
}

typedef struct {
    natsConnection *nc;
    natsSubscription *sub;
    char inbox[128];
} nconn_t;

static void *nats_open(const char *url)
{
    nconn_t *c = calloc(1, sizeof *c);
    natsInbox *ib = NULL;
    if (!c || !(c->nc = connect_to(url)) || natsInbox_Create(&ib) != NATS_OK) {
        free(c);
        return NULL;
    }
    snprintf(c->inbox, sizeof c->inbox, "%s", ib);
    natsInbox_Destroy(ib);
    if (natsConnection_SubscribeSync(&c->sub, c->nc, c->inbox) != NATS_OK) {
        natsConnection_Destroy(c->nc);
        free(c);
        return NULL;
    }
    natsSubscription_SetPendingLimits(c->sub, -1, -1);
    return c;
}

static int nats_call(void *conn, uint64_t base, int n, int timeout_ms, peer_seen_t *seen)
{
    nconn_t *c = conn;
    char buf[128];
    for (int i = 0; i < n; i++) {
        int len = peer_request(buf, base + (uint64_t)i);
        if (natsConnection_PublishRequest(c->nc, "add", c->inbox, buf, len) != NATS_OK)
            return -1;
    }
    for (int i = 0; i < n; i++) {
        natsMsg *m = NULL;
        if (natsSubscription_NextMsg(&m, c->sub, timeout_ms) != NATS_OK)
            return -1;
        peer_seen_mark(seen, base, natsMsg_GetData(m), natsMsg_GetDataLength(m));
        natsMsg_Destroy(m);
    }
    return 0;
}

static void nats_close(void *conn)
{
    nconn_t *c = conn;
    natsSubscription_Destroy(c->sub);
    natsConnection_Destroy(c->nc);
    free(c);
}

int main(int argc, char **argv)
{
    static const peer_ops_t ops = { "nats", "URL", serve, nats_open, nats_call, nats_close };
    return peer_main(argc, argv, &ops);
}
