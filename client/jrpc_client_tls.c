/* jrpc_client_tls — see jrpc_client_tls.h. */
#include "jrpc_client_tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include "jrpc_client_sock.h"

struct jrpc_client_tls {
    char        *host;          /* the URL's host: SNI, and the name checked */
    bool         host_is_ip;    /* an IPv4 or IPv6 literal: checked as an address, no SNI */
    char        *cacert;        /* CA file, NULL: the system store */
    char        *cert, *key;    /* client certificate and key (PEM), NULL: none */
    bool         insecure;      /* no verification at all */
    SSL_CTX     *ctx;           /* made at the first connect */
    BIO_METHOD  *bio_meth;      /* our socket BIO (see below) */
    SSL         *ssl;           /* the current connection, NULL when none */
    SSL_SESSION *session;       /* the last resumable session, NULL when none */
    int          fd;            /* the current connection's socket */
    bool         eof;           /* the socket read returned 0 */
    bool         failed;        /* the connection saw an error: no close_notify */
    bool         cert_asked;    /* the server asked for a client certificate we lack */
    char         err[384];      /* jrpc_client_tls_error */
};

/* ---- the socket BIO ----
 *
 * OpenSSL's own socket BIO writes with write(), which raises SIGPIPE when
 * the server has closed the connection: a library must not kill its host
 * program for that (the http:// transport sends with MSG_NOSIGNAL for the
 * same reason). So the SSL reads and writes the socket through this BIO:
 * send(MSG_NOSIGNAL) and recv on the non-blocking fd, "retry" on EAGAIN,
 * which SSL_get_error turns into SSL_ERROR_WANT_READ/WRITE for our poll(). */

static int sock_write(BIO *b, const char *p, int n)
{
    jrpc_client_tls_t *t = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    ssize_t r = send(t->fd, p, (size_t)n, MSG_NOSIGNAL);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        BIO_set_retry_write(b);
    return (int)r;
}

static int sock_read(BIO *b, char *p, int n)
{
    jrpc_client_tls_t *t = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    ssize_t r = recv(t->fd, p, (size_t)n, 0);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        BIO_set_retry_read(b);
    if (r == 0)
        t->eof = true;
    return (int)r;
}

static long sock_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    jrpc_client_tls_t *t = BIO_get_data(b);
    (void)num;
    (void)ptr;
    switch (cmd) {
    case BIO_CTRL_FLUSH:
        return 1;     /* nothing is buffered here */
    case BIO_CTRL_EOF:
        return t->eof;  /* how the SSL tells a closed socket from an error */
    default:
        return 0;
    }
}

static int sock_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

/* ---- errors in words ---- */

static const char *verify_words(const jrpc_client_tls_t *t, long v, char *buf, size_t n)
{
    if (v == X509_V_ERR_HOSTNAME_MISMATCH)
        snprintf(buf, n, "the server's certificate does not match host name %s", t->host);
    else if (v == X509_V_ERR_IP_ADDRESS_MISMATCH)
        snprintf(buf, n, "the server's certificate does not match IP address %s", t->host);
    else
        snprintf(buf, n, "%s", X509_verify_cert_error_string(v));
    return buf;
}

/* Sets t->err to prefix followed by the reason of OpenSSL's error queue
 * (and the verify result), with a hint where the reason alone would leave a
 * user guessing, then empties the queue. */
static void describe_ssl_error(jrpc_client_tls_t *t, const char *prefix)
{
    unsigned long e = ERR_peek_error();
    const char *what = e ? ERR_reason_error_string(e) : NULL;
    char code[128], detail[192];
    const char *hint = "";
    int reason = ERR_GET_REASON(e);

    if (what == NULL && e) {
        ERR_error_string_n(e, code, sizeof code);
        what = code;
    } else if (what == NULL) {
        what = "TLS protocol error";
    }
    long v = t->ssl ? SSL_get_verify_result(t->ssl) : X509_V_OK;
    if (ERR_GET_LIB(e) == ERR_LIB_SSL && reason == SSL_R_CERTIFICATE_VERIFY_FAILED
        && v != X509_V_OK) {
        snprintf(t->err, sizeof t->err, "%s%s (%s)", prefix, what,
                 verify_words(t, v, detail, sizeof detail));
        ERR_clear_error();
        return;
    }
    if (ERR_GET_LIB(e) == ERR_LIB_SSL && reason > SSL_AD_REASON_OFFSET) {
        /* An alert from the server: say what it most likely means. */
        int alert = reason - SSL_AD_REASON_OFFSET;
        if (alert == SSL_AD_CERTIFICATE_REQUIRED
            || (alert == SSL_AD_HANDSHAKE_FAILURE && t->cert_asked && t->cert == NULL))
            hint = " (the server requires a client certificate)";
        else if (t->cert && (alert == SSL_AD_BAD_CERTIFICATE || alert == SSL_AD_UNKNOWN_CA
                             || alert == SSL_AD_CERTIFICATE_UNKNOWN
                             || alert == SSL_AD_UNSUPPORTED_CERTIFICATE
                             || alert == SSL_AD_CERTIFICATE_EXPIRED
                             || alert == SSL_AD_CERTIFICATE_REVOKED
                             || alert == SSL_AD_ACCESS_DENIED || alert == SSL_AD_DECRYPT_ERROR))
            hint = " (the server refused our client certificate)";
    } else if (ERR_GET_LIB(e) == ERR_LIB_SSL && reason == SSL_R_WRONG_VERSION_NUMBER) {
        hint = " (is the server speaking TLS on that port?)";
    }
    snprintf(t->err, sizeof t->err, "%s%s%s", prefix, what, hint);
    ERR_clear_error();
}

/* ---- the context ---- */

/* A new session from the server (after the handshake in TLS 1.2, in a
 * ticket after it in TLS 1.3): keep the last one for the next connect. */
static int on_new_session(SSL *ssl, SSL_SESSION *sess)
{
    jrpc_client_tls_t *t = SSL_get_app_data(ssl);
    if (!SSL_SESSION_is_resumable(sess))
        return 0;
    SSL_SESSION_free(t->session);
    t->session = sess;
    return 1;   /* we hold the reference now */
}

/* The server asked for a client certificate and we have none: send none
 * (the server decides), but remember it for the error message. */
static int on_cert_request(SSL *ssl, X509 **x509, EVP_PKEY **pkey)
{
    jrpc_client_tls_t *t = SSL_get_app_data(ssl);
    (void)x509;
    (void)pkey;
    t->cert_asked = true;
    return 0;
}

/* Sets t->err to "cannot read WHAT FILE: reason" when file cannot be
 * opened, so that a typo is not reported as a TLS error. Returns 0 or -1. */
static int file_readable(jrpc_client_tls_t *t, const char *what, const char *file)
{
    FILE *f = fopen(file, "r");
    if (f == NULL) {
        snprintf(t->err, sizeof t->err, "cannot read %s %s: %s", what, file, strerror(errno));
        return -1;
    }
    fclose(f);
    return 0;
}

int jrpc_client_tls_setup(jrpc_client_tls_t *t)
{
    static const unsigned char alpn[] = "\x08http/1.1";
    SSL_CTX *ctx = NULL;
    int ok;

    if (t->ctx)
        return 0;
    t->err[0] = '\0';
    ERR_clear_error();
    if (t->bio_meth == NULL) {
        t->bio_meth = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "jrpc socket");
        if (t->bio_meth == NULL || !BIO_meth_set_write(t->bio_meth, sock_write)
            || !BIO_meth_set_read(t->bio_meth, sock_read)
            || !BIO_meth_set_ctrl(t->bio_meth, sock_ctrl)
            || !BIO_meth_set_create(t->bio_meth, sock_create)) {
            snprintf(t->err, sizeof t->err, "cannot set up TLS: out of memory");
            goto fail;
        }
    }
    if ((ctx = SSL_CTX_new(TLS_client_method())) == NULL) {
        snprintf(t->err, sizeof t->err, "cannot set up TLS: out of memory");
        goto fail;
    }
    /* TLS 1.2 at least (1.0 and 1.1 are deprecated, RFC 8996). A server
     * that closes the socket without a close_notify is common and harmless
     * here: the HTTP framing (Content-Length, chunks) tells whether the
     * answer was whole, exactly as over http://. */
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, on_new_session);
    SSL_CTX_set_client_cert_cb(ctx, on_cert_request);
    if (SSL_CTX_set_alpn_protos(ctx, alpn, sizeof alpn - 1) != 0) {   /* 0 is success */
        snprintf(t->err, sizeof t->err, "cannot set up TLS: out of memory");
        goto fail;
    }
    if (t->insecure) {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    } else {
        if (t->cacert) {
            if (file_readable(t, "CA file", t->cacert) < 0)
                goto fail;
            ok = SSL_CTX_load_verify_locations(ctx, t->cacert, NULL);
        } else {
            ok = SSL_CTX_set_default_verify_paths(ctx);
        }
        if (!ok) {
            char prefix[256];
            snprintf(prefix, sizeof prefix, "cannot load %s%s: ",
                     t->cacert ? "CA file " : "the system's CA certificates",
                     t->cacert ? t->cacert : "");
            describe_ssl_error(t, prefix);
            goto fail;
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    }
    if (t->key && t->cert == NULL) {
        snprintf(t->err, sizeof t->err, "a client key (%s) needs a client certificate", t->key);
        goto fail;
    }
    if (t->cert) {
        const char *key = t->key ? t->key : t->cert;   /* no key file: the key is in cert's */
        if (file_readable(t, "client certificate", t->cert) < 0
            || file_readable(t, "client key", key) < 0)
            goto fail;
        const char *what = "client certificate", *file = t->cert;
        ok = SSL_CTX_use_certificate_chain_file(ctx, t->cert);
        if (ok) {
            what = "client key";
            file = key;
            ok = SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM)
                 && SSL_CTX_check_private_key(ctx);
        }
        if (!ok && t->key == NULL && file == t->cert) {
            snprintf(t->err, sizeof t->err, "no private key in the client certificate file "
                     "%s (give its key file)", t->cert);
            goto fail;
        }
        if (!ok) {
            char prefix[256];
            snprintf(prefix, sizeof prefix, "cannot use %s %s: ", what, file);
            describe_ssl_error(t, prefix);
            goto fail;
        }
    }
    t->ctx = ctx;
    return 0;
fail:
    SSL_CTX_free(ctx);
    ERR_clear_error();
    return JRPC_CLIENT_ETLS;
}

/* ---- one connection ---- */

/* After an SSL call returned r <= 0: waits when OpenSSL wants the socket
 * readable or writable (returns 0: call again), else turns the failure
 * into a code (1 means the end of the stream). */
static int after_ssl_call(jrpc_client_tls_t *t, int r, int64_t deadline)
{
    int e = SSL_get_error(t->ssl, r), rc;
    switch (e) {
    case SSL_ERROR_WANT_READ:
        rc = jrpc_client_fd_wait(t->fd, POLLIN, deadline);
        break;
    case SSL_ERROR_WANT_WRITE:
        rc = jrpc_client_fd_wait(t->fd, POLLOUT, deadline);
        break;
    case SSL_ERROR_ZERO_RETURN:
        return 1;
    case SSL_ERROR_SYSCALL:
        rc = errno ? -errno : 1;   /* errno 0: the socket was closed */
        ERR_clear_error();
        break;
    default:
        describe_ssl_error(t, "");
        rc = JRPC_CLIENT_ETLS;
        break;
    }
    if (rc < 0)
        t->failed = true;
    return rc;
}

jrpc_client_tls_t *jrpc_client_tls_new(const jrpc_client_opts_t *opts, const char *host)
{
    jrpc_client_tls_t *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    unsigned char addr[sizeof(struct in6_addr)];
    t->fd = -1;
    t->host = strdup(host);
    t->host_is_ip = inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
    t->insecure = opts->insecure != 0;
    t->cacert = opts->cacert ? strdup(opts->cacert) : NULL;
    t->cert = opts->cert ? strdup(opts->cert) : NULL;
    t->key = opts->key ? strdup(opts->key) : NULL;
    if (t->host == NULL || (opts->cacert && t->cacert == NULL)
        || (opts->cert && t->cert == NULL) || (opts->key && t->key == NULL))
        jrpc_client_tls_destroy(&t);
    return t;
}

void jrpc_client_tls_destroy(jrpc_client_tls_t **self_p)
{
    jrpc_client_tls_t *t = *self_p;
    if (t == NULL)
        return;
    jrpc_client_tls_close(t, true);
    SSL_CTX_free(t->ctx);
    BIO_meth_free(t->bio_meth);
    free(t->host);
    free(t->cacert);
    free(t->cert);
    free(t->key);
    free(t);
    *self_p = NULL;
}

int jrpc_client_tls_connect(jrpc_client_tls_t *t, int fd, int64_t deadline)
{
    int rc;
    BIO *bio;

    jrpc_client_tls_close(t, false);
    t->err[0] = '\0';
    if ((rc = jrpc_client_tls_setup(t)) < 0)
        return rc;
    ERR_clear_error();
    t->fd = fd;
    t->eof = t->failed = t->cert_asked = false;
    if ((t->ssl = SSL_new(t->ctx)) == NULL || (bio = BIO_new(t->bio_meth)) == NULL) {
        snprintf(t->err, sizeof t->err, "cannot set up TLS: out of memory");
        rc = JRPC_CLIENT_ETLS;
        goto fail;
    }
    BIO_set_data(bio, t);
    SSL_set_bio(t->ssl, bio, bio);   /* the SSL owns the BIO now */
    SSL_set_app_data(t->ssl, t);
    /* SNI is for names only (RFC 6066 forbids IP literals in it). */
    if (!t->host_is_ip && !SSL_set_tlsext_host_name(t->ssl, t->host)) {
        snprintf(t->err, sizeof t->err, "cannot send %s as the server name (SNI)", t->host);
        rc = JRPC_CLIENT_ETLS;
        goto fail;
    }
    if (!t->insecure) {
        SSL_set_hostflags(t->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        bool ok = t->host_is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl), t->host)
                                : SSL_set1_host(t->ssl, t->host);
        if (!ok) {
            snprintf(t->err, sizeof t->err, "cannot check the certificate against %s", t->host);
            rc = JRPC_CLIENT_ETLS;
            goto fail;
        }
    }
    if (t->session)
        SSL_set_session(t->ssl, t->session);
    for (;;) {
        ERR_clear_error();
        errno = 0;   /* SSL_ERROR_SYSCALL with errno 0 means the socket closed */
        int r = SSL_connect(t->ssl);
        if (r == 1)
            return 0;
        if ((rc = after_ssl_call(t, r, deadline)) < 0)
            break;
        if (rc == 1) {
            snprintf(t->err, sizeof t->err, "the server closed the connection during the "
                     "handshake%s", t->cert_asked && t->cert == NULL
                     ? " (it asked for a client certificate)" : "");
            rc = JRPC_CLIENT_ETLS;
            break;
        }
    }
fail:
    /* A session the server would not take back, or that went with a failed
     * handshake, is not worth offering again. */
    SSL_SESSION_free(t->session);
    t->session = NULL;
    t->failed = true;
    jrpc_client_tls_close(t, true);
    return rc;
}

int jrpc_client_tls_write(jrpc_client_tls_t *t, const void *p, size_t n, int64_t deadline)
{
    const char *at = p;
    while (n > 0) {
        /* A write that wants a retry must be retried with the same
         * arguments: the chunk is a function of n alone. */
        int chunk = n > (size_t)INT_MAX ? INT_MAX : (int)n;
        ERR_clear_error();
        errno = 0;
        int r = SSL_write(t->ssl, at, chunk);
        if (r > 0) {
            at += r;
            n -= (size_t)r;
            continue;
        }
        int rc = after_ssl_call(t, r, deadline);
        if (rc == 1) {   /* a close_notify from the server while we write */
            t->failed = true;
            return -EPIPE;
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

ssize_t jrpc_client_tls_read(jrpc_client_tls_t *t, void *buf, size_t n, int64_t deadline)
{
    int want = n > (size_t)INT_MAX ? INT_MAX : (int)n;
    for (;;) {
        ERR_clear_error();
        errno = 0;
        int r = SSL_read(t->ssl, buf, want);
        if (r > 0)
            return r;
        int rc = after_ssl_call(t, r, deadline);
        if (rc == 1)
            return 0;
        if (rc < 0)
            return rc;
    }
}

bool jrpc_client_tls_idle_ok(jrpc_client_tls_t *t)
{
    if (t->ssl == NULL || t->failed)
        return false;
    /* A few rounds at most: each takes one record (a ticket, say). */
    for (int round = 0; round < 8; round++) {
        if (SSL_pending(t->ssl) > 0)
            return false;   /* application data nobody asked for */
        struct pollfd pfd = { .fd = t->fd, .events = POLLIN };
        if (!SSL_has_pending(t->ssl) && poll(&pfd, 1, 0) <= 0)
            return true;
        char byte;
        ERR_clear_error();
        int r = SSL_read(t->ssl, &byte, 1);
        if (r > 0 || SSL_get_error(t->ssl, r) != SSL_ERROR_WANT_READ) {
            ERR_clear_error();
            return false;   /* data, the end, an alert or an error */
        }
    }
    return false;
}

void jrpc_client_tls_close(jrpc_client_tls_t *t, bool forget_session)
{
    if (forget_session) {
        SSL_SESSION_free(t->session);
        t->session = NULL;
    }
    if (t->ssl == NULL)
        return;
    if (!t->failed && SSL_is_init_finished(t->ssl)) {
        /* One try, never a wait: the socket is closed right after. */
        ERR_clear_error();
        (void)SSL_shutdown(t->ssl);
    }
    ERR_clear_error();
    SSL_free(t->ssl);
    t->ssl = NULL;
    t->fd = -1;
}

const char *jrpc_client_tls_error(const jrpc_client_tls_t *t)
{
    return t->err;
}
