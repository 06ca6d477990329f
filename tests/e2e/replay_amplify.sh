#!/usr/bin/env bash
# Early dispatch and replays (issue 36, docs/SIGNING.md "Early dispatch"):
# a signed body whose methods are all idempotent runs at its workers while
# its nonce is claimed. One captured body replayed 200 times inside the
# window is refused 409 each time; before the bound, each replay also ran
# at the worker (99 and 133 of 200 in two runs). Now: the replays that race the first
# claim of their nonce are not sent early, and a key refused a replay is
# not sent early for a window, so the worker runs the captured body at
# most twice (the original and one replay).
#
# The worker is jrpc-stdio with one child that appends a line to a file
# per call of `tick` (declared idempotent): the lines are the runs.
source "$JRPC_E2E_LIB"
command -v redis-server >/dev/null || { echo "redis-server is required"; exit 1; }
HERE=$(dirname "$JRPC_E2E_LIB")
N=200
e2e_start_redis
printf 'demo s3cr3t-s3cr3t-s3cr3t\n' > "$E2E_TMP/keys"
# (a generous Redis deadline: on a loaded machine a claim slower than the
# default 500 ms is refused 503, which is a refusal too but not the point)
E2E_HTTP=1 e2e_start_broker --keys "$E2E_TMP/keys" --redis "redis://127.0.0.1:$RPORT" \
    --redis-timeout-ms 5000
TICKS=$E2E_TMP/ticks
: > "$TICKS"
cat > "$E2E_TMP/child.py" <<'PY'
import json, sys
path, n = sys.argv[1], 0
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    n += 1
    with open(path, "a") as f:
        f.write("run\n")
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "result": n, "id": m["id"]}) + "\n")
    sys.stdout.flush()
PY
"$JRPC_BIN/jrpc-stdio" --connect "$WORKERS_EP" --method tick:idempotent \
    -- python3 "$E2E_TMP/child.py" "$TICKS" >>"$E2E_TMP/stdio.log" 2>&1 &
E2E_PIDS+=($!)
e2e_wait_workers 1

# send.py BODY N THREADS: signs BODY once (sign.py), sends it once and waits
# for the answer, then sends the same bytes and headers N more times over
# THREADS keep-alive connections at once; prints the first status, then
# "STATUS COUNT" per status of the replays.
cat > "$E2E_TMP/send.py" <<'PY'
import collections, http.client, subprocess, sys, threading
body, n, threads = sys.argv[1].encode(), int(sys.argv[2]), int(sys.argv[3])
port, sign, keyfile = int(sys.argv[4]), sys.argv[5], sys.argv[6]
open(keyfile + ".body", "wb").write(body)
hdrs = dict(l.split(": ", 1) for l in subprocess.check_output(
    ["python3", sign, "--key", "demo", "--secret", "s3cr3t-s3cr3t-s3cr3t",
     "--body-file", keyfile + ".body"]).decode().splitlines())
hdrs["Content-Type"] = "application/json"
def post(conn):
    conn.request("POST", "/rpc", body, hdrs)
    r = conn.getresponse()
    r.read()
    return r.status
print(post(http.client.HTTPConnection("127.0.0.1", port, timeout=30)))
seen = collections.Counter()
lock = threading.Lock()
def run(k):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for _ in range(k):
        st = post(conn)
        with lock:
            seen[st] += 1
ts = [threading.Thread(target=run, args=(n // threads,)) for _ in range(threads)]
for t in ts: t.start()
for t in ts: t.join()
for st, c in sorted(seen.items()):
    print(st, c)
PY
out=$(python3 "$E2E_TMP/send.py" '{"jsonrpc":"2.0","method":"tick","id":1}' "$N" 4 "$HTTP_PORT" \
      "$HERE/sign.py" "$E2E_TMP/keys")
check "the captured body: 200; its $N replays: 409 each" "200 409 $N" "$(echo $out)"
# A fresh body of the key runs after the replays (the child serves one call
# at a time, in order): its answer means every run before it is counted.
printf '%s' '{"jsonrpc":"2.0","method":"tick","id":2}' > "$E2E_TMP/fresh"
curl -s -H 'Content-Type: application/json' -H @<(python3 "$HERE/sign.py" --key demo \
    --secret s3cr3t-s3cr3t-s3cr3t --body-file "$E2E_TMP/fresh") --data-binary @"$E2E_TMP/fresh" \
    "$HTTP_URL/rpc" > "$E2E_TMP/fresh.out"
check "a fresh body of the key still runs" 1 "$(grep -c '"result":' "$E2E_TMP/fresh.out")"
runs=$(( $(wc -l < "$TICKS") - 1 ))
echo "runs of the captured body at the worker: $runs (1 answered + $((runs - 1)) unanswered replays of $N)"
check "the worker ran the captured body at most twice (was: once per replay)" yes \
    "$([ "$runs" -ge 1 ] && [ "$runs" -le 2 ] && echo yes || echo "no: $runs")"
e2e_finish
