import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { loadConfig } from "../../src/config/load.js";
import type { KeygateConfig } from "../../src/config/schema.js";
import { directoryWith } from "./config.js";

// What the tests of the container image and its examples (Dockerfile, docker-compose.yml, deploy/kubernetes/) read.

/** The repository's root (tests run from build/test/…). */
export const REPOSITORY = join(dirname(fileURLToPath(import.meta.url)), "../../..");

export function repositoryFile(path: string): string {
  return readFileSync(join(REPOSITORY, path), "utf8");
}

export interface Instruction {
  keyword: string;
  /** The arguments as written, continuation lines joined. */
  text: string;
}

export interface Stage {
  name: string | undefined;
  from: string;
  instructions: Instruction[];
}

export interface Dockerfile {
  /** ARG lines before the first FROM, with their defaults. */
  args: Map<string, string>;
  stages: Stage[];
}

/** The Dockerfile's instructions by stage: comments dropped, continuation lines joined. */
export function readDockerfile(text = repositoryFile("Dockerfile")): Dockerfile {
  const lines = text
    .replace(/\\\n/g, " ")
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#"));
  const args = new Map<string, string>();
  const stages: Stage[] = [];
  for (const line of lines) {
    const [, keyword = "", rest = ""] = /^(\S+)\s*(.*)$/.exec(line) ?? [];
    const upper = keyword.toUpperCase();
    if (upper === "FROM") {
      const [, from = "", name] = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(rest) ?? [];
      stages.push({ name, from, instructions: [] });
    } else if (stages.length === 0) {
      const [, name = "", value = ""] = /^(\w+)=(.*)$/.exec(rest) ?? [];
      if (upper === "ARG") args.set(name, value);
    } else {
      (stages.at(-1) as Stage).instructions.push({ keyword: upper, text: rest });
    }
  }
  return { args, stages };
}

/** A stage by its name (`FROM … AS name`). */
export function stageNamed(dockerfile: Dockerfile, name: string): Stage {
  const stage = dockerfile.stages.find((candidate) => candidate.name === name);
  if (!stage) throw new Error(`no stage ${name} in the Dockerfile`);
  return stage;
}

/** The instructions that make up a stage's image: those of the stages it is FROM, then its own. */
export function chain(dockerfile: Dockerfile, stage: Stage): Instruction[] {
  const parent = dockerfile.stages.find((candidate) => candidate.name !== undefined && candidate.name === stage.from);
  return [...(parent ? chain(dockerfile, parent) : []), ...stage.instructions];
}

/** The variables ENV instructions set (`ENV A=1 B=2`), in order. */
export function environmentOf(instructions: readonly Instruction[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const { keyword, text } of instructions) {
    if (keyword !== "ENV") continue;
    for (const [, name = "", value = ""] of text.matchAll(/(\w+)=(\S+)/g)) env[name] = value;
  }
  return env;
}

/** The one argument of the last instruction of a kind (WORKDIR, USER, VOLUME, EXPOSE), or undefined. */
export function lastOf(instructions: readonly Instruction[], keyword: string): string | undefined {
  return instructions.filter((instruction) => instruction.keyword === keyword).at(-1)?.text;
}

/** An exec-form instruction's words (ENTRYPOINT ["a", "b"]). */
export function execForm(instructions: readonly Instruction[], keyword: string): string[] {
  const text = lastOf(instructions, keyword);
  return text === undefined ? [] : (JSON.parse(text) as string[]);
}

/** The environment variables keygate reads: the table of docs/configuration.md. */
export function documentedVariables(): Set<string> {
  const text = repositoryFile("docs/configuration.md");
  const table = text.slice(text.indexOf("## Environment variables"), text.indexOf("\n## ", text.indexOf("## Environment variables") + 1));
  return new Set([...table.matchAll(/^\| `([A-Z_]+)` \|/gm)].map((match) => match[1] as string));
}

/**
 * The configuration keygate would run with, given its environment and the files mounted in its container (`files`:
 * a path inside the container to the file's text), for KEYGATE_CONFIG. Throws the ConfigError keygate would stop with.
 */
export function configurationIn(env: Record<string, string>, files: Record<string, string> = {}): KeygateConfig {
  const inside = env.KEYGATE_CONFIG;
  if (inside === undefined) return loadConfig({ env, cwd: directoryWith({}) });
  const text = files[inside];
  if (text === undefined) throw new Error(`KEYGATE_CONFIG names ${inside}, which is not a mounted file`);
  const cwd = directoryWith({ "keygate.yaml": text });
  return loadConfig({ env: { ...env, KEYGATE_CONFIG: join(cwd, "keygate.yaml") }, cwd });
}
