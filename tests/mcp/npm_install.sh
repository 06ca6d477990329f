#!/usr/bin/env bash
# Installs the pinned MCP packages of tests/mcp/package-lock.json (the
# official TypeScript SDK and the reference server-everything, for
# tests/e2e/mcp.sh) into tests/mcp/node_modules (gitignored), before ctest
# (tests/run.sh), with the one npm installer of the tests.
#
#   bash tests/mcp/npm_install.sh
here=$(cd "$(dirname "$0")" && pwd)
exec bash "$here/../deploy/npm_install.sh" "$here"
