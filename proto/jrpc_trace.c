#include "jrpc_trace.h"

#include <assert.h>

static bool is_lchex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* n lower-case hex digits at s; *nonzero tells whether any is not '0'. */
static bool hex_field(const char *s, size_t n, bool *nonzero)
{
    bool nz = false;
    for (size_t i = 0; i < n; i++) {
        if (!is_lchex(s[i]))
            return false;
        nz |= s[i] != '0';
    }
    *nonzero = nz;
    return true;
}

bool jrpc_traceparent_valid(const char *s, size_t n)
{
    bool nz;
    if (n < JRPC_TRACEPARENT_LEN || n > JRPC_TRACEPARENT_MAX)
        return false;
    if (!hex_field(s, 2, &nz) || (s[0] == 'f' && s[1] == 'f'))
        return false;
    bool v00 = s[0] == '0' && s[1] == '0';
    if (v00 && n != JRPC_TRACEPARENT_LEN)
        return false;
    if (s[2] != '-' || s[35] != '-' || s[52] != '-')
        return false;
    if (!hex_field(s + 3, 32, &nz) || !nz)
        return false;
    if (!hex_field(s + 36, 16, &nz) || !nz)
        return false;
    if (!hex_field(s + 53, 2, &nz))
        return false;
    if (n == JRPC_TRACEPARENT_LEN)
        return true;
    /* A later version: its own fields follow after a dash; we carry them
     * as they are, so they must at least be safe to put in a log line. */
    if (s[55] != '-')
        return false;
    for (size_t i = 56; i < n; i++)
        if (s[i] <= ' ' || s[i] > '~' || s[i] == '"')
            return false;
    return true;
}

bool jrpc_traceparent_sampled(const char *s, size_t n)
{
    assert(n >= JRPC_TRACEPARENT_LEN);
    (void)n;
    char c = s[54];
    int low = c >= 'a' ? c - 'a' + 10 : c - '0';
    return (low & 1) != 0;
}
