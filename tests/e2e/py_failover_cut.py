"""The deterministic half of tests/e2e/py_failover.sh: a connection that
dies after the broker ran the body and kept its reply. A proxy in front of
B1 (failover_cut_proxy.py) forwards each request, reads B1's whole answer,
and closes the client's connection without it. A jrpc.Client given [proxy, B2]:
  - retry="safe": the body is sent again to B2 under the same key, B2
    answers the reply B1 kept, and the call ran once (at W1);
  - no retry: CallMayHaveRunError, and the call ran once (at W1).
Prints CHECK lines as py_client_check.py does. argv: B1's and B2's HTTP
URLs; REC_FILE and KEY_FILE in the environment."""

import json
import os
import sys

from failover_cut_proxy import start
from jrpc import CallMayHaveRunError, Client

b2_url = sys.argv[2]
proxy = start(sys.argv[1])


def check(name, expected, actual):
    print("CHECK\t%s\t%s\t%s" % (name, json.dumps(expected), json.dumps(actual)), flush=True)


def runs(token):
    with open(os.environ["REC_FILE"]) as f:
        return [line.split()[1] for line in f if line.split()[0] == token]


safe = Client([proxy, b2_url], key_file=os.environ["KEY_FILE"], retry="safe")
safe._next = 0                       # the proxy first
check("cut after B1 kept the reply, retry='safe': answered (B2 gives B1's kept reply)",
      "cut-safe", safe.call("rec", {"token": "cut-safe"}))
check("... and the call ran once, at B1's worker", ["w1"], runs("cut-safe"))
plain = Client([proxy, b2_url], key_file=os.environ["KEY_FILE"])
plain._next = 0
try:
    plain.call("rec", {"token": "cut-plain"})
    got = "answered"
except CallMayHaveRunError as e:
    got = "CallMayHaveRunError" if "may or may not have run" in str(e) else str(e)
check("cut after B1 ran it, no retry: CallMayHaveRunError", "CallMayHaveRunError", got)
check("... and it did run, once, at B1's worker", ["w1"], runs("cut-plain"))
