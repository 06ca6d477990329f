#!/usr/bin/env bash
# Installs what bench/peers/run.sh compares jrpc with: the Debian packages
# (servers, client libraries, gnuplot) and jayson from npm into
# bench/peers/node_modules (local, gitignored; never a global install).
# Skips apt when everything is there. No service is started: run.sh starts
# its own servers, in a private network namespace. nginx serves two rows:
# the fixed answer (http1-nginx) and the reverse proxy of the pool (proxy and
# upstream keepalive are built-in modules, not add-on packages); the ZeroMQ
# echo and forwarder need only libzmq, which jrpc itself builds with.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
pkgs=(nginx-light nats-server libnats-dev rabbitmq-server librabbitmq-dev libjsonrpccpp-dev
      redis-server redis-tools gnuplot-nox nodejs npm iproute2 util-linux python3 g++)
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
if [ ! -d "$here/node_modules/jayson" ]; then
    echo "peers: npm ci (jayson) into $here/node_modules" >&2
    (cd "$here" && npm ci --no-audit --no-fund >/dev/null)
fi
