# Sourced by zmtp_ab.sh and zmtp_syscalls.sh once they have set bin (the
# binaries' folder) and base (the first port): what both set up the same
# way. Sets tmp (a scratch folder, removed on exit, when the broker and the
# worker are killed too); defines start_pair.

tmp=$(mktemp -d)
trap 'kill ${wpid:-} ${bpid:-} 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT

# start_pair ENGINE: a broker (--zmq-engine ENGINE) with its ZeroMQ front on
# port base, its workers' on base+1 and HTTP on base+2 (logs in $tmp), and
# one worker; their PIDs in bpid and wpid. Exits when the broker did not
# start.
start_pair() {
    "$bin/jrpc-broker" --zmq tcp://127.0.0.1:$base --workers tcp://127.0.0.1:$((base + 1)) \
        --http 127.0.0.1:$((base + 2)) --admin none --zmq-engine "$1" 2>"$tmp/broker.log" &
    bpid=$!
    "$bin/jrpc-worker" --connect tcp://127.0.0.1:$((base + 1)) 2>"$tmp/worker.log" &
    wpid=$!
    sleep 1
    kill -0 $bpid 2>/dev/null || { cat "$tmp/broker.log"; echo "the broker did not start"; exit 1; }
}
