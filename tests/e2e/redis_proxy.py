#!/usr/bin/env python3
"""A Redis fault proxy for the e2e tests: forwards 127.0.0.1:LISTEN to
127.0.0.1:UPSTREAM, one thread per connection. When the file FLAG exists it
is removed and one extra "+OK\\r\\n" goes to the client: when FLAG holds
"before", in front of the reply to the next claim (the next command the
client sends that holds EVALSHA or EVAL: not in front of a reply to whatever
else the broker may ask meanwhile, which would make the test depend on
timing); at once (unasked) when it holds "now".

    redis_proxy.py LISTEN UPSTREAM FLAG
"""
import os, select, socket, sys, threading

listen_port, upstream, flag = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]


def take_flag():
    try:
        with open(flag) as f:
            mode = f.read().strip()
        os.unlink(flag)
        return mode
    except OSError:
        return None


def pump(c):
    u = socket.create_connection(("127.0.0.1", upstream))
    armed = 0   # 1: waiting for a claim to go up, 2: inject before the next reply
    try:
        while True:
            mode = take_flag()
            if mode == "now":
                c.sendall(b"+OK\r\n")
            elif mode == "before":
                armed = 1
            r, _, _ = select.select([c, u], [], [], 0.02)
            if c in r:
                data = c.recv(65536)
                if not data:
                    return
                if armed == 1 and b"EVAL" in data:
                    armed = 2
                u.sendall(data)
            if u in r:
                data = u.recv(65536)
                if not data:
                    return
                if armed == 2:
                    c.sendall(b"+OK\r\n")
                    armed = 0
                c.sendall(data)
    except OSError:
        pass
    finally:
        c.close()
        u.close()


srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", listen_port))
srv.listen(16)
print("listening", flush=True)
while True:
    conn, _ = srv.accept()
    threading.Thread(target=pump, args=(conn,), daemon=True).start()
