#!/usr/bin/env bash
# The ZeroMQ client side frame by frame: REQ and DEALER clients, the empty
# delimiter, the optional header frame (its timeout_ms honoured), bad framing
# answered, garbage on the worker socket dropped, and one worker serving two
# brokers at once.
source "$JRPC_E2E_LIB"
e2e_start_broker --heartbeat-ms 200
e2e_start_worker --heartbeat-ms 200
e2e_wait_workers 1
PROBE="$JRPC_BIN/jrpc-test-zmq-probe"
ADD='{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}'
NOTE='{"jsonrpc":"2.0","method":"update","params":[1]}'
R3='{"jsonrpc":"2.0","result":3,"id":1}'

check "REQ client" "0:$R3" "$("$PROBE" --type req --connect "$URL" "$ADD")"
check "REQ client: notification gets one empty frame, then the next request works" \
    "$(printf '0:\n0:%s' "$R3")" "$("$PROBE" --type req --connect "$URL" "$NOTE" -- "$ADD")"
check "DEALER without delimiter" "0:$R3" "$("$PROBE" --connect "$URL" "$ADD")"
check "DEALER with REQ-style delimiter" "$(printf '0:\n1:%s' "$R3")" \
    "$("$PROBE" --connect "$URL" @empty "$ADD")"
check "DEALER with an empty header map" "0:$R3" "$("$PROBE" --connect "$URL" @hex:80 "$ADD")"
# {"timeout_ms": 100}: the client asks for less than the broker's 30 s.
check "header timeout_ms is honoured" \
    '0:[{"jsonrpc":"2.0","error":{"code":-32003,"message":"Request timeout"},"id":1},{"jsonrpc":"2.0","result":3,"id":2}]' \
    "$("$PROBE" --connect "$URL" @hex:81aa74696d656f75745f6d7364 \
        '[{"jsonrpc":"2.0","method":"sleep","params":{"ms":3000},"id":1},{"jsonrpc":"2.0","method":"add","params":[1,2],"id":2}]')"
check "malformed header frame" \
    '0:{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request","data":"malformed header frame"},"id":null}' \
    "$("$PROBE" --connect "$URL" @hex:c1 "$ADD")"
check "too many frames" \
    '0:{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request","data":"a message is [header frame] JSON frame"},"id":null}' \
    "$("$PROBE" --connect "$URL" a b c d)"
check "empty body is a parse error" '0:-32700' \
    "$("$PROBE" --connect "$URL" @empty @empty | sed -n 's/^1:.*"code":\(-[0-9]*\).*/0:\1/p')"

# Garbage on the worker socket: logged, dropped, nothing else changes.
"$PROBE" --no-reply --connect "$WORKERS_EP" @hex:c1 -- hello -- @hex:9301 -- @hex:930104 -- \
    @hex:92 a b -- @hex:930203919401a3616464c000 -- @empty
e2e_wait_for "grep -q 'event=malformed_frame' '$E2E_TMP/broker.log'" 5
check "malformed worker frames are logged" 1 \
    "$(grep -c 'event=malformed_frame' "$E2E_TMP/broker.log" | awk '{print ($1 >= 3)}')"
check "the broker still serves after worker-side garbage" "0:$R3" \
    "$("$PROBE" --connect "$URL" "$ADD")"
check "the real worker was not disturbed" "" "$(grep 'event=worker_lost' "$E2E_TMP/broker.log")"

# A client that stops reading its answers: the broker's send queue to it
# fills (its HWM: 1000 messages, which is what bounds the memory), further
# answers to it are dropped and counted, and other clients are served.
BIG=$(printf 'x%.0s' $(seq 10000))
"$PROBE" --no-reply --rcvhwm 10 --repeat 3000 --hold-ms 4000 --connect "$URL" \
    "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":[\"$BIG\"],\"id\":1}" &
STALLED=$!
e2e_wait_for "grep -q 'reason=client_not_reading' '$E2E_TMP/broker.log'" 30
check "answers to a client that does not read are dropped and counted" 1 \
    "$(grep -c 'event=reply_dropped reason=client_not_reading' "$E2E_TMP/broker.log" | awk '{print ($1 >= 1)}')"
check "meanwhile another client is served" "0:$R3" "$("$PROBE" --connect "$URL" "$ADD")"
check "the broker is alive" 0 "$(kill -0 "$BROKER_PID"; echo $?)"
kill "$STALLED" 2>/dev/null; wait "$STALLED" 2>/dev/null

# One worker, two brokers: --connect repeats, each broker uses it.
B2Z="tcp://127.0.0.1:$((HTTP_PORT + 1))"
B2W="tcp://127.0.0.1:$((HTTP_PORT + 2))"
: > "$E2E_TMP/broker2.log"
"$JRPC_BIN/jrpc-broker" --zmq "$B2Z" --workers "$B2W" --http none >"$E2E_TMP/broker2.log" 2>&1 &
E2E_PIDS+=($!)
"$JRPC_BIN/jrpc-worker" --connect "$WORKERS_EP" --connect "$B2W" >"$E2E_TMP/worker-both.log" 2>&1 &
E2E_PIDS+=($!)
e2e_wait_for "grep -q 'workers=1' '$E2E_TMP/broker2.log'" 10
e2e_wait_workers 2
check "a worker serving two brokers answers through the first" "$R3" \
    "$(printf '%s' "$ADD" | "$JRPC" --url "$URL" send)"
check "... and through the second" "$R3" "$(printf '%s' "$ADD" | "$JRPC" --url "$B2Z" send)"
e2e_finish
