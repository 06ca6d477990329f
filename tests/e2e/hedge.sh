#!/usr/bin/env bash
# Hedged calls (--hedge, docs/ARCHITECTURE.md "Hedged calls"): two demo
# workers, one of which holds back 4 % of its answers by 1500 ms
# (--slow-percent, --slow-ms); every call has a 1000 ms deadline. Without
# hedging those calls end -32003; with it, each gets a second copy at the
# quick worker once it is older than --hedge-min-ms, and none ends -32003.
# Every id comes back once (jrpc-bench checks), the losers' answers are
# dropped without counting as late, their credit comes back (no call left
# in flight), hedges stay within the budget, and a method the workers did
# not declare idempotent (update) is never hedged.
source "$JRPC_E2E_LIB"

# --eject-after 0: the slow worker's late calls must not get it ejected
# (5 timeouts in a row do, for 30 s), or the update run below would meet
# only the quick worker and no -32003 at all (it failed so now and then).
E2E_HTTP=1 e2e_start_broker --hedge on --hedge-budget 10 --hedge-min-ms 20 --hedge-max-ms 200 \
    --timeout-ms 1000 --eject-after 0 --admin 127.0.0.1:0 --access-log off
ADMIN=$(e2e_admin_url)
metric() { curl -s --max-time 5 "$ADMIN/metrics" | awk -v n="$1" '$1 == n { print $2 }'; }
e2e_start_worker --slow-percent 4 --slow-ms 1500 --name slow
e2e_start_worker --name quick
e2e_wait_workers 2

# The client waits 3 s: with the broker's own 1000 ms deadline, a client
# giving up at the same 1000 ms raced the broker's -32003 answer and
# sometimes won (a transport failure instead of the -32003 checked below).
bench() {  # METHOD OUT: a 2 s closed-loop run of batches of 10 over HTTP
    "$JRPC_BIN/jrpc-bench" --url "$HTTP_URL/rpc" --method "$1" --params '[1,2]' --batch 10 \
        --connections 2 --duration 2 --warmup 0.2 --timeout-ms 3000 --json > "$2"
}
field() {  # FILE EXPR: a value of the bench's JSON
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"
}

bench add "$E2E_TMP/on.json"
check "hedging on: jrpc-bench exit 0 (every id once)" 0 $?
calls=$(field "$E2E_TMP/on.json" "d['ids_expected']")
timeouts=$(field "$E2E_TMP/on.json" "d['errors'].get('-32003', 0)")
hedges=$(metric jrpc_hedges_total)
won=$(metric jrpc_hedges_won_total)
echo "calls=$calls -32003=$timeouts hedges=$hedges won=$won"
check "hedging on: no call of an idempotent method missed its deadline" 0 "$timeouts"
check "hedges were sent and won" 1 "$(awk -v h="$hedges" -v w="$won" 'BEGIN { print (h > 0 && w > 0) }')"
served=$(curl -s --max-time 5 "$ADMIN/metrics" | awk '$1 ~ /^jrpc_calls_total\{/ { s += $2 } END { print s + 0 }')
check "hedges within the budget (10 % of the calls served, and a burst of 20)" 1 \
    "$(awk -v h="$hedges" -v c="$served" 'BEGIN { print (h <= c * 0.10 + 20) }')"
# The losers' answers come 1500 ms late: then nothing is in flight, and
# they are not counted as late answers.
e2e_wait_for "[ \"\$(metric jrpc_calls_inflight)\" = 0 ]" 10
check "the losers' credit came back: nothing in flight" 0 "$(metric jrpc_calls_inflight)"
check "a hedge's loser is no late answer" 0 "$(metric jrpc_late_answers_total)"

bench update "$E2E_TMP/upd.json"
check "update (not idempotent): every id once" 0 $?
check "update: never hedged" "$hedges" "$(metric jrpc_hedges_total)"
check "update: its slow calls did miss their deadline (-32003)" 1 \
    "$(field "$E2E_TMP/upd.json" "int(d['errors'].get('-32003', 0) > 0)")"

E2E_HTTP=1 e2e_restart_broker --timeout-ms 1000 --eject-after 0 --admin 127.0.0.1:0 --access-log off
e2e_wait_workers 2
bench add "$E2E_TMP/off.json"
check "hedging off (the default): the slow calls miss their deadline" 1 \
    "$(field "$E2E_TMP/off.json" "int(d['errors'].get('-32003', 0) > 0)")"
e2e_finish
