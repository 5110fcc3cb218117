import { createHash, randomBytes } from "node:crypto";
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders } from "node:http";
import { KeygateError } from "../errors/keygate-error.js";

/**
 * keygate's name in `Via` when `gateway.via.pseudonym` gives none: derived from what every instance of one
 * deployment shares (`shared`: its Redis, credentials left out, and key prefix), so that a request looping through
 * any of them is seen; without one (in-memory stores: one process is the whole deployment), random per process.
 */
export function derivedPseudonym(shared: string | undefined): string {
  const digest = shared === undefined ? randomBytes(6).toString("hex") : createHash("sha256").update(shared).digest("hex").slice(0, 12);
  return `keygate-${digest}`;
}

/** The Via entry keygate adds to a message it forwards (RFC 9110 §7.6.3): the protocol it came in, then its pseudonym. */
export function viaEntry(message: IncomingMessage | undefined, pseudonym: string): string {
  const version = message?.httpVersion ?? "1.1";
  return `${version === "2.0" ? "2" : version} ${pseudonym}`;
}

/** Appends `entry` to the Via of `headers` (a request's going upstream, or an answer's going back). */
export function addVia(headers: IncomingHttpHeaders | OutgoingHttpHeaders, entry: string): void {
  const prior = headers.via;
  const text = Array.isArray(prior) ? prior.join(", ") : prior === undefined ? "" : String(prior);
  headers.via = text === "" ? entry : `${text}, ${entry}`;
}

/**
 * 508 for a request that has come through keygate already (its Via names `pseudonym`: a route whose upstream leads
 * back to this deployment) or through more than `maxHops` proxies; undefined otherwise. Asked before any check or
 * charge, so a loop costs one hop and nothing else.
 */
export function loopRefusal(via: string | string[] | undefined, pseudonym: string, maxHops: number): KeygateError | undefined {
  if (via === undefined) return undefined;
  const text = Array.isArray(via) ? via.join(",") : via;
  const name = pseudonym.toLowerCase();
  // Most requests that carry Via (through a CDN, say) name neither keygate nor many hops: no parse for them.
  const lower = text.toLowerCase();
  if (!lower.includes(name) && commas(lower) < maxHops) return undefined;
  // Entries are comma-separated; a comment in parentheses (which may hold commas) is not part of any name.
  const entries = text
    .replace(/\([^)]*\)/g, "")
    .split(",")
    .map((entry) => entry.trim())
    .filter((entry) => entry !== "");
  if (entries.some((entry) => entry.split(/\s+/)[1]?.toLowerCase() === name)) {
    return new KeygateError(
      "err:keygate:gateway:loop_detected",
      "The request has come through this keygate already (its Via header names it): the route's upstream leads back to keygate.",
    );
  }
  if (entries.length <= maxHops) return undefined;
  return new KeygateError(
    "err:keygate:gateway:loop_detected",
    `The request has come through ${entries.length} proxies (its Via header), more than the ${maxHops} keygate takes.`,
  );
}

function commas(text: string): number {
  let count = 0;
  for (let at = text.indexOf(","); at !== -1; at = text.indexOf(",", at + 1)) count++;
  return count;
}
