#!/usr/bin/env bash
# The admin listener (--admin): /metrics has every family of the contract
# (docs/METRICS.md, which must list exactly those), in a format Prometheus'
# own parser accepts, and its counters move by exactly what the traffic
# did; /healthz; /readyz turns ready and unready as workers and Redis come
# and go, and says "draining" while the broker drains; 404, 405, 431 and
# garbage on the admin port.
source "$JRPC_E2E_LIB"
HERE=$(dirname "$JRPC_E2E_LIB")
DOC="$HERE/../../docs/METRICS.md"
SIGN="python3 $HERE/sign.py"
command -v redis-server >/dev/null || { echo "redis-server is not installed"; exit 1; }
# Debian's python3-prometheus-client is for Debian's python3 (not a pyenv one).
PYPROM=python3; [ -x /usr/bin/python3 ] && PYPROM=/usr/bin/python3
$PYPROM -c 'import prometheus_client' 2>/dev/null ||
    { echo "python3-prometheus-client is not installed (deploy/deps.sh)"; exit 1; }

e2e_start_redis
cat > "$E2E_TMP/keys" <<KEYS
demo      s3cr3t-s3cr3t-s3cr3t
limited   limited-secret-0123456789   add
KEYS
E2E_HTTP=1 e2e_start_broker --keys "$E2E_TMP/keys" --redis "redis://127.0.0.1:$RPORT" \
    --admin 127.0.0.1:0 --ready-methods add,echo
ADMIN=$(e2e_admin_url)
APORT=${ADMIN##*:}

# get PATH -> "STATUS BODY" (one line per body line)
get() { curl -s -o "$E2E_TMP/aout" -w '%{http_code}' "$ADMIN$1" > "$E2E_TMP/acode"
        echo "$(cat "$E2E_TMP/acode") $(cat "$E2E_TMP/aout")"; }
scrape() { curl -s "$ADMIN/metrics" > "$E2E_TMP/m"; }
# val 'name{labels}' -> its value in the last scrape (0 when absent)
val() { awk -v k="$1" '$1 == k { v = $2 } END { print v == "" ? 0 : v }' "$E2E_TMP/m"; }
delta() { echo $(( $(val "$1" | cut -d. -f1) - $(awk -v k="$1" '$1 == k { v = $2 } END { print v == "" ? 0 : v }' "$E2E_TMP/m0" | cut -d. -f1) )); }
mark() { scrape; cp "$E2E_TMP/m" "$E2E_TMP/m0"; }
post_signed() { # BODY [KEY SECRET] -> "STATUS BODY"
    printf '%s' "$1" > "$E2E_TMP/b"
    $SIGN --key "${2:-demo}" --secret "${3:-s3cr3t-s3cr3t-s3cr3t}" --body-file "$E2E_TMP/b" \
        > "$E2E_TMP/h"
    curl -s -o "$E2E_TMP/out" -w '%{http_code}' -H 'Content-Type: application/json' \
        -H @"$E2E_TMP/h" --data-binary @"$E2E_TMP/b" "$HTTP_URL/rpc" > "$E2E_TMP/code"
    echo "$(cat "$E2E_TMP/code") $(cat "$E2E_TMP/out")"
}
resend() { # the last signed body and headers again (a replay)
    curl -s -o "$E2E_TMP/out" -w '%{http_code}' -H 'Content-Type: application/json' \
        -H @"$E2E_TMP/h" --data-binary @"$E2E_TMP/b" "$HTTP_URL/rpc"
}

# A bad --admin address: a usage error (exit 2) at once, saying why.
bp=$(e2e_pick_port)
"$JRPC_BIN/jrpc-broker" --zmq "tcp://127.0.0.1:$bp" --workers "tcp://127.0.0.1:$((bp + 1))" \
    --http none --admin nothost > "$E2E_TMP/bad.log" 2>&1
check "--admin nothost: exit 2, 'not HOST:PORT'" "2 1" "$? $(grep -c 'not HOST:PORT' "$E2E_TMP/bad.log")"

# ---- probes before any worker ----
check "/healthz" "200 ok" "$(get /healthz)"
check "/readyz without a worker: 503" "503 not ready: no worker for method add" "$(get /readyz)"

# ---- the page: families, types, format ----
curl -s -D "$E2E_TMP/hdr" -o "$E2E_TMP/m" "$ADMIN/metrics"
check "/metrics: 200" 1 "$(grep -c '^HTTP/1.1 200 ' "$E2E_TMP/hdr")"
check "/metrics: content type" 1 \
    "$(grep -ic '^Content-Type: text/plain; version=0.0.4; charset=utf-8' "$E2E_TMP/hdr")"
cat > "$E2E_TMP/expected" <<'FAM'
jrpc_build_info gauge
jrpc_bodies_total counter
jrpc_calls_total counter
jrpc_errors_total counter
jrpc_batch_size histogram
jrpc_call_queue_seconds histogram
jrpc_call_worker_seconds histogram
jrpc_call_seconds histogram
jrpc_bodies_open gauge
jrpc_calls_inflight gauge
jrpc_calls_queued gauge
jrpc_workers_connected gauge
jrpc_worker_credit gauge
jrpc_rate_limited_calls_total counter
jrpc_redis_up gauge
jrpc_redis_rtt_seconds histogram
jrpc_redis_failures_total counter
jrpc_replays_total counter
jrpc_signature_failures_total counter
jrpc_acl_denied_total counter
jrpc_late_answers_total counter
jrpc_redispatched_total counter
jrpc_calls_lost_total counter
jrpc_hedges_total counter
jrpc_hedges_won_total counter
jrpc_worker_frames_malformed_total counter
jrpc_http_connections gauge
jrpc_methods gauge
jrpc_worker_ready_refused_total counter
jrpc_methods_refused_total counter
jrpc_worker_ejections_total counter
jrpc_ws_connections gauge
jrpc_queued_bytes gauge
jrpc_queue_pushbacks_total counter
jrpc_queue_refused_total counter
jrpc_ws_closes_total counter
jrpc_tls_handshakes_total counter
jrpc_tls_failures_total counter
jrpc_reloads_total counter
jrpc_reload_last_success_timestamp_seconds gauge
jrpc_method_calls_total counter
jrpc_method_errors_total counter
jrpc_method_worker_seconds histogram
jrpc_method_call_seconds histogram
jrpc_worker_inflight gauge
jrpc_worker_answered_total counter
jrpc_worker_errors_total counter
jrpc_worker_timeouts_total counter
jrpc_worker_ejected_total counter
jrpc_worker_last_heard_timestamp_seconds gauge
FAM
check "every family of the contract, with its type" "$(sort "$E2E_TMP/expected")" \
    "$(sed -n 's/^# TYPE //p' "$E2E_TMP/m" | sort)"
check "a HELP line for each" 50 "$(grep -c '^# HELP jrpc_[a-z_]* [^ ]' "$E2E_TMP/m")"
check "docs/METRICS.md lists exactly these families" "$(cut -d' ' -f1 "$E2E_TMP/expected" | sort)" \
    "$(grep -o '^| `jrpc_[a-z_]*`' "$DOC" | tr -d '|` ' | sort)"

# Prometheus' own parser, plus what it lets through: each sample belongs to
# the family announced last (HELP then TYPE, once each), no duplicate
# series, histogram buckets cumulative and ending in +Inf = _count.
cat > "$E2E_TMP/validate.py" <<'PY'
import re, sys
from prometheus_client.parser import text_string_to_metric_families
text = open(sys.argv[1]).read()
fams = list(text_string_to_metric_families(text))
assert len(fams) == 50, len(fams)
cur, seen, series = None, set(), set()
for line in text.splitlines():
    m = re.match(r'# (HELP|TYPE) (\S+) (.+)$', line)
    if m:
        if m.group(1) == 'HELP':
            assert m.group(2) not in seen, 'family twice: ' + line
            seen.add(m.group(2)); cur = m.group(2)
        else:
            assert m.group(2) == cur, 'TYPE without HELP: ' + line
        continue
    assert not line.startswith('#') and line, 'stray line: %r' % line
    name = re.match(r'[a-z_]+', line).group(0)
    assert name == cur or name in (cur + '_bucket', cur + '_sum', cur + '_count'), line
    key = line.rsplit(' ', 1)[0]
    assert key not in series, 'duplicate series: ' + key
    series.add(key)
    float(line.rsplit(' ', 1)[1])
for f in fams:
    if f.type != 'histogram':
        continue
    # one series per label set besides le (per-method histograms have many)
    key = lambda s: tuple(sorted((k, v) for k, v in s.labels.items() if k != 'le'))
    for k in set(key(s) for s in f.samples):
        b = [s for s in f.samples if s.name.endswith('_bucket') and key(s) == k]
        assert b[-1].labels['le'] == '+Inf', f.name
        assert all(x.value <= y.value for x, y in zip(b, b[1:])), f.name
        cnt = [s for s in f.samples if s.name.endswith('_count') and key(s) == k][0]
        assert cnt.value == b[-1].value, f.name
print('valid')
PY
check "the page parses (prometheus_client) and is well formed" valid \
    "$($PYPROM "$E2E_TMP/validate.py" "$E2E_TMP/m" 2>&1 | tail -n 1)"

# ---- readiness with workers ----
e2e_start_worker --credit 7
W1=$LAST_PID
e2e_wait_workers 1
check "/readyz with a worker serving add and echo: 200" "200 ready" "$(get /readyz)"
scrape
check "jrpc_workers_connected 1" 1 "$(val jrpc_workers_connected)"
check "jrpc_worker_credit: one worker, credit 7" "1 7" \
    "$(grep -c '^jrpc_worker_credit{worker="[0-9a-f]*"} ' "$E2E_TMP/m") \
$(grep '^jrpc_worker_credit{' "$E2E_TMP/m" | awk '{ print $2 }')"
check "jrpc_redis_up 1" 1 "$(val jrpc_redis_up)"

# A worker's READY "name" is its label; a name given twice gets the routing
# id appended. Two raw workers: READY [1,1,5,["zz"],{"name":"w.x"}]. (A name
# outside [A-Za-z0-9._:@/-]{1,64} is no label: e2e_workers_hostile.)
for i in 1 2; do
    "$JRPC_BIN/jrpc-test-zmq-probe" --type dealer --connect "$WORKERS_EP" --no-reply \
        --hold-ms 2500 @hex:9501010591a27a7a81a46e616d65a3772e78 >/dev/null 2>&1 &
    E2E_PIDS+=($!)
done
e2e_wait_for 'scrape; [ "$(val jrpc_workers_connected)" = 3 ]' 5
check "jrpc_worker_credit by READY name; a repeated name made distinct" \
    'jrpc_worker_credit{worker="w.x"} 5|jrpc_worker_credit{worker="w.x@' \
    "$(grep -o '^jrpc_worker_credit{worker="w\.x[^ ]* [0-9]*' "$E2E_TMP/m" | sed -E 's/@[0-9a-f]+"\} 5$/@/' | sort | tr '\n' '|' | sed 's/|$//')"
check "... and that page parses too" valid \
    "$($PYPROM "$E2E_TMP/validate.py" "$E2E_TMP/m" 2>&1 | tail -n 1)"
e2e_wait_for 'scrape; [ "$(val jrpc_workers_connected)" = 1 ]' 10

# ---- counters move with traffic, by exactly what was sent ----
mark
check "3 signed calls answered" 200 \
    "$(post_signed '[{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1},{"jsonrpc":"2.0","method":"add","params":[3,4],"id":2},{"jsonrpc":"2.0","method":"echo","params":["x"],"id":3}]' | cut -d' ' -f1)"
scrape
check "calls_total{http,result} +3" 3 "$(delta 'jrpc_calls_total{transport="http",outcome="result"}')"
check "calls_total{http,error} +0" 0 "$(delta 'jrpc_calls_total{transport="http",outcome="error"}')"
check "bodies_total{http,ok} +1" 1 "$(delta 'jrpc_bodies_total{transport="http",outcome="ok"}')"
check "batch_size: one body of 3 (le=2 +0, le=5 +1)" "0 1 1" \
    "$(delta 'jrpc_batch_size_bucket{le="2"}') $(delta 'jrpc_batch_size_bucket{le="5"}') $(delta jrpc_batch_size_count)"
check "batch_size_sum +3" 3 "$(delta jrpc_batch_size_sum)"
check "call_seconds, queue, worker: +3 observations each" "3 3 3" \
    "$(delta jrpc_call_seconds_count) $(delta jrpc_call_queue_seconds_count) $(delta jrpc_call_worker_seconds_count)"
check "redis_rtt_seconds: one claim" 1 "$(delta jrpc_redis_rtt_seconds_count)"

mark
post_signed '{"jsonrpc":"2.0","method":"no_such_method","id":9}' > /dev/null
scrape
check "a -32601: errors_total{code=-32601} +1" 1 "$(delta 'jrpc_errors_total{code="-32601"}')"
check "... and calls_total{http,error} +1" 1 "$(delta 'jrpc_calls_total{transport="http",outcome="error"}')"

mark
check "a replay: 409" 409 "$(resend)"
scrape
check "jrpc_replays_total +1" 1 "$(delta jrpc_replays_total)"
check "bodies_total{http,replayed} +1" 1 "$(delta 'jrpc_bodies_total{transport="http",outcome="replayed"}')"
check "errors_total{code=-32005} +1" 1 "$(delta 'jrpc_errors_total{code="-32005"}')"

mark
post_signed '{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}' demo wrong-secret-wrong-secret >/dev/null
scrape
check "a bad signature: jrpc_signature_failures_total +1" 1 "$(delta jrpc_signature_failures_total)"
check "bodies_total{http,unauthorized} +1" 1 "$(delta 'jrpc_bodies_total{transport="http",outcome="unauthorized"}')"

mark
post_signed '[{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1},{"jsonrpc":"2.0","method":"echo","params":[1],"id":2}]' limited limited-secret-0123456789 >/dev/null
post_signed '[1,' >/dev/null
scrape
check "an ACL refusal: jrpc_acl_denied_total +1" 1 "$(delta jrpc_acl_denied_total)"
check "a body that is not JSON: bodies_total{http,invalid} +1, -32700 +1" "1 1" \
    "$(delta 'jrpc_bodies_total{transport="http",outcome="invalid"}') $(delta 'jrpc_errors_total{code="-32700"}')"

mark
check "CLI over ZeroMQ, signed" 3 \
    "$("$JRPC" --url "$URL" --key-id demo --secret s3cr3t-s3cr3t-s3cr3t call add '[1,2]')"
scrape
check "calls_total{zmq,result} +1, bodies_total{zmq,ok} +1" "1 1" \
    "$(delta 'jrpc_calls_total{transport="zmq",outcome="result"}') $(delta 'jrpc_bodies_total{transport="zmq",outcome="ok"}')"
check "nothing open, nothing in flight" "0 0 0" \
    "$(val jrpc_bodies_open) $(val jrpc_calls_inflight) $(val jrpc_calls_queued)"

# jrpc_http_connections follows an open connection.
exec 3<>"/dev/tcp/127.0.0.1/$HTTP_PORT"
e2e_wait_for 'scrape; [ "$(val jrpc_http_connections)" = 1 ]' 5
check "jrpc_http_connections 1 while a client holds one" 1 "$(val jrpc_http_connections)"
exec 3>&-
e2e_wait_for 'scrape; [ "$(val jrpc_http_connections)" = 0 ]' 5
check "jrpc_http_connections 0 once it closed" 0 "$(val jrpc_http_connections)"

# ---- the admin HTTP surface ----
check "404 for another path" 404 "$(get /nope | cut -d' ' -f1)"
check "405 for POST /metrics" 405 \
    "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$ADMIN/metrics")"
check "405 carries Allow" 1 "$(curl -s -i -X DELETE "$ADMIN/readyz" | grep -c '^Allow: GET, HEAD')"
check "HEAD /metrics: 200, no body" "200 0" \
    "$(curl -s -I -o /dev/null -w '%{http_code} %{size_download}' "$ADMIN/metrics")"
check "keep-alive: two requests on one connection" "ok
ready" "$(curl -s "$ADMIN/healthz" "$ADMIN/readyz")"
check "pipelined requests answered in order" 2 \
    "$(printf 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' |
        timeout 5 bash -c "exec 4<>/dev/tcp/127.0.0.1/$APORT; cat >&4; cat <&4" | grep -c '^HTTP/1.1 200 OK')"
garbage() { timeout 5 bash -c "exec 4<>/dev/tcp/127.0.0.1/$APORT; cat >&4; cat <&4" 2>/dev/null | head -n 1 | tr -d '\r'; }
check "garbage: 400" "HTTP/1.1 400 Bad Request" "$(printf '\x00\x01\xff garbage\r\n\r\n' | garbage)"
check "a request with a body: 400" "HTTP/1.1 400 Bad Request" \
    "$(printf 'GET /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello' | garbage)"
check "headers past 4 KiB: 431" "HTTP/1.1 431 Request Header Fields Too Large" \
    "$(python3 -c "import sys; sys.stdout.write('GET /metrics HTTP/1.1\r\nX: ' + 'a' * 5000)" | garbage)"
head -c 20000 /dev/urandom | garbage > /dev/null
# 64 idle connections fill the admin listener; the 65th is closed at once;
# once they go, it answers again.
fds=()
for i in $(seq 64); do exec {fd}<>"/dev/tcp/127.0.0.1/$APORT"; fds+=("$fd"); done
sleep 0.2
check "past 64 admin connections: closed at once" 000 \
    "$(curl -s -m 5 -o /dev/null -w '%{http_code}' "$ADMIN/healthz")"
for fd in "${fds[@]}"; do exec {fd}>&-; done
e2e_wait_for '[ "$(get /healthz)" = "200 ok" ]' 5
check "after all that, /healthz 200 and the broker alive" "200 ok 1" \
    "$(get /healthz) $(kill -0 "$BROKER_PID" && echo 1)"

# ---- readiness follows workers and Redis ----
kill -9 "$W1"; wait "$W1" 2>/dev/null
e2e_wait_for '[ "$(get /readyz)" = "503 not ready: no worker for method add" ]' 15
check "worker killed: /readyz 503" "503 not ready: no worker for method add" "$(get /readyz)"
e2e_start_worker --name demo-w2 --credit 9
e2e_wait_for '[ "$(get /readyz)" = "200 ready" ]' 15
check "a worker again: /readyz 200" "200 ready" "$(get /readyz)"
curl -s "$ADMIN/metrics" > "$E2E_TMP/m2"
check "jrpc-worker --name labels its credit" 'jrpc_worker_credit{worker="demo-w2"} 9' \
    "$(grep '^jrpc_worker_credit{worker="demo-w2"}' "$E2E_TMP/m2")"

kill -9 "$REDIS_PID"; wait "$REDIS_PID" 2>/dev/null
e2e_wait_for '[ "$(get /readyz)" = "503 not ready: redis down" ]' 15
check "Redis stopped: /readyz 503" "503 not ready: redis down" "$(get /readyz)"
mark
check "a signed body while Redis is down: 503" 503 \
    "$(post_signed '{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}' | cut -d' ' -f1)"
scrape
check "jrpc_redis_up 0" 0 "$(val jrpc_redis_up)"
check "bodies_total{http,unavailable} +1, redis failures moved" "1 1" \
    "$(delta 'jrpc_bodies_total{transport="http",outcome="unavailable"}') $([ "$(delta jrpc_redis_failures_total)" -ge 1 ] && echo 1)"
e2e_start_redis
e2e_wait_for '[ "$(get /readyz)" = "200 ready" ]' 20
check "Redis back: /readyz 200" "200 ready" "$(get /readyz)"

# ---- drain: /readyz says so until the listener closes with the broker ----
# Redis came back empty: the broker refuses bodies signed before the loss +
# --skew (docs/SIGNING.md), so this one is signed 299 s ahead, 3 s after.
sleep 3
printf '%s' '{"jsonrpc":"2.0","method":"sleep","params":{"ms":1500},"id":1}' > "$E2E_TMP/bs"
$SIGN --key demo --secret s3cr3t-s3cr3t-s3cr3t --body-file "$E2E_TMP/bs" --ts-offset 299 > "$E2E_TMP/hs"
curl -s -o "$E2E_TMP/slow" -H 'Content-Type: application/json' -H @"$E2E_TMP/hs" \
    --data-binary @"$E2E_TMP/bs" "$HTTP_URL/rpc" &
SLOW=$!
e2e_wait_for 'scrape; [ "$(val jrpc_calls_inflight)" = 1 ]' 5
kill -TERM "$BROKER_PID"
e2e_wait_for '[ "$(get /readyz)" = "503 not ready: draining" ]' 5
check "draining: /readyz 503" "503 not ready: draining" "$(get /readyz)"
wait "$SLOW"
check "the call in flight still answered" 1 "$(grep -c '"result"' "$E2E_TMP/slow")"
e2e_wait_for '! kill -0 $BROKER_PID 2>/dev/null' 10
check "after the drain the admin port is closed" 000 \
    "$(curl -s -o /dev/null -w '%{http_code}' "$ADMIN/healthz")"
wait "$BROKER_PID"; check "the broker exited 0" 0 $?

e2e_finish
