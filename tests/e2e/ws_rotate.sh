#!/usr/bin/env bash
# A WebSocket does not outlive its rotated credential (issue 36, item 2;
# docs/SIGNING.md "Rotating keys", docs/WEBSOCKET.md "Close codes"). Raw
# sockets are opened with a signed upgrade (key sig) and a bearer token (key
# tok), with two keys that stay as they are (keep, keeptok) and one that is
# removed (gone); each gets a call answered. Then the key file replaces sig's
# secret and tok's token under the same ids and drops gone, and the broker
# gets SIGHUP: the sockets of sig, tok and gone get a close 1008 with its
# reason (logged event=ws_closed reason=credential_rotated / key_removed), a
# call sent on them afterwards is not run (no answer, the broker's WebSocket
# body count does not move); the sockets of keep and keeptok still answer;
# new sockets with the new secret and token work, with the old ones they are
# refused 401.
source "$JRPC_E2E_LIB"
HERE=$(dirname "$JRPC_E2E_LIB")
PY=python3; [ -x /usr/bin/python3 ] && PY=/usr/bin/python3
command -v redis-server >/dev/null || { echo "redis-server is not installed"; exit 1; }
T=$E2E_TMP
hash() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
put() { printf '%s' "$2" > "$1.new" && mv "$1.new" "$1"; }
OLD_SIG=sig-secret-old-0123456789 NEW_SIG=sig-secret-new-0123456789
OLD_TOK=tok-token-old-0123456789 NEW_TOK=tok-token-new-0123456789
KEEP=keep-secret-0123456789 KEEPTOK=keeptok-token-0123456789 GONE=gone-secret-0123456789
put "$T/keys" "sig $OLD_SIG
tok bearer-sha256:$(hash "$OLD_TOK")
keep $KEEP
keeptok bearer-sha256:$(hash "$KEEPTOK")
gone $GONE
"
e2e_start_redis
E2E_HTTP=1 e2e_start_broker --keys "$T/keys" --redis "redis://127.0.0.1:$RPORT" --admin 127.0.0.1:0
ADMIN=$(e2e_admin_url)
e2e_start_worker
e2e_wait_workers 1
WS=ws://127.0.0.1:$HTTP_PORT/rpc
# ws_bodies: every WebSocket body the broker took, whatever became of it
ws_bodies() { curl -s "$ADMIN/metrics" | awk '/^jrpc_bodies_total\{transport="ws"/ { n += $2 } END { print n + 0 }'; }
ANSWER1='before: {"jsonrpc":"2.0","result":2,"id":1}'
ANSWER2='after: {"jsonrpc":"2.0","result":3,"id":2}'

hold() { # NAME AUTH EXPECT: a raw socket in the background, its output in $T/NAME
    $PY "$HERE/ws_client.py" "$WS" hold "$2" "$T/go" "$3" > "$T/$1" 2>&1 &
    eval "PID_$1=$!"
}
hold sig "sign:sig:$OLD_SIG" close
hold tok "bearer:$OLD_TOK" close
hold gone "sign:gone:$GONE" close
hold keep "sign:keep:$KEEP" open
hold keeptok "bearer:$KEEPTOK" open
for n in sig tok gone keep keeptok; do
    e2e_wait_for "grep -q '^before:' '$T/$n'" 15
    check "$n: a call answered before the rotation" "$ANSWER1" "$(head -n 1 "$T/$n")"
done
B0=$(ws_bodies)

put "$T/keys" "sig $NEW_SIG
tok bearer-sha256:$(hash "$NEW_TOK")
keep $KEEP
keeptok bearer-sha256:$(hash "$KEEPTOK")
"
kill -HUP "$BROKER_PID"
e2e_wait_for "grep -q 'event=reloaded what=keys keys=4' '$T/broker.log'" 10
e2e_wait_for "[ \$(grep -c 'event=ws_closed ' '$T/broker.log') -ge 3 ]" 10
touch "$T/go"
for n in sig tok gone keep keeptok; do eval "wait \$PID_$n"; done
for n in sig tok gone keep keeptok; do sed "s/^/    $n: /" "$T/$n"; done

check "sig (signed upgrade, secret replaced): close 1008 with its reason" \
    "closed 1008 credential rotated: reconnect with the new one" "$(sed -n 2p "$T/sig")"
check "tok (bearer token replaced): close 1008 with its reason" \
    "closed 1008 credential rotated: reconnect with the new one" "$(sed -n 2p "$T/tok")"
check "gone (key removed): close 1008 with its reason" \
    "closed 1008 key removed: reconnect with a current key" "$(sed -n 2p "$T/gone")"
for n in sig tok gone; do
    check "$n: a call sent after the close gets no answer" "after: no answer" "$(sed -n 3p "$T/$n")"
done
check "keep (signed, unchanged): its socket still answers" "$ANSWER2" "$(sed -n 2p "$T/keep")"
check "keeptok (bearer, unchanged): its socket still answers" "$ANSWER2" "$(sed -n 2p "$T/keeptok")"
check "the broker ran the 2 calls of the unchanged sockets and none of the closed ones" 2 \
    "$(( $(ws_bodies) - B0 ))"
check "logged: event=ws_closed reason=credential_rotated key=sig, key=tok; key_removed key=gone" \
    "1 1 1" "$(grep -c 'event=ws_closed reason=credential_rotated key=sig ' "$T/broker.log") \
$(grep -c 'event=ws_closed reason=credential_rotated key=tok ' "$T/broker.log") \
$(grep -c 'event=ws_closed reason=key_removed key=gone ' "$T/broker.log")"
check "no other WebSocket was closed for its key" 3 "$(grep -c 'event=ws_closed ' "$T/broker.log")"

# New sockets: the new credentials work, the old ones are refused.
run() { $PY "$HERE/ws_client.py" "$WS" hold "$1" "$T/go" open 2>&1 | tr '\n' '|' | sed 's/|$//'; }
check "a new socket signed with sig's new secret works" "$ANSWER1|$ANSWER2" "$(run "sign:sig:$NEW_SIG")"
check "a new socket with tok's new token works" "$ANSWER1|$ANSWER2" "$(run "bearer:$NEW_TOK")"
check "a new socket signed with sig's old secret: 401" "refused HTTP/1.1 401 Unauthorized" \
    "$(run "sign:sig:$OLD_SIG")"
check "a new socket with tok's old token: 401" "refused HTTP/1.1 401 Unauthorized" \
    "$(run "bearer:$OLD_TOK")"

kill -TERM "$BROKER_PID"; wait "$BROKER_PID"
check "the broker exits 0 (ASan: nothing leaked)" 0 $?
e2e_finish
