#!/usr/bin/env bash
# Where each body's time went (issue 33 section 2): the Server-Timing
# header on /rpc single and batch answers, consistent (every phase at most
# total, the phases of the one path summed at most total plus rounding,
# worker about a sleep's 200 ms); over ZeroMQ in the reply header when the
# header frame asks ("timing": true), and the reply byte-identical when it
# does not; in the SSE end event (a field of its own) and the NDJSON trailer; exposed to a CORS
# origin; auth and redis for signed bodies; none at all with
# --server-timing off; and jrpc-bench's breakdown table (text and JSON,
# HTTP and ZeroMQ).
source "$JRPC_E2E_LIB"
PY=/usr/bin/python3   # Debian's: zmq and msgpack
BENCH="$JRPC_BIN/jrpc-bench"
ORIGIN=http://app.example

E2E_HTTP=1 e2e_start_broker --cors-origin "$ORIGIN"
e2e_start_worker
e2e_wait_workers 1

SLEEP='{"jsonrpc":"2.0","method":"sleep","params":{"ms":200},"id":1}'
ADD='{"jsonrpc":"2.0","method":"add","params":[1,2],"id":2}'

# Checks one Server-Timing value: prints "ok", or what is wrong. $2: the
# least worker time (ms) it must show, or - for none required.
cat > "$E2E_TMP/st.py" <<'PY'
import re, sys
v, min_worker = sys.argv[1], sys.argv[2]
ph = {}
for item in v.split(","):
    m = re.fullmatch(r"\s*([a-z]+);dur=(\d+\.\d{3})\s*", item)
    if not m:
        print("not name;dur=N.NNN:", repr(item)); sys.exit()
    ph[m.group(1)] = float(m.group(2))
order = ["parse", "auth", "redis", "queue", "worker", "gather", "total"]
if [k for k in order if k in ph] != list(ph):
    print("unknown phase or out of order:", list(ph)); sys.exit()
if "total" not in ph or "parse" not in ph:
    print("no total or parse:", v); sys.exit()
t = ph["total"]
if any(d > t for d in ph.values()):
    print("a phase above total:", v); sys.exit()
if sum(d for k, d in ph.items() if k != "total") > t + 0.003 * len(ph):
    print("the phases add up to more than total:", v); sys.exit()
if min_worker != "-" and not ph.get("worker", 0) >= float(min_worker):
    print("worker below", min_worker, ":", v); sys.exit()
print("ok")
PY
st_ok() { "$PY" "$E2E_TMP/st.py" "$1" "$2"; }
# header NAME FILE -> the value of that header (the first), CR removed.
header() { grep -i "^$1:" "$2" | head -n 1 | cut -d: -f2- | sed 's/^ //' | tr -d '\r'; }

post() {   # post FILE BODY [curl args...]: the whole answer, head and body, in FILE
    local f=$1 body=$2; shift 2
    curl -s -i --raw -m 20 -H 'Content-Type: application/json' "$@" -d "$body" \
        "$HTTP_URL/rpc" > "$f"
}

# --- HTTP: a single call and a batch ---
post "$E2E_TMP/single.txt" "$SLEEP"
check "single: 200" 1 "$(grep -c '^HTTP/1.1 200' "$E2E_TMP/single.txt")"
ST=$(header Server-Timing "$E2E_TMP/single.txt")
check "single: Server-Timing consistent, worker >= 190 ms ($ST)" ok "$(st_ok "$ST" 190)"
check "single: no CORS lines without an Origin" 0 "$(grep -ci '^Timing-Allow-Origin' "$E2E_TMP/single.txt")"

post "$E2E_TMP/batch.txt" "[$SLEEP,$ADD,{\"jsonrpc\":\"2.0\",\"method\":\"nope\",\"id\":3}]"
ST=$(header Server-Timing "$E2E_TMP/batch.txt")
check "batch: Server-Timing consistent, the slowest call's worker >= 190 ms ($ST)" ok \
    "$(st_ok "$ST" 190)"
check "batch: every answer there" 1 "$(grep -c '"result":200,"id":1},{"jsonrpc":"2.0","result":3,"id":2}' "$E2E_TMP/batch.txt")"

# A body no worker sees (method unknown): parse and total only.
post "$E2E_TMP/nope.txt" '{"jsonrpc":"2.0","method":"nope","id":3}'
ST=$(header Server-Timing "$E2E_TMP/nope.txt")
check "no worker: phases parse and total only ($ST)" "parse total" \
    "$(echo "$ST" | tr ',' '\n' | sed 's/;.*//; s/ //g' | tr '\n' ' ' | sed 's/ $//')"

# CORS: a listed origin may read it (fetch and Resource Timing).
post "$E2E_TMP/cors.txt" "$ADD" -H "Origin: $ORIGIN"
check "CORS: Access-Control-Expose-Headers names Server-Timing" "Server-Timing" \
    "$(header Access-Control-Expose-Headers "$E2E_TMP/cors.txt")"
check "CORS: Timing-Allow-Origin is the origin" "$ORIGIN" "$(header Timing-Allow-Origin "$E2E_TMP/cors.txt")"
check "CORS: the header itself" ok "$(st_ok "$(header Server-Timing "$E2E_TMP/cors.txt")" -)"

# --- streamed: the SSE end event, the NDJSON trailer ---
post "$E2E_TMP/sse.txt" "[$SLEEP,$ADD]" -H 'Accept: text/event-stream'
END=$(sed -n '/^event: end$/,/^$/p' "$E2E_TMP/sse.txt" | tr -d '\r')
check "SSE: the end event's summary as before, its timing a field of its own" \
    'event: end|server-timing: |data: {"answered":2,"timed_out":0}|' \
    "$(echo "$END" | sed 's/^server-timing: .*/server-timing: /' | tr '\n' '|')"
ST=$(echo "$END" | sed -n 's/^server-timing: //p')
check "SSE: the end event's server-timing consistent ($ST)" ok "$(st_ok "$ST" 190)"
post "$E2E_TMP/ndjson.txt" "$ADD" -H 'Accept: application/x-ndjson'
check "NDJSON: the trailer announced" 1 \
    "$(grep -c '^Trailer: X-JRPC-Answered, X-JRPC-Timed-Out, Server-Timing' "$E2E_TMP/ndjson.txt")"
ST=$(sed -n '/^0\r$/,$p' "$E2E_TMP/ndjson.txt" | grep -i '^Server-Timing:' | cut -d: -f2- | sed 's/^ //' | tr -d '\r')
check "NDJSON: the Server-Timing trailer ($ST)" ok "$(st_ok "$ST" -)"

# --- ZeroMQ: asked in the header frame, absent otherwise ---
cat > "$E2E_TMP/zq_client.py" <<'PY'
import sys, zmq, msgpack
url, body, mode = sys.argv[1], sys.argv[2].encode(), sys.argv[3]
s = zmq.Context().socket(zmq.DEALER)
s.setsockopt(zmq.LINGER, 0)
s.connect(url)
head = {"none": None, "other": {"timeout_ms": 5000}, "timing": {"timing": True},
        "stream": {"timing": True, "stream": True}, "off": {"timing": False}}[mode]
s.send_multipart([b""] + ([msgpack.packb(head)] if head is not None else []) + [body])
if not s.poll(20000):
    print("no reply"); sys.exit()
while True:
    f = s.recv_multipart()
    if len(f) == 2:
        print("one-frame", f[1].decode()); break
    h = msgpack.unpackb(f[1], raw=False)
    if "pos" in h:
        continue
    print("head", " ".join(sorted(h)), "|", h.get("server_timing", "") , "|", f[2].decode()); break
PY
zq() { "$PY" "$E2E_TMP/zq_client.py" "$URL" "$@"; }
R='[{"jsonrpc":"2.0","result":200,"id":1},{"jsonrpc":"2.0","result":3,"id":2}]'
check "ZeroMQ, no header frame: the reply as ever (one frame)" "one-frame $R" "$(zq "[$SLEEP,$ADD]" none)"
check "ZeroMQ, a header frame without timing: one frame" "one-frame $R" "$(zq "[$SLEEP,$ADD]" other)"
check "ZeroMQ, \"timing\": false: one frame" "one-frame $R" "$(zq "[$SLEEP,$ADD]" off)"
OUT=$(zq "[$SLEEP,$ADD]" timing)
check "ZeroMQ, \"timing\": true: a reply head with server_timing, the same JSON" \
    "head server_timing | $R" "$(echo "$OUT" | sed 's/| [^|]* |/|/')"
ST=$(echo "$OUT" | cut -d'|' -f2 | sed 's/^ //; s/ $//')
check "ZeroMQ: server_timing consistent ($ST)" ok "$(st_ok "$ST" 190)"
OUT=$(zq "[$SLEEP,$ADD]" stream)
check "ZeroMQ streamed: the end head carries it" "head end server_timing" "$(echo "$OUT" | cut -d'|' -f1 | sed 's/ $//')"
check "ZeroMQ streamed: consistent" ok "$(st_ok "$(echo "$OUT" | cut -d'|' -f2 | sed 's/^ //; s/ $//')" 190)"

# --- jrpc-bench: the breakdown beside the client's latency ---
for u in "$URL" "$HTTP_URL"; do
    "$BENCH" --url "$u" --batch 10 --sleep-calls 1 --sleep-ms 20 --connections 2 --duration 1 \
        --warmup 0.2 > "$E2E_TMP/bench.txt" 2> "$E2E_TMP/bench.err"
    check "jrpc-bench $u: exit 0" 0 $?
    check "jrpc-bench $u: the table's heading" 1 \
        "$(grep -c '^  server ms  *p50  *p90  *p99  *p99.9  *max  *mean$' "$E2E_TMP/bench.txt")"
    for row in parse queue worker gather total; do
        check "jrpc-bench $u: row $row has six numbers" 1 \
            "$(grep -cE "^  $row +([0-9]+\.[0-9]{3} +){5}[0-9]+\.[0-9]{3}$" "$E2E_TMP/bench.txt")"
    done
    check "jrpc-bench $u: worker p50 about the 20 ms sleep" 1 \
        "$(awk '$1 == "worker" { print ($2 >= 19 && $2 < 200) ? 1 : 0 }' "$E2E_TMP/bench.txt")"
    check "jrpc-bench $u: no 'call' row for whole replies" 0 "$(grep -c '^  call ' "$E2E_TMP/bench.txt")"
done
"$BENCH" --url "$HTTP_URL" --batch 5 --connections 1 --duration 0.5 --warmup 0.1 --json \
    > "$E2E_TMP/bench.json" 2> "$E2E_TMP/bench.err"
check "jrpc-bench --json: server_timing_us with each phase's percentiles and mean" 1 \
    "$(grep -cE '"server_timing_us":\{"batches":[1-9][0-9]*,"unreadable":0,"parse":\{"p50":[0-9]+,"p90":[0-9]+,"p99":[0-9]+,"p99_9":[0-9]+,"max":[0-9]+,"mean":[0-9.]+\}.*"total":\{"p50":[0-9]+.*"client_mean":[0-9.]+,"outside_mean":[0-9.]+\}' "$E2E_TMP/bench.json")"
if command -v gnuplot > /dev/null; then
    "$BENCH" --url "$URL" --batch 5 --connections 1 --duration 0.5 --warmup 0.1 \
        --plot-series "$E2E_TMP/series.tsv" > /dev/null 2>&1
    "$BENCH" --url "$URL" --batch 20 --connections 2 --duration 0.5 --warmup 0.1 \
        --plot-series "$E2E_TMP/series.tsv" --plot "$E2E_TMP/timing.png" > /dev/null 2>&1
    check "jrpc-bench --plot-series: one row per run" 2 "$(wc -l < "$E2E_TMP/series.tsv")"
    check "jrpc-bench --plot with the stacked panel: a PNG" "89504e470d0a1a0a" \
        "$(head -c 8 "$E2E_TMP/timing.png" 2>/dev/null | od -An -tx1 | tr -d ' \n')"
fi

# --- signed bodies: the signature check (auth) and the nonce's claim in
# Redis (redis) appear, and the phases still add up ---
if command -v redis-server > /dev/null; then
    e2e_start_redis
    printf 'demo s3cr3t-s3cr3t-s3cr3t\n' > "$E2E_TMP/keys"
    E2E_HTTP=1 e2e_restart_broker --keys "$E2E_TMP/keys" --redis "redis://127.0.0.1:$RPORT"
    e2e_wait_workers 1
    for u in "$URL" "$HTTP_URL"; do
        "$BENCH" --url "$u" --key-file "$E2E_TMP/keys" --batch 5 --connections 1 --duration 0.5 \
            --warmup 0.1 > "$E2E_TMP/signed.txt" 2> "$E2E_TMP/signed.err"
        check "signed $u: jrpc-bench exit 0" 0 $?
        for row in parse auth redis worker total; do
            check "signed $u: row $row" 1 \
                "$(grep -cE "^  $row +([0-9]+\.[0-9]{3} +){5}[0-9]+\.[0-9]{3}$" "$E2E_TMP/signed.txt")"
        done
    done
else
    echo "skip signed: redis-server is not installed"
fi

# --- --server-timing off: nothing at all ---
E2E_HTTP=1 e2e_restart_broker --server-timing off
e2e_wait_workers 1
post "$E2E_TMP/off.txt" "$ADD"
check "off: answered 200" 1 "$(grep -c '^HTTP/1.1 200' "$E2E_TMP/off.txt")"
check "off: no Server-Timing header" 0 "$(grep -ci '^Server-Timing' "$E2E_TMP/off.txt")"
check "off: ZeroMQ asked, one frame as before" "one-frame $R" "$(zq "[$SLEEP,$ADD]" timing)"
post "$E2E_TMP/offsse.txt" "$ADD" -H 'Accept: text/event-stream'
check "off: the SSE end event as before" 1 "$(grep -c '^data: {"answered":1,"timed_out":0}' "$E2E_TMP/offsse.txt")"

e2e_finish
