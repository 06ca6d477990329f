#!/usr/bin/env bash
# Where the CPU of a call goes, process by process: user+system CPU time of
# each process divided by the calls answered, for
#   jrpc:  jrpc-bench (client) -> jrpc-broker -> jrpc-worker, ZeroMQ, batches
#   echo:  the raw ZeroMQ echo of bench/peers (load client -> echo server),
#          the same batch shape (N messages at once, waited for together)
# run one after the other on 127.0.0.1. On a 2-core machine calls/s is bounded
# by 2 cores / (the sum of the column), which is why this table explains the
# "above the echo floor" goal of issue 6 (bench/RESULTS.md).
#   bash bench/pipeline_cpu.sh [SECONDS] [BATCH] [CONNECTIONS]
# Needs build-rel built with -DJRPC_BENCH_PEERS=ON (bench/peers/run.sh does it).
set -eu
cd "$(dirname "$0")/.."
secs=${1:-10} batch=${2:-100} conns=${3:-4}
B=build-rel/bin
[ -x $B/jrpc-peer-zmq-echo ] || { echo "pipeline_cpu: build $B/jrpc-peer-zmq-echo first (bash bench/peers/run.sh --list builds nothing; cmake -DJRPC_BENCH_PEERS=ON)" >&2; exit 2; }
hz=$(getconf CLK_TCK)
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
pids=()
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
port=$((10000 + RANDOM % 22000))

# $1 label, $2.. the load command (prints --json); the server pids in SERVERS.
measure() {
    local label=$1; shift
    local before=() i
    for i in "${SERVERS[@]}"; do before+=("$(cpu "$i")"); done
    "$@" --json > "$T/out.json" & local lp=$!
    local lcpu=0
    while kill -0 $lp 2>/dev/null; do lcpu=$(cpu $lp 2>/dev/null || echo "$lcpu"); sleep 0.2; done
    wait $lp
    local calls
    calls=$(sed -n 's/.*"calls":\([0-9]*\).*/\1/p' "$T/out.json")
    printf '%-6s calls=%-9s calls/s=%-9.0f' "$label" "$calls" \
        "$(sed -n 's/.*"calls_per_s":\([0-9.]*\).*/\1/p' "$T/out.json")"
    awk -v t="$lcpu" -v hz="$hz" -v c="$calls" 'BEGIN { printf " client=%.3f", t / hz * 1e6 / c }'
    local n=0 sum=$lcpu
    for i in "${SERVERS[@]}"; do
        local d=$(( $(cpu "$i") - ${before[$n]} ))
        sum=$((sum + d))
        awk -v t="$d" -v hz="$hz" -v c="$calls" -v name="${NAMES[$n]}" \
            'BEGIN { printf " %s=%.3f", name, t / hz * 1e6 / c }'
        n=$((n + 1))
    done
    awk -v t="$sum" -v hz="$hz" -v c="$calls" 'BEGIN { printf " total=%.3f us/call\n", t / hz * 1e6 / c }'
}
T=$(mktemp -d); trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$T"' EXIT

$B/jrpc-broker --zmq tcp://127.0.0.1:$port --workers tcp://127.0.0.1:$((port + 1)) --http none \
    --log-level warn & bp=$!; pids+=($bp)
$B/jrpc-worker --connect tcp://127.0.0.1:$((port + 1)) --credit 256 --log-level warn & wp=$!; pids+=($wp)
sleep 1
SERVERS=($bp $wp) NAMES=(broker worker)
measure jrpc $B/jrpc-bench --url tcp://127.0.0.1:$port --batch "$batch" --connections "$conns" \
    --duration "$secs" --warmup 1
kill $bp $wp; wait $bp $wp 2>/dev/null || true

$B/jrpc-peer-zmq-echo serve tcp://127.0.0.1:$((port + 2)) 2>/dev/null & ep=$!; pids+=($ep)
sleep 0.5
SERVERS=($ep) NAMES=(echo)
measure echo $B/jrpc-peer-zmq-echo load --url tcp://127.0.0.1:$((port + 2)) --batch "$batch" \
    --connections "$conns" --duration "$secs" --warmup 1
