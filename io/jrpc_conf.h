/* jrpc_conf — one table of options, read from the command line, JRPC_*
 * environment variables and an INI config file (docs/CONFIG.md).
 *
 *   static uint32_t timeout_ms;
 *   static const jrpc_conf_opt_t opts[] = {
 *       { "timeout-ms", JRPC_CONF_UINT, "N", "30000", "deadline of every call",
 *         &timeout_ms, .min = 1, .max = 86400000 },
 *       ...
 *   };
 *   jrpc_conf_t *c = jrpc_conf_new(&info, opts, n);
 *   int rc = jrpc_conf_load(c, argc, argv, environ);  // 1: --help/--version done
 *
 * From that one table come getopt_long parsing, the config file keys (the
 * long flag names), the environment names (JRPC_ + the name upper-cased, '-'
 * as '_'), --help (every option with its default) and the effective
 * configuration printed by --check-config. Precedence: flags > environment >
 * file > defaults. Every bad value is reported with its source ("--flag",
 * "env JRPC_X", "FILE:LINE: key") on stderr and makes the load fail: never a
 * silent default. */
#ifndef JRPC_CONF_H
#define JRPC_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum jrpc_conf_kind {
    JRPC_CONF_UINT,    /* uint32_t *dest, within [min, max] */
    JRPC_CONF_STR,     /* const char **dest (NULL when unset), optional check */
    JRPC_CONF_CHOICE,  /* const char **dest: one of choices (points into the table) */
    JRPC_CONF_ONOFF,   /* bool *dest: "on" or "off" */
    JRPC_CONF_LIST,    /* jrpc_conf_list_t *dest: comma/blank separated; a flag may repeat */
    JRPC_CONF_FLAG,    /* bool *dest: a flag without a value, command line only */
};

/* Option flags. */
#define JRPC_CONF_NO_FILE 1u   /* not a config file key (--config itself) */
#define JRPC_CONF_SECRET  2u   /* a URL whose password --check-config masks */

typedef struct jrpc_conf_list {
    const char **v;   /* the elements (owned by the conf) */
    size_t       n;
} jrpc_conf_list_t;

/* Checks one value (each element of a list); returns 0, or -1 with a
 * message in err (without the source: the caller prefixes it). */
typedef int (*jrpc_conf_check_fn)(const char *value, char *err, size_t errlen);

typedef struct jrpc_conf_opt {
    const char *name;     /* the long flag without "--"; also the file key */
    int         kind;     /* a jrpc_conf_kind */
    const char *arg;      /* what the value is, in --help ("N", "FILE") */
    const char *def;      /* the default, as text; NULL: unset */
    const char *help;     /* one or more lines ('\n'); the default is appended */
    void       *dest;     /* see jrpc_conf_kind */
    uint32_t    min, max; /* UINT */
    const char *const *choices;  /* CHOICE: NULL-terminated */
    jrpc_conf_check_fn check;    /* STR, LIST: extra syntax check, or NULL */
    unsigned    flags;           /* JRPC_CONF_* */
} jrpc_conf_opt_t;

typedef struct jrpc_conf_info {
    const char *prog;     /* "jrpc-broker": messages, --version, the file's [section] */
    const char *version;
    const char *head;     /* --help: usage and description, before the options */
    const char *tail;     /* --help: after the options (may be NULL) */
} jrpc_conf_info_t;

typedef struct jrpc_conf jrpc_conf_t;

/* Makes a conf over opts (borrowed: keep the table and info alive). The
 * options named "help" and "version" (FLAG) print and end the load, and
 * the STR option named "config" names the file to read. NULL: out of memory. */
jrpc_conf_t *jrpc_conf_new(const jrpc_conf_info_t *info, const jrpc_conf_opt_t *opts,
                           size_t nopts);

/* Frees the conf and every string the destinations point to. NULL-safe. */
void jrpc_conf_destroy(jrpc_conf_t **self_p);

/* Reads argv (getopt_long; resets optind), the JRPC_* entries of envp
 * (NULL-terminated "NAME=value" strings; unknown JRPC_* names are ignored
 * and listed by jrpc_conf_ignored_env()), and the config file (--config,
 * else JRPC_CONFIG, else none), then stores every value in its dest.
 * Returns 0; 1 when --help or --version was printed on stdout (exit 0);
 * -EINVAL after printing every error on stderr (exit 2); -ENOMEM. */
int jrpc_conf_load(jrpc_conf_t *c, int argc, char **argv, char **envp);

/* Where the value of the option name came from: "--name", "env JRPC_NAME",
 * "FILE:LINE: name" or "default". Borrowed from the conf. */
const char *jrpc_conf_source(const jrpc_conf_t *c, const char *name);

/* The JRPC_* environment names that are not options of this program
 * (comma-separated, "" when none). Borrowed from the conf. */
const char *jrpc_conf_ignored_env(const jrpc_conf_t *c);

/* Writes the effective configuration in config-file format (readable back
 * with --config): each key with its source in a comment above; unset ones
 * commented out; passwords of JRPC_CONF_SECRET URLs masked. */
void jrpc_conf_print(const jrpc_conf_t *c, FILE *out);

/* Prints "PROG: SOURCE: MSG" on stderr (a value that passed the table's
 * checks but failed later, e.g. a key file that cannot be read). */
void jrpc_conf_error(const jrpc_conf_t *c, const char *name, const char *msg);

/* The options every jrpc program ends its table with (JRPC_CONF_STD_OPTS). */
typedef struct jrpc_conf_std {
    const char *log_level;     /* --log-level: debug, info, warn, error */
    const char *log_format;    /* --log-format: kv, json */
    bool        check_config;  /* --check-config */
    bool        help;          /* --help */
    bool        version;       /* --version */
} jrpc_conf_std_t;

extern const char *const jrpc_conf_log_levels[];   /* NULL-terminated */
extern const char *const jrpc_conf_log_formats[];

#define JRPC_CONF_STD_OPTS(std)                                                              \
    { "log-level", JRPC_CONF_CHOICE, "LEVEL", "info",                                       \
      "debug, info, warn or error",                                                          \
      .dest = &(std)->log_level, .choices = jrpc_conf_log_levels },                          \
    { "log-format", JRPC_CONF_CHOICE, "FORMAT", "kv",                                       \
      "kv (key=value) or json (one object a line)", .dest = &(std)->log_format,             \
      .choices = jrpc_conf_log_formats },                                                    \
    { "check-config", JRPC_CONF_FLAG, NULL, NULL,                                            \
      "check every option and file, print the effective\n"                                  \
      "configuration and exit (0 good, 2 bad)", .dest = &(std)->check_config },              \
    { "help", JRPC_CONF_FLAG, NULL, NULL, "print this and exit", .dest = &(std)->help },      \
    { "version", JRPC_CONF_FLAG, NULL, NULL, "print the version and exit",                    \
      .dest = &(std)->version }

/* For a program's main: a conf over opts (a table ending with
 * JRPC_CONF_STD_OPTS(std)), loaded from argv and environ, then std's log
 * level and format applied. Returns -1 when the program goes on, with *c_p
 * its conf; else the program's exit status, with *c_p NULL or a conf to
 * destroy: 0 after --help or --version, 1 out of memory, 2 bad options
 * (already said on stderr). */
int jrpc_conf_main(jrpc_conf_t **c_p, const jrpc_conf_info_t *info, const jrpc_conf_opt_t *opts,
                   size_t nopts, const jrpc_conf_std_t *std, int argc, char **argv);

/* Syntax checks for the table. */
int jrpc_conf_check_zmq_endpoint(const char *value, char *err, size_t errlen);

/* --zmq-engine's check (broker, jrpc-worker, jrpc-stdio): "native" or
 * "libzmq". Returns 0, or -1 with the reason in err. */
int jrpc_conf_check_zmq_engine(const char *value, char *err, size_t errlen);
int jrpc_conf_check_hostport(const char *value, char *err, size_t errlen);   /* or "none" */

#endif
