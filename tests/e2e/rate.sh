#!/usr/bin/env bash
# Rate limits by cost (docs/SIGNING.md "Rate limits"): GCRA in Redis, one
# EVALSHA per body (with the nonce when signed), shared by every broker.
#   (a) key "lim" (rate=1000 burst=100) loaded through two brokers sharing
#       one Redis, signed, for 3 s: about 1000 calls/s in total (tolerance:
#       -15 % / +burst), the rest refused whole (429 / -32007), every id
#       once; key "free" (no limit) at the same time is never refused;
#   (b) the answer: 429, Retry-After, -32007 with retry_after_ms; a batch
#       over the burst is refused whole and says it never passes; a signed
#       body refused for its rate may be sent again as is (nonce released);
#   (c) a key's cost= weighs its methods;
#   (d) without --keys, per client address, in Redis; Redis down: each
#       broker's local budget (--rate-local-share), bounded, never open.
source "$JRPC_E2E_LIB"
command -v redis-server >/dev/null || { echo "redis-server is required"; exit 1; }
HERE=$(dirname "$JRPC_E2E_LIB")

e2e_start_redis
printf 'lim s3cr3t-s3cr3t-s3cr3t-lim rate=1000 burst=100 cost=sum:5\nfree s3cr3t-s3cr3t-s3cr3t-free\nslow s3cr3t-s3cr3t-s3cr3t-slow rate=50 burst=100\n' \
    > "$E2E_TMP/keys"
E2E_HTTP=1 e2e_start_broker --keys "$E2E_TMP/keys" --redis "redis://127.0.0.1:$RPORT" \
    --access-log off --admin 127.0.0.1:0
B1_HTTP=$HTTP_URL B1_WORKERS=$WORKERS_EP B1_LOG=$E2E_TMP/broker.log
ADMIN1=$(grep -o 'event=listening endpoint=admin://[0-9.:]*' "$B1_LOG" | sed 's|.*admin://||')
# The second broker, on the same Redis (new ports until they are free).
for try in 1 2 3 4 5 6 7 8; do
    B2_PORT=$(e2e_pick_port)
    : > "$E2E_TMP/broker2.log"
    "$JRPC_BIN/jrpc-broker" --zmq "tcp://127.0.0.1:$B2_PORT" --workers "tcp://127.0.0.1:$((B2_PORT + 1))" \
        --http "127.0.0.1:$((B2_PORT + 2))" --keys "$E2E_TMP/keys" --redis "redis://127.0.0.1:$RPORT" \
        --access-log off > "$E2E_TMP/broker2.log" 2>&1 &
    B2_PID=$!
    e2e_wait_for "! kill -0 $B2_PID 2>/dev/null || [ \$(grep -c 'event=listening' '$E2E_TMP/broker2.log') -ge 3 ]" 10
    kill -0 "$B2_PID" 2>/dev/null && break
done
E2E_PIDS+=("$B2_PID")
B2_HTTP=http://127.0.0.1:$((B2_PORT + 2))
"$JRPC_BIN/jrpc-worker" --connect "$B1_WORKERS,tcp://127.0.0.1:$((B2_PORT + 1))" --credit 256 \
    --log-level warn >> "$E2E_TMP/worker.log" 2>&1 &
E2E_PIDS+=($!)
e2e_wait_workers 1

bench() {  # URL KEY OUT [ARGS]: 3 s, batches of 10, signed with KEY
    local url=$1 key=$2 out=$3; shift 3
    "$JRPC_BIN/jrpc-bench" --url "$url/rpc" --key-file "$E2E_TMP/keys" --key-id "$key" --batch 10 \
        --connections 2 --duration 3 --warmup 0.5 --json "$@" > "$out"
}
field() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

# ---- (a) two brokers, one limit -------------------------------------------------
bench "$B1_HTTP" lim "$E2E_TMP/a1.json" & p1=$!
bench "$B2_HTTP" lim "$E2E_TMP/a2.json" & p2=$!
bench "$B1_HTTP" free "$E2E_TMP/f.json" & p3=$!
wait $p1; s1=$?; wait $p2; s2=$?; wait $p3; s3=$?
check "three loads: every id once (jrpc-bench exit 0)" "0 0 0" "$s1 $s2 $s3"
ok1=$(field "$E2E_TMP/a1.json" "d['ids_expected']")
ok2=$(field "$E2E_TMP/a2.json" "d['ids_expected']")
rej=$(( $(field "$E2E_TMP/a1.json" "d['rejected_batches']") + $(field "$E2E_TMP/a2.json" "d['rejected_batches']") ))
secs=$(field "$E2E_TMP/a1.json" "d['duration_s']")
rate=$(awk -v a="$ok1" -v b="$ok2" -v s="$secs" 'BEGIN { printf "%.0f", (a + b) / s }')
echo "key lim: broker 1 $ok1 calls, broker 2 $ok2 calls, $rej bodies refused, $rate calls/s in total"
check "key lim through two brokers: about 1000 calls/s in total (850..1000 + burst/3 s)" 1 \
    "$(awk -v r="$rate" 'BEGIN { print (r >= 850 && r <= 1000 + 100 / 3 + 10) }')"
check "both brokers served some of it" 1 "$(awk -v a="$ok1" -v b="$ok2" 'BEGIN { print (a > 0 && b > 0) }')"
check "beyond it, bodies refused (429 / -32007)" 1 "$(awk -v r="$rej" 'BEGIN { print (r > 0) }')"
check "key free at the same time: never refused" 0 "$(field "$E2E_TMP/f.json" "d['rejected_batches']")"
check "key free ran far above 1000 calls/s" 1 "$(field "$E2E_TMP/f.json" "int(d['calls_per_s'] > 1000)")"
check "metrics: refused calls counted for key lim, none for free" "1 0" \
    "$(curl -s "http://$ADMIN1/metrics" | awk '$1 == "jrpc_rate_limited_calls_total{key=\"lim\"}" { l = $2 } $1 == "jrpc_rate_limited_calls_total{key=\"free\"}" { f = $2 } END { print (l > 0), f + 0 }')"

# ---- (b) the answer ----------------------------------------------------------------
signed_post() {  # BODYFILE URL [KEY]: status and body
    local k=${3:-lim}
    python3 "$HERE/sign.py" --key "$k" --secret "s3cr3t-s3cr3t-s3cr3t-$k" --body-file "$1" > "$E2E_TMP/h"
    curl -s -D "$E2E_TMP/rh" -o "$E2E_TMP/rb" -H 'Content-Type: application/json' -H @"$E2E_TMP/h" \
        --data-binary @"$1" "$2/rpc"
    echo "$(head -n1 "$E2E_TMP/rh" | awk '{print $2}') $(cat "$E2E_TMP/rb")"
}
python3 -c "import json; print(json.dumps([{'jsonrpc':'2.0','method':'add','params':[1,2],'id':i} for i in range(101)]))" > "$E2E_TMP/b101"
out=$(signed_post "$E2E_TMP/b101" "$B1_HTTP")
check "a batch of 101 over a burst of 100: 429, -32007, never passes" "429 -32007 1" \
    "$(echo "$out" | awk '{print $1}') $(echo "$out" | grep -o '"code":-32007' | cut -d: -f2) $(echo "$out" | grep -c 'it never passes')"
check "... and no Retry-After (it never passes)" 0 "$(grep -ci '^Retry-After' "$E2E_TMP/rh")"
zout=$("$JRPC_BIN/jrpc" -u "$URL" -K "$E2E_TMP/keys" -k lim send "$E2E_TMP/b101")
check "over ZeroMQ: the same error object (-32007, never passes)" "-32007 1" \
    "$(echo "$zout" | grep -o '"code":-32007' | cut -d: -f2) $(echo "$zout" | grep -c 'it never passes')"
python3 -c "import json; print(json.dumps([{'jsonrpc':'2.0','method':'add','params':[1,2],'id':i} for i in range(100)]))" > "$E2E_TMP/b100"
# Key slow (50 calls/s, burst 100): a batch of 100 passes and drains the
# burst; the next needs 2 s.
check "key slow: a batch of 100 passes" 200 "$(signed_post "$E2E_TMP/b100" "$B1_HTTP" slow | cut -d' ' -f1)"
python3 "$HERE/sign.py" --key slow --secret s3cr3t-s3cr3t-s3cr3t-slow --body-file "$E2E_TMP/b100" > "$E2E_TMP/h100"
curl -s -D "$E2E_TMP/rh" -o "$E2E_TMP/rb" -H 'Content-Type: application/json' -H @"$E2E_TMP/h100" \
    --data-binary @"$E2E_TMP/b100" "$B2_HTTP/rpc"
# The refill goes on while the second body is signed and sent (a loaded
# machine may take a second there): retry_after_ms is what is left of the
# 2 s, and Retry-After is it in whole seconds, rounded up.
ms=$(grep -o '"retry_after_ms":[0-9]*' "$E2E_TMP/rb" | cut -d: -f2)
ra=$(grep -i '^Retry-After:' "$E2E_TMP/rh" | tr -d '\r' | awk '{print $2}')
check "over the limit: 429, Retry-After = retry_after_ms rounded up, at most 2 s" "429 yes" \
    "$(head -n1 "$E2E_TMP/rh" | awk '{print $2}') $(awk -v ms="${ms:-0}" -v ra="${ra:-x}" \
        'BEGIN{print (ms > 0 && ms <= 2000 && ra == int((ms + 999) / 1000)) ? "yes" : "no ms=" ms " ra=" ra}')"
# A signed body of idempotent methods (add) under a rate limit is never
# dispatched before its claim (tests/broker/test_jrpc_broker_redis.c): the
# refusal is the whole body it always was.
check "over the limit: the whole 429 body" 1 \
    "$(grep -cxE '\{"jsonrpc":"2.0","error":\{"code":-32007,"message":"Rate limited","data":\{"reason":"rate limit: 50 calls/s, burst 100","cost":100,"retry_after_ms":[0-9]+\}\},"id":null\}' "$E2E_TMP/rb")"
wait_ms=$(grep -o '"retry_after_ms":[0-9]*' "$E2E_TMP/rb" | cut -d: -f2)
sleep "$(awk -v m="$wait_ms" 'BEGIN { printf "%.3f", m / 1000 + 0.05 }')"
curl -s -o "$E2E_TMP/rb" -w '%{http_code}' -H 'Content-Type: application/json' -H @"$E2E_TMP/h100" \
    --data-binary @"$E2E_TMP/b100" "$B1_HTTP/rpc" > "$E2E_TMP/code"
check "the same signed body after retry_after_ms: served (its nonce was released)" "200 100" \
    "$(cat "$E2E_TMP/code") $(grep -o '"result":3' "$E2E_TMP/rb" | wc -l)"
curl -s -o "$E2E_TMP/rb" -w '%{http_code}' -H 'Content-Type: application/json' -H @"$E2E_TMP/h100" \
    --data-binary @"$E2E_TMP/b100" "$B2_HTTP/rpc" > "$E2E_TMP/code"
check "... and once served, a replay (409), costing nothing" 409 "$(cat "$E2E_TMP/code")"

# ---- (c) costs ---------------------------------------------------------------------
sleep 0.2   # 200 calls' worth back
python3 -c "import json; print(json.dumps([{'jsonrpc':'2.0','method':'sum','params':[1],'id':i} for i in range(21)]))" > "$E2E_TMP/sum21"
out=$(signed_post "$E2E_TMP/sum21" "$B1_HTTP")
check "cost=sum:5: 21 calls of sum cost 105, over the burst of 100" "429 1" \
    "$(echo "$out" | awk '{print $1}') $(echo "$out" | grep -c '"cost":105')"

# ---- (d) unsigned, per address; Redis down: the local budget --------------------------
E2E_HTTP=1 e2e_restart_broker --redis "redis://127.0.0.1:$RPORT" --rate-limit 100 --rate-burst 10 \
    --rate-local-share 20 --access-log off
e2e_wait_workers 1
ubench() {  # OUT: 2 s unsigned, batches of 2, one connection
    "$JRPC_BIN/jrpc-bench" --url "$HTTP_URL/rpc" --batch 2 --connections 1 --duration 2 --warmup 0 \
        --json > "$1"
}
timeout 10 redis-cli -p "$RPORT" monitor > "$E2E_TMP/monitor" 2>&1 & mon=$!
sleep 0.2
ubench "$E2E_TMP/u.json"
kill "$mon" 2>/dev/null; wait "$mon" 2>/dev/null
up=$(field "$E2E_TMP/u.json" "d['ids_expected']")
echo "unsigned, Redis up: $up calls in 2 s"
check "unsigned at 100/s (burst 10): 200..240 calls in 2 s, the rest refused" 1 \
    "$(awk -v n="$up" 'BEGIN { print (n >= 180 && n <= 240) }')"
check "the Redis key is the client's address" 1 \
    "$(grep -c '"jrpc:rate:addr:127.0.0.1"' "$E2E_TMP/monitor" | awk '{print ($1 > 0)}')"
kill -9 "$REDIS_PID"; wait "$REDIS_PID" 2>/dev/null
ubench "$E2E_TMP/d.json"
st=$?
down=$(field "$E2E_TMP/d.json" "d['ids_expected']")
echo "unsigned, Redis down: $down calls in 2 s (local budget: 20 % of 100/s, burst 2)"
check "Redis down: every id once" 0 "$st"
check "Redis down: the local budget, 20 % of the limit (30..50 calls in 2 s), not open, not closed" 1 \
    "$(awk -v n="$down" 'BEGIN { print (n >= 30 && n <= 50) }')"
e2e_finish
