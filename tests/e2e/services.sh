#!/usr/bin/env bash
# Services (issue 32 section 1, docs/ARCHITECTURE.md "Services"): two
# jrpc-workers of different services declare the same methods; the second
# is refused each bare name (its log line, jrpc_methods_refused_total), the
# bare name always reaches the first (20 calls of count, all answered by
# billing's worker), shipping.count reaches the second, both services'
# other methods are callable; when the owner's last worker leaves the next
# READY declaring the name takes it. A bad service name is refused at READY
# (the worker told DISCONNECT). A bearer key whose ACL is billing.* calls
# billing's methods bare and qualified and nothing else. No-service workers
# work as before, and own their bare names against a later service.
source "$JRPC_E2E_LIB"
TOKEN=svc-e2e-token-0123456789abcdefghijklmnopqrstu
OPS=svc-e2e-ops-token-0123456789abcdefghijklmnopq
HASH=$(printf %s "$TOKEN" | sha256sum | cut -d' ' -f1)
printf 'biller bearer-sha256:%s billing.*\n' "$HASH" > "$E2E_TMP/keys"
printf 'ops bearer-sha256:%s\n' "$(printf %s "$OPS" | sha256sum | cut -d' ' -f1)" >> "$E2E_TMP/keys"
chmod 600 "$E2E_TMP/keys"

E2E_HTTP=1 e2e_start_broker --admin 127.0.0.1:0 --keys "$E2E_TMP/keys" --heartbeat-ms 200
ADMIN=$(e2e_admin_url)
e2e_start_worker --service billing --name wa --heartbeat-ms 200
WA=$LAST_PID
e2e_wait_workers 1
e2e_start_worker --service shipping --name wb --heartbeat-ms 200
WB=$LAST_PID
e2e_wait_workers 2

# rpc METHOD [PARAMS] -> the result (or error code) of one call as biller
# (ACL billing.*); ops: the same as ops (no ACL)
rpc() { call_as "$TOKEN" "$@"; }
ops() { call_as "$OPS" "$@"; }
call_as() {
    local tok=$1; shift
    local params=${2:-[]}
    curl -s -H 'Content-Type: application/json' -H "Authorization: Bearer $tok" \
        --data-binary "{\"jsonrpc\":\"2.0\",\"method\":\"$1\",\"params\":$params,\"id\":1}" \
        "$HTTP_URL/rpc" | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(r["result"] if "result" in r else "error %d" % r["error"]["code"])'
}

check "READY: wa declares service billing" 1 \
    "$(grep -c 'event=worker_ready worker=wa .*methods=12 .*service=billing' "$E2E_TMP/broker.log")"
check "READY: wb (shipping) refused each of the 12 bare names billing owns" 12 \
    "$(grep -c 'event=method_refused reason=service_conflict method=[a-z_]* service=shipping owner=billing worker=wb' \
        "$E2E_TMP/broker.log")"
check "the refusal of count is logged by name" 1 \
    "$(grep -c 'event=method_refused reason=service_conflict method=count service=shipping owner=billing' \
        "$E2E_TMP/broker.log")"
check "jrpc_methods_refused_total counts them" "jrpc_methods_refused_total 12" \
    "$(curl -s "$ADMIN/metrics" | grep '^jrpc_methods_refused_total ')"

# count answers how many times its process ran it: the bare name reaches
# billing's worker every time (1..20), shipping's count has run once after.
got=""
for i in $(seq 1 20); do got+="$(rpc count) "; done
check "bare count x20: all answered by billing's worker, in turn" \
    "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 " "$got"
check "billing.count: the same worker (21)" 21 "$(rpc billing.count)"
check "shipping.count: the acl refuses it for the billing.* key" "error -32002" "$(rpc shipping.count)"
check "shipping.count with a key without ACL reaches shipping's worker (1)" 1 \
    "$(ops shipping.count)"
check "shipping.add" 5 "$(ops shipping.add '[2,3]')"
check "shipping.echo (a json method)" "{'a': 1}" "$(ops shipping.echo '{"a":1}')"
check "add bare (billing's), with the billing.* key" 7 "$(rpc add '[3,4]')"
check "billing.add qualified, with the billing.* key" 9 "$(rpc billing.add '[4,5]')"
check "get_data bare" "['hello', 5]" "$(rpc get_data)"
check "an unknown service's method: -32601" "error -32601" "$(ops nosuch.add '[1,2]')"
check "and the billing.* key may not call it: -32002" "error -32002" "$(rpc nosuch.add '[1,2]')"
check "the access line names the service" 1 \
    "$(grep -c 'event=access .*service=billing' "$E2E_TMP/broker.log" | sed 's/^[1-9][0-9]*$/1/')"

check "per-method metrics carry the service: billing's count answered 21 times" 21 \
    "$(curl -s "$ADMIN/metrics" | sed -n 's/^jrpc_method_calls_total{service="billing",method="count",outcome="ok"} //p')"
check "and shipping's count once, under its own service" 1 \
    "$(curl -s "$ADMIN/metrics" | sed -n 's/^jrpc_method_calls_total{service="shipping",method="count",outcome="ok"} //p')"
check "/status/methods names both services' count" 2 \
    "$(curl -s "$ADMIN/status/methods" | grep -o '"service":"[a-z]*","method":"count"' | sort -u | wc -l)"
# A bad service name: refused at READY, the worker told DISCONNECT.
bad=$(/usr/bin/python3 - "$WORKERS_EP" <<'PY'
import sys, zmq, msgpack
ctx = zmq.Context()
s = ctx.socket(zmq.DEALER)
s.setsockopt(zmq.LINGER, 0)
s.connect(sys.argv[1])
s.send(msgpack.packb([1, 1, 4, ["echo"], {"service": "Bad Name!"}]))
if s.poll(10000):
    print(msgpack.unpackb(s.recv()))
else:
    print("nothing")
PY
)
check "bad service: the worker is told DISCONNECT" "[1, 5]" "$bad"
check "bad service: event=worker_refused reason=bad_service" 1 \
    "$(grep -c 'event=worker_refused reason=bad_service' "$E2E_TMP/broker.log")"
check "bad service: counted in jrpc_worker_ready_refused_total" "jrpc_worker_ready_refused_total 1" \
    "$(curl -s "$ADMIN/metrics" | grep '^jrpc_worker_ready_refused_total ')"
check "jrpc-worker refuses a bad --service itself (exit 2)" 2 \
    "$("$JRPC_BIN/jrpc-worker" --service 'Bad!' --connect "$WORKERS_EP" >/dev/null 2>&1; echo $?)"

# The owner's last worker leaves: the bare name is free, the next READY
# declaring it takes it (shipping's new worker; wb keeps its refusal).
kill -9 "$WA"
e2e_wait_workers 1
e2e_start_worker --service shipping --name wc --heartbeat-ms 200
WC=$LAST_PID
e2e_wait_workers 2
check "after billing left: count bare reaches shipping" yes \
    "$(v=$(ops count); case "$v" in [0-9]*) echo yes;; *) echo "$v";; esac)"
check "billing.add is gone: -32601" "error -32601" "$(ops billing.add '[1,1]')"
check "the billing.* key may not call shipping's add bare" "error -32002" "$(rpc add '[1,1]')"

# No service anywhere: as before; a no-service owner keeps its bare names.
kill -9 "$WB" "$WC"
e2e_restart_broker --heartbeat-ms 200
e2e_start_worker --name plain --heartbeat-ms 200
e2e_wait_workers 1
check "no service: add" '{"jsonrpc":"2.0","result":3,"id":1}' \
    "$(printf '%s' '{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}' | "$JRPC" send)"
check "no service: a dotted name nobody serves is -32601" \
    '{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":1}' \
    "$(printf '%s' '{"jsonrpc":"2.0","method":"a.add","params":[1,2],"id":1}' | "$JRPC" send)"
e2e_start_worker --service late --name late --heartbeat-ms 200
e2e_wait_workers 2
check "a later service is refused the bare names the no-service worker owns" 1 \
    "$(grep -c 'event=method_refused reason=service_conflict method=add service=late owner=- worker=late' \
        "$E2E_TMP/broker.log")"
check "late.add reaches it" '{"jsonrpc":"2.0","result":3,"id":1}' \
    "$(printf '%s' '{"jsonrpc":"2.0","method":"late.add","params":[1,2],"id":1}' | "$JRPC" send)"
check "count bare still reaches the no-service worker" '{"jsonrpc":"2.0","result":1,"id":1}' \
    "$(printf '%s' '{"jsonrpc":"2.0","method":"count","id":1}' | "$JRPC" send)"
e2e_finish
