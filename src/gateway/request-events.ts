import type { IncomingMessage, OutgoingHttpHeaders } from "node:http";
import type { EventSink, GatewayRequestEvent } from "../domain/analytics/events.js";
import type { KeySource } from "../domain/routes/policy-compiler.js";
import { isPseudoHeader, requestAuthority } from "../http/http2.js";
import type { Clock } from "../lib/clock.js";
import { clientAddress } from "./client-address.js";
import type { Decision } from "./decision.js";
import type { AnswerHeaders, GatewayRequest } from "./gateway-request.js";
import type { DecisionRoute } from "./route-table.js";

/** What stands in for a key, and for the values of the secret headers, in an event. */
export const REDACTED = "REDACTED";

/** Headers whose values never reach an event (besides the route's key header). */
const SECRET_HEADERS = new Set(["authorization", "proxy-authorization", "cookie", "set-cookie"]);

/** Notes what a decision established of the request: its API's workspace, the key and the verification's outcome. */
export function noteDecision(request: GatewayRequest, decision: Decision): void {
  if (decision.workspaceId !== undefined) request.workspaceId = decision.workspaceId;
  const verification = decision.verification;
  if (verification === undefined) return;
  request.outcome = verification.code;
  if (verification.key !== undefined) {
    request.keyId = verification.key.keyId;
    request.apiId = verification.key.apiId;
  }
}

/** Where the gateway looks up its routes' workspaces: at once when it already knows one, else from the store. */
export interface WorkspaceLookup {
  knownWorkspace(apiId: string): string | undefined;
  workspaceOf(apiId: string): Promise<string | null>;
}

/**
 * Turns every request a route took into one GatewayRequestEvent for the analytics sink, once its answer ended or
 * its client went away. The event is built then, in one go: nothing is kept or copied while the request is served
 * but the start of the bodies a route's logging policies ask for (body-capture.ts), and headers are read only for a
 * route whose logging policies ask for them (or, in the file, `analytics.headers`).
 */
export class GatewayRequestEvents {
  private readonly sink: EventSink<GatewayRequestEvent>;
  private readonly clock: Clock;
  private readonly workspaces: WorkspaceLookup;

  constructor(sink: EventSink<GatewayRequestEvent>, clock: Clock, workspaces: WorkspaceLookup) {
    this.sink = sink;
    this.clock = clock;
    this.workspaces = workspaces;
  }

  /** Unix ms now: a request's arrival. */
  now(): number {
    return this.clock.now();
  }

  /**
   * Records a request `route` took, once answered: its answer's status and head as written (no status: the client
   * went away before any answer, recorded as 499). Call once per request.
   */
  record(request: GatewayRequest, route: DecisionRoute): void {
    const event = this.event(request, route, performance.now());
    const apiId = route.workspaceApiId;
    const known = request.workspaceId ?? route.definition.workspaceId ?? (apiId && this.workspaces.knownWorkspace(apiId));
    if (known !== undefined || apiId === undefined) {
      event.workspaceId = known ?? "";
      this.sink.record(event);
      return;
    }
    // Only a request refused before its key was verified (no key), on a configuration route whose API this process
    // has not looked up yet: its event waits for that one lookup ("" when the API does not exist or the store cannot say).
    this.workspaces.workspaceOf(apiId).then(
      (workspaceId) => {
        event.workspaceId = workspaceId ?? "";
        this.sink.record(event);
      },
      () => this.sink.record(event),
    );
  }

  private event(request: GatewayRequest, route: DecisionRoute, now: number): GatewayRequestEvent {
    const { raw } = request;
    const keyHeaders = keyHeaderNames(route);
    const totalLatencyMs = now - request.startedAt;
    const upstreamLatencyMs =
      request.upstreamSentAt === undefined ? 0 : Math.max(0, (request.upstreamEndedAt ?? now) - request.upstreamSentAt);
    const capture = request.capture;
    return {
      requestId: request.id,
      time: request.time,
      workspaceId: request.workspaceId ?? "",
      apiId: request.apiId ?? route.workspaceApiId ?? "",
      route: route.name,
      method: request.method,
      // An HTTP/2 request names its host in :authority; the forward-auth door's, the original request's.
      host: request.host ?? (headerText(raw, "host", keyHeaders) || (requestAuthority(raw) ?? "")),
      path: request.path,
      queryString: redactedQuery(request.query, route.keySources),
      responseStatus: request.status ?? 499,
      userAgent: headerText(raw, "user-agent", keyHeaders),
      ipAddress: clientAddress(request.remoteAddress, raw.headers["x-forwarded-for"], request.snapshot.trust),
      totalLatencyMs,
      upstreamLatencyMs,
      gatewayLatencyMs: totalLatencyMs - upstreamLatencyMs,
      keyId: request.keyId ?? "",
      outcome: request.outcome ?? "",
      requestHeaders: capture?.requestHeaders ? headerLines(rawPairs(raw.rawHeaders), keyHeaders) : [],
      responseHeaders: capture?.responseHeaders && request.head !== undefined ? headerLines(answerPairs(request.head), keyHeaders) : [],
      requestBody: request.requestBody?.text() ?? "",
      responseBody: request.responseBody?.text() ?? "",
    };
  }
}

/** The names of the headers a route reads keys from (lower case). */
function keyHeaderNames(route: DecisionRoute): ReadonlySet<string> {
  const names = new Set<string>();
  for (const source of route.keySources) if (source.kind === "header") names.add(source.header);
  return names;
}

/** A request header's value ("" when absent); a header keys are read from is never read out. */
function headerText(request: IncomingMessage, name: string, keyHeaders: ReadonlySet<string>): string {
  const value = request.headers[name];
  if (value === undefined) return "";
  return keyHeaders.has(name) ? REDACTED : Array.isArray(value) ? value.join(", ") : value;
}

/**
 * The raw query string with the value of each key parameter of `sources` replaced by REDACTED, wherever it appears
 * and however its name is escaped (names are compared decoded, as the key was read); everything else stays as sent.
 */
export function redactedQuery(query: string, sources: readonly KeySource[]): string {
  const parameters = new Set<string>();
  for (const source of sources) if (source.kind === "query") parameters.add(source.parameter);
  if (parameters.size === 0 || query === "") return query;
  return query
    .split("&")
    .map((pair) => {
      const equals = pair.indexOf("=");
      if (equals === -1) return pair;
      const name = pair.slice(0, equals);
      const decoded = parameters.has(name) || !/[%+]/.test(name) ? name : ([...new URLSearchParams(`${name}=`).keys()][0] ?? name);
      return parameters.has(decoded) ? `${name}=${REDACTED}` : pair;
    })
    .join("&");
}

/**
 * A request's header lines as sent. An HTTP/2 request's pseudo-headers are left out: its method, path and host are
 * columns of their own, and :path holds the query string a key may be in (the query string column is redacted).
 */
function* rawPairs(rawHeaders: readonly string[]): Iterable<[string, string]> {
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    if (!isPseudoHeader(name)) yield [name, rawHeaders[i + 1] as string];
  }
}

function* answerPairs(headers: AnswerHeaders): Iterable<readonly [string, string]> {
  if (Array.isArray(headers)) return yield* headers as readonly (readonly [string, string])[];
  for (const [name, value] of Object.entries(headers as OutgoingHttpHeaders)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const each of value) yield [name, each];
    else yield [name, String(value)];
  }
}

/** `Name: value` lines, the values of secret headers and of the route's key headers redacted. */
function headerLines(pairs: Iterable<readonly [string, string]>, keyHeaders: ReadonlySet<string>): string[] {
  const lines: string[] = [];
  for (const [name, value] of pairs) {
    const lower = name.toLowerCase();
    lines.push(`${name}: ${SECRET_HEADERS.has(lower) || keyHeaders.has(lower) ? REDACTED : value}`);
  }
  return lines;
}
