import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError } from "../../src/config/load.js";

/** A fresh temporary directory holding `files` (paths relative to it). */
export function directoryWith(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), "keygate-config-"));
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(join(dir, name, ".."), { recursive: true });
    writeFileSync(join(dir, name), content);
  }
  return dir;
}

/** The problems of the ConfigError `fn` throws; fails when it throws nothing or something else. */
export function problemsOf(fn: () => unknown): readonly string[] {
  try {
    fn();
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  throw new Error("expected a ConfigError");
}
