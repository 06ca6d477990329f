#!/usr/bin/env bash
# Group commit of claims (issue 35, docs/SIGNING.md "Several claims, one
# script"): 8 concurrent signed clients, each body a new nonce under key
# "lim" (a rate limit far above the load, so every body passes both checks),
# 8 × 40 single calls over keep-alive HTTP. Every body is answered its own
# result, and Redis ran fewer scripts than there were bodies (INFO
# commandstats: cmdstat_evalsha): the claims of the bodies read in one loop
# turn left as one EVALSHA. Before, a body with a rate limit was one EVALSHA
# of its own: exactly one per body. Prints the commands per body.
source "$JRPC_E2E_LIB"
command -v redis-server >/dev/null || { echo "redis-server is required"; exit 1; }
e2e_start_redis
printf 'lim s3cr3t-s3cr3t-s3cr3t-lim rate=1000000 burst=1000000\n' > "$E2E_TMP/keys"
E2E_HTTP=1 e2e_start_broker --keys "$E2E_TMP/keys" --redis "redis://127.0.0.1:$RPORT" \
    --redis-timeout-ms 5000 --access-log off
e2e_start_worker --credit 256 --log-level warn
e2e_wait_workers 1

# load.py PORT CLIENTS BODIES: CLIENTS threads, each its own connection,
# start together and send BODIES signed add calls each; prints
# "ok=N bad=N" (ok: 200 with result i+1 for id i).
cat > "$E2E_TMP/load.py" <<'PY'
import hashlib, hmac, http.client, json, secrets, sys, threading, time
port, clients, bodies = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
key, secret = "lim", "s3cr3t-s3cr3t-s3cr3t-lim"
ok = bad = 0
lock = threading.Lock()
go = threading.Barrier(clients)
def run(c):
    global ok, bad
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    go.wait()
    for j in range(bodies):
        i = c * 1000 + j
        body = json.dumps({"jsonrpc": "2.0", "method": "add", "params": [i, 1], "id": i}).encode()
        ts, nonce = int(time.time()), secrets.token_urlsafe(16)[:22]
        s = "v1\n%s\n%d\n%s\n%s" % (key, ts, nonce, hashlib.sha256(body).hexdigest())
        sig = hmac.new(secret.encode(), s.encode(), hashlib.sha256).hexdigest()
        conn.request("POST", "/rpc", body, {"Content-Type": "application/json", "X-JRPC-Key": key,
                     "X-JRPC-Timestamp": str(ts), "X-JRPC-Nonce": nonce, "X-JRPC-Signature": sig})
        r = conn.getresponse()
        a = json.loads(r.read() or b"null")
        good = r.status == 200 and isinstance(a, dict) and a.get("result") == i + 1 and a.get("id") == i
        with lock:
            ok += good
            bad += not good
ts = [threading.Thread(target=run, args=(c,)) for c in range(clients)]
for t in ts: t.start()
for t in ts: t.join()
print("ok=%d bad=%d" % (ok, bad))
PY
evalsha() { redis-cli -p "$RPORT" INFO commandstats | tr -d '\r' | sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\),.*/\1/p'; }
CLIENTS=8 BODIES=40 N=$((8 * 40))
before=$(evalsha); before=${before:-0}
out=$(python3 "$E2E_TMP/load.py" "$HTTP_PORT" "$CLIENTS" "$BODIES")
after=$(evalsha)
scripts=$((after - before))
check "every signed body answered its own result" "ok=$N bad=0" "$out"
echo "Redis scripts for $N signed bodies with a rate limit, $CLIENTS clients: $scripts" \
     "($(awk -v s="$scripts" -v n="$N" 'BEGIN { printf "%.3f", s / n }') EVALSHA per body; one per body before issue 35)"
check "fewer scripts than bodies: claims of one loop turn go as one" yes \
    "$([ "$scripts" -ge 1 ] && [ "$scripts" -lt "$N" ] && echo yes || echo "no: $scripts")"
e2e_finish
