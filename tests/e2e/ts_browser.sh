#!/usr/bin/env bash
# The TypeScript client in headless Chromium (Debian's chromium, from
# deploy/deps.sh): client/ts/test/browser.test.js serves
# client/ts/test/browser/page.html and the client compiled here from
# another 127.0.0.1 port (another origin), and the page calls brokers over
# HTTP (plain, and signed with WebCrypto) and WebSocket. Through a broker
# whose --cors-origin lists the page's origin every step works; without
# --cors-origin, or listing another origin, the page's calls fail. The
# page's results are read over the DevTools pipe; screenshots of each run
# are kept in $JRPC_ARTEFACTS (the build folder's artefacts/).
source "$JRPC_E2E_LIB"
HERE=$(cd "$(dirname "$JRPC_E2E_LIB")" && pwd)
TS=$(cd "$HERE/../../client/ts" && pwd)
command -v node >/dev/null || { echo "node is required (bash deploy/deps.sh)"; exit 1; }
command -v chromium >/dev/null || { echo "chromium is required (bash deploy/deps.sh)"; exit 1; }
command -v redis-server >/dev/null || { echo "redis-server is required"; exit 1; }
[ -x "$TS/node_modules/.bin/tsc" ] ||
    { echo "typescript is not installed: bash client/ts/npm_install.sh (tests/run.sh does)"; exit 1; }
"$TS/node_modules/.bin/tsc" -p "$TS" --outDir "$E2E_TMP/dist" > "$E2E_TMP/tsc.log" 2>&1
st=$?
cat "$E2E_TMP/tsc.log"
check "tsc: the client compiles (strict)" 0 "$st"
[ $st = 0 ] || e2e_finish
: "${JRPC_ARTEFACTS:=$E2E_TMP/artefacts}"
rm -f "$JRPC_ARTEFACTS"/ts_browser*.png
cd "$TS" && JRPC_TS_DIST=$E2E_TMP/dist JRPC_ARTEFACTS=$JRPC_ARTEFACTS timeout 200 \
    node --test test/browser.test.js > "$E2E_TMP/node.out" 2>&1
st=$?
grep -E '^(not ok|ok|# (tests|pass|fail))|^ +(not ok|ok) ' "$E2E_TMP/node.out"
[ $st = 0 ] || tail -n 80 "$E2E_TMP/node.out"
check "node --test: exit 0" 0 "$st"
check "node --test: every test ran, none skipped" "0 0" \
    "$(grep -c '^# skipped [1-9]' "$E2E_TMP/node.out") $(grep -c '^# fail [1-9]' "$E2E_TMP/node.out")"
for png in ts_browser.png ts_browser_nocors.png ts_browser_other.png; do
    check "screenshot $png is a PNG" "PNG" "$(head -c 4 "$JRPC_ARTEFACTS/$png" 2>/dev/null | tail -c 3)"
done
echo "screenshots in $JRPC_ARTEFACTS"
e2e_finish
