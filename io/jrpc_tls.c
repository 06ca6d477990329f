/* jrpc_tls — TLS as a layer of bytes, over a BIO of ours (see jrpc_tls.h). */
#include "jrpc_tls.h"

#include "jrpc_buf.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The context is the SSL_CTX itself: OpenSSL counts its references (each
 * SSL holds one), which is what a reload needs. */
#define CTX(c) ((SSL_CTX *)(c))

/* The session's BIO is ours (bio_method below), not OpenSSL's memory BIO:
 * a memory BIO keeps its buffer at the largest size it ever held: an idle
 * keep-alive connection that had carried one 60 KB call held 131 KB with
 * them, 18 KB with ours (bench/tls_idle.py). Ours reads the caller's bytes
 * in place and writes
 * into a jrpc_buf that jrpc_tls_take_buf hands over whole: nothing is kept
 * between reads, and with SSL_MODE_RELEASE_BUFFERS neither are OpenSSL's
 * record buffers. */
struct jrpc_tls {
    SSL        *ssl;
    const char *in_p;      /* ciphertext not yet read by SSL (the caller's, or held) */
    size_t      in_n;
    jrpc_buf_t  held;      /* fed bytes kept across feeds when not all were read */
    jrpc_buf_t  out;       /* ciphertext to the peer */
    size_t      out_off;   /* of it, already taken by jrpc_tls_take */
    bool        failed;    /* a fatal error: no shutdown, no more writes */
    bool        plain_http;
    bool        fed;       /* bytes came (first is the first of them) */
    unsigned char first;
    char        err[96];
};

static int bio_read(BIO *b, char *buf, int len)
{
    jrpc_tls_t *t = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (t->in_n == 0) {
        BIO_set_retry_read(b);
        return -1;
    }
    size_t k = (size_t)len < t->in_n ? (size_t)len : t->in_n;
    memcpy(buf, t->in_p, k);
    t->in_p += k;
    t->in_n -= k;
    return (int)k;
}

static int bio_write(BIO *b, const char *buf, int len)
{
    jrpc_tls_t *t = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    return jrpc_buf_append(&t->out, buf, (size_t)len) < 0 ? -1 : len;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    jrpc_tls_t *t = BIO_get_data(b);
    switch (cmd) {
    case BIO_CTRL_FLUSH:    return 1;
    case BIO_CTRL_PENDING:  return (long)t->in_n;
    case BIO_CTRL_WPENDING: return (long)(t->out.len - t->out_off);
    default:                return 0;
    }
}

static int bio_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

static BIO_METHOD *bio_method(void)
{
    static BIO_METHOD *m;   /* made once; the broker is one thread */
    if (m == NULL && (m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "jrpc")) != NULL) {
        BIO_meth_set_read(m, bio_read);
        BIO_meth_set_write(m, bio_write);
        BIO_meth_set_ctrl(m, bio_ctrl);
        BIO_meth_set_create(m, bio_create);
    }
    return m;
}

/* TLS 1.2's suites: forward secrecy (ECDHE) and AEAD only, the ECDSA ones
 * first. TLS 1.3's are OpenSSL's defaults (all AEAD). */
static const char cipher_list[] =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

/* The last OpenSSL error as words (the queue is then cleared). */
static void ossl_reason(char *buf, size_t len)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    snprintf(buf, len, "%s", r ? r : (e ? "unknown OpenSSL error" : "connection failed"));
    ERR_clear_error();
}

/* ALPN: http/1.1 when the client offers it; otherwise no ALPN at all (a
 * client that offers only h2 then learns it from our HTTP/1.1 answer,
 * which is kinder than a handshake failure). */
static int on_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                   const unsigned char *in, unsigned int inlen, void *arg)
{
    static const unsigned char ours[] = "\x08http/1.1";
    unsigned char *sel;
    if (SSL_select_next_proto(&sel, outlen, ours, sizeof ours - 1, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

static int ctx_fail(SSL_CTX *c, char *err, size_t errlen, const char *what, const char *path)
{
    char why[96];
    ossl_reason(why, sizeof why);
    snprintf(err, errlen, "%s %s: %s", what, path, why);
    SSL_CTX_free(c);
    return JRPC_TLS_EFILE;
}

int jrpc_tls_ctx_new(const jrpc_tls_opts_t *o, jrpc_tls_ctx_t **out, char *err, size_t errlen)
{
    *out = NULL;
    ERR_clear_error();
    SSL_CTX *c = SSL_CTX_new(TLS_server_method());
    if (c == NULL) {
        snprintf(err, errlen, "out of memory");
        return JRPC_TLS_ENOMEM;
    }
    SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
    SSL_CTX_set_options(c, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                           SSL_OP_CIPHER_SERVER_PREFERENCE);
    /* An idle keep-alive connection then holds no record buffers. */
    SSL_CTX_set_mode(c, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_max_early_data(c, 0);
    SSL_CTX_set_session_id_context(c, (const unsigned char *)"jrpc", 4);
    SSL_CTX_set_alpn_select_cb(c, on_alpn, NULL);
    if (SSL_CTX_set_cipher_list(c, cipher_list) != 1)
        return ctx_fail(c, err, errlen, "cipher list", "(built in)");
    if (SSL_CTX_use_certificate_chain_file(c, o->cert) != 1)
        return ctx_fail(c, err, errlen, "--tls-cert", o->cert);
    if (SSL_CTX_use_PrivateKey_file(c, o->key, SSL_FILETYPE_PEM) != 1)
        return ctx_fail(c, err, errlen, "--tls-key", o->key);
    if (SSL_CTX_check_private_key(c) != 1)
        return ctx_fail(c, err, errlen, "--tls-key", o->key);
    if (o->client_ca) {
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(o->client_ca);
        if (names == NULL || SSL_CTX_load_verify_locations(c, o->client_ca, NULL) != 1) {
            sk_X509_NAME_pop_free(names, X509_NAME_free);
            return ctx_fail(c, err, errlen, "--tls-client-ca", o->client_ca);
        }
        SSL_CTX_set_client_CA_list(c, names);
        SSL_CTX_set_verify(c, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    }
    *out = (jrpc_tls_ctx_t *)c;
    return 0;
}

void jrpc_tls_ctx_free(jrpc_tls_ctx_t **self_p)
{
    if (*self_p == NULL)
        return;
    SSL_CTX_free(CTX(*self_p));
    *self_p = NULL;
}

void jrpc_tls_ctx_describe(const jrpc_tls_ctx_t *ctx, char *buf, size_t len)
{
    snprintf(buf, len, "?");
    X509 *x = SSL_CTX_get0_certificate(CTX(ctx));
    BIO *b = BIO_new(BIO_s_mem());
    if (x == NULL || b == NULL) {
        BIO_free(b);
        return;
    }
    X509_NAME_print_ex(b, X509_get_subject_name(x), 0, XN_FLAG_RFC2253);
    BIO_puts(b, "\" not_after=\"");
    ASN1_TIME_print(b, X509_get0_notAfter(x));
    int n = BIO_read(b, buf, (int)len - 1);
    buf[n > 0 ? n : 0] = '\0';
    BIO_free(b);
}

jrpc_tls_t *jrpc_tls_new(jrpc_tls_ctx_t *ctx)
{
    jrpc_tls_t *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    BIO_METHOD *m = bio_method();
    BIO *bio = m ? BIO_new(m) : NULL;
    t->ssl = bio ? SSL_new(CTX(ctx)) : NULL;
    if (t->ssl == NULL) {
        BIO_free(bio);
        free(t);
        ERR_clear_error();
        return NULL;
    }
    BIO_set_data(bio, t);
    SSL_set_bio(t->ssl, bio, bio);   /* one BIO both ways: one reference taken */
    SSL_set_accept_state(t->ssl);
    return t;
}

void jrpc_tls_free(jrpc_tls_t **self_p)
{
    jrpc_tls_t *t = *self_p;
    if (t == NULL)
        return;
    SSL_free(t->ssl);   /* frees the BIO */
    jrpc_buf_dispose(&t->held);
    jrpc_buf_dispose(&t->out);
    free(t);
    *self_p = NULL;
}

int jrpc_tls_feed(jrpc_tls_t *t, const char *p, size_t n)
{
    if (n == 0 || t->failed)
        return 0;
    if (!t->fed) {
        t->fed = true;
        t->first = (unsigned char)p[0];
    }
    if (t->in_n == 0) {   /* the usual case: read in place */
        jrpc_buf_dispose(&t->held);
        t->in_p = p;
        t->in_n = n;
        return 0;
    }
    /* Bytes of an earlier feed are still unread: keep them, then these. */
    if (t->held.p && t->in_p >= t->held.p && t->in_p < t->held.p + t->held.len) {
        memmove(t->held.p, t->in_p, t->in_n);
        t->held.len = t->in_n;
    } else {
        t->held.len = 0;
        if (jrpc_buf_append(&t->held, t->in_p, t->in_n) < 0)
            return JRPC_TLS_ENOMEM;
    }
    if (jrpc_buf_append(&t->held, p, n) < 0)
        return JRPC_TLS_ENOMEM;
    t->in_p = t->held.p;
    t->in_n = t->held.len;
    return 0;
}

/* After an SSL call returned r <= 0: 0 to wait for more bytes, or the error. */
static int verdict(jrpc_tls_t *t, int r)
{
    int e = SSL_get_error(t->ssl, r);
    switch (e) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        ERR_clear_error();
        return 0;
    case SSL_ERROR_ZERO_RETURN:
        ERR_clear_error();
        return JRPC_TLS_ECLOSED;
    default: {
        unsigned long last = ERR_peek_last_error();
        t->plain_http = ERR_GET_LIB(last) == ERR_LIB_SSL &&
                        (ERR_GET_REASON(last) == SSL_R_HTTP_REQUEST ||
                         ERR_GET_REASON(last) == SSL_R_HTTPS_PROXY_REQUEST);
        ossl_reason(t->err, sizeof t->err);
        t->failed = true;
        return JRPC_TLS_EPROTO;
    }
    }
}

ssize_t jrpc_tls_read(jrpc_tls_t *t, char *buf, size_t cap)
{
    if (t->failed)
        return JRPC_TLS_EPROTO;
    if (cap > 0x7fffffff)
        cap = 0x7fffffff;
    /* SSL_get_error needs an empty queue before the call (SSL_get_error(3)). */
    ERR_clear_error();
    int r = SSL_read(t->ssl, buf, (int)cap);
    if (r > 0)
        return r;
    int rc = verdict(t, r);
    if (rc < 0)
        t->in_n = 0;   /* closed or failed: what was fed is dropped (never read again) */
    return rc;
}

int jrpc_tls_write(jrpc_tls_t *t, const char *p, size_t n)
{
    if (t->failed || !SSL_is_init_finished(t->ssl))
        return JRPC_TLS_EPROTO;
    /* Room for the records at once: 16 KiB of plaintext each, plus their
     * header, tag and padding (well under 256 bytes). */
    if (jrpc_buf_reserve(&t->out, n + (n / 16384 + 1) * 256) < 0)
        return JRPC_TLS_ENOMEM;
    while (n > 0) {   /* our BIO takes everything: one pass per 1 GiB at most */
        int k = n > 0x40000000 ? 0x40000000 : (int)n;
        ERR_clear_error();
        int r = SSL_write(t->ssl, p, k);
        if (r <= 0) {
            int rc = verdict(t, r);
            return rc < 0 ? rc : JRPC_TLS_ENOMEM;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

void jrpc_tls_close(jrpc_tls_t *t)
{
    if (t->failed || !SSL_is_init_finished(t->ssl))
        return;
    ERR_clear_error();
    SSL_shutdown(t->ssl);
    ERR_clear_error();
}

size_t jrpc_tls_pending(const jrpc_tls_t *t)
{
    return t->out.len - t->out_off;
}

size_t jrpc_tls_take(jrpc_tls_t *t, char *buf, size_t cap)
{
    size_t n = jrpc_tls_pending(t);
    if (n > cap)
        n = cap;
    if (n == 0)
        return 0;   /* (out.p may be NULL) */
    memcpy(buf, t->out.p + t->out_off, n);
    t->out_off += n;
    if (t->out_off == t->out.len)
        t->out.len = t->out_off = 0;
    return n;
}

void jrpc_tls_take_buf(jrpc_tls_t *t, jrpc_buf_t *dst)
{
    if (t->out_off > 0) {
        memmove(t->out.p, t->out.p + t->out_off, t->out.len - t->out_off);
        t->out.len -= t->out_off;
        t->out_off = 0;
    }
    *dst = t->out;
    jrpc_buf_init(&t->out);
}

bool jrpc_tls_established(const jrpc_tls_t *t)
{
    return !t->failed && SSL_is_init_finished(t->ssl);
}

const char *jrpc_tls_error(const jrpc_tls_t *t)
{
    return t->err;
}

/* OpenSSL names GET, POST, HEAD, PUT and CONNECT; any request line starts
 * with a capital letter (a method token), which no TLS record does (their
 * first byte is a content type, 20 to 24). */
bool jrpc_tls_plain_http(const jrpc_tls_t *t)
{
    return t->plain_http || (t->failed && !SSL_is_init_finished(t->ssl) && t->fed &&
                             t->first >= 'A' && t->first <= 'Z');
}

size_t jrpc_tls_peer_name(const jrpc_tls_t *t, char *buf, size_t cap)
{
    if (cap == 0 || !jrpc_tls_established(t))
        return 0;
    buf[0] = '\0';
    X509 *x = SSL_get0_peer_certificate(t->ssl);
    if (x == NULL || SSL_get_verify_result(t->ssl) != X509_V_OK)
        return 0;
    X509_NAME *name = X509_get_subject_name(x);
    int i = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
    if (i < 0)
        return 0;
    unsigned char *u = NULL;
    int n = ASN1_STRING_to_UTF8(&u, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i)));
    size_t len = 0;
    if (n > 0 && (size_t)n < cap && memchr(u, '\0', (size_t)n) == NULL) {
        memcpy(buf, u, (size_t)n);
        buf[n] = '\0';
        len = (size_t)n;
    }
    OPENSSL_free(u);
    ERR_clear_error();
    return len;
}

void jrpc_tls_describe(const jrpc_tls_t *t, char *buf, size_t len)
{
    snprintf(buf, len, "%s %s%s", SSL_get_version(t->ssl), SSL_get_cipher_name(t->ssl),
             SSL_session_reused(t->ssl) ? " resumed" : "");
}
