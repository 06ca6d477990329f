#!/usr/bin/env bash
# What a rate limit costs per body (issue 17), with and without signing:
# four Release brokers on one Redis, each with a demo worker —
#   open          no keys, no limit
#   open+rate     no keys, --rate-limit 100000000 (never refuses: the cost of
#                 asking Redis, one EVALSHA per body, on the client's address)
#   signed        --keys, no limit (one EVALSHA per body: the nonce)
#   signed+rate   --keys, the same limit (the same EVALSHA, with GCRA in it)
# jrpc-bench loads one at a time, A-B-C-D per round, ROUNDS rounds of
# SECONDS, batches of BATCH, CONNS connections (closed loop). Prints the
# medians of bodies/s and p50/p99 per body and the ratios of each "+rate"
# to its base. Everything on 127.0.0.1, stopped at exit.
#   bash bench/rate_cost.sh [ROUNDS] [SECONDS] [BATCH] [CONNS]
set -eu
cd "$(dirname "$0")/.."
rounds=${1:-3} secs=${2:-5} batch=${3:-10} conns=${4:-4}
source bench/build_rel.sh
build_rel build-rel jrpc-broker jrpc-worker jrpc-bench
B=build-rel/bin
out=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$out"' EXIT
port=$((10000 + RANDOM % 22000))
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 & pids+=($!)
printf 'bench s3cr3t-s3cr3t-s3cr3t-bench\n' > "$out/keys"
names=(open open+rate signed signed+rate)
args=("" "--rate-limit 100000000" "--keys $out/keys" "--keys $out/keys --rate-limit 100000000")
eps=""
for i in 0 1 2 3; do
    p=$((port + 10 + 3 * i))
    # shellcheck disable=SC2086
    $B/jrpc-broker --zmq tcp://127.0.0.1:$p --workers tcp://127.0.0.1:$((p + 1)) \
        --http 127.0.0.1:$((p + 2)) --redis redis://127.0.0.1:$port --access-log off \
        --log-level warn ${args[$i]} & pids+=($!)
    eps+="${eps:+,}tcp://127.0.0.1:$((p + 1))"
done
$B/jrpc-worker --connect "$eps" --credit 256 --log-level warn & pids+=($!)
sleep 1
for r in $(seq "$rounds"); do
    for i in 0 1 2 3; do
        p=$((port + 10 + 3 * i))
        sign=(); [ $i -ge 2 ] && sign=(--key-file "$out/keys")
        $B/jrpc-bench --url http://127.0.0.1:$((p + 2))/rpc "${sign[@]}" --batch "$batch" \
            --connections "$conns" --duration "$secs" --warmup 1 --json > "$out/$i.$r.json"
    done
done
python3 - "$out" "$rounds" "$batch" "$conns" "${names[@]}" <<'PY'
import json, statistics, sys
out, rounds, batch, conns, names = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
print(f"batches of {batch}, {conns} connections, medians of {rounds} rounds")
print("| broker | bodies/s | p50 us | p99 us |")
print("|---|---|---|---|")
rows = []
for i, n in enumerate(names):
    ds = [json.load(open(f"{out}/{i}.{r}.json")) for r in range(1, rounds + 1)]
    bad = sum(d["lost"] + d["duplicated"] + d["unexpected"] + d["rejected_batches"] for d in ds)
    med = lambda f: statistics.median(f(d) for d in ds)
    row = (med(lambda d: d["batches_per_s"]), med(lambda d: d["latency_us"]["batch"]["p50"]),
           med(lambda d: d["latency_us"]["batch"]["p99"]))
    rows.append(row)
    print(f"| {n} | {row[0]:.0f} | {row[1]:.0f} | {row[2]:.0f} |" + (f" BAD {bad}" if bad else ""))
for base, lim in ((0, 1), (2, 3)):
    print(f"{names[lim]} / {names[base]}: bodies/s {rows[lim][0] / rows[base][0]:.2f}x, "
          f"p50 {rows[lim][1] / rows[base][1]:.2f}x")
PY
