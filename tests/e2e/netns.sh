# tests/e2e/netns.sh — hosts made of network namespaces, for the tests that
# need several machines (many_hosts.sh, many_brokers.sh). Source it first
# thing; it needs root and iproute2, and exits 77 (skipped) without them.
#
#   netns_start NAME TIMEOUT_S TOOLS...  checks root, `ip netns` and the tools,
#                           then runs the calling script again under
#                           timeout(1) with NETNS_PREFIX set (unique to the
#                           run) and removes whatever namespaces of the run
#                           are left when it ends; returns only in that
#                           inner run, with TMP (a fresh directory) and the
#                           cleanup trap set
#   netns_network HOST...   a bridge in a namespace of its own (the switch,
#                           "$NETNS_PREFIX-sw") and one veth per host, eth0
#                           with ${IP[HOST]}/24 (declare IP before)
#   ns HOST                 the namespace's name
#   on HOST CMD...          CMD in HOST's namespace, in the background, logging
#                           to $TMP/NAME.log (NAME: $LOG, default HOST); sets
#                           LAST_PID. With NETNS_RESOLV set to a file, CMD sees
#                           it as /etc/resolv.conf (a bind mount in the mount
#                           namespace `ip netns exec` makes: nothing else changes)
#   run_on HOST CMD...      the same in the foreground
#   check NAME EXPECTED ACTUAL, wait_for COND [SECONDS], netns_finish
set -u
# shellcheck source=own.sh
source "$(dirname "${BASH_SOURCE[0]}")/own.sh"

netns_start() {
    local name=$1 secs=$2 tool left pid rc
    shift 2
    if [ "$(id -u)" -ne 0 ]; then
        echo "SKIP $name: needs root (network namespaces)"; exit 77
    fi
    if ! command -v ip >/dev/null || ! ip netns list >/dev/null 2>&1; then
        echo "SKIP $name: 'ip netns' (iproute2) is not available"; exit 77
    fi
    for tool in timeout "$@"; do
        command -v "$tool" >/dev/null || { echo "$name: $tool is not installed (deploy/deps.sh)"; exit 1; }
    done
    # The whole script runs under a hard time bound: the body runs again
    # under timeout(1); should it be killed before its own cleanup, this
    # outer part removes what is left in the namespaces of this run (only
    # ours: the names carry this run's prefix).
    if [ -z "${NETNS_PREFIX:-}" ]; then
        export NETNS_PREFIX="jrpc-$name-$$-$RANDOM"
        NETNS_PREFIX=${NETNS_PREFIX//_/}
        timeout --kill-after=10 "$secs" bash "$0"
        rc=$?
        [ $rc -eq 124 ] && echo "$name: timed out"
        for left in $(ip netns list | awk '{ print $1 }' | grep "^$NETNS_PREFIX-"); do
            for pid in $(ip netns pids "$left" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
            ip netns del "$left" 2>/dev/null
            echo "$name: removed the leftover namespace $left"
        done
        exit $rc
    fi
    TMP=$(mktemp -d "/tmp/jrpc-$name.XXXXXX")
    trap netns_cleanup EXIT
    trap 'exit 3' INT TERM
}

PIDS=()
PASS=0
FAIL=0
NS_MADE=()

netns_cleanup() {
    local p ns
    for p in "${PIDS[@]}"; do e2e_own "$p" && kill -9 "$p" 2>/dev/null; done
    wait 2>/dev/null
    for ns in "${NS_MADE[@]}"; do ip netns del "$ns" 2>/dev/null; done
    if [ "$FAIL" -gt 0 ] || [ -n "${E2E_KEEP:-}" ]; then
        for f in "$TMP"/*.log "$TMP"/*.json; do
            [ -f "$f" ] || continue
            echo "---- $f (last 30 lines)"; tail -n 30 "$f"
        done
    fi
    rm -rf "$TMP"
}

check() {
    if [ "$2" == "$3" ]; then
        PASS=$((PASS + 1)); echo "ok   $1"
    else
        FAIL=$((FAIL + 1)); echo "FAIL $1"; echo "  expected: $2"; echo "  actual:   $3"
    fi
}

wait_for() { # COND [SECONDS]
    local i
    for ((i = 0; i < ${2:-10} * 10; i++)); do
        eval "$1" && return 0
        sleep 0.1
    done
    return 1
}

ns() { echo "$NETNS_PREFIX-$1"; }

# Sets NETNS_CMD to the command line that runs CMD in HOST's namespace:
# `on` runs it as a simple command, so that LAST_PID is the process itself
# (ip and sh exec into CMD) and a signal sent to it reaches CMD.
netns_cmd() { # HOST CMD...
    local h=$1; shift
    NETNS_CMD=(ip netns exec "$(ns "$h")")
    [ -n "${NETNS_RESOLV:-}" ] &&
        NETNS_CMD+=(sh -c 'mount --bind "$0" /etc/resolv.conf && exec "$@"' "$NETNS_RESOLV")
    NETNS_CMD+=("$@")
}

on() {
    local h=$1; shift
    netns_cmd "$h" "$@"
    "${NETNS_CMD[@]}" >>"$TMP/${LOG:-$h}.log" 2>&1 &
    LAST_PID=$!
    PIDS+=("$LAST_PID")
}

run_on() {
    local cmd
    netns_cmd "$@"
    cmd=("${NETNS_CMD[@]}")
    "${cmd[@]}"
}

netns_network() {
    local sw h
    sw=$(ns sw)
    ip netns add "$sw" || { echo "netns: cannot create a namespace"; FAIL=1; exit 1; }
    NS_MADE+=("$sw")
    ip -n "$sw" link set lo up
    ip -n "$sw" link add br0 type bridge
    ip -n "$sw" link set br0 up
    for h in "$@"; do
        ip netns add "$(ns "$h")"
        NS_MADE+=("$(ns "$h")")
        ip -n "$(ns "$h")" link set lo up
        ip -n "$sw" link add "port-$h" type veth peer name eth0 netns "$(ns "$h")"
        ip -n "$sw" link set "port-$h" master br0 up
        ip -n "$(ns "$h")" addr add "${IP[$h]}/24" dev eth0
        ip -n "$(ns "$h")" link set eth0 up
    done
}

netns_finish() {
    echo "$PASS passed, $FAIL failed"
    [ "$FAIL" -eq 0 ]
    exit $?
}
