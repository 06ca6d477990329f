#!/usr/bin/env bash
# Installs what bench/peers/run.sh compares jrpc with: the Debian packages
# (servers, client libraries, gnuplot) and the npm packages of
# package-lock.json into bench/peers/node_modules (local, gitignored; never a
# global install): jayson, and for the MCP rows supergateway, mcp-proxy,
# server-everything and the official MCP SDK (the last two pinned as
# tests/mcp pins them).
#
#   bash bench/peers/install.sh [mcp]
#
# With "mcp" (run.sh's MCP section alone) only Node and the npm packages.
# Skips apt when everything is there. No service is started: run.sh starts
# its own servers, in a private network namespace. nginx serves two rows:
# the fixed answer (http1-nginx) and the reverse proxy of the pool (proxy and
# upstream keepalive are built-in modules, not add-on packages); the ZeroMQ
# echo and forwarder need only libzmq, which jrpc itself builds with.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
pkgs=(nginx-light nats-server libnats-dev rabbitmq-server librabbitmq-dev libjsonrpccpp-dev
      redis-server redis-tools gnuplot-nox nodejs npm iproute2 util-linux python3 g++ curl)
[ "${1:-}" = mcp ] && pkgs=(nodejs npm iproute2 util-linux python3 curl)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# npm may come with Node from elsewhere than Debian: then it is not missing.
if command -v npm >/dev/null; then
    kept=()
    for p in "${missing[@]}"; do [ "$p" = npm ] || [ "$p" = nodejs ] || kept+=("$p"); done
    missing=("${kept[@]}")
fi
if [ ${#missing[@]} -gt 0 ]; then
    echo "peers: installing ${missing[*]}" >&2
    SUDO=; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    export DEBIAN_FRONTEND=noninteractive
    # Debian's maintainer scripts would start nginx, rabbitmq-server and
    # nats-server listening on every interface: keep them stopped.
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
        $SUDO chmod +x /usr/sbin/policy-rc.d
        trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# npm ci when node_modules does not match the lock (the tests' installer:
# it keeps a copy of the lock inside node_modules).
bash "$here/../../tests/deploy/npm_install.sh" "$here" >&2
