#!/usr/bin/env bash
# Installs what is needed, builds, and runs everything in the foreground on
# 127.0.0.1: a redis-server for the nonces, a broker that requires signed
# requests (a fresh demo key is written to build/dev/keys), and two demo
# workers, with the admin listener (/metrics, /healthz, /readyz). The banner
# is printed once the broker is ready and every demo worker has connected.
# Ctrl-C stops them all the way SIGTERM does: calls in flight are answered,
# then every process exits 0 (a second Ctrl-C stops at once).
#
#   bash deploy/run-local.sh           # signed: clients use --key-file build/dev/keys
#   bash deploy/run-local.sh --open    # no signing, no Redis
#
# Options (before any broker argument):
#   --open              no signing, no Redis
#   --bin DIR           use the programs already built in DIR (also JRPC_BIN):
#                       nothing is built
#   --no-install        do not run deploy/deps.sh (the packages are there)
#   --dir DIR           where the demo key, redis.log and redis.sock go (default build/dev)
#   --zmq-port N        clients over ZeroMQ (default 5555)
#   --http-port N       clients over HTTP (default 8080)
#   --workers-port N    workers connect here (default 5556)
#   --admin-port N      /metrics, /healthz, /readyz (default 9090)
#   --redis-port N      the nonce store's TCP port (default 6390; the broker uses
#                       its unix socket, DIR/redis.sock)
#   --demo-workers N    how many demo workers (default 2)
# Anything else goes to the broker, e.g. --timeout-ms 5000; a --zmq, --http,
# --workers or --admin given there is used as is (and the demo workers
# connect to that --workers).
set -u
caller=$PWD
cd "$(dirname "$0")/.."
open=no install=yes bin=${JRPC_BIN:-} dir=build/dev nworkers=2
zmq_port=5555 http_port=8080 workers_port=5556 admin_port=9090 redis_port=6390
need_num() { [[ "$2" =~ ^[0-9]+$ ]] || { echo "run-local: $1 needs a number" >&2; exit 2; }; }
while [ $# -gt 0 ]; do
    case "$1" in
        --open)         open=yes ;;
        --no-install)   install=no ;;
        --bin)          bin=${2:?--bin DIR}; shift ;;
        --dir)          dir=${2:?--dir DIR}; shift ;;
        --zmq-port)     need_num "$1" "${2:-}"; zmq_port=$2; shift ;;
        --http-port)    need_num "$1" "${2:-}"; http_port=$2; shift ;;
        --workers-port) need_num "$1" "${2:-}"; workers_port=$2; shift ;;
        --admin-port)   need_num "$1" "${2:-}"; admin_port=$2; shift ;;
        --redis-port)   need_num "$1" "${2:-}"; redis_port=$2; shift ;;
        --demo-workers) need_num "$1" "${2:-}"; nworkers=$2; shift ;;
        *) break ;;
    esac
    shift
done
# --bin and --dir are relative to where the script was started from.
[ -n "$bin" ] && [ "${bin#/}" = "$bin" ] && bin=$caller/$bin
[ "$dir" != build/dev ] && [ "${dir#/}" = "$dir" ] && dir=$caller/$dir
zmq_ep=tcp://127.0.0.1:$zmq_port http_ep=127.0.0.1:$http_port
workers_ep=tcp://127.0.0.1:$workers_port admin_ep=127.0.0.1:$admin_port
# The broker's own --zmq/--http/--workers/--admin win over the port options.
broker_extra=("$@")
for ((i = 0; i < ${#broker_extra[@]}; i++)); do
    a=${broker_extra[i]} v=
    case "$a" in
        --zmq=*|--http=*|--workers=*|--admin=*) v=${a#*=}; a=${a%%=*} ;;
        --zmq|--http|--workers|--admin) v=${broker_extra[i + 1]:-} ;;
        *) continue ;;
    esac
    case "$a" in
        --zmq) zmq_ep=$v ;; --http) http_ep=$v ;; --workers) workers_ep=$v ;; --admin) admin_ep=$v ;;
    esac
done
# A worker connects to 127.0.0.1 where the broker binds every address.
connect_ep=$(printf '%s' "$workers_ep" | sed -E 's#//(\*|0\.0\.0\.0):#//127.0.0.1:#')
if [ $install = yes ]; then
    bash deploy/deps.sh --local || exit 1
fi
if [ -z "$bin" ]; then
    cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
        cmake --build build -j"$(nproc)" >/dev/null || exit 1
    bin=build/bin
fi
mkdir -p "$dir"

# Signals. Ctrl-C makes the terminal send SIGINT to every process of its
# foreground process group. If the broker and workers were in that group
# they would get the terminal's SIGINT *and* the SIGTERM this script
# forwards: two signals, and a second signal means "stop now" (exit 1, calls
# in flight dropped). So each child is started in a process group of its own
# (job control, set -m, only around the launch): the terminal's signals reach
# this script alone, which forwards exactly one SIGTERM per Ctrl-C, SIGINT or
# SIGTERM or SIGHUP (a closed terminal). Ctrl-C, `kill -INT <script>` and
# `kill -INT -<group>` therefore all drain the same way; a second one
# forwards a second SIGTERM, which stops at once. (Started in the background
# by a shell without job control, `cmd &` in a script, bash ignores SIGINT in
# the script and nothing can trap it: stop it with SIGTERM then.) Redis is
# stopped last, once the broker (which may be claiming nonces for calls in
# flight) has exited.
names=()        # "broker", "demo-1", ...: the processes that drain
pids=()
redis_pid=
stops=0
launch() { # NAME CMD...: starts CMD in its own process group
    local name=$1; shift
    set -m
    "$@" &
    pids+=($!); names+=("$name")
    set +m
}
stop() {
    stops=$((stops + 1))
    [ ${#pids[@]} -gt 0 ] && kill -TERM "${pids[@]}" 2>/dev/null
}
trap stop INT TERM HUP
trap 'kill -TERM "${pids[@]}" $redis_pid 2>/dev/null' EXIT   # an unexpected exit

args=(--zmq "$zmq_ep" --http "$http_ep" --workers "$workers_ep" --admin "$admin_ep")
client_key=()
if [ $open = no ]; then
    if [ ! -s "$dir/keys" ]; then
        secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
        printf '# key id  secret  [method globs]\ndemo %s\n' "$secret" > "$dir/keys"
        chmod 600 "$dir/keys"
    fi
    # The broker reaches Redis over a unix socket (same host: 10-15 % less
    # of Redis' CPU per claim than TCP loopback, docs/ARCHITECTURE.md
    # "Signed batches"); the TCP port stays for redis-cli. A socket path
    # must fit sun_path (108 bytes): a longer --dir falls back to TCP.
    redis_url=redis://127.0.0.1:$redis_port sock_opt=()
    sock=$(cd "$dir" && pwd)/redis.sock
    if [ ${#sock} -lt 100 ]; then
        redis_url=unix://$sock sock_opt=(--unixsocket "$sock" --unixsocketperm 700)
    fi
    set -m
    redis-server --port "$redis_port" --bind 127.0.0.1 "${sock_opt[@]}" --save '' --appendonly no \
        --logfile "$dir/redis.log" &
    redis_pid=$!
    set +m
    args+=(--keys "$dir/keys" --redis "$redis_url")
    client_key=(--key-file "$dir/keys")
fi
launch broker "$bin/jrpc-broker" "${args[@]}" "${broker_extra[@]}"
for ((i = 1; i <= nworkers; i++)); do
    launch "demo-$i" "$bin/jrpc-worker" --connect "$connect_ep" --name "demo-$i"
done

# Ready: /readyz answers 200 and /metrics counts every demo worker; without
# an admin listener, a call goes through.
http_base=http://${http_ep/#\*:/127.0.0.1:}
admin_base=http://${admin_ep/#\*:/127.0.0.1:}
ready() {
    if [ "$admin_ep" != none ]; then
        curl -sf -o /dev/null "$admin_base/readyz" || return 1
        local n
        n=$(curl -sf "$admin_base/metrics" | awk '$1 == "jrpc_workers_connected" { print $2 }')
        [ "${n:-0}" -ge "$nworkers" ]
    else
        "$bin/jrpc" -u "$zmq_ep" "${client_key[@]}" -t 1000 call echo '[1]' >/dev/null 2>&1
    fi
}
for ((i = 0; ; i++)); do
    [ $stops -gt 0 ] && break
    ready && break
    alive=yes
    for p in "${pids[@]}" $redis_pid; do kill -0 "$p" 2>/dev/null || alive=no; done
    if [ $alive = no ] || [ $i -ge 300 ]; then
        echo "jrpc: not ready after $((i / 10)) s (a port taken? see the lines above); stopping" >&2
        stop
        break
    fi
    sleep 0.1
done

if [ $stops -eq 0 ]; then
    keys_hint=; [ $open = no ] && keys_hint="--key-file $dir/keys "
    echo
    echo "jrpc: ready: broker on $zmq_ep and $http_base/rpc with $nworkers workers (workers endpoint $workers_ep)."
    [ "$admin_ep" != none ] &&
        echo "Metrics: curl -s $admin_base/metrics   (also /healthz, /readyz)"
    if [ $open = no ]; then
        echo "Signed requests only (key file $dir/keys). Try:"
    else
        echo "Open mode (no signing). Try:"
    fi
    echo "  $bin/jrpc ${keys_hint}-u $zmq_ep call subtract '[42, 23]'"
    echo "  $bin/jrpc ${keys_hint}-u $http_base call sum '[1,2,3]'"
    echo "  printf '[%s,%s]' '{\"jsonrpc\":\"2.0\",\"method\":\"spin\",\"params\":{\"ms\":1000},\"id\":1}' \\"
    echo "      '{\"jsonrpc\":\"2.0\",\"method\":\"spin\",\"params\":{\"ms\":1000},\"id\":2}' | $bin/jrpc ${keys_hint}-u $zmq_ep send"
    echo "    (two calls burning 1 s of CPU each: the pool runs them at once; see the pids)"
    [ $open = yes ] &&
        echo "  curl -s -H 'Content-Type: application/json' -d '{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"params\":[1,2],\"id\":1}' $http_base/rpc"
    echo "Ctrl-C answers the calls in flight, then stops everything."
fi

# Reap every process with its exit status. `wait -n -p` returns with the
# variable unset when a trapped signal interrupted it (stop() has run).
declare -A status
left=("${pids[@]}")
while [ ${#left[@]} -gt 0 ]; do
    unset done_pid
    wait -n -p done_pid "${left[@]}"
    st=$?
    [ -n "${done_pid:-}" ] || continue
    status[$done_pid]=$st
    rest=()
    for p in "${left[@]}"; do [ "$p" = "$done_pid" ] || rest+=("$p"); done
    left=("${rest[@]}")
    if [ $stops -eq 0 ]; then
        for ((i = 0; i < ${#pids[@]}; i++)); do
            [ "${pids[i]}" = "$done_pid" ] && echo "jrpc: ${names[i]} exited ($st); stopping the others" >&2
        done
        stop
    fi
done
summary=() rc=0
for ((i = 0; i < ${#pids[@]}; i++)); do
    summary+=("${names[i]} ${status[${pids[i]}]}")
    [ "${status[${pids[i]}]}" = 0 ] || rc=1
done
if [ -n "$redis_pid" ]; then
    kill -TERM "$redis_pid" 2>/dev/null
    while :; do
        wait "$redis_pid"; st=$?
        kill -0 "$redis_pid" 2>/dev/null || break   # else a signal interrupted the wait
    done
    summary+=("redis $st")
    [ "$st" = 0 ] || rc=1
fi
trap - EXIT
IFS=,; echo "jrpc: stopped; exit status: ${summary[*]}" | sed 's/,/, /g'
exit $rc
