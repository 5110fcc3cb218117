import { type Static, Type } from "typebox";
import type { LimitRequest, NamespaceLimitDecision, OverrideView } from "../../../domain/ratelimit/ratelimit-service.js";
import { Strict } from "../../../http/schemas.js";

/**
 * Fields and shapes shared by the ratelimit procedures (docs/decisions.md#rate-limits and #overrides), and the
 * translation between their wire names (`duration`, `reset`, `success`) and the domain's (`durationMs`, ...).
 * Every procedure is served under both spellings, `ratelimit.<name>` and `ratelimits.<name>` (its `aliases`).
 * limit and multiLimit are on the request path: their objects are built without spreads
 * (docs/architecture.md#conventions).
 */

/** A namespace name, or its `rlns_` id. Up to 512 characters, as the official schemas allow. */
export const NamespaceField = Type.String({ minLength: 1, maxLength: 512 });
export const IdentifierField = Type.String({ minLength: 1, maxLength: 512 });
/** Milliseconds: one second to 30 days. */
export const DurationField = Type.Integer({ minimum: 1_000, maximum: 2_592_000_000 });

export const LimitBody = Strict({
  namespace: NamespaceField,
  identifier: IdentifierField,
  limit: Type.Integer({ minimum: 1, maximum: 1_000_000 }),
  duration: DurationField,
  cost: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000, default: 1 })),
});

/**
 * An override as getOverride and listOverrides answer it: exactly the official record's fields (its schema allows
 * no others), so the namespace id and creation time the store keeps are not sent.
 */
export const OverrideData = Type.Object({
  overrideId: Type.String(),
  identifier: Type.String(),
  limit: Type.Integer(),
  duration: Type.Integer(),
});

export function toLimitRequest(body: Static<typeof LimitBody>): LimitRequest {
  const request: LimitRequest = { namespace: body.namespace, identifier: body.identifier, limit: body.limit, durationMs: body.duration };
  if (body.cost !== undefined) request.cost = body.cost;
  return request;
}

export interface LimitFields {
  limit: number;
  remaining: number;
  reset: number;
  overrideId?: string;
}

/**
 * `answer` (a fresh object of the caller's) with the fields limit and multiLimit answer for one decision added
 * after its own; overrideId only when an override applied. Assigned rather than spread, in the order of the answer.
 */
export function withLimitFields<Answer extends object>(answer: Answer, decision: NamespaceLimitDecision): Answer & LimitFields {
  const fields = answer as Answer & LimitFields;
  fields.limit = decision.check.limit;
  fields.remaining = decision.remaining;
  fields.reset = decision.resetAt;
  if (decision.overrideId !== undefined) fields.overrideId = decision.overrideId;
  return fields;
}

export function overrideData(override: OverrideView): Static<typeof OverrideData> {
  return {
    overrideId: override.overrideId,
    identifier: override.identifier,
    limit: override.limit,
    duration: override.durationMs,
  };
}
