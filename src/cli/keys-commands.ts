import { type CommandGroup, parseCommandArgs, type Run, UsageError, WORKSPACE_PATTERN } from "./command.js";

/** `keygate keys migrate`: keys imported from another system (the file is read by key-import.ts). */
export const KEYS_COMMANDS: CommandGroup = {
  commands: {
    migrate: {
      synopsis:
        "keys migrate --workspace <ws> --api <apiId> --migration <id> --file <keys.jsonl> [--batch <n>] [--resume] [--position <file>]",
      description:
        'Imports keys from another system, as keys.migrateKeys does: one key a line, as JSON ({"hash": ...} and\n' +
        "createKey's fields), under a migration of the configuration. The file is streamed: every line is checked\n" +
        "before anything is stored, then batches of --batch keys (default 1000) are stored, with progress on stderr.\n" +
        'stdout gets one JSON line a key: {"line", "hash", "keyId"}, or {"line", "hash", "failed": "exists"} when a\n' +
        "key already holds the hash. After each batch the position is kept in --position (default <file>.position);\n" +
        'an interrupted import goes on from there with --resume (keys of a batch cut short report "exists").',
    },
    compact: {
      synopsis: "keys compact",
      description:
        "Moves every key still stored in the earlier form (a JSON record and a hash index of its own per key) to\n" +
        "the compact form (a few hundred bytes a key less in Redis). keygate reads both forms, so this is only for\n" +
        "memory; run it once every instance runs a version that reads the compact form. Safe to stop and run again.",
    },
  },
  parse: keysCommand,
};

/** Keys per keys.migrateKeys call of `keys migrate`: big enough to be quick, small enough to report progress often. */
const DEFAULT_IMPORT_BATCH = 1_000;

/** Checks the arguments of a keys command (a UsageError when they are wrong) and returns what it does. */
function keysCommand(command: string, rest: string[], usage: string): Run {
  return command === "compact" ? compactCommand(rest, usage) : migrateCommand(rest, usage);
}

function compactCommand(rest: string[], usage: string): Run {
  parseCommandArgs(usage, { args: rest, options: {}, strict: true });
  return async (services) => {
    const moved = await services.keys.upgradeStorage((so) => process.stderr.write(`moved ${so} keys so far\n`));
    process.stderr.write(`Moved ${moved} key${moved === 1 ? "" : "s"} to the compact form.\n`);
  };
}

function migrateCommand(rest: string[], usage: string): Run {
  const fail = (message: string) => new UsageError(message, usage);
  const { values } = parseCommandArgs(usage, {
    args: rest,
    options: {
      workspace: { type: "string" },
      api: { type: "string" },
      migration: { type: "string" },
      file: { type: "string" },
      batch: { type: "string" },
      resume: { type: "boolean" },
      position: { type: "string" },
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
    const positionPath = values.position ?? `${path}.position`;
    await importKeys(services, { workspaceId, apiId, migrationId, path, batchSize, positionPath, resume: values.resume === true });
  };
}
