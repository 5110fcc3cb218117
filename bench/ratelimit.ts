/**
 * ratelimit.limit on Redis against a bare Fastify route, measured side by side in one run.
 *
 *   npm run bench:ratelimit -- [--duration 30] [--slice 2] [--connections 50] [--generator autocannon|wrk] [--reservations on|off]
 *                              [--cluster redis://127.0.0.1:7000,…]
 *
 * The bare route and keygate (on Redis stores) run in child processes of their own; the parent drives the load.
 * With --cluster, a third child serves keygate on that Redis Cluster, measured in the same run.
 * See bench/README.md.
 */
import Fastify from "fastify";
import { ROOT_KEY, startKeygate } from "./side-by-side/keygate.js";
import { interleave, type Target } from "./side-by-side/load.js";
import { clusterOption, describeRun, reservationsOption, runOptions } from "./side-by-side/options.js";
import { benchmark, forkServing, stopAll } from "./side-by-side/processes.js";
import { deleteByPrefix, REDIS_URL } from "./side-by-side/redis.js";
import { printRatio, printTargets } from "./side-by-side/report.js";

/** The bare route, in a process of its own. */
async function startBare() {
  const bare = Fastify({ logger: false });
  const fixed = { meta: { requestId: "req_bench" }, data: { limit: 1_000_000, remaining: 999_999, reset: 0, success: true } };
  bare.post("/v2/ratelimit.limit", async () => fixed);
  const url = await bare.listen({ host: "127.0.0.1", port: 0 });
  return { served: { url }, close: () => bare.close() };
}

/** keygate on Redis stores, in a process of its own. ratelimit.limit records no verifications: analytics stays off. */
async function startKeygateServing() {
  const keygate = await startKeygate({ analytics: { engine: "off" } });
  return { served: { url: keygate.url, prefix: keygate.prefix }, close: () => keygate.close() };
}

/** keygate on the --cluster Redis Cluster, in a process of its own. */
async function startClusterKeygateServing() {
  const keygate = await startKeygate({ analytics: { engine: "off" }, clusterNodes: clusterOption() });
  return { served: { url: keygate.url }, close: () => keygate.close() };
}

async function drive(): Promise<void> {
  const options = await runOptions();
  const bareChild = await forkServing(import.meta.url, "bare");
  const keygateChild = await forkServing(import.meta.url, "keygate");
  const { url: keygate, prefix } = keygateChild.served as { url: string; prefix: string };
  const headers = { "content-type": "application/json", authorization: `Bearer ${ROOT_KEY}` };
  // Admitted path: a limit never reached, a new identifier per request (every call is decided on Redis).
  const admitted = { numbered: JSON.stringify({ namespace: "bench", identifier: "caller-{n}", limit: 1_000_000, duration: 60_000 }) };
  // Denied path: one identifier far over its limit (after the first call, decided by the local fast path).
  const denied = JSON.stringify({ namespace: "bench", identifier: "one-caller", limit: 1, duration: 60_000 });

  const bareRoute: Target = {
    label: "bare Fastify route",
    url: `${bareChild.served.url as string}/v2/ratelimit.limit`,
    servedBy: bareChild,
    method: "POST",
    headers,
    body: admitted,
  };
  const limit: Target = {
    label: "keygate ratelimit.limit (Redis)",
    url: `${keygate}/v2/ratelimit.limit`,
    servedBy: keygateChild,
    method: "POST",
    headers,
    body: admitted,
  };
  const deniedLocally: Target = {
    label: "keygate, denied (local fast path)",
    url: limit.url,
    servedBy: keygateChild,
    method: "POST",
    headers,
    body: denied,
  };

  const clusterNodes = clusterOption();
  const clusterChild = clusterNodes.length > 0 ? await forkServing(import.meta.url, "keygate-cluster") : undefined;
  const onCluster: Target | undefined = clusterChild && {
    ...limit,
    label: "keygate ratelimit.limit (Redis Cluster)",
    url: `${clusterChild.served.url as string}/v2/ratelimit.limit`,
    servedBy: clusterChild,
  };

  const where = [
    `Redis ${REDIS_URL}`,
    ...(clusterNodes.length > 0 ? [`Redis Cluster ${clusterNodes.join(",")}`] : []),
    `reservations ${reservationsOption() ? "on" : "off"}`,
  ];
  console.log(describeRun("ratelimit.limit vs a bare Fastify route", options, where));
  const runs = await interleave([bareRoute, limit, deniedLocally, ...(onCluster ? [onCluster] : [])], options);
  printTargets(runs);
  console.log();
  printRatio(runs, limit, bareRoute, 0.6);
  printRatio(runs, deniedLocally, bareRoute);
  if (onCluster) printRatio(runs, onCluster, limit);

  await stopAll(bareChild, keygateChild, ...(clusterChild ? [clusterChild] : []));
  await deleteByPrefix(prefix);
}

await benchmark(drive, { bare: startBare, keygate: startKeygateServing, "keygate-cluster": startClusterKeygateServing });
