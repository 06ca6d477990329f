#!/usr/bin/env python3
"""tests/e2e/tls_stub.py — a small HTTPS JSON-RPC server for the client-side
TLS tests (tls_client.sh): no broker, no worker, just TLS in front of a fixed
answer, so that what is tested is the client's TLS.

    tls_stub.py --cert server.pem --key server.key [--client-ca ca.pem]
                [--tls-max 1.2] --log FILE

Prints its port on stdout, then serves HTTP/1.1 with keep-alive on
127.0.0.1. Every request object gets {"jsonrpc":"2.0","result":3,"id":ID}
(a batch gets an array; notifications nothing; a body of notifications only
204). With "Accept: text/event-stream" the answers are streamed as the
broker does (docs/STREAMING.md): one event per answer, then "event: end".
With --client-ca a client certificate signed by that CA is required.

Each TLS connection appends one line to --log: "conn resumed=0|1 cn=NAME"
after a handshake (cn=- without a client certificate), or
"fail REASON" when the handshake fails; each request "req PATH".
"""
import argparse
import json
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

args = None
log_lock = threading.Lock()


def log(line):
    with log_lock, open(args.log, "a") as f:
        f.write(line + "\n")


def answers(body):
    """The answer objects of a request body, in order, and whether it was a batch."""
    msg = json.loads(body)
    batch = isinstance(msg, list)
    out = []
    for pos, req in enumerate(msg if batch else [msg]):
        if isinstance(req, dict) and "id" in req:
            out.append((pos, {"jsonrpc": "2.0", "result": 3, "id": req["id"]}))
    return out, batch


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def setup(self):
        # The handshake here, in the connection's thread, so that a client
        # that fails it is logged and does not stall the accept loop.
        try:
            self.request.do_handshake()
        except (ssl.SSLError, OSError) as e:
            log("fail %s" % (getattr(e, "reason", None) or e))
            self.request.close()
            raise
        cn = "-"
        peer = self.request.getpeercert()
        if peer:
            for rdn in peer.get("subject", ()):
                for k, v in rdn:
                    if k == "commonName":
                        cn = v
        log("conn resumed=%d cn=%s" % (int(self.request.session_reused), cn))
        super().setup()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        log("req %s" % self.path)
        try:
            outs, batch = answers(body)
        except ValueError:
            outs, batch = [(0, {"jsonrpc": "2.0", "id": None,
                                "error": {"code": -32700, "message": "Parse error"}})], False
        if "text/event-stream" in self.headers.get("Accept", ""):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            events = ["id: %d\ndata: %s\n\n" % (pos, json.dumps(a, separators=(",", ":")))
                      for pos, a in outs]
            events.append('event: end\ndata: {"answered":%d,"timed_out":0}\n\n' % len(outs))
            for ev in events:
                b = ev.encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
            self.wfile.write(b"0\r\n\r\n")
            return
        if not outs:
            self.send_response(204)
            self.end_headers()
            return
        objs = [a for _, a in outs]
        out = json.dumps(objs if batch else objs[0], separators=(",", ":")).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def get_request(self):
        sock, addr = self.socket.accept()
        # Headers and body go out in two writes: without this, Nagle and
        # the client's delayed ACK make every answer 40 ms late.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def handle_error(self, request, client_address):
        pass   # a failed handshake is logged by the handler


def main():
    global args, ctx
    p = argparse.ArgumentParser()
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--client-ca")
    p.add_argument("--tls-max", choices=["1.2", "1.3"], default="1.3")
    p.add_argument("--log", required=True)
    args = p.parse_args()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    if args.tls_max == "1.2":
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    if args.client_ca:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(args.client_ca)
    ctx.set_alpn_protocols(["http/1.1"])
    srv = Server(("127.0.0.1", 0), Handler)
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
