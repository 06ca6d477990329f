#!/usr/bin/env python3
"""Summarises a bench/peers/run.sh result directory.

    python3 bench/peers/summarize.py DIR

Reads DIR/comparisons.txt (the comparisons run, as run.sh lists them),
DIR/runs/<name>/r<k>.{a,b}.json (side A is jrpc, side B the peer) and
DIR/machine.json; writes DIR/<name>.json for each comparison and
DIR/summary.md, and prints the Markdown table. A kept run has its runs/
packed in DIR/raw.tar.xz (run.sh packs it last): it is read from there
when DIR/runs is absent. Ratios are A/B per round;
the median and the min-max spread are over the rounds.

The MCP rows (issue 35): kind "mcp" has three goals, in the threshold
field as "calls,p99,cpu" (calls/s ratio >=, p99 ratio <=, the gateway's own
CPU per call ratio <=: without the MCP server children's), one table line
each, and a line without a goal: the CPU per call with the server
children; kind "mcpkill" is a record of what the
clients saw when the server child was killed (mcp_drive.py --kill-child),
jrpc's side and the peer's in words, no ratio; kind "mcpinfo" has the four
lines of "mcp" without goals (the SDK clients' rows, whose load sets the
pace)."""
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


def incomplete(r, kind=None):
    """Why a side's result cannot be trusted, or None. A kill row's errors
    are what it records."""
    if r is None:
        return "no result"
    for k in ("lost", "duplicated", "unexpected", "transport_failures", "rejected_batches",
              "bad_replies", "setup_errors"):
        if r.get(k, 0):
            return f"{k}={r[k]}"
    if kind == "mcpkill":
        return None if r.get("kill", {}).get("pid") else "no child killed"
    if r.get("errors"):
        return "errors=" + ",".join(f"{c}:{n}" for c, n in r["errors"].items())
    return None


def metric(r, kind, which):
    """Open loop: a batch latency percentile; MCP: calls/s, a call's p99 or
    the gateway's CPU per call; otherwise calls/s (for the nonce rows,
    single calls and redis-benchmark's ops: nonces/s)."""
    if kind == "open":
        return r["latency_us"]["batch"][which]
    if which == "p99":
        return r["latency_us"]["call"]["p99"]
    if which in ("cpu_us_per_call", "cpu_us_per_call_without_server"):
        return r[which] or 0
    return r["calls_per_s"]


# MCP rows: the metrics, each with its goal's direction and the index of its
# threshold in "calls,p99,cpu". The CPU goal is the gateway's own CPU per
# call (without the MCP server children's: the server is the same program on
# both sides, and it is not the gateway); the CPU with the children is shown
# beside it without a goal (bench/README.md, "MCP").
MCP_METRICS = (("calls_per_s", "ge", 0), ("p99", "le", 1), ("cpu_us_per_call", "info", None),
               ("cpu_us_per_call_without_server", "le", 2))


def verdict(kind, med, threshold):
    """True (goal met), False (missed) or None (no goal: info)."""
    if kind == "le":
        return med <= threshold
    if kind == "ge":
        return med >= threshold
    if kind == "gt":
        return med > threshold
    if kind == "open":
        return med < 1.0
    return None


def fmt(v, kind, which=None):
    if kind == "open" or which == "p99":
        return f"{v / 1000:.2f} ms"
    if which in ("cpu_us_per_call", "cpu_us_per_call_without_server"):
        return f"{v:.0f} µs CPU/call"
    if kind in ("mcp", "mcpinfo"):
        return f"{v:.0f} /s"
    return f"{v / 1000:.1f} k/s"


def kill_words(sides):
    """What the clients saw in a kill row, over its rounds (medians)."""
    ks = [r["kill"] for r in sides if r and r.get("kill")]
    if not ks:
        return "—"
    med = lambda k: statistics.median(x[k] or 0 for x in ks)
    n = sides[0]["clients"]
    kinds = sorted({e for r in sides if r for e in r.get("errors", {})})
    rec = [x["recovery_ms_max"] for x in ks if x["recovery_ms_max"] is not None]
    text = (f"errors at {med('clients_with_errors'):g}/{n} ({', '.join(kinds) or 'none'}); "
            f"fine at the end {med('clients_fine_at_end'):g}/{n}")
    if rec:
        text += f", the last fine again {statistics.median(rec):.0f} ms after the kill"
    text += f"; new sessions {med('sessions_lost'):g}"
    return text


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
    rows, notes = [], []
    with open(os.path.join(out, "comparisons.txt")) as f:
        comps = [line.rstrip("\n").split("|", 4) for line in f if line.strip()]
    for name, peer, kind, threshold, goal in comps:
        thresholds = [float(t) for t in threshold.split(",")]
        threshold = thresholds[0]
        d = os.path.join(runs, name)
        rounds, problems = [], []
        k = 1
        while os.path.exists(os.path.join(d, f"r{k}.a.json")) or os.path.exists(
                os.path.join(d, f"r{k}.b.json")):
            a = load(os.path.join(d, f"r{k}.a.json"))
            b = load(os.path.join(d, f"r{k}.b.json"))
            for side, r in (("jrpc", a), (peer, b)):
                why = incomplete(r, kind)
                if why:
                    problems.append(f"round {k} {side}: {why}")
            rounds.append({"round": k, "a": a, "b": b})
            k += 1
        metrics = (["p50", "p99"] if kind == "open" else
                   [m for m, _, _ in MCP_METRICS] if kind in ("mcp", "mcpinfo") else
                   [] if kind == "mcpkill" else
                   ["nonces_per_s" if name.startswith("nonce-") else "calls_per_s"])
        summary = {"name": name, "peer": peer, "kind": kind, "threshold": threshold,
                   "goal": goal, "machine": machine, "problems": problems, "metrics": {}}
        if kind == "open":
            summary["offered_batches_per_s"] = next(
                (r["a"].get("rate") for r in rounds if r["a"]), None)
        if kind == "mcpkill":
            a_words = kill_words([r["a"] for r in rounds])
            b_words = kill_words([r["b"] for r in rounds])
            summary["kill"] = {"jrpc": a_words, "peer": b_words}
            result = "record" + (" (errors: see json)" if problems else "")
            rows.append([name, goal, a_words, b_words, "—", "—", f"{len(rounds)}", result])
        for i, m in enumerate(metrics):
            which = m if kind in ("open", "mcp", "mcpinfo") else None
            vkind, vthreshold = kind, threshold
            if kind == "mcp":
                vkind, at = MCP_METRICS[i][1], MCP_METRICS[i][2]
                vthreshold = thresholds[at] if at is not None and at < len(thresholds) else 0
            elif kind == "mcpinfo":
                vkind = "info"
            good = [r for r in rounds if r["a"] and r["b"]]
            av = [metric(r["a"], kind, which) for r in good]
            bv = [metric(r["b"], kind, which) for r in good]
            ratios = [x / y for x, y in zip(av, bv) if y > 0]
            s = {"jrpc": av, "peer": bv, "ratios": ratios}
            if ratios:
                med = statistics.median(ratios)
                s.update(jrpc_median=statistics.median(av), peer_median=statistics.median(bv),
                         ratio_median=med, ratio_min=min(ratios), ratio_max=max(ratios))
                v = verdict(vkind, med, vthreshold)
                if v is not None:
                    s["pass"] = v
            summary["metrics"][m] = s
            label = name if kind not in ("open", "mcp", "mcpinfo") else f"{name} {m}"
            if not ratios:
                result, cells = "no data", ["—"] * 4
            else:
                result = {True: "pass", False: "miss"}.get(s.get("pass"), "info")
                cells = [fmt(s["jrpc_median"], kind, which), fmt(s["peer_median"], kind, which),
                         f"{s['ratio_median']:.2f}",
                         f"{s['ratio_min']:.2f}–{s['ratio_max']:.2f}"]
            if problems:
                result += " (errors: see json)"
            rows.append([label, goal] + cells + [f"{len(ratios)}", result])
        if kind in ("mcp", "mcpinfo", "mcpkill"):
            # The load's share of the machine (mcp_drive.py's load_cpu_s):
            # near 1, the clients rather than the gateway set the pace.
            share = {}
            for side, key in (("jrpc", "a"), (peer, "b")):
                v = [r[key]["load_cpu_s"] / (r[key]["cpus"] * r[key]["duration_s"])
                     for r in rounds if r[key] and r[key].get("cpus")]
                if v:
                    share[side] = statistics.median(v)
            summary["load_cpu_share"] = share
            if share:
                notes.append(f"{name}: the load processes used " + ", ".join(
                    f"{v:.0%} ({s})" for s, v in share.items()) + " of the machine's CPU")
        summary["rounds"] = rounds
        with open(os.path.join(out, f"{name}.json"), "w") as f:
            json.dump(summary, f, indent=1)
            f.write("\n")
    head = (f"Machine: {machine.get('nproc', '?')} CPUs ({machine.get('cpu', '?')}), Linux "
            f"{machine.get('kernel', '?')}, commit {machine.get('commit', '?')}, "
            f"{machine.get('date', '?')}; {machine.get('rounds', '?')} rounds of "
            f"{machine.get('duration_s', '?')} s (+{machine.get('warmup_s', '?')} s warm-up) "
            "per side, A-B-A-B.\n"
            "Ratios are jrpc/peer per round (for the open-loop rows, and the MCP rows' p99 and CPU "
            "per call: lower is better).\n")
    lines = [head, "| comparison | goal | jrpc (median) | peer (median) | median ratio "
                   "| spread (min–max) | rounds | result |",
             "|---|---|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    if notes:
        lines += [""] + [f"- {n}" for n in notes]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
