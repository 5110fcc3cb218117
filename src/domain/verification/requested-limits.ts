import { KeygateError } from "../../errors/keygate-error.js";
import { keyLimitBucket } from "../ratelimit/buckets.js";
import type { KeyLimitCheck } from "../ratelimit/limit-decision.js";
import type { KeyView } from "./key-view.js";
import type { RequestedLimit } from "./verification.js";

/**
 * The limits this verification applies: every autoApply limit of the key and its identity, plus each requested one
 * by name (with its cost), or as a custom limit of the key when the request gives limit and duration. A requested
 * name replaces an autoApply limit of the same name in its place.
 */
export function limitsToApply(view: KeyView, requested: readonly RequestedLimit[]): readonly KeyLimitCheck[] {
  if (requested.length === 0) return view.autoApplied;
  const applied = new Map<string, KeyLimitCheck>();
  for (const limit of view.autoApplied) applied.set(limit.name, limit);
  for (const request of requested) {
    const cost = request.cost ?? 1;
    if (request.limit !== undefined && request.duration !== undefined) {
      applied.set(request.name, {
        kind: "key",
        id: "",
        name: request.name,
        autoApply: false,
        check: { bucket: keyLimitBucket(view.keyId, request.name), limit: request.limit, durationMs: request.duration, cost },
      });
      continue;
    }
    const limit = view.namedLimits.get(request.name);
    if (!limit) {
      const where = view.identity
        ? `on key '${view.keyId}' nor on its identity '${view.identity.externalId}'`
        : `on key '${view.keyId}', which has no identity`;
      throw new KeygateError(
        "err:unkey:application:precondition_failed",
        `The rate limit '${request.name}' was requested but is not configured ${where}.`,
      );
    }
    applied.set(request.name, cost === limit.check.cost ? limit : withCost(limit, cost));
  }
  return [...applied.values()];
}

/** `limit` at another cost, written out rather than spread (docs/architecture.md#conventions). */
function withCost(limit: KeyLimitCheck, cost: number): KeyLimitCheck {
  const check = limit.check;
  return {
    kind: "key",
    id: limit.id,
    name: limit.name,
    autoApply: limit.autoApply,
    check: { bucket: check.bucket, limit: check.limit, durationMs: check.durationMs, cost },
  };
}
