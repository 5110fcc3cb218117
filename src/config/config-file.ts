import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { resolve } from "node:path";
import { ConfigError } from "./config-error.js";
import { nonEmpty, type RawConfig } from "./environment.js";

/** The file read when KEYGATE_CONFIG is not set, if it exists. */
export const DEFAULT_CONFIG_PATH = "config/keygate.yaml";

export interface LoadConfigOptions {
  env?: Record<string, string | undefined>;
  cwd?: string;
}

/** The configuration file loadConfig reads: KEYGATE_CONFIG, else config/keygate.yaml when present, else none. */
export function configPath(options: LoadConfigOptions = {}): string | undefined {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const explicit = nonEmpty(env.KEYGATE_CONFIG);
  if (explicit) return resolve(cwd, explicit);
  const fallback = resolve(cwd, DEFAULT_CONFIG_PATH);
  return existsSync(fallback) ? fallback : undefined;
}

/** The file's sections, not yet validated. YAML errors and a file that is not a mapping are ConfigErrors. */
export function readYaml(path: string): RawConfig {
  const text = readFileSync(path, "utf8");
  // Loaded when there is a file to read (synchronously: loading the configuration is), not by every keygate.
  const { parseDocument } = createRequire(import.meta.url)("yaml") as typeof import("yaml");
  const document = parseDocument(text);
  if (document.errors.length > 0) {
    throw new ConfigError(
      path,
      document.errors.map((error) => {
        const where = error.linePos?.[0];
        // With line positions known, the message's own trailing " at line L, column C:" would repeat them.
        const message = (error.message.split("\n")[0] as string).replace(/ at line \d+, column \d+:?$/, "");
        return `${where ? `line ${where.line}, column ${where.col}: ` : ""}${message}`;
      }),
    );
  }
  const value: unknown = document.toJS();
  if (value === null || value === undefined) return {};
  if (typeof value !== "object" || Array.isArray(value)) {
    throw new ConfigError(path, ["(top level): must be a mapping of sections (server, storage, ...)"]);
  }
  // A section left with only comments under it (`vault:`) parses as null; it means "use the defaults".
  return Object.fromEntries(Object.entries(value).filter(([, section]) => section !== null));
}
