#!/usr/bin/env python3
"""Every setting deploy/ gives the programs names a real flag: the keys of
deploy/config/*.conf and the JRPC_* variables of the Dockerfile, the compose
file, the Kubernetes manifests and the systemd units, mapped back to flags
by the config naming contract (--foo-bar = key foo-bar = JRPC_FOO_BAR), must
each be a long flag in `jrpc-broker --help` or `jrpc-worker --help` (a
broker file against the broker, a worker file against the worker), or one
of the flags the config contract adds to both (--config, --admin,
--ready-methods, --log-format, --access-log). Prints "N passed, N failed"."""
import glob, os, re, subprocess, sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
BIN = os.environ.get("JRPC_BIN", os.path.join(ROOT, "build", "bin"))
CONTRACT_FLAGS = {"config", "admin", "ready-methods", "log-format", "access-log"}
CLIENT_ENV = {"JRPC_URL", "JRPC_KEY_ID", "JRPC_SECRET"}  # the jrpc CLI's own

def flags(prog):
    out = subprocess.run([os.path.join(BIN, prog), "--help"], capture_output=True, text=True).stdout
    return set(re.findall(r"--([a-z][a-z0-9-]*)", out)) | CONTRACT_FLAGS

known = {"broker": flags("jrpc-broker"), "worker": flags("jrpc-worker")}
known["both"] = known["broker"] | known["worker"]
passed = failed = 0

def check(name, ok):
    global passed, failed
    passed, failed = (passed + 1, failed) if ok else (passed, failed + 1)
    print(("ok   " if ok else "FAIL ") + name)

def whose(path):
    base = os.path.basename(path)
    return "worker" if "worker" in base else "broker" if "broker" in base else "both"

check("jrpc-broker --help lists flags", "workers" in known["broker"])
check("jrpc-worker --help lists flags", "connect" in known["worker"])
for conf in sorted(glob.glob(os.path.join(ROOT, "deploy", "config", "*.conf"))):
    for line in open(conf):
        m = re.match(r"\s*#?\s*([a-z][a-z0-9-]*)\s*=", line)
        if m and not line.lstrip().startswith(("# /", "#!")):
            key = m.group(1)
            check("%s: %s is a flag of jrpc-%s" % (os.path.basename(conf), key, whose(conf)),
                  key in known[whose(conf)])
files = [os.path.join(ROOT, "deploy", "container", f) for f in ("Dockerfile", "docker-compose.yml")]
files += sorted(glob.glob(os.path.join(ROOT, "deploy", "k8s", "*.yaml")))
files += sorted(glob.glob(os.path.join(ROOT, "deploy", "systemd", "*.service")))
seen = 0
for path in files:
    for var in sorted(set(re.findall(r"\bJRPC_[A-Z0-9_]+\b", open(path).read()))):
        if var in CLIENT_ENV:
            continue
        seen += 1
        flag = var[len("JRPC_"):].lower().replace("_", "-")
        check("%s: %s is --%s of jrpc-%s" % (os.path.basename(path), var, flag, whose(path)),
              flag in known[whose(path)])
check("deploy/ sets JRPC_* variables", seen > 5)
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
