import { isKeygateError } from "../errors/keygate-error.js";
import { defined } from "../lib/defined.js";
import type { Services } from "../services.js";
import { type CommandGroup, parseCommandArgs, printList, type Run, UsageError, WORKSPACE_PATTERN } from "./command.js";

/** `keygate ratelimit-namespace list|delete`: the rate limit namespaces of a workspace. */
export const RATELIMIT_NAMESPACE_COMMANDS: CommandGroup = {
  commands: {
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
  parse: namespaceCommand,
};

/** Checks the arguments of a ratelimit-namespace command (a UsageError when they are wrong) and returns what it does. */
function namespaceCommand(command: string, rest: string[], usage: string): Run {
  const fail = (message: string) => new UsageError(message, usage);
  const { values, positionals } = parseCommandArgs(usage, {
    args: rest,
    options: { workspace: { type: "string" }, ...defined({ json: command === "list" ? { type: "boolean" as const } : undefined }) },
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
    ...defined({ deletedAt: namespace.deletedAt }),
  }));
  printList(json, ["ID", "STATE", "NAME"], rows, (row) => [row.id, row.state, row.name]);
}
