#!/usr/bin/env bash
# Answers as they complete (issue 14): a batch of sleep calls of 1500, 50 and
# 500 ms, with an invalid member and a notification, streamed over ZeroMQ
# (pyzmq), and over HTTP as SSE and NDJSON (curl). The times are printed; what is asserted is the order of arrival:
# the invalid member at once, then 50, 500, 1500, then the end with its
# summary. A deadline mid-stream ends the stream with -32003 and the count;
# a body refused whole (not JSON too) is one end message; a client that
# leaves mid-stream frees everything (the broker, an ASan build in the
# suite's second pass, exits 0 at SIGTERM with nothing leaked) and the
# broker serves on.
source "$JRPC_E2E_LIB"
PY=python3; [ -x /usr/bin/python3 ] && PY=/usr/bin/python3   # Debian's, with python3-zmq
$PY -c 'import zmq, msgpack' 2>/dev/null ||
    { echo "python3-zmq and python3-msgpack are needed (deploy/deps.sh)"; exit 1; }
HERE=$(dirname "$0")
E2E_HTTP=1 e2e_start_broker --max-body 4096 --stream-ping-ms 200
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
check "zmq: not JSON: refused whole, one end message with the -32700 (not streamed)" \
    'end {"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"},"id":null}' \
    "$(sed -E 's/^[0-9]+ //' "$E2E_TMP/z3.out")"
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

# ---- HTTP: SSE and NDJSON (curl reads them) ----
# stamp: each line prefixed with the ms since the script's start
stamp() { local t0=$1; while IFS= read -r l; do echo "$(( $(date +%s%3N) - t0 )) $l"; done; }
post() { curl -sN --max-time 10 -H 'Content-Type: application/json' "$@" "$HTTP_URL/rpc"; }
t0=$(date +%s%3N)
post -H 'Accept: text/event-stream' -H 'X-JRPC-Timeout-Ms: 5000' -D "$E2E_TMP/sse.head" -d "$BATCH" |
    stamp "$t0" | tr -d '\r' > "$E2E_TMP/sse.out"   # stamped as curl -N hands each line over
sed 's/^/    sse: /' "$E2E_TMP/sse.out"
check "sse: 200, text/event-stream, chunked" "200 text/event-stream chunked" \
    "$(tr -d '\r' < "$E2E_TMP/sse.head" | awk '/^HTTP/{s=$2} /^Content-Type/{t=$2} /^Transfer-Encoding/{e=$2} END{print s, t, e}')"
check "sse: ids in order of arrival: the invalid member, then 50, 500, 1500 ms" "3 1 2 0" \
    "$(sed -nE 's/^[0-9]+ id: //p' "$E2E_TMP/sse.out" | tr '\n' ' ' | sed 's/ $//')"
check "sse: each data line is the unstreamed array's object" 1 \
    "$(grep -c '^[0-9]* data: {"jsonrpc":"2.0","result":50,"id":"b"}$' "$E2E_TMP/sse.out")"
check "sse: the end event last, with the summary" 'event: end|data: {"answered":4,"timed_out":0}' \
    "$(grep -v '^[0-9]* $' "$E2E_TMP/sse.out" | grep -v ': ping' | grep -v ' server-timing: ' | tail -n 2 | cut -d' ' -f2- | tr '\n' '|' | sed 's/|$//')"
check "sse: the end event's server-timing field (--server-timing on, issue 33)" 1 \
    "$(grep -A1 '^[0-9]* event: end$' "$E2E_TMP/sse.out" | grep -c ' server-timing: parse;dur=')"
check "sse: ': ping' comments while the stream waits (--stream-ping-ms 200)" yes \
    "$([ "$(grep -c '^[0-9]* : ping$' "$E2E_TMP/sse.out")" -ge 2 ] && echo yes || echo no)"
first=$(sed -nE 's/^([0-9]+) id: 1$/\1/p' "$E2E_TMP/sse.out"); last=$(sed -nE 's/^([0-9]+) id: 0$/\1/p' "$E2E_TMP/sse.out")
echo "    sse: the 50 ms answer after ${first} ms, the 1500 ms one after ${last} ms (from curl's start)"

post -H 'Accept: text/event-stream' -H 'X-JRPC-Timeout-Ms: 1000' -d "$BATCH" | tr -d '\r' > "$E2E_TMP/sse2.out"
check "sse: a deadline mid-stream: -32003 for the slow call, then the end with the count" \
    'data: {"jsonrpc":"2.0","error":{"code":-32003,"message":"Request timeout"},"id":"a"}|event: end|data: {"answered":4,"timed_out":1}' \
    "$(grep -E '^(data|event)' "$E2E_TMP/sse2.out" | tail -n 3 | tr '\n' '|' | sed 's/|$//')"

post -H 'Accept: application/x-ndjson' --raw -d "$BATCH" -D "$E2E_TMP/nd.head" | tr -d '\r' > "$E2E_TMP/nd.raw"
check "ndjson: 200, application/x-ndjson, chunked, the counts announced as trailers" \
    "200 application/x-ndjson chunked X-JRPC-Answered, X-JRPC-Timed-Out, Server-Timing" \
    "$(tr -d '\r' < "$E2E_TMP/nd.head" | awk '/^HTTP/{s=$2} /^Content-Type/{t=$2} /^Transfer-Encoding/{e=$2} /^Trailer/{sub(/^Trailer: /,""); r=$0} END{print s, t, e, r}')"
check "ndjson: one response per line, in order of arrival" '"d" "b" "c" "a"' \
    "$(grep '^{' "$E2E_TMP/nd.raw" | sed -E 's/.*"id":("[a-z]")\}$/\1/' | tr '\n' ' ' | sed 's/ $//')"
check "ndjson: the trailer's counts" "X-JRPC-Answered: 4|X-JRPC-Timed-Out: 0" \
    "$(grep '^X-JRPC' "$E2E_TMP/nd.raw" | tr '\n' '|' | sed 's/|$//')"
out=$(post -H 'Accept: application/jsonl' -D - -o /dev/null -d '{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}' | tr -d '\r' | grep '^Content-Type')
check "jsonl: application/jsonl answered as asked" "Content-Type: application/jsonl" "$out"

# Accept decides; application/json preferred or equal means the plain answer.
for acc in 'application/json' 'application/json, text/event-stream' '*/*' 'text/event-stream;q=0' \
           'text/event-stream;q=0.5, application/json'; do
    out=$(post -H "Accept: $acc" -D - -o /dev/null -d '[{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}]' |
          tr -d '\r' | grep -E '^(Content-Type|Content-Length)' | cut -d: -f1 | tr '\n' ' ')
    check "accept '$acc': one JSON answer" "Content-Type Content-Length " "$out"
done
out=$(post -H 'Accept: text/event-stream;q=0.9, application/json;q=0.5' -D - -o /dev/null -d '[1]' | tr -d '\r' | grep '^Content-Type')
check "accept 'text/event-stream;q=0.9, application/json;q=0.5': streamed" "Content-Type: text/event-stream" "$out"
out=$(curl -s0 --max-time 5 -H 'Content-Type: application/json' -H 'Accept: text/event-stream' -D - -o /dev/null \
      -d '[{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}]' "$HTTP_URL/rpc" | tr -d '\r' | grep '^Content-Type')
check "HTTP/1.0 (no chunked coding): one JSON answer" "Content-Type: application/json" "$out"
big=$(head -c 5000 /dev/zero | tr '\0' ' ')
out=$(post -H 'Accept: text/event-stream' -o /dev/null -w '%{http_code} %{content_type}' -d "[$big]")
check "sse: a body refused whole (413) is a plain JSON answer with its status" "413 application/json" "$out"

# Pipelined on one connection: a streamed body, then a plain one; the plain
# answer waits for the stream's end (answers leave in request order).
$PY - "$HTTP_PORT" > "$E2E_TMP/pipe.out" <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
a = b'[{"jsonrpc":"2.0","method":"sleep","params":{"ms":300},"id":1},{"jsonrpc":"2.0","method":"add","params":[1,2],"id":2}]'
b = b'{"jsonrpc":"2.0","method":"add","params":[5,5],"id":3}'
req = lambda body, acc: (b"POST /rpc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Accept: " + acc + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
s.sendall(req(a, b"text/event-stream") + req(b, b"application/json"))
data = b""
s.settimeout(5)
while b'"id":3}' not in data:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
t = data.decode()
print(t.index('"id":2}') < t.index("event: end") < t.index('"id":3}'), t.count("HTTP/1.1 200 OK"))
PY
check "pipelined: stream answers, its end, then the next request's answer" "True 2" "$(cat "$E2E_TMP/pipe.out")"

# A client that leaves mid-stream: the body is cancelled, the broker serves on.
post -H 'Accept: text/event-stream' --max-time 0.3 -d "$BATCH" > /dev/null
check "sse: the client left mid-stream (curl timed out)" 28 $?
sleep 1.5
out=$(post -H 'Accept: text/event-stream' -d '{"jsonrpc":"2.0","method":"add","params":[1,2],"id":9}' | tr -d '\r' | grep '^data' | head -n 1)
check "sse: served after a client left mid-stream" 'data: {"jsonrpc":"2.0","result":3,"id":9}' "$out"
check "the access line counts the cancelled body" 1 \
    "$(grep -c 'event=access transport=http .* outcome=cancelled' "$E2E_TMP/broker.log")"

# libjrpc-client over http:// (SSE) through the CLI and jrpc-bench.
printf '%s' "$BATCH" | "$JRPC" -u "$HTTP_URL" -t 1000 send --stream > "$E2E_TMP/hcli.out" 2> "$E2E_TMP/hcli.err"
check "jrpc send --stream over http://: one line per answer, in order of arrival" \
    '"d";"b";"c";"a";' "$(sed -E 's/.*"id":("?[a-z0-9]+"?)\}$/\1/' "$E2E_TMP/hcli.out" | tr '\n' ';')"
check "jrpc send --stream over http://: the end" 'jrpc: end {"answered":4,"timed_out":1}' "$(cat "$E2E_TMP/hcli.err")"
"$JRPC_BIN/jrpc-bench" --url "$HTTP_URL" --batch 20 --sleep-share 0.05 --sleep-ms 100 --connections 2 \
    --duration 1 --warmup 0.2 --stream --json > "$E2E_TMP/hbench.json" 2> "$E2E_TMP/hbench.err"
check "jrpc-bench --stream over http://: exit 0, no id lost, a first-answer row" "0 0 0 0 yes" \
    "$? $($PY -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["lost"], r["duplicated"], r["unexpected"], "yes" if r["latency_us"]["first"]["p50"] <= r["latency_us"]["batch"]["p50"] else "no")' "$E2E_TMP/hbench.json")"

# The CLI: each answer on its own line as it comes; the end on stderr.
printf '%s' "$BATCH" | "$JRPC" -u "$URL" -t 1000 send --stream > "$E2E_TMP/cli.out" 2> "$E2E_TMP/cli.err"
check "jrpc send --stream: exit 0" 0 $?
check "jrpc send --stream: one line per answer, in the order they came" \
    '"d";"b";"c";"a";' "$(sed -E 's/.*"id":("?[a-z0-9]+"?)\}$/\1/' "$E2E_TMP/cli.out" | tr '\n' ';')"
check "jrpc send --stream: the end on stderr" 'jrpc: end {"answered":4,"timed_out":1}' \
    "$(cat "$E2E_TMP/cli.err")"
printf '[1,' | "$JRPC" -u "$URL" send --stream > "$E2E_TMP/cli2.out" 2>&1
check "jrpc send --stream: a whole-body error, as unstreamed" \
    '{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"},"id":null}' \
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
