#!/usr/bin/env bash
# What a different signing contract would buy, measured before anyone
# designs one (bench/RESULTS.md, sixth session):
#   bash bench/signed_bound.sh [CONNECTIONS] [SECONDS] [ROUNDS]
# Builds HEAD with bench/experiments/signed_bound.patch in a scratch git
# worktree (removed on exit). The patch is an experiment, never a product
# option: JRPC_EXP_MAC=sha|chacha|gmac|none swaps SHA-256 of the body, on
# the client and the broker alike, for an AEAD tag over it (ChaCha20-
# Poly1305 or AES-128-GCM, body as AAD, fixed key and IV: the cost, not
# the security) or for nothing; JRPC_EXP_NOCLAIM skips the nonce claim in
# Redis (replay protection off). For each MAC, bench/signed_rate.sh runs in
# one run, alternating: signed with no claim, signed with the claim (Redis'
# unix socket) and unsigned, jrpc-bench --batch 100 --connections
# CONNECTIONS (default 4), SECONDS (5) a side, ROUNDS (5) rounds; prints
# each round's ratios to unsigned and their medians.
set -eu
cd "$(dirname "$0")/.."
conns=${1:-4} secs=${2:-5} rounds=${3:-5}
D=$(mktemp -d)
W=$D/tree
git worktree add --detach "$W" HEAD >/dev/null 2>&1
trap 'git worktree remove --force "$W"; rm -rf "$D"' EXIT
git -C "$W" apply "$PWD/bench/experiments/signed_bound.patch"
source bench/build_rel.sh
BUILD_REL_SRC=$W build_rel "$W/build" jrpc-broker jrpc-worker jrpc-bench jrpc
for m in sha chacha gmac none; do
    echo "== body MAC: $m"
    JRPC_EXP_MAC=$m TCP_BROKER="env JRPC_EXP_NOCLAIM=1 $W/build/bin/jrpc-broker" \
        bash bench/signed_rate.sh "$W/build" "$conns" "$secs" "$rounds" |
        tail -n +2 | sed 's/\btcp\b/no-claim/g; s/\bunix\b/claim/g' | tee "$D/rounds"
    python3 - "$D/rounds" <<'PY'
import re, statistics, sys
r = [m.groups() for m in map(re.compile(r"ratio no-claim ([\d.]+) claim ([\d.]+)").search, open(sys.argv[1])) if m]
print("median ratio: no-claim %.2f claim %.2f" % tuple(statistics.median(float(x[i]) for x in r) for i in (0, 1)))
PY
done
