import type { BodyOf, DataOf } from "../api.js";
import { numberOr, splitList } from "../ui.js";
import { type CorsDraft, corsBody, corsDraft, newCors } from "./cors-draft.js";

/**
 * A route's policies as the Gateway page edits them: plain form values (numbers as typed, lists as text), turned
 * into the body of keygate.setRoutePolicies only when saved, so that the API's 400 names the field that is wrong.
 */

export type RouteView = DataOf<"keygate.listRoutes">[number];
export type PolicyView = RouteView["policies"][number];
export type PolicyBody = BodyOf<"keygate.setRoutePolicies">["policies"][number];
type MatchBody = NonNullable<PolicyBody["match"]>[number];
type StringMatchBody = NonNullable<MatchBody["path"]>["path"];
type KeyauthBody = NonNullable<PolicyBody["keyauth"]>;
type LocationBody = NonNullable<KeyauthBody["locations"]>[number];
type RatelimitBody = NonNullable<PolicyBody["ratelimit"]>;
type IdentifierBody = NonNullable<RatelimitBody["identifiers"]>[number];
type LoggingBody = NonNullable<PolicyBody["logging"]>;
export type Method = NonNullable<MatchBody["method"]>["methods"][number];

export const METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const satisfies readonly Method[];
export const POLICY_KINDS = ["keyauth", "ratelimit", "firewall", "openapi", "logging", "cors"] as const;
export type PolicyKind = (typeof POLICY_KINDS)[number];

export type StringMode = "exact" | "prefix" | "regex";

/** One match expression: a path, the method, or a header or query parameter (present, or its value). */
export interface MatchDraft {
  on: "path" | "method" | "header" | "queryParam";
  /** The header's or query parameter's name. */
  name: string;
  /** `present` only for a header or query parameter. */
  test: "present" | StringMode;
  text: string;
  ignoreCase: boolean;
  methods: Method[];
}

export interface LocationDraft {
  from: "bearer" | "header" | "queryParam";
  name: string;
  scheme: string;
  stripPrefix: string;
}

export const IDENTIFIER_SOURCES = ["remoteIp", "header", "authenticatedSubject", "path", "principalField"] as const;

export interface IdentifierDraft {
  source: (typeof IDENTIFIER_SOURCES)[number];
  /** The header's name, or the principal field's dotted path. */
  value: string;
}

export const LOGGED = ["requestHeaders", "responseHeaders", "requestBody", "responseBody", "query"] as const;

export type RuleDraft =
  | {
      kind: "keyauth";
      keyspaces: string[];
      locations: LocationDraft[];
      permissionQuery: string;
      credits: string;
      /** The key's named limits the policy applies: kept as they are (not edited here). */
      ratelimits?: KeyauthBody["ratelimits"];
    }
  | { kind: "ratelimit"; limit: string; windowMs: string; identifiers: IdentifierDraft[]; cost: string; namespace: string }
  | { kind: "firewall"; ipAllow: string; ipDeny: string }
  | { kind: "openapi" }
  | ({ kind: "logging" } & Record<(typeof LOGGED)[number], boolean>)
  | CorsDraft;

export interface PolicyDraft {
  /** Keeps a policy's controls its own while the list is reordered. */
  uid: number;
  name: string;
  enabled: boolean;
  match: MatchDraft[];
  rule: RuleDraft;
}

let uids = 0;

export function newMatch(): MatchDraft {
  return { on: "path", name: "", test: "prefix", text: "", ignoreCase: false, methods: [] };
}

export function newPolicy(kind: PolicyKind, taken: readonly string[]): PolicyDraft {
  let name: string = kind;
  for (let n = 2; taken.includes(name); n++) name = `${kind}-${n}`;
  return { uid: ++uids, name, enabled: true, match: [], rule: newRule(kind) };
}

function newRule(kind: PolicyKind): RuleDraft {
  switch (kind) {
    case "keyauth":
      return { kind, keyspaces: [], locations: [], permissionQuery: "", credits: "" };
    case "ratelimit":
      return { kind, limit: "100", windowMs: "60000", identifiers: [{ source: "remoteIp", value: "" }], cost: "", namespace: "" };
    case "firewall":
      return { kind, ipAllow: "", ipDeny: "" };
    case "openapi":
      return { kind };
    case "logging":
      return { kind, requestHeaders: true, responseHeaders: true, requestBody: false, responseBody: false, query: false };
    case "cors":
      return newCors();
  }
}

export function kindOf(policy: Pick<PolicyView, PolicyKind>): PolicyKind | undefined {
  return POLICY_KINDS.find((kind) => policy[kind] !== undefined);
}

/** The drafts of policies as the API shows them. */
export function draftsOf(policies: readonly PolicyView[]): PolicyDraft[] {
  return policies.map((policy) => ({
    uid: ++uids,
    name: policy.name,
    enabled: policy.enabled,
    match: (policy.match ?? []).map(matchDraft),
    rule: ruleDraft(policy),
  }));
}

function ruleDraft(policy: PolicyView): RuleDraft {
  const { keyauth, ratelimit, firewall, logging, cors } = policy;
  if (cors) return corsDraft(cors);
  if (keyauth) {
    const rule: RuleDraft = {
      kind: "keyauth",
      keyspaces: [...keyauth.keyspaces],
      locations: (keyauth.locations ?? []).map(locationDraft),
      permissionQuery: keyauth.permissionQuery ?? "",
      credits: keyauth.credits === undefined ? "" : String(keyauth.credits),
    };
    if (keyauth.ratelimits) rule.ratelimits = keyauth.ratelimits;
    return rule;
  }
  if (ratelimit) {
    return {
      kind: "ratelimit",
      limit: String(ratelimit.limit),
      windowMs: String(ratelimit.windowMs),
      identifiers: (ratelimit.identifiers ?? (ratelimit.identifier ? [ratelimit.identifier] : [])).map(identifierDraft),
      cost: ratelimit.cost === undefined ? "" : String(ratelimit.cost),
      namespace: ratelimit.namespace ?? "",
    };
  }
  if (firewall) return { kind: "firewall", ipAllow: (firewall.ipAllow ?? []).join("\n"), ipDeny: (firewall.ipDeny ?? []).join("\n") };
  if (logging) {
    return {
      kind: "logging",
      requestHeaders: logging.requestHeaders === true,
      responseHeaders: logging.responseHeaders === true,
      requestBody: logging.requestBody === true,
      responseBody: logging.responseBody === true,
      query: logging.query === true,
    };
  }
  return { kind: "openapi" };
}

function stringMatchDraft(match: StringMatchBody): Pick<MatchDraft, "test" | "text" | "ignoreCase"> {
  const test: StringMode = match.regex !== undefined ? "regex" : match.prefix !== undefined ? "prefix" : "exact";
  return { test, text: match[test] ?? "", ignoreCase: match.ignoreCase === true };
}

function matchDraft(expression: MatchBody): MatchDraft {
  const draft = newMatch();
  if (expression.path) return { ...draft, on: "path", ...stringMatchDraft(expression.path.path) };
  if (expression.method) return { ...draft, on: "method", methods: [...expression.method.methods] };
  const on = expression.header ? "header" : "queryParam";
  const field = expression.header ?? expression.queryParam;
  if (!field) return draft;
  const value = field.value ? stringMatchDraft(field.value) : { test: "present" as const };
  return { ...draft, on, name: field.name, ...value };
}

function locationDraft(location: LocationBody): LocationDraft {
  if (location.header) {
    return {
      from: "header",
      name: location.header.name,
      scheme: location.header.scheme ?? "",
      stripPrefix: location.header.stripPrefix ?? "",
    };
  }
  if (location.queryParam) return { from: "queryParam", name: location.queryParam.name, scheme: "", stripPrefix: "" };
  return { from: "bearer", name: "", scheme: "", stripPrefix: "" };
}

function identifierDraft(identifier: IdentifierBody): IdentifierDraft {
  if (identifier.header) return { source: "header", value: identifier.header.name };
  if (identifier.principalField) return { source: "principalField", value: identifier.principalField.path };
  return { source: IDENTIFIER_SOURCES.find((source) => identifier[source] !== undefined) ?? "remoteIp", value: "" };
}

/** The body of keygate.setRoutePolicies for the drafts, in their order; an emptied optional field is left out. */
export function policiesBody(drafts: readonly PolicyDraft[]): PolicyBody[] {
  return drafts.map((draft) => {
    const policy: PolicyBody = { name: draft.name, enabled: draft.enabled, ...ruleBody(draft.rule) };
    if (draft.match.length > 0) policy.match = draft.match.map(matchBody);
    return policy;
  });
}

function ruleBody(rule: RuleDraft): Pick<PolicyBody, PolicyKind> {
  switch (rule.kind) {
    case "keyauth": {
      const keyauth: KeyauthBody = { keyspaces: rule.keyspaces };
      if (rule.locations.length > 0) keyauth.locations = rule.locations.map(locationBody);
      if (rule.permissionQuery.trim() !== "") keyauth.permissionQuery = rule.permissionQuery.trim();
      if (rule.credits !== "") keyauth.credits = numberOr(rule.credits);
      if (rule.ratelimits) keyauth.ratelimits = rule.ratelimits;
      return { keyauth };
    }
    case "ratelimit": {
      const ratelimit: RatelimitBody = {
        limit: numberOr(rule.limit),
        windowMs: numberOr(rule.windowMs),
        identifiers: rule.identifiers.map(identifierBody),
      };
      if (rule.cost !== "") ratelimit.cost = numberOr(rule.cost);
      if (rule.namespace.trim() !== "") ratelimit.namespace = rule.namespace.trim();
      return { ratelimit };
    }
    case "firewall": {
      const allow = splitList(rule.ipAllow);
      const deny = splitList(rule.ipDeny);
      return {
        firewall: { action: "ACTION_DENY", ...(allow.length > 0 ? { ipAllow: allow } : {}), ...(deny.length > 0 ? { ipDeny: deny } : {}) },
      };
    }
    case "openapi":
      return { openapi: {} };
    case "logging": {
      const logging: LoggingBody = {};
      for (const part of LOGGED) if (rule[part]) logging[part] = true;
      return { logging };
    }
    case "cors":
      return { cors: corsBody(rule) };
  }
}

function stringMatchBody(draft: MatchDraft): StringMatchBody {
  const match: StringMatchBody =
    draft.test === "regex" ? { regex: draft.text } : draft.test === "prefix" ? { prefix: draft.text } : { exact: draft.text };
  if (draft.ignoreCase) match.ignoreCase = true;
  return match;
}

function matchBody(draft: MatchDraft): MatchBody {
  switch (draft.on) {
    case "path":
      return { path: { path: stringMatchBody(draft) } };
    case "method":
      return { method: { methods: draft.methods } };
    default: {
      const field =
        draft.test === "present" ? { name: draft.name, present: true as const } : { name: draft.name, value: stringMatchBody(draft) };
      return draft.on === "header" ? { header: field } : { queryParam: field };
    }
  }
}

function locationBody(draft: LocationDraft): LocationBody {
  if (draft.from === "queryParam") return { queryParam: { name: draft.name } };
  if (draft.from === "bearer") return { bearer: {} };
  const header: NonNullable<LocationBody["header"]> = { name: draft.name };
  if (draft.scheme !== "") header.scheme = draft.scheme;
  if (draft.stripPrefix !== "") header.stripPrefix = draft.stripPrefix;
  return { header };
}

function identifierBody(draft: IdentifierDraft): IdentifierBody {
  switch (draft.source) {
    case "header":
      return { header: { name: draft.value } };
    case "principalField":
      return { principalField: { path: draft.value } };
    default:
      return { [draft.source]: {} };
  }
}
