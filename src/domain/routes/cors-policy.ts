import { RE2JS } from "re2js";
import type { CorsPolicy } from "../../storage/route-records.js";
import type { Problems } from "./problems.js";

/**
 * A cors policy compiled: which origins it allows, and its headers joined once. keygate's own kind (Unkey's gateway
 * has none); the gateway answers preflights with it and adds its headers to every answer (docs/gateway.md#cors).
 */
export interface CompiledCorsRule {
  /** Whether a request's `Origin` is allowed. */
  allows: (origin: string) => boolean;
  /** `allowOrigins: "*"` without credentials: the answer says `*` rather than the origin. */
  anyOrigin: boolean;
  credentials: boolean;
  /** `Access-Control-Allow-Methods`; absent: the route's methods (all when it lists none). */
  allowMethods?: string;
  /** `Access-Control-Allow-Headers`; absent: those the preflight asks for. */
  allowHeaders?: string;
  /** `Access-Control-Expose-Headers`, keygate's own headers included. */
  exposeHeaders: string;
  /** `Access-Control-Max-Age`. */
  maxAge?: string;
}

/** The headers keygate itself adds to answers, which a page may always read: the request id and the rate limits. */
export const KEYGATE_EXPOSED_HEADERS = [
  "x-request-id",
  "ratelimit",
  "ratelimit-policy",
  "x-ratelimit-limit",
  "x-ratelimit-remaining",
  "x-ratelimit-reset",
  "retry-after",
] as const;

/** Compiles a cors policy; problems pushed with their field under `at` (`policies[0].cors`). */
export function compileCors(policy: CorsPolicy, at: string, problems: Problems): CompiledCorsRule | undefined {
  const before = problems.length;
  let allows: (origin: string) => boolean = () => true;
  if (policy.allowOrigins !== "*") {
    const exact = new Set<string>();
    const patterns: RE2JS[] = [];
    policy.allowOrigins.forEach((origin, index) => {
      const where = `${at}.allowOrigins[${index}]`;
      if ((origin.exact === undefined) === (origin.regex === undefined)) {
        problems.push({ at: where, message: "must set exactly one of exact or regex" });
      } else if (origin.exact !== undefined) {
        if (origin.exact.endsWith("/") || origin.exact === "*") {
          problems.push({ at: `${where}.exact`, message: 'must be an origin (scheme://host[:port], no path), or allowOrigins "*"' });
        }
        exact.add(origin.exact.toLowerCase());
      } else {
        try {
          // Case-insensitive: scheme and host are; a browser sends them in lower case anyway.
          patterns.push(RE2JS.compile(origin.regex as string, RE2JS.CASE_INSENSITIVE));
        } catch (error) {
          problems.push({ at: `${where}.regex`, message: `is not a valid RE2 regular expression: ${(error as Error).message}` });
        }
      }
    });
    // A regex must match the whole origin: one that matched anywhere would let `https://example.com.evil.test` in.
    allows = (origin) => exact.has(origin.toLowerCase()) || patterns.some((pattern) => pattern.matcher(origin).matches());
  }
  if (problems.length > before) return undefined;
  const credentials = policy.allowCredentials === true;
  const expose = new Set<string>(KEYGATE_EXPOSED_HEADERS);
  for (const header of policy.exposeHeaders ?? []) expose.add(header.toLowerCase());
  const compiled: CompiledCorsRule = {
    allows,
    anyOrigin: policy.allowOrigins === "*" && !credentials,
    credentials,
    exposeHeaders: [...expose].join(", "),
  };
  if (policy.allowMethods !== undefined) compiled.allowMethods = policy.allowMethods.join(", ");
  if (policy.allowHeaders !== undefined) compiled.allowHeaders = policy.allowHeaders.join(", ");
  if (policy.maxAgeSeconds !== undefined) compiled.maxAge = String(policy.maxAgeSeconds);
  return compiled;
}
