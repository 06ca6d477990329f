// Validates OpenRPC documents against the published meta-schema
// (@open-rpc/meta-schema, with ajv; both pinned in tests/deploy, installed
// by tests/deploy/npm_install.sh): a validator nobody here wrote.
//   node openrpc_validate.cjs FILE...   prints "FILE: valid" or its errors;
//   exit 0 when every file is valid, 1 otherwise.
const path = require("path");
const fs = require("fs");
const mods = path.join(__dirname, "..", "deploy", "node_modules");
const Ajv = require(path.join(mods, "ajv"));
const load = (m) => { const s = require(path.join(mods, ...m)); return JSON.parse(JSON.stringify(s.default || s)); };
const meta = load(["@open-rpc", "meta-schema"]);
const jsonMeta = load(["@json-schema-tools", "meta-schema"]);   // what meta's schemas $ref
// Both name "https://meta.json-schema.tools/" as their $schema: draft-07 in
// substance, which ajv knows; the JSON Schema one is added under its $id.
delete meta.$schema;
delete jsonMeta.$schema;
const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
ajv.addSchema(jsonMeta);
const bare = JSON.parse(JSON.stringify(jsonMeta));   // also $ref'd without the slash
delete bare.$id;
ajv.addSchema(bare, "https://meta.json-schema.tools");
const validate = ajv.compile(meta);
let bad = 0;
for (const f of process.argv.slice(2)) {
  let doc;
  try {
    doc = JSON.parse(fs.readFileSync(f, "utf8"));
  } catch (e) {
    console.log(f + ": not JSON: " + e.message);
    bad++;
    continue;
  }
  if (validate(doc)) {
    console.log(f + ": valid");
  } else {
    console.log(f + ": " + JSON.stringify(validate.errors.slice(0, 5)));
    bad++;
  }
}
process.exit(bad ? 1 : 0);
