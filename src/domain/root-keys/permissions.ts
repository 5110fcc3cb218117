import { anyOf, type PermissionQuery } from "../permissions/query.js";

/**
 * The root-key permissions each operation asks for (reference §9): `resource.<id|*>.action`. An operation on one
 * resource accepts the wildcard form or the form naming that resource.
 */
export type ApiAction =
  | "create_api"
  | "read_api"
  | "update_api"
  | "delete_api"
  | "read_analytics"
  | "create_key"
  | "read_key"
  | "update_key"
  | "delete_key"
  | "verify_key"
  | "encrypt_key"
  | "decrypt_key";

export type RatelimitAction =
  | "limit"
  | "create_namespace"
  | "read_namespace"
  | "update_namespace"
  | "delete_namespace"
  | "set_override"
  | "read_override"
  | "delete_override";

export type RbacAction =
  | "create_permission"
  | "read_permission"
  | "update_permission"
  | "delete_permission"
  | "create_role"
  | "read_role"
  | "update_role"
  | "delete_role"
  | "add_permission_to_key"
  | "remove_permission_from_key"
  | "add_role_to_key"
  | "remove_role_from_key"
  | "add_permission_to_role"
  | "remove_permission_from_role";

export type IdentityAction = "create_identity" | "read_identity" | "update_identity" | "delete_identity";

function scoped(resource: string, action: string, id?: string): PermissionQuery {
  return id === undefined ? anyOf(`${resource}.*.${action}`) : anyOf(`${resource}.*.${action}`, `${resource}.${id}.${action}`);
}

export const requireApi = (action: ApiAction, apiId?: string): PermissionQuery => scoped("api", action, apiId);
export const requireRatelimit = (action: RatelimitAction, namespaceId?: string): PermissionQuery =>
  scoped("ratelimit", action, namespaceId);
export const requireRbac = (action: RbacAction): PermissionQuery => scoped("rbac", action);
export const requireIdentity = (action: IdentityAction, identityId?: string): PermissionQuery => scoped("identity", action, identityId);

/** Spec §4.1 also writes the resource type as `apis.`; a held `apis.…` counts the same as `api.…`. */
export function normaliseRootPermission(held: string): string {
  return held.startsWith("apis.") ? `api.${held.slice("apis.".length)}` : held;
}
