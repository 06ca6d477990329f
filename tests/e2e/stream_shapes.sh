#!/usr/bin/env bash
# Streamed answers keep the specification's shapes (issue 36, item 8): every
# example of the JSON-RPC 2.0 specification (spec_examples.json) is sent
# unstreamed and streamed over SSE, NDJSON, ZeroMQ stream frames and the
# WebSocket stream mode; the streamed answer, rebuilt by the rule of
# docs/STREAMING.md, must equal the unstreamed one as a JSON value (a batch's
# array in any order where the stream carries no positions). A body refused
# whole ([], not JSON) is not streamed: it is answered as it would be
# unstreamed, so it cannot be taken for a batch of one ([1]).
source "$JRPC_E2E_LIB"
PY=python3; [ -x /usr/bin/python3 ] && PY=/usr/bin/python3   # Debian's, with zmq and websockets
$PY -c 'import zmq, msgpack, websockets' 2>/dev/null ||
    { echo "python3-zmq, python3-msgpack and python3-websockets are needed (deploy/deps.sh)"; exit 1; }
HERE=$(dirname "$0")
E2E_HTTP=1 e2e_start_broker --ws-max-inflight 1
e2e_start_worker
e2e_start_worker
e2e_wait_workers 2

$PY "$HERE/stream_shapes.py" "$HTTP_PORT" "$URL" "$HERE/spec_examples.json" > "$E2E_TMP/shapes.out" 2>&1
check "stream_shapes.py: exit 0" 0 $?
n=0
while IFS='|' read -r transport name verdict; do
    check "$transport: $name" same "$verdict"
    n=$((n + 1))
done < <(grep -E '^[a-z ]+\|' "$E2E_TMP/shapes.out")
grep -vE '^[a-z ]+\|' "$E2E_TMP/shapes.out" | sed 's/^/    /'
examples=$($PY -c 'import json, sys; print(len(json.load(open(sys.argv[1]))))' "$HERE/spec_examples.json")
check "every example on every transport (7 lines each)" $((examples * 7)) "$n"

# The shape a client sees: a body refused whole asked as SSE is plain JSON
# with the status it has unstreamed; a batch of one is a stream.
post() { curl -s --max-time 10 -H 'Content-Type: application/json' -H 'Accept: text/event-stream' \
              -o /dev/null -w '%{http_code} %{content_type}' -d "$1" "$HTTP_URL/rpc"; }
check "sse: [] is refused whole: 200 application/json" "200 application/json" "$(post '[]')"
check "sse: not JSON is refused whole: 200 application/json" "200 application/json" "$(post '[1,')"
check "sse: [1] is a stream" "200 text/event-stream" "$(post '[1]')"

kill -TERM "$BROKER_PID"; wait "$BROKER_PID"
check "broker exits 0 at SIGTERM (ASan: nothing leaked)" 0 $?
e2e_finish
