#!/usr/bin/env bash
# jrpc-bench smoke test: closed and open loop over tcp:// and http:// with
# --json; the report complete and every id back exactly once; the human
# table; --plot draws a PNG (when gnuplot is installed) or refuses before the
# run (when it is not); --ignore-ids says so; a bad flag is a usage error.
source "$JRPC_E2E_LIB"
BENCH="$JRPC_BIN/jrpc-bench"

E2E_HTTP=1 e2e_start_broker
e2e_start_worker
e2e_wait_workers 1

# json_num FIELD FILE -> the number after "FIELD": in the one-line JSON.
json_num() { grep -o "\"$1\":[-0-9.e+]*" "$2" | head -n 1 | cut -d: -f2; }

# bench NAME ARGS... : runs jrpc-bench --json, checks exit 0 and the counters.
bench() {
    local name=$1; shift
    "$BENCH" --duration 2 --warmup 0.5 --json "$@" > "$E2E_TMP/$name.json" 2> "$E2E_TMP/$name.err"
    check "$name: exit status" 0 $?
    check "$name: calls_per_s > 0" 1 \
        "$(awk -v v="$(json_num calls_per_s "$E2E_TMP/$name.json")" 'BEGIN { print (v > 0) ? 1 : 0 }')"
    check "$name: lost" 0 "$(json_num lost "$E2E_TMP/$name.json")"
    check "$name: duplicated" 0 "$(json_num duplicated "$E2E_TMP/$name.json")"
    check "$name: unknown ids" 0 "$(json_num unexpected "$E2E_TMP/$name.json")"
    check "$name: no transport failures" 0 "$(json_num transport_failures "$E2E_TMP/$name.json")"
    check "$name: every call expected an id back" "$(json_num calls "$E2E_TMP/$name.json")" \
        "$(json_num ids_expected "$E2E_TMP/$name.json")"
    check "$name: the report is complete" 1 "$(complete "$E2E_TMP/$name.json")"
}

# complete FILE -> 1 when the JSON report has every field a user reads.
complete() {
    local f=$1 k
    for k in url mode batch connections duration_s batches calls batches_per_s calls_per_s \
             ids_checked errors transport_failures rejected_batches ids_expected lost duplicated \
             unexpected bad_replies; do
        grep -q "\"$k\":" "$f" || { echo 0; return; }
    done
    for k in batch; do
        grep -q "\"$k\":{\"p50\":[0-9]*,\"p90\":[0-9]*,\"p99\":[0-9]*,\"p99_9\":[0-9]*,\"max\":[0-9]*}" "$f" ||
            { echo 0; return; }
    done
    echo 1
}

bench closed-tcp  --url "$URL"
bench closed-http --url "$HTTP_URL" --batch 10 --invalid-share 0.1
bench open-tcp    --url "$URL" --rate 200
bench open-http   --url "$HTTP_URL" --batch 1 --connections 8 --rate 200
# Notifications get no answer, so the ids expected are fewer than the calls.
"$BENCH" --duration 1 --warmup 0 --json --url "$URL" --batch 10 --notify-share 0.2 \
    > "$E2E_TMP/notify.json" 2>&1
check "notify: exit status" 0 $?
check "notify: fewer ids expected than calls" 1 \
    "$(awk -v c="$(json_num calls "$E2E_TMP/notify.json")" -v i="$(json_num ids_expected "$E2E_TMP/notify.json")" \
        'BEGIN { print (i > 0 && i < c) ? 1 : 0 }')"
check "notify: lost" 0 "$(json_num lost "$E2E_TMP/notify.json")"
check "open-tcp: about 400 batches (200/s for 2 s)" 1 \
    "$(awk -v v="$(json_num batches "$E2E_TMP/open-tcp.json")" 'BEGIN { print (v >= 360 && v <= 440) ? 1 : 0 }')"
check "closed-http: invalid requests counted as -32600" 1 \
    "$(grep -q '"errors":{[^}]*"-32600":[1-9]' "$E2E_TMP/closed-http.json" && echo 1 || echo 0)"

# No broker at all, open loop: every batch waits its timeout and the run
# falls behind schedule; it ends once its time is up (it used to send each
# missed batch, a timeout each: 200 a connection here, 60 s) and exits 4,
# saying so.
start=$(date +%s)
"$BENCH" --url "tcp://127.0.0.1:$(e2e_free_port)" --rate 400 --duration 2 --warmup 0 \
    --timeout-ms 300 --json > "$E2E_TMP/dead.json" 2> "$E2E_TMP/dead.err"
check "no broker: exit 4" 4 $?
check "no broker: says no batch was answered" 1 "$(grep -c '^jrpc-bench: no batch was answered: [1-9][0-9]* failed (last: ' "$E2E_TMP/dead.err")"
check "no broker: the run ends with its time, not after every missed batch" 1 "$(( $(date +%s) - start < 20 ? 1 : 0 ))"

# The human table.
"$BENCH" --url "$URL" --duration 0.5 --warmup 0 --batch 1 > "$E2E_TMP/table.txt" 2>&1
check "table: exit status" 0 $?
# A whole reply says nothing of each call's own latency: no 'call' row
# (issue 33: it was the batch's copied); --stream has one (each answer's).
check "table: no per-call row without --stream" 0 "$(grep -c '^  call ' "$E2E_TMP/table.txt")"
check "json: no per-call latency without --stream" 0 "$(grep -c '"call":{' "$E2E_TMP/closed-tcp.json")"
check "table: has the per-batch row" 1 "$(grep -c '^  batch ' "$E2E_TMP/table.txt")"
check "table: says no id was lost" 1 "$(grep -c ' 0 lost, 0 duplicated, 0 unknown$' "$E2E_TMP/table.txt")"

# --plot: a PNG when gnuplot is there; without it, exit 2 before any load.
if command -v gnuplot > /dev/null; then
    "$BENCH" --url "$HTTP_URL" --duration 1 --warmup 0 --batch 5 --plot "$E2E_TMP/curve.png" \
        > "$E2E_TMP/plot.txt" 2>&1
    check "plot: exit status" 0 $?
    check "plot: a PNG file" "89504e470d0a1a0a" "$(head -c 8 "$E2E_TMP/curve.png" 2>/dev/null | od -An -tx1 | tr -d ' \n')"
else
    echo "skip plot: gnuplot is not installed (deploy/deps.sh installs gnuplot-nox)"
fi
start=$(date +%s)
PATH=/nonexistent "$BENCH" --url "$URL" --duration 30 --plot "$E2E_TMP/never.png" > "$E2E_TMP/nogp.txt" 2>&1
check "plot without gnuplot: exit 2" 2 $?
check "plot without gnuplot: says so" 1 "$(grep -c 'needs gnuplot' "$E2E_TMP/nogp.txt")"
check "plot without gnuplot: refused before the run" 1 "$(( $(date +%s) - start < 10 ? 1 : 0 ))"

# --ignore-ids (for fixed-body floors): the report says the ids were not checked.
"$BENCH" --url "$URL" --duration 0.5 --warmup 0 --json --ignore-ids > "$E2E_TMP/ignore.json" 2>&1
check "ignore-ids: exit status" 0 $?
check "ignore-ids: ids_checked false" 1 "$(grep -c '"ids_checked":false' "$E2E_TMP/ignore.json")"
check "ignore-ids: no id expected" 0 "$(json_num ids_expected "$E2E_TMP/ignore.json")"

# The id check itself, against a server that gets ids wrong on purpose: of
# each batch of 3 it answers the first id twice, drops the other two and
# adds an id it was never sent (with a -32601 error in it).
cat > "$E2E_TMP/liar.py" <<'PY'
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_POST(self):
        ids = [c["id"] for c in json.loads(self.rfile.read(int(self.headers["Content-Length"])))]
        out = json.dumps([{"jsonrpc": "2.0", "result": 3, "id": ids[0]},
                          {"jsonrpc": "2.0", "result": 3, "id": ids[0]},
                          {"jsonrpc": "2.0", "error": {"code": -32601, "message": "x"},
                           "id": "no-such-id"}]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
s = HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
PY
python3 "$E2E_TMP/liar.py" > "$E2E_TMP/liar.port" 2>/dev/null &
E2E_PIDS+=($!)
e2e_wait_for '[ -s "$E2E_TMP/liar.port" ]' 10
"$BENCH" --url "http://127.0.0.1:$(cat "$E2E_TMP/liar.port")/" --batch 3 --connections 1 \
    --duration 1 --warmup 0 --json > "$E2E_TMP/liar.json" 2> "$E2E_TMP/liar.err"
check "wrong ids: exit 1" 1 $?
nb=$(json_num batches "$E2E_TMP/liar.json")
check "wrong ids: some batches ran" 1 "$(( ${nb:-0} > 0 ? 1 : 0 ))"
check "wrong ids: 2 lost, 1 duplicated, 1 unknown per batch" "$((2 * nb)) $nb $nb" \
    "$(json_num lost "$E2E_TMP/liar.json") $(json_num duplicated "$E2E_TMP/liar.json") $(json_num unexpected "$E2E_TMP/liar.json")"
check "wrong ids: the -32601 in each batch counted" "$nb" \
    "$(grep -o '"-32601":[0-9]*' "$E2E_TMP/liar.json" | head -n 1 | cut -d: -f2)"

"$BENCH" --url "$URL" --no-such-flag > /dev/null 2>&1
check "a bad flag exits 2" 2 $?
"$BENCH" --duration 1 > /dev/null 2>&1
check "no --url exits 2" 2 $?
"$BENCH" --url "$URL" --params 'nope' > /dev/null 2>&1
check "bad --params exits 2" 2 $?
"$BENCH" --url "$URL" --plot "it's.png" > /dev/null 2>&1
check "a --plot name with a quote exits 2" 2 $?

e2e_finish
