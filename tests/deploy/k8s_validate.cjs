// Validates Kubernetes manifests offline:
//  1. every document against the Kubernetes OpenAPI schema of its
//     apiVersion/kind, as compiled by the npm package kubernetes-models
//     (types, formats, required fields); an apiVersion/kind it does not know
//     is an error;
//  2. the references between the objects of the set: a Service's selector
//     matches some workload's pod labels and its named targetPorts exist
//     there; probes name ports that exist; envFrom/volumes name ConfigMaps and
//     Secrets of the set; a HorizontalPodAutoscaler targets a Deployment of
//     the set whose containers request CPU (a CPU utilisation target needs it);
//  3. no field the API does not have (TypeScript with kubernetes-types).
// Usage: node k8s_validate.cjs NODE_MODULES FILE.yaml...   exit 0 when valid.
"use strict";
const fs = require("fs");
const path = require("path");
const nm = path.resolve(process.argv[2]);
const files = process.argv.slice(3);
const YAML = require(path.join(nm, "yaml"));
const models = require(path.join(nm, "kubernetes-models"));

const errors = [];
const objects = [];
for (const file of files) {
  const docs = YAML.parseAllDocuments(fs.readFileSync(file, "utf8"), { version: "1.1" })  // as kubectl reads it;
  docs.forEach((doc, i) => {
    const where = `${path.basename(file)}#${i + 1}`;
    if (doc.errors.length) {
      errors.push(`${where}: YAML: ${doc.errors.map((e) => e.message).join("; ")}`);
      return;
    }
    const obj = doc.toJS();
    if (obj === null) return;
    objects.push({ where, obj });
  });
}

// 1. The schemas. kubernetes-models exports one namespace per group/version:
// "v1" for the core group, "apps/v1" as apps.v1, "autoscaling/v2" as
// autoscaling.v2, "networking.k8s.io/v1" under its full group name.
function modelFor(apiVersion, kind) {
  const parts = String(apiVersion).split("/");
  const group = parts.length === 1 ? null : parts[0];
  const version = parts[parts.length - 1];
  let ns;
  try {
    ns = group ? require(path.join(nm, "kubernetes-models", group, version))
               : require(path.join(nm, "kubernetes-models", version));
  } catch (e) {
    return null;
  }
  return ns[kind] || null;
}
for (const { where, obj } of objects) {
  const name = `${where} ${obj.kind}/${obj.metadata && obj.metadata.name}`;
  const Model = modelFor(obj.apiVersion, obj.kind);
  if (!Model) {
    errors.push(`${name}: unknown apiVersion/kind ${obj.apiVersion} ${obj.kind}`);
    continue;
  }
  try {
    new Model(obj).validate();
  } catch (e) {
    errors.push(`${name}: ${e.message}`);
  }
}

// 2. References within the set.
const byKind = (k) => objects.map((o) => o.obj).filter((o) => o.kind === k);
const workloads = objects.map((o) => o.obj).filter((o) =>
  ["Deployment", "StatefulSet", "DaemonSet"].includes(o.kind));
const named = (k, n, ns) => byKind(k).some((o) => o.metadata.name === n &&
  (o.metadata.namespace || "default") === (ns || "default"));
const podSpec = (w) => (w.spec && w.spec.template && w.spec.template.spec) || {};
const portNames = (w) => new Set((podSpec(w).containers || []).flatMap((c) =>
  (c.ports || []).map((p) => p.name).filter(Boolean)));
const matches = (sel, labels) => Object.entries(sel || {}).every(([k, v]) => (labels || {})[k] === v);

for (const svc of byKind("Service")) {
  const sel = svc.spec.selector;
  const ns = svc.metadata.namespace;
  const targets = workloads.filter((w) => (w.metadata.namespace || "default") === (ns || "default") &&
    matches(sel, w.spec.template.metadata.labels));
  if (!targets.length) {
    errors.push(`Service/${svc.metadata.name}: selector ${JSON.stringify(sel)} matches no pod template`);
    continue;
  }
  for (const p of svc.spec.ports || []) {
    if (typeof p.targetPort === "string" && !targets.some((w) => portNames(w).has(p.targetPort)))
      errors.push(`Service/${svc.metadata.name}: targetPort ${p.targetPort} is no container port name`);
  }
}
for (const w of workloads) {
  const ns = w.metadata.namespace;
  const spec = podSpec(w);
  if (!matches(w.spec.selector.matchLabels, w.spec.template.metadata.labels))
    errors.push(`${w.kind}/${w.metadata.name}: selector does not match its pod template's labels`);
  for (const c of spec.containers || []) {
    for (const probe of ["livenessProbe", "readinessProbe", "startupProbe"]) {
      const port = c[probe] && ((c[probe].httpGet || c[probe].tcpSocket || {}).port);
      if (typeof port === "string" && !portNames(w).has(port))
        errors.push(`${w.kind}/${w.metadata.name}: ${probe} port ${port} is no container port name`);
    }
    for (const ef of c.envFrom || []) {
      if (ef.configMapRef && !named("ConfigMap", ef.configMapRef.name, ns))
        errors.push(`${w.kind}/${w.metadata.name}: ConfigMap ${ef.configMapRef.name} is not in the set`);
      if (ef.secretRef && !named("Secret", ef.secretRef.name, ns))
        errors.push(`${w.kind}/${w.metadata.name}: Secret ${ef.secretRef.name} is not in the set`);
    }
    const mounts = new Set((spec.volumes || []).map((v) => v.name));
    for (const m of c.volumeMounts || [])
      if (!mounts.has(m.name)) errors.push(`${w.kind}/${w.metadata.name}: volumeMount ${m.name} has no volume`);
  }
  for (const v of spec.volumes || []) {
    if (v.secret && !named("Secret", v.secret.secretName, ns))
      errors.push(`${w.kind}/${w.metadata.name}: Secret ${v.secret.secretName} is not in the set`);
    if (v.configMap && !named("ConfigMap", v.configMap.name, ns))
      errors.push(`${w.kind}/${w.metadata.name}: ConfigMap ${v.configMap.name} is not in the set`);
  }
}
for (const hpa of byKind("HorizontalPodAutoscaler")) {
  const ref = hpa.spec.scaleTargetRef;
  const target = workloads.find((w) => w.kind === ref.kind && w.metadata.name === ref.name &&
    (w.metadata.namespace || "default") === (hpa.metadata.namespace || "default"));
  if (!target) {
    errors.push(`HorizontalPodAutoscaler/${hpa.metadata.name}: target ${ref.kind}/${ref.name} is not in the set`);
    continue;
  }
  const wantsCpu = (hpa.spec.metrics || []).some((m) => m.resource && m.resource.name === "cpu");
  if (wantsCpu && !(podSpec(target).containers || []).every((c) =>
    c.resources && c.resources.requests && c.resources.requests.cpu))
    errors.push(`HorizontalPodAutoscaler/${hpa.metadata.name}: CPU target but ${ref.name} requests no CPU`);
}

// 3. Unknown fields: the schemas above accept any extra key, so a misspelt
// field (readinesProbe) would pass. TypeScript does not: each object becomes
// an object literal typed with its interface from the npm package
// kubernetes-types, and tsc's excess-property check refuses every key the
// API does not have, at any depth (types are checked again on the way).
function strictTypes() {
  const dir = fs.mkdtempSync(path.join(require("os").tmpdir(), "jrpc-k8s-"));
  let text = "";
  const where = [];  // [first line of an object in objects.ts, its name]
  objects.forEach(({ where: w, obj }, i) => {
    const parts = String(obj.apiVersion).split("/");
    const mod = parts.length === 1 ? "core/" + parts[0] : parts[0].split(".")[0] + "/" + parts[1];
    const name = `${w} ${obj.kind}/${obj.metadata && obj.metadata.name}`;
    where.push([text.split("\n").length, name]);
    text += `// ${name}\nimport type { ${obj.kind} as K${i} } from "kubernetes-types/${mod}";\n` +
            `export const o${i}: K${i} = ${JSON.stringify(obj, null, 2)};\n`;
  });
  fs.writeFileSync(path.join(dir, "objects.ts"), text);
  fs.writeFileSync(path.join(dir, "tsconfig.json"), JSON.stringify({
    compilerOptions: { strict: true, noEmit: true, module: "commonjs", moduleResolution: "node",
                       baseUrl: nm, typeRoots: [], types: [], skipLibCheck: true },
    files: ["objects.ts"] }));
  const r = require("child_process").spawnSync(process.execPath,
    [path.join(nm, "typescript", "bin", "tsc"), "-p", dir, "--pretty", "false"], { encoding: "utf8" });
  for (const line of (r.stdout + r.stderr).split("\n").filter(Boolean)) {
    const m = line.match(/objects\.ts\((\d+),\d+\): (.*)/);
    if (!m) { errors.push("tsc: " + line); continue; }
    const at = where.filter(([l]) => l <= Number(m[1])).pop();
    errors.push(`${at ? at[1] : "?"}: ${m[2]}`);
  }
  if (r.status !== 0 && !(r.stdout + r.stderr).trim()) errors.push("tsc failed: exit " + r.status);
  fs.rmSync(dir, { recursive: true, force: true });
}
if (!errors.length) strictTypes();

for (const e of errors) console.log("k8s: " + e);
console.log(`k8s: ${objects.length} objects in ${files.length} files, ${errors.length} errors`);
process.exit(errors.length ? 1 : 0);
