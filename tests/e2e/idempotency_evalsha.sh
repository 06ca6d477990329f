#!/usr/bin/env bash
# Idempotency keys go to Redis as EVALSHA of the script loaded at connect
# (issue 35), never as EVAL with the whole script: counted in Redis' INFO
# commandstats around ten claims (five first runs, five retries). After
# SCRIPT FLUSH the broker reloads the scripts (NOSCRIPT drops the
# connection, as for nonce claims: the one claim in flight fails closed,
# 503) and the keys behave as before: the replies kept before the flush are
# replayed, a new key runs once, and still no EVAL.
source "$JRPC_E2E_LIB"
command -v redis-server >/dev/null || { echo "redis-server is required"; exit 1; }
e2e_start_redis
E2E_HTTP=1 e2e_start_broker --redis "redis://127.0.0.1:$RPORT" --timeout-ms 5000
e2e_start_worker
e2e_wait_workers 1

post() {  # KEY BODY: "STATUS BODY", headers in $E2E_TMP/h
    curl -s -D "$E2E_TMP/h" -o "$E2E_TMP/b" -w '%{http_code}' -H 'Content-Type: application/json' \
        -H "Idempotency-Key: $1" --data-binary "$2" "$HTTP_URL/rpc" > "$E2E_TMP/c"
    echo "$(cat "$E2E_TMP/c") $(cat "$E2E_TMP/b")"
}
replayed() { grep -ci '^Idempotent-Replayed: true' "$E2E_TMP/h"; }
calls() {  # COMMAND: its calls since the start of Redis (0 when never called)
    local n
    n=$(redis-cli -p "$RPORT" INFO commandstats | tr -d '\r' |
        sed -n "s/^cmdstat_$1:calls=\([0-9]*\),.*/\1/p")
    echo "${n:-0}"
}
B='{"jsonrpc":"2.0","method":"count","id":1}'

eval0=$(calls eval) sha0=$(calls evalsha) runs=""
for i in 1 2 3 4 5; do
    first=$(post "k$i" "$B")
    again=$(post "k$i" "$B")
    [ "$first" = "$again" ] && [ "${first%% *}" = 200 ] && [ "$(replayed)" = 1 ] && runs="$runs ok"
done
check "five keys, each retried: the first reply replayed" " ok ok ok ok ok" "$runs"
check "ten idempotency claims: EVAL 0, EVALSHA 10" "0 10" \
    "$(($(calls eval) - eval0)) $(($(calls evalsha) - sha0))"

# The scripts flushed under the broker: a claim may fail closed (503) while
# the connection is rebuilt; a bounded poll until the new key is served.
redis-cli -p "$RPORT" SCRIPT FLUSH >/dev/null
out="" tries=0 firstcode=""
while [ "${out%% *}" != 200 ] && [ $tries -lt 100 ]; do
    out=$(post kf "$B")
    firstcode=${firstcode:-${out%% *}}
    case ${out%% *} in 200|503) ;; *) break ;; esac
    tries=$((tries + 1))
    [ "${out%% *}" = 200 ] || sleep 0.1
done
check "the first claim after the flush (NOSCRIPT) fails closed: 503, not run" 503 "$firstcode"
check "after SCRIPT FLUSH: a new key is served again (200, a run)" "200 0" "${out%% *} $(replayed)"
check "... its retry gets its reply" "$out 1" "$(post kf "$B") $(replayed)"
check "... a reply kept before the flush is replayed" "$first 1" "$(post k5 "$B") $(replayed)"
eval1=$(calls eval) sha1=$(calls evalsha)
for i in 6 7 8; do post "k$i" "$B" >/dev/null; done
check "... and three more keys: EVAL 0, EVALSHA 3" "0 3" \
    "$(($(calls eval) - eval1)) $(($(calls evalsha) - sha1))"
check "the worker ran each key once: the next count is 10" 10 \
    "$("$JRPC_BIN/jrpc" -u "$HTTP_URL/rpc" call count)"
e2e_finish
