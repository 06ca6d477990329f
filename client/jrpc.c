/* jrpc — the command-line client: call, notify, or send raw bytes. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jrpc_buf.h"
#include "jrpc_client.h"
#include "jrpc_curve.h"
#include "jrpc_json.h"
#include "jrpc_keys.h"
#include "jrpc_sign.h"
#include "jrpc_status_cmd.h"
#include "jrpc_trace.h"


enum { EXIT_OK = 0, EXIT_RPC_ERROR = 1, EXIT_FAIL = 2, EXIT_MAY_HAVE_RUN = 3 };

/* How much longer than the deadline it sends the CLI waits for the answer:
 * the broker answers -32003 at the deadline, and that answer has to travel. */
#define REPLY_SLACK_MS 500

static const char usage_text[] =
"Usage:\n"
"  jrpc [OPTIONS] call METHOD [PARAMS_JSON]\n"
"  jrpc [OPTIONS] notify METHOD [PARAMS_JSON]\n"
"  jrpc [OPTIONS] send [--stream] [FILE]\n"
"  jrpc keygen FILE\n"
"  jrpc bearer-key ID FILE [METHOD_GLOB ...]\n"
"  jrpc status [--url ADMIN_URL] [--timeout MS]\n"
"  jrpc --help | --version\n"
"\n"
"Sends JSON-RPC 2.0 requests to a jrpc broker and prints the answer.\n"
"\n"
"Commands:\n"
"  call METHOD [PARAMS_JSON]   Send {\"jsonrpc\":\"2.0\",\"method\":METHOD,\n"
"                              \"params\":PARAMS_JSON,\"id\":1} and print the raw\n"
"                              JSON of its \"result\". If the answer is an error,\n"
"                              print the raw error object instead (exit 1).\n"
"  notify METHOD [PARAMS_JSON] Send the same without \"id\" (a notification);\n"
"                              prints nothing: the broker does not answer.\n"
"  send [FILE]                 Send the bytes of FILE (or stdin when FILE is\n"
"                              missing or '-') exactly as they are, e.g. a batch,\n"
"                              and print the raw answer followed by a newline\n"
"                              (nothing when the broker has nothing to answer).\n"
"                              With --stream, the broker sends each answer as\n"
"                              it completes and each is printed on its own line\n"
"                              at once, in the order they come; then the end,\n"
"                              {\"answered\":N,\"timed_out\":M}, on stderr. A body\n"
"                              refused whole prints its one error object.\n"
"  keygen FILE                 Make a CURVE keypair: FILE (public and secret\n"
"                              key, mode 0600) and FILE.pub (the public key, to\n"
"                              list in the broker's --client-keys or\n"
"                              --worker-keys, or to give as --server-key /\n"
"                              --broker-key); prints the public key. Never\n"
"                              overwrites a file.\n"
"  bearer-key ID FILE [GLOB...] Make a bearer key: a new random token, printed\n"
"                              (give it to the client: it is not kept), and\n"
"                              the line 'ID bearer-sha256:<hex> [GLOB...]'\n"
"                              appended to the key file FILE (created, mode\n"
"                              0600), which holds only the token's SHA-256.\n"
"                              Send SIGHUP to the broker to take it.\n"
"  status [--url ADMIN_URL]    Print the broker's status from its admin\n"
"                              listener (--admin): version, uptime, listeners,\n"
"                              Redis and the replay guard, bodies open, calls\n"
"                              queued, workers, methods, the last refusals.\n"
"                              ADMIN_URL: http://HOST:PORT, default\n"
"                              $JRPC_ADMIN_URL, else " JRPC_STATUS_DEFAULT_URL ".\n"
"                              Exit 2 when it cannot be read.\n"
"\n"
"PARAMS_JSON must be a JSON array or object; it is checked before anything\n"
"is sent. Omit it to send no \"params\" member.\n"
"\n"
"Options:\n"
"  -u, --url URL          Broker address (default: $JRPC_URL, else\n"
"                         " JRPC_CLIENT_DEFAULT_URL "), one of:\n"
"                           tcp://HOST:PORT            ZeroMQ over TCP\n"
"                           ipc://PATH                 ZeroMQ, Unix socket\n"
"                           http://HOST[:PORT][/PATH]  HTTP/1.1 POST to PATH\n"
"                             (PATH defaults to /rpc, PORT to 80)\n"
"                           https://HOST[:PORT][/PATH] the same over TLS (PORT\n"
"                             defaults to 443); see --cacert\n"
"                           dns+tcp://NAME:PORT        ZeroMQ over TCP to every\n"
"                             address NAME resolves to (A and AAAA)\n"
"                         Repeat --url (or separate URLs by commas, also in\n"
"                         $JRPC_URL) to give several brokers: the body goes to\n"
"                         one; one that cannot be reached is skipped; one\n"
"                         that takes the body and dies before answering:\n"
"                         see --retry.\n"
"      --retry POLICY     What a body whose broker died before answering does\n"
"                         (default: none, or $JRPC_RETRY). none: it is not\n"
"                         sent again, and with several --url it fails with\n"
"                         exit status 3: the call may or may not have run.\n"
"                         safe: the body is sent with an idempotency key (a\n"
"                         fresh random one, unless --idempotency-key gives\n"
"                         one) and sent again, signed anew, to the next broker,\n"
"                         which answers the first run's kept reply instead of\n"
"                         running it twice (brokers sharing one Redis); exit\n"
"                         status 3 when even that cannot tell (the lost run\n"
"                         still holds the key, or too late to resend).\n"
"      --retryable        The body only reads: running it twice is harmless,\n"
"                         so it is sent again after its broker died, without\n"
"                         a key (with any --retry).\n"
"  -t, --timeout-ms N     The deadline of the request, in milliseconds (default\n"
"                         10000): sent to the broker (the ZeroMQ header frame's\n"
"                         timeout_ms, the X-JRPC-Timeout-Ms HTTP header), which\n"
"                         answers what is done by then and -32003 for the rest\n"
"                         of a batch (it caps N at its own --timeout-ms). The\n"
"                         CLI waits 500 ms more for that answer, then gives up.\n"
"  -k, --key-id ID        Sign every request with key ID (default: $JRPC_KEY_ID).\n"
"  -s, --secret SECRET    The key's secret (default: $JRPC_SECRET). Other users\n"
"                         can read a command line (ps): prefer --key-file or\n"
"                         $JRPC_SECRET.\n"
"  -K, --key-file FILE    Take the key from FILE, in the broker's key file\n"
"                         format: lines '<key id> <secret> [method globs...]',\n"
"                         a field starting with '#' starts a comment. With\n"
"                         --key-id, that key; without, the first key of the\n"
"                         file. Not with --secret.\n"
"                         A key needs both an id and a secret; flags win over\n"
"                         $JRPC_KEY_ID and $JRPC_SECRET. With no key at all,\n"
"                         requests go unsigned.\n"
"      --bearer TOKEN     http:// and https://: send 'Authorization: Bearer\n"
"                         TOKEN' (a bearer key's token, jrpc bearer-key)\n"
"                         instead of signing (default: $JRPC_BEARER). Not\n"
"                         with a signing key.\n"
"      --mcp              http:// and https://: speak MCP's Streamable HTTP\n"
"                         transport to an MCP server (the broker's /mcp, or\n"
"                         any other): a session is opened first (initialize,\n"
"                         notifications/initialized) and its Mcp-Session-Id\n"
"                         sent with the call; an answer sent as an event\n"
"                         stream is printed as its last event's data. E.g.\n"
"                         --mcp call tools/call '{\"name\":\"echo\",...}'\n"
"      --curve-secret FILE  Encrypt with CURVE using this client's keypair\n"
"                         (jrpc keygen FILE); its public key must be in the\n"
"                         broker's --client-keys. tcp:// and ipc:// only.\n"
"      --server-key FILE  The broker's public key (FILE.pub of its keypair).\n"
"                         Both CURVE options or neither. A broker that does\n"
"                         not admit the key sends no error: the call just\n"
"                         times out (exit 2).\n"
"      --zmq-engine E     tcp:// and ipc://: who speaks ZMTP, native (default:\n"
"                         our own, no libzmq I/O thread; CURVE always uses\n"
"                         libzmq) or libzmq (default: $JRPC_ZMQ_ENGINE).\n"
"      --cacert FILE      https://: trust the CA certificates of FILE (PEM)\n"
"                         instead of the system's store. The server's\n"
"                         certificate must also match the URL's host name\n"
"                         or IP address.\n"
"      --insecure         https://: do not verify the server's certificate nor\n"
"                         its name (like curl -k; for tests only). There is no\n"
"                         -k: that is --key-id.\n"
"      --cert FILE        https://: present this client certificate (PEM,\n"
"                         a chain may follow it) to a server that asks for\n"
"                         one (mutual TLS).\n"
"      --key FILE         The private key of --cert (PEM), when it is not in\n"
"                         the --cert file. Not the signing key: that is\n"
"                         --key-file.\n"
"                         The TLS options are for https:// URLs only; a TLS\n"
"                         failure (certificate not trusted, name mismatch,\n"
"                         client certificate refused, unreadable file) is\n"
"                         exit status 2.\n"
"      --idempotency-key K  Send the body under this idempotency key (the\n"
"                         Idempotency-Key HTTP header, or the ZeroMQ header\n"
"                         frame): sent again with the same key and the same\n"
"                         bytes, it gets the first run's reply instead of\n"
"                         running twice (the broker needs Redis; docs/SIGNING.md)\n"
"      --traceparent TP   Send this W3C trace context with the request (the\n"
"                         traceparent HTTP header, or the ZeroMQ header frame),\n"
"                         e.g. 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01;\n"
"                         the broker and the workers log it. A malformed one is\n"
"                         a usage error.\n"
"  -h, --help             Show this help and exit.\n"
"  -V, --version          Show the version and exit.\n"
"Options go before the command, so PARAMS_JSON may start with '-'.\n"
"\n"
"Exit status:\n"
"  0  success (call: a result; notify: the broker took it; send: whatever\n"
"     the answer, even a JSON-RPC error such as -32002, is printed raw)\n"
"  1  call (or notify of an invalid request) answered with a JSON-RPC error,\n"
"     which is printed: e.g. -32002 the signature was refused (no key, unknown\n"
"     key, bad signature, clock off, bad nonce; error.data says which and the\n"
"     broker's time), -32005 a replayed nonce, -32006 the broker cannot check\n"
"     nonces right now (over http:// these come with status 401, 409 and 503;\n"
"     any HTTP error status with a JSON-RPC answer counts as an answer)\n"
"  2  usage error (including a key id without a secret or the reverse, a key\n"
"     not in --key-file, an unreadable or malformed --key-file), invalid\n"
"     PARAMS_JSON, unreadable FILE, no answer within the timeout (broker\n"
"     down or unreachable), connection refused or lost, a malformed answer,\n"
"     an HTTP error status without a JSON-RPC answer, or a TLS failure\n"
"     (https://: the server's certificate or name does not verify, the\n"
"     server refused the client certificate or wants one, a --cacert,\n"
"     --cert or --key file cannot be used)\n"
"  3  several brokers (--url repeated, a list, a dns+tcp:// name) or --retry\n"
"     safe: the broker that took the body was lost before answering and it\n"
"     was not safe to send it again: the call may or may not have run\n"
"     (stderr says which broker and why)\n";

static int usage_error(const char *fmt, const char *arg)
{
    fputs("jrpc: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\nTry 'jrpc --help' for more information.\n", stderr);
    return EXIT_FAIL;
}

/* Parses a positive int. Returns 0 or -EINVAL. */
static int parse_ms(const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v <= 0 || v > INT_MAX)
        return -EINVAL;
    *out = (int)v;
    return 0;
}

/* The signing key, from flags, a key file or the environment. */
typedef struct key_opts {
    const char *id;       /* --key-id */
    const char *secret;   /* --secret */
    const char *file;     /* --key-file */
} key_opts_t;

/* Finds key `want` (NULL: the first key) in a key file and copies its id and
 * secret into *id_out and *secret_out (malloc'd). The file is read by
 * jrpc_keys, as the broker reads it, so a line the broker would refuse (a
 * key without a secret, a bad id, an id twice) is refused here too, wherever
 * it is; only the broker's minimum secret length is not required, and a
 * file without keys is "no key". Returns 0, or prints why (never a secret,
 * nor a line that may hold one) and returns -1. */
static int key_from_file(const char *path, const char *want, char **id_out, char **secret_out)
{
    static const jrpc_keys_opts_t opts = { .secret_min = 1, .allow_empty = true };
    jrpc_keys_t *keys = NULL;
    char err[512];
    int rc = jrpc_keys_load(path, &opts, &keys, err, sizeof err);
    if (rc == -EINVAL || rc == -ENOMEM) {
        fprintf(stderr, "jrpc: %s\n", err);
        return -1;
    }
    if (rc < 0) {
        fprintf(stderr, "jrpc: cannot read key file %s: %s\n", path, strerror(-rc));
        return -1;
    }
    const jrpc_key_t *key = want ? jrpc_keys_find(keys, (jrpc_span_t){ want, strlen(want) })
                                 : jrpc_keys_first(keys);
    rc = -1;
    if (key == NULL && want) {
        fprintf(stderr, "jrpc: key '%s' is not in %s\n", want, path);
    } else if (key == NULL) {
        fprintf(stderr, "jrpc: no key in %s\n", path);
    } else if (jrpc_key_is_bearer(key)) {
        fprintf(stderr, "jrpc: key '%s' in %s is a bearer key: it cannot sign (send its token "
                "with --bearer)\n", want, path);
    } else {
        jrpc_span_t id = jrpc_key_id(key), secret = jrpc_key_secret(key);
        *id_out = strndup(id.p, id.n);
        *secret_out = strndup(secret.p, secret.n);
        if (*id_out && *secret_out)
            rc = 0;
        else
            fprintf(stderr, "jrpc: out of memory\n");
    }
    if (rc < 0) {   /* the caller frees only on success */
        free(*id_out);
        if (*secret_out)
            explicit_bzero(*secret_out, strlen(*secret_out));
        free(*secret_out);
        *id_out = *secret_out = NULL;
    }
    jrpc_keys_destroy(&keys);
    return rc;
}

/* The brokers of repeated --url options, joined by commas (reachable to the
 * end: never freed). Returns the list so far, or NULL when out of memory. */
static const char *add_url(const char *url)
{
    static char *list;
    size_t have = list ? strlen(list) : 0;
    char *p = realloc(list, have + 1 + strlen(url) + 1);
    if (p == NULL)
        return NULL;
    sprintf(p + have, "%s%s", have ? "," : "", url);
    return list = p;
}

/* Whether every URL of list (comma-separated, spaces around them allowed)
 * starts with one of prefixes (NULL-terminated). */
static bool every_url(const char *list, const char *const *prefixes)
{
    for (const char *u = list; u; u = strchr(u, ',') ? strchr(u, ',') + 1 : NULL) {
        u += strspn(u, " \t");
        bool ok = false;
        for (const char *const *p = prefixes; *p && !ok; p++)
            ok = strncmp(u, *p, strlen(*p)) == 0;
        if (!ok)
            return false;
    }
    return true;
}

static const char *nonempty_env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* Decides the key from flags, a key file and the environment (flags win).
 * Sets *id_out and *secret_out (malloc'd), both NULL for "unsigned".
 * Returns 0, or prints why and returns -1 (a usage error). */
static int resolve_key(const key_opts_t *k, char **id_out, char **secret_out)
{
    *id_out = *secret_out = NULL;
    if (k->file) {
        if (k->secret) {
            usage_error("--secret and --key-file are exclusive%s", "");
            return -1;
        }
        return key_from_file(k->file, k->id, id_out, secret_out);
    }
    const char *id = k->id ? k->id : nonempty_env("JRPC_KEY_ID");
    const char *secret = k->secret ? k->secret : nonempty_env("JRPC_SECRET");
    if (id == NULL && secret == NULL)
        return 0;
    if (id == NULL) {
        usage_error("a secret (%s) needs a key id: --key-id ID or $JRPC_KEY_ID",
                    k->secret ? "--secret" : "$JRPC_SECRET");
        return -1;
    }
    if (secret == NULL) {
        usage_error("a key id (%s) needs a secret: --secret, $JRPC_SECRET or --key-file",
                    k->id ? "--key-id" : "$JRPC_KEY_ID");
        return -1;
    }
    *id_out = strdup(id);
    *secret_out = strdup(secret);
    if (*id_out == NULL || *secret_out == NULL) {
        fprintf(stderr, "jrpc: out of memory\n");
        return -1;
    }
    return 0;
}

/* Reads a whole file ("-" or NULL: stdin) into buf. Returns 0 or -errno. */
static int read_all(const char *path, jrpc_buf_t *buf)
{
    int rc = 0;
    bool is_stdin = path == NULL || strcmp(path, "-") == 0;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (f == NULL)
        return -errno;
    for (;;) {
        if ((rc = jrpc_buf_reserve(buf, 65536)) < 0)
            goto out;
        size_t n = fread(buf->p + buf->len, 1, buf->cap - buf->len, f);
        buf->len += n;
        if (n == 0)
            break;
    }
    rc = ferror(f) ? -EIO : 0;
out:
    if (!is_stdin)
        fclose(f);
    return rc;
}

/* Builds a request: {"jsonrpc":"2.0","method":M[,"params":P][,"id":1]}.
 * Returns 0, JRPC_JSON_EUNREPR (method not UTF-8) or -ENOMEM. */
static int build_request(jrpc_buf_t *out, const char *method, const char *params, bool with_id)
{
    int rc;
    if ((rc = jrpc_buf_puts(out, "{\"jsonrpc\":\"2.0\",\"method\":")) < 0
        || (rc = jrpc_json_write_string(out, method, strlen(method))) < 0)
        return rc;
    if (params && ((rc = jrpc_buf_puts(out, ",\"params\":")) < 0
                   || (rc = jrpc_buf_puts(out, params)) < 0))
        return rc;
    if (with_id && (rc = jrpc_buf_puts(out, ",\"id\":1")) < 0)
        return rc;
    return jrpc_buf_putc(out, '}');
}

/* PARAMS_JSON must be one JSON value, an array or an object (JSON-RPC 2.0
 * §4.2: params is a structured value). Returns 0 or prints why and -EINVAL. */
static int check_params(const char *params)
{
    size_t n = strlen(params);
    int rc = jrpc_json_validate(params, n, JRPC_JSON_MAX_DEPTH);
    if (rc < 0) {
        fprintf(stderr, "jrpc: PARAMS_JSON is not valid JSON (%s): %s\n",
                jrpc_json_strerror(rc), params);
        return -EINVAL;
    }
    size_t i = strspn(params, " \t\r\n");
    if (params[i] != '[' && params[i] != '{') {
        fprintf(stderr, "jrpc: PARAMS_JSON must be a JSON array or object: %s\n", params);
        return -EINVAL;
    }
    return 0;
}

static int write_line(const char *p, size_t n)
{
    if ((n && fwrite(p, 1, n, stdout) != n) || putchar('\n') == EOF || fflush(stdout) == EOF) {
        fprintf(stderr, "jrpc: cannot write to stdout: %s\n", strerror(errno));
        return EXIT_FAIL;
    }
    return EXIT_OK;
}

/* Prints what a call (or a notification) got back; see the exit codes in
 * usage_text. */
static int print_answer(const jrpc_buf_t *reply, const char *url, bool expect_result)
{
    jrpc_span_t v;
    if (jrpc_json_member(reply->p, reply->len, "error", &v) == 0) {
        int rc = write_line(v.p, v.n);
        return rc == EXIT_OK ? EXIT_RPC_ERROR : rc;
    }
    if (expect_result && jrpc_json_member(reply->p, reply->len, "result", &v) == 0)
        return write_line(v.p, v.n);
    fprintf(stderr, "jrpc: unexpected answer from %s: %.*s\n", url,
            reply->len > 200 ? 200 : (int)reply->len, reply->p ? reply->p : "");
    return EXIT_FAIL;
}

/* send --stream: each answer on its own line as it comes. */
static void print_streamed(void *arg, uint32_t pos, const char *json, size_t len)
{
    (void)arg;
    (void)pos;
    write_line(json, len);   /* flushed: the line shows at once */
}

enum { OPT_CURVE_SECRET = 0x100, OPT_SERVER_KEY, OPT_TRACEPARENT, OPT_CACERT, OPT_INSECURE,
       OPT_CERT, OPT_KEY, OPT_BEARER, OPT_IDEM, OPT_ZMQ_ENGINE,
       OPT_RETRY, OPT_RETRYABLE, OPT_MCP };

/* A bearer token as RFC 6750 has it (b64token), at most 240 characters. */
static bool bearer_ok(const char *t)
{
    size_t n = strlen(t);
    if (n == 0 || n > JRPC_KEYS_TOKEN_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)t[i]) && strchr("-._~+/=", t[i]) == NULL)
            return false;
    return true;
}

/* Whether the key file open at fd already has a line for key id: 1 yes,
 * 0 no, -errno when it cannot be read (or is larger than 64 MiB). */
static int has_key_id(int fd, const char *id)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (st.st_size > (64 << 20))
        return -EFBIG;
    size_t n = (size_t)st.st_size, got = 0;
    char *text = malloc(n ? n : 1);
    if (text == NULL)
        return -ENOMEM;
    while (got < n) {
        ssize_t r = pread(fd, text + got, n - got, (off_t)got);
        if (r <= 0) {
            int e = r < 0 ? errno : EIO;
            free(text);
            return -e;
        }
        got += (size_t)r;
    }
    bool has = jrpc_keys_text_has_id(text, n, (jrpc_span_t){ id, strlen(id) });
    explicit_bzero(text, n);   /* signing secrets may be in it */
    free(text);
    return has;
}

/* jrpc bearer-key ID FILE [GLOB...]: a new token on stdout, its hash's line
 * appended to FILE (created 0600); an id FILE already has is refused, FILE
 * unchanged. The token is the nonce alphabet, 43 characters: 258 random
 * bits. */
static int bearer_key(int nargs, char **args)
{
    if (nargs < 2)
        return usage_error("usage: jrpc bearer-key ID FILE [METHOD_GLOB ...]%s", "");
    char token[44], line[JRPC_KEYS_ID_MAX + 128];
    if (jrpc_sign_new_nonce(token, 43) < 0) {
        fprintf(stderr, "jrpc: no randomness\n");
        return EXIT_FAIL;
    }
    token[43] = '\0';
    int n = jrpc_keys_bearer_line((jrpc_span_t){ args[0], strlen(args[0]) },
                                  (jrpc_span_t){ token, 43 }, line, sizeof line);
    if (n < 0)
        return usage_error("bearer-key: '%s' is not a key id (1 to 64 of [A-Za-z0-9_.-])", args[0]);
    for (int g = 2; g < nargs; g++)
        for (const char *c = args[g]; *c; c++)
            if ((unsigned char)*c <= 0x20 || *c == 0x7f || *c == '#')
                return usage_error("bearer-key: method glob '%s' has a space, control "
                                   "character or '#'", args[g]);
    int fd = open(args[1], O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    struct stat st;
    char last = '\n';
    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 0 && pread(fd, &last, 1, st.st_size - 1) != 1)
        last = '\n';
    int dup = fd >= 0 ? has_key_id(fd, args[0]) : 0;
    FILE *f = fd < 0 || dup != 0 ? NULL : fdopen(fd, "a");
    if (f == NULL) {
        if (dup > 0)   /* a second line would make the file fail to load: nothing written */
            fprintf(stderr, "jrpc: bearer-key: key id '%s' is already in %s: choose another "
                    "id, or remove its line first (file unchanged)\n", args[0], args[1]);
        else
            fprintf(stderr, "jrpc: cannot %s %s: %s\n", dup < 0 ? "read" : "open", args[1],
                    strerror(dup < 0 ? -dup : errno));
        if (fd >= 0)
            close(fd);
        return EXIT_FAIL;
    }
    if (last != '\n')   /* a last line without its newline stays a line of its own */
        fputc('\n', f);
    fputs(line, f);
    for (int g = 2; g < nargs; g++)
        fprintf(f, " %s", args[g]);
    fputc('\n', f);
    if (fclose(f) != 0) {
        fprintf(stderr, "jrpc: cannot write %s: %s\n", args[1], strerror(errno));
        return EXIT_FAIL;
    }
    fprintf(stderr, "jrpc: appended bearer key '%s' to %s (reload the broker: SIGHUP)\n",
            args[0], args[1]);
    return write_line(token, 43);
}

/* jrpc keygen FILE: writes FILE and FILE.pub, prints the public key. */
static int keygen(int nargs, char **args)
{
    if (nargs != 1)
        return usage_error("usage: jrpc keygen FILE%s", "");
    char pub[JRPC_CURVE_Z85_LEN + 1], err[512];
    if (jrpc_curve_keygen(args[0], pub, err, sizeof err) < 0) {
        fprintf(stderr, "jrpc: %s\n", err);
        return EXIT_FAIL;
    }
    fprintf(stderr, "jrpc: wrote %s (keypair, mode 0600) and %s.pub (public key)\n",
            args[0], args[0]);
    return write_line(pub, strlen(pub));
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "url",        required_argument, NULL, 'u' },
        { "timeout-ms", required_argument, NULL, 't' },
        { "key-id",     required_argument, NULL, 'k' },
        { "secret",     required_argument, NULL, 's' },
        { "key-file",   required_argument, NULL, 'K' },
        { "curve-secret", required_argument, NULL, OPT_CURVE_SECRET },
        { "server-key", required_argument, NULL, OPT_SERVER_KEY },
        { "traceparent", required_argument, NULL, OPT_TRACEPARENT },
        { "cacert",     required_argument, NULL, OPT_CACERT },
        { "insecure",   no_argument,       NULL, OPT_INSECURE },
        { "cert",       required_argument, NULL, OPT_CERT },
        { "key",        required_argument, NULL, OPT_KEY },
        { "bearer",     required_argument, NULL, OPT_BEARER },
        { "mcp",        no_argument,       NULL, OPT_MCP },
        { "idempotency-key", required_argument, NULL, OPT_IDEM },
        { "zmq-engine", required_argument, NULL, OPT_ZMQ_ENGINE },
        { "retry",      required_argument, NULL, OPT_RETRY },
        { "retryable",  no_argument,       NULL, OPT_RETRYABLE },
        { "help",       no_argument,       NULL, 'h' },
        { "version",    no_argument,       NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    const char *url = getenv("JRPC_URL");
    const char *retry = NULL;
    int timeout_ms = JRPC_CLIENT_DEFAULT_TIMEOUT_MS;
    int opt, ret = EXIT_FAIL;
    jrpc_client_t *c = NULL;
    jrpc_buf_t body, reply;
    key_opts_t key = { 0 };
    char *key_id = NULL, *secret = NULL;
    const char *curve_secret = NULL, *server_key = NULL;
    jrpc_client_opts_t opts = { .timeout_ms = 0 };   /* the TLS files and --insecure */
    jrpc_client_header_t hdr = { 0 };
    jrpc_curve_keypair_t curve_kp = { { 0 }, { 0 } };
    char server_public[JRPC_CURVE_Z85_LEN + 1];

    jrpc_buf_init(&body);
    jrpc_buf_init(&reply);
    if (url == NULL || *url == '\0')
        url = JRPC_CLIENT_DEFAULT_URL;

    opterr = 0;
    /* '+': stop at the command, so PARAMS_JSON like -1 is not an option */
    while ((opt = getopt_long(argc, argv, "+:u:t:k:s:K:hV", longopts, NULL)) != -1) {
        switch (opt) {
        case 'u':
            if ((url = add_url(optarg)) == NULL) {
                fprintf(stderr, "jrpc: out of memory\n");
                return EXIT_FAIL;
            }
            break;
        case OPT_RETRY:
            retry = optarg;
            break;
        case OPT_RETRYABLE:
            hdr.retryable = 1;
            break;
        case 't':
            if (parse_ms(optarg, &timeout_ms) < 0)
                return usage_error("--timeout-ms wants a positive number of "
                                   "milliseconds, not '%s'", optarg);
            break;
        case 'k':
            if (*optarg == '\0')
                return usage_error("--key-id wants a key id%s", "");
            key.id = optarg;
            break;
        case 's':
            if (*optarg == '\0')
                return usage_error("--secret wants a secret%s", "");
            key.secret = optarg;
            break;
        case 'K':
            key.file = optarg;
            break;
        case OPT_TRACEPARENT:
            if (!jrpc_traceparent_valid(optarg, strlen(optarg)))
                return usage_error("--traceparent: '%s' is not a W3C traceparent "
                                   "(00-<32 hex trace-id>-<16 hex parent-id>-<2 hex flags>)", optarg);
            hdr.traceparent = (jrpc_span_t){ optarg, strlen(optarg) };
            break;
        case OPT_CURVE_SECRET:
            curve_secret = optarg;
            break;
        case OPT_SERVER_KEY:
            server_key = optarg;
            break;
        case OPT_CACERT:
            opts.cacert = optarg;
            break;
        case OPT_INSECURE:
            opts.insecure = 1;
            break;
        case OPT_CERT:
            opts.cert = optarg;
            break;
        case OPT_KEY:
            opts.key = optarg;
            break;
        case OPT_BEARER:
            opts.bearer = optarg;
            break;
        case OPT_MCP:
            opts.mcp = 1;
            break;
        case OPT_ZMQ_ENGINE:
            if (strcmp(optarg, "native") != 0 && strcmp(optarg, "libzmq") != 0)
                return usage_error("--zmq-engine wants native or libzmq, not '%s'", optarg);
            opts.zmq_engine = optarg;
            break;
        case OPT_IDEM:
            if (*optarg == '\0' || strlen(optarg) > 255)
                return usage_error("--idempotency-key wants 1 to 255 characters%s", "");
            hdr.idem_key = (jrpc_span_t){ optarg, strlen(optarg) };
            break;
        case 'h':
            fputs(usage_text, stdout);
            return EXIT_OK;
        case 'V':
            puts("jrpc " JRPC_VERSION);
            return EXIT_OK;
        case ':':
            return usage_error("option '%s' needs an argument", argv[optind - 1]);
        default:
            if (optopt) {
                char shortopt[3] = { '-', (char)optopt, '\0' };
                return usage_error("unknown option '%s'", shortopt);
            }
            return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return usage_error("missing command%s (call, notify, send, keygen or bearer-key)", "");
    if (strcmp(argv[optind], "keygen") == 0)
        return keygen(argc - optind - 1, argv + optind + 1);
    if (strcmp(argv[optind], "bearer-key") == 0)
        return bearer_key(argc - optind - 1, argv + optind + 1);
    if (strcmp(argv[optind], "status") == 0)
        return jrpc_status_cmd(argc - optind - 1, argv + optind + 1, stdout);
    if (opts.mcp && strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
        return usage_error("--mcp is for http:// and https:// URLs, not '%s'", url);
    if (opts.bearer == NULL)
        opts.bearer = nonempty_env("JRPC_BEARER");
    if (opts.zmq_engine == NULL && (opts.zmq_engine = nonempty_env("JRPC_ZMQ_ENGINE")) &&
        strcmp(opts.zmq_engine, "native") != 0 && strcmp(opts.zmq_engine, "libzmq") != 0)
        return usage_error("$JRPC_ZMQ_ENGINE wants native or libzmq, not '%s'", opts.zmq_engine);
    if (retry == NULL)
        retry = nonempty_env("JRPC_RETRY");
    if (retry && strcmp(retry, "safe") == 0)
        opts.retry = JRPC_CLIENT_RETRY_SAFE;
    else if (retry && strcmp(retry, "none") != 0)
        return usage_error("--retry ($JRPC_RETRY) wants safe or none, not '%s'", retry);
    if (opts.bearer && !every_url(url, (const char *const[]){ "http://", "https://", NULL }))
        return usage_error("--bearer ($JRPC_BEARER) is for http:// and https:// URLs, not '%s'",
                           url);
    if (opts.bearer && !bearer_ok(opts.bearer))
        return usage_error("--bearer: a token is 1 to 240 characters of "
                           "[A-Za-z0-9._~+/=-]%s", "");
    if ((curve_secret == NULL) != (server_key == NULL))
        return usage_error("--curve-secret and --server-key go together%s", "");
    if (curve_secret && !every_url(url, (const char *const[]){ "tcp://", "ipc://", "dns+tcp://", NULL }))
        return usage_error("CURVE (--curve-secret) is for tcp:// and ipc:// URLs, not '%s'", url);
    bool tls_opt = opts.cacert || opts.insecure || opts.cert || opts.key;
    if (tls_opt && !every_url(url, (const char *const[]){ "https://", NULL }))
        return usage_error("--cacert, --insecure, --cert and --key are for https:// URLs, "
                           "not '%s'", url);
    if (opts.key && opts.cert == NULL)
        return usage_error("--key is the private key of --cert: give --cert FILE too%s", "");
    if (curve_secret) {
        char err[512];
        if (jrpc_curve_load_keypair(curve_secret, &curve_kp, err, sizeof err) < 0 ||
            jrpc_curve_load_public(server_key, server_public, err, sizeof err) < 0) {
            fprintf(stderr, "jrpc: %s\n", err);
            goto out;
        }
    }
    if (resolve_key(&key, &key_id, &secret) < 0)
        goto out;
    if (opts.bearer && key_id) {
        usage_error("--bearer and a signing key are exclusive (one proves who calls)%s", "");
        goto out;
    }

    const char *cmd = argv[optind++];
    int nargs = argc - optind;
    char **args = argv + optind;
    bool is_call = strcmp(cmd, "call") == 0, is_notify = strcmp(cmd, "notify") == 0;
    bool stream = false;

    if (is_call || is_notify) {
        if (nargs < 1 || nargs > 2) {
            usage_error("usage: jrpc %s METHOD [PARAMS_JSON]", cmd);
            goto out;
        }
        const char *params = nargs == 2 ? args[1] : NULL;
        if (params && check_params(params) < 0)
            goto out;
        int rc = build_request(&body, args[0], params, is_call);
        if (rc == JRPC_JSON_EUNREPR) {
            fprintf(stderr, "jrpc: METHOD is not valid UTF-8\n");
            goto out;
        }
        if (rc < 0) {
            fprintf(stderr, "jrpc: out of memory\n");
            goto out;
        }
    } else if (strcmp(cmd, "send") == 0) {
        if (nargs >= 1 && strcmp(args[0], "--stream") == 0) {
            stream = true;
            nargs--;
            args++;
        }
        if (nargs > 1) {
            usage_error("usage: jrpc send [--stream] [FILE]%s", "");
            goto out;
        }
        const char *path = nargs == 1 ? args[0] : NULL;
        int rc = read_all(path, &body);
        if (rc < 0) {
            fprintf(stderr, "jrpc: cannot read %s: %s\n",
                    path && strcmp(path, "-") != 0 ? path : "stdin", strerror(-rc));
            goto out;
        }
    } else {
        usage_error("unknown command '%s' (call, notify, send or keygen)", cmd);
        goto out;
    }

    opts.timeout_ms = timeout_ms;
    if ((c = jrpc_client_new(url, &opts)) == NULL) {
        fprintf(stderr, "jrpc: %s: %s\n", url, jrpc_client_strerror(-errno));
        goto out;
    }
    if (curve_secret) {
        int rc = jrpc_client_set_curve(c, curve_kp.public_z85, curve_kp.secret_z85, server_public);
        jrpc_curve_keypair_wipe(&curve_kp);
        if (rc < 0) {
            fprintf(stderr, "jrpc: cannot set up CURVE for %s: %s\n", url, jrpc_client_strerror(rc));
            goto out;
        }
    }
    if (key_id) {
        int rc = jrpc_client_set_key(c, key_id, secret);
        if (rc == -EINVAL) {
            usage_error("the key id '%s' has spaces or control characters", key_id);
            goto out;
        }
        if (rc < 0) {
            fprintf(stderr, "jrpc: out of memory\n");
            goto out;
        }
    }
    /* The deadline goes to the broker (header frame, X-JRPC-Timeout-Ms), so
     * that it answers the calls that made it and -32003 for the others; we
     * wait a little longer than that for its answer to arrive. */
    hdr.timeout_ms = (uint32_t)timeout_ms;
    int wait_ms = timeout_ms > INT_MAX - REPLY_SLACK_MS ? INT_MAX : timeout_ms + REPLY_SLACK_MS;
    int src = stream ? jrpc_client_send_stream(c, body.p, body.len, &hdr, print_streamed, NULL,
                                               &reply, wait_ms)
                     : jrpc_client_send(c, body.p, body.len, &hdr, &reply, wait_ms);
    if (src == -ETIMEDOUT) {
        fprintf(stderr, "jrpc: %s; the broker was asked to answer within %d ms\n",
                jrpc_client_last_error(c), timeout_ms);
        goto out;
    } else if (src == JRPC_CLIENT_EMAYHAVERUN) {
        fprintf(stderr, "jrpc: %s\n", jrpc_client_last_error(c));
        ret = EXIT_MAY_HAVE_RUN;
        goto out;
    } else if (src < 0) {
        fprintf(stderr, "jrpc: %s\n", jrpc_client_last_error(c));
        goto out;
    }

    if (is_call) {
        ret = reply.len ? print_answer(&reply, url, true) : EXIT_FAIL;
        if (reply.len == 0)
            fprintf(stderr, "jrpc: %s sent no answer to a call\n", url);
    } else if (is_notify) {
        /* The broker answers a notification only when it is not a valid
         * request (e.g. -32600 with "id": null): show that. */
        ret = reply.len ? print_answer(&reply, url, false) : EXIT_OK;
    } else if (stream && reply.len && reply.p[0] == '{' &&
               jrpc_json_member(reply.p, reply.len, "answered", &(jrpc_span_t){ 0 }) == 0) {
        fprintf(stderr, "jrpc: end %.*s\n", (int)reply.len, reply.p);
        ret = EXIT_OK;
    } else {
        ret = reply.len ? write_line(reply.p, reply.len) : EXIT_OK;
    }
out:
    jrpc_curve_keypair_wipe(&curve_kp);
    if (secret) {
        explicit_bzero(secret, strlen(secret));
        free(secret);
    }
    free(key_id);
    jrpc_client_destroy(&c);
    jrpc_buf_dispose(&body);
    jrpc_buf_dispose(&reply);
    return ret;
}
