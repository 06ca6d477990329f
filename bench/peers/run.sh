#!/usr/bin/env bash
# bench/peers/run.sh — jrpc side by side with what users would pick instead.
#
#   bash bench/peers/run.sh [mcp] [--rounds N] [--duration S] [--warmup S]
#                           [--only PATTERN] [--out DIR] [--list]
#
# "mcp" runs the MCP section alone (issue 35; the same as --only 'mcp*'):
# MCP tools/call through jrpc's broker + jrpc-stdio --mcp vs supergateway
# (stateful) and vs mcp-proxy, all three in front of the same
# server-everything, loaded by several processes of official SDK clients
# (mcp_drive.py, mcp_load.cjs) with 1, 8 and 32 clients, and the server child
# killed under 8 clients. It needs only Node, npm and curl (no apt peers)
# and builds only jrpc-broker, jrpc-stdio and jrpc-bench. The mcp1/8/32 rows
# are loaded by jrpc-bench --mcp (C, a session per connection: a load that
# does not set the pace), mcpsdk8 by official SDK clients (Node processes,
# which on a 2-core machine take most of it), the kill rows by SDK clients.
#
# For each comparison: jrpc (A) and the peer (B) run the same workload in the
# same run, interleaved A-B-A-B for N rounds; the ratio A/B is taken per round
# and the median and min–max spread of the ratios reported (runs on this
# machine vary by ±25–50%, so only ratios taken side by side mean anything).
# Writes DIR/<comparison>.json (every round's raw results and the summary),
# DIR/machine.json, DIR/summary.md, DIR/plots/open-*.png (jrpc's latency
# percentile curve in the last open-loop round) and DIR/raw.tar.xz (every
# side's raw output, DIR/runs/ packed), and prints the Markdown table on
# stdout. DIR defaults to
# bench/results/<UTC date and time>/.
#
# Installs what is missing (bench/peers/install.sh), builds build-rel with
# -DJRPC_BENCH_PEERS=ON, then runs everything inside a private network
# namespace (unshare --net): every server — jrpc's and the peers' — listens
# on 127.0.0.1 of a loopback nobody else can reach, even those that bind
# every interface (libjson-rpc-cpp, epmd). Each server is started in its own
# process group and stopped by that id when no longer needed; the namespace
# disappears with the last process. Every load step is bounded by `timeout`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
B=$root/build-rel/bin

rounds=5 duration=10 warmup=1 only='*' out= list=
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
while [ $# -gt 0 ]; do
    case $1 in
        mcp)        only='mcp*'; shift ;;
        --rounds)   rounds=${2:?}; shift 2 ;;
        --duration) duration=${2:?}; shift 2 ;;
        --warmup)   warmup=${2:?}; shift 2 ;;
        --only)     only=${2:?}; shift 2 ;;
        --out)      out=${2:?}; shift 2 ;;
        --list)     list=1; shift ;;
        -h|--help)  usage; exit 0 ;;
        *) echo "run.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --rounds must be a positive integer" >&2; exit 2; }
[[ $duration =~ ^[0-9]+(\.[0-9]+)?$ && $warmup =~ ^[0-9]+(\.[0-9]+)?$ ]] ||
    { echo "run.sh: --duration and --warmup are seconds" >&2; exit 2; }

# ---- the comparisons ---------------------------------------------------
# name|peer server|kind|threshold|goal text. Kinds: ge (ratio >= t), gt
# (ratio > t), info (no goal), open (open loop: p50 and p99 ratios < 1).
# Grouped by peer so that each peer server runs only while it is compared.
# Peers with no server of their own: signed (the signed broker and Redis run
# with jrpc), self (both sides are jrpc's unsigned broker).
COMPARISONS=(
  "http1-nginx|nginx|ge|0.5|HTTP, 1 call per request, 32 connections: >= 0.5x nginx's fixed answer (floor)"
  "open-http1-nginx|nginx|open|1|open loop at half max: p50, p99 below nginx's"
  "http1-jsonrpccpp|jsonrpccpp|ge|0.8|HTTP, 1 call per request, 32 connections: >= 0.8x the in-process libjson-rpc-cpp"
  "open-http1-jsonrpccpp|jsonrpccpp|open|1|open loop at half max: p50, p99 below libjson-rpc-cpp's (single calls)"
  "http100-jsonrpccpp|jsonrpccpp|ge|2|HTTP, batches of 100: calls/s >= 2x libjson-rpc-cpp"
  "open-http100-jsonrpccpp|jsonrpccpp|open|1|open loop at half max: p50, p99 below libjson-rpc-cpp's (batches)"
  "http1-pool|pool|ge|2|HTTP, 1 call per request, 32 connections: >= 2x nginx -> 2 libjson-rpc-cpp (keepalive upstream)"
  "open-http1-pool|pool|open|1|open loop at half max: p50, p99 below nginx -> libjson-rpc-cpp pool's (single calls)"
  "http100-pool|pool|ge|2.5|HTTP, batches of 100, 4 connections: calls/s >= 2.5x nginx -> libjson-rpc-cpp pool"
  "open-http100-pool|pool|open|1|open loop at half max: p50, p99 below the pool's (batches)"
  "http100-jayson|jayson|ge|2.5|HTTP, batches of 100: calls/s >= 2.5x jayson (Node)"
  "open-http100-jayson|jayson|open|1|open loop at half max: p50, p99 below jayson's"
  "zmq100-nats|nats|ge|5|ZeroMQ, batches of 100: calls/s >= 5x NATS request-reply"
  "open-zmq100-nats|nats|open|1|open loop at half max: p50, p99 below NATS's"
  "zmq100-rabbitmq|rabbitmq|ge|25|ZeroMQ, batches of 100: calls/s >= 25x RabbitMQ RPC"
  "open-zmq100-rabbitmq|rabbitmq|open|1|open loop at half max: p50, p99 below RabbitMQ's"
  "zmq100-echo|echo|ge|1.2|ZeroMQ, batches of 100: calls/s >= 1.2x the raw one-message-per-call echo (floor)"
  "open-zmq100-echo|echo|open|1|open loop at half max: p50, p99 below the raw echo's"
  "zmq100-forwarder|forwarder|info|0|ZeroMQ, batches of 100: jrpc as a fraction of a raw two-hop forwarder (client -> zmq_proxy -> echo worker, same bytes, no JSON work): the floor for our shape"
  "zmq1-http1|self|ge|1|ZeroMQ single calls vs HTTP single calls on the same jrpc broker, 4 connections: ZeroMQ >= HTTP"
  "zmq1-client-engine|self|info|0|ZeroMQ single calls, libjrpc-client's own ZMTP (A) vs its libzmq engine (B), same broker, 4 connections"
  "signed100|signed|ge|0.95|signed with replay protection, batches of 100 over ZeroMQ: >= 0.95x unsigned"
  "signed100-c16|signed|ge|0.95|the same with 16 connections (enough in flight to hide the Redis round trip: capacity)"
  "nonce-p1|signed|info|0|nonces/s of signed single calls vs redis-benchmark SET NX EX, pipeline 1 (floor)"
  "nonce-p16|signed|info|0|nonces/s of signed single calls vs redis-benchmark SET NX EX, pipeline 16 (floor)"
  "nonce-rate-p16|signed|info|0|claims/s of signed single calls with a rate limit (nonce and rate in one claim, a loop turn's claims as one script: issue 35) vs redis-benchmark SET NX EX, pipeline 16 (issue 35 goal >= 0.5x)"
  # MCP (issue 35): kind mcp has three goals, calls/s >= , p99 <= and gateway
  # CPU per call <= (thresholds in that order); mcpkill is a record (info).
  "mcp1-supergateway|supergateway|mcp|4,0.3,0.1|MCP tools/call, 1 client (jrpc-bench --mcp): calls/s >= 4x, p99 <= 0.3x, gateway CPU per call <= 0.1x supergateway (stateful)"
  "mcp8-supergateway|supergateway|mcp|4,0.3,0.1|MCP tools/call, 8 clients (jrpc-bench --mcp): calls/s >= 4x, p99 <= 0.3x, gateway CPU per call <= 0.1x supergateway (stateful)"
  "mcp32-supergateway|supergateway|mcp|4,0.3,0.1|MCP tools/call, 32 clients (jrpc-bench --mcp): calls/s >= 4x, p99 <= 0.3x, gateway CPU per call <= 0.1x supergateway (stateful)"
  "mcpsdk8-supergateway|supergateway|mcpinfo|0|MCP tools/call, 8 official SDK clients (Node, 8 processes: the load sets the pace): jrpc vs supergateway (stateful), no goal"
  "mcpkill-supergateway|supergateway|mcpkill|0|MCP server child SIGKILLed under 8 SDK clients: what the clients see (errors, fine again when, new sessions), jrpc vs supergateway"
  "mcp1-mcp-proxy|mcp-proxy|mcp|4,0.3,0.1|MCP tools/call, 1 client (jrpc-bench --mcp): calls/s >= 4x, p99 <= 0.3x, gateway CPU per call <= 0.1x mcp-proxy"
  "mcp8-mcp-proxy|mcp-proxy|mcp|4,0.3,0.1|MCP tools/call, 8 clients (jrpc-bench --mcp): calls/s >= 4x, p99 <= 0.3x, gateway CPU per call <= 0.1x mcp-proxy"
  "mcp32-mcp-proxy|mcp-proxy|mcp|4,0.3,0.1|MCP tools/call, 32 clients (jrpc-bench --mcp): calls/s >= 4x, p99 <= 0.3x, gateway CPU per call <= 0.1x mcp-proxy"
  "mcpsdk8-mcp-proxy|mcp-proxy|mcpinfo|0|MCP tools/call, 8 official SDK clients (Node, 8 processes: the load sets the pace): jrpc vs mcp-proxy, no goal"
  "mcpkill-mcp-proxy|mcp-proxy|mcpkill|0|MCP server child SIGKILLed under 8 SDK clients: what the clients see (errors, fine again when, new sessions), jrpc vs mcp-proxy"
)
if [ -n "$list" ]; then
    for c in "${COMPARISONS[@]}"; do IFS='|' read -r n _ _ _ g <<<"$c"; printf '%-24s %s\n' "$n" "$g"; done
    exit 0
fi
selected=()
for c in "${COMPARISONS[@]}"; do
    # shellcheck disable=SC2053  # --only is a glob on purpose
    [[ ${c%%|*} == $only ]] && selected+=("$c")
done
[ ${#selected[@]} -gt 0 ] || { echo "run.sh: no comparison matches --only $only (see --list)" >&2; exit 2; }
# The MCP rows alone need neither the apt peers nor jrpc's ZeroMQ brokers.
mcp_only=1
for c in "${selected[@]}"; do [[ $c == mcp* ]] || mcp_only=; done

# ---- outside the namespace: install, build, re-enter --------------------
if [ -z "${JRPC_PEERS_IN_NETNS:-}" ]; then
    source "$root/bench/build_rel.sh"
    if [ -n "$mcp_only" ]; then
        bash "$here/install.sh" mcp
        build_rel "$root/build-rel" jrpc-broker jrpc-stdio jrpc-bench
    else
        bash "$here/install.sh"
        build_rel "$root/build-rel" -DJRPC_BENCH_PEERS=ON
    fi
    [ -n "$out" ] || out=$root/bench/results/$(date -u +%Y-%m-%dT%H%MZ)
    mkdir -p "$out/plots"
    out=$(cd "$out" && pwd)
    export JRPC_PEERS_IN_NETNS=1
    # Not root: a user namespace gives the network namespace (and lo) to us.
    userns=(); [ "$(id -u)" -ne 0 ] && userns=(--map-root-user)
    exec unshare --net "${userns[@]}" -- bash "$0" --rounds "$rounds" --duration "$duration" --warmup "$warmup" \
        --only "$only" --out "$out"
fi

# ---- inside: the machine ------------------------------------------------
ip link set lo up
T=$(mktemp -d /tmp/jrpc-peers.XXXXXX)
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
cat > "$out/machine.json" <<EOF
{"date":"$(date -u +%FT%TZ)","nproc":$(nproc),"kernel":"$(uname -r)","cpu":"$cpu",
 "commit":"$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)",
 "rounds":$rounds,"duration_s":$duration,"warmup_s":$warmup}
EOF
echo "machine: $(nproc) CPUs ($cpu), Linux $(uname -r); $rounds rounds of ${duration} s (+${warmup} s warm-up) per side" >&2

# ---- servers: own process groups, stopped by that id ---------------------
declare -A PGID=()
stop() {  # stop NAME
    local p=${PGID[$1]:-}
    [ -n "$p" ] || return 0
    kill -TERM -- "-$p" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 -- "-$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
    unset "PGID[$1]"
}
cleanup() {
    for n in "${!PGID[@]}"; do stop "$n"; done
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 3' INT TERM
start() {  # start NAME CMD... : in its own session, so its group id is its pid
    local n=$1; shift
    setsid "$@" >"$T/$n.log" 2>&1 &
    PGID[$n]=$!
}
wait_for() {  # wait_for SECONDS CMD...
    local secs=$1; shift
    for _ in $(seq 1 $((secs * 10))); do "$@" 2>/dev/null && return 0; sleep 0.1; done
    return 1
}
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
logged() { grep -q "$2" "$T/$1.log"; }
fail_start() { echo "run.sh: $1 did not start; its log:" >&2; tail -n 20 "$T/$2.log" >&2; exit 1; }

# Fixed ports are safe: this network namespace is ours alone.
JRPC_ZMQ=tcp://127.0.0.1:5555 JRPC_HTTP=http://127.0.0.1:8080/rpc
SIGNED_ZMQ=tcp://127.0.0.1:5565
KEY_ID=bench SECRET=bench-secret-0123456789abcdef
REDIS_SOCK=$T/redis.sock
start_jrpc() {
    printf '%s %s\n' "$KEY_ID" "$SECRET" > "$T/keys"
    # nonce-rate-*: the same secret under a key with a rate limit no load reaches.
    printf '%s-lim %s rate=1000000 burst=1000000\n' "$KEY_ID" "$SECRET" >> "$T/keys"
    # Redis is on this host: the signed broker and the nonce floor's
    # redis-benchmark reach it over its unix socket, as deploy/run-local.sh's
    # broker does (10-15 % less of Redis' CPU per claim than TCP loopback).
    start redis redis-server --bind 127.0.0.1 --port 6379 --unixsocket "$REDIS_SOCK" \
        --unixsocketperm 700 --save '' --appendonly no
    wait_for 10 port_open 6379 || fail_start redis redis
    start broker "$B/jrpc-broker" --zmq "$JRPC_ZMQ" --workers tcp://127.0.0.1:5556 \
        --http 127.0.0.1:8080 --log-level warn
    start broker-signed "$B/jrpc-broker" --zmq "$SIGNED_ZMQ" --workers tcp://127.0.0.1:5566 \
        --http none --keys "$T/keys" --redis "unix://$REDIS_SOCK" --log-level warn
    # One demo worker serves both brokers (the signed one is only loaded by
    # the signed and nonce comparisons), credit 256 as in bench/README.md.
    start worker "$B/jrpc-worker" --connect tcp://127.0.0.1:5556 --connect tcp://127.0.0.1:5566 \
        --credit 256 --log-level warn
    wait_for 15 "$B/jrpc" --url "$JRPC_ZMQ" -t 500 call add '[1,2]' >/dev/null || fail_start jrpc broker
    wait_for 15 "$B/jrpc" --url "$SIGNED_ZMQ" -t 500 -k "$KEY_ID" -s "$SECRET" call add '[1,2]' \
        >/dev/null || fail_start "the signed jrpc broker" broker-signed
}
# MCP (issue 35): jrpc's side is a broker of its own and jrpc-stdio --mcp,
# started with the first MCP row, stateless (no --sessions: any child takes
# any call, so a lost child costs only the calls it held). Two children
# (the cores of the machine the figures were taken on), 32 calls in flight
# each (server-everything answers concurrently). The peers run the same
# server-everything: supergateway --stateful gives each session a child of
# its own, mcp-proxy shares one child among all sessions; each with its
# defaults but for its log (supergateway's info level writes a line per
# message; jrpc runs at warn).
MCP_NM=$here/node_modules
MCP_EVERYTHING=$MCP_NM/@modelcontextprotocol/server-everything/dist/index.js
MCP_JRPC=http://127.0.0.1:8090/mcp
mcp_ready() {  # mcp_ready URL: a ping answered (for jrpc: by a child)
    curl -sS -m 2 -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
        --data-binary '{"jsonrpc":"2.0","id":1,"method":"ping"}' "$1" 2>/dev/null | grep -q '"result"'
}
start_mcp_jrpc() {  # idempotent; start_mcp_jrpc bridge: the bridge again (fresh children)
    if [ -z "${PGID[mcp-broker]:-}" ]; then
        start mcp-broker "$B/jrpc-broker" --zmq tcp://127.0.0.1:5595 --workers tcp://127.0.0.1:5596 \
            --http 127.0.0.1:8090 --log-level warn
    fi
    [ "${1:-}" = bridge ] && stop mcp-bridge
    if [ -z "${PGID[mcp-bridge]:-}" ]; then
        start mcp-bridge "$B/jrpc-stdio" --connect tcp://127.0.0.1:5596 --mcp --procs 2 --inflight 32 \
            --log-level warn -- node "$MCP_EVERYTHING" stdio
    fi
    wait_for 60 mcp_ready "$MCP_JRPC" || fail_start "jrpc (broker + jrpc-stdio --mcp)" mcp-bridge
}
# nginx_conf NAME: writes $T/NAME.conf, one nginx process in the foreground
# with its files in $T/NAME; stdin is the rest of its http block.
nginx_conf() {
    mkdir -p "$T/$1"
    {
        cat <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $T/$1/pid;
error_log $T/$1/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $T/$1/body;
  keepalive_requests 100000000;
  keepalive_timeout 300s;
EOF
        cat
        echo "}"
    } > "$T/$1.conf"
}
start_peer() {
    case $1 in
    nginx)
        nginx_conf nginx <<EOF
  server {
    listen 127.0.0.1:8180;
    location / { default_type application/json; return 200 '{"jsonrpc":"2.0","result":3,"id":1}'; }
  }
EOF
        start nginx nginx -c "$T/nginx.conf"
        wait_for 10 port_open 8180 || fail_start nginx nginx ;;
    jsonrpccpp)
        start jsonrpccpp "$B/jrpc-peer-jsonrpccpp" 8280 "$(nproc)"
        wait_for 10 port_open 8280 || fail_start libjson-rpc-cpp jsonrpccpp ;;
    pool)
        # What a user would put in front of workers instead of jrpc: nginx
        # (one worker process, as above) proxying to two libjson-rpc-cpp
        # servers over kept-alive HTTP/1.1 upstream connections. Their second
        # argument is libmicrohttpd's thread pool size (each thread its own
        # epoll loop over its share of the connections, the calls run on it):
        # nproc/2 each (at least 1), so that the pool has as many server
        # threads as the single jsonrpccpp peer and the machine has cores;
        # more would only add switches on a machine nginx and the client share.
        local threads=$(( $(nproc) / 2 > 0 ? $(nproc) / 2 : 1 ))
        start pool-1 "$B/jrpc-peer-jsonrpccpp" 8281 "$threads"
        start pool-2 "$B/jrpc-peer-jsonrpccpp" 8282 "$threads"
        wait_for 10 port_open 8281 || fail_start "libjson-rpc-cpp (pool, 8281)" pool-1
        wait_for 10 port_open 8282 || fail_start "libjson-rpc-cpp (pool, 8282)" pool-2
        nginx_conf pool <<EOF
  proxy_temp_path $T/pool/proxy;
  upstream jsonrpccpp {
    server 127.0.0.1:8281;
    server 127.0.0.1:8282;
    keepalive 64;
    keepalive_requests 100000000;
  }
  server {
    listen 127.0.0.1:8480;
    location / {
      proxy_pass http://jsonrpccpp;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
EOF
        start pool nginx -c "$T/pool.conf"
        wait_for 10 port_open 8480 || fail_start "nginx (pool)" pool ;;
    jayson)
        start jayson node "$here/jayson_server.js" 8380
        wait_for 10 port_open 8380 || fail_start jayson jayson ;;
    nats)
        start nats-server nats-server -a 127.0.0.1 -p 4222
        wait_for 10 port_open 4222 || fail_start nats-server nats-server
        start nats "$B/jrpc-peer-nats" serve nats://127.0.0.1:4222
        wait_for 10 logged nats serving || fail_start "the NATS responder" nats ;;
    rabbitmq)
        local d=$T/rabbitmq
        mkdir -p "$d/mnesia" "$d/log"
        echo '[].' > "$d/enabled_plugins"
        # epmd in the foreground (ours, stopped by its id), on loopback.
        start epmd epmd -address 127.0.0.1 -port 4369
        wait_for 10 port_open 4369 || fail_start epmd epmd
        start rabbitmq-server env HOME="$d" ERL_EPMD_ADDRESS=127.0.0.1 ERL_EPMD_PORT=4369 \
            RABBITMQ_NODENAME=rabbit@localhost RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
            RABBITMQ_NODE_PORT=5672 RABBITMQ_DIST_PORT=25672 RABBITMQ_MNESIA_BASE="$d/mnesia" \
            RABBITMQ_LOG_BASE="$d/log" RABBITMQ_LOGS=- RABBITMQ_ENABLED_PLUGINS_FILE="$d/enabled_plugins" \
            RABBITMQ_PID_FILE="$d/pid" \
            RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}" \
            /usr/lib/rabbitmq/bin/rabbitmq-server
        wait_for 60 logged rabbitmq-server 'startup complete' || fail_start rabbitmq-server rabbitmq-server
        start rabbitmq "$B/jrpc-peer-rabbitmq" serve 127.0.0.1:5672
        wait_for 10 logged rabbitmq serving || fail_start "the RabbitMQ RPC server" rabbitmq ;;
    echo)
        start echo "$B/jrpc-peer-zmq-echo" serve tcp://127.0.0.1:5575
        wait_for 10 logged echo listening || fail_start "the ZeroMQ echo" echo ;;
    forwarder)
        # Two processes, like jrpc's broker and worker: the worker connects.
        start forwarder "$B/jrpc-peer-zmq-forwarder" proxy tcp://127.0.0.1:5585 tcp://127.0.0.1:5586
        wait_for 10 logged forwarder forwarding || fail_start "the ZeroMQ forwarder" forwarder
        start forwarder-echo "$B/jrpc-peer-zmq-forwarder" serve tcp://127.0.0.1:5586
        wait_for 10 "$B/jrpc-peer-zmq-forwarder" load --url tcp://127.0.0.1:5585 --batch 1 --connections 1 \
            --duration 0.05 --warmup 0 --timeout-ms 500 >/dev/null ||
            fail_start "the forwarder's echo worker" forwarder-echo ;;
    supergateway)
        start_mcp_jrpc
        start supergateway node "$MCP_NM/supergateway/dist/index.js" --stdio "node $MCP_EVERYTHING stdio" \
            --outputTransport streamableHttp --stateful --port 8190 --logLevel none
        wait_for 30 port_open 8190 || fail_start supergateway supergateway ;;
    mcp-proxy)
        start_mcp_jrpc
        start mcp-proxy node "$MCP_NM/mcp-proxy/dist/bin/mcp-proxy.mjs" --host 127.0.0.1 --port 8290 \
            --server stream --endpoint /mcp -- node "$MCP_EVERYTHING" stdio
        # It listens once its one child is up.
        wait_for 60 port_open 8290 || fail_start mcp-proxy mcp-proxy ;;
    signed|self) ;;  # signed: the signed broker and Redis run with jrpc; self: jrpc alone
    esac
}
stop_peer() {
    case $1 in
    nats) stop nats; stop nats-server ;;
    rabbitmq) stop rabbitmq; stop rabbitmq-server; stop epmd ;;
    pool) stop pool; stop pool-1; stop pool-2 ;;
    forwarder) stop forwarder-echo; stop forwarder ;;
    signed|self) ;;
    *) stop "$1" ;;
    esac
}

# ---- the two sides of each comparison -------------------------------------
# side NAME A|B [--rate R]: the command line of one side, one JSON object out.
bench_common=(--duration "$duration" --warmup "$warmup" --json)
side_limit=$(awk -v d="$duration" -v w="$warmup" 'BEGIN { printf "%d", d + w + 60 }')  # s, per side
side() {
    local n=$1 ab=$2; shift 2
    case $n:$ab in
    *http1-nginx:A)      echo "$B/jrpc-bench" --url "$JRPC_HTTP" --batch 1 --connections 32 --ignore-ids ;;
    *http1-nginx:B)      echo "$B/jrpc-bench" --url http://127.0.0.1:8180/ --batch 1 --connections 32 --ignore-ids ;;
    *http1-jsonrpccpp:A) echo "$B/jrpc-bench" --url "$JRPC_HTTP" --batch 1 --connections 32 ;;
    *http1-jsonrpccpp:B) echo "$B/jrpc-bench" --url http://127.0.0.1:8280/ --batch 1 --connections 32 ;;
    *http1-pool:A)       echo "$B/jrpc-bench" --url "$JRPC_HTTP" --batch 1 --connections 32 ;;
    *http1-pool:B)       echo "$B/jrpc-bench" --url http://127.0.0.1:8480/ --batch 1 --connections 32 ;;
    *http100-*:A)        echo "$B/jrpc-bench" --url "$JRPC_HTTP" --batch 100 --connections 4 ;;
    *http100-jsonrpccpp:B) echo "$B/jrpc-bench" --url http://127.0.0.1:8280/ --batch 100 --connections 4 ;;
    *http100-jayson:B)   echo "$B/jrpc-bench" --url http://127.0.0.1:8380/ --batch 100 --connections 4 ;;
    *http100-pool:B)     echo "$B/jrpc-bench" --url http://127.0.0.1:8480/ --batch 100 --connections 4 ;;
    *zmq100-*:A|signed100:B) echo "$B/jrpc-bench" --url "$JRPC_ZMQ" --batch 100 --connections 4 ;;
    signed100-c16:B)     echo "$B/jrpc-bench" --url "$JRPC_ZMQ" --batch 100 --connections 16 ;;
    signed100-c16:A)     echo "$B/jrpc-bench" --url "$SIGNED_ZMQ" --batch 100 --connections 16 \
                              --key-id "$KEY_ID" --secret "$SECRET" ;;
    *zmq100-nats:B)      echo "$B/jrpc-peer-nats" load --url nats://127.0.0.1:4222 --batch 100 --connections 4 ;;
    *zmq100-rabbitmq:B)  echo "$B/jrpc-peer-rabbitmq" load --url 127.0.0.1:5672 --batch 100 --connections 4 ;;
    *zmq100-echo:B)      echo "$B/jrpc-peer-zmq-echo" load --url tcp://127.0.0.1:5575 --batch 100 --connections 4 ;;
    *zmq100-forwarder:B) echo "$B/jrpc-peer-zmq-forwarder" load --url tcp://127.0.0.1:5585 --batch 100 \
                              --connections 4 ;;
    zmq1-http1:A)        echo "$B/jrpc-bench" --url "$JRPC_ZMQ" --batch 1 --connections 4 ;;
    zmq1-http1:B)        echo "$B/jrpc-bench" --url "$JRPC_HTTP" --batch 1 --connections 4 ;;
    zmq1-client-engine:A) echo "$B/jrpc-bench" --url "$JRPC_ZMQ" --batch 1 --connections 4 --zmq-engine native ;;
    zmq1-client-engine:B) echo "$B/jrpc-bench" --url "$JRPC_ZMQ" --batch 1 --connections 4 --zmq-engine libzmq ;;
    signed100:A)         echo "$B/jrpc-bench" --url "$SIGNED_ZMQ" --batch 100 --connections 4 \
                              --key-id "$KEY_ID" --secret "$SECRET" ;;
    nonce-rate-*:A)      echo "$B/jrpc-bench" --url "$SIGNED_ZMQ" --batch 1 --connections 32 \
                              --key-id "$KEY_ID-lim" --secret "$SECRET" ;;
    nonce-*:A)           echo "$B/jrpc-bench" --url "$SIGNED_ZMQ" --batch 1 --connections 32 \
                              --key-id "$KEY_ID" --secret "$SECRET" ;;
    nonce-*:B)           echo redis ;;  # see run_side
    mcp*:A)              mcp_side "$n" "$MCP_JRPC" jrpc "${PGID[mcp-broker]},${PGID[mcp-bridge]}" ;;
    mcp*-supergateway:B) mcp_side "$n" http://127.0.0.1:8190/mcp supergateway "${PGID[supergateway]}" ;;
    mcp*-mcp-proxy:B)    mcp_side "$n" http://127.0.0.1:8290/mcp mcp-proxy "${PGID[mcp-proxy]}" ;;
    esac
}
# mcp_side NAME URL LABEL PIDS: the MCP load of a row; the clients come from
# the name (mcp8-*: 8 jrpc-bench --mcp connections; mcpsdk8-*: 8 SDK
# clients), the kill rows have 8 SDK clients. PIDS: the gateway's process
# tree roots, whose CPU is counted (jrpc: the broker and the bridge).
mcp_side() {
    local n=$1 clients=${1%%-*}
    clients=${clients#mcp}
    local load=(--bench "$B/jrpc-bench") kill=()
    case $clients in
        sdk*) clients=${clients#sdk} load=() ;;
        kill) clients=8 load=() kill=(--kill-child server-everything) ;;
    esac
    echo python3 "$here/mcp_drive.py" --url "$2" --label "$3" --gateway "$4" --clients "$clients" \
        "${load[@]}" "${kill[@]}"
}
# redis_set_nx PIPELINE COUNT: the nonce floor, CSV on stdout. One million
# distinct keys at most, so that Redis' memory stays bounded.
declare -A REDIS_RATE=()
redis_set_nx() {
    timeout "$side_limit" redis-benchmark -s "$REDIS_SOCK" -c 32 -P "$1" -n "$2" -r 1000000 --csv \
        SET 'nonce:__rand_int__' 1 NX EX 300
}
# run_side NAME A|B FILE [--rate R]: runs one side, its JSON into FILE.
run_side() {
    local n=$1 ab=$2 f=$3; shift 3
    local cmd limit=$side_limit
    case $n:$ab in
    mcp*)
        # MCP: up to 32 sessions to set up (for supergateway a child each),
        # SDK timeouts of 5 s at the end. A kill row begins on fresh servers:
        # mcp-proxy never recovers from its child's loss (the row shows it).
        limit=$((side_limit + 120))
        if [[ $n == mcpkill-* ]]; then
            if [ "$ab" = A ]; then
                start_mcp_jrpc bridge
            else
                stop_peer "${n#*-}"
                start_peer "${n#*-}"
            fi
        fi ;;
    esac
    read -r -a cmd <<<"$(side "$n" "$ab")"
    if [ "${cmd[0]}" = redis ]; then
        # redis-benchmark has no duration: a count sized for about --duration
        # by a short probe (once per pipeline depth); it reports its own ops/s.
        local pipe=${n##*-p} count
        if [ -z "${REDIS_RATE[$pipe]:-}" ]; then
            REDIS_RATE[$pipe]=$(redis_set_nx "$pipe" $((pipe > 1 ? 200000 : 20000)) |
                awk -F'"' 'NR == 2 { printf "%d", $4 }')
        fi
        count=$(awk -v d="$duration" -v r="${REDIS_RATE[$pipe]:-0}" \
            'BEGIN { n = d * r; printf "%d", (n < 10000 ? 10000 : n) }')
        redis_set_nx "$pipe" "$count" > "$f.csv" 2>"$f.err" || true
        awk -F'"' -v p="$pipe" 'NR == 2 { printf "{\"peer\":\"redis-benchmark\",\"pipeline\":%d,\"command\":\"%s\",\"batches_per_s\":%s,\"calls_per_s\":%s,\"latency_us\":{\"batch\":{\"p50\":%d,\"p99\":%d}}}\n", p, $2, $4, $4, $10 * 1000, $14 * 1000 }' \
            "$f.csv" > "$f"
        rm -f "$f.csv"
    else
        timeout "$limit" "${cmd[@]}" "${bench_common[@]}" "$@" > "$f" 2>"$f.err" || true
    fi
    [ -s "$f" ] || { echo "run.sh: $n side $ab produced nothing: $(tail -n 3 "$f.err")" >&2; }
    [ -s "$f.err" ] || rm -f "$f.err"
}
batches_per_s() { grep -o '"batches_per_s":[0-9.]*' "$1" | cut -d: -f2; }

compare() {  # compare NAME KIND
    local n=$1 kind=$2 r rate=
    local d=$out/runs/$n
    mkdir -p "$d"
    if [ "$kind" = open ]; then
        # The offered load: half the lower of the two maxima, measured now
        # (closed loop), so that both sides are within their capacity.
        run_side "$n" A "$d/max.a.json"
        run_side "$n" B "$d/max.b.json"
        rate=$(awk -v a="$(batches_per_s "$d/max.a.json")" -v b="$(batches_per_s "$d/max.b.json")" \
            'BEGIN { m = (a < b ? a : b) / 2; printf "%.1f", (m > 1 ? m : 1) }')
        echo "  $n: offered load $rate batches/s (half the lower maximum)" >&2
    fi
    local plot=()
    for r in $(seq 1 "$rounds"); do
        # jrpc's percentile curve of the last open-loop round, for RESULTS.md.
        [ "$kind" = open ] && [ "$r" = "$rounds" ] && plot=(--plot "$out/plots/$n.png")
        run_side "$n" A "$d/r$r.a.json" ${rate:+--rate "$rate"} "${plot[@]}"
        run_side "$n" B "$d/r$r.b.json" ${rate:+--rate "$rate"}
    done
}

# ---- run ------------------------------------------------------------------
: > "$out/comparisons.txt"
[ -n "$mcp_only" ] || start_jrpc  # the MCP rows start their own (start_mcp_jrpc)
current=
for c in "${selected[@]}"; do
    IFS='|' read -r name peer kind threshold goal <<<"$c"
    if [ "$peer" != "$current" ]; then
        [ -n "$current" ] && stop_peer "$current"
        echo "starting $peer" >&2
        start_peer "$peer"
        current=$peer
    fi
    echo "comparing $name ($rounds rounds)" >&2
    compare "$name" "$kind"
    printf '%s\n' "$c" >> "$out/comparisons.txt"
done
[ -n "$current" ] && stop_peer "$current"
for n in "${!PGID[@]}"; do stop "$n"; done
python3 "$here/summarize.py" "$out"
# The raw rounds, packed: what a reader needs to check a figure stays
# readable (summary.md, the <comparison>.json rows, plots/), the rest is one
# file per run (summarize.py reads it from there).
tar -C "$out" -cJf "$out/raw.tar.xz" runs && rm -rf "$out/runs"
