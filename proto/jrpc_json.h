/* jrpc_json — strict RFC 8259 JSON: validation, JSON→msgpack, msgpack→JSON.
 *
 * Purpose-built for the broker's hot path: one pass over the bytes, no DOM,
 * no allocation beyond the caller's output buffer. Strict means: UTF-8 only
 * (no BOM, no overlongs, no surrogates, nothing above U+10FFFF), no leading
 * zeros, no trailing garbage, exactly one value, control characters escaped,
 * and \u escapes that pair up (a lone surrogate is malformed). Input is never
 * read past p + n; it need not be NUL-terminated.
 *
 * Transcoding choices: only integer syntax (no '.', no exponent) that fits
 * int64/uint64 becomes a msgpack int, with the smallest encoding ("-0" is
 * int 0); "1.0" and "1e5" are float64. A number that overflows a double is
 * JRPC_JSON_ERANGE; one that underflows becomes a denormal or 0. Duplicate
 * keys inside values are kept as duplicate map keys. Strings may carry a
 * str8/16/32 header larger than needed (sized from the escaped length).
 * Numbers are read and written with strtod/snprintf: LC_NUMERIC must stay
 * "C". Note that msgpack-c's own unpacker stops at 32 levels of nesting.
 *
 * Return values: 0 (or a byte count where said) on success, otherwise one of
 * the negative JRPC_JSON_E* codes below, or -ENOMEM. */
#ifndef JRPC_JSON_H
#define JRPC_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <msgpack.h>
#include "jrpc_buf.h"

enum {
    JRPC_JSON_EINCOMPLETE = -1001,  /* a strict prefix of some valid text: need more bytes */
    JRPC_JSON_EMALFORMED  = -1002,  /* not JSON, whatever follows */
    JRPC_JSON_EDEPTH      = -1003,  /* nesting deeper than max_depth */
    JRPC_JSON_ERANGE      = -1004,  /* a number too large for a double (e.g. 1e400) */
    JRPC_JSON_EUNREPR     = -1005,  /* msgpack value with no JSON form (bin, ext, NaN,
                                       non-string map key, invalid UTF-8 string) */
};

#define JRPC_JSON_MAX_DEPTH 64

/* The msgpack form of a JSON text of n bytes never exceeds this many bytes,
 * at any moment of transcoding (containers reserve a 5-byte header, floats
 * take 9 bytes and need at least 3 characters, "-0" becomes int 0). */
#define JRPC_JSON_MSGPACK_BOUND(n) (3 * (size_t)(n))

/* A short English description of a JRPC_JSON_E* code (or -ENOMEM). */
const char *jrpc_json_strerror(int rc);

/* Checks that p[0..n) is exactly one JSON value with optional surrounding
 * whitespace. Returns 0, JRPC_JSON_EINCOMPLETE, _EMALFORMED or _EDEPTH. */
int jrpc_json_validate(const char *p, size_t n, unsigned max_depth);

/* jrpc_json_validate() that also refuses a number overflowing a double
 * (JRPC_JSON_ERANGE, as transcoding does: 1e400), so that the text
 * transcodes whenever it validates; on success *value is the value without
 * the whitespace around it (borrowed from p). What the broker checks a
 * worker's result or error data given as JSON text with (PROTOCOL.md 7). */
int jrpc_json_check(const char *p, size_t n, unsigned max_depth, jrpc_span_t *value);

/* Transcodes the single JSON value p[0..n), which jrpc_json_check() (or the
 * batch parser) accepted, to msgpack at w: room for JRPC_JSON_MSGPACK_BOUND(n)
 * bytes. No depth limit (the check had one). Returns the end of what was
 * written, or NULL when the text does not transcode after all (a caller's
 * bug: nothing useful was written). Never allocates, except for a number of
 * 64 digits or more (then NULL also on out of memory). */
char *jrpc_json_msgpack_at(char *w, const char *p, size_t n);

/* Transcodes the single JSON value p[0..n) to msgpack, appended to out.
 * Integers that fit int64/uint64 become msgpack ints, every other number a
 * float64; strings are unescaped to UTF-8 str. On error out->len is restored.
 * Returns 0, a JRPC_JSON_E* code, or -ENOMEM. */
int jrpc_json_to_msgpack(const char *p, size_t n, unsigned max_depth, jrpc_buf_t *out);

/* Appends the JSON text of a msgpack object (compact, no spaces). Floats are
 * written in the shortest form that reads back to the same double (a float32
 * to the same float) and always carry a '.' or an exponent ("1.0", "1e+300").
 * Strings escape '"', '\\' and control characters only. max_depth counts
 * arrays and maps as jrpc_json_validate() does. On error out->len is restored.
 * Returns 0, JRPC_JSON_EUNREPR, JRPC_JSON_EDEPTH or -ENOMEM. */
int jrpc_json_write_msgpack(jrpc_buf_t *out, const msgpack_object *o, unsigned max_depth);

/* True when p[0..n) is valid UTF-8 (RFC 3629: no overlong forms, no
 * surrogates, nothing past U+10FFFF): the same check the parser makes
 * inside strings. */
bool jrpc_json_utf8_valid(const char *p, size_t n);

/* Appends s[0..n) as a quoted, escaped JSON string. s must be valid UTF-8.
 * Returns 0, JRPC_JSON_EUNREPR (invalid UTF-8) or -ENOMEM. */
int jrpc_json_write_string(jrpc_buf_t *out, const char *s, size_t n);

/* Appends a double in the shortest round-trip form (see above).
 * Returns 0, JRPC_JSON_EUNREPR (NaN or infinity) or -ENOMEM. */
int jrpc_json_write_double(jrpc_buf_t *out, double d);

/* Finds the member `name` of the top-level object in p[0..n) (the whole text
 * is validated) and sets *value to its raw JSON text, borrowed from p.
 * Returns 0, -ENOENT (no such member, or the top level is not an object),
 * or a JRPC_JSON_E* code. */
int jrpc_json_member(const char *p, size_t n, const char *name, jrpc_span_t *value);

/* Called by jrpc_json_each_member() for one member: name unescaped, value
 * its raw JSON text; both borrowed for the call. */
typedef void (*jrpc_json_member_fn)(void *arg, jrpc_span_t name, jrpc_span_t value);

/* Validates p[0..n) (max_depth as jrpc_json_validate) and calls fn once per
 * member of its top-level object, in order, in one pass (a member whose
 * escaped name is over 256 bytes is skipped). Returns 0, -ENOENT (the top
 * level is not an object) or a JRPC_JSON_E* code (then fn was not called). */
int jrpc_json_each_member(const char *p, size_t n, unsigned max_depth, jrpc_json_member_fn fn,
                          void *arg);

#endif
