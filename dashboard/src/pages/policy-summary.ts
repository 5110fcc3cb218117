import { kindOf, type PolicyView } from "./policy-drafts.js";

type Keyauth = NonNullable<PolicyView["keyauth"]>;
type Ratelimit = NonNullable<PolicyView["ratelimit"]>;
type Match = NonNullable<PolicyView["match"]>[number];
type StringMatch = NonNullable<Match["path"]>["path"];

/** One policy in words, for the routes table: its name, kind and settings, when it applies, whether it is off. */
export function describePolicy(policy: PolicyView): string {
  const kind = kindOf(policy) ?? "?";
  const details = [settings(policy), ...(policy.match ?? []).map(when)].filter(Boolean).join(", ");
  return `${policy.name} (${kind}${policy.enabled ? "" : ", disabled"})${details ? `: ${details}` : ""}`;
}

function settings(policy: PolicyView): string {
  if (policy.keyauth) return keyauth(policy.keyauth);
  if (policy.ratelimit) return ratelimit(policy.ratelimit);
  if (policy.firewall) {
    const { ipAllow, ipDeny } = policy.firewall;
    if (!ipAllow && !ipDeny) return "deny";
    return [ipAllow ? `deny all but ${ipAllow.join(" ")}` : "", ipDeny ? `deny ${ipDeny.join(" ")}` : ""].filter(Boolean).join(", ");
  }
  if (policy.logging) {
    const logged = Object.entries(policy.logging)
      .filter(([, on]) => on)
      .map(([part]) => part);
    return logged.length > 0 ? `records ${logged.join(" ")}` : "records nothing extra";
  }
  if (policy.openapi) return "validates against the route's OpenAPI document";
  if (policy.cors) {
    const { allowOrigins, allowCredentials } = policy.cors;
    const origins = allowOrigins === "*" ? "any origin" : allowOrigins.map((origin) => origin.exact ?? `~${origin.regex}`).join(" ");
    return `CORS for ${origins}${allowCredentials ? ", with credentials" : ""}`;
  }
  return "";
}

function keyauth(rule: Keyauth): string {
  const from = (rule.locations ?? [{ bearer: {} }]).map((location) => {
    if (location.header) return `${location.header.name}: ${location.header.scheme ? `${location.header.scheme} ` : ""}<key>`;
    if (location.queryParam) return `?${location.queryParam.name}=<key>`;
    return "Authorization: Bearer <key>";
  });
  return [
    `APIs ${rule.keyspaces.join(" ")}`,
    `key from ${from.join(" or ")}`,
    rule.permissionQuery ? `permissions ${rule.permissionQuery}` : "",
    (rule.ratelimits ?? []).length > 0 ? `limits ${(rule.ratelimits ?? []).map((limit) => limit.name).join(" ")}` : "",
    rule.credits !== undefined ? `${rule.credits} credits` : "",
  ]
    .filter(Boolean)
    .join(", ");
}

function ratelimit(rule: Ratelimit): string {
  const by = (rule.identifiers ?? (rule.identifier ? [rule.identifier] : [])).map((identifier) => {
    if (identifier.header) return `header ${identifier.header.name}`;
    if (identifier.principalField) return `principal ${identifier.principalField.path}`;
    if (identifier.authenticatedSubject) return "subject";
    if (identifier.path) return "path";
    return "client IP";
  });
  return `${rule.limit} per ${rule.windowMs} ms by ${by.join(" + ")}${rule.namespace ? ` in ${rule.namespace}` : ""}`;
}

function text(match: StringMatch): string {
  const how = match.regex !== undefined ? `~ ${match.regex}` : match.prefix !== undefined ? `starts ${match.prefix}` : `= ${match.exact}`;
  return match.ignoreCase ? `${how} (any case)` : how;
}

function when(match: Match): string {
  if (match.path) return `when path ${text(match.path.path)}`;
  if (match.method) return `when method ${match.method.methods.join("|")}`;
  const [what, field] = match.header ? ["header", match.header] : ["query", match.queryParam];
  if (!field) return "";
  return `when ${what} ${field.name} ${field.value ? text(field.value) : "present"}`;
}
