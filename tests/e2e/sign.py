#!/usr/bin/env python3
"""Signs a request body the way docs/SIGNING.md says, independently of our C
code, and prints the four X-JRPC-* headers, one per line (for curl -H @file).

    sign.py --key ID --secret S --body-file F [--ts-offset N] [--ts T] [--nonce X]
"""
import argparse, hashlib, hmac, secrets, sys, time

ap = argparse.ArgumentParser()
ap.add_argument("--key", required=True)
ap.add_argument("--secret", required=True)
ap.add_argument("--body-file", required=True)
ap.add_argument("--ts-offset", type=int, default=0)
ap.add_argument("--ts", type=int)
ap.add_argument("--nonce")
a = ap.parse_args()
body = open(a.body_file, "rb").read()
ts = a.ts if a.ts is not None else int(time.time()) + a.ts_offset
nonce = a.nonce or secrets.token_urlsafe(16)[:22]
s = "v1\n%s\n%d\n%s\n%s" % (a.key, ts, nonce, hashlib.sha256(body).hexdigest())
sig = hmac.new(a.secret.encode(), s.encode(), hashlib.sha256).hexdigest()
sys.stdout.write("X-JRPC-Key: %s\nX-JRPC-Timestamp: %d\nX-JRPC-Nonce: %s\nX-JRPC-Signature: %s\n"
                 % (a.key, ts, nonce, sig))
