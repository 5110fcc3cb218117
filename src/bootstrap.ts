import { DEFAULTS } from "./config/schema.js";
import type { Services } from "./services.js";

/**
 * When neither the configuration nor the environment gives a root key and the store holds none, a root key with
 * every permission is created in workspace `ws_default`, so a new user can call the API at once. Returns its
 * plaintext (to print once), or undefined when root keys exist already.
 */
export async function ensureBootstrapRootKey(services: Services): Promise<{ key: string; workspaceId: string } | undefined> {
  if (services.rootKeys.hasConfiguredKeys) return undefined;
  if ((await services.rootKeys.list()).some((rootKey) => rootKey.revokedAt === undefined)) return undefined;
  const workspaceId = DEFAULTS.bootstrapWorkspaceId;
  const { key } = await services.rootKeys.create({ workspaceId, permissions: ["*"], name: "bootstrap" });
  return { key, workspaceId };
}
