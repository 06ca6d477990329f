#!/usr/bin/env bash
# Every example of the JSON-RPC 2.0 specification (section 7), over ZeroMQ,
# through the real broker and two real workers, byte for byte. The examples
# and their answers are in spec_examples.json (stream_shapes.sh runs them
# streamed too).
source "$JRPC_E2E_LIB"
PY=python3; [ -x /usr/bin/python3 ] && PY=/usr/bin/python3
e2e_start_broker
e2e_start_worker
e2e_start_worker
e2e_wait_workers 2

send() { printf '%s' "$1" | "$JRPC" send; }

# name, body and reply of each example, NUL-separated
while IFS= read -r -d '' name && IFS= read -r -d '' body && IFS= read -r -d '' reply; do
    check "$name" "$reply" "$(send "$body")"
done < <($PY -c 'import json, sys
for e in json.load(open(sys.argv[1])):
    sys.stdout.write("%s\0%s\0%s\0" % (e["name"], e["body"], e["reply"]))' "$(dirname "$0")/spec_examples.json")
check "all $(grep -c '"name"' "$(dirname "$0")/spec_examples.json") examples ran" \
    "$(grep -c '"name"' "$(dirname "$0")/spec_examples.json")" "$E2E_PASS"
# The REQ-style empty reply must not wedge the next request.
check "after notifications" '{"jsonrpc":"2.0","result":7,"id":1}' \
    "$(send '{"jsonrpc":"2.0","method":"sum","params":[1,2,4],"id":1}')"
e2e_finish
