#!/usr/bin/env bash
# 10,000 idle keep-alive connections (issue 6): broker RSS with them open,
# and the active clients' throughput with them (B) against without (A),
# interleaved A-B-A-B.
#   bash bench/idle.sh [N_IDLE] [ROUNDS] [SECONDS] [CONNECTIONS] [BATCH] [BODY_BYTES]
# Defaults: 10000 idle connections, 3 rounds, 5 s per run, 4 active HTTP
# connections, batch 1; BODY_BYTES pads each idle connection's request and
# sends it in two halves (see bench/idle_conns.c), default a bare 55-byte call. No Redis (open mode). Starts a Release broker and
# one demo worker on 127.0.0.1 (random ports), stops both by PID at the end.
# Prints one line per run, then RSS (VmRSS, VmHWM from /proc/PID/status) and
# the B/A throughput ratios: median and min-max.
set -eu
cd "$(dirname "$0")/.."
n=${1:-10000} rounds=${2:-3} secs=${3:-5} conns=${4:-4} batch=${5:-1} body=${6:-}
ulimit -n "$(ulimit -Hn)"
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $((n + 256)) ]; then
    echo "idle.sh: $n connections need ulimit -n >= $((n + 256)) (hard limit $(ulimit -Hn))" >&2
    exit 2
fi
source bench/build_rel.sh
build_rel build-rel jrpc-broker jrpc-worker jrpc-bench jrpc-bench-idle
B=build-rel/bin
port=$((10000 + RANDOM % 22000))
http=127.0.0.1:$((port + 2))
tmp=$(mktemp -d /tmp/jrpc-idle.XXXXXX)
$B/jrpc-broker --zmq tcp://127.0.0.1:$port --workers tcp://127.0.0.1:$((port + 1)) \
    --http "$http" --max-conns $((n + 100)) --idle-timeout-ms 3600000 --log-level warn \
    2>"$tmp/broker.log" & bp=$!
$B/jrpc-worker --connect tcp://127.0.0.1:$((port + 1)) --credit 256 --log-level warn & wp=$!
hp=
trap 'kill $bp $wp $hp 2>/dev/null; rm -rf "$tmp"' EXIT
sleep 0.5
rss() { awk -v k="$1:" '$1 == k { print $2 }' /proc/$bp/status; }   # kB

run() {   # prints calls/s of one measured run
    $B/jrpc-bench --url "http://$http" --batch "$batch" --connections "$conns" \
        --duration "$secs" --warmup 1 --json |
        sed -n 's/.*"calls_per_s":\([0-9.]*\).*"lost":\([0-9]*\),"duplicated":\([0-9]*\).*/\1 \2 \3/p' |
        awk '{ if ($2 + $3 > 0) print "ids lost or duplicated" > "/dev/stderr"; print $1 }'
}

hold_start() {
    $B/jrpc-bench-idle "$http" "$n" 100000 $body >"$tmp/idle.out" & hp=$!
    for _ in $(seq 1 1200); do grep -q '^holding' "$tmp/idle.out" && break; sleep 0.1; done
    grep -q '^holding' "$tmp/idle.out" || { echo "idle.sh: the idle connections did not open" >&2; exit 1; }
    head -n 1 "$tmp/idle.out"
}
hold_stop() {
    kill "$hp"; wait "$hp" 2>/dev/null || true; hp=
    sleep 1   # the broker closes them
}

run >/dev/null   # warm-up: the broker's pools and buffers reach their working size
rss0=$(rss VmRSS)
echo "rss_before_kb=$rss0 (after a warm-up run, no idle connections)"
ratios=()
for r in $(seq 1 "$rounds"); do
    a=$(run)
    echo "round=$r A calls_per_s=$a"
    hold_start
    rss1=$(rss VmRSS)
    b=$(run)
    echo "round=$r B calls_per_s=$b rss_with_idle_kb=$rss1 per_conn_bytes=$(( (rss1 - rss0) * 1024 / n ))"
    hold_stop
    ratios+=("$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", b / a }')")
done
echo "rss_after_kb=$(rss VmRSS) hwm_kb=$(rss VmHWM)"
printf '%s\n' "${ratios[@]}" | sort -n | awk '{ v[NR] = $1 } END {
    med = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "throughput_ratio_B_over_A median=%.3f min=%.3f max=%.3f rounds=%d\n", med, v[1], v[NR], NR }'
