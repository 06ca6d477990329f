"""Load for tests/e2e/many_brokers.sh: client threads posting JSON-RPC
batches over HTTP to a set of brokers, every call with an id of its own,
and an account of what came back for each id.

Each thread starts at a different broker of --urls and keeps one kept-alive
connection to it. The client rule (docs/TOPOLOGY.md, "What a client sees"):

- connection refused: nothing was sent; the same body goes to the next
  broker of the list (always safe);
- the connection closed or reset after the body was sent and before any
  byte of the answer: with --retry-closed the same body goes to the next
  broker (safe against a graceful stop, which never reads a request it
  will not answer: the broker stops reading first); without it, the body's
  ids are counted as "conn_error" on that broker and not sent again (after
  a crash, the calls may have run);
- anything else (a timeout, a bad status, an answer that is not the batch
  asked for) is counted as a failure of its own.

Runs until --until-file exists (or --max-s passes), finishes the bodies in
flight, and prints one JSON object: ids sent, answered once, twice or more,
missing (neither answered nor a conn_error), conn errors per broker, error
codes, wrong results, retries and refusals, and calls answered per broker.
Exit 0 whatever it counted: the shell test asserts."""

import argparse
import http.client
import json
import os
import random
import socket
import threading
import time
import urllib.parse


class Account:
    def __init__(self):
        self.lock = threading.Lock()
        self.sent = set()
        self.answers = {}         # id -> count
        self.conn_error = {}      # id -> broker
        self.errors = {}          # code -> count
        self.wrong = 0
        self.refused = 0
        self.closed_retried = 0
        self.failures = []        # text of other failures
        self.per_broker = {}      # broker -> calls answered

    def summary(self):
        answered_once = sum(1 for n in self.answers.values() if n == 1)
        dup = sum(1 for n in self.answers.values() if n > 1)
        missing = [i for i in self.sent if i not in self.answers and i not in self.conn_error]
        ce = {}
        for b in self.conn_error.values():
            ce[b] = ce.get(b, 0) + 1
        return {
            "sent": len(self.sent), "answered_once": answered_once, "duplicated": dup,
            "missing": len(missing), "missing_sample": sorted(missing)[:5],
            "conn_error": ce, "errors": self.errors, "wrong": self.wrong,
            "refused": self.refused, "closed_retried": self.closed_retried,
            "failures": len(self.failures), "failure_sample": self.failures[:5],
            "per_broker": self.per_broker,
        }


def body_of(tid, n, batch, sleep_share, rnd):
    calls, expect = [], {}
    for k in range(batch):
        cid = "%d-%d-%d" % (tid, n, k)
        if rnd.random() < sleep_share:
            ms = rnd.randint(5, 60)
            calls.append({"jsonrpc": "2.0", "method": "sleep", "params": {"ms": ms}, "id": cid})
            expect[cid] = ms
        else:
            a, b = rnd.randint(0, 10 ** 6), rnd.randint(0, 10 ** 6)
            calls.append({"jsonrpc": "2.0", "method": "add", "params": [a, b], "id": cid})
            expect[cid] = a + b
    return json.dumps(calls).encode(), expect


class Closed(Exception):
    """The connection ended after the body was sent, before any byte of answer."""


def post(conn, body):
    try:
        conn.request("POST", "/rpc", body=body, headers={"Content-Type": "application/json"})
    except ConnectionRefusedError:
        raise
    except (BrokenPipeError, ConnectionResetError) as e:
        # A kept-alive connection the broker closed meanwhile: the broker
        # had stopped reading it, so none of the body was taken.
        raise Closed(str(e))
    try:
        resp = conn.getresponse()
    except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as e:
        raise Closed(str(e))
    data = resp.read()
    return resp.status, data


def worker(tid, urls, args, acct, stop_at):
    rnd = random.Random(tid)
    order = urls[tid % len(urls):] + urls[:tid % len(urls)]
    at = 0
    conn = None
    n = 0
    while not os.path.exists(args.until_file) and time.monotonic() < stop_at:
        n += 1
        body, expect = body_of(tid, n, args.batch, args.sleep_share, rnd)
        with acct.lock:
            acct.sent.update(expect)
        tries = 0
        while True:
            url = order[at % len(order)]
            if conn is None:
                u = urllib.parse.urlsplit(url)
                conn = http.client.HTTPConnection(u.hostname, u.port, timeout=args.timeout_s)
            try:
                status, data = post(conn, body)
            except ConnectionRefusedError:
                conn.close()
                conn = None
                at += 1
                tries += 1
                with acct.lock:
                    acct.refused += 1
                if tries % len(order) == 0:
                    time.sleep(0.05)  # every broker refused: do not spin
                if tries > 400:
                    with acct.lock:
                        acct.failures.append("%s: refused everywhere" % url)
                    break
                continue
            except Closed as e:
                conn.close()
                conn = None
                at += 1
                if args.retry_closed:
                    with acct.lock:
                        acct.closed_retried += 1
                    continue
                with acct.lock:
                    for cid in expect:
                        acct.conn_error[cid] = url
                break
            except (socket.timeout, OSError, http.client.HTTPException) as e:
                conn.close()
                conn = None
                at += 1
                with acct.lock:
                    acct.failures.append("%s: %s: %s" % (url, type(e).__name__, e))
                break
            account(acct, url, status, data, expect)
            break
    if conn is not None:
        conn.close()


def account(acct, url, status, data, expect):
    with acct.lock:
        if status != 200:
            acct.failures.append("%s: HTTP %d %s" % (url, status, data[:200]))
            return
        try:
            reply = json.loads(data)
        except ValueError:
            acct.failures.append("%s: not JSON: %r" % (url, data[:200]))
            return
        if not isinstance(reply, list):
            acct.failures.append("%s: not a batch answer: %r" % (url, data[:200]))
            return
        for r in reply:
            cid = r.get("id")
            if cid not in expect:
                acct.failures.append("%s: unknown id %r" % (url, cid))
                continue
            acct.answers[cid] = acct.answers.get(cid, 0) + 1
            acct.per_broker[url] = acct.per_broker.get(url, 0) + 1
            if "error" in r:
                code = str(r["error"].get("code"))
                acct.errors[code] = acct.errors.get(code, 0) + 1
            elif r.get("result") != expect[cid]:
                acct.wrong += 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--urls", required=True, help="comma list of http://HOST:PORT")
    p.add_argument("--threads", type=int, default=6)
    p.add_argument("--batch", type=int, default=10)
    p.add_argument("--sleep-share", type=float, default=0.2)
    p.add_argument("--timeout-s", type=float, default=15)
    p.add_argument("--retry-closed", action="store_true")
    p.add_argument("--until-file", required=True)
    p.add_argument("--max-s", type=float, default=60)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    urls = [u for u in a.urls.split(",") if u]
    acct = Account()
    stop_at = time.monotonic() + a.max_s
    ts = [threading.Thread(target=worker, args=(t, urls, a, acct, stop_at)) for t in range(a.threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    with open(a.out + ".tmp", "w") as f:
        json.dump(acct.summary(), f, sort_keys=True)
    os.rename(a.out + ".tmp", a.out)


if __name__ == "__main__":
    main()
