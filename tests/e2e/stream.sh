#!/usr/bin/env bash
# Answers as they complete (issue 14): a batch of sleep calls of 1500, 50 and
# 500 ms, with an invalid member and a notification, streamed over ZeroMQ
# (pyzmq). The times are printed; what is asserted is the order of arrival:
# the invalid member at once, then 50, 500, 1500, then the end with its
# summary. A deadline mid-stream ends the stream with -32003 and the count;
# a body refused whole is one end message; a client that leaves mid-stream
# frees everything (the broker, an ASan build in the suite's second pass,
# exits 0 at SIGTERM with nothing leaked) and the broker serves on.
source "$JRPC_E2E_LIB"
PY=python3; [ -x /usr/bin/python3 ] && PY=/usr/bin/python3   # Debian's, with python3-zmq
$PY -c 'import zmq, msgpack' 2>/dev/null ||
    { echo "python3-zmq and python3-msgpack are needed (deploy/deps.sh)"; exit 1; }
HERE=$(dirname "$0")
e2e_start_broker --max-body 4096
e2e_start_worker
e2e_wait_workers 1
BATCH='[{"jsonrpc":"2.0","method":"sleep","params":{"ms":1500},"id":"a"},
 {"jsonrpc":"2.0","method":"sleep","params":{"ms":50},"id":"b"},
 {"jsonrpc":"2.0","method":"sleep","params":{"ms":500},"id":"c"},
 {"id":"d"},
 {"jsonrpc":"2.0","method":"sleep","params":{"ms":10}}]'

# order: "<pos> <id or end>" per line, from the script's output
order() { sed -E 's/^[0-9]+ (pos=([0-9]+) .*"id":"?([a-z0-9]+|null)"?\}$|end (.*))$/\2 \3\4/' "$1" | tr '\n' ';'; }

$PY "$HERE/stream_zmq.py" "$URL" 5000 "$BATCH" > "$E2E_TMP/z1.out" 2>&1
check "zmq: exit 0" 0 $?
sed 's/^/    zmq: /' "$E2E_TMP/z1.out"
check "zmq: invalid member first, then 50, 500, 1500 ms, then the end" \
    '3 d;1 b;2 c;0 a; {"answered":4,"timed_out":0};' "$(order "$E2E_TMP/z1.out")"
check "zmq: each answer is the unstreamed array's object" 1 \
    "$(grep -c '^[0-9]* pos=1 {"jsonrpc":"2.0","result":50,"id":"b"}$' "$E2E_TMP/z1.out")"

$PY "$HERE/stream_zmq.py" "$URL" 1000 "$BATCH" > "$E2E_TMP/z2.out" 2>&1
check "zmq: deadline mid-stream: -32003 for the slow call, then the end with the count" \
    '3 d;1 b;2 c;0 a; {"answered":4,"timed_out":1};' "$(order "$E2E_TMP/z2.out")"
check "zmq: the cut call's answer" 1 \
    "$(grep -c '^[0-9]* pos=0 {"jsonrpc":"2.0","error":{"code":-32003,"message":"Request timeout"},"id":"a"}$' "$E2E_TMP/z2.out")"

$PY "$HERE/stream_zmq.py" "$URL" 1000 '[1,' > "$E2E_TMP/z3.out" 2>&1
check "zmq: not JSON: the -32700 as position 0, then the end" \
    '0 null; {"answered":1,"timed_out":0};' "$(order "$E2E_TMP/z3.out")"
big=$(head -c 5000 /dev/zero | tr '\0' ' ')
$PY "$HERE/stream_zmq.py" "$URL" 1000 "[$big]" > "$E2E_TMP/z4.out" 2>&1
check "zmq: over --max-body: one end message with the error" \
    'end {"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request","data":"body larger than 4096 bytes"},"id":null}' \
    "$(sed -E 's/^[0-9]+ //' "$E2E_TMP/z4.out")"

# A client that leaves after the first answer; the broker drops the rest
# (counted as replies dropped) and serves the next client.
$PY "$HERE/stream_zmq.py" "$URL" 5000 "$BATCH" leave > "$E2E_TMP/z5.out" 2>&1
check "zmq: leaving client got the first answer" '3 d;' "$(order "$E2E_TMP/z5.out")"
sleep 1.7
$PY "$HERE/stream_zmq.py" "$URL" 5000 '{"jsonrpc":"2.0","method":"add","params":[1,2],"id":7}' \
    > "$E2E_TMP/z6.out" 2>&1
check "zmq: served after a client left mid-stream" '0 7; {"answered":1,"timed_out":0};' \
    "$(order "$E2E_TMP/z6.out")"
# Unstreamed requests are unchanged: one frame.
out=$("$JRPC" -u "$URL" call add '[2,3]' 2>&1)
check "zmq: without the flag, one reply" "5" "$out"

# The CLI: each answer on its own line as it comes; the end on stderr.
printf '%s' "$BATCH" | "$JRPC" -u "$URL" -t 1000 send --stream > "$E2E_TMP/cli.out" 2> "$E2E_TMP/cli.err"
check "jrpc send --stream: exit 0" 0 $?
check "jrpc send --stream: one line per answer, in the order they came" \
    '"d";"b";"c";"a";' "$(sed -E 's/.*"id":("?[a-z0-9]+"?)\}$/\1/' "$E2E_TMP/cli.out" | tr '\n' ';')"
check "jrpc send --stream: the end on stderr" 'jrpc: end {"answered":4,"timed_out":1}' \
    "$(cat "$E2E_TMP/cli.err")"
printf '[1,' | "$JRPC" -u "$URL" send --stream > "$E2E_TMP/cli2.out" 2>&1
check "jrpc send --stream: a whole-body error" \
    '{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"},"id":null}|jrpc: end {"answered":1,"timed_out":0}' \
    "$(tr '\n' '|' < "$E2E_TMP/cli2.out" | sed 's/|$//')"
# jrpc-bench --stream: every id back, and the time to the first answer reported.
"$JRPC_BIN/jrpc-bench" --url "$URL" --batch 20 --sleep-share 0.05 --sleep-ms 100 --connections 2 \
    --duration 1 --warmup 0.2 --stream --json > "$E2E_TMP/bench.json" 2> "$E2E_TMP/bench.err"
check "jrpc-bench --stream: exit 0" 0 $?
check "jrpc-bench --stream: no id lost, duplicated or unknown; a first-answer row" "0 0 0 yes" \
    "$($PY -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["lost"], r["duplicated"], r["unexpected"], "yes" if r["latency_us"]["first"]["p50"] <= r["latency_us"]["batch"]["p50"] else "no")' "$E2E_TMP/bench.json")"

kill -TERM "$BROKER_PID"; wait "$BROKER_PID"
check "broker exits 0 at SIGTERM (ASan: nothing leaked)" 0 $?
e2e_finish
