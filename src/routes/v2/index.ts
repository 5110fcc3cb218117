import type { FastifyInstance } from "fastify";
import type { Caller } from "../../domain/caller.js";
import { parseBearer } from "../../http/bearer.js";
import { bodyDeadline } from "../../http/slow-requests.js";
import getGatewayRequests from "./analytics/get-gateway-requests.js";
import getRatelimits from "./analytics/get-ratelimits.js";
import getVerifications from "./analytics/get-verifications.js";
import createApi from "./apis/create-api.js";
import deleteApi from "./apis/delete-api.js";
import getApi from "./apis/get-api.js";
import listKeys from "./apis/list-keys.js";
import listPolicies from "./gateway/list-policies.js";
import setPolicies from "./gateway/set-policies.js";
import updatePolicy from "./gateway/update-policy.js";
import createIdentity from "./identities/create-identity.js";
import deleteIdentity from "./identities/delete-identity.js";
import getIdentity from "./identities/get-identity.js";
import listIdentities from "./identities/list-identities.js";
import updateIdentity from "./identities/update-identity.js";
import createRootKey from "./keygate/create-root-key.js";
import createRoute from "./keygate/create-route.js";
import createWebhook from "./keygate/create-webhook.js";
import deleteRootKey from "./keygate/delete-root-key.js";
import deleteRoute from "./keygate/delete-route.js";
import deleteWebhook from "./keygate/delete-webhook.js";
import getApiIpAllowlist from "./keygate/get-api-ip-allowlist.js";
import getRoute from "./keygate/get-route.js";
import getRouteOpenApi from "./keygate/get-route-open-api.js";
import getUsage from "./keygate/get-usage.js";
import listApis from "./keygate/list-apis.js";
import listAuditLogs from "./keygate/list-audit-logs.js";
import listRatelimitNamespaces from "./keygate/list-ratelimit-namespaces.js";
import listRootKeys from "./keygate/list-root-keys.js";
import listRoutes from "./keygate/list-routes.js";
import listWebhookDeliveries from "./keygate/list-webhook-deliveries.js";
import listWebhooks from "./keygate/list-webhooks.js";
import replayUsageReports from "./keygate/replay-usage-reports.js";
import rotateWebhookSecret from "./keygate/rotate-webhook-secret.js";
import setApiIpAllowlist from "./keygate/set-api-ip-allowlist.js";
import setRouteOpenApi from "./keygate/set-route-open-api.js";
import setRoutePolicies from "./keygate/set-route-policies.js";
import testWebhook from "./keygate/test-webhook.js";
import updateIdentityCredits from "./keygate/update-identity-credits.js";
import updateRoute from "./keygate/update-route.js";
import updateRoutePolicy from "./keygate/update-route-policy.js";
import updateWebhook from "./keygate/update-webhook.js";
import addPermissions from "./keys/add-permissions.js";
import addRoles from "./keys/add-roles.js";
import createKey from "./keys/create-key.js";
import deleteKey from "./keys/delete-key.js";
import getKey from "./keys/get-key.js";
import migrateKeys from "./keys/migrate-keys.js";
import removePermissions from "./keys/remove-permissions.js";
import removeRoles from "./keys/remove-roles.js";
import rerollKey from "./keys/reroll-key.js";
import setPermissions from "./keys/set-permissions.js";
import setRoles from "./keys/set-roles.js";
import updateCredits from "./keys/update-credits.js";
import updateKey from "./keys/update-key.js";
import verifyKey from "./keys/verify-key.js";
import whoami from "./keys/whoami.js";
import createPermission from "./permissions/create-permission.js";
import createRole from "./permissions/create-role.js";
import deletePermission from "./permissions/delete-permission.js";
import deleteRole from "./permissions/delete-role.js";
import getPermission from "./permissions/get-permission.js";
import getRole from "./permissions/get-role.js";
import listPermissions from "./permissions/list-permissions.js";
import listRoles from "./permissions/list-roles.js";
import setRolePermissions from "./permissions/set-role-permissions.js";
import { PORTAL_ROOT_PROCEDURES } from "./portal/index.js";
import { portalSessionRoutes } from "./portal/session-routes.js";
import { type AnyProcedure, registerProcedures } from "./procedure.js";
import deleteOverride from "./ratelimit/delete-override.js";
import getOverride from "./ratelimit/get-override.js";
import limit from "./ratelimit/limit.js";
import listOverrides from "./ratelimit/list-overrides.js";
import multiLimit from "./ratelimit/multi-limit.js";
import setOverride from "./ratelimit/set-override.js";

declare module "fastify" {
  interface FastifyRequest {
    /** The authenticated root key; set for every /v2 procedure before its body is read. */
    caller: Caller;
  }
}

/** Every /v2 procedure; its type keeps each one's name and wire types (see Procedure), which the dashboard imports. */
export const PROCEDURES = [
  createApi,
  getApi,
  deleteApi,
  setApiIpAllowlist,
  getApiIpAllowlist,
  listKeys,
  createKey,
  verifyKey,
  getKey,
  whoami,
  updateKey,
  updateCredits,
  deleteKey,
  rerollKey,
  migrateKeys,
  addPermissions,
  removePermissions,
  setPermissions,
  addRoles,
  removeRoles,
  setRoles,
  createPermission,
  getPermission,
  listPermissions,
  deletePermission,
  createRole,
  getRole,
  listRoles,
  deleteRole,
  setRolePermissions,
  createIdentity,
  getIdentity,
  listIdentities,
  updateIdentity,
  updateIdentityCredits,
  deleteIdentity,
  limit,
  multiLimit,
  setOverride,
  getOverride,
  listOverrides,
  deleteOverride,
  getVerifications,
  getRatelimits,
  getGatewayRequests,
  getUsage,
  createRootKey,
  listRootKeys,
  createWebhook,
  listWebhooks,
  updateWebhook,
  deleteWebhook,
  rotateWebhookSecret,
  testWebhook,
  listWebhookDeliveries,
  replayUsageReports,
  deleteRootKey,
  listApis,
  listRatelimitNamespaces,
  listRoutes,
  createRoute,
  getRoute,
  updateRoute,
  deleteRoute,
  setRoutePolicies,
  updateRoutePolicy,
  setRouteOpenApi,
  getRouteOpenApi,
  listPolicies,
  setPolicies,
  updatePolicy,
  listAuditLogs,
  ...PORTAL_ROOT_PROCEDURES,
] as const satisfies readonly AnyProcedure[];

export interface V2Options {
  /** How long a request's body may take to arrive (server.requestTimeoutMs). */
  requestTimeoutMs: number;
}

/** The /v2 RPC API: every procedure behind root-key authentication (liveness and readiness: health.ts). */
export async function v2Routes(app: FastifyInstance, options: V2Options): Promise<void> {
  bodyDeadline(app, options.requestTimeoutMs);

  await app.register(async (authenticated) => {
    authenticated.decorateRequest("caller", null as unknown as Caller);
    // Authentication runs first, before the body is read or validated: an unauthenticated caller learns nothing.
    authenticated.addHook("onRequest", async (request) => {
      request.caller = await app.services.rootKeys.authenticate(parseBearer(request.headers.authorization));
      request.keyId = request.caller.rootKeyId;
    });
    registerProcedures(authenticated, PROCEDURES);
  });
  await app.register(portalSessionRoutes);
}
