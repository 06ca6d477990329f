#!/usr/bin/env bash
# Every example of the JSON-RPC 2.0 specification (section 7), over ZeroMQ,
# through the real broker and two real workers, byte for byte.
source "$JRPC_E2E_LIB"
e2e_start_broker
e2e_start_worker
e2e_start_worker
e2e_wait_workers 2

send() { printf '%s' "$1" | "$JRPC" send; }

check "positional 1" '{"jsonrpc":"2.0","result":19,"id":1}' \
    "$(send '{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}')"
check "positional 2" '{"jsonrpc":"2.0","result":-19,"id":2}' \
    "$(send '{"jsonrpc": "2.0", "method": "subtract", "params": [23, 42], "id": 2}')"
check "named 1" '{"jsonrpc":"2.0","result":19,"id":3}' \
    "$(send '{"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 23, "minuend": 42}, "id": 3}')"
check "named 2" '{"jsonrpc":"2.0","result":19,"id":4}' \
    "$(send '{"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 42, "subtrahend": 23}, "id": 4}')"
check "notification update" '' \
    "$(send '{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}')"
check "notification foobar" '' "$(send '{"jsonrpc": "2.0", "method": "foobar"}')"
check "non-existent method" \
    '{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":"1"}' \
    "$(send '{"jsonrpc": "2.0", "method": "foobar", "id": "1"}')"
check "invalid JSON" '-32700 null' \
    "$(send '{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]' |
        sed -E 's/.*"code":(-?[0-9]+).*"id":(null)\}$/\1 \2/')"
check "invalid Request object" \
    '{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"},"id":null}' \
    "$(send '{"jsonrpc": "2.0", "method": 1, "params": "bar"}')"
check "batch, invalid JSON" '-32700 null' \
    "$(send '[
  {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
  {"jsonrpc": "2.0", "method"
]' | sed -E 's/.*"code":(-?[0-9]+).*"id":(null)\}$/\1 \2/')"
check "empty array" \
    '{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"},"id":null}' \
    "$(send '[]')"
check "invalid batch [1]" \
    '[{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"},"id":null}]' \
    "$(send '[1]')"
E='{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"},"id":null}'
check "invalid batch [1,2,3]" "[$E,$E,$E]" "$(send '[1,2,3]')"
check "mixed batch" \
    '[{"jsonrpc":"2.0","result":7,"id":"1"},{"jsonrpc":"2.0","result":19,"id":"2"},{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"},"id":null},{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":"5"},{"jsonrpc":"2.0","result":["hello",5],"id":"9"}]' \
    "$(send '[
        {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
        {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
        {"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},
        {"foo": "boo"},
        {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
        {"jsonrpc": "2.0", "method": "get_data", "id": "9"}
    ]')"
check "all notifications" '' \
    "$(send '[
        {"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},
        {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}
    ]')"
# The REQ-style empty reply must not wedge the next request.
check "after notifications" '{"jsonrpc":"2.0","result":7,"id":1}' \
    "$(send '{"jsonrpc":"2.0","method":"sum","params":[1,2,4],"id":1}')"
e2e_finish
