#!/usr/bin/env bash
# ZeroMQ transport security (issue 4): CURVE on the client and worker
# sockets, and a ZAP handler that admits only the listed public keys.
# Listed peers work; an unlisted key (even with the right server key), a
# plain client and an unlisted worker get nothing; the broker refuses to run
# CURVE without allowlists.
source "$JRPC_E2E_LIB"
K="$E2E_TMP/keys"
mkdir -p "$K"
for who in broker worker client intruder; do
    "$JRPC" keygen "$K/$who" >"$K/$who.printed" 2>/dev/null
done
check "keygen prints the public key of FILE.pub" "public $(cat "$K/client.printed")" \
    "$(cat "$K/client.pub")"
check "keygen: the keypair is mode 600" 600 "$(stat -c %a "$K/client")"
"$JRPC" keygen "$K/client" >/dev/null 2>&1
check "keygen never overwrites a key" 2 $?
{ echo "# clients allowed in"; cat "$K/client.pub"; } >"$K/clients.allow"
cat "$K/worker.pub" >"$K/workers.allow"

"$JRPC_BIN/jrpc-broker" --http none --curve-secret "$K/broker" >"$E2E_TMP/refused.log" 2>&1
check "CURVE without allowlists: the broker refuses to start (exit 2)" 2 $?
check "... and says why" 1 "$(grep -c 'needs --client-keys and --worker-keys' "$E2E_TMP/refused.log")"

e2e_start_broker --heartbeat-ms 200 --curve-secret "$K/broker" \
    --client-keys "$K/clients.allow" --worker-keys "$K/workers.allow"
e2e_start_worker --heartbeat-ms 200 --curve-secret "$K/worker" --broker-key "$K/broker.pub"
e2e_wait_workers 1

CURVE_CLIENT=(--curve-secret "$K/client" --server-key "$K/broker.pub")
check "a listed client's call is answered" 3 "$("$JRPC" "${CURVE_CLIENT[@]}" call add '[1,2]')"

OUT=$("$JRPC" --curve-secret "$K/intruder" --server-key "$K/broker.pub" --timeout-ms 1000 \
      call add '[1,2]' 2>&1)
check "an unlisted client key gets no answer (exit 2)" 2 $?
check "... and the CLI says CURVE may be why" 1 "$(grep -c 'client-keys' <<<"$OUT")"
e2e_wait_for "grep -q 'event=zap_denied domain=clients' '$E2E_TMP/broker.log'" 5
check "... and the broker logs zap_denied for domain clients" 1 \
    "$(grep 'event=zap_denied domain=clients' "$E2E_TMP/broker.log" |
       grep -cF "key=$(cat "$K/intruder.printed")" | awk '{print ($1 >= 1)}')"

"$JRPC" --timeout-ms 1000 call add '[1,2]' >/dev/null 2>&1
check "a plain (non-CURVE) client gets no answer (exit 2)" 2 $?

"$JRPC" --url "http://127.0.0.1:1" "${CURVE_CLIENT[@]}" call add '[1,2]' >/dev/null 2>&1
check "CURVE flags with an http:// URL: usage error" 2 $?

e2e_start_worker --heartbeat-ms 200 --curve-secret "$K/intruder" --broker-key "$K/broker.pub"
e2e_wait_for "grep -q 'event=zap_denied domain=workers' '$E2E_TMP/broker.log'" 5
sleep 1.5
check "an unlisted worker is never registered" 1 "$(e2e_workers)"
check "... and the broker logs zap_denied for domain workers" 1 \
    "$(grep -c 'event=zap_denied domain=workers' "$E2E_TMP/broker.log" | awk '{print ($1 >= 1)}')"
check "the listed client still gets answers" 3 "$("$JRPC" "${CURVE_CLIENT[@]}" call add '[1,2]')"
e2e_finish
