#!/usr/bin/env bash
# The live status page (issue 33) in Debian's headless chromium, against a
# broker with workers under a light load: status_page.cjs (node built-ins,
# the DevTools pipe as in ts_browser.sh) checks that the page renders and
# updates, that what it shows matches /status and /status/workers, that a
# worker that joins appears and one killed -9 disappears, and that hostile
# strings are shown as text; a screenshot is kept in $JRPC_ARTEFACTS (the
# build folder's artefacts/). Here: the page's response headers, the admin
# listener's limits (a body refused, HEAD answered), and `jrpc status`.
source "$JRPC_E2E_LIB"
for c in chromium node curl; do
    command -v "$c" >/dev/null || { echo "$c is required (bash deploy/deps.sh)"; exit 1; }
done
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export JRPC_ARTEFACTS=${JRPC_ARTEFACTS:-$E2E_TMP/artefacts}
rm -f "$JRPC_ARTEFACTS/status_page.png"

export E2E_HTTP=1
e2e_start_broker --admin 127.0.0.1:0 --heartbeat-ms 200
ADMIN=$(e2e_admin_url)
e2e_wait_for "curl -sf $ADMIN/healthz >/dev/null" 10 || { check "admin up" ok down; e2e_finish; }
e2e_start_worker --name alpha --heartbeat-ms 200
e2e_start_worker --name beta --heartbeat-ms 200
e2e_wait_workers 2

# A light load for the whole test: one echo call at a time, bounded.
( for ((i = 0; i < 3000; i++)); do
      "$JRPC" -u "$URL" call echo '["x"]' >/dev/null 2>&1 || sleep 0.05
      sleep 0.02
  done ) &
E2E_PIDS+=("$!")

# A refused body, for the page's last refusals.
curl -s -o /dev/null -X POST -H 'Content-Type: text/plain' --data 'x' "$HTTP_URL/rpc"

# The page's heads: a type with its charset, no caching, a CSP of self only.
heads=$(curl -s -D - -o /dev/null "$ADMIN/" | tr -d '\r')
check "GET /: 200" 1 "$(grep -c '^HTTP/1.1 200' <<<"$heads")"
check "GET /: Content-Type with charset" "Content-Type: text/html; charset=utf-8" "$(grep '^Content-Type:' <<<"$heads")"
check "GET /: Cache-Control: no-store" 1 "$(grep -c '^Cache-Control: no-store$' <<<"$heads")"
check "GET /: CSP self only, no inline script" 1 \
    "$(grep '^Content-Security-Policy:' <<<"$heads" | grep "default-src 'none'" | grep "script-src 'self';" | grep -vc 'unsafe')"
check "GET /status.js: JavaScript" "Content-Type: text/javascript; charset=utf-8" \
    "$(curl -s -D - -o /dev/null "$ADMIN/status.js" | tr -d '\r' | grep '^Content-Type:')"
check "GET /status: JSON with the version" "$("$JRPC_BIN/jrpc-broker" --version | grep -o '[0-9][0-9.]*' | head -1)" \
    "$(curl -s "$ADMIN/status" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')"

# The admin's limits still hold around the new paths.
check "GET /status with a body: 400" 400 \
    "$(curl -s -o /dev/null -w '%{http_code}' -X GET -H 'Content-Type: text/plain' --data 'hello' "$ADMIN/status")"
check "HEAD /status: 200, a length, no body" "200 yes 0" \
    "$(curl -s -I -o "$E2E_TMP/head.out" -w '%{http_code} %{size_download}' "$ADMIN/status" |
       { read -r code size; echo "$code $(grep -qi '^Content-Length: [1-9]' "$E2E_TMP/head.out" && echo yes || echo no) $size"; })"
check "DELETE /status: 405" 405 "$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$ADMIN/status")"
check "GET /nope: 404" 404 "$(curl -s -o /dev/null -w '%{http_code}' "$ADMIN/nope")"

# jrpc status: the same figures in the terminal.
"$JRPC" status --url "$ADMIN" >"$E2E_TMP/status.out" 2>&1
check "jrpc status: exit 0" 0 "$?"
check "jrpc status: names the workers" "2" "$(grep -cE '^  (alpha|beta) ' "$E2E_TMP/status.out")"
check "jrpc status: the version line" 1 "$(grep -c '^jrpc-broker [0-9]' "$E2E_TMP/status.out")"
check "jrpc status: the echo method" 1 "$(grep -cE '^ +echo +[0-9]' "$E2E_TMP/status.out")"
"$JRPC" status --url "http://127.0.0.1:1" >/dev/null 2>"$E2E_TMP/status.err"
check "jrpc status: an unreachable admin exits 2" 2 "$?"
check "jrpc status: says so" 1 "$(grep -c 'cannot reach the admin listener' "$E2E_TMP/status.err")"
"$JRPC" status --url "$HTTP_URL" >/dev/null 2>"$E2E_TMP/status.err"
check "jrpc status: a non-200 answer exits 2" 2 "$?"

# The page in the browser.
ADMIN=$ADMIN JRPC_BIN=$JRPC_BIN WORKERS_EP=$WORKERS_EP ARTEFACTS=$JRPC_ARTEFACTS TMPDIR_E2E=$E2E_TMP \
    timeout 250 node "$HERE/status_page.cjs" >"$E2E_TMP/page.out" 2>"$E2E_TMP/page.log"
check "status_page.cjs: exit 0" 0 "$?"
while IFS=$'\t' read -r tag name expected actual; do
    [ "$tag" = CHECK ] && check "$name" "$expected" "$actual"
done <"$E2E_TMP/page.out"
check "status_page.cjs: all its checks ran" 16 "$(grep -c '^CHECK' "$E2E_TMP/page.out")"
check "screenshot status_page.png is a PNG" "PNG" "$(head -c 4 "$JRPC_ARTEFACTS/status_page.png" 2>/dev/null | tail -c 3)"
echo "screenshot in $JRPC_ARTEFACTS/status_page.png"
e2e_finish
