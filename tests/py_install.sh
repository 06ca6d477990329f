#!/usr/bin/env bash
# Installs the Python package (worker/python: jrpc, client and worker) into a
# fresh venv, build-py/venv (gitignored), the way its README says a user
# does: a venv of Debian's python3 that sees Debian's modules
# (--system-site-packages: python3-zmq, python3-msgpack, python3-setuptools),
# then pip without build isolation, so that nothing is fetched from PyPI.
# tests/run.sh calls it before ctest; the Python tests in ctest run that
# venv's python (JRPC_PY). Rebuilt from scratch each time: what is tested is
# what a fresh install gives.
set -eu
cd "$(dirname "$0")/.."
VENV=${1:-build-py/venv}
rm -rf "$VENV"
/usr/bin/python3 -m venv --system-site-packages "$VENV"
# pip builds in the source tree (setuptools' build/ and *.egg-info, gitignored):
# removed again so that the tree stays as it was.
"$VENV/bin/pip" install --quiet --no-build-isolation --no-index ./worker/python
rm -rf worker/python/build worker/python/jrpc.egg-info
"$VENV/bin/python" -c 'import jrpc, jrpc.worker; print("jrpc", jrpc.__version__, "installed in '"$VENV"'")'
