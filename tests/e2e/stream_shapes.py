"""Every example of the JSON-RPC 2.0 specification, unstreamed and streamed,
over each streaming transport; the streamed answer rebuilt by the rule of
docs/STREAMING.md ("Rebuilding the unstreamed answer") and compared with the
unstreamed one as JSON values.

usage: stream_shapes.py HTTP_PORT ZMQ_URL EXAMPLES_JSON

Prints one line per example and transport, "<transport>|<example>|<verdict>",
verdict "same" or what differed; the shell test checks each. Clients no one
here wrote: http.client (HTTP/1.1, chunked), Python's websockets, pyzmq.
The broker must run with --ws-max-inflight 1: a second body sent on the
WebSocket behind an example then starts only once the example is over, so
its answer marks the end of the example's messages (WebSocket sends no end)."""
import asyncio
import http.client
import json
import sys

import msgpack
import websockets
import zmq

HTTP_PORT, ZMQ_URL, EXAMPLES = int(sys.argv[1]), sys.argv[2], sys.argv[3]
TIMEOUT_S = 10
FENCE = '{"jsonrpc":"2.0","method":"sum","params":[1],"id":"fence"}'


def is_array(body):
    """The body is a batch: its first byte that is not whitespace is '['."""
    return body.lstrip(" \t\r\n")[:1] == "["


def from_stream(body, answers):
    """The rule for a stream (the body was not refused whole): its answers,
    (position, object) pairs, in an array when the body is an array
    (position order; none: no answer at all), else the one answer."""
    objs = [a for _, a in sorted(answers, key=lambda pa: pa[0])]
    if is_array(body):
        return objs if objs else None
    return objs[0] if objs else None


# ---- HTTP: unstreamed, SSE, NDJSON ----

def post(body, accept):
    c = http.client.HTTPConnection("127.0.0.1", HTTP_PORT, timeout=TIMEOUT_S)
    c.request("POST", "/rpc", body=body.encode(),
              headers={"Content-Type": "application/json", "Accept": accept})
    r = c.getresponse()
    data = r.read().decode()
    ctype = (r.getheader("Content-Type") or "").split(";")[0]
    c.close()
    return r.status, ctype, data


def http_plain(body):
    status, _, data = post(body, "application/json")
    return status, (json.loads(data) if data else None)


def sse_events(text):
    """(event name, id, data) of each event of an event stream."""
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        ev, eid, data = "message", None, []
        for line in block.split("\n"):
            if line.startswith(":") or not line:
                continue
            k, _, v = line.partition(":")
            v = v[1:] if v.startswith(" ") else v
            if k == "event":
                ev = v
            elif k == "id":
                eid = v
            elif k == "data":
                data.append(v)
        if data:
            out.append((ev, eid, "\n".join(data)))
    return out


def http_sse(body):
    status, ctype, data = post(body, "text/event-stream")
    if ctype != "text/event-stream":   # refused whole: a plain answer, its status
        return status, (json.loads(data) if data else None)
    answers = [(int(eid), json.loads(d)) for ev, eid, d in sse_events(data) if ev == "message"]
    return status, from_stream(body, answers)


def http_ndjson(body):
    status, ctype, data = post(body, "application/x-ndjson")
    if ctype != "application/x-ndjson":
        return status, (json.loads(data) if data else None)
    # No positions in NDJSON: arrival order (compared as a set, below).
    answers = [(i, json.loads(l)) for i, l in enumerate(data.split("\n")) if l.strip()]
    return status, from_stream(body, answers)


# ---- ZeroMQ: one reply, or streamed messages ----

def zmq_send(sock, frames):
    sock.send_multipart(frames)
    if not sock.poll(TIMEOUT_S * 1000):
        raise RuntimeError("no reply for %d s" % TIMEOUT_S)
    return sock.recv_multipart()


def zmq_plain(sock, body):
    frames = zmq_send(sock, [body.encode()])
    return 0, (json.loads(frames[-1]) if frames[-1] else None)


def zmq_stream(sock, body):
    frames = zmq_send(sock, [msgpack.packb({"stream": True}), body.encode()])
    answers = []
    while True:
        head = msgpack.unpackb(frames[0])
        if head.get("end") is True:
            end = json.loads(frames[1])
            if "jsonrpc" in end:   # the error object of a body refused whole
                return 0, end
            return 0, from_stream(body, answers)
        answers.append((head["pos"], json.loads(frames[1])))
        if not sock.poll(TIMEOUT_S * 1000):
            raise RuntimeError("stream stopped for %d s" % TIMEOUT_S)
        frames = sock.recv_multipart()


# ---- WebSocket: whole mode and stream mode ----

async def ws_messages(ws, body):
    """The messages of one body: what comes before the fence's answer."""
    await ws.send(body)
    await ws.send(FENCE)
    got = []
    while True:
        m = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT_S))
        if isinstance(m, dict) and m.get("id") == "fence":
            return got
        got.append(m)


def ws_whole_answer(body, msgs):
    """Over WebSocket nothing but the message says whether it answers the
    body itself: an error with id null that is -32700 (never a member's
    code), or data "batch too large", or the answer to a body that is not a
    non-empty array (docs/WEBSOCKET.md)."""
    if len(msgs) != 1 or not isinstance(msgs[0], dict) or msgs[0].get("id", 0) is not None:
        return False
    err = msgs[0].get("error") or {}
    if err.get("code") == -32700 or err.get("data") == "batch too large":
        return True
    try:
        return json.loads(body) == []
    except ValueError:
        return True


async def ws_run(examples):
    url = "ws://127.0.0.1:%d/rpc" % HTTP_PORT
    out = {}
    async with websockets.connect(url, subprotocols=["jrpc"]) as whole, \
               websockets.connect(url, subprotocols=["jrpc.stream"]) as stream:
        for e in examples:
            body = e["body"]
            w = await ws_messages(whole, body)
            s = await ws_messages(stream, body)
            plain = w[0] if w else None
            if ws_whole_answer(body, s):
                rebuilt = s[0]
            else:
                rebuilt = from_stream(body, list(enumerate(s)))
            out[e["name"]] = (plain, rebuilt)
    return out


# ---- comparison ----

def canon(v):
    return json.dumps(v, sort_keys=True, separators=(",", ":"))


def verdict(plain, rebuilt, any_order):
    """same, or what differed. A batch's array may come in any order (the
    specification allows it) where the stream carries no positions."""
    if any_order and isinstance(plain, list) and isinstance(rebuilt, list):
        plain = sorted(plain, key=canon)
        rebuilt = sorted(rebuilt, key=canon)
    if canon(plain) == canon(rebuilt):
        return "same"
    return "rebuilt %s, unstreamed %s" % (canon(rebuilt), canon(plain))


def main():
    examples = json.load(open(EXAMPLES))
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(ZMQ_URL)
    ws = asyncio.run(ws_run(examples))
    for e in examples:
        name, body = e["name"], e["body"]
        want = json.loads(e["reply"]) if e["reply"] else None
        status, plain = http_plain(body)
        print("http unstreamed|%s|%s" % (name, verdict(want, plain, False)))
        s_status, rebuilt = http_sse(body)
        v = verdict(plain, rebuilt, False)
        print("sse|%s|%s" % (name, v if s_status == status or status == 204
                                else "status %d, unstreamed %d" % (s_status, status)))
        n_status, rebuilt = http_ndjson(body)
        v = verdict(plain, rebuilt, True)
        print("ndjson|%s|%s" % (name, v if n_status == status or status == 204
                                   else "status %d, unstreamed %d" % (n_status, status)))
        _, zplain = zmq_plain(sock, body)
        _, zrebuilt = zmq_stream(sock, body)
        print("zmq unstreamed|%s|%s" % (name, verdict(want, zplain, False)))
        print("zmq|%s|%s" % (name, verdict(zplain, zrebuilt, False)))
        wplain, wrebuilt = ws[name]
        print("ws whole mode|%s|%s" % (name, verdict(want, wplain, False)))
        print("ws|%s|%s" % (name, verdict(wplain, wrebuilt, True)), flush=True)
    sock.close()
    ctx.term()


main()
