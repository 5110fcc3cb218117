import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage } from "node:http";
import { type RequestOptions as HttpsRequestOptions, request as httpsRequest } from "node:https";
import type { LookupFunction } from "node:net";
import type { Duplex } from "node:stream";
import type { UpstreamTls } from "../domain/routes/upstream-compiler.js";
import { KeygateError } from "../errors/keygate-error.js";
import { malformedUrlError } from "../http/error-handler.js";
import type { RouteMatch } from "./decision.js";
import { addUpgradeHeaders, endToEndResponseLines } from "./hop-by-hop.js";
import { addVia, viaEntry } from "./loop-detection.js";

export interface UpgradeRelayOptions {
  /** The upstream URL (http: or https:) the upgrade is sent to. */
  target: string;
  /** The upstream's own TLS settings (CA, client certificate and key), when its pool has them. */
  tls?: UpstreamTls | undefined;
  /** The checks of the upstream's address, for a route made through the API (upstream-guard.ts). */
  guard?: { refusal(host: string): Error | undefined; lookup: LookupFunction } | undefined;
  /** The end-to-end headers for the upstream; the relay adds the upgrade's own `Connection` and `Upgrade`. */
  headers: IncomingHttpHeaders;
  timeoutMs: number;
  /** keygate's id of the request, sent back as `x-request-id` with the upstream's answer, as on every answer. */
  requestId: string;
  /** keygate's name in the Via of the answer passed on. */
  pseudonym: string;
  /** Called when the upstream cannot be reached or does not answer in time; must answer on the socket. */
  onUpstreamFailure: (kind: "unreachable" | "timeout", error: unknown) => void;
  /** Told the head of the upstream's answer as written to the client: a switch (101), or an answer passed on. */
  onAnswer: (status: number, lines: readonly [string, string][]) => void;
}

/**
 * Relays a WebSocket (or any HTTP/1.1 upgrade) to the upstream after the gateway's checks passed: the same
 * upgrade request goes upstream, its 101 answer comes back, and from then on bytes flow both ways untouched. An
 * upstream that refuses the upgrade has its answer passed on (end-to-end headers and body) and the connection closed.
 * Hop-by-hop headers stop here both ways, except the upgrade's own `Connection: Upgrade` and `Upgrade`.
 */
export function relayUpgrade(client: IncomingMessage, clientSocket: Duplex, head: Buffer, options: UpgradeRelayOptions): void {
  const url = new URL(options.target);
  const refused = options.guard?.refusal(url.hostname);
  if (refused) return void options.onUpstreamFailure("unreachable", refused);
  const send = url.protocol === "https:" ? httpsRequest : httpRequest;
  // Copied, then the upgrade's own fields set: assigned rather than spread (docs/architecture.md#conventions).
  const headers: IncomingHttpHeaders = {};
  for (const name in options.headers) headers[name] = options.headers[name];
  addUpgradeHeaders(headers, client.headers);
  const sending: HttpsRequestOptions = { method: client.method ?? "GET", headers, timeout: options.timeoutMs };
  if (options.guard) sending.lookup = options.guard.lookup;
  const tls = options.tls;
  if (tls?.ca !== undefined) sending.ca = tls.ca;
  if (tls?.cert !== undefined) sending.cert = tls.cert;
  if (tls?.key !== undefined) sending.key = tls.key;
  if (tls?.servername !== undefined) sending.servername = tls.servername;
  if (tls?.rejectUnauthorized !== undefined) sending.rejectUnauthorized = tls.rejectUnauthorized;
  const upstream = send(url, sending);
  // Once the upstream has answered (a switch, or an answer passed on), a later failure only cuts that answer short:
  // the upstream was reached, so it is no upstream failure (no refund, no second answer on the socket).
  // A failure is reported once: a timeout destroys the request, which then errors too.
  let answered = false;
  let reported = false;
  const failed = (kind: "unreachable" | "timeout", error: unknown) => {
    if (answered) return void clientSocket.destroy();
    if (reported || clientSocket.destroyed || clientSocket.writableEnded) return;
    reported = true;
    options.onUpstreamFailure(kind, error);
  };

  upstream.on("upgrade", (response: IncomingMessage, upstreamSocket: Duplex, upstreamHead: Buffer) => {
    answered = true;
    upstream.setTimeout(0);
    const status = response.statusCode ?? 101;
    const lines = [`HTTP/1.1 ${status} ${response.statusMessage ?? "Switching Protocols"}`];
    const fields = answerLines(response, options, { upgrade: true });
    for (const [name, value] of fields) lines.push(`${name}: ${value}`);
    clientSocket.write(`${lines.join("\r\n")}\r\n\r\n`);
    options.onAnswer(status, fields);
    if (upstreamHead.length > 0) clientSocket.write(upstreamHead);
    if (head.length > 0) upstreamSocket.write(head);
    const closeBoth = () => {
      clientSocket.destroy();
      upstreamSocket.destroy();
    };
    upstreamSocket.on("error", closeBoth);
    clientSocket.on("error", closeBoth);
    upstreamSocket.on("close", closeBoth);
    clientSocket.on("close", closeBoth);
    upstreamSocket.pipe(clientSocket);
    clientSocket.pipe(upstreamSocket);
  });

  upstream.on("response", (response: IncomingMessage) => {
    // The upstream answered without upgrading (e.g. 404 or 426): pass its answer on and close. The body arrives
    // decoded, so it goes out without the upstream's framing: its length, or the end of the connection, delimits it.
    answered = true;
    const status = response.statusCode ?? 502;
    const lines = [`HTTP/1.1 ${status} ${response.statusMessage ?? ""}`];
    const fields = answerLines(response, options);
    fields.push(["Connection", "close"]);
    for (const [name, value] of fields) lines.push(`${name}: ${value}`);
    clientSocket.write(`${lines.join("\r\n")}\r\n\r\n`);
    options.onAnswer(status, fields);
    response.pipe(clientSocket);
  });

  upstream.on("timeout", () => {
    upstream.destroy();
    failed("timeout", new Error(`no answer from ${url.origin} within ${options.timeoutMs} ms`));
  });
  upstream.on("error", (error) => failed("unreachable", error));
  clientSocket.on("error", () => upstream.destroy());
  upstream.end();
}

/**
 * The upstream's end-to-end header lines, with keygate's request id in place of any the upstream sent, and keygate's
 * entry added to its Via.
 */
function answerLines(
  response: IncomingMessage,
  { requestId, pseudonym }: Pick<UpgradeRelayOptions, "requestId" | "pseudonym">,
  options?: { upgrade: true },
): [string, string][] {
  const lines: [string, string][] = [];
  const via: { via?: string } = {};
  for (const line of endToEndResponseLines(response.rawHeaders, options)) {
    const name = line[0].toLowerCase();
    if (name === "via") addVia(via, line[1]);
    else if (name !== "x-request-id") lines.push(line);
  }
  addVia(via, viaEntry(response, pseudonym));
  lines.push(["x-request-id", requestId], ["via", via.via as string]);
  return lines;
}

/** Why an upgrade no route takes is refused: its URL does not decode, a route refused it, or no route takes it. */
export function upgradeRefusal(match: RouteMatch, path: string): KeygateError | undefined {
  switch (match.kind) {
    case "route":
      return undefined;
    case "refused":
      return match.error;
    case "undecodable":
      return malformedUrlError();
    case "none":
      return new KeygateError("err:user:bad_request:route_not_found", `No route takes upgrades at ${path}.`);
  }
}
