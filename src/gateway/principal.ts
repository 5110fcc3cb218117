import type { KeyView } from "../domain/verification/key-view.js";

/** What the principal is made of: the verified key, and its balance after the request. */
export interface VerifiedKey {
  key: Pick<KeyView, "keyId" | "identity" | "shown">;
  credits?: number;
}

/**
 * The principal: who a verified request is, as the upstream is told in the route's `forward.principal` header
 * (JSON) and as rate limit policies read it (`principalField`). `subject` is the key's identity (its external id)
 * when it has one, the key otherwise.
 */
export interface Principal {
  subject: string;
  keyId: string;
  identityId?: string;
  externalId?: string;
  meta?: Record<string, unknown>;
  /** The key's credits after this request, when it has a balance. */
  credits?: number;
}

export function principalOf(view: VerifiedKey["key"], credits?: number): Principal {
  const principal: Principal = { subject: view.identity?.externalId ?? view.keyId, keyId: view.keyId };
  if (view.identity) {
    principal.identityId = view.identity.id;
    principal.externalId = view.identity.externalId;
  }
  if (view.shown.meta !== undefined) principal.meta = view.shown.meta;
  if (credits !== undefined) principal.credits = credits;
  return principal;
}

/** The principal header's value for a verified request. */
export function principalHeader(verification: VerifiedKey): string {
  return JSON.stringify(principalOf(verification.key, verification.credits));
}

/**
 * A field of a key's principal, by its dotted path (`meta.plan`, `externalId`), as text: a string as it is, another
 * scalar as JSON; undefined when absent or not a scalar.
 */
export function principalValue(view: VerifiedKey["key"], path: readonly string[]): string | undefined {
  let value: unknown = principalOf(view);
  for (const step of path) {
    if (value === null || typeof value !== "object" || !Object.hasOwn(value, step)) return undefined;
    value = (value as Record<string, unknown>)[step];
  }
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  return undefined;
}
