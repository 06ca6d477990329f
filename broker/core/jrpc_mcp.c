/* jrpc_mcp — MCP on the broker (docs/MCP.md): what a server sends a client
 * (a MESSAGE from a worker, PROTOCOL.md 2.6) handed to the body it belongs
 * to or to the front that holds the session's stream, and what a client
 * sends a server outside a call (its responses, the end of its session)
 * sent to the worker the session's id names (jrpc_mcp_sid.h): any broker
 * finds it, the id holds the worker's instance.
 *
 * Not here: dispatching a session's calls (jrpc_workers_dispatch_mcp), the
 * HTTP side (broker/front/jrpc_front_mcp). */
#include "jrpc_broker_int.h"

#include "jrpc_json.h"
#include "jrpc_mcp_sid.h"
#include "jrpc_wire.h"
#include "jrpc_workers.h"

#define MSGS_PER_BODY 64   /* server messages one body's client gets at most */

/* jrpc_msg_fn of the workers: for body owner (its call i), or for a session. */
void on_worker_msg(void *owner, uint32_t i, jrpc_span_t session, jrpc_span_t body, void *arg)
{
    jrpc_broker_t *b = arg;
    (void)i;
    /* What reaches a client is one JSON object, checked as a worker's JSON
     * result is (PROTOCOL.md 2.3): a worker's bytes never frame its stream. */
    jrpc_span_t v;
    if (body.p != NULL && (jrpc_json_check(body.p, body.n, JRPC_JSON_MAX_DEPTH, &v) < 0 ||
                           v.p[0] != '{')) {
        JRPC_LOG(JRPC_LOG_DEBUG, "broker", "event=mcp_message_dropped reason=not_json bytes=%zu",
                 body.n);
        return;
    }
    if (body.p != NULL)
        body = v;
    if (owner == NULL) {
        if (b->on_session)
            b->on_session(b->on_session_arg, session, body);
        return;
    }
    bbatch_t *x = owner;
    if (x->mcp == NULL || x->replied || x->detached || x->mcp_msgs >= MSGS_PER_BODY)
        return;
    x->mcp_msgs += body.p != NULL;
    x->mcp(x->ctx, session, body);
}

void jrpc_broker_on_session_message(jrpc_broker_t *b, jrpc_mcp_msg_fn fn, void *arg)
{
    b->on_session = fn;
    b->on_session_arg = arg;
}

int jrpc_broker_mcp_send(jrpc_broker_t *b, jrpc_span_t session, jrpc_span_t json)
{
    jrpc_mcp_sid_t sid;
    uint64_t instance;
    jrpc_span_t id;
    if (session.n > 0) {
        if (jrpc_mcp_sid_parse(session.p, session.n, &sid) < 0)
            return -ESRCH;   /* no bridge issued it */
        instance = sid.instance;
    } else if (json.p == NULL || jrpc_json_member(json.p, json.n, "id", &id) < 0 ||
               id.n < 2 + JRPC_MCP_INSTANCE_LEN || id.p[0] != '"' ||
               jrpc_mcp_instance_parse(id.p + 1, JRPC_MCP_INSTANCE_LEN, &instance) < 0) {
        return -EINVAL;
    }
    if (json.p && json.n > JRPC_WIRE_MESSAGE_MAX)
        return -E2BIG;
    return jrpc_workers_message(b->workers, instance, session, json);
}

/* jrpc_probe_fn of the workers. */
void on_worker_probe(uint64_t probe, jrpc_span_t session, bool live, void *arg)
{
    jrpc_broker_t *b = arg;
    if (b->on_probe)
        b->on_probe(b->on_probe_arg, probe, session, live);
}

void jrpc_broker_on_session_probe(jrpc_broker_t *b, jrpc_mcp_probe_fn fn, void *ctx)
{
    b->on_probe = fn;
    b->on_probe_arg = ctx;
}

int jrpc_broker_mcp_probe(jrpc_broker_t *b, jrpc_span_t session, uint64_t *probe)
{
    jrpc_mcp_sid_t sid;
    if (session.n == 0 || jrpc_mcp_sid_parse(session.p, session.n, &sid) < 0)
        return -ESRCH;
    uint64_t id = b->probes + 1;
    int rc = jrpc_workers_probe(b->workers, sid.instance, id, session);
    if (rc == 0)
        *probe = b->probes = id;
    return rc;
}
