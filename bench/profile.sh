#!/usr/bin/env bash
# Broker hot path under callgrind: instructions (Ir) per call, and the top
# functions by Ir share. Instruction counts repeat from run to run, unlike
# wall-clock time on a shared machine.
#   [IDLE=N] [METHOD=M] [PARAMS=JSON] [WORKER_OPTS=...] [PROF_CMAKE=...] bash bench/profile.sh zmq|http|ws|zmq-signed|http-signed [BATCH] [SECONDS] [TOP]
# PROF_CMAKE: more cmake options for build-prof (e.g. -DJRPC_LTO=OFF); without it the
# defaults are set again (LTO on), so a setting does not outlive its run.
# IDLE=N first opens N used, idle HTTP keep-alive connections (jrpc-bench-idle)
# and holds them through the run: what they cost the active calls, in Ir.
# zmq: batches over ZeroMQ (default batch 100); http: one POST per batch
# (default batch 1); ws: one text message per batch on a kept WebSocket
# (default batch 100; driven by jrpc-bench-ws-load --phase ws, `add` [1,2]
# only, jrpc-bench's body: METHOD and PARAMS do not apply), so `ws 100` and
# `http 100` compare what a message and a request cost the broker (issue
# 35). Starts a Release broker (with -g) under valgrind and one
# demo worker on 127.0.0.1, drives it with jrpc-bench (2 connections, closed
# loop), stops it with SIGTERM; prints Ir per call (the counters are zeroed
# when the load starts and dumped when it ends: start-up and shutdown are not
# counted) and the TOP (default 25) functions by self cost. METHOD (default:
# jrpc-bench's, add [1,2]: a msgpack method) is the method called, e.g. echo,
# which the demo worker serves as JSON pass-through (params and result as
# the client's text: no transcoding, PROTOCOL.md 2.1 "json");
# PARAMS its params (default [1,2]); WORKER_OPTS go to the worker (--json off: echo in msgpack, for comparison). Stops what it started by PID. Output kept in
# build-prof/callgrind.out.MODE.1 (callgrind_annotate --tree=caller to dig;
# with IDLE the idle connections are opened before the counters are zeroed;
# a function on a thread's stack when they are zeroed, such as a libzmq I/O
# thread's loop, lists its inclusive cost, not its own).
# zmq-signed, http-signed (issue 35): the same, the broker with a key file
# (--keys) and the replay guard on a private redis-server (bench/signed_lib.sh:
# a free port, nothing kept, stopped on exit), jrpc-bench signing every body
# (HMAC, nonce, timestamp: docs/SIGNING.md). Only the broker is counted;
# compare with the unsigned mode at the same BATCH (the goal: <= 1.10x).
set -eu
cd "$(dirname "$0")/.."
mode=${1:?zmq or http} 
transport=$mode
signed=()   # the broker's --keys and --redis, for jrpc-bench its key
case $mode in
    zmq-signed | http-signed)
        transport=${mode%-signed}
        source bench/signed_lib.sh   # T, KEY, SECRET, sign, start_redis; its EXIT trap is replaced below
        for _ in 1 2 3 4 5; do   # a port another process holds: the next one
            rport=$((10000 + RANDOM % 22000))
            start_redis $rport && break
        done
        kill -0 $redis_pid 2>/dev/null || { cat "$T/redis.log" >&2; exit 1; }
        signed=(--keys "$T/keys" --redis redis://127.0.0.1:$rport)
        ;;
esac
case $transport in zmq|ws) batch=${2:-100} ;; http) batch=${2:-1} ;; *) echo "zmq, http or ws" >&2; exit 2 ;; esac
secs=${3:-10} top=${4:-25}
source bench/build_rel.sh
# shellcheck disable=SC2086  # PROF_CMAKE is a list of options
build_rel build-prof -DCMAKE_C_FLAGS=-g -DJRPC_LTO=ON ${PROF_CMAKE:-} jrpc-broker jrpc-worker jrpc-bench \
    jrpc-bench-idle jrpc-bench-ws-load
idle=${IDLE:-0}
[ "$idle" -gt 0 ] && ulimit -n "$(ulimit -Hn)"
B=build-prof/bin
port=$((10000 + RANDOM % 22000))   # below the ephemeral range (32768-): no client socket holds it
out=build-prof/callgrind.out.$mode
rm -f "$out"*
valgrind --tool=callgrind --callgrind-out-file="$out" \
    $B/jrpc-broker --zmq tcp://127.0.0.1:$port --workers tcp://127.0.0.1:$((port + 1)) \
    --http 127.0.0.1:$((port + 2)) --max-conns $((idle + 100)) --idle-timeout-ms 3600000 \
    "${signed[@]}" --log-level warn 2>build-prof/valgrind.$mode.log & bp=$!
$B/jrpc-worker --connect tcp://127.0.0.1:$((port + 1)) --credit 256 --log-level warn ${WORKER_OPTS:-} & wp=$!
hp=
trap 'kill $bp $wp $hp 2>/dev/null' EXIT
[ ${#signed[@]} -gt 0 ] &&
    trap 'kill $bp $wp $hp "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT
url=tcp://127.0.0.1:$port
[ "$transport" = zmq ] || url=http://127.0.0.1:$((port + 2))   # ws: HTTP for the readiness check
# Ready when a short run gets its answers (valgrind starts slowly on a busy
# machine: no fixed sleep); the broker gone (a port in use) or 60 s: stop.
ready=
for _ in $(seq 120); do
    kill -0 $bp 2>/dev/null || break
    timeout 10 $B/jrpc-bench --url "$url" --batch 1 --connections 1 --duration 0.2 --warmup 0 \
        ${signed[@]:+"${sign[@]}"} --json 2>/dev/null |
        grep -q '"calls":[1-9].*"errors":{},"transport_failures":0,' && { ready=1; break; }
    sleep 0.5
done
[ -n "$ready" ] || { tail -n 3 build-prof/valgrind.$mode.log >&2; exit 1; }
if [ "$idle" -gt 0 ]; then
    $B/jrpc-bench-idle 127.0.0.1:$((port + 2)) "$idle" 100000 >build-prof/idle.out & hp=$!
    until grep -q '^holding' build-prof/idle.out; do sleep 0.5; done
    head -n 1 build-prof/idle.out
fi
callgrind_control -z $bp >/dev/null 2>&1   # count the run only: not start-up, not the idle connections' opening
if [ "$transport" = ws ]; then
    calls=$($B/jrpc-bench-ws-load --port $((port + 2)) --phase ws --batch "$batch" --connections 2 --duration "$secs" |
            sed -n 's/.* calls_total=\([0-9]*\).*/\1/p')
else
calls=$($B/jrpc-bench --url "$url" ${METHOD:+--method "$METHOD"} ${PARAMS:+--params "$PARAMS"} --batch "$batch" --connections 2 --duration "$secs" --warmup 0 ${signed[@]:+"${sign[@]}"} --json |
        sed -n 's/.*"calls":\([0-9]*\).*/\1/p')
fi
callgrind_control -d $bp >/dev/null 2>&1   # a dump now, before shutting down costs anything
dump=$out.1
kill -TERM $bp
wait $bp || true
total=$(callgrind_annotate "$dump" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
echo "mode=$mode method=${METHOD:-add} params_bytes=$(printf %s "${PARAMS:-}" | wc -c) worker_opts=${WORKER_OPTS:--} batch=$batch idle=$idle calls=$calls Ir=$total Ir_per_call=$((total / calls))"
if [ ${#signed[@]} -gt 0 ]; then   # the signature check, the body's SHA-256 in it, apart
    crypto=$(callgrind_annotate --threshold=100 --auto=no "$dump" 2>/dev/null |
             awk '/libcrypto\.so/ { x = $1; gsub(",", "", x); s += x } END { print s + 0 }')
    echo "signed: libcrypto_Ir_per_call=$((crypto / calls)) Ir_per_call_without_libcrypto=$(((total - crypto) / calls))" \
         "(libcrypto: the body's SHA-256 and the HMAC; valgrind hides SHA-NI, so OpenSSL hashes with AVX2 here)"
fi
callgrind_annotate --threshold=100 "$dump" 2>/dev/null |
    awk -v t="$total" -v top="$top" '/file:function/ { on = 1; next }
        on && NF >= 2 && n < top && !/:(main|clone3?|start_thread) |ld-linux|below main|libc_start|uv_run / { x = $1; gsub(",", "", x); if (x + 0 == 0) next;
            $1 = ""; sub(/^ +\([^)]*\) +/, ""); printf "%5.1f%%  %s\n", 100 * x / t, $0; n++ }'
