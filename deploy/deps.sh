#!/usr/bin/env bash
# Installs the Debian packages jrpc needs. Skips apt entirely when everything
# is already there.
#
#   bash deploy/deps.sh             everything: build, run and the whole test suite
#   bash deploy/deps.sh --build     only what building needs (deploy/build.sh, the image's build stage)
#   bash deploy/deps.sh --runtime   only what the programs load, and curl (the image's last stage)
#   bash deploy/deps.sh --local     build + runtime + redis-server: what deploy/run-local.sh needs
#   ... --clean                     (after the others) then drop apt's package lists (images)
set -eu
# curl: the container's health check (GET /healthz on the admin port).
runtime=(libzmq5 libmsgpackc2 libuv1 libwslay1 libhiredis0.14 libhttp-parser2.9 libssl3 libinih1 curl)
build=(build-essential cmake pkg-config libzmq3-dev libmsgpack-dev libuv1-dev libwslay-dev
       libhiredis-dev libcmocka-dev libhttp-parser-dev libssl-dev libinih-dev)
# The suite also runs Redis and Redis Sentinel (e2e_sentinel), curl,
# python3, clang (fuzzing), iproute2 (the many-hosts test), systemd-analyze
# and docker-compose (deploy/ checks), testssl.sh (the TLS scan,
# tests/tls_scan.sh), dnsmasq (the many-brokers test's DNS server:
# dnsmasq-base is Debian's dnsmasq binary without the system service the
# dnsmasq package would install and start), chromium (headless: the
# TypeScript client's browser test, e2e_ts_browser), python3-venv, -pip and
# -setuptools (tests/py_install.sh installs the Python package, worker/python,
# into a venv offline: pip with Debian's setuptools, no build isolation),
# mypy (test_py_types: the package's type hints).
suite=(redis-server redis-sentinel curl python3 clang libclang-rt-14-dev iproute2 systemd docker-compose dnsmasq-base
       gnuplot-nox python3-prometheus-client python3-zmq python3-msgpack python3-websockets
       python3-venv python3-pip python3-setuptools mypy
       testssl.sh chromium)
clean=no
if [ "${2:-}" = --clean ]; then clean=yes; elif [ -n "${2:-}" ]; then set -- --bad; fi
case "${1:-}" in
    --runtime) pkgs=("${runtime[@]}") ;;
    --build)   pkgs=("${build[@]}") ;;
    --local)   pkgs=("${build[@]}" "${runtime[@]}" redis-server) ;;
    "")        pkgs=("${build[@]}" "${suite[@]}") ;;
    *) echo "usage: deploy/deps.sh [--build|--runtime|--local] [--clean]" >&2; exit 2 ;;
esac
# The deploy/ checks run validators from the npm registry: Debian's node and
# npm only when the machine has no npm of its own (a newer one may be there).
if [ -z "${1:-}" ] && ! command -v npm >/dev/null; then pkgs+=(nodejs npm); fi
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
if [ $clean = yes ]; then
    rm -rf /var/lib/apt/lists/*
fi
