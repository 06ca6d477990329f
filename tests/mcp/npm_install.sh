#!/usr/bin/env bash
# Installs the pinned MCP packages of tests/mcp/package-lock.json (the
# official TypeScript SDK and the reference server-everything, for
# tests/e2e/mcp.sh) into tests/mcp/node_modules (gitignored). tests/run.sh
# runs it before ctest, so the e2e test inside ctest only uses what is
# installed and never touches the registry. Does nothing when node_modules
# already matches the lock file (a stamp copy of the lock is kept inside
# it); otherwise `npm ci`. The same pattern as tests/deploy/npm_install.sh.
#
#   bash tests/mcp/npm_install.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
mods=$here/node_modules
if cmp -s "$here/package-lock.json" "$mods/.jrpc-lock.json" 2>/dev/null; then
    exit 0
fi
command -v npm >/dev/null || { echo "npm_install: npm is not installed (bash deploy/deps.sh)" >&2; exit 1; }
echo "npm_install: npm ci (MCP SDK and server-everything) into $mods"
log=$(mktemp)
if ! (cd "$here" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error) >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"
    exit 1
fi
rm -f "$log"
cp "$here/package-lock.json" "$mods/.jrpc-lock.json"
