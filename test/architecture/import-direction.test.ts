import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { fileURLToPath } from "node:url";
import t from "tap";

// Imports run one way: a module imports only from its own layer or a lower one (docs/architecture.md draws the
// same picture), and the domain and the layers below it import no infrastructure package. Read from the TypeScript
// sources, so a new file is checked without being listed.

const SOURCE = join(dirname(fileURLToPath(import.meta.url)), "../../../src");

/** Layers from the bottom up; the first prefix that matches a file's path (relative to src/) names its layer. */
const LAYERS: readonly { name: string; prefixes: readonly string[] }[] = [
  { name: "lib", prefixes: ["lib/"] },
  { name: "errors", prefixes: ["errors/"] },
  {
    name: "store ports",
    prefixes: [
      "storage/interfaces.ts",
      "storage/counter-interfaces.ts",
      "storage/connection-interfaces.ts",
      "storage/route-interfaces.ts",
      "storage/route-records.ts",
      "storage/portal-interfaces.ts",
      "storage/portal-records.ts",
      "storage/records.ts",
      "storage/unavailable.ts",
      "storage/usage-report-interfaces.ts",
      "storage/webhook-interfaces.ts",
      "storage/webhook-records.ts",
      "storage/audit-outbox-interfaces.ts",
    ],
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

/**
 * The packages of the HTTP server, the Redis client, the upstream client and the caches (and every `@fastify/`
 * one): the domain and the layers below it get stores, a clock and plain options instead, so they import none.
 */
const INFRASTRUCTURE_PACKAGES: ReadonlySet<string> = new Set(["fastify", "fastify-plugin", "ioredis", "undici", "lru-cache"]);

function infrastructurePackage(name: string): boolean {
  return INFRASTRUCTURE_PACKAGES.has(name) || name.startsWith("@fastify/");
}

/** The packages a module's text imports (static, type-only, side-effect and dynamic imports, and re-exports), by name. */
function packagesIn(text: string): string[] {
  const specifiers = [
    ...text.matchAll(/^(?:import|export)\b[^;]*?from\s+"([^"]+)";/gms),
    ...text.matchAll(/^import\s+"([^"]+)";/gm),
    ...text.matchAll(/\bimport\(\s*"([^"]+)"\s*\)/g),
  ].map((match) => match[1] as string);
  return specifiers.filter((specifier) => !specifier.startsWith(".") && !specifier.startsWith("node:")).map(packageName);
}

/** A package import's package: `name` or `@scope/name`, without the path into it. */
function packageName(specifier: string): string {
  return specifier
    .split("/")
    .slice(0, specifier.startsWith("@") ? 2 : 1)
    .join("/");
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

t.test("the domain and the layers below it import no Fastify, ioredis, undici or lru-cache package", async (t) => {
  const domain = LAYERS.findIndex((layer) => layer.name === "domain");
  const files = sourceFiles(SOURCE).filter((file) => layerOf(relative(SOURCE, file)) <= domain);
  t.ok(files.length > 50, `${files.length} source files of the domain and below read`);
  const violations: string[] = [];
  for (const file of files) {
    for (const name of packagesIn(readFileSync(file, "utf8"))) {
      if (infrastructurePackage(name)) violations.push(`${relative(SOURCE, file)} imports ${name}`);
    }
  }
  t.same(violations, [], "no infrastructure package below the infrastructure layer");
});

t.test("the package check sees every form of import", async (t) => {
  const text = [
    'import type { FastifyInstance } from "fastify";',
    'import { Redis,\n  type RedisOptions } from "ioredis";',
    'export { request } from "undici/types";',
    'import "@fastify/static/dist/index.js";',
    'const { LRUCache } = await import("lru-cache");',
    'import { readFileSync } from "node:fs";',
    'import { defined } from "../lib/defined.js";',
  ].join("\n");
  const packages = packagesIn(text);
  t.same(
    packages,
    ["fastify", "ioredis", "undici", "@fastify/static", "lru-cache"],
    "each package by its name; node: and relative imports left out",
  );
  t.ok(packages.every(infrastructurePackage), "each of them is one the domain may not import");
  t.notOk(infrastructurePackage("typebox"), "other packages are left alone");
});
