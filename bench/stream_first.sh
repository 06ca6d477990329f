#!/usr/bin/env bash
# Time to the first answer of a streamed batch against the unstreamed time
# (issue 14): batches of 100 calls, exactly one of them a slow `sleep` of
# SLEEP_MS (--sleep-calls 1), the rest `add`, one connection, closed loop.
# For each transport (ZeroMQ, HTTP) jrpc-bench runs unstreamed and with
# --stream, A-B-A-B, ROUNDS rounds of
# SECONDS each, against one Release broker and one demo worker on 127.0.0.1;
# the table gives the medians of p50 and the ratio unstreamed/streamed of
# the time a client waits for its first answer.
#   bash bench/stream_first.sh [ROUNDS] [SECONDS] [SLEEP_MS]
set -eu
cd "$(dirname "$0")/.."
rounds=${1:-2} secs=${2:-5} sleep_ms=${3:-200}
source bench/build_rel.sh
build_rel build-rel jrpc-broker jrpc-worker jrpc-bench
B=build-rel/bin
port=$((10000 + RANDOM % 22000))
$B/jrpc-broker --zmq tcp://127.0.0.1:$port --workers tcp://127.0.0.1:$((port + 1)) \
    --http 127.0.0.1:$((port + 2)) --log-level warn & bp=$!
$B/jrpc-worker --connect tcp://127.0.0.1:$((port + 1)) --credit 256 --log-level warn & wp=$!
trap 'kill $bp $wp 2>/dev/null' EXIT
sleep 0.5
out=$(mktemp -d)
for r in $(seq "$rounds"); do
    for url in tcp://127.0.0.1:$port http://127.0.0.1:$((port + 2)); do
        for mode in plain stream; do
            flag=(); [ $mode = stream ] && flag=(--stream)
            $B/jrpc-bench --url "$url" --batch 100 --sleep-calls 1 --sleep-ms "$sleep_ms" \
                --connections 1 --duration "$secs" --warmup 1 --json "${flag[@]}" \
                > "$out/${url%%:*}-$mode-$r.json"
        done
    done
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
print("transport  unstreamed p50 ms  streamed first-answer p50 ms  streamed last p50 ms  ratio (first answer)")
for t in ("tcp", "http"):
    plain = [json.load(open(f"{d}/{t}-plain-{r}.json"))["latency_us"]["batch"]["p50"] for r in range(1, rounds + 1)]
    first = [json.load(open(f"{d}/{t}-stream-{r}.json"))["latency_us"]["first"]["p50"] for r in range(1, rounds + 1)]
    last = [json.load(open(f"{d}/{t}-stream-{r}.json"))["latency_us"]["batch"]["p50"] for r in range(1, rounds + 1)]
    p, f, l = statistics.median(plain), statistics.median(first), statistics.median(last)
    print(f"{t:9}  {p/1000:17.3f}  {f/1000:28.3f}  {l/1000:20.3f}  {p/f:10.1f}x")
PY
rm -rf "$out"
