#!/usr/bin/env bash
# deploy/container/docker-compose.yml: docker-compose (Debian's 1.29) checks
# it against the Compose schema without an engine (`config -q`); the workers
# can be scaled (no fixed name, no published port) and find both brokers by
# one name (dns+tcp://brokers:5556, the alias both carry on the workers
# network; docs/TOPOLOGY.md).
source "$JRPC_E2E_LIB"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
command -v docker-compose >/dev/null || { check "docker-compose installed (deploy/deps.sh)" 0 1; e2e_finish; }
cd "$ROOT/deploy/container"
docker-compose config -q > "$E2E_TMP/config.out" 2>&1
check "docker-compose config accepts the file" "0 " "$? $(cat "$E2E_TMP/config.out")"
check "services" "broker-a broker-b redis worker" "$(docker-compose config --services | sort | paste -sd' ')"
docker-compose config > "$E2E_TMP/resolved.yml" 2>/dev/null
/usr/bin/python3 - "$E2E_TMP/resolved.yml" > "$E2E_TMP/facts.out" <<'PY'
import sys, yaml
s = yaml.safe_load(open(sys.argv[1]))["services"]
w, b, b2 = s["worker"], s["broker-a"], s["broker-b"]
print("worker scalable:", "container_name" not in w and "ports" not in w)
print("worker connects to:", w["environment"].get("JRPC_CONNECT"))
print("both brokers answer to it:", [x["networks"]["workers"]["aliases"] for x in (b, b2)])
print("broker keys from a secret:", all(x["environment"].get("JRPC_KEYS") == "/run/secrets/jrpc_keys"
      and any(y.get("source", y) == "jrpc_keys" for y in x["secrets"]) for x in (b, b2)))
print("broker builds the image:", b["build"]["dockerfile"], b["image"] == b2["image"])
host_ports = lambda x: {str(p).split(":")[-2] if isinstance(p, str) else str(p["published"]) for p in x["ports"]}
print("host ports apart:", len(host_ports(b)) == 3 and not host_ports(b) & host_ports(b2))
PY
check "compose facts" "worker scalable: True
worker connects to: dns+tcp://brokers:5556
both brokers answer to it: [['brokers'], ['brokers']]
broker keys from a secret: True
broker builds the image: deploy/container/Dockerfile True
host ports apart: True" "$(cat "$E2E_TMP/facts.out")"

# A typo must be refused.
mkdir -p "$E2E_TMP/bad"
sed 's/stop_grace_period:/stop_grace_periodd:/; s#context: ../..#context: '"$ROOT"'#' docker-compose.yml \
    > "$E2E_TMP/bad/docker-compose.yml"
(cd "$E2E_TMP/bad" && docker-compose config -q) > "$E2E_TMP/bad.out" 2>&1
check "an unknown option is refused" 1 $?
e2e_finish
