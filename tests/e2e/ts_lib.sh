# tests/e2e/ts_lib.sh — what the TypeScript client's e2e scripts share
# (ts_client.sh, ts_browser.sh): source it after lib.sh.
#   ts_need CMD...        each command is installed, or the test fails saying where it comes from
#   ts_build              compiles client/ts with the pinned tsc (client/ts/npm_install.sh,
#                         run by tests/run.sh; nothing is downloaded here) into $E2E_TMP/dist
#   ts_node_test FILE...  node --test of client/ts/test/FILE... against $JRPC_BIN,
#                         checks that all ran and passed
TS=$(cd "$(dirname "$JRPC_E2E_LIB")/../../client/ts" && pwd)

ts_need() {
    local c
    for c in node redis-server "$@"; do
        command -v "$c" >/dev/null || { echo "$c is required (bash deploy/deps.sh)"; exit 1; }
    done
    [ -x "$TS/node_modules/.bin/tsc" ] ||
        { echo "typescript is not installed: bash client/ts/npm_install.sh (tests/run.sh does)"; exit 1; }
}

ts_build() {
    "$TS/node_modules/.bin/tsc" -p "$TS" --outDir "$E2E_TMP/dist" > "$E2E_TMP/tsc.log" 2>&1
    local st=$?
    cat "$E2E_TMP/tsc.log"
    check "tsc: the client compiles (strict)" 0 "$st"
    [ $st = 0 ] || e2e_finish
}

ts_node_test() {
    # Node 22 has a global WebSocket; Node 20 has it behind this flag.
    local flags=() st
    node -e 'process.exit(typeof WebSocket === "function" ? 0 : 1)' || flags+=(--experimental-websocket)
    (cd "$TS" && JRPC_TS_DIST=$E2E_TMP/dist timeout 280 node "${flags[@]}" --test --test-concurrency=1 \
        "${@/#/test/}") > "$E2E_TMP/node.out" 2>&1
    st=$?
    grep -E '^(not ok|ok|# (tests|pass|fail|load))|^ +(not ok|ok) ' "$E2E_TMP/node.out"
    [ $st = 0 ] || tail -n 80 "$E2E_TMP/node.out"
    check "node --test: exit 0" 0 "$st"
    check "node --test: tests ran, none skipped, none failed" "1 0 0" \
        "$(grep -c '^# tests [1-9]' "$E2E_TMP/node.out") $(grep -c '^# skipped [1-9]' "$E2E_TMP/node.out") $(grep -c '^# fail [1-9]' "$E2E_TMP/node.out")"
}
