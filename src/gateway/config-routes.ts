import type { DecisionOnlyDefinition, RouteDefinition } from "../domain/routes/route-compiler.js";
import type { KeyLocation, PolicyRecord, RatelimitIdentifier } from "../storage/route-records.js";
import type { RouteConfig } from "./route-config.js";

/**
 * A route of the configuration file in the shape of a stored one: its API, key, permissions, named limits and
 * credits become one keyauth policy, each namespace limit a rate limit policy counting in that namespace, and
 * `analytics.headers` a logging policy, `cors` a cors policy (first); a route without `apiId` has no keyauth policy (a public route). Ids are fixed by the route's name.
 */
export function configRouteDefinition(config: RouteConfig): RouteDefinition | DecisionOnlyDefinition {
  const policies: PolicyRecord[] = [];
  const id = (name: string) => `config_policy_${config.name}_${name}`;
  // First, so that its headers are on every answer, a refusal of a later policy included.
  if (config.cors !== undefined) policies.push({ id: id("cors"), name: "cors", enabled: true, cors: config.cors });
  if (config.apiId !== undefined) {
    const keyauth: NonNullable<PolicyRecord["keyauth"]> = { keyspaces: [config.apiId], locations: [keyLocation(config.key)] };
    if (config.permissions !== undefined) keyauth.permissionQuery = config.permissions;
    if (config.ratelimits !== undefined) keyauth.ratelimits = config.ratelimits;
    if (config.credits !== undefined) keyauth.credits = config.credits.cost;
    policies.push({ id: id("keyauth"), name: "keyauth", enabled: true, keyauth });
  }
  (config.namespaceLimits ?? []).forEach((limit, index) => {
    const name = `namespaceLimits[${index}]`;
    policies.push({
      id: id(name),
      name,
      enabled: true,
      ratelimit: {
        limit: limit.limit,
        windowMs: limit.duration,
        cost: limit.cost,
        namespace: limit.namespace,
        identifiers: [identifier(limit.identifier)],
      },
    });
  });
  if (config.analytics?.headers) {
    policies.push({ id: id("analytics"), name: "analytics", enabled: true, logging: { requestHeaders: true, responseHeaders: true } });
  }
  const definition: DecisionOnlyDefinition & Pick<Partial<RouteDefinition>, "upstream"> = {
    source: "config",
    id: `config_route_${config.name}`,
    name: config.name,
    match: config.match,
    policies,
  };
  // Without an upstream, a decision-only route (the forward-auth door's alone).
  if (config.upstream !== undefined) definition.upstream = config.upstream;
  if (config.forward !== undefined) definition.forward = config.forward;
  if (config.timeoutMs !== undefined) definition.timeoutMs = config.timeoutMs;
  if (config.workspaceId !== undefined) definition.workspaceId = config.workspaceId;
  if (config.stripPrefix !== undefined) definition.stripPrefix = config.stripPrefix;
  if (config.rewrite !== undefined) definition.rewrite = config.rewrite;
  if (config.host !== undefined) definition.host = config.host;
  if (config.bodyLimit !== undefined) definition.bodyLimit = config.bodyLimit;
  return definition;
}

/** Where a configuration route (or a Fastify route under the plugin) reads its key, as a keyauth policy's location. */
export function keyLocation(key: RouteConfig["key"]): KeyLocation {
  if (key?.query !== undefined) return { queryParam: { name: key.query } };
  const header = key?.header ?? "authorization";
  const scheme = key === undefined ? "Bearer" : key.scheme;
  if (header.toLowerCase() === "authorization" && scheme?.toLowerCase() === "bearer") return { bearer: {} };
  return { header: scheme === undefined ? { name: header } : { name: header, scheme } };
}

/** `key`, `identity`, `ip` or `header:<name>`, as a rate limit identifier source. */
function identifier(text: string): RatelimitIdentifier {
  if (text.startsWith("header:")) return { header: { name: text.slice("header:".length) } };
  if (text === "ip") return { remoteIp: {} };
  if (text === "identity") return { authenticatedSubject: {} };
  return { principalField: { path: "keyId" } };
}
