#!/usr/bin/env python3
"""A small JSON-RPC 2.0 server on stdin/stdout for tests/e2e/stdio.sh,
written without any JSON-RPC library (json and threads only).

Calls are served one at a time, in order (as most stdio servers do), or
each in a thread of its own with --threads.

Methods: upper [s] or {"text": s} -> s.upper(); sleep {"ms": N} -> N after
N ms; fail -> error {code -32050, message,
data}; big {"n": N} -> a string of N bytes (default 1 MiB) in a pattern;
pid -> this process's pid; echo -> params; flood {"ms": N, "stderr": b,
"stdout": b} -> "flooding", then for N ms a thread writes empty lines to
stderr and/or lines that are not JSON to stdout as fast as it can (answers
still go out whole between them).

Framing: NDJSON (one message a line), or LSP (Content-Length) with --lsp.
Hostile modes (flags): --garbage (a line that is not JSON and an answer to
an unknown id before every answer), --request (a server->client request
before the first answer; the reply is reported on stderr), --notify (a
notification before every answer), --stderr (a line on stderr per call),
--exit-after K (exit without answering the K-th call), --huge (a 2 MiB
line before every answer).
LSP's handshake (--need-init): every method but initialize is answered
-32002 (ServerNotInitialized) until initialize, then the notification
initialized, came; lspstate -> {"initialize": its params, "initialized": b}."""
import json
import os
import sys
import threading
import time

args = sys.argv[1:]
LSP = "--lsp" in args
GARBAGE = "--garbage" in args
REQUEST = "--request" in args
NOTIFY = "--notify" in args
STDERR = "--stderr" in args
HUGE = "--huge" in args
THREADS = "--threads" in args
NEED_INIT = "--need-init" in args
lsp = {"initialize": None, "initialized": False}
EXIT_AFTER = int(args[args.index("--exit-after") + 1]) if "--exit-after" in args else 0

out = sys.stdout.buffer
inp = sys.stdin.buffer
lock = threading.Lock()
calls = 0
asked = False


def send_raw(b):
    with lock:
        if LSP:
            out.write(b"Content-Length: %d\r\n\r\n" % len(b) + b)
        else:
            out.write(b + b"\n")
        out.flush()


def send(obj):
    send_raw(json.dumps(obj, separators=(",", ":")).encode())


def read_message():
    if not LSP:
        while True:
            line = inp.readline()
            if not line:
                return None
            if line.strip():
                return line
    length = None
    while True:
        line = inp.readline()
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            break
        k, _, v = line.decode().partition(":")
        if k.strip().lower() == "content-length":
            length = int(v.strip())
    return inp.read(length)


def answer(req, result=None, error=None):
    if GARBAGE:
        send_raw(b"this is not json {")
        send({"jsonrpc": "2.0", "id": 987654321, "result": "stray"})
    if NOTIFY:
        send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"p": 1}})
    if HUGE:
        send_raw(b'"' + b"h" * (2 << 20) + b'"')
    msg = {"jsonrpc": "2.0", "id": req["id"]}
    if error is not None:
        msg["error"] = error
    else:
        msg["result"] = result
    send(msg)


def flood(p):
    end = time.monotonic() + p["ms"] / 1000.0
    err = b"\n" * 65536
    junk = b"this is not json, a noisy child's stdout\n" * 1024
    while time.monotonic() < end:
        if p.get("stderr"):
            os.write(2, err)
        if p.get("stdout"):
            with lock:
                out.write(junk)
                out.flush()


def serve(req):
    m, p = req.get("method"), req.get("params")
    if STDERR:
        sys.stderr.write("serving %s in pid %d\n" % (m, os.getpid()))
        sys.stderr.flush()
    if m == "initialize":
        lsp["initialize"] = p
        answer(req, {"capabilities": {"hoverProvider": True}})
        return
    if NEED_INIT and not lsp["initialized"]:
        answer(req, error={"code": -32002, "message": "Server not initialized"})
        return
    if m == "lspstate":
        answer(req, lsp)
    elif m == "upper":
        s = p[0] if isinstance(p, list) else p["text"]
        answer(req, s.upper())
    elif m == "sleep":
        time.sleep(p["ms"] / 1000.0)
        answer(req, p["ms"])
    elif m == "fail":
        answer(req, error={"code": -32050, "message": "it failed on purpose",
                           "data": {"why": "asked", "list": [1, 2.5, None, "é"]}})
    elif m == "big":
        n = (p or {}).get("n", 1 << 20)
        answer(req, ("0123456789abcdef" * (n // 16 + 1))[:n])
    elif m == "pid":
        answer(req, os.getpid())
    elif m == "echo":
        answer(req, p)
    elif m == "flood":
        answer(req, "flooding")
        threading.Thread(target=flood, args=(p,), daemon=True).start()
    else:
        answer(req, error={"code": -32601, "message": "Method not found"})


def main():
    global calls, asked
    while True:
        raw = read_message()
        if raw is None:
            return
        msg = json.loads(raw)
        if "method" not in msg:  # a reply to our own request
            sys.stderr.write("reply to my request: %s\n" % json.dumps(msg))
            sys.stderr.flush()
            continue
        if msg["method"] == "initialized" and "id" not in msg:
            lsp["initialized"] = lsp["initialize"] is not None
            continue
        calls += 1
        if EXIT_AFTER and calls >= EXIT_AFTER:
            os._exit(7)
        if REQUEST and not asked:
            asked = True
            send({"jsonrpc": "2.0", "id": "srv-1", "method": "roots/list"})
        if THREADS:
            threading.Thread(target=serve, args=(msg,), daemon=False).start()
        else:
            serve(msg)


main()
