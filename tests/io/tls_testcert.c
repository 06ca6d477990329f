/* tls_testcert — test certificates made with the OpenSSL API (see the header). */
#include "tls_testcert.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct made {
    X509     *x;
    EVP_PKEY *k;
} made_t;

static void made_free(made_t *m)
{
    X509_free(m->x);
    EVP_PKEY_free(m->k);
    m->x = NULL;
    m->k = NULL;
}

static int add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX v3;
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, issuer, x, NULL, NULL, 0);
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
    if (e == NULL)
        return -1;
    int ok = X509_add_ext(x, e, -1);
    X509_EXTENSION_free(e);
    return ok == 1 ? 0 : -1;
}

/* A certificate for a fresh key, subject CN=cn, signed by issuer (NULL:
 * itself); exts are nid/value pairs ending in 0. */
static int make(made_t *out, const char *cn, const made_t *issuer, long serial, const int *nids,
                const char *const *values)
{
    out->x = NULL;
    out->k = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    if (out->k == NULL || x == NULL)
        goto fail;
    X509_NAME *name = X509_get_subject_name(x);
    if (X509_set_version(x, X509_VERSION_3) != 1 ||
        ASN1_INTEGER_set(X509_get_serialNumber(x), serial) != 1 ||
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1,
                                   0) != 1 ||
        X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer->x) : name) != 1 ||
        X509_gmtime_adj(X509_getm_notBefore(x), -3600) == NULL ||
        X509_gmtime_adj(X509_getm_notAfter(x), 30L * 86400) == NULL ||
        X509_set_pubkey(x, out->k) != 1)
        goto fail;
    for (int i = 0; nids[i] != 0; i++)
        if (add_ext(x, issuer ? issuer->x : x, nids[i], values[i]) < 0)
            goto fail;
    if (X509_sign(x, issuer ? issuer->k : out->k, EVP_sha256()) <= 0)
        goto fail;
    out->x = x;
    return 0;
fail:
    X509_free(x);
    EVP_PKEY_free(out->k);
    out->k = NULL;
    return -1;
}

/* The certificate into cert_path (none when NULL), the key into key_path. */
static int write_pem(const char *cert_path, const made_t *m, const char *key_path)
{
    FILE *f;
    int ok;
    if (cert_path) {
        if ((f = fopen(cert_path, "w")) == NULL)
            return -1;
        ok = PEM_write_X509(f, m->x) == 1;
        if (fclose(f) != 0 || !ok)
            return -1;
    }
    if ((f = fopen(key_path, "w")) == NULL)
        return -1;
    ok = PEM_write_PrivateKey(f, m->k, NULL, NULL, 0, NULL, NULL) == 1;
    ok = fclose(f) == 0 && ok;
    return ok ? 0 : -1;
}

static void path(char *out, const tls_testcert_t *tc, const char *file)
{
    snprintf(out, sizeof tc->ca, "%s/%s", tc->dir, file);
}

int tls_testcert_make(tls_testcert_t *tc)
{
    memset(tc, 0, sizeof *tc);
    const char *tmp = getenv("TMPDIR");
    snprintf(tc->dir, sizeof tc->dir, "%s/jrpc-tlsXXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(tc->dir) == NULL) {
        perror("tls_testcert: mkdtemp");
        tc->dir[0] = '\0';
        return -1;
    }
    path(tc->ca, tc, "ca.pem");
    path(tc->server, tc, "server.pem");
    path(tc->server_key, tc, "server.key");
    path(tc->client, tc, "client.pem");
    path(tc->client_key, tc, "client.key");
    path(tc->rogue, tc, "rogue.pem");
    path(tc->rogue_key, tc, "rogue.key");
    path(tc->other_key, tc, "other.key");
    char ca_key[256], rogue_ca[256], rogue_ca_key[256];
    path(ca_key, tc, "ca.key");
    path(rogue_ca, tc, "rogue-ca.pem");
    path(rogue_ca_key, tc, "rogue-ca.key");

    static const int ca_nids[] = { NID_basic_constraints, NID_key_usage, NID_subject_key_identifier, 0 };
    static const char *const ca_vals[] = { "critical,CA:TRUE", "critical,keyCertSign,cRLSign", "hash" };
    static const int srv_nids[] = { NID_subject_alt_name, NID_ext_key_usage, NID_basic_constraints,
                                    NID_authority_key_identifier, 0 };
    static const char *const srv_vals[] = { "IP:127.0.0.1,DNS:localhost", "serverAuth", "CA:FALSE",
                                            "keyid" };
    static const int cli_nids[] = { NID_ext_key_usage, NID_basic_constraints,
                                    NID_authority_key_identifier, 0 };
    static const char *const cli_vals[] = { "clientAuth", "CA:FALSE", "keyid" };

    made_t ca = { 0 }, srv = { 0 }, cli = { 0 }, rca = { 0 }, rogue = { 0 }, other = { 0 };
    int rc = -1;
    if (make(&ca, "jrpc test CA", NULL, 1, ca_nids, ca_vals) < 0 ||
        make(&srv, "localhost", &ca, 2, srv_nids, srv_vals) < 0 ||
        make(&cli, "alice", &ca, 3, cli_nids, cli_vals) < 0 ||
        make(&rca, "rogue CA", NULL, 1, ca_nids, ca_vals) < 0 ||
        make(&rogue, "alice", &rca, 2, cli_nids, cli_vals) < 0 ||
        (other.k = EVP_EC_gen("P-256")) == NULL) {
        fprintf(stderr, "tls_testcert: making a certificate failed\n");
        goto out;
    }
    if (write_pem(tc->ca, &ca, ca_key) < 0 || write_pem(tc->server, &srv, tc->server_key) < 0 ||
        write_pem(tc->client, &cli, tc->client_key) < 0 ||
        write_pem(rogue_ca, &rca, rogue_ca_key) < 0 ||
        write_pem(tc->rogue, &rogue, tc->rogue_key) < 0 ||
        write_pem(NULL, &other, tc->other_key) < 0) {
        fprintf(stderr, "tls_testcert: writing into %s failed\n", tc->dir);
        goto out;
    }
    rc = 0;
out:
    made_free(&ca);
    made_free(&srv);
    made_free(&cli);
    made_free(&rca);
    made_free(&rogue);
    made_free(&other);
    ERR_clear_error();
    if (rc < 0)
        tls_testcert_remove(tc);
    return rc;
}

void tls_testcert_remove(tls_testcert_t *tc)
{
    if (tc->dir[0] == '\0')
        return;
    static const char *const files[] = { "ca.pem", "ca.key", "server.pem", "server.key",
                                         "client.pem", "client.key", "rogue-ca.pem", "rogue-ca.key",
                                         "rogue.pem", "rogue.key", "other.key" };
    char p[256];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        path(p, tc, files[i]);
        unlink(p);
    }
    rmdir(tc->dir);
    tc->dir[0] = '\0';
}
