import { anyOf, type PermissionQuery } from "../permissions/query.js";

/**
 * The root-key permissions each operation asks for (docs/api.md#root-key-permissions): `resource.<id|*>.action`.
 * An operation on one resource accepts the wildcard form or the form naming that resource.
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
  | "read_analytics"
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

/** The gateway's routes (keygate.*Route and gateway.* procedures): `gateway.*.<action>` or `gateway.<routeId>.<action>`. */
export type GatewayAction = "create_route" | "read_route" | "update_route" | "delete_route";

/** Customer portals (portal.* procedures): `portal.*.<action>` or `portal.<portalId>.<action>`; create_portal is workspace-wide. */
export type PortalAction = "create_portal" | "read_portal" | "update_portal" | "delete_portal" | "create_portal_session";

/** keygate's own root-key management (keygate.*RootKey procedures); always workspace-wide (`root_key.*`). */
export type RootKeyAction = "create_root_key" | "read_root_key" | "delete_root_key";

/** Webhook endpoints (keygate.*Webhook procedures): `webhook.*.<action>` or `webhook.<webhookId>.<action>`. */
export type WebhookAction = "create_webhook" | "read_webhook" | "update_webhook" | "delete_webhook";

function scoped(resource: string, action: string, id?: string): PermissionQuery {
  return id === undefined ? anyOf(`${resource}.*.${action}`) : anyOf(`${resource}.*.${action}`, `${resource}.${id}.${action}`);
}

export const requireApi = (action: ApiAction, apiId?: string): PermissionQuery => scoped("api", action, apiId);
export const requireRatelimit = (action: RatelimitAction, namespaceId?: string): PermissionQuery =>
  scoped("ratelimit", action, namespaceId);
export const requireRbac = (action: RbacAction): PermissionQuery => scoped("rbac", action);
export const requireIdentity = (action: IdentityAction, identityId?: string): PermissionQuery => scoped("identity", action, identityId);
/** The audit log (keygate.listAuditLogs): `audit.*.read_audit_logs`, always workspace-wide. */
export const requireAudit = (action: "read_audit_logs"): PermissionQuery => scoped("audit", action);
/** Usage for billing (keygate.getUsage): `usage.*.read_usage`, always workspace-wide. */
export const requireUsage = (action: "read_usage"): PermissionQuery => scoped("usage", action);
export const requireRootKey = (action: RootKeyAction): PermissionQuery => scoped("root_key", action);
export const requireWebhook = (action: WebhookAction, webhookId?: string): PermissionQuery => scoped("webhook", action, webhookId);
export const requirePortal = (action: PortalAction, portalId?: string): PermissionQuery => scoped("portal", action, portalId);
export const requireGateway = (action: GatewayAction, routeId?: string): PermissionQuery => scoped("gateway", action, routeId);

/**
 * The query a root key must satisfy to hand `permission` on to a new root key: the permission itself (held
 * exactly, through `*`, or under a held `x.*`), or for `resource.<id>.action` also the wider `resource.*.action`
 * that covers it. So a root key never grants what it could not do itself.
 */
export function grantRequirement(permission: string): PermissionQuery {
  const normalised = normaliseRootPermission(permission);
  const [resource, id, action, ...rest] = normalised.split(".");
  if (rest.length === 0 && action !== undefined && action !== "*" && id !== "*" && id !== "" && resource !== "") {
    return anyOf(normalised, `${resource}.*.${action}`);
  }
  return anyOf(normalised);
}

/** The resource type is also written `apis.` (`apis.*.create_key`); a held `apis.…` counts the same as `api.…`. */
export function normaliseRootPermission(held: string): string {
  return held.startsWith("apis.") ? `api.${held.slice("apis.".length)}` : held;
}
