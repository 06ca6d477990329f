/* jrpc_timing — where one body's time went, as a W3C Server-Timing value
 * (https://www.w3.org/TR/server-timing/): written by the broker (the HTTP
 * Server-Timing header, the ZeroMQ reply header's "server_timing", the SSE
 * end event, the NDJSON trailer) and read back by clients and jrpc-bench.
 *
 * Pure: no clock is read here; the broker fills the durations from the
 * timestamps it already keeps (docs/ARCHITECTURE.md, "Server-Timing"). */
#ifndef JRPC_TIMING_H
#define JRPC_TIMING_H

#include <stddef.h>
#include <stdint.h>

/* The phases, in the order they are written. For a batch, queue and worker
 * are the slowest call's (the one answered last); the others are the body's. */
enum jrpc_timing_phase {
    JRPC_TIMING_PARSE,    /* the body parsed (jrpc_batch_parse) */
    JRPC_TIMING_AUTH,     /* the signature checked (signed bodies only) */
    JRPC_TIMING_REDIS,    /* the Redis claim: sent to answered (nonce, rate, idempotency) */
    JRPC_TIMING_QUEUE,    /* the slowest call: dispatched to sent to its worker */
    JRPC_TIMING_WORKER,   /* the slowest call: sent to its answer read */
    JRPC_TIMING_GATHER,   /* the last answer read to the reply written */
    JRPC_TIMING_TOTAL,    /* the body taken to its reply written */
    JRPC_TIMING_PHASES
};

typedef struct jrpc_timing {
    uint64_t ns[JRPC_TIMING_PHASES];  /* each phase's duration, ns */
    uint32_t has;                     /* bit 1u << phase: the phase happened */
} jrpc_timing_t;

/* Room a formatted value needs, its NUL included. */
#define JRPC_TIMING_MAX 256

/* The metric name of a phase ("parse", ... "total"); "" out of range. */
const char *jrpc_timing_name(int phase);

/* Writes the phases of t that happened, in enum order, as
 * "parse;dur=0.012, queue;dur=0.003, total;dur=0.051": milliseconds with
 * three decimals (rounded to the µs; a duration past 10^9 ms is written as
 * that). out must hold JRPC_TIMING_MAX bytes; it is NUL-terminated.
 * Returns the length (0 when no phase happened). Never fails. */
size_t jrpc_timing_format(const jrpc_timing_t *t, char *out);

/* "00" "01" ... "99": two decimal digits at 2 * v for v < 100 (and a NUL).
 * One table for every number this project writes two digits at a time
 * (Server-Timing here, http/jrpc_http_response's Content-Length). */
extern const char jrpc_timing_pairs[201];

/* Reads a Server-Timing value s[0, n) (several header lines joined with ","
 * are one value): each metric whose name is a phase's and that has a
 * "dur" parameter sets that phase (the first one wins); other metrics,
 * other parameters and quoted "desc" strings are skipped. Nothing is read
 * past s + n. Returns the number of phases set (0: none), or -EINVAL for
 * a value that is not Server-Timing syntax (*t then holds what was read
 * before it). */
int jrpc_timing_parse(const char *s, size_t n, jrpc_timing_t *t);

#endif
