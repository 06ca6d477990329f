#!/usr/bin/env bash
# deploy/run-local.sh as a user runs it, on ports chosen here, with the
# programs of this build and nothing installed (--bin, --no-install): the
# banner comes once the broker and both demo workers are ready; the demo's
# spin calls run on both workers; and SIGINT to the script's whole process
# group (what Ctrl-C in a terminal does) while a 1.5 s call is in flight
# drains: the call is answered, the script and every process it started
# exit 0, and none is left. Open mode, then signed (with its redis-server).
source "$JRPC_E2E_LIB"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

# run MODE...: one run of the script; MODE is --open or nothing (signed).
run() {
    local tag=$1; shift
    local base log zp script try
    log=$E2E_TMP/run-local-$tag.log
    # Five ports picked at random: another test may hold one (the script
    # then says "not ready ... a port taken?" and stops): new ones, again.
    for try in 1 2 3 4 5; do
        base=$(e2e_pick_port); zp=$base
        # Job control on around the launch: the script gets a process group
        # of its own (as a terminal's foreground job does) and SIGINT is not
        # ignored in it (a background job without job control would ignore it).
        set -m
        bash "$ROOT/deploy/run-local.sh" "$@" --no-install --bin "$JRPC_BIN" --dir "$E2E_TMP/dev-$tag" \
            --zmq-port "$zp" --workers-port $((base + 1)) --http-port $((base + 2)) \
            --admin-port $((base + 3)) --redis-port $((base + 4)) >"$log" 2>&1 &
        script=$!
        set +m
        E2E_PIDS+=("$script")
        e2e_wait_for "grep -q -e '^jrpc: ready' -e '^jrpc: not ready' '$log'" 60
        grep -q '^jrpc: not ready' "$log" && grep -q -e 'event=bind_failed' -e 'Address already in use' "$log" ||
            break
        wait "$script"
        cp "$log" "$log.try$try"
        echo "($tag: a port of $base-$((base + 4)) was taken, another try)"
    done
    check "$tag: the script leads its own process group" "$script" "$(ps -o pgid= -p "$script" | tr -d ' ')"
    e2e_wait_for "grep -q '^jrpc: ready' '$log'" 60
    check "$tag: banner after the readiness check" 1 "$(grep -c '^jrpc: ready: .* with 2 workers' "$log")"
    check "$tag: both workers connected before the banner" 2 \
        "$(sed '/^jrpc: ready/q' "$log" | grep -c 'event=worker_ready')"
    # Signed: the broker's one Redis connection is the unix socket's.
    [ "$tag" = signed ] && check "$tag: the broker reaches Redis over its unix socket" \
        "addr=$E2E_TMP/dev-$tag/redis.sock:0" \
        "$(redis-cli -p $((base + 4)) client list | grep -v 'cmd=client' | grep -o 'addr=[^ ]*' | head -1)"
    # Everything the script started, to check afterwards that none is left.
    local kids
    kids=$(pgrep -P "$script" | tr '\n' ' ')
    for k in $kids; do E2E_PIDS+=("$k"); done
    local key=()
    [ "$tag" = signed ] && key=(--key-file "$E2E_TMP/dev-$tag/keys")

    local spins
    spins=$(printf '[%s,%s]' '{"jsonrpc":"2.0","method":"spin","params":{"ms":200},"id":1}' \
        '{"jsonrpc":"2.0","method":"spin","params":{"ms":200},"id":2}' |
        "$JRPC" -u "tcp://127.0.0.1:$zp" "${key[@]}" send)
    check "$tag: two spins answered" 2 "$(grep -o '"result":{"ms":200,"pid":[0-9]*}' <<<"$spins" | wc -l)"

    "$JRPC" -u "tcp://127.0.0.1:$zp" "${key[@]}" -t 20000 call sleep '{"ms":1500}' \
        >"$E2E_TMP/call-$tag.out" 2>&1 &
    local client=$!
    sleep 0.5
    kill -INT -- -"$script"
    wait "$client"
    check "$tag: the call in flight is answered" "0 1500" "$? $(cat "$E2E_TMP/call-$tag.out")"
    e2e_wait_for "! kill -0 $script 2>/dev/null" 30
    wait "$script"
    check "$tag: the script exits 0" 0 $?
    local st='broker 0, demo-1 0, demo-2 0'
    [ "$tag" = signed ] && st="$st, redis 0"
    check "$tag: every process exited 0" "jrpc: stopped; exit status: $st" \
        "$(grep '^jrpc: stopped' "$log")"
    check "$tag: no second signal reached the broker" 0 "$(grep -c 'second_signal' "$log")"
    local left=
    for k in $kids; do kill -0 "$k" 2>/dev/null && left="$left $k"; done
    check "$tag: no process of the script is left" "" "$left$(pgrep -g "$script")"
}
run open --open
run signed
e2e_finish
