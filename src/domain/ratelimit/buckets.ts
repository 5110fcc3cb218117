/**
 * The names of rate limit counters (`WindowCheck.bucket`). Every instance that shares the counters must build the
 * same name for the same limit, across versions too: a changed name would start every count afresh during an
 * upgrade. test/domain/ratelimit/buckets.test.ts pins the format.
 */

/** A key's named limit, or a custom limit given for the key in keys.verifyKey's request. */
export function keyLimitBucket(keyId: string, name: string): string {
  return `key:${keyId}:${name}`;
}

/** An identity's named limit: every key of the identity counts in it. */
export function identityLimitBucket(identityId: string, name: string): string {
  return `identity:${identityId}:${name}`;
}

/** One identifier in a rate limit namespace (ratelimit.limit, multiLimit, a gateway route's namespace limit). */
export function namespaceBucket(namespaceId: string, identifier: string): string {
  return `ns:${namespaceId}:${identifier}`;
}
