/* jrpc_status_cmd — `jrpc status [--url ADMIN] [--timeout MS]`: the broker's
 * admin JSON (/status, /status/workers, /status/methods) read over one
 * plain HTTP GET each and printed as a readable summary (issue 33). Part of
 * the jrpc CLI only, not of libjrpc-client. */
#ifndef JRPC_STATUS_CMD_H
#define JRPC_STATUS_CMD_H

#include <stdio.h>

/* The admin address `jrpc status` asks without --url (nor $JRPC_ADMIN_URL):
 * the admin listener's own default address (io/jrpc_admin.h). */
#define JRPC_STATUS_DEFAULT_URL "http://127.0.0.1:9090"

/* Runs the command with its arguments (argv[0] is the first after
 * "status"); prints the summary to out and problems to stderr. Returns the
 * exit status: 0, or 2 when the admin is unreachable, answers other than
 * 200, or answers what is not the JSON expected. Blocks up to the timeout
 * per request. */
int jrpc_status_cmd(int argc, char **argv, FILE *out);

#endif
