import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * Standard Webhooks verification written from the specification, independent of the `standardwebhooks` package
 * keygate signs with: the secret is base64 after `whsec_`; the signed content is `id.timestamp.body`; HMAC-SHA256;
 * the header holds space-separated `v1,<base64>` signatures, any one of which may match.
 */
export function verifySignature(secret: string, headers: IncomingHttpHeaders, body: string): boolean {
  const id = headers["webhook-id"];
  const timestamp = headers["webhook-timestamp"];
  const header = headers["webhook-signature"];
  if (typeof id !== "string" || typeof timestamp !== "string" || typeof header !== "string") return false;
  const key = Buffer.from(secret.startsWith("whsec_") ? secret.slice(6) : secret, "base64");
  const expected = createHmac("sha256", key).update(`${id}.${timestamp}.${body}`).digest();
  return header.split(" ").some((candidate) => {
    const [version, signature] = candidate.split(",");
    if (version !== "v1" || signature === undefined) return false;
    const given = Buffer.from(signature, "base64");
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  /** The parsed body. */
  event: { type: string; timestamp: string; data: Record<string, any> };
}

/** A webhook receiver on loopback: keeps what it is sent, and answers `status` (changeable while it runs). */
export class Receiver {
  readonly received: Received[] = [];
  status = 204;
  answerBody = "";
  /** While true, requests are kept unanswered (in `held`): a deliverer is mid-delivery. */
  hold = false;
  readonly held: Received[] = [];
  private server: Server | undefined;

  async start(port = 0): Promise<string> {
    this.server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        const body = Buffer.concat(chunks).toString("utf8");
        if (this.hold) {
          this.held.push({ headers: request.headers, body, event: JSON.parse(body) });
          return;
        }
        if (this.status >= 200 && this.status < 300) this.received.push({ headers: request.headers, body, event: JSON.parse(body) });
        response.writeHead(this.status, this.status === 302 ? { location: "http://127.0.0.1:1/" } : {});
        response.end(this.answerBody);
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(port, "127.0.0.1", resolve));
    return this.url;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`;
  }

  get port(): number {
    return ((this.server as Server).address() as AddressInfo).port;
  }

  /** Events of `type` received. */
  of(type: string): Received[] {
    return this.received.filter((r) => r.event.type === type);
  }

  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
