import { type ParseArgsConfig, parseArgs } from "node:util";
import type { Services } from "../services.js";

/** One command of the CLI: how it is called and what it does (the help text is built from these). */
export interface CommandHelp {
  synopsis: string;
  description: string;
}

/** A command whose arguments have been checked, ready to run against the stores. */
export type Run = (services: Services) => Promise<void>;

/** The commands of one group (`keygate <group> <command>`): the help of each, and how its arguments become a Run. */
export interface CommandGroup {
  readonly commands: Readonly<Record<string, CommandHelp>>;
  /**
   * Checks the arguments of one of the group's commands (a UsageError carrying `usage`, the command's usage text,
   * when they are wrong) and returns what it does.
   */
  readonly parse: (command: string, rest: string[], usage: string) => Run;
}

/** Wrong arguments: the message and the usage of the command concerned go to stderr, and the exit code is 2. */
export class UsageError extends Error {
  readonly usage: string;
  constructor(message: string, usageText: string) {
    super(message);
    this.usage = usageText;
  }
}

export const WORKSPACE_PATTERN = /^[a-zA-Z0-9_]{1,255}$/;

/** parseArgs, with its refusals (an unknown option, a missing value) as usage errors of the command. */
export function parseCommandArgs<T extends ParseArgsConfig>(usage: string, config: T): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (typeof code === "string" && code.startsWith("ERR_PARSE_ARGS")) throw new UsageError((error as Error).message, usage);
    throw error;
  }
}

/** The rows of a list command on stdout: a header row, then one tab-separated row each; or a JSON array with --json. */
export function printList<T>(json: boolean, header: string[], rows: T[], cells: (row: T) => string[]): void {
  if (json) {
    console.log(JSON.stringify(rows, null, 2));
    return;
  }
  console.log(header.join("\t"));
  for (const row of rows) console.log(cells(row).join("\t"));
}
