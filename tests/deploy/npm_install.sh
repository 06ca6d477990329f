#!/usr/bin/env bash
# Installs the pinned npm packages of DIR/package-lock.json into
# DIR/node_modules (gitignored); DIR is tests/deploy (the deploy/ checks'
# validators) unless given (tests/mcp/npm_install.sh gives tests/mcp).
# tests/run.sh runs it before ctest, so the tests inside ctest only use what
# is installed and never touch the registry. Does nothing when node_modules
# already matches the lock file (a stamp copy of the lock is kept inside
# it); otherwise `npm ci`, which is served from npm's cache when the
# registry was already fetched once.
#
#   bash tests/deploy/npm_install.sh [DIR]
set -u
here=$(cd "${1:-$(dirname "$0")}" && pwd)
mods=$here/node_modules
if cmp -s "$here/package-lock.json" "$mods/.jrpc-lock.json" 2>/dev/null; then
    exit 0
fi
command -v npm >/dev/null || { echo "npm_install: npm is not installed (bash deploy/deps.sh)" >&2; exit 1; }
echo "npm_install: npm ci into $mods"
log=$(mktemp)
if ! (cd "$here" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error) >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"
    exit 1
fi
rm -f "$log"
cp "$here/package-lock.json" "$mods/.jrpc-lock.json"
