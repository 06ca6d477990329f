#!/usr/bin/env bash
# What --redis-wait-replicas 1 costs (issue 16): signed single calls over
# HTTP through two Release brokers on one Redis master with one replica,
# one with --redis-wait-replicas 0 and one with 1 (each with its demo
# worker), jrpc-bench closed loop, CONNS connections, A-B-A-B for ROUNDS
# rounds of SECONDS each (the machine drifts; interleaving spreads it).
# Prints bodies/s and p50/p99 per setting, the medians and the ratio.
# Everything on 127.0.0.1 (free ports picked at start), stopped at exit.
# About 4 × ROUNDS × SECONDS seconds: defaults 2 × 10 s, 45 s in all.
#   bash bench/redis_wait.sh [ROUNDS] [SECONDS] [CONNS]
# JRPC_BUILD=DIR uses the binaries of an existing build instead of build-rel.
set -eu
cd "$(dirname "$0")/.."
rounds=${1:-2} secs=${2:-10} conns=${3:-8}
build=${JRPC_BUILD:-build-rel}
if [ -z "${JRPC_BUILD:-}" ]; then
    source bench/build_rel.sh
    build_rel build-rel jrpc-broker jrpc-worker jrpc-bench
fi
B=$build/bin
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
out=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$out"' EXIT

rm=$(free_port) rr=$(free_port)
redis-server --port "$rm" --bind 127.0.0.1 --save '' --appendonly no --dir "$out" \
    >/dev/null 2>&1 & pids+=($!)
redis-server --port "$rr" --bind 127.0.0.1 --save '' --appendonly no --dir "$out" \
    --replicaof 127.0.0.1 "$rm" --repl-diskless-load swapdb >/dev/null 2>&1 & pids+=($!)
redis-cli -p "$rm" set warm 1 >/dev/null 2>&1 || sleep 0.5
for _ in $(seq 100); do   # the replica counted by WAIT: online, an offset acknowledged
    redis-cli -p "$rm" info replication | grep -q 'state=online,offset=[1-9]' && break
    redis-cli -p "$rm" set warm 1 >/dev/null; sleep 0.1
done
echo "demo s3cr3t-s3cr3t-s3cr3t" >"$out/keys"
declare -A url
for n in 0 1; do
    zp=$(free_port) wp=$(free_port) hp=$(free_port)
    $B/jrpc-broker --zmq "tcp://127.0.0.1:$zp" --workers "tcp://127.0.0.1:$wp" \
        --http "127.0.0.1:$hp" --keys "$out/keys" --redis "redis://127.0.0.1:$rm" \
        --redis-wait-replicas "$n" --access-log off --log-level warn & pids+=($!)
    $B/jrpc-worker --connect "tcp://127.0.0.1:$wp" --credit 256 --log-level warn & pids+=($!)
    url[$n]="http://127.0.0.1:$hp"
done
sleep 1
for r in $(seq "$rounds"); do
    for n in 0 1; do
        $B/jrpc-bench --url "${url[$n]}" --batch 1 --connections "$conns" --duration "$secs" \
            --warmup 1 --key-id demo --secret s3cr3t-s3cr3t-s3cr3t --json >"$out/w$n-$r.json"
    done
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
med = {}
print("wait  round  bodies/s  p50 ms  p99 ms  errors")
for n in (0, 1):
    rs = [json.load(open(f"{d}/w{n}-{r}.json")) for r in range(1, rounds + 1)]
    for r, j in enumerate(rs, 1):
        b = j["latency_us"]["batch"]
        print(f"{n:4}  {r:5}  {j['batches_per_s']:8.0f}  {b['p50']/1000:6.3f}  {b['p99']/1000:6.3f}  {j['errors']}")
    med[n] = (statistics.median(j["batches_per_s"] for j in rs),
              statistics.median(j["latency_us"]["batch"]["p50"] for j in rs))
print("medians: N=0 %.0f bodies/s p50 %.3f ms; N=1 %.0f bodies/s p50 %.3f ms; N=1/N=0 throughput %.2fx"
      % (med[0][0], med[0][1] / 1000, med[1][0], med[1][1] / 1000, med[1][0] / med[0][0]))
PY
