import { defined } from "../lib/defined.js";
import type { PermissionQuery } from "./permissions/query.js";

/**
 * Who is calling the management API: an authenticated root key of one workspace. Domain services receive it and
 * ask for the permissions an operation needs at the point where they know the resource (e.g. a key's API).
 */
export interface Caller {
  readonly rootKeyId: string;
  readonly workspaceId: string;
  /** The root key's name, "" when it has none: how the audit log names the actor. */
  readonly rootKeyName: string;
  /** Who the audit log names instead of the root key: a portal session's external id. */
  readonly actorId?: string;
  /** Where the call came from, for the audit log; absent outside a request (the CLI, tests of the domain). */
  readonly context?: RequestContext;
  /** Throws 403 insufficient_permissions, naming what is missing, unless the root key satisfies `requirement`. */
  authorize(requirement: PermissionQuery): void;
  /** Whether the root key satisfies `requirement`, without throwing. */
  can(requirement: PermissionQuery): boolean;
  /** Whether any permission the root key holds (as written, `apis.` read as `api.`) passes `test`. */
  holdsAny(test: (permission: string) => boolean): boolean;
  /**
   * The resource ids the root key's permissions name explicitly for `resourceType` (`api.<id>.…` → `<id>`), wildcard
   * ids left out. Candidates only: ask can() whether one of them grants a given action.
   */
  namedResourceIds(resourceType: string): string[];
}

/** Who and where a management call comes from, as its audit entry records it. */
export interface RequestContext {
  /**
   * `root_key`: a /v2 call with a bearer root key; `dashboard`: a dashboard session (acting with its root key);
   * `portal`: a customer's portal session.
   */
  readonly actorType: "root_key" | "dashboard" | "portal";
  readonly requestId: string;
  readonly clientAddress: string;
  readonly userAgent: string;
}

/** `caller` for one request: the same permissions, with the request's context (a root key's caller is shared). */
export function callerInRequest(caller: Caller, context: RequestContext): Caller {
  return {
    rootKeyId: caller.rootKeyId,
    workspaceId: caller.workspaceId,
    rootKeyName: caller.rootKeyName,
    ...defined({ actorId: caller.actorId }),
    context,
    authorize: (requirement) => caller.authorize(requirement),
    can: (requirement) => caller.can(requirement),
    holdsAny: (test) => caller.holdsAny(test),
    namedResourceIds: (resourceType) => caller.namedResourceIds(resourceType),
  };
}
