#!/usr/bin/env bash
# A worker SIGKILLed while it holds calls, with heartbeats far apart (5 s):
# its calls are neither lost nor left hanging. With the broker's own ZMTP
# engine on the worker side (the default) the connection's close is the
# loss: the idempotent calls are re-run at the other worker and the
# non-idempotent one comes back -32004, well before a heartbeat could tell.
# With --workers-engine libzmq (JRPC_WORKERS_ENGINE=libzmq, the _libzmq
# variant) the loss is seen at the next heartbeat send, within 5 s.
# Either way: reason=unreachable, every call answered once. ~10 s.
# shellcheck source=lib.sh
source "$JRPC_E2E_LIB"
command -v curl >/dev/null || { echo "curl is required"; exit 1; }

# shellcheck disable=SC2034  # read by lib.sh
E2E_HTTP=1
HB=(--heartbeat-ms 5000)
e2e_start_broker "${HB[@]}" --liveness 3 --timeout-ms 30000
if [ "${JRPC_WORKERS_ENGINE:-native}" = libzmq ]; then
    BOUND=7000    # the next heartbeat (5 s) + slack
else
    BOUND=2500    # the close, + slack for a loaded machine; no heartbeat in between
fi
post() { curl -sS --max-time 40 -H 'Content-Type: application/json' --data-binary "$1" "$HTTP_URL/rpc"; }
now_ms() { date +%s%3N; }

e2e_start_worker "${HB[@]}" --credit 4 --name keeper
e2e_wait_workers 1
e2e_start_worker "${HB[@]}" --credit 4 --name victim
VICTIM=$LAST_PID
e2e_wait_workers 2

# ---- idempotent calls: re-run at the other worker -----------------------------
# Eight 3 s sleeps: four at each worker (credit 4 each). The victim is
# killed holding four; they wait for the keeper's credit and run there.
batch=$(python3 -c 'print("[" + ",".join("{\"jsonrpc\":\"2.0\",\"method\":\"sleep\",\"params\":{\"ms\":3000},\"id\":%d}" % i for i in range(1, 9)) + "]")')
post "$batch" > "$E2E_TMP/batch.out" &
CLIENT=$!
sleep 0.5
t0=$(now_ms)
kill -9 "$VICTIM"
e2e_wait_for "grep -q 'event=worker_lost' '$E2E_TMP/broker.log'" 10
lost_ms=$(( $(now_ms) - t0 ))
check "the killed worker is lost within ${BOUND} ms (${lost_ms} ms)" 1 $(( lost_ms < BOUND ))
check "... as unreachable, its 4 idempotent calls re-dispatched" \
    "reason=unreachable inflight=4 redispatched=4 failed=0" \
    "$(grep 'event=worker_lost' "$E2E_TMP/broker.log" | head -n 1 | grep -o 'reason=[a-z_]* inflight=[0-9]* redispatched=[0-9]* failed=[0-9]*')"
wait "$CLIENT"
check "every call of the batch answered with its result, once" "1,2,3,4,5,6,7,8 3000" \
    "$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(",".join(str(x["id"]) for x in sorted(r, key=lambda x: x["id"])), " ".join(sorted(set(str(x.get("result")) for x in r))))' "$E2E_TMP/batch.out" 2>&1)"

# ---- a non-idempotent call: -32004 at once, not at its 30 s deadline ----------
# The new worker has the most free credit (8 against 4): the call goes there.
e2e_start_worker "${HB[@]}" --credit 8 --name victim2
VICTIM=$LAST_PID
e2e_wait_workers 2
post '{"jsonrpc":"2.0","method":"slow_update","params":{"ms":20000},"id":9}' > "$E2E_TMP/upd.out" &
CLIENT=$!
sleep 0.5
t0=$(now_ms)
kill -9 "$VICTIM"
wait "$CLIENT"
took=$(( $(now_ms) - t0 ))
check "a non-idempotent call held by a killed worker: -32004" \
    '{"jsonrpc":"2.0","error":{"code":-32004,"message":"Worker failed"},"id":9}' "$(cat "$E2E_TMP/upd.out")"
check "... within ${BOUND} ms of the kill (${took} ms)" 1 $(( took < BOUND ))
check "... and that loss too was unreachable" \
    "reason=unreachable inflight=1 redispatched=0 failed=1" \
    "$(grep 'event=worker_lost' "$E2E_TMP/broker.log" | tail -n 1 | grep -o 'reason=[a-z_]* inflight=[0-9]* redispatched=[0-9]* failed=[0-9]*')"
e2e_finish
