#!/usr/bin/env bash
# Builds a release of jrpc and installs the programs under PREFIX (default
# /usr/local): PREFIX/bin/jrpc-broker, jrpc-worker, jrpc, jrpc-bench, and the
# example config and systemd units under PREFIX/share/jrpc/.
#
#   bash deploy/build.sh [PREFIX]
#
# The container image's build stage (deploy/container/Dockerfile) and the
# by-hand steps in deploy/README.md both run exactly this script.
set -eu
cd "$(dirname "$0")/.."
prefix=${1:-/usr/local}
bash deploy/deps.sh --build
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release
cmake --build build-release -j"$(nproc)"
cmake --install build-release --prefix "$prefix" --component runtime
