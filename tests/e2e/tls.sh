#!/usr/bin/env bash
# HTTPS on the broker's HTTP listener (issue 15, docs/TLS.md): curl,
# openssl s_client and Python's ssl as clients, certificates made fresh by
# tls_certs.sh. What is offered (TLS 1.2/1.3, AEAD ciphers, ALPN), what is
# refused (TLS 1.1, non-ECDHE and CBC ciphers, plaintext, garbage, a
# handshake that never ends), keep-alive, pipelining, large bodies across
# many records, session resumption, SSE and wss://, signed and unsigned
# calls, mutual TLS with the certificate's name as the key (its ACL), and
# the hostile HTTP cases again over TLS.
source "$JRPC_E2E_LIB"
E2E_HTTP=1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=python3; [ -x /usr/bin/python3 ] && PY=/usr/bin/python3   # Debian's, with python3-websockets
C=$E2E_TMP/certs
bash "$HERE/tls_certs.sh" "$C" || { check "certificates made" 0 1; e2e_finish; }
ADD='{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}'
ADD_OK='{"jsonrpc":"2.0","result":3,"id":1}'
cp "$C/chain.pem" "$C/live.pem"; cp "$C/server.key" "$C/live.key"   # (SIGHUP re-reads these)
TLS=(--tls-cert "$C/live.pem" --tls-key "$C/live.key")

for flag in --tls-cert --tls-key --tls-client-ca --tls-handshake-timeout-ms; do
    check "jrpc-broker --help lists $flag" yes \
        "$("$JRPC_BIN/jrpc-broker" --help | grep -q -- "$flag " && echo yes || echo no)"
done

# Bad files: refused at start with exit 2 and words that say which and why.
bad() { "$JRPC_BIN/jrpc-broker" --http 127.0.0.1:0 "$@" --check-config 2>&1; echo "exit=$?"; }
out=$(bad --tls-cert "$C/nope.pem" --tls-key "$C/server.key")
check "a missing certificate: exit 2" exit=2 "$(tail -1 <<<"$out")"
check "... names the option and the file" 1 "$(grep -c -- "--tls-cert $C/nope.pem" <<<"$out")"
out=$(bad --tls-cert "$C/server.pem" --tls-key "$C/server2.key")
check "a key of another certificate: exit 2" exit=2 "$(tail -1 <<<"$out")"
check "... says they do not match" 1 "$(grep -c 'mismatch' <<<"$out")"
out=$(bad --tls-cert "$C/server.pem")
check "--tls-cert without --tls-key: exit 2" exit=2 "$(tail -1 <<<"$out")"

# The admin listener stays plaintext: off loopback with TLS on, a warning.
"$JRPC_BIN/jrpc-broker" --zmq tcp://127.0.0.1:0 --workers tcp://127.0.0.1:0 --http 127.0.0.1:0 \
    --admin 0.0.0.0:0 "${TLS[@]}" >"$E2E_TMP/admin_warn.log" 2>&1 &
AW=$!
e2e_wait_for "grep -q 'event=started' '$E2E_TMP/admin_warn.log'" 10
kill "$AW"; wait "$AW" 2>/dev/null
check "admin on 0.0.0.0 with TLS on: event=admin_plaintext warning" 1 \
    "$(grep -c 'level=warn .*event=admin_plaintext admin=0.0.0.0:0' "$E2E_TMP/admin_warn.log")"

e2e_start_broker "${TLS[@]}" --tls-handshake-timeout-ms 1500 --admin 127.0.0.1:0 \
    --log-level debug --max-body 2097152
e2e_start_worker
e2e_start_worker
e2e_wait_workers 2
U=https://127.0.0.1:$HTTP_PORT
post() { curl -sS --max-time 10 -H 'Content-Type: application/json' "$@"; }

check "curl --cacert: a call" "$ADD_OK" "$(post --cacert "$C/ca.pem" -d "$ADD" "$U/rpc")"
check "curl: HTTP/1.1 over ALPN" "1.1" \
    "$(post --cacert "$C/ca.pem" -d "$ADD" -o /dev/null -w '%{http_version}' "$U/rpc")"
check "curl --http2 still gets HTTP/1.1" "1.1" \
    "$(post --http2 --cacert "$C/ca.pem" -d "$ADD" -o /dev/null -w '%{http_version}' "$U/rpc")"
post -d "$ADD" "$U/rpc" >/dev/null 2>&1
check "curl without the CA: certificate refused (exit 60)" 60 "$?"
check "plaintext HTTP to the TLS port: 400 with words" \
    '400 {"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request","data":"this port speaks HTTPS: use https://"},"id":null}' \
    "$(post -d "$ADD" -w ' %{http_code}' "http://127.0.0.1:$HTTP_PORT/rpc" | awk '{print $NF, $0}' | sed 's/ [0-9]*$//')"
check "plaintext OPTIONS to the TLS port: the same 400" 400 \
    "$(curl -s -X OPTIONS -o /dev/null -w '%{http_code}' "http://127.0.0.1:$HTTP_PORT/rpc")"
check "keep-alive: 3 calls, 1 connection (curl)" 1 \
    "$(post --cacert "$C/ca.pem" -d "$ADD" "$U/rpc" -d "$ADD" "$U/rpc" -d "$ADD" "$U/rpc" \
        -o /dev/null -w '%{num_connects}\n' | awk '{s+=$1} END {print s}')"
check "a batch over TLS" '[{"jsonrpc":"2.0","result":3,"id":1},{"jsonrpc":"2.0","result":["hello",5],"id":2}]' \
    "$(post --cacert "$C/ca.pem" -d "[$ADD,{\"jsonrpc\":\"2.0\",\"method\":\"get_data\",\"id\":2}]" "$U/rpc")"
check "SSE over TLS: the answer, then the end event" \
    'data: {"jsonrpc":"2.0","result":3,"id":1}|event: end|data: {"answered":1,"timed_out":0}' \
    "$(post -N --cacert "$C/ca.pem" -H 'Accept: text/event-stream' -d "[$ADD]" "$U/rpc" |
        grep -E '^(data|event):' | paste -sd'|')"

# Our own clients: the jrpc CLI and jrpc-bench (libjrpc-client over TLS).
check "jrpc call over https:// (--cacert)" 3 \
    "$("$JRPC" --url "$U/rpc" --cacert "$C/ca.pem" call add '[1,2]' 2>&1)"
out=$("$JRPC" --url "$U/rpc" call add '[1,2]' 2>&1); rc=$?
check "jrpc without the CA: exit 2, the verify error in words" "2 1" \
    "$rc $(grep -c 'TLS handshake with 127.0.0.1:[0-9]* failed: certificate verify failed' <<<"$out")"
check "jrpc send --stream over https://" '{"jsonrpc":"2.0","result":3,"id":1}' \
    "$(printf '[%s]' "$ADD" | "$JRPC" --url "$U/rpc" --cacert "$C/ca.pem" send --stream 2>/dev/null)"
"$JRPC_BIN/jrpc-bench" --url "$U/rpc" --cacert "$C/ca.pem" --connections 2 --duration 1 \
    --handshakes full >"$E2E_TMP/bench.out" 2>&1
check "jrpc-bench --handshakes full over https://: exit 0, a handshake rate" "0 1" \
    "$? $(grep -cE 'handshakes [1-9][0-9]* \([0-9.]+/s\)' "$E2E_TMP/bench.out")"

# openssl s_client: what is offered and what is refused.
sc() { timeout 10 openssl s_client -connect "127.0.0.1:$HTTP_PORT" -CAfile "$C/ca.pem" "$@" </dev/null 2>&1; }
out=$(sc -tls1_2)
check "TLS 1.2: offered, ECDHE with AES-GCM" 1 \
    "$(grep -cE '^ *Cipher *: ECDHE-(ECDSA|RSA)-AES128-GCM-SHA256' <<<"$out")"
check "TLS 1.2: verified" 1 "$(grep -c 'Verify return code: 0 (ok)' <<<"$out")"
out=$(sc -tls1_3)
check "TLS 1.3: offered" 1 "$(grep -c 'New, TLSv1.3' <<<"$out")"
check "ALPN http/1.1 (s_client)" 1 "$(sc -alpn h2,http/1.1 | grep -c 'ALPN protocol: http/1.1')"
for v in tls1 tls1_1; do
    out=$(sc -$v -cipher 'DEFAULT@SECLEVEL=0')
    check "-$v refused" 0 "$(grep -c '^New, TLS' <<<"$out")"
done
for c in AES128-SHA256 ECDHE-ECDSA-AES128-SHA ECDHE-ECDSA-AES128-SHA256 AES128-GCM-SHA256; do
    out=$(sc -tls1_2 -cipher "$c")
    check "TLS 1.2 cipher $c refused" 0 "$(grep -c '^New, TLS' <<<"$out")"
done
sess=$E2E_TMP/sess.pem
sc -tls1_2 -sess_out "$sess" >/dev/null
check "session resumption (TLS 1.2 ticket)" 1 "$(sc -tls1_2 -sess_in "$sess" | grep -c '^Reused, TLS')"

# Python's ssl: the rest of the well-behaved client, and the broken ones.
pycase() {
    while IFS= read -r line; do
        echo "$line"
        case "$line" in
        "ok   "*) E2E_PASS=$((E2E_PASS + 1)) ;;
        "FAIL "*) E2E_FAIL=$((E2E_FAIL + 1)) ;;
        esac
    done < <(timeout 60 "$PY" "$HERE/tls_cases.py" "$HTTP_PORT" "$C/ca.pem" "$@" 2>&1)
}
pycase keepalive
pycase pipeline 16
pycase large 1500
pycase resume
pycase truncated 1500
pycase garbage
pycase wss
check "plaintext, garbage and the truncated handshake counted as TLS failures" yes \
    "$(curl -s "http://$(grep 'comp=admin event=listening' "$E2E_TMP/broker.log" | grep -o 'admin://[^ ]*' | cut -c9-)/metrics" |
        awk '/^jrpc_tls_failures_total/ {print ($2 >= 3 ? "yes" : $2)}')"
check "broker alive" yes "$(kill -0 "$BROKER_PID" 2>/dev/null && echo yes || echo no)"

# SIGHUP: a new certificate for new connections; open ones go on; a bad
# file is refused and the one in force stays.
serial() { sc </dev/null | openssl x509 -noout -serial 2>/dev/null; }
want1=$(openssl x509 -noout -serial -in "$C/server.pem"); want2=$(openssl x509 -noout -serial -in "$C/server2.pem")
check "before SIGHUP: the first certificate" "$want1" "$(serial)"
timeout 60 "$PY" "$HERE/tls_cases.py" "$HTTP_PORT" "$C/ca.pem" across "$E2E_TMP/reloaded" \
    >"$E2E_TMP/across.out" 2>&1 &
ACROSS=$!
sleep 1
cp "$C/server2.pem" "$C/live.pem"; cat "$C/ca.pem" >> "$C/live.pem"; cp "$C/server2.key" "$C/live.key"
kill -HUP "$BROKER_PID"
e2e_wait_for "grep -q 'event=reloaded what=tls-cert' '$E2E_TMP/broker.log'" 10
check "SIGHUP: reloaded, logged" 1 "$(grep -c 'event=reloaded what=tls-cert' "$E2E_TMP/broker.log")"
check "after SIGHUP: new connections get the new certificate" "$want2" "$(serial)"
touch "$E2E_TMP/reloaded"
wait "$ACROSS"
check "the connection opened before SIGHUP answered before and after it (2 ok)" "0 2" \
    "$? $(grep -c '^ok ' "$E2E_TMP/across.out")"
echo "not a certificate" > "$C/live.pem"
kill -HUP "$BROKER_PID"
e2e_wait_for "grep -q 'event=reload_failed what=tls-cert' '$E2E_TMP/broker.log'" 10
check "a bad certificate file: reload_failed, with the file" 1 \
    "$(grep 'event=reload_failed what=tls-cert' "$E2E_TMP/broker.log" | grep -c "live.pem")"
check "... and the certificate in force stays" "$want2" "$(serial)"
check "... calls go on" "$ADD_OK" "$(post --cacert "$C/ca.pem" -d "$ADD" "$U/rpc")"
cp "$C/chain.pem" "$C/live.pem"; cp "$C/server.key" "$C/live.key"

# The hostile HTTP cases again, over TLS (http_hostile.py tls=CA).
e2e_restart_broker "${TLS[@]}" --max-body 65536 --max-header-bytes 8192 --header-timeout-ms 1000 \
    --body-timeout-ms 3000 --idle-timeout-ms 2000 --max-conns 64 --max-open 4
e2e_wait_workers 2
hostile() {   # hostile NAME ARGS...: http_hostile.py over TLS, its lines counted as checks
    local name=$1 done_line=no line; shift
    while IFS= read -r line; do
        case "$line" in
        "ok   "*) E2E_PASS=$((E2E_PASS + 1)) ;;
        "FAIL "*) E2E_FAIL=$((E2E_FAIL + 1)); echo "$line" ;;
        [0-9]*" passed, "*" failed") done_line=yes; echo "$name over TLS: $line" ;;
        esac
    done < <(timeout 150 python3 "$HERE/http_hostile.py" "$HTTP_PORT" "log=$E2E_TMP/broker.log" \
        "tls=$C/ca.pem" "$@" 2>&1)
    check "http_hostile.py ($name) over TLS ran to its summary line" yes "$done_line"
}
hostile hostile max_body=65536 max_header=8192 max_conns=64 max_open=4 header_to=1000 \
    body_to=3000 idle_to=2000

# Signed and unsigned calls; mutual TLS with the certificate's name as the key.
command -v redis-server >/dev/null || { echo "redis-server is not installed"; exit 1; }
e2e_start_redis
SECRET=s3cr3t-s3cr3t-s3cr3t
printf 'alice %s add\nsigner %s\n' "$SECRET" "$SECRET" > "$E2E_TMP/keys"
e2e_restart_broker "${TLS[@]}" --keys "$E2E_TMP/keys" --redis "redis://127.0.0.1:$RPORT" \
    --max-body 65536
e2e_wait_workers 2
printf '%s' "$ADD" > "$E2E_TMP/body"
python3 "$HERE/sign.py" --key signer --secret "$SECRET" --body-file "$E2E_TMP/body" > "$E2E_TMP/h"
check "signed call over TLS" "$ADD_OK" \
    "$(post --cacert "$C/ca.pem" -H @"$E2E_TMP/h" --data-binary @"$E2E_TMP/body" "$U/rpc")"
check "the same signed body again: 409 (replay)" 409 \
    "$(post --cacert "$C/ca.pem" -H @"$E2E_TMP/h" --data-binary @"$E2E_TMP/body" -o /dev/null \
        -w '%{http_code}' "$U/rpc")"
check "unsigned over TLS, no client certificate: 401" 401 \
    "$(post --cacert "$C/ca.pem" -d "$ADD" -o /dev/null -w '%{http_code}' "$U/rpc")"
# Python's ssl, signed: the hostile cases' signed half over TLS (signatures
# made by http_hostile.py itself; a trailer is no signature).
hostile "signed hostile" max_body=65536 key=signer secret="$SECRET"

e2e_restart_broker "${TLS[@]}" --tls-client-ca "$C/ca.pem" --keys "$E2E_TMP/keys" \
    --redis "redis://127.0.0.1:$RPORT"
e2e_wait_workers 2
post --cacert "$C/ca.pem" -d "$ADD" "$U/rpc" >/dev/null 2>&1
rc=$?
check "mutual TLS: no client certificate, no connection (curl exit 56 or 35)" yes \
    "$([ $rc = 56 ] || [ $rc = 35 ] && echo yes || echo "no ($rc)")"
post --cacert "$C/ca.pem" --cert "$C/rogue.pem" --key "$C/rogue.key" -d "$ADD" "$U/rpc" >/dev/null 2>&1
rc=$?
check "mutual TLS: a certificate of another CA refused" yes \
    "$([ $rc = 56 ] || [ $rc = 35 ] && echo yes || echo "no ($rc)")"
MT=(--cacert "$C/ca.pem" --cert "$C/client.pem" --key "$C/client.key")
check "mutual TLS: CN=alice is key alice, unsigned call allowed by its ACL" "$ADD_OK" \
    "$(post "${MT[@]}" -d "$ADD" "$U/rpc")"
check "... twice (no nonce: TLS is the replay protection)" "$ADD_OK" \
    "$(post "${MT[@]}" -d "$ADD" "$U/rpc")"
check "mutual TLS: alice's ACL refuses echo (-32002 in its slot)" -32002 \
    "$(post "${MT[@]}" -d '{"jsonrpc":"2.0","method":"echo","params":[1],"id":2}' "$U/rpc" |
        "$PY" -c 'import json,sys; print(json.load(sys.stdin)["error"]["code"])')"
pycase wss "$C/client.pem,$C/client.key"   # the upgrade authenticated by the certificate
check "mutual TLS with the jrpc CLI (--cert/--key): served as alice" 3 \
    "$("$JRPC" --url "$U/rpc" --cacert "$C/ca.pem" --cert "$C/client.pem" --key "$C/client.key" \
        call add '[1,2]' 2>&1)"
check "mutual TLS: CN=bob names no key, unsigned: 401" 401 \
    "$(post --cacert "$C/ca.pem" --cert "$C/client-bob.pem" --key "$C/client-bob.key" -d "$ADD" \
        -o /dev/null -w '%{http_code}' "$U/rpc")"
python3 "$HERE/sign.py" --key signer --secret "$SECRET" --body-file "$E2E_TMP/body" > "$E2E_TMP/h"
check "mutual TLS: CN=bob with a signed body: served" "$ADD_OK" \
    "$(post --cacert "$C/ca.pem" --cert "$C/client-bob.pem" --key "$C/client-bob.key" \
        -H @"$E2E_TMP/h" --data-binary @"$E2E_TMP/body" "$U/rpc")"
check "no AddressSanitizer report" 0 "$(grep -c 'ERROR: AddressSanitizer' "$E2E_TMP/broker.log")"
check "no UBSan report" 0 "$(grep -c 'runtime error:' "$E2E_TMP/broker.log")"
e2e_finish
