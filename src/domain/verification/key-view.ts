import type { KeyStore } from "../../storage/interfaces.js";
import type { CreditRefill, RatelimitConfig } from "../../storage/records.js";
import type { ApiService } from "../apis/api-service.js";
import type { IdentityService } from "../identities/identity-service.js";
import { PermissionSet } from "../permissions/permission-set.js";
import type { RbacService } from "../rbac/rbac-service.js";

/** Everything verification needs to know about a key, resolved once and cached by the key's hash. */
export interface KeyView {
  keyId: string;
  workspaceId: string;
  apiId: string;
  keySpaceId: string;
  name?: string;
  meta?: Record<string, unknown>;
  expires?: number;
  enabled: boolean;
  /** Slugs of the key's direct permissions and of its roles' permissions. */
  permissions: string[];
  roles: string[];
  permissionSet: PermissionSet;
  identity?: { id: string; externalId: string; meta?: Record<string, unknown>; ratelimits: RatelimitConfig[] };
  ratelimits: RatelimitConfig[];
  /** Whether the key has a credit balance (unlimited keys never touch credits). */
  hasCredits: boolean;
  /** When the balance refills (for a Retry-After once credits are exhausted). */
  creditRefill?: CreditRefill;
}

export interface KeyViewSources {
  keys: KeyStore;
  apis: ApiService;
  rbac: RbacService;
  identities: IdentityService;
}

/**
 * The view of the live key with this hash in the workspace; null when there is none, when it was deleted, or when
 * its API was deleted (all of which verify as NOT_FOUND).
 */
export async function loadKeyView(sources: KeyViewSources, workspaceId: string, hash: string): Promise<KeyView | null> {
  const key = await sources.keys.findByHash(workspaceId, hash);
  if (!key || key.deletedAt !== undefined) return null;
  const [apiLive, roles, identities, credits] = await Promise.all([
    sources.apis.isLive(workspaceId, key.apiId),
    sources.rbac.rolesById(workspaceId, key.roleIds),
    key.identityId ? sources.identities.liveById(workspaceId, [key.identityId]) : Promise.resolve(new Map()),
    sources.keys.getCredits(workspaceId, key.id),
  ]);
  if (!apiLive) return null;
  const permissionIds = [...new Set([...key.permissionIds, ...roles.flatMap((role) => role.permissionIds)])];
  const permissions = (await sources.rbac.permissionsById(workspaceId, permissionIds)).map((permission) => permission.slug);
  const identity = key.identityId ? identities.get(key.identityId) : undefined;
  return {
    keyId: key.id,
    workspaceId,
    apiId: key.apiId,
    keySpaceId: key.keySpaceId,
    ...(key.name !== undefined ? { name: key.name } : {}),
    ...(key.meta !== undefined ? { meta: key.meta } : {}),
    ...(key.expires !== undefined ? { expires: key.expires } : {}),
    enabled: key.enabled,
    permissions,
    roles: roles.map((role) => role.name),
    permissionSet: new PermissionSet(permissions),
    ...(identity
      ? { identity: { id: identity.id, externalId: identity.externalId, ...(identity.meta !== undefined ? { meta: identity.meta } : {}), ratelimits: identity.ratelimits } }
      : {}),
    ratelimits: key.ratelimits,
    hasCredits: credits !== null,
    ...(credits?.refill ? { creditRefill: credits.refill } : {}),
  };
}
