#!/usr/bin/env bash
# Hedged calls against none, in one run (issue 17): two Release brokers on
# the same two demo workers, one broker with --hedge on (budget 5 %, min
# 10 ms), one without; worker "slow" holds back SLOW_PCT % of its answers by
# SLOW_MS ms (--slow-percent, --slow-ms), worker "quick" never. jrpc-bench
# loads one broker at a time, A-B-A-B, ROUNDS rounds of SECONDS each, batches
# of BATCH over HTTP, CONNS connections (closed loop). The table: medians of
# calls/s and of the batch latency p50/p99/p99.9, and the extra load the
# hedges cost (hedges sent / calls served, from the broker's metrics).
#   bash bench/hedge.sh [ROUNDS] [SECONDS] [BATCH] [CONNS] [SLOW_PCT] [SLOW_MS]
set -eu
cd "$(dirname "$0")/.."
rounds=${1:-3} secs=${2:-5} batch=${3:-10} conns=${4:-4} slow_pct=${5:-2} slow_ms=${6:-50}
source bench/build_rel.sh
build_rel build-rel jrpc-broker jrpc-worker jrpc-bench
B=build-rel/bin
out=$(mktemp -d)
port=$((10000 + RANDOM % 22000))
common=(--log-level warn --access-log off)
$B/jrpc-broker --zmq tcp://127.0.0.1:$port --workers tcp://127.0.0.1:$((port + 1)) \
    --http 127.0.0.1:$((port + 2)) --admin 127.0.0.1:$((port + 6)) "${common[@]}" & b1=$!
$B/jrpc-broker --zmq tcp://127.0.0.1:$((port + 3)) --workers tcp://127.0.0.1:$((port + 4)) \
    --http 127.0.0.1:$((port + 5)) --admin 127.0.0.1:$((port + 7)) --hedge on \
    "${common[@]}" & b2=$!
eps=tcp://127.0.0.1:$((port + 1)),tcp://127.0.0.1:$((port + 4))
$B/jrpc-worker --connect "$eps" --name slow --slow-percent "$slow_pct" --slow-ms "$slow_ms" \
    --credit 256 --log-level warn & w1=$!
$B/jrpc-worker --connect "$eps" --name quick --credit 256 --log-level warn & w2=$!
trap 'kill $b1 $b2 $w1 $w2 2>/dev/null; rm -rf "$out"' EXIT
sleep 1
metric() {   # ADMIN_PORT NAME-REGEX: the sum of the matching samples
    curl -s "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 ~ n { s += $2 } END { print s + 0 }'
}
for r in $(seq "$rounds"); do
    for mode in off on; do
        if [ $mode = off ]; then url=http://127.0.0.1:$((port + 2))/rpc adm=$((port + 6))
        else url=http://127.0.0.1:$((port + 5))/rpc adm=$((port + 7)); fi
        c0=$(metric $adm '^jrpc_calls_total[{]') h0=$(metric $adm '^jrpc_hedges_total$')
        $B/jrpc-bench --url "$url" --batch "$batch" --connections "$conns" --duration "$secs" \
            --warmup 1 --json > "$out/$mode.$r.json"
        sleep $(( (slow_ms + 999) / 1000 ))   # the losers' answers come in
        c1=$(metric $adm '^jrpc_calls_total[{]') h1=$(metric $adm '^jrpc_hedges_total$')
        echo "$((h1 - h0)) $((c1 - c0))" > "$out/$mode.$r.extra"
    done
done
python3 - "$out" "$rounds" "$batch" "$conns" "$slow_pct" "$slow_ms" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
print(f"batches of {sys.argv[3]}, {sys.argv[4]} connections, worker 'slow' holds back "
      f"{sys.argv[5]} % of its answers by {sys.argv[6]} ms; medians of {rounds} rounds")
print("| hedging | calls/s | p50 ms | p99 ms | p99.9 ms | extra calls (hedges) |")
print("|---|---|---|---|---|---|")
rows = {}
for mode in ("off", "on"):
    ds = [json.load(open(f"{out}/{mode}.{r}.json")) for r in range(1, rounds + 1)]
    ex = [list(map(int, open(f"{out}/{mode}.{r}.extra").read().split())) for r in range(1, rounds + 1)]
    med = lambda f: statistics.median(f(d) for d in ds)
    row = {"cps": med(lambda d: d["calls_per_s"]),
           "p50": med(lambda d: d["latency_us"]["batch"]["p50"]) / 1000,
           "p99": med(lambda d: d["latency_us"]["batch"]["p99"]) / 1000,
           "p999": med(lambda d: d["latency_us"]["batch"]["p99_9"]) / 1000,
           "extra": 100 * sum(h for h, c in ex) / max(1, sum(c for h, c in ex))}
    rows[mode] = row
    lost = sum(d["lost"] + d["duplicated"] + d["unexpected"] for d in ds)
    print(f"| {mode} | {row['cps']:.0f} | {row['p50']:.2f} | {row['p99']:.2f} | {row['p999']:.2f} "
          f"| {row['extra']:.2f} % |" + ("" if lost == 0 else f" LOST/DUP {lost}"))
on, off = rows["on"], rows["off"]
print(f"on/off: calls/s {on['cps'] / off['cps']:.2f}x, p99 {on['p99'] / off['p99']:.2f}x, "
      f"p99.9 {on['p999'] / off['p999']:.2f}x")
PY
