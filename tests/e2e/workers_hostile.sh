#!/usr/bin/env bash
# The worker port as a trust boundary (issue 19: High 1 and 4, Medium 6 and
# 9): a rogue worker (tests/e2e/rogue_worker.c) next to an honest one.
#  - a READY with 100,000 names is refused (log line, DISCONNECT, metric)
#    while the honest worker's calls keep being answered;
#  - with the cap raised, a READY of 200,000 names is read in linear time:
#    it is taken, and a call right after it is answered at once (the old
#    quadratic loop froze the broker ~30 s and expired every other worker);
#  - READYs with new names in turn do not grow the method table (jrpc_methods);
#  - a READY "name" of invalid UTF-8 and control bytes is not a label:
#    /metrics still parses;
#  - a worker claiming 2^32-1 credit is honoured --max-worker-credit, and
#    after --eject-after timeouts in a row it is ejected: calls go to the
#    honest worker;
#  - a worker that never reads holds at most --max-worker-bytes of REQUESTs:
#    the rest go to the honest worker and the broker's RSS stays bounded.
source "$JRPC_E2E_LIB"
# The RSS check below measures what the broker keeps. In an ASan build
# freed memory waits in ASan's quarantine (256 MiB by default) and counts
# in RSS: 1 MiB of it here, so that the check sees the broker, not ASan
# (the libzmq variant grew 22 MiB that way). Ignored by plain builds.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1"
ROGUE="$JRPC_BIN/jrpc-test-rogue-worker"
PYPROM=python3; [ -x /usr/bin/python3 ] && PYPROM=/usr/bin/python3
$PYPROM -c 'import prometheus_client' 2>/dev/null ||
    { echo "python3-prometheus-client is not installed (deploy/deps.sh)"; exit 1; }

scrape() { curl -s "$ADMIN/metrics" > "$E2E_TMP/m"; }
val() { awk -v k="$1" '$1 == k { v = $2 } END { print v == "" ? 0 : v }' "$E2E_TMP/m"; }
call() { # METHOD PARAMS -> the answer body
    curl -s -m 20 -H 'Content-Type: application/json' \
        --data-binary "{\"jsonrpc\":\"2.0\",\"method\":\"$1\",\"params\":$2,\"id\":1}" "$HTTP_URL/rpc"
}
rogue() { # ARGS... (background; output in rogueN.out)
    ROGUE_N=$((${ROGUE_N:-0} + 1))
    "$ROGUE" --connect "$WORKERS_EP" "$@" > "$E2E_TMP/rogue$ROGUE_N.out" 2>&1 &
    ROGUE_PID=$!
    E2E_PIDS+=("$ROGUE_PID")
}
stop_rogue() { kill -9 "$ROGUE_PID" 2>/dev/null; wait "$ROGUE_PID" 2>/dev/null; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$BROKER_PID/status"; }

# ---- High 1: a READY with 100,000 names, defaults (cap 1024) ----
export E2E_HTTP=1
e2e_start_broker --admin 127.0.0.1:0
ADMIN=$(e2e_admin_url)
e2e_start_worker --name honest --credit 8
e2e_wait_workers 1
scrape
BASE=$(val jrpc_methods)
check "jrpc_methods: the honest worker's methods" 1 "$([ "$BASE" -ge 5 ] && echo 1)"
rogue --methods 100000 --run-ms 8000
ok=0
for i in $(seq 30); do
    case "$(call add "[$i,1]")" in *"\"result\":$((i + 1))"*) ok=$((ok + 1)) ;; esac
    sleep 0.05
done
check "100,000-name READY: the honest worker's 30 calls all answered" 30 "$ok"
e2e_wait_for "grep -q 'event=ready_refused.*reason=too_many_methods methods=100000 limit=1024' \"$E2E_TMP/broker.log\"" 10
check "... the READY refused with a log line" 1 \
    "$(grep -q 'event=ready_refused.*reason=too_many_methods methods=100000 limit=1024' "$E2E_TMP/broker.log" && echo 1)"
e2e_wait_for "grep -q disconnect \"$E2E_TMP/rogue$ROGUE_N.out\"" 10
check "... and the rogue told DISCONNECT" 1 "$(grep -c -m1 disconnect "$E2E_TMP/rogue$ROGUE_N.out")"
scrape
check "... jrpc_worker_ready_refused_total counts it; the table did not grow" "1 $BASE" \
    "$([ "$(val jrpc_worker_ready_refused_total)" -ge 1 ] && echo 1) $(val jrpc_methods)"
check "no worker lost" 0 "$(grep -c 'event=worker_lost' "$E2E_TMP/broker.log")"
stop_rogue

# ---- Medium 9: a READY name that is no label ----
rogue --method add --credit 1 --name-hex ff0a7d2078 --run-ms 20000
e2e_wait_workers 2
scrape
check "a name of invalid UTF-8 and control bytes: labelled by the routing id" 2 \
    "$(grep -c '^jrpc_worker_credit{worker="[0-9a-z.:@/_-]*"} ' "$E2E_TMP/m")"
check "... logged" 1 "$(grep -c 'event=worker_name_refused worker=[0-9a-f]* bytes=5 ' "$E2E_TMP/broker.log")"
cat > "$E2E_TMP/parse.py" <<'PY'
import sys
from prometheus_client.parser import text_string_to_metric_families
data = open(sys.argv[1], 'rb').read()
text = data.decode('utf-8')   # the whole page is UTF-8
fams = list(text_string_to_metric_families(text))
print('valid' if len(fams) > 20 else 'families: %d' % len(fams))
PY
check "... and /metrics parses (prometheus_client)" valid "$($PYPROM "$E2E_TMP/parse.py" "$E2E_TMP/m" 2>&1 | tail -n 1)"
stop_rogue
e2e_wait_workers 1

# ---- Medium 6: READYs with new names in turn, each replacing the last ----
rogue --methods 1000 --readies 40 --credit 1 --run-ms 20000
e2e_wait_for "[ \"\$(grep -c 'event=worker_ready .*methods=1000 ' \"$E2E_TMP/broker.log\")\" = 40 ]" 20
scrape
check "40 READYs of 1000 new names each: jrpc_methods is the last one's 1000 + the honest's" \
    $((BASE + 1000)) "$(val jrpc_methods)"
stop_rogue
e2e_wait_for "scrape; [ \"\$(val jrpc_methods)\" = $BASE ]" 15
check "... and back to the honest worker's once the rogue is gone" "$BASE" "$(val jrpc_methods)"

# ---- High 1: READY handling is linear: 200,000 names taken at once ----
e2e_restart_broker --admin 127.0.0.1:0 --max-worker-methods 300000 --max-methods 400000
ADMIN=$(e2e_admin_url)
e2e_wait_for "[ \"\$(grep -c 'event=worker_ready' \"$E2E_TMP/broker.log\")\" -ge 1 ]" 15
rogue --methods 200000 --credit 1 --run-ms 30000
e2e_wait_for "grep -q 'event=worker_ready .*methods=200000 ' \"$E2E_TMP/broker.log\"" 60
check "a READY of 200,000 names under a raised cap: taken" 1 \
    "$(grep -c 'event=worker_ready .*methods=200000 ' "$E2E_TMP/broker.log")"
t0=$(date +%s)
ans=$(call add '[2,3]')
t1=$(date +%s)
# Not a speed test: the quadratic loop took ~30 s here; linear takes ms.
check "... and the next call is answered by the honest worker within 10 s" '1 1' \
    "$(echo "$ans" | grep -c '"result":5') $([ $((t1 - t0)) -le 10 ] && echo 1)"
scrape
check "... jrpc_methods counts them" $((BASE + 200000)) "$(val jrpc_methods)"
check "... no worker lost (liveness is not faked by the long callback)" 0 \
    "$(grep -c 'event=worker_lost' "$E2E_TMP/broker.log")"
stop_rogue

# ---- High 4: credit 2^32-1, never answering: capped, then ejected ----
e2e_restart_broker --admin 127.0.0.1:0 --timeout-ms 800 --eject-after 3 --eject-ms 60000 \
    --max-worker-credit 16
ADMIN=$(e2e_admin_url)
e2e_wait_for "[ \"\$(grep -c 'event=worker_ready' \"$E2E_TMP/broker.log\")\" -ge 1 ]" 15
rogue --method add --credit 4294967295 --name-hex 726f677565 --run-ms 60000
e2e_wait_for "scrape; grep -q '^jrpc_worker_credit{worker=\"rogue\"}' \"$E2E_TMP/m\"" 15
check "credit 2^32-1 honoured as --max-worker-credit 16" 16 "$(val 'jrpc_worker_credit{worker="rogue"}')"
check "... logged as asked" 1 "$(grep -c 'event=worker_ready worker=rogue credit=16 credit_asked=4294967295 ' "$E2E_TMP/broker.log")"
: > "$E2E_TMP/answers"
for i in $(seq 12); do call add "[$i,1]" >> "$E2E_TMP/answers"; echo >> "$E2E_TMP/answers"; done
check "3 calls time out at the rogue, then it is ejected" 3 "$(grep -c '"code":-32003' "$E2E_TMP/answers")"
check "... the other 9 answered by the honest worker" 9 "$(grep -c '"result"' "$E2E_TMP/answers")"
check "... the last 5 all answered" 5 "$(tail -n 5 "$E2E_TMP/answers" | grep -c '"result"')"
check "... a log line" 1 "$(grep -c 'event=worker_ejected worker=rogue timeouts=3 eject_ms=60000' "$E2E_TMP/broker.log")"
scrape
check "... and jrpc_worker_ejections_total 1" 1 "$(val jrpc_worker_ejections_total)"
check "the rogue is still connected (ejected, not dropped)" 2 "$(val jrpc_workers_connected)"
stop_rogue

# ---- High 4: a worker that never reads holds at most --max-worker-bytes ----
# glibc: blocks of 128 KiB and more mmapped and unmapped when freed, so the
# RSS below is what the broker holds, not its heap's high-water mark (a
# loaded machine left 6 bodies more in flight at once: +16.8 MiB, nothing held)
MALLOC_MMAP_THRESHOLD_=131072 e2e_restart_broker --admin 127.0.0.1:0 --timeout-ms 1500 --eject-after 0 \
    --max-worker-bytes 2097152
ADMIN=$(e2e_admin_url)
e2e_wait_for "[ \"\$(grep -c 'event=worker_ready' \"$E2E_TMP/broker.log\")\" -ge 1 ]" 15
python3 -c "
import json
print(json.dumps({'jsonrpc': '2.0', 'method': 'echo', 'params': ['x' * 524288], 'id': 1}), end='')
" > "$E2E_TMP/big"
big_round() { # 60 calls of 512 KiB, 6 at a time -> results in $E2E_TMP/big.out
    seq 60 | xargs -P 6 -I{} curl -s -m 30 -o "$E2E_TMP/big.{}" -H 'Content-Type: application/json' \
        --data-binary @"$E2E_TMP/big" "$HTTP_URL/rpc"
    cat "$E2E_TMP"/big.[0-9]* | grep -o '"result"\|"code":-[0-9]*' | sort | uniq -c > "$E2E_TMP/big.out"
    rm -f "$E2E_TMP"/big.[0-9]*
}
big_round   # warms the broker's heap with the honest worker alone
sleep 0.5
RSS0=$(rss_kb)
rogue --method echo --credit 4294967295 --mode noread --name-hex 726f677565 --run-ms 60000
e2e_wait_workers 2
big_round
answered=$(awk '$2 == "\"result\"" { print $1 }' "$E2E_TMP/big.out")
check "never reading: the rogue takes a few 512 KiB calls, the honest worker the rest (>= 50 of 60)" 1 \
    "$([ "${answered:-0}" -ge 50 ] && echo 1)"
check "... worker_bytes_full logged for the rogue" 1 \
    "$(grep -c 'event=worker_bytes_full worker=rogue ' "$E2E_TMP/broker.log")"
sleep 2   # every body over (1.5 s deadline)
RSS1=$(rss_kb)
echo "broker VmRSS: $RSS0 kB before, $RSS1 kB after (answered $answered of 60)"
# Without the cap the rogue pinned 60 x 512 KiB = 30 MiB of REQUESTs.
check "... the broker's RSS grew by less than 16 MiB" 1 "$([ $((RSS1 - RSS0)) -lt 16384 ] && echo 1)"
stop_rogue

check "the broker is alive" 1 "$(kill -0 "$BROKER_PID" && echo 1)"
e2e_finish
