#!/usr/bin/env bash
# Batches through the real broker and workers: duplicate ids, answers that
# arrive out of order, ids echoed byte for byte, values that round-trip, and
# a batch of 2000 calls spread over 3 workers with small credit.
source "$JRPC_E2E_LIB"
e2e_start_broker --max-batch 5000
for i in 1 2 3; do e2e_start_worker --credit 16; done
e2e_wait_workers 3

send() { printf '%s' "$1" | "$JRPC" send; }

check "duplicate ids get their own answers" \
    '[{"jsonrpc":"2.0","result":3,"id":7},{"jsonrpc":"2.0","result":30,"id":7},{"jsonrpc":"2.0","result":300,"id":7}]' \
    "$(send '[{"jsonrpc":"2.0","method":"add","params":[1,2],"id":7},
              {"jsonrpc":"2.0","method":"add","params":[10,20],"id":7},
              {"jsonrpc":"2.0","method":"add","params":[100,200],"id":7}]')"

check "out of order completion, request order reply" \
    '[{"jsonrpc":"2.0","result":300,"id":"a"},{"jsonrpc":"2.0","result":10,"id":"b"},{"jsonrpc":"2.0","result":150,"id":"c"},{"jsonrpc":"2.0","result":0,"id":"d"}]' \
    "$(send '[{"jsonrpc":"2.0","method":"sleep","params":{"ms":300},"id":"a"},
              {"jsonrpc":"2.0","method":"sleep","params":{"ms":10},"id":"b"},
              {"jsonrpc":"2.0","method":"sleep","params":{"ms":150},"id":"c"},
              {"jsonrpc":"2.0","method":"sleep","params":{"ms":0},"id":"d"}]')"

check "raw ids echoed byte for byte" \
    '[{"jsonrpc":"2.0","result":null,"id":1.0},{"jsonrpc":"2.0","result":null,"id":9007199254740993},{"jsonrpc":"2.0","result":null,"id":"\u00e9"},{"jsonrpc":"2.0","result":null,"id":-0},{"jsonrpc":"2.0","result":null,"id":1e5},{"jsonrpc":"2.0","result":null,"id":null}]' \
    "$(send '[{"jsonrpc":"2.0","method":"update","id":1.0},
              {"jsonrpc":"2.0","method":"update","id":9007199254740993},
              {"jsonrpc":"2.0","method":"update","id":"\u00e9"},
              {"jsonrpc":"2.0","method":"update","id":-0},
              {"jsonrpc":"2.0","method":"update","id":1e5},
              {"jsonrpc":"2.0","method":"update","id":null}]')"

V='[18446744073709551615,-9223372036854775808,0.1,1e+300,-0.0,5e-324,"a\"b\\c\u0001é😀",{"k":[true,false,null,{}],"":[]}]'
check "echo round-trips values exactly" \
    "{\"jsonrpc\":\"2.0\",\"result\":$V,\"id\":1}" \
    "$(send "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":$V,\"id\":1}")"

check "invalid params" \
    '{"jsonrpc":"2.0","error":{"code":-32602,"message":"Invalid params"},"id":1}' \
    "$(send '{"jsonrpc":"2.0","method":"subtract","params":["x"],"id":1}')"

check "reserved rpc. method" '-32601' \
    "$(send '{"jsonrpc":"2.0","method":"rpc.ping","id":1}' | sed -E 's/.*"code":(-?[0-9]+).*/\1/')"

# 2000 calls, 3 fresh workers with credit 16 each: most calls wait in the
# queue. The dispatcher is a work-conserving pull (docs/ARCHITECTURE.md,
# "Life of a body"): the first wave fills every worker's credit, then each
# answer refills the worker that sent it. So a worker that the machine's
# scheduler starves serves little more than its first 16, and the shares are
# not equal under load (issue 36 item 9: "two of three served none" was a
# threshold of 100 that assumed an idle machine). What is promised: every
# call run exactly once, and every worker given its credit's worth.
stopped() { grep -h -o 'event=stopped.*calls=[0-9]*' "$@" 2>/dev/null | sed 's/.*calls=//'; }
for p in "${E2E_PIDS[@]:1}"; do kill -TERM "$p"; done
e2e_wait_for "[ \$(stopped $E2E_TMP/worker[123].log | wc -l) = 3 ]" 10
e2e_wait_workers 0
for i in 1 2 3; do e2e_start_worker --credit 16; done
e2e_wait_workers 3
body='[' expected='['
for ((i = 0; i < 2000; i++)); do
    [ $i -gt 0 ] && { body+=','; expected+=','; }
    body+="{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"params\":[$i,$i],\"id\":$i}"
    expected+="{\"jsonrpc\":\"2.0\",\"result\":$((2 * i)),\"id\":$i}"
done
body+=']' expected+=']'
printf '%s' "$body" > "$E2E_TMP/big.json"
out=$("$JRPC" send "$E2E_TMP/big.json")
check "batch of 2000 comes back whole and in order" "$expected" "$out"

# Each worker reports its count when it stops.
for p in "${E2E_PIDS[@]:4}"; do kill -TERM "$p"; done
e2e_wait_for "[ \$(stopped $E2E_TMP/worker[456].log | wc -l) = 3 ]" 10
served=$(stopped "$E2E_TMP"/worker[456].log | sort -n)
echo "shares of the 2000: $(echo $served)"
check "three workers stopped and reported" 3 "$(echo "$served" | wc -l)"
check "every call ran exactly once" 2000 "$(echo "$served" | awk '{ s += $1 } END { print s }')"
check "every worker was given its credit's worth (16)" 0 "$(echo "$served" | awk '$1 < 16' | wc -l)"
e2e_finish
