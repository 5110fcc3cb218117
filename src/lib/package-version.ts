import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

let version: string | undefined;

/** keygate's version from its package.json, the nearest one above this module (in dist/ and build/src/ alike); read once. */
export function packageVersion(): string {
  version ??= readVersion();
  return version;
}

function readVersion(): string {
  for (let directory = dirname(fileURLToPath(import.meta.url)); ; directory = dirname(directory)) {
    try {
      const manifest = JSON.parse(readFileSync(join(directory, "package.json"), "utf8")) as { name?: string; version?: string };
      if (manifest.name === "keygate" && manifest.version) return manifest.version;
    } catch {
      // no package.json here: look further up
    }
    if (dirname(directory) === directory) return "unknown";
  }
}
