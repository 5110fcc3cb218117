import { type Static, Type } from "typebox";
import { describedPattern } from "../http/patterns.js";
import { Strict, StringEnum } from "../http/schemas.js";
import { HTTP_METHODS } from "../storage/route-records.js";

/**
 * Gateway policies and routes as the API takes and answers them. The policy shape is Unkey's gateway `Policy` (field
 * names, bounds and enums), so a team moving from Unkey's gateway can reuse its JSON; keygate's additions are marked.
 * What a schema cannot say (exactly one of several fields, an RE2 pattern that compiles) is checked when the policy
 * is compiled, with the field named the same way.
 */

const NAME = Type.String({ minLength: 1, maxLength: 256 });
const HEADER_NAME = Type.String({
  minLength: 1,
  maxLength: 256,
  pattern: describedPattern("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$", "be an HTTP header name (letters, digits and ! # $ % & ' * + . ^ _ ` | ~ -)"),
});
const TEXT = Type.String({ minLength: 1, maxLength: 1024 });
const EMPTY = Strict({});

export const StringMatchSchema = Strict({
  exact: Type.Optional(TEXT),
  prefix: Type.Optional(TEXT),
  /** RE2 syntax; matches anywhere in the input. */
  regex: Type.Optional(TEXT),
  ignoreCase: Type.Optional(Type.Boolean()),
});

const FieldMatchSchema = Strict({
  name: NAME,
  present: Type.Optional(Type.Literal(true)),
  value: Type.Optional(StringMatchSchema),
});

export const MatchExprSchema = Strict({
  path: Type.Optional(Strict({ path: StringMatchSchema })),
  method: Type.Optional(Strict({ methods: Type.Array(StringEnum(HTTP_METHODS), { minItems: 1, uniqueItems: true }) })),
  header: Type.Optional(FieldMatchSchema),
  queryParam: Type.Optional(FieldMatchSchema),
});

const KeyLocationSchema = Strict({
  bearer: Type.Optional(EMPTY),
  header: Type.Optional(
    Strict({
      name: HEADER_NAME,
      stripPrefix: Type.Optional(Type.String({ maxLength: 256 })),
      /** keygate: a scheme the value must start with (`Token <key>`, any case). */
      scheme: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    }),
  ),
  queryParam: Type.Optional(Strict({ name: NAME })),
});

const KeyauthPolicySchema = Strict({
  keyspaces: Type.Array(Type.String({ minLength: 1, maxLength: 256 }), { minItems: 1, maxItems: 5 }),
  locations: Type.Optional(Type.Array(KeyLocationSchema, { minItems: 1, maxItems: 5 })),
  permissionQuery: Type.Optional(Type.String({ minLength: 1, maxLength: 1000 })),
  ratelimits: Type.Optional(
    Type.Array(
      Strict({
        name: NAME,
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
        duration: Type.Optional(Type.Integer({ minimum: 1_000, maximum: 2_592_000_000 })),
        cost: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000 })),
      }),
      { maxItems: 10 },
    ),
  ),
  credits: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000_000 })),
});

const RatelimitIdentifierSchema = Strict({
  remoteIp: Type.Optional(EMPTY),
  header: Type.Optional(Strict({ name: HEADER_NAME })),
  authenticatedSubject: Type.Optional(EMPTY),
  path: Type.Optional(EMPTY),
  principalField: Type.Optional(Strict({ path: Type.String({ minLength: 1, maxLength: 512 }) })),
});

const RatelimitPolicySchema = Strict({
  limit: Type.Integer({ minimum: 1, maximum: 1_000_000 }),
  windowMs: Type.Integer({ minimum: 1_000, maximum: 2_592_000_000 }),
  /** Unkey's deprecated single identifier: accepted in place of a one-entry `identifiers`. */
  identifier: Type.Optional(RatelimitIdentifierSchema),
  identifiers: Type.Optional(Type.Array(RatelimitIdentifierSchema, { minItems: 1, maxItems: 5 })),
  /** keygate: units each request takes. */
  cost: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000 })),
  /** keygate: the rate limit namespace to count in (its overrides apply). */
  namespace: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
});

const IP_LIST = Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { minItems: 1, maxItems: 1_000 });

const FirewallPolicySchema = Strict({
  action: StringEnum(["ACTION_DENY"] as const),
  /** keygate: deny only clients outside these addresses and CIDR ranges. */
  ipAllow: Type.Optional(IP_LIST),
  /** keygate: deny only clients within these. */
  ipDeny: Type.Optional(IP_LIST),
});

const LoggingPolicySchema = Strict({
  requestHeaders: Type.Optional(Type.Boolean()),
  responseHeaders: Type.Optional(Type.Boolean()),
  requestBody: Type.Optional(Type.Boolean()),
  responseBody: Type.Optional(Type.Boolean()),
  query: Type.Optional(Type.Boolean()),
});

const CorsOriginSchema = Strict({
  exact: Type.Optional(Type.String({ minLength: 1, maxLength: 1024 })),
  /** RE2 syntax; must match the whole origin (`https://[a-z0-9-]+\\.example\\.com`). */
  regex: Type.Optional(TEXT),
});

/** keygate's own kind (Unkey's gateway has none): CORS answered and added at the gateway. */
export const CorsPolicySchema = Strict({
  allowOrigins: Type.Union([Type.Literal("*"), Type.Array(CorsOriginSchema, { minItems: 1, maxItems: 100 })]),
  allowMethods: Type.Optional(Type.Array(StringEnum(HTTP_METHODS), { minItems: 1, uniqueItems: true })),
  allowHeaders: Type.Optional(Type.Array(HEADER_NAME, { minItems: 1, maxItems: 100 })),
  exposeHeaders: Type.Optional(Type.Array(HEADER_NAME, { minItems: 1, maxItems: 100 })),
  allowCredentials: Type.Optional(Type.Boolean()),
  maxAgeSeconds: Type.Optional(Type.Integer({ minimum: 0, maximum: 86_400 })),
});

/** The six rules a policy has exactly one of. */
export const PolicyRuleFields = {
  keyauth: Type.Optional(KeyauthPolicySchema),
  ratelimit: Type.Optional(RatelimitPolicySchema),
  firewall: Type.Optional(FirewallPolicySchema),
  openapi: Type.Optional(EMPTY),
  logging: Type.Optional(LoggingPolicySchema),
  /** keygate: CORS. */
  cors: Type.Optional(CorsPolicySchema),
};

/** A policy as a client writes it. */
export const PolicySchema = Strict({
  name: NAME,
  enabled: Type.Boolean(),
  match: Type.Optional(Type.Array(MatchExprSchema, { maxItems: 10 })),
  ...PolicyRuleFields,
});

/** A stored policy as the API answers it (identifiers always as `identifiers`). */
export const PolicyResponseSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  enabled: Type.Boolean(),
  match: Type.Optional(Type.Array(MatchExprSchema)),
  ...PolicyRuleFields,
});

export const POLICY_LIST = Type.Array(PolicySchema, { maxItems: 50 });

export type PolicyBody = Static<typeof PolicySchema>;
