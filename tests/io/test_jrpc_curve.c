/* jrpc_curve: key files (keygen round trip, allowlist forms, refusals) and
 * the ZAP decision. Includes the .c to reach zap_decide(). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../io/jrpc_curve.c"

static char dir[64];
static char err[512];

static const char *path_of(const char *name)
{
    static char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

static const char *write_file(const char *name, const char *text, mode_t mode)
{
    const char *p = path_of(name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    chmod(p, mode);
    return p;
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/jrpc-curve-test.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_keygen_round_trip(void **state)
{
    (void)state;
    char pub[41], pub2[41];
    jrpc_curve_keypair_t kp;
    char p[256];
    snprintf(p, sizeof p, "%s", path_of("k1"));   /* path_of reuses its buffer */
    assert_int_equal(jrpc_curve_keygen(p, pub, err, sizeof err), 0);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(jrpc_curve_load_keypair(p, &kp, err, sizeof err), 0);
    assert_string_equal(kp.public_z85, pub);
    assert_int_equal(jrpc_curve_load_public(path_of("k1.pub"), pub2, err, sizeof err), 0);
    assert_string_equal(pub2, pub);
    assert_int_equal(jrpc_curve_keygen(p, NULL, err, sizeof err), -EEXIST);
    /* the keypair is not a public-key file: the secret must not travel */
    assert_int_equal(jrpc_curve_load_public(p, pub2, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "k1:3"));
    jrpc_curve_keypair_wipe(&kp);
}

static void test_keypair_refusals(void **state)
{
    (void)state;
    char a[41], as[41], b[41], bs[41], text[256];
    jrpc_curve_keypair_t kp;
    assert_int_equal(zmq_curve_keypair(a, as), 0);
    assert_int_equal(zmq_curve_keypair(b, bs), 0);
    snprintf(text, sizeof text, "public %s\nsecret %s\n", b, as);
    assert_int_equal(jrpc_curve_load_keypair(write_file("mix", text, 0600), &kp, err, sizeof err),
                     -EINVAL);
    assert_non_null(strstr(err, "not the secret key's"));
    assert_null(strstr(err, as));
    snprintf(text, sizeof text, "public %s\n", a);
    assert_int_equal(jrpc_curve_load_keypair(write_file("half", text, 0600), &kp, err, sizeof err),
                     -EINVAL);
    assert_int_equal(jrpc_curve_load_keypair(write_file("bad", "public short\n", 0600), &kp, err,
                                             sizeof err), -EINVAL);
    assert_non_null(strstr(err, "bad:1"));
    assert_int_equal(jrpc_curve_load_keypair(path_of("missing"), &kp, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "missing"));
    /* readable by others: loaded (with a warning) */
    snprintf(text, sizeof text, "# mine\npublic %s  # trailing comment\nsecret %s\n", a, as);
    assert_int_equal(jrpc_curve_load_keypair(write_file("open", text, 0644), &kp, err, sizeof err), 0);
    assert_string_equal(kp.public_z85, a);
}

static void test_allowlist(void **state)
{
    (void)state;
    char k[3][41], s[41], text[512];
    uint8_t raw[32];
    jrpc_curve_allowlist_t *al;
    for (int i = 0; i < 3; i++)
        assert_int_equal(zmq_curve_keypair(k[i], s), 0);
    /* '#' is Z85's last digit: no 32-byte key can start with it, so a
     * leading '#' is always a comment */
    char hashed[42];
    hashed[0] = '#';
    memcpy(hashed + 1, k[0] + 1, 40);   /* 39 digits and the NUL */
    assert_false(jrpc_curve_key_ok(hashed + 0));
    snprintf(text, sizeof text, "# header\n\n%s\npublic %s\n   %s # dup\n#%s\n", k[0], k[1],
             k[1], k[2]);
    assert_int_equal(jrpc_curve_allowlist_load(write_file("al", text, 0644), &al, err, sizeof err),
                     0);
    assert_int_equal(jrpc_curve_allowlist_size(al), 2);
    zmq_z85_decode(raw, k[0]);
    assert_true(jrpc_curve_allowlist_has(al, raw));
    zmq_z85_decode(raw, k[1]);
    assert_true(jrpc_curve_allowlist_has(al, raw));
    zmq_z85_decode(raw, k[2]);   /* commented out */
    assert_false(jrpc_curve_allowlist_has(al, raw));
    jrpc_curve_allowlist_destroy(&al);
    assert_null(al);

    assert_int_equal(jrpc_curve_allowlist_load(write_file("empty", "# none\n\n", 0644), &al, err,
                                               sizeof err), -EINVAL);
    assert_non_null(strstr(err, "no public key"));
    snprintf(text, sizeof text, "secret %s\n", s);
    assert_int_equal(jrpc_curve_allowlist_load(write_file("sec", text, 0644), &al, err, sizeof err),
                     -EINVAL);
    assert_null(strstr(err, s));
    assert_int_equal(jrpc_curve_allowlist_load(write_file("junk", "hello world\n", 0644), &al, err,
                                               sizeof err), -EINVAL);
    assert_non_null(strstr(err, "junk:1"));
}

/* Builds a ZAP request: version, id, domain, address, identity, mechanism,
 * credentials (NULL: none). */
static int zap_frames(zmq_msg_t *f, const char *version, const char *domain, const char *mech,
                      const uint8_t *cred, size_t credlen)
{
    const char *text[] = { version, "7", domain, "127.0.0.1", "", mech };
    int n = 0;
    for (; n < 6; n++) {
        zmq_msg_init_size(&f[n], strlen(text[n]));
        memcpy(zmq_msg_data(&f[n]), text[n], strlen(text[n]));
    }
    if (cred) {
        zmq_msg_init_size(&f[n], credlen);
        memcpy(zmq_msg_data(&f[n]), cred, credlen);
        n++;
    }
    return n;
}

static bool decide(jrpc_curve_zap_t *z, const char *version, const char *domain,
                   const char *mech, const uint8_t *cred, size_t credlen)
{
    zmq_msg_t f[8];
    char user[41];
    int n = zap_frames(f, version, domain, mech, cred, credlen);
    bool ok = zap_decide(z, f, n, user, sizeof user);
    for (int i = 0; i < n; i++)
        zmq_msg_close(&f[i]);
    return ok;
}

static void test_zap_decide(void **state)
{
    (void)state;
    char pub[41], sec[41], other[41], text[128];
    uint8_t raw[32], raw_other[32];
    jrpc_curve_allowlist_t *al;
    assert_int_equal(zmq_curve_keypair(pub, sec), 0);
    assert_int_equal(zmq_curve_keypair(other, sec), 0);
    zmq_z85_decode(raw, pub);
    zmq_z85_decode(raw_other, other);
    snprintf(text, sizeof text, "%s\n", pub);
    assert_int_equal(jrpc_curve_allowlist_load(write_file("zal", text, 0644), &al, err, sizeof err),
                     0);
    jrpc_curve_zap_t z = { 0 };
    assert_int_equal(jrpc_curve_zap_allow(&z, "clients", &al), 0);
    assert_null(al);

    assert_true(decide(&z, "1.0", "clients", "CURVE", raw, 32));
    assert_false(decide(&z, "1.0", "clients", "CURVE", raw_other, 32));
    assert_false(decide(&z, "1.0", "workers", "CURVE", raw, 32));   /* other domain */
    assert_false(decide(&z, "1.0", "clients", "NULL", NULL, 0));
    assert_false(decide(&z, "1.0", "clients", "PLAIN", raw, 32));
    assert_false(decide(&z, "1.0", "clients", "CURVE", raw, 31));
    assert_false(decide(&z, "2.0", "clients", "CURVE", raw, 32));
    assert_false(decide(&z, "1.0", "clients", "CURVE", NULL, 0));

    /* A reload: the other key in, the first out; an unknown domain refused. */
    snprintf(text, sizeof text, "public %s\n", other);
    assert_int_equal(jrpc_curve_allowlist_load(write_file("zal2", text, 0644), &al, err,
                                               sizeof err), 0);
    assert_int_equal(jrpc_curve_zap_replace(&z, "clients", &al), 0);
    assert_null(al);
    assert_false(decide(&z, "1.0", "clients", "CURVE", raw, 32));
    assert_true(decide(&z, "1.0", "clients", "CURVE", raw_other, 32));
    assert_int_equal(jrpc_curve_allowlist_load(path_of("zal"), &al, err, sizeof err), 0);
    assert_int_equal(jrpc_curve_zap_replace(&z, "workers", &al), -ENOENT);
    assert_null(al);   /* freed even so */
    assert_false(decide(&z, "1.0", "clients", "CURVE", raw, 32));
    for (size_t i = 0; i < z.ndomains; i++) {
        free(z.domains[i].name);
        jrpc_curve_allowlist_destroy(&z.domains[i].keys);
    }
}

int main(void)
{
    jrpc_log_level = JRPC_LOG_ERROR;   /* the refusals above are expected */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keygen_round_trip),
        cmocka_unit_test(test_keypair_refusals),
        cmocka_unit_test(test_allowlist),
        cmocka_unit_test(test_zap_decide),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
