#!/usr/bin/env bash
# The TypeScript client (client/ts) under node --test against the real
# broker, worker and Redis of $JRPC_BIN: the signing vectors shared with
# test_jrpc_sign (tests/data/sign_vectors.tsv), the bytes it sends, HTTP
# open, signed and bearer, WebSocket (signed and bearer upgrades), batches,
# notifications, streams (SSE, NDJSON, WebSocket), deadlines, errors, and
# several brokers with retry: "safe" where one is killed
# (test/failover.test.js: answered once, counted at the worker).
source "$JRPC_E2E_LIB"
source "$(dirname "$JRPC_E2E_LIB")/ts_lib.sh"
ts_need
ts_build
ts_node_test sign.test.js api.test.js broker.test.js failover.test.js
e2e_finish
