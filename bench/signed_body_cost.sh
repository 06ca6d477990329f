#!/usr/bin/env bash
# What a signed batch of 100 costs beside an unsigned one, per body, in every
# process and in measures a shared machine does not blur: instructions
# (callgrind), CPU time charged to a process (/proc/PID/stat), syscalls
# (perf's raw_syscalls:sys_enter) and Redis' own accounting (INFO
# commandstats). Never wall-clock rates.
#   [PORT=N] [REDIS=tcp|unix] bash bench/signed_body_cost.sh [BUILD_DIR] [CONNECTIONS] [SECONDS]
# Starts its own redis-server, a signed broker (--keys, --redis) and an
# unsigned one (as bench/peers/run.sh's signed100 row), one demo worker
# serving both, and jrpc-bench --batch 100 (CONNECTIONS, default 4) over
# ZeroMQ. REDIS=unix: the signed broker reaches Redis over a unix socket
# (--redis unix:///...), tcp (default) over 127.0.0.1.
# 1. client: jrpc-bench under callgrind, signed and unsigned, Ir per batch
#    (start-up included in both: the difference is the signing);
# 2. broker: each broker under callgrind (counters zeroed after a warm-up),
#    Ir per batch;
# 3. Redis and the broker at full speed: Redis' usec per claim
#    (commandstats), the CPU time (perf's task-clock) and syscalls per batch
#    of each process: jrpc-bench, the broker, the worker, Redis.
# SECTIONS="1 3" runs only those. Stops what it started by PID.
set -eu
cd "$(dirname "$0")/.."
B=${1:-build}/bin
conns=${2:-4} secs=${3:-8}
source bench/signed_lib.sh
pp=()
rp=$port sz=$((port + 1)) sw=$((port + 2)) uz=$((port + 3)) uw=$((port + 4))
batches() { sed -n 's/.*"batches":\([0-9]*\).*/\1/p' "$1"; }
bench() {   # URL SECONDS [signing options...] > json
    local url=$1 s=$2; shift 2
    "$B/jrpc-bench" --url "$url" --batch 100 --connections "$conns" --duration "$s" --warmup 0 \
        "$@" --json
}

start_redis $rp --unixsocket "$T/redis.sock" --unixsocketperm 700
rurl=redis://127.0.0.1:$rp
[ "${REDIS:-tcp}" = unix ] && rurl=unix://$T/redis.sock

# start_brokers [PREFIX...]: both brokers (PREFIX: valgrind ...) and the worker.
start_brokers() {
    "$@" "$B/jrpc-broker" --zmq tcp://127.0.0.1:$sz --workers tcp://127.0.0.1:$sw --http none \
        --keys "$T/keys" --redis "$rurl" --log-level warn 2>"$T/bs.log" &
    pids+=($!) sbp=$!
    "$@" "$B/jrpc-broker" --zmq tcp://127.0.0.1:$uz --workers tcp://127.0.0.1:$uw --http none \
        --log-level warn 2>"$T/bu.log" &
    pids+=($!) ubp=$!
    "$B/jrpc-worker" --connect tcp://127.0.0.1:$sw --connect tcp://127.0.0.1:$uw --credit 256 \
        --log-level warn 2>"$T/worker.log" &
    pids+=($!) wp=$!
    for _ in $(seq 100); do
        "$B/jrpc" --url tcp://127.0.0.1:$sz -t 2000 -k $KEY -s $SECRET call add '[1,2]' \
            >/dev/null 2>&1 &&
        "$B/jrpc" --url tcp://127.0.0.1:$uz -t 2000 call add '[1,2]' >/dev/null 2>&1 && return
        sleep 0.2
    done
    echo "the brokers did not start" >&2
    cat "$T/bs.log" "$T/bu.log" >&2
    exit 1
}
stop_brokers() {
    kill $sbp $ubp $wp 2>/dev/null || true
    wait $sbp $ubp $wp 2>/dev/null || true
}

echo "== redis: $rurl, $conns connections"
start_brokers
bench tcp://127.0.0.1:$sz 1 "${sign[@]}" >/dev/null   # warm-up
bench tcp://127.0.0.1:$uz 1 >/dev/null

want() { case " ${SECTIONS:-1 2 3} " in *" $1 "*) return 0 ;; esac; return 1; }
if want 1; then
echo "== 1. client (jrpc-bench under callgrind, $secs s)"
for side in unsigned signed; do
    url=tcp://127.0.0.1:$uz opts=()
    [ $side = signed ] && url=tcp://127.0.0.1:$sz opts=("${sign[@]}")
    valgrind --tool=callgrind --callgrind-out-file="$T/cgc" "$B/jrpc-bench" --url "$url" \
        --batch 100 --connections "$conns" --duration "$secs" --warmup 0 "${opts[@]}" --json \
        >"$T/c.json" 2>/dev/null
    n=$(batches "$T/c.json")
    [ -n "${KEEP:-}" ] && cp "$T/cgc" "$KEEP.client.$side"
    echo "client $side: batches=$n Ir_per_batch=$(( $(ir "$T/cgc") / n ))"
done

fi
if want 3; then
echo "== 3. at full speed ($secs s each): task-clock, syscalls, Redis commandstats"
for side in unsigned signed; do
    url=tcp://127.0.0.1:$uz opts=() bp=$ubp
    [ $side = signed ] && url=tcp://127.0.0.1:$sz opts=("${sign[@]}") bp=$sbp
    redis-cli -p $rp CONFIG RESETSTAT >/dev/null
    for who in redis:$redis_pid broker:$bp worker:$wp; do
        perf stat -x, -e task-clock,raw_syscalls:sys_enter -p "${who#*:}" -o "$T/p.${who%%:*}" &
        pp+=($!)
    done
    sleep 0.3
    perf stat -x, -e task-clock,raw_syscalls:sys_enter -o "$T/p.client" \
        "$B/jrpc-bench" --url "$url" --batch 100 --connections "$conns" --duration "$secs" \
        --warmup 0 "${opts[@]}" --json >"$T/f.json"
    kill -INT "${pp[@]}"
    wait "${pp[@]}" 2>/dev/null || true
    pp=()
    n=$(batches "$T/f.json")
    cs=$(redis-cli -p $rp INFO commandstats | tr -d '\r' | grep '^cmdstat_evalsha' || true)
    python3 - "$side" "$n" "$T" "$cs" <<'PY'
import re, sys
side, n, t, cs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
out = []
for who in ("client", "broker", "worker", "redis"):
    v = {}
    for line in open(f"{t}/p.{who}"):
        f = line.split(",")
        if len(f) > 2 and f[0].replace(".", "").isdigit():
            v[f[2]] = float(f[0])
    out.append(f"{who} {v.get('task-clock', 0) * 1000 / n:.1f} us "
               f"{v.get('raw_syscalls:sys_enter', 0) / n:.2f} sc")
m = re.search(r"calls=(\d+),usec=(\d+),usec_per_call=([\d.]+)", cs)
extra = ""
if m:
    calls, usec = int(m[1]), int(m[2])
    extra = (f"; evalsha={calls} claims_per_script={n / calls:.2f} "
             f"usec_per_call={float(m[3]):.2f} redis_exec_us_per_batch={usec / n:.2f}")
print(f"{side}: batches={n} per batch: " + ", ".join(out) + extra)
PY
done
fi
stop_brokers

want 2 || exit 0
echo "== 2. brokers under callgrind ($secs s each, after a warm-up)"
start_brokers valgrind --tool=callgrind --callgrind-out-file="$T/cgb.%p"
for side in unsigned signed; do
    url=tcp://127.0.0.1:$uz opts=() bp=$ubp
    [ $side = signed ] && url=tcp://127.0.0.1:$sz opts=("${sign[@]}") bp=$sbp
    bench "$url" 1 "${opts[@]}" >/dev/null
    callgrind_control -z $bp >/dev/null 2>&1
    bench "$url" "$secs" "${opts[@]}" >"$T/b.json"
    callgrind_control -d $side $bp >/dev/null 2>&1
    n=$(batches "$T/b.json")
    f=$(ls -t "$T"/cgb.$bp.* | head -1)
    echo "broker $side: batches=$n Ir_per_batch=$(( $(ir "$f") / n ))"
    [ -n "${KEEP:-}" ] && cp "$f" "$KEEP.broker.$side"
done
stop_brokers
