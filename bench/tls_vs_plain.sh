#!/usr/bin/env bash
# HTTPS against HTTP on the same machine, in one run (issue 15): two Release
# brokers, one plaintext and one with --tls-cert (certificates made by
# tests/e2e/tls_certs.sh), one demo worker connected to both; jrpc-bench
# loads one broker at a time, A-B-A-B, ROUNDS rounds of SECONDS each:
#   single   --batch 1,   keep-alive, CONNS connections (closed loop)
#   batch100 --batch 100, keep-alive, CONNS connections
#   hs-full  --batch 1 --handshakes full: a new connection and a full
#            handshake per call (HTTPS), a new TCP connection (HTTP)
#   hs-resumed  the same, the TLS session resumed (HTTPS only)
# The table gives the medians of calls/s and p50, and HTTPS/HTTP ratios.
#   bash bench/tls_vs_plain.sh [ROUNDS] [SECONDS] [CONNS]
set -eu
cd "$(dirname "$0")/.."
rounds=${1:-3} secs=${2:-5} conns=${3:-4}
source bench/build_rel.sh
build_rel build-rel jrpc-broker jrpc-worker jrpc-bench
B=build-rel/bin
out=$(mktemp -d)
bash tests/e2e/tls_certs.sh "$out/certs"
port=$((10000 + RANDOM % 22000))
common=(--log-level warn --access-log off --max-conns 100000)
$B/jrpc-broker --zmq tcp://127.0.0.1:$port --workers tcp://127.0.0.1:$((port + 1)) \
    --http 127.0.0.1:$((port + 2)) "${common[@]}" & b1=$!
$B/jrpc-broker --zmq tcp://127.0.0.1:$((port + 3)) --workers tcp://127.0.0.1:$((port + 4)) \
    --http 127.0.0.1:$((port + 5)) --tls-cert "$out/certs/server.pem" \
    --tls-key "$out/certs/server.key" "${common[@]}" & b2=$!
$B/jrpc-worker --connect tcp://127.0.0.1:$((port + 1)),tcp://127.0.0.1:$((port + 4)) \
    --credit 256 --log-level warn & wp=$!
trap 'kill $b1 $b2 $wp 2>/dev/null; rm -rf "$out"' EXIT
sleep 1
http=http://127.0.0.1:$((port + 2))/rpc https=https://127.0.0.1:$((port + 5))/rpc
run() {   # run NAME URL ARGS...
    local name=$1 url=$2; shift 2
    local tls=(); [[ $url == https* ]] && tls=(--cacert "$out/certs/ca.pem")
    $B/jrpc-bench --url "$url" "${tls[@]}" --connections "$conns" --duration "$secs" \
        --warmup 1 --json "$@" > "$out/$name.json"
}
for r in $(seq "$rounds"); do
    for scheme in http https; do
        url=$http; [ $scheme = https ] && url=$https
        run "single-$scheme-$r" "$url" --batch 1
        run "batch100-$scheme-$r" "$url" --batch 100
        run "hs-full-$scheme-$r" "$url" --batch 1 --handshakes full
        [ $scheme = https ] && run "hs-resumed-$scheme-$r" "$url" --batch 1 --handshakes resumed
    done
    sleep 1   # (TIME_WAIT sockets of the handshake rows)
done
python3 - "$out" "$rounds" "$conns" <<'PY'
import json, statistics, sys
d, rounds, conns = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def med(name, scheme, key):
    vals = []
    for r in range(1, rounds + 1):
        j = json.load(open(f"{d}/{name}-{scheme}-{r}.json"))
        assert j["lost"] == 0 and j["duplicated"] == 0 and not j["errors"], j
        vals.append(j[key] if key != "p50" else j["latency_us"]["batch"]["p50"])
    return statistics.median(vals)
print(f"row ({conns} connections)   HTTP calls/s  HTTPS calls/s  HTTPS/HTTP  HTTP p50 us  HTTPS p50 us")
for name in ("single", "batch100", "hs-full"):
    a, b = med(name, "http", "calls_per_s"), med(name, "https", "calls_per_s")
    pa, pb = med(name, "http", "p50"), med(name, "https", "p50")
    print(f"{name:24} {a:13.0f}  {b:13.0f}  {b / a:9.2f}x  {pa:11.0f}  {pb:12.0f}")
b = med("hs-resumed", "https", "calls_per_s")
a = med("hs-full", "http", "calls_per_s")
print(f"{'hs-resumed':24} {a:13.0f}  {b:13.0f}  {b / a:9.2f}x  {med('hs-full', 'http', 'p50'):11.0f}  "
      f"{med('hs-resumed', 'https', 'p50'):12.0f}")
print("hs-* rows: one call per connection; HTTPS calls/s there = TLS handshakes/s "
      "(full: new session, resumed: ticket)")
PY
