#!/usr/bin/env bash
# W3C traceparent end to end, and the broker's access line (issue 7): a
# traceparent sent over HTTP (curl) and over ZeroMQ (jrpc --traceparent)
# reaches the worker, which logs it with its call, and the broker logs it in
# the body's access line; invalid ones are ignored (the call is still
# answered); the access line's fields for a batch with an error, a signed
# body with a known key id, and a 409 replay (real redis-server).
source "$JRPC_E2E_LIB"
SIGN="python3 $(dirname "$JRPC_E2E_LIB")/sign.py"

TP_HTTP=00-11111111111111111111111111111111-1111111111111111-01
TP_ZMQ=00-22222222222222222222222222222222-2222222222222222-01
TP_UNSAMPLED=00-33333333333333333333333333333333-3333333333333333-00
TP_BATCH=00-44444444444444444444444444444444-4444444444444444-01
TP_DUP=00-55555555555555555555555555555555-5555555555555555-01
TP_FUTURE=cc-66666666666666666666666666666666-6666666666666666-01-later-fields
TP_SIGNED=00-77777777777777777777777777777777-7777777777777777-01
ADD='{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}'

post() { # BODY [curl args...] -> the answer body
    local body=$1; shift
    curl -s -H 'Content-Type: application/json' "$@" --data-binary "$body" "$HTTP_URL/rpc"
}
# The broker's access line of trace-id $1 (or the last one when $1 is empty).
access() { grep 'event=access' "$E2E_TMP/broker.log" | grep -- "${1:-}" | tail -n 1; }
field() { sed -E "s/.* $1=([^ ]*).*/\\1/"; } # FIELD < line
wlog() { cat "$E2E_TMP"/worker*.log; }

E2E_HTTP=1 e2e_start_broker
e2e_start_worker
e2e_wait_workers 1

# ---- HTTP: the traceparent header reaches the worker and both logs.
check "http: answered with a traceparent" '{"jsonrpc":"2.0","result":3,"id":1}' \
    "$(post "$ADD" -H "traceparent: $TP_HTTP")"
e2e_wait_for "access 11111111111111111111111111111111 | grep -q ." 5
check "http: worker call line at info with the traceparent" 1 \
    "$(wlog | grep 'level=info' | grep 'event=call ' | grep 'method=add' | grep 'outcome=result' |
       grep -c "traceparent=$TP_HTTP")"
line=$(access 11111111111111111111111111111111)
check "http: access transport" http "$(echo "$line" | field transport)"
check "http: access traceparent" "$TP_HTTP" "$(echo "$line" | field traceparent)"
check "http: access calls/errors/status/outcome" "1 0 200 ok" \
    "$(echo "$line" | field calls) $(echo "$line" | field errors) $(echo "$line" | field status) $(echo "$line" | field outcome)"
check "http: access key (open broker)" "-" "$(echo "$line" | field key)"
check "http: access peer" 1 "$(echo "$line" | field peer | grep -c '^127\.0\.0\.1:[0-9][0-9]*$')"
check "http: access bytes" "${#ADD} 35" "$(echo "$line" | field bytes_in) $(echo "$line" | field bytes_out)"
check "http: access latency is a number" 1 "$(echo "$line" | field latency_us | grep -c '^[0-9][0-9]*$')"

# ---- ZeroMQ: jrpc --traceparent sends it in the header frame.
check "zmq: jrpc call --traceparent answered" 3 \
    "$("$JRPC" --url "$URL" --traceparent "$TP_ZMQ" call add '[1,2]')"
e2e_wait_for "access 22222222222222222222222222222222 | grep -q ." 5
check "zmq: worker call line with the traceparent" 1 \
    "$(wlog | grep 'level=info' | grep 'method=add' | grep -c "traceparent=$TP_ZMQ")"
line=$(access 22222222222222222222222222222222)
check "zmq: access transport and traceparent" "zmq $TP_ZMQ" \
    "$(echo "$line" | field transport) $(echo "$line" | field traceparent)"
check "zmq: access peer is the client's IP" 127.0.0.1 "$(echo "$line" | field peer)"

# ---- A later version (W3C: parse the 00 prefix, keep the rest): carried as is.
check "future version: answered" '{"jsonrpc":"2.0","result":3,"id":1}' \
    "$(post "$ADD" -H "traceparent: $TP_FUTURE")"
e2e_wait_for "access 66666666666666666666666666666666 | grep -q ." 5
check "future version: reaches the worker unchanged" 1 \
    "$(wlog | grep -c "traceparent=$TP_FUTURE")"

# ---- Not sampled (flags 00): carried, but the worker logs the call at debug only.
post "$ADD" -H "traceparent: $TP_UNSAMPLED" >/dev/null
e2e_wait_for "access 33333333333333333333333333333333 | grep -q ." 5
check "unsampled: in the access line" "$TP_UNSAMPLED" \
    "$(access 33333333333333333333333333333333 | field traceparent)"
check "unsampled: no worker line at info" 0 "$(wlog | grep -c 33333333333333333333333333333333)"

# ---- Invalid ones are ignored: the call is answered, no trace anywhere.
n_before=$(grep -c 'event=access' "$E2E_TMP/broker.log")
bad=(
    "00-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA-aaaaaaaaaaaaaaaa-01"   # upper case
    "00-00000000000000000000000000000000-aaaaaaaaaaaaaaaa-01"   # zero trace-id
    "00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-0000000000000000-01"   # zero parent-id
    "ff-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-aaaaaaaaaaaaaaaa-01"   # version ff
    "00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-aaaaaaaaaaaaaaaa-01-x" # v00 with more
    "garbage"
)
for tp in "${bad[@]}"; do
    check "invalid '$tp': answered" '{"jsonrpc":"2.0","result":3,"id":1}' \
        "$(post "$ADD" -H "traceparent: $tp")"
done
# Two traceparent headers: neither is taken.
check "two traceparent headers: answered" '{"jsonrpc":"2.0","result":3,"id":1}' \
    "$(post "$ADD" -H "traceparent: $TP_DUP" -H "traceparent: $TP_DUP")"
# Over ZeroMQ, a header frame {"traceparent": "00-zz"} (msgpack by hand).
hdr=$(printf '\x81\xabtraceparent\xa500-zz' | od -An -tx1 | tr -d ' \n')
check "zmq: invalid traceparent in the header frame: answered" \
    '1:{"jsonrpc":"2.0","result":3,"id":1}' \
    "$("$JRPC_BIN/jrpc-test-zmq-probe" --type dealer --connect "$URL" @empty "@hex:$hdr" "$ADD" |
       tail -n 1)"
e2e_wait_for "[ \$(grep -c 'event=access' \"$E2E_TMP/broker.log\") -ge $((n_before + ${#bad[@]} + 2)) ]" 5
check "invalid: access lines say traceparent=-" "$((${#bad[@]} + 2))" \
    "$(grep 'event=access' "$E2E_TMP/broker.log" | tail -n $((${#bad[@]} + 2)) | grep -c 'traceparent=- *$')"
check "invalid: no trace reached a worker" 0 \
    "$(wlog | grep -c -e aaaaaaaaaaaaaaaa -e 55555555555555555555555555555555 -e '00-zz')"
check "jrpc --traceparent with a malformed value: usage error (2)" 2 \
    "$("$JRPC" --url "$URL" --traceparent 00-zz call add '[1,2]' 2>/dev/null; echo $?)"

# ---- A batch of three with one error: calls=3 errors=1, every call traced.
out=$(post '[{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1},{"jsonrpc":"2.0","method":"add","params":["x"],"id":2},{"jsonrpc":"2.0","method":"echo","params":[5],"id":3}]' \
    -H "traceparent: $TP_BATCH")
check "batch: answered" 1 "$(echo "$out" | grep -c '"code":-32602')"
e2e_wait_for "access 44444444444444444444444444444444 | grep -q ." 5
line=$(access 44444444444444444444444444444444)
check "batch: calls=3 errors=1 status=200" "3 1 200" \
    "$(echo "$line" | field calls) $(echo "$line" | field errors) $(echo "$line" | field status)"
check "batch: each call reached a worker with the traceparent" 3 \
    "$(wlog | grep -c "traceparent=$TP_BATCH")"
check "batch: the worker's error outcome" 1 \
    "$(wlog | grep "traceparent=$TP_BATCH" | grep -c 'outcome=error code=-32602')"

# ---- The client leaves before the answer: status 499, outcome cancelled.
TP_GONE=00-88888888888888888888888888888888-8888888888888888-01
post '{"jsonrpc":"2.0","method":"sleep","params":{"ms":1500},"id":1}' --max-time 0.3 \
    -H "traceparent: $TP_GONE" >/dev/null
e2e_wait_for "access 88888888888888888888888888888888 | grep -q ." 5
line=$(access 88888888888888888888888888888888)
check "client gone: access status and outcome" "499 cancelled 1" \
    "$(echo "$line" | field status) $(echo "$line" | field outcome) $(echo "$line" | field calls)"

# ---- --access-log off: no access line.
kill -TERM "$BROKER_PID"; wait "$BROKER_PID"
E2E_HTTP=1 e2e_restart_broker --access-log off
e2e_wait_workers 1
post "$ADD" -H "traceparent: $TP_HTTP" >/dev/null
check "--access-log off: answered, no access line" 0 "$(grep -c 'event=access' "$E2E_TMP/broker.log")"
check "--access-log on|off: anything else is a usage error (2)" 2 \
    "$("$JRPC_BIN/jrpc-broker" --access-log maybe 2>/dev/null; echo $?)"

# ---- Signed bodies with a real Redis: the key id, and a 409 replay.
if command -v redis-server >/dev/null; then
    RPORT=$(e2e_pick_port)
    redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no \
        >"$E2E_TMP/redis.log" 2>&1 &
    E2E_PIDS+=("$!")
    e2e_wait_for "redis-cli -p $RPORT ping 2>/dev/null | grep -q PONG" 10
    printf 'demo s3cr3t-s3cr3t-s3cr3t\n' > "$E2E_TMP/keys"
    kill -TERM "$BROKER_PID"; wait "$BROKER_PID"
    E2E_HTTP=1 e2e_restart_broker --keys "$E2E_TMP/keys" --redis "redis://127.0.0.1:$RPORT"
    e2e_wait_workers 1
    printf '%s' "$ADD" > "$E2E_TMP/b"
    $SIGN --key demo --secret s3cr3t-s3cr3t-s3cr3t --body-file "$E2E_TMP/b" > "$E2E_TMP/h"
    check "signed: answered" '{"jsonrpc":"2.0","result":3,"id":1}' \
        "$(post "$ADD" -H @"$E2E_TMP/h" -H "traceparent: $TP_SIGNED")"
    check "signed replay: 409" 409 \
        "$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
           -H @"$E2E_TMP/h" -H "traceparent: $TP_SIGNED" --data-binary "$ADD" "$HTTP_URL/rpc")"
    e2e_wait_for "[ \$(access 77777777777777777777777777777777 | wc -l) -ge 1 ] &&
                  [ \$(grep -c 77777777777777777777777777777777 \"$E2E_TMP/broker.log\") -ge 2 ]" 5
    lines=$(grep 'event=access' "$E2E_TMP/broker.log" | grep 77777777777777777777777777777777)
    first=$(echo "$lines" | head -n 1); second=$(echo "$lines" | sed -n 2p)
    check "signed: access key status outcome" "demo 200 ok 1 0" \
        "$(echo "$first" | field key) $(echo "$first" | field status) $(echo "$first" | field outcome) $(echo "$first" | field calls) $(echo "$first" | field errors)"
    check "replay: access key status outcome" "demo 409 replayed 1" \
        "$(echo "$second" | field key) $(echo "$second" | field status) $(echo "$second" | field outcome) $(echo "$second" | field errors)"
    # add is declared idempotent, so the replayed body was dispatched while
    # its nonce was claimed (early dispatch, docs/SIGNING.md): the worker ran
    # it a second time with the same traceparent, and its answer was dropped
    # for the 409 above.
    e2e_wait_for "[ \$(wlog | grep -c 'traceparent=$TP_SIGNED') -ge 2 ]" 5
    check "replay: the worker ran it again (early dispatch), answer dropped" 2 \
        "$(wlog | grep -c "traceparent=$TP_SIGNED")"
    # A body with no signature: 401, no key.
    line=$(post "$ADD" >/dev/null; sleep 0.2; access)
    check "unsigned: access key status outcome" "- 401 unauthorized" \
        "$(echo "$line" | field key) $(echo "$line" | field status) $(echo "$line" | field outcome)"
else
    echo "redis-server is not installed"; E2E_FAIL=$((E2E_FAIL + 1))
fi

e2e_finish
