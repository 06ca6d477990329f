/* jrpc_client — libjrpc-client's generic part: the transport chosen from
 * the URL scheme (the one place a scheme is looked at), the list of brokers
 * (names resolved) and the failover between them (the rules in
 * jrpc_client_failover), options, signing, and the public API around the
 * transport's call. The transports are jrpc_client_zmq.c and
 * jrpc_client_http.c behind jrpc_client_transport.h. */
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
#include <netdb.h>
#include <sys/socket.h>
#include "jrpc_client_failover.h"
#include "jrpc_client_transport.h"
#include "jrpc_dns.h"
#include "jrpc_header.h"
#include "jrpc_sign.h"

/* One broker of the client's list: a URL as given, or one address of a
 * dns+tcp:// name. */
typedef struct broker {
    const jrpc_client_transport_t *t;  /* chosen by the URL scheme */
    void      *state;        /* the transport's own */
    char      *url;          /* its own URL (owned; the transport borrows it) */
} broker_t;

struct jrpc_client {
    broker_t  *b;            /* the brokers, nb of them (1..JRPC_FAILOVER_MAX) */
    size_t     nb;
    int64_t   *failed_at;    /* per broker: when it last failed (ms), 0: never */
    size_t     next;         /* the broker tried first for the next body */
    size_t     last;         /* the broker of the last attempt */
    int        retry;        /* JRPC_CLIENT_RETRY_* */
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

static const struct scheme *scheme_of(const char *url)
{
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
        if (strncmp(url, schemes[i].prefix, strlen(schemes[i].prefix)) == 0)
            return &schemes[i];
    return NULL;
}

/* Opens one broker at the end of c's list. Returns 0, -EINVAL (unknown
 * scheme, malformed URL, too many brokers), -EPROTONOSUPPORT or -ENOMEM. */
static int add_broker(jrpc_client_t *c, const char *url, const jrpc_client_opts_t *opts)
{
    const struct scheme *s = scheme_of(url);
    if (s == NULL || c->nb == JRPC_FAILOVER_MAX)
        return -EINVAL;
    if (s->t == NULL)
        return -EPROTONOSUPPORT;
    broker_t *b = &c->b[c->nb];
    if ((b->url = strdup(url)) == NULL)
        return -ENOMEM;
    int rc = s->t->open(c, b->url, opts, &b->state);
    if (rc < 0) {
        free(b->url);
        return rc;
    }
    b->t = s->t;
    c->nb++;
    return 0;
}

/* Adds every address NAME resolves to (A and AAAA, sorted, as workers do:
 * io/jrpc_dns) as a tcp:// broker. Blocks on the resolver. */
static int add_name(jrpc_client_t *c, const char *url, const jrpc_client_opts_t *opts)
{
    jrpc_dns_name_t name;
    if (jrpc_dns_parse(url, &name) < 0)
        return -EINVAL;
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai = NULL;
    if (getaddrinfo(name.host, NULL, &hints, &ai) != 0)
        return JRPC_CLIENT_ENONAME;
    char eps[JRPC_DNS_ADDRS_MAX][JRPC_DNS_EP_MAX];
    size_t n = jrpc_dns_endpoints(ai, name.port, eps, JRPC_DNS_ADDRS_MAX, NULL);
    freeaddrinfo(ai);
    if (n == 0)
        return JRPC_CLIENT_ENONAME;
    for (size_t i = 0; i < n; i++) {
        int rc = add_broker(c, eps[i], opts);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static void close_brokers(jrpc_client_t *c)
{
    for (size_t i = 0; i < c->nb; i++) {
        c->b[i].t->close(c->b[i].state);
        free(c->b[i].url);
    }
    c->nb = 0;
}

jrpc_client_t *jrpc_client_new(const char *url, const jrpc_client_opts_t *opts)
{
    static const jrpc_client_opts_t defaults;
    int rc = -EINVAL;
    jrpc_client_t *c = NULL;
    char *list = NULL, *urls[JRPC_FAILOVER_MAX];

    if (url == NULL)
        goto out;
    if (opts == NULL)
        opts = &defaults;
    if (opts->retry != JRPC_CLIENT_RETRY_NONE && opts->retry != JRPC_CLIENT_RETRY_SAFE)
        goto out;
    rc = -ENOMEM;
    if ((c = calloc(1, sizeof *c)) == NULL || (c->url = strdup(url)) == NULL ||
        (list = strdup(url)) == NULL ||
        (c->b = calloc(JRPC_FAILOVER_MAX, sizeof *c->b)) == NULL ||
        (c->failed_at = calloc(JRPC_FAILOVER_MAX, sizeof *c->failed_at)) == NULL)
        goto out;
    c->timeout_ms = opts->timeout_ms > 0 ? opts->timeout_ms : JRPC_CLIENT_DEFAULT_TIMEOUT_MS;
    c->clock_offset_s = opts->clock_offset_s;
    c->retry = opts->retry;
    c->ask_timing = opts->server_timing;
    int n = jrpc_failover_split(list, urls, JRPC_FAILOVER_MAX);
    if ((rc = n) < 0)
        goto out;
    for (int i = 0; i < n; i++) {
        rc = jrpc_dns_is_name(urls[i]) ? add_name(c, urls[i], opts) : add_broker(c, urls[i], opts);
        if (rc < 0)
            goto out;
    }
    rc = 0;
out:
    free(list);
    if (rc < 0) {
        if (c) {
            close_brokers(c);
            free(c->b);
            free(c->failed_at);
            free(c->url);
        }
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
    close_brokers(c);
    forget_key(c);
    free(c->b);
    free(c->failed_at);
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
    for (size_t i = 0; i < c->nb; i++)
        if (c->b[i].t->set_curve == NULL)
            return -ENOTSUP;
    for (size_t i = 0; i < c->nb; i++) {
        int rc = c->b[i].t->set_curve(c->b[i].state, public_z85, secret_z85, server_public_z85);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int jrpc_client_disconnect(jrpc_client_t *c, unsigned flags)
{
    assert(c != NULL);
    int rc = -ENOTSUP;
    for (size_t i = 0; i < c->nb; i++)
        if (c->b[i].t->disconnect) {
            c->b[i].t->disconnect(c->b[i].state, (flags & JRPC_CLIENT_FORGET_SESSION) != 0);
            rc = 0;
        }
    return rc;
}

/* A streamed call's answers counted on their way to the caller: once one
 * was handed over, the body is never sent again. */
typedef struct counted {
    jrpc_client_answer_fn fn;
    void    *arg;
    unsigned n;
} counted_t;

static void count_answer(void *arg, uint32_t pos, const char *json, size_t len)
{
    counted_t *k = arg;
    k->n++;
    k->fn(k->arg, pos, json, len);
}

/* One attempt at broker i: signed anew (a fresh nonce) when c has a key. */
static int attempt(jrpc_client_t *c, size_t i, const jrpc_header_t *hdr, const char *body,
                   size_t len, jrpc_buf_t *reply, int timeout_ms, jrpc_client_answer_fn fn,
                   void *arg, bool *sent)
{
    int rc;
    broker_t *b = &c->b[i];
    bool once = c->nb > 1;
    c->err[0] = '\0';
    c->http_status = 0;
    c->last = i;
    reply->len = 0;
    *sent = false;
    if (c->key_id) {
        jrpc_header_t signed_hdr;
        char nonce[NONCE_LEN + 1], sig[JRPC_SIGN_HEX_LEN + 1];
        rc = sign_body(c, hdr, body, len, &signed_hdr, nonce, sig);
        if (rc == 0)
            rc = b->t->call(b->state, &signed_hdr, body, len, reply, timeout_ms,
                            &c->http_status, fn, arg, once, sent);
    } else {
        rc = b->t->call(b->state, hdr, body, len, reply, timeout_ms, &c->http_status, fn, arg,
                        once, sent);
    }
    if (rc < 0)
        reply->len = 0;   /* never a partial reply */
    return rc;
}

#define IDEM_LEN 32   /* 192 random bits, from the nonce alphabet */

/* The body through c's brokers, by the rules of the header's "Several
 * brokers": the next in turn first, those that failed lately last. */
static int failover(jrpc_client_t *c, const jrpc_header_t *hdr, bool retryable,
                    const char *body, size_t len, jrpc_buf_t *reply, int timeout_ms,
                    jrpc_client_answer_fn fn, void *arg)
{
    size_t order[JRPC_FAILOVER_MAX];
    char why[sizeof c->err] = "";
    const char *lost = NULL;   /* the broker that took the body and died */
    counted_t k = { fn, arg, 0 };
    int rc = -ETIMEDOUT;
    int64_t t0 = jrpc_client_now_ms(), deadline = t0 + timeout_ms;
    bool keyed = hdr && hdr->idem_key.n > 0;

    jrpc_failover_order(c->nb, c->next, c->failed_at, t0, order);
    c->next = (c->next + 1) % c->nb;
    for (size_t j = 0; j < c->nb; j++) {
        size_t i = order[j];
        int64_t now = jrpc_client_now_ms();
        int ask = (int)(deadline - now);
        jrpc_header_t h;
        const jrpc_header_t *hp = hdr;
        if (lost && !retryable) {
            /* The resend's deadline ends before the lost run's claim on the
             * key could: a later one could take the key over and run the
             * body a second time. */
            if ((ask = jrpc_failover_resend_ms(timeout_ms, t0, now)) == 0) {
                strncat(why, "; too late to send it again before the first run's claim on "
                        "its key could end", sizeof why - strlen(why) - 1);
                break;
            }
            assert(hdr != NULL);   /* lost, not retryable: it was sent with a key */
            h = *hdr;
            if (h.timeout_ms == 0 || h.timeout_ms > (uint32_t)ask)
                h.timeout_ms = (uint32_t)ask;
            hp = &h;
        } else if (ask <= 0) {
            break;
        }
        bool sent;
        rc = attempt(c, i, hp, body, len, reply, ask, fn ? count_answer : NULL, &k, &sent);
        if (rc == 0 && lost && !retryable && jrpc_failover_still_running(reply->p, reply->len)) {
            reply->len = 0;
            jrpc_client_errf(c, "the broker at %s took the body and was lost, and its run still "
                             "holds the idempotency key: the call may or may not have run (not "
                             "run again)", lost);
            return JRPC_CLIENT_EMAYHAVERUN;
        }
        if (rc == 0)
            return 0;
        jrpc_failover_next_t d = jrpc_failover_decide(rc, sent,
                                                      (retryable || keyed) && k.n == 0);
        if (d == JRPC_FAILOVER_STOP)
            return rc;
        c->failed_at[i] = jrpc_client_now_ms() | 1;   /* never 0 */
        snprintf(why, sizeof why, "%s", c->err);
        if (d == JRPC_FAILOVER_MAY_HAVE_RUN) {
            jrpc_client_errf(c, "%s: the call may or may not have run (the broker took the body "
                             "and gave no answer; not sent again: it has no idempotency key "
                             "and is not marked retryable)", why);
            return JRPC_CLIENT_EMAYHAVERUN;
        }
        if (d == JRPC_FAILOVER_RESEND && lost == NULL)
            lost = c->b[i].url;
    }
    if (lost) {
        jrpc_client_errf(c, "no broker answered; the call may or may not have run (first "
                         "taken by %s): %s", lost, why);
        return JRPC_CLIENT_EMAYHAVERUN;
    }
    jrpc_client_errf(c, "no broker reached, the body was not sent: %s", why);
    return rc;
}

static int send_body(jrpc_client_t *c, const char *body, size_t len,
                     const jrpc_client_header_t *ch, jrpc_buf_t *reply, int timeout_ms,
                     jrpc_client_answer_fn fn, void *arg)
{
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
    bool retryable = ch && ch->retryable;
    if (c->nb == 1 && c->retry == JRPC_CLIENT_RETRY_NONE) {   /* as before issue 34 */
        bool sent;
        return attempt(c, 0, hdr, body, len, reply, timeout_ms, fn, arg, &sent);
    }
    char idem[IDEM_LEN + 1];
    if (c->retry == JRPC_CLIENT_RETRY_SAFE && !retryable && fn == NULL &&
        (hdr == NULL || hdr->idem_key.n == 0)) {
        if (hdr == NULL) {
            wh = (jrpc_header_t){ 0 };
            hdr = &wh;
        }
        if (jrpc_sign_new_nonce(idem, IDEM_LEN) < 0) {
            jrpc_client_errf(c, "cannot make an idempotency key: no random bytes");
            return -EIO;
        }
        wh.idem_key = (jrpc_span_t){ idem, IDEM_LEN };
    }
    return failover(c, hdr, retryable, body, len, reply, timeout_ms, fn, arg);
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

size_t jrpc_client_brokers(const jrpc_client_t *c)
{
    return c->nb;
}

const char *jrpc_client_broker_url(const jrpc_client_t *c, size_t i)
{
    return i < c->nb ? c->b[i].url : NULL;
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
                                  "http://HOST[:PORT][/PATH], https://HOST[:PORT][/PATH] or "
                                  "dns+tcp://NAME:PORT, or several separated by commas)";
    case -EPROTONOSUPPORT: return "this URL scheme is not supported yet";
    case JRPC_CLIENT_ETLS: return "TLS failed (certificate, host name, handshake "
                                  "or certificate files)";
    case JRPC_CLIENT_EHTTP: return "the server answered with an HTTP error status "
                                   "and no JSON-RPC answer";
    case JRPC_CLIENT_EMAYHAVERUN: return "the broker took the call and was lost before "
                                         "answering: the call may or may not have run";
    case JRPC_CLIENT_ENONAME: return "the dns+tcp:// name resolves to no address";
    case -EMSGSIZE:        return "answer too large";
    case -ETIMEDOUT:       return "no answer in time (is the broker running?)";
    case -EPROTO:          return "malformed reply from the broker";
    case -ECONNRESET:      return "the connection was closed before the whole answer came";
    case -EINTR:           return "interrupted";
    case -ENOMEM:          return "out of memory";
    default:               return rc < 0 ? strerror(-rc) : "unknown error";
    }
}
