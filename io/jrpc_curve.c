/* jrpc_curve — see jrpc_curve.h. */
#include "jrpc_curve.h"
#include "jrpc_errors.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "jrpc_log.h"
#include "jrpc_zwatch.h"

#ifndef ZMQ_ZAP_ENFORCE_DOMAIN
#define ZMQ_ZAP_ENFORCE_DOMAIN 93   /* draft API in 4.3, but built into Debian's libzmq */
#endif

#define ZAP_ENDPOINT    "inproc://zeromq.zap.01"
#define ZAP_MAX_FRAMES  8    /* version..mechanism and credentials; more is malformed */
#define ZAP_MAX_DOMAINS 4
#define ZAP_READ_BUDGET 64   /* requests per readable callback */


/* A Z85 key: exactly 40 characters that decode. */
static bool z85_key_ok(const char *s, uint8_t raw[JRPC_CURVE_KEY_LEN])
{
    uint8_t tmp[JRPC_CURVE_KEY_LEN];
    if (strlen(s) != JRPC_CURVE_Z85_LEN)
        return false;
    bool ok = zmq_z85_decode(raw ? raw : tmp, s) != NULL;
    explicit_bzero(tmp, sizeof tmp);
    return ok;
}

bool jrpc_curve_key_ok(const char *z85)
{
    return z85 != NULL && z85_key_ok(z85, NULL);
}

/* ---- key files ---- */

/* One meaningful line of a key file: an optional label ("public", "secret")
 * and the key. */
typedef struct key_line {
    const char *label;   /* NULL for a bare key */
    const char *key;
} key_line_t;

/* Splits line into fields. Returns 1 for a key line, 0 for a blank or
 * comment line, -EINVAL for anything else (reason in err). Edits line. */
static int parse_line(char *line, key_line_t *kl, const char *path, unsigned lineno, char *err,
                      size_t errlen)
{
    const char *ws = " \t\r\n\v\f";
    char *save = NULL;
    char *f1 = strtok_r(line, ws, &save);
    if (f1 == NULL)
        return 0;
    /* '#' is Z85's last digit: no 32-byte key's encoding starts with it
     * (it would overflow the first 4-byte group). */
    if (f1[0] == '#')
        return 0;
    kl->label = NULL;
    kl->key = f1;
    if (strcmp(f1, "public") == 0 || strcmp(f1, "secret") == 0) {
        kl->label = f1;
        kl->key = strtok_r(NULL, ws, &save);
        if (kl->key == NULL) {
            jrpc_errf(err, errlen, "%s:%u: '%s' without a key", path, lineno, f1);
            return -EINVAL;
        }
    }
    char *rest = strtok_r(NULL, ws, &save);
    if (rest != NULL && rest[0] != '#') {
        jrpc_errf(err, errlen, "%s:%u: unexpected text after the key", path, lineno);
        return -EINVAL;
    }
    if (!z85_key_ok(kl->key, NULL)) {
        jrpc_errf(err, errlen, "%s:%u: not a Z85 key (40 characters)%s", path, lineno,
                kl->label ? "" : " nor a 'public KEY' line");
        return -EINVAL;
    }
    return 1;
}

typedef int (*line_fn)(const key_line_t *kl, void *arg, const char *path, unsigned lineno,
                       char *err, size_t errlen);

/* Reads path line by line, calling fn for each key line. When is_secret,
 * warns about a file others can read. Line buffers are wiped. */
static int read_key_file(const char *path, bool is_secret, line_fn fn, void *arg, char *err,
                         size_t errlen)
{
    int rc = 0;
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        rc = -errno;
        jrpc_errf(err, errlen, "cannot read %s: %s", path, strerror(-rc));
        return rc;
    }
    struct stat st;
    if (is_secret && fstat(fileno(f), &st) == 0 && (st.st_mode & 077) != 0)
        JRPC_LOG(JRPC_LOG_WARN, "curve", "event=secret_key_file_readable path=%s mode=%04o "
                 "hint=\"chmod 600 %s\"", path, (unsigned)(st.st_mode & 07777), path);
    char *line = NULL;
    size_t cap = 0;
    unsigned lineno = 0;
    while (getline(&line, &cap, f) >= 0) {
        lineno++;
        key_line_t kl;
        if ((rc = parse_line(line, &kl, path, lineno, err, errlen)) < 0)
            goto out;
        if (rc == 1 && (rc = fn(&kl, arg, path, lineno, err, errlen)) < 0)
            goto out;
    }
    rc = 0;
    if (ferror(f)) {
        rc = -EIO;
        jrpc_errf(err, errlen, "cannot read %s: %s", path, strerror(EIO));
    }
out:
    if (line) {
        explicit_bzero(line, cap);
        free(line);
    }
    fclose(f);
    return rc;
}

static int keypair_line(const key_line_t *kl, void *arg, const char *path, unsigned lineno,
                        char *err, size_t errlen)
{
    jrpc_curve_keypair_t *kp = arg;
    char *dst = NULL;
    if (kl->label && strcmp(kl->label, "public") == 0)
        dst = kp->public_z85;
    else if (kl->label && strcmp(kl->label, "secret") == 0)
        dst = kp->secret_z85;
    if (dst == NULL) {
        jrpc_errf(err, errlen, "%s:%u: expected 'public KEY' or 'secret KEY'", path, lineno);
        return -EINVAL;
    }
    if (dst[0] != '\0') {
        jrpc_errf(err, errlen, "%s:%u: a second '%s' line", path, lineno, kl->label);
        return -EINVAL;
    }
    memcpy(dst, kl->key, JRPC_CURVE_Z85_LEN + 1);
    return 0;
}

int jrpc_curve_load_keypair(const char *path, jrpc_curve_keypair_t *kp, char *err, size_t errlen)
{
    memset(kp, 0, sizeof *kp);
    int rc = read_key_file(path, true, keypair_line, kp, err, errlen);
    if (rc < 0)
        goto out;
    rc = -EINVAL;
    if (kp->public_z85[0] == '\0' || kp->secret_z85[0] == '\0') {
        jrpc_errf(err, errlen, "%s: a keypair file needs a 'public KEY' and a 'secret KEY' line "
                "(make one with 'jrpc keygen FILE')", path);
        goto out;
    }
    char derived[JRPC_CURVE_Z85_LEN + 1];
    if (zmq_curve_public(derived, kp->secret_z85) != 0) {
        rc = -errno;
        jrpc_errf(err, errlen, "%s: cannot derive the public key: %s", path, zmq_strerror(errno));
        goto out;
    }
    if (strcmp(derived, kp->public_z85) != 0) {
        jrpc_errf(err, errlen, "%s: the public key is not the secret key's", path);
        goto out;
    }
    rc = 0;
out:
    if (rc < 0)
        jrpc_curve_keypair_wipe(kp);
    return rc;
}

void jrpc_curve_keypair_wipe(jrpc_curve_keypair_t *kp)
{
    explicit_bzero(kp->secret_z85, sizeof kp->secret_z85);
}

static int public_line(const key_line_t *kl, void *arg, const char *path, unsigned lineno,
                       char *err, size_t errlen)
{
    char *z85 = arg;
    if (kl->label == NULL || strcmp(kl->label, "public") != 0) {
        jrpc_errf(err, errlen, "%s:%u: %s", path, lineno,
                kl->label ? "a secret key: give the public-key file (FILE.pub), not the keypair"
                          : "expected 'public KEY'");
        return -EINVAL;
    }
    if (z85[0] != '\0') {
        jrpc_errf(err, errlen, "%s:%u: a second 'public' line", path, lineno);
        return -EINVAL;
    }
    memcpy(z85, kl->key, JRPC_CURVE_Z85_LEN + 1);
    return 0;
}

int jrpc_curve_load_public(const char *path, char z85[JRPC_CURVE_Z85_LEN + 1], char *err,
                           size_t errlen)
{
    z85[0] = '\0';
    int rc = read_key_file(path, false, public_line, z85, err, errlen);
    if (rc == 0 && z85[0] == '\0') {
        jrpc_errf(err, errlen, "%s: no 'public KEY' line", path);
        rc = -EINVAL;
    }
    return rc;
}

/* ---- allowlists ---- */

struct jrpc_curve_allowlist {
    uint8_t (*keys)[JRPC_CURVE_KEY_LEN];  /* sorted, distinct once loaded */
    size_t    n, cap;
};

static int allow_line(const key_line_t *kl, void *arg, const char *path, unsigned lineno,
                      char *err, size_t errlen)
{
    jrpc_curve_allowlist_t *a = arg;
    if (kl->label && strcmp(kl->label, "public") != 0) {
        jrpc_errf(err, errlen, "%s:%u: a secret key in an allowlist: list public keys only",
                path, lineno);
        return -EINVAL;
    }
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        void *k = realloc(a->keys, cap * sizeof *a->keys);
        if (k == NULL) {
            jrpc_errf(err, errlen, "%s: out of memory", path);
            return -ENOMEM;
        }
        a->keys = k;
        a->cap = cap;
    }
    zmq_z85_decode(a->keys[a->n++], kl->key);
    return 0;
}

static int key_cmp(const void *x, const void *y)
{
    return memcmp(x, y, JRPC_CURVE_KEY_LEN);
}

int jrpc_curve_allowlist_load(const char *path, jrpc_curve_allowlist_t **out, char *err,
                              size_t errlen)
{
    *out = NULL;
    jrpc_curve_allowlist_t *a = calloc(1, sizeof *a);
    if (a == NULL) {
        jrpc_errf(err, errlen, "%s: out of memory", path);
        return -ENOMEM;
    }
    int rc = read_key_file(path, false, allow_line, a, err, errlen);
    if (rc == 0 && a->n == 0) {
        jrpc_errf(err, errlen, "%s: no public key in the allowlist", path);
        rc = -EINVAL;
    }
    if (rc < 0) {
        jrpc_curve_allowlist_destroy(&a);
        return rc;
    }
    qsort(a->keys, a->n, sizeof *a->keys, key_cmp);
    size_t m = 1;
    for (size_t i = 1; i < a->n; i++)
        if (memcmp(a->keys[i], a->keys[m - 1], JRPC_CURVE_KEY_LEN) != 0)
            memcpy(a->keys[m++], a->keys[i], JRPC_CURVE_KEY_LEN);
    a->n = m;
    *out = a;
    return 0;
}

bool jrpc_curve_allowlist_has(const jrpc_curve_allowlist_t *a, const uint8_t key[JRPC_CURVE_KEY_LEN])
{
    return a && bsearch(key, a->keys, a->n, sizeof *a->keys, key_cmp) != NULL;
}

size_t jrpc_curve_allowlist_size(const jrpc_curve_allowlist_t *a)
{
    return a ? a->n : 0;
}

void jrpc_curve_allowlist_destroy(jrpc_curve_allowlist_t **self_p)
{
    jrpc_curve_allowlist_t *a = *self_p;
    if (a == NULL)
        return;
    *self_p = NULL;
    free(a->keys);
    free(a);
}

/* ---- sockets ---- */

int jrpc_curve_server(void *sock, const jrpc_curve_keypair_t *kp, const char *zap_domain)
{
    assert(sock && kp && zap_domain && zap_domain[0]);
    int one = 1;
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, kp->secret_z85, JRPC_CURVE_Z85_LEN + 1) != 0 ||
        zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, zap_domain, strlen(zap_domain)) != 0)
        return -errno;
    /* Without this, libzmq lets every CURVE peer in when no ZAP handler is
     * bound (the "Stonehouse" legacy mode): fail closed instead. */
    if (zmq_setsockopt(sock, ZMQ_ZAP_ENFORCE_DOMAIN, &one, sizeof one) != 0)
        JRPC_LOG(JRPC_LOG_DEBUG, "curve", "event=zap_enforce_unsupported domain=%s", zap_domain);
    return 0;
}

int jrpc_curve_client(void *sock, const jrpc_curve_keypair_t *kp, const char *server_public)
{
    assert(sock && kp && server_public);
    if (!z85_key_ok(server_public, NULL) || !z85_key_ok(kp->public_z85, NULL) ||
        !z85_key_ok(kp->secret_z85, NULL)) {
        errno = EINVAL;
        return -EINVAL;
    }
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, server_public, JRPC_CURVE_Z85_LEN + 1) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, kp->public_z85, JRPC_CURVE_Z85_LEN + 1) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, kp->secret_z85, JRPC_CURVE_Z85_LEN + 1) != 0)
        return -errno;
    return 0;
}

int jrpc_curve_router(void **sock_p, void *zmq_ctx, const char *endpoint, int64_t max_msg,
                      int hwm, const jrpc_curve_keypair_t *kp, const char *zap_domain,
                      const char *comp)
{
    void *sock = *sock_p = zmq_socket(zmq_ctx, ZMQ_ROUTER);
    if (sock == NULL)
        return -1;
    int one = 1, zero = 0;
    zmq_setsockopt(sock, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &max_msg, sizeof max_msg);
    zmq_setsockopt(sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
    if (kp && jrpc_curve_server(sock, kp, zap_domain) < 0) {
        JRPC_LOG(JRPC_LOG_ERROR, comp, "event=curve_failed error=\"%s\"", zmq_strerror(errno));
        return -1;
    }
    if (zmq_bind(sock, endpoint) != 0) {
        JRPC_LOG(JRPC_LOG_ERROR, comp, "event=bind_failed endpoint=%s error=\"%s\"", endpoint,
                 zmq_strerror(errno));
        return -1;
    }
    return 0;
}

/* Writes all of p to a new file path with exactly mode. */
static int write_new_file(const char *path, const char *p, size_t n, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
        return -errno;
    int rc = 0;
    if (fchmod(fd, mode) != 0)
        rc = -errno;
    while (rc == 0 && n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno != EINTR)
            rc = -errno;
        else if (k > 0)
            p += k, n -= (size_t)k;
    }
    if (rc == 0 && fsync(fd) != 0)
        rc = -errno;
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc < 0)
        unlink(path);
    return rc;
}

int jrpc_curve_keygen(const char *path, char public_z85[JRPC_CURVE_Z85_LEN + 1], char *err,
                      size_t errlen)
{
    char pub[JRPC_CURVE_Z85_LEN + 1], sec[JRPC_CURVE_Z85_LEN + 1];
    char text[160], pubpath[4096];
    int rc;
    if ((size_t)snprintf(pubpath, sizeof pubpath, "%s.pub", path) >= sizeof pubpath) {
        jrpc_errf(err, errlen, "%s: path too long", path);
        return -ENAMETOOLONG;
    }
    if (zmq_curve_keypair(pub, sec) != 0) {
        rc = -errno;
        jrpc_errf(err, errlen, "cannot make a CURVE keypair: %s", zmq_strerror(errno));
        return rc;
    }
    int n = snprintf(text, sizeof text,
                     "# jrpc CURVE keypair: keep it secret (mode 0600)\npublic %s\nsecret %s\n",
                     pub, sec);
    if ((rc = write_new_file(path, text, (size_t)n, 0600)) < 0) {
        jrpc_errf(err, errlen, "cannot write %s: %s%s", path, strerror(-rc),
                rc == -EEXIST ? " (not overwriting a key)" : "");
        goto out;
    }
    n = snprintf(text, sizeof text, "public %s\n", pub);
    if ((rc = write_new_file(pubpath, text, (size_t)n, 0644)) < 0) {
        jrpc_errf(err, errlen, "cannot write %s: %s%s", pubpath, strerror(-rc),
                rc == -EEXIST ? " (not overwriting a key)" : "");
        unlink(path);
        goto out;
    }
    if (public_z85)
        memcpy(public_z85, pub, sizeof pub);
    rc = 0;
out:
    explicit_bzero(sec, sizeof sec);
    explicit_bzero(text, sizeof text);
    return rc;
}

/* ---- the ZAP handler ---- */

typedef struct zap_domain {
    char                   *name;   /* owned */
    jrpc_curve_allowlist_t *keys;   /* owned */
} zap_domain_t;

struct jrpc_curve_zap {
    void          *sock;        /* REP bound to inproc://zeromq.zap.01 */
    jrpc_zwatch_t  watch;
    zap_domain_t   domains[ZAP_MAX_DOMAINS];
    size_t         ndomains;
};

static const zap_domain_t *find_domain(const jrpc_curve_zap_t *z, const char *p, size_t n)
{
    for (size_t i = 0; i < z->ndomains; i++)
        if (strlen(z->domains[i].name) == n && memcmp(z->domains[i].name, p, n) == 0)
            return &z->domains[i];
    return NULL;
}

/* Copies a frame into a printable NUL-terminated string for a log line. */
static void frame_text(char *dst, size_t cap, zmq_msg_t *m)
{
    size_t n = zmq_msg_size(m), k = 0;
    const unsigned char *p = zmq_msg_data(m);
    for (size_t i = 0; i < n && k + 1 < cap; i++)
        dst[k++] = p[i] > 0x20 && p[i] < 0x7f && p[i] != '"' ? (char)p[i] : '?';
    dst[k] = '\0';
    if (k == 0 && cap > 1)
        dst[0] = '-', dst[1] = '\0';
}

static bool frame_is(zmq_msg_t *m, const char *s)
{
    return zmq_msg_size(m) == strlen(s) && memcmp(zmq_msg_data(m), s, strlen(s)) == 0;
}

/* Decides one request: frames are version, request id, domain, address,
 * identity, mechanism, credentials... Returns true to admit. */
static bool zap_decide(jrpc_curve_zap_t *z, zmq_msg_t *f, int n, char *user, size_t usercap)
{
    char domain[64], address[64], mech[16], key[JRPC_CURVE_Z85_LEN + 1] = "-";
    bool ok = false;
    const char *why = "malformed";
    user[0] = '\0';
    if (n < 6 || !frame_is(&f[0], "1.0")) {
        JRPC_LOG(JRPC_LOG_WARN, "zap", "event=zap_denied reason=malformed frames=%d", n);
        return false;
    }
    frame_text(domain, sizeof domain, &f[2]);
    frame_text(address, sizeof address, &f[3]);
    frame_text(mech, sizeof mech, &f[5]);
    const zap_domain_t *d = find_domain(z, zmq_msg_data(&f[2]), zmq_msg_size(&f[2]));
    if (!frame_is(&f[5], "CURVE")) {
        why = "mechanism";
    } else if (n != 7 || zmq_msg_size(&f[6]) != JRPC_CURVE_KEY_LEN) {
        why = "credentials";
    } else {
        const uint8_t *raw = zmq_msg_data(&f[6]);
        zmq_z85_encode(key, raw, JRPC_CURVE_KEY_LEN);
        if (d == NULL)
            why = "unknown_domain";
        else if (!jrpc_curve_allowlist_has(d->keys, raw))
            why = "key_not_listed";
        else
            ok = true;
    }
    if (ok) {
        snprintf(user, usercap, "%s", key);
        JRPC_LOG(JRPC_LOG_DEBUG, "zap", "event=zap_admitted domain=%s address=%s key=%s",
                 domain, address, key);
    } else {
        JRPC_LOG(JRPC_LOG_WARN, "zap",
                 "event=zap_denied domain=%s address=%s key=%s mechanism=%s reason=%s", domain,
                 address, key, mech, why);
    }
    return ok;
}

static void zap_reply(void *sock, zmq_msg_t *reqid, bool ok, const char *user)
{
    const char *code = ok ? "200" : "400";
    const char *text = ok ? "OK" : "not allowed";
    /* A REP socket cannot block on send; a failure only means the peer
     * (libzmq's own session) is gone. */
    zmq_send(sock, "1.0", 3, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(sock, reqid ? zmq_msg_data(reqid) : "", reqid ? zmq_msg_size(reqid) : 0,
             ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(sock, code, 3, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(sock, text, strlen(text), ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(sock, user, strlen(user), ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(sock, "", 0, ZMQ_DONTWAIT);   /* metadata: none */
}

static int zap_on_readable(jrpc_zwatch_t *zw, void *sock)
{
    jrpc_curve_zap_t *z = zw->data;
    for (int budget = 0; budget < ZAP_READ_BUDGET; budget++) {
        zmq_msg_t f[ZAP_MAX_FRAMES];
        int n = 0;
        bool excess = false;
        zmq_msg_init(&f[0]);
        if (zmq_msg_recv(&f[0], sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&f[0]);
            return 0;
        }
        n = 1;
        while (zmq_msg_more(&f[n - 1])) {
            if (n == ZAP_MAX_FRAMES) {   /* drop the rest of an oversized request */
                bool more = true;
                while (more) {
                    zmq_msg_t extra;
                    zmq_msg_init(&extra);
                    more = zmq_msg_recv(&extra, sock, 0) >= 0 && zmq_msg_more(&extra);
                    zmq_msg_close(&extra);
                }
                excess = true;
                break;
            }
            zmq_msg_init(&f[n]);
            if (zmq_msg_recv(&f[n], sock, 0) < 0) {
                zmq_msg_close(&f[n]);
                break;
            }
            n++;
        }
        char user[JRPC_CURVE_Z85_LEN + 1];
        bool ok = !excess && zap_decide(z, f, n, user, sizeof user);
        if (excess)
            JRPC_LOG(JRPC_LOG_WARN, "zap", "event=zap_denied reason=malformed frames=%d+", n);
        zap_reply(sock, n >= 2 ? &f[1] : NULL, ok, ok ? user : "");
        for (int i = 0; i < n; i++)
            zmq_msg_close(&f[i]);
    }
    return 1;
}

jrpc_curve_zap_t *jrpc_curve_zap_new(uv_loop_t *loop, void *zmq_ctx)
{
    jrpc_curve_zap_t *z = calloc(1, sizeof *z);
    if (z == NULL)
        return NULL;
    int zero = 0;
    z->sock = zmq_socket(zmq_ctx, ZMQ_REP);
    if (z->sock == NULL)
        goto fail;
    zmq_setsockopt(z->sock, ZMQ_LINGER, &zero, sizeof zero);
    if (zmq_bind(z->sock, ZAP_ENDPOINT) != 0) {
        JRPC_LOG(JRPC_LOG_ERROR, "zap", "event=bind_failed endpoint=%s error=\"%s\"",
                 ZAP_ENDPOINT, zmq_strerror(errno));
        goto fail;
    }
    if (jrpc_zwatch_start(loop, &z->watch, z->sock, zap_on_readable, z) < 0)
        goto fail;
    JRPC_LOG(JRPC_LOG_INFO, "zap", "event=zap_started endpoint=%s", ZAP_ENDPOINT);
    return z;
fail:
    if (z->sock)
        zmq_close(z->sock);
    free(z);
    return NULL;
}

int jrpc_curve_zap_allow(jrpc_curve_zap_t *z, const char *domain, jrpc_curve_allowlist_t **list_p)
{
    int rc = 0;
    if (find_domain(z, domain, strlen(domain)) != NULL)
        rc = -EEXIST;
    else if (z->ndomains == ZAP_MAX_DOMAINS)
        rc = -ENOSPC;
    else if ((z->domains[z->ndomains].name = strdup(domain)) == NULL)
        rc = -ENOMEM;
    if (rc < 0) {
        jrpc_curve_allowlist_destroy(list_p);
        return rc;
    }
    z->domains[z->ndomains].keys = *list_p;
    *list_p = NULL;
    JRPC_LOG(JRPC_LOG_INFO, "zap", "event=allowlist domain=%s keys=%zu", domain,
             jrpc_curve_allowlist_size(z->domains[z->ndomains].keys));
    z->ndomains++;
    return 0;
}

int jrpc_curve_zap_replace(jrpc_curve_zap_t *z, const char *domain,
                           jrpc_curve_allowlist_t **list_p)
{
    zap_domain_t *d = (zap_domain_t *)find_domain(z, domain, strlen(domain));
    if (d == NULL) {
        jrpc_curve_allowlist_destroy(list_p);
        return -ENOENT;
    }
    jrpc_curve_allowlist_destroy(&d->keys);
    d->keys = *list_p;
    *list_p = NULL;
    JRPC_LOG(JRPC_LOG_INFO, "zap", "event=allowlist domain=%s keys=%zu reloaded=1", domain,
             jrpc_curve_allowlist_size(d->keys));
    return 0;
}

static void zap_on_closed(jrpc_zwatch_t *zw)
{
    jrpc_curve_zap_t *z = zw->data;
    zmq_close(z->sock);
    for (size_t i = 0; i < z->ndomains; i++) {
        free(z->domains[i].name);
        jrpc_curve_allowlist_destroy(&z->domains[i].keys);
    }
    free(z);
}

void jrpc_curve_zap_destroy(jrpc_curve_zap_t **self_p)
{
    jrpc_curve_zap_t *z = *self_p;
    if (z == NULL)
        return;
    *self_p = NULL;
    jrpc_zwatch_stop(&z->watch, zap_on_closed);
}
