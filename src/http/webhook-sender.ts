import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import type { LookupFunction } from "node:net";
import { Webhook } from "standardwebhooks";
import type { AttemptResult, WebhookAttempt, WebhookSender } from "../domain/webhooks/deliverer.js";
import { isPrivateAddress } from "../lib/private-addresses.js";

export interface SenderSettings {
  timeoutMs: number;
  /** Bytes of an answer's body read, at most (kept for the delivery's last error); the rest is not read. */
  maxResponseBytes: number;
  allowPrivateAddresses: boolean;
}

const USER_AGENT = "keygate-webhooks";

/** The signature header of Standard Webhooks: one `v1,<base64>` per secret, space-separated. */
export function signatures(attempt: Pick<WebhookAttempt, "id" | "timestamp" | "payload" | "secrets">): string {
  const at = new Date(attempt.timestamp * 1000);
  return attempt.secrets.map((secret) => new Webhook(secret).sign(attempt.id, at, attempt.payload)).join(" ");
}

/**
 * A lookup that resolves the host and refuses it when any of its addresses is loopback, private or link-local:
 * the connection then goes to the address checked, so a name cannot resolve one way for the check and another
 * for the connection.
 */
export function guardedLookup(allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses: LookupAddress[]) => {
      if (error) return callback(error, "", 0);
      const refused = allowPrivate ? undefined : addresses.find((entry) => isPrivateAddress(entry.address));
      if (refused) {
        const denial = Object.assign(new Error(`refused: ${hostname} resolves to ${refused.address}, a private address`), {
          code: "EPRIVATE",
        });
        return callback(denial, "", 0);
      }
      if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      const first = addresses[0] as LookupAddress;
      callback(null, first.address, first.family);
    });
  };
}

/** Posts signed messages with node:http: a timeout for the whole attempt, no redirects followed, bodies capped. */
export class HttpWebhookSender implements WebhookSender {
  private readonly settings: SenderSettings;
  private readonly lookup: LookupFunction;

  constructor(settings: SenderSettings) {
    this.settings = settings;
    this.lookup = guardedLookup(settings.allowPrivateAddresses);
  }

  send(attempt: WebhookAttempt): Promise<AttemptResult> {
    let url: URL;
    try {
      url = new URL(attempt.url);
    } catch {
      return Promise.resolve({ ok: false, error: "the endpoint's URL does not parse" });
    }
    // An IP literal is never looked up: check it here.
    const host = url.hostname.replace(/^\[|\]$/g, "");
    if (!this.settings.allowPrivateAddresses && /^[\d.]+$|:/.test(host) && isPrivateAddress(host))
      return Promise.resolve({ ok: false, error: `refused: ${host} is a private address` });
    const headers = {
      "content-type": "application/json",
      "user-agent": USER_AGENT,
      "webhook-id": attempt.id,
      "webhook-timestamp": String(attempt.timestamp),
      "webhook-signature": signatures(attempt),
    };
    const request = url.protocol === "https:" ? httpsRequest : httpRequest;
    return new Promise((resolve) => {
      let settled = false;
      const settle = (result: AttemptResult) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(result);
      };
      const outgoing = request(url, { method: "POST", headers, lookup: this.lookup, agent: false }, (response) =>
        this.answer(response, settle),
      );
      const timer = setTimeout(() => {
        settle({ ok: false, error: `timed out after ${this.settings.timeoutMs} ms` });
        outgoing.destroy();
      }, this.settings.timeoutMs);
      outgoing.on("error", (error) => settle({ ok: false, error: error.message }));
      outgoing.end(attempt.payload);
    });
  }

  /** 2xx is success; anything else (a redirect too) a failure, with the start of the body as its error. */
  private answer(response: IncomingMessage, settle: (result: AttemptResult) => void): void {
    const status = response.statusCode ?? 0;
    const chunks: Buffer[] = [];
    let size = 0;
    const done = () => {
      const body = Buffer.concat(chunks).subarray(0, this.settings.maxResponseBytes).toString("utf8");
      if (status >= 200 && status < 300) settle({ ok: true, status });
      else settle({ ok: false, status, error: `answered ${status}${body === "" ? "" : `: ${body}`}` });
    };
    response.on("data", (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
      if (size >= this.settings.maxResponseBytes) {
        done();
        response.destroy();
      }
    });
    response.on("end", done);
    response.on("error", done);
  }
}
