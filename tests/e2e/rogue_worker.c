/* rogue_worker — a hostile worker for the end-to-end tests: speaks the
 * worker protocol (proto/PROTOCOL.md) from a DEALER, built by hand with
 * msgpack-c, and abuses what a READY may claim.
 *
 *   rogue_worker --connect EP [--credit N] [--methods N] [--prefix P]
 *                [--method NAME]... [--name-hex HEX] [--readies K]
 *                [--mode silent|noread] [--hb-ms N] [--run-ms N]
 *
 * It sends K READYs in turn (default 1) on one socket, each a new session
 * replacing the last, READY i listing --method names and N names
 * "P<i>_<j>" (new names each time), with credit N (default 2^32-1) and,
 * with --name-hex, a "name" option of those raw bytes. Then, for --run-ms
 * (default: until killed), it sends a HEARTBEAT every --hb-ms (default 200)
 * and, in mode "silent" (default), reads what the broker sends and never
 * answers a call; in mode "noread" it never reads at all, and its receive
 * queue and TCP buffer are tiny, so what the broker sends it piles up at the
 * broker. Prints one line per event on stdout, flushed: "ready K",
 * "request ITEMS" (silent), "disconnect" (silent). Exit status 0, 2 on bad
 * usage. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <msgpack.h>
#include <zmq.h>

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static void pack_str(msgpack_packer *pk, const char *p, size_t n)
{
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, p, n);
}

int main(int argc, char **argv)
{
    const char *url = NULL, *prefix = "rogue", *mode = "silent", *name_hex = NULL;
    const char *extra[64];
    unsigned nextra = 0;
    uint32_t credit = UINT32_MAX;
    long nmethods = 0, readies = 1, hb_ms = 200, run_ms = -1;
    for (int i = 1; i < argc; i += 2) {   /* --option value pairs */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL)
            goto usage;
        if (strcmp(a, "--connect") == 0) url = v;
        else if (strcmp(a, "--credit") == 0) credit = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--methods") == 0) nmethods = atol(v);
        else if (strcmp(a, "--prefix") == 0) prefix = v;
        else if (strcmp(a, "--method") == 0 && nextra < 64) extra[nextra++] = v;
        else if (strcmp(a, "--name-hex") == 0) name_hex = v;
        else if (strcmp(a, "--readies") == 0) readies = atol(v);
        else if (strcmp(a, "--mode") == 0) mode = v;
        else if (strcmp(a, "--hb-ms") == 0) hb_ms = atol(v);
        else if (strcmp(a, "--run-ms") == 0) run_ms = atol(v);
        else goto usage;
    }
    if (url == NULL || (nmethods == 0 && nextra == 0) || readies < 1 || hb_ms < 1 ||
        (strcmp(mode, "silent") != 0 && strcmp(mode, "noread") != 0))
        goto usage;
    char name[256];
    size_t name_len = 0;
    if (name_hex) {
        for (const char *p = name_hex; p[0] && p[1] && name_len < sizeof name; p += 2) {
            if (hexval(p[0]) < 0 || hexval(p[1]) < 0)
                goto usage;
            name[name_len++] = (char)(hexval(p[0]) << 4 | hexval(p[1]));
        }
    }

    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    if (strcmp(mode, "noread") == 0) { /* stop reading at TCP level too: the queue stays at the broker */
        int one = 1, small = 4096;
        zmq_setsockopt(s, ZMQ_RCVHWM, &one, sizeof one);
        zmq_setsockopt(s, ZMQ_RCVBUF, &small, sizeof small);
    }
    if (zmq_connect(s, url) != 0) {
        fprintf(stderr, "rogue_worker: connect %s: %s\n", url, zmq_strerror(zmq_errno()));
        return 2;
    }
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    for (long r = 0; r < readies; r++) {
        msgpack_sbuffer_clear(&sb);
        msgpack_pack_array(&pk, name_hex ? 5 : 4);
        msgpack_pack_uint8(&pk, 1);
        msgpack_pack_uint8(&pk, 1);
        msgpack_pack_uint32(&pk, credit);
        msgpack_pack_array(&pk, (uint32_t)(nmethods + nextra));
        for (unsigned k = 0; k < nextra; k++)
            pack_str(&pk, extra[k], strlen(extra[k]));
        for (long k = 0; k < nmethods; k++) {
            char m[128];
            int n = snprintf(m, sizeof m, "%s%ld_%ld", prefix, r, k);
            pack_str(&pk, m, (size_t)n);
        }
        if (name_hex) {
            msgpack_pack_map(&pk, 1);
            pack_str(&pk, "name", 4);
            pack_str(&pk, name, name_len);
        }
        if (zmq_send(s, sb.data, sb.size, 0) < 0) {
            fprintf(stderr, "rogue_worker: send: %s\n", zmq_strerror(zmq_errno()));
            return 2;
        }
        printf("ready %ld\n", r + 1);
        fflush(stdout);
    }
    static const char hb[] = { (char)0x92, 0x01, 0x04 };
    int64_t start = now_ms(), next_hb = start + hb_ms;
    int silent = strcmp(mode, "silent") == 0;
    char buf[1 << 16];
    while (run_ms < 0 || now_ms() - start < run_ms) {
        int64_t t = now_ms();
        if (t >= next_hb) {
            zmq_send(s, hb, sizeof hb, ZMQ_DONTWAIT);
            next_hb = t + hb_ms;
        }
        if (!silent) {
            struct timespec ts = { 0, 20 * 1000000L };
            nanosleep(&ts, NULL);
            continue;
        }
        zmq_pollitem_t pi = { s, 0, ZMQ_POLLIN, 0 };
        if (zmq_poll(&pi, 1, 20) <= 0)
            continue;
        int n = zmq_recv(s, buf, sizeof buf, ZMQ_DONTWAIT);
        if (n < 3 || (uint8_t)buf[1] != 1)
            continue;
        if (buf[2] == 5) {
            printf("disconnect\n");
        } else if (buf[2] == 2) {
            /* [1, 2, items]: the items array header follows */
            uint8_t h = (uint8_t)buf[3];
            uint32_t items = (h & 0xf0) == 0x90 ? h & 15u
                           : h == 0xdc ? (uint32_t)((uint8_t)buf[4] << 8 | (uint8_t)buf[5])
                           : (uint32_t)((uint8_t)buf[4] << 24 | (uint8_t)buf[5] << 16 |
                                        (uint8_t)buf[6] << 8 | (uint8_t)buf[7]);
            printf("request %u\n", items);
        }
        fflush(stdout);
    }
    msgpack_sbuffer_destroy(&sb);
    zmq_close(s);
    zmq_ctx_term(ctx);
    return 0;
usage:
    fprintf(stderr, "usage: rogue_worker --connect EP [--credit N] [--methods N] [--prefix P]\n"
                    "       [--method NAME]... [--name-hex HEX] [--readies K]\n"
                    "       [--mode silent|noread] [--hb-ms N] [--run-ms N]\n");
    return 2;
}
