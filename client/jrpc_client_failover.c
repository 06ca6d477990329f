/* jrpc_client_failover — the URL list, the brokers' order and the retry
 * decision of a client with several brokers. Pure: see the header. */
#include "jrpc_client_failover.h"

#include <errno.h>
#include <string.h>

int jrpc_failover_split(char *list, char **urls, size_t max)
{
    size_t n = 0;
    char *p = list;
    for (;;) {
        p += strspn(p, " \t");
        char *end = strchr(p, ',');
        char *stop = end ? end : p + strlen(p);
        while (stop > p && (stop[-1] == ' ' || stop[-1] == '\t'))
            stop--;
        if (stop == p || n == max)
            return -EINVAL;
        urls[n++] = p;
        if (end == NULL) {
            *stop = '\0';
            return (int)n;
        }
        *stop = '\0';
        p = end + 1;
    }
}

void jrpc_failover_order(size_t n, size_t start, const int64_t *failed_at, int64_t now_ms,
                         size_t *order)
{
    size_t k = 0;
    for (int late = 0; late < 2; late++)
        for (size_t j = 0; j < n; j++) {
            size_t i = (start + j) % n;
            bool cooling = failed_at[i] != 0 && now_ms - failed_at[i] < JRPC_FAILOVER_COOL_MS;
            if (cooling == (late == 1))
                order[k++] = i;
        }
}

static bool conn_failure(int rc)
{
    switch (rc) {
    case -ECONNREFUSED: case -ECONNRESET: case -ECONNABORTED: case -EPIPE: case -ENOTCONN:
    case -ETIMEDOUT: case -EHOSTUNREACH: case -ENETUNREACH: case -EHOSTDOWN: case -ENETDOWN:
    case -EADDRNOTAVAIL:
        return true;
    default:
        return false;
    }
}

jrpc_failover_next_t jrpc_failover_decide(int rc, bool sent, bool safe)
{
    if (!conn_failure(rc))
        return JRPC_FAILOVER_STOP;
    if (!sent)
        return JRPC_FAILOVER_NEXT;
    return safe ? JRPC_FAILOVER_RESEND : JRPC_FAILOVER_MAY_HAVE_RUN;
}

int jrpc_failover_resend_ms(int timeout_ms, int64_t t0_ms, int64_t now_ms)
{
    int64_t left = t0_ms + JRPC_FAILOVER_CLAIM_MS - now_ms;
    if (left > timeout_ms)
        left = timeout_ms;
    return left < JRPC_FAILOVER_MIN_MS ? 0 : (int)left;
}

bool jrpc_failover_still_running(const char *reply, size_t len)
{
    size_t i = 0;
    while (i < len && (reply[i] == ' ' || reply[i] == '\t' || reply[i] == '\r' ||
                       reply[i] == '\n'))
        i++;
    return i < len && reply[i] == '{' && memmem(reply, len, "-32008", 6) != NULL &&
           memmem(reply, len, "still running", 13) != NULL;
}
