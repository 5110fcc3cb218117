/**
 * Webhook delivery, in one process: keygate's services on Redis (the outbox in streams) and a receiver on loopback.
 * Measures the delay from a notice posted to its arrival (p50, p99) at a steady rate, and how many events per second
 * one instance delivers in a burst, to one endpoint (one at a time, in order) and spread over many.
 *
 *   npm run build:test && node build/bench/webhooks.js [--steady 400] [--rate 100] [--burst 4000] [--endpoints 20]
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { parseArgs } from "node:util";
import { buildApp } from "../src/app.js";
import { validateConfig } from "../src/config/load.js";
import { deleteByPrefix, REDIS_URL } from "./side-by-side/redis.js";

const { values } = parseArgs({
  options: {
    steady: { type: "string", default: "400" },
    rate: { type: "string", default: "100" },
    burst: { type: "string", default: "4000" },
    endpoints: { type: "string", default: "20" },
  },
});

const arrivals = new Map<string, number>();
const receiver = createServer((request, response) => {
  const chunks: Buffer[] = [];
  request.on("data", (chunk: Buffer) => chunks.push(chunk));
  request.on("end", () => {
    const event = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { data: { keyId: string } };
    arrivals.set(event.data.keyId, performance.now());
    response.writeHead(204).end();
  });
});
await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

const prefix = `bench-webhooks-${process.pid}`;
const app = await buildApp(
  validateConfig({
    storage: { redis: { url: REDIS_URL, prefix } },
    analytics: { engine: "off" },
    logging: { level: "warn" },
    webhooks: { allowPrivateAddresses: true },
  }),
);
const { webhooks, rootKeys } = app.services;
const caller = rootKeys.operator("ws_bench");

function post(keyId: string): void {
  webhooks.dispatcher.post({ type: "key.updated", subject: { workspaceId: "ws_bench", apiId: "api_bench", keyId } });
}

async function arrived(ids: readonly string[]): Promise<void> {
  while (!ids.every((id) => arrivals.has(id))) await new Promise((resolve) => setTimeout(resolve, 5));
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

const first = await webhooks.service.create(caller, { url, events: ["key.updated"] });

// Steady: one endpoint, `rate` events a second.
const steady = Number(values.steady);
const posted = new Map<string, number>();
const interval = 1_000 / Number(values.rate);
for (let i = 0; i < steady; i++) {
  const id = `steady_${i}`;
  posted.set(id, performance.now());
  post(id);
  await new Promise((resolve) => setTimeout(resolve, interval));
}
await arrived([...posted.keys()]);
const delays = [...posted].map(([id, at]) => (arrivals.get(id) as number) - at).sort((a, b) => a - b);
console.log(
  `steady, ${values.rate}/s to one endpoint: delay p50 ${percentile(delays, 50).toFixed(1)} ms, p99 ${percentile(delays, 99).toFixed(1)} ms`,
);

// Burst to one endpoint: its messages go one at a time, in order.
const burst = Number(values.burst);
let started = performance.now();
const one = Array.from({ length: burst }, (_, i) => `one_${i}`);
for (const id of one) post(id);
await arrived(one);
console.log(`burst of ${burst} to one endpoint: ${((burst / (performance.now() - started)) * 1_000).toFixed(0)} events/s`);

// Burst spread over many endpoints (each event goes to every endpoint: count deliveries).
const endpoints = Number(values.endpoints);
await webhooks.service.delete(caller, { webhookId: first.webhookId });
for (let i = 0; i < endpoints; i++) await webhooks.service.create(caller, { url: `${url}?e=${i}`, events: ["key.created"] });
let deliveries = 0;
receiver.on("request", () => (deliveries += 1));
const perEndpoint = Math.ceil(burst / endpoints);
started = performance.now();
for (let i = 0; i < perEndpoint; i++)
  webhooks.dispatcher.post({ type: "key.created", subject: { workspaceId: "ws_bench", apiId: "api_bench", keyId: `many_${i}` } });
while (deliveries < perEndpoint * endpoints) await new Promise((resolve) => setTimeout(resolve, 5));
console.log(
  `burst of ${perEndpoint * endpoints} deliveries over ${endpoints} endpoints: ${(((perEndpoint * endpoints) / (performance.now() - started)) * 1_000).toFixed(0)} deliveries/s`,
);

await app.close();
receiver.close();
await deleteByPrefix(prefix);
