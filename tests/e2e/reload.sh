#!/usr/bin/env bash
# SIGHUP reloads the key file and the CURVE allowlists without a restart
# (issue 15, docs/CONFIG.md "Signals"). Under steady signed load with key A:
# key B added and key C removed, then SIGHUP: B works, C is refused 401
# (a WebSocket opened with C before the reload is closed 1008 by it),
# the load saw no failure and every call got exactly one answer. A broken
# key file then: refused, logged, nothing changes; the metrics count 1 ok
# and 1 failed. CURVE: a client key removed from --client-keys cannot
# connect any more, one added can.
source "$JRPC_E2E_LIB"
HERE=$(dirname "$JRPC_E2E_LIB")
SIGN="python3 $HERE/sign.py"
PY=python3; [ -x /usr/bin/python3 ] && PY=/usr/bin/python3   # Debian's, with python3-websockets
command -v redis-server >/dev/null || { echo "redis-server is not installed"; exit 1; }
$PY -c 'import websockets' 2>/dev/null || { echo "python3-websockets is needed (deploy/deps.sh)"; exit 1; }

SA=alpha-secret-0123456789 SB=bravo-secret-0123456789 SC=charlie-secret-0123456789
KF="$E2E_TMP/keys"
# put FILE TEXT: replaces FILE in one step (rename), as an operator should.
put() { printf '%s' "$2" > "$1.new" && mv "$1.new" "$1"; }
put "$KF" "A $SA
C $SC
"
e2e_start_redis
E2E_HTTP=1 e2e_start_broker --keys "$KF" --redis "redis://127.0.0.1:$RPORT" \
    --admin 127.0.0.1:0
ADMIN=$(e2e_admin_url)
e2e_start_worker
e2e_wait_workers 1

# post KEY SECRET -> "STATUS BODY" of a signed add [1,2] over HTTP.
post() {
    printf '%s' '{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}' > "$E2E_TMP/body"
    $SIGN --key "$1" --secret "$2" --body-file "$E2E_TMP/body" > "$E2E_TMP/hdr"
    curl -s -o "$E2E_TMP/out" -w '%{http_code}' -H 'Content-Type: application/json' \
        -H @"$E2E_TMP/hdr" --data-binary @"$E2E_TMP/body" "$HTTP_URL/rpc" > "$E2E_TMP/code"
    echo "$(cat "$E2E_TMP/code") $(sed -E 's/"server_time":[0-9]+/"server_time":T/' "$E2E_TMP/out")"
}
OK='200 {"jsonrpc":"2.0","result":3,"id":1}'
UNKNOWN='401 {"jsonrpc":"2.0","error":{"code":-32002,"message":"Unauthorized","data":{"reason":"unknown key","server_time":T}},"id":null}'
metric() { curl -s "$ADMIN/metrics" | awk -v n="$1" '$1 == n {print $2}'; }
reloads() { grep -c "event=$1 " "$E2E_TMP/broker.log"; }

check "before: A works" "$OK" "$(post A "$SA")"
check "before: C works" "$OK" "$(post C "$SC")"
check "before: B is unknown (401)" "$UNKNOWN" "$(post B "$SB")"
check "metrics at start: 0 reloads, last success = start-up" "0 0 1" \
    "$(metric 'jrpc_reloads_total{result="ok"}') $(metric 'jrpc_reloads_total{result="failed"}') \
$(metric jrpc_reload_last_success_timestamp_seconds | awk -v now="$(date +%s)" '{print ($1 > now - 60 && $1 <= now)}')"

# The load (key A) and a WebSocket authenticated with C, both across the reloads.
$PY "$HERE/signed_load.py" "$HTTP_URL/rpc" A "$SA" "$E2E_TMP/stop" \
    > "$E2E_TMP/load.out" 2> "$E2E_TMP/load.log" &
LOAD=$!
$PY "$HERE/ws_client.py" "ws://127.0.0.1:$HTTP_PORT/rpc" signed-hold C "$SC" "$E2E_TMP/go" \
    > "$E2E_TMP/ws.out" 2>&1 &
WSC=$!
e2e_wait_for "grep -q '^before:' '$E2E_TMP/ws.out'" 10
check "a WebSocket signed with C: served before the reload" \
    'before: {"jsonrpc":"2.0","result":2,"id":1}' "$(cat "$E2E_TMP/ws.out")"
sleep 1   # the load runs a while first

# ---- B in, C out ----
put "$KF" "A $SA
B $SB
"
kill -HUP "$BROKER_PID"
e2e_wait_for '[ "$(reloads reloaded)" = 1 ]' 10
check "logged: event=reloaded what=keys keys=2" 1 \
    "$(grep -c 'event=reloaded what=keys keys=2$' "$E2E_TMP/broker.log")"
check "after: B works (exact bytes)" "$OK" "$(post B "$SB")"
check "after: C is refused 401 -32002 unknown key" "$UNKNOWN" "$(post C "$SC")"
check "after: A works" "$OK" "$(post A "$SA")"
touch "$E2E_TMP/go"
wait "$WSC"
check "the WebSocket opened with C: closed 1008 by the reload (key removed)" \
    'after: closed 1008' "$(grep '^after:' "$E2E_TMP/ws.out")"
sleep 1

# ---- a broken file: refused, nothing changes ----
put "$KF" "A $SA
B $SB
C $SC
B $SB
"
kill -HUP "$BROKER_PID"
e2e_wait_for '[ "$(reloads reload_failed)" = 1 ]' 10
check "logged: reload_failed, the file and the reason" 1 \
    "$(grep 'event=reload_failed what=keys' "$E2E_TMP/broker.log" | grep -F "file=$KF " |
       grep -c "error=\"$KF:4: duplicate key id 'B' (first on line 2)\" detail=\"nothing reloaded")"
check "still: B works" "$OK" "$(post B "$SB")"
check "still: C refused" "$UNKNOWN" "$(post C "$SC")"
sleep 1
touch "$E2E_TMP/stop"
wait "$LOAD"
read -r sent answers ok failed missing dup <<<"$(sed -E 's/[a-z]+=//g' "$E2E_TMP/load.out")"
echo "load: $(cat "$E2E_TMP/load.out")"
check "the load ran across both reloads (over 50 calls)" 1 "$(( ${sent:-0} > 50 ))"
check "the load: every call answered once, all ok" \
    "answers=$sent ok=$sent failed=0 missing=0 duplicate=0" \
    "answers=$answers ok=$ok failed=$failed missing=$missing duplicate=$dup"
check "metrics: ok=1 failed=1" "1 1" \
    "$(metric 'jrpc_reloads_total{result="ok"}') $(metric 'jrpc_reloads_total{result="failed"}')"

# An unreadable file is refused the same way.
rm "$KF"
kill -HUP "$BROKER_PID"
e2e_wait_for '[ "$(reloads reload_failed)" = 2 ]' 10
check "a missing file: reload_failed names it" 1 \
    "$(grep -c "event=reload_failed what=keys file=$KF error=\"$KF: No such file or directory\"" \
       "$E2E_TMP/broker.log")"
check "... and B still works" "$OK" "$(post B "$SB")"
kill -TERM "$BROKER_PID"; wait "$BROKER_PID"
check "the broker exits 0 (ASan: nothing leaked)" 0 $?

# ---- CURVE: --client-keys ----
K="$E2E_TMP/curve"
mkdir -p "$K"
for who in broker worker one two; do "$JRPC" keygen "$K/$who" >/dev/null 2>&1; done
cat "$K/one.pub" > "$K/clients"
cat "$K/worker.pub" > "$K/workers"
e2e_start_broker --heartbeat-ms 200 --curve-secret "$K/broker" \
    --client-keys "$K/clients" --worker-keys "$K/workers"
e2e_start_worker --heartbeat-ms 200 --curve-secret "$K/worker" --broker-key "$K/broker.pub"
e2e_wait_workers 1
as() { "$JRPC" --curve-secret "$K/$1" --server-key "$K/broker.pub" --timeout-ms 1000 \
           call add '[1,2]' 2>/dev/null; echo "exit=$?"; }
check "CURVE before: client one is answered" "3 exit=0" "$(as one | tr '\n' ' ' | sed 's/ $//')"
check "CURVE before: client two gets nothing (exit 2)" "exit=2" "$(as two)"
put "$K/clients" "$(cat "$K/two.pub")
"
kill -HUP "$BROKER_PID"
e2e_wait_for '[ "$(reloads reloaded)" = 1 ]' 10
check "logged: what=client-keys,worker-keys" 1 \
    "$(grep -c 'event=reloaded what=client-keys,worker-keys client_keys=1 worker_keys=1$' "$E2E_TMP/broker.log")"
check "CURVE after: client two is answered" "3 exit=0" "$(as two | tr '\n' ' ' | sed 's/ $//')"
check "CURVE after: a new connection of client one gets nothing (exit 2)" "exit=2" "$(as one)"
check "CURVE after: the worker (connected before, still listed) still serves" "3 exit=0" \
    "$(as two | tr '\n' ' ' | sed 's/ $//')"
put "$K/clients" "not a key
"
kill -HUP "$BROKER_PID"
e2e_wait_for '[ "$(reloads reload_failed)" = 1 ]' 10
check "a bad allowlist: reload_failed names it" 1 \
    "$(grep -c "event=reload_failed what=client-keys file=$K/clients error=\"$K/clients" "$E2E_TMP/broker.log")"
check "... and client two still works" "3 exit=0" "$(as two | tr '\n' ' ' | sed 's/ $//')"
kill -TERM "$BROKER_PID"; wait "$BROKER_PID"
check "the CURVE broker exits 0" 0 $?
e2e_finish
