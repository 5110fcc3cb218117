import type { Clock } from "../../lib/clock.js";
import { defined } from "../../lib/defined.js";
import type { KeyStore } from "../../storage/interfaces.js";
import type { KeyRecord } from "../../storage/records.js";
import { type CreditsView, viewCredits } from "../credits.js";
import { type IdentityService, type IdentityView, viewIdentity } from "../identities/identity-service.js";
import { type NamedLimitView, viewNamedLimits } from "../named-limits.js";
import type { RbacService } from "../rbac/rbac-service.js";
import type { KeySecrets } from "./key-secrets.js";

/** A key as the management API shows it (getKey, whoami, listKeys). Never the hash; the plaintext only on request. */
export interface KeyDetails {
  keyId: string;
  start: string;
  enabled: boolean;
  name?: string;
  meta?: Record<string, unknown>;
  createdAt: number;
  updatedAt?: number;
  expires?: number;
  permissions?: string[];
  roles?: string[];
  credits?: CreditsView;
  identity?: IdentityView;
  plaintext?: string;
  ratelimits?: NamedLimitView[];
}

export interface KeyDetailsDeps {
  keys: KeyStore;
  rbac: RbacService;
  identities: IdentityService;
  secrets: KeySecrets;
  clock: Clock;
}

/** Keys as the API shows them, reading their permissions, roles, identities and balances in batches. */
export async function describeKeys(
  deps: KeyDetailsDeps,
  workspaceId: string,
  keys: readonly KeyRecord[],
  decrypt: boolean,
): Promise<KeyDetails[]> {
  const unique = (ids: string[]) => [...new Set(ids)];
  const [permissions, roles, identities, balances] = await Promise.all([
    deps.rbac.permissionsById(workspaceId, unique(keys.flatMap((key) => key.permissionIds))),
    deps.rbac.rolesById(workspaceId, unique(keys.flatMap((key) => key.roleIds))),
    deps.identities.liveById(workspaceId, unique(keys.flatMap((key) => (key.identityId ? [key.identityId] : [])))),
    deps.keys.getCreditsMany(
      workspaceId,
      keys.map((key) => key.id),
    ),
  ]);
  const slugById = new Map(permissions.map((p) => [p.id, p.slug]));
  const roleNameById = new Map(roles.map((r) => [r.id, r.name]));
  const now = deps.clock.now();
  return keys.map((key) => {
    const slugs = key.permissionIds.map((id) => slugById.get(id)).filter((slug): slug is string => slug !== undefined);
    const roleNames = key.roleIds.map((id) => roleNameById.get(id)).filter((name): name is string => name !== undefined);
    const identity = key.identityId ? identities.get(key.identityId) : undefined;
    return {
      keyId: key.id,
      start: key.start,
      enabled: key.enabled,
      ...defined({ name: key.name, meta: key.meta }),
      createdAt: key.createdAt,
      ...defined({
        updatedAt: key.updatedAt,
        expires: key.expires,
        permissions: slugs.length > 0 ? slugs : undefined,
        roles: roleNames.length > 0 ? roleNames : undefined,
        credits: viewCredits(balances.get(key.id) ?? null, now),
        identity: identity ? viewIdentity(identity) : undefined,
        plaintext: decrypt && key.encrypted ? deps.secrets.decrypt({ ...key, encrypted: key.encrypted }) : undefined,
        ratelimits: viewNamedLimits(key.ratelimits),
      }),
    };
  });
}
