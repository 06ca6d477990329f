#!/usr/bin/env bash
# Discovery (issue 32 section 3, docs/ARCHITECTURE.md "Discovery"):
# rpc.discover answered by the broker over HTTP, ZeroMQ and WebSocket (and
# inside a batch), and GET /openrpc.json, each document validated against
# the published OpenRPC meta-schema by a validator nobody here wrote (ajv
# with @open-rpc/meta-schema, tests/deploy/node_modules); a Python worker's
# type-hinted method has its schema, a C worker's --schemas file its own;
# with bearer keys a key limited by its ACL sees only what it may call, and
# /openrpc.json is authenticated like /rpc.
source "$JRPC_E2E_LIB"
HERE=$(cd "$(dirname "$JRPC_E2E_LIB")" && pwd)
VALIDATE="node $HERE/openrpc_validate.cjs"
[ -d "$HERE/../deploy/node_modules/@open-rpc/meta-schema" ] ||
    { echo "no @open-rpc/meta-schema: run bash tests/deploy/npm_install.sh first"; exit 1; }
export PYTHONPATH="$HERE/../../worker/python"

cat > "$E2E_TMP/pyw.py" <<'PY'
from typing import List, Optional
from jrpc.worker import Methods

methods = Methods()


@methods.method(idempotent=True)
def scale(values: List[float], factor: float = 2.0) -> List[float]:
    return [v * factor for v in values]


@methods.method()
def greet(name: str, title: Optional[str] = None) -> str:
    return "hello %s%s" % (title + " " if title else "", name)
PY
cat > "$E2E_TMP/schemas.json" <<'JSON'
{"add": {"params": [{"name": "a", "schema": {"type": "integer"}, "required": true},
                    {"name": "b", "schema": {"type": "integer"}, "required": true}],
         "result": {"type": "integer"}},
 "not_a_method": {"params": []}}
JSON

E2E_HTTP=1 e2e_start_broker --heartbeat-ms 200
e2e_start_worker --service calc --name cw --schemas "$E2E_TMP/schemas.json" --heartbeat-ms 200
e2e_wait_workers 1
/usr/bin/python3 -m jrpc.worker --connect "$WORKERS_EP" --service py --name pw \
    --heartbeat-ms 200 "$E2E_TMP/pyw.py:methods" >>"$E2E_TMP/pyw.log" 2>&1 &
E2E_PIDS+=("$!")
e2e_wait_workers 2

DISCOVER='{"jsonrpc":"2.0","method":"rpc.discover","id":1}'
# result FILE: the reply's result into FILE.doc (the document)
result() { /usr/bin/python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
json.dump(r["result"], open(sys.argv[1] + ".doc", "w"))' "$1"; }

curl -s -H 'Content-Type: application/json' --data-binary "$DISCOVER" "$HTTP_URL/rpc" > "$E2E_TMP/http"
result "$E2E_TMP/http"
printf '%s' "$DISCOVER" | "$JRPC" send > "$E2E_TMP/zmq"
result "$E2E_TMP/zmq"
/usr/bin/python3 - "ws://127.0.0.1:$HTTP_PORT/rpc" "$DISCOVER" > "$E2E_TMP/ws" <<'PY'
import asyncio, sys, websockets
async def main():
    async with websockets.connect(sys.argv[1]) as ws:
        await ws.send(sys.argv[2])
        print(await asyncio.wait_for(ws.recv(), 10))
asyncio.run(main())
PY
result "$E2E_TMP/ws"
curl -s -o "$E2E_TMP/get.doc" -w '%{http_code} %{content_type}' "$HTTP_URL/openrpc.json" > "$E2E_TMP/get.status"
check "GET /openrpc.json: 200 JSON" "200 application/json" "$(cat "$E2E_TMP/get.status")"
printf '%s' "[{\"jsonrpc\":\"2.0\",\"method\":\"calc.add\",\"params\":[1,2],\"id\":1},$DISCOVER]" |
    "$JRPC" send > "$E2E_TMP/batch"
/usr/bin/python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
json.dump(r[1]["result"], open(sys.argv[1] + ".doc", "w"))
print(r[0]["result"])' "$E2E_TMP/batch" > "$E2E_TMP/batch.add"
check "rpc.discover inside a batch, beside a call" 3 "$(cat "$E2E_TMP/batch.add")"

out=$($VALIDATE "$E2E_TMP"/http.doc "$E2E_TMP"/zmq.doc "$E2E_TMP"/ws.doc "$E2E_TMP"/get.doc \
      "$E2E_TMP"/batch.doc 2>&1)
check "the meta-schema validates all five documents" 5 "$(grep -c ': valid$' <<<"$out")"
[ "$(grep -c ': valid$' <<<"$out")" = 5 ] || echo "$out"
check "the same document over each transport" 1 \
    "$(for f in http zmq ws get batch; do
           /usr/bin/python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))))' \
               "$E2E_TMP/$f.doc"; done | sort -u | wc -l)"

# What the document says (names, schemas, the bare names' owners).
facts=$(/usr/bin/python3 - "$E2E_TMP/http.doc" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
m = {x["name"]: x for x in d["methods"]}
print("openrpc", d["openrpc"])
print("names", " ".join(sorted(m)))
print("scale", json.dumps(m["py.scale"]["params"], sort_keys=True),
      json.dumps(m["py.scale"]["result"], sort_keys=True), m["py.scale"]["x-jrpc-idempotent"])
print("greet", json.dumps(m["py.greet"]["params"][1], sort_keys=True))
print("add", json.dumps(m["calc.add"]["params"][0], sort_keys=True),
      json.dumps(m["calc.add"]["result"], sort_keys=True), m["calc.add"]["x-jrpc-bare"],
      m["calc.add"]["x-jrpc-service"], m["calc.add"]["x-jrpc-method"])
print("echo", m["calc.echo"]["params"], m["calc.echo"]["result"]["schema"], m["calc.echo"]["x-jrpc-json"])
PY
)
check "document: OpenRPC 1.3.2" "openrpc 1.3.2" "$(grep '^openrpc' <<<"$facts")"
check "document: every method by canonical name" \
    "names calc.add calc.count calc.echo calc.get_data calc.notify_hello calc.notify_sum calc.sleep calc.slow_update calc.spin calc.subtract calc.sum calc.update py.greet py.scale" \
    "$(grep '^names' <<<"$facts")"
check "document: the Python worker's type hints as schemas" \
    'scale [{"name": "values", "required": true, "schema": {"items": {"type": "number"}, "type": "array"}}, {"name": "factor", "schema": {"type": "number"}}] {"name": "result", "schema": {"items": {"type": "number"}, "type": "array"}} True' \
    "$(grep '^scale' <<<"$facts")"
check "document: Optional[str]" \
    'greet {"name": "title", "schema": {"oneOf": [{"type": "string"}, {"type": "null"}]}}' \
    "$(grep '^greet' <<<"$facts")"
check "document: the C worker's --schemas file" \
    'add {"name": "a", "required": true, "schema": {"type": "integer"}} {"name": "result", "schema": {"type": "integer"}} True calc add' \
    "$(grep '^add' <<<"$facts")"
check "document: a method without schemas" "echo [] {} True" "$(grep '^echo' <<<"$facts")"
check "a notification of rpc.discover: no answer" "" \
    "$(printf '%s' '{"jsonrpc":"2.0","method":"rpc.discover"}' | "$JRPC" send)"
check "rpc.discoverx is still reserved" "-32601" \
    "$(printf '%s' '{"jsonrpc":"2.0","method":"rpc.discoverx","id":1}' | "$JRPC" send |
       sed -E 's/.*"code":(-?[0-9]+).*/\1/')"

# Keys: a key sees what its ACL lets it call; /openrpc.json like /rpc.
TOKEN=openrpc-e2e-token-0123456789abcdefghijklmnop
ALL=openrpc-e2e-all-0123456789abcdefghijklmnopqrs
{ printf 'pyonly bearer-sha256:%s py.*\n' "$(printf %s "$TOKEN" | sha256sum | cut -d' ' -f1)"
  printf 'ops bearer-sha256:%s\n' "$(printf %s "$ALL" | sha256sum | cut -d' ' -f1)"
} > "$E2E_TMP/keys"
chmod 600 "$E2E_TMP/keys"
E2E_HTTP=1 e2e_restart_broker --heartbeat-ms 200 --keys "$E2E_TMP/keys"
e2e_wait_workers 2
names() { /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
d = d.get("result", d)
print(" ".join(sorted(x["name"] for x in d["methods"])) if "methods" in d else json.dumps(d))'; }
check "rpc.discover with a py.* key: py's methods only" "py.greet py.scale" \
    "$(curl -s -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
        --data-binary "$DISCOVER" "$HTTP_URL/rpc" | names)"
check "GET /openrpc.json with a py.* key: py's methods only" "py.greet py.scale" \
    "$(curl -s -H "Authorization: Bearer $TOKEN" "$HTTP_URL/openrpc.json" | names)"
check "GET /openrpc.json with a key without ACL: all 14" 14 \
    "$(curl -s -H "Authorization: Bearer $ALL" "$HTTP_URL/openrpc.json" | names | wc -w)"
check "GET /openrpc.json without a key: 401" 401 \
    "$(curl -s -o /dev/null -w '%{http_code}' "$HTTP_URL/openrpc.json")"
check "GET /openrpc.json with an unknown token: 401" 401 \
    "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer nope' "$HTTP_URL/openrpc.json")"
curl -s -H "Authorization: Bearer $TOKEN" "$HTTP_URL/openrpc.json" > "$E2E_TMP/acl.doc"
check "the ACL-limited document validates too" "$E2E_TMP/acl.doc: valid" \
    "$($VALIDATE "$E2E_TMP/acl.doc" 2>&1)"
e2e_finish
