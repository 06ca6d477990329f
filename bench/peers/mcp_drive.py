#!/usr/bin/env python3
"""The MCP rows' load (issue 35): several mcp_load.cjs processes, their sums.

    python3 bench/peers/mcp_drive.py --url URL --clients N --gateway PID[,PID...]
        [--procs P] [--duration S] [--warmup S] [--timeout-ms MS]
        [--server TEXT] [--kill-child PATTERN] [--kill-at S] [--label NAME] [--json]
        [--bench PATH]

Starts P load processes (default min(N, 8)) holding N clients of the
official MCP SDK between them (mcp_load.cjs: each client its own session, one
tools/call "echo" in flight at a time), waits until every client is
connected and has made a call, lets them call for --warmup seconds, then
measures --duration seconds. Prints one JSON object: calls/s, the p50 and
p99 latency of a call, errors by kind, and the CPU the gateway spent per
call: user + system time of every process under the --gateway PIDs (the
gateway and its children; for jrpc the broker and the bridge with its
children), read from /proc/PID/stat every 0.2 s through the window (so that
a child that ends inside it still counts up to its last reading), divided by
the calls counted in it; the MCP server processes' part (--server: a
command line with that text) is also given apart, and the load processes'
own CPU (load_cpu_s: near cpus x duration when the load is the limit).

--kill-child PATTERN: --kill-at seconds into the window (default a third of
it), SIGKILL one process under the gateway whose command line contains
PATTERN (the oldest: the MCP server child), once; the window is then at
least 6 s, so that there is time after the kill to see who recovers. The
JSON then says what each client saw after it ("kill": errors, whether and
when it was fine again, whether its last call was answered, new sessions it
had to open). Errors are expected then; without
--kill-child any error or lost setup is reported by summarize.py.

--bench PATH: the load is one jrpc-bench process (PATH) speaking MCP
instead (--mcp: a thread and a session per client, the same tools/call
"echo", written in C, so that the load is not what sets the pace, as the
SDK clients are on a small machine); it opens every session before its
clock starts and says on stderr when its measured window begins and ends,
and the CPU meters are read over that window. Not with --kill-child.

Exit status: 0 when the load ran and printed its JSON, 1 otherwise."""
import argparse
import json
import os
import select
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TICK = os.sysconf("SC_CLK_TCK")
KILL_WINDOW_MIN_S = 6  # a kill row's window: time after the kill to see recovery


def proc_table():
    """pid -> (ppid, its own cpu ticks: utime + stime, start time)."""
    t = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                s = f.read()
        except OSError:
            continue
        # The command name is in parentheses and may hold spaces: split after it.
        f = s[s.rindex(")") + 2:].split()
        t[int(d)] = (int(f[1]), int(f[11]) + int(f[12]), int(f[19]))
    return t


def tree(roots, table):
    """The roots and every process under them."""
    kids = {}
    for pid, (ppid, _, _) in table.items():
        kids.setdefault(ppid, []).append(pid)
    seen, todo = set(), [p for p in roots if p in table]
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.add(p)
            todo.extend(kids.get(p, []))
    return seen


class CpuMeter:
    """The CPU a process tree spends between start() and the last sample():
    each process's own time (children's times are never added to their
    parent's, so nothing counts twice), from its first reading in the window
    (0 for one born inside it) to its last."""

    def __init__(self, roots, server_pattern):
        self.roots, self.pattern = roots, server_pattern
        self.first, self.last, self.server = {}, {}, set()

    def sample(self, starting=False):
        table = proc_table()
        for p in tree(self.roots, table):
            key = (p, table[p][2])  # pid and start time: a reused pid is another process
            if key not in self.first:
                self.first[key] = table[p][1] if starting else 0
                if p not in self.roots and self.pattern in cmdline(p):
                    self.server.add(key)
            self.last[key] = table[p][1]

    def seconds(self, server_only=False):
        return sum(self.last[k] - self.first[k] for k in self.last
                   if not server_only or k in self.server) / TICK


def sleep_until(t, *meters):
    """Sleeps until epoch seconds t, sampling the meters every 0.2 s."""
    while True:
        left = t - time.time()
        if left <= 0:
            break
        time.sleep(min(left, 0.2))
        for m in meters:
            m.sample()


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def kill_child(roots, pattern):
    """SIGKILLs one process under roots (not a root) whose command line has
    pattern: the oldest of those with no such process under them (the server
    itself, not a shell that started it). Returns its pid, command line and
    the time just before the signal (epoch ms), or Nones."""
    table = proc_table()
    match = {p for p in tree(roots, table) if p not in roots and pattern in cmdline(p)}
    leaves = sorted((table[p][2], p) for p in match
                    if not any(table[q][0] == p for q in match))
    for _, pid in leaves:
        cmd, at_ms = cmdline(pid), int(time.time() * 1000)
        try:
            os.kill(pid, signal.SIGKILL)
            return pid, cmd, at_ms
        except OSError:
            continue
    return None, None, None


def percentile(sorted_v, q):
    if not sorted_v:
        return 0
    return sorted_v[min(len(sorted_v) - 1, int(q * len(sorted_v)))]


def result(a, procs, duration, calls, p50, p99, meter, load_meter, setup_errors, errors):
    """The JSON a row reads: calls/s, a call's p50 and p99 (µs), the
    gateway's CPU per call with and without the server children, the load's."""
    cpu, server_cpu = meter.seconds(), meter.seconds(server_only=True)
    r = {"peer": a.label, "url": a.url, "clients": a.clients, "load_processes": procs,
         "duration_s": duration, "calls": calls, "calls_per_s": calls / duration,
         "latency_us": {"call": {"p50": p50, "p99": p99}},
         "gateway_cpu_s": round(cpu, 3),
         "cpu_us_per_call": round(cpu * 1e6 / calls, 1) if calls else None,
         "server_cpu_s": round(server_cpu, 3),
         "cpu_us_per_call_without_server":
             round((cpu - server_cpu) * 1e6 / calls, 1) if calls else None,
         "load_cpu_s": round(load_meter.seconds(), 3),
         "cpus": os.cpu_count(),
         "setup_errors": setup_errors}
    if errors:
        r["errors"] = errors
    return r


def bench_load(a, roots):
    """The load as one jrpc-bench --mcp process (see --bench above)."""
    cmd = [a.bench, "--url", a.url, "--mcp", "--batch", "1", "--connections", str(a.clients),
           "--duration", str(a.duration), "--warmup", str(a.warmup),
           "--timeout-ms", str(a.timeout_ms), "--server-timing", "off", "--method", "tools/call",
           "--params", '{"name":"echo","arguments":{"message":"hello"}}', "--json"]
    load = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # Setup: every session open (for supergateway a server child each).
        setup_limit = time.monotonic() + 75 + a.clients
        window, err = None, b""
        while time.monotonic() < setup_limit:
            ready, _, _ = select.select([load.stderr], [], [], 1)
            if not ready:
                continue
            line = load.stderr.readline()
            if not line:
                break
            err += line
            f = line.split()
            if b"MCP sessions open; window" in line:
                window = (int(f[-4]) / 1000, int(f[-3]) / 1000)
                break
        if window is None:
            print(f"mcp_drive: jrpc-bench did not set up: {err.decode(errors='replace').strip()}",
                  file=sys.stderr)
            return 1
        sleep_until(window[0])
        meter = CpuMeter(roots, a.server)
        meter.sample(starting=True)
        load_meter = CpuMeter([load.pid], a.server)
        load_meter.sample(starting=True)
        sleep_until(window[1], meter, load_meter)
        meter.sample()
        load_meter.sample()
        try:
            out, rest = load.communicate(timeout=a.timeout_ms / 1000 + 15)
        except subprocess.TimeoutExpired:
            print("mcp_drive: jrpc-bench did not report", file=sys.stderr)
            return 1
        b = json.loads(out.decode().strip().splitlines()[-1])
        calls = b["calls"]
        errors = {f"mcp:{k}": n for k, n in b["errors"].items()}
        for k, n in b["transport_failures_by_errno"].items():
            errors[f"transport:{k}"] = n
        for k in ("lost", "duplicated", "unexpected", "bad_replies"):
            if b[k]:
                errors[k] = b[k]
        r = result(a, 1, b["duration_s"], calls, b["latency_us"]["batch"]["p50"],
                   b["latency_us"]["batch"]["p99"], meter, load_meter, 0, errors)
        r["load"] = "jrpc-bench --mcp"
        print(json.dumps(r))
        return 0
    finally:
        if load.poll() is None:
            load.kill()
            load.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--clients", type=int, required=True)
    ap.add_argument("--gateway", required=True, help="PID[,PID...]: the gateway's process tree roots")
    ap.add_argument("--procs", type=int, default=0)
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=1)
    ap.add_argument("--timeout-ms", type=int, default=5000)
    ap.add_argument("--server", default="server-everything",
                    help="command-line text of the MCP server processes (their CPU is also given apart)")
    ap.add_argument("--kill-child", default=None)
    ap.add_argument("--kill-at", type=float, default=None)
    ap.add_argument("--label", default="")
    ap.add_argument("--json", action="store_true", help="accepted for run.sh (the output is JSON)")
    ap.add_argument("--bench", default=None, help="jrpc-bench: the load is it (--mcp), not the SDK")
    a = ap.parse_args()
    if a.bench and a.kill_child:
        ap.error("--bench and --kill-child do not go together")
    if a.clients < 1 or a.duration <= 0:
        ap.error("--clients must be >= 1 and --duration > 0")
    if a.kill_child:
        a.duration = max(a.duration, KILL_WINDOW_MIN_S)
    roots = [int(p) for p in a.gateway.split(",") if p]
    # Stopped from outside (run.sh's timeout): the load processes go too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    if a.bench:
        return bench_load(a, roots)
    procs = max(1, min(a.procs or min(a.clients, 8), a.clients))
    env = dict(os.environ, NODE_PATH=os.path.join(HERE, "node_modules"))
    loads = []
    for i in range(procs):
        k = a.clients // procs + (1 if i < a.clients % procs else 0)
        loads.append(subprocess.Popen(
            ["node", os.path.join(HERE, "mcp_load.cjs"), a.url, str(k), str(a.timeout_ms)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env))
    rc = 1
    try:
        # Setup: every process connects its clients (a session each, for the
        # gateways a server child each) before anyone is measured.
        setup_limit = time.monotonic() + 75 + a.clients
        waiting = {p.stdout.fileno(): p for p in loads}
        while waiting and time.monotonic() < setup_limit:
            ready, _, _ = select.select(list(waiting), [], [], 1)
            for fd in ready:
                line = waiting[fd].stdout.readline()
                if line.strip() != b"ready":
                    print(f"mcp_drive: a load process failed to set up ({line!r})", file=sys.stderr)
                    return 1
                del waiting[fd]
        if waiting:
            print(f"mcp_drive: {len(waiting)} load processes not ready in time", file=sys.stderr)
            return 1
        t0 = int(time.time() * 1000 + a.warmup * 1000)
        t1 = t0 + int(a.duration * 1000)
        for p in loads:
            p.stdin.write(f"go {t0} {t1}\n".encode())
            p.stdin.flush()
        sleep_until(t0 / 1000)
        meter = CpuMeter(roots, a.server)
        meter.sample(starting=True)
        # The load's own CPU: near the machine's whole when it is the limit.
        load_meter = CpuMeter([p.pid for p in loads], a.server)
        load_meter.sample(starting=True)
        killed = None
        if a.kill_child:
            at = a.kill_at if a.kill_at is not None else a.duration / 3
            sleep_until((t0 + at * 1000) / 1000, meter, load_meter)
            meter.sample()
            pid, cmd, at_ms = kill_child(roots, a.kill_child)
            killed = {"pid": pid, "command": cmd, "at_ms": at_ms or int(time.time() * 1000)}
            if pid is None:
                print(f"mcp_drive: no process matching {a.kill_child!r} to kill", file=sys.stderr)
        sleep_until(t1 / 1000, meter, load_meter)
        meter.sample()
        load_meter.sample()
        # The load processes end their sessions only once stdin closes
        # (communicate), after this last reading: a gateway that stops a
        # session's child then does so outside the window.
        outs = []
        for p in loads:
            try:
                line, _ = p.communicate(timeout=a.timeout_ms / 1000 + 15)
            except subprocess.TimeoutExpired:
                print("mcp_drive: a load process did not report", file=sys.stderr)
                return 1
            outs.append(json.loads(line.decode().strip().splitlines()[-1]))
        lat = sorted(v for o in outs for v in o["latencies_us"])
        calls = sum(o["calls"] for o in outs)
        errors = {}
        for o in outs:
            for key, n in o["errors"].items():
                errors[key] = errors.get(key, 0) + n
        r = result(a, procs, a.duration, calls, percentile(lat, 0.50), percentile(lat, 0.99), meter,
                   load_meter, sum(o["setup_errors"] for o in outs), errors)
        if killed:
            per = [c for o in outs for c in o["per_client"]]
            k_at = killed["at_ms"]
            for c in per:
                # Fine at the end: its last call in the window came after the
                # kill and after its last error, and was answered.
                c["ok_at_end"] = c["last_ok_ms"] is not None and c["last_ok_ms"] > k_at and (
                    c["last_error_ms"] is None or c["last_ok_ms"] > c["last_error_ms"])
            hit = [c for c in per if c["first_error_ms"] is not None]
            fine = [c for c in hit if c["ok_after_error_ms"] is not None]
            rec = sorted(c["ok_after_error_ms"] - k_at for c in fine)
            killed.update(
                clients_with_errors=len(hit),
                clients_fine_again=len(fine),
                clients_never_fine_again=len(hit) - len(fine),
                clients_fine_at_end=sum(1 for c in per if c["ok_at_end"]),
                recovery_ms_max=rec[-1] if rec else None,
                recovery_ms_median=rec[len(rec) // 2] if rec else None,
                sessions_lost=sum(1 for c in per if c["reconnects"] > 0),
                reconnects=sum(c["reconnects"] for c in per),
                per_client=[{"errors": c["errors"], "reconnects": c["reconnects"],
                             "first_error_ms": None if c["first_error_ms"] is None
                             else c["first_error_ms"] - k_at,
                             "fine_again_ms": None if c["ok_after_error_ms"] is None
                             else c["ok_after_error_ms"] - k_at,
                             "ok_at_end": c["ok_at_end"]} for c in per])
            r["kill"] = killed
        print(json.dumps(r))
        rc = 0
    finally:
        for p in loads:
            if p.poll() is None:
                p.kill()
                p.wait()
    return rc


if __name__ == "__main__":
    sys.exit(main())
