#!/usr/bin/env bash
# Broker CPU per call: starts a Release broker and one demo worker on
# 127.0.0.1, runs jrpc-bench-zmq-load, and divides the broker process's
# user+system CPU time by the calls answered.
#   bash bench/broker_cpu.sh [BATCHES] [BATCH_SIZE] [CONCURRENCY]
set -eu
cd "$(dirname "$0")/.."
nb=${1:-5000} bs=${2:-100} conc=${3:-4}
source bench/build_rel.sh
build_rel build-rel jrpc-broker jrpc-worker jrpc-bench-zmq-load
B=build-rel/bin
port=$((10000 + RANDOM % 22000))
$B/jrpc-broker --zmq tcp://127.0.0.1:$port --workers tcp://127.0.0.1:$((port + 1)) --http none \
    --log-level warn & bp=$!
$B/jrpc-worker --connect tcp://127.0.0.1:$((port + 1)) --credit 256 --log-level warn & wp=$!
trap 'kill $bp $wp 2>/dev/null' EXIT
sleep 0.5
$B/jrpc-bench-zmq-load tcp://127.0.0.1:$port 200 "$bs" "$conc" >/dev/null   # warm-up
tick=$(getconf CLK_TCK)
t0=$(awk '{print $14 + $15}' /proc/$bp/stat)
$B/jrpc-bench-zmq-load tcp://127.0.0.1:$port "$nb" "$bs" "$conc"
t1=$(awk '{print $14 + $15}' /proc/$bp/stat)
awk -v t=$((t1 - t0)) -v hz="$tick" -v calls=$((nb * bs)) \
    'BEGIN { printf "broker_cpu_s=%.2f calls=%d broker_us_per_call=%.3f\n", t / hz, calls, t / hz * 1e6 / calls }'
