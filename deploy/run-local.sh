#!/usr/bin/env bash
# Installs what is needed, builds, and runs everything in the foreground on
# 127.0.0.1: a redis-server for the nonces, a broker that requires signed
# requests (a fresh demo key is written to build/dev/keys), and two demo
# workers, with the admin listener (/metrics, /healthz, /readyz) on
# 127.0.0.1:9090. Ctrl-C stops them all.
#
#   bash deploy/run-local.sh           # signed: clients use --key-file build/dev/keys
#   bash deploy/run-local.sh --open    # no signing, no Redis
#   extra arguments go to the broker
set -eu
cd "$(dirname "$0")/.."
open=no
if [ "${1:-}" = "--open" ]; then open=yes; shift; fi
bash deploy/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
mkdir -p build/dev
pids=()
stop() { trap - INT TERM EXIT; kill -TERM "${pids[@]}" 2>/dev/null; wait; }
trap stop INT TERM EXIT
args=()
if [ $open = no ]; then
    if [ ! -s build/dev/keys ]; then
        secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
        printf '# key id  secret  [method globs]\ndemo %s\n' "$secret" > build/dev/keys
        chmod 600 build/dev/keys
    fi
    redis-server --port 6390 --bind 127.0.0.1 --save '' --appendonly no \
        --logfile build/dev/redis.log &
    pids+=($!)
    args=(--keys build/dev/keys --redis redis://127.0.0.1:6390)
fi
build/bin/jrpc-broker --admin 127.0.0.1:9090 "${args[@]}" "$@" &
pids+=($!)
sleep 0.3
for i in 1 2; do
    build/bin/jrpc-worker --connect tcp://127.0.0.1:5556 --name "demo-$i" &
    pids+=($!)
done
sleep 0.3
echo
echo "jrpc: broker on tcp://127.0.0.1:5555 and http://127.0.0.1:8080/rpc with 2 workers."
echo "Metrics: curl -s http://127.0.0.1:9090/metrics   (also /healthz, /readyz)"
if [ $open = no ]; then
    echo "Signed requests only (key file build/dev/keys). Try:"
    echo "  build/bin/jrpc --key-file build/dev/keys call subtract '[42, 23]'"
    echo "  build/bin/jrpc --key-file build/dev/keys --url http://127.0.0.1:8080 call sum '[1,2,3]'"
else
    echo "Open mode (no signing). Try:"
    echo "  build/bin/jrpc call subtract '[42, 23]'"
    echo "  curl -s -H 'Content-Type: application/json' -d '{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"params\":[1,2],\"id\":1}' http://127.0.0.1:8080/rpc"
fi
wait -n "${pids[@]}"
