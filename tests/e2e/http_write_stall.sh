#!/usr/bin/env bash
# HTTP clients that do not read their answers (issue 19, High 2): a client
# pipelines large requests and never reads. The broker stops reading it
# (backpressure: TCP pushes back, so its memory stays bounded), and its
# stalled write meets --write-timeout-ms, which closes the connection and
# frees its --max-conns slot, whatever the parse timers did meanwhile. A
# client that reads slowly but steadily is not cut: the deadline is for a
# write that makes no progress.
source "$JRPC_E2E_LIB"
E2E_HTTP=1
WRITE_TO=1000

if ! "$JRPC_BIN/jrpc-broker" --help | grep -q -- "--write-timeout-ms "; then
    check "jrpc-broker --help lists --write-timeout-ms" yes no
    e2e_finish
fi
# The idle and body timeouts are long, so only the write deadline can close.
e2e_start_broker --write-timeout-ms $WRITE_TO --idle-timeout-ms 600000 \
    --header-timeout-ms 600000 --body-timeout-ms 600000 --admin 127.0.0.1:0
e2e_start_worker
e2e_wait_workers 1
ADMIN=$(e2e_admin_url)

python3 - "$HTTP_PORT" "$ADMIN" "$BROKER_PID" > "$E2E_TMP/stall.out" 2>&1 <<'PY'
import errno, json, socket, struct, sys, time, urllib.request

PORT, ADMIN, PID = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
NCONN = 4             # clients that never read
PARAM = 200_000       # bytes of each echo's params, and about of its answer
OFFER = 300           # requests each one offers (about 60 MB)


def metric(name):
    with urllib.request.urlopen(ADMIN + "/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return int(float(line.split()[1]))
    return -1


def rss_kb():
    with open("/proc/%d/status" % PID) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def request(i, size):
    body = json.dumps({"jsonrpc": "2.0", "method": "echo", "params": ["x" * size],
                       "id": i}).encode()
    return (b"POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body)) + body


def tcp_state(s):
    return struct.unpack("B", s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1))[0]


ESTABLISHED = 1
base_conns, rss0 = metric("jrpc_http_connections"), rss_kb()
REQ = request(1, PARAM)
total = len(REQ) * OFFER
conns = []
for _ in range(NCONN):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)    # reads nothing anyway
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)   # what we count is the broker's
    s.connect(("127.0.0.1", PORT))
    s.setblocking(False)
    conns.append({"s": s, "sent": 0, "last": time.monotonic(), "closed": None})

t0 = time.monotonic()
peak = rss0
peak_conns = 0
next_metric = 0.0
while time.monotonic() - t0 < 30:
    now = time.monotonic()
    for c in conns:
        if c["closed"] is not None:
            continue
        if tcp_state(c["s"]) != ESTABLISHED:
            c["closed"] = now
            continue
        while c["sent"] < total:
            off = c["sent"] % len(REQ)
            try:
                n = c["s"].send(REQ[off:off + 65536])
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                c["closed"] = now
                break
            c["sent"] += n
            c["last"] = time.monotonic()
    peak = max(peak, rss_kb())
    if now >= next_metric:
        peak_conns = max(peak_conns, metric("jrpc_http_connections"))
        next_metric = now + 0.25
    if all(c["closed"] is not None for c in conns) and metric("jrpc_http_connections") == base_conns:
        break
    time.sleep(0.02)

closed = [c for c in conns if c["closed"] is not None]
print("closed", len(closed), "of", NCONN)
# From the last byte the broker took to the close: the write deadline
# (1 s, again while the socket still drains) and slack for a loaded machine.
late = max((c["closed"] - c["last"] for c in closed), default=0)
print("stall_to_close_under_10s", "yes" if len(closed) == NCONN and late < 10
      else "no: %d of %d closed in 30 s, the last %.1fs after its stall" % (len(closed), NCONN, late))
print("conns_at_attack", "yes" if peak_conns >= base_conns + NCONN else "no: %d" % peak_conns)
print("conns_back", metric("jrpc_http_connections") == base_conns and "yes" or "no")
most = max(c["sent"] for c in conns)
print("reading_stopped", "yes" if most < total // 2 else "no: %d of %d bytes taken" % (most, total))
print("rss_bounded", "yes" if peak - rss0 < 200 * 1024 else "no: +%d MB" % ((peak - rss0) // 1024))
print("info: offered %d MB each, most taken %.1f MB, RSS %d -> peak %d MB, stall to close %.1fs"
      % (total >> 20, most / 1e6, rss0 >> 10, peak >> 10, late))
for c in conns:
    c["s"].close()

# A slow but steady reader: about 3.2 MB of answers taken 32 KB every 50 ms,
# several write deadlines long; every answer arrives whole.
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
s.connect(("127.0.0.1", PORT))
N = 8
for i in range(N):
    s.sendall(request(i, 400_000))
s.settimeout(5)
buf, got, err = b"", 0, ""
t1 = time.monotonic()
while got < N:
    time.sleep(0.05)
    try:
        d = s.recv(32768)
    except OSError as e:
        err = repr(e)
        break
    if not d:
        err = "EOF"
        break
    buf += d
    while True:
        h = buf.find(b"\r\n\r\n")
        if h < 0:
            break
        cl = [int(l.split(b":")[1]) for l in buf[:h].split(b"\r\n")
              if l.lower().startswith(b"content-length:")]
        if not cl or len(buf) < h + 4 + cl[0]:
            break
        ans = json.loads(buf[h + 4:h + 4 + cl[0]])
        if ans.get("id") != got or ans.get("result") != ["x" * 400_000]:
            err = "answer %d wrong" % got
        buf = buf[h + 4 + cl[0]:]
        got += 1
s.close()
print("slow_reader_served", "yes" if got == N and not err else "no: %d of %d, %s" % (got, N, err))
print("info: slow reader took %.1fs" % (time.monotonic() - t1))
PY
cat "$E2E_TMP/stall.out"
res() { awk -v k="$1" '$1 == k { $1 = ""; sub(/^ /, ""); print }' "$E2E_TMP/stall.out"; }
check "clients that never read: all closed by the broker, within 10 s of stalling" yes \
    "$(res stall_to_close_under_10s)"
check "the connections were open during the attack (jrpc_http_connections)" yes \
    "$(res conns_at_attack)"
check "jrpc_http_connections back to its level before" yes "$(res conns_back)"
check "the broker stopped reading them (backpressure: well under what was offered)" yes \
    "$(res reading_stopped)"
check "broker RSS bounded during the attack (< +200 MB)" yes "$(res rss_bounded)"
check "a slow but steady reader is not cut by the write deadline" yes "$(res slow_reader_served)"
check "a request afterwards is served" 3 "$("$JRPC" --url "$HTTP_URL" call add '[1,2]')"
check "no AddressSanitizer report" 0 "$(grep -c 'ERROR: AddressSanitizer' "$E2E_TMP/broker.log")"
check "no UBSan report" 0 "$(grep -c 'runtime error:' "$E2E_TMP/broker.log")"
e2e_finish
