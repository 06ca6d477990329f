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

/* Checks one method's declaration p[0, n) (a member of READY "schemas",
 * PROTOCOL.md 2.1) as the OpenRPC 1.3.2 meta-schema will judge it in the
 * document: an object whose "params" is an array of content descriptors
 * (name a non-empty string, schema a JSON Schema, required and deprecated
 * booleans, summary and description strings, x-* anything, nothing else),
 * whose "result" is a content descriptor or a bare JSON Schema, and whose
 * other members are summary, description, paramStructure or x-* (not
 * x-jrpc-*: the broker's). A JSON Schema is checked keyword by keyword
 * against draft-07's meta-schema (types of the known keywords, nested
 * schemas at most 32 deep; formats are not checked). Pure; linear in n
 * times the nesting. Returns 0, or -EINVAL with *why (when why is not NULL)
 * a short token for the log: not_an_object, not_json, bad_params,
 * bad_result, bad_member, reserved_member, unknown_member. */
int jrpc_openrpc_decl_check(const char *p, size_t n, const char **why);

#endif
