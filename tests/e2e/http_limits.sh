#!/usr/bin/env bash
# The HTTP front under resource pressure: out of file descriptors (no busy
# loop on accept, served again afterwards), and SIGTERM with a call in flight
# over HTTP (answered with Connection: close, then exit 0).
source "$JRPC_E2E_LIB"
E2E_HTTP=1
# A low descriptor limit for the broker only (the shell's is restored).
old_nofile=$(ulimit -Sn)
ulimit -Sn 64
e2e_start_broker
ulimit -Sn "$old_nofile"
e2e_start_worker
e2e_wait_workers 1
ADD='{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}'
cpu() { awk '{print $14 + $15}' "/proc/$BROKER_PID/stat"; }

# Hold 100 idle connections open: far more than 64 descriptors allow.
python3 - "$HTTP_PORT" > "$E2E_TMP/hold.out" 2>&1 <<'PY' &
import socket, sys, time
socks = []
for i in range(100):
    try:
        s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2)
        socks.append(s)
    except OSError:
        pass
print("held", len(socks), flush=True)
time.sleep(3)
PY
HOLDER=$!
# The holder prints once every connect was tried; it then holds for 3 s.
e2e_wait_for 'grep -q held "$E2E_TMP/hold.out"' 30
check "the broker did run out of descriptors (>= 60 of 64 open)" yes \
    "$(n=$(ls "/proc/$BROKER_PID/fd" | wc -l); [ "$n" -ge 60 ] && echo yes || echo "no: $n")"
c0=$(cpu)
sleep 1.5
c1=$(cpu)
check "out of descriptors: the broker does not spin (CPU ticks in 1.5 s < 30)" yes \
    "$( [ $((c1 - c0)) -lt 30 ] && echo yes || echo "no: $((c1 - c0)) ticks")"
check "out of descriptors: the broker is alive" 0 "$(kill -0 "$BROKER_PID"; echo $?)"
wait "$HOLDER"
check "descriptors back: served again" 3 "$("$JRPC" --url "$HTTP_URL" call add '[1,2]')"

# SIGTERM with an HTTP call in flight: answered (Connection: close), exit 0.
curl -s -i -H 'Content-Type: application/json' \
    -d '{"jsonrpc":"2.0","method":"sleep","params":{"ms":700},"id":5}' "$HTTP_URL/rpc" \
    > "$E2E_TMP/inflight" &
CURL=$!
sleep 0.3
kill -TERM "$BROKER_PID"
wait "$BROKER_PID"; status=$?
wait "$CURL"
check "SIGTERM: the call in flight is answered" 1 \
    "$(grep -c '^{"jsonrpc":"2.0","result":700,"id":5}$' "$E2E_TMP/inflight")"
check "SIGTERM: that answer closes the connection" 1 \
    "$(grep -ci '^Connection: close' "$E2E_TMP/inflight")"
check "SIGTERM: exit status 0" 0 "$status"
check "SIGTERM: no new connections afterwards" 7 \
    "$(curl -s -o /dev/null "$HTTP_URL/rpc"; echo $?)"
e2e_finish
