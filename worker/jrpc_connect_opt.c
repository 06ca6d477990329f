/* jrpc_connect_opt — see jrpc_connect_opt.h. */
#include "jrpc_connect_opt.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include "jrpc_dns.h"
#include "jrpc_json.h"
#include "jrpc_wire.h"

int jrpc_connect_check(const char *value, char *err, size_t errlen)
{
    if (!jrpc_dns_is_name(value))
        return jrpc_conf_check_zmq_endpoint(value, err, errlen);
    jrpc_dns_name_t name;
    if (jrpc_dns_parse(value, &name) == 0)
        return 0;
    snprintf(err, errlen, "'%s' is not dns+tcp://NAME:PORT (NAME: letters, digits, '-', '_' "
             "and dots; PORT: 1..65535)", value);
    return -1;
}

int jrpc_connect_name_check(const char *value, char *err, size_t errlen)
{
    size_t n = strlen(value);
    bool ok = n > 0 && n < 64;
    for (size_t i = 0; ok && i < n; i++)
        ok = value[i] > 0x20 && value[i] < 0x7f;
    if (!ok)
        snprintf(err, errlen, "'%s' is not 1 to 63 printable bytes without spaces", value);
    return ok ? 0 : -1;
}

int jrpc_connect_service_check(const char *value, char *err, size_t errlen)
{
    size_t n = strlen(value);
    bool ok = n > 0 && n <= 63;
    for (size_t i = 0; ok && i < n; i++) {
        char c = value[i];
        ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
             (i > 0 && (c == '_' || c == '-'));
    }
    if (!ok)
        snprintf(err, errlen, "'%s' is not a service name ([a-z0-9][a-z0-9_-]{0,62})", value);
    return ok ? 0 : -1;
}

int jrpc_connect_read_schemas(const char *file, char **out, char *err, size_t errlen)
{
    FILE *f = fopen(file, "rb");
    if (f == NULL) {
        snprintf(err, errlen, "cannot open '%s'", file);
        return -1;
    }
    char *buf = malloc(JRPC_WIRE_SCHEMAS_MAX + 2);
    size_t n = buf ? fread(buf, 1, JRPC_WIRE_SCHEMAS_MAX + 1, f) : 0;
    bool failed = buf == NULL || ferror(f);
    fclose(f);
    const char *why = failed ? "cannot read it"
                      : n > JRPC_WIRE_SCHEMAS_MAX ? "it is over 65536 bytes"
                      : NULL;
    if (why == NULL) {
        buf[n] = '\0';
        size_t k = 0;
        while (k < n && (buf[k] == ' ' || buf[k] == '\t' || buf[k] == '\n' || buf[k] == '\r'))
            k++;
        if (jrpc_json_validate(buf, n, 32) < 0 || k == n || buf[k] != '{')
            why = "it is not a JSON object";
    }
    if (why) {
        snprintf(err, errlen, "'%s': %s", file, why);
        free(buf);
        return -1;
    }
    *out = buf;
    return 0;
}

int jrpc_connect_load_schemas(const jrpc_conf_t *conf, const char *file, char **out)
{
    char err[512];
    *out = NULL;
    if (file == NULL)
        return 0;
    if (jrpc_connect_read_schemas(file, out, err, sizeof err) == 0)
        return 0;
    jrpc_conf_error(conf, "schemas", err);
    return -1;
}
