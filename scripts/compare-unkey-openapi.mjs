// Compares the request constraints of keygate's /v2 procedures with Unkey's official v2 OpenAPI document
// (unkeyed/unkey, svc/api/openapi/openapi-generated.yaml), for the procedures both have.
//   node scripts/compare-unkey-openapi.mjs <unkey openapi yaml> [keygate URL, default http://127.0.0.1:8080]
// Prints one line per difference; docs/api.md says which are deliberate.
import { readFileSync } from "node:fs";
import { parse } from "yaml";

const [unkeyPath, keygateUrl = "http://127.0.0.1:8080"] = process.argv.slice(2);
if (!unkeyPath) throw new Error("usage: compare-unkey-openapi.mjs <unkey openapi yaml> [keygate URL]");
const unkey = parse(readFileSync(unkeyPath, "utf8"));
const keygate = await (await fetch(`${keygateUrl}/v2/openapi.json`)).json();

const CONSTRAINTS = ["type", "minLength", "maxLength", "pattern", "minimum", "maximum", "minItems", "maxItems", "enum", "additionalProperties"];

function resolve(document, schema) {
  let current = schema;
  while (current?.$ref) current = current.$ref.slice(2).split("/").reduce((node, part) => node[part], document);
  return current;
}

function compare(path, ours, theirs, out) {
  ours = resolve(keygate, ours);
  theirs = resolve(unkey, theirs);
  if (!ours || !theirs) return;
  for (const name of CONSTRAINTS) {
    const a = JSON.stringify(ours[name]);
    const b = JSON.stringify(theirs[name]);
    if (a !== b && !(name === "type" && (ours.anyOf || theirs.oneOf || theirs.anyOf))) out.push(`${path}: ${name} keygate ${a ?? "-"} unkey ${b ?? "-"}`);
  }
  const ourRequired = [...(ours.required ?? [])].sort().join(",");
  const theirRequired = [...(theirs.required ?? [])].sort().join(",");
  if (ourRequired !== theirRequired) out.push(`${path}: required keygate [${ourRequired}] unkey [${theirRequired}]`);
  for (const [property, schema] of Object.entries(theirs.properties ?? {})) {
    if (!ours.properties?.[property]) out.push(`${path}.${property}: not in keygate`);
    else compare(`${path}.${property}`, ours.properties[property], schema, out);
  }
  for (const property of Object.keys(ours.properties ?? {})) {
    if (!theirs.properties?.[property]) out.push(`${path}.${property}: not in unkey`);
  }
  if (ours.items && theirs.items) compare(`${path}[]`, ours.items, theirs.items, out);
}

const out = [];
let shared = 0;
for (const [path, item] of Object.entries(keygate.paths)) {
  const theirs = unkey.paths[path]?.post?.requestBody?.content?.["application/json"]?.schema;
  const ours = item.post?.requestBody?.content?.["application/json"]?.schema;
  if (!theirs || !ours) continue;
  shared++;
  compare(path.slice("/v2/".length), ours, theirs, out);
}
console.log(`${shared} procedures in both documents; ${out.length} differences`);
for (const line of out) console.log(line);
