#!/usr/bin/env bash
# Installs the TypeScript client's pinned build tool (typescript, from
# client/ts/package-lock.json) into client/ts/node_modules (gitignored),
# before ctest (tests/run.sh), with the one npm installer of the tests.
#
#   bash client/ts/npm_install.sh
here=$(cd "$(dirname "$0")" && pwd)
exec bash "$here/../../tests/deploy/npm_install.sh" "$here"
