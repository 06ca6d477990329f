/* jrpc_connect_opt — see jrpc_connect_opt.h. */
#include "jrpc_connect_opt.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include "jrpc_dns.h"

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
