"""Load for tests/e2e/py_failover.sh: THREADS threads, each calling
rec(token) through one jrpc.Client given every broker URL, until CALLS
calls are made in all. Writes $OUT/started once STARTED calls are answered
(the test then kills a broker), and prints one JSON line: the tokens
answered with their result, and the failures by kind."""

import json
import os
import sys
import threading

import jrpc

urls = sys.argv[1].split(",")
retry = sys.argv[2] if sys.argv[2] != "none" else None
calls, threads, started = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
out = os.environ["OUT"]
lock = threading.Lock()
nxt = [0]
answered = {}          # token -> times answered with its own result
failures = {"may_have_run": [], "transport": [], "jsonrpc": []}


def worker(n):
    c = jrpc.Client(urls, key_file=os.environ.get("KEY_FILE"), retry=retry, timeout_ms=3000)
    while True:
        with lock:
            if nxt[0] >= calls:
                return
            i = nxt[0]
            nxt[0] += 1
        token = "t%d" % i
        try:
            r = c.call("rec", {"token": token, "ms": 40})
            with lock:
                answered[token] = answered.get(token, 0) + (1 if r == token else 1000)
                if sum(answered.values()) == started:
                    open(os.path.join(out, "started"), "w").close()
        except jrpc.CallMayHaveRunError as e:
            with lock:
                failures["may_have_run"].append([token, str(e)[:300]])
        except jrpc.TransportError as e:
            with lock:
                failures["transport"].append([token, str(e)[:300]])
        except jrpc.JsonRpcError as e:
            with lock:
                failures["jsonrpc"].append([token, e.code, e.message])


ts = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(json.dumps({"answered": answered, "failures": failures}))
