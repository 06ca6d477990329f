/* jrpc_connect_opt — the options that say which brokers a worker program
 * serves, shared by jrpc-worker and jrpc-stdio: --connect (an endpoint, or
 * dns+tcp://NAME:PORT for every broker NAME resolves to), --resolve-ms and
 * --zmq-engine.
 * One table row each and one syntax check, so that the two programs take
 * and document the same thing. Not part of libjrpc-worker's API. */
#ifndef JRPC_CONNECT_OPT_H
#define JRPC_CONNECT_OPT_H

#include <stddef.h>
#include "jrpc_conf.h"

#define JRPC_CONNECT_DEFAULT "tcp://127.0.0.1:5556"

/* jrpc_conf's check for --connect: a ZeroMQ endpoint
 * (jrpc_conf_check_zmq_endpoint) or a dns+tcp://NAME:PORT (jrpc_dns_parse).
 * Returns 0, or -1 with the reason in err. */
int jrpc_connect_check(const char *value, char *err, size_t errlen);

/* jrpc_conf's check for --name, which both programs take too: what
 * jrpc_worker_new accepts as READY's "name" (1 to 63 printable ASCII bytes,
 * no spaces). Returns 0, or -1 with the reason in err. */
int jrpc_connect_name_check(const char *value, char *err, size_t errlen);

/* jrpc_conf's check for --service: a service name as the broker takes it,
 * [a-z0-9][a-z0-9_-]{0,62}. Returns 0, or -1 with the reason in err. */
int jrpc_connect_service_check(const char *value, char *err, size_t errlen);

/* Reads --schemas FILE: a JSON object {"method": {"params": [...], "result":
 * {...}}} of at most JRPC_WIRE_SCHEMAS_MAX bytes (PROTOCOL.md 2.1). On
 * success *out is the text (NUL-terminated; the caller frees it). Returns
 * 0, or -1 with the reason in err. Blocks (stdio). */
int jrpc_connect_read_schemas(const char *file, char **out, char *err, size_t errlen);

/* jrpc_connect_read_schemas for the --schemas option of conf: NULL file is
 * none (0, *out NULL); a bad file is reported as the option's error
 * (jrpc_conf_error) and -1 returned (the program exits 2). */
int jrpc_connect_load_schemas(const jrpc_conf_t *conf, const char *file, char **out);

/* The --service and --schemas rows: service a const char ** (jrpc_worker_opts_t
 * .service), schemas_file a const char ** (read with jrpc_connect_read_schemas). */
#define JRPC_SERVICE_OPTS(service, schemas_file)                                             \
    { "service", JRPC_CONF_STR, "NAME", NULL,                                                \
      "the service this worker's methods belong to ([a-z0-9][a-z0-9_-]{0,62}):\n"          \
      "clients call them SERVICE.method, and by the bare name when\n"                      \
      "no other service declared it first; unset: no service",                              \
      .dest = (service), .check = jrpc_connect_service_check },                              \
    { "schemas", JRPC_CONF_STR, "FILE", NULL,                                                \
      "JSON {\"method\": {\"params\": [...], \"result\": {...}}}: OpenRPC\n"          \
      "content descriptors of the methods, sent at READY for\n"                            \
      "rpc.discover (at most 64 KiB)", .dest = (schemas_file) }

/* The three rows, for a table: endpoints is a jrpc_conf_list_t *, resolve_ms
 * a uint32_t * (jrpc_worker_opts_t.resolve_ms), engine a const char **
 * (jrpc_worker_opts_t.zmq_engine). */
#define JRPC_CONNECT_OPTS(endpoints, resolve_ms, engine)                                     \
    { "connect", JRPC_CONF_LIST, "ENDPOINT", JRPC_CONNECT_DEFAULT,                          \
      "a broker's worker endpoint, or dns+tcp://NAME:PORT for\n"                            \
      "every broker NAME resolves to (A and AAAA, one session\n"                            \
      "each); repeat (or give a comma list) for several",                                   \
      .dest = (endpoints), .check = jrpc_connect_check },                                    \
    { "resolve-ms", JRPC_CONF_UINT, "N", "5000",                                             \
      "how often dns+tcp:// names are resolved again; a\n"                                  \
      "broker lost also resolves its name at once",                                         \
      .dest = (resolve_ms), .min = 100, .max = 3600000 },                                   \
    { "zmq-engine", JRPC_CONF_STR, "NAME", "native",                                      \
      "who speaks ZMTP to the brokers: native (our own, on the\n"                          \
      "loop; tcp:// and ipc://) or libzmq; CURVE always uses libzmq",                       \
      .dest = (engine), .check = jrpc_conf_check_zmq_engine }

#endif
