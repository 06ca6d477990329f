# Sourced, from the top of the tree, by signed_cost.sh and
# signed_body_cost.sh: what both set up the same way. Sets port (PORT,
# default random), T (a scratch folder, removed on exit), pids (killed on
# exit), KEY and SECRET, sign (jrpc-bench's options for them) and $T/keys
# (the broker's --keys); defines ir and start_redis.
port=${PORT:-$((10000 + RANDOM % 22000))}
T=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT
KEY=bench SECRET=bench-secret-0123456789abcdef
printf '%s %s\n' $KEY $SECRET > "$T/keys"
sign=(--key-id $KEY --secret $SECRET)

# ir FILE: the instructions a callgrind output counts in all.
ir() { callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'; }

# start_redis PORT [OPTION...]: a redis-server on 127.0.0.1 that keeps
# nothing (log: $T/redis.log), returning 0 once it answers PING (5 s at
# most), 1 when it exited (the port taken: another's server would answer
# the PING) or never answered; its PID in redis_pid and in pids.
start_redis() {
    local p=$1
    shift
    redis-server --bind 127.0.0.1 --port "$p" --save '' --appendonly no "$@" \
        >"$T/redis.log" 2>&1 &
    pids+=($!) redis_pid=$!
    for _ in $(seq 50); do
        kill -0 $redis_pid 2>/dev/null || return 1
        redis-cli -p "$p" PING >/dev/null 2>&1 && kill -0 $redis_pid 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}
