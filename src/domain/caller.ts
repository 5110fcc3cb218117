import type { PermissionQuery } from "./permissions/query.js";

/**
 * Who is calling the management API: an authenticated root key of one workspace. Domain services receive it and
 * ask for the permissions an operation needs at the point where they know the resource (e.g. a key's API).
 */
export interface Caller {
  readonly rootKeyId: string;
  readonly workspaceId: string;
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
