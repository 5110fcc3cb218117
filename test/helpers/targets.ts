import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { LOOPBACK } from "./ports.js";

/**
 * One target of an upstream pool on a loopback port, which counts what it gets. Paths:
 *  /health        the status `healthStatus` says (200 at first)
 *  /hold          answers once `release()` is called
 *  anything else  200, the target's name as the body
 * A request body is read whole and recorded (`bodies`) before the answer, `mode` allowing: "reset" destroys the
 * connection once the request (and its body) has arrived, without an answer.
 */
export interface Target {
  readonly name: string;
  url: string;
  port: number;
  /** Requests by method, /health excepted. */
  readonly counts: Map<string, number>;
  /** Every request body received, as text, in order. */
  readonly bodies: string[];
  healthStatus: number;
  /** The status every other request gets, when set. */
  status: number | undefined;
  mode: "answer" | "reset";
  /** How many requests wait at /hold. */
  held(): number;
  release(): void;
  /** Stops listening and resets every connection (a process killed). */
  kill(): Promise<void>;
  /** Listens again on the same port. */
  revive(): Promise<void>;
  count(method: string): number;
}

interface Teardown {
  teardown(fn: () => unknown): void;
}

export async function startTarget(t: Teardown, name: string, port = 0): Promise<Target> {
  const holding: ServerResponse[] = [];
  let server: Server;
  const target: Target = {
    name,
    url: "",
    port,
    counts: new Map(),
    bodies: [],
    healthStatus: 200,
    status: undefined,
    mode: "answer",
    held: () => holding.length,
    release: () => {
      for (const response of holding.splice(0)) response.end(name);
    },
    count: (method) => target.counts.get(method) ?? 0,
    kill: async () => {
      if (!server.listening) return;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      holding.splice(0);
      await closed;
    },
    revive: () => listen(),
  };
  const handle = (request: IncomingMessage, response: ServerResponse) => {
    const url = request.url ?? "/";
    if (url.endsWith("/health")) return void request.resume().on("end", () => response.writeHead(target.healthStatus).end());
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      target.counts.set(request.method ?? "", target.count(request.method ?? "") + 1);
      if (chunks.length > 0) target.bodies.push(Buffer.concat(chunks).toString());
      if (target.mode === "reset") return void request.socket.destroy();
      if (target.status !== undefined) return void response.writeHead(target.status).end(name);
      if (url.endsWith("/hold")) return void holding.push(response);
      response.writeHead(200, { "content-type": "text/plain" }).end(name);
    });
  };
  const listen = async () => {
    server = createServer(handle);
    await new Promise<void>((resolve) => server.listen(target.port, LOOPBACK, resolve));
    target.port = (server.address() as AddressInfo).port;
    target.url = `http://${LOOPBACK}:${target.port}`;
  };
  await listen();
  t.teardown(() => target.kill());
  return target;
}
