#!/usr/bin/env bash
# The demo worker's spin method: N ms of CPU, off the worker's loop thread,
# so heartbeats go on (with 100 ms heartbeats a spin of 1.5 s would
# otherwise get the worker declared lost), and bad params are refused.
source "$JRPC_E2E_LIB"
e2e_start_broker --heartbeat-ms 100 --liveness 3
e2e_start_worker --heartbeat-ms 100 --liveness 3
W=$LAST_PID
e2e_wait_workers 1
# 1500 ms of CPU can take many seconds of wall time on a loaded machine (the
# suite runs tests beside builds): the call may wait up to 60 s.
check "spin answers its ms and the worker's pid" "{\"ms\":1500,\"pid\":$W}" \
    "$("$JRPC" -t 60000 call spin '{"ms":1500}')"
check "the worker was never lost while spinning" 0 "$(grep -c 'event=worker_lost' "$E2E_TMP/broker.log")"
check "spin without ms: invalid params" '{"code":-32602,"message":"Invalid params"}' \
    "$("$JRPC" call spin '[1]')"
check "spin above 60000 ms: invalid params" '{"code":-32602,"message":"Invalid params"}' \
    "$("$JRPC" call spin '{"ms":60001}')"
e2e_finish
