#!/usr/bin/env bash
# Signed batches' rate beside unsigned, with the nonce store reached over
# TCP loopback and over a unix socket, alternating in one run:
#   [PORT=N] [TCP_BROKER=CMD] bash bench/signed_rate.sh [BUILD_DIR] [CONNECTIONS] [SECONDS] [ROUNDS]
# One redis-server (TCP and a unix socket), three brokers (signed with
# --redis redis://, signed with --redis unix://, unsigned), one demo worker
# serving all three (credit 256), then ROUNDS (default 3) rounds of
# jrpc-bench --batch 100 --connections CONNECTIONS (default 4) for SECONDS
# (default 5) against each in turn. Prints each side's calls/s and batch
# p50/p99, and per round the two signed rates as ratios of the unsigned one
# (medians are for the reader: a shared machine moves every rate, only a
# ratio taken side by side means something). TCP_BROKER: the command that
# runs the first (TCP) broker instead of BUILD_DIR's jrpc-broker, for a
# scratch build under comparison (bench/RESULTS.md, fifth session). Stops
# what it started by PID.
set -eu
cd "$(dirname "$0")/.."
B=${1:-build}/bin
conns=${2:-4} secs=${3:-5} rounds=${4:-3}
source bench/signed_lib.sh
rp=$port
start_redis $rp --unixsocket "$T/redis.sock" --unixsocketperm 700
# name zmq-port workers-port [broker options]
brokers=("tcp $((port + 1)) $((port + 2)) --keys $T/keys --redis redis://127.0.0.1:$rp"
         "unix $((port + 3)) $((port + 4)) --keys $T/keys --redis unix://$T/redis.sock"
         "unsigned $((port + 5)) $((port + 6))")
connect=()
for b in "${brokers[@]}"; do
    read -r -a a <<<"$b"
    bin=("$B/jrpc-broker")
    [ "${a[0]}" = tcp ] && [ -n "${TCP_BROKER:-}" ] && read -r -a bin <<<"$TCP_BROKER"
    "${bin[@]}" --zmq tcp://127.0.0.1:${a[1]} --workers tcp://127.0.0.1:${a[2]} --http none \
        "${a[@]:3}" --log-level warn 2>"$T/broker-${a[0]}.log" &
    pids+=($!)
    connect+=(--connect tcp://127.0.0.1:${a[2]})
done
"$B/jrpc-worker" "${connect[@]}" --credit 256 --log-level warn 2>"$T/worker.log" & pids+=($!)
for b in "${brokers[@]}"; do
    read -r -a a <<<"$b"
    k=(); [ "${a[0]}" = unsigned ] || k=(-k $KEY -s $SECRET)
    for i in $(seq 100); do
        "$B/jrpc" --url tcp://127.0.0.1:${a[1]} -t 500 "${k[@]}" call add '[1,2]' >/dev/null 2>&1 && break
        [ "$i" = 100 ] && { echo "broker ${a[0]} did not start:" >&2; cat "$T/broker-${a[0]}.log" >&2; exit 1; }
        sleep 0.2
    done
done
echo "signed (TCP, unix) and unsigned, --batch 100 --connections $conns, $secs s, $rounds rounds"
for r in $(seq "$rounds"); do
    line="round $r:"
    declare -A rate=()
    for b in "${brokers[@]}"; do
        read -r -a a <<<"$b"
        s=(); [ "${a[0]}" = unsigned ] || s=("${sign[@]}")
        out=$("$B/jrpc-bench" --url tcp://127.0.0.1:${a[1]} --batch 100 --connections "$conns" \
            --duration "$secs" --warmup 1 "${s[@]}" --json)
        read -r c p50 p99 <<<"$(python3 -c 'import json,sys; d=json.load(sys.stdin); b=d["latency_us"]["batch"]; print(d["calls_per_s"], b["p50"], b["p99"])' <<<"$out")"
        rate[${a[0]}]=$c
        line+=" ${a[0]} $(printf '%.0f' "$c") calls/s p50 ${p50} p99 ${p99} us;"
    done
    echo "$line ratio tcp $(awk -v a="${rate[tcp]}" -v b="${rate[unsigned]}" 'BEGIN { printf "%.2f", a / b }')" \
        "unix $(awk -v a="${rate[unix]}" -v b="${rate[unsigned]}" 'BEGIN { printf "%.2f", a / b }')"
done
