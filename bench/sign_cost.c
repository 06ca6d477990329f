/* jrpc-bench-sign: what one signature costs, for bench/signed_cost.sh to
 * count under callgrind (instructions, not time: the machine is shared).
 *
 *   jrpc-bench-sign MODE N
 *
 * MODE: sign | verify (a jrpc_signer_t and a jrpc_sign_key_t made once, as
 * the broker and jrpc_client keep them) or sign-oneshot | verify-oneshot
 * (jrpc_sign_compute / jrpc_sign_verify: everything made per call, as
 * the broker and the client did before they kept a signer). Each of the N
 * rounds signs (or verifies) jrpc-bench's body: a batch of 100 "add"
 * calls, 5773 bytes. MODE nonce | nonce-pool: N nonces of 22 characters,
 * one RAND_bytes each (jrpc_sign_new_nonce) or from a signer's pool
 * (jrpc_signer_new_nonce, as libjrpc-client signs). Run it with N and with
 * 0: the difference over N is the cost of one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jrpc_sign.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: jrpc-bench-sign sign|verify|sign-oneshot|verify-oneshot|nonce|"
                "nonce-pool N\n");
        return 2;
    }
    const char *mode = argv[1];
    long n = atol(argv[2]);
    bool verify = strncmp(mode, "verify", 6) == 0, oneshot = strstr(mode, "oneshot") != NULL;
    static char body[8192];
    size_t len = 0;
    body[len++] = '[';
    for (int i = 0; i < 100; i++)
        len += (size_t)snprintf(body + len, sizeof body - len,
                                "%s{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"params\":[%d,%d],"
                                "\"id\":%d}", i ? "," : "", i, i + 1, i);
    body[len++] = ']';
    static const char sec[] = "bench-secret-0123456789abcdef";
    jrpc_span_t secret = { sec, sizeof sec - 1 }, key = { "bench", 5 };
    jrpc_span_t nonce = { "AAAAAAAAAAAAAAAAAAAAAA", 22 };
    jrpc_signer_t *s = jrpc_signer_new();
    jrpc_sign_key_t *k = jrpc_sign_key_new(secret);
    char hex[JRPC_SIGN_HEX_LEN + 1];
    if (s == NULL || k == NULL || jrpc_signer_compute(s, k, hex, key, 1764000000, nonce, body,
                                                      len) < 0)
        return 1;
    jrpc_span_t sig = { hex, JRPC_SIGN_HEX_LEN };
    long ok = 0;
    for (long i = 0; i < n; i++) {
        char out[JRPC_SIGN_HEX_LEN + 1];
        if (strcmp(mode, "nonce") == 0)
            ok += jrpc_sign_new_nonce(out, 22) == 0;
        else if (strcmp(mode, "nonce-pool") == 0)
            ok += jrpc_signer_new_nonce(s, out, 22) == 0;
        else if (verify && oneshot)
            ok += jrpc_sign_verify(sig, secret, key, 1764000000, nonce, body, len);
        else if (verify)
            ok += jrpc_signer_verify(s, k, sig, key, 1764000000, nonce, body, len);
        else if (oneshot)
            ok += jrpc_sign_compute(out, secret, key, 1764000000, nonce, body, len) == 0;
        else
            ok += jrpc_signer_compute(s, k, out, key, 1764000000, nonce, body, len) == 0;
    }
    jrpc_sign_key_destroy(&k);
    jrpc_signer_destroy(&s);
    printf("mode=%s rounds=%ld ok=%ld body_bytes=%zu\n", mode, n, ok, len);
    return ok == n ? 0 : 1;
}
