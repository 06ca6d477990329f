#!/usr/bin/env python3
"""Steady signed load over HTTP for tests/e2e/reload.sh and sentinel.sh:
calls add [i, 1] with id i, one after another on one keep-alive connection
(a new one after a connection error), each body signed as docs/SIGNING.md
says (HMAC-SHA256, a new nonce each), until STOP_FILE exists. Then prints:

    sent=N answers=N ok=N failed=N missing=N duplicate=N

answers counts response objects by id: every id sent must come back exactly
once with result i+1 (failed: any other answer, a non-200, or no answer).

Options, after the four arguments (sentinel.sh):
  --allow-503       a 503 whose error is -32006 (replay protection
                    unavailable: the broker failed closed) is a refusal,
                    counted apart, not a failure; its id is answered
  --replay-every N  after every N-th body, the last accepted body is sent
                    again as it was (same headers, same nonce): a replay
  --trace FILE      one line per body: unix time, HTTP status, error code
                    (0 for a result); replays are marked R
With any of them a second line follows:

    refused=N replays=N replays_refused=N replays_accepted=N

replays_refused counts 409 -32005 answers to the replays (503 -32006 is
neither: the broker could not tell), replays_accepted any 200."""
import hashlib, hmac, http.client, json, os, secrets, sys, time

url, key, secret, stop_file = sys.argv[1:5]
opts = sys.argv[5:]
allow_503 = "--allow-503" in opts
replay_every = int(opts[opts.index("--replay-every") + 1]) if "--replay-every" in opts else 0
trace = open(opts[opts.index("--trace") + 1], "w") if "--trace" in opts else None
host, port = url.split("//")[1].split("/")[0].split(":")


def headers(body):
    ts = int(time.time())
    nonce = secrets.token_urlsafe(16)[:22]
    s = "v1\n%s\n%d\n%s\n%s" % (key, ts, nonce, hashlib.sha256(body).hexdigest())
    sig = hmac.new(secret.encode(), s.encode(), hashlib.sha256).hexdigest()
    return {"Content-Type": "application/json", "X-JRPC-Key": key, "X-JRPC-Timestamp": str(ts),
            "X-JRPC-Nonce": nonce, "X-JRPC-Signature": sig}


conn = http.client.HTTPConnection(host, int(port), timeout=10)


def post(body, hdrs, what):
    """(status, parsed answer or None, error code or 0); status 0 after a
    connection error."""
    global conn
    try:
        conn.request("POST", "/rpc", body, hdrs)
        r = conn.getresponse()
        data = r.read()
    except (OSError, http.client.HTTPException) as e:
        print("error on %s: %r" % (what, e), file=sys.stderr)
        conn.close()
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        return 0, None, 0
    try:
        v = json.loads(data)
    except ValueError:
        v = None
    code = v["error"].get("code", 1) if isinstance(v, dict) and isinstance(v.get("error"), dict) else 0
    if trace:
        trace.write("%.3f %d %d%s\n" % (time.time(), r.status, code, " R" if what == "replay" else ""))
    if not (r.status == 200 and code == 0) and what != "replay":
        print("%s: %d %s" % (what, r.status, data[:200]), file=sys.stderr)
    return r.status, v, code


seen, sent, ok, failed, refused = {}, 0, 0, 0, 0
replays = replays_refused = replays_accepted = 0
last_ok = None
while not os.path.exists(stop_file) or sent == 0:
    time.sleep(0.005)   # steady, not a benchmark: the machine is shared
    i = sent
    sent += 1
    body = json.dumps({"jsonrpc": "2.0", "method": "add", "params": [i, 1], "id": i}).encode()
    hdrs = headers(body)
    res = post(body, hdrs, "id %d" % i)
    if res[0] == 0:
        failed += 1
        continue
    status, v, code = res
    if isinstance(v, dict) and v.get("id") is not None:
        seen[v["id"]] = seen.get(v["id"], 0) + 1
    if status == 200 and isinstance(v, dict) and v.get("id") == i and v.get("result") == i + 1:
        ok += 1
        last_ok = (body, hdrs)
    elif allow_503 and status == 503 and code == -32006:
        refused += 1
        seen[i] = seen.get(i, 0) + 1   # answered: refused as a whole, id null
    else:
        failed += 1
    if replay_every and last_ok and sent % replay_every == 0:
        replays += 1
        res = post(last_ok[0], last_ok[1], "replay")
        if res[0] == 200:
            replays_accepted += 1
            print("replay accepted: %s" % last_ok[0], file=sys.stderr)
        elif res[0] == 409 and res[2] == -32005:
            replays_refused += 1
missing = sum(1 for i in range(sent) if i not in seen)
duplicate = sum(1 for n in seen.values() if n > 1)
print("sent=%d answers=%d ok=%d failed=%d missing=%d duplicate=%d"
      % (sent, sum(seen.values()), ok, failed, missing, duplicate))
if opts:
    print("refused=%d replays=%d replays_refused=%d replays_accepted=%d"
          % (refused, replays, replays_refused, replays_accepted))
