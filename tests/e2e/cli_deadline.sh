#!/usr/bin/env bash
# jrpc -t MS sends its deadline to the broker (the ZeroMQ header frame's
# timeout_ms, the X-JRPC-Timeout-Ms HTTP header): a batch with one slow call
# gets the fast answers and -32003 for the slow one, over both transports,
# although the broker's own --timeout-ms is far longer. With no broker at
# all, the message says what happened.
source "$JRPC_E2E_LIB"
E2E_HTTP=1 e2e_start_broker --timeout-ms 60000
e2e_start_worker
e2e_wait_workers 1
BATCH='[{"jsonrpc":"2.0","method":"sleep","params":{"ms":8000},"id":1},{"jsonrpc":"2.0","method":"add","params":[1,2],"id":2}]'
WANT='[{"jsonrpc":"2.0","error":{"code":-32003,"message":"Request timeout"},"id":1},{"jsonrpc":"2.0","result":3,"id":2}]'
for url in "$URL" "$HTTP_URL"; do
    out=$(printf '%s' "$BATCH" | "$JRPC" -u "$url" -t 1000 send 2>&1)
    check "$url: -t 1000, batch with a slow call: partial results" "0 $WANT" "$? $out"
    out=$("$JRPC" -u "$url" -t 700 call sleep '{"ms":8000}' 2>&1)
    check "$url: -t 700, one slow call: -32003 from the broker" \
        '1 {"code":-32003,"message":"Request timeout"}' "$? $out"
done
# No broker at all: the CLI waits the deadline and a little more, then says so.
DEAD=tcp://127.0.0.1:$(e2e_free_port)
out=$("$JRPC" -u "$DEAD" -t 300 call add '[1,2]' 2>&1)
check "no broker: exit 2 and what happened" \
    "2 jrpc: timed out after 800 ms waiting for the broker at $DEAD: no answer (is it running and reachable?); the broker was asked to answer within 300 ms" \
    "$? $out"
e2e_finish
