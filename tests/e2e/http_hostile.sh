#!/usr/bin/env bash
# Hostile HTTP clients against the broker's HTTP front door: malformed and
# ambiguous requests, oversized heads and bodies, slow and vanishing clients,
# too many connections, overload. The cases live in http_hostile.py (raw
# sockets, python3 standard library); this wrapper starts the broker with
# small limits so the timeouts are quick, forwards the cases' lines, and then
# checks that the broker survived all of it. Then the signed cases (trailers
# carry no signature) against the same port, restarted with --keys and Redis.
source "$JRPC_E2E_LIB"
E2E_HTTP=1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

MAX_BODY=65536 MAX_HEADER=8192 MAX_CONNS=64 MAX_OPEN=4
# The body timeout is longer than the cases' 2 s read of a refused chunk
# size, so a 413 that waited for it cannot pass.
HEADER_TO=1000 BODY_TO=3000 IDLE_TO=2000

# Without the HTTP flags the broker would refuse to start, slowly (retries).
for flag in --http --max-header-bytes --header-timeout-ms --body-timeout-ms \
            --idle-timeout-ms --max-conns; do
    if ! "$JRPC_BIN/jrpc-broker" --help | grep -q -- "$flag "; then
        check "jrpc-broker --help lists $flag" yes no
        e2e_finish
    fi
done

e2e_start_broker --max-body $MAX_BODY --max-header-bytes $MAX_HEADER \
    --header-timeout-ms $HEADER_TO --body-timeout-ms $BODY_TO \
    --idle-timeout-ms $IDLE_TO --max-conns $MAX_CONNS --max-open $MAX_OPEN
e2e_start_worker
e2e_start_worker
e2e_wait_workers 2

# Each case prints "ok   NAME" or "FAIL NAME: ..."; they count as checks here.
run_cases() {
    PY_DONE=no
    while IFS= read -r line; do
        echo "$line"
        case "$line" in
        "ok   "*) E2E_PASS=$((E2E_PASS + 1)) ;;
        "FAIL "*) E2E_FAIL=$((E2E_FAIL + 1)) ;;
        [0-9]*" passed, "*" failed") PY_DONE=yes ;;
        esac
    done < <(timeout 150 python3 "$HERE/http_hostile.py" "$HTTP_PORT" \
        "log=$E2E_TMP/broker.log" max_body=$MAX_BODY max_header=$MAX_HEADER \
        max_conns=$MAX_CONNS max_open=$MAX_OPEN header_to=$HEADER_TO \
        body_to=$BODY_TO idle_to=$IDLE_TO "$@" 2>&1)
}
run_cases

# A crash or the timeout would leave cases unrun: the summary line says not.
check "http_hostile.py ran to its summary line" yes "$PY_DONE"
check "broker alive after the hostile cases" yes \
    "$(kill -0 "$BROKER_PID" 2>/dev/null && echo yes || echo no)"
check "a valid request afterwards (curl)" '{"jsonrpc":"2.0","result":3,"id":1}' \
    "$(curl -s --max-time 5 -H 'Content-Type: application/json' \
        -d '{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}' "$HTTP_URL/rpc")"
check "workers still connected" 2 "$(e2e_workers)"
check "no worker lost" 0 "$(grep -c 'worker_lost' "$E2E_TMP/broker.log")"
check "no AddressSanitizer report" 0 "$(grep -c 'ERROR: AddressSanitizer' "$E2E_TMP/broker.log")"
check "no UBSan report" 0 "$(grep -c 'runtime error:' "$E2E_TMP/broker.log")"

# Signed: a signature in a chunked trailer is no signature.
command -v redis-server >/dev/null || { echo "redis-server is not installed"; exit 1; }
e2e_start_redis
echo "demo s3cr3t-s3cr3t-s3cr3t" > "$E2E_TMP/keys"
e2e_restart_broker --max-body $MAX_BODY --keys "$E2E_TMP/keys" --redis "redis://127.0.0.1:$RPORT"
e2e_wait_workers 2
run_cases key=demo secret=s3cr3t-s3cr3t-s3cr3t
check "http_hostile.py (signed) ran to its summary line" yes "$PY_DONE"
check "no AddressSanitizer report (signed)" 0 "$(grep -c 'ERROR: AddressSanitizer' "$E2E_TMP/broker.log")"
e2e_finish
