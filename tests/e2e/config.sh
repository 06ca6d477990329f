#!/usr/bin/env bash
# End-to-end test of configuration (issue 7) on the real binaries: --help
# lists every option with its default and docs/CONFIG.md names each one;
# precedence flags > JRPC_* env > file > defaults; --check-config exits 0
# or 2 naming the source of the bad value; JSON log lines parse; sd_notify
# READY=1 / STOPPING=1 reach a NOTIFY_SOCKET listener (path and abstract).
source "${JRPC_E2E_LIB:-$(dirname "$0")/lib.sh}"
BROKER="$JRPC_BIN/jrpc-broker"
WORKER="$JRPC_BIN/jrpc-worker"
DOCS="$(dirname "${JRPC_E2E_LIB:-$0}")/../../docs/CONFIG.md"
T=$E2E_TMP

# run CMD...: sets RC, OUT (stdout), ERR (stderr)
run() {
    "$@" >"$T/out" 2>"$T/err"
    RC=$?
    OUT=$(cat "$T/out")
    ERR=$(cat "$T/err")
}
has() { case "$2" in *"$1"*) echo yes ;; *) echo "no: $2" ;; esac; }
# value KEY: the value of KEY in --check-config output ($OUT)
value() { printf '%s\n' "$OUT" | sed -n "s/^$1 = //p"; }

# ---- --help and --version, the docs ----

for prog in jrpc-broker jrpc-worker; do
    run "$JRPC_BIN/$prog" --help
    check "$prog --help: exit 0" 0 "$RC"
    opts=$(printf '%s\n' "$OUT" | sed -n 's/^  --\([a-z-]*\).*/\1/p')
    n=$(printf '%s\n' "$opts" | wc -l)
    [ "$n" -ge 12 ] || check "$prog --help: lists options" ">= 12" "$n"
    missing_default=; missing_doc=
    for o in $opts; do
        # the option's entry runs until the next option line
        entry=$(printf '%s\n' "$OUT" | awk -v o="  --$o" '
            index($0, o) == 1 && (substr($0, length(o) + 1, 1) ~ /^( |$)/) { p = 1; print; next }
            p && /^  --/ { p = 0 } p && /^$/ { p = 0 } p { print }')
        case $o in help|version|check-config) ;;
            *) case "$entry" in *\[*\]*) ;; *) missing_default+=" $o" ;; esac ;;
        esac
        grep -q -- "--$o\b" "$DOCS" || missing_doc+=" $o"
    done
    check "$prog --help: every option shows its default" "" "$missing_default"
    check "$prog: every option is in docs/CONFIG.md" "" "$missing_doc"
    run "$JRPC_BIN/$prog" --version
    check "$prog --version" "0 $prog " "$RC ${OUT% *} "
done

# ---- precedence: flags > env > file > defaults ----

cat >"$T/b.ini" <<'INI'
# a comment: keys before any section are read by both programs,
; keys under [jrpc-broker] / [jrpc-worker] by that one only
heartbeat-ms = 500
[jrpc-worker]
credit = 5
[jrpc-broker]
timeout-ms = 1111
max-batch = 11
max-open = 111
log-level = debug
INI
run env JRPC_TIMEOUT_MS=2222 JRPC_MAX_BATCH=22 "$BROKER" --config "$T/b.ini" --timeout-ms 3333 --check-config
check "check-config good: exit 0" 0 "$RC"
check "precedence: flag over env and file" 3333 "$(value timeout-ms)"
check "precedence: env over file" 22 "$(value max-batch)"
check "precedence: file over default" 111 "$(value max-open)"
check "precedence: file section [jrpc-broker]" debug "$(value log-level)"
check "precedence: default" 10000 "$(value max-conns)"
check "check-config: source of a flag" yes "$(has $'# timeout-ms: --timeout-ms\ntimeout-ms = 3333' "$OUT")"
check "check-config: source of env" yes "$(has $'# max-batch: env JRPC_MAX_BATCH\n' "$OUT")"
check "check-config: source of the file" yes "$(has "# max-open: $T/b.ini:9: max-open" "$OUT")"
check "check-config: unset keys commented out" yes "$(has $'\n#keys =\n' "$OUT")"
# the output is a config file that gives the same configuration
printf '%s\n' "$OUT" >"$T/eff.ini"
first=$(printf '%s\n' "$OUT" | grep -v '^#')
run "$BROKER" --config "$T/eff.ini" --check-config
check "check-config output read back: exit 0" 0 "$RC"
check "check-config output read back: same values" "$first" "$(printf '%s\n' "$OUT" | grep -v '^#')"
# JRPC_CONFIG names the file; the worker reads its own section, skips the broker's
run env JRPC_CONFIG="$T/b.ini" "$WORKER" --check-config
check "worker: JRPC_CONFIG, its [jrpc-worker] section and the top" "0 5 500" \
    "$RC $(value credit) $(value heartbeat-ms)"
check "worker: [jrpc-broker] keys skipped" "" "$(value timeout-ms)$ERR"
check "broker: the top too" 500 "$(env JRPC_CONFIG="$T/b.ini" "$BROKER" --check-config | sed -n 's/^heartbeat-ms = //p')"
# a list: comma or blank separated in env/file, repeatable flag
run env JRPC_CONNECT="tcp://127.0.0.1:1, tcp://127.0.0.1:2 tcp://127.0.0.1:3" "$WORKER" --check-config
check "worker: list from env" "tcp://127.0.0.1:1, tcp://127.0.0.1:2, tcp://127.0.0.1:3" "$(value connect)"
run env JRPC_CONNECT="tcp://127.0.0.1:1" "$WORKER" --connect tcp://127.0.0.1:7 --connect tcp://127.0.0.1:8 --check-config
check "worker: repeated flags replace env" "tcp://127.0.0.1:7, tcp://127.0.0.1:8" "$(value connect)"
# unknown JRPC_* variables (another program's) are ignored and listed
run env JRPC_CONNECT=tcp://x:1 JRPC_SECRET=hush "$BROKER" --check-config
check "broker: another program's JRPC_* ignored: exit 0" 0 "$RC"
check "broker: ignored names listed" yes "$(has "JRPC_CONNECT" "$OUT")"
check "broker: ignored values never printed" "" "$(grep -o hush "$T/out" "$T/err")"
# passwords in the Redis URL are masked
run "$BROKER" --redis 'redis://u:topsecret@127.0.0.1:6379/0' --check-config
check "check-config: Redis password masked" "redis://u:***@127.0.0.1:6379/0" "$(value redis)"

# ---- bad values: exit 2, the source named, nothing on stdout ----

bad() {   # bad NAME EXPECTED-MESSAGE-PART CMD...
    local name=$1 want=$2; shift 2
    run "$@"
    check "$name: exit 2" 2 "$RC"
    check "$name: message" yes "$(has "$want" "$ERR")"
    check "$name: no stdout" "" "$OUT"
}
bad "flag out of range" "jrpc-broker: --timeout-ms: '0' is not a whole number from 1 to 86400000" \
    "$BROKER" --timeout-ms 0 --check-config
bad "flag not a number" "jrpc-broker: --max-batch: '1e3' is not a whole number" \
    "$BROKER" --max-batch 1e3
bad "env bad enum" "jrpc-broker: env JRPC_LOG_FORMAT: 'xml' is not one of kv, json" \
    env JRPC_LOG_FORMAT=xml "$BROKER"
bad "env empty" "jrpc-worker: env JRPC_CREDIT: empty value" env JRPC_CREDIT= "$WORKER"
bad "on/off" "jrpc-broker: --access-log: 'maybe' is not on or off" "$BROKER" --access-log maybe
bad "endpoint syntax" "jrpc-worker: --connect: 'tcp://nowhere' is not a ZeroMQ endpoint" \
    "$WORKER" --connect tcp://nowhere --check-config
bad "host:port syntax" "jrpc-broker: --admin: '9090' is not HOST:PORT" "$BROKER" --admin 9090
bad "Redis URL syntax, the URL not echoed" "jrpc-broker: env JRPC_REDIS: missing :port" \
    env JRPC_REDIS='redis://u:hush@h' "$BROKER" --check-config
check "Redis URL error: password not printed" "" "$(grep -o hush "$T/err")"
bad "unknown flag" "jrpc-broker: unknown option '--timout-ms'" "$BROKER" --timout-ms 5
printf 'timeout-ms = 5\nmax-bacth = 3\ntimeout-ms = 6\nliveness = -1\nhttp =\n' >"$T/bad.ini"
bad "file: unknown key" "$T/bad.ini:2: unknown key 'max-bacth'" "$BROKER" --config "$T/bad.ini" --check-config
check "file: duplicate key" yes "$(has "$T/bad.ini:3: timeout-ms: duplicate key (first at line 1)" "$ERR")"
check "file: bad number" yes "$(has "$T/bad.ini:4: liveness: '-1' is not a whole number" "$ERR")"
check "file: empty value" yes "$(has "$T/bad.ini:5: http: empty value" "$ERR")"
printf 'timeout-ms = 5\n' >"$T/shared.ini"
bad "worker: a broker key at the top" "$T/shared.ini:1: unknown key 'timeout-ms'" \
    "$WORKER" --config "$T/shared.ini"
bad "file: missing" "jrpc-broker: --config: $T/nope.ini: No such file" "$BROKER" --config "$T/nope.ini"
bad "file from env: missing" "jrpc-worker: env JRPC_CONFIG: $T/nope.ini: No such file" \
    env JRPC_CONFIG="$T/nope.ini" "$WORKER"
echo 'keys = /nonexistent/keys' >"$T/k.ini"
bad "check-config: key file read" "jrpc-broker: $T/k.ini:1: keys: " \
    "$BROKER" --config "$T/k.ini" --check-config
bad "check-config: CURVE without allowlists" "--curve-secret needs --client-keys and --worker-keys" \
    "$BROKER" --curve-secret "$T/k.ini" --check-config

# ---- a real broker and worker from file and env, JSON logs, sd_notify ----

# listen DGRAM-SOCKET-NAME OUTFILE: records each datagram as one line
listen() {
    python3 - "$1" "$2" <<'PY' &
import socket, sys
name, out = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("\0" + name[1:] if name.startswith("@") else name)
s.settimeout(60)
with open(out + ".tmp", "w"):
    pass
import os
os.rename(out + ".tmp", out + ".bound")
while True:
    try:
        d = s.recv(4096)
    except socket.timeout:
        break
    with open(out, "a") as f:
        f.write(d.decode().replace("\n", "|") + "\n")
PY
    E2E_PIDS+=($!)
    e2e_wait_for "[ -e '$2.bound' ]" 10
}
: >"$T/worker.notify"
listen "$T/notify.sock" "$T/broker.notify"
listen "@jrpc-e2e-$$-worker" "$T/worker.notify"

started=
for try in 1 2 3 4 5 6; do
    zp=$(e2e_pick_port)
    URL="tcp://127.0.0.1:$zp"; WEP="tcp://127.0.0.1:$((zp + 1))"
    printf 'zmq = %s\nworkers = %s\nhttp = none\nlog-format = json\n' "$URL" "$WEP" >"$T/run.ini"
    : >"$T/broker.notify"
    NOTIFY_SOCKET="$T/notify.sock" JRPC_CONFIG="$T/run.ini" JRPC_LOG_LEVEL=debug \
        "$BROKER" 2>"$T/broker.log" &
    BPID=$!; E2E_PIDS+=($BPID)
    if e2e_wait_for "grep -q 'READY=1' '$T/broker.notify' || ! kill -0 $BPID 2>/dev/null" 10 &&
        grep -q 'READY=1' "$T/broker.notify"; then started=1; break; fi
    kill -9 $BPID 2>/dev/null; wait $BPID 2>/dev/null
done
check "broker: READY=1 after binding" 1 "$started"
check "broker: READY with STATUS" "READY=1|STATUS=serving" "$(head -n 1 "$T/broker.notify")"
NOTIFY_SOCKET="@jrpc-e2e-$$-worker" JRPC_CONNECT="$WEP" JRPC_LOG_FORMAT=json \
    "$WORKER" 2>"$T/worker.log" &
WPID=$!; E2E_PIDS+=($WPID)
e2e_wait_for "grep -q 'READY=1' '$T/worker.notify'" 10
check "worker: READY=1 (abstract socket)" "READY=1|STATUS=serving" "$(head -n 1 "$T/worker.notify")"
e2e_wait_for "'$JRPC' --url '$URL' --timeout-ms 500 call add '[2,3]' >'$T/call.out' 2>/dev/null" 10
check "call through the configured broker and worker" 5 "$(cat "$T/call.out")"
kill -TERM $WPID; wait $WPID; wrc=$?
check "worker: exit 0 on SIGTERM" 0 "$wrc"
# the listener appends what it receives: the process may be gone before the line is
e2e_wait_for "[ \$(wc -l <'$T/worker.notify') -ge 2 ]" 5
check "worker: STOPPING=1" "STOPPING=1|STATUS=draining" "$(sed -n 2p "$T/worker.notify")"
kill -TERM $BPID; wait $BPID; brc=$?
check "broker: exit 0 on SIGTERM" 0 "$brc"
e2e_wait_for "[ \$(wc -l <'$T/broker.notify') -ge 2 ]" 5
check "broker: STOPPING=1" "STOPPING=1|STATUS=draining" "$(sed -n 2p "$T/broker.notify")"

# every log line one JSON object with ts, level, proc, comp, and all strings
jsoncheck() {
    python3 - "$1" <<'PY'
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
bad = 0
for l in lines:
    try:
        o = json.loads(l)
        assert isinstance(o, dict)
        for k in ("ts", "level", "proc", "comp"):
            assert isinstance(o[k], str), k
        assert all(isinstance(v, str) for k, v in o.items() if k != "truncated")
    except Exception as e:
        bad += 1
        print("bad line:", l, e, file=sys.stderr)
print(len(lines), bad)
PY
}
read -r nb badb <<<"$(jsoncheck "$T/broker.log")"
read -r nw badw <<<"$(jsoncheck "$T/worker.log")"
check "broker JSON log: every line parses" 0 "$badb"
check "worker JSON log: every line parses" 0 "$badw"
[ "$nb" -ge 5 ] || check "broker JSON log: has lines" ">= 5" "$nb"
[ "$nw" -ge 2 ] || check "worker JSON log: has lines" ">= 2" "$nw"
check "broker JSON log: started event" yes "$(has '"proc":"jrpc-broker","comp":"main","event":"started"' "$(cat "$T/broker.log")")"
check "broker JSON log: debug level from env" yes "$(has '"level":"debug"' "$(cat "$T/broker.log")")"
check "broker JSON log: quoted value" yes "$(has '"detail":"no --keys: requests are not authenticated"' "$(cat "$T/broker.log")")"

e2e_finish
