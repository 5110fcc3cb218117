import { KeygateError } from "../../errors/keygate-error.js";
import type { PortalScope } from "../../storage/portal-records.js";
import type { Caller } from "../caller.js";
import { PermissionSet } from "../permissions/permission-set.js";
import type { PermissionQuery } from "../permissions/query.js";
import { allOf } from "../permissions/query.js";
import { requireApi } from "../root-keys/permissions.js";

/** The root-key actions on an API that a scope stands for: createSession asks the operator's root key for them, and a session holds exactly them. */
const SCOPE_ACTIONS: Record<PortalScope, readonly ("read_key" | "read_api" | "create_key" | "read_analytics")[]> = {
  "keys:read": ["read_key", "read_api"],
  "keys:create": ["create_key"],
  "keys:reroll": ["create_key"],
  "analytics:read": ["read_analytics"],
};

/** What a root key must hold on `apiId` to mint a session with `scope`. */
export function scopeRequirement(scope: PortalScope, apiId: string): PermissionQuery {
  return allOf(...SCOPE_ACTIONS[scope].map((action) => requireApi(action, apiId)));
}

/**
 * A customer's session as a Caller: it holds, on the portal's APIs only, the API permissions its scopes stand for
 * (and encrypt_key with a key-writing scope, so a recoverable key stays recoverable when rerolled), and nothing
 * else. The key and analytics services check it as they check a root key; which keys are the customer's is the
 * portal's own check, made before.
 */
export class PortalCaller implements Caller {
  readonly rootKeyId: string;
  readonly workspaceId: string;
  readonly rootKeyName = "";
  /** The audit log names the customer, by external id. */
  readonly actorId: string;
  private readonly held: readonly string[];
  private readonly permissions: PermissionSet;

  constructor(
    session: { sessionId: string; workspaceId: string; externalId: string },
    scopes: readonly PortalScope[],
    apiIds: readonly string[],
  ) {
    this.rootKeyId = session.sessionId;
    this.actorId = session.externalId;
    this.workspaceId = session.workspaceId;
    const held = new Set<string>();
    for (const scope of scopes)
      for (const apiId of apiIds) {
        for (const action of SCOPE_ACTIONS[scope]) held.add(`api.${apiId}.${action}`);
        if (scope === "keys:create" || scope === "keys:reroll") held.add(`api.${apiId}.encrypt_key`);
      }
    this.held = [...held];
    this.permissions = new PermissionSet(this.held);
  }

  authorize(requirement: PermissionQuery): void {
    const missing = this.permissions.explainMissing(requirement);
    if (missing !== undefined)
      throw new KeygateError(
        "err:unkey:authorization:insufficient_permissions",
        `The portal session's scopes do not allow this. ${missing}.`,
      );
  }

  can(requirement: PermissionQuery): boolean {
    return this.permissions.satisfies(requirement);
  }

  holdsAny(test: (permission: string) => boolean): boolean {
    return this.held.some(test);
  }

  namedResourceIds(resourceType: string): string[] {
    return resourceType === "api" ? [...new Set(this.held.map((permission) => permission.split(".")[1] as string))] : [];
  }
}
