import { type Static, Type } from "typebox";
import type { PolicyChange, PolicyInput } from "../../../domain/routes/route-service.js";
import type { RouteView } from "../../../domain/routes/route-views.js";
import { invalidInput } from "../../../errors/keygate-error.js";
import { MatchExprSchema, POLICY_LIST, type PolicyBody, PolicyResponseSchema, PolicyRuleFields } from "../../../gateway/policy-schema.js";
import {
  ROUTE_METHODS,
  RouteEdgeFields,
  RouteForwardSchema,
  RouteNameSchema,
  RoutePrefixSchema,
  RouteUpstreamOrPoolSchema,
} from "../../../gateway/route-config.js";
import { Nullable, Strict, StringEnum } from "../../../http/schemas.js";
import { redactUrl } from "../../../lib/redact-url.js";
import type { PolicyRecord } from "../../../storage/route-records.js";

/** A route by its id or its name. */
export const RouteTarget = { route: Type.String({ minLength: 1, maxLength: 255 }) };

export const RouteMatchSchema = Strict({
  prefix: RoutePrefixSchema,
  methods: Type.Optional(Type.Array(StringEnum(ROUTE_METHODS), { minItems: 1, uniqueItems: true })),
});

/** A route's fields as a client writes them. */
export const RouteFields = {
  name: RouteNameSchema,
  match: RouteMatchSchema,
  upstream: RouteUpstreamOrPoolSchema,
  policies: Type.Optional(POLICY_LIST),
  forward: Type.Optional(RouteForwardSchema),
  timeoutMs: Type.Optional(Type.Integer({ minimum: 100, maximum: 3_600_000 })),
  ...RouteEdgeFields,
};

/** A route as the API answers it; the upstream's credentials, if it has any, masked. */
export const RouteResponse = Type.Object({
  id: Type.String(),
  name: Type.String(),
  /** `config`: from the configuration file, read-only here; `api`: managed through the API. */
  source: StringEnum(["config", "api"] as const),
  match: RouteMatchSchema,
  upstream: RouteUpstreamOrPoolSchema,
  policies: Type.Array(PolicyResponseSchema),
  forward: Type.Optional(RouteForwardSchema),
  timeoutMs: Type.Optional(Type.Integer()),
  openApi: Type.Optional(Type.Object({ uploadedAt: Type.Integer() })),
  ...RouteEdgeFields,
  createdAt: Type.Optional(Type.Integer()),
  updatedAt: Type.Optional(Type.Integer()),
  /** Each target of a pool as the instance that answered sees it. */
  upstreamHealth: Type.Optional(
    Type.Array(
      Type.Object({
        url: Type.String(),
        weight: Type.Integer(),
        healthy: Type.Boolean(),
        ejectedUntil: Type.Optional(Type.Integer()),
        failures: Type.Integer(),
        inFlight: Type.Integer(),
        probedHealthy: Type.Optional(Type.Boolean()),
        ejections: Type.Integer(),
      }),
    ),
  ),
});

/** A partial update of one policy (Unkey's gateway.updatePolicy fields). */
export const PolicyChangeFields = {
  policyId: Type.String({ minLength: 1, maxLength: 512 }),
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
  enabled: Type.Optional(Type.Boolean()),
  match: Type.Optional(Nullable(Type.Array(MatchExprSchema, { maxItems: 10 }))),
  ...PolicyRuleFields,
};

export function routeResponse(route: RouteView): Static<typeof RouteResponse> {
  const upstream = route.upstream;
  if (typeof upstream === "string") return upstream.includes("@") ? { ...route, upstream: redactUrl(upstream) } : route;
  const targets = upstream.targets.map((target) => (target.url.includes("@") ? { ...target, url: redactUrl(target.url) } : target));
  return { ...route, upstream: { ...upstream, targets } };
}

/** Policies as the domain takes them: Unkey's deprecated `identifier` becomes a one-entry `identifiers`. */
export function policiesFromWire(policies: readonly PolicyBody[], at = "body.policies"): PolicyInput[] {
  return policies.map((policy, index) => policyFromWire(policy, `${at}[${index}]`));
}

function policyFromWire(policy: PolicyBody, at: string): PolicyInput {
  const { ratelimit, ...rest } = policy;
  if (ratelimit === undefined) return rest;
  return { ...rest, ratelimit: ratelimitFromWire(ratelimit, `${at}.ratelimit`) };
}

export function ratelimitFromWire(ratelimit: NonNullable<PolicyBody["ratelimit"]>, at: string): NonNullable<PolicyRecord["ratelimit"]> {
  const { identifier, identifiers, ...rest } = ratelimit;
  if ((identifier === undefined) === (identifiers === undefined)) {
    throw invalidInput([{ location: at, message: "must set exactly one of identifiers or identifier (deprecated)" }]);
  }
  return { ...rest, identifiers: identifiers ?? [identifier as NonNullable<typeof identifier>] };
}

/** A policy change as the domain takes it. */
export function policyChangeFromWire(body: Omit<Static<ReturnType<typeof Strict<typeof PolicyChangeFields>>>, "policyId">): PolicyChange {
  const { ratelimit, ...rest } = body;
  return ratelimit === undefined ? rest : { ...rest, ratelimit: ratelimitFromWire(ratelimit, "body.ratelimit") };
}
