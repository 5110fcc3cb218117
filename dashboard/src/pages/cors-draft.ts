import type { BodyOf } from "../api.js";
import { numberOr, splitList } from "../ui.js";

// A cors policy as the Gateway page edits it (keygate's own kind: docs/gateway.md#cors): origins one per line, a
// line starting with `~` a regex; lists as text, turned into the body only when saved.

type CorsBody = NonNullable<BodyOf<"keygate.setRoutePolicies">["policies"][number]["cors"]>;
type CorsMethod = NonNullable<CorsBody["allowMethods"]>[number];

export interface CorsDraft {
  kind: "cors";
  /** Any origin (`allowOrigins: "*"`). */
  anyOrigin: boolean;
  /** One per line: an origin (`https://app.example.com`), or `~ <regex>` matching whole origins. */
  origins: string;
  /** None ticked: the route's methods. */
  methods: CorsMethod[];
  allowHeaders: string;
  exposeHeaders: string;
  allowCredentials: boolean;
  maxAgeSeconds: string;
}

export function newCors(): CorsDraft {
  return {
    kind: "cors",
    anyOrigin: false,
    origins: "",
    methods: [],
    allowHeaders: "",
    exposeHeaders: "",
    allowCredentials: false,
    maxAgeSeconds: "",
  };
}

export function corsDraft(cors: CorsBody): CorsDraft {
  const origins = cors.allowOrigins === "*" ? [] : cors.allowOrigins;
  return {
    kind: "cors",
    anyOrigin: cors.allowOrigins === "*",
    origins: origins.map((origin) => (origin.regex !== undefined ? `~ ${origin.regex}` : (origin.exact ?? ""))).join("\n"),
    methods: [...(cors.allowMethods ?? [])],
    allowHeaders: (cors.allowHeaders ?? []).join(", "),
    exposeHeaders: (cors.exposeHeaders ?? []).join(", "),
    allowCredentials: cors.allowCredentials === true,
    maxAgeSeconds: cors.maxAgeSeconds === undefined ? "" : String(cors.maxAgeSeconds),
  };
}

/** The body's cors rule; an emptied optional field is left out. */
export function corsBody(draft: CorsDraft): CorsBody {
  const origins = draft.origins
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "")
    .map((line) => (line.startsWith("~") ? { regex: line.slice(1).trim() } : { exact: line }));
  const cors: CorsBody = { allowOrigins: draft.anyOrigin ? "*" : origins };
  if (draft.methods.length > 0) cors.allowMethods = draft.methods;
  const allowHeaders = splitList(draft.allowHeaders);
  if (allowHeaders.length > 0) cors.allowHeaders = allowHeaders;
  const exposeHeaders = splitList(draft.exposeHeaders);
  if (exposeHeaders.length > 0) cors.exposeHeaders = exposeHeaders;
  if (draft.allowCredentials) cors.allowCredentials = true;
  if (draft.maxAgeSeconds !== "") cors.maxAgeSeconds = numberOr(draft.maxAgeSeconds);
  return cors;
}
