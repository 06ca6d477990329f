#!/usr/bin/env python3
"""deploy/grafana/jrpc.json against the metrics contract: every metric a
query names is in the contract (histograms through _bucket/_sum/_count),
every metric of the contract is shown somewhere, rate() is never taken of a
gauge, histogram_quantile() only of a histogram's _bucket, and each panel
queries through the dashboard's datasource variable. Prints "N passed, N failed"."""
import json, os, re, sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
# The metrics contract (names, types): the broker's GET /metrics.
CONTRACT = {
    "jrpc_build_info": "gauge", "jrpc_bodies_total": "counter", "jrpc_calls_total": "counter",
    "jrpc_errors_total": "counter", "jrpc_batch_size": "histogram",
    "jrpc_call_queue_seconds": "histogram", "jrpc_call_worker_seconds": "histogram",
    "jrpc_call_seconds": "histogram", "jrpc_bodies_open": "gauge", "jrpc_calls_inflight": "gauge",
    "jrpc_calls_queued": "gauge", "jrpc_workers_connected": "gauge", "jrpc_worker_credit": "gauge",
    "jrpc_redis_up": "gauge", "jrpc_redis_rtt_seconds": "histogram",
    "jrpc_redis_failures_total": "counter", "jrpc_replays_total": "counter",
    "jrpc_signature_failures_total": "counter", "jrpc_acl_denied_total": "counter",
    "jrpc_late_answers_total": "counter", "jrpc_redispatched_total": "counter",
    "jrpc_calls_lost_total": "counter", "jrpc_worker_frames_malformed_total": "counter",
    "jrpc_http_connections": "gauge", "jrpc_reloads_total": "counter",
    "jrpc_reload_last_success_timestamp_seconds": "gauge",
    "jrpc_method_calls_total": "counter", "jrpc_method_errors_total": "counter",
    "jrpc_method_worker_seconds": "histogram", "jrpc_method_call_seconds": "histogram",
    "jrpc_worker_inflight": "gauge", "jrpc_worker_answered_total": "counter",
    "jrpc_worker_errors_total": "counter", "jrpc_worker_timeouts_total": "counter",
    "jrpc_worker_ejected_total": "counter", "jrpc_worker_last_heard_timestamp_seconds": "gauge",
}
passed = failed = 0

def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok   " + name)
    else:
        failed += 1
        print("FAIL " + name + ("\n  " + detail if detail else ""))

def base_of(name):
    """The contract metric a series name belongs to, or None."""
    if name in CONTRACT:
        return name
    m = re.match(r"(.*)_(bucket|sum|count)$", name)
    if m and CONTRACT.get(m.group(1)) == "histogram":
        return m.group(1)
    return None

def walk(panels):
    for p in panels:
        yield p
        yield from walk(p.get("panels", []))

path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "deploy", "grafana", "jrpc.json")
dash = json.load(open(path))
panels = list(walk(dash["panels"]))
exprs = []
for p in panels:
    for t in p.get("targets", []):
        exprs.append((p["title"], t["expr"]))
queries = [v["query"]["query"] if isinstance(v.get("query"), dict) else v.get("query", "")
           for v in dash.get("templating", {}).get("list", []) if v.get("type") == "query"]

check("the dashboard has queries", len(exprs) >= 10, "%d queries" % len(exprs))
used = set()
for title, e in exprs + [("variable", q) for q in queries]:
    for name in re.findall(r"\bjrpc_[a-z0-9_]+\b", e):
        b = base_of(name)
        check("%s: %s is in the contract" % (title, name), b is not None, e)
        if b:
            used.add(b)
    for name in re.findall(r"\brate\(\s*(jrpc_[a-z0-9_]+)", e):
        b = base_of(name)
        check("%s: rate() of a counter or histogram series (%s)" % (title, name),
              b is not None and (CONTRACT[b] == "counter" or name != b), e)
    for name in re.findall(r"histogram_quantile\([^,]+,.*?\b(jrpc_[a-z0-9_]+)", e):
        b = base_of(name)
        check("%s: histogram_quantile() over a histogram's _bucket (%s)" % (title, name),
              b is not None and CONTRACT[b] == "histogram" and name == b + "_bucket", e)
missing = sorted(set(CONTRACT) - used)
check("every metric of the contract is on the dashboard", not missing, "missing: %s" % missing)
for title in ("queue", "worker", "total"):
    check("a latency panel for %s" % title,
          any(title.lower() in t.lower() and "histogram_quantile" in e for t, e in exprs))
ids = [p["id"] for p in panels]
check("panel ids are unique", len(ids) == len(set(ids)))
check("every panel with queries uses the datasource variable",
      all(p.get("datasource", {}).get("uid") == "${datasource}" for p in panels if p.get("targets")))
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
