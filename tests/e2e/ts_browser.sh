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
source "$(dirname "$JRPC_E2E_LIB")/ts_lib.sh"
ts_need chromium
ts_build
export JRPC_ARTEFACTS=${JRPC_ARTEFACTS:-$E2E_TMP/artefacts}
rm -f "$JRPC_ARTEFACTS"/ts_browser*.png
ts_node_test browser.test.js
for png in ts_browser.png ts_browser_nocors.png ts_browser_other.png; do
    check "screenshot $png is a PNG" "PNG" "$(head -c 4 "$JRPC_ARTEFACTS/$png" 2>/dev/null | tail -c 3)"
done
echo "screenshots in $JRPC_ARTEFACTS"
e2e_finish
