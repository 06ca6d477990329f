#!/usr/bin/env bash
# Where the CPU of a call goes, process by process (issue 35's nonce-rate
# and signed100 rows): CPU time, which a busy machine blurs far less than
# wall-clock rates, divided by the calls answered.
#   [PORT=N] bash bench/single_cpu.sh [CONNECTIONS] [SECONDS] [BATCH]
# One redis-server (a unix socket, as deploy/run-local.sh's broker uses),
# two Release brokers (signed: --keys with a rate-limited key and the replay
# guard in Redis; unsigned: no keys), one demo worker serving both (credit
# 256), then jrpc-bench --batch BATCH (default 1) --connections CONNECTIONS
# (default 32) for SECONDS (default 5, after 1 s of warm-up) against the
# unsigned broker, then the signed one (a nonce claimed per body: the
# signed100 rows at BATCH 100), then the signed one with the rate-limited
# key (nonce and rate claimed together: the nonce-rate row; BATCH 1 only). For each: calls/s, and the user + system
# CPU microseconds per call of jrpc-bench (which signs), the broker, the
# worker and redis-server (read from /proc before and after the whole
# run, warm-up included, divided by every call answered in it), their sum,
# and the rate the machine's cores could carry at that sum (cores x 10^6 /
# sum), and Redis' commands per call (INFO commandstats: the EVALSHAs, and
# every command, those the scripts run included). Then redis-benchmark SET NX EX at pipeline 16 (32 clients), the
# row's yardstick, with redis-server's CPU per SET. Everything on
# 127.0.0.1, stopped at exit.
set -eu
cd "$(dirname "$0")/.."
conns=${1:-32} secs=${2:-5} batch=${3:-1}
source bench/build_rel.sh
build_rel build-rel jrpc-broker jrpc-worker jrpc-bench
B=build-rel/bin
source bench/signed_lib.sh   # port, T, pids, KEY, SECRET, start_redis
printf '%s-lim %s rate=1000000 burst=1000000\n' $KEY $SECRET >> "$T/keys"
sock=$T/redis.sock
start_redis $((port + 9)) --unixsocket "$sock" --unixsocketperm 700 ||
    { cat "$T/redis.log" >&2; exit 1; }
$B/jrpc-broker --zmq tcp://127.0.0.1:$port --workers tcp://127.0.0.1:$((port + 1)) --http none \
    --log-level warn & pids+=($!) ub=$!
$B/jrpc-broker --zmq tcp://127.0.0.1:$((port + 2)) --workers tcp://127.0.0.1:$((port + 3)) \
    --http none --keys "$T/keys" --redis "unix://$sock" --log-level warn & pids+=($!) sb=$!
$B/jrpc-worker --connect tcp://127.0.0.1:$((port + 1)) --connect tcp://127.0.0.1:$((port + 3)) \
    --credit 256 --log-level warn & pids+=($!) wk=$!
answers() {   # answers URL [jrpc-bench options]: a short run all answered
    $B/jrpc-bench --url "$1" "${@:2}" --batch 1 --connections 1 --duration 0.1 --warmup 0 --json \
        2>/dev/null | grep -q '"calls":[1-9].*"errors":{},"transport_failures":0,'
}
for _ in $(seq 100); do
    answers tcp://127.0.0.1:$port && answers tcp://127.0.0.1:$((port + 2)) --key-id $KEY-lim \
        --secret $SECRET && break
    kill -0 $ub $sb 2>/dev/null || { echo "single_cpu.sh: a broker did not start (port taken?)" >&2; exit 1; }
    sleep 0.2
done
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }   # utime + stime, clock ticks
cmdstat() {   # cmdstat: "EVALSHA_CALLS ALL_CALLS" so far
    redis-cli -s "$sock" INFO commandstats | tr -d '\r' |
        awk -F'[:=,]' '/^cmdstat_/ { all += $3 } /^cmdstat_evalsha:/ { ev = $3 } END { print ev + 0, all + 0 }'
}
hz=$(getconf CLK_TCK) cores=$(nproc)
printf '%-10s %9s %8s %8s %8s %8s %8s %12s %9s %9s\n' side calls/s bench broker worker redis sum cores/sum \
    evalsha/c cmds/c
side() {   # side NAME BROKER_PID URL [jrpc-bench options]
    local name=$1 bp=$2 url=$3
    shift 3
    local b0 w0 r0 out c0 c1
    b0=$(ticks "$bp") w0=$(ticks $wk) r0=$(ticks $redis_pid) c0=$(cmdstat)
    out=$( { /usr/bin/time -f 'cpu %U %S' $B/jrpc-bench --url "$url" --batch "$batch" --connections "$conns" \
             --duration "$secs" --warmup 1 --json "$@"; } 2>&1 )
    local calls rate bench_s
    rate=$(grep -o '"calls_per_s":[0-9.]*' <<<"$out" | cut -d: -f2)
    calls=$(awk -v r="$rate" -v s="$secs" 'BEGIN { printf "%d", r * (s + 1) }')   # warm-up too
    bench_s=$(awk '/^cpu / { print $2 + $3 }' <<<"$out")
    c1=$(cmdstat)
    awk -v n="$name" -v r="$rate" -v c="$calls" -v hz="$hz" -v k="$cores" -v bs="$bench_s" \
        -v b=$(( $(ticks "$bp") - b0 )) -v w=$(( $(ticks $wk) - w0 )) -v x=$(( $(ticks $redis_pid) - r0 )) \
        -v c0="$c0" -v c1="$c1" \
        'BEGIN { u = 1e6 / hz / c; pb = bs * 1e6 / c; s = pb + (b + w + x) * u
                 split(c0, a, " "); split(c1, z, " ")
                 printf "%-10s %9.0f %8.3f %8.3f %8.3f %8.3f %8.3f %12.0f %9.3f %9.2f\n", n, r, pb, b * u, w * u,
                        x * u, s, k * 1e6 / s, (z[1] - a[1]) / c, (z[2] - a[2] - 1) / c }'
    grep -q '"errors":{},"transport_failures":0,' <<<"$out" || echo "  ($name: errors: $(grep -o '"errors":{[^}]*}' <<<"$out"))"
}
side unsigned $ub tcp://127.0.0.1:$port
side signed $sb tcp://127.0.0.1:$((port + 2)) --key-id $KEY --secret $SECRET
[ "$batch" -gt 1 ] ||   # its rate (10^6 calls/s) would refuse batches
    side nonce-rate $sb tcp://127.0.0.1:$((port + 2)) --key-id $KEY-lim --secret $SECRET
r0=$(ticks $redis_pid)
line=$(redis-benchmark -s "$sock" -c 32 -P 16 -n 2000000 -r 1000000 --csv SET 'nonce:__rand_int__' 1 NX EX 300 |
       awk -F'"' 'NR == 2 { print $4 }')
awk -v r="$line" -v x=$(( $(ticks $redis_pid) - r0 )) -v hz="$hz" \
    'BEGIN { printf "redis-benchmark SET NX EX -P 16: %.0f /s, redis-server %.2f us CPU per SET\n", r, x * 1e6 / hz / 2000000 }'
