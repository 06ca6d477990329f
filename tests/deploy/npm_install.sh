#!/usr/bin/env bash
# Installs the pinned npm validators of tests/deploy/package-lock.json into
# tests/deploy/node_modules (gitignored). tests/run.sh runs it before ctest, so
# the deploy/ checks inside ctest only use what is installed and never touch
# the registry. Does nothing when node_modules already matches the lock file
# (a stamp copy of the lock is kept inside it); otherwise `npm ci`, which is
# served from npm's cache when the registry was already fetched once.
#
#   bash tests/deploy/npm_install.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
mods=$here/node_modules
if cmp -s "$here/package-lock.json" "$mods/.jrpc-lock.json" 2>/dev/null; then
    exit 0
fi
command -v npm >/dev/null || { echo "npm_install: npm is not installed (bash deploy/deps.sh)" >&2; exit 1; }
echo "npm_install: npm ci (deploy/ validators) into $mods"
log=$(mktemp)
if ! (cd "$here" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error) >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"
    exit 1
fi
rm -f "$log"
cp "$here/package-lock.json" "$mods/.jrpc-lock.json"
