#!/usr/bin/env bash
# Issue 18: what one single call over ZeroMQ costs the broker, per engine.
# Starts a broker (--zmq-engine ENGINE) and one worker on ports BASE..BASE+3,
# then runs jrpc-bench --batch 1 twice against it: once under
# `strace -c -f -p BROKER` (syscalls per call; strace slows the run, the
# count per call is what is read), once under `perf stat -e context-switches
# -p BROKER` (switches per call). Calls are counted by the bench.
#
#   bash bench/zmtp_syscalls.sh BIN_DIR ENGINE [BASE_PORT] [SECONDS]
#   e.g. bash bench/zmtp_syscalls.sh build-a/bin native 43200 5
set -eu
bin=$1 engine=$2 base=${3:-43200} secs=${4:-5}
. "$(dirname "$0")/zmtp_lib.sh"
start_pair "$engine"
# profiled JSON COMMAND...: COMMAND (a profiler of the broker) runs in the
# background while jrpc-bench --batch 1 runs once (its --json in JSON), then
# gets SIGINT; n: the calls the bench counted.
profiled() {
    local json=$1 pid
    shift
    "$@" & pid=$!
    sleep 0.5
    "$bin/jrpc-bench" --url tcp://127.0.0.1:$base --batch 1 --connections 4 --duration "$secs" \
        --warmup 0 --json > "$json"
    kill -INT $pid; wait $pid 2>/dev/null || true
    n=$(sed -nE 's/.*"calls": *([0-9]+).*/\1/p' "$json" | head -1)
}

profiled "$tmp/s.json" strace -c -f -p $bpid -o "$tmp/strace.txt"
total=$(awk '$NF == "total" { print $(NF-2) }' "$tmp/strace.txt")
echo "engine=$engine strace: calls=$n syscalls=$total per_call=$(awk -v t="$total" -v n="$n" 'BEGIN { printf "%.1f", t / n }')"
awk -v n="$n" 'NR > 2 && $NF != "total" && $1 !~ /^-/ { c = (NF == 6 ? $5 : $4); printf "  %-16s %6.2f/call\n", $NF, c / n }' "$tmp/strace.txt" |
    sort -k2 -rn | head -12

profiled "$tmp/p.json" perf stat -e context-switches -p $bpid -o "$tmp/perf.txt"
cs=$(awk '/context-switches/ { gsub(",", "", $1); print $1 }' "$tmp/perf.txt")
echo "engine=$engine perf: calls=$n context_switches=$cs per_call=$(awk -v t="$cs" -v n="$n" 'BEGIN { printf "%.2f", t / n }')"
