/**
 * A target of an upstream pool killed under load, and brought back: how many client requests fail, how long until
 * keygate stops sending to it (ejected) and until it serves again. keygate (Redis stores) and two targets run in this
 * process; the targets are node:http servers killed by closing them and every connection they hold.
 *
 *   npm run build:test && node build/bench/pool-failover.js [--concurrency 20] [--cooldown-ms 2000] [--down-ms 3000] [--post-share 0]
 *
 * --post-share: the share of requests sent as POST (never retried once the target may have it). See bench/README.md.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { parseArgs } from "node:util";
import { callKeygate, startKeygate } from "./side-by-side/keygate.js";
import { deleteByPrefix } from "./side-by-side/redis.js";

const API_ID = "api_bench_failover";
const { values } = parseArgs({
  options: {
    concurrency: { type: "string", default: "20" },
    "cooldown-ms": { type: "string", default: "2000" },
    "down-ms": { type: "string", default: "3000" },
    "post-share": { type: "string", default: "0" },
  },
});
const concurrency = Number(values.concurrency);
const cooldownMs = Number(values["cooldown-ms"]);
const downMs = Number(values["down-ms"]);
const postShare = Number(values["post-share"]);

/** A target that can be killed and started again on its port; it counts what it answered. */
async function target(name: string, port = 0) {
  let server: Server | undefined;
  const state = { port, answered: 0, kill: async () => {}, start: async () => {} };
  state.start = async () => {
    const listening = createServer((request, response) => {
      request.resume().on("end", () => {
        state.answered++;
        response.end(name);
      });
    });
    await new Promise<void>((resolve) => listening.listen(state.port, "127.0.0.1", resolve));
    state.port = (listening.address() as AddressInfo).port;
    server = listening;
  };
  state.kill = async () => {
    const closing = server;
    if (!closing) return;
    server = undefined;
    const closed = new Promise<void>((resolve) => closing.close(() => resolve()));
    closing.closeAllConnections();
    await closed;
  };
  await state.start();
  return state;
}

const [a, b] = [await target("a"), await target("b")];
const keygate = await startKeygate({ apiId: API_ID, gateway: { watchConfig: false } });
await callKeygate(keygate.url, "keygate.createRoute", {
  name: "failover",
  match: { prefix: "/failover" },
  upstream: {
    targets: [{ url: `http://127.0.0.1:${a.port}` }, { url: `http://127.0.0.1:${b.port}` }],
    health: { passive: { failures: 3, cooldownMs } },
  },
  policies: [{ name: "auth", enabled: true, keyauth: { keyspaces: [API_ID] } }],
});
const key = String((await callKeygate(keygate.url, "keys.createKey", { apiId: API_ID })).key);

const outcomes = { sent: 0, failed: 0, failedPosts: 0, posts: 0 };
let running = true;
const worker = async () => {
  while (running) {
    const post = Math.random() < postShare;
    outcomes.sent++;
    if (post) outcomes.posts++;
    try {
      const response = await fetch(`${keygate.url}/failover/x`, {
        method: post ? "POST" : "GET",
        headers: { authorization: `Bearer ${key}` },
        ...(post ? { body: "payload" } : {}),
      });
      await response.arrayBuffer();
      if (response.status !== 200) throw new Error(String(response.status));
    } catch {
      outcomes.failed++;
      if (post) outcomes.failedPosts++;
    }
  }
};
const health = async () =>
  ((await callKeygate(keygate.url, "keygate.getRoute", { route: "failover" })).upstreamHealth as { healthy: boolean }[])[1]?.healthy;
const until = async (wanted: boolean) => {
  while ((await health()) !== wanted) await new Promise((resolve) => setTimeout(resolve, 10));
  return performance.now();
};

const workers = Array.from({ length: concurrency }, worker);
await new Promise((resolve) => setTimeout(resolve, 2_000));
const before = { ...outcomes };
const killedAt = performance.now();
await b.kill();
const outAt = await until(false);
const sentUntilOut = outcomes.sent - before.sent;
await new Promise((resolve) => setTimeout(resolve, Math.max(0, downMs - (performance.now() - killedAt))));
const revivedAt = performance.now();
await b.start();
const servedBefore = b.answered;
const backAt = await until(true);
while (b.answered === servedBefore) await new Promise((resolve) => setTimeout(resolve, 10));
const servingAt = performance.now();
await new Promise((resolve) => setTimeout(resolve, 1_000));
running = false;
await Promise.all(workers);

const during = { sent: outcomes.sent - before.sent, failed: outcomes.failed - before.failed };
console.log(`concurrency ${concurrency}, cool-down ${cooldownMs} ms, down ${downMs} ms, POST share ${postShare}`);
console.log(
  `requests from the kill to the end: ${during.sent}; failed: ${during.failed} (${((100 * during.failed) / during.sent).toFixed(3)}%)`,
);
if (postShare > 0) console.log(`POSTs failed, all run: ${outcomes.failedPosts} of ${outcomes.posts}`);
console.log(`ejected ${(outAt - killedAt).toFixed(0)} ms after the kill (${sentUntilOut} requests sent meanwhile)`);
console.log(
  `after it listened again: healthy in ${(backAt - revivedAt).toFixed(0)} ms, serving in ${(servingAt - revivedAt).toFixed(0)} ms ` +
    `(kill to back: ${((backAt - killedAt) / cooldownMs).toFixed(2)} cool-downs)`,
);
await keygate.close();
await deleteByPrefix(keygate.prefix);
await Promise.all([a.kill(), b.kill()]);
