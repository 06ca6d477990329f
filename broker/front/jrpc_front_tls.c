/* jrpc_front_tls — TLS under the HTTP front's bytes (docs/TLS.md): the
 * ciphertext read and decrypted for the reader, every write encrypted into
 * a write of its own, the handshake's end and failures, a client
 * certificate's key.
 *
 * Not here: the session, its BIOs and OpenSSL (io/jrpc_tls), the handshake
 * deadline (jrpc_front_timer), what the plaintext says (jrpc_front_http). */
#include "jrpc_front_http_int.h"

#include <assert.h>
#include <stdlib.h>
#include <time.h>

#include "jrpc_errors.h"
#include "jrpc_log.h"
#include "jrpc_metrics.h"

/* ---- TLS: the layer under the bytes ----------------------------------------- */

/* A write of our own for ciphertext: the caller's request w (and its
 * callback) complete when the ciphertext made from its bytes is written,
 * as uv_write would for the plaintext. */
typedef struct tblock {
    uv_write_t   req;
    uv_write_t  *user;    /* NULL: our own bytes (handshake, alerts, close_notify) */
    uv_write_cb  cb;
    jrpc_buf_t   data;    /* the ciphertext, taken whole from the session */
} tblock_t;

static void on_tls_written(uv_write_t *w, int status)
{
    tblock_t *b = (tblock_t *)w;   /* req is the first member */
    uv_write_t *user = b->user;
    uv_write_cb cb = b->cb;
    jrpc_buf_dispose(&b->data);
    free(b);
    if (cb)
        cb(user, status);
}

/* Writes the ciphertext the session has pending (all of it, in order),
 * on behalf of user/cb when not NULL. */
static int tls_flush_out(conn_t *c, uv_write_t *user, uv_write_cb cb)
{
    if (jrpc_tls_pending(c->tls) == 0 && cb == NULL)
        return 0;
    tblock_t *b = malloc(sizeof *b);
    if (b == NULL)
        return UV_ENOMEM;
    b->user = user;
    b->cb = cb;
    jrpc_tls_take_buf(c->tls, &b->data);
    if (user)
        user->handle = (uv_stream_t *)&c->tcp;   /* what the callbacks read */
    uv_buf_t ub = uv_buf_init(b->data.p, (unsigned)b->data.len);
    int rc = uv_write(&b->req, (uv_stream_t *)&c->tcp, &ub, 1, on_tls_written);
    if (rc < 0) {
        jrpc_buf_dispose(&b->data);
        free(b);
    }
    return rc;
}

/* The session's own bytes, if any (a failure closes the connection). */
void tls_send(conn_t *c)
{
    if (tls_flush_out(c, NULL, NULL) < 0 && !c->closed)
        conn_close(c);
}

/* Plaintext sockets write directly; a TLS session takes every write through
 * io_write (ENOSYS here makes the callers do so), where the plaintext is
 * encrypted at once into a block of its own: one copy, which TLS makes
 * anyway, and the caller's buffers are free as soon as it returns. */
int io_try_write(conn_t *c, const uv_buf_t *bufs, unsigned nb)
{
    if (c->tls)
        return UV_ENOSYS;
    return uv_try_write((uv_stream_t *)&c->tcp, bufs, nb);
}

int io_write(conn_t *c, uv_write_t *w, const uv_buf_t *bufs, unsigned nb, uv_write_cb cb)
{
    if (c->tls == NULL)
        return uv_write(w, (uv_stream_t *)&c->tcp, bufs, nb, cb);
    for (unsigned i = 0; i < nb; i++)
        if (bufs[i].len > 0 && jrpc_tls_write(c->tls, bufs[i].base, bufs[i].len) < 0)
            return UV_EPROTO;
    return tls_flush_out(c, w, cb);
}

/* The handshake failed (or a record was bad): OpenSSL's alert goes out,
 * then a FIN. A plaintext HTTP request gets a plaintext 400 that says why,
 * which is what a person who typed http:// needs to read. */
static void tls_fail(conn_t *c)
{
    jrpc_front_http_t *f = c->front;
    bool plain = jrpc_tls_plain_http(c->tls) && !jrpc_tls_established(c->tls);
    jrpc_metrics.tls_failed++;
    JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=tls_failed reason=\"%s\" peer=%.*s",
             jrpc_tls_error(c->tls), (int)c->peer_len, c->peer);
    if (plain) {
        jrpc_buf_reset(&f->err);
        jrpc_batch_write_error(&f->err, JRPC_INVALID_REQUEST, "this port speaks HTTPS: use https://");
        char head[JRPC_HTTP_HEAD_MAX];
        jrpc_http_resp_t h = {
            .status = 400, .date = jrpc_http_date(&f->date, time(NULL)),
            .content_type = "application/json", .content_length = f->err.len,
            .connection = JRPC_HTTP_CONN_CLOSE,
        };
        int n = jrpc_http_response_head(head, sizeof head, &h);
        assert(n > 0);
        uv_buf_t b[2] = { uv_buf_init(head, (unsigned)n), uv_buf_init(f->err.p, (unsigned)f->err.len) };
        (void)uv_try_write((uv_stream_t *)&c->tcp, b, 2);   /* a few bytes to an empty socket */
    } else {
        tls_send(c);   /* the alert */
    }
    if (!c->closed)
        conn_finish(c);
}

/* The handshake is done: HTTP begins, under the idle deadline; a verified
 * client certificate's name is kept (cert_key_id looks it up per body). */
static void tls_ready(conn_t *c)
{
    char what[96];
    jrpc_metrics.tls_handshakes++;
    jrpc_tls_describe(c->tls, what, sizeof what);
    c->cert_len = (uint8_t)jrpc_tls_peer_name(c->tls, c->cert, sizeof c->cert);
    JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=tls_established tls=\"%s\" cert=\"%.*s\" peer=%.*s",
             what, (int)c->cert_len, c->cert, (int)c->peer_len, c->peer);
    arm(c, T_IDLE);
}

/* Ciphertext from the socket: every record it completes is decrypted and
 * handed to plain_in (all of one read, so nothing waits inside OpenSSL for
 * a read that will not come), then the session's own bytes go out. */
void tls_in(conn_t *c, const char *p, size_t n)
{
    jrpc_front_http_t *f = c->front;
    if (c->finishing)
        return;   /* lingering: drop */
    bool was = jrpc_tls_established(c->tls);
    if (jrpc_tls_feed(c->tls, p, n) < 0) {
        conn_close(c);
        return;
    }
    ssize_t k;
    /* (p, in f->rbuf, is read in place until jrpc_tls_read says 0) */
    while ((k = jrpc_tls_read(c->tls, f->pbuf, READ_BUF)) > 0) {
        if (!was) {
            was = true;
            tls_ready(c);
        }
        plain_in(c, f->pbuf, (size_t)k);
        if (c->closed || c->finishing)
            return;
    }
    if (!was && jrpc_tls_established(c->tls))
        tls_ready(c);
    if (k == JRPC_TLS_EPROTO) {
        tls_fail(c);
        return;
    }
    if (k == JRPC_TLS_ECLOSED) {   /* close_notify: as a FIN */
        if (c->nreq > 0)
            JRPC_LOG(JRPC_LOG_DEBUG, COMP, "event=client_gone pending=%u error=close_notify",
                     c->nreq);
        conn_close(c);
        return;
    }
    tls_send(c);
}

/* The key a verified client certificate names (mutual TLS): its id when
 * the key file in force has it, asked per body so that a reload's
 * revocation holds for open connections; empty: none, and the body is
 * checked as any other. */
jrpc_span_t cert_key_id(const conn_t *c)
{
    jrpc_span_t id = { c->cert, c->cert_len };
    if (c->cert_len == 0 || !jrpc_broker_has_key(c->front->broker, id))
        return (jrpc_span_t){ NULL, 0 };
    return id;
}
