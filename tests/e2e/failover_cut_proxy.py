"""The failover tests' cutting proxy (tests/e2e/py_failover.sh and
c_failover.sh): in front of a broker's HTTP port, it forwards each request,
reads the broker's whole answer (the broker ran the body and kept its
reply), and closes the client's connection without it. Imported
(start(url) -> the proxy's URL), or run: argv[1] the broker's URL; prints
the proxy's URL and serves until killed."""

import socket
import sys
import threading
import time
from urllib.parse import urlsplit


def read_http(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    n = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v)
    while len(body) < n:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def _serve(lsock: socket.socket, host: str, port: int) -> None:
    while True:
        c, _ = lsock.accept()
        req = read_http(c)
        up = socket.create_connection((host, port))
        up.sendall(req)
        read_http(up)          # the broker ran the body and kept its reply; the client never gets it
        up.close()
        c.close()


def start(broker_url: str) -> str:
    """Starts the proxy in a daemon thread; returns its URL (path /rpc)."""
    b = urlsplit(broker_url)
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(8)
    threading.Thread(target=_serve, args=(lsock, b.hostname, b.port), daemon=True).start()
    return "http://127.0.0.1:%d/rpc" % lsock.getsockname()[1]


if __name__ == "__main__":
    print(start(sys.argv[1]), flush=True)
    while True:
        time.sleep(3600)
