import { readdirSync, readFileSync } from "node:fs";
import t from "tap";
import { parse } from "yaml";
import { loadConfig, validateConfig } from "../../src/config/load.js";

const configDir = new URL("../../../config/", import.meta.url);

t.test("every YAML file shipped in config/ validates", async (t) => {
  const files = readdirSync(configDir).filter((name) => name.endsWith(".yaml"));
  t.ok(files.includes("keygate.example.yaml"));
  for (const name of files) {
    t.doesNotThrow(() => loadConfig({ env: { KEYGATE_CONFIG: new URL(name, configDir).pathname }, cwd: "/" }), name);
  }
});

/** Every leaf value of a parsed YAML document, by dotted path; lists are examples, not settings, and are skipped. */
function leaves(value: unknown, path = "", found = new Map<string, unknown>()): Map<string, unknown> {
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    for (const [key, child] of Object.entries(value)) leaves(child, path === "" ? key : `${path}.${key}`, found);
  } else if (!Array.isArray(value)) found.set(path, value);
  return found;
}

t.test("the example file shows the default of every setting that has one", async (t) => {
  const example = parse(readFileSync(new URL("keygate.example.yaml", configDir), "utf8")) as Record<string, unknown>;
  // storage.redis has no default as a whole; with a URL, its other fields get theirs.
  const defaults = leaves(validateConfig({ storage: { redis: { url: "redis://example" } } }));
  let compared = 0;
  for (const [path, value] of leaves(example)) {
    if (!defaults.has(path) || path === "storage.redis.url") continue;
    compared++;
    t.same(value, defaults.get(path), `${path} is shown with its default`);
  }
  t.ok(compared >= 30, `compared ${compared} settings`);
});
