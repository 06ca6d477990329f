/* jrpc_tls: a server session driven against an in-process OpenSSL client
 * over memory BIOs (no sockets). Certificates are made at start by
 * tls_testcert (EC P-256, a CA, the server for 127.0.0.1, client alice, a
 * rogue CA's alice). What a client would notice: which versions, ciphers
 * and ALPN it gets or is refused, that plaintext arrives whole and in order
 * however the ciphertext is split, close_notify both ways, what plaintext
 * HTTP and garbage get, mutual TLS and the name it yields, the words a bad
 * file gets at load, and resumption. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "jrpc_tls.h"
#include "tls_testcert.h"

static tls_testcert_t tc;
static jrpc_tls_ctx_t *ctx;       /* the server: no client certificate asked */
static jrpc_tls_ctx_t *ctx_mtls;  /* the server with client_ca = the test CA */

/* ---- a server session and an OpenSSL client, joined in memory ---------- */

typedef struct client_opts {
    int         min_version, max_version;   /* 0: OpenSSL's defaults */
    const char *ciphers;                    /* TLS 1.2 list; NULL: default */
    const char *cert, *key;                 /* client certificate (mutual TLS) */
    const unsigned char *alpn;              /* wire format; NULL: no ALPN */
    unsigned    alpn_len;
    SSL_SESSION *session;                   /* to resume */
} client_opts_t;

typedef struct pair {
    jrpc_tls_t *srv;
    SSL_CTX    *cctx;
    SSL        *cli;
    BIO        *c_in;        /* ciphertext from the server (the client reads it) */
    BIO        *c_out;       /* ciphertext from the client */
    ssize_t     srv_rc;      /* the last jrpc_tls_read verdict (<= 0) */
    int         cli_err;     /* the client's last SSL_get_error (0: none) */
    char       *srv_got;     /* plaintext the server read */
    size_t      srv_len, srv_cap;
    char       *cli_got;     /* plaintext the client read */
    size_t      cli_len, cli_cap;
} pair_t;

static void append(char **buf, size_t *len, size_t *cap, const char *p, size_t n)
{
    if (*len + n > *cap) {
        *cap = (*len + n) * 2 + 4096;
        *buf = realloc(*buf, *cap);
        assert_non_null(*buf);
    }
    memcpy(*buf + *len, p, n);
    *len += n;
}

static void pair_open(pair_t *p, jrpc_tls_ctx_t *server, const client_opts_t *o)
{
    memset(p, 0, sizeof *p);
    p->srv = jrpc_tls_new(server);
    assert_non_null(p->srv);
    p->cctx = SSL_CTX_new(TLS_client_method());
    assert_non_null(p->cctx);
    if (o->min_version)
        assert_int_equal(SSL_CTX_set_min_proto_version(p->cctx, o->min_version), 1);
    if (o->max_version)
        assert_int_equal(SSL_CTX_set_max_proto_version(p->cctx, o->max_version), 1);
    if (o->ciphers)
        assert_int_equal(SSL_CTX_set_cipher_list(p->cctx, o->ciphers), 1);
    assert_int_equal(SSL_CTX_load_verify_locations(p->cctx, tc.ca, NULL), 1);
    SSL_CTX_set_verify(p->cctx, SSL_VERIFY_PEER, NULL);
    if (o->cert) {
        assert_int_equal(SSL_CTX_use_certificate_file(p->cctx, o->cert, SSL_FILETYPE_PEM), 1);
        assert_int_equal(SSL_CTX_use_PrivateKey_file(p->cctx, o->key, SSL_FILETYPE_PEM), 1);
    }
    if (o->alpn)
        assert_int_equal(SSL_CTX_set_alpn_protos(p->cctx, o->alpn, o->alpn_len), 0);
    p->cli = SSL_new(p->cctx);
    assert_non_null(p->cli);
    /* the server's certificate must name 127.0.0.1 (its SAN) */
    assert_int_equal(X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(p->cli), "127.0.0.1"), 1);
    if (o->session)
        assert_int_equal(SSL_set_session(p->cli, o->session), 1);
    p->c_in = BIO_new(BIO_s_mem());
    p->c_out = BIO_new(BIO_s_mem());
    assert_true(p->c_in && p->c_out);
    BIO_set_mem_eof_return(p->c_in, -1);
    BIO_set_mem_eof_return(p->c_out, -1);
    SSL_set_bio(p->cli, p->c_in, p->c_out);
    SSL_set_connect_state(p->cli);
}

static void pair_close(pair_t *p)
{
    jrpc_tls_free(&p->srv);
    assert_null(p->srv);
    SSL_free(p->cli);   /* and its BIOs */
    SSL_CTX_free(p->cctx);
    free(p->srv_got);
    free(p->cli_got);
    ERR_clear_error();
}

/* Every byte the server has for the client, taken out of the session. */
static char *server_out(pair_t *p, size_t *n)
{
    *n = jrpc_tls_pending(p->srv);
    char *b = malloc(*n ? *n : 1);
    assert_non_null(b);
    assert_int_equal(jrpc_tls_take(p->srv, b, *n), *n);
    assert_int_equal(jrpc_tls_pending(p->srv), 0);
    return b;
}

/* Ciphertext for the server, then its reads until it wants more or stops. */
static void server_in(pair_t *p, const char *c, size_t n, size_t cap)
{
    char buf[16384];
    assert_true(cap <= sizeof buf);
    assert_int_equal(jrpc_tls_feed(p->srv, c, n), 0);
    ssize_t k;
    while ((k = jrpc_tls_read(p->srv, buf, cap)) > 0) {
        assert_true((size_t)k <= cap);
        append(&p->srv_got, &p->srv_len, &p->srv_cap, buf, (size_t)k);
    }
    p->srv_rc = k;
}

/* The client's turn: its handshake, or its reads (tickets, data, alerts). */
static void client_step(pair_t *p)
{
    char buf[16384];
    ERR_clear_error();
    if (!SSL_is_init_finished(p->cli)) {
        int r = SSL_do_handshake(p->cli);
        p->cli_err = r == 1 ? 0 : SSL_get_error(p->cli, r);
        if (r != 1)
            return;
    }
    int r;
    while ((r = SSL_read(p->cli, buf, sizeof buf)) > 0)
        append(&p->cli_got, &p->cli_len, &p->cli_cap, buf, (size_t)r);
    p->cli_err = SSL_get_error(p->cli, r);
}

/* Moves bytes both ways until neither side has anything to say. */
static void pump(pair_t *p)
{
    for (int round = 0; round < 100; round++) {
        client_step(p);
        bool moved = false;
        size_t n = BIO_ctrl_pending(p->c_out);
        if (n > 0) {
            char *b = malloc(n);
            assert_non_null(b);
            assert_int_equal(BIO_read(p->c_out, b, (int)n), (int)n);
            server_in(p, b, n, 16384);
            free(b);
            moved = true;
        } else if (p->srv_rc == 0) {
            server_in(p, NULL, 0, 16384);   /* a read may still have work (tickets) */
        }
        char *s = server_out(p, &n);
        if (n > 0) {
            assert_int_equal(BIO_write(p->c_in, s, (int)n), (int)n);
            moved = true;
        }
        free(s);
        if (!moved)
            return;
    }
    fail_msg("the handshake did not settle in 100 rounds");
}

static bool both_up(const pair_t *p)
{
    return SSL_is_init_finished(p->cli) && jrpc_tls_established(p->srv);
}

static void handshake(pair_t *p, jrpc_tls_ctx_t *server, const client_opts_t *o)
{
    pair_open(p, server, o);
    pump(p);
    if (!both_up(p))
        fail_msg("handshake failed: server \"%s\", client error %d", jrpc_tls_error(p->srv),
                 p->cli_err);
    assert_int_equal(SSL_get_verify_result(p->cli), X509_V_OK);
}

/* A handshake that must fail on the server's side, with a reason. */
static void refused(const client_opts_t *o, jrpc_tls_ctx_t *server, const char *reason)
{
    pair_t p;
    pair_open(&p, server, o);
    pump(&p);
    assert_int_equal(p.srv_rc, JRPC_TLS_EPROTO);
    assert_false(jrpc_tls_established(p.srv));
    assert_false(jrpc_tls_plain_http(p.srv));
    if (strstr(jrpc_tls_error(p.srv), reason) == NULL)
        fail_msg("error \"%s\", expected it to say \"%s\"", jrpc_tls_error(p.srv), reason);
    /* final: later reads say so again, writes and peer names are refused */
    char b[16];
    assert_int_equal(jrpc_tls_read(p.srv, b, sizeof b), JRPC_TLS_EPROTO);
    assert_true(jrpc_tls_write(p.srv, "x", 1) < 0);
    assert_int_equal(jrpc_tls_peer_name(p.srv, b, sizeof b), 0);
    jrpc_tls_close(p.srv);   /* nothing after a failure */
    assert_int_equal(jrpc_tls_pending(p.srv), 0);
    assert_int_equal(p.srv_len, 0);
    pair_close(&p);
}

static const unsigned char alpn_h2_h11[] = "\x02h2\x08http/1.1";

/* ---- versions, ciphers, ALPN -------------------------------------------- */

static void tls13_handshake(void **state)
{
    (void)state;
    pair_t p;
    handshake(&p, ctx, &(client_opts_t){ .alpn = alpn_h2_h11, .alpn_len = sizeof alpn_h2_h11 - 1 });
    assert_int_equal(SSL_version(p.cli), TLS1_3_VERSION);
    const unsigned char *sel;
    unsigned len;
    SSL_get0_alpn_selected(p.cli, &sel, &len);
    assert_int_equal(len, 8);
    assert_memory_equal(sel, "http/1.1", 8);
    char d[96];
    jrpc_tls_describe(p.srv, d, sizeof d);
    assert_non_null(strstr(d, "TLSv1.3 TLS_"));
    assert_null(strstr(d, "resumed"));
    assert_string_equal(jrpc_tls_error(p.srv), "");
    assert_int_equal(jrpc_tls_peer_name(p.srv, d, sizeof d), 0);   /* no certificate asked */
    pair_close(&p);
}

/* TLS 1.2 gives an ECDHE AEAD suite, each of the three ECDSA ones ours lists. */
static void tls12_handshake(void **state)
{
    (void)state;
    static const char *const suites[] = { NULL, "ECDHE-ECDSA-AES128-GCM-SHA256",
                                          "ECDHE-ECDSA-AES256-GCM-SHA384",
                                          "ECDHE-ECDSA-CHACHA20-POLY1305" };
    for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++) {
        pair_t p;
        handshake(&p, ctx, &(client_opts_t){ .max_version = TLS1_2_VERSION, .ciphers = suites[i],
                                             .alpn = alpn_h2_h11, .alpn_len = sizeof alpn_h2_h11 - 1 });
        assert_int_equal(SSL_version(p.cli), TLS1_2_VERSION);
        const SSL_CIPHER *c = SSL_get_current_cipher(p.cli);
        assert_int_equal(SSL_CIPHER_get_kx_nid(c), NID_kx_ecdhe);
        assert_true(SSL_CIPHER_is_aead(c));
        if (suites[i])
            assert_string_equal(SSL_CIPHER_get_name(c), suites[i]);
        const unsigned char *sel;
        unsigned len;
        SSL_get0_alpn_selected(p.cli, &sel, &len);
        assert_int_equal(len, 8);
        pair_close(&p);
    }
}

/* A client that offers only h2 gets no ALPN (and HTTP/1.1 answers), not a failure. */
static void alpn_h2_only(void **state)
{
    (void)state;
    pair_t p;
    handshake(&p, ctx, &(client_opts_t){ .alpn = (const unsigned char *)"\x02h2", .alpn_len = 3 });
    const unsigned char *sel;
    unsigned len;
    SSL_get0_alpn_selected(p.cli, &sel, &len);
    assert_int_equal(len, 0);
    pair_close(&p);
}

static void old_versions_refused(void **state)
{
    (void)state;
    refused(&(client_opts_t){ .min_version = TLS1_1_VERSION, .max_version = TLS1_1_VERSION,
                              .ciphers = "DEFAULT@SECLEVEL=0" }, ctx, "unsupported protocol");
    refused(&(client_opts_t){ .min_version = TLS1_VERSION, .max_version = TLS1_VERSION,
                              .ciphers = "DEFAULT@SECLEVEL=0" }, ctx, "unsupported protocol");
}

/* CBC (with SHA-1 or SHA-2 MACs) and suites without ECDHE: no shared cipher. */
static void weak_ciphers_refused(void **state)
{
    (void)state;
    static const char *const weak[] = {
        "ECDHE-ECDSA-AES128-SHA", "ECDHE-ECDSA-AES128-SHA256", "ECDHE-ECDSA-AES256-SHA384",
        "ECDHE-RSA-AES128-SHA", "AES128-GCM-SHA256", "AES256-GCM-SHA384", "AES128-SHA256",
        "DHE-RSA-AES128-GCM-SHA256", "DHE-RSA-CHACHA20-POLY1305",
    };
    for (size_t i = 0; i < sizeof weak / sizeof weak[0]; i++)
        refused(&(client_opts_t){ .max_version = TLS1_2_VERSION, .ciphers = weak[i] }, ctx,
                "no shared cipher");
}

/* ---- plaintext both ways ------------------------------------------------ */

static uint64_t rng = 88172645463325252u;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static char *pattern(size_t n)
{
    char *b = malloc(n);
    assert_non_null(b);
    for (size_t i = 0; i < n; i++)
        b[i] = (char)(next_rand() >> 24);
    return b;
}

/* chunk sizes: 1, 7, or random from 1 to 3000 (0) */
static size_t chunk(size_t how)
{
    return how ? how : 1 + (size_t)(next_rand() % 3000);
}

static void small_round_trip(void **state)
{
    (void)state;
    pair_t p;
    handshake(&p, ctx, &(client_opts_t){ 0 });
    static const char q[] = "POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}";
    assert_int_equal(SSL_write(p.cli, q, sizeof q - 1), (int)sizeof q - 1);
    pump(&p);
    assert_int_equal(p.srv_len, sizeof q - 1);
    assert_memory_equal(p.srv_got, q, sizeof q - 1);
    assert_int_equal(p.srv_rc, 0);
    static const char a[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    assert_int_equal(jrpc_tls_write(p.srv, a, sizeof a - 1), 0);
    assert_true(jrpc_tls_pending(p.srv) > sizeof a - 1);
    pump(&p);
    assert_int_equal(p.cli_len, sizeof a - 1);
    assert_memory_equal(p.cli_got, a, sizeof a - 1);
    assert_int_equal(jrpc_tls_write(p.srv, "", 0), 0);
    assert_int_equal(jrpc_tls_pending(p.srv), 0);
    pair_close(&p);
}

#define MIB (1u << 20)

/* 1 MiB from the server (many records) reaches the client whole and in order
 * when its ciphertext arrives in 1-byte, 7-byte and random pieces. */
static void mib_to_client(void **state)
{
    (void)state;
    static const size_t hows[] = { 1, 7, 0 };
    for (size_t h = 0; h < 3; h++) {
        pair_t p;
        handshake(&p, ctx, &(client_opts_t){ 0 });
        client_step(&p);   /* TLS 1.3's tickets are read */
        p.cli_len = 0;
        char *msg = pattern(MIB);
        assert_int_equal(jrpc_tls_write(p.srv, msg, MIB), 0);
        size_t n;
        char *ct = server_out(&p, &n);
        assert_true(n > MIB + 64 * 16);   /* at least 64 records, each with its overhead */
        for (size_t at = 0; at < n;) {
            size_t k = chunk(hows[h]);
            if (k > n - at)
                k = n - at;
            assert_int_equal(BIO_write(p.c_in, ct + at, (int)k), (int)k);
            at += k;
            client_step(&p);
            assert_int_equal(p.cli_err, SSL_ERROR_WANT_READ);
        }
        assert_int_equal(p.cli_len, MIB);
        assert_memory_equal(p.cli_got, msg, MIB);
        free(ct);
        free(msg);
        pair_close(&p);
    }
}

/* 1 MiB from the client reaches jrpc_tls_read whole and in order when its
 * ciphertext is fed in 1-byte, 7-byte and random pieces, read through
 * buffers of 16384, 1000 and 1 byte (a record taken out in parts). */
static void mib_to_server(void **state)
{
    (void)state;
    static const size_t hows[] = { 1, 7, 0 };
    static const size_t caps[] = { 16384, 1000, 1 };
    for (size_t h = 0; h < 3; h++) {
        pair_t p;
        handshake(&p, ctx, &(client_opts_t){ 0 });
        char *msg = pattern(MIB);
        assert_int_equal(SSL_write(p.cli, msg, MIB), (int)MIB);
        size_t n = BIO_ctrl_pending(p.c_out);
        assert_true(n > MIB + 64 * 16);
        char *ct = malloc(n);
        assert_non_null(ct);
        assert_int_equal(BIO_read(p.c_out, ct, (int)n), (int)n);
        for (size_t at = 0; at < n;) {
            size_t k = chunk(hows[h]);
            if (k > n - at)
                k = n - at;
            /* the piece at the end of its own allocation: an over-read trips ASan */
            char *piece = malloc(k);
            assert_non_null(piece);
            memcpy(piece, ct + at, k);
            server_in(&p, piece, k, caps[h]);
            free(piece);
            at += k;
            assert_int_equal(p.srv_rc, 0);
        }
        assert_int_equal(p.srv_len, MIB);
        assert_memory_equal(p.srv_got, msg, MIB);
        free(ct);
        free(msg);
        pair_close(&p);
    }
}

/* Writing before the handshake is done is refused (nothing to encrypt with). */
static void write_before_handshake(void **state)
{
    (void)state;
    jrpc_tls_t *t = jrpc_tls_new(ctx);
    assert_non_null(t);
    assert_false(jrpc_tls_established(t));
    assert_true(jrpc_tls_write(t, "x", 1) < 0);
    assert_int_equal(jrpc_tls_pending(t), 0);
    char b[8];
    assert_int_equal(jrpc_tls_read(t, b, sizeof b), 0);   /* nothing yet: wants more */
    jrpc_tls_close(t);                                    /* not established: nothing */
    assert_int_equal(jrpc_tls_pending(t), 0);
    jrpc_tls_free(&t);
    assert_null(t);
    jrpc_tls_free(&t);   /* NULL-safe */
}

/* ---- close_notify both ways --------------------------------------------- */

static void client_close_notify(void **state)
{
    (void)state;
    for (int v = 0; v < 2; v++) {
        pair_t p;
        handshake(&p, ctx, &(client_opts_t){ .max_version = v ? TLS1_2_VERSION : 0 });
        assert_int_equal(SSL_write(p.cli, "last words", 10), 10);
        SSL_shutdown(p.cli);
        pump(&p);
        assert_int_equal(p.srv_len, 10);   /* what came before it is delivered */
        assert_memory_equal(p.srv_got, "last words", 10);
        assert_int_equal(p.srv_rc, JRPC_TLS_ECLOSED);
        char b[8];
        assert_int_equal(jrpc_tls_read(p.srv, b, sizeof b), JRPC_TLS_ECLOSED);
        pair_close(&p);
    }
}

static void server_close_notify(void **state)
{
    (void)state;
    for (int v = 0; v < 2; v++) {
        pair_t p;
        handshake(&p, ctx, &(client_opts_t){ .max_version = v ? TLS1_2_VERSION : 0 });
        assert_int_equal(jrpc_tls_write(p.srv, "bye", 3), 0);
        jrpc_tls_close(p.srv);
        pump(&p);
        assert_int_equal(p.cli_len, 3);
        assert_memory_equal(p.cli_got, "bye", 3);
        assert_int_equal(p.cli_err, SSL_ERROR_ZERO_RETURN);
        assert_true(SSL_get_shutdown(p.cli) & SSL_RECEIVED_SHUTDOWN);
        assert_true(jrpc_tls_write(p.srv, "more", 4) < 0);   /* nothing after our close */
        pair_close(&p);
    }
}

/* Two feeds with no read between them: the bytes of the first are kept by
 * the session (it reads in place otherwise), so both buffers may go before
 * the read, and the handshake goes on as if they had come in one. */
static void feeds_kept_across(void **state)
{
    (void)state;
    pair_t p;
    pair_open(&p, ctx, &(client_opts_t){ 0 });
    client_step(&p);   /* the ClientHello */
    size_t n = BIO_ctrl_pending(p.c_out);
    assert_true(n > 10);
    char *hello = malloc(n), *a = malloc(n / 2), *b = malloc(n - n / 2);
    assert_true(hello && a && b);
    assert_int_equal(BIO_read(p.c_out, hello, (int)n), (int)n);
    memcpy(a, hello, n / 2);
    memcpy(b, hello + n / 2, n - n / 2);
    memset(hello, 0, n);
    free(hello);
    assert_int_equal(jrpc_tls_feed(p.srv, a, n / 2), 0);
    assert_int_equal(jrpc_tls_feed(p.srv, b, n - n / 2), 0);
    memset(a, 0xff, n / 2);   /* (ASan: freed below; nothing may read them any more) */
    free(a);
    free(b);
    char buf[256];
    assert_int_equal(jrpc_tls_read(p.srv, buf, sizeof buf), 0);
    assert_true(jrpc_tls_pending(p.srv) > 0);   /* the ServerHello flight */
    size_t k;
    char *s2 = server_out(&p, &k);
    assert_int_equal(BIO_write(p.c_in, s2, (int)k), (int)k);
    free(s2);
    pump(&p);
    assert_true(both_up(&p));
    pair_close(&p);
}

/* ---- what is not TLS ----------------------------------------------------- */

/* Bytes to a fresh session, whole or a byte at a time: the verdict. */
static ssize_t fresh_feed(const char *in, size_t n, bool bytewise, jrpc_tls_t **out)
{
    jrpc_tls_t *t = jrpc_tls_new(ctx);
    assert_non_null(t);
    char buf[256];
    ssize_t k = 0;
    size_t step = bytewise ? 1 : n;
    for (size_t at = 0; at < n && k == 0; at += step) {
        char *piece = malloc(step);
        assert_non_null(piece);
        memcpy(piece, in + at, step);
        assert_int_equal(jrpc_tls_feed(t, piece, step), 0);
        k = jrpc_tls_read(t, buf, sizeof buf);   /* (the bytes are read in place: valid till now) */
        free(piece);
        assert_true(k <= 0);
    }
    *out = t;
    return k;
}

static void plain_http_refused(void **state)
{
    (void)state;
    static const char *const reqs[] = {
        "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}",
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        "HEAD / HTTP/1.0\r\n\r\n",
        "PUT /x HTTP/1.1\r\nHost: a\r\n\r\n",
        "CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        /* methods OpenSSL does not name: seen by their capital first letter */
        "OPTIONS /rpc HTTP/1.1\r\nHost: a\r\nOrigin: https://x\r\n\r\n",
        "DELETE /mcp HTTP/1.1\r\nHost: a\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof reqs / sizeof reqs[0]; i++)
        for (int bytewise = 0; bytewise < 2; bytewise++) {
            jrpc_tls_t *t;
            assert_int_equal(fresh_feed(reqs[i], strlen(reqs[i]), bytewise, &t), JRPC_TLS_EPROTO);
            if (!jrpc_tls_plain_http(t))
                fail_msg("\"%.8s...\" not seen as HTTP: \"%s\"", reqs[i], jrpc_tls_error(t));
            assert_false(jrpc_tls_established(t));
            assert_string_not_equal(jrpc_tls_error(t), "");
            jrpc_tls_free(&t);
        }
}

static void garbage_refused(void **state)
{
    (void)state;
    char junk[4096];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (char)(next_rand() >> 32);
    junk[0] = (char)0x9d;   /* no record type, and no SSLv2-style hello (byte 2 is not 1) */
    junk[2] = 0x55;
    /* a handshake record whose body is no ClientHello; application data
     * before any handshake; an alert; zeros */
    static const char hs_junk[] = "\x16\x03\x01\x00\x08\x01\x00\x00\x04\xde\xad\xbe\xef";
    static const char early_data[] = "\x17\x03\x03\x00\x05hello";
    static const char zeros[64] = { 0 };
    const struct { const char *p; size_t n; } cases[] = {
        { junk, sizeof junk }, { hs_junk, sizeof hs_junk - 1 },
        { early_data, sizeof early_data - 1 }, { zeros, sizeof zeros },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int bytewise = 0; bytewise < 2; bytewise++) {
            jrpc_tls_t *t;
            ssize_t k = fresh_feed(cases[i].p, cases[i].n, bytewise, &t);
            if (k != JRPC_TLS_EPROTO)
                fail_msg("case %zu (bytewise %d): %zd, not EPROTO", i, bytewise, k);
            assert_false(jrpc_tls_plain_http(t));
            assert_string_not_equal(jrpc_tls_error(t), "");
            jrpc_tls_free(&t);
        }
}

/* ---- mutual TLS ------------------------------------------------------------ */

static void mtls_alice(void **state)
{
    (void)state;
    for (int v = 0; v < 2; v++) {
        pair_t p;
        handshake(&p, ctx_mtls, &(client_opts_t){ .max_version = v ? TLS1_2_VERSION : 0,
                                                  .cert = tc.client, .key = tc.client_key });
        char name[64];
        assert_int_equal(jrpc_tls_peer_name(p.srv, name, sizeof name), 5);
        assert_string_equal(name, "alice");
        assert_int_equal(jrpc_tls_peer_name(p.srv, name, 5), 0);   /* no room for the NUL */
        assert_int_equal(jrpc_tls_peer_name(p.srv, name, 6), 5);
        pair_close(&p);
    }
}

static void mtls_refusals(void **state)
{
    (void)state;
    for (int v = 0; v < 2; v++) {
        int max = v ? TLS1_2_VERSION : 0;
        refused(&(client_opts_t){ .max_version = max }, ctx_mtls, "certificate");
        refused(&(client_opts_t){ .max_version = max, .cert = tc.rogue, .key = tc.rogue_key },
                ctx_mtls, "certificate verify failed");
    }
}

/* ---- loading --------------------------------------------------------------- */

static void ctx_bad(const jrpc_tls_opts_t *o, const char *option, const char *file)
{
    jrpc_tls_ctx_t *c = (jrpc_tls_ctx_t *)&c;   /* must be reset to NULL */
    char err[256] = "";
    assert_int_equal(jrpc_tls_ctx_new(o, &c, err, sizeof err), JRPC_TLS_EFILE);
    assert_null(c);
    char want[300];
    snprintf(want, sizeof want, "%s %s: ", option, file);
    if (strncmp(err, want, strlen(want)) != 0 || strlen(err) == strlen(want))
        fail_msg("err \"%s\", expected \"%s<why>\"", err, want);
}

static void ctx_new_errors(void **state)
{
    (void)state;
    char missing[300];
    snprintf(missing, sizeof missing, "%s/nope.pem", tc.dir);
    ctx_bad(&(jrpc_tls_opts_t){ missing, tc.server_key, NULL }, "--tls-cert", missing);
    ctx_bad(&(jrpc_tls_opts_t){ tc.server, missing, NULL }, "--tls-key", missing);
    ctx_bad(&(jrpc_tls_opts_t){ tc.server, tc.other_key, NULL }, "--tls-key", tc.other_key);
    ctx_bad(&(jrpc_tls_opts_t){ tc.server, tc.client_key, NULL }, "--tls-key", tc.client_key);
    ctx_bad(&(jrpc_tls_opts_t){ tc.server, tc.server_key, missing }, "--tls-client-ca", missing);
    ctx_bad(&(jrpc_tls_opts_t){ tc.server, tc.server_key, tc.server_key }, "--tls-client-ca",
            tc.server_key);
    ctx_bad(&(jrpc_tls_opts_t){ tc.server_key, tc.server_key, NULL }, "--tls-cert", tc.server_key);
    /* the mismatch says so */
    jrpc_tls_ctx_t *c;
    char err[256];
    assert_int_equal(jrpc_tls_ctx_new(&(jrpc_tls_opts_t){ tc.server, tc.other_key, NULL }, &c, err,
                                      sizeof err), JRPC_TLS_EFILE);
    assert_non_null(strstr(err, "mismatch"));
}

static void ctx_describe(void **state)
{
    (void)state;
    char d[256];
    jrpc_tls_ctx_describe(ctx, d, sizeof d);
    assert_non_null(strstr(d, "CN=localhost"));
    assert_non_null(strstr(d, "not_after=\""));
}

/* A reload drops the front's reference while sessions on the old context
 * go on: the context lives as long as its last session. */
static void ctx_outlived_by_sessions(void **state)
{
    (void)state;
    jrpc_tls_ctx_t *c;
    char err[256];
    assert_int_equal(jrpc_tls_ctx_new(&(jrpc_tls_opts_t){ tc.server, tc.server_key, tc.ca }, &c,
                                      err, sizeof err), 0);
    pair_t p;
    pair_open(&p, c, &(client_opts_t){ .cert = tc.client, .key = tc.client_key });
    jrpc_tls_ctx_free(&c);
    assert_null(c);
    jrpc_tls_ctx_free(&c);   /* NULL-safe */
    pump(&p);
    assert_true(both_up(&p));
    char name[16];
    assert_int_equal(jrpc_tls_peer_name(p.srv, name, sizeof name), 5);
    pair_close(&p);
}

/* ---- resumption ------------------------------------------------------------- */

static void resumption(void **state)
{
    (void)state;
    for (int v = 0; v < 2; v++) {
        client_opts_t o = { .max_version = v ? TLS1_2_VERSION : TLS1_3_VERSION,
                            .min_version = v ? TLS1_2_VERSION : TLS1_3_VERSION };
        pair_t p;
        handshake(&p, ctx, &o);
        pump(&p);   /* TLS 1.3: the tickets come after the handshake */
        assert_false(SSL_session_reused(p.cli));
        SSL_SESSION *s = SSL_get1_session(p.cli);
        assert_non_null(s);
        /* a clean close: OpenSSL spoils the session of an SSL freed without one */
        SSL_shutdown(p.cli);
        pump(&p);
        assert_int_equal(p.srv_rc, JRPC_TLS_ECLOSED);
        pair_close(&p);
        assert_true(SSL_SESSION_is_resumable(s));

        o.session = s;
        handshake(&p, ctx, &o);
        if (!SSL_session_reused(p.cli))
            fail_msg("TLS 1.%d: the session was not resumed", v ? 2 : 3);
        char d[96];
        jrpc_tls_describe(p.srv, d, sizeof d);
        assert_non_null(strstr(d, " resumed"));
        assert_int_equal(SSL_write(p.cli, "again", 5), 5);
        pump(&p);
        assert_int_equal(p.srv_len, 5);
        pair_close(&p);
        SSL_SESSION_free(s);
    }
}

/* ---- the suite ----------------------------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    if (tls_testcert_make(&tc) < 0)
        return -1;
    char err[256];
    if (jrpc_tls_ctx_new(&(jrpc_tls_opts_t){ tc.server, tc.server_key, NULL }, &ctx, err,
                         sizeof err) < 0 ||
        jrpc_tls_ctx_new(&(jrpc_tls_opts_t){ tc.server, tc.server_key, tc.ca }, &ctx_mtls, err,
                         sizeof err) < 0) {
        fprintf(stderr, "test_jrpc_tls: %s\n", err);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    jrpc_tls_ctx_free(&ctx);
    jrpc_tls_ctx_free(&ctx_mtls);
    tls_testcert_remove(&tc);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tls13_handshake),
        cmocka_unit_test(tls12_handshake),
        cmocka_unit_test(alpn_h2_only),
        cmocka_unit_test(old_versions_refused),
        cmocka_unit_test(weak_ciphers_refused),
        cmocka_unit_test(small_round_trip),
        cmocka_unit_test(mib_to_client),
        cmocka_unit_test(mib_to_server),
        cmocka_unit_test(write_before_handshake),
        cmocka_unit_test(client_close_notify),
        cmocka_unit_test(server_close_notify),
        cmocka_unit_test(feeds_kept_across),
        cmocka_unit_test(plain_http_refused),
        cmocka_unit_test(garbage_refused),
        cmocka_unit_test(mtls_alice),
        cmocka_unit_test(mtls_refusals),
        cmocka_unit_test(ctx_new_errors),
        cmocka_unit_test(resumption),
        cmocka_unit_test(ctx_describe),
        cmocka_unit_test(ctx_outlived_by_sessions),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
