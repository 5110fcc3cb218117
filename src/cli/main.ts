#!/usr/bin/env node
import { type ParseArgsConfig, parseArgs } from "node:util";
import { isKeygateError } from "../errors/keygate-error.js";
import { systemClock } from "../lib/clock.js";
import type { Services } from "../services.js";

/** One command of the CLI: how it is called and what it does (the help text is built from these). */
interface CommandHelp {
  synopsis: string;
  description: string;
}

const COMMANDS: Readonly<Record<string, Readonly<Record<string, CommandHelp>>>> = {
  "root-key": {
    create: {
      synopsis: "root-key create --workspace <ws> --permission <p> [--permission <p> ...] [--name <label>] [--expires <unix ms>]",
      description: "Creates a root key in the configured Redis store and prints it once (the key alone on stdout).",
    },
    list: {
      synopsis: "root-key list [--workspace <ws>] [--json]",
      description:
        "Lists stored root keys, a header row then one tab-separated row each: id, workspace, state, name, permissions\n(never the keys themselves). --json prints a JSON array instead.",
    },
    revoke: {
      synopsis: "root-key revoke <id>",
      description: "Revokes a stored root key. Running keygate instances refuse it at once.",
    },
  },
  keys: {
    migrate: {
      synopsis: "keys migrate --workspace <ws> --api <apiId> --migration <id> --file <keys.jsonl> [--batch <n>]",
      description:
        'Imports keys from another system, as keys.migrateKeys does: one key a line, as JSON ({"hash": ...} and\n' +
        "createKey's fields), under a migration of the configuration. Every line is checked before anything is stored;\n" +
        "then batches of --batch keys (default 1000) are stored, with progress on stderr. stdout gets one JSON line a\n" +
        'key: {"line", "hash", "keyId"}, or {"line", "hash", "failed": "exists"} when a key already holds the hash.',
    },
  },
  "ratelimit-namespace": {
    list: {
      synopsis: "ratelimit-namespace list --workspace <ws> [--json]",
      description:
        "Lists the rate limit namespaces of a workspace, a header row then one tab-separated row each: id, state, name.\n--json prints a JSON array instead.",
    },
    delete: {
      synopsis: "ratelimit-namespace delete <name or rlns_ id> --workspace <ws>",
      description:
        "Deletes a rate limit namespace: ratelimit.limit then answers 410 for it on every instance within 1 second.\nIts overrides stop applying and its name stays taken. There is no undo.",
    },
  },
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
  const commands = group === undefined ? undefined : COMMANDS[group];
  const help = command === undefined ? undefined : commands?.[command];
  if (help) return `usage: keygate ${help.synopsis}\n\n${help.description}\n\n${FOOTER}`;
  if (group !== undefined && commands)
    return `usage: keygate ${group} <command>\n\n${Object.values(commands).map(describe).join("\n")}\n\n${FOOTER}`;
  return `usage: keygate <command>\n\n${Object.values(COMMANDS)
    .flatMap((entries) => Object.values(entries).map(describe))
    .join("\n")}\n\n${FOOTER}`;
}

const WORKSPACE_PATTERN = /^[a-zA-Z0-9_]{1,255}$/;
/** Keys per keys.migrateKeys call of `keys migrate`: big enough to be quick, small enough to report progress often. */
const DEFAULT_IMPORT_BATCH = 1_000;

const PERMISSION_PATTERN = /^[^\s]{1,512}$/;

/** Wrong arguments: the message and the usage of the command concerned go to stderr, and the exit code is 2. */
class UsageError extends Error {
  readonly usage: string;
  constructor(message: string, usageText: string) {
    super(message);
    this.usage = usageText;
  }
}

const isHelpWord = (arg: string | undefined) => arg === "help" || arg === "--help" || arg === "-h";

type Invocation = { help: string } | { group: string; command: string; rest: string[] };

/**
 * Reads the command words: the usage to print when help is asked for at any level (`keygate help`, `keygate
 * root-key --help`, `keygate root-key create -h`), else the command to run. A missing or unknown command is a
 * UsageError naming what exists.
 */
function invocation(argv: string[]): Invocation {
  const [group, command, ...rest] = argv;
  if (group === undefined) throw new UsageError("give a command", usage());
  // `keygate help [<group> [<command>]]`: an unknown topic gets the usage of everything.
  if (isHelpWord(group)) return { help: usage(command !== undefined && COMMANDS[command] ? command : undefined, rest[0]) };
  const commands = COMMANDS[group];
  if (!commands) throw new UsageError(`unknown command '${group}'`, usage());
  if (command === undefined) throw new UsageError(`give a ${group} command: ${Object.keys(commands).join(", ")}`, usage(group));
  if (isHelpWord(command)) return { help: usage(group) };
  if (!commands[command]) throw new UsageError(`unknown command '${group} ${command}'`, usage(group));
  // Below a command only the flags ask for help: the word `help` may be a root key id or a namespace name there.
  if (rest.includes("--help") || rest.includes("-h")) return { help: usage(group, command) };
  return { group, command, rest };
}

async function main(argv: string[]): Promise<void> {
  const asked = invocation(argv);
  if ("help" in asked) {
    console.log(asked.help);
    return;
  }
  const { group, command, rest } = asked;
  // The arguments are checked before anything connects, so a mistyped option is a usage error even without Redis.
  const run =
    group === "root-key" ? rootKeyCommand(command, rest) : group === "keys" ? keysCommand(command, rest) : namespaceCommand(command, rest);
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

/** parseArgs, with its refusals (an unknown option, a missing value) as usage errors of the command. */
function parseCommandArgs<T extends ParseArgsConfig>(group: string, command: string, config: T): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (typeof code === "string" && code.startsWith("ERR_PARSE_ARGS"))
      throw new UsageError((error as Error).message, usage(group, command));
    throw error;
  }
}

/** The rows of a list command on stdout: a header row, then one tab-separated row each; or a JSON array with --json. */
function printList<T>(json: boolean, header: string[], rows: T[], cells: (row: T) => string[]): void {
  if (json) {
    console.log(JSON.stringify(rows, null, 2));
    return;
  }
  console.log(header.join("\t"));
  for (const row of rows) console.log(cells(row).join("\t"));
}

/** A command whose arguments have been checked, ready to run against the stores. */
type Run = (services: Services) => Promise<void>;

/** Checks the arguments of a root-key command (a UsageError when they are wrong) and returns what it does. */
function rootKeyCommand(command: string, rest: string[]): Run {
  const fail = (message: string) => new UsageError(message, usage("root-key", command));
  if (command === "create") {
    const { values } = parseCommandArgs("root-key", command, {
      args: rest,
      options: {
        workspace: { type: "string" },
        permission: { type: "string", multiple: true },
        name: { type: "string" },
        expires: { type: "string" },
      },
      strict: true,
    });
    const workspaceId = values.workspace;
    const permissions = values.permission ?? [];
    if (!workspaceId || !WORKSPACE_PATTERN.test(workspaceId)) throw fail("--workspace is required and may hold letters, digits and _ only");
    if (permissions.length === 0) throw fail("give at least one --permission (e.g. api.*.create_key, or * for everything)");
    const badPermission = permissions.find((permission) => !PERMISSION_PATTERN.test(permission));
    if (badPermission !== undefined) throw fail(`--permission '${badPermission}' is not a permission name`);
    const expires = values.expires === undefined ? undefined : Number(values.expires);
    if (expires !== undefined && (!Number.isInteger(expires) || expires <= systemClock.now())) {
      throw fail("--expires must be a unix time in milliseconds, in the future");
    }
    return async (services) => {
      const { id, key } = await services.rootKeys.create({
        workspaceId,
        permissions,
        ...(values.name !== undefined ? { name: values.name } : {}),
        ...(expires !== undefined ? { expires } : {}),
      });
      console.error(`Root key ${id} created in workspace ${workspaceId} with: ${permissions.join(", ")}`);
      console.error("It is shown only this once; keep it safe:");
      console.log(key);
    };
  }
  if (command === "list") {
    const { values } = parseCommandArgs("root-key", command, {
      args: rest,
      options: { workspace: { type: "string" }, json: { type: "boolean" } },
      strict: true,
    });
    return async (services) => listRootKeys(services, values.workspace, values.json === true);
  }
  const { positionals } = parseCommandArgs("root-key", command, { args: rest, allowPositionals: true, strict: true });
  const id = positionals[0];
  if (!id || positionals.length > 1) throw fail("give the id of the root key to revoke");
  return async (services) => {
    const revoked = await services.rootKeys.revoke(id);
    if (!revoked) throw fail(`no active root key with id '${id}'`);
    console.log(`Root key ${id} revoked.`);
  };
}

async function listRootKeys(services: Services, workspaceId: string | undefined, json: boolean): Promise<void> {
  const now = systemClock.now();
  // Never the hash: a listing is for people and scripts, not for guessing keys offline.
  const rows = (await services.rootKeys.list(workspaceId)).map((rootKey) => ({
    id: rootKey.id,
    workspaceId: rootKey.workspaceId,
    state: rootKey.revokedAt !== undefined ? "revoked" : rootKey.expires !== undefined && rootKey.expires <= now ? "expired" : "active",
    ...(rootKey.name !== undefined ? { name: rootKey.name } : {}),
    permissions: rootKey.permissions,
    createdAt: rootKey.createdAt,
    ...(rootKey.expires !== undefined ? { expires: rootKey.expires } : {}),
    ...(rootKey.revokedAt !== undefined ? { revokedAt: rootKey.revokedAt } : {}),
  }));
  printList(json, ["ID", "WORKSPACE", "STATE", "NAME", "PERMISSIONS"], rows, (row) => [
    row.id,
    row.workspaceId,
    row.state,
    row.name ?? "-",
    row.permissions.join(","),
  ]);
}

/** Checks the arguments of a keys command (a UsageError when they are wrong) and returns what it does. */
function keysCommand(command: string, rest: string[]): Run {
  const fail = (message: string) => new UsageError(message, usage("keys", command));
  const { values } = parseCommandArgs("keys", command, {
    args: rest,
    options: {
      workspace: { type: "string" },
      api: { type: "string" },
      migration: { type: "string" },
      file: { type: "string" },
      batch: { type: "string" },
    },
    strict: true,
  });
  const { workspace: workspaceId, api: apiId, migration: migrationId, file: path } = values;
  if (!workspaceId || !WORKSPACE_PATTERN.test(workspaceId)) throw fail("--workspace is required and may hold letters, digits and _ only");
  if (!apiId || !WORKSPACE_PATTERN.test(apiId)) throw fail("--api is required: the id of the API the keys join (api_...)");
  if (!migrationId) throw fail("--migration is required: the id of a migration declared in the configuration");
  if (!path) throw fail("--file is required: a file of one JSON key a line");
  const batchSize = values.batch === undefined ? DEFAULT_IMPORT_BATCH : Number(values.batch);
  if (!Number.isInteger(batchSize) || batchSize < 1) throw fail("--batch must be a whole number of keys, at least 1");
  return async (services) => {
    const [{ importKeys }, { MAX_MIGRATED_KEYS_PER_REQUEST }] = await Promise.all([
      import("./key-import.js"),
      import("../routes/v2/keys/migrate-keys.js"),
    ]);
    if (batchSize > MAX_MIGRATED_KEYS_PER_REQUEST)
      throw fail(`--batch may be at most ${MAX_MIGRATED_KEYS_PER_REQUEST}, as keys.migrateKeys takes`);
    await importKeys(services, { workspaceId, apiId, migrationId, path, batchSize });
  };
}

/** Checks the arguments of a ratelimit-namespace command (a UsageError when they are wrong) and returns what it does. */
function namespaceCommand(command: string, rest: string[]): Run {
  const fail = (message: string) => new UsageError(message, usage("ratelimit-namespace", command));
  const { values, positionals } = parseCommandArgs("ratelimit-namespace", command, {
    args: rest,
    options: { workspace: { type: "string" }, ...(command === "list" ? { json: { type: "boolean" as const } } : {}) },
    allowPositionals: command === "delete",
    strict: true,
  });
  const workspaceId = values.workspace;
  if (typeof workspaceId !== "string" || !WORKSPACE_PATTERN.test(workspaceId))
    throw fail("--workspace is required and may hold letters, digits and _ only");
  if (command === "list") return async (services) => listNamespaces(services, workspaceId, values.json === true);
  const target = positionals[0];
  if (!target || positionals.length > 1) throw fail("give the name or rlns_ id of the namespace to delete");
  return async (services) => {
    try {
      const deleted = await services.ratelimit.deleteNamespace(workspaceId, target);
      console.log(`Rate limit namespace ${deleted.id} ('${deleted.name}') deleted.`);
    } catch (error) {
      if (isKeygateError(error) && error.code === "err:unkey:data:ratelimit_namespace_not_found") {
        throw fail(`no live rate limit namespace '${target}' in workspace ${workspaceId}`);
      }
      throw error;
    }
  };
}

async function listNamespaces(services: Services, workspaceId: string, json: boolean): Promise<void> {
  const rows = (await services.ratelimit.listNamespaces(workspaceId)).map((namespace) => ({
    id: namespace.id,
    state: namespace.deletedAt !== undefined ? "deleted" : "active",
    name: namespace.name,
    createdAt: namespace.createdAt,
    ...(namespace.deletedAt !== undefined ? { deletedAt: namespace.deletedAt } : {}),
  }));
  printList(json, ["ID", "STATE", "NAME"], rows, (row) => [row.id, row.state, row.name]);
}

main(process.argv.slice(2)).catch((error: unknown) => {
  if (error instanceof UsageError) console.error(`keygate: ${error.message}\n\n${error.usage}`);
  else console.error(`keygate: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(error instanceof UsageError ? 2 : 1);
});
