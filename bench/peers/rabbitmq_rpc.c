/* jrpc-peer-rabbitmq — RabbitMQ RPC with direct reply-to doing jrpc's job:
 * an `add` server and the load side, with librabbitmq (rabbitmq-c).
 *
 *   jrpc-peer-rabbitmq serve HOST:PORT   consumes queue "jrpc_add", answers
 *                                        to each message's reply_to
 *   jrpc-peer-rabbitmq load --url HOST:PORT [options]   (peer_load.h)
 *
 * Both sides consume with no_ack (the cheapest RabbitMQ offers; the answer is
 * the acknowledgement, as in jrpc). A "batch" of N is N messages published
 * at once with reply_to "amq.rabbitmq.reply-to" (direct reply-to: no reply
 * queue), and the N answers consumed from that pseudo-queue. Login as the
 * default guest user, which RabbitMQ only accepts from loopback. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <amqp.h>
#include <amqp_tcp_socket.h>

#include "peer_load.h"

#define QUEUE "jrpc_add"
#define REPLY_TO "amq.rabbitmq.reply-to"

static int rpc_ok(amqp_rpc_reply_t r, const char *what)
{
    if (r.reply_type == AMQP_RESPONSE_NORMAL)
        return 1;
    fprintf(stderr, "jrpc-peer-rabbitmq: %s failed (reply type %d)\n", what, (int)r.reply_type);
    return 0;
}

/* A connection with channel 1 open, consuming from `queue` with no_ack. */
static amqp_connection_state_t connect_to(const char *url, const char *queue, int declare)
{
    char host[256];
    const char *colon = strrchr(url, ':');
    if (!colon || (size_t)(colon - url) >= sizeof host) {
        fprintf(stderr, "jrpc-peer-rabbitmq: the URL is HOST:PORT, not %s\n", url);
        return NULL;
    }
    memcpy(host, url, (size_t)(colon - url));
    host[colon - url] = 0;
    amqp_connection_state_t conn = amqp_new_connection();
    amqp_socket_t *sock = amqp_tcp_socket_new(conn);
    if (!sock || amqp_socket_open(sock, host, atoi(colon + 1)) != AMQP_STATUS_OK) {
        fprintf(stderr, "jrpc-peer-rabbitmq: cannot connect to %s\n", url);
        amqp_destroy_connection(conn);
        return NULL;
    }
    if (!rpc_ok(amqp_login(conn, "/", 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, "guest", "guest"),
                "login"))
        goto fail;
    amqp_channel_open(conn, 1);
    if (!rpc_ok(amqp_get_rpc_reply(conn), "channel.open"))
        goto fail;
    if (declare) {
        amqp_queue_declare(conn, 1, amqp_cstring_bytes(queue), 0, 0, 0, 1, amqp_empty_table);
        if (!rpc_ok(amqp_get_rpc_reply(conn), "queue.declare"))
            goto fail;
    }
    amqp_basic_consume(conn, 1, amqp_cstring_bytes(queue), amqp_empty_bytes, 0, 1, 0,
                       amqp_empty_table);
    if (!rpc_ok(amqp_get_rpc_reply(conn), "basic.consume"))
        goto fail;
    return conn;
fail:
    amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(conn);
    return NULL;
}

static int serve(const char *url)
{
    amqp_connection_state_t conn = connect_to(url, QUEUE, 1);
    if (!conn)
        return 1;
    fprintf(stderr, "jrpc-peer-rabbitmq: serving queue %s at %s\n", QUEUE, url);
    char out[128];
    for (;;) {
        amqp_envelope_t env;
        amqp_maybe_release_buffers(conn);
        if (!rpc_ok(amqp_consume_message(conn, &env, NULL, 0), "consume"))
            return 1;
        amqp_basic_properties_t *in = &env.message.properties;
        int n = peer_answer(env.message.body.bytes, (int)env.message.body.len, out);
        if (n > 0 && (in->_flags & AMQP_BASIC_REPLY_TO_FLAG)) {
            amqp_basic_properties_t props = { ._flags = 0 };
            amqp_bytes_t body = { (size_t)n, out };
            amqp_basic_publish(conn, 1, amqp_empty_bytes, in->reply_to, 0, 0, &props, body);
        }
        amqp_destroy_envelope(&env);
    }
}

static void *rabbit_open(const char *url)
{
    return connect_to(url, REPLY_TO, 0);
}

static int rabbit_call(void *c, uint64_t base, int n, int timeout_ms, peer_seen_t *seen)
{
    amqp_connection_state_t conn = c;
    char buf[128];
    amqp_basic_properties_t props = { ._flags = AMQP_BASIC_REPLY_TO_FLAG,
                                      .reply_to = amqp_cstring_bytes(REPLY_TO) };
    for (int i = 0; i < n; i++) {
        int len = peer_request(buf, base + (uint64_t)i);
        amqp_bytes_t body = { (size_t)len, buf };
        if (amqp_basic_publish(conn, 1, amqp_empty_bytes, amqp_cstring_bytes(QUEUE), 0, 0, &props,
                               body) != AMQP_STATUS_OK)
            return -1;
    }
    struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
    for (int i = 0; i < n; i++) {
        amqp_envelope_t env;
        amqp_maybe_release_buffers(conn);
        if (amqp_consume_message(conn, &env, &tv, 0).reply_type != AMQP_RESPONSE_NORMAL)
            return -1;
        peer_seen_mark(seen, base, env.message.body.bytes, (int)env.message.body.len);
        amqp_destroy_envelope(&env);
    }
    return 0;
}

static void rabbit_close(void *c)
{
    amqp_connection_state_t conn = c;
    amqp_channel_close(conn, 1, AMQP_REPLY_SUCCESS);
    amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(conn);
}

int main(int argc, char **argv)
{
    static const peer_ops_t ops = { "rabbitmq", "HOST:PORT", serve, rabbit_open, rabbit_call, rabbit_close };
    return peer_main(argc, argv, &ops);
}
