#!/usr/bin/env bash
# Installs the Debian packages jrpc builds, runs and tests with. Skips apt
# entirely when everything is already there.
set -eu
pkgs=(build-essential cmake pkg-config libzmq3-dev libmsgpack-dev libuv1-dev
      libhiredis-dev libcmocka-dev libhttp-parser-dev libssl-dev redis-server curl python3
      python3-prometheus-client
      clang libclang-rt-14-dev)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "deps: installing ${missing[*]}"
    SUDO=; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
