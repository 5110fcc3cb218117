import type { WindowCheck, WindowResult } from "../../storage/counter-interfaces.js";

/**
 * What a limit applies to. A key's or its identity's limit: configured (`id` rl_…) or given in keys.verifyKey's
 * request (`id` ""). A namespace's limit for one identifier: ratelimit.limit, multiLimit or a gateway route's.
 */
export type LimitSubject =
  | { kind: "key"; id: string; name: string; autoApply: boolean }
  | {
      kind: "namespace";
      /** The namespace as the request named it (a name or its `rlns_` id). */
      name: string;
      namespaceId: string;
      identifier: string;
      /** The override whose limit and duration `check` has, when one matched the identifier. */
      overrideId?: string;
    };

/** A limit to decide: what it applies to, and the check the counters make of it. */
export type LimitCheck = LimitSubject & { readonly check: WindowCheck };
export type KeyLimitCheck = Extract<LimitCheck, { kind: "key" }>;
export type NamespaceLimitCheck = Extract<LimitCheck, { kind: "namespace" }>;

/**
 * One limit decided for a request. Made once, by `decided`, from the check and the counters' result; the rate limit
 * headers, the analytics events and the wire answers all read it as it is.
 */
export type LimitDecision = LimitCheck & WindowResult;
export type KeyLimitDecision = KeyLimitCheck & WindowResult;
export type NamespaceLimitDecision = NamespaceLimitCheck & WindowResult;

/**
 * The decision of `limit`, the counters having answered `result`. Written out field by field: on the request path,
 * an object literal that adds properties after a spread costs microseconds in V8.
 */
export function decided(limit: KeyLimitCheck, result: WindowResult): KeyLimitDecision;
export function decided(limit: NamespaceLimitCheck, result: WindowResult): NamespaceLimitDecision;
export function decided(limit: LimitCheck, result: WindowResult): LimitDecision;
export function decided(limit: LimitCheck, { passed, remaining, resetAt }: WindowResult): LimitDecision {
  const check = limit.check;
  if (limit.kind === "key") {
    return { kind: "key", id: limit.id, name: limit.name, autoApply: limit.autoApply, check, passed, remaining, resetAt };
  }
  const { name, namespaceId, identifier, overrideId } = limit;
  return overrideId === undefined
    ? { kind: "namespace", name, namespaceId, identifier, check, passed, remaining, resetAt }
    : { kind: "namespace", name, namespaceId, identifier, overrideId, check, passed, remaining, resetAt };
}
