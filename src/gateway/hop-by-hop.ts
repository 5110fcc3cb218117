import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";
import { isPseudoHeader } from "../http/http2.js";

/**
 * Header fields that describe one connection, not the message (RFC 9110 §7.6.1, RFC 9112): a proxy consumes them
 * and never passes them on, in either direction. `Proxy-Connection` and `HTTP2-Settings` are connection-specific
 * too, though not registered as hop-by-hop. Any header a message's `Connection` names is hop-by-hop as well.
 * Lower case.
 */
const HOP_BY_HOP: ReadonlySet<string> = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "http2-settings",
]);

/**
 * Request headers keygate meets itself: Node answers `Expect: 100-continue` before the request reaches the gateway,
 * so there is nothing left for the upstream to meet (and undici, the client to upstreams, refuses to send it).
 */
const ANSWERED_HERE: ReadonlySet<string> = new Set(["expect"]);

type HeaderValue = string | string[] | number | undefined;

export type Direction = "request" | "response";

const NONE: ReadonlySet<string> = new Set();

/** The header names a message's `Connection` lists, lower case: several lines, each comma-separated. */
function connectionOptions(value: HeaderValue): ReadonlySet<string> {
  if (value === undefined) return NONE;
  const options = new Set<string>();
  for (const line of Array.isArray(value) ? value : [String(value)]) {
    for (const token of line.split(",")) {
      const name = token.trim().toLowerCase();
      if (name !== "") options.add(name);
    }
  }
  return options;
}

/**
 * What a request's `TE` may pass on as: `trailers` alone (RFC 9110 §10.1.4: the client accepts trailer fields);
 * transfer codings are for this connection only. undefined when nothing of it passes.
 */
function passingTe(value: HeaderValue): string | undefined {
  if (value === undefined) return undefined;
  const codings = (Array.isArray(value) ? value.join(",") : String(value))
    .split(",")
    .map((coding) => coding.split(";")[0]?.trim().toLowerCase());
  return codings.includes("trailers") ? "trailers" : undefined;
}

/** Decides, for one message, which headers are hop-by-hop. `name` must be lower case. */
function hopByHopRule(direction: Direction, connection: HeaderValue): (name: string) => boolean {
  const named = connectionOptions(connection);
  return (name) => HOP_BY_HOP.has(name) || named.has(name) || (direction === "request" && ANSWERED_HERE.has(name));
}

/**
 * The end-to-end headers of a message, to pass on: a new object without `Connection`, every header it names and
 * the fixed hop-by-hop set. A request keeps `TE: trailers`. Names must be lower case (as Node and undici give them).
 */
export function endToEndHeaders<Headers extends IncomingHttpHeaders | OutgoingHttpHeaders>(
  headers: Headers,
  direction: Direction,
): Headers {
  const result: Record<string, unknown> = {};
  addEndToEndHeaders(result, headers, direction);
  return result as Headers;
}

/**
 * The same headers assigned into `into`, after those it has (a name it has already keeps its place and takes the
 * message's value): an answer's head is built this way rather than spread together (docs/architecture.md#conventions).
 */
export function addEndToEndHeaders(
  into: Record<string, unknown>,
  headers: IncomingHttpHeaders | OutgoingHttpHeaders,
  direction: Direction,
): void {
  const isHopByHop = hopByHopRule(direction, headers.connection);
  for (const name of Object.keys(headers)) {
    // An HTTP/2 request's pseudo-headers (":method", ":path", ":authority", ":scheme") describe its stream; the
    // upstream gets them as its HTTP/1.1 request line and Host.
    if (!isHopByHop(name) && !isPseudoHeader(name)) into[name] = headers[name];
  }
  if (direction === "request") {
    const te = passingTe(headers.te);
    if (te !== undefined) into.te = te;
  }
}

/**
 * The same rules for a response's header lines as Node gives them in `rawHeaders` (name, value, name, value...;
 * case and duplicates kept), for answers keygate writes on a socket itself. With `upgrade`, the response is an
 * accepted protocol switch (101): its `Upgrade` lines pass, with `Connection: Upgrade`.
 */
export function endToEndResponseLines(rawHeaders: readonly string[], options: { upgrade?: boolean } = {}): [string, string][] {
  const lines: [string, string][] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) lines.push([rawHeaders[i] as string, rawHeaders[i + 1] as string]);
  const isHopByHop = hopByHopRule(
    "response",
    lines.filter(([name]) => name.toLowerCase() === "connection").map(([, value]) => value),
  );
  const kept = lines.filter(([name]) => !isHopByHop(name.toLowerCase()));
  if (options.upgrade) {
    const upgrade = lines.filter(([name]) => name.toLowerCase() === "upgrade");
    if (upgrade.length > 0) kept.push(["Connection", "Upgrade"], ...upgrade);
  }
  return kept;
}

/**
 * Sets on `into` the two hop-by-hop fields a protocol switch passes on to the next hop, when `incoming` asks for
 * one: `Connection: Upgrade` and its `Upgrade`.
 */
export function addUpgradeHeaders(into: IncomingHttpHeaders, incoming: IncomingHttpHeaders): void {
  if (incoming.upgrade === undefined) return;
  into.connection = "Upgrade";
  into.upgrade = incoming.upgrade;
}
