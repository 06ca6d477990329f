#!/usr/bin/env bash
# jrpc-bench smoke test: closed loop over tcp:// and http://, open loop over
# tcp:// with --json; every id back exactly once; a bad flag is a usage error.
source "$JRPC_E2E_LIB"
BENCH="$JRPC_BIN/jrpc-bench"

E2E_HTTP=1 e2e_start_broker
e2e_start_worker
e2e_wait_workers 1

# json_num FIELD FILE -> the number after "FIELD": in the one-line JSON.
json_num() { grep -o "\"$1\":[-0-9.e+]*" "$2" | head -n 1 | cut -d: -f2; }

# bench NAME ARGS... : runs jrpc-bench --json, checks exit 0 and the counters.
bench() {
    local name=$1; shift
    "$BENCH" --duration 2 --warmup 0.5 --json "$@" > "$E2E_TMP/$name.json" 2> "$E2E_TMP/$name.err"
    check "$name: exit status" 0 $?
    check "$name: calls_per_s > 0" 1 \
        "$(awk -v v="$(json_num calls_per_s "$E2E_TMP/$name.json")" 'BEGIN { print (v > 0) ? 1 : 0 }')"
    check "$name: lost" 0 "$(json_num lost "$E2E_TMP/$name.json")"
    check "$name: duplicated" 0 "$(json_num duplicated "$E2E_TMP/$name.json")"
    check "$name: no transport failures" 0 "$(json_num transport_failures "$E2E_TMP/$name.json")"
}

bench closed-tcp  --url "$URL"
bench closed-http --url "$HTTP_URL" --batch 10 --notify-share 0.1 --invalid-share 0.1
bench open-tcp    --url "$URL" --rate 200
check "open-tcp: about 400 batches (200/s for 2 s)" 1 \
    "$(awk -v v="$(json_num batches "$E2E_TMP/open-tcp.json")" 'BEGIN { print (v >= 360 && v <= 440) ? 1 : 0 }')"
check "closed-http: invalid requests counted as -32600" 1 \
    "$(grep -q '"errors":{[^}]*"-32600":[1-9]' "$E2E_TMP/closed-http.json" && echo 1 || echo 0)"

# The human table.
"$BENCH" --url "$URL" --duration 0.5 --warmup 0 --batch 1 > "$E2E_TMP/table.txt" 2>&1
check "table: exit status" 0 $?
check "table: has the per-call row" 1 "$(grep -c '^  call ' "$E2E_TMP/table.txt")"

"$BENCH" --url "$URL" --no-such-flag > /dev/null 2>&1
check "a bad flag exits 2" 2 $?
"$BENCH" --duration 1 > /dev/null 2>&1
check "no --url exits 2" 2 $?
"$BENCH" --url "$URL" --params 'nope' > /dev/null 2>&1
check "bad --params exits 2" 2 $?

e2e_finish
