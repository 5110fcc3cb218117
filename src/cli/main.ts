#!/usr/bin/env node
import { parseArgs } from "node:util";
import { ConfigError, loadConfig } from "../config/load.js";
import { systemClock } from "../lib/clock.js";
import { isKeygateError } from "../errors/keygate-error.js";
import { InvalidationBus } from "../cache/invalidation-bus.js";
import { createServices, type Services } from "../services.js";
import { isRedisBacked, openStores } from "../storage/index.js";

const USAGE = `usage: keygate <command>

  root-key create --workspace <ws> --permission <p> [--permission <p> ...] [--name <label>] [--expires <unix ms>]
      Creates a root key in the configured Redis store and prints it once.
  root-key list [--workspace <ws>]
      Lists stored root keys (ids, workspaces, permissions; never the keys themselves).
  root-key revoke <id>
      Revokes a stored root key. Running keygate instances refuse it at once.
  ratelimit-namespace list --workspace <ws>
      Lists the rate limit namespaces of a workspace (id, state, name).
  ratelimit-namespace delete <name or rlns_ id> --workspace <ws>
      Deletes a rate limit namespace: ratelimit.limit then answers 410 for it on every instance within 1 second.
      Its overrides stop applying and its name stays taken. There is no undo.

The configuration is read as keygate reads it (KEYGATE_CONFIG or config/keygate.yaml, then REDIS_URL).
Root keys and namespaces live in Redis: without storage.redis there is no store outside a running keygate.`;

const COMMANDS: Readonly<Record<string, readonly string[]>> = {
  "root-key": ["create", "list", "revoke"],
  "ratelimit-namespace": ["list", "delete"],
};

const WORKSPACE_PATTERN = /^[a-zA-Z0-9_]{1,255}$/;
const PERMISSION_PATTERN = /^[^\s]{1,512}$/;

class UsageError extends Error {}

async function main(argv: string[]): Promise<void> {
  const [group, command, ...rest] = argv;
  if (group === undefined || group === "help" || group === "--help" || group === "-h") {
    console.log(USAGE);
    return;
  }
  if (!COMMANDS[group]?.includes(command ?? "")) throw new UsageError(`unknown command '${argv.join(" ")}'`);

  const config = loadConfig();
  if (!config.storage.redis) {
    throw new UsageError(`${group} commands need a Redis store: set REDIS_URL or storage.redis in the configuration`);
  }
  const stores = await openStores(config.storage);
  // Connected so that a revocation reaches every running keygate at once.
  const invalidations = new InvalidationBus();
  try {
    if (isRedisBacked(stores)) await invalidations.connect(stores.redis, stores.prefix);
    const services = createServices(stores, config, systemClock, { invalidations });
    if (group === "root-key") await rootKeyCommand(services, command as string, rest);
    else await namespaceCommand(services, command as string, rest);
  } finally {
    await invalidations.close();
    await stores.close();
  }
}

async function rootKeyCommand(services: Services, command: string, rest: string[]): Promise<void> {
  if (command === "create") {
    const { values } = parseArgs({
      args: rest,
      options: { workspace: { type: "string" }, permission: { type: "string", multiple: true }, name: { type: "string" }, expires: { type: "string" } },
      strict: true,
    });
    const workspaceId = values.workspace;
    const permissions = values.permission ?? [];
    if (!workspaceId || !WORKSPACE_PATTERN.test(workspaceId)) throw new UsageError("--workspace is required and may hold letters, digits and _ only");
    if (permissions.length === 0) throw new UsageError("give at least one --permission (e.g. api.*.create_key, or * for everything)");
    const badPermission = permissions.find((permission) => !PERMISSION_PATTERN.test(permission));
    if (badPermission !== undefined) throw new UsageError(`--permission '${badPermission}' is not a permission name`);
    const expires = values.expires === undefined ? undefined : Number(values.expires);
    if (expires !== undefined && (!Number.isInteger(expires) || expires <= systemClock.now())) {
      throw new UsageError("--expires must be a unix time in milliseconds, in the future");
    }
    const { id, key } = await services.rootKeys.create({
      workspaceId,
      permissions,
      ...(values.name !== undefined ? { name: values.name } : {}),
      ...(expires !== undefined ? { expires } : {}),
    });
    console.error(`Root key ${id} created in workspace ${workspaceId} with: ${permissions.join(", ")}`);
    console.error("It is shown only this once; keep it safe:");
    console.log(key);
  } else if (command === "list") {
    const { values } = parseArgs({ args: rest, options: { workspace: { type: "string" } }, strict: true });
    const rootKeys = await services.rootKeys.list(values.workspace);
    for (const rootKey of rootKeys) {
      const state = rootKey.revokedAt !== undefined ? "revoked" : rootKey.expires !== undefined && rootKey.expires <= systemClock.now() ? "expired" : "active";
      console.log([rootKey.id, rootKey.workspaceId, state, rootKey.name ?? "-", rootKey.permissions.join(",")].join("\t"));
    }
  } else {
    const { positionals } = parseArgs({ args: rest, allowPositionals: true, strict: true });
    const id = positionals[0];
    if (!id || positionals.length > 1) throw new UsageError("give the id of the root key to revoke");
    const revoked = await services.rootKeys.revoke(id);
    if (!revoked) throw new UsageError(`no active root key with id '${id}'`);
    console.log(`Root key ${id} revoked.`);
  }
}

async function namespaceCommand(services: Services, command: string, rest: string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args: rest, options: { workspace: { type: "string" } }, allowPositionals: command === "delete", strict: true });
  const workspaceId = values.workspace;
  if (!workspaceId || !WORKSPACE_PATTERN.test(workspaceId)) throw new UsageError("--workspace is required and may hold letters, digits and _ only");
  if (command === "list") {
    for (const namespace of await services.ratelimit.listNamespaces(workspaceId)) {
      console.log([namespace.id, namespace.deletedAt !== undefined ? "deleted" : "active", namespace.name].join("\t"));
    }
    return;
  }
  const target = positionals[0];
  if (!target || positionals.length > 1) throw new UsageError("give the name or rlns_ id of the namespace to delete");
  try {
    const deleted = await services.ratelimit.deleteNamespace(workspaceId, target);
    console.log(`Rate limit namespace ${deleted.id} ('${deleted.name}') deleted.`);
  } catch (error) {
    if (isKeygateError(error) && error.code === "err:unkey:data:ratelimit_namespace_not_found") {
      throw new UsageError(`no live rate limit namespace '${target}' in workspace ${workspaceId}`);
    }
    throw error;
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  if (error instanceof UsageError) console.error(`keygate: ${error.message}\n\n${USAGE}`);
  else if (error instanceof ConfigError) console.error(`keygate: ${error.message}`);
  else console.error(`keygate: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(error instanceof UsageError ? 2 : 1);
});
