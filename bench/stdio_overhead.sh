#!/usr/bin/env bash
# What jrpc-stdio costs per call (issue 13): a trivial stdio child
# (jrpc-bench-stdio-child: one answer line per request line, no JSON work)
#   floor    driven directly over its pipes, one call at a time
#            (jrpc-bench-stdio-floor) — no broker, no ZeroMQ
#   stdio    behind the broker: jrpc-bench → jrpc-broker → jrpc-stdio → child
#   worker   the same path to the C demo worker (jrpc-worker, method echo)
# single calls over ZeroMQ, closed loop; "1x1": 1 connection and 1 child
# (latency), "4x4": 4 connections and 4 children / the worker's credit.
# One Release broker, A-B-A-B, ROUNDS rounds of SECONDS; medians.
#   bash bench/stdio_overhead.sh [ROUNDS] [SECONDS]
set -eu
cd "$(dirname "$0")/.."
rounds=${1:-3} secs=${2:-5}
source bench/build_rel.sh
build_rel build-rel jrpc-broker jrpc-worker jrpc-stdio jrpc-bench jrpc-bench-stdio-child \
    jrpc-bench-stdio-floor
B=build-rel/bin
out=$(mktemp -d); echo "results: $out" >&2
port=$((10000 + RANDOM % 22000))
$B/jrpc-broker --zmq tcp://127.0.0.1:$port --workers tcp://127.0.0.1:$((port + 1)) --http none \
    --log-level warn --access-log off & bp=$!
trap 'kill $bp ${sp:-} ${wp:-} 2>/dev/null; [ -n "${JRPC_BENCH_KEEP:-}" ] || rm -rf "$out"' EXIT
for r in $(seq "$rounds"); do
    $B/jrpc-bench-stdio-floor "$secs" -- $B/jrpc-bench-stdio-child > "$out/floor-$r.json"
    for shape in 1 4; do
        $B/jrpc-stdio --connect tcp://127.0.0.1:$((port + 1)) --procs $shape --method secho \
            --log-level warn -- $B/jrpc-bench-stdio-child & sp=$!
        sleep 1.5
        $B/jrpc-bench --url tcp://127.0.0.1:$port --method secho --batch 1 --connections $shape \
            --duration "$secs" --warmup 1 --json > "$out/stdio$shape-$r.json"
        kill -TERM $sp; wait $sp || true
        $B/jrpc-worker --connect tcp://127.0.0.1:$((port + 1)) --credit $shape --log-level warn & wp=$!
        sleep 1.5
        $B/jrpc-bench --url tcp://127.0.0.1:$port --method echo --batch 1 --connections $shape \
            --duration "$secs" --warmup 1 --json > "$out/worker$shape-$r.json"
        kill -TERM $wp; wait $wp || true
    done
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
def med(name, key):
    vals = []
    for r in range(1, rounds + 1):
        j = json.load(open(f"{d}/{name}-{r}.json"))
        if "lost" in j:
            assert j["lost"] == 0 and j["duplicated"] == 0 and not j["errors"], j
            assert j["calls"] > 0 and j["transport_failures"] == 0, (name, r, j)
            vals.append(j[key] if key == "calls_per_s" else j["latency_us"]["call"][key])
        else:
            vals.append(j[key])
    return statistics.median(vals)
f = med("floor", "calls_per_s")
print(f"{'path':26} {'calls/s':>9} {'p50 us':>7} {'p99 us':>7}  per-call time over the floor")
print(f"{'floor (pipe, 1 child)':26} {f:9.0f} {med('floor','p50'):7.0f} {med('floor','p99'):7.0f}")
for shape in (1, 4):
    for name, label in (("stdio", "jrpc-stdio"), ("worker", "jrpc-worker")):
        c = med(f"{name}{shape}", "calls_per_s")
        extra = f"  {(1e6 / c - 1e6 / f):.1f} us" if shape == 1 else ""
        print(f"{label + f' {shape}x{shape}':26} {c:9.0f} {med(f'{name}{shape}','p50'):7.0f} "
              f"{med(f'{name}{shape}','p99'):7.0f}{extra}")
s1, w1 = med("stdio1", "calls_per_s"), med("worker1", "calls_per_s")
print(f"jrpc-stdio / jrpc-worker, 1x1: {s1 / w1:.2f}x; 4x4: "
      f"{med('stdio4','calls_per_s') / med('worker4','calls_per_s'):.2f}x")
PY
