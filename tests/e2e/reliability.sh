#!/usr/bin/env bash
# The delivery promise (docs/RELIABILITY.md) end to end, with the real broker
# and real demo workers: deadlines answer -32003 in their slot; a worker
# SIGTERMed mid-call finishes it and gets nothing new; a worker lost mid-batch
# (SIGKILL, or SIGSTOP past the heartbeat expiry) has its idempotent calls
# re-run elsewhere and its other calls answered -32004, never run twice;
# --max-open refuses at once with 503 while the admitted bodies complete; a
# client that leaves mid-batch leaves nothing behind (LeakSanitizer in the
# sanitizer build). Every wait is bounded; the whole script takes ~25 s.
# shellcheck source=lib.sh
source "$JRPC_E2E_LIB"
command -v curl >/dev/null || { echo "curl is required"; exit 1; }
command -v python3 >/dev/null || { echo "python3 is required"; exit 1; }

TMP=$E2E_TMP
# shellcheck disable=SC2034  # read by lib.sh
E2E_HTTP=1
HB=(--heartbeat-ms 200)
e2e_start_broker "${HB[@]}" --liveness 3 --timeout-ms 10000
RPC=$HTTP_URL/rpc
CURL=(curl -sS -H 'Content-Type: application/json')
PROBE=$JRPC_BIN/jrpc-test-zmq-probe

now_ms() { date +%s%3N; }

# post BODY [CURL_ARGS...]: the reply body (curl's --max-time 15, or the
# caller's when given: curl takes the last one).
post() { local body=$1; shift; "${CURL[@]}" --max-time 15 "$@" --data-binary "$body" "$RPC"; }

# batch METHOD PARAMS N: a batch of N calls, ids 1..N.
batch() {
    python3 -c 'import sys; m, p, n = sys.argv[1], sys.argv[2], int(sys.argv[3]); print("[" + ",".join("{\"jsonrpc\":\"2.0\",\"method\":\"%s\",\"params\":%s,\"id\":%d}" % (m, p, i) for i in range(1, n + 1)) + "]")' "$@"
}

# summary FILE: "result=VALUE:N ... err<code>:N ids=..." for a batch reply.
summary() {
    python3 - "$1" <<'PY'
import json, sys, collections
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("unparsable:", open(sys.argv[1]).read()[:200]); sys.exit()
ids = sorted(x.get("id") for x in r)
c = collections.Counter()
for x in r:
    c["err%d" % x["error"]["code"] if "error" in x else "result=%s" % json.dumps(x["result"])] += 1
print(" ".join("%s:%d" % kv for kv in sorted(c.items())), "ids=%s" % ",".join(map(str, ids)))
PY
}

lost_line() { grep 'event=worker_lost' "$TMP/broker.log" | tail -n 1 | grep -o 'reason=[a-z_]* inflight=[0-9]* redispatched=[0-9]* failed=[0-9]*'; }

# ---- 1. graceful worker drain: SIGTERM mid-call -------------------------------
e2e_start_worker "${HB[@]}" --credit 4
W1=$LAST_PID
W1_LOG=$TMP/worker$E2E_NWORKERS.log
e2e_wait_workers 1
post '{"jsonrpc":"2.0","method":"sleep","params":{"ms":1000},"id":1}' >"$TMP/drain.out" &
CLIENT=$!
sleep 0.3
kill -TERM "$W1"
e2e_wait_for "grep -q 'event=worker_disconnect' '$TMP/broker.log'" 5
check "draining worker gets no new call (no other worker: -32601)" \
    '{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":2}' \
    "$(post '{"jsonrpc":"2.0","method":"add","params":[1,2],"id":2}' --max-time 5)"
wait "$CLIENT"
check "the call held at SIGTERM is answered" '{"jsonrpc":"2.0","result":1000,"id":1}' \
    "$(cat "$TMP/drain.out")"
timeout 10 tail --pid="$W1" -f /dev/null
wait "$W1"; check "drained worker exits 0" 0 $?
check "drained worker answered exactly the one call it held" 1 \
    "$(grep -c 'event=stopped status=0 calls=1$' "$W1_LOG")"
check "broker saw it drained, not lost" "1 0" \
    "$(grep -c 'event=worker_drained' "$TMP/broker.log") $(grep -c 'event=worker_lost' "$TMP/broker.log")"

# ---- 2. deadlines: one slow call in a batch ----------------------------------
e2e_start_worker "${HB[@]}" --credit 4
e2e_wait_workers 1
SLOW='[{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1},{"jsonrpc":"2.0","method":"sleep","params":{"ms":1500},"id":2},{"jsonrpc":"2.0","method":"get_data","id":3}]'
WANT='[{"jsonrpc":"2.0","result":3,"id":1},{"jsonrpc":"2.0","error":{"code":-32003,"message":"Request timeout"},"id":2},{"jsonrpc":"2.0","result":["hello",5],"id":3}]'
t0=$(now_ms)
check "HTTP X-JRPC-Timeout-Ms: the others' results plus one -32003" "$WANT" \
    "$(post "$SLOW" -H 'X-JRPC-Timeout-Ms: 400')"
check "answered at the deadline, not after the slow call" 1 $(( $(now_ms) - t0 < 1200 ))
# Header frame {"timeout_ms": 400} (msgpack), then the JSON frame.
t0=$(now_ms)
check "ZeroMQ header timeout_ms: the same" "0:$WANT" \
    "$("$PROBE" --type dealer --connect "$URL" --timeout-ms 5000 '@hex:81aa74696d656f75745f6d73cd0190' "$SLOW")"
check "answered at the deadline over ZeroMQ too" 1 $(( $(now_ms) - t0 < 1200 ))

# ---- 3. a worker killed mid-batch ---------------------------------------------
# Two workers with credit 4; a batch of 4 spreads 2 and 2. The sleeps above
# end within 1.5 s; wait so that both workers start with full credit.
sleep 1.2
e2e_start_worker "${HB[@]}" --credit 4
e2e_wait_workers 2
WA=$LAST_PID
batch sleep '{"ms":1000}' 4 >"$TMP/idem.json"
t0=$(now_ms)
post "@$TMP/idem.json" >"$TMP/idem.out" &
CLIENT=$!
sleep 0.3
kill -9 "$WA"
wait "$CLIENT"
elapsed=$(( $(now_ms) - t0 ))
check "SIGKILL: every idempotent call comes back with its result" "result=1000:4 ids=1,2,3,4" \
    "$(summary "$TMP/idem.out")"
# 0.3 s before the kill + detection (next heartbeat, 0.2 s) + 1 s of sleep, + slack.
check "SIGKILL: re-dispatched within detection + sleep time (${elapsed} ms)" 1 $(( elapsed < 2800 ))
check "SIGKILL: the lost worker's 2 calls were re-dispatched" \
    "reason=unreachable inflight=2 redispatched=2 failed=0" "$(lost_line)"

e2e_start_worker "${HB[@]}" --credit 4
WB=$LAST_PID
e2e_wait_workers 2
batch slow_update '{"ms":1000}' 4 >"$TMP/nonidem.json"
post "@$TMP/nonidem.json" >"$TMP/nonidem.out" &
CLIENT=$!
sleep 0.3
kill -9 "$WB"
wait "$CLIENT"
check "SIGKILL: non-idempotent calls it held get -32004, the rest results" \
    "err-32004:2 result=null:2 ids=1,2,3,4" "$(summary "$TMP/nonidem.out")"
check "SIGKILL: nothing non-idempotent was re-dispatched" \
    "reason=unreachable inflight=2 redispatched=0 failed=2" "$(lost_line)"

# ---- 4. a worker stalled (SIGSTOP) past the heartbeat expiry ---------------
e2e_start_worker "${HB[@]}" --credit 4
WC=$LAST_PID
WC_LOG=$TMP/worker$E2E_NWORKERS.log
e2e_wait_workers 2
t0=$(now_ms)
post "@$TMP/idem.json" >"$TMP/stop.out" &
CLIENT=$!
sleep 0.3
kill -STOP "$WC"
wait "$CLIENT"
elapsed=$(( $(now_ms) - t0 ))
check "SIGSTOP: every idempotent call comes back with its result" "result=1000:4 ids=1,2,3,4" \
    "$(summary "$TMP/stop.out")"
# 0.3 s + expiry (3 x 0.2 s, seen at a 0.2 s tick) + 1 s, + slack.
check "SIGSTOP: re-dispatched within the expiry + sleep time (${elapsed} ms)" 1 $(( elapsed < 3200 ))
check "SIGSTOP: found by heartbeat expiry, its 2 calls re-dispatched" \
    "reason=heartbeat_expired inflight=2 redispatched=2 failed=0" "$(lost_line)"
# Resumed, it answers its old calls under a session the broker has ended:
# they are dropped (their slots have new seqs anyway). It finds the broker
# silent, or is told DISCONNECT, and starts over with a fresh socket.
before=$(grep -c 'event=connected' "$WC_LOG")
kill -CONT "$WC"
e2e_wait_for "[ \$(grep -c 'event=connected' '$WC_LOG') -gt $before ]" 5
check "the resumed worker starts a new session, it is not taken back" 1 \
    "$(( $(grep -c 'event=connected' "$WC_LOG") > before ))"
e2e_wait_workers 2

post "@$TMP/nonidem.json" >"$TMP/stop2.out" &
CLIENT=$!
sleep 0.3
kill -STOP "$WC"
wait "$CLIENT"
kill -CONT "$WC"
check "SIGSTOP: non-idempotent calls it held get -32004, the rest results" \
    "err-32004:2 result=null:2 ids=1,2,3,4" "$(summary "$TMP/stop2.out")"
check "SIGSTOP: nothing non-idempotent was re-dispatched" \
    "reason=heartbeat_expired inflight=2 redispatched=0 failed=2" "$(lost_line)"
e2e_wait_workers 2

# ---- 5. overload: --max-open 4 -------------------------------------------------
e2e_restart_broker "${HB[@]}" --liveness 3 --timeout-ms 10000 --max-open 4 --max-redispatch 0
e2e_wait_workers 2
for i in 1 2 3 4; do
    post "{\"jsonrpc\":\"2.0\",\"method\":\"sleep\",\"params\":{\"ms\":1000},\"id\":$i}" \
        >"$TMP/open$i.out" &
    eval "OPEN$i=\$!"
done
sleep 0.3
t0=$(now_ms)
codes=
for i in 5 6 7 8; do
    codes+="$("${CURL[@]}" --max-time 5 -o /dev/null -w '%{http_code}' \
        --data-binary "{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"params\":[1,2],\"id\":$i}" "$RPC") "
done
elapsed=$(( $(now_ms) - t0 ))
check "past --max-open: 503 for every extra body" "503 503 503 503 " "$codes"
check "past --max-open: refused at once, all 4 in ${elapsed} ms (< 1 s)" 1 $(( elapsed < 1000 ))
for i in 1 2 3 4; do
    eval "wait \$OPEN$i"
    check "admitted body $i completes with its result" \
        "{\"jsonrpc\":\"2.0\",\"result\":1000,\"id\":$i}" "$(cat "$TMP/open$i.out")"
done

# ---- 5b. --max-redispatch 0: even idempotent calls fail with their worker -----
post "@$TMP/idem.json" >"$TMP/nore.out" &
CLIENT=$!
sleep 0.3
kill -9 "$WC"
wait "$CLIENT"
check "--max-redispatch 0: the lost worker's idempotent calls get -32004" \
    "err-32004:2 result=1000:2 ids=1,2,3,4" "$(summary "$TMP/nore.out")"
e2e_wait_workers 1

# ---- 6. a client that leaves mid-batch ----------------------------------------
batch sleep '{"ms":800}' 4 >"$TMP/leave.json"
"${CURL[@]}" --max-time 0.2 --data-binary "@$TMP/leave.json" "$RPC" >/dev/null 2>&1
check "client gave up after 0.2 s (curl timeout)" 28 $?
check "the broker still serves" '{"jsonrpc":"2.0","result":3,"id":9}' \
    "$(post '{"jsonrpc":"2.0","method":"add","params":[1,2],"id":9}' --max-time 5)"
sleep 1   # the abandoned calls' answers come back late and are dropped
kill -TERM "$BROKER_PID"
timeout 10 tail --pid="$BROKER_PID" -f /dev/null
wait "$BROKER_PID"; status=$?
check "broker exits 0 after SIGTERM" 0 "$status"
check "the abandoned body was counted, its late answers dropped" "cancelled=1 late=4" \
    "$(grep -o 'cancelled=[0-9]*' "$TMP/broker.log" | tail -n 1) $(grep -o 'late=[0-9]*' "$TMP/broker.log" | tail -n 1)"
check "no leak reported (LeakSanitizer, sanitizer builds)" 0 \
    "$(grep -c 'LeakSanitizer' "$TMP/broker.log")"
e2e_finish
