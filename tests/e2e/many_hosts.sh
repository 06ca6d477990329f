#!/usr/bin/env bash
# Many hosts on one machine: network namespaces joined by veth links to a
# bridge that lives in a namespace of its own (the "switch"), so nothing in
# the root namespace is touched. Hosts: R (redis-server), B1 and B2 (two
# brokers sharing R for nonces), W1 and W2 (two demo workers each, every
# worker connected to BOTH brokers), C (the clients). Each process is bound
# to its own host's address. It shows:
#   (a) the workers of one host serve both brokers;
#   (b) W1's link cut at the switch mid-load (two jrpc-bench runs, one per
#       broker) loses no call: every id comes back exactly once, and the only
#       errors allowed are -32003/-32004 (re-dispatch usually leaves none);
#   (c) W1, its link back, rejoins both brokers by itself and serves again;
#   (d) a signed body accepted by B1 is refused by B2 as a replay (-32005).
# Needs root and iproute2 (`ip netns`); without them it exits 77 (skipped).
# Creates and removes its namespaces itself (unique names per run); bounded
# in time (MANY_HOSTS_TIMEOUT_S, default 150 s, for the whole script).
set -u
: "${JRPC_BIN:?set JRPC_BIN to the build/bin directory}"
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/netns.sh"
netns_start many_hosts "${MANY_HOSTS_TIMEOUT_S:-150}" redis-server curl python3

SW=$(ns sw)
NET="10.$((RANDOM % 200 + 20)).$((RANDOM % 250))"   # a /24 that exists only inside our namespaces
declare -A IP=([r]=$NET.10 [b1]=$NET.21 [b2]=$NET.22 [w1]=$NET.31 [w2]=$NET.32 [c]=$NET.40)
netns_network r b1 b2 w1 w2 c
check "C has no route outside the test network" 1 \
    "$(run_on c ip route get 1.1.1.1 >/dev/null 2>&1 && echo 0 || echo 1)"

# ---- Redis on R, brokers on B1 and B2 -------------------------------------
LOG=redis on r redis-server --bind "${IP[r]}" --port 6379 --save '' --appendonly no \
    --protected-mode no
wait_for "run_on r redis-cli -h ${IP[r]} ping 2>/dev/null | grep -q PONG" 10 ||
    { echo "redis-server did not start on R"; FAIL=1; exit 1; }

KEY_ID=hosts
SECRET=many-hosts-secret-0123456789
printf '%s %s\n' "$KEY_ID" "$SECRET" > "$TMP/keys"
for b in b1 b2; do
    LOG=$b on "$b" "$JRPC_BIN/jrpc-broker" --zmq "tcp://${IP[$b]}:5555" \
        --workers "tcp://${IP[$b]}:5556" --http "${IP[$b]}:8080" \
        --keys "$TMP/keys" --redis "redis://${IP[r]}:6379" \
        --heartbeat-ms 200 --liveness 3 --timeout-ms 6000
done
listening() { [ "$(grep -c 'event=listening' "$TMP/$1.log" 2>/dev/null)" -ge 3 ]; }
for b in b1 b2; do
    wait_for "listening $b" 10 || { echo "broker $b did not start"; FAIL=1; exit 1; }
done

# The last workers=N a broker logged.
workers_of() {
    grep -o 'event=worker_[a-z]* .*workers=[0-9]*' "$TMP/$1.log" 2>/dev/null |
        tail -n 1 | sed 's/.*workers=//'
}
both_have() { [ "$(workers_of b1)" = "$1" ] && [ "$(workers_of b2)" = "$1" ]; }
start_workers() { # HOST: two demo workers, each connected to both brokers
    local i
    for i in 1 2; do
        LOG="$1-worker$i" on "$1" "$JRPC_BIN/jrpc-worker" \
            --connect "tcp://${IP[b1]}:5556" --connect "tcp://${IP[b2]}:5556" \
            --heartbeat-ms 200 --liveness 3
    done
}
call() { # BROKER METHOD PARAMS: prints the result (or the error)
    run_on c "$JRPC_BIN/jrpc" --url "tcp://${IP[$1]}:5555" --key-file "$TMP/keys" \
        --timeout-ms 5000 call "$2" "$3" 2>&1
}

# ---- (a) W1's workers serve both brokers ----------------------------------
start_workers w1
wait_for "both_have 2" 15
check "(a) both brokers see W1's 2 workers" "2 2" "$(workers_of b1) $(workers_of b2)"
check "(a) B1 answers through W1" 42 "$(call b1 add '[40,2]')"
check "(a) B2 answers through W1" 42 "$(call b2 add '[40,2]')"
start_workers w2
wait_for "both_have 4" 15
check "(a) both brokers see all 4 workers" "4 4" "$(workers_of b1) $(workers_of b2)"

# ---- (b) W1 cut off mid-load -----------------------------------------------
LOAD_S=14
for b in b1 b2; do
    run_on c "$JRPC_BIN/jrpc-bench" --url "tcp://${IP[$b]}:5555" --key-file "$TMP/keys" \
        --json --duration "$LOAD_S" --warmup 0 --connections 2 --batch 20 \
        --sleep-share 0.2 --sleep-ms 50 --timeout-ms 8000 \
        >"$TMP/bench-$b.json" 2>"$TMP/bench-$b.log" &
    eval "BENCH_$b=\$!"
    PIDS+=("$!")
done
sleep 3
lost_before=$(cat "$TMP/b1.log" "$TMP/b2.log" | grep -c 'event=worker_lost')
echo "many_hosts: t=3s cutting W1's link at the switch"
ip -n "$SW" link set port-w1 down
t_down=$(date +%s%N)
wait_for "both_have 2" 10
echo "many_hosts: both brokers dropped W1's workers after $(( ($(date +%s%N) - t_down) / 1000000 )) ms"
check "(b) with W1 cut off, both brokers drop its workers (2 left each)" "2 2" \
    "$(workers_of b1) $(workers_of b2)"
check "(b) each broker logged W1's 2 workers lost" 4 \
    "$(( $(cat "$TMP/b1.log" "$TMP/b2.log" | grep -c 'event=worker_lost') - lost_before ))"
check "(b) B1 answers through W2 alone" 7 "$(call b1 add '[3,4]')"
check "(b) B2 answers through W2 alone" 7 "$(call b2 add '[3,4]')"
sleep 3

# ---- (c) the link comes back: W1 rejoins by itself --------------------------
echo "many_hosts: link of W1 up again"
ip -n "$SW" link set port-w1 up
t_up=$(date +%s%N)
wait_for "both_have 4" 40
echo "many_hosts: W1's workers back on both brokers after $(( ($(date +%s%N) - t_up) / 1000000 )) ms"
check "(c) W1's workers rejoin both brokers by themselves" "4 4" \
    "$(workers_of b1) $(workers_of b2)"

# the load ends; every id back exactly once, errors only -32003/-32004
for b in b1 b2; do
    eval "pid=\$BENCH_$b"
    wait "$pid"
    check "(b) jrpc-bench via $b: exit 0 (no id lost, duplicated or unknown)" 0 $?
    python3 - "$TMP/bench-$b.json" > "$TMP/bench-$b.summary" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
bad = {c: n for c, n in (r.get("errors") or {}).items() if c not in ("-32003", "-32004")}
print(r["lost"], r["duplicated"], r.get("transport_failures", 0), "calls>0" if r["calls"] > 0 else "no-calls",
      "bad-errors:" + json.dumps(bad, sort_keys=True))
print("errors", json.dumps(r.get("errors") or {}, sort_keys=True), "calls", r["calls"], file=sys.stderr)
EOF
    check "(b) via $b: lost, duplicated, transport failures, only -32003/-32004" \
        "0 0 0 calls>0 bad-errors:{}" "$(cat "$TMP/bench-$b.summary")"
done
echo "many_hosts: re-dispatched after W1's loss:" \
    "$(grep -o 'event=worker_lost.*redispatched=[0-9]*' "$TMP/b1.log" "$TMP/b2.log" |
       sed 's/.*redispatched=//' | awk '{ n += $1 } END { print n + 0 }') calls"

# W1 serves again: cut W2 instead, and both brokers still answer
ip -n "$SW" link set port-w2 down
wait_for "both_have 2" 10
check "(c) with W2 cut off, B1 answers through the rejoined W1" 9 "$(call b1 add '[4,5]')"
check "(c) with W2 cut off, B2 answers through the rejoined W1" 9 "$(call b2 add '[4,5]')"
ip -n "$SW" link set port-w2 up

# ---- (d) one nonce, two brokers: the second refuses the replay --------------
printf '{"jsonrpc":"2.0","method":"add","params":[20,22],"id":7}' > "$TMP/body.json"
python3 "$HERE/sign.py" --key "$KEY_ID" --secret "$SECRET" --body-file "$TMP/body.json" \
    > "$TMP/sig.headers"
post() { # BROKER: posts the signed body, prints "STATUS BODY"
    run_on c curl -s -o "$TMP/post.out" -w '%{http_code}' -H 'Content-Type: application/json' \
        -H @"$TMP/sig.headers" --data-binary @"$TMP/body.json" "http://${IP[$1]}:8080/rpc"
    printf ' %s' "$(cat "$TMP/post.out")"
}
check "(d) B1 accepts the signed body" '200 {"jsonrpc":"2.0","result":42,"id":7}' "$(post b1)"
out=$(post b2)
check "(d) B2 refuses the same bytes: HTTP 409" 409 "${out%% *}"
check "(d) B2 refuses the same bytes: -32005" 1 "$(grep -c '"code":-32005' <<<"$out")"

netns_finish
