#!/usr/bin/env bash
# The worker protocol's failure paths (PROTOCOL.md 2.1, 2.5), with scripted
# peers (jrpc-test-wire-peer) on the other side:
#  1. a rogue broker sends the real worker REQUESTs it cannot decode: it
#     answers REJECT naming each one by its number in the session (frames
#     of another version, and frames that are no REQUEST, are not counted),
#     -32603 for an item whose seq alone is readable, and serves the rest;
#  2. a rogue worker REJECTs a REQUEST to the real broker: the client gets
#     -32603 and the worker's credit (1) is back: the next call reaches it;
#  3. a rogue worker sends READY again mid-call: the broker ends the old
#     session as if the worker were lost (the call held: -32004) and serves
#     the new one;
#  4. PROBE (2.8): a rogue MCP worker answers the broker's questions about
#     its sessions: GET /mcp and DELETE follow its answers (200/204, 404,
#     503 without one); a worker without "probes" is asked nothing.
# MESSAGE frames (PROTOCOL.md 2.6) sent to a peer that did not ask for them
# (a worker without messages, a broker for a worker without "instance") are
# dropped: not counted as REQUESTs, not malformed, the session goes on.
# ~10 s.
# shellcheck source=lib.sh
source "$JRPC_E2E_LIB"
TMP=$E2E_TMP
PEER=$JRPC_BIN/jrpc-test-wire-peer

# ---- 1. a rogue broker, the real worker ---------------------------------------------
# The peer binds a port the kernel picks (a random one may be another
# test's) and says which in a file; the worker connects once it is there.
REQ=930102                                        # [1, 2, ...
"$PEER" --broker "tcp://127.0.0.1:*" --bound-file "$TMP/rb.ep" --timeout-ms 10000 ready \
    call:7 send:95010701c0c4027b7d send:95010700a178c0 \
    send:${REQ}919408a46563686fc100 \
    send:93020290 send:c1 \
    deep:8:1200 \
    send:${REQ}91940905c000 \
    send:${REQ}929400a46563686fc000940aa46563686fc000 \
    call:11 \
    recv:6 >"$TMP/rogue_broker.out" 2>&1 &
RB=$!
E2E_PIDS+=("$RB")
e2e_wait_for "[ -s '$TMP/rb.ep' ]" 10 || { echo "the rogue broker did not bind: $(cat "$TMP/rogue_broker.out")"; exit 1; }
"$JRPC_BIN/jrpc-worker" --connect "$(cat "$TMP/rb.ep")" >"$TMP/worker-rb.log" 2>&1 &
WRB=$!
E2E_PIDS+=("$WRB")
wait "$RB"; rc=$?
check "rogue broker: the worker answered every REQUEST, one way or another" "0
ready credit=64
reject request=2
reject request=3
reject request=5
response seq=11 result=[11]
response seq=7 result=[7]
response seq=9 error=-32603" "$rc
$(head -n 1 "$TMP/rogue_broker.out")
$(tail -n +2 "$TMP/rogue_broker.out" | LC_ALL=C sort)"
check "the worker logs each REJECT" 3 "$(grep -c 'event=request_rejected' "$TMP/worker-rb.log")"
kill "$WRB" 2>/dev/null; wait "$WRB" 2>/dev/null

# ---- 2. a rogue worker REJECTs: the client is answered, the credit is back ---------------
e2e_start_broker --heartbeat-ms 500 --timeout-ms 3000
# Before its REJECT of request 1, while it holds that call, it sends REJECTs
# that name no call it holds: request 2 (not sent yet), 2^64-1, and 0
# (malformed). None of them may free the call or crash anything.
"$PEER" --worker "$WORKERS_EP" --timeout-ms 10000 ready:1:echo request \
    send:93010602 send:930106cfffffffffffffffff send:93010600 send:95010701c0c4027b7d \
    reject request answer >"$TMP/rogue_worker.out" 2>&1 &
RW=$!
E2E_PIDS+=("$RW")
e2e_wait_workers 1
r=$("$JRPC" call echo '[1]'); rc=$?
check "the rejected call gets -32603" '1 {"code":-32603,"message":"Internal error"}' "$rc $r"
r=$("$JRPC" call echo '[2]'); rc=$?
check "the next call reaches the worker (credit 1 came back) and is answered" "0 [2]" "$rc $r"
wait "$RW"; rc=$?
check "the rogue worker saw both calls" "0
request 1 calls=1
request 2 calls=1" "$rc
$(cat "$TMP/rogue_worker.out")"
check "the broker logs the REJECT" 1 \
    "$(grep -c 'event=request_rejected worker=[^ ]* request=1 calls=1 inflight=0' "$TMP/broker.log")"
check "REJECTs naming no call held free nothing" "2 1" \
    "$(grep -c 'event=request_rejected worker=[^ ]* request=[0-9]* calls=0 inflight=1' "$TMP/broker.log") $(grep -c 'event=malformed_frame' "$TMP/broker.log")"
e2e_wait_workers 0

# ---- 3. READY again mid-call ---------------------------------------------------------
"$PEER" --worker "$WORKERS_EP" --timeout-ms 10000 ready:1:echo request ready:1:echo request answer \
    >"$TMP/ready_again.out" 2>&1 &
RA=$!
E2E_PIDS+=("$RA")
e2e_wait_workers 1
r=$("$JRPC" call echo '[3]'); rc=$?
check "READY again: the call held by the old session gets -32004" \
    '1 {"code":-32004,"message":"Worker failed"}' "$rc $r"
r=$("$JRPC" call echo '[4]'); rc=$?
check "READY again: the new session serves" "0 [4]" "$rc $r"
wait "$RA"; rc=$?
check "READY again: the worker's REQUESTs are counted from 1 again" "0
request 1 calls=1
request 1 calls=1" "$rc
$(cat "$TMP/ready_again.out")"
check "READY again: the broker ended the old session as a lost worker" 1 \
    "$(grep -c 'event=worker_lost reason=ready_again inflight=1 redispatched=0 failed=1' "$TMP/broker.log")"

# ---- 4. PROBE: a session's GET and DELETE asked of its worker first (2.8) -------------
# A worker whose READY has "instance" and "probes": a GET stream opens (200)
# only for a session it says it has, a DELETE is sent (204) only then; one
# it says it has not is 404 both ways; no answer in 2 s is 503. A worker
# without "probes" (one that predates them) is asked nothing: the GET opens
# and the DELETE is sent, as before.
E2E_HTTP=1 e2e_restart_broker --heartbeat-ms 500 --timeout-ms 3000
INST=00112233445566aa
LIVE=$INST-0000-000102030405060708090a0b0c0d0e0f
GONE=$INST-0001-f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff
gstat() { curl -s --max-time "${2:-1}" -o /dev/null -w '%{http_code}' -H 'Accept: text/event-stream' \
              -H "Mcp-Session-Id: $1" "$HTTP_URL/mcp"; }
dstat() { curl -s --max-time 5 -o /dev/null -w '%{http_code}' -X DELETE -H "Mcp-Session-Id: $1" \
              "$HTTP_URL/mcp"; }
"$PEER" --worker "$WORKERS_EP" --timeout-ms 10000 ready:1:initialize:$INST:probes \
    probe:live probe:gone probe:live message probe:gone probe:none idle:3000 \
    >"$TMP/probe.out" 2>&1 &
PP=$!
E2E_PIDS+=("$PP")
e2e_wait_workers 1
got="$(gstat "$LIVE") $(gstat "$GONE") $(dstat "$LIVE") $(dstat "$GONE") $(gstat "$LIVE" 5)"
check "probes: GET live 200, GET gone 404, DELETE live 204, DELETE gone 404, no answer 503" \
    "200 404 204 404 503" "$got"
wait "$PP"; rc=$?
check "probes: the worker was asked each time, and told of the DELETE it had the session of" "0
probe session=$LIVE
probe session=$GONE
probe session=$LIVE
message seq=0 session=$LIVE body=nil
probe session=$GONE
probe session=$LIVE" "$rc
$(cat "$TMP/probe.out")"
check "probes: an id longer than a bridge's asks no worker: 404" 404 "$(gstat "${LIVE}0")"
e2e_wait_workers 0
"$PEER" --worker "$WORKERS_EP" --timeout-ms 10000 ready:1:initialize:$INST message idle:1500 \
    >"$TMP/noprobe.out" 2>&1 &
PP=$!
E2E_PIDS+=("$PP")
e2e_wait_workers 1
check "no probes (a worker that predates them): GET opens 200, DELETE 204" "200 204" \
    "$(gstat "$GONE") $(dstat "$GONE")"
wait "$PP"; rc=$?
check "no probes: the DELETE reached the worker, nothing else did" "0
message seq=0 session=$GONE body=nil" "$rc
$(cat "$TMP/noprobe.out")"
e2e_finish
