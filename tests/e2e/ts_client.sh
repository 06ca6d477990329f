#!/usr/bin/env bash
# The TypeScript client (client/ts) under node --test against the real
# broker, worker and Redis of $JRPC_BIN: the signing vectors shared with
# test_jrpc_sign (tests/data/sign_vectors.tsv), HTTP open, signed and
# bearer, WebSocket (signed and bearer upgrades), batches, notifications,
# streams (SSE, NDJSON, WebSocket), deadlines, errors, and several brokers
# with retry: "safe" where one is killed (test/failover.test.js: answered
# once, counted at the worker). The client is compiled here with the
# pinned tsc that client/ts/npm_install.sh installed (tests/run.sh runs it;
# nothing is downloaded here), into this run's own folder.
source "$JRPC_E2E_LIB"
HERE=$(cd "$(dirname "$JRPC_E2E_LIB")" && pwd)
TS=$(cd "$HERE/../../client/ts" && pwd)
command -v node >/dev/null || { echo "node is required (bash deploy/deps.sh)"; exit 1; }
command -v redis-server >/dev/null || { echo "redis-server is required"; exit 1; }
[ -x "$TS/node_modules/.bin/tsc" ] ||
    { echo "typescript is not installed: bash client/ts/npm_install.sh (tests/run.sh does)"; exit 1; }
"$TS/node_modules/.bin/tsc" -p "$TS" --outDir "$E2E_TMP/dist" > "$E2E_TMP/tsc.log" 2>&1
st=$?
cat "$E2E_TMP/tsc.log"
check "tsc: the client compiles (strict)" 0 "$st"
[ $st = 0 ] || e2e_finish
# Node 22 has a global WebSocket; Node 20 has it behind this flag.
flags=()
node -e 'process.exit(typeof WebSocket === "function" ? 0 : 1)' || flags+=(--experimental-websocket)
cd "$TS" && JRPC_TS_DIST=$E2E_TMP/dist timeout 280 node "${flags[@]}" --test --test-concurrency=1 \
    test/sign.test.js test/api.test.js test/broker.test.js test/failover.test.js > "$E2E_TMP/node.out" 2>&1
st=$?
grep -E '^(not ok|ok|# (tests|pass|fail|load))|^ +(not ok|ok) ' "$E2E_TMP/node.out"
[ $st = 0 ] || tail -n 80 "$E2E_TMP/node.out"
check "node --test: exit 0" 0 "$st"
check "node --test: every test ran, none skipped" "0 0" \
    "$(grep -c '^# skipped [1-9]' "$E2E_TMP/node.out") $(grep -c '^# fail [1-9]' "$E2E_TMP/node.out")"
e2e_finish
