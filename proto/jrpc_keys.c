/* jrpc_keys — the signing key file and its lookups. See jrpc_keys.h. */
#include "jrpc_keys.h"

#include <assert.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <openssl/evp.h>

#include "jrpc_sign.h"
#include "jrpc_errors.h"

#define METHOD_STACK 256   /* methods up to this long are matched without malloc */

struct jrpc_key {
    char   *id;       /* NUL-terminated, [A-Za-z0-9_.-]{1,64} */
    size_t  id_n;     /* strlen(id) */
    char   *secret;   /* NUL-terminated, printable non-space ASCII; wiped on destroy */
    size_t  secret_n; /* strlen(secret) */
    jrpc_sign_key_t *hmac; /* the secret keyed once (signing keys; NULL for a bearer key) */
    char  **globs;    /* fnmatch(3) patterns; none = every method */
    size_t  nglobs;   /* entries in globs */
    unsigned line;    /* where it was defined: duplicate messages, jrpc_keys_first */
    bool    bearer;   /* a bearer key: hash is set, secret is "" */
    unsigned char hash[32]; /* bearer: SHA-256 of the token */
    bool    has_rate; /* rate= given: rate and burst replace the broker's default */
    uint32_t rate, burst; /* burst 0: not given */
    char  **cost_globs; /* cost=GLOB:N, in file order */
    uint32_t *costs;
    size_t  ncosts;
};

struct jrpc_keys {
    jrpc_key_t *keys; /* sorted by id (memcmp order, then length) for bsearch */
    size_t      n;    /* entries in keys */
    const jrpc_key_t **bearers; /* the bearer keys, sorted by hash for bsearch */
    size_t      nbearers;
};

/* ---- the key file ---- */

static void key_dispose(jrpc_key_t *key)
{
    free(key->id);
    if (key->secret) {
        explicit_bzero(key->secret, key->secret_n);
        free(key->secret);
    }
    jrpc_sign_key_destroy(&key->hmac);
    for (size_t i = 0; i < key->nglobs; i++)
        free(key->globs[i]);
    free(key->globs);
    for (size_t i = 0; i < key->ncosts; i++)
        free(key->cost_globs[i]);
    free(key->cost_globs);
    free(key->costs);
    memset(key, 0, sizeof *key);
}

void jrpc_keys_destroy(jrpc_keys_t **self_p)
{
    if (self_p == NULL || *self_p == NULL)
        return;
    jrpc_keys_t *k = *self_p;
    for (size_t i = 0; i < k->n; i++)
        key_dispose(&k->keys[i]);
    free(k->keys);
    free(k->bearers);
    free(k);
    *self_p = NULL;
}

size_t jrpc_keys_count(const jrpc_keys_t *k)
{
    return k->n;
}

static bool id_char_ok(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.' || c == '-';
}

static bool id_ok(const char *s, size_t n)
{
    if (n < 1 || n > JRPC_KEYS_ID_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!id_char_ok((unsigned char)s[i]))
            return false;
    return true;
}

static int span_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    if (c != 0)
        return c;
    return (an > bn) - (an < bn);
}

static int key_cmp(const void *a, const void *b)
{
    const jrpc_key_t *x = a, *y = b;
    return span_cmp(x->id, x->id_n, y->id, y->id_n);
}


static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Splits line into fields separated by spaces or tabs, NUL-terminating each
 * in place when fields is not NULL (NULL: just count). A '#' at the start of
 * a field starts a comment; a '#' inside a field is part of it, so a secret
 * may contain one (a secret that starts with '#' shows up as "secret
 * missing", never as a silently shorter key). Returns the number of fields. */
static size_t split_fields(char *line, char **fields)
{
    size_t n = 0;
    char *p = line;
    for (;;) {
        while (is_blank(*p))
            p++;
        if (*p == '\0' || *p == '#')
            return n;
        if (fields)
            fields[n] = p;
        n++;
        while (*p != '\0' && !is_blank(*p))
            p++;
        if (*p == '\0')
            return n;
        if (fields)
            *p = '\0';
        p++;
    }
}

/* Parses one line into key; returns 1 when it defined a key, 0 for a blank
 * or comment line, -EINVAL with err set for a bad line, -ENOMEM. */
/* A decimal integer of at least min, within uint32 (digits only). */
static bool parse_u32(const char *s, uint32_t min, uint32_t *out)
{
    uint64_t v = 0;
    if (*s == '\0')
        return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || (v = v * 10 + (uint64_t)(*s - '0')) > UINT32_MAX)
            return false;
    }
    *out = (uint32_t)v;
    return v >= min;
}

/* 64 lower-case hex digits, then the end: their 32 bytes in out. */
static bool hex32(const char *s, unsigned char out[32])
{
    for (size_t i = 0; i < 64; i++) {
        char c = s[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0)
            return false;
        out[i / 2] = (unsigned char)(i % 2 ? out[i / 2] | v : v << 4);
    }
    return s[64] == '\0';
}

static int hash_cmp(const void *a, const void *b)
{
    const jrpc_key_t *x = *(const jrpc_key_t *const *)a, *y = *(const jrpc_key_t *const *)b;
    return memcmp(x->hash, y->hash, sizeof x->hash);
}

static int parse_line(char *line, size_t len, const char *path, unsigned lineno,
                      size_t secret_min, jrpc_key_t *key, char *err, size_t errlen)
{
    if (strlen(line) != len) {
        jrpc_errf(err, errlen, "%s:%u: NUL byte in line", path, lineno);
        return -EINVAL;
    }
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        line[--len] = '\0';

    /* Count the fields first, so they get one exact allocation. */
    size_t n = split_fields(line, NULL);
    if (n == 0)
        return 0;
    char **fields = calloc(n, sizeof *fields);
    if (fields == NULL)
        return -ENOMEM;
    split_fields(line, fields);

    int rc = -EINVAL;
    const char *id = fields[0];
    size_t id_n = strlen(id);
    if (!id_ok(id, id_n)) {
        jrpc_errf(err, errlen, "%s:%u: key id must be 1 to %d characters of [A-Za-z0-9_.-]",
                path, lineno, JRPC_KEYS_ID_MAX);
        goto out;
    }
    if (n < 2) {
        jrpc_errf(err, errlen, "%s:%u: secret missing for key \"%s\"", path, lineno, id);
        goto out;
    }
    const char *secret = fields[1];
    size_t secret_n = strlen(secret);
    unsigned char hash[32];
    bool bearer = strncmp(secret, JRPC_KEYS_BEARER, sizeof JRPC_KEYS_BEARER - 1) == 0;
    if (bearer) {
        if (!hex32(secret + sizeof JRPC_KEYS_BEARER - 1, hash)) {
            jrpc_errf(err, errlen, "%s:%u: bearer key \"%s\" needs %s and 64 lower-case hex "
                    "digits (jrpc bearer-key writes the line)", path, lineno, id, JRPC_KEYS_BEARER);
            goto out;
        }
        secret = "";
        secret_n = 0;
    }
    for (size_t i = 0; i < secret_n; i++) {
        unsigned char c = (unsigned char)secret[i];
        if (c <= 0x20 || c >= 0x7f) {
            jrpc_errf(err, errlen, "%s:%u: secret of key \"%s\" must be printable ASCII "
                    "without spaces", path, lineno, id);
            goto out;
        }
    }
    if (!bearer && secret_n < secret_min) {
        jrpc_errf(err, errlen, "%s:%u: secret of key \"%s\" is %zu characters, at least %zu "
                "are required", path, lineno, id, secret_n, secret_min);
        goto out;
    }
    for (size_t g = 2; g < n; g++) {
        for (const char *c = fields[g]; *c; c++) {
            if ((unsigned char)*c < 0x20 || *c == 0x7f) {
                jrpc_errf(err, errlen, "%s:%u: control character in method glob %zu of key "
                        "\"%s\"", path, lineno, g - 1, id);
                goto out;
            }
        }
    }
    /* rate=N, burst=N, cost=GLOB:N among the globs (docs/SIGNING.md "Rate limits") */
    size_t nglobs = 0, ncosts = 0;
    uint32_t rate = 0, burst = 0;
    bool has_rate = false;
    for (size_t g = 2; g < n; g++) {
        const char *f = fields[g];
        uint32_t v;
        if (strncmp(f, "rate=", 5) == 0 || strncmp(f, "burst=", 6) == 0) {
            bool is_rate = f[0] == 'r';
            if (!parse_u32(f + (is_rate ? 5 : 6), is_rate ? 0 : 1, &v)) {
                jrpc_errf(err, errlen, "%s:%u: key \"%s\": %s wants %s calls (an integer up to "
                        "4294967295)", path, lineno, id, is_rate ? "rate=" : "burst=",
                        is_rate ? "0 (no limit) or more" : "1 or more");
                goto out;
            }
            if (is_rate) {
                rate = v;
                has_rate = true;
            } else {
                burst = v;
            }
        } else if (strncmp(f, "cost=", 5) == 0) {
            const char *colon = strrchr(f + 5, ':');
            if (colon == NULL || colon == f + 5 || !parse_u32(colon + 1, 0, &v)) {
                jrpc_errf(err, errlen, "%s:%u: key \"%s\": cost= wants METHOD_GLOB:N, N an integer "
                        "(0 for free)", path, lineno, id);
                goto out;
            }
            ncosts++;
        } else {
            nglobs++;
        }
    }
    if (burst && !has_rate) {
        jrpc_errf(err, errlen, "%s:%u: key \"%s\": burst= without rate=", path, lineno, id);
        goto out;
    }

    rc = -ENOMEM;
    memset(key, 0, sizeof *key);
    key->line = lineno;
    key->id_n = id_n;
    key->secret_n = secret_n;
    key->bearer = bearer;
    if (bearer)
        memcpy(key->hash, hash, sizeof hash);
    if ((key->id = strdup(id)) == NULL || (key->secret = strdup(secret)) == NULL)
        goto fail;
    if (!bearer && (key->hmac = jrpc_sign_key_new((jrpc_span_t){ secret, secret_n })) == NULL)
        goto fail;
    key->has_rate = has_rate;
    key->rate = rate;
    key->burst = burst;
    if ((nglobs && (key->globs = calloc(nglobs, sizeof *key->globs)) == NULL) ||
        (ncosts && ((key->cost_globs = calloc(ncosts, sizeof *key->cost_globs)) == NULL ||
                    (key->costs = calloc(ncosts, sizeof *key->costs)) == NULL)))
        goto fail;
    for (size_t g = 2; g < n; g++) {
        const char *f = fields[g];
        if (strncmp(f, "rate=", 5) == 0 || strncmp(f, "burst=", 6) == 0)
            continue;
        if (strncmp(f, "cost=", 5) == 0) {
            const char *colon = strrchr(f + 5, ':');
            parse_u32(colon + 1, 0, &key->costs[key->ncosts]);
            if ((key->cost_globs[key->ncosts] = strndup(f + 5, (size_t)(colon - f - 5))) == NULL)
                goto fail;
            key->ncosts++;
        } else if ((key->globs[key->nglobs++] = strdup(f)) == NULL) {
            goto fail;
        }
    }
    rc = 1;
    goto out;
fail:
    key_dispose(key);
out:
    free(fields);
    return rc;
}

int jrpc_keys_load(const char *path, const jrpc_keys_opts_t *opts, jrpc_keys_t **out, char *err,
                   size_t errlen)
{
    static const jrpc_keys_opts_t broker = { .secret_min = JRPC_KEYS_SECRET_MIN };
    jrpc_keys_t *k = NULL;
    char *line = NULL;
    size_t linecap = 0;
    size_t cap = 0;
    unsigned lineno = 0;
    int rc;

    assert(path != NULL && out != NULL);
    if (opts == NULL)
        opts = &broker;
    assert(opts->secret_min >= 1);
    *out = NULL;
    jrpc_errf(err, errlen, "%s", "");
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        rc = -errno;
        jrpc_errf(err, errlen, "%s: %s", path, strerror(errno));
        return rc;
    }
    if ((k = calloc(1, sizeof *k)) == NULL)
        goto nomem;

    ssize_t got;
    errno = 0;
    while ((got = getline(&line, &linecap, f)) >= 0) {
        lineno++;
        jrpc_key_t key;
        rc = parse_line(line, (size_t)got, path, lineno, opts->secret_min, &key, err, errlen);
        explicit_bzero(line, (size_t)got); /* the secret was in it */
        if (rc == -ENOMEM)
            goto nomem;
        if (rc < 0)
            goto out;
        if (rc == 0)
            continue;
        if (k->n == cap) {
            size_t ncap = cap ? 2 * cap : 16;
            jrpc_key_t *nk = realloc(k->keys, ncap * sizeof *nk);
            if (nk == NULL) {
                key_dispose(&key);
                goto nomem;
            }
            k->keys = nk;
            cap = ncap;
        }
        k->keys[k->n++] = key;
        errno = 0;
    }
    if (ferror(f)) {
        rc = -(errno ? errno : EIO);
        jrpc_errf(err, errlen, "%s:%u: %s", path, lineno + 1, strerror(-rc));
        goto out;
    }
    rc = -EINVAL;
    if (k->n == 0 && !opts->allow_empty) {
        /* Almost always the wrong file; a broker with no keys would refuse
         * every request, so say so at start-up instead. */
        jrpc_errf(err, errlen, "%s: no keys", path);
        goto out;
    }

    if (k->n > 1)   /* keys is NULL when there are none */
        qsort(k->keys, k->n, sizeof *k->keys, key_cmp);
    for (size_t i = 1; i < k->n; i++) {
        if (key_cmp(&k->keys[i - 1], &k->keys[i]) == 0) {
            const jrpc_key_t *x = &k->keys[i - 1], *y = &k->keys[i];
            unsigned first = x->line < y->line ? x->line : y->line;
            unsigned again = x->line < y->line ? y->line : x->line;
            jrpc_errf(err, errlen, "%s:%u: duplicate key id \"%s\" (first on line %u)", path,
                    again, x->id, first);
            goto out;
        }
    }
    for (size_t i = 0; i < k->n; i++)
        k->nbearers += k->keys[i].bearer;
    if (k->nbearers) {
        if ((k->bearers = calloc(k->nbearers, sizeof *k->bearers)) == NULL)
            goto nomem;
        for (size_t i = 0, j = 0; i < k->n; i++)
            if (k->keys[i].bearer)
                k->bearers[j++] = &k->keys[i];
        qsort(k->bearers, k->nbearers, sizeof *k->bearers, hash_cmp);
        for (size_t i = 1; i < k->nbearers; i++) {
            if (hash_cmp(&k->bearers[i - 1], &k->bearers[i]) == 0) {
                /* one token, two keys: which key's ACL would it get? */
                jrpc_errf(err, errlen, "%s:%u: bearer key \"%s\" has the same token as \"%s\"",
                        path, k->bearers[i]->line, k->bearers[i]->id, k->bearers[i - 1]->id);
                goto out;
            }
        }
    }
    rc = 0;
    goto out;
nomem:
    rc = -ENOMEM;
    jrpc_errf(err, errlen, "%s:%u: out of memory", path, lineno);
out:
    if (line) {
        explicit_bzero(line, linecap);
        free(line);
    }
    fclose(f);
    if (rc < 0)
        jrpc_keys_destroy(&k);
    *out = k;
    return rc;
}

/* ---- lookups ---- */

static int find_cmp(const void *needle, const void *elem)
{
    const jrpc_span_t *id = needle;
    const jrpc_key_t *key = elem;
    return span_cmp(id->p, id->n, key->id, key->id_n);
}

const jrpc_key_t *jrpc_keys_find(const jrpc_keys_t *k, jrpc_span_t id)
{
    if (id.n == 0 || id.n > JRPC_KEYS_ID_MAX || k->n == 0)
        return NULL;
    return bsearch(&id, k->keys, k->n, sizeof *k->keys, find_cmp);
}

static int find_hash_cmp(const void *needle, const void *elem)
{
    const jrpc_key_t *key = *(const jrpc_key_t *const *)elem;
    return memcmp(needle, key->hash, sizeof key->hash);
}

const jrpc_key_t *jrpc_keys_find_bearer(const jrpc_keys_t *k, jrpc_span_t token)
{
    unsigned char hash[EVP_MAX_MD_SIZE];
    unsigned int hn = 0;
    if (k->nbearers == 0 || token.n == 0 || token.n > JRPC_KEYS_TOKEN_MAX ||
        EVP_Digest(token.p, token.n, hash, &hn, EVP_sha256(), NULL) != 1)
        return NULL;
    const jrpc_key_t *const *hit = bsearch(hash, k->bearers, k->nbearers, sizeof *k->bearers,
                                           find_hash_cmp);
    return hit ? *hit : NULL;
}

const jrpc_key_t *jrpc_keys_first(const jrpc_keys_t *k)
{
    const jrpc_key_t *first = NULL;
    for (size_t i = 0; i < k->n; i++)
        if (!k->keys[i].bearer && (first == NULL || k->keys[i].line < first->line))
            first = &k->keys[i];
    return first;
}

bool jrpc_key_is_bearer(const jrpc_key_t *key)
{
    return key->bearer;
}

void jrpc_key_fingerprint(const jrpc_key_t *key, uint8_t out[JRPC_KEY_FP_LEN])
{
    static const char label[] = "jrpc key fingerprint v1";
    unsigned int n = 0;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    bool ok = md != NULL && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1 &&
              EVP_DigestUpdate(md, label, sizeof label) == 1 &&
              EVP_DigestUpdate(md, key->bearer ? "b" : "s", 1) == 1 &&
              (key->bearer ? EVP_DigestUpdate(md, key->hash, sizeof key->hash)
                           : EVP_DigestUpdate(md, key->secret, key->secret_n)) == 1 &&
              EVP_DigestFinal_ex(md, out, &n) == 1 && n == JRPC_KEY_FP_LEN;
    EVP_MD_CTX_free(md);
    if (!ok)   /* out of memory: a value no key has, so the credential counts as changed */
        memset(out, 0, JRPC_KEY_FP_LEN);
}

int jrpc_keys_bearer_line(jrpc_span_t id, jrpc_span_t token, char *out, size_t outlen)
{
    unsigned char hash[EVP_MAX_MD_SIZE];
    unsigned int hn = 0;
    if (!id_ok(id.p, id.n) || token.n == 0 || token.n > JRPC_KEYS_TOKEN_MAX)
        return -EINVAL;
    if (EVP_Digest(token.p, token.n, hash, &hn, EVP_sha256(), NULL) != 1)
        return -ENOMEM;
    size_t need = id.n + 1 + sizeof JRPC_KEYS_BEARER - 1 + 64;
    if (need + 1 > outlen)
        return -ENOSPC;
    int n = snprintf(out, outlen, "%.*s %s", (int)id.n, id.p, JRPC_KEYS_BEARER);
    for (unsigned i = 0; i < 32; i++)
        n += snprintf(out + n, outlen - (size_t)n, "%02x", hash[i]);
    return n;
}

bool jrpc_keys_text_has_id(const char *text, size_t n, jrpc_span_t id)
{
    size_t i = 0;
    while (i < n) {
        size_t end = i;
        while (end < n && text[end] != '\n')
            end++;
        size_t a = i;
        while (a < end && is_blank(text[a]))
            a++;
        size_t b = a;
        while (b < end && !is_blank(text[b]) && text[b] != '\r')
            b++;
        /* a comment line, or a blank one, defines nothing (split_fields) */
        if (a < end && text[a] != '#' && b - a == id.n && memcmp(text + a, id.p, id.n) == 0)
            return true;
        i = end + 1;
    }
    return false;
}

jrpc_span_t jrpc_key_id(const jrpc_key_t *key)
{
    return (jrpc_span_t){ key->id, key->id_n };
}

jrpc_span_t jrpc_key_secret(const jrpc_key_t *key)
{
    return (jrpc_span_t){ key->secret, key->secret_n };
}

const jrpc_sign_key_t *jrpc_key_hmac(const jrpc_key_t *key)
{
    return key->hmac;
}

/* The index of the first of globs[0..n) the method matches, or -1. fnmatch
 * needs a C string; a method with a NUL inside cannot be one faithfully,
 * so it matches nothing (fail closed; out of memory too). */
static long glob_match(char *const *globs, size_t n, jrpc_span_t method)
{
    if (n == 0 || (method.n > 0 && memchr(method.p, '\0', method.n) != NULL))
        return -1;
    char stack[METHOD_STACK];
    char *name = stack;
    if (method.n >= sizeof stack && (name = malloc(method.n + 1)) == NULL)
        return -1;
    if (method.n > 0)
        memcpy(name, method.p, method.n);
    name[method.n] = '\0';
    long hit = -1;
    for (size_t i = 0; i < n && hit < 0; i++)
        if (fnmatch(globs[i], name, 0) == 0)
            hit = (long)i;
    if (name != stack)
        free(name);
    return hit;
}

bool jrpc_key_allows(const jrpc_key_t *key, jrpc_span_t method)
{
    return key->nglobs == 0 || glob_match(key->globs, key->nglobs, method) >= 0;
}

bool jrpc_key_rate(const jrpc_key_t *key, uint32_t *rate, uint32_t *burst)
{
    if (!key->has_rate)
        return false;
    *rate = key->rate;
    *burst = key->burst;
    return true;
}

uint32_t jrpc_key_cost(const jrpc_key_t *key, jrpc_span_t method)
{
    long i = glob_match(key->cost_globs, key->ncosts, method);
    return i < 0 ? 1 : key->costs[i];
}

