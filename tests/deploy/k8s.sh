#!/usr/bin/env bash
# deploy/k8s/*.yaml: every object against the Kubernetes OpenAPI schema of
# its kind (npm kubernetes-models, offline), the references between the
# objects, and no unknown field (kubernetes-types + tsc): k8s_validate.cjs. Then a broken copy must be refused,
# so the validator is seen to bite.
source "$JRPC_E2E_LIB"
source "$(dirname "$0")/npm_tools.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
V=$ROOT/tests/deploy/k8s_validate.cjs
deploy_npm_tools || { check "npm validators installed" 0 1; cp "$ROOT/deploy/k8s/broker.yaml" "$E2E_TMP/bad/broker.yaml"
sed -i 's/^          readinessProbe:/          readinesProbe:/' "$E2E_TMP/bad/broker.yaml"
node "$V" "$NODE_TOOLS" "$E2E_TMP"/bad/*.yaml > "$E2E_TMP/bad.out" 2>&1
check "a misspelt field is refused" "1 1" "$? $(grep -c "'\"readinesProbe\"' does not exist" "$E2E_TMP/bad.out")"
e2e_finish; }

node "$V" "$NODE_TOOLS" "$ROOT"/deploy/k8s/*.yaml > "$E2E_TMP/k8s.out" 2>&1
check "deploy/k8s/ is valid" 0 $?
cat "$E2E_TMP/k8s.out"
for kind in Namespace Secret ConfigMap Deployment Service HorizontalPodAutoscaler; do
    check "deploy/k8s/ has a $kind" 1 \
        "$(cat "$ROOT"/deploy/k8s/*.yaml | grep -q "^kind: $kind\$" && echo 1 || echo 0)"
done
check "the broker is probed on /healthz and /readyz" 2 \
    "$(grep -cE 'path: /(healthz|readyz)' "$ROOT/deploy/k8s/broker.yaml")"
check "the broker's keys come from the Secret" 1 "$(grep -c 'secretName: jrpc-keys' "$ROOT/deploy/k8s/broker.yaml")"
# The topology of issue 16 (docs/TOPOLOGY.md): several brokers and an
# autoscaler for them, a headless Service the workers resolve to every
# broker, a normal one for clients.
/usr/bin/python3 - "$ROOT"/deploy/k8s/*.yaml > "$E2E_TMP/topology.out" <<'PY'
import sys, yaml
objs = [o for f in sys.argv[1:] for o in yaml.safe_load_all(open(f)) if o]
get = lambda kind, name: next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)
b = get("Deployment", "jrpc-broker")
print("broker replicas >= 2:", b["spec"]["replicas"] >= 2)
print("broker rolls one at a time:", b["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0})
hpa = [o for o in objs if o["kind"] == "HorizontalPodAutoscaler" and o["spec"]["scaleTargetRef"]["name"] == "jrpc-broker"]
print("broker autoscaled from:", hpa[0]["spec"]["minReplicas"] if hpa else None)
ws = get("Service", "jrpc-broker-workers")["spec"]
print("workers' Service headless:", ws.get("clusterIP") == "None", "port:", ws["ports"][0]["port"])
print("clients' Service has a cluster IP:", "clusterIP" not in get("Service", "jrpc-broker")["spec"])
env = {e["name"]: e["value"] for e in get("Deployment", "jrpc-worker")["spec"]["template"]["spec"]["containers"][0]["env"]}
print("workers connect to:", env["JRPC_CONNECT"])
cm = get("ConfigMap", "jrpc-broker")["data"]
print("drain delay below the grace period:",
      int(cm["JRPC_DRAIN_DELAY_MS"]) + int(cm["JRPC_TIMEOUT_MS"]) < 1000 * b["spec"]["template"]["spec"]["terminationGracePeriodSeconds"])
PY
check "the topology: many brokers, found by name" "broker replicas >= 2: True
broker rolls one at a time: True
broker autoscaled from: 3
workers' Service headless: True port: 5556
clients' Service has a cluster IP: True
workers connect to: dns+tcp://jrpc-broker-workers:5556
drain delay below the grace period: True" "$(cat "$E2E_TMP/topology.out")"

mkdir -p "$E2E_TMP/bad"
cp "$ROOT"/deploy/k8s/*.yaml "$E2E_TMP/bad/"
sed -i 's/containerPort: 9090}/containerPort: "9090"}/' "$E2E_TMP/bad/broker.yaml"
node "$V" "$NODE_TOOLS" "$E2E_TMP"/bad/*.yaml > "$E2E_TMP/bad.out" 2>&1
check "a port given as a string is refused" "1 1" "$? $(grep -c 'containerPort must be integer' "$E2E_TMP/bad.out")"
cp "$ROOT/deploy/k8s/broker.yaml" "$E2E_TMP/bad/broker.yaml"
sed -i 's/secretName: jrpc-keys/secretName: jrpc-keyz/' "$E2E_TMP/bad/broker.yaml"
node "$V" "$NODE_TOOLS" "$E2E_TMP"/bad/*.yaml > "$E2E_TMP/bad.out" 2>&1
check "a Secret not in the set is refused" "1 1" "$? $(grep -c 'Secret jrpc-keyz is not in the set' "$E2E_TMP/bad.out")"
cp "$ROOT/deploy/k8s/broker.yaml" "$E2E_TMP/bad/broker.yaml"
sed -i 's/^          readinessProbe:/          readinesProbe:/' "$E2E_TMP/bad/broker.yaml"
node "$V" "$NODE_TOOLS" "$E2E_TMP"/bad/*.yaml > "$E2E_TMP/bad.out" 2>&1
check "a misspelt field is refused" "1 1" "$? $(grep -c "'\"readinesProbe\"' does not exist" "$E2E_TMP/bad.out")"
e2e_finish
