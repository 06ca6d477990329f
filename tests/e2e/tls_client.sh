#!/usr/bin/env bash
# The client side of https:// (issue 15): the real `jrpc` CLI and jrpc-bench
# against a small HTTPS JSON-RPC stub (tls_stub.py: Python's ssl, answers
# result 3 to every request, logs each connection and whether its TLS
# session was resumed). No broker: what is tested is the client's TLS —
# verification (CA, host name, IP address), --insecure, mutual TLS over
# TLS 1.3 and 1.2, keep-alive, session resumption, streaming, the bench.
source "$JRPC_E2E_LIB"
BENCH="$JRPC_BIN/jrpc-bench"
STUB="$(dirname "$JRPC_E2E_LIB")/tls_stub.py"
C=$E2E_TMP/certs
bash "$(dirname "$JRPC_E2E_LIB")/tls_certs.sh" "$C" || { echo "tls_certs.sh failed"; exit 1; }
# A server certificate for a name that is neither 127.0.0.1 nor localhost,
# signed by the same CA: only the name check can refuse it.
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=other.example \
    -keyout "$C/other.key" -out "$C/other.csr" 2>/dev/null &&
    printf 'subjectAltName=DNS:other.example\nextendedKeyUsage=serverAuth\n' > "$C/other.ext" &&
    openssl x509 -req -in "$C/other.csr" -CA "$C/ca.pem" -CAkey "$C/ca.key" -CAcreateserial \
        -days 30 -extfile "$C/other.ext" -out "$C/other.pem" 2>/dev/null ||
    { echo "cannot make other.pem"; exit 1; }

# stub NAME ARGS...: starts tls_stub.py, sets PORT_<NAME> and LOG_<NAME>.
stub() {
    local name=$1; shift
    : > "$E2E_TMP/$name.log"
    python3 "$STUB" --log "$E2E_TMP/$name.log" "$@" > "$E2E_TMP/$name.port" 2> "$E2E_TMP/$name.stub.log" &
    E2E_PIDS+=($!)
    e2e_wait_for "[ -s '$E2E_TMP/$name.port' ]" 10 || { echo "stub $name did not start"; exit 1; }
    printf -v "PORT_$name" '%s' "$(cat "$E2E_TMP/$name.port")"
    printf -v "LOG_$name" '%s' "$E2E_TMP/$name.log"
}

# run CMD...: sets RC, OUT, ERR.
run() {
    "$@" < /dev/null > "$E2E_TMP/out" 2> "$E2E_TMP/err"
    RC=$?
    OUT=$(cat "$E2E_TMP/out"); ERR=$(cat "$E2E_TMP/err")
}
has() { case "$2" in *"$1"*) echo yes ;; *) echo "no: $2" ;; esac; }

stub plain --cert "$C/server.pem" --key "$C/server.key"
U="https://127.0.0.1:$PORT_plain"

# ---- verification ----
run "$JRPC" -u "$U" --cacert "$C/ca.pem" call add '[1,2]'
check "https with --cacert: exit 0" 0 "$RC"
check "https with --cacert: the exact result" "3" "$OUT"
run "$JRPC" -u "$U/v1" --cacert "$C/ca.pem" notify add '[1,2]'
check "https notify: exit 0, nothing printed" "0 " "$RC $OUT"
check "the path of the URL is the request target" 1 "$(grep -c '^req /v1$' "$LOG_plain")"
printf '%s' '{"jsonrpc":"2.0","method":"add","params":[1,2],"id":"x"}' > "$E2E_TMP/body.json"
run "$JRPC" -u "$U" --cacert "$C/ca.pem" send "$E2E_TMP/body.json"
check "https send: the exact bytes" '{"jsonrpc":"2.0","result":3,"id":"x"}' "$OUT"

run "$JRPC" -u "$U" call add '[1,2]'
check "no --cacert (system store): exit 2" 2 "$RC"
check "no --cacert: says the certificate did not verify" yes \
    "$(has "jrpc: TLS handshake with 127.0.0.1:$PORT_plain failed: certificate verify failed (" "$ERR")"
check "no --cacert: nothing on stdout" "" "$OUT"
run "$JRPC" -u "$U" --cacert "$C/rogue-ca.pem" call add '[1,2]'
check "another CA: exit 2 and a verify error" "2 yes" \
    "$RC $(has 'certificate verify failed' "$ERR")"
run "$JRPC" -u "$U" --insecure call add '[1,2]'
check "--insecure: exit 0 and the result" "0 3" "$RC $OUT"
run "$JRPC" -u "https://localhost:$PORT_plain" --cacert "$C/ca.pem" call add '[1,2]'
check "https://localhost (a name in the certificate): exit 0" "0 3" "$RC $OUT"
run "$JRPC" -u "$U" --cacert "$C/nope.pem" call add '[1,2]'
check "a missing --cacert file: exit 2, said in words" "2 yes" \
    "$RC $(has "cannot read CA file $C/nope.pem: No such file or directory" "$ERR")"
run "$JRPC" -u "http://127.0.0.1:$PORT_plain" --cacert "$C/ca.pem" call add '[1,2]'
check "--cacert with an http:// URL: usage error" "2 yes" "$RC $(has 'are for https:// URLs' "$ERR")"
run "$JRPC" -u "$U" --key "$C/client.key" call add '[1,2]'
check "--key without --cert: usage error" "2 yes" "$RC $(has 'give --cert FILE too' "$ERR")"
run "$JRPC" -u "http://127.0.0.1:$PORT_plain" call add '[1,2]'
check "http:// to the TLS port fails (exit 2)" 2 "$RC"

stub other --cert "$C/other.pem" --key "$C/other.key"
run "$JRPC" -u "https://127.0.0.1:$PORT_other" --cacert "$C/ca.pem" call add '[1,2]'
check "a certificate without the IP address: exit 2" 2 "$RC"
check "... says it does not match the IP address" yes \
    "$(has "certificate verify failed (the server's certificate does not match IP address 127.0.0.1)" "$ERR")"
run "$JRPC" -u "https://localhost:$PORT_other" --cacert "$C/ca.pem" call add '[1,2]'
check "a certificate without the host name: exit 2" 2 "$RC"
check "... says it does not match the host name" yes \
    "$(has "certificate verify failed (the server's certificate does not match host name localhost)" "$ERR")"
run "$JRPC" -u "https://localhost:$PORT_other" --insecure call add '[1,2]'
check "... and --insecure takes it" "0 3" "$RC $OUT"
check "the stub never served a request over a refused name" 1 "$(grep -c '^req' "$LOG_other")"

# ---- streaming over https (SSE) ----
printf '%s' '[{"jsonrpc":"2.0","method":"add","id":1},{"jsonrpc":"2.0","method":"add","id":2}]' \
    > "$E2E_TMP/batch.json"
run "$JRPC" -u "$U" --cacert "$C/ca.pem" send --stream "$E2E_TMP/batch.json"
check "send --stream over https: each answer on its line" \
    "$(printf '%s\n%s' '{"jsonrpc":"2.0","result":3,"id":1}' '{"jsonrpc":"2.0","result":3,"id":2}')" "$OUT"
check "send --stream over https: the end on stderr" 'jrpc: end {"answered":2,"timed_out":0}' "$ERR"

# ---- mutual TLS, over TLS 1.3 (refusal after the handshake) and 1.2 (during) ----
for v in 1.3 1.2; do
    name=mtls${v/./}
    stub "$name" --cert "$C/server.pem" --key "$C/server.key" --client-ca "$C/ca.pem" --tls-max "$v"
    port_var=PORT_$name; log_var=LOG_$name
    MU="https://127.0.0.1:${!port_var}"
    run "$JRPC" -u "$MU" --cacert "$C/ca.pem" call add '[1,2]'
    check "TLS $v, no --cert: exit 2" 2 "$RC"
    check "TLS $v, no --cert: says a client certificate is required" yes \
        "$(has '(the server requires a client certificate)' "$ERR")"
    run "$JRPC" -u "$MU" --cacert "$C/ca.pem" --cert "$C/client.pem" --key "$C/client.key" call add '[1,2]'
    check "TLS $v, --cert client.pem: exit 0 and the result" "0 3" "$RC $OUT"
    check "TLS $v, the server saw alice" 1 "$(grep -c 'cn=alice' "${!log_var}")"
    run "$JRPC" -u "$MU" --cacert "$C/ca.pem" --cert "$C/rogue.pem" --key "$C/rogue.key" call add '[1,2]'
    check "TLS $v, the rogue certificate: exit 2" 2 "$RC"
    check "TLS $v, the rogue certificate: says it was refused" yes \
        "$(has '(the server refused our client certificate)' "$ERR")"
    check "TLS $v, only alice's request was served" 1 "$(grep -c '^req' "${!log_var}")"
done
run "$JRPC" -u "$MU" --cacert "$C/ca.pem" --cert "$C/client.pem" call add '[1,2]'
check "--cert without its key: exit 2, said in words" "2 yes" \
    "$RC $(has "no private key in the client certificate file $C/client.pem" "$ERR")"
run "$JRPC" -u "$MU" --cacert "$C/ca.pem" --cert "$C/client.pem" --key "$C/rogue.key" call add '[1,2]'
check "--key of another certificate: exit 2" "2 yes" "$RC $(has "cannot use client key $C/rogue.key" "$ERR")"

# ---- keep-alive and resumption, through jrpc-bench (one connection, many calls) ----
json_num() { grep -o "\"$1\":[-0-9.e+]*" "$2" | head -n 1 | cut -d: -f2; }
stub ka --cert "$C/server.pem" --key "$C/server.key"
"$BENCH" --url "https://127.0.0.1:$PORT_ka" --cacert "$C/ca.pem" --connections 1 --batch 5 \
    --duration 0.5 --warmup 0 --json > "$E2E_TMP/ka.json" 2> "$E2E_TMP/ka.err"
check "bench over https: exit 0" 0 $?
check "bench over https: no transport failure, no id lost" "0 0" \
    "$(json_num transport_failures "$E2E_TMP/ka.json") $(json_num lost "$E2E_TMP/ka.json")"
nreq=$(grep -c '^req' "$LOG_ka")
check "keep-alive: many requests ($nreq) over 1 TLS connection" "1 1" \
    "$(grep -c '^conn' "$LOG_ka") $(( nreq > 5 ? 1 : 0 ))"

: > "$LOG_ka"
"$BENCH" --url "https://127.0.0.1:$PORT_ka" --cacert "$C/ca.pem" --connections 1 --batch 1 \
    --duration 0.5 --warmup 0 --handshakes resumed > "$E2E_TMP/hs.txt" 2>&1
check "--handshakes resumed: exit 0" 0 $?
check "--handshakes resumed: reports handshakes/s" 1 \
    "$(grep -cE '^  handshakes [0-9]+ \([0-9.]+/s\): each batch on a new connection, TLS session resumed$' "$E2E_TMP/hs.txt")"
nconn=$(grep -c '^conn' "$LOG_ka"); nres=$(grep -c '^conn resumed=1' "$LOG_ka")
check "--handshakes resumed: one connection per request ($nconn)" "$(grep -c '^req' "$LOG_ka")" "$nconn"
check "--handshakes resumed: all but the first resumed ($nres of $nconn)" "$((nconn - 1))" "$nres"

: > "$LOG_ka"
"$BENCH" --url "https://127.0.0.1:$PORT_ka" --cacert "$C/ca.pem" --connections 2 --batch 1 \
    --duration 0.5 --warmup 0 --handshakes full --json > "$E2E_TMP/hsf.json" 2>&1
check "--handshakes full: exit 0" 0 $?
check "--handshakes full: handshakes_per_s > 0" 1 \
    "$(awk -v v="$(json_num handshakes_per_s "$E2E_TMP/hsf.json")" 'BEGIN { print (v > 0) ? 1 : 0 }')"
check "--handshakes full: none resumed" "0" "$(grep -c '^conn resumed=1' "$LOG_ka")"

"$BENCH" --url "https://127.0.0.1:$PORT_ka" --connections 1 --duration 2 --warmup 0 \
    > "$E2E_TMP/nv.json" 2>&1
check "bench without --cacert: every batch fails, said why" "yes" \
    "$(has 'certificate verify failed' "$(cat "$E2E_TMP/nv.json")")"
"$BENCH" --url "tcp://127.0.0.1:1" --handshakes full > /dev/null 2>&1
check "bench --handshakes with tcp://: usage error" 2 $?
"$BENCH" --url "http://127.0.0.1:1" --insecure > /dev/null 2>&1
check "bench --insecure with http://: usage error" 2 $?

# --help and the docs agree on the option names.
help=$("$JRPC" --help)
for o in --cacert --insecure --cert --key https://; do
    check "jrpc --help mentions $o" yes "$(has "$o" "$help")"
done
bhelp=$("$BENCH" --help)
for o in --cacert --insecure --cert --key --handshakes https://; do
    check "jrpc-bench --help mentions $o" yes "$(has "$o" "$bhelp")"
done
e2e_finish
