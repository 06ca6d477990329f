#!/usr/bin/env bash
# SIGHUP does not stop the broker or a worker. The broker reloads
# (event=signal signal=HUP action=reload, then event=reloaded: here, with no
# --keys and no CURVE, a reload of nothing; tests/e2e/reload.sh has the
# files); a worker has nothing to reload and logs event=signal signal=HUP
# action=ignored. Both keep serving (docs/CONFIG.md, "Signals").
source "$JRPC_E2E_LIB"
e2e_start_broker
e2e_start_worker
W=$LAST_PID
e2e_wait_workers 1
send() { printf '%s' "$1" | "$JRPC" send; }

kill -HUP "$BROKER_PID" "$W"
e2e_wait_for "grep -q 'event=reloaded ' '$E2E_TMP/broker.log' &&
              grep -q 'event=signal signal=HUP action=ignored' '$E2E_TMP/worker1.log'" 10
check "broker logged the HUP as a reload" 1 \
    "$(grep -c 'event=signal signal=HUP action=reload items=0' "$E2E_TMP/broker.log")"
check "broker: a reload of nothing (no file named at start)" 1 \
    "$(grep -c 'event=reloaded what=- detail="nothing to reload"' "$E2E_TMP/broker.log")"
check "worker logged the HUP" 1 "$(grep -c 'event=signal signal=HUP action=ignored' "$E2E_TMP/worker1.log")"
check "broker still running" 0 "$(kill -0 "$BROKER_PID" 2>/dev/null; echo $?)"
check "worker still running" 0 "$(kill -0 "$W" 2>/dev/null; echo $?)"
check "a call after SIGHUP is served" '{"jsonrpc":"2.0","result":3,"id":1}' \
    "$(send '{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}')"
# Still a clean stop afterwards: HUP did not count as a first stop signal.
kill -TERM "$W" "$BROKER_PID"
wait "$W"; ws=$?
wait "$BROKER_PID"; bs=$?
check "worker exits 0 on SIGTERM after a HUP" 0 "$ws"
check "broker exits 0 on SIGTERM after a HUP" 0 "$bs"
e2e_finish
