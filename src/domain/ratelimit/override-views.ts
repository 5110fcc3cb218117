import { KeygateError } from "../../errors/keygate-error.js";
import type { RatelimitOverrideRecord } from "../../storage/records.js";

/** An override as the ratelimit.*Override procedures show it. */
export interface OverrideView {
  overrideId: string;
  namespaceId: string;
  identifier: string;
  limit: number;
  durationMs: number;
  createdAt: number;
}

export function overrideView(override: RatelimitOverrideRecord): OverrideView {
  return {
    overrideId: override.id,
    namespaceId: override.namespaceId,
    identifier: override.identifier,
    limit: override.limit,
    durationMs: override.durationMs,
    createdAt: override.createdAt,
  };
}

export function overrideNotFound(identifier: string, namespace: string): KeygateError {
  return new KeygateError(
    "err:unkey:data:ratelimit_override_not_found",
    `There is no override for '${identifier}' in the namespace '${namespace}'.`,
  );
}
