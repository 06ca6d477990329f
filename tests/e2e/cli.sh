#!/usr/bin/env bash
# End-to-end test of the `jrpc` CLI: exact stdout bytes and exit codes
# against a real broker and a real demo worker.
#
# lib.sh ($JRPC_E2E_LIB) exports JRPC_URL for the broker it starts, which
# the CLI reads itself, so the broker cases pass no --url.
# shellcheck source=lib.sh
source "$JRPC_E2E_LIB"

TMP=$E2E_TMP

# run [--stdin FILE] CMD...: runs CMD and sets RC, OUT and ERR (exact bytes,
# trailing newlines kept) and MS (wall time in milliseconds).
run() {
    local in=/dev/null t0 t1
    if [ "$1" = --stdin ]; then in=$2; shift 2; fi
    t0=$(date +%s%N)
    "$@" <"$in" >"$TMP/out" 2>"$TMP/err"
    RC=$?
    t1=$(date +%s%N)
    MS=$(( (t1 - t0) / 1000000 ))
    OUT=$(cat "$TMP/out"; printf x); OUT=${OUT%x}
    ERR=$(cat "$TMP/err"; printf x); ERR=${ERR%x}
}

DEAD_URL="tcp://127.0.0.1:$(e2e_free_port)"

# ---- no broker needed ----

run "$JRPC" --help
check "help: exit 0" 0 "$RC"
for word in call notify send --url --timeout-ms --key-id --secret --key-file JRPC_KEY_ID \
            JRPC_SECRET -32002 -32005 --help --version JRPC_URL "Exit status"; do
    case "$OUT" in
        *"$word"*) check "help mentions $word" yes yes ;;
        *)         check "help mentions $word" yes no ;;
    esac
done

run "$JRPC" --version
check "version: exit 0" 0 "$RC"

run "$JRPC" --bogus call subtract '[42,23]'
check "unknown flag: exit 2" 2 "$RC"
check "unknown flag: no stdout" "" "$OUT"
check "unknown flag: says so" $'jrpc: unknown option \'--bogus\'\nTry \'jrpc --help\' for more information.\n' "$ERR"

run "$JRPC" frobnicate
check "unknown command: exit 2" 2 "$RC"

run "$JRPC" call
check "call without METHOD: exit 2" 2 "$RC"

run "$JRPC" --timeout-ms -5 call subtract
check "bad --timeout-ms: exit 2" 2 "$RC"

# Signing key usage errors: exit 2 before any connection (a dead URL with
# the default 10 s timeout would take 10 s), and the secret is never echoed.
printf '# keys\n\nalice s3cr3t-alice subtract\nbob s3cr3t-bob # all methods\n' >"$TMP/keys.txt"
printf 'alice s3cr3t-alice\ncarol\n' >"$TMP/badkeys.txt"
# key_case NAME WANT_STDERR_PREFIX ARGS...: runs jrpc with no key in the
# environment and checks exit 2, no stdout, the message, no secret, no wait.
key_case() {
    local name=$1 want=$2; shift 2
    run env -u JRPC_KEY_ID -u JRPC_SECRET "$JRPC" --url "$DEAD_URL" "$@" call subtract '[42,23]'
    check "$name: exit 2" 2 "$RC"
    check "$name: no stdout" "" "$OUT"
    check "$name: message" yes "$([[ $ERR == "$want"* ]] && echo yes || echo "no: $ERR")"
    check "$name: secret not shown" yes "$([[ $ERR != *s3cr3t* ]] && echo yes || echo "no: $ERR")"
    check "$name: broker not contacted" yes "$( ((MS < 2000)) && echo yes || echo "no: ${MS} ms")"
}
key_case "--key-id without a secret" "jrpc: a key id (--key-id) needs a secret" --key-id alice
key_case "--secret without a key id" "jrpc: a secret (--secret) needs a key id" --secret s3cr3t-x
key_case "empty --key-id" "jrpc: --key-id wants a key id" --key-id '' --secret s3cr3t-x
key_case "--key-id with a space" "jrpc: the key id 'a b' has spaces" --key-id 'a b' --secret s3cr3t-x
key_case "unreadable --key-file" "jrpc: cannot read key file $TMP/nokeys.txt: No such file" \
    --key-file "$TMP/nokeys.txt"
key_case "key not in --key-file" "jrpc: key 'zed' is not in $TMP/keys.txt" \
    --key-file "$TMP/keys.txt" --key-id zed
key_case "malformed --key-file" "jrpc: $TMP/badkeys.txt:2: secret missing" --key-file "$TMP/badkeys.txt"
key_case "--key-file and --secret" "jrpc: --secret and --key-file are exclusive" \
    --key-file "$TMP/keys.txt" --secret s3cr3t-x
printf '# nothing here\n' >"$TMP/nokey.txt"
key_case "empty --key-file" "jrpc: no key in $TMP/nokey.txt" --key-file "$TMP/nokey.txt"
run env -u JRPC_SECRET JRPC_KEY_ID=alice "$JRPC" --url "$DEAD_URL" call subtract '[42,23]'
check "JRPC_KEY_ID without JRPC_SECRET: exit 2" 2 "$RC"
check "JRPC_KEY_ID without JRPC_SECRET: message" yes \
    "$([[ $ERR == 'jrpc: a key id ($JRPC_KEY_ID) needs a secret'* ]] && echo yes || echo "no: $ERR")"
run env -u JRPC_KEY_ID JRPC_SECRET=s3cr3t-x "$JRPC" --url "$DEAD_URL" call subtract '[42,23]'
check "JRPC_SECRET without JRPC_KEY_ID: exit 2" 2 "$RC"
check "JRPC_SECRET without JRPC_KEY_ID: secret not shown" yes \
    "$([[ $ERR != *s3cr3t* ]] && echo yes || echo "no: $ERR")"
# A good key gets as far as the network (and no further: nothing listens).
run env -u JRPC_KEY_ID -u JRPC_SECRET "$JRPC" --url "$DEAD_URL" --timeout-ms 300 \
    --key-file "$TMP/keys.txt" --key-id bob call subtract '[42,23]'
check "good --key-file: gets to the network" \
    "jrpc: timed out after 800 ms waiting for the broker at $DEAD_URL: no answer (is it running and reachable?); the broker was asked to answer within 300 ms"$'\n' "$ERR"

# Invalid PARAMS_JSON is refused before any connection: with a dead URL and
# the default 10 s timeout, contacting it would take 10 s.
run "$JRPC" --url "$DEAD_URL" call subtract '[42,'
check "invalid params: exit 2" 2 "$RC"
check "invalid params: no stdout" "" "$OUT"
check "invalid params: message" yes "$([[ $ERR == "jrpc: PARAMS_JSON is not valid JSON"* ]] && echo yes || echo "no: $ERR")"
check "invalid params: broker not contacted" yes "$( ((MS < 2000)) && echo yes || echo "no: ${MS} ms")"

run "$JRPC" --url "$DEAD_URL" call subtract '42'
check "scalar params: exit 2" 2 "$RC"

run "$JRPC" --url "$DEAD_URL" --timeout-ms 500 call subtract '[42,23]'
check "no broker: exit 2" 2 "$RC"
check "no broker: no stdout" "" "$OUT"
check "no broker: message" "jrpc: timed out after 1000 ms waiting for the broker at $DEAD_URL: no answer (is it running and reachable?); the broker was asked to answer within 500 ms"$'\n' "$ERR"
check "no broker: within the timeout" yes "$( ((MS >= 450 && MS < 2000)) && echo yes || echo "no: ${MS} ms")"

DEAD_HTTP="http://127.0.0.1:${DEAD_URL##*:}/rpc"
run "$JRPC" --url "$DEAD_HTTP" --timeout-ms 500 call subtract '[42,23]'
check "http, nothing listening: exit 2" 2 "$RC"
check "http, nothing listening: message" \
    "jrpc: cannot connect to $DEAD_HTTP: Connection refused"$'\n' "$ERR"

# ---- against a real broker and worker ----

e2e_start_broker
e2e_start_worker
e2e_wait_workers 1

run "$JRPC" call subtract '[42,23]'
check "call positional: exit 0" 0 "$RC"
check "call positional: result" $'19\n' "$OUT"
check "call positional: no stderr" "" "$ERR"

run "$JRPC" call subtract '{"subtrahend":23,"minuend":42}'
check "call named: exit 0" 0 "$RC"
check "call named: result" $'19\n' "$OUT"

run "$JRPC" call subtract '[23,42]'
check "call negative result" $'-19\n' "$OUT"

run "$JRPC" call no_such_method '[]'
check "unknown method: exit 1" 1 "$RC"
check "unknown method: error object" '{"code":-32601,"message":"Method not found"}'$'\n' "$OUT"

run "$JRPC" notify subtract '[42,23]'
check "notify: exit 0" 0 "$RC"
check "notify: no stdout" "" "$OUT"
check "notify: no stderr" "" "$ERR"

printf '%s' '{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":7}' >"$TMP/req.json"
run --stdin "$TMP/req.json" "$JRPC" send
check "send stdin: exit 0" 0 "$RC"
check "send stdin: raw answer" '{"jsonrpc":"2.0","result":19,"id":7}'$'\n' "$OUT"

run --stdin "$TMP/req.json" "$JRPC" send -
check "send '-': raw answer" '{"jsonrpc":"2.0","result":19,"id":7}'$'\n' "$OUT"

printf '%s' '{"jsonrpc":"2.0","method":"subtract","params":{"minuend":5,"subtrahend":3},"id":"x"}' >"$TMP/named.json"
run "$JRPC" send "$TMP/named.json"
check "send file: exit 0" 0 "$RC"
check "send file: raw answer" '{"jsonrpc":"2.0","result":2,"id":"x"}'$'\n' "$OUT"

printf '%s' '{"jsonrpc":"2.0","method":"subtract","params":[1,1]}' >"$TMP/notif.json"
run "$JRPC" send "$TMP/notif.json"
check "send notification: exit 0" 0 "$RC"
check "send notification: no output at all" "" "$OUT"

printf '%s' '{"jsonrpc":"2.0","method":"foobar,"params":"bar","baz]' >"$TMP/bad.json"
run "$JRPC" send "$TMP/bad.json"
check "send garbage: exit 0 (the broker judges)" 0 "$RC"
check "send garbage: a parse error answer" yes \
    "$([[ $OUT == *'"code":-32700'*$'}\n' ]] && echo yes || echo "no: $OUT")"

# jrpc bearer-key with an id the file already has (issue 36): refused, the
# file unchanged (a second line with the id would fail every load); an id
# only in a comment is not taken.
printf 'demo s3cr3t-s3cr3t-s3cr3t\n# agent2 was here\n' >"$TMP/bk"
run "$JRPC" bearer-key agent "$TMP/bk"
check "bearer-key new id: exit 0, a token" "0 43" "$RC $(printf %s "$OUT" | tr -d '\n' | wc -c)"
sum=$(sha256sum <"$TMP/bk")
for id in agent demo; do
    run "$JRPC" bearer-key "$id" "$TMP/bk"
    check "bearer-key existing id '$id': exit non-zero, no token" "yes" \
        "$([ "$RC" -ne 0 ] && echo yes)$OUT"
    check "... says why" yes "$([[ $ERR == *"key id '$id' is already in"* ]] && echo yes || echo "no: $ERR")"
    check "... the file unchanged" "$sum" "$(sha256sum <"$TMP/bk")"
done
run "$JRPC" bearer-key agent2 "$TMP/bk"
check "bearer-key id only in a comment: exit 0" 0 "$RC"
run "$JRPC_BIN/jrpc-broker" --keys "$TMP/bk" --check-config
check "the key file still loads (--check-config exit 0)" 0 "$RC"

e2e_finish
