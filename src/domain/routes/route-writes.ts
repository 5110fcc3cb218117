import { KeygateError } from "../../errors/keygate-error.js";
import { newId } from "../../lib/ids.js";
import type { StoredRouteTable } from "../../storage/route-interfaces.js";
import type { PolicyRecord, RouteRecord } from "../../storage/route-records.js";
import type { AuditAction, AuditEvent } from "../audit/audit-trail.js";
import { changesOf } from "../audit/audit-trail.js";
import type { DecisionRoute, RouteCompileRules, RouteDefinition } from "./route-compiler.js";
import type { PolicyInput } from "./route-service.js";

// What a write does to the stored route table: policies given ids, a route swapped for its new version, and the
// clashes no write may leave behind.

export function withId(policy: PolicyInput, now: number): PolicyRecord {
  return { id: newId("pol", now), ...policy };
}

/** The new policies, each keeping the id of the current policy of its name. */
export function keepingIds(current: readonly PolicyRecord[], next: readonly PolicyInput[], now: number): PolicyRecord[] {
  const ids = new Map(current.map((policy) => [policy.name, policy.id]));
  return next.map((policy) => ({ id: ids.get(policy.name) ?? newId("pol", now), ...policy }));
}

/** A route's optional fields a write may give; null (in a change) removes one. */
const OPTIONAL_FIELDS = ["forward", "timeoutMs", "stripPrefix", "rewrite", "host", "bodyLimit"] as const;
export type OptionalRouteField = (typeof OPTIONAL_FIELDS)[number];

/** Sets each optional field `input` gives on `route`, and removes each it gives as null. */
export function setOptionalFields(route: RouteRecord, input: { [F in OptionalRouteField]?: RouteRecord[F] | null }): void {
  for (const field of OPTIONAL_FIELDS) {
    const value = input[field];
    if (value === null) delete route[field];
    else if (value !== undefined) (route as Record<OptionalRouteField, unknown>)[field] = value;
  }
}

export function swapped(table: StoredRouteTable, current: RouteRecord, next: RouteRecord): RouteRecord[] {
  const stale = () => new KeygateError("err:keygate:data:route_not_found", `The route '${current.name}' was deleted meanwhile.`);
  if (!table.routes.some((route) => route.id === current.id)) throw stale();
  return table.routes.map((route) => (route.id === current.id ? next : route));
}

export function definitionOf(route: RouteRecord): RouteDefinition {
  const { createdAt: _createdAt, updatedAt: _updatedAt, ...definition } = route;
  return { ...definition, source: "api" };
}

/** A clash among the stored routes, or with the configuration file's: the first found, as a 409. */
export function clashIn(
  routes: readonly RouteRecord[],
  config: readonly DecisionRoute[],
  rules: RouteCompileRules,
): KeygateError | undefined {
  const seen: { name: string; prefix: string; methods: ReadonlySet<string> | undefined }[] = config.map((route) => ({
    name: route.name,
    prefix: route.prefix,
    methods: route.methods,
  }));
  for (const route of routes) {
    const prefix = rules.samePath(route.match.prefix.replace(/\/+$/, ""));
    const methods = route.match.methods ? new Set<string>(route.match.methods) : undefined;
    for (const other of seen) {
      if (other.name === route.name) return conflict(`A route named '${route.name}' exists already.`);
      const shared = !methods || !other.methods || [...methods].some((method) => other.methods?.has(method));
      if (other.prefix === prefix && shared) {
        return conflict(
          `The route '${other.name}' already takes the prefix '${route.match.prefix}' for these methods; give this route other methods or another prefix.`,
        );
      }
    }
    seen.push({ name: route.name, prefix, methods });
  }
  return undefined;
}

function conflict(detail: string): KeygateError {
  return new KeygateError("err:keygate:data:route_conflict", detail);
}

/** A route's fields as the wire names them, for its audit entry; credentials in an upstream URL are masked. */
function auditFields(route: RouteRecord | null): Record<string, unknown> {
  if (!route) return {};
  const { id: _id, workspaceId: _workspace, createdAt: _created, updatedAt: _updated, ...fields } = route;
  return JSON.parse(JSON.stringify(fields).replace(/\/\/[^/@"\s]*@/g, "//***@")) as Record<string, unknown>;
}

/** The audit event of a route written (`before` null: created; `after` null: deleted). */
export function routeAudit(action: AuditAction, before: RouteRecord | null, after: RouteRecord | null): AuditEvent {
  const route = (after ?? before) as RouteRecord;
  const old = auditFields(before);
  const now = auditFields(after);
  return {
    action,
    description: `${action === "route.create" ? "Created" : action === "route.delete" ? "Deleted" : "Changed"} route ${route.id} (${route.name})`,
    resources: [{ type: "route", id: route.id }],
    changes: changesOf(old, now, [...new Set([...Object.keys(old), ...Object.keys(now)])]),
  };
}
