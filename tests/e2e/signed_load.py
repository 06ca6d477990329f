#!/usr/bin/env python3
"""Steady signed load over HTTP for tests/e2e/reload.sh: calls add [i, 1]
with id i, one after another on one keep-alive connection (a new one after
a connection error), each body signed as docs/SIGNING.md says (HMAC-SHA256,
a new nonce each), until STOP_FILE exists. Then prints one line:

    sent=N answers=N ok=N failed=N missing=N duplicate=N

answers counts response objects by id: every id sent must come back exactly
once with result i+1 (failed: any other answer, a non-200, or no answer)."""
import hashlib, hmac, http.client, json, os, secrets, sys, time

url, key, secret, stop_file = sys.argv[1:5]
host, port = url.split("//")[1].split("/")[0].split(":")


def headers(body):
    ts = int(time.time())
    nonce = secrets.token_urlsafe(16)[:22]
    s = "v1\n%s\n%d\n%s\n%s" % (key, ts, nonce, hashlib.sha256(body).hexdigest())
    sig = hmac.new(secret.encode(), s.encode(), hashlib.sha256).hexdigest()
    return {"Content-Type": "application/json", "X-JRPC-Key": key, "X-JRPC-Timestamp": str(ts),
            "X-JRPC-Nonce": nonce, "X-JRPC-Signature": sig}


seen, sent, ok, failed = {}, 0, 0, 0
conn = http.client.HTTPConnection(host, int(port), timeout=10)
while not os.path.exists(stop_file) or sent == 0:
    time.sleep(0.005)   # steady, not a benchmark: the machine is shared
    i = sent
    sent += 1
    body = json.dumps({"jsonrpc": "2.0", "method": "add", "params": [i, 1], "id": i}).encode()
    try:
        conn.request("POST", "/rpc", body, headers(body))
        r = conn.getresponse()
        data = r.read()
    except (OSError, http.client.HTTPException) as e:
        print("error on id %d: %r" % (i, e), file=sys.stderr)
        failed += 1
        conn.close()
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        continue
    try:
        v = json.loads(data)
    except ValueError:
        v = None
    if isinstance(v, dict) and "id" in v:
        seen[v["id"]] = seen.get(v["id"], 0) + 1
    if r.status == 200 and isinstance(v, dict) and v.get("id") == i and v.get("result") == i + 1:
        ok += 1
    else:
        failed += 1
        print("failed id %d: %d %s" % (i, r.status, data[:200]), file=sys.stderr)
missing = sum(1 for i in range(sent) if i not in seen)
duplicate = sum(1 for n in seen.values() if n > 1)
print("sent=%d answers=%d ok=%d failed=%d missing=%d duplicate=%d"
      % (sent, sum(seen.values()), ok, failed, missing, duplicate))
