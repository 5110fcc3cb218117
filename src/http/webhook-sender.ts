import { Webhook } from "standardwebhooks";
import { Agent, type Dispatcher } from "undici";
import type { AttemptResult, WebhookAttempt, WebhookSender } from "../domain/webhooks/deliverer.js";
import { NO_PRIVATE_ADDRESSES } from "../lib/private-addresses.js";
import { type ConnectionPolicy, guardedConnector, literalRefusal } from "./guarded-connections.js";

export interface SenderSettings {
  timeoutMs: number;
  /** Bytes of an answer's body read, at most (kept for the delivery's last error); the rest is not read. */
  maxResponseBytes: number;
  allowPrivateAddresses: boolean;
}

const USER_AGENT = "keygate-webhooks";

/**
 * Connections to one origin at most: each endpoint's attempts go one at a time, so this bounds only how many endpoints
 * of one host are delivered to at once.
 */
const CONNECTIONS_PER_ORIGIN = 8;

/** Lets every address through: `webhooks.allowPrivateAddresses`. */
const EVERY_ADDRESS: ConnectionPolicy = { allowsHost: () => true, allowsAddress: () => true };

/** The signature header of Standard Webhooks: one `v1,<base64>` per secret, space-separated. */
export function signatures(attempt: Pick<WebhookAttempt, "id" | "timestamp" | "payload" | "secrets">): string {
  const at = new Date(attempt.timestamp * 1000);
  return attempt.secrets.map((secret) => new Webhook(secret).sign(attempt.id, at, attempt.payload)).join(" ");
}

/**
 * Posts signed messages through one undici Agent: a pool of keep-alive connections per endpoint origin, so that
 * attempts to an endpoint reuse a connection (and its TLS session) rather than open one each. Every new connection
 * obeys the address rule (guarded-connections.ts: an address in the URL, every address a name resolves to, and the
 * peer connected to), so a name that resolves elsewhere later is refused too. A timeout for the whole attempt, no
 * redirects followed (undici's request follows none), bodies capped.
 */
export class HttpWebhookSender implements WebhookSender {
  private readonly settings: SenderSettings;
  private readonly policy: ConnectionPolicy;
  private readonly agent: Dispatcher;

  constructor(settings: SenderSettings) {
    this.settings = settings;
    this.policy = settings.allowPrivateAddresses ? EVERY_ADDRESS : NO_PRIVATE_ADDRESSES;
    this.agent = new Agent({ connections: CONNECTIONS_PER_ORIGIN, connect: guardedConnector(() => this.policy) });
  }

  async send(attempt: WebhookAttempt): Promise<AttemptResult> {
    let url: URL;
    try {
      url = new URL(attempt.url);
    } catch {
      return { ok: false, error: "the endpoint's URL does not parse" };
    }
    // Refused here too, rather than only by the connector: the answer then says nothing was attempted.
    const refused = literalRefusal(url.hostname, this.policy);
    if (refused) return { ok: false, error: refused.message };
    const headers = {
      "content-type": "application/json",
      "user-agent": USER_AGENT,
      "webhook-id": attempt.id,
      "webhook-timestamp": String(attempt.timestamp),
      "webhook-signature": signatures(attempt),
    };
    const { timeoutMs } = this.settings;
    const abort = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      abort.abort();
    }, timeoutMs);
    try {
      const answer = await this.agent.request({
        origin: url.origin,
        path: `${url.pathname}${url.search}`,
        method: "POST",
        headers,
        body: attempt.payload,
        signal: abort.signal,
      });
      return await this.answer(answer.statusCode, answer.body);
    } catch (error) {
      return { ok: false, error: timedOut ? `timed out after ${timeoutMs} ms` : describe(error) };
    } finally {
      clearTimeout(timer);
    }
  }

  /** Closes the pooled connections once the attempts in flight are done. */
  async close(): Promise<void> {
    await this.agent.close();
  }

  /** 2xx is success; anything else (a redirect too) a failure, with the start of the body as its error. */
  private async answer(status: number, body: Dispatcher.ResponseData["body"]): Promise<AttemptResult> {
    const chunks: Buffer[] = [];
    let size = 0;
    // A body read to its end leaves the connection for the next attempt; one cut short closes it.
    for await (const chunk of body as AsyncIterable<Buffer>) {
      chunks.push(chunk);
      size += chunk.length;
      if (size >= this.settings.maxResponseBytes) break;
    }
    if (status >= 200 && status < 300) return { ok: true, status };
    const text = Buffer.concat(chunks).subarray(0, this.settings.maxResponseBytes).toString("utf8");
    return { ok: false, status, error: `answered ${status}${text === "" ? "" : `: ${text}`}` };
  }
}

/** An attempt's failure in a line: the refusal or the socket's error (`connect ECONNREFUSED 127.0.0.1:1`). */
function describe(error: unknown): string {
  const cause = (error as { cause?: unknown }).cause;
  return cause instanceof Error && !(error as Error).message.includes(cause.message)
    ? `${(error as Error).message}: ${cause.message}`
    : (error as Error).message;
}
