#!/usr/bin/env bash
# deploy/container/docker-compose.yml: docker-compose (Debian's 1.29) checks
# it against the Compose schema without an engine (`config -q`); the workers
# can be scaled (no fixed name, no published port) and point at the broker.
source "$JRPC_E2E_LIB"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
command -v docker-compose >/dev/null || { check "docker-compose installed (deploy/deps.sh)" 0 1; e2e_finish; }
cd "$ROOT/deploy/container"
docker-compose config -q > "$E2E_TMP/config.out" 2>&1
check "docker-compose config accepts the file" "0 " "$? $(cat "$E2E_TMP/config.out")"
check "services" "broker redis worker" "$(docker-compose config --services | sort | paste -sd' ')"
docker-compose config > "$E2E_TMP/resolved.yml" 2>/dev/null
/usr/bin/python3 - "$E2E_TMP/resolved.yml" > "$E2E_TMP/facts.out" <<'PY'
import sys, yaml
s = yaml.safe_load(open(sys.argv[1]))["services"]
w, b = s["worker"], s["broker"]
print("worker scalable:", "container_name" not in w and "ports" not in w)
print("worker connects to:", w["environment"].get("JRPC_CONNECT"))
print("broker keys from a secret:", b["environment"].get("JRPC_KEYS") == "/run/secrets/jrpc_keys"
      and any(x.get("source", x) == "jrpc_keys" for x in b["secrets"]))
print("broker builds the image:", b["build"]["dockerfile"])
PY
check "compose facts" "worker scalable: True
worker connects to: tcp://broker:5556
broker keys from a secret: True
broker builds the image: deploy/container/Dockerfile" "$(cat "$E2E_TMP/facts.out")"

# A typo must be refused.
mkdir -p "$E2E_TMP/bad"
sed 's/stop_grace_period:/stop_grace_periodd:/; s#context: ../..#context: '"$ROOT"'#' docker-compose.yml \
    > "$E2E_TMP/bad/docker-compose.yml"
(cd "$E2E_TMP/bad" && docker-compose config -q) > "$E2E_TMP/bad.out" 2>&1
check "an unknown option is refused" 1 $?
e2e_finish
