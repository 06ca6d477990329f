/* jrpc_openrpc — the broker's OpenRPC document (openrpc.org, 1.3.2): every
 * method served now, by service, with what its workers declared at READY
 * (idempotent, json, schemas). What rpc.discover answers and GET
 * /openrpc.json serves (docs/ARCHITECTURE.md "Discovery"). Knows no
 * transport: a caller's key decides what it sees through allow(). */
#ifndef JRPC_OPENRPC_H
#define JRPC_OPENRPC_H

#include <stdbool.h>
#include <stddef.h>

#include "jrpc_buf.h"
#include "jrpc_workers.h"

#define JRPC_OPENRPC_VERSION "1.3.2"

/* Whether the caller may see (call) the method named canonical: a key's
 * ACL. NULL: everything. */
typedef bool (*jrpc_openrpc_allow_fn)(void *arg, jrpc_span_t canonical);

/* Appends the document for the methods ms[0, n), in that order (the
 * builder: pure). A method whose names are not valid UTF-8 is left out.
 * Without schemas a method gets "params": [] and a result of any type; a
 * "result" that is a bare JSON Schema (no "schema" member) is wrapped in a
 * content descriptor named "result". version is the broker's. Returns 0 or
 * -ENOMEM (out->len restored). */
int jrpc_openrpc_write_methods(jrpc_buf_t *out, const jrpc_method_info_t *ms, size_t n,
                               const char *version);

/* Appends the document of every method served now (jrpc_workers_each_method)
 * that allow() lets through, sorted by canonical name. Returns 0 or
 * -ENOMEM. Never blocks; linear in the table plus the sort. */
int jrpc_openrpc_write(jrpc_buf_t *out, jrpc_workers_t *w, const char *version,
                       jrpc_openrpc_allow_fn allow, void *arg);

#endif
