#!/usr/bin/env bash
# What signing and replay protection cost per signed batch, in
# measures a shared machine does not blur: instructions (callgrind) and
# Redis' own CPU accounting (INFO commandstats), never wall-clock time.
#   [PORT=N] bash bench/signed_cost.sh [BUILD_DIR] [CONNECTIONS] [SECONDS]
# 1. Ir per signature and per verification of jrpc-bench's batch of 100
#    (5773 bytes), with the reused state (jrpc_signer_t + jrpc_sign_key_t:
#    the broker, libjrpc-client) and one-shot (jrpc_sign_compute: every
#    context made per call, as before). Under valgrind OpenSSL takes its
#    AVX2 SHA-256, not the SHA-NI one the CPU may have: the hashing share is
#    larger here than on the real machine, the rest is the same. Then a
#    nonce: one RAND_bytes each (jrpc_sign_new_nonce) and from a signer's
#    pool (jrpc_signer_new_nonce, what libjrpc-client uses).
# 2. Redis: a signed broker, one demo worker and jrpc-bench --batch 100
#    signed (CONNECTIONS, default 4); counters reset after a 2 s warm-up.
#    Prints EVALSHA calls, usec_per_call, claims per script (= batches /
#    calls) and Redis microseconds per claim.
# 3. Redis' instructions per claim, redis-server under callgrind driven by
#    redis-benchmark: one claim per EVALSHA, and 2, 4, 8 per script (mode m).
# Starts its own redis-server, broker and worker on 127.0.0.1 (ports from
# PORT, default random) and stops them by PID.
set -eu
cd "$(dirname "$0")/.."
B=${1:-build}/bin
conns=${2:-4} secs=${3:-10}
source bench/signed_lib.sh

echo "== 1. Ir per signature and per nonce (callgrind, jrpc-bench-sign)"
for mode in sign verify sign-oneshot verify-oneshot nonce nonce-pool; do
    for n in 0 200; do
        valgrind --tool=callgrind --callgrind-out-file="$T/cg$n" "$B/jrpc-bench-sign" "$mode" $n \
            >/dev/null 2>&1
    done
    echo "$mode: $(( ($(ir "$T/cg200") - $(ir "$T/cg0")) / 200 )) Ir per body"
done

echo "== 2. Redis per claim (INFO commandstats), $conns connections, $secs s"
rp=$port zp=$((port + 1)) wp=$((port + 2))
start_redis $rp
"$B/jrpc-broker" --zmq tcp://127.0.0.1:$zp --workers tcp://127.0.0.1:$wp --http none \
    --keys "$T/keys" --redis redis://127.0.0.1:$rp --log-level warn 2>"$T/broker.log" & pids+=($!)
"$B/jrpc-worker" --connect tcp://127.0.0.1:$wp --credit 256 --log-level warn \
    2>"$T/worker.log" & pids+=($!)
for _ in $(seq 50); do
    "$B/jrpc" --url tcp://127.0.0.1:$zp -t 500 -k $KEY -s $SECRET \
        call add '[1,2]' >/dev/null 2>&1 && break
    sleep 0.2
done
"$B/jrpc-bench" --url tcp://127.0.0.1:$zp --batch 100 --connections "$conns" --duration 2 \
    --warmup 0 "${sign[@]}" --json >/dev/null
redis-cli -p $rp CONFIG RESETSTAT >/dev/null
"$B/jrpc-bench" --url tcp://127.0.0.1:$zp --batch 100 --connections "$conns" --duration "$secs" \
    --warmup 0 "${sign[@]}" --json >"$T/bench.json"
redis-cli -p $rp INFO commandstats | tr -d '\r' | grep '^cmdstat_evalsha' >"$T/cs"
python3 - "$T/bench.json" "$T/cs" <<'PY'
import json, re, sys
b = json.load(open(sys.argv[1]))["batches"]
m = re.search(r"calls=(\d+),usec=(\d+),usec_per_call=([\d.]+)", open(sys.argv[2]).read())
calls, usec, upc = int(m[1]), int(m[2]), float(m[3])
print(f"batches={b} evalsha_calls={calls} usec_per_call={upc} claims_per_script={b / calls:.2f} "
      f"redis_usec_per_claim={usec / b:.2f}")
PY
kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null || true
pids=()

echo "== 3. Redis Ir per claim (redis-server under callgrind, redis-benchmark)"
valgrind --tool=callgrind --callgrind-out-file="$T/cgr" --instr-atstart=no \
    redis-server --bind 127.0.0.1 --port $rp --save '' --appendonly no >"$T/redis.log" 2>&1 &
pids+=($!)
vg=$!
for _ in $(seq 100); do redis-cli -p $rp PING >/dev/null 2>&1 && break; sleep 0.2; done
lua=$(sed -n '/^const char CLAIM_LUA\[\] =/,/;$/p' broker/guard/jrpc_replay.c |
      sed '1d; s/^ *"//; s/" *;\{0,1\}$//; s/\\"/"/g')
sha=$(redis-cli -p $rp SCRIPT LOAD "$lua")
redis-cli -p $rp SET jrpc:epoch E >/dev/null
n=${N:-5000}
for k in 1 2 4 8; do
    keys=() mode=m
    for _ in $(seq $k); do keys+=(jrpc:nonce:bench:__rand_int__); done
    [ $k = 1 ] && mode=n
    callgrind_control -i on $vg >/dev/null 2>&1
    callgrind_control -z $vg >/dev/null 2>&1
    redis-benchmark -p $rp -c 1 -n $n -r 100000000 EVALSHA "$sha" $((k + 1)) jrpc:epoch \
        "${keys[@]}" E p 600 1 $mode >/dev/null
    callgrind_control -d "k$k" $vg >/dev/null 2>&1
    callgrind_control -i off $vg >/dev/null 2>&1
    f=$(ls -t "$T"/cgr.* | head -1)
    echo "claims per script $k: $(( $(ir "$f") / (n * k) )) Ir per claim"
done
