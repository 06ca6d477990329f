#!/usr/bin/env bash
# Many brokers found by name (issue 16), on hosts made of network namespaces
# joined by a bridge in a namespace of its own (as many_hosts.sh does):
# DNS (dnsmasq, serving the name brokers.test from a hosts file it re-reads
# on SIGHUP), B1..B4 (brokers), W1 and W2 (a demo worker each, connected with
# --connect dns+tcp://brokers.test:5556 and nothing else; W2 also runs the
# Python SDK's example worker the same way), C (the clients).
# It shows:
#   (a) the workers (C and Python) find the three brokers of the name and
#       serve each;
#   (b) under load spread over B1..B3 (many_brokers_load.py: HTTP batches,
#       every id accounted for), B1 is killed (SIGKILL) and B4 takes its
#       place in the name: every id is answered exactly once except those
#       of bodies in flight on B1, which get a connection error (counted
#       apart, and only on B1); errors only -32003/-32004; the workers drop
#       B1 and B4 serves calls within --resolve-ms + 3 s of being resolvable;
#   (c) a rolling restart of B2, B3 and B4 (SIGTERM; /readyz 503 while
#       --drain-delay-ms still serves; the broker exits 0; started again at
#       the same address) under load loses no call: with the client rule
#       "send again only on a connection refused, or closed before any byte
#       of the answer", every id is answered exactly once, with its result.
# Why dnsmasq and not /etc/hosts in a mount namespace: the workers then
# resolve through the real DNS path (resolv.conf, A and AAAA queries over
# UDP, TTL 0), as a Kubernetes headless Service is resolved, and one SIGHUP
# changes the answer for every host at once.
# Needs root, iproute2 (`ip netns`) and dnsmasq (deploy/deps.sh installs
# dnsmasq-base); without root or `ip netns` it exits 77 (skipped). Creates
# and removes its namespaces itself (unique names per run, tests/e2e/netns.sh);
# bounded in time (MANY_BROKERS_TIMEOUT_S, default 120 s, for the whole script).
set -u
: "${JRPC_BIN:?set JRPC_BIN to the build/bin directory}"
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/netns.sh"
netns_start many_brokers "${MANY_BROKERS_TIMEOUT_S:-120}" dnsmasq curl python3 getent
/usr/bin/python3 -c 'import zmq, msgpack' 2>/dev/null ||
    { echo "many_brokers: python3-zmq and python3-msgpack are not installed (deploy/deps.sh)"; exit 1; }
PYSDK=$(cd "$HERE/../../worker/python" && pwd)

NET="10.$((RANDOM % 200 + 20)).$((RANDOM % 250))"   # a /24 that exists only inside our namespaces
declare -A IP=([dns]=$NET.2 [b1]=$NET.21 [b2]=$NET.22 [b3]=$NET.23 [b4]=$NET.24
               [w1]=$NET.31 [w2]=$NET.32 [c]=$NET.40)
NAME=brokers.test
RESOLVE_MS=1000
ms_now() { echo $(( $(date +%s%N) / 1000000 )); }
# Every process sees the test's resolv.conf (the DNS host) through a bind
# mount in the mount namespace `ip netns exec` makes for it (netns.sh).
NETNS_RESOLV=$TMP/resolv.conf
printf 'nameserver %s\noptions timeout:1 attempts:2\n' "${IP[dns]}" > "$NETNS_RESOLV"
netns_network dns b1 b2 b3 b4 w1 w2 c
check "C has no route outside the test network" 1 \
    "$(run_on c ip route get 1.1.1.1 >/dev/null 2>&1 && echo 0 || echo 1)"

# ---- DNS: the name's A records in a hosts file, re-read on SIGHUP ---------
set_name() { # HOST...: the brokers the name resolves to
    local h
    : > "$TMP/hosts.new"
    for h in "$@"; do printf '%s %s\n' "${IP[$h]}" "$NAME" >> "$TMP/hosts.new"; done
    mv "$TMP/hosts.new" "$TMP/hosts"
    [ -n "${DNS_PID:-}" ] && kill -HUP "$DNS_PID"
}
resolves_to() { # the name's addresses as C sees them, sorted, one line
    run_on c getent ahostsv4 "$NAME" 2>/dev/null | awk '{ print $1 }' | sort -u | paste -sd' '
}
ips_of() { local h; for h in "$@"; do echo "${IP[$h]}"; done | sort | paste -sd' '; }
set_name b1 b2 b3
# --user root: the hosts file lives in the test's private directory.
LOG=dns on dns dnsmasq --keep-in-foreground --user=root --no-resolv --no-hosts \
    --addn-hosts="$TMP/hosts" --listen-address="${IP[dns]}" --bind-interfaces --port=53 \
    --local-ttl=0 --log-facility=- --pid-file=
DNS_PID=$LAST_PID
wait_for "[ \"\$(resolves_to)\" = \"$(ips_of b1 b2 b3)\" ]" 10
check "(a) $NAME resolves to B1 B2 B3" "$(ips_of b1 b2 b3)" "$(resolves_to)"

# ---- brokers ----------------------------------------------------------------
start_broker() { # HOST
    LOG=$1 on "$1" "$JRPC_BIN/jrpc-broker" --zmq "tcp://${IP[$1]}:5555" \
        --workers "tcp://${IP[$1]}:5556" --http "${IP[$1]}:8080" --admin "${IP[$1]}:9090" \
        --heartbeat-ms 200 --liveness 3 --timeout-ms 8000 --drain-delay-ms 1000
    eval "PID_$1=\$LAST_PID"
}
listening() { [ "$(grep -c 'event=listening' "$TMP/$1.log" 2>/dev/null)" -ge "${2:-3}" ]; }
# The last workers=N a broker logged.
workers_of() {
    grep -o 'event=worker_[a-z]* .*workers=[0-9]*' "$TMP/$1.log" 2>/dev/null |
        tail -n 1 | sed 's/.*workers=//'
}
for b in b1 b2 b3; do start_broker "$b"; done
for b in b1 b2 b3; do
    wait_for "listening $b" 10 || { echo "broker $b did not start"; FAIL=1; exit 1; }
done

# ---- (a) workers on W1 and W2 find all three by name -------------------------
WORKER_PIDS=()
for w in w1 w2; do
    LOG="$w-worker" on "$w" "$JRPC_BIN/jrpc-worker" --connect "dns+tcp://$NAME:5556" \
        --resolve-ms "$RESOLVE_MS" --heartbeat-ms 200 --name "$w"
    WORKER_PIDS+=("$LAST_PID")
done
LOG=w2-py on w2 env PYTHONPATH="$PYSDK" /usr/bin/python3 -m jrpc.worker \
    --connect "dns+tcp://$NAME:5556" --resolve-ms "$RESOLVE_MS" --heartbeat-ms 200 --name w2-py \
    "$PYSDK/examples/example_worker.py"
WORKER_PIDS+=("$LAST_PID")
NW=3   # workers each broker should see: two C, one Python
all_have() { local b; for b in "$@"; do [ "$(workers_of "$b")" = $NW ] || return 1; done; }
wait_for "all_have b1 b2 b3" 15
check "(a) B1, B2 and B3 each see the three workers" "$NW $NW $NW" \
    "$(workers_of b1) $(workers_of b2) $(workers_of b3)"
call() { # HOST: add [40,2] through that broker's HTTP front, from C
    run_on c curl -s -m 5 -H 'Content-Type: application/json' \
        --data '{"jsonrpc":"2.0","method":"add","params":[40,2],"id":1}' "http://${IP[$1]}:8080/rpc"
}
py_call() { # HOST: py.mul [6,7] through that broker: only the Python worker serves it
    run_on c curl -s -m 5 -H 'Content-Type: application/json' \
        --data '{"jsonrpc":"2.0","method":"py.mul","params":[6,7],"id":2}' "http://${IP[$1]}:8080/rpc"
}
for b in b1 b2 b3; do
    check "(a) $b answers through the C workers" '{"jsonrpc":"2.0","result":42,"id":1}' "$(call "$b")"
    check "(a) $b answers through the Python worker" '{"jsonrpc":"2.0","result":42,"id":2}' \
        "$(py_call "$b")"
done

urls() { local h out=; for h in "$@"; do out+="http://${IP[$h]}:8080,"; done; echo "${out%,}"; }
load() { # PHASE [--retry-closed] BROKERS...: starts the load; sets LOAD_PID
    local phase=$1; shift
    local retry=
    [ "$1" = --retry-closed ] && { retry=$1; shift; }
    rm -f "$TMP/stop-$phase"
    LOG="load-$phase" on c python3 "$HERE/many_brokers_load.py" --urls "$(urls "$@")" \
        --threads 6 --batch 10 --sleep-share 0.2 $retry --until-file "$TMP/stop-$phase" \
        --max-s 60 --out "$TMP/load-$phase.json"
    LOAD_PID=$LAST_PID
}
field() { # PHASE EXPR: a field of the load's summary
    python3 -c 'import json, sys; s = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' \
        "$TMP/load-$1.json" "$2"
}

# ---- (b) B1 killed, B4 added to the name, under load ------------------------
load kill b1 b2 b3
sleep 3
echo "many_brokers: killing B1 (SIGKILL), starting B4"
kill -9 "$PID_b1"
wait "$PID_b1" 2>/dev/null
start_broker b4
wait_for "listening b4" 10 || { echo "broker b4 did not start"; FAIL=1; exit 1; }
set_name b2 b3 b4
t_resolvable=$(ms_now)
wait_for "[ \"\$(resolves_to)\" = \"$(ips_of b2 b3 b4)\" ]" 5
check "(b) $NAME resolves to B2 B3 B4" "$(ips_of b2 b3 b4)" "$(resolves_to)"
# B4 serves once both workers found it: a call through it gets its result.
serves_b4() { [ "$(workers_of b4)" = $NW ] && [ "$(call b4)" = '{"jsonrpc":"2.0","result":42,"id":1}' ]; }
BOUND_MS=$((RESOLVE_MS + 3000))
wait_for serves_b4 $((BOUND_MS / 1000 + 5))
took=$(( $(ms_now) - t_resolvable ))
echo "many_brokers: B4 served through all workers ${took} ms after it became resolvable"
check "(b) B4 has all three workers and answers, within resolve-ms + 3 s (${BOUND_MS} ms)" 1 \
    "$([ "$(workers_of b4)" = $NW ] && [ "$took" -le "$BOUND_MS" ] && echo 1 || echo 0)"
check "(b) B4 answers through the Python worker" '{"jsonrpc":"2.0","result":42,"id":2}' "$(py_call b4)"
dropped_b1() { cat "$TMP"/w*-worker.log "$TMP/w2-py.log" | grep -c "event=broker_dropped endpoint=tcp://${IP[b1]}:5556"; }
wait_for "[ \$(dropped_b1) = $NW ]" 5
check "(b) every worker dropped B1 (gone from the name)" $NW "$(dropped_b1)"
sleep 2
touch "$TMP/stop-kill"
wait "$LOAD_PID"
echo "many_brokers: (b) $(cat "$TMP/load-kill.json")"
check "(b) load ran on B2 and B3" "True True" \
    "$(field kill "s['per_broker'].get('$(urls b2)', 0) > 0, s['per_broker'].get('$(urls b3)', 0) > 0" | tr -d '(),')"
check "(b) every id answered exactly once, or a connection error on B1" "0 0 0 0 True" \
    "$(field kill "s['missing'], s['duplicated'], s['wrong'], s['failures'], s['sent'] == s['answered_once'] + sum(s['conn_error'].values())" | tr -d '(),')"
check "(b) connection errors only for bodies in flight on B1" "[]" \
    "$(field kill "[b for b in s['conn_error'] if b != '$(urls b1)']")"
check "(b) no error but -32003/-32004" "[]" \
    "$(field kill "[c for c in s['errors'] if c not in ('-32003', '-32004')]")"
echo "many_brokers: (b) calls lost with B1's connections (in flight when it died): $(field kill "sum(s['conn_error'].values())"), errors: $(field kill "s['errors']")"

# ---- (c) rolling restart of B2, B3, B4 under load -----------------------------
load roll --retry-closed b2 b3 b4
sleep 2
for b in b2 b3 b4; do
    echo "many_brokers: restarting $b (SIGTERM)"
    eval "pid=\$PID_$b"
    kill -TERM "$pid"
    if [ "$b" = b2 ]; then
        # Within --drain-delay-ms (1 s): not ready, and still answering.
        readyz() { run_on c curl -s -o /dev/null -w '%{http_code}' -m 1 "http://${IP[$b]}:9090/readyz"; }
        wait_for '[ "$(readyz)" = 503 ]' 1
        check "(c) $b: /readyz 503 once SIGTERM is taken" 503 "$(readyz)"
        check "(c) $b: still answers during --drain-delay-ms" '{"jsonrpc":"2.0","result":42,"id":1}' \
            "$(call "$b")"
    fi
    wait "$pid"
    check "(c) $b exits 0 after SIGTERM" 0 $?
    check "(c) $b told every worker it leaves (DISCONNECT)" 1 \
        "$(grep -c "event=disconnect_sent workers=$NW of=$NW" "$TMP/$b.log")"
    # A fresh log: what the new process says (workers=N) is not mistaken
    # for what the old one said last.
    mv "$TMP/$b.log" "$TMP/$b-before-restart.log"
    start_broker "$b"
    wait_for "listening $b" 10 || { echo "broker $b did not restart"; FAIL=1; exit 1; }
    wait_for "[ \"\$(workers_of $b)\" = $NW ]" 10
    check "(c) $b back with every worker" $NW "$(workers_of "$b")"
done
sleep 1
touch "$TMP/stop-roll"
wait "$LOAD_PID"
echo "many_brokers: (c) $(cat "$TMP/load-roll.json")"
check "(c) every id answered exactly once, with its result (no error, no connection error)" \
    "0 0 0 0 0 0 True" \
    "$(field roll "s['missing'], s['duplicated'], s['wrong'], s['failures'], len(s['conn_error']), len(s['errors']), s['sent'] == s['answered_once'] > 0" | tr -d '(),')"
check "(c) load ran on all three" "True True True" \
    "$(field roll "' '.join(str(s['per_broker'].get(u, 0) > 0) for u in '$(urls b2 b3 b4)'.split(','))")"
echo "many_brokers: (c) bodies sent again after a refused connection: $(field roll "s['refused']"), after a close before any answer byte: $(field roll "s['closed_retried']")"

# The workers, after all these sessions come and gone, leave cleanly (under
# ASan this is where a leak of a retired session would show).
statuses=
for pid in "${WORKER_PIDS[@]}"; do
    kill -TERM "$pid"
    wait "$pid"
    statuses+="$? "
done
check "every worker exits 0 on SIGTERM" "0 0 0 " "$statuses"

netns_finish
