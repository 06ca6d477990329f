/* jrpc_client — libjrpc-client's generic part: the transport chosen from
 * the URL scheme (the one place a scheme is looked at), options, signing,
 * and the public API around the transport's call. The transports are
 * jrpc_client_zmq.c and jrpc_client_http.c behind jrpc_client_transport.h. */
#include "jrpc_client.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "jrpc_client_transport.h"
#include "jrpc_header.h"
#include "jrpc_sign.h"

struct jrpc_client {
    const jrpc_client_transport_t *t;  /* chosen by the URL scheme */
    void      *state;        /* the transport's own */
    char      *url;          /* as given */
    int        timeout_ms;   /* default for jrpc_client_send */
    char      *key_id;       /* signing key id, NULL: requests go unsigned */
    jrpc_sign_key_t *hmac;   /* its secret keyed once (wiped on change) */
    jrpc_signer_t   *signer; /* SHA-256 fetched once, its context reused */
    int64_t    clock_offset_s; /* added to time(NULL) for the signing timestamp */
    int        http_status;  /* status of the last answer, 0 if none */
    bool       ask_timing;   /* opts.server_timing */
    size_t     timing_len;   /* bytes in timing */
    char       timing[JRPC_CLIENT_TIMING_MAX]; /* jrpc_client_server_timing, NUL-terminated */
    char       err[512];     /* jrpc_client_last_error */
};

/* The schemes, and the transport of each: NULL for a scheme known but not
 * implemented yet. */
static const struct scheme {
    const char                    *prefix;  /* with "://" */
    const jrpc_client_transport_t *t;
} schemes[] = {
    { "tcp://",   &jrpc_client_zmq },
    { "ipc://",   &jrpc_client_zmq },
    { "http://",  &jrpc_client_http },
    { "https://", &jrpc_client_http },
};

void jrpc_client_add_timing(jrpc_client_t *c, const char *p, size_t n)
{
    size_t room = sizeof c->timing - 1 - c->timing_len;
    if (c->timing_len && room >= 2) {
        memcpy(c->timing + c->timing_len, ", ", 2);
        c->timing_len += 2;
        room -= 2;
    }
    if (n > room)
        n = room;
    memcpy(c->timing + c->timing_len, p, n);
    c->timing_len += n;
    c->timing[c->timing_len] = '\0';
}

void jrpc_client_errf(jrpc_client_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
}

/* ---- signing ---- */

#define NONCE_LEN 22   /* 132 random bits */

static void forget_key(jrpc_client_t *c)
{
    jrpc_sign_key_destroy(&c->hmac);
    jrpc_signer_destroy(&c->signer);
    free(c->key_id);
    c->key_id = NULL;
}

/* Non-empty, printable ASCII without spaces: fits a header line and the
 * newline-separated string that is signed. */
static bool key_id_ok(const char *s)
{
    if (*s == '\0')
        return false;
    for (; *s; s++)
        if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
            return false;
    return true;
}

/* Copies hdr (or nothing) into out and sets its four signing fields for
 * body; the spans point into nonce[] and sig[]. Returns 0 or -EINVAL / -EIO
 * with the message set. */
static int sign_body(jrpc_client_t *c, const jrpc_header_t *hdr, const char *body,
                     size_t len, jrpc_header_t *out, char nonce[NONCE_LEN + 1],
                     char sig[JRPC_SIGN_HEX_LEN + 1])
{
    int rc;
    *out = hdr ? *hdr : (jrpc_header_t){ 0 };
    out->key = (jrpc_span_t){ c->key_id, strlen(c->key_id) };
    out->timestamp = (int64_t)time(NULL) + c->clock_offset_s;
    if ((rc = jrpc_signer_new_nonce(c->signer, nonce, NONCE_LEN)) < 0) {
        jrpc_client_errf(c, "cannot sign the request: no random bytes for a nonce");
        return rc;
    }
    out->nonce = (jrpc_span_t){ nonce, NONCE_LEN };
    rc = jrpc_signer_compute(c->signer, c->hmac, sig, out->key, out->timestamp, out->nonce, body,
                             len);
    if (rc < 0) {
        jrpc_client_errf(c, "cannot sign the request: %s", rc == -ENOMEM ? "out of memory"
                : "bad timestamp (is the clock offset sensible?)");
        return rc;
    }
    out->signature = (jrpc_span_t){ sig, JRPC_SIGN_HEX_LEN };
    return 0;
}

/* ---- public API ---- */

jrpc_client_t *jrpc_client_new(const char *url, const jrpc_client_opts_t *opts)
{
    int rc = -EINVAL;
    jrpc_client_t *c = NULL;
    const struct scheme *s = NULL;

    if (url == NULL)
        goto out;
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
        if (strncmp(url, schemes[i].prefix, strlen(schemes[i].prefix)) == 0)
            s = &schemes[i];
    if (s == NULL)
        goto out;
    if (s->t == NULL) {
        rc = -EPROTONOSUPPORT;
        goto out;
    }
    rc = -ENOMEM;
    if ((c = calloc(1, sizeof *c)) == NULL)
        goto out;
    if ((c->url = strdup(url)) == NULL)
        goto out;
    c->timeout_ms = opts && opts->timeout_ms > 0 ? opts->timeout_ms
                                                 : JRPC_CLIENT_DEFAULT_TIMEOUT_MS;
    c->clock_offset_s = opts ? opts->clock_offset_s : 0;
    c->ask_timing = opts && opts->server_timing;
    static const jrpc_client_opts_t defaults;
    if ((rc = s->t->open(c, c->url, opts ? opts : &defaults, &c->state)) < 0)
        goto out;
    c->t = s->t;
    rc = 0;
out:
    if (rc < 0) {
        if (c)
            free(c->url);
        free(c);
        errno = -rc;
        return NULL;
    }
    return c;
}

void jrpc_client_destroy(jrpc_client_t **self_p)
{
    jrpc_client_t *c = *self_p;
    if (c == NULL)
        return;
    c->t->close(c->state);
    forget_key(c);
    free(c->url);
    free(c);
    *self_p = NULL;
}

int jrpc_client_set_key(jrpc_client_t *c, const char *key_id, const char *secret)
{
    assert(c != NULL);
    if (key_id == NULL && secret == NULL) {
        forget_key(c);
        return 0;
    }
    if (key_id == NULL || secret == NULL || !key_id_ok(key_id) || secret[0] == '\0')
        return -EINVAL;
    forget_key(c);
    c->key_id = strdup(key_id);
    c->hmac = jrpc_sign_key_new((jrpc_span_t){ secret, strlen(secret) });
    c->signer = jrpc_signer_new();
    if (c->key_id == NULL || c->hmac == NULL || c->signer == NULL) {
        forget_key(c);
        return -ENOMEM;
    }
    return 0;
}

int jrpc_client_set_curve(jrpc_client_t *c, const char *public_z85, const char *secret_z85,
                          const char *server_public_z85)
{
    assert(c != NULL);
    bool off = !public_z85 && !secret_z85 && !server_public_z85;
    if (!off && (!public_z85 || !secret_z85 || !server_public_z85))
        return -EINVAL;
    if (c->t->set_curve == NULL)
        return -ENOTSUP;
    return c->t->set_curve(c->state, public_z85, secret_z85, server_public_z85);
}

int jrpc_client_disconnect(jrpc_client_t *c, unsigned flags)
{
    assert(c != NULL);
    if (c->t->disconnect == NULL)
        return -ENOTSUP;
    c->t->disconnect(c->state, (flags & JRPC_CLIENT_FORGET_SESSION) != 0);
    return 0;
}

static int send_body(jrpc_client_t *c, const char *body, size_t len,
                     const jrpc_client_header_t *ch, jrpc_buf_t *reply, int timeout_ms,
                     jrpc_client_answer_fn fn, void *arg)
{
    int rc;
    assert(c != NULL && reply != NULL && (body != NULL || len == 0));
    /* The public header struct is the header frame codec's, field for
     * field: the codec (proto/jrpc_header.h) stays out of the installed API. */
    jrpc_header_t wh, *hdr = NULL;
    if (ch) {
        wh = (jrpc_header_t){ .key = ch->key, .timestamp = ch->timestamp,
                              .nonce = ch->nonce, .signature = ch->signature,
                              .timeout_ms = ch->timeout_ms, .traceparent = ch->traceparent,
                              .idem_key = ch->idem_key };
        hdr = &wh;
    }
    if (c->ask_timing) {
        if (hdr == NULL)
            wh = (jrpc_header_t){ 0 };
        wh.timing = true;
        hdr = &wh;
    }
    c->timing_len = 0;
    c->timing[0] = '\0';
    c->err[0] = '\0';
    c->http_status = 0;
    reply->len = 0;
    if (timeout_ms < 0)
        timeout_ms = c->timeout_ms;
    if (c->key_id) {
        jrpc_header_t signed_hdr;
        char nonce[NONCE_LEN + 1], sig[JRPC_SIGN_HEX_LEN + 1];
        rc = sign_body(c, hdr, body, len, &signed_hdr, nonce, sig);
        if (rc == 0)
            rc = c->t->call(c->state, &signed_hdr, body, len, reply, timeout_ms,
                            &c->http_status, fn, arg);
    } else {
        rc = c->t->call(c->state, hdr, body, len, reply, timeout_ms, &c->http_status, fn, arg);
    }
    if (rc < 0)
        reply->len = 0;   /* never a partial reply */
    return rc;
}

int jrpc_client_send(jrpc_client_t *c, const char *body, size_t len,
                     const jrpc_client_header_t *hdr, jrpc_buf_t *reply, int timeout_ms)
{
    return send_body(c, body, len, hdr, reply, timeout_ms, NULL, NULL);
}

int jrpc_client_send_stream(jrpc_client_t *c, const char *body, size_t len,
                            const jrpc_client_header_t *hdr, jrpc_client_answer_fn fn,
                            void *arg, jrpc_buf_t *end, int timeout_ms)
{
    assert(fn != NULL);
    return send_body(c, body, len, hdr, end, timeout_ms, fn, arg);
}

const char *jrpc_client_url(const jrpc_client_t *c)
{
    return c->url;
}

const char *jrpc_client_server_timing(const jrpc_client_t *c)
{
    return c->timing;
}

int jrpc_client_http_status(const jrpc_client_t *c)
{
    return c->http_status;
}

const char *jrpc_client_last_error(const jrpc_client_t *c)
{
    return c->err;
}

const char *jrpc_client_strerror(int rc)
{
    switch (rc) {
    case 0:                return "success";
    case -EINVAL:          return "invalid URL (expected tcp://HOST:PORT, ipc://PATH, "
                                  "http://HOST[:PORT][/PATH] or https://HOST[:PORT][/PATH])";
    case -EPROTONOSUPPORT: return "this URL scheme is not supported yet";
    case JRPC_CLIENT_ETLS: return "TLS failed (certificate, host name, handshake "
                                  "or certificate files)";
    case JRPC_CLIENT_EHTTP: return "the server answered with an HTTP error status "
                                   "and no JSON-RPC answer";
    case -EMSGSIZE:        return "answer too large";
    case -ETIMEDOUT:       return "no answer in time (is the broker running?)";
    case -EPROTO:          return "malformed reply from the broker";
    case -ECONNRESET:      return "the connection was closed before the whole answer came";
    case -EINTR:           return "interrupted";
    case -ENOMEM:          return "out of memory";
    default:               return rc < 0 ? strerror(-rc) : "unknown error";
    }
}
