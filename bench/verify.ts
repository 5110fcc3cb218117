/**
 * keys.verifyKey for a cached key against a bare Fastify route answering a fixed body of the same shape, side by
 * side in one run: once for a key without limits, once with one Redis-backed named limit and credits.
 *
 *   npm run bench:verify -- [--duration 30] [--slice 2] [--connections 50] [--generator autocannon|wrk] [--analytics embedded|off]
 *
 * The bare route and keygate (on Redis stores) run in child processes of their own; the parent drives the load. See bench/README.md.
 */
import Fastify from "fastify";
import { WEBHOOK_EVENT_TYPES } from "../src/domain/webhooks/events.js";
import { callKeygate, ROOT_KEY, startKeygate } from "./side-by-side/keygate.js";
import { interleave, type Target } from "./side-by-side/load.js";
import { describeRun, runOptions } from "./side-by-side/options.js";
import { benchmark, forkServing, stopAll } from "./side-by-side/processes.js";
import { deleteByPrefix, REDIS_URL } from "./side-by-side/redis.js";
import { printRatio, printTargets } from "./side-by-side/report.js";

const API_ID = "api_bench_verify";

/** The bare route, in a process of its own. */
async function startBare() {
  const bare = Fastify({ logger: false });
  const fixed = {
    meta: { requestId: "req_bench" },
    data: { valid: true, code: "VALID", keyId: "key_bench", enabled: true, permissions: [], roles: [] },
  };
  bare.post("/v2/keys.verifyKey", async () => fixed);
  const url = await bare.listen({ host: "127.0.0.1", port: 0 });
  return { served: { url }, close: () => bare.close() };
}

/** keygate, in a process of its own; the driver creates its keys over HTTP (the warm-up caches them). */
async function startKeygateServing() {
  const keygate = await startKeygate({ apiId: API_ID });
  return { served: { url: keygate.url, prefix: keygate.prefix, engine: keygate.analytics }, close: () => keygate.close() };
}

async function drive(): Promise<void> {
  const options = await runOptions();
  const bareChild = await forkServing(import.meta.url, "bare");
  const keygateChild = await forkServing(import.meta.url, "keygate");
  const bare = bareChild.served.url as string;
  const { url: keygate, prefix, engine } = keygateChild.served as { url: string; prefix: string; engine: string };
  const plainKey = String((await callKeygate(keygate, "keys.createKey", { apiId: API_ID })).key);
  const limited = await callKeygate(keygate, "keys.createKey", {
    apiId: API_ID,
    credits: { remaining: 1_000_000_000_000 },
    ratelimits: [{ name: "requests", limit: 1_000_000, duration: 60_000, autoApply: false }],
  });
  const limitedKey = String(limited.key);
  // BENCH_WEBHOOK=1: an endpoint subscribed to every event is registered first, to show what that costs the hot path.
  if (process.env.BENCH_WEBHOOK === "1") {
    await callKeygate(keygate, "keygate.createWebhook", { url: "https://hooks.example.com/bench", events: WEBHOOK_EVENT_TYPES });
  }
  const headers = { "content-type": "application/json", authorization: `Bearer ${ROOT_KEY}` };
  const plainBody = JSON.stringify({ key: plainKey });
  const limitedBody = JSON.stringify({ key: limitedKey, ratelimits: [{ name: "requests" }], credits: { cost: 1 } });

  const bareRoute: Target = {
    label: "bare Fastify route",
    url: `${bare}/v2/keys.verifyKey`,
    servedBy: bareChild,
    method: "POST",
    headers,
    body: plainBody,
  };
  const verify: Target = {
    label: "keys.verifyKey, no limits",
    url: `${keygate}/v2/keys.verifyKey`,
    servedBy: keygateChild,
    method: "POST",
    headers,
    body: plainBody,
  };
  const verifyLimited: Target = {
    label: "keys.verifyKey, named limit + credits",
    url: verify.url,
    servedBy: keygateChild,
    method: "POST",
    headers,
    body: limitedBody,
  };

  console.log(describeRun("keys.verifyKey (cached key) vs a bare Fastify route", options, [`Redis ${REDIS_URL}`, `analytics ${engine}`]));
  const runs = await interleave([bareRoute, verify, verifyLimited], options);
  printTargets(runs);
  console.log();
  printRatio(runs, verify, bareRoute, 0.75);
  printRatio(runs, verifyLimited, bareRoute, 0.5);

  await stopAll(bareChild, keygateChild);
  await deleteByPrefix(prefix);
}

await benchmark(drive, { bare: startBare, keygate: startKeygateServing });
