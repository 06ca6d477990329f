#!/usr/bin/env bash
# Issue 18: single and batched calls over ZeroMQ against the same broker's
# HTTP, per client-front engine. For each ENGINE (default: libzmq native) a
# broker and one worker on ports BASE..BASE+2, then jrpc-bench --batch 1 and
# --batch 100 (--connections 4 --duration SECONDS) over tcp:// and http://,
# and the ratio zmq/http of calls/s. Wall-clock numbers: say what else the
# machine was doing.
#
#   bash bench/zmtp_ab.sh BIN_DIR [BASE_PORT] [SECONDS] [ENGINE...]
set -eu
bin=$1 base=${2:-43300} secs=${3:-5}
shift $(( $# < 3 ? $# : 3 ))
engines=${*:-libzmq native}
. "$(dirname "$0")/zmtp_lib.sh"
rate() { "$bin/jrpc-bench" --url "$1" --batch "$2" --connections 4 --duration "$secs" --json |
    sed -nE 's/.*"calls_per_s":([0-9.]+).*/\1/p'; }
for engine in $engines; do
    start_pair "$engine"
    for batch in 1 100; do
        z=$(rate tcp://127.0.0.1:$base $batch)
        h=$(rate http://127.0.0.1:$((base + 2))/rpc $batch)
        printf 'engine=%-6s batch=%-3s zmq_calls_per_s=%-10s http_calls_per_s=%-10s zmq/http=%s\n' \
            "$engine" "$batch" "$z" "$h" "$(awk -v z="$z" -v h="$h" 'BEGIN { printf "%.2f", z / h }')"
    done
    kill $wpid $bpid; wait $wpid $bpid 2>/dev/null || true
done
