#!/usr/bin/env bash
# jrpc-stdio and a child started through a wrapper that does not exec
# (issue 36, item 4): `sh -c 'python3 server ...; true'`, as npx and many
# launch scripts do. The server is the wrapper's child. When the bridge
# kills a hung child, and when it stops, the server must go too (the bridge
# signals the child's process group), not keep running, one more at every
# restart.
source "$JRPC_E2E_LIB"
command -v pgrep >/dev/null || { echo "pgrep is required"; exit 1; }
# A copy of its own: the checks find this test's children by their command
# line, and the same test may run at once in another build (tests/run.sh).
SERVER=$E2E_TMP/stdio_server.py
cp "$(dirname "$JRPC_E2E_LIB")/stdio_server.py" "$SERVER"
TAG="wrap$$"
e2e_start_broker --timeout-ms 1000
send() { printf '%s' "$1" | "$JRPC" send; }
# The servers (the wrappers' children) by their command line; the wrapper's
# and the bridge's own command lines hold it too, but do not start with it.
servers() { pgrep -f -- "^[^ ]*python3[^ ]* $SERVER --tag=$TAG( |\$)" | tr '\n' ' ' | sed 's/ $//'; }
nservers() { pgrep -f -- "^[^ ]*python3[^ ]* $SERVER --tag=$TAG( |\$)" | wc -l; }
reap_left() {  # what a failed run left behind: this test's own servers, by pid
    local p
    for p in $(servers); do kill -9 "$p" 2>/dev/null; done
}
trap 'reap_left; e2e_cleanup' EXIT

STDIO_LOG="$E2E_TMP/stdio.log"
"$JRPC_BIN/jrpc-stdio" --connect "$WORKERS_EP" --procs 2 --method sleep --method upper \
    --hang-kill-ms 300 --drain-timeout-ms 200 --stop-timeout-ms 500 \
    -- sh -c "python3 $SERVER --tag=$TAG --stderr; true" >>"$STDIO_LOG" 2>&1 &
STDIO_PID=$!
E2E_PIDS+=("$STDIO_PID")
e2e_wait_workers 1
e2e_wait_for "[ \$(nservers) = 2 ]" 15
check "2 servers under 2 wrappers" 2 "$(nservers)"
check "a call through the wrapper" '{"jsonrpc":"2.0","result":"ABC","id":1}' \
    "$(send '{"jsonrpc":"2.0","method":"upper","params":["abc"],"id":1}')"

# alive PID: running (a zombie waiting for its reaper counts as gone)
alive() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null); [ -n "$st" ] && [ "${st#Z}" = "$st" ]; }

# A server that hangs (sleeps 30 s on a call): -32003 at the deadline (1 s),
# killed --hang-kill-ms later and replaced. Its wrapper and the server both go.
check "a hung call answered -32003" '-32003' \
    "$(send '{"jsonrpc":"2.0","method":"sleep","params":{"ms":30000},"id":2}' | grep -o '"code":-32003' | cut -d: -f2)"
e2e_wait_for "grep -q 'event=child_hung' '$STDIO_LOG'" 10
hung=$(grep -o 'line="serving sleep in pid [0-9]*' "$STDIO_LOG" | head -1 | grep -o '[0-9]*$')
e2e_wait_for "[ \$(grep -c 'event=child_started' '$STDIO_LOG') -ge 3 ]" 10
check "the hung child was replaced" 3 "$(grep -c 'event=child_started' "$STDIO_LOG")"
e2e_wait_for "! alive $hung" 10
check "after a hang-kill: the hung server (pid $hung) is gone" gone "$(alive "$hung" && echo running || echo gone)"
e2e_wait_for "[ \$(nservers) = 2 ]" 10
check "2 servers after the restart" 2 "$(nservers)"

# Stopping with a call held by a server that ignores its stdin: SIGTERM,
# the drain times out, stdin is closed, --stop-timeout-ms, then SIGKILL to
# each child's group. No server outlives the bridge.
send '{"jsonrpc":"2.0","method":"sleep","params":{"ms":30000},"id":3}' >/dev/null &
SENDER=$!
E2E_PIDS+=("$SENDER")
e2e_wait_for "[ \$(grep -c 'serving sleep' '$STDIO_LOG') -ge 2 ]" 10
kill -TERM "$STDIO_PID"
st=0
wait "$STDIO_PID" || st=$?
check "SIGTERM exits 0" 0 "$st"
e2e_wait_for "[ \$(nservers) = 0 ]" 10
check "after the bridge stopped: no server left (of the wrappers' children)" 0 "$(nservers)"
e2e_finish
