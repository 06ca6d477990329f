"""A streamed body over ZeroMQ, read by pyzmq (a client no one here wrote).

usage: stream_zmq.py URL TIMEOUT_MS BODY_JSON [close_after_first]

Sends [header {"stream": true, "timeout_ms": T}] [BODY] on a DEALER and
prints one line per reply message as it comes: "<ms since send> pos=<N>
<json>" or "<ms> end <json>"; with close_after_first, closes the socket
after the first answer (a client that leaves mid-stream). Exits 2 when no
message comes for 10 s."""
import sys
import time

import msgpack
import zmq

url, timeout_ms, body = sys.argv[1], int(sys.argv[2]), sys.argv[3]
leave = len(sys.argv) > 4
ctx = zmq.Context()
s = ctx.socket(zmq.DEALER)
s.setsockopt(zmq.LINGER, 0)
s.connect(url)
t0 = time.monotonic()
s.send_multipart([msgpack.packb({"stream": True, "timeout_ms": timeout_ms}), body.encode()])
while True:
    if not s.poll(10000):
        print("no message for 10 s")
        sys.exit(2)
    frames = s.recv_multipart()
    ms = int((time.monotonic() - t0) * 1000)
    if len(frames) != 2:
        print("%d frames=%d %r" % (ms, len(frames), frames))
        sys.exit(1)
    head = msgpack.unpackb(frames[0])
    if head.get("end") is True:
        print("%d end %s" % (ms, frames[1].decode()))
        break
    print("%d pos=%d %s" % (ms, head["pos"], frames[1].decode()), flush=True)
    if leave:
        break
s.close()
ctx.term()
