#include "jrpc_conf.h"

#include <errno.h>
#include <getopt.h>
#include <ini.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jrpc_log.h"

const char *const jrpc_conf_log_levels[] = { "debug", "info", "warn", "error", NULL };
const char *const jrpc_conf_log_formats[] = { "kv", "json", NULL };

/* Where a value came from; a higher rank wins. */
enum { RANK_DEFAULT, RANK_FILE, RANK_ENV, RANK_FLAG };

typedef struct slot {
    int          rank;       /* of the value held */
    char        *src;        /* "--name", "env JRPC_NAME", "FILE:LINE: name" (owned) */
    char       **vals;       /* the value, or a list's elements (owned) */
    size_t       nvals;
    const char **listv;      /* a LIST's dest->v (owned array, borrowed strings) */
    int          file_line;  /* where the file set it (duplicate keys) */
} slot_t;

struct jrpc_conf {
    const jrpc_conf_info_t *info;
    const jrpc_conf_opt_t  *opts;
    size_t                  nopts;
    slot_t                 *slots;
    char                   *ignored;    /* unknown JRPC_* names, comma-separated */
    int                     errors;     /* reported so far */
    bool                    oom;
    /* the file being read */
    const char             *path;
    FILE                   *fp;
    int                     lineno;
    char                   *line;       /* getline() buffer */
    size_t                  linecap;
    char                   *bad_section;/* last unknown [section] reported */
};

/* ---- small helpers ---- */

static char *xasprintf(jrpc_conf_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static char *xasprintf(jrpc_conf_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) {
        s = NULL;
        c->oom = true;
    }
    va_end(ap);
    return s;
}

static void report(jrpc_conf_t *c, const char *src, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void report(jrpc_conf_t *c, const char *src, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: %s: ", c->info->prog, src);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    c->errors++;
}

static void env_name(const char *name, char *out, size_t cap)
{
    size_t k = (size_t)snprintf(out, cap, "JRPC_");
    for (const char *p = name; *p && k + 1 < cap; p++)
        out[k++] = *p == '-' ? '_' : (char)(*p >= 'a' && *p <= 'z' ? *p - 'a' + 'A' : *p);
    out[k] = '\0';
}

static int find_opt(const jrpc_conf_t *c, const char *name)
{
    for (size_t i = 0; i < c->nopts; i++)
        if (strcmp(c->opts[i].name, name) == 0)
            return (int)i;
    return -1;
}

static void slot_clear(slot_t *s)
{
    for (size_t i = 0; i < s->nvals; i++)
        free(s->vals[i]);
    free(s->vals);
    s->vals = NULL;
    s->nvals = 0;
}

static int slot_push(jrpc_conf_t *c, slot_t *s, const char *v, size_t n)
{
    char **nv = realloc(s->vals, (s->nvals + 1) * sizeof *nv);
    char *dup = strndup(v, n);
    if (nv == NULL || dup == NULL) {
        if (nv)
            s->vals = nv;
        free(dup);
        c->oom = true;
        return -ENOMEM;
    }
    s->vals = nv;
    s->vals[s->nvals++] = dup;
    return 0;
}

static bool is_sep(char ch)
{
    return ch == ',' || ch == ' ' || ch == '\t';
}

/* ---- values ---- */

/* Checks one (non-list) value of o; reports with src. Returns 0 or -1. */
static int check_one(jrpc_conf_t *c, const jrpc_conf_opt_t *o, const char *src, const char *v)
{
    char err[256];
    if (*v == '\0') {
        report(c, src, "empty value");
        return -1;
    }
    switch (o->kind) {
    case JRPC_CONF_UINT: {
        char *end;
        errno = 0;
        unsigned long long n = strtoull(v, &end, 10);
        if (v[0] < '0' || v[0] > '9' || *end != '\0' || errno != 0 || n < o->min || n > o->max) {
            report(c, src, "'%s' is not a whole number from %u to %u", v, o->min, o->max);
            return -1;
        }
        return 0;
    }
    case JRPC_CONF_CHOICE:
        for (size_t i = 0; o->choices[i]; i++)
            if (strcmp(v, o->choices[i]) == 0)
                return 0;
        {
            char list[256] = "";
            size_t k = 0;
            for (size_t i = 0; o->choices[i] && k < sizeof list; i++)
                k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", i ? ", " : "",
                                      o->choices[i]);
            report(c, src, "'%s' is not one of %s", v, list);
        }
        return -1;
    case JRPC_CONF_ONOFF:
        if (strcmp(v, "on") == 0 || strcmp(v, "off") == 0)
            return 0;
        report(c, src, "'%s' is not on or off", v);
        return -1;
    default:
        if (o->check && o->check(v, err, sizeof err) < 0) {
            report(c, src, "%s", err);
            return -1;
        }
        return 0;
    }
}

/* Validates value for option i from a source of rank, and keeps it when
 * that rank is at least the one held (a repeated flag: the last wins, a
 * repeated LIST flag adds its elements). src is copied. */
static void set_value(jrpc_conf_t *c, size_t i, int rank, const char *src, const char *value)
{
    const jrpc_conf_opt_t *o = &c->opts[i];
    slot_t *s = &c->slots[i];
    if (o->kind == JRPC_CONF_LIST) {
        /* Split first: every element is checked, and an empty list is an error. */
        slot_t tmp = { 0 };
        const char *p = value;
        int bad = 0;
        while (*p) {
            while (is_sep(*p))
                p++;
            const char *start = p;
            while (*p && !is_sep(*p))
                p++;
            if (p == start)
                break;
            if (slot_push(c, &tmp, start, (size_t)(p - start)) < 0)
                break;
            bad |= check_one(c, o, src, tmp.vals[tmp.nvals - 1]);
        }
        if (tmp.nvals == 0 && !c->oom) {
            report(c, src, "empty value");
            bad = -1;
        }
        if (bad || c->oom || rank < s->rank) {
            slot_clear(&tmp);
            return;
        }
        if (rank > s->rank)
            slot_clear(s);
        for (size_t k = 0; k < tmp.nvals; k++) {   /* move */
            char **nv = realloc(s->vals, (s->nvals + 1) * sizeof *nv);
            if (nv == NULL) {
                c->oom = true;
                slot_clear(&tmp);
                return;
            }
            s->vals = nv;
            s->vals[s->nvals++] = tmp.vals[k];
            tmp.vals[k] = NULL;
        }
        slot_clear(&tmp);
    } else {
        if (o->kind != JRPC_CONF_FLAG && check_one(c, o, src, value) < 0)
            return;
        if (rank < s->rank)
            return;
        slot_clear(s);
        if (slot_push(c, s, value, strlen(value)) < 0)
            return;
    }
    s->rank = rank;
    free(s->src);
    s->src = strdup(src);
    if (s->src == NULL)
        c->oom = true;
}

/* ---- the command line ---- */

static void load_argv(jrpc_conf_t *c, int argc, char **argv)
{
    struct option *lo = calloc(c->nopts + 1, sizeof *lo);
    if (lo == NULL) {
        c->oom = true;
        return;
    }
    for (size_t i = 0; i < c->nopts; i++) {
        lo[i].name = c->opts[i].name;
        lo[i].has_arg = c->opts[i].kind == JRPC_CONF_FLAG ? no_argument : required_argument;
        lo[i].val = 0x100 + (int)i;
    }
    int ch;
    opterr = 0;
    optind = 0;   /* glibc: a full re-initialisation, so a second load works */
    while ((ch = getopt_long(argc, argv, ":", lo, NULL)) != -1) {
        if (ch == '?' || ch == ':') {
            const char *arg = argv[optind - 1];
            fprintf(stderr, ch == ':' ? "%s: option '%s' needs a value\n"
                                      : "%s: unknown option '%s'\n", c->info->prog, arg);
            c->errors++;
            continue;
        }
        size_t i = (size_t)(ch - 0x100);
        char src[128];
        snprintf(src, sizeof src, "--%s", c->opts[i].name);
        set_value(c, i, RANK_FLAG, src, c->opts[i].kind == JRPC_CONF_FLAG ? "on" : optarg);
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", c->info->prog, argv[optind]);
        c->errors++;
    }
    free(lo);
    if (c->errors)
        fprintf(stderr, "Try '%s --help'.\n", c->info->prog);
}

/* ---- the environment ---- */

static void load_env(jrpc_conf_t *c, char **envp)
{
    char want[128];
    for (char **e = envp; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (strncmp(*e, "JRPC_", 5) != 0 || eq == NULL)
            continue;
        size_t n = (size_t)(eq - *e);
        int found = -1;
        for (size_t i = 0; i < c->nopts && found < 0; i++) {
            if (c->opts[i].kind == JRPC_CONF_FLAG)
                continue;
            env_name(c->opts[i].name, want, sizeof want);
            if (strlen(want) == n && memcmp(want, *e, n) == 0)
                found = (int)i;
        }
        if (found < 0) {
            /* Another program's variable (jrpc-worker and jrpc-broker may
             * share a container, the jrpc CLI reads JRPC_URL): listed, not
             * an error. */
            char *more = xasprintf(c, "%s%s%.*s", c->ignored ? c->ignored : "",
                                   c->ignored ? "," : "", (int)n, *e);
            if (more) {
                free(c->ignored);
                c->ignored = more;
            }
            continue;
        }
        char src[160];
        snprintf(src, sizeof src, "env %.*s", (int)n, *e);
        set_value(c, (size_t)found, RANK_ENV, src, eq + 1);
    }
}

/* ---- the file ---- */

/* inih's reader: one whole line, counted; a line longer than inih's buffer
 * is an error instead of being split in two. */
static char *read_line(char *str, int num, void *stream)
{
    jrpc_conf_t *c = stream;
    ssize_t n = getline(&c->line, &c->linecap, c->fp);
    if (n < 0)
        return NULL;
    c->lineno++;
    if (n >= num - 1 && !(n == num - 1 && c->line[n - 1] == '\n')) {
        char src[512];
        snprintf(src, sizeof src, "%s:%d", c->path, c->lineno);
        report(c, src, "line longer than %d bytes", num - 2);
        snprintf(str, (size_t)num, "\n");
        return str;
    }
    memcpy(str, c->line, (size_t)n + 1);
    return str;
}

static int on_key(void *user, const char *section, const char *name, const char *value)
{
    jrpc_conf_t *c = user;
    char src[512];
    snprintf(src, sizeof src, "%s:%d", c->path, c->lineno);
    if (section[0] != '\0' && strcmp(section, c->info->prog) != 0) {
        if (strncmp(section, "jrpc-", 5) == 0)
            return 1;   /* another jrpc program's section */
        if (c->bad_section == NULL || strcmp(c->bad_section, section) != 0) {
            report(c, src, "unknown section [%s] (keys go before any section or under [%s])",
                   section, c->info->prog);
            free(c->bad_section);
            c->bad_section = strdup(section);
        }
        return 1;
    }
    int i = find_opt(c, name);
    if (i < 0 || c->opts[i].kind == JRPC_CONF_FLAG || (c->opts[i].flags & JRPC_CONF_NO_FILE)) {
        report(c, src, "unknown key '%s'", name);
        return 1;
    }
    slot_t *s = &c->slots[i];
    if (s->file_line) {
        report(c, src, "%s: duplicate key (first at line %d)", name, s->file_line);
        return 1;
    }
    s->file_line = c->lineno;
    snprintf(src + strlen(src), sizeof src - strlen(src), ": %s", name);
    set_value(c, (size_t)i, RANK_FILE, src, value);
    return 1;   /* errors are counted here; inih's own are syntax errors */
}

static void load_file(jrpc_conf_t *c, const char *path, const char *from)
{
    c->path = path;
    c->lineno = 0;
    if ((c->fp = fopen(path, "r")) == NULL) {
        report(c, from, "%s: %s", path, strerror(errno));
        return;
    }
    ini_allow_multiline = false;   /* an indented line is a key of its own */
    int bad = ini_parse_stream(read_line, c, on_key, c);
    if (bad > 0) {
        char src[512];
        snprintf(src, sizeof src, "%s:%d", path, bad);
        report(c, src, "not 'key = value', a [section] or a comment");
    } else if (bad < 0) {
        c->oom = true;
    }
    fclose(c->fp);
    c->fp = NULL;
}

/* ---- help ---- */

static void print_help(const jrpc_conf_t *c)
{
    fputs(c->info->head, stdout);
    printf("\nOptions (defaults in brackets; each also a config-file key NAME = VALUE and an\n"
           "environment variable JRPC_NAME: docs/CONFIG.md):\n");
    enum { COL = 26 };
    for (size_t i = 0; i < c->nopts; i++) {
        const jrpc_conf_opt_t *o = &c->opts[i];
        char lhs[80];
        int n = snprintf(lhs, sizeof lhs, "  --%s%s%s", o->name, o->arg ? " " : "",
                         o->arg ? o->arg : "");
        if (n >= COL - 1)
            printf("%s\n%*s", lhs, COL, "");
        else
            printf("%-*s", COL, lhs);
        const char *h = o->help;
        for (;;) {
            const char *nl = strchr(h, '\n');
            if (nl == NULL)
                break;
            printf("%.*s\n%*s", (int)(nl - h), h, COL, "");
            h = nl + 1;
        }
        if (o->kind == JRPC_CONF_FLAG)
            printf("%s\n", h);
        else
            printf("%s%s[%s]\n", h, *h ? " " : "", o->def ? o->def : "none");
    }
    if (c->info->tail)
        printf("\n%s", c->info->tail);
}

/* ---- storing ---- */

static int commit(jrpc_conf_t *c)
{
    for (size_t i = 0; i < c->nopts; i++) {
        const jrpc_conf_opt_t *o = &c->opts[i];
        slot_t *s = &c->slots[i];
        if (s->rank == RANK_DEFAULT && o->def != NULL && o->kind == JRPC_CONF_LIST)
            set_value(c, i, RANK_DEFAULT, "default", o->def);
        const char *v = s->rank > RANK_DEFAULT ? s->vals[0] : o->def;
        if (o->dest == NULL)
            continue;
        switch (o->kind) {
        case JRPC_CONF_UINT:
            *(uint32_t *)o->dest = v ? (uint32_t)strtoul(v, NULL, 10) : 0;
            break;
        case JRPC_CONF_STR:
            *(const char **)o->dest = v;
            break;
        case JRPC_CONF_CHOICE:
            *(const char **)o->dest = NULL;
            for (size_t k = 0; v && o->choices[k]; k++)
                if (strcmp(v, o->choices[k]) == 0)
                    *(const char **)o->dest = o->choices[k];
            break;
        case JRPC_CONF_ONOFF:
            *(bool *)o->dest = v && strcmp(v, "on") == 0;
            break;
        case JRPC_CONF_FLAG:
            *(bool *)o->dest = s->rank > RANK_DEFAULT;
            break;
        case JRPC_CONF_LIST: {
            jrpc_conf_list_t *l = o->dest;
            free(s->listv);
            s->listv = calloc(s->nvals + 1, sizeof *s->listv);
            if (s->listv == NULL)
                return -ENOMEM;
            for (size_t k = 0; k < s->nvals; k++)
                s->listv[k] = s->vals[k];
            l->v = s->listv;
            l->n = s->nvals;
            break;
        }
        }
    }
    return c->oom ? -ENOMEM : 0;
}

/* ---- the API ---- */

jrpc_conf_t *jrpc_conf_new(const jrpc_conf_info_t *info, const jrpc_conf_opt_t *opts,
                           size_t nopts)
{
    jrpc_conf_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->info = info;
    c->opts = opts;
    c->nopts = nopts;
    if ((c->slots = calloc(nopts, sizeof *c->slots)) == NULL) {
        free(c);
        return NULL;
    }
    return c;
}

void jrpc_conf_destroy(jrpc_conf_t **self_p)
{
    jrpc_conf_t *c = *self_p;
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->nopts; i++) {
        slot_clear(&c->slots[i]);
        free(c->slots[i].src);
        free(c->slots[i].listv);
    }
    free(c->slots);
    free(c->ignored);
    free(c->line);
    free(c->bad_section);
    free(c);
    *self_p = NULL;
}

int jrpc_conf_load(jrpc_conf_t *c, int argc, char **argv, char **envp)
{
    int help = find_opt(c, "help"), version = find_opt(c, "version");
    int config = find_opt(c, "config");
    load_argv(c, argc, argv);
    if (c->oom)
        return -ENOMEM;
    if (c->errors)   /* as GNU tools do: --help after a bad flag is no excuse */
        return -EINVAL;
    if (help >= 0 && c->slots[help].rank == RANK_FLAG) {
        print_help(c);
        return 1;
    }
    if (version >= 0 && c->slots[version].rank == RANK_FLAG) {
        printf("%s %s\n", c->info->prog, c->info->version);
        return 1;
    }
    load_env(c, envp);
    if (config >= 0 && c->slots[config].rank > RANK_DEFAULT)
        load_file(c, c->slots[config].vals[0], c->slots[config].src);
    if (c->oom)
        return -ENOMEM;
    if (c->errors)
        return -EINVAL;
    return commit(c);
}

int jrpc_conf_main(jrpc_conf_t **c_p, const jrpc_conf_info_t *info, const jrpc_conf_opt_t *opts,
                   size_t nopts, const jrpc_conf_std_t *std, int argc, char **argv)
{
    *c_p = jrpc_conf_new(info, opts, nopts);
    int rc = *c_p ? jrpc_conf_load(*c_p, argc, argv, environ) : -ENOMEM;
    if (rc != 0)
        return rc == 1 ? 0 : rc == -ENOMEM ? 1 : 2;
    jrpc_log_set_level(std->log_level);
    jrpc_log_set_format(std->log_format);
    return -1;
}

const char *jrpc_conf_source(const jrpc_conf_t *c, const char *name)
{
    int i = find_opt(c, name);
    return i >= 0 && c->slots[i].rank > RANK_DEFAULT ? c->slots[i].src : "default";
}

const char *jrpc_conf_ignored_env(const jrpc_conf_t *c)
{
    return c->ignored ? c->ignored : "";
}

void jrpc_conf_error(const jrpc_conf_t *c, const char *name, const char *msg)
{
    int i = find_opt(c, name);
    if (i >= 0 && c->slots[i].rank > RANK_DEFAULT)
        fprintf(stderr, "%s: %s: %s\n", c->info->prog, c->slots[i].src, msg);
    else
        fprintf(stderr, "%s: --%s: %s\n", c->info->prog, name, msg);
}

/* Prints v, with the password of scheme://user:password@host masked. */
static void print_masked(FILE *out, const char *v)
{
    const char *auth = strstr(v, "://");
    const char *at = auth ? strchr(auth + 3, '@') : NULL;
    const char *slash = auth ? strchr(auth + 3, '/') : NULL;
    const char *colon = auth ? memchr(auth + 3, ':', at ? (size_t)(at - auth - 3) : 0) : NULL;
    if (at == NULL || colon == NULL || (slash && slash < at)) {
        fputs(v, out);
        return;
    }
    fprintf(out, "%.*s***%s", (int)(colon + 1 - v), v, at);
}

void jrpc_conf_print(const jrpc_conf_t *c, FILE *out)
{
    fprintf(out, "# %s %s: the effective configuration (--check-config); the source\n"
            "# of each value is in the comment above it.\n", c->info->prog, c->info->version);
    for (size_t i = 0; i < c->nopts; i++) {
        const jrpc_conf_opt_t *o = &c->opts[i];
        const slot_t *s = &c->slots[i];
        if (o->kind == JRPC_CONF_FLAG || (o->flags & JRPC_CONF_NO_FILE))
            continue;
        bool unset = s->rank == RANK_DEFAULT && o->def == NULL;
        fprintf(out, "\n# %s: %s\n", o->name, s->rank > RANK_DEFAULT ? s->src : "default");
        if (unset) {
            fprintf(out, "#%s =\n", o->name);
            continue;
        }
        fprintf(out, "%s = ", o->name);
        if (s->rank == RANK_DEFAULT && o->kind != JRPC_CONF_LIST) {
            fputs(o->def, out);
        } else {
            for (size_t k = 0; k < s->nvals; k++) {
                if (k)
                    fputs(", ", out);
                if (o->flags & JRPC_CONF_SECRET)
                    print_masked(out, s->vals[k]);
                else
                    fputs(s->vals[k], out);
            }
        }
        fputc('\n', out);
    }
    if (c->ignored)
        fprintf(out, "\n# environment variables ignored (not options of %s): %s\n",
                c->info->prog, c->ignored);
}

/* ---- syntax checks ---- */

static bool port_ok(const char *p, bool star)
{
    if (star && strcmp(p, "*") == 0)
        return true;
    size_t n = strspn(p, "0123456789");
    return n >= 1 && n <= 5 && p[n] == '\0' && strtoul(p, NULL, 10) <= 65535;
}

int jrpc_conf_check_zmq_engine(const char *v, char *err, size_t errlen)
{
    if (strcmp(v, "native") == 0 || strcmp(v, "libzmq") == 0)
        return 0;
    snprintf(err, errlen, "'%s' is not native or libzmq", v);
    return -1;
}

int jrpc_conf_check_zmq_endpoint(const char *v, char *err, size_t errlen)
{
    static const char *const transports[] = { "tcp", "ipc", "inproc", "pgm", "epgm",
                                              "tipc", "ws", "wss", "vmci", "udp", NULL };
    const char *sep = strstr(v, "://");
    bool ok = false;
    for (size_t i = 0; sep && transports[i] && !ok; i++)
        ok = strlen(transports[i]) == (size_t)(sep - v) &&
             memcmp(v, transports[i], (size_t)(sep - v)) == 0;
    if (ok && sep[3] == '\0')
        ok = false;
    if (ok && strncmp(v, "tcp://", 6) == 0) {
        const char *colon = strrchr(sep + 3, ':');
        ok = colon != NULL && colon > sep + 3 && port_ok(colon + 1, true);
    }
    if (!ok)
        snprintf(err, errlen, "'%s' is not a ZeroMQ endpoint (tcp://HOST:PORT, ipc://PATH, "
                 "inproc://NAME)", v);
    return ok ? 0 : -1;
}

int jrpc_conf_check_hostport(const char *v, char *err, size_t errlen)
{
    bool ok;
    if (strcmp(v, "none") == 0)
        return 0;
    if (v[0] == '[') {
        const char *rb = strchr(v, ']');
        ok = rb != NULL && rb > v + 1 && rb[1] == ':' && port_ok(rb + 2, false);
    } else {
        const char *colon = strrchr(v, ':');
        ok = colon != NULL && colon > v && memchr(v, ':', (size_t)(colon - v)) == NULL &&
             port_ok(colon + 1, false);
    }
    if (!ok)
        snprintf(err, errlen, "'%s' is not HOST:PORT, [IPV6]:PORT or none", v);
    return ok ? 0 : -1;
}
