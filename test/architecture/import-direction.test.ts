import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { fileURLToPath } from "node:url";
import t from "tap";

// Imports run one way: a module imports only from its own layer or a lower one (docs/architecture.md draws the
// same picture). Read from the TypeScript sources, so a new file is checked without being listed.

const SOURCE = join(dirname(fileURLToPath(import.meta.url)), "../../../src");

/** Layers from the bottom up; the first prefix that matches a file's path (relative to src/) names its layer. */
const LAYERS: readonly { name: string; prefixes: readonly string[] }[] = [
  { name: "lib", prefixes: ["lib/"] },
  { name: "errors", prefixes: ["errors/"] },
  {
    name: "store ports",
    prefixes: ["storage/interfaces.ts", "storage/counter-interfaces.ts", "storage/records.ts", "storage/unavailable.ts"],
  },
  { name: "domain", prefixes: ["domain/"] },
  { name: "infrastructure", prefixes: ["storage/", "cache/", "analytics/"] },
  { name: "http", prefixes: ["http/", "gateway/"] },
  { name: "routes", prefixes: ["routes/"] },
  { name: "config", prefixes: ["config/"] },
  { name: "wiring", prefixes: ["cli/", ""] },
];

/**
 * The one upward edge: route handlers are typed by the Services interface the wiring builds (a type, erased at
 * run time).
 */
const ALLOWED_TYPE_IMPORTS: ReadonlySet<string> = new Set(["routes -> services.ts"]);

function layerOf(path: string): number {
  return LAYERS.findIndex((layer) => layer.prefixes.some((prefix) => path.startsWith(prefix)));
}

function sourceFiles(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

/** Relative imports of a file: the imported path (relative to src/, .ts) and whether the import is type-only. */
function importsOf(file: string): { target: string; typeOnly: boolean }[] {
  const text = readFileSync(file, "utf8");
  const found: { target: string; typeOnly: boolean }[] = [];
  for (const match of text.matchAll(/^(import|export)(\s+type)?\s[^;]*?from\s+"(\.[^"]+)";/gms)) {
    const target = relative(SOURCE, normalize(join(dirname(file), (match[3] as string).replace(/\.js$/, ".ts"))));
    found.push({ target, typeOnly: match[2] !== undefined });
  }
  return found;
}

t.test("every import in src/ points to the importer's own layer or a lower one", async (t) => {
  const files = sourceFiles(SOURCE);
  t.ok(files.length > 100, `${files.length} source files read`);
  const violations: string[] = [];
  for (const file of files) {
    const path = relative(SOURCE, file);
    const from = layerOf(path);
    for (const { target, typeOnly } of importsOf(file)) {
      const to = layerOf(target);
      if (to <= from) continue;
      const edge = `${LAYERS[from]?.name} -> ${target}`;
      if (typeOnly && ALLOWED_TYPE_IMPORTS.has(edge)) continue;
      violations.push(`${path} (${LAYERS[from]?.name}) imports ${target} (${LAYERS[to]?.name})`);
    }
  }
  t.same(violations, [], "no import against the direction");
});

t.test("the check sees an upward import when there is one", async (t) => {
  t.ok(layerOf("domain/keys/key-service.ts") < layerOf("storage/redis/key-store.ts"), "domain sits below the Redis stores");
  t.ok(layerOf("lib/base58.ts") < layerOf("errors/catalogue.ts"));
  t.ok(layerOf("routes/v2/keys/create-key.ts") < layerOf("services.ts"), "the wiring sits on top");
  const keyService = importsOf(join(SOURCE, "domain/keys/key-service.ts"));
  t.ok(
    keyService.some((entry) => entry.target === "lib/defined.ts"),
    "imports are read with their paths resolved from src/",
  );
});
