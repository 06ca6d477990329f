#!/usr/bin/env bash
# JSON pass-through (PROTOCOL.md 2.1 "json", 2.2, 2.3): echo served by a
# jrpc-worker that declares it json (the client's params bytes in, the same
# bytes out) and by one that does not (--json off: msgpack both ways), side
# by side; batches mixing both kinds and methods; a worker's JSON answers
# checked by the broker (bad, too deep, out of range: -32603, never a broken
# reply); calls of a lost json worker re-dispatched to the msgpack one.
source "$JRPC_E2E_LIB"
E2E_LOG_LEVEL=debug e2e_start_broker --max-batch 5000 --heartbeat-ms 200
e2e_start_worker --name jw --credit 4 --heartbeat-ms 200 --log-level debug
JW=$LAST_PID
e2e_start_worker --name mw --credit 4 --heartbeat-ms 200 --json off --log-level debug
"$JRPC_BIN/jrpc-test-json-worker" --connect "$WORKERS_EP" >>"$E2E_TMP/jsonworker.log" 2>&1 &
E2E_PIDS+=("$!")
e2e_wait_workers 3

send() { printf '%s' "$1" | "$JRPC" send; }

ready_json() { grep -o "event=worker_ready worker=$1 .*" "$E2E_TMP/broker.log" | grep -o 'json=[0-9]*'; }
check "READY: jw declares echo json" json=1 "$(ready_json jw)"
check "READY: mw (--json off) declares nothing" json=0 "$(ready_json mw)"
check "READY: the test worker declares its 8 methods" json=8 \
    "$(grep -o 'event=worker_ready worker=[0-9a-f]* .*' "$E2E_TMP/broker.log" | grep -o 'json=[0-9]*')"

# Canonical params (what msgpack gives back): the same bytes from either kind.
V='[18446744073709551615,-9223372036854775808,0.1,1e+300,5e-324,"a\"b\\c\u0001é😀",{"k":[true,false,null,{}],"":[]}]'
body='[' want='['
for i in $(seq 1 200); do
    [ "$i" -gt 1 ] && body+=',' && want+=','
    body+="{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":$V,\"id\":$i}"
    want+="{\"jsonrpc\":\"2.0\",\"result\":$V,\"id\":$i}"
done
body+=']' want+=']'
check "200 echo calls over both kinds: byte-identical results" "$want" "$(send "$body")"
served() { grep -c 'event=call .*method=echo' "$E2E_TMP/worker$1.log"; }
check "both workers served echo" "yes" \
    "$( [ "$(served 1)" -gt 0 ] && [ "$(served 2)" -gt 0 ] && echo yes || echo "no: $(served 1) $(served 2)")"

# Spaced params: verbatim from jw, re-serialised by mw; nothing else.
P='{ "a" : [1, 2.50, "x\u00e9"] ,"b":1E5}'
body='['
for i in $(seq 1 60); do
    [ "$i" -gt 1 ] && body+=','
    body+="{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":$P,\"id\":$i},"
    body+="{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"params\":[$i,1],\"id\":\"a$i\"}"
done
body+=']'
verdict=$(send "$body" | python3 -c '
import json, sys
P = sys.argv[1]
raw = sys.stdin.read()
verb = raw.count("\"result\":" + P + ",")
canon = raw.count("\"result\":{\"a\":[1,2.5,\"x\u00e9\"],\"b\":100000.0},")
ok = json.loads(raw)
adds = all(r["result"] == int(r["id"][1:]) + 1 for r in ok if isinstance(r["id"], str))
print("ok" if verb + canon == 60 and verb > 0 and canon > 0 and adds and len(ok) == 120
      else "verbatim=%d canonical=%d adds=%s n=%d" % (verb, canon, adds, len(ok)))' "$P")
check "spaced params: verbatim (json) or re-serialised (msgpack), adds in between" ok "$verdict"

check "a notification to a json method gets no answer" "" \
    "$(send '{"jsonrpc":"2.0","method":"echo","params":[1]}')"
check "no params: null" '{"jsonrpc":"2.0","result":null,"id":1}' \
    "$(send '{"jsonrpc":"2.0","method":"params","id":1}')"

E603='"error":{"code":-32603,"message":"Internal error","data":"result has no JSON form"}'
D64=$(printf '[%.0s' $(seq 64))$(printf ']%.0s' $(seq 64))
check "a worker's JSON answers: copied, or -32603 when the broker refuses them" \
    "[{\"jsonrpc\":\"2.0\",\"result\":{\"a\" : [1, 2.50]},\"id\":1},{\"jsonrpc\":\"2.0\",\"result\":$D64,\"id\":2},{\"jsonrpc\":\"2.0\",$E603,\"id\":3},{\"jsonrpc\":\"2.0\",$E603,\"id\":4},{\"jsonrpc\":\"2.0\",$E603,\"id\":5},{\"jsonrpc\":\"2.0\",\"error\":{\"code\":7,\"message\":\"seven\",\"data\":{\"k\" : [true]}},\"id\":6},{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32603,\"message\":\"Internal error\",\"data\":\"worker sent a malformed error\"},\"id\":7},{\"jsonrpc\":\"2.0\",\"result\":[ 1 ,2 ],\"id\":8},{\"jsonrpc\":\"2.0\",\"result\":3,\"id\":9}]" \
    "$(send '[{"jsonrpc":"2.0","method":"spaced","id":1},{"jsonrpc":"2.0","method":"deep64","id":2},
              {"jsonrpc":"2.0","method":"deep65","id":3},{"jsonrpc":"2.0","method":"bad","id":4},
              {"jsonrpc":"2.0","method":"huge","id":5},{"jsonrpc":"2.0","method":"err_data","id":6},
              {"jsonrpc":"2.0","method":"bad_data","id":7},{"jsonrpc":"2.0","method":"params","params":[ 1 ,2 ],"id":8},
              {"jsonrpc":"2.0","method":"add","params":[1,2],"id":9}]')"
check "the broker is still serving" '{"jsonrpc":"2.0","result":[1],"id":1}' \
    "$(send '{"jsonrpc":"2.0","method":"echo","params":[1],"id":1}')"

# Re-dispatch across kinds: jw holds its echo calls (--slow-percent 100) and
# dies; echo is idempotent, so they go to mw, which answers in msgpack.
kill -9 "$JW"
e2e_start_worker --name jw2 --credit 64 --heartbeat-ms 200 --slow-percent 100 --slow-ms 60000
JW2=$LAST_PID
e2e_wait_for "grep -q 'event=worker_ready worker=jw2' '$E2E_TMP/broker.log'" 10
body='['
for i in $(seq 1 40); do
    [ "$i" -gt 1 ] && body+=','
    body+="{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":$P,\"id\":$i}"
done
body+=']'
send "$body" >"$E2E_TMP/redispatch.out" &
SENDER=$!
sleep 0.5   # the calls are out, some held by jw2
kill -9 "$JW2"
wait "$SENDER"
check "calls of the lost json worker answered by the msgpack one, all 40" 40 \
    "$(grep -o '"result":{"a":\[1,2.5,"xé"\],"b":100000.0}' "$E2E_TMP/redispatch.out" | wc -l)"
check "jw2's held calls were re-dispatched" yes \
    "$(grep -q 'event=worker_lost .*redispatched=[1-9].*worker=jw2' "$E2E_TMP/broker.log" && echo yes || echo no)"
e2e_finish
