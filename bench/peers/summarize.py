#!/usr/bin/env python3
"""Summarises a bench/peers/run.sh result directory.

    python3 bench/peers/summarize.py DIR

Reads DIR/comparisons.txt (the comparisons run, as run.sh lists them),
DIR/runs/<name>/r<k>.{a,b}.json (side A is jrpc, side B the peer) and
DIR/machine.json; writes DIR/<name>.json for each comparison and
DIR/summary.md, and prints the Markdown table. A kept run has its runs/
packed in DIR/raw.tar.xz (run.sh packs it last): it is read from there
when DIR/runs is absent. Ratios are A/B per round;
the median and the min-max spread are over the rounds."""
import json
import os
import statistics
import sys
import tarfile
import tempfile


def load(path):
    try:
        with open(path) as f:
            return json.loads(f.read())
    except (OSError, ValueError):
        return None


def incomplete(r):
    """Why a side's result cannot be trusted, or None."""
    if r is None:
        return "no result"
    for k in ("lost", "duplicated", "unexpected", "transport_failures", "rejected_batches",
              "bad_replies"):
        if r.get(k, 0):
            return f"{k}={r[k]}"
    if r.get("errors"):
        return "errors=" + ",".join(f"{c}:{n}" for c, n in r["errors"].items())
    return None


def metric(r, kind, which):
    """Open loop: a batch latency percentile; otherwise calls/s (for the
    nonce rows, single calls and redis-benchmark's ops: nonces/s)."""
    if kind == "open":
        return r["latency_us"]["batch"][which]
    return r["calls_per_s"]


def verdict(kind, med, threshold):
    """True (goal met), False (missed) or None (no goal: info)."""
    if kind == "ge":
        return med >= threshold
    if kind == "gt":
        return med > threshold
    if kind == "open":
        return med < 1.0
    return None


def fmt(v, kind):
    if kind == "open":
        return f"{v / 1000:.2f} ms"
    return f"{v / 1000:.1f} k/s"


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    runs = os.path.join(out, "runs")
    packed = os.path.join(out, "raw.tar.xz")
    if not os.path.isdir(runs) and os.path.exists(packed):
        tmp = tempfile.TemporaryDirectory()
        with tarfile.open(packed) as t:
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            t.extractall(tmp.name, **safe)
        runs = os.path.join(tmp.name, "runs")
    machine = load(os.path.join(out, "machine.json")) or {}
    rows = []
    with open(os.path.join(out, "comparisons.txt")) as f:
        comps = [line.rstrip("\n").split("|", 4) for line in f if line.strip()]
    for name, peer, kind, threshold, goal in comps:
        threshold = float(threshold)
        d = os.path.join(runs, name)
        rounds, problems = [], []
        k = 1
        while os.path.exists(os.path.join(d, f"r{k}.a.json")) or os.path.exists(
                os.path.join(d, f"r{k}.b.json")):
            a = load(os.path.join(d, f"r{k}.a.json"))
            b = load(os.path.join(d, f"r{k}.b.json"))
            for side, r in (("jrpc", a), (peer, b)):
                why = incomplete(r)
                if why:
                    problems.append(f"round {k} {side}: {why}")
            rounds.append({"round": k, "a": a, "b": b})
            k += 1
        metrics = (["p50", "p99"] if kind == "open" else
                   ["nonces_per_s" if name.startswith("nonce-") else "calls_per_s"])
        summary = {"name": name, "peer": peer, "kind": kind, "threshold": threshold,
                   "goal": goal, "machine": machine, "problems": problems, "metrics": {}}
        if kind == "open":
            summary["offered_batches_per_s"] = next(
                (r["a"].get("rate") for r in rounds if r["a"]), None)
        for m in metrics:
            which = m if kind == "open" else None
            good = [r for r in rounds if r["a"] and r["b"]]
            av = [metric(r["a"], kind, which) for r in good]
            bv = [metric(r["b"], kind, which) for r in good]
            ratios = [x / y for x, y in zip(av, bv) if y > 0]
            s = {"jrpc": av, "peer": bv, "ratios": ratios}
            if ratios:
                med = statistics.median(ratios)
                s.update(jrpc_median=statistics.median(av), peer_median=statistics.median(bv),
                         ratio_median=med, ratio_min=min(ratios), ratio_max=max(ratios))
                v = verdict(kind, med, threshold)
                if v is not None:
                    s["pass"] = v
            summary["metrics"][m] = s
            label = name if kind != "open" else f"{name} {m}"
            if not ratios:
                result, cells = "no data", ["—"] * 4
            else:
                result = {True: "pass", False: "miss"}.get(s.get("pass"), "info")
                cells = [fmt(s["jrpc_median"], kind), fmt(s["peer_median"], kind),
                         f"{s['ratio_median']:.2f}",
                         f"{s['ratio_min']:.2f}–{s['ratio_max']:.2f}"]
            if problems:
                result += " (errors: see json)"
            rows.append([label, goal] + cells + [f"{len(ratios)}", result])
        summary["rounds"] = rounds
        with open(os.path.join(out, f"{name}.json"), "w") as f:
            json.dump(summary, f, indent=1)
            f.write("\n")
    head = (f"Machine: {machine.get('nproc', '?')} CPUs ({machine.get('cpu', '?')}), Linux "
            f"{machine.get('kernel', '?')}, commit {machine.get('commit', '?')}, "
            f"{machine.get('date', '?')}; {machine.get('rounds', '?')} rounds of "
            f"{machine.get('duration_s', '?')} s (+{machine.get('warmup_s', '?')} s warm-up) "
            "per side, A-B-A-B.\n"
            "Ratios are jrpc/peer per round (for the open-loop rows: latency, lower is better).\n")
    lines = [head, "| comparison | goal | jrpc (median) | peer (median) | median ratio "
                   "| spread (min–max) | rounds | result |",
             "|---|---|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
