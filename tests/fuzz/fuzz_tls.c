/* fuzz_tls — libFuzzer target for io/jrpc_tls, and the HTTP request reader
 * fed through it as the front feeds it (issue 15).
 *
 * LLVMFuzzerInitialize makes certificates (tests/io/tls_testcert), one
 * server context (io/jrpc_tls, no client CA) and one client SSL_CTX that
 * verifies the server against the test CA. Each input is one connection;
 * data[0] & 3 picks the mode, data[1] how the ciphertext is cut (0..31: in
 * pieces of 1..32 bytes; more: random pieces of 1..64*data[1] bytes,
 * seeded from the input), data[2] the read buffer (1 + 64 * data[2] bytes):
 *
 *   0  raw: data[3..] is ciphertext for a fresh server session;
 *   1  after a hello: a real client's ClientHello (TLS 1.3, or 1.2 when
 *      data[0] & 4) is fed first and the server's answer dropped, then
 *      data[3..] as the client's next flight;
 *   2, 3  a session: a real handshake in memory (TLS 1.3, or 1.2 when
 *      data[0] & 4 with the suite data[0] >> 3 & 3 picks), then data[8..]
 *      is plaintext the client sends in records of 1 + 64 * data[3] bytes
 *      (then its close_notify when data[0] & 0x20), the ciphertext cut as
 *      above; when data[0] & 0x40, one byte of it, at data[4..5] (LE)
 *      modulo its length, is XORed with data[6] (0x80 if 0). data[7] picks
 *      the reader's limits: max_header_bytes 256 + 512 * (data[7] >> 3),
 *      max_body one of eight sizes by data[7] & 7.
 *
 * Work per input is bounded (exec/s): at most 1024 ciphertext pieces, 256
 * records and 1024 reads; a larger input gets larger ones than asked.
 * Each piece is its own malloc'd buffer of exactly its length, so a read
 * past the bytes given trips AddressSanitizer. Invariants (abort() on
 * violation, a crash for libFuzzer):
 *  - a read returns at most its buffer's size; a verdict below zero is
 *    final (later reads return it again); EPROTO comes with a reason,
 *    plain_http only with EPROTO and never on an established session;
 *  - session: the handshake completes; the plaintext the server reads is
 *    exactly what the client sent, in order, whatever the cuts (a prefix
 *    of it when a byte was corrupted, and then EPROTO or "need more",
 *    never a close); the client's close_notify gives ECLOSED; the HTTP
 *    reader fed the decrypted pieces as they come (unconsumed bytes first
 *    again, as the front does) reports exactly what it reports fed the
 *    same bytes whole; the server's answer (that transcript) and its
 *    close_notify reach the client intact;
 *  - no crash, leak or undefined behaviour (ASan, UBSan).
 * The handshake is fresh per input (keys are random: the ciphertext is
 * not reproducible byte for byte, the verdicts are).
 *
 * JRPC_FUZZ_TLS_SEEDS=DIR writes seeds into DIR at start (real hellos and
 * second flights for modes 0 and 1), then runs as usual. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "jrpc_http_reader.h"
#include "jrpc_tls.h"
#include "tls_testcert.h"

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "fuzz_tls: invariant failed: %s (%s:%d)\n", #cond,       \
                    __FILE__, __LINE__);                                             \
            abort();                                                                 \
        }                                                                            \
    } while (0)

#define FUZZ_MAX_INPUT (1u << 16)
#define READ_MAX  (1 + 64 * 255)
/* Bounds on the work per input (exec/s): ciphertext pieces, plaintext
 * records, reads. Small pieces, records and reads still come with small
 * inputs; larger inputs get larger ones. */
#define MAX_PIECES  1024
#define MAX_RECORDS 256
#define MAX_READS   1024

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tls_testcert_t  certs;
static jrpc_tls_ctx_t *sctx;
static SSL_CTX        *cctx;

/* ---- growing byte buffers ------------------------------------------------ */

typedef struct bytes {
    char  *p;
    size_t len, cap;
} bytes_t;

static void put(bytes_t *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 256;
        b->p = realloc(b->p, b->cap);
        CHECK(b->p != NULL);
    }
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void putf(bytes_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(bytes_t *b, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    CHECK(n >= 0 && (size_t)n < sizeof line);
    put(b, line, (size_t)n);
}

/* ---- the HTTP reader, fed as the front feeds it ---------------------------- */

typedef struct feeder {
    jrpc_http_reader_t r;
    char   *rest;     /* bytes the reader did not consume, fed again first */
    size_t  nrest;
    bool    final;    /* REFUSE or CLOSED: the front reads no more */
    bool    in_body;  /* the transcript's last entry is body bytes */
    bytes_t trace;    /* what the reader reported */
} feeder_t;

static void feeder_init(feeder_t *f, const jrpc_http_limits_t *lim)
{
    memset(f, 0, sizeof *f);
    jrpc_http_reader_init(&f->r, lim);
}

static void feeder_feed(feeder_t *f, const char *p, size_t n)
{
    if (f->final)
        return;
    size_t blen = f->nrest + n;
    char *b = malloc(blen ? blen : 1);
    CHECK(b != NULL);
    if (f->nrest)
        memcpy(b, f->rest, f->nrest);
    if (n)
        memcpy(b + f->nrest, p, n);
    free(f->rest);
    f->rest = NULL;
    f->nrest = 0;
    size_t off = 0;
    int idle = 0;   /* calls in a row that consumed nothing */
    for (;;) {
        jrpc_http_event_t ev;
        size_t k = jrpc_http_reader_feed(&f->r, b + off, blen - off, &ev);
        CHECK(k <= blen - off);
        idle = k == 0 && ev.kind != JRPC_HTTP_NEED_MORE ? idle + 1 : 0;
        CHECK(idle <= 3);
        if (ev.kind != JRPC_HTTP_BODY && ev.kind != JRPC_HTTP_NEED_MORE && f->in_body) {
            put(&f->trace, "\n", 1);
            f->in_body = false;
        }
        switch (ev.kind) {
        case JRPC_HTTP_NEED_MORE:
            break;
        case JRPC_HTTP_HEAD: {
            const jrpc_http_head_t *h = jrpc_http_reader_head(&f->r);
            putf(&f->trace, "H %s v%u ka%d ch%d cl%llu [%.*s]\n",
                 jrpc_http_head_method_name(&f->r), h->version_minor, h->keep_alive, h->chunked,
                 (unsigned long long)h->content_length, (int)h->target_len, h->target);
            break;
        }
        case JRPC_HTTP_BODY:
            CHECK(ev.data >= b + off && ev.data + ev.len <= b + off + k);
            if (!f->in_body)
                put(&f->trace, "B:", 2);
            f->in_body = true;
            put(&f->trace, ev.data, ev.len);
            break;
        case JRPC_HTTP_END:
            putf(&f->trace, "E\n");
            break;
        case JRPC_HTTP_REFUSE:
            putf(&f->trace, "R%u %s\n", ev.status, ev.reason);
            f->final = true;
            break;
        case JRPC_HTTP_CLOSED:
            putf(&f->trace, "C\n");
            f->final = true;
            break;
        }
        off += k;
        if (ev.kind == JRPC_HTTP_NEED_MORE || f->final)
            break;
    }
    if (!f->final && off < blen) {
        f->nrest = blen - off;
        f->rest = malloc(f->nrest);
        CHECK(f->rest != NULL);
        memcpy(f->rest, b + off, f->nrest);
    }
    free(b);
}

static void feeder_end(feeder_t *f)
{
    if (f->in_body)
        put(&f->trace, "\n", 1);
    putf(&f->trace, "phase %d\n", (int)jrpc_http_reader_phase(&f->r));
    free(f->rest);
    f->rest = NULL;
}

/* ---- cutting ------------------------------------------------------------------ */

typedef struct cutter {
    uint64_t x;       /* xorshift state, seeded from the input */
    unsigned sel;     /* data[1] */
} cutter_t;

static size_t next_cut(cutter_t *c)
{
    if (c->sel < 32)
        return c->sel + 1;
    c->x ^= c->x << 13;
    c->x ^= c->x >> 7;
    c->x ^= c->x << 17;
    return 1 + (size_t)(c->x % (64u * c->sel));
}

static uint64_t seed_of(const uint8_t *data, size_t size)
{
    uint64_t x = 1469598103934665603u;
    for (size_t i = 0; i < size; i++)
        x = (x ^ data[i]) * 1099511628211u;
    return x | 1;
}

/* ---- the server side ------------------------------------------------------------ */

typedef struct server {
    jrpc_tls_t *t;
    ssize_t     rc;      /* the last read's verdict (<= 0) */
    size_t      cap;     /* read buffer size */
    bytes_t     got;     /* plaintext read */
    feeder_t   *http;    /* NULL: plaintext goes nowhere else */
} server_t;

/* One piece of ciphertext (copied into a buffer of its own, freed once the
 * reads are over: the session reads it in place), then reads until the
 * session wants more or stops. */
static void server_piece(server_t *s, const uint8_t *p, size_t n)
{
    static char buf[READ_MAX];
    char *piece = malloc(n ? n : 1);
    CHECK(piece != NULL);
    if (n)
        memcpy(piece, p, n);
    CHECK(jrpc_tls_feed(s->t, piece, n) == 0);
    ssize_t k;
    while ((k = jrpc_tls_read(s->t, buf, s->cap)) > 0) {
        CHECK((size_t)k <= s->cap);
        CHECK(jrpc_tls_established(s->t));
        put(&s->got, buf, (size_t)k);
        if (s->http)
            feeder_feed(s->http, buf, (size_t)k);
    }
    free(piece);
    if (s->rc < 0)
        CHECK(k == s->rc);   /* final */
    s->rc = k;
    if (k == JRPC_TLS_EPROTO)
        CHECK(jrpc_tls_error(s->t)[0] != '\0' && !jrpc_tls_established(s->t));
    if (jrpc_tls_plain_http(s->t))
        CHECK(k == JRPC_TLS_EPROTO);
}

/* All of in[0, n) in cut pieces (at most MAX_PIECES of them, for speed);
 * stops at a verdict, as the front closes. */
static void server_cut(server_t *s, cutter_t *c, const uint8_t *in, size_t n)
{
    size_t least = n / MAX_PIECES;
    for (size_t at = 0; at < n && s->rc == 0;) {
        size_t k = next_cut(c);
        if (k < least)
            k = least;
        if (k > n - at)
            k = n - at;
        server_piece(s, in + at, k);
        at += k;
    }
}

/* What the server has to send, taken in pieces of up to 4096 bytes. */
static void server_drain(server_t *s, bytes_t *out)
{
    static char buf[4096];
    size_t want = jrpc_tls_pending(s->t), got = 0, k;
    while ((k = jrpc_tls_take(s->t, buf, sizeof buf)) > 0) {
        if (out)
            put(out, buf, k);
        got += k;
    }
    CHECK(got == want && jrpc_tls_pending(s->t) == 0);
}

/* ---- the client side ----------------------------------------------------------------- */

static const char *const suites12[4] = {
    "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-ECDSA-AES128-GCM-SHA256",
};

typedef struct client {
    SSL *ssl;
    BIO *in;    /* from the server */
    BIO *out;   /* to the server */
} client_t;

static void client_open(client_t *c, bool tls12, unsigned suite)
{
    c->ssl = SSL_new(cctx);
    c->in = BIO_new(BIO_s_mem());
    c->out = BIO_new(BIO_s_mem());
    CHECK(c->ssl && c->in && c->out);
    BIO_set_mem_eof_return(c->in, -1);
    BIO_set_mem_eof_return(c->out, -1);
    SSL_set_bio(c->ssl, c->in, c->out);
    if (tls12) {
        CHECK(SSL_set_max_proto_version(c->ssl, TLS1_2_VERSION) == 1);
        CHECK(SSL_set_cipher_list(c->ssl, suites12[suite & 3]) == 1);
    }
    SSL_set_connect_state(c->ssl);
}

static void client_close(client_t *c)
{
    SSL_free(c->ssl);
    ERR_clear_error();
}

/* Everything the client has written, taken out (into out, replacing it). */
static void client_out(client_t *c, bytes_t *out)
{
    out->len = 0;
    size_t n = BIO_ctrl_pending(c->out);
    if (n == 0)
        return;
    if (n > out->cap) {
        free(out->p);
        out->p = malloc(n);
        CHECK(out->p != NULL);
        out->cap = n;
    }
    CHECK(BIO_read(c->out, out->p, (int)n) == (int)n);
    out->len = n;
}

/* A handshake in memory; the server's tickets (TLS 1.3) stay unread. */
static void handshake(client_t *c, server_t *s)
{
    bytes_t b = { 0 };
    for (int round = 0; round < 10; round++) {
        ERR_clear_error();
        int r = SSL_do_handshake(c->ssl);
        CHECK(r == 1 || SSL_get_error(c->ssl, r) == SSL_ERROR_WANT_READ);
        client_out(c, &b);
        if (b.len)
            server_piece(s, (const uint8_t *)b.p, b.len);
        CHECK(s->rc == 0);
        b.len = 0;
        server_drain(s, &b);
        if (b.len)
            CHECK(BIO_write(c->in, b.p, (int)b.len) == (int)b.len);
        if (r == 1 && jrpc_tls_established(s->t))
            break;
    }
    free(b.p);
    CHECK(SSL_is_init_finished(c->ssl) && jrpc_tls_established(s->t));
    CHECK(SSL_get_verify_result(c->ssl) == X509_V_OK);
}

/* ---- the modes ---------------------------------------------------------------------------- */

static void raw(const uint8_t *data, size_t size, bool after_hello)
{
    if (size < 3)
        return;
    cutter_t cut = { seed_of(data, size), data[1] };
    server_t s = { .t = jrpc_tls_new(sctx), .cap = 1 + 64u * data[2] };
    CHECK(s.t != NULL);
    if (after_hello) {
        client_t c;
        client_open(&c, data[0] & 4, 0);
        ERR_clear_error();
        CHECK(SSL_do_handshake(c.ssl) == -1);
        bytes_t hello = { 0 };
        client_out(&c, &hello);
        server_piece(&s, (const uint8_t *)hello.p, hello.len);
        CHECK(s.rc == 0 && !jrpc_tls_established(s.t));
        server_drain(&s, NULL);
        free(hello.p);
        client_close(&c);
    }
    server_cut(&s, &cut, data + 3, size - 3);
    server_drain(&s, NULL);
    if (s.rc < 0) {   /* final: more bytes change nothing */
        server_piece(&s, data, size > 16 ? 16 : size);
        CHECK(jrpc_tls_write(s.t, "x", 1) < 0 || s.rc == JRPC_TLS_ECLOSED);
    }
    jrpc_tls_close(s.t);
    server_drain(&s, NULL);
    jrpc_tls_free(&s.t);
    CHECK(s.t == NULL);
    free(s.got.p);
}

static void session(const uint8_t *data, size_t size)
{
    static const uint64_t bodies[8] = { 0, 1, 16, 100, 1000, 4096, 16384, 65536 };
    if (size < 8)
        return;
    bool tls12 = data[0] & 4, close_notify = data[0] & 0x20, corrupt = data[0] & 0x40;
    const uint8_t *plain = data + 8;
    size_t n = size - 8;
    jrpc_http_limits_t lim = { 256u + 512u * (data[7] >> 3), bodies[data[7] & 7] };
    cutter_t cut = { seed_of(data, size), data[1] };
    feeder_t tls_fed, whole;
    feeder_init(&tls_fed, &lim);
    server_t s = { .t = jrpc_tls_new(sctx), .cap = 1 + 64u * data[2], .http = &tls_fed };
    if (s.cap < n / MAX_READS)
        s.cap = n / MAX_READS;
    CHECK(s.t != NULL);
    client_t c;
    client_open(&c, tls12, data[0] >> 3);
    handshake(&c, &s);

    /* the client's records, then its close_notify */
    size_t rec = 1 + 64u * data[3];
    if (rec < n / MAX_RECORDS + 1)
        rec = n / MAX_RECORDS + 1;
    for (size_t at = 0; at < n;) {
        size_t k = n - at < rec ? n - at : rec;
        CHECK(SSL_write(c.ssl, plain + at, (int)k) == (int)k);
        at += k;
    }
    if (close_notify)
        CHECK(SSL_shutdown(c.ssl) == 0);   /* sent; the server's not yet received */
    bytes_t ct = { 0 };
    client_out(&c, &ct);
    CHECK(ct.len >= n);
    if (corrupt && ct.len > 0) {
        size_t at = (data[4] | (size_t)data[5] << 8) % ct.len;
        ct.p[at] ^= data[6] ? (char)data[6] : (char)0x80;
    }
    server_cut(&s, &cut, (const uint8_t *)ct.p, ct.len);
    free(ct.p);

    /* the bytes: exactly the plaintext, or a prefix of it after a corruption */
    CHECK(s.got.len <= n && (s.got.len == 0 || memcmp(s.got.p, plain, s.got.len) == 0));
    if (!corrupt) {
        CHECK(s.got.len == n);
        CHECK(s.rc == (close_notify ? JRPC_TLS_ECLOSED : 0));
    } else {
        CHECK(s.rc == 0 || s.rc == JRPC_TLS_EPROTO);
        CHECK(!jrpc_tls_plain_http(s.t));
    }

    /* the reader: the same report fed the pieces TLS gave as fed them whole */
    feeder_end(&tls_fed);
    feeder_init(&whole, &lim);
    feeder_feed(&whole, s.got.p, s.got.len);
    feeder_end(&whole);
    CHECK(tls_fed.trace.len == whole.trace.len &&
          memcmp(tls_fed.trace.p, whole.trace.p, whole.trace.len) == 0);

    /* the answer (the transcript) and our close_notify reach the client */
    server_drain(&s, NULL);   /* (TLS 1.2: nothing; 1.3: nothing after the tickets) */
    if (s.rc == 0) {
        CHECK(jrpc_tls_write(s.t, whole.trace.p, whole.trace.len) == 0);
        jrpc_tls_close(s.t);
        bytes_t back = { 0 };
        server_drain(&s, &back);
        CHECK(BIO_write(c.in, back.p, (int)back.len) == (int)back.len);
        free(back.p);
        bytes_t heard = { 0 };
        char buf[16384];
        int r;
        ERR_clear_error();
        while ((r = SSL_read(c.ssl, buf, sizeof buf)) > 0)
            put(&heard, buf, (size_t)r);
        CHECK(SSL_get_error(c.ssl, r) == SSL_ERROR_ZERO_RETURN);
        CHECK(heard.len == whole.trace.len &&
              memcmp(heard.p, whole.trace.p, heard.len) == 0);
        free(heard.p);
        CHECK(jrpc_tls_write(s.t, "x", 1) < 0);   /* nothing after our close */
    }
    client_close(&c);
    jrpc_tls_free(&s.t);
    free(s.got.p);
    free(tls_fed.trace.p);
    free(whole.trace.p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > FUZZ_MAX_INPUT)
        return 0;
    switch (data[0] & 3) {
    case 0: raw(data, size, false); break;
    case 1: raw(data, size, true); break;
    default: session(data, size); break;
    }
    ERR_clear_error();
    return 0;
}

/* ---- start ----------------------------------------------------------------------------------- */

static void write_seed(const char *dir, const char *name, const uint8_t *head, size_t nhead,
                       const bytes_t *b)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    CHECK(fwrite(head, 1, nhead, f) == nhead && fwrite(b->p, 1, b->len, f) == b->len);
    CHECK(fclose(f) == 0);
}

/* Real first and second flights of a client, for modes 0 and 1. */
static void write_seeds(const char *dir)
{
    for (int v = 0; v < 2; v++) {
        client_t c;
        client_open(&c, v, 0);
        server_t s = { .t = jrpc_tls_new(sctx), .cap = 16384 };
        bytes_t hello = { 0 }, flight = { 0 }, answer = { 0 };
        ERR_clear_error();
        SSL_do_handshake(c.ssl);
        client_out(&c, &hello);
        server_piece(&s, (const uint8_t *)hello.p, hello.len);
        server_drain(&s, &answer);
        CHECK(BIO_write(c.in, answer.p, (int)answer.len) == (int)answer.len);
        ERR_clear_error();
        SSL_do_handshake(c.ssl);
        if (SSL_is_init_finished(c.ssl))   /* TLS 1.3: a request after the Finished */
            CHECK(SSL_write(c.ssl, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27) == 27);
        client_out(&c, &flight);
        write_seed(dir, v ? "hello-tls12" : "hello-tls13", (const uint8_t[]){ 0, 0x40, 0xff }, 3,
                   &hello);
        write_seed(dir, v ? "flight-tls12" : "flight-tls13",
                   (const uint8_t[]){ (uint8_t)(1 | (v ? 4 : 0)), 0x40, 0xff }, 3, &flight);
        free(hello.p);
        free(flight.p);
        free(answer.p);
        jrpc_tls_free(&s.t);
        free(s.got.p);
        client_close(&c);
    }
}

static void remove_certs(void)
{
    tls_testcert_remove(&certs);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char err[256];
    CHECK(tls_testcert_make(&certs) == 0);
    atexit(remove_certs);
    if (jrpc_tls_ctx_new(&(jrpc_tls_opts_t){ certs.server, certs.server_key, NULL }, &sctx, err,
                         sizeof err) < 0) {
        fprintf(stderr, "fuzz_tls: %s\n", err);
        abort();
    }
    cctx = SSL_CTX_new(TLS_client_method());
    CHECK(cctx != NULL);
    CHECK(SSL_CTX_load_verify_locations(cctx, certs.ca, NULL) == 1);
    SSL_CTX_set_verify(cctx, SSL_VERIFY_PEER, NULL);
    /* (the certificate files are read at load: they can go now, and a
     * crashing run leaves no folder behind) */
    remove_certs();
    const char *seeds = getenv("JRPC_FUZZ_TLS_SEEDS");
    if (seeds)
        write_seeds(seeds);
    return 0;
}
