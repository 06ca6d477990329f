#!/usr/bin/env bash
# Broker CPU per body with the access log on and off (issue 7): a Release
# broker at --log-level info writing its log into a pipe (as to journald or
# a container runtime), one demo worker,
# and jrpc-bench over HTTP (single calls) or ZeroMQ (batches). Prints the
# broker's user+system CPU per body for each setting, alternating runs, and
# its write-family syscalls per body (/proc/PID/io syscw: answers and log).
#   bash bench/access_log_cpu.sh [http|zmq] [BATCH] [SECONDS] [ROUNDS]
set -eu
cd "$(dirname "$0")/.."
tr=${1:-http} bs=${2:-1} secs=${3:-5} rounds=${4:-2}
source bench/build_rel.sh
build_rel build-rel jrpc-broker jrpc-worker jrpc-bench
B=build-rel/bin
tmp=$(mktemp -d)
trap 'kill $wp 2>/dev/null; rm -rf "$tmp"' EXIT
port=$((10000 + RANDOM % 22000))
$B/jrpc-worker --connect tcp://127.0.0.1:$((port + 1)) --credit 256 --log-level warn & wp=$!
tick=$(getconf CLK_TCK)
for r in $(seq "$rounds"); do
    for al in on off; do
        $B/jrpc-broker --zmq tcp://127.0.0.1:$port --workers tcp://127.0.0.1:$((port + 1)) \
            --http 127.0.0.1:$((port + 2)) --log-level info --access-log $al 2> >(cat > "$tmp/broker.log") & bp=$!
        sleep 1.5
        url=tcp://127.0.0.1:$port
        [ "$tr" = http ] && url=http://127.0.0.1:$((port + 2))/rpc
        t0=$(awk '{print $14 + $15}' /proc/$bp/stat)
        w0=$(awk '/^syscw/ {print $2}' /proc/$bp/io)
        $B/jrpc-bench --url "$url" --batch "$bs" --connections 4 --duration "$secs" --warmup 0 \
            --json > "$tmp/bench.json"
        t1=$(awk '{print $14 + $15}' /proc/$bp/stat)
        w1=$(awk '/^syscw/ {print $2}' /proc/$bp/io)
        kill -TERM $bp; wait $bp || true; sleep 0.3
        bodies=$(grep -c 'event=access' "$tmp/broker.log" || true)
        python3 - "$tmp/bench.json" "$((t1 - t0))" "$tick" "$bs" "$al" "$bodies" "$((w1 - w0))" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); t = int(sys.argv[2]) / int(sys.argv[3]); bs = int(sys.argv[4])
bodies = j["batches"]
w = int(sys.argv[7])
print("access_log=%s bodies=%d broker_cpu_s=%.2f us_per_body=%.2f write_syscalls_per_body=%.3f access_lines=%s" %
      (sys.argv[5], bodies, t, t * 1e6 / bodies if bodies else 0, w / bodies if bodies else 0, sys.argv[6]))
PY
    done
done
