/* jrpc-bench-stdio-child — the trivial stdio JSON-RPC server of
 * bench/stdio_overhead.sh: one request per line on stdin, one answer per
 * line on stdout, {"jsonrpc":"2.0","result":0,"id":ID} with the request's
 * id copied as text. No JSON library: the least a child can do, so that
 * what is measured is the path to it. */
#include <stdio.h>
#include <string.h>

int main(void)
{
    static char line[1 << 16];
    setvbuf(stdout, NULL, _IOFBF, 1 << 16);
    while (fgets(line, sizeof line, stdin) != NULL) {
        const char *id = strstr(line, "\"id\":");
        if (id == NULL)
            continue;   /* a notification: no answer */
        id += 5;
        size_t n = strcspn(id, ",}\n");
        printf("{\"jsonrpc\":\"2.0\",\"result\":0,\"id\":%.*s}\n", (int)n, id);
        fflush(stdout);
    }
    return 0;
}
