#!/usr/bin/env bash
# Installs what is needed, builds, and runs a broker with two demo workers in
# the foreground on 127.0.0.1 (clients: tcp://127.0.0.1:5555). Ctrl-C stops
# them all. Extra arguments go to the broker.
set -eu
cd "$(dirname "$0")/.."
bash deploy/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
pids=()
stop() { kill -TERM "${pids[@]}" 2>/dev/null; wait; }
trap stop INT TERM EXIT
build/bin/jrpc-broker "$@" &
pids+=($!)
sleep 0.3
for i in 1 2; do
    build/bin/jrpc-worker --connect tcp://127.0.0.1:5556 &
    pids+=($!)
done
echo "jrpc: broker on tcp://127.0.0.1:5555 with 2 workers. Try:"
echo "  build/bin/jrpc call subtract '[42, 23]'"
wait -n "${pids[@]}"
