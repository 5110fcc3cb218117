#!/usr/bin/env node
import { systemClock } from "../lib/clock.js";
import { type CommandGroup, type CommandHelp, UsageError } from "./command.js";
import { KEYS_COMMANDS } from "./keys-commands.js";
import { RATELIMIT_NAMESPACE_COMMANDS } from "./ratelimit-namespace-commands.js";
import { ROOT_KEY_COMMANDS } from "./root-key-commands.js";

/** Every command, by group (`keygate <group> <command>`), in the order the usage lists them. */
const COMMANDS: Readonly<Record<string, CommandGroup>> = {
  "root-key": ROOT_KEY_COMMANDS,
  keys: KEYS_COMMANDS,
  "ratelimit-namespace": RATELIMIT_NAMESPACE_COMMANDS,
};

const FOOTER = `The configuration is read as keygate reads it (KEYGATE_CONFIG or config/keygate.yaml, then REDIS_URL and
KEYGATE_REDIS_PREFIX). Root keys, keys and namespaces live in Redis: without storage.redis there is no store outside
a running keygate. Add --help to any command for its own usage.`;

function describe(help: CommandHelp): string {
  return `  ${help.synopsis}\n${help.description
    .split("\n")
    .map((line) => `      ${line}`)
    .join("\n")}`;
}

/** The usage of everything, of one group of commands, or of one command. */
function usage(group?: string, command?: string): string {
  const commands = own(COMMANDS, group)?.commands;
  const help = commands && own(commands, command);
  if (help) return `usage: keygate ${help.synopsis}\n\n${help.description}\n\n${FOOTER}`;
  if (commands) return `usage: keygate ${group} <command>\n\n${Object.values(commands).map(describe).join("\n")}\n\n${FOOTER}`;
  return `usage: keygate <command>\n\n${Object.values(COMMANDS)
    .flatMap((entries) => Object.values(entries.commands).map(describe))
    .join("\n")}\n\n${FOOTER}`;
}

/** The entry named `name`: a word that names an Object.prototype property (constructor, toString) is no command. */
function own<T>(record: Readonly<Record<string, T>>, name: string | undefined): T | undefined {
  return name !== undefined && Object.hasOwn(record, name) ? record[name] : undefined;
}

const isHelpWord = (arg: string | undefined) => arg === "help" || arg === "--help" || arg === "-h";

type Invocation = { help: string } | { group: string; command: string; rest: string[]; commands: CommandGroup };

/**
 * Reads the command words: the usage to print when help is asked for at any level (`keygate help`, `keygate
 * root-key --help`, `keygate root-key create -h`), else the command to run. A missing or unknown command is a
 * UsageError naming what exists.
 */
function invocation(argv: string[]): Invocation {
  const [group, command, ...rest] = argv;
  if (group === undefined) throw new UsageError("give a command", usage());
  // `keygate help [<group> [<command>]]`: an unknown topic gets the usage of everything.
  if (isHelpWord(group)) return { help: usage(own(COMMANDS, command) ? command : undefined, rest[0]) };
  const commands = own(COMMANDS, group);
  if (!commands) throw new UsageError(`unknown command '${group}'`, usage());
  if (command === undefined) throw new UsageError(`give a ${group} command: ${Object.keys(commands.commands).join(", ")}`, usage(group));
  if (isHelpWord(command)) return { help: usage(group) };
  if (!own(commands.commands, command)) throw new UsageError(`unknown command '${group} ${command}'`, usage(group));
  // Below a command only the flags ask for help: the word `help` may be a root key id or a namespace name there.
  if (rest.includes("--help") || rest.includes("-h")) return { help: usage(group, command) };
  return { group, command, rest, commands };
}

async function main(argv: string[]): Promise<void> {
  const asked = invocation(argv);
  if ("help" in asked) {
    console.log(asked.help);
    return;
  }
  const { group, command, rest, commands } = asked;
  // The arguments are checked before anything connects, so a mistyped option is a usage error even without Redis.
  const run = commands.parse(command, rest, usage(group, command));
  // Loaded only now: help and usage errors answer at once, without the configuration schema and the stores.
  const [{ loadConfig }, { InvalidationBus }, { createServices }, { openStores }] = await Promise.all([
    import("../config/load.js"),
    import("../cache/invalidation-bus.js"),
    import("../services.js"),
    import("../storage/index.js"),
  ]);
  const config = loadConfig();
  if (!config.storage.redis) {
    throw new UsageError(
      `${group} commands need a Redis store: set REDIS_URL or storage.redis in the configuration`,
      usage(group, command),
    );
  }
  const stores = await openStores(config.storage.redis);
  // Connected so that a revocation reaches every running keygate at once.
  const invalidations = new InvalidationBus();
  try {
    await invalidations.connect(stores.broadcast);
    await run(createServices(stores, config, systemClock, { invalidations }));
  } finally {
    await invalidations.close();
    await stores.close();
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  if (error instanceof UsageError) console.error(`keygate: ${error.message}\n\n${error.usage}`);
  else console.error(`keygate: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(error instanceof UsageError ? 2 : 1);
});
