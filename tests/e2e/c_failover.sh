#!/usr/bin/env bash
# Calls that survive a broker's death (issue 34, section 3), with the C
# client through the real `jrpc` CLI: three brokers sharing one Redis, each
# with its own worker (W1 serves B1 only, W2 B2, W3 B3; the Python worker of
# tests/e2e/py_failover_worker.py, whose `rec` writes every run down at the
# worker; tests/e2e/failover_lib.sh), every `jrpc` given the three URLs (each process's list rotated,
# so that each broker is the first of a third of the calls), signed.
#
#   B1 killed with SIGKILL under load (8 loops of `jrpc call rec`, 240
#   calls, W1 200 ms a call, the others 40 ms):
#     --retry safe, over HTTP, then over ZeroMQ: every call is answered
#     exactly once with its own result, or -- only those whose key B1 still
#     held: B1 may have run them -- exits 3 "may or may not have run" (at
#     most B1's calls in flight, 8); nothing runs twice, every call answered
#     ran exactly once.
#     no --retry: the calls in flight on B1 exit 3 saying the call may or
#     may not have run (at least one), every other call is answered once
#     (B1 refused: the next broker), nothing runs twice.
#   A connection cut after B1 ran a body and kept its reply (a proxy in
#   front of B1 drops the answer; failover_cut_proxy.py): with --retry safe
#   the body goes again to B2 under the same key, signed anew, and is
#   answered B1's kept reply; it ran once. Without: exit 3; it ran once.
#   With --retryable (a read) it is sent again without a key and runs twice.
#   dns+tcp://localhost:PORT reaches a broker.
source "$JRPC_E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/failover_lib.sh"
CALLS=240 LOOPS=8 STARTED=40
# W1 takes 200 ms more a call: B1 holds calls whenever it is killed.
W1_EXTRA_MS=200

load_loop() { # J URL1 URL2 URL3 ARGS...: calls J, J+LOOPS, ... ; one line per call in res.J
    local j=$1 u=("$2" "$3" "$4") i r out rc
    shift 4
    for ((i = j; i < CALLS; i += LOOPS)); do
        r=$((i % 3))
        out=$(timeout 30 "$JRPC" --url "${u[r]}" --url "${u[(r + 1) % 3]}" --url "${u[(r + 2) % 3]}" \
            --key-file "$E2E_TMP/keys" -t 3000 "$@" call rec "{\"token\":\"t$i\",\"ms\":40}" \
            2>"$E2E_TMP/err.$j")
        rc=$?
        echo "t$i $rc $out | $(head -c 400 "$E2E_TMP/err.$j" | tr '\n' ' ')" >>"$E2E_TMP/res.$j"
    done
}

run_round() { # zmq|http [ARGS...]: one round, B1 killed under load; results in $E2E_TMP/res
    local tr=$1 n j
    shift
    : > "$E2E_TMP/runs"; rm -f "$E2E_TMP"/res.*
    for n in 1 2 3; do start_b $n; start_w $n; done
    for n in 1 2 3; do e2e_wait_for "ready $n" 15 || { echo "W$n not ready"; exit 1; }; done
    local u1="http://127.0.0.1:${HTTPP[1]}" u2="http://127.0.0.1:${HTTPP[2]}" u3="http://127.0.0.1:${HTTPP[3]}"
    [ "$tr" = zmq ] && { u1=${ZEP[1]}; u2=${ZEP[2]}; u3=${ZEP[3]}; }
    local loads=()
    for ((j = 0; j < LOOPS; j++)); do
        : > "$E2E_TMP/res.$j"
        load_loop "$j" "$u1" "$u2" "$u3" "$@" &
        loads+=("$!")
    done
    e2e_wait_for "[ \$(cat '$E2E_TMP'/res.* | wc -l) -ge $STARTED ]" 60 || echo "the load did not start"
    # Killed while it holds calls (a third of the bodies go to it first, and
    # its worker is slow; its /metrics says when a call is at its worker).
    kill_b1
    for j in "${loads[@]}"; do wait "$j"; done
    cat "$E2E_TMP"/res.* > "$E2E_TMP/res"
}
# Counts over the results (TOKEN EXIT OUTPUT | STDERR) and the runs (TOKEN WORKER).
answered_once() { awk '$2 == 0 && $3 == "\"" $1 "\""' "$E2E_TMP/res" | wc -l; }
exited() { awk -v c="$1" '$2 == c' "$E2E_TMP/res" | wc -l; }
ran_twice() { awk '{ n[$1]++ } END { k = 0; for (t in n) if (n[t] > 1) k++; print k }' "$E2E_TMP/runs"; }
mhr_said() { # the exit-3 lines all say "may or may not have run"
    [ "$(awk '$2 == 3' "$E2E_TMP/res" | grep -vc 'may or may not have run')" = 0 ] && echo yes
}
answered_ran_once() { # every call answered ran exactly once at the workers
    awk 'NR == FNR { n[$1]++; next } $2 == 0 && n[$1] != 1 { bad++ } END { print bad + 0 }' \
        "$E2E_TMP/runs" "$E2E_TMP/res"
}

check "--help names --retry, repeated --url and dns+tcp://" 3 \
    "$("$JRPC" --help | grep -c -e '--retry POLICY' -e 'Repeat --url' -e 'dns+tcp://NAME:PORT')"

# ---- a connection cut after B1 kept the reply -----------------------------------
# A proxy in front of B1 (failover_cut_proxy.py) forwards the body, reads
# B1's whole answer and closes the client's connection without it.
: > "$E2E_TMP/runs"
for n in 1 2; do start_b $n; start_w $n; done
for n in 1 2; do e2e_wait_for "ready $n" 15 || { echo "W$n not ready"; exit 1; }; done
"$JRPC_PY" "$HERE/failover_cut_proxy.py" "http://127.0.0.1:${HTTPP[1]}/rpc" >"$E2E_TMP/proxy.url" &
E2E_PIDS+=("$!")
e2e_wait_for "[ -s '$E2E_TMP/proxy.url' ]" 15 || echo "the proxy did not start"
PROXY=$(cat "$E2E_TMP/proxy.url")
cut() { # TOKEN ARGS...: prints "EXIT OUTPUT", stderr in cut.err
    local t=$1 out
    shift
    out=$(timeout 30 "$JRPC" --url "$PROXY" --url "http://127.0.0.1:${HTTPP[2]}/rpc" \
        --key-file "$E2E_TMP/keys" -t 3000 "$@" call rec "{\"token\":\"$t\"}" 2>"$E2E_TMP/cut.err")
    echo "$? $out"
}
runs_of() { awk -v t="$1" '$1 == t { printf "%s ", $2 }' "$E2E_TMP/runs"; }
check "cut after B1 kept the reply, --retry safe: answered (B2 gives B1's kept reply)" \
    '0 "cut-safe"' "$(cut cut-safe --retry safe)"
check "... and the call ran once, at B1's worker" "w1 " "$(runs_of cut-safe)"
check "cut after B1 ran it, no --retry: exit 3" '3 ' "$(cut cut-plain)"
check "... saying the call may or may not have run" 1 "$(grep -c 'may or may not have run' "$E2E_TMP/cut.err")"
check "... and it did run, once, at B1's worker" "w1 " "$(runs_of cut-plain)"
check "cut, --retryable (a read): sent again without a key, answered by B2" '0 "cut-read"' \
    "$(cut cut-read --retryable)"
check "... so it ran twice: what --retryable allows" "w1 w2 " "$(runs_of cut-read)"
stop_all

# ---- --retry safe, over HTTP, then over ZeroMQ --------------------------------
safe_round() { # TRANSPORT
    local T="safe $1" mhr
    run_round "$1" --retry safe
    mhr=$(exited 3)
    check "$T: every call answered once with its result, or exit 3 ($mhr), nothing else" \
        "$CALLS 0" "$(( $(answered_once) + mhr )) $(awk '$2 != 0 && $2 != 3' "$E2E_TMP/res" | wc -l)"
    awk '$2 != 0 && $2 != 3' "$E2E_TMP/res" | head -5
    check "$T: ... exit 3 only for B1's calls in flight (at most $LOOPS)" yes \
        "$([ "$mhr" -le "$LOOPS" ] && echo yes)"
    check "$T: ... saying the call may or may not have run" yes "$(mhr_said)"
    check "$T: B1's worker had run calls before the kill" yes \
        "$(grep -q ' w1$' "$E2E_TMP/runs" && echo yes)"
    check "$T: nothing ran twice (counted at the workers)" 0 "$(ran_twice)"
    check "$T: every call answered ran exactly once" 0 "$(answered_ran_once)"
    [ -n "${E2E_SHOW:-}" ] && awk '$2 == 3' "$E2E_TMP/res" && grep -h -- '-32008\|idem' "$E2E_TMP"/b[23].log | head -5
    stop_all
}
safe_round http
safe_round zmq
redis-cli -p "$RPORT" flushall >/dev/null

# ---- no --retry --------------------------------------------------------------
run_round http
mhr=$(exited 3)
check "no retry: the calls in flight on B1 exit 3 ($mhr)" yes \
    "$([ "$mhr" -ge 1 ] && [ "$mhr" -le "$LOOPS" ] && echo yes)"
check "... saying the call may or may not have run" yes "$(mhr_said)"
check "no retry: every other call answered once with its result, no other failure" \
    "$((CALLS - mhr)) 0" "$(answered_once) $(awk '$2 != 0 && $2 != 3' "$E2E_TMP/res" | wc -l)"
check "no retry: nothing ran twice" 0 "$(ran_twice)"

# ---- dns+tcp:// ---------------------------------------------------------------
# B2 is still up: a name that resolves to its address.
zport=${ZEP[2]##*:}
check "dns+tcp://localhost:PORT reaches the broker" '"dns1"' \
    "$("$JRPC" --url "dns+tcp://localhost:$zport" --key-file "$E2E_TMP/keys" -t 3000 \
        call rec '{"token":"dns1"}' 2>&1)"
[ -n "${E2E_SHOW:-}" ] && awk '$2 == 3' "$E2E_TMP/res"
e2e_finish
