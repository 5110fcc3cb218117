import { systemClock } from "../lib/clock.js";
import { defined } from "../lib/defined.js";
import type { Services } from "../services.js";
import { type CommandGroup, parseCommandArgs, printList, type Run, UsageError, WORKSPACE_PATTERN } from "./command.js";

/** `keygate root-key create|list|revoke`: root keys in the configured Redis store. */
export const ROOT_KEY_COMMANDS: CommandGroup = {
  commands: {
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
  parse: rootKeyCommand,
};

const PERMISSION_PATTERN = /^[^\s]{1,512}$/;

/** Checks the arguments of a root-key command (a UsageError when they are wrong) and returns what it does. */
function rootKeyCommand(command: string, rest: string[], usage: string): Run {
  const fail = (message: string) => new UsageError(message, usage);
  if (command === "create") {
    const { values } = parseCommandArgs(usage, {
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
        ...defined({ name: values.name, expires }),
      });
      console.error(`Root key ${id} created in workspace ${workspaceId} with: ${permissions.join(", ")}`);
      console.error("It is shown only this once; keep it safe:");
      console.log(key);
    };
  }
  if (command === "list") {
    const { values } = parseCommandArgs(usage, {
      args: rest,
      options: { workspace: { type: "string" }, json: { type: "boolean" } },
      strict: true,
    });
    return async (services) => listRootKeys(services, values.workspace, values.json === true);
  }
  const { positionals } = parseCommandArgs(usage, { args: rest, allowPositionals: true, strict: true });
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
    ...defined({ name: rootKey.name }),
    permissions: rootKey.permissions,
    createdAt: rootKey.createdAt,
    ...defined({ expires: rootKey.expires, revokedAt: rootKey.revokedAt }),
  }));
  printList(json, ["ID", "WORKSPACE", "STATE", "NAME", "PERMISSIONS"], rows, (row) => [
    row.id,
    row.workspaceId,
    row.state,
    row.name ?? "-",
    row.permissions.join(","),
  ]);
}
