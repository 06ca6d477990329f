#!/usr/bin/env bash
# Idempotency keys (docs/SIGNING.md "Idempotency keys"): a body sent with
# Idempotency-Key runs once; the same key and bytes again get its kept
# reply (Idempotent-Replayed: true) — also when the client gave up before
# the answer, and when the retries come at once while it runs; another body
# under the key is refused (422 / -32008) when a key id signed it, and is a
# run of its own without one (keys scoped by address and body, issue 36);
# an empty key is refused 400. The demo method `count` answers
# how many times it ran in its worker: the proof that nothing ran twice.
# Keys are per key id / client address; over ZeroMQ the header frame's
# idempotency_key does the same. Signed, a retry is signed anew (new nonce)
# and still gets the kept reply.
source "$JRPC_E2E_LIB"
command -v redis-server >/dev/null || { echo "redis-server is required"; exit 1; }
HERE=$(dirname "$JRPC_E2E_LIB")
e2e_start_redis
E2E_HTTP=1 e2e_start_broker --redis "redis://127.0.0.1:$RPORT" --timeout-ms 5000
e2e_start_worker
e2e_wait_workers 1

count() { "$JRPC_BIN/jrpc" -u "$HTTP_URL/rpc" call count; }
post() {  # KEY BODY [CURL ARGS]: "STATUS BODY", headers in $E2E_TMP/h
    local key=$1 body=$2; shift 2
    curl -s -D "$E2E_TMP/h" -o "$E2E_TMP/b" -w '%{http_code}' -H 'Content-Type: application/json' \
        -H "Idempotency-Key: $key" "$@" --data-binary "$body" "$HTTP_URL/rpc" > "$E2E_TMP/c"
    echo "$(cat "$E2E_TMP/c") $(cat "$E2E_TMP/b")"
}
replayed() { grep -ci '^Idempotent-Replayed: true' "$E2E_TMP/h"; }

B1='[{"jsonrpc":"2.0","method":"count","id":1},{"jsonrpc":"2.0","method":"count","id":2}]'
first=$(post k1 "$B1")
check "first: 200, run (two counts), not marked" "200 0" "${first%% *} $(replayed)"
again=$(post k1 "$B1")
check "same key, same body: the same reply" "$first" "$again"
check "... marked Idempotent-Replayed: true" 1 "$(replayed)"
check "the worker ran the calls once: the next count is 3" 3 "$(count)"
# Without a key id a client is only its address: its idempotency keys are
# scoped by address AND body (issue 36), so another body under the key is
# another run, and no 422 tells a neighbour behind the same NAT that the
# key exists (signed, below: 422).
check "same key, another body, no key id: its own run (no 422)" \
    '200 [{"jsonrpc":"2.0","result":3,"id":1}] 0' \
    "$(post k1 '[{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}]') $(replayed)"
check "a quoted key (structured field) is the same key" "$first" "$(post '"k1"' "$B1")"
check "a key with a space: refused -32600, nothing ran" "1 4" \
    "$(post 'a b' "$B1" | grep -c -- '-32600') $(count)"

# The client gives up (its connection closed at 500 ms); the body runs on
# (a count, then a 1 s sleep), its reply is kept; the retry, sent while it
# still runs, waits for it and gets it; the worker ran it once.
B2='[{"jsonrpc":"2.0","method":"count","id":"c"},{"jsonrpc":"2.0","method":"sleep","params":{"ms":1000},"id":"s"}]'
curl -s -o /dev/null --max-time 0.5 -H 'Content-Type: application/json' -H 'Idempotency-Key: k2' \
    --data-binary "$B2" "$HTTP_URL/rpc"
check "the client gave up (curl timed out: 28)" 28 $?
out=$(post k2 "$B2")
check "its retry, sent while it runs: waits, then the first run's reply" \
    '200 [{"jsonrpc":"2.0","result":5,"id":"c"},{"jsonrpc":"2.0","result":1000,"id":"s"}] 1' \
    "$out $(replayed)"
check "... count ran once (the next is 6)" 6 "$(count)"

# Five retries at once, while the first runs: one run, one reply for all.
B3='[{"jsonrpc":"2.0","method":"count","id":1},{"jsonrpc":"2.0","method":"sleep","params":{"ms":300},"id":2}]'
pids=()
for i in 1 2 3 4 5 6; do
    curl -s -H 'Content-Type: application/json' -H 'Idempotency-Key: k3' --data-binary "$B3" \
        "$HTTP_URL/rpc" > "$E2E_TMP/p$i" &
    pids+=($!)
done
wait "${pids[@]}"
check "six at once: six equal replies" 1 "$(cat "$E2E_TMP"/p[1-6] | sort -u | wc -l)"
check "... of one run (count 7), and the next count is 8" "1 8" \
    "$(grep -c '"result":7' "$E2E_TMP/p1") $(count)"

# A run that outlives its deadline: the retry waits until its own deadline.
B4='[{"jsonrpc":"2.0","method":"sleep","params":{"ms":1500},"id":1}]'
curl -s -o /dev/null --max-time 0.5 -H 'Content-Type: application/json' -H 'Idempotency-Key: k4' \
    --data-binary "$B4" "$HTTP_URL/rpc"
out=$(post k4 "$B4" -H 'X-JRPC-Timeout-Ms: 300')
check "a retry whose deadline passes first: 409 -32008 (still running)" "409 -32008" \
    "$(echo "$out" | grep -o '^409\|-32008' | tr '\n' ' ' | sed 's/ $//')"
sleep 1.5
check "... later, the kept reply" '200 [{"jsonrpc":"2.0","result":1500,"id":1}]' "$(post k4 "$B4")"

# The CLI, over HTTP and ZeroMQ (the header frame's idempotency_key).
c1=$("$JRPC_BIN/jrpc" -u "$HTTP_URL/rpc" --idempotency-key cli-1 call count)
c2=$("$JRPC_BIN/jrpc" -u "$HTTP_URL/rpc" --idempotency-key cli-1 call count)
check "jrpc --idempotency-key over HTTP: one run" "9 9" "$c1 $c2"
z1=$("$JRPC_BIN/jrpc" -u "$URL" --idempotency-key zmq-1 call count)
z2=$("$JRPC_BIN/jrpc" -u "$URL" --idempotency-key zmq-1 call count)
check "... over ZeroMQ: one run" "10 10" "$z1 $z2"
check "the same key from the same address over ZeroMQ: the reply kept over HTTP (per client, not per transport)" \
    "9" "$("$JRPC_BIN/jrpc" -u "$URL" --idempotency-key cli-1 call count)"
FP=$(printf '%s' "$B1" | sha256sum | cut -d' ' -f1)
check "kept in Redis under address#fingerprint, with the TTL (--idempotency-ttl, 86400 s)" 1 \
    "$(redis-cli -p "$RPORT" ttl "jrpc:idem:addr:127.0.0.1#$FP:k1" | awk '{print ($1 > 86000 && $1 <= 86400)}')"

# Signed: a retry is signed anew (a new nonce), and still one run.
printf 'demo s3cr3t-s3cr3t-s3cr3t\n' > "$E2E_TMP/keys"
E2E_HTTP=1 e2e_restart_broker --keys "$E2E_TMP/keys" --redis "redis://127.0.0.1:$RPORT"
e2e_wait_workers 1
s1=$("$JRPC_BIN/jrpc" -u "$HTTP_URL/rpc" -K "$E2E_TMP/keys" --idempotency-key s-1 call count)
s2=$("$JRPC_BIN/jrpc" -u "$HTTP_URL/rpc" -K "$E2E_TMP/keys" --idempotency-key s-1 call count)
check "signed, two signatures, one key: one run" "11 11" "$s1 $s2"
check "keys are per key id: jrpc:idem:demo:s-1" 1 "$(redis-cli -p "$RPORT" exists jrpc:idem:demo:s-1)"
"$JRPC_BIN/jrpc" -u "$HTTP_URL/rpc" -K "$E2E_TMP/keys" --idempotency-key s-1 call add '[1,2]' \
    > "$E2E_TMP/s3" 2>&1
check "signed, same key, another body: -32008 Idempotency conflict (422)" 1 \
    "$(grep -c -- '-32008' "$E2E_TMP/s3")"
# Redis down: a body with a key is refused 503 (never run unguarded).
printf '' > "$E2E_TMP/none"
E2E_HTTP=1 e2e_restart_broker --redis "redis://127.0.0.1:$RPORT"
e2e_wait_workers 1
kill -9 "$REDIS_PID"; wait "$REDIS_PID" 2>/dev/null
out=$(post k9 "$B1")
check "Redis down: 503 -32006, not run" "503 -32006" \
    "$(echo "$out" | grep -o '^503\|-32006' | tr '\n' ' ' | sed 's/ $//')"
check "... a body without a key still runs" 12 "$(count)"
# An empty key is no "no key" (issue 36: it ran the body twice): 400, -32600,
# id null, and nothing runs; also the header without a value.
for k in '""' ''; do
    if [ -n "$k" ]; then
        out=$(post "$k" "$B1")
    else   # curl: 'NAME;' sends the header with no value
        out="$(curl -s -o "$E2E_TMP/b" -w '%{http_code}' -H 'Content-Type: application/json' \
               -H 'Idempotency-Key;' --data-binary "$B1" "$HTTP_URL/rpc") $(cat "$E2E_TMP/b")"
    fi
    check "Idempotency-Key: '$k': 400 -32600, id null, says why" "400 -32600 null yes" \
        "${out%% *} $(echo "${out#* }" | python3 -c 'import json,sys; e=json.load(sys.stdin); print(e["error"]["code"], json.dumps(e["id"]), "yes" if "Idempotency-Key must be" in str(e["error"]) else e)')"
done
check "... nothing ran (the next count is 13)" 13 "$(count)"
e2e_finish
