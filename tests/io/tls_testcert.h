/* tls_testcert — certificates for the TLS unit test and fuzz target, made
 * in process with the OpenSSL API (no openssl CLI, nothing kept in the
 * tree that could expire), written as PEM into a fresh mkdtemp() folder
 * because jrpc_tls_ctx_new takes paths. EC P-256 keys, valid from an hour
 * ago for 30 days:
 *
 *   ca          "jrpc test CA" (self-signed, CA:TRUE)
 *   server      CN=localhost, SAN IP:127.0.0.1 DNS:localhost, serverAuth, by ca
 *   client      CN=alice, clientAuth, by ca
 *   rogue_ca    "rogue CA", and rogue: CN=alice, clientAuth, by rogue_ca
 *   other_key   a key of no certificate (a key that does not match)
 *
 * Each name is a .pem (certificate) and a .key beside it. */
#ifndef TLS_TESTCERT_H
#define TLS_TESTCERT_H

typedef struct tls_testcert {
    char dir[200];                    /* the mkdtemp() folder, under $TMPDIR or /tmp */
    char ca[256];                     /* the files in dir */
    char server[256], server_key[256];
    char client[256], client_key[256];
    char rogue[256], rogue_key[256];
    char other_key[256];
} tls_testcert_t;

/* Makes the folder and the files; 0, or -1 (with a line on stderr saying
 * what failed; whatever was made is removed). Blocks for a few ms. */
int tls_testcert_make(tls_testcert_t *tc);
/* Removes the files and the folder. Idempotent. */
void tls_testcert_remove(tls_testcert_t *tc);

#endif
