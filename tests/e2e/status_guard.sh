#!/usr/bin/env bash
# GET /status and `jrpc status` on the Redis link and the replay guard
# (issue 33): with a real redis-server, the link shown up, then down when
# Redis is killed (and the bodies refused for it in the last refusals),
# then, Redis back empty, the memory-loss fence shown active with when it
# ends (the broker refuses bodies signed before it), on the page in
# headless chromium too.
source "$JRPC_E2E_LIB"
command -v redis-server >/dev/null || { echo "redis-server is not installed"; exit 1; }
command -v chromium >/dev/null || { echo "chromium is required (bash deploy/deps.sh)"; exit 1; }
PY=/usr/bin/python3
e2e_start_redis
printf 'demo s3cr3t-s3cr3t-s3cr3t\n' > "$E2E_TMP/keys"
e2e_start_broker --keys "$E2E_TMP/keys" --redis "redis://127.0.0.1:$RPORT" --redis-timeout-ms 3000 \
    --skew 60 --admin 127.0.0.1:0
ADMIN=$(e2e_admin_url)
e2e_start_worker
e2e_wait_workers 1
signed() { "$JRPC" --url "$URL" --key-id demo --secret s3cr3t-s3cr3t-s3cr3t call update '[1]' 2>&1; }
st() { curl -s "$ADMIN/status" | $PY -c "import json,sys; s=json.load(sys.stdin); print($1)"; }

check "Redis up: a signed call is answered" 0 "$(signed | grep -c '"code"')"
check "Redis up: shown up, direct" "True redis True True" \
    "$(st 's["redis"]["up"], s["redis"]["mode"], s["replay"]["on"], s["replay"]["up"]')"
check "Redis up: no fence" "False 0" "$(st 's["replay"]["fence"]["active"], s["replay"]["memory_losses"]')"

kill -9 "$REDIS_PID"; wait "$REDIS_PID" 2>/dev/null
check "Redis down: a signed call is refused -32006" 1 "$(signed | grep -c -- '-32006')"
e2e_wait_for "[ \"\$(st 's[\"redis\"][\"up\"]')\" = False ]" 10
check "Redis down: shown down" "False False" "$(st 's["redis"]["up"], s["replay"]["up"]')"
check "Redis down: the refusal listed as unavailable, -32006" "unavailable -32006" \
    "$(st 's["refusals"][0]["outcome"], s["refusals"][0]["code"]')"
"$JRPC" status --url "$ADMIN" > "$E2E_TMP/status.out"
check "jrpc status: Redis DOWN" 1 "$(grep -c '^redis: redis DOWN' "$E2E_TMP/status.out")"

# Redis back empty: the broker notices the loss at its next claim and fences.
e2e_start_redis
e2e_wait_for "[ \"\$(st 's[\"replay\"][\"fence\"][\"active\"]')\" = True ] || { signed >/dev/null; false; }" 20
check "memory lost: fence active" "True 1" "$(st 's["replay"]["fence"]["active"], s["replay"]["memory_losses"]')"
check "memory lost: ends one second after the last refused signing time, in the future" "True True True" \
    "$(st 's["replay"]["fence"]["ends_at"] == s["replay"]["fence"]["refuse_signed_to"] + 1, s["replay"]["lost_at"] > 0, 0 < s["replay"]["fence"]["ends_in_s"] <= 61 + s["replay"]["fence"]["ends_at"] - s["now"]')"
"$JRPC" status --url "$ADMIN" > "$E2E_TMP/status.out"
check "jrpc status: FENCED" 1 "$(grep -c '^replay guard: FENCED' "$E2E_TMP/status.out")"
# The page shows it (chromium runs its script for a few virtual seconds).
timeout 60 chromium --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage \
    --user-data-dir="$E2E_TMP/chromium" --virtual-time-budget=4000 --dump-dom "$ADMIN/" \
    > "$E2E_TMP/dom.html" 2>"$E2E_TMP/chromium.log"
check "page: replay guard shown fenced" 1 "$(grep -c 'id="replay">fenced<' "$E2E_TMP/dom.html")"
check "page: Redis shown up" 1 "$(grep -c 'id="redis">up<' "$E2E_TMP/dom.html")"
e2e_finish
