import type { LimitRequest } from "../domain/ratelimit/ratelimit-service.js";
import type { CompiledRatelimit, IdentifierSource } from "../domain/routes/policy-compiler.js";
import type { KeyView } from "../domain/verification/key-view.js";
import { rateLimitedAddress } from "../lib/address-prefix.js";
import type { AccessRequest } from "./gateway-request.js";
import { principalValue } from "./principal.js";

/**
 * One rate limit policy's check for this request: its namespace, and the identifier its sources make. The client's
 * address counts as `rateLimitedAddress` makes it: IPv4 whole, IPv6 by its first `ipv6PrefixLength` bits.
 */
export function limitRequest(
  policy: CompiledRatelimit,
  request: AccessRequest,
  ip: () => string,
  view: KeyView | undefined,
  ipv6PrefixLength: number,
): LimitRequest {
  const address = () => rateLimitedAddress(ip(), ipv6PrefixLength);
  const values = policy.identifiers.map((source) => identifierValue(source, request, address, view));
  return {
    namespace: policy.namespace,
    // One source counts under its value as it is; several under all of them, in order, as a JSON array.
    identifier: values.length === 1 ? (values[0] as string) : JSON.stringify(values),
    limit: policy.limit,
    durationMs: policy.durationMs,
    cost: policy.cost,
  };
}

/**
 * What one identifier source reads from this request. A key without an identity is its own subject; what cannot be
 * read (no such header, no key, no such principal field) counts in one shared bucket, "-", rather than in none.
 */
function identifierValue(source: IdentifierSource, request: AccessRequest, ip: () => string, view: KeyView | undefined): string {
  switch (source.kind) {
    case "remoteIp":
      return ip();
    case "path":
      return request.path;
    case "keyId":
      return view?.keyId ?? UNKNOWN;
    case "subject":
      return view ? (view.identity?.id ?? view.keyId) : UNKNOWN;
    case "principalField": {
      const value = view && principalValue(view, source.path);
      return value === undefined ? UNKNOWN : value.slice(0, 255);
    }
    case "header": {
      const value = request.raw.headers[source.header];
      const text = (Array.isArray(value) ? value[0] : value)?.trim();
      return text ? text.slice(0, 255) : UNKNOWN;
    }
  }
}

const UNKNOWN = "-";
