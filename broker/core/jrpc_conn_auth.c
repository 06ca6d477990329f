/* jrpc_conn_auth — a connection authenticated once (jrpc_broker_authenticate).
 *
 * A WebSocket upgrade signed like a body: its signature checked and its
 * nonce claimed, then the connection's bodies carry its key id. Here: the
 * check, the claim and its answer, the refusal of a connection, the key
 * lookups the fronts ask for. Not here: the upgrade (front/jrpc_front_ws),
 * a body's admission (jrpc_admit.c). */
#include "jrpc_broker_int.h"
#include "jrpc_status_page.h"

/* ---- connections: jrpc_broker_authenticate ---- */

struct jrpc_broker_auth {
    jrpc_broker_t    *broker;
    jrpc_auth_fn      fn;
    void             *ctx;
    int               transport;
    uint8_t           key_id_n;   /* key_id's length, once the signature checked out */
    char              key_id[JRPC_KEYS_ID_MAX]; /* a copy: a reload may free the key
                                     while the nonce is in Redis */
    uint8_t           key_fp[JRPC_KEY_FP_LEN]; /* its credential when checked: a reload
                                     that replaces it meanwhile refuses the upgrade */
    bool              cancelled;  /* the connection left while claiming */
    uint64_t          t0;         /* metrics */
    jrpc_span_t       peer;       /* in peer_text: for the access line */
    char              peer_text[64];
};

/* An open body less: the drain may be over. */
static void open_done(jrpc_broker_t *b)
{
    b->open--;
    if (b->open == 0 && b->on_empty) {
        void (*fn)(void *) = b->on_empty;
        b->on_empty = NULL;
        fn(b->on_empty_arg);
    }
}

/* The refusal of a connection: counted and logged as a body refused, and
 * the same error object (id null). */
static void auth_refuse(jrpc_broker_t *b, jrpc_broker_auth_t *a, int rc, const char *data_json)
{
    jrpc_outcome_t out = jrpc_outcome_refused(rc);
    jrpc_admit_t ad = { .transport = a->transport, .peer = a->peer };
    jrpc_buf_reset(&b->out);
    if (jrpc_batch_write_error_json(&b->out, out.code, data_json) < 0)
        jrpc_buf_reset(&b->out);
    access_log(b, NULL, &ad, out.cls, b->out.len);
    jrpc_metrics_body_refused(a->transport, out.cls, out.code, a->t0);
    jrpc_status_page_refused(a->transport, out.cls, out.code, data_json);
    a->fn(a->ctx, out, b->out.p, b->out.len, (jrpc_span_t){ NULL, 0 });
}

static void auth_unavailable(jrpc_broker_t *b, jrpc_broker_auth_t *a, int rc)
{
    char data[256];
    auth_refuse(b, a, rc, unavailable_data(b, rc, data, sizeof data));
}

/* Whether the key set in force still has the key id with the credential
 * whose fingerprint is fp. */
static bool key_unchanged(const jrpc_broker_t *b, jrpc_span_t id, const uint8_t *fp)
{
    uint8_t now[JRPC_KEY_FP_LEN];
    return jrpc_broker_key_fingerprint(b, id, now) && memcmp(now, fp, sizeof now) == 0;
}

static void auth_unknown_key(jrpc_broker_t *b, jrpc_broker_auth_t *a)
{
    char data[320];
    snprintf(data, sizeof data, "{\"reason\":\"%s\",\"server_time\":%lld}",
             jrpc_auth_strerror(JRPC_AUTH_EUNKNOWN_KEY), (long long)time(NULL));
    auth_refuse(b, a, -EACCES, data);
}

static void on_auth_claimed(void *arg, int rc)
{
    jrpc_broker_auth_t *a = arg;
    jrpc_broker_t *b = a->broker;
    jrpc_metrics_tick();
    if (a->cancelled)
        ;
    else if (rc == 0 && !key_unchanged(b, (jrpc_span_t){ a->key_id, a->key_id_n }, a->key_fp))
        auth_unknown_key(b, a);   /* removed or replaced by a reload during the claim */
    else if (rc == 0)
        a->fn(a->ctx, (jrpc_outcome_t){ .cls = JRPC_BODY_OK }, "", 0,
              (jrpc_span_t){ a->key_id, a->key_id_n });
    else if (rc == -EEXIST)
        auth_refuse(b, a, rc,
                    "{\"reason\":\"this nonce was used before: sign each body with a new nonce\"}");
    else
        auth_unavailable(b, a, rc);
    free(a);
    open_done(b);
}

int jrpc_broker_authenticate(jrpc_broker_t *b, const char *body, size_t len,
                             const jrpc_admit_t *ad, jrpc_auth_fn fn, void *ctx,
                             jrpc_broker_auth_t **handle)
{
    if (handle)
        *handle = NULL;
    if (b->opts.keys == NULL || ad->key_id.n) {   /* open, or authenticated by its connection */
        fn(ctx, (jrpc_outcome_t){ .cls = JRPC_BODY_OK }, "", 0,
           b->opts.keys ? ad->key_id : (jrpc_span_t){ NULL, 0 });
        return 0;
    }
    jrpc_broker_auth_t *a = calloc(1, sizeof *a);
    if (a == NULL)
        return -ENOMEM;
    a->broker = b;
    a->fn = fn;
    a->ctx = ctx;
    a->transport = ad->transport;
    a->t0 = jrpc_metrics_tick();
    if (ad->peer.n && ad->peer.n <= sizeof a->peer_text) {
        memcpy(a->peer_text, ad->peer.p, ad->peer.n);
        a->peer = (jrpc_span_t){ a->peer_text, ad->peer.n };
    }
    int64_t now = (int64_t)time(NULL);
    const jrpc_key_t *key;
    int rc = jrpc_auth_check(b->opts.keys, b->signer, &ad->auth, body, len, now,
                             b->opts.skew_s, &key);
    if (rc < 0) {
        char data[320];
        snprintf(data, sizeof data, "{\"reason\":\"%s\",\"server_time\":%lld}",
                 jrpc_auth_strerror(rc), (long long)now);
        auth_refuse(b, a, -EACCES, data);
        free(a);
        return 0;
    }
    if (jrpc_key_is_bearer(key)) {   /* a token: nothing to claim */
        fn(ctx, (jrpc_outcome_t){ .cls = JRPC_BODY_OK }, "", 0, jrpc_key_id(key));
        free(a);
        return 0;
    }
    keep_key_id(a->key_id, &a->key_id_n, jrpc_key_id(key));
    jrpc_key_fingerprint(key, a->key_fp);
    if (handle)
        *handle = a;
    b->open++;
    rc = jrpc_replay_claim(b->replay, ad->auth.key, ad->auth.nonce, signed_at(&ad->auth),
                           on_auth_claimed, a);
    if (rc < 0) {
        auth_unavailable(b, a, rc);
        free(a);
        open_done(b);
    }
    return 0;
}

bool jrpc_broker_has_key(const jrpc_broker_t *b, jrpc_span_t id)
{
    return b->opts.keys && jrpc_keys_find(b->opts.keys, id) != NULL;
}

bool jrpc_broker_key_fingerprint(const jrpc_broker_t *b, jrpc_span_t id,
                                 uint8_t out[JRPC_KEY_FP_LEN])
{
    const jrpc_key_t *key = b->opts.keys ? jrpc_keys_find(b->opts.keys, id) : NULL;
    if (key == NULL)
        return false;
    jrpc_key_fingerprint(key, out);
    return true;
}

void jrpc_broker_authenticate_cancel(jrpc_broker_t *b, jrpc_broker_auth_t *a)
{
    (void)b;
    a->cancelled = true;   /* freed when Redis answers */
}
