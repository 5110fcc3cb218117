import { existsSync } from "node:fs";
import { Ajv } from "ajv";
import { toValidationIssues } from "../http/validation-issues.js";
import { deepFreeze } from "../lib/freeze.js";
import { ConfigError } from "./config-error.js";
import { configPath, type LoadConfigOptions, readYaml } from "./config-file.js";
import { checkConsistency } from "./consistency.js";
import { applyEnvironment, nonEmpty } from "./environment.js";
import { ConfigSchema, type KeygateConfig } from "./schema.js";

// Reading the file is config-file.ts's, the environment's overrides environment.ts's, the rules a schema cannot
// express consistency.ts's; this module puts them in order.
export { ConfigError } from "./config-error.js";
export { configPath, DEFAULT_CONFIG_PATH, type LoadConfigOptions } from "./config-file.js";

/**
 * Reads the YAML file (KEYGATE_CONFIG, else config/keygate.yaml when present, else nothing), applies the
 * environment overrides, validates, fills defaults and freezes. Throws ConfigError; never returns a bad config.
 */
export function loadConfig(options: LoadConfigOptions = {}): KeygateConfig {
  const env = options.env ?? process.env;
  const explicit = nonEmpty(env.KEYGATE_CONFIG);
  const path = configPath(options);
  if (explicit && !existsSync(path as string)) {
    throw new ConfigError("KEYGATE_CONFIG", [`KEYGATE_CONFIG: file not found: ${path}`]);
  }
  const source = path ?? "defaults and environment";
  const raw = path ? readYaml(path) : {};
  const fromEnv = applyEnvironment(raw, env, source);
  return validateConfig(raw, source, fromEnv);
}

/**
 * Validates an already parsed configuration object (used by loadConfig, tests and the CLI). A problem with a field
 * the environment set names the variable (`fromEnv`: config path to variable).
 */
export function validateConfig(raw: unknown, source = "configuration", fromEnv: ReadonlyMap<string, string> = new Map()): KeygateConfig {
  const config = structuredClone(raw ?? {});
  if (!validate(config)) {
    const problems = toValidationIssues(validate.errors ?? [], "").map((issue) => {
      const variable = [...fromEnv].find(([path]) => issue.location === path || issue.location.startsWith(`${path}.`));
      return `${issue.location || "(top level)"}${variable ? ` (from ${variable[1]})` : ""}: ${issue.message}`;
    });
    throw new ConfigError(source, problems);
  }
  const problems = checkConsistency(config);
  if (problems.length > 0) throw new ConfigError(source, problems);
  return deepFreeze(config);
}

const validate = new Ajv({ allErrors: true, useDefaults: true, allowUnionTypes: true, strict: false }).compile<KeygateConfig>(ConfigSchema);
